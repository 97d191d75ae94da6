"""Subgraph marking and fusion, after Paddle's CINN integration.

`mark-subgraphs` asks the target backend which ops it can compile, then merges
neighbouring ops into clusters, producer into consumer, whenever the fusion rules
allow it and no cycle would form. Every decision is recorded: each op left out with its
reason (`report.rejected`) and each producer/consumer pair with why it was or was not
fused (`report.fusion`). `fuse` turns each cluster into one `jit.group` whose region
holds the ops (moved, so they keep their uids) and whose key names its kernel.
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass

from ..dialects.np.writes import is_write
from ..errors import PassError
from ..ir.attributes import format_attr
from ..ir.core import Operation, OpResult, Value
from ..ir.opdef import Trait
from ..ir.program import Program
from ..report import FusionDecision, FusionKind, GroupRecord, Rejection
from .activations import is_backward
from .capability import BackendCapability
from .donation import donation_pairs
from .manager import Pass, PassContext, register_pass
from .rewriter import RewriteLog, Rewriter, reorder


class Cluster:
    """Ops marked to become one group, with the fusion kind that decides what may join."""

    def __init__(self, op: Operation, kind: FusionKind):
        self.ops: list[Operation] = [op]
        self.kinds = {kind}

    @property
    def kind(self) -> FusionKind:
        for k in (FusionKind.CONTRACTION, FusionKind.REDUCTION, FusionKind.OPAQUE, FusionKind.WRITE):
            if k in self.kinds:
                return k
        return FusionKind.ELEMENTWISE


@dataclass
class Marking:
    """What mark-subgraphs decided, handed to fuse through the pass context."""

    clusters: list[Cluster]
    backend: str


def _group_space(cluster: Cluster, escaping: list[Value]):
    """The iteration space of a cluster: its reduction's input, its contraction's result,
    or the shape of the values that leave it."""
    if cluster.kind == FusionKind.REDUCTION:
        red = next(op for op in cluster.ops if op.has(Trait.REDUCTION))
        return red.operands[0].type.shape
    if cluster.kind == FusionKind.CONTRACTION:
        con = next(op for op in cluster.ops if op.has(Trait.CONTRACTION))
        return con.result.type.shape
    return escaping[-1].type.shape if escaping else cluster.ops[-1].results[0].type.shape


@register_pass
@dataclass
class MarkSubgraphs(Pass):
    """Marks the ops the target can compile and clusters them without creating cycles."""

    name = "mark-subgraphs"
    summary = "Asks the backend which ops it compiles and merges neighbours into cycle-free clusters."
    exclude: tuple = ()          # op names (np.exp) or value names (%7) to keep out of every group
    whole_graph: bool = False    # O2: try to put every compilable op in as few groups as possible
    backend: str = ""            # a backend other than the target's (an engine claiming its ops)

    def apply(self, program: Program, ctx: PassContext) -> Program:
        backend = ctx.backend(self.backend)
        marker = _Marker(program, backend, ctx, set(self.exclude))
        ctx.marking = Marking(marker.run(), backend.name)
        return program


class _Marker:
    def __init__(self, program: Program, backend: BackendCapability, ctx: PassContext, exclude: set[str]):
        self.program, self.backend, self.ctx, self.exclude = program, backend, ctx, exclude
        self.cluster_of: dict[int, Cluster] = {}
        self.position = {id(op): i for i, op in enumerate(program.body.ops)}
        donate = ctx.donate if backend.donates_in_place else ()
        self.updates = donated_updates(program, donate)

    def run(self) -> list[Cluster]:
        ops = [op for op in self.program.body.ops if not op.has(Trait.TERMINATOR)]
        for op in ops:
            if op.opdef.dialect == "jit":         # already a group or an alias
                continue
            reason = self._why_not_compiled(op)
            if reason is not None:
                if not op.has(Trait.CONSTANT) and op.name != "np.weight":
                    self.ctx.report.rejected.append(Rejection(op=op.uid, name=op.name, reason=reason))
                continue
            self.cluster_of[id(op)] = Cluster(op, self._kind(op))
        for op in ops:
            if id(op) in self.cluster_of:
                self._merge_producers(op)
        clusters = list({id(c): c for c in self.cluster_of.values()}.values())
        order = {id(op): i for i, op in enumerate(ops)}
        for c in clusters:
            c.ops.sort(key=lambda o: order[id(o)])
        return sorted(clusters, key=lambda c: order[id(c.ops[0])])

    def _why_not_compiled(self, op: Operation) -> str | None:
        if op.name in self.exclude or any(f"%{r.name}" in self.exclude for r in op.results):
            return "excluded by the user (mark-subgraphs{exclude=...})"
        if op.has(Trait.CONSTANT) or op.name == "np.weight":
            return "constant data: passed to kernels, not computed"
        if op.regions:
            return "control flow: each of its regions compiles as a program of its own, run from the host"
        if op.has(Trait.VIEW) and self._kind(op) == FusionKind.VIEW:
            return "no-task view: an alias of its input, no kernel needed"
        return self.backend.supports(op)

    def _kind(self, op: Operation) -> FusionKind:
        kind = self.backend.fusion_kind(op)
        try:
            return FusionKind(kind)
        except ValueError:
            raise PassError(f"backend {self.backend.name}: fusion_kind({op.name}) gave {kind!r}, not one of "
                            f"{', '.join(k.value for k in FusionKind)}") from None

    def _merge_producers(self, op: Operation) -> None:
        for value in dict.fromkeys(op.operands):
            if not isinstance(value, OpResult) or id(value.op) not in self.cluster_of:
                continue
            producer = value.op
            a, b = self.cluster_of[id(producer)], self.cluster_of[id(op)]
            if a is b:
                continue
            reason = self._why_not_merge(a, b, producer, op)
            self.ctx.report.fusion.append(FusionDecision(producer=producer.uid, consumer=op.uid, fused=reason is None,
                                                         reason=reason or "fused"))
            if reason is None:
                self._merge(a, b)

    def _merge(self, a: Cluster, b: Cluster) -> None:
        a.ops += b.ops
        a.kinds |= b.kinds
        for op in b.ops:
            self.cluster_of[id(op)] = a

    def _why_not_merge(self, a: Cluster, b: Cluster, producer: Operation, consumer: Operation) -> str | None:
        folds = self.backend.folds_operand_transposes and is_foldable_transpose(producer, consumer, a)
        reason = None if folds else _kind_rule(a, b, producer, consumer)
        if reason is None and is_backward(consumer):
            reason = _lifetime_rule(a, b, producer)
        if reason is None and self.updates and self._mixes_donated_update(a, b):
            reason = ("updates a donated input: the update stays out of contraction and reduction groups, in an "
                      "elementwise group that writes straight into the input's array")
        if reason is None:
            reason = self._space_rule(a, b)
        if reason is None and FusionKind.REDUCTION in a.kinds | b.kinds:
            reason = off_row_read(sorted(a.ops + b.ops, key=lambda op: self.position[id(op)]))
        if reason is None and self._creates_cycle(a, b):
            reason = "would create a cycle: another path between them leaves the cluster"
        return reason

    def _mixes_donated_update(self, a: Cluster, b: Cluster) -> bool:
        """Whether the merged cluster would hold a contraction or reduction beside the update of a
        donated input: such a group could only write the update into a buffer of its own."""
        kinds = a.kinds | b.kinds
        return ((FusionKind.CONTRACTION in kinds or FusionKind.REDUCTION in kinds)
                and any(id(op) in self.updates for op in a.ops + b.ops))

    def _space_rule(self, a: Cluster, b: Cluster) -> str | None:
        merged = Cluster(a.ops[0], FusionKind.ELEMENTWISE)
        merged.ops, merged.kinds = a.ops + b.ops, a.kinds | b.kinds
        members = {id(op) for op in merged.ops}
        escaping = [r for op in merged.ops for r in op.results if any(id(u) not in members for u in r.users)]
        if FusionKind.WRITE in merged.kinds:
            return _write_escape_rule(merged, escaping)
        space = _group_space(merged, escaping)
        for r in escaping:
            if not _writable_from(r, merged, space):
                return (f"%{r.name} ({r.type}) is needed outside but does not have the group's "
                        f"iteration shape [{','.join(map(str, space))}]")
        return None

    def _creates_cycle(self, a: Cluster, b: Cluster) -> bool:
        members = {id(op) for op in a.ops + b.ops}
        return self._path_outside(a, b, members) or self._path_outside(b, a, members)

    def _path_outside(self, src: Cluster, dst: Cluster, members: set[int]) -> bool:
        """True if some path from src to dst goes through an op in neither. A third cluster counts
        as the one group it becomes: entering it at one op leaves it at the users of all its ops,
        even where no path inside joins the two (else merging src and dst may close a cycle)."""
        targets = {id(op) for op in dst.ops}
        stack = [u for op in src.ops for r in op.results for u in r.users if id(u) not in members]
        seen: set[int] = set()
        while stack:
            op = stack.pop()
            if id(op) in seen or op.has(Trait.TERMINATOR):
                continue
            cluster = self.cluster_of.get(id(op))
            for inner in cluster.ops if cluster is not None else [op]:
                seen.add(id(inner))
                for r in inner.results:
                    for user in r.users:
                        if id(user) in targets:
                            return True
                        if id(user) not in members:
                            stack.append(user)
        return False


def _kind_rule(a: Cluster, b: Cluster, producer: Operation, consumer: Operation) -> str | None:
    """The fusion rules: what kind of cluster may absorb what."""
    if FusionKind.OPAQUE in a.kinds or FusionKind.OPAQUE in b.kinds:
        return "opaque op: compiled on its own"
    if FusionKind.WRITE in a.kinds | b.kinds:
        return _write_rule(a, b, producer, consumer)
    if FusionKind.CONTRACTION in b.kinds and not _joins_epilogue(a, b, producer, consumer):
        return ("inputs of a contraction are materialized (only elementwise work on its result's shape "
                "fuses into matmul/conv, as its epilogue)")
    if FusionKind.CONTRACTION in a.kinds and not b.kinds <= {FusionKind.ELEMENTWISE, FusionKind.INJECTIVE}:
        return "a contraction takes elementwise epilogues only"
    if FusionKind.CONTRACTION in a.kinds and not _is_epilogue_input(a, producer):
        return "only the contraction's result may feed its epilogue"
    if FusionKind.REDUCTION in a.kinds and FusionKind.REDUCTION in b.kinds and not _same_reduction(a, b):
        return "the reductions iterate over different shapes or axes"
    if FusionKind.REDUCTION in b.kinds and FusionKind.CONTRACTION in a.kinds:
        return "a contraction does not fuse into a reduction"
    return None


MAX_WRITES = 32      # writes per group: numba compiles each write's loop nest in ~0.1 s, longer functions slower


def _write_rule(a: Cluster, b: Cluster, producer: Operation, consumer: Operation) -> str | None:
    """A write (update_slice, scatter) takes in the elementwise and injective work computing the
    array it writes into and the values it writes; update_slices into one array chain (a fill loop)."""
    if not (a.kinds | b.kinds) <= {FusionKind.ELEMENTWISE, FusionKind.INJECTIVE, FusionKind.WRITE}:
        return "a write fuses only with the elementwise work computing the array and values it writes"
    if FusionKind.WRITE in a.kinds and not (is_write(consumer) and consumer.operands[0] is producer.result
                                            and producer.result not in consumer.operands[1:]):
        return "a write ends its group: the ops reading its result read it from memory"
    writes = [op for op in a.ops + b.ops if is_write(op)]
    if len(writes) > 1 and any(w.name != "np.update_slice" for w in writes):
        return "only update_slice writes chain into one group"
    if len(writes) > MAX_WRITES:
        return f"a group holds at most {MAX_WRITES} writes (its compile time grows with each)"
    members = {id(op) for op in a.ops + b.ops}
    for w in writes:
        for use in w.result.uses:
            if id(use.op) in members and not (is_write(use.op) and use.index == 0):
                return (f"{use.op.name} reads %{w.result.name}, which a write of the group computes: "
                        "that write must finish first")
    return None


def _write_escape_rule(cluster: Cluster, escaping: list[Value]) -> str | None:
    """A group of writes gives one result, its last write's: the buffer every write stores into."""
    members = {id(op) for op in cluster.ops}
    writes = [op for op in cluster.ops if is_write(op)]
    last = [w for w in writes if not any(is_write(u) and id(u) in members for u in w.result.users)]
    if len(last) != 1 or not escaping:
        return "the writes of a group must form one chain into one array"
    extra = next((v for v in escaping if v is not last[0].result), None)
    if extra is None:
        return None
    return (f"%{extra.name} is needed outside, but a group of writes gives only the array its last "
            "write makes")


def is_operand_transpose(op: Operation) -> bool:
    """A 2-D transpose: a contraction can read its operand instead, with BLAS's transpose flag."""
    return op.name == "np.transpose" and op.result.type.rank == 2 and tuple(op.attrs["perm"]) == (1, 0)


def is_foldable_transpose(producer: Operation, consumer: Operation, cluster: Cluster) -> bool:
    """Whether a matmul's cluster may take in this transpose: alone in its cluster, used by the matmul only."""
    return (consumer.name == "np.matmul" and cluster.ops == [producer] and is_operand_transpose(producer)
            and all(u is consumer for u in producer.result.users))


def _is_epilogue_input(cluster: Cluster, producer: Operation) -> bool:
    con = next(op for op in cluster.ops if op.has(Trait.CONTRACTION))
    return producer is con or producer.result.type.shape == con.result.type.shape


def donated_updates(program: Program, donate) -> set[int]:
    """ids of the ops computing a donated input's new value elementwise: the elementwise ops the
    output going into its array is made of, back to the first non-elementwise producers
    (`m = b1*m + (1-b1)*g`: both products and the add, not the matmul making g)."""
    found: set[int] = set()
    for d in donation_pairs(program, donate) if donate else []:
        stack = [program.outputs[d.output]]
        while stack:
            op = getattr(stack.pop(), "op", None)
            if op is not None and op.has(Trait.ELEMENTWISE) and id(op) not in found:
                found.add(id(op))
                stack.extend(op.operands)
    return found


def _lifetime_rule(a: Cluster, b: Cluster, producer: Operation) -> str | None:
    """Backward ops run where their results are used: pulled up into the group that makes their input
    (a forward group, or one recomputing an activation) they would live beside it until then."""
    if not is_backward(producer):
        return ("forward/backward boundary: a forward group computing backward values would keep "
                "them alive beside the activations they come from")
    members = {id(op) for op in a.ops + b.ops}
    shared = any(id(u) not in members for r in producer.results for u in r.users)
    escapes = any(id(u) not in members for op in b.ops for r in op.results for u in r.users)
    if shared and escapes and b.kinds <= {FusionKind.ELEMENTWISE}:
        return (f"%{producer.results[0].name} is read elsewhere too: computing this backward value in its "
                "group would make it live beside it until its own reader runs")
    return None


def _joins_epilogue(a: Cluster, b: Cluster, producer: Operation, consumer: Operation) -> bool:
    """Whether elementwise work feeding a contraction group's epilogue (not the contraction) can be
    computed inside that epilogue: the backward pass's `1 - y*y` beside `g @ W.T`, say."""
    con = next(op for op in b.ops if op.has(Trait.CONTRACTION))
    feeds_con = any(u is con for r in consumer.results for u in r.users)
    # A contraction's operands come from outside its group: `a @ (a * a) * (a * a)` keeps a * a out.
    is_operand = any(u is con for op in a.ops for r in op.results for u in r.users)
    return (a.kinds <= {FusionKind.ELEMENTWISE} and consumer is not con and not feeds_con and not is_operand
            and tuple(producer.result.type.shape) == tuple(con.result.type.shape))


def _same_reduction(a: Cluster, b: Cluster) -> bool:
    reductions = [op for op in a.ops + b.ops if op.has(Trait.REDUCTION)]
    first = reductions[0]
    return all(op.operands[0].type.shape == first.operands[0].type.shape
               and op.attrs["axes"] == first.attrs["axes"] for op in reductions)


_UNIT_VIEWS = ("np.expand_dims", "np.squeeze", "np.reshape")


def off_row_read(ops: list[Operation]) -> str | None:
    """Why a reduction group could not compute `ops` (in order), or None. The group loops over rows
    (the reduction's kept dims) and has a row's reduced value only after that row's loop: every op
    reading it, directly or through other ops, must read it at the row being computed. Values are
    read at their canonical index (the space's dims, or the kept dims), so each read is checked to
    line its operand's dims up with the same dims of the space (a.max(1) + b with a, b (3, 3) lines
    the max up with the reduced dim; x.max(1, keepdims=True)[::-1] reads another row)."""
    red = next(op for op in ops if op.has(Trait.REDUCTION))
    space, axes = red.operands[0].type.shape, set(red.attrs["axes"])
    kept = [d for d in range(len(space)) if d not in axes]
    derived: set[int] = set()
    for op in ops:
        reads = [v for v in op.operands if id(v) in derived]
        if reads and not all(_reads_in_row(op, v, space, kept) for v in reads):
            return (f"{op.name} reads %{reads[0].name}, computed from a {red.name} in the group, at other rows "
                    "than the one its loop computes: the reduction must finish first")
        if reads or op.has(Trait.REDUCTION):
            derived.update(id(r) for r in op.results)
    return None


def _row_dims(value: Value, space, kept: list[int]) -> tuple | None:
    """The space dim each dim of `value` is read along (None where its size is 1), or None if unknown."""
    shape = value.type.shape
    dims = range(len(space)) if len(shape) == len(space) else kept if len(shape) == len(kept) else None
    return None if dims is None else tuple(None if n == 1 else d for n, d in zip(shape, dims))


def _reads_in_row(op: Operation, value: Value, space, kept: list[int]) -> bool:
    """Whether `op`, computed at its canonical index, reads `value` at value's canonical index."""
    have = _row_dims(value, space, kept)
    if have is None:
        return False
    if op.has(Trait.REDUCTION):
        want = tuple(range(len(space)))
    elif op.name in _UNIT_VIEWS:
        # Only size-1 dims come or go: the other dims keep their order.
        want = _row_dims(op.results[0], space, kept)
        return want is not None and [d for d in want if d is not None] == [d for d in have if d is not None] \
            and [n for n in value.type.shape if n != 1] == [n for n in op.results[0].type.shape if n != 1]
    elif op.has(Trait.ELEMENTWISE) or op.name == "np.broadcast_to":
        want = _row_dims(op.results[0], space, kept)
    else:
        return False
    if want is None or len(want) < len(have):
        return False
    aligned = want[len(want) - len(have):]      # numpy broadcasting lines dims up from the right
    return all(h is None or h == w for h, w in zip(have, aligned))


def _writable_from(value: Value, cluster: Cluster, space) -> bool:
    """Whether a group iterating over `space` can write `value` as an output: full-size,
    or for a reduction group row-sized (the reduced dims dropped, or kept as 1)."""
    shape = tuple(value.type.shape)
    if shape == tuple(space):
        return True
    if cluster.kind != FusionKind.REDUCTION:
        return False
    axes = set(next(op for op in cluster.ops if op.has(Trait.REDUCTION)).attrs["axes"])
    kept = tuple(d for i, d in enumerate(space) if i not in axes)
    ones = tuple(1 if i in axes else d for i, d in enumerate(space))
    return shape in (kept, ones)


@register_pass
@dataclass
class Fuse(Pass):
    """Turns each marked cluster into one jit.group keyed by its structure."""

    name = "fuse"
    summary = "Replaces each marked cluster by a jit.group op whose region holds its ops."

    def apply(self, program: Program, ctx: PassContext) -> Program:
        marking = ctx.marking
        if marking is None:
            raise PassError("fuse needs mark-subgraphs to run first")
        # Ids continue after groups an earlier engine pass made, so every group id stays unique.
        first = max((op.attrs["id"] for op in program.body.ops if op.name == "jit.group"), default=-1) + 1
        rw = Rewriter(program)
        for gid, cluster in enumerate(marking.clusters, start=first):
            rw.reset()
            group = _build_group(rw, cluster, gid, marking.backend)
            ctx.log.rewrites.append(rw.record("fuse-cluster", cluster.ops[-1]))
            ctx.report.groups.append(GroupRecord(
                id=gid, ops=[op.uid for op in cluster.ops], op_names=[op.name for op in cluster.ops],
                backend=marking.backend, key=group.attrs["key"], kind=cluster.kind,
                inputs=[v.name for v in group.operands], outputs=[r.name for r in group.results]))
        topological_sort(program, ctx.log)
        return program


def is_splat_constant(value: Value) -> bool:
    """A constant whose elements are all equal: a kernel reads it as a literal."""
    if not (isinstance(value, OpResult) and value.op.name == "np.constant"):
        return False
    array = value.op.attrs["value"].array
    return array.size <= 1 or bool((array == array.reshape(-1)[0]).all())


def _build_group(rw: Rewriter, cluster: Cluster, gid: int, backend: str) -> Operation:
    members = {id(op) for op in cluster.ops}
    inputs: list[Value] = []
    splats: list[Value] = []
    for op in cluster.ops:
        for v in op.operands:
            if isinstance(v, OpResult) and id(v.op) in members:
                continue
            # A splat becomes a literal inside the kernel, except where a library call (BLAS) reads it.
            literal = is_splat_constant(v) and not any(u.has(Trait.CONTRACTION) for u in v.users)
            target = splats if literal else inputs
            if v not in target:
                target.append(v)
    group = rw.wrap_ops(cluster.ops, "jit.group", {"id": gid, "backend": backend}, inputs, splats)
    rw.set_attr(group, "key", group_key(group))
    return group


def group_key(group: Operation) -> str:
    """A structural hash of the group: same ops, attributes and operand types, same key."""
    block = group.body
    names = {}
    for i, a in enumerate(block.args):
        names[a] = f"a{i}"
    lines = [",".join(str(a.type) for a in block.args)]
    for k, op in enumerate(block.ops):
        for j, r in enumerate(op.results):
            names[r] = f"v{k}_{j}"
        operands = ",".join(names[v] for v in op.operands)
        attrs = ",".join(f"{key}={format_attr(v)}" for key, v in sorted(op.attrs.items()))
        lines.append(f"{op.name}({operands}){{{attrs}}}:{','.join(str(r.type) for r in op.results)}")
    return "g" + hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]


def topological_sort(program: Program, log: RewriteLog) -> None:
    """Reorders the program's body so every value is defined before use, keeping the order otherwise."""
    block = program.body
    ops = list(block.ops)
    terminator = block.terminator
    index = {id(op): i for i, op in enumerate(ops)}
    pending = {id(op): sum(1 for v in dict.fromkeys(op.operands)
                           if isinstance(v, OpResult) and v.op.parent is block) for op in ops}
    ready = [(index[id(op)], op) for op in ops if pending[id(op)] == 0 and op is not terminator]
    heapq.heapify(ready)
    order = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for user in {id(u): u for r in op.results for u in r.users}.values():
            if user.parent is block and user is not terminator:
                pending[id(user)] -= sum(1 for v in dict.fromkeys(user.operands)
                                         if isinstance(v, OpResult) and v.op is op)
                if pending[id(user)] == 0:
                    heapq.heappush(ready, (index[id(user)], user))
    if len(order) != len(ops) - (terminator is not None):
        raise PassError("the program has a cycle after fusion")
    reorder(block, order, program, "topological-sort", log)


def why_not_fused(report, a, b) -> str:
    """Answers "why were these two ops not fused?" from the decisions in a CompileReport.

    `a` and `b` are op uids or value names as printed before fusion ("%7" or "7")."""
    ua, ub = _uid(report, a), _uid(report, b)
    group_of = {uid: g.id for g in report.groups for uid in g.ops}
    if ua in group_of and group_of.get(ua) == group_of.get(ub):
        return f"they were fused: both are in group {group_of[ua]}"
    for d in report.fusion:
        if {d.producer, d.consumer} == {ua, ub}:
            return d.reason if not d.fused else f"they were fused, then split apart: {d.reason}"
    rejected = {r.op: r for r in report.rejected}
    for uid in (ua, ub):
        if uid in rejected:
            return f"{rejected[uid].name} was left out of every group: {rejected[uid].reason}"
    return "neither feeds the other directly, so no fusion was considered between them"


def _uid(report, ref) -> int:
    if isinstance(ref, int):
        return ref
    if isinstance(ref, Operation):
        return ref.uid
    name = str(ref).lstrip("%")
    for record in report.passes:
        if record.name == "mark-subgraphs" and record.graph_before is not None:
            for node in record.graph_before.nodes:
                if name in node.results:
                    return node.uid
    raise PassError(f"no op produces %{name} in the program before fusion")
