"""The model zoo: every model runs eagerly with numpy and traces to a program that O0 runs
to the same result; the ResNet has ResNet-50's graph; symbolic batch sizes trace."""

import numpy as np
import pytest

import jitlab as jl
from jitlab.bench import models


@pytest.mark.parametrize("name", list(models.MODELS))
def test_model_traces_and_o0_matches_numpy(name):
    fn, args = models.build(name, quick=True)
    expected = fn(*args)
    program = jl.trace(fn, *args)
    assert program.name == fn.__name__
    got = jl.compile(program, level="O0")(*args)[0]
    assert got.shape == expected.shape and np.isfinite(expected).all()
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


def test_resnet_has_resnet50s_graph():
    fn, args = models.resnet50(batch=2, size=32, width=8)
    counts = jl.trace(fn, *args).op_counts()
    assert counts["np.conv2d"] == 53 and counts["np.batch_norm"] == 53
    assert counts["np.max_pool2d"] == 1 and counts["np.matmul"] == 1
    assert counts["np.add"] == 16 + 1 and counts["np.maximum"] == 49
    assert sum(counts.values()) > 400


@pytest.mark.parametrize("name, spec", [("resnet50", ("B", 3, 32, 32)), ("transformer", ("B", "S", 32))])
def test_symbolic_batch_and_sequence(name, spec):
    fn, args = models.build(name, quick=True)
    program = jl.trace(fn, jl.spec(spec))
    assert {s for v in program.inputs for s in v.type.symbols} == {d for d in spec if isinstance(d, str)}
    got = jl.compile(program, level="O0")(*args)[0]
    np.testing.assert_allclose(got, fn(*args), rtol=2e-5, atol=2e-5)


def test_registry():
    assert set(models.BENCH) <= set(models.MODELS) == set(models.QUICK)
    fn, args = models.build("softmax", quick=True, rows=3)
    assert args[0].shape == (3, models.QUICK["softmax"]["cols"])
    with pytest.raises(KeyError, match="unknown model 'vgg'"):
        models.build("vgg")
