"""The graph view on shapes of program the real models do not cover."""

import numpy as np
import pytest
from playwright.sync_api import expect

import jitlab as jl
from jitlab.explore import explore

pytestmark = pytest.mark.browser


def test_many_inputs_open_as_one_part(page, tmp_path, artifacts):
    def f(x, *ws):
        for w in ws:
            x = np.tanh(x @ w)
        return x

    ws = [np.eye(4, dtype=np.float32) for _ in range(20)]
    g = jl.jit(f, level="O0")
    g(np.ones((2, 4), np.float32), *ws)
    page.goto(explore(g).save(tmp_path / "inputs.html").as_uri())
    pane = page.locator(".jl-pane-graph")
    part = pane.locator("g.node.partnode[id=inputs]")
    part.wait_for()
    assert pane.locator("g.node").count() <= 12
    assert part.text_content().startswith("21 inputs")
    box = part.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(pane.locator("g.node.input")).to_have_count(21)
    pane.screenshot(path=str(artifacts / "many_inputs.png"))
    assert page.errors == []


def test_a_loop_opens_onto_its_body_drawn_once(page, tmp_path, artifacts):
    def heat(u, n):
        return jl.fori_loop(0, n, lambda i, u: u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1)), u)

    g = jl.jit(heat, level="O0")
    g(np.ones(8, np.float32), 7)
    (uid, body), = [(op.uid, [o for o in op.regions[0].blocks[0].ops if o.name not in ("np.constant", "scf.yield")])
                    for op in g.last.program.walk() if op.name == "scf.for"]
    page.goto(explore(g).save(tmp_path / "loop.html").as_uri())
    pane = page.locator(".jl-pane-graph")
    loop = pane.locator(f"g.node.loopnode[id=lp_{uid}]")
    expect(loop).to_contain_text("for × 7")
    expect(pane.locator("g.node.op")).to_have_count(0)     # the body stays inside the closed box
    loop.dispatch_event("click")
    box = pane.locator(f"g.cluster.loop[id=lp_{uid}]")
    expect(box).to_be_visible()
    expect(pane.locator("g.node.op:not(.region)")).to_have_count(len(body))
    expect(pane.locator(f"g.node.end[id=end_{uid}_0]")).to_contain_text("next iteration")
    pane.screenshot(path=str(artifacts / "loop_open.png"))
    assert page.errors == []
