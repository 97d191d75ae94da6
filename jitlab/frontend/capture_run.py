"""What converted code (frontend/capture.py) calls while tracing: a loop or branch as one scf op.

Each entry takes the converted statement's body as functions of the carried values and either
traces it once into an scf op, or says the statement runs as Python: `for` loops then unroll (with
the reason recorded), an `if` or `while` on a static value runs as written, and one on a traced
value that cannot be captured is a TraceError naming the line and the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import JitlabError, TraceError
from . import inplace
from .control_flow import CarryMismatch, cond, fori_loop, while_loop
from .tracer import ACTIVE, Tracer

UNDEF = type("Unbound", (), {"__repr__": lambda self: "<unbound>"})()
_VALUES = (Tracer, np.ndarray, np.generic, int, float, bool)


@dataclass(frozen=True)
class LoopNote:
    """What became of one Python loop or branch while tracing: captured as one scf op, or unrolled and why."""

    file: str
    line: int
    captured: bool
    reason: str = ""
    kind: str = "for"

    def __str__(self) -> str:
        where = f"the {self.kind} {'loop ' if self.kind != 'if' else ''}at {self.file}:{self.line}"
        return f"{where} was captured as one scf.{self.kind}" if self.captured else \
            f"{where} was unrolled: {self.reason}"


class Refused(TraceError):
    """An `if` or `while` on a traced value that cannot be one scf op: the reason, and the line."""


@dataclass(frozen=True)
class Site:
    """A converted statement: where it is written, the names it carries and which of them it writes into."""

    file: str
    line: int
    names: tuple[str, ...]
    written: tuple[str, ...] = ()

    def refuse(self, what: str, reason: str) -> Refused:
        return Refused(f"the {what} at {self.file}:{self.line} depends on a traced value but cannot be captured: "
                       f"{reason}; write it so that it can (docs/control-flow.md), use np.where(cond, a, b) or "
                       "jl.cond / jl.while_loop, or pass the deciding value with static_argnums")


def value(get: Callable):
    """What a name holds, or UNDEF while it is unbound."""
    try:
        return get()
    except NameError:
        return UNDEF


def traced(x) -> bool:
    return isinstance(x, Tracer)


def test(x, site: Site, what: str, reason: str):
    """The condition of an `if` or `while` that is not converted: a traced one is refused with `reason`."""
    if isinstance(x, Tracer):
        raise site.refuse(what, reason)
    return x


# -- `and`, `or`, `not` in a converted condition ------------------------------------------------
def and_(*parts: Callable):
    out = parts[0]()
    for part in parts[1:]:
        if not traced(out):
            if not out:
                return out
            out = part()
        else:
            out = np.logical_and(out, part())
    return out


def or_(*parts: Callable):
    out = parts[0]()
    for part in parts[1:]:
        if not traced(out):
            if out:
                return out
            out = part()
        else:
            out = np.logical_or(out, part())
    return out


def not_(x):
    return np.logical_not(x) if traced(x) else not x


def call(fn, /, *args, **kwargs):
    """A call by bare name in converted code: the user's own functions converted first (their loops captured).
    `fn` is positional-only: the call's own keywords may include one named `fn`."""
    from .capture import converted_call  # capture.py imports this module

    return converted_call(fn)(*args, **kwargs)


# -- notes -------------------------------------------------------------------------------------------
def record(note: LoopNote) -> None:
    """Adds the note to the program's, once (a loop inside an unrolled one is met once per iteration)."""
    if ACTIVE and note not in ACTIVE[-1].program.loops:
        ACTIVE[-1].program.loops.append(note)


def unrolled(site: Site, reason: str) -> None:
    record(LoopNote(site.file, site.line, False, reason))


def note(file: str, line: int, reason: str) -> None:
    """Records that the loop at `line` is unrolled because of how it is written."""
    record(LoopNote(file, line, False, reason))


class noting:
    """Keeps the notes of a capture that failed halfway out of the program's list."""

    def __enter__(self):
        self.count = len(ACTIVE[-1].program.loops)

    def __exit__(self, kind, error, tb):
        if error is not None:
            del ACTIVE[-1].program.loops[self.count:]
        return False


# -- carried values -----------------------------------------------------------------------------------
def fresh(v):
    """A carried tracer as a new object of the region being traced: writes into it (a[i] = ...) stay
    the body's and do not reach the caller's object."""
    return Tracer(v.ctx.local(v.value), v.ctx) if isinstance(v, Tracer) else v


def written_back(site: Site, init: tuple, out: tuple) -> tuple:
    """The values after the statement: an array the body writes into is the caller's object, given
    its new value (so aliases and mutated arguments see the write, as in numpy)."""
    result = []
    for name, old, new in zip(site.names, init, out):
        if name in site.written and isinstance(old, Tracer) and isinstance(new, Tracer) and old.value is not new.value:
            inplace.rebind(old, new)
            new = old
        result.append(new)
    return tuple(result)


def unbound_or_odd(site: Site, init: tuple) -> str | None:
    """Why these initial carried values cannot enter a loop op, or None."""
    for name, v in zip(site.names, init):
        if v is UNDEF:
            return f"{name} is first written inside the loop and read after it"
        if not isinstance(v, _VALUES):
            return f"{name} is not an array or a number"
    return None


# -- the three statements ---------------------------------------------------------------------------
def run_for(bounds: tuple, body: Callable, init: tuple, site: Site):
    """The carried values after the loop traced as one scf.for, or None to run the loop in Python
    (outside a trace, or when capture fails: the note says why)."""
    if not ACTIVE:
        return None
    reason = unbound_or_odd(site, init)
    if reason is not None:
        return unrolled(site, reason)
    lo, hi, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    if isinstance(step, Tracer) or not isinstance(step, (int, np.integer)) or step == 0:
        return unrolled(site, "its step is not a non-zero Python int")
    counted = any(isinstance(b, Tracer) for b in (lo, hi))
    if not counted and len(_range(lo, hi, step)) < 2:
        return unrolled(site, "fewer than two iterations")
    weak = [n for n, v in zip(site.names, init) if isinstance(v, (bool, int, float, complex))]
    if weak and counted:
        return unrolled(site, f"{weak[0]} starts as a Python number, whose dtype numpy decides at its first "
                        "use, and the trip count is traced")
    try:
        with noting():
            carry = tuple(fresh(v) for v in init)
            if weak:        # the first iteration unrolled: numpy's weak scalars give the carried dtypes
                carry, lo = body(lo, carry), lo + step
            out = _counted(lo, hi, step, body, carry)
    except CarryMismatch as e:
        return unrolled(site, f"{site.names[e.index]} is {e.expected} before the loop and {e.got} after an iteration")
    except Exception as e:       # noqa: BLE001  the loop runs unrolled instead, which raises a user's own error again
        return unrolled(site, _first_line(e))
    record(LoopNote(site.file, site.line, True))
    return written_back(site, init, out)


def _range(lo, hi, step) -> range:
    try:
        return range(lo, hi, step)
    except TypeError:       # not ints: the loop, run as Python, raises Python's error
        return range(0)


def _counted(lo, hi, step: int, body: Callable, carry: tuple):
    """`for i in range(lo, hi, step)` as one scf.for: over i itself for a step of 1, else over the
    iteration number t, with i = lo + t * step."""
    if step == 1:
        return fori_loop(lo, hi, lambda i, c: body(i, tuple(c)), tuple(fresh(v) for v in carry))
    if not any(isinstance(b, Tracer) for b in (lo, hi)):
        trips = len(range(lo, hi, step))
    else:
        span = hi - lo if step > 0 else lo - hi
        trips = np.maximum((span + abs(step) - 1) // abs(step), 0)
    return fori_loop(0, trips, lambda t, c: body(lo + t * step, tuple(c)), tuple(fresh(v) for v in carry))


def _first_line(e: Exception) -> str:
    text = str(e).split("\n")[0]
    return text if isinstance(e, JitlabError) else f"{type(e).__name__}: {text}"


def run_while(cond: Callable, body: Callable, init: tuple, site: Site):
    """The carried values after the loop, traced as one scf.while once its condition is a traced value
    (the iterations before, whose condition is a Python value, run as Python); None outside a trace."""
    if not ACTIVE:
        return None
    carry = init
    while not traced(c := cond(carry)):
        if not c:
            return carry
        carry = body(carry)
    reason = unbound_or_odd(site, carry)
    if reason is not None:
        raise site.refuse("while loop", reason)
    try:
        out = while_loop(lambda c: cond(tuple(c)), lambda c: body(tuple(c)), tuple(fresh(v) for v in carry))
    except Refused:
        raise
    except JitlabError as e:
        raise site.refuse("while loop", _first_line(e)) from e
    record(LoopNote(site.file, site.line, True, kind="while"))
    return written_back(site, init, out)


def run_if(pred, then: Callable, orelse: Callable, init: tuple, site: Site, live: tuple[str, ...],
           both: tuple[str, ...]):
    """The names after an `if` on a traced `pred`, traced as one scf.if with both branches traced: the
    names either branch assigns that have a value before it, or that both assign."""
    picks = []
    for k, (name, v) in enumerate(zip(site.names, init)):
        if v is UNDEF and name not in both:
            if name in live:
                raise site.refuse("if", f"{name} is assigned in one branch only and has no value before the if")
        elif v is not UNDEF and not isinstance(v, _VALUES):
            raise site.refuse("if", f"a branch assigns {name}, which is not an array or a number")
        else:
            picks.append(k)
    def branch(fn: Callable, which: str) -> Callable:
        def run():
            out = fn(tuple(fresh(v) for v in init))
            unbound = [site.names[k] for k in picks if out[k] is UNDEF]
            if unbound:
                raise site.refuse("if", f"{unbound[0]} has no value after the {which} branch")
            return tuple(out[k] for k in picks)
        return run

    try:
        outs = cond(pred, branch(then, "then"), branch(orelse, "else"))
    except Refused:
        raise
    except JitlabError as e:
        raise site.refuse("if", _first_line(e)) from e
    record(LoopNote(site.file, site.line, True, kind="if"))
    result = list(init)
    for k, v in zip(picks, outs):
        result[k] = v
    return written_back(site, init, tuple(result))
