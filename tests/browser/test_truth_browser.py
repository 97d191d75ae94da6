"""Issue 32's defects, checked in Chromium on the saved pages of onnx's light ResNet-50 and a traced
12-layer transformer (both at O1, profiled): each view says what the report recorded about every group."""

import re

import pytest

from jitlab.explore.html import read_state
from tests.browser.test_resnet_browser import graph_state, open_page

# under -m slow (tests/browser/conftest.py says what the default run keeps)
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def fmt_sec(x):
    """The page's fmtSec (widgets/core.js)."""
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.{2 if x < 0.01 else 1}f} ms"
    return f"{x:.2f} s"


def mib(n):
    return f"{n / 2**20:.1f} MiB"


def fmt_bytes(n):
    """The page's fmtBytes (widgets/core.js)."""
    units, i, v = ["B", "KiB", "MiB", "GiB", "TiB"], 0, n
    while abs(v) >= 1024 and i < len(units) - 1:
        v, i = v / 1024, i + 1
    return f"{v} {units[0]}" if i == 0 else f"{v:.{2 if v < 10 else 1}f} {units[i]}"


@pytest.fixture(params=["resnet", "transformer"])
def program(request, resnet_pages, transformer_page):
    """(name, saved page, its data)."""
    path = resnet_pages[0] if request.param == "resnet" else transformer_page
    return request.param, path, read_state(path.read_text(encoding="utf-8"))["data"]


def search(pane, query):
    pane.locator(".jl-search").fill(query)
    pane.locator(".jl-search").press("Enter")
    pane.locator("g.node.current-match").wait_for()


def test_a_group_sharing_compiled_code_shows_its_own_kernel(page, program, artifacts):
    name, path, data = program
    kernels = {k["key"]: k for k in data["kernels"]}
    shared = [g for g in data["groups"] if kernels[g["kernel"]]["group"] != g["id"]]
    assert shared        # ResNet's repeated blocks and the transformer's layers reuse kernels
    root = open_page(page, path)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    head = root.locator(".jl-pane-kernels .jl-kernelhead")
    for g in (shared[0], data["groups"][0], shared[-1]):      # a shared one, an owner, another shared one
        root.locator("[data-tab=graph]").click()
        search(pane, f"group {g['id']}")
        root.locator("[data-tab=kernels]").click()
        k = kernels[g["kernel"]]
        expect_text = f"group {g['id']} runs the kernel compiled for group {k['group']}" if k["group"] != g["id"] else k["key"]
        head.filter(has_text=expect_text).wait_for()
        assert head.get_attribute("data-group") == str(g["id"]) and k["key"] in head.inner_text()
        assert root.locator(".jl-pane-kernels tr.jl-current[data-key]").get_attribute("data-key") == k["key"]
        if g is shared[0]:
            root.screenshot(path=str(artifacts / f"issue32_01_shared_kernel_{name}.png"))
    assert page.errors == []


def drawn_values(page):
    """(fill, id) of every drawn box and group frame."""
    return page.evaluate("""() => [...document.querySelectorAll('.jl-pane-graph :is(g.node, g.cluster.group) > :first-child')]
        .map((p) => [p.style.fill, p.parentNode.id])""")


def box_seconds(data, box):
    """What the data says a box's time per call is: a scope's sum, a stage's scopes' sums, a group's steps, an op's step."""
    scopes = data["scopes"]
    kind, _, rest = box.partition("_")
    if kind == "sc":
        return scopes[rest]["seconds"]
    if kind == "st":
        parent = "/".join(rest.split("/")[:-1])
        stem = rest.split("/")[-1]
        members = [c for c in scopes[parent]["children"] if re.fullmatch(rf"(.*/)?{re.escape(stem)}(_\d+)?", c)]
        return sum(scopes[c]["seconds"] or 0.0 for c in members)
    if kind == "grp":
        return next(g["seconds"] for g in data["groups"] if g["id"] == int(rest))
    return data["ops"][rest]["seconds"] if kind == "op" else None


def test_the_time_overlay_colours_every_timed_group_and_spans_their_range(page, program, artifacts):
    name, path, data = program
    timed = {g["id"]: g["seconds"] for g in data["groups"] if g["seconds"] is not None}
    assert len(timed) == len(data["groups"])
    root = open_page(page, path)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    pane.locator("select.jl-overlay").select_option("time")
    # As it opens: every box with a time coloured, and the legend from the least to the most of them,
    # each box's time the data's (a scope's the per-scope sum its tooltip gives).
    boxes = {b: f for f, b in drawn_values(page)}
    values = {b: box_seconds(data, b) for b in boxes}
    values = {b: v for b, v in values.items() if v is not None}
    assert values and all(boxes[b] for b in values)
    legend = pane.locator(".jl-legend .jl-scale").inner_text()
    assert legend.startswith(f"time per call: {fmt_sec(min(values.values()))}") and fmt_sec(max(values.values())) in legend
    root.screenshot(path=str(artifacts / f"issue32_02_time_overlay_{name}.png"))
    # Opened all the way: every timed group's frame coloured, shared kernel or not.
    pane.get_by_role("button", name="Expand all").click()
    pane.locator("g.cluster.group").first.wait_for()
    fills = {b: f for f, b in drawn_values(page)}
    assert [g for g in timed if not fills.get(f"grp_{g}")] == []
    assert page.errors == []


def test_the_call_time_its_steps_and_the_host_gap_are_each_named(page, program, artifacts):
    name, path, data = program
    profile = data["profile"]
    call, steps = profile["total"]["median"], sum(s["median"] for s in profile["steps"])
    root = open_page(page, path)
    root.locator("[data-tab=schedule]").click()
    text = root.locator(".jl-pane-schedule .jl-calltime").inner_text()
    assert f"call {fmt_sec(call)} (measured whole, median)" in text
    assert f"{len(profile['steps'])} steps {fmt_sec(steps)}" in text
    gap = f"host work between steps {fmt_sec(call - steps)}" if call >= steps else \
        f"timing each step cost {fmt_sec(steps - call)} more than the whole call"
    assert gap in text
    assert "the steps' span" in root.locator(".jl-pane-schedule .jl-kerneltime").text_content()
    root.locator(".jl-pane-schedule .jl-calltime").screenshot(path=str(artifacts / f"issue32_03_call_time_{name}.png"))
    root.locator("[data-tab=kernels]").click()
    assert root.locator(".jl-pane-kernels .jl-calltime").inner_text() == text
    assert page.errors == []


def test_one_peak_figure_on_every_view(page, resnet_pages, artifacts):
    exe = resnet_pages[2]
    peak = mib(exe.report.memory.peak_bytes)
    root = open_page(page, resnet_pages[0])
    root.locator("[data-tab=memory]").click()
    assert peak in root.locator(".jl-pane-memory .jl-stats").inner_text()
    root.locator("[data-tab=schedule]").click()
    sched = root.locator(".jl-pane-schedule")
    sched.locator(".jl-peaknote").wait_for()
    # Every figure called a peak is the plan's; the orders' own figures are named "largest live set".
    figures = re.findall(r"peak[^\d\n]*?([\d.]+ [KMG]iB)", sched.inner_text())
    assert figures and set(figures) == {peak}
    assert "largest live set" in sched.locator(".jl-ordercols").inner_text()
    sched.locator(".jl-peaknote").screenshot(path=str(artifacts / "issue32_04_one_peak_schedule.png"))
    root = open_page(page, resnet_pages[1])
    row = root.locator(".jl-pane-compare table.jl-cmp tr", has_text="peak bytes")
    assert row.locator("td").nth(1).inner_text() == peak
    assert page.errors == []


def test_search_enter_goes_to_match_one_and_lists_exact_matches_first(page, resnet_pages, artifacts):
    data = read_state(resnet_pages[0].read_text(encoding="utf-8"))["data"]
    root = open_page(page, resnet_pages[0])
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    drawn = {n[0] for n in data["graph"]["view"]["nodes"]}
    # A value name that others contain (%r12 exactly, and %r120, %r121 ... by substring), both drawn.
    names = {r: f"op_{u}" for u, op in data["ops"].items() if f"op_{u}" in drawn for r in op["results"]}
    value = next(r for r in sorted(names, key=len) if any(o != r and o.startswith(r) for o in names))
    query = f"%{value}"
    exact = {names[value]}
    pane.locator(".jl-search").fill(query)
    listed = pane.locator(".jl-matchlist")
    listed.locator("ol.jl-exact li").first.wait_for()
    assert set(listed.locator("ol.jl-exact li").evaluate_all("(ls) => ls.map((l) => l.dataset.id)")) == exact
    partial = listed.locator("ol.jl-partial li").evaluate_all("(ls) => ls.map((l) => l.textContent)")
    assert partial and all(query in t and not re.search(rf"{query}( |$)", t) for t in partial)
    assert "also contains" in listed.inner_text()
    root.screenshot(path=str(artifacts / "issue32_05_search_list.png"))
    pane.locator(".jl-search").press("Enter")
    current = pane.locator("g.node.current-match")
    current.wait_for()
    assert pane.locator(".jl-status").inner_text().strip().startswith("match 1 of")
    assert current.get_attribute("id") == listed.locator("ol.jl-exact li").first.get_attribute("data-id")
    pane.locator(".jl-search").press("Enter")
    pane.locator(".jl-status", has_text="match 2 of").wait_for()
    assert page.errors == []


def test_box_labels_name_the_heaviest_ops_and_scopes_are_never_cut_into_parts(page, resnet_pages, transformer_page, artifacts):
    root = open_page(page, resnet_pages[0])
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    # The stages' convolutions (rebuilt by fold-weights) weigh most: named first.
    for stage in ("st_res2", "st_res3", "st_res4", "st_res5"):
        second = pane.locator(f"g.node[id='{stage}'] text").nth(1).text_content()
        assert second.startswith("conv2d ×"), second
    root.screenshot(path=str(artifacts / "issue32_06_labels_resnet.png"))
    root = open_page(page, transformer_page)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    for box in ("st_block", "sc_block", "sc_block/attention"):      # opened in turn (the next may sit off screen)
        pane.locator(f"g.node[id='{box}']").dispatch_event("click")
        pane.locator(f"g.cluster[id='{box}']").wait_for()
    pane.locator("g.cluster[id='sc_block/attention']").wait_for()
    assert pane.locator("g.node.partnode").count() == 0         # no made-up "attention · lines 21-22"
    root.screenshot(path=str(artifacts / "issue32_06_scopes_transformer.png"))
    assert page.errors == []


def test_schedule_names_groups_lists_the_live_set_and_leaves_weights_out(page, resnet_pages, artifacts):
    data = read_state(resnet_pages[0].read_text(encoding="utf-8"))["data"]
    order, buffers = data["schedule"]["order"], data["memory"]["buffers"]
    root = open_page(page, resnet_pages[0])
    root.locator("[data-tab=schedule]").click()
    pane = root.locator(".jl-pane-schedule")
    step = next(k for k, u in enumerate(order) if data["ops"][str(u)]["name"] == "jit.group" and k > 10)
    pane.locator(".jl-scrubber").fill(str(step))
    pane.locator(f".jl-schedule[data-step='{step}']").wait_for()
    op = data["ops"][str(order[step])]
    scope = "/".join(p for p in op["path"].split("/") if not p.startswith("group "))
    assert f"group {op['group']} · {scope}" in pane.locator(".jl-steplabel").inner_text()
    live = [b for b in buffers if b["first"] <= step <= b["last"] and b["producer"] is not None and not b["alias_of"]]
    moving = [b for b in live if b["category"] not in ("weight", "input")]
    names = pane.locator(".jl-livelist li[data-name]").evaluate_all("(ls) => ls.map((l) => l.dataset.name)")
    assert sorted(names) == sorted(b["name"] for b in moving) and names
    assert all(re.search(r" · \d", t) for t in pane.locator(".jl-livelist li[data-name]").all_inner_texts())
    held = [u for u in order if data["ops"][str(u)]["name"] in ("np.weight", "np.constant")]
    column = pane.locator(".jl-ordercol").first
    assert column.locator("li").count() == min(300, len(order) - len(held)) and f"{len(held)} weights" in column.inner_text()
    pane.screenshot(path=str(artifacts / "issue32_07_schedule.png"))
    assert page.errors == []


def test_fit_after_expanding_keeps_labels_readable(page, program, artifacts):
    name, path, _ = program
    root = open_page(page, path)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    pane.get_by_role("button", name="Expand all").click()
    pane.locator("g.cluster").first.wait_for()
    pane.get_by_role("button", name="Fit").click()
    assert graph_state(page)[2] >= 9 - 1e-3
    root.screenshot(path=str(artifacts / f"issue32_08_fit_{name}.png"))
    assert page.errors == []


def test_compare_sides_are_linked_and_drawn_before_the_ir_diff(page, resnet_pages, artifacts):
    exe = resnet_pages[2]
    root = open_page(page, resnet_pages[1])
    sides = root.locator(".jl-pane-compare .jl-cmpcol")
    sides.nth(1).locator("svg[data-layout=browser]").wait_for()
    assert sides.first.bounding_box()["y"] < root.locator(".jl-cmppasses").bounding_box()["y"]
    assert root.locator("details.jl-cmpirdiff[open]").count() == 0      # an IR diff, where there is one, folded
    sides.first.locator(".jl-search").fill("max_pool2d")
    sides.nth(1).locator("g.match").first.wait_for()            # typed on one side, marked on the other
    sides.first.locator(".jl-search").press("Enter")
    sides.nth(1).locator("g.selected").first.wait_for()         # selected on one side, shown on the other
    root.screenshot(path=str(artifacts / "issue32_09_compare_linked.png"))
    # One op count: the header's, the scopes' and the table's.
    data = read_state(resnet_pages[1].read_text(encoding="utf-8"))["data"]
    ops = data["compare"]["columns"][0]["ops"]
    assert ops == data["scopes"][""]["op_count"] == sum(1 for n in exe.report.graph.nodes
                                                        if n.name not in ("np.weight", "np.constant", "jit.group")
                                                        and not n.view and not n.name.startswith("mem."))
    assert f"{ops} ops" in root.locator(".jl-header").inner_text()
    assert root.locator(".jl-pane-compare table.jl-cmp tr", has_text="ops").first.locator("td").nth(1).inner_text() == str(ops)
    assert page.errors == []


def test_categorical_colourings_fill_the_opening_level_and_counts_agree_in_number(page, transformer_page, artifacts):
    root = open_page(page, transformer_page)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    for overlay in ("backend", "dtype"):
        pane.locator("select.jl-overlay").select_option(overlay)
        fills = [f for f, b in drawn_values(page) if b.startswith(("st_", "sc_"))]
        assert fills and all(fills), overlay
    root.screenshot(path=str(artifacts / "issue32_10_backend_overlay.png"))
    for tab in ("graph", "schedule", "memory", "kernels"):
        root.locator(f"[data-tab={tab}]").click()
        assert not re.search(r"\b1 (groups|launches|ops|buffers|steps)\b", root.inner_text())
    # The Passes list shows its columns whole.
    root.locator("[data-tab=passes]").click()
    root.locator(".jl-passlist tr.jl-pass").first.wait_for()
    clipped = page.evaluate("""() => { const list = document.querySelector('.jl-passlist').getBoundingClientRect();
        return [...document.querySelectorAll('.jl-passlist td, .jl-passlist th')]
            .filter((c) => c.scrollWidth > c.clientWidth + 1 || c.getBoundingClientRect().right > list.right + 1).length; }""")
    assert clipped == 0
    root.locator(".jl-passcol").screenshot(path=str(artifacts / "issue32_10_passes_list.png"))
    assert page.errors == []


@pytest.fixture(scope="module")
def o2_transformer(tmp_path_factory):
    """(saved page, data) of a traced 2-layer transformer at O2, whose groups share kernels and the program-wide source."""
    import jitlab as jl
    from jitlab.explore import explore
    from tests.browser.transformer import example

    fn, x = example(layers=2)
    exe = jl.compile(jl.trace(fn, x), level="O2")
    exe(x)
    path = explore(exe).save(tmp_path_factory.mktemp("o2") / "o2.html")
    return path, read_state(path.read_text(encoding="utf-8"))["data"]


def test_at_o2_each_group_shows_its_own_lines_or_kernel(page, o2_transformer, artifacts):
    path, data = o2_transformer
    kernels = {k["key"]: k for k in data["kernels"]}
    root = open_page(page, path)
    pane = root.locator(".jl-pane-graph")
    pane.locator("svg[data-layout=browser]").wait_for()
    head = root.locator(".jl-pane-kernels .jl-kernelhead")
    seen_lines = 0
    for g in data["groups"][:12]:
        root.locator("[data-tab=graph]").click()
        search(pane, f"group {g['id']}")
        root.locator("[data-tab=kernels]").click()
        root.locator(f".jl-pane-kernels .jl-kernelhead[data-group='{g['id']}']").wait_for()
        k = kernels[g["kernel"]]
        assert k["key"] in head.inner_text()
        spans = k["group_lines"].get(str(g["id"]), [])
        marks = root.locator(".jl-pane-kernels .jl-linemark").evaluate_all("(ms) => ms.map((m) => m.dataset.lines)")
        assert marks == [f"{a}-{b}" for a, b in spans]       # this group's lines, never the previous group's
        seen_lines += bool(spans)
        if k["group"] != g["id"] and not spans:
            assert f"group {g['id']} runs the kernel compiled for group {k['group']}" in head.inner_text()
    assert seen_lines >= 2
    root.screenshot(path=str(artifacts / "issue32_01_o2_group_lines.png"))
    assert page.errors == []


def test_a_dry_run_size_keeps_the_by_category_chart_at_that_size(page, resnet_pages, artifacts):
    data = read_state(resnet_pages[0].read_text(encoding="utf-8"))["data"]
    root = open_page(page, resnet_pages[0])
    root.locator("[data-tab=memory]").click()
    pane = root.locator(".jl-pane-memory")
    pane.locator(".jl-catlegend").wait_for()
    pane.locator("input.jl-planslider").fill("3")
    pane.locator(".jl-stats", has_text="peak (planned; nothing ran)").wait_for()
    plan = data["dry_run"]["plans"][3]
    # The chart's "live at the peak" by category: each category's bytes at that size, from the plan's buffers.
    step = plan["peak_step"]
    temporaries = sum(plan["buffer_bytes"][b["name"]] for b in data["memory"]["buffers"]
                      if b["category"] == "temporary" and not b["alias_of"] and b["first"] <= step <= b["last"])
    legend = pane.locator(".jl-catlegend")
    assert f"live at the peak (step {step})" in legend.inner_text()
    assert legend.locator("[data-category=temporary]").inner_text().endswith(fmt_bytes(temporaries))
    # and the largest buffers listed there name no weight among the activations
    assert all(" · weight" not in t for t in pane.locator(".jl-peaklist li").all_inner_texts())
    pane.locator(".jl-catchart").screenshot(path=str(artifacts / "issue32_10_dry_run_categories.png"))
    assert page.errors == []
