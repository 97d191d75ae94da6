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
