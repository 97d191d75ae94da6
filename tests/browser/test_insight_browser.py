"""The explorer's answers no single other tool gives, in Chromium on ResNet-50 (O1) and a traced
transformer, both profiled: the roofline and the graph's "% of bound", stepping through a pass's
rewrites, asking the live-memory curve what is live, and the index of every compile."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore import explore
from jitlab.explore.html import read_state

# under -m slow (tests/browser/conftest.py says what the default run keeps)
pytestmark = [pytest.mark.browser, pytest.mark.slow]

VIEW_W, PAD_L, PAD_R = 760, 64, 12        # widgets/memory.js: the timeline's viewBox width and margins


@pytest.fixture(scope="module")
def pages(resnet_pages, tmp_path_factory):
    """{"resnet": page, "transformer": page, "index": the session index page}, each model profiled."""
    from tests.browser.transformer import example

    folder = tmp_path_factory.mktemp("insight")
    exe = resnet_pages[2]
    jl.profile(exe, np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32), repeats=2)
    fn, x = example(layers=6)
    f = jl.jit(fn, level="O1")
    f(x)
    jl.profile(f, x, repeats=2)
    return {"resnet": explore(exe).save(folder / "resnet50.html"),
            "transformer": explore(f).save(folder / "transformer.html"),
            "index": explore.session().save(folder / "session.html")}


def open_view(page, path, tab):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(path.as_uri())
    root = page.locator(".jl-explorer").first
    root.locator(f"[data-tab={tab}]").click()
    return root, read_state(path.read_text())["data"]


@pytest.mark.parametrize("model", ["resnet", "transformer"])
def test_the_roofline_places_every_computing_step_and_ranks_them_by_time_lost(page, pages, artifacts, model):
    root, data = open_view(page, pages[model], "kernels")
    chart = root.locator(".jl-pane-kernels svg.jl-rf-chart")
    chart.wait_for()
    rf = data["roofline"]
    placed = [s for s in rf["steps"] if s["flops"] and s["intensity"] and s["flops_per_second"]]
    assert chart.locator("circle.jl-rf-dot").count() == len(placed) > 0
    assert chart.locator("polyline[data-roof=memory]").count() == 1
    rows = root.locator(".jl-rf-table tbody tr")
    assert rows.count() == min(12, len(rf["steps"]))
    worst = max(rf["steps"], key=lambda s: s["seconds"] - s["bound_seconds"])
    assert rows.first.get_attribute("data-step") == str(worst["index"])
    assert rows.first.locator("td").nth(4).inner_text() == worst["limit"]
    root.locator(".jl-pane-kernels .jl-roofline").screenshot(path=str(artifacts / f"{model}_roofline.png"))
    rows.first.click()
    label = f"group {worst['group']}" if worst["group"] is not None else f"{worst['name']} #{worst['uid']}"
    expect_text(root.locator(".jl-selection"), f"selected: {label}")
    assert root.locator(".jl-rf-dot.jl-rf-selected, .jl-rf-table tr.jl-rf-selected").count() >= 1
    # The same question on the graph: colour by % of bound, one pick in the toolbar.
    root.locator("[data-tab=graph]").click()
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    pane.locator("select.jl-overlay").select_option("bound")
    pane.locator(".jl-bound-legend").wait_for()
    assert pane.locator("g.node.filled").count() >= 1
    pane.screenshot(path=str(artifacts / f"{model}_bound_overlay.png"))
    assert page.errors == [] and page.console_errors == []


def expect_text(locator, text):
    from playwright.sync_api import expect

    expect(locator).to_contain_text(text)


@pytest.mark.parametrize("model", ["resnet", "transformer"])
def test_each_rewrite_of_a_pass_is_a_step_with_its_rule_source_and_lines(page, pages, artifacts, model):
    root, data = open_view(page, pages[model], "passes")
    record = next(p for p in data["passes"] if len(p["rewrites"]) >= 2 and p["view"])
    root.locator(f".jl-passlist tr[data-index='{record['index']}']").click()
    stepper = root.locator(f".jl-stepper[data-pass='{record['index']}']")
    card = stepper.locator(".jl-step-card[data-step='0']")
    card.wait_for()
    first, second = record["rewrites"][:2]
    assert card.locator(".jl-step-rule").inner_text() == first["rule"]
    assert card.locator(".jl-step-source").inner_text() == first["source"] and first["source"].startswith("jitlab/")
    stepper.get_by_title("next rewrite").click()
    card = stepper.locator(".jl-step-card[data-step='1']")
    card.wait_for()
    expect_text(stepper.locator(".jl-step-count"), f"rewrite 2 of {len(record['rewrites'])}")
    assert card.locator(".jl-step-rule").inner_text() == second["rule"]
    lines = card.locator(".jl-step-line").all_inner_texts()
    assert lines == [f"- {t}" for t in second["before"]] + [f"+ {t}" for t in second["after"]]
    # the pass's graph marks this step's ops
    root.locator(".jl-pane-passes .jl-passgraph svg .jl-step-now").first.wait_for()
    root.locator(".jl-pane-passes .jl-stepgraph").screenshot(path=str(artifacts / f"{model}_rewrite_step.png"))
    assert page.errors == [] and page.console_errors == []


def live_at(data, step):
    return [b for b in data["memory"]["buffers"]
            if b["first"] <= step <= b["last"] and b["kind"] != "view" and not b["alias_of"]]


@pytest.mark.parametrize("model", ["resnet", "transformer"])
def test_hovering_the_memory_curve_lists_what_is_live_there(page, pages, artifacts, model):
    root, data = open_view(page, pages[model], "memory")
    curve = root.locator(".jl-pane-memory svg.jl-timeline")
    curve.wait_for()
    mem = data["memory"]
    n = max(len(mem["live_bytes"]), max(b["last"] + 1 for b in mem["buffers"]))
    step = mem["peak_step"]
    box = curve.bounding_box()
    scale = box["width"] / VIEW_W
    page.mouse.move(box["x"] + (PAD_L + step / (n - 1) * (VIEW_W - PAD_L - PAD_R)) * scale, box["y"] + box["height"] / 2)
    query = root.locator(f".jl-livequery[data-how=hover][data-step='{step}']")
    query.wait_for()
    live = live_at(data, step)
    expect_text(query.locator("h4"), f"in {len(live)} buffers")
    shown = {c: query.locator(f"details[data-category={c}] li[data-buffer]").count() for c in {b["category"] for b in live}}
    for category, count in shown.items():
        assert count == min(12, sum(b["category"] == category for b in live))
    # every listed buffer names the op (and scope) that made it
    first = query.locator("details[open] li[data-buffer]").first
    name = first.get_attribute("data-buffer")
    buffer = next(b for b in live if b["name"] == name)
    if buffer["path"]:
        assert buffer["path"].split("/")[0] in first.inner_text()
    query.scroll_into_view_if_needed()
    root.locator(".jl-pane-memory").screenshot(path=str(artifacts / f"{model}_memory_query.png"))
    page.mouse.click(box["x"] + (PAD_L + 0.0) * scale, box["y"] + box["height"] / 2)
    root.locator(".jl-livequery[data-how=pinned][data-step='0']").wait_for()
    assert page.errors == [] and page.console_errors == []


def test_the_session_index_lists_every_compile_and_links_its_page(page, pages, artifacts):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(pages["index"].as_uri())
    table = page.locator("table.jl-session-index")
    table.wait_for()
    rows = read_state(pages["index"].read_text())["data"]["session"]["compiles"]
    assert table.locator("tbody tr").count() == len(rows)
    names = table.locator("tbody tr td:nth-child(2) b").all_inner_texts()
    assert "@resnet50" in names and "example.<locals>.encoder" in names
    page.screenshot(path=str(artifacts / "session_index.png"))
    encoder = next(r for r in rows if r["name"] == "example.<locals>.encoder" and r["page"])
    table.locator(f"a.jl-pagelink[data-index='{encoder['index']}']").click()
    page.locator(".jl-explorer [data-tab=graph]").wait_for()
    assert page.url.endswith(encoder["page"])
    assert page.errors == [] and page.console_errors == []
