"""The explorer in a real browser: in JupyterLab on the quickstart, and as a saved page."""

import re

import pytest
from playwright.sync_api import expect

from tests.explore.fixtures import compiled

pytestmark = pytest.mark.browser
VIEWS = ("graph", "passes", "fusion", "schedule", "memory", "kernels")


def open_tab(page, root, name):
    root.locator(f"[data-tab={name}]").click()
    root.locator(f".jl-pane-{name}").wait_for(state="visible")


def graph_drawn(root):
    """Waits for the Graph view's first node: its svg is attached before the nodes are drawn."""
    root.locator(".jl-pane-graph svg g.node").first.wait_for()


def check_graph(page, root):
    """One cluster per group once expanded; clicking an op selects it everywhere."""
    graph_drawn(root)
    groups = root.locator(".jl-pane-graph g.node.groupnode").count()
    if groups:      # one group expands in place: under the pointer, at the same zoom
        svg = root.locator(".jl-pane-graph svg")
        before = [float(v) for v in svg.get_attribute("viewBox").split()]
        node = root.locator(".jl-pane-graph g.node.groupnode").first
        gid, box = node.get_attribute("id"), node.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.click(x, y)
        cluster = root.locator(f".jl-pane-graph g.cluster[id='{gid}']").bounding_box()
        assert cluster["x"] <= x <= cluster["x"] + cluster["width"] and cluster["y"] <= y <= cluster["y"] + cluster["height"]
        assert [float(v) for v in svg.get_attribute("viewBox").split()][2:] == before[2:]
        expect(root.locator(".jl-pane-graph g.cluster.group")).to_have_count(1)
        root.locator(".jl-pane-graph button", has_text="Expand all").click()
    expect(root.locator(".jl-pane-graph g.cluster.group")).to_have_count(groups)
    op = root.locator(".jl-pane-graph g.node.op").first
    op.dispatch_event("click")
    expect(root.locator(".jl-selection")).to_contain_text("selected:")
    expect(root.locator(".jl-pane-graph g.node.op.selected")).to_have_count(1)


def check_passes(page, root):
    """Clicking another pass shows that pass's diff."""
    open_tab(page, root, "passes")
    target = root.locator("tr.jl-pass").last
    index = target.get_attribute("data-index")
    target.click()
    detail = root.locator(f".jl-passdetail[data-index='{index}']")
    expect(detail.locator(".jl-passtitle")).to_have_text(re.compile(rf"^#{index} "))
    return detail


def check_schedule(page, root):
    """Dragging the scrubber moves the highlighted op, the live buffers and the memory cursor."""
    open_tab(page, root, "schedule")
    pane = root.locator(".jl-pane-schedule")
    if not pane.locator(".jl-scrubber").count():
        assert "No schedule recorded" in pane.inner_text()
        return
    before = pane.locator("g.current").get_attribute("id")
    cursor = pane.locator(".jl-timeline").get_attribute("data-cursor")
    box = pane.locator(".jl-scrubber").bounding_box()
    page.mouse.move(box["x"] + 4, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()
    expect(root.locator(".jl-schedule")).not_to_have_attribute("data-step", "0")
    expect(pane.locator("g.current")).not_to_have_attribute("id", before)
    expect(pane.locator(".jl-timeline")).not_to_have_attribute("data-cursor", cursor)
    expect(pane.locator("g.live").first).to_be_attached()


def screenshots(page, root, artifacts, prefix):
    for name in VIEWS:
        open_tab(page, root, name)
        root.screenshot(path=str(artifacts / f"{prefix}_{name}.png"))


def test_saved_page_works_offline(page, tmp_path, artifacts):
    exe, _ = compiled()
    from jitlab.explore import explore

    path = explore(exe).save(tmp_path / "report.html")
    page.goto(path.as_uri())
    root = page.locator(".jl-explorer")
    check_graph(page, root)
    check_passes(page, root)
    dce = root.locator("tr.jl-pass", has_text="dce")
    index = dce.get_attribute("data-index")
    dce.click()
    detail = root.locator(f".jl-passdetail[data-index='{index}']")
    expect(detail.locator(".jl-diff td.jl-del").first).to_contain_text("np.tanh")
    expect(detail.locator("svg g.node.removed")).to_have_count(1)     # the pass graph is drawn a frame later
    detail.locator(".jl-gd-removed a.jl-oplink").first.click()     # selecting an op marks its IR line
    expect(detail.locator(".jl-diff tr.jl-ir-selected")).to_contain_text("np.tanh")
    check_schedule(page, root)
    open_tab(page, root, "memory")
    expect(root.locator(".jl-pane-memory rect.jl-buffer")).to_have_count(len(exe.report.memory.buffers) - 1)
    open_tab(page, root, "kernels")
    expect(root.locator(".jl-code-block")).to_contain_text("def")
    screenshots(page, root, artifacts, "static")
    assert page.errors == []


def test_quickstart_in_jupyterlab(page, lab, artifacts):
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/01_quickstart.ipynb?token={token}")
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    page.wait_for_function("() => document.body.innerText.includes('| Idle')", timeout=180_000)   # kernel ready
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    root = page.locator(".jl-explorer").first
    root.wait_for(state="attached", timeout=300_000)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-InputPrompt')].every(p => !p.textContent.includes('*'))",
                           timeout=180_000)
    # every cell ran without an error: the default run's one run of the quickstart is this one
    expect(page.locator(".jp-OutputArea-output", has_text="Traceback (most recent call last)")).to_have_count(0)
    root.scroll_into_view_if_needed()
    check_graph(page, root)
    # Live, the repro action writes the selected op's group with inputs of its shapes next to the notebook.
    root.locator(".jl-pane-graph g.node.op.filled").first.dispatch_event("click")
    root.locator(".jl-repro-btn").click()
    root.locator(".jl-repro").get_by_role("button", name="write .npz with inputs").click()
    expect(root.locator(".jl-repro-status")).to_have_text(re.compile(r"^wrote "))
    written = root.locator(".jl-repro-status").inner_text().removeprefix("wrote ")
    assert written.endswith(".npz") and (lab[2] / written.rsplit("/", 1)[-1]).is_file()
    root.locator(".jl-repro-btn").click()
    check_passes(page, root)
    check_schedule(page, root)
    screenshots(page, root, artifacts, "jupyterlab")
    page.screenshot(path=str(artifacts / "jupyterlab_page.png"))
    assert page.errors == []


def test_compare_page_shows_times_given_inputs_and_says_how_to_get_them_otherwise(page, tmp_path, artifacts):
    import numpy as np

    import jitlab as jl
    from jitlab.explore import explore

    def f(x, w):
        return np.tanh(x @ w).sum(axis=1)

    x, w = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    program = jl.trace(f, x, w)
    o1, o0 = jl.compile(program, level="O1"), jl.compile(program, level="O0")
    for name, args in (("untimed", None), ("timed", (x, w))):
        page.goto(explore.compare(o1, o0, args=args, repeats=2).save(tmp_path / f"{name}.html").as_uri())
        table = page.locator(".jl-pane-compare table.jl-cmp")
        table.wait_for()
        cells = table.locator("tr", has_text="run seconds").locator("td").all_inner_texts()[1:]
        notes = page.locator(".jl-pane-compare .jl-timenote")
        if args is None:
            assert cells == ["not timed", "not timed"] and "args=(x, ...)" in notes.inner_text()
        else:
            assert all(re.search(r"\d", c) for c in cells)
            expect(notes).to_have_count(0)
            times = page.locator(".jl-pane-compare table.jl-cmpscope tr[data-path='']").locator("td").all_inner_texts()
            assert re.search(r"\d", times[4]) and re.search(r"\d", times[8])
        page.locator(".jl-pane-compare").screenshot(path=str(artifacts / f"compare_{name}.png"))
    assert page.errors == [] and page.console_errors == []
