"""Backend plugins through fake `jitlab.backends` entry points: discovery, validation, errors."""

from __future__ import annotations

import sys
import types
from importlib import metadata

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends import base
from jitlab.backends.base import Backend, PluginWarning
from jitlab.errors import PluginError


class Good(Backend):
    """A plugin that claims nothing: every op runs with numpy."""

    name = "good"

    def supports(self, op):
        return "the good test backend claims nothing"

    def fusion_kind(self, op):
        return "opaque"

    def compile_group(self, group, options):
        raise AssertionError("never called: nothing is claimed")


class NoHooks(Backend):
    name = "nohooks"


class OldVersion(Good):
    name = "old"
    interface_version = 0


class Explodes(Good):
    name = "explodes"

    def __init__(self):
        raise RuntimeError("no such device")


def _fake_module() -> str:
    module = types.ModuleType("fake_jitlab_plugins")
    for cls in (Good, NoHooks, OldVersion, Explodes):
        setattr(module, cls.__name__, cls)
    sys.modules[module.__name__] = module
    return module.__name__


ENTRIES = {"good": "Good", "nohooks": "NoHooks", "old": "OldVersion", "explodes": "Explodes",
           "missing": "DoesNotExist", "numpy": "Good", "brokenimport": None}


@pytest.fixture
def fake_plugins(monkeypatch):
    """Entry points for every case above, instead of the installed ones; rediscovered after."""
    module = _fake_module()
    eps = [metadata.EntryPoint(name, f"{module}:{cls}" if cls else "no_such_module_xyz:Backend", base.ENTRY_POINT_GROUP)
           for name, cls in ENTRIES.items()]
    real = metadata.entry_points

    def entry_points(**select):
        return eps if select.get("group") == base.ENTRY_POINT_GROUP else real(**select)

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    with pytest.warns(PluginWarning) as caught:
        broken = base.load_plugins()
    yield broken, [str(w.message) for w in caught]
    monkeypatch.undo()
    base.load_plugins()


def _program():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    return jl.trace(lambda x: np.tanh(x) * 2.0 + 1.0, x), x


def test_discovery_warns_for_each_broken_plugin_and_keeps_the_good_one(fake_plugins):
    broken, messages = fake_plugins
    assert set(broken) == {"nohooks", "old", "missing", "numpy", "brokenimport"}
    for name in broken:
        assert any(f"'{name}'" in m for m in messages), name
    assert "good" in base.available_targets() and "explodes" in base.available_targets()


@pytest.mark.parametrize("name, words", [
    ("nohooks", ["nohooks", "supports", "fusion_kind", "compile_group", "fake_jitlab_plugins:NoHooks"]),
    ("old", ["old", "interface version 0", "version 1"]),
    ("missing", ["missing", "raised while loading", "DoesNotExist"]),
    ("brokenimport", ["brokenimport", "raised while loading", "no_such_module_xyz"]),
    ("explodes", ["explodes", "raised while starting", "no such device"]),
])
def test_selecting_a_broken_plugin_raises_an_error_naming_it(fake_plugins, name, words):
    program, _ = _program()
    with pytest.raises(PluginError) as info:
        jl.compile(program, level="O1", target=name)
    for word in words:
        assert word in str(info.value)


def test_builtin_backends_keep_working_beside_broken_plugins(fake_plugins):
    program, x = _program()
    expected = jl.compile(program, level="O0")(x)[0]
    for target in ("cpu", "numpy", "good"):
        exe = jl.compile(program, level="O1", target=target)
        np.testing.assert_allclose(exe(x)[0], expected, rtol=1e-6)
    assert jl.compile(program, level="O1", target="numpy").report.target == "numpy"


def test_a_plugin_named_like_a_builtin_is_ignored_with_a_warning(fake_plugins):
    broken, messages = fake_plugins
    assert "already a backend" in str(broken["numpy"])
    assert type(base.get_backend("numpy")).__name__ == "NumpyBackend"


def test_unknown_target_lists_the_targets():
    program, _ = _program()
    with pytest.raises(jl.JitlabError, match="unknown target 'nope'.*cpu"):
        jl.compile(program, target="nope")


def test_register_backend_validates_builtins_the_same_way():
    class Bad(Backend):
        name = "bad_device"
        device = "tpu"

    with pytest.raises(PluginError, match="allocate"):
        base.register_backend(Bad)
    assert "bad_device" not in base.BACKENDS
