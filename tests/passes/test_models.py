"""Traced models (tests/passes/models.py): canonicalize,cse,dce removes the redundancy real
numpy code carries and keeps O0 results bit for bit, NaN and inf inputs included; O1
records every pass with its IR before and after."""

from collections import Counter

import numpy as np
import pytest

import jitlab as jl
from jitlab.passes import LEVELS
from tests.budget import first_fast
from tests.passes.filecheck import assert_identical
from tests.passes.models import MODELS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN and inf inputs, on purpose

# What canonicalize,cse,dce must take out of each traced model, by op name.
REMOVED = {
    "mlp": {"np.neg": 2, "np.maximum": 2, "np.mul": 1, "np.constant": 2},
    "transformer": {"np.mean": 2, "np.sub": 2, "np.div": 2, "np.transpose": 1},
    # conv3x3's tap loops are captured (a helper's loops are): each body computes `dy + h` and `dx + wd`
    # for slices it then takes with a static extent, and the peeled first tap adds 0 to its product
    "convnet": {"np.maximum": 2, "np.add": 6, "np.constant": 4},
}


def with_specials(arrays):
    out = [a.copy() for a in arrays]
    flat = out[0].reshape(-1)
    flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return out


@pytest.mark.parametrize("name", MODELS)
def test_canonicalize_cse_dce_on_traced_models(name):
    fn, make_args = MODELS[name]
    args = make_args()
    program = jl.trace(fn, *args)
    out = jl.opt(program, "canonicalize,cse,dce")
    removed = Counter(op.name for op in program.walk()) - Counter(op.name for op in out.walk())
    assert dict(removed) == REMOVED[name]
    if name == "mlp":
        assert "np.relu" in str(out)
    for inputs in (args, with_specials(args)):
        for a, e in zip(jl.compile(out, level="O0")(*inputs), jl.compile(program, level="O0")(*inputs)):
            assert_identical(a, e, name)


# the convnet compiles the most kernels and takes the same passes as the others: under -m slow
@pytest.mark.parametrize("name", first_fast(*sorted(MODELS, key=lambda n: n == "convnet"), keep=len(MODELS) - 1))
def test_o1_lists_every_pass_and_matches_o0(name):
    fn, make_args = MODELS[name]
    args = make_args()
    program = jl.trace(fn, *args)
    exe = jl.compile(program, level="O1")
    records = exe.report.passes
    assert [r.name for r in records] == [name.split("{")[0] for name in LEVELS["O1"]]
    assert all(r.before and r.after for r in records)
    assert not any(op.has(jl.ir.Trait.COMPOSITE) for op in exe.program.walk())
    # Fused kernels sum float32 rows in another order than numpy's pairwise sums.
    for a, e in zip(exe(*args), fn(*args) if isinstance(fn(*args), tuple) else (fn(*args),)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
