"""numpy's type rules for ufuncs, at every level: for each dtype where numpy computes a
ufunc, jitlab gives numpy's values in numpy's result dtype; where numpy refuses, jitlab
raises a JitlabError. Inputs hold the special values (0, -0.0, NaN, ±inf)."""

import warnings

import numpy as np
import pytest

import jitlab as jl

DTYPES = ["float32", "float64", "int32", "int64", "bool"]

UFUNCS = {
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "logical_not": lambda a, b, nz: np.logical_not(a), "fmax": np.fmax, "fmin": np.fmin,
    "isnan": lambda a, b, nz: np.isnan(a), "isinf": lambda a, b, nz: np.isinf(a),
    "isfinite": lambda a, b, nz: np.isfinite(a), "signbit": lambda a, b, nz: np.signbit(a),
    "floor": lambda a, b, nz: np.floor(a), "ceil": lambda a, b, nz: np.ceil(a),
    "trunc": lambda a, b, nz: np.trunc(a), "rint": lambda a, b, nz: np.rint(a),
    "round": lambda a, b, nz: np.round(a), "round-1": lambda a, b, nz: np.round(a, -1),
    "absolute": lambda a, b, nz: np.absolute(a), "fabs": lambda a, b, nz: np.fabs(a),
    "matmul": np.matmul, "reciprocal": lambda a, b, nz: np.reciprocal(nz),
    "positive": lambda a, b, nz: np.positive(a), "negative": lambda a, b, nz: np.negative(a),
    "sign": lambda a, b, nz: np.sign(a), "maximum": np.maximum, "minimum": np.minimum,
    "subtract": np.subtract, "floor_divide": lambda a, b, nz: np.floor_divide(a, nz),
    "** 2": lambda a, b, nz: a ** 2, "** 3": lambda a, b, nz: a ** 3, "** -1": lambda a, b, nz: nz ** -1,
    "power -2": lambda a, b, nz: np.power(nz, -2),
}
for _name, _f in list(UFUNCS.items()):
    if isinstance(_f, np.ufunc):
        UFUNCS[_name] = (lambda f: lambda a, b, nz: f(a, b))(_f)


def inputs(dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two 4x4 arrays with the dtype's special values, and a third without zeros (for divisions)."""
    if dtype == "bool":
        a = np.array([True, False] * 8).reshape(4, 4)
        return a, a.T.copy(), np.ones((4, 4), bool)
    if dtype.startswith("int"):
        a = np.array([0, 1, -1, 2, -3, 7, 15, 25, -15, 149, -8, 4, 0, 3, -2, 5], dtype).reshape(4, 4)
        return a, a[::-1].copy(), np.where(a == 0, 1, a)
    a = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -2.5, 0.5, 3.7, -0.2, 2.5, -1e3, 7.0, np.nan,
                  1.0, -1.0], dtype).reshape(4, 4)
    return a, np.roll(a, 5), np.where(a == 0, 1, a)


def numpy_answers(dtype: str) -> tuple[dict, list[str]]:
    """numpy's result for every ufunc it computes on `dtype`, and the names of those it refuses."""
    answers, refused = {}, []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for name, f in UFUNCS.items():
            try:
                answers[name] = np.asarray(f(*inputs(dtype)))
            except (TypeError, ValueError):
                refused.append(name)
    return answers, refused


# O2 compiles the same groups into segments, and int32's compile is int64's at half the width:
# both under -m slow (O0 checks int32's answers by default)
@pytest.mark.parametrize("dtype, level", [
    pytest.param(d, level, marks=pytest.mark.slow) if level == "O2" or (d, level) == ("int32", "O1") else (d, level)
    for level in ("O0", "O1", "O2") for d in DTYPES])
def test_ufuncs_compute_what_numpy_computes(dtype, level):
    expected, _ = numpy_answers(dtype)

    def every_ufunc(a, b, nz):
        return {name: UFUNCS[name](a, b, nz) for name in expected}

    with np.errstate(all="ignore"):
        got = jl.jit(every_ufunc, level=level)(*inputs(dtype))
    for name, e in expected.items():
        assert got[name].dtype == e.dtype, f"{name} on {dtype}: {got[name].dtype}, numpy gives {e.dtype}"
        if e.dtype.kind == "f":     # compiled pow may differ from numpy's in the last bit
            np.testing.assert_allclose(got[name], e, rtol=1e-6, err_msg=f"{name} on {dtype} at {level}")
        else:
            np.testing.assert_array_equal(got[name], e, err_msg=f"{name} on {dtype} at {level}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ufuncs_numpy_refuses_are_jitlab_errors(dtype):
    _, refused = numpy_answers(dtype)
    for name in refused:
        with pytest.raises(jl.JitlabError):
            jl.trace(UFUNCS[name], *inputs(dtype))
