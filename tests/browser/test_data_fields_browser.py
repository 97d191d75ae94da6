"""The page reads the data model's newer fields (docs/explorer-data.md) when they are there:
scopes, offline dry-run plans, the one peak with its overhead, recompiles."""

import pytest
from playwright.sync_api import expect

from jitlab.explore import explore, html
from tests.explore.fixtures import compiled

pytestmark = pytest.mark.browser


def page_with_fields(tmp_path):
    exe, _ = compiled()
    widget = explore(exe)
    data = widget.session.static_data()
    for op in data["ops"].values():
        op["scope"] = ["head"] if op["name"] in ("np.cumsum", "np.reshape") else ["body", "layer"]
    data["scopes"] = {"body": {"path": "body", "kind": "scope", "op_count": 7, "bytes": 4096, "peak_bytes": 512, "seconds": 2e-5}}
    mem = data["memory"]
    data["peak_bytes"] = mem["peak_bytes"]
    mem["overhead_bytes"] = 64
    double = {b["name"]: 2 * b["bytes"] for b in mem["buffers"]}
    data["dry_run"] = {"dims": [{"name": "B", "input": "x", "axis": 0, "base": 3, "symbol": "B"}], "error": None,
                       "plans": [{"scale": 1, "values": {"B": 3}, **{k: mem[k] for k in ("peak_bytes", "peak_step", "lower_bound_bytes", "naive_bytes", "live_bytes")}},
                                 {"scale": 2, "values": {"B": 6}, "peak_bytes": 2 * mem["peak_bytes"], "peak_step": mem["peak_step"],
                                  "lower_bound_bytes": 2 * mem["lower_bound_bytes"], "naive_bytes": 2 * mem["naive_bytes"],
                                  "live_bytes": [2 * v for v in mem["live_bytes"]], "buffer_bytes": double}]}
    data["recompiles"] = [{"index": 0, "signature": {"x": "f32[3,8]"}, "reason": "first call", "changed": [], "seconds": 0.4, "current": False},
                          {"index": 1, "signature": {"x": "f32[5,8]"}, "reason": "x: shape f32[3,8] -> f32[5,8]",
                           "changed": [], "seconds": 0.3, "current": True}]
    order = data["schedule"]["order"]
    data["profile"] = {"mode": "steps", "repeats": 5,
                       "steps": [{"index": k, "uid": uid, "name": data["ops"][str(uid)]["name"], "group": data["ops"][str(uid)]["group"],
                                  "kernel": None, "median": 1e-5 * (k + 1), "spread": 1e-6, "start": 1e-4 * k, "stream": 0}
                                 for k, uid in enumerate(order)],
                       "kernels": {"k0": {"median": 2e-5, "min": 1e-5, "max": 3e-5, "calls": 1, "launches": 2, "groups": [0, 1]}}}
    path = tmp_path / "fields.html"
    path.write_text(html.page({"data": data, "view": "all", "selection": {}}, "fields"), encoding="utf-8")
    return path, mem["peak_bytes"]


def test_newer_fields_show_when_present(page, tmp_path, artifacts):
    path, _ = page_with_fields(tmp_path)
    page.goto(path.as_uri())
    root = page.locator(".jl-explorer")
    pane = root.locator(".jl-pane-graph")
    scopes = pane.locator("g.cluster.scope, g.node.scopenode")
    scopes.nth(1).wait_for(state="attached")
    expect(pane.locator("svg[data-layout=browser]")).to_contain_text("body")
    root.screenshot(path=str(artifacts / "fields_graph.png"))
    pane.locator("g.cluster.scope[id='sc_body'] > text").hover()
    expect(root.locator(".jl-tip")).to_contain_text("writes 4.00 KiB")
    root.locator("[data-tab=memory]").click()
    memory = root.locator(".jl-pane-memory")
    expect(memory).to_contain_text("overhead")
    before = memory.locator(".jl-stats").inner_text()
    slider = memory.locator("input.jl-planslider")
    slider.fill("1")
    expect(memory.locator(".jl-dryrun")).to_contain_text("B = 6")
    expect(memory.locator(".jl-stats")).not_to_have_text(before)
    root.screenshot(path=str(artifacts / "fields_memory.png"))
    root.locator("[data-tab=schedule]").click()
    expect(root.locator(".jl-kerneltime rect.jl-kstep")).to_have_count(len(data_order(page)))
    root.locator("[data-tab=kernels]").click()
    expect(root.locator(".jl-pane-kernels table").last).to_contain_text("shared by groups 0, 1")
    expect(root.locator(".jl-recompiles")).to_contain_text("x: shape f32[3,8] -> f32[5,8]")
    assert page.errors == []


def data_order(page):
    return page.evaluate("async () => (await window.jitlabData()).data.schedule.order")
