"""The saved explorer page of a real model (onnx's light ResNet-50 at O1) in Chromium."""

import pytest

pytestmark = pytest.mark.browser


def open_page(page, path):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(path.as_uri())
    root = page.locator(".jl-explorer")
    root.wait_for()
    return root


def test_compare_page_renders(page, resnet_pages, artifacts):
    root = open_page(page, resnet_pages[1])
    table = root.locator(".jl-pane-compare table.jl-cmp")
    table.wait_for()
    assert table.locator("th").all_inner_texts()[1:] == ["O1", "O0"]
    assert root.locator(".jl-pane-compare .jl-cmpgraph svg").count() == 2
    root.screenshot(path=str(artifacts / "resnet_compare.png"))
    assert page.errors == []
