"""Linking in a saved page: an op's lines in O2's program-wide source and its IR line in the pass diffs,
and the repro action's script, which replays the selected group alone."""

import numpy as np
import pytest
from playwright.sync_api import expect

import jitlab as jl
from jitlab.explore import explore
from jitlab.explore.repro import group_program
from jitlab.ir.printer import print_program
from tests.browser.test_resnet_browser import click_centre, open_page
from tests.explore.test_o2_lines import model

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def o2_page(tmp_path_factory):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (32, 4))]
    exe = jl.compile(jl.trace(model, *args), level="O2")
    exe(*args)
    return explore(exe).save(tmp_path_factory.mktemp("o2") / "o2.html"), exe


def select_op(page, pane, query):
    """Searches the graph for `query` and clicks the match: the op is selected."""
    pane.locator(".jl-search").fill(query)
    pane.locator(".jl-search").press("Enter")
    click_centre(page, pane.locator("g.node.current-match"))
    return int(pane.locator("g.node.current-match").get_attribute("id")[3:])


def test_o2_kernel_view_marks_the_selected_groups_lines(page, o2_page, artifacts):
    path, exe = o2_page
    root = open_page(page, path)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    uid = select_op(page, pane, "tanh")
    gid = next(g.id for g in exe.report.groups if uid in g.ops)
    (record,) = [k for k in exe.report.kernels if k.group_lines]
    root.locator("[data-tab=kernels]").click()
    kernels = root.locator(".jl-pane-kernels")
    marks = kernels.locator(".jl-linemark")
    expect(marks).to_have_count(len(record.group_lines[gid]))
    assert marks.evaluate_all("(ms) => ms.map((m) => m.dataset.lines)") == [f"{a}-{b}" for a, b in record.group_lines[gid]]
    expect(kernels.locator(".jl-kernelhead")).to_contain_text(f"group {gid}: lines")
    # Each mark covers its lines on screen: the code's line height times the line number, below the padding.
    lines = record.source.splitlines()
    layout = kernels.evaluate("""(el) => {
        const pre = el.querySelector('.jl-source pre');
        const lh = parseFloat(getComputedStyle(pre).lineHeight);
        return [lh, [...pre.querySelectorAll('.jl-linemark')].map((m) => [m.offsetTop, m.offsetHeight]), pre.querySelector('code').textContent.split('\\n').length];
    }""")
    lh, boxes, shown = layout
    assert shown >= len(lines)
    # Highlighted in the page, the source's text itself unchanged.
    code = kernels.locator(".jl-source pre code")
    assert code.text_content() == record.source and code.locator("span.k", has_text="def").count() > 0
    assert code.locator("span.nf").first.inner_text().startswith("g") and code.locator("span.nd").count() > 0
    for (a, b), (top, height) in zip(record.group_lines[gid], boxes):
        assert abs(top - (8 + (a - 1) * lh)) < 1 and abs(height - (b - a + 1) * lh) < 1
    # The last range holds the call of the group's kernel, and it is scrolled into view.
    a, b = record.group_lines[gid][-1]
    assert any("_par(" in line or "_seq(" in line for line in lines[a - 1:b])
    pre = kernels.locator(".jl-source pre").bounding_box()
    mark = marks.last.bounding_box()
    assert pre["y"] <= mark["y"] <= pre["y"] + pre["height"]
    root.screenshot(path=str(artifacts / "o2_kernel_lines.png"))
    # The pass diffs mark the line defining the op's result.
    root.locator("[data-tab=passes]").click()
    selected = root.locator(".jl-pane-passes .jl-diff tr.jl-ir-selected")
    result = page.evaluate("async (uid) => (await window.jitlabData()).data.ops[uid].results[0]", str(uid))
    expect(selected.first).to_be_attached()
    assert all(f"%{result} = " in t for t in selected.all_inner_texts())
    assert page.errors == []


def test_repro_script_replays_the_selected_group(page, resnet_pages, artifacts):
    exe = resnet_pages[2]
    root = open_page(page, resnet_pages[0])
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    expect(root.locator(".jl-repro-btn")).to_be_disabled()
    uid = select_op(page, pane, "n44")     # a conv, its batch norm n45 folded into it
    gid = next(g.id for g in exe.report.groups if uid in g.ops)
    root.locator(".jl-repro-btn").click()
    panel = root.locator(".jl-repro")
    expect(panel).to_contain_text(f"repro of group {gid}")
    expect(panel).to_contain_text("f32[1,256,56,56]")
    expect(panel.get_by_role("button", name="write .npz with inputs")).to_have_count(0)       # a saved page has no kernel
    script = panel.locator("textarea").input_value()
    root.screenshot(path=str(artifacts / "resnet_repro.png"))
    printed = []
    scope = {"print": printed.append}
    exec(compile(script, "repro.py", "exec"), scope)       # the script as a user would run it
    assert print_program(scope["program"]) == print_program(group_program(exe.program, gid))
    reference = jl.compile(scope["program"], level="O0")(*scope["inputs"])
    np.testing.assert_allclose(scope["got"][0], reference[0], rtol=1e-4, atol=1e-4)
    assert printed == [f"group {gid}: O1 matches O0 on {len(reference)} results"]     # it checks itself against O0
    assert f'jl.explore.load_repro("group{gid}.npz")' in script       # and offers the real inputs instead
    assert page.errors == []
