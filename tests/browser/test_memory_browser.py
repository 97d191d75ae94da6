"""The Memory view of a training step in Chromium: live bytes by category, gradients among them."""

import pytest
from playwright.sync_api import expect

import jitlab as jl
from jitlab.explore import explore
from tests.explore.test_memory_categories import setup, sgd_step

pytestmark = pytest.mark.browser


def test_a_training_step_shows_memory_by_category(page, tmp_path, artifacts):
    p, x = setup()
    exe = jl.compile(jl.trace(sgd_step, p, x), level="O1")
    page.goto(explore(exe).save(tmp_path / "step.html").as_uri())
    root = page.locator(".jl-explorer")
    root.locator("[data-tab=memory]").click()
    pane = root.locator(".jl-pane-memory")
    chart = pane.locator(".jl-catchart")
    expect(chart.locator("polygon.jl-cat").first).to_be_attached()
    drawn = set(chart.locator("polygon.jl-cat").evaluate_all("(ps) => ps.map((p) => p.dataset.category)"))
    assert {"input", "activation", "gradient", "output"} <= drawn
    for words in ("live at the peak", "gradients", "activations"):
        expect(chart.locator(".jl-catlegend")).to_contain_text(words)
    # a gradient buffer says which forward line it differentiates
    expect(pane.locator(".jl-gantt rect.jl-buffer").first).to_be_attached()
    titles = pane.locator(".jl-gantt rect.jl-buffer title").all_text_contents()
    assert any("backward of test_memory_categories.py:" in t and ", gradient" in t for t in titles)
    pane.screenshot(path=str(artifacts / "training_memory.png"))
    assert page.errors == []
