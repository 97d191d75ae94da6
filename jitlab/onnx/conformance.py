"""ONNX conformance: every node test case of onnx's backend suite, run through the
jitlab backend and sorted into pass / unsupported / wrong / error.

The cases come from onnx's generators (`onnx.backend.test.case.node`): each is a model,
its inputs, the expected outputs and tolerances, and cases compare exactly as onnx's own
runner compares them. The tensor subset leaves out what the issue excludes (string,
sequence, optional and map types, training ops, random ops, SequenceMap) and element
types jitlab's IR does not have (bfloat16, float8, int4 ...); those cases are counted as
excluded with their reason, never as passes.

    python -m jitlab.onnx.conformance [--level O1] [--ops Conv,Relu] [--details]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import onnx

from ..errors import JitlabError, UnsupportedError
from .reader import DTYPES

STATUSES = ("pass", "unsupported", "wrong", "error")
CONTROL_FLOW = {"SequenceMap"}
RANDOM = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
OPTIONAL = {"Optional", "OptionalGetElement", "OptionalHasElement"}
SEQUENCE = {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
            "SequenceLength", "SplitToSequence", "ConcatFromSequence"}
TRAINING_DOMAIN = "ai.onnx.preview.training"
DTYPE_EXCLUSION = "element type outside jitlab's dtypes"


@dataclass
class NodeCase:
    """One node test case and the op type it tests."""

    name: str
    op_type: str
    model: onnx.ModelProto
    inputs: list
    outputs: list
    rtol: float
    atol: float
    excluded: str | None = None     # why the case is outside the tensor subset


@dataclass
class CaseResult:
    """How one case went."""

    name: str
    op_type: str
    status: str                     # pass, unsupported, wrong, error, or excluded
    detail: str = ""
    seconds: float = 0.0


@dataclass
class ConformanceTable:
    """The outcome of a conformance run, with the counts and tables the CLI prints."""

    level: str
    results: list[CaseResult] = field(default_factory=list)

    @property
    def subset(self) -> list[CaseResult]:
        """The results of the cases in the tensor subset."""
        return [r for r in self.results if r.status != "excluded"]

    def counts(self) -> Counter:
        """Cases of the subset per status."""
        return Counter(r.status for r in self.subset)

    @property
    def pass_rate(self) -> float:
        """Passing cases over all cases of the subset."""
        return self.counts()["pass"] / max(len(self.subset), 1)

    @property
    def pass_rate_with_all_dtypes(self) -> float:
        """The pass rate if the cases excluded for their element types counted as unsupported."""
        return self.counts()["pass"] / max(len(self.subset) + self.excluded()[DTYPE_EXCLUSION], 1)

    def by_op(self) -> dict[str, Counter]:
        """Counts per status for each op type."""
        table: dict[str, Counter] = defaultdict(Counter)
        for r in self.subset:
            table[r.op_type][r.status] += 1
        return dict(sorted(table.items()))

    def excluded(self) -> Counter:
        """Cases outside the subset, per reason."""
        return Counter(r.detail for r in self.results if r.status == "excluded")

    def failures(self, status: str) -> list[CaseResult]:
        """The subset's cases with this status."""
        return [r for r in self.subset if r.status == status]

    def format(self, details: bool = False) -> str:
        """The summary, the per-op table and the reasons for what is unsupported."""
        counts, n = self.counts(), len(self.subset)
        lines = [f"ONNX node conformance at {self.level} (onnx {onnx.__version__}): {len(self.results)} cases, "
                 f"{n} in the tensor subset",
                 "  " + "  ".join(f"{s} {counts[s]}" for s in STATUSES) + f"  (pass rate {self.pass_rate:.1%})",
                 "excluded: " + (", ".join(f"{why} {k}" for why, k in self.excluded().most_common()) or "none"),
                 f"(counting the element-type exclusions as unsupported, the pass rate is "
                 f"{self.pass_rate_with_all_dtypes:.1%})",
                 "", f"{'op type':<28}{'cases':>6}" + "".join(f"{s:>12}" for s in STATUSES)]
        for op, c in self.by_op().items():
            lines.append(f"{op:<28}{sum(c.values()):>6}" + "".join(f"{c[s]:>12}" for s in STATUSES))
        for status in ("unsupported", "wrong", "error"):
            lines += self._reasons(status, details)
        return "\n".join(lines)

    def _reasons(self, status: str, details: bool) -> list[str]:
        failed = self.failures(status)
        if not failed:
            return []
        lines = ["", f"{status} ({len(failed)}):"]
        by_op: dict[str, list[CaseResult]] = defaultdict(list)
        for r in failed:
            by_op[r.op_type].append(r)
        for op, rs in sorted(by_op.items()):
            shown = rs if details else rs[:1]
            lines.append(f"  {op} ({len(rs)}): " + "; ".join(f"{r.name}: {_first_line(r.detail)}" for r in shown))
        return lines

    def __str__(self) -> str:
        return self.format()


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


@functools.lru_cache(maxsize=1)
def node_cases() -> tuple[NodeCase, ...]:
    """Every node test case onnx's generators produce, classified (collected once per process)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = collect_testcases(None)
    op_of = {c.name: c.model.graph.node[0].op_type for c in raw if "_expanded" not in c.name}
    cases = []
    for c in raw:
        inputs, outputs = c.data_sets[0]
        op = op_of.get(c.name.split("_expanded")[0], c.model.graph.node[0].op_type)
        case = NodeCase(c.name, op, c.model, list(inputs), list(outputs), c.rtol, c.atol)
        case.excluded = excluded_reason(case)
        cases.append(case)
    return tuple(cases)


def excluded_reason(case: NodeCase) -> str | None:
    """Why a case falls outside the tensor subset, or None when it is in it."""
    graph = case.model.graph
    node_ops = {n.op_type for n in graph.node}
    if case.op_type in CONTROL_FLOW:
        return "control flow"
    if case.op_type in RANDOM or node_ops & RANDOM or case.name.startswith("test_training_dropout"):
        return "random"
    if any(n.domain == TRAINING_DOMAIN for n in graph.node):
        return "training"
    if case.op_type in OPTIONAL or case.op_type in SEQUENCE:
        return "sequence/optional"
    for vi in list(graph.input) + list(graph.output):
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            return "sequence/optional/map type"
        code = vi.type.tensor_type.elem_type
        if code == onnx.TensorProto.STRING:
            return "string"
        if code not in DTYPES:
            return DTYPE_EXCLUSION
    return None


def run_case(case: NodeCase, level: str = "O0", target: str = "cpu") -> CaseResult:
    """Runs one case through the backend and compares as onnx's runner does."""
    from onnx.backend.test.runner import Runner

    from .backend import JitlabBackend

    start = time.perf_counter()
    if case.excluded:
        return CaseResult(case.name, case.op_type, "excluded", case.excluded)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            rep = JitlabBackend.prepare(case.model, level=level, target=target)
            outputs = rep.run([_array(x) for x in case.inputs])
        Runner.assert_similar_outputs([_array(x) for x in case.outputs], outputs, case.rtol, case.atol)
        status, detail = "pass", ""
    except UnsupportedError as e:
        status, detail = "unsupported", str(e)
    except JitlabError as e:
        status, detail = "error", f"{type(e).__name__}: {e}"
    except AssertionError as e:
        status, detail = "wrong", str(e).strip()
    except Exception as e:  # a crash is counted, never hidden: it is what the table is for
        status, detail = "error", f"crash {type(e).__name__}: {e}"
    return CaseResult(case.name, case.op_type, status, detail, time.perf_counter() - start)


def _array(x) -> np.ndarray:
    return onnx.numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else np.asarray(x)


def run_conformance(level: str = "O0", ops=None, target: str = "cpu", names=None,
                    verbose: bool = False) -> ConformanceTable:
    """Runs every node case (or those of op types `ops`, or named `names`) at `level` and
    returns the table; `str(table)` is what the CLI prints."""
    from . import ops as _handlers  # noqa: F401  (registers the handlers)

    wanted_ops = None if ops is None else set(ops)
    wanted_names = None if names is None else set(names)
    table = ConformanceTable(level)
    for case in node_cases():
        if (wanted_ops is None or case.op_type in wanted_ops) and (wanted_names is None or case.name in wanted_names):
            result = run_case(case, level, target)
            table.results.append(result)
            if verbose and result.status not in ("pass", "excluded"):
                print(f"{result.status:>12} {case.name}: {_first_line(result.detail)}", file=sys.stderr)
    return table


def main(argv=None) -> int:
    """The command line: prints the table; exit status 1 when any case is wrong or errs."""
    parser = argparse.ArgumentParser(prog="python -m jitlab.onnx.conformance", description=__doc__.split("\n")[0])
    parser.add_argument("--level", default="O0", choices=("O0", "O1", "O2"))
    parser.add_argument("--ops", default=None, help="comma-separated op types to run (default: all)")
    parser.add_argument("--details", action="store_true", help="list every failing case, not one per op")
    parser.add_argument("--verbose", action="store_true", help="print each failure as it happens")
    args = parser.parse_args(argv)
    ops = args.ops.split(",") if args.ops else None
    start = time.perf_counter()
    table = run_conformance(args.level, ops, verbose=args.verbose)
    print(table.format(details=args.details))
    print(f"\n{len(table.results)} cases in {time.perf_counter() - start:.1f} s")
    counts = table.counts()
    return 1 if counts["wrong"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
