"""Compiling jitlab's own numba functions once, ahead of the first kernel (`jitlab cache warm`,
which scripts/bootstrap runs after installing).

A generated kernel calls helper functions (fast math, the scalar helpers, rows' exp) that numba
compiles with the types a kernel calls them with the first time one does, and keeps in its cache
(numba_files.py): the first compile after an install paid for them (6.8 s for a 2-op program on a
loaded machine). Warming compiles each for the float and int types kernels use, in this
environment, so numba's own choice of folder (beside the modules, or NUMBA_CACHE_DIR) is the one
later processes read; it also builds the C caller and the float32 convolution library into the
kernel cache. Where it has not run, a kernel's compile that compiles a helper shows a progress
bar saying so and naming the helper (helper_bar.py).
"""

from __future__ import annotations

from ...progress import progress
from ...report import KernelTiming
from ..kernel_cache import KernelCache

_FLOATS = ("float32", "float64")
_INTS = ("int32", "int64")
# scalar helpers (helpers.py) by the argument types kernels call them with
_HELPERS = {
    "_maximum": ("ff", "ii"), "_minimum": ("ff", "ii"), "_floor_divide": ("ff",), "_mod": ("ff",),
    "_int_div": ("ii",), "_int_floor_div": ("ii",), "_int_fmod": ("ii",), "_int_mod": ("ii",), "_int_pow": ("ii",),
    "_erf": ("f",), "_sigmoid": ("f",), "_gelu_erf": ("f",), "_gelu_tanh": ("f",),
}


def functions() -> list[tuple[str, object, tuple]]:
    """(label, numba dispatcher, argument types) for each helper signature to compile."""
    from numba import types

    from . import helpers, rows
    from .fastmath import TABLE

    found = [(f"{impl.op}{'[' + impl.variant + ']' if impl.variant else ''} {impl.dtype}", impl.fn,
              (getattr(types, impl.dtype),)) for impl in TABLE.values()]
    found += [(f"exp after a row's max {dtype}", getattr(rows, f"exp_nonpositive_{dtype}"), (getattr(types, dtype),))
              for dtype in _FLOATS]
    for name, kinds in _HELPERS.items():
        for kind in kinds:
            for dtype in _FLOATS if kind[0] == "f" else _INTS:
                signature = (getattr(types, dtype),) * len(kind)
                found.append((f"{name.lstrip('_')} {dtype}", getattr(helpers, name), signature))
    return found


def warm(cache: KernelCache, show: bool = True) -> list[str]:
    """Compiles every helper signature into numba's cache, then the C caller and the float32
    convolution library into `cache`; returns what it compiled, with where it went."""
    from .. import native_caller
    from .conv_native import conv_library

    done = []
    todo = functions()
    with progress(len(todo) + 2, "jitlab cache warm", disable=not show, min_total=1, unit="function") as bar:
        for label, fn, signature in todo:
            bar.step(label)
            fn.compile(signature)
        done.append(f"{len(todo)} helper signatures into {todo[0][1]._cache.cache_path}")
        bar.step("the C caller of native kernels")
        built = native_caller.caller() is not None
        done.append(f"the C caller into {cache.directory}" if built else native_caller.why_not)
        bar.step("the float32 convolution library")
        libraries, why = conv_library("float32", cache, KernelTiming())
        done.append(f"the float32 convolution library into {cache.directory}" if libraries else why)
    return done
