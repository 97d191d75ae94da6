"""The page reads only fields the written schema defines (jitlab/explore/explorer-data.schema.json):
each sample's saved page (tests/explore/samples.py) opens in Chromium with its data behind a Proxy
that records every field read, every view is opened and used, and each read is looked up in the
schema. A field the JS reads that the schema leaves out (a typo, a field Python no longer sends)
fails here; the Python side is checked by tests/explore/test_schema.py."""

import json
import re

import pytest

from jitlab.explore import html
from tests.explore.samples import samples
from tests.explore.test_schema import SCHEMA

# under -m slow (tests/browser/conftest.py says what the default run keeps)
pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Records (path, field) for every read of the data, but of fields the page itself wrote, array
# indices and methods, and what every object has (toString, constructor): arrays' indices and
# numeric map keys (op uids, group ids) become "#" so the list stays short.
TRACK = """
window.__jlReads = new Set();
window.__jlTrack = (state) => {
  const proxies = new WeakMap(), written = new WeakMap();
  const seg = (t, k) => (Array.isArray(t) || /^\\d+$/.test(k) ? "#" : k);
  const skip = (t, k) => typeof k === "symbol" || (written.get(t) || new Set()).has(k) || k in Object.prototype
    || (Array.isArray(t) && (k in Array.prototype || /^\\d+$/.test(k)));
  const wrap = (v, path) => {
    if (v === null || typeof v !== "object") return v;
    if (!proxies.has(v)) proxies.set(v, new Proxy(v, {
      get(t, k, r) {
        if (!skip(t, k)) window.__jlReads.add(JSON.stringify([path, k]));
        return typeof k === "symbol" ? Reflect.get(t, k, r) : wrap(Reflect.get(t, k, r), [...path, seg(t, k)]);
      },
      has(t, k) {
        if (!skip(t, k)) window.__jlReads.add(JSON.stringify([path, k]));
        return Reflect.has(t, k);
      },
      set(t, k, x, r) {
        if (!written.has(t)) written.set(t, new Set());
        written.get(t).add(k);
        return Reflect.set(t, k, x, r);
      },
    }));
    return proxies.get(v);
  };
  return { ...state, data: wrap(state.data, []) };
};
"""


def resolve(node, path):
    """The schema node the data at `path` ("#" for an index or a numeric key) has; None where unknown."""
    for seg in path:
        node = _object(node)
        if node is None:
            return None
        if node.get("type") == "array" or "items" in node:
            node = node.get("items", {})
        elif seg in node.get("properties", {}):
            node = node["properties"][seg]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return _object(node)


def _object(node):
    while "$ref" in node:
        node = SCHEMA["properties"][node["$ref"].rsplit("/", 1)[1]]
    for part in node.get("anyOf", []):
        if "properties" in part or "additionalProperties" in part or "items" in part:
            return part
    return node


def undefined(reads) -> list[str]:
    """The reads of fields the schema does not define."""
    out = []
    for path, key in reads:
        node = resolve(SCHEMA, path)
        if node is None:
            out.append(f"{'.'.join(path)} (a path the schema does not define) .{key}")
        elif key not in node.get("properties", {}) and not isinstance(node.get("additionalProperties"), dict):
            out.append(f"{'.'.join(path) or 'data'}.{key}")
    return sorted(set(out))


def use_every_view(page, root):
    """Opens each tab and does what a reader does there: select, expand, scrub, slide, search."""
    for tab in root.locator(".jl-tabs [data-tab]").all():
        tab.click()
        name = tab.get_attribute("data-tab")
        pane = root.locator(f".jl-pane-{name}")
        pane.wait_for(state="visible")
        if name == "graph":
            search = pane.locator("input[type=search], input.jl-search").first
            if search.count():
                search.fill("tanh")
                search.press("Enter")
            for node in pane.locator("g.node").all()[:6]:
                node.dispatch_event("click")
            select = pane.locator("select").first
            if select.count():
                for option in select.locator("option").all_inner_texts():
                    select.select_option(label=option)
        if name == "passes":
            for row in pane.locator("tr.jl-pass").all()[-3:]:
                row.click()
        if name in ("schedule", "memory"):
            for slider in pane.locator("input[type=range]").all():
                slider.fill(slider.get_attribute("max") or "1")
        if name == "compare":
            for row in pane.locator("tr.jl-scoperow").all()[:3]:
                row.click()
        for link in pane.locator("a.jl-oplink").all()[:2]:
            link.dispatch_event("click")


@pytest.fixture(scope="module")
def data():
    return samples()


@pytest.mark.parametrize("name", ["small", "training", "onnx", "compare", "compare_untimed"])
def test_the_page_reads_only_fields_the_schema_defines(page, tmp_path, data, name, artifacts):
    data = data[name]
    text = html.page({"data": data, "view": "all", "selection": {}}, name)
    hooked = text.replace("staticModel(JSON.parse(json))", "staticModel(__jlTrack(JSON.parse(json)))")
    assert hooked != text, "the page no longer builds its model as this test expects"
    path = tmp_path / f"{name}.html"
    path.write_text(hooked, encoding="utf-8")
    page.add_init_script(TRACK)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(path.as_uri())
    root = page.locator(".jl-explorer")
    root.wait_for()
    use_every_view(page, root)
    root.screenshot(path=str(artifacts / f"schema_{name}.png"))
    reads = [json.loads(r) for r in page.evaluate("() => [...window.__jlReads]")]
    assert len(reads) > 50 and page.errors == []
    assert undefined(reads) == [], undefined(reads)
    assert any(re.fullmatch(r"memory|ops|graph", k) for p, k in reads if not p)


def test_reads_the_schema_leaves_out_are_named():
    reads = [[["memory"], "planned"], [["ops", "#"], "name"], [["ops", "#"], "nmae"], [["compare", "views", "#", "memory"], "peak_bytes"],
             [["dry_run", "plans", "#"], "peak"]]
    assert undefined(reads) == ["dry_run.plans.#.peak", "memory.planned", "ops.#.nmae"]
