"""Whatever fails inside a traced function reaches the user as a JitlabError that names
the file and line of the user's code, shows that line, and says what to write instead."""

import inspect
import math
import os

import numpy as np
import pytest

import jitlab as jl
from jitlab.errors import JitlabError, TraceError
from jitlab.frontend.trace_errors import is_user_file

X = np.ones((3, 3), np.float32)


BUFFER = np.zeros((3, 3))       # made outside the traced functions: numpy's, not traced


def qr_first_entry(A):
    BUFFER[0, 0] = np.sqrt(np.dot(A[:, 0], A[:, 0]))  # BAD
    return A


def write_a_row(x):
    BUFFER[0] = x[0]  # BAD
    return x


def add_into_a_slice(x):
    BUFFER[:, 0] += x[:, 0]  # BAD
    return x


def write_a_traced_mask(x):
    x[x > 0] = x[0]  # BAD
    return x


def histogram_in_a_loop(x):
    h = np.zeros(3, np.int64)
    for v in x[0]:
        h[int(v * 3) % 3] += 1  # BAD
    return h


def python_if(x):
    if x.sum() > 0:  # BAD
        return x
    return -x


def python_float(x):
    return math.sqrt(x.sum()) + x  # BAD


def python_range(x):
    return list(range(x.sum().astype(np.int64)))  # BAD


def array_of_tracers(x):
    return np.array([x[0], x[1]])  # BAD


def unknown_method(x):
    return x.tolist()  # BAD


def users_own_key_error(x):
    table = {"a": x}
    return table["b"]  # BAD


def helper(y):
    return y.item()  # BAD


def calls_a_helper(x):
    return helper(x) + 1


def bad_matmul(x):
    y = x * 2
    return y @ np.ones((2, 2), np.float32)  # BAD


CASES = [  # function, error, words of the advice
    (qr_first_entry, TraceError, "inside the function"),
    (write_a_row, TraceError, "np.stack"),
    (add_into_a_slice, TraceError, "write into an argument"),
    (write_a_traced_mask, jl.UnsupportedOp, "np.where(mask, values, x)"),
    (histogram_in_a_loop, TraceError, "np.add.at(h, i, v)"),
    (python_if, TraceError, "np.where"),
    (python_float, TraceError, "np.sqrt"),
    (python_range, TraceError, "static_argnums"),
    (array_of_tracers, TraceError, "np.stack"),
    (unknown_method, TraceError, "reshape"),
    (users_own_key_error, TraceError, "static_argnums"),
    (calls_a_helper, TraceError, "methods that read them"),
    (bad_matmul, jl.ShapeError, "np.matmul"),
]


def bad_line(fn) -> tuple[int, str]:
    """The line marked BAD in fn's source, or in the helper it calls."""
    for f in (fn, helper):
        lines, first = inspect.getsourcelines(f)
        for i, line in enumerate(lines):
            if "# BAD" in line:
                return first + i, line.strip()
    raise AssertionError(fn)


@pytest.mark.parametrize("fn,error,advice", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("entry", ["trace", "jit"])
def test_error_names_the_user_line_and_what_to_write(fn, error, advice, entry):
    with pytest.raises(error) as info:
        if entry == "trace":
            jl.trace(fn, X)
        else:
            jl.jit(fn, level="O0")(X)
    message = str(info.value)
    line, source = bad_line(fn)
    assert f"test_trace_errors.py:{line}" in message
    assert source in message
    assert advice in message


def test_inside_grad_the_line_is_the_loss_functions():
    def loss(w):
        return float(w.sum())  # BAD

    with pytest.raises(TraceError) as info:
        jl.jit(jl.grad(loss))(X)
    line = loss.__code__.co_firstlineno + 1
    assert f"test_trace_errors.py:{line}" in str(info.value)
    assert str(info.value).count(f"test_trace_errors.py:{line}") == 1


def test_the_original_exception_is_kept_as_the_cause():
    with pytest.raises(JitlabError) as info:
        jl.trace(users_own_key_error, X)
    assert isinstance(info.value.__cause__, KeyError)


def test_a_result_that_is_no_array_names_the_function_definition():
    def returns_text(x):
        return "text"

    with pytest.raises(TraceError, match="returned a str") as info:
        jl.trace(returns_text, X)
    assert f"test_trace_errors.py:{returns_text.__code__.co_firstlineno}" in str(info.value)


def test_an_error_after_the_function_returned_names_its_definition():
    def not_a_loss(w):
        return w * 2

    with pytest.raises(jl.ShapeError, match="scalar loss") as info:
        jl.jit(jl.grad(not_a_loss))(X)
    assert f"test_trace_errors.py:{not_a_loss.__code__.co_firstlineno}" in str(info.value)


def test_user_files_are_told_from_jitlab_numpy_and_the_stdlib():
    package = os.path.dirname(jl.__file__)
    assert not is_user_file(os.path.join(package, "frontend", "jit.py"))
    assert not is_user_file(np.__file__) and not is_user_file(os.__file__)
    assert is_user_file(package + "_examples/model.py") and is_user_file(__file__)
