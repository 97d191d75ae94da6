"""The explorer's data against its written schema (jitlab/explore/explorer-data.schema.json),
the Python side: what a saved page holds for a small traced function, a training step, an ONNX
model, O0, a Program alone and a compare page validates. The browser side (the page reads no
field the schema leaves out) is tests/browser/test_schema_browser.py."""

import copy
import json
import pathlib

import pytest

from tests.explore.samples import samples

SCHEMA = json.loads((pathlib.Path(__file__).parents[2] / "jitlab/explore/explorer-data.schema.json").read_text())


@pytest.fixture(scope="module")
def data():
    return samples()


def errors(value) -> list[str]:
    from jsonschema import Draft202012Validator  # here, not at collection (tests/test_notebooks.py says why)

    validator = Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(value)]


def test_the_schema_is_a_valid_json_schema():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("name", ["small", "training", "onnx", "o0", "program", "compare", "compare_untimed"])
def test_the_data_of_each_kind_of_program_validates(data, name):
    assert errors(data[name]) == []


def test_the_samples_fill_the_fields_that_matter(data):
    assert data["training"]["recompiles"] and data["training"]["profile"]["steps"]
    assert data["training"]["dry_run"]["dims"][0]["name"] == "x.0"
    assert any(op["onnx"] for op in data["onnx"]["ops"].values()) and data["onnx"]["dry_run"]["dims"][0]["symbol"] == "N"
    assert len(data["compare"]["compare"]["columns"]) == 2


def test_a_field_the_schema_does_not_define_or_a_wrong_type_fails(data):
    extra = copy.deepcopy(data["small"])
    uid = next(iter(extra["ops"]))
    extra["memory"]["peak"] = 1
    extra["ops"][uid]["name"] = 3
    assert sorted(e.split(":")[0] for e in errors(extra)) == ["memory", f"ops/{uid}/name"]
