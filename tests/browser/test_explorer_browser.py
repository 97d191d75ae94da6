"""The explorer in a real browser: in JupyterLab on the quickstart, and as a saved page."""

import re

import pytest

from tests.explore.fixtures import compiled

pytestmark = pytest.mark.browser
VIEWS = ("graph", "passes", "fusion", "schedule", "memory", "kernels")


def open_tab(page, root, name):
    root.locator(f"[data-tab={name}]").click()
    root.locator(f".jl-pane-{name}").wait_for(state="visible")


def check_graph(page, root):
    """One cluster per group once expanded; clicking an op selects it everywhere."""
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
        assert root.locator(".jl-pane-graph g.cluster.group").count() == 1
        root.locator(".jl-pane-graph button", has_text="Expand all").click()
        page.wait_for_function("(n) => document.querySelectorAll('.jl-pane-graph g.cluster.group').length === n", arg=groups)
    assert root.locator(".jl-pane-graph g.cluster.group").count() == groups
    op = root.locator(".jl-pane-graph g.node.op").first
    op.dispatch_event("click")
    assert "selected:" in root.locator(".jl-selection").inner_text()
    assert root.locator(".jl-pane-graph g.node.op.selected").count() == 1


def check_passes(page, root):
    """Clicking another pass shows that pass's diff."""
    open_tab(page, root, "passes")
    rows = root.locator("tr.jl-pass")
    target = rows.nth(rows.count() - 1)
    index = target.get_attribute("data-index")
    target.click()
    detail = root.locator(f".jl-passdetail[data-index='{index}']")
    detail.wait_for()
    assert detail.locator(".jl-passtitle").inner_text().startswith(f"#{index} ")
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
    page.wait_for_function("() => document.querySelector('.jl-schedule').dataset.step !== '0'")
    assert pane.locator("g.current").get_attribute("id") != before
    assert pane.locator(".jl-timeline").get_attribute("data-cursor") != cursor
    assert pane.locator("g.live").count() >= 1


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
    root.locator(".jl-pane-graph svg").wait_for()
    check_graph(page, root)
    detail = check_passes(page, root)
    root.locator("tr.jl-pass", has_text="dce").click()
    assert "np.tanh" in root.locator(".jl-passdetail .jl-diff td.jl-del").first.inner_text()
    assert detail.locator("svg g.node.removed").count() == 1
    root.locator(".jl-passdetail .jl-gd-removed a.jl-oplink").first.click()     # selecting an op marks its IR line
    assert "np.tanh" in root.locator(".jl-passdetail .jl-diff tr.jl-ir-selected").inner_text()
    check_schedule(page, root)
    open_tab(page, root, "memory")
    assert root.locator(".jl-pane-memory rect.jl-buffer").count() == len(exe.report.memory.buffers) - 1
    open_tab(page, root, "kernels")
    assert "def" in root.locator(".jl-code-block").inner_text()
    screenshots(page, root, artifacts, "static")
    assert page.errors == []


def test_quickstart_in_jupyterlab(page, lab, artifacts):
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/01_quickstart.ipynb?token={token}")
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    page.wait_for_function("() => document.body.innerText.includes('| Idle')", timeout=90_000)   # kernel ready
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    root = page.locator(".jl-explorer").first
    root.wait_for(state="attached", timeout=180_000)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-InputPrompt')].every(p => !p.textContent.includes('*'))",
                           timeout=180_000)
    root.scroll_into_view_if_needed()
    root.locator(".jl-pane-graph svg").wait_for()
    check_graph(page, root)
    # Live, the repro action writes the selected op's group with inputs of its shapes next to the notebook.
    root.locator(".jl-pane-graph g.node.op.filled").first.dispatch_event("click")
    root.locator(".jl-repro-btn").click()
    root.locator(".jl-repro").get_by_role("button", name="write .npz with inputs").click()
    page.wait_for_function("() => document.querySelector('.jl-repro-status').textContent.startsWith('wrote ')", timeout=30_000)
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
            assert all(re.search(r"\d", c) for c in cells) and notes.count() == 0
            times = page.locator(".jl-pane-compare table.jl-cmpscope tr[data-path='']").locator("td").all_inner_texts()
            assert re.search(r"\d", times[4]) and re.search(r"\d", times[8])
        page.locator(".jl-pane-compare").screenshot(path=str(artifacts / f"compare_{name}.png"))
    assert page.errors == [] and page.console_errors == []
