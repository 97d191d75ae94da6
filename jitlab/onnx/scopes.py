"""The scope of each ONNX node, for the explorer's hierarchy.

A node name with namespaces (`/layer1/layer1.0/conv1/Conv`, `res5_0/branch2b/conv`) gives
them directly. Otherwise the hierarchy is recovered from common prefixes: a node's stem is
what the names of its constant inputs (weights) share (`gpu_0/res2_0_branch2a_bn_s_0` and
`..._bn_b_0` give `res2_0 branch2a bn`: exporters often name nodes `n12` or not at all);
a node with no weights (a Relu, an Add) takes the stem of the node that makes its first
input, and failing that its own name; so does a node whose stem holds that node's stem
(caffe2's `res_conv1_bn` after `conv1`: the stem's batch norm, not a scope `res`). Levels
(almost) every stem starts with (`gpu_0`) are dropped, and so are levels that would hold one node
or split a scope of a few nodes.
"""

from __future__ import annotations

import re
from collections import Counter

import onnx

SHARED = 0.9    # a first level at least this share of the stems start with is everyone's (`gpu_0`)
SMALL = 4       # a scope of at most this many nodes is not split further
_LABEL = re.compile(r"[/_.:]?[^/_.:]+")


def labels(name: str) -> list[str]:
    """`name` cut at `/ _ . :` into levels; a number stays with the level before it (`res2_0`)."""
    out: list[str] = []
    for m in _LABEL.finditer(name):
        token = m.group()
        if out and token.lstrip("/_.:").isdigit() and not token.startswith("/"):
            out[-1] += token
        else:
            out.append(token.lstrip("/_.:"))
    return [t for t in out if t]


def _common(paths: list[list[str]]) -> list[str]:
    n = 0
    while all(len(p) > n and p[n] == paths[0][n] for p in paths):
        n += 1
    return paths[0][:n]


def _constants(graph: onnx.GraphProto) -> set[str]:
    """Tensors known without the graph's inputs: initializers and what only they feed."""
    known = {t.name for t in graph.initializer}
    for node in graph.node:
        if all(not name or name in known for name in node.input):
            known.update(node.output)
    return known


def _weights_stem(node: onnx.NodeProto, constants: set[str]) -> list[str]:
    weights = [labels(name) for name in node.input if name in constants]
    if len(weights) == 1:
        return weights[0][:-1]          # drop the weight's own name (`w_0`)
    return _common(weights) if weights else []


def _holds(stem: list[str], part: list[str]) -> bool:
    """Whether `part`, past the levels both start with (`gpu_0`), is inside the rest of `stem`, not at its start."""
    shared = len(_common([stem, part]))
    stem, part = stem[shared:], part[shared:]
    return bool(part) and any(stem[k:k + len(part)] == part for k in range(1, len(stem) - len(part) + 1))


def node_scopes(graph: onnx.GraphProto) -> list[tuple[str, ...]]:
    """The scope of each node of `graph`, in node order."""
    constants = _constants(graph)
    given: dict[int, tuple[str, ...]] = {}
    stems: dict[int, list[str]] = {}
    made_by: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        if "/" in node.name.strip("/"):
            given[i] = tuple(p for p in node.name.split("/") if p)[:-1]
        else:
            stem = _weights_stem(node, constants)
            before = stems.get(made_by[node.input[0]], []) if node.input and node.input[0] in made_by else []
            # A stem that holds its producer's (`res_conv1_bn` after `conv1`) names a part of it: a node follows it.
            if not stem or before and _holds(stem, before):
                stem = before or stem
            stems[i] = stem or labels(node.name)
        made_by.update((name, i) for name in node.output)
    return _finish(len(graph.node), given, stems, constants, graph)


def _finish(n: int, given: dict[int, tuple[str, ...]], stems: dict[int, list[str]], constants: set[str],
            graph: onnx.GraphProto) -> list[tuple[str, ...]]:
    """Drops the first level (almost) every recovered stem shares, then levels holding one computing node."""
    computing = {i for i, node in enumerate(graph.node) if not set(node.output) <= constants}
    firsts = Counter(s[0] for i, s in stems.items() if s and i in computing)
    top, n_top = firsts.most_common(1)[0] if firsts else ("", 0)
    shared = n_top > 1 and n_top >= SHARED * sum(firsts.values())
    paths = {i: tuple(s[1:] if shared and s[0] == top else s) for i, s in stems.items() if s}
    counts: dict[tuple[str, ...], int] = {}
    for i, p in paths.items():
        if i in computing:
            for k in range(1, len(p) + 1):
                counts[p[:k]] = counts.get(p[:k], 0) + 1
    for i, p in paths.items():
        while p and (counts.get(p, 0) < 2 or len(p) > 1 and counts[p[:-1]] <= SMALL):
            p = p[:-1]
        paths[i] = p
    return [given.get(i, paths.get(i, ())) for i in range(n)]
