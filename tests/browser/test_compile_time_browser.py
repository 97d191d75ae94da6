"""The Kernels view draws where the compile went: stacked bars and per-kernel typing / LLVM / cache columns."""

import pytest
from playwright.sync_api import expect

from jitlab.explore import explore, html
from tests.test_compile_timing import compile_model

pytestmark = pytest.mark.browser


def test_kernels_view_shows_the_compile_time_breakdown(page, tmp_path, artifacts):
    exe = compile_model("O1", tmp_path / "cache")
    data = explore(exe).session.static_data()
    path = tmp_path / "timing.html"
    path.write_text(html.page({"data": data, "view": "all", "selection": {}}, "timing"), encoding="utf-8")
    page.goto(path.as_uri())
    root = page.locator(".jl-explorer")
    root.locator("[data-tab=kernels]").click()
    pane = root.locator(".jl-pane-kernels")
    breakdown = pane.locator(".jl-compile-time")
    expect(breakdown.locator(".jl-stack")).to_have_count(3)
    parts = {p.get_attribute("data-part") for p in breakdown.locator(".jl-stackpart").all()}
    assert {"kernels", "passes", "llvm"} <= parts
    expect(pane.locator("thead").last).to_contain_text("typing")
    expect(pane.locator("thead").last).to_contain_text("LLVM")
    root.screenshot(path=str(artifacts / "compile_time.png"))
    assert not page.errors
