"""The `fold-weights` pass: what depends only on weights is computed once, at compile time.

A weight is an `np.weight` (an ONNX initializer, an array a traced function closes over or
takes through static_argnums) or an `np.constant`. Two rules run to a fixpoint:

- fold-weight-op: an op whose operands are all weights is run by the O0 interpreter (its
  reference implementation, so the value is exactly what O0 computes) and becomes a new
  weight, or a constant when it has at most 16 elements (as tracing decides);
- fold-into-conv: a chain of add/sub/mul/div by per-output-channel weights after a conv2d
  (batch norm once decomposed) becomes the conv with its filters scaled plus one bias add,
  as onnxruntime folds BatchNormalization into Conv. This one reorders float rounding:
  (conv(x, W) - mean) * s + b becomes conv(x, W * s) + (b - mean * s), and a zero scale
  gives 0 where O0 gives NaN for an infinite conv output.

Folding never grows the program for nothing: an op whose result is larger than its operands
(a broadcast, an outer product, a tile) is folded only up to SMALL_BYTES, no folded value
holds more than `limit` bytes (the ONNX importer's rule for constants), and the folded arrays
the compiled program holds together stay under `limit` bytes. Original weights a fold leaves
unused leave the compiled program but free nothing (the source program keeps them), so the
budget counts every folded array but views and those a later fold consumed. The report's
`folding` record lists each folded weight and the bytes.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..dialects.reference import Interpreter
from ..errors import PassError
from ..ir.attributes import Dense
from ..ir.core import Operation, OpResult, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..ir.types import TensorType
from ..report import FoldedWeight, RuleMiss, WeightFolding
from .manager import Pass, PassContext, register_pass
from .rewriter import Pattern, Rewriter, apply_patterns
from .rules import RuleSet

LIMIT_BYTES = 256 * 2**20    # the ONNX importer's FOLD_LIMIT_BYTES
SMALL_BYTES = 16 * 2**10     # a fold that expands its operands is still taken up to this size
CONSTANT_LIMIT = 16          # folded values with more elements become weights, as in tracing


def nbytes(t: TensorType) -> int:
    return math.prod(t.shape) * t.dtype.itemsize


def is_weight(v: Value) -> bool:
    """Produced by np.weight or np.constant: known at compile time."""
    return isinstance(v, OpResult) and (v.op.name == "np.weight" or v.op.has(Trait.CONSTANT))


@dataclass
class FoldState:
    """One run of the pass: the weight ops by name, what was folded, the bytes added, refusals."""

    program: Program
    limit: int
    weight_ops: dict[str, list[Operation]] = field(default_factory=dict)
    folded: dict[int, FoldedWeight] = field(default_factory=dict)     # by uid of the new np.weight/np.constant
    history: dict[int, tuple[dict[int, str], list[str]]] = field(default_factory=dict)   # ops, sources, by uid
    ops_folded: int = 0
    added: int = 0                # bytes of the folded arrays the program holds (views excluded)
    own: dict[str, int] = field(default_factory=dict)   # those bytes by weight name
    skipped: list[RuleMiss] = field(default_factory=list)
    into_conv: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, program: Program, limit: int) -> FoldState:
        state = cls(program, limit)
        for op in program.body.ops:
            if op.name == "np.weight":
                state.weight_ops.setdefault(op.attrs["name"], []).append(op)
        return state

    def readers(self, name: str) -> int:
        """Uses of the weight `name`, over all np.weight ops naming it."""
        return sum(len(op.result.uses) for op in self.weight_ops.get(name, ()) if op.parent is not None)

    def array(self, v: Value) -> np.ndarray:
        if v.op.name == "np.constant":
            return v.op.attrs["value"].array
        return self.program.weights[v.op.attrs["name"]]

    def add_weight(self, name: str, array: np.ndarray, op: Operation) -> None:
        self.program.weights[name] = array
        self.weight_ops.setdefault(name, []).append(op)


class FoldWeightOp(Pattern):
    """Runs an op whose operands are all weights or constants once, at compile time, with the O0
    interpreter, and replaces it by a weight holding the result."""

    name = "fold-weight-op"
    root = None

    def __init__(self, state: FoldState | None = None):
        self.state = state

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        if not op.operands or op.regions or op.has(Trait.CONSTANT) or not all(map(is_weight, op.operands)):
            return False
        if self.state is None:
            raise PassError(f"{self.name} runs inside the fold-weights pass, which keeps its byte budget")
        reason = self._unfoldable(op) or self._too_costly(op)
        if reason:
            return self._skip(op, rw, reason)
        arrays = [self.state.array(v) for v in op.operands]
        outs = _evaluate(op, arrays, self.state.program)
        if isinstance(outs, str):
            return self._skip(op, rw, outs)
        self._replace(op, arrays, outs, rw)
        return True

    def _replace(self, op: Operation, arrays: list[np.ndarray], outs: list[np.ndarray], rw: Rewriter) -> None:
        """Replaces `op` by weights holding `outs`, dropping the weights only it read."""
        folded = [v.op.name == "np.weight" and v.op.attrs["name"] in self.state.own for v in op.operands]
        added = [_added_bytes(o, arrays, folded) for o in outs]
        ops, sources = self._history(op)
        for name in self._freed(op):    # before naming the new weights, so that they may take these names
            self.state.added -= self.state.own.pop(name, 0)
            del self.state.program.weights[name]
        self.state.ops_folded += 1
        rw.replace_op(op, [self._materialize(op, r, o, n, rw, ops, sources)
                           for r, o, n in zip(op.results, outs, added)])

    def _skip(self, op: Operation, rw: Rewriter, reason: str) -> bool:
        self.state.skipped.append(RuleMiss(rule=self.name, op=op.uid, op_name=op.name, reason=reason))
        return rw.fail(reason)

    def _unfoldable(self, op: Operation) -> str | None:
        if not op.has(Trait.PURE) or op.opdef.reference is None:
            return f"{op.name} has no pure reference implementation"
        if not all(r.type.is_static for r in op.results):
            return "its result shape is symbolic"
        names = [v.op.attrs["name"] for v in op.operands if v.op.name == "np.weight"]
        missing = [n for n in names if n not in self.state.program.weights]
        if missing:
            return f"weight {missing[0]!r} has no data (pass weights= to jl.parse or set program.weights)"
        return None

    def _too_costly(self, op: Operation) -> str | None:
        out = sum(nbytes(r.type) for r in op.results)
        inputs = sum(nbytes(v.type) for v in dict.fromkeys(op.operands))
        if out > self.state.limit:
            return f"its result holds {out} bytes, over the folding limit of {self.state.limit}"
        if out > inputs and out > SMALL_BYTES:
            return (f"its result ({out} bytes) is larger than its operands ({inputs} bytes): stored, it would "
                    "grow the program without saving work")
        grown = self.state.added + out - sum(self.state.own.get(name, 0) for name in self._freed(op))
        if grown > self.state.limit:
            return (f"it would bring the bytes of folded weights to {grown}, over the limit of {self.state.limit}")
        return None

    def _freed(self, op: Operation) -> list[str]:
        """The weights only `op` reads: folding it leaves them unused."""
        names = [v.op.attrs["name"] for v in op.operands if v.op.name == "np.weight"]
        return [name for name in dict.fromkeys(names) if self.state.readers(name) == names.count(name)]

    def _history(self, op: Operation) -> tuple[dict[int, str], list[str]]:
        """(ops folded by uid, original weights read) of the value `op` computes, through earlier folds."""
        ops: dict[int, str] = {}
        sources: list[str] = []
        for v in dict.fromkeys(op.operands):
            earlier = self.state.history.get(v.op.uid)
            if earlier is not None:
                ops.update(earlier[0])
                sources += earlier[1]
            elif v.op.name == "np.weight":
                sources.append(v.op.attrs["name"])
        ops[op.uid] = op.name
        return ops, list(dict.fromkeys(sources))

    def _materialize(self, op: Operation, r: Value, array: np.ndarray, added: int, rw: Rewriter,
                     ops: dict[int, str], sources: list[str]) -> Value:
        if array.size <= CONSTANT_LIMIT:
            new = rw.create("np.constant", attrs={"value": Dense(array)})
            name = ""
        else:
            if array.flags.writeable:
                array.setflags(write=False)
            name = _fresh_weight(self.state.program, _base_name(op))
            new = rw.create("np.weight", attrs={"name": name}, result_types=[r.type])
            self.state.add_weight(name, array, new)
            self.state.own[name] = added
            self.state.added += added
        self.state.history[new.uid] = (ops, sources)
        self.state.folded[new.uid] = FoldedWeight(name=name, type=str(r.type), bytes=array.nbytes,
                                                  ops=list(ops.values()), sources=sources, op=new.uid)
        return new.result


def _evaluate(op: Operation, arrays: list[np.ndarray], program: Program) -> list[np.ndarray] | str:
    """The op's results by the O0 interpreter, C-contiguous, or why they could not be computed."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = Interpreter(program, {}).run_op(op, arrays)
    except Exception as e:      # a reference rejecting these weights: the op fails at run time, as at O0
        return f"its reference implementation raised {type(e).__name__}: {e}"
    return [np.asarray(o, order="C") for o in outs]     # ascontiguousarray would make a 0-d array 1-d


def _added_bytes(out: np.ndarray, arrays: list[np.ndarray], folded: list[bool]) -> int:
    """Bytes a folded array holds beyond the original weights: none when it views one (a reshape).
    A view of a folded array counts in full, since the array it views may be freed."""
    views = [np.may_share_memory(out, a) for a in arrays]
    return 0 if any(v and not f for v, f in zip(views, folded)) else out.nbytes


def _base_name(op: Operation) -> str:
    """A folded weight is named after its largest weight operand (the last of equals), plus .folded."""
    weights = [v for v in op.operands if v.op.name == "np.weight"]
    if not weights:
        return "folded"
    base = max(reversed(weights), key=lambda v: nbytes(v.type)).op.attrs["name"]
    return re.sub(r"\.folded\d*$", "", base) + ".folded"


def _fresh_weight(program: Program, base: str) -> str:
    name, k = base, 1
    while name in program.weights:
        name, k = f"{base}{k}", k + 1
    return name


CHANNEL_OPS = ("np.add", "np.sub", "np.mul", "np.div")


class FoldIntoConv(Pattern):
    """conv2d(x, W) followed by add/sub/mul/div by weights that vary only along the output channels
    (batch norm, decomposed): conv2d(x, W * scale) + shift, both computed by fold-weight-op."""

    name = "fold-into-conv"
    root = "np.conv2d"

    def __init__(self, state: FoldState | None = None):
        self.state = state

    def match_and_rewrite(self, conv: Operation, rw: Rewriter) -> bool:
        chain = _channel_chain(conv)
        if isinstance(chain, str):
            return rw.fail(chain)
        if not chain or (len(chain) == 1 and chain[0][0].name in ("np.add", "np.sub")):
            return False            # nothing to fold into the filters, or a single bias add: kept as it is
        x, w = conv.operands
        if not is_weight(w):
            return rw.fail(f"the filters of {conv.name} are not a weight")
        if w.type.dtype != conv.result.type.dtype:
            return rw.fail(f"the filters of {conv.name} are {w.type}, its result {conv.result.type}")
        rw.set_insertion_point(chain[-1][0])     # every operand of the chain is defined by then
        scale, shift = _affine(chain, conv.result.type.dtype, rw)
        if scale is not None:
            w = rw.op("np.mul", w, rw.op("np.reshape", scale, shape=(scale.type.shape[0], 1, 1, 1)))
        folded = rw.create(conv.name, [x, w], conv.attrs)
        folded.loc = conv.loc           # still the conv: its ONNX node name and line, for search and scopes
        out = folded.result
        if shift is not None:
            out = rw.op("np.add", out, rw.op("np.reshape", shift, shape=(shift.type.shape[0], 1, 1)))
        rw.replace_op(chain[-1][0], [out])
        if self.state is not None:
            self.state.into_conv.append(conv.uid)
        return True


def _channel_chain(conv: Operation) -> list[tuple[Operation, Value, bool]] | str:
    """The ops after `conv` that add, subtract, multiply or divide by a per-channel weight, each
    with that weight and whether the conv's side is the left operand; or why the first does not fold."""
    y, chain = conv.result, []
    while len(y.uses) == 1:
        op = y.uses[0].op
        if op.name not in CHANNEL_OPS or op.result.type != y.type:
            break
        left = op.operands[0] is y
        c = op.operands[1] if left else op.operands[0]
        if c is y or not is_weight(c) or _channels(c, y) is None:
            if not chain and is_weight(c):
                return f"{op.name} after {conv.name} takes {c.type}, which does not vary along channels only"
            break
        if not left and op.name == "np.div":
            break
        chain.append((op, c, left))
        y = op.result
    if not chain and len(conv.result.uses) > 1 and any(_takes_channels(u, conv.result) for u in conv.result.users):
        return f"the result of {conv.name} has {len(conv.result.uses)} uses: folding would compute it twice"
    return chain


def _takes_channels(op: Operation, y: Value) -> bool:
    """Whether `op` adds, subtracts, multiplies or divides `y` by a per-channel weight."""
    return op.name in CHANNEL_OPS and any(c is not y and is_weight(c) and _channels(c, y) is not None
                                          for c in op.operands)


def _channels(c: Value, y: Value) -> int | None:
    """The length of `c` along the channel dim (1 or C) when `c`, broadcast against the conv
    output `y` (N, C, H, W), varies along that dim only and has its dtype."""
    if c.type.rank > y.type.rank or c.type.dtype != y.type.dtype or not c.type.is_static:
        return None
    shape = (1,) * (y.type.rank - c.type.rank) + tuple(c.type.shape)
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, y.type.shape[1]):
        return None
    return shape[1]


def _affine(chain, dtype: np.dtype, rw: Rewriter) -> tuple[Value | None, Value | None]:
    """(scale, shift) as 1-D ops over the chain's weights, so that the chain computes
    conv * scale + shift (None: 1 and 0)."""
    scale = shift = None
    for op, c, left in chain:
        c = rw.op("np.reshape", c, shape=(_channels(c, op.result),))
        if op.name == "np.add":
            shift = c if shift is None else rw.op("np.add", shift, c)
        elif op.name == "np.sub" and left:
            shift = rw.op("np.neg", c) if shift is None else rw.op("np.sub", shift, c)
        elif op.name == "np.sub":
            scale = rw.op("np.neg", _one(dtype, rw) if scale is None else scale)
            shift = c if shift is None else rw.op("np.sub", c, shift)
        else:
            name = op.name
            scale = (c if name == "np.mul" else rw.op("np.div", _one(dtype, rw), c)) if scale is None \
                else rw.op(name, scale, c)
            shift = None if shift is None else rw.op(name, shift, c)
    return scale, shift


def _one(dtype: np.dtype, rw: Rewriter) -> Value:
    return rw.op("np.constant", value=Dense(np.ones((1,), dtype)))


FOLD_WEIGHTS = RuleSet("fold-weights")
FOLD_WEIGHTS.add(FoldIntoConv(), FoldWeightOp())


@register_pass
@dataclass
class FoldWeights(Pass):
    name = "fold-weights"
    summary = ("Computes what depends only on weights once, at compile time (batch norm into the "
               "preceding conv's filters and bias, transposed or reshaped weights, scale/shift arithmetic).")
    limit: int = LIMIT_BYTES
    into_conv: bool = True
    max_iterations: int = 10

    def apply(self, program: Program, ctx: PassContext) -> Program:
        if self.limit < 0:
            raise PassError(f"pass {self.name}: limit is a number of bytes >= 0, got {self.limit}")
        state = FoldState.of(program, self.limit)
        before = _weight_bytes(program)
        patterns = [FoldWeightOp(state)] + ([FoldIntoConv(state)] if self.into_conv else [])
        apply_patterns(program, patterns, ctx.log, max_iterations=self.max_iterations)
        _drop_unused(program)
        ctx.report.folding = _record(program, state, before, self.limit)
        ctx.log.notes.extend(_notes(ctx.report.folding))
        return program


def _weight_bytes(program: Program) -> int:
    """Bytes of the weights the program's ops read."""
    names = {op.attrs["name"] for op in program.body.ops if op.name == "np.weight"}
    return sum(program.weights[n].nbytes for n in names if n in program.weights)


def _drop_unused(program: Program) -> None:
    used = {op.attrs["name"] for op in program.body.ops if op.name == "np.weight"}
    for name in set(program.weights) - used:
        del program.weights[name]


def _record(program: Program, state: FoldState, before: int, limit: int) -> WeightFolding:
    """The folded values still in the program, and what they cost or saved."""
    uids = {op.uid for op in program.body.ops}
    alive = [state.folded[op.uid] for op in program.body.ops if op.uid in state.folded]
    skipped = {s.op: s for s in state.skipped if s.op in uids}      # an op is visited once per sweep
    return WeightFolding(folded=alive, into_conv=list(state.into_conv), skipped=list(skipped.values()),
                         bytes_before=before, bytes_after=_weight_bytes(program), limit_bytes=limit,
                         ops_folded=state.ops_folded)


NOTED = 12     # folded values listed one by one in the pass's notes (all are in report.folding)


def _notes(record: WeightFolding) -> list[str]:
    if not record.folded and not record.skipped:
        return []
    notes = [f"fold-weights: {record.ops_folded} op(s) computed at compile time into {len(record.folded)} value(s) "
             f"({sum(f.bytes for f in record.folded)} bytes); {len(record.into_conv)} per-channel chain(s) "
             f"folded into conv filters; weights {record.bytes_before} -> {record.bytes_after} bytes"]
    notes += [f"{f.name or 'a constant'} : {f.type} ({f.bytes} bytes) from {len(f.ops)} op(s) over "
              f"{', '.join(f.sources) or 'constants'}" for f in record.folded[:NOTED]]
    if len(record.folded) > NOTED:
        notes.append(f"... and {len(record.folded) - NOTED} more folded value(s) in report.folding")
    notes += [f"kept {s.op_name} (op {s.op}): {s.reason}" for s in record.skipped]
    return notes
