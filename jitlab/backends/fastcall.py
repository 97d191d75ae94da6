"""The shortest path of a call: a static program's steps written out as one Python function.

A call walks jit -> Executable -> runner -> step -> kernel -> native caller, and each layer
checks or looks up something a static program settles once: 8-10 us of Python for `x + 1`,
of which the kernel is 0.3 us. After a static executable's first call has passed every check,
its runner writes the steps it would run, with every shape, buffer size, kernel address and
thread count filled in, as the source of one function (the way torch Inductor emits its Python
wrapper). The function first checks what may still vary (each argument's type, shape, dtype
and layout) and returns None on any difference, or on any error while running: nothing it
runs writes into an argument, so the general path can take the call over from the start and
report the error with its full context.

Only what the general path would do is written out; a runner or kernel that cannot say how
it runs statically declines (returns None or False) and keeps the general path.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..ir.types import TensorType
    from .host import OutputBuffers

# An output this small comes from np.empty, which reuses the allocator's free memory: cheaper than
# the runners' recycling of kept buffers, which only pays where fresh pages would fault in.
SMALL_OUTPUT_BYTES = 1 << 16
EMPTY: dict = {}          # the bindings of a static program, shared read-only


class FunctionWriter:
    """Lines of one generated function and the objects its names stand for."""

    def __init__(self):
        self.lines: list[str] = []
        self.globals: dict[str, object] = {"np": np, "empty": np.empty, "EMPTY": EMPTY}
        self._ids = itertools.count()
        self._named: dict[int, str] = {}

    def local(self, hint: str = "v") -> str:
        """A fresh local variable name."""
        return f"{hint}{next(self._ids)}"

    def ref(self, obj: object, hint: str = "g") -> str:
        """The name the function uses for `obj` (one name per object)."""
        name = self._named.get(id(obj))
        if name is None:
            name = self._named[id(obj)] = f"_{hint}{next(self._ids)}"
            self.globals[name] = obj
        return name

    def line(self, text: str) -> None:
        self.lines.append(text)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> str:
        """A new array of this static shape and dtype, as a local."""
        name = self.local("o")
        self.line(f"{name} = empty({tuple(shape)!r}, {self.ref(np.dtype(dtype), 'dt')})")
        return name

    def outputs(self, types: Sequence[TensorType], buffers: OutputBuffers) -> list[str]:
        """Locals for a step's results of these static types: new arrays where every one is at most
        SMALL_OUTPUT_BYTES, else the step's `buffers` kept between calls."""
        if all(t.nbytes() <= SMALL_OUTPUT_BYTES for t in types):
            return [self.allocate(t.shape, t.dtype) for t in types]
        names = [self.local("o") for _ in types]
        self.line(f"{''.join(o + ', ' for o in names)}= {self.ref(buffers, 'buffers')}.get(EMPTY)")
        return names


def compile_fast_call(static: Sequence[tuple[np.dtype, tuple[int, ...]]], need_plain: bool, lock,
                      body: Callable[[FunctionWriter, list[str]], list[str] | None]) -> Callable | None:
    """fast(args) -> tuple of results, or None where the general path must run the call.
    `static`: each input's (dtype, shape); `need_plain`: arguments must be writable and C-contiguous
    (the runners copy any other); `body` writes the steps given the input names and gives the
    results' names, or None when it cannot."""
    w = FunctionWriter()
    names = [f"a{k}" for k in range(len(static))]
    steps = body(w, names)
    if steps is None:
        return None
    head = ["def fast(args):", f"    if len(args) != {len(names)}:", "        return None"]
    if names:
        head.append(f"    {', '.join(names)}, = args")
    ndarray = w.ref(np.ndarray, "ndarray")
    for name, (dtype, shape) in zip(names, static):
        # numpy's builtin dtypes are singletons: identity settles most calls without a comparison
        head.append(f"    if type({name}) is not {ndarray} or {name}.shape != {tuple(shape)!r} or "
                    f"({name}.dtype is not {w.ref(dtype, 'dt')} and {name}.dtype != {w.ref(dtype, 'dt')}):")
        head.append("        return None")
        if need_plain:
            head.append(f"    f = {name}.flags")
            head.append("    if not (f.c_contiguous and f.writeable):")
            head.append("        return None")
    head += [f"    with {w.ref(lock, 'lock')}:", "        try:", "            pass"]
    body_lines = [f"            {line}" for line in w.lines]
    tail = ["        except Exception:", "            return None",
            f"    return ({''.join(r + ', ' for r in steps)})"]
    source = "\n".join(head + body_lines + tail) + "\n"
    namespace = dict(w.globals)
    exec(compile(source, "<jitlab fast call>", "exec"), namespace)
    fast = namespace["fast"]
    fast.source = source
    return fast
