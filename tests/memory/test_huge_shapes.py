"""Shapes past the machine (issue 15, item 9): compiling allocates nothing for the data, and a
call that cannot fit raises jl.OutOfMemoryError naming the planned peak, before it copies an
input, at every level; an allocation numpy itself fails surfaces as the same error."""

import tracemalloc

import numpy as np
import pytest

import jitlab as jl
from jitlab.runtime import dryrun
from jitlab.units import format_bytes

LEVELS = ("O0", "O1", "O2")
HUGE = (10**6, 10**6)             # 3.64 TiB of float32


def f(x):
    return np.exp(x) * 2.0 + 1.0


def traced_peak(fn) -> tuple[object, int]:
    """fn()'s value (or the exception it raised) and the peak of memory numpy and Python took meanwhile."""
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 (returned for the test to check)
            out = e
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("level", LEVELS)
def test_compiling_a_huge_program_allocates_nothing_and_a_call_fails_before_copying(level):
    program = jl.trace(f, jl.spec(HUGE, np.float32))
    exe, peak = traced_peak(lambda: jl.compile(program, level=level, target="cpu"))
    assert isinstance(exe, jl.Executable), exe
    assert peak < 1 << 30
    x = np.broadcast_to(np.float32(1), HUGE)          # zero strides: no memory behind it
    error, peak = traced_peak(lambda: exe(x))
    assert isinstance(error, jl.OutOfMemoryError), error
    assert f"the planned peak of {format_bytes(exe.dry_run().peak_bytes)}" in str(error)
    assert "this machine's memory" in str(error)
    assert peak < 1 << 20


@pytest.mark.parametrize("level", ("O1", "O2"))
def test_a_broadcast_input_is_not_copied_when_the_copy_would_not_fit(level, monkeypatch):
    monkeypatch.setattr(dryrun, "system_memory_bytes", lambda: 80 << 20)
    n = 8 << 20                                       # a 32 MiB view of one float
    exe = jl.compile(jl.trace(f, jl.spec((n,), np.float32)), level=level, target="cpu")
    assert exe.dry_run().peak_bytes < 80 << 20 < exe.dry_run().peak_bytes + 4 * n
    error, peak = traced_peak(lambda: exe(np.broadcast_to(np.float32(1), (n,))))
    assert isinstance(error, jl.OutOfMemoryError), error
    assert "plus 32.00 MiB copying non-contiguous inputs" in str(error)
    assert peak < 1 << 20
    small = np.ones(n, np.float32)                    # a plain array of the same shape fits
    np.testing.assert_allclose(exe(small)[0], f(small), rtol=1e-6)


@pytest.mark.parametrize("level", LEVELS)
def test_an_allocation_numpy_fails_is_an_out_of_memory_error(level, monkeypatch):
    """Past any address space: numpy raises MemoryError, whatever the machine's overcommit policy."""
    monkeypatch.setattr(dryrun, "system_memory_bytes", lambda: None)     # no check before the call
    program = jl.trace(f, jl.spec(("N", 1 << 20), np.float32))
    exe = jl.compile(program, level=level, target="cpu")
    rows = 1 << 40                                    # 2**62 bytes
    with pytest.raises(jl.OutOfMemoryError, match=r"the planned peak of .* \(\w+ plan, N=1099511627776\).* "
                                                  r"could not be allocated \(.*allocate"):
        exe(np.broadcast_to(np.float32(1), (rows, 1 << 20)))
    x = np.ones((3, 1 << 20), np.float32)             # the executable still works
    np.testing.assert_allclose(exe(x)[0], f(x), rtol=1e-6)
