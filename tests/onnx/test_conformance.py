"""onnx's node test cases through jitlab: no wrong answers, no errors, and at least 90% of
the tensor subset passing. The full run is at O0; other levels run one case per op type
(a representative subset) until their own compilers make them worth running in full."""

import functools

import pytest

from jitlab.onnx.conformance import STATUSES, main, node_cases, run_conformance

# the full O0 run (seconds) is made once, in one worker, for the tests that read it
pytestmark = pytest.mark.xdist_group("onnx-conformance")

EXCLUSIONS = {"control flow", "random", "training", "sequence/optional", "sequence/optional/map type", "string",
              "element type outside jitlab's dtypes"}


# the op types a convnet, a transformer and their training graphs are made of: one case each at O1
# in the default run (each case compiles its kernels cold on CI); every op type under -m slow
COMMON = {"Add", "Conv", "Gather", "Gemm", "MatMul", "MaxPool", "ReduceMean", "Relu", "Softmax", "Where"}


@functools.cache
def table(level: str, subset: bool, ops: frozenset | None = None):
    names = None
    if subset:
        first = {}
        for case in node_cases():
            if case.excluded is None and (ops is None or case.op_type in ops):
                first.setdefault(case.op_type, case.name)
        names = set(first.values())
    return run_conformance(level, names=names)


@pytest.mark.slow          # 47 s: test_one_case_per_op_type_at_O0 is its fast twin
def test_full_run_at_O0_has_no_wrong_answers_or_errors_and_passes_90_percent():
    t = table("O0", False)
    counts = t.counts()
    assert not t.failures("wrong"), t.format()
    assert not t.failures("error"), t.format()
    assert t.pass_rate >= 0.90, t.format()
    assert len(t.subset) > 1500 and set(t.excluded()) <= EXCLUSIONS
    assert sum(counts[s] for s in STATUSES) == len(t.subset)


@pytest.mark.slow          # 300 s with a cold kernel cache; test_common_op_types_at_o1 is its fast twin
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_one_case_per_op_type_at_higher_levels(level):
    t = table(level, True)
    assert not t.failures("wrong") and not t.failures("error"), t.format()
    assert t.counts()["pass"] == table("O0", True).counts()["pass"]


def test_one_case_per_op_type_at_O0():
    t = table("O0", True)
    assert not t.failures("wrong") and not t.failures("error"), t.format()
    assert len(t.subset) > 150 and t.pass_rate >= 0.85, t.format()


def test_common_op_types_at_o1():
    t = table("O1", True, frozenset(COMMON))
    assert not t.failures("wrong") and not t.failures("error"), t.format()
    assert len(t.subset) == len(COMMON)
    assert t.counts()["pass"] == table("O0", True, frozenset(COMMON)).counts()["pass"] > 0.8 * len(COMMON)


def test_unsupported_cases_name_the_op_and_node():
    unsupported = table("O0", True).failures("unsupported")
    assert unsupported
    for r in unsupported:
        assert "node" in r.detail, r


def test_the_table_prints_counts_per_op_type():
    text = table("O0", True).format()
    assert text.splitlines()[1].split()[:2] == ["pass", str(table("O0", True).counts()["pass"])]
    assert any(line.startswith("Conv ") for line in text.splitlines())


def test_the_command_line_prints_the_table(capsys):
    assert main(["--ops", "Relu,Add"]) == 0
    out = capsys.readouterr().out
    assert "pass 10" in out and "Relu" in out and "Add" in out
