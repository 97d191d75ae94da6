"""A layered graph layout in plain Python, for when Graphviz's `dot` is not installed.

Items are ranked by longest path, each rank ordered by the mean place of its neighbours
and spread so that items sit near them; an expanded group is laid out inside its own box
first, then placed as one item; an edge down several ranks bends through a point on
each rank between. The SVG has the shape Graphviz gives (`g.node`, `g.cluster`, `g.edge`
with the same ids and classes), so the widgets treat both alike. Cruder than `dot` (no
crossing minimisation beyond the sweeps, no edge straightening), so the drawing says
what it is and how to get the better one.
"""

from __future__ import annotations

import html
from collections import deque
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

if TYPE_CHECKING:      # layout imports this module; only its types are needed here
    from .layout import Drawing, Item

CHAR_W, LINE_H, PAD = 6.2, 12.0, 8.0      # Helvetica 10: a wide character's advance, a line's height
GAP_X, GAP_Y = 14.0, 28.0
CLUSTER_PAD, CLUSTER_LABEL = 8.0, 14.0
SWEEPS = 4
NOTE = ("simple layout: Graphviz's dot was not found "
        "(apt-get install graphviz, or brew install graphviz, for the full one)")
NOTE_H = 20.0
FONT = 'font-family="Helvetica,sans-Serif" font-size="10.00"'
ARROW = 6.0
BEND_W = 8.0                               # the room an edge passing through a rank takes
Box = tuple[float, float, float, float]    # x, y (top left), width, height
Point = tuple[float, float]


@dataclass
class Placed:
    """Top-left corners of boxes, the points each long edge bends through, and the size of it all."""

    corners: dict[str, Point]
    bends: dict[tuple[str, str], list[Point]]
    width: float
    height: float


def item_size(item: Item) -> tuple[float, float]:
    lines = item.label.split("\n")
    w, h = max(len(line) for line in lines) * CHAR_W + 2 * PAD, len(lines) * LINE_H + PAD
    if item.shape in ("ellipse", "oval"):
        w, h = w * 1.2, h + 6
    return max(w, 36.0), h


def topo_order(ids: list[str], edges: list[tuple[str, str]]) -> list[str]:
    """`ids` in an order that follows the edges; a cycle is broken at its first item in `ids`."""
    succ: dict[str, list[str]] = {i: [] for i in ids}
    indeg = dict.fromkeys(ids, 0)
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    ready, out, seen, rest = deque(i for i in ids if not indeg[i]), [], set(), iter(ids)
    while len(out) < len(ids):
        if not ready:      # a pass's before-and-after graph can hold a cycle
            ready.append(next(i for i in rest if i not in seen))
        i = ready.popleft()
        if i in seen:
            continue
        seen.add(i)
        out.append(i)
        for s in succ[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return out


def neighbours(ids: list[str], edges: list[tuple[str, str]]) -> tuple[dict, dict]:
    preds: dict[str, list[str]] = {i: [] for i in ids}
    succs: dict[str, list[str]] = {i: [] for i in ids}
    for a, b in edges:
        succs[a].append(b)
        preds[b].append(a)
    return preds, succs


def ranks(ids: list[str], edges: list[tuple[str, str]]) -> tuple[list[str], dict[str, int]]:
    """A topological order and each item's rank: longest path, sources just above their first user."""
    order = topo_order(ids, edges)
    place = {i: k for k, i in enumerate(order)}
    preds, succs = neighbours(ids, [(a, b) for a, b in edges if place[a] < place[b]])
    rank = dict.fromkeys(ids, 0)
    for i in order:
        for s in succs[i]:
            rank[s] = max(rank[s], rank[i] + 1)
    for i in ids:          # inputs and weights sit by their users, as dot puts them
        if not preds[i] and succs[i]:
            rank[i] = min(rank[s] for s in succs[i]) - 1
    return order, rank


def chains(edges: list[tuple[str, str]], rank: dict[str, int]) -> dict[tuple[str, str], list[str]]:
    """For each edge down more than one rank, the points it passes through on the ranks between."""
    return {(a, b): [f"\0{a}>{b}#{r}" for r in range(rank[a] + 1, rank[b])]
            for a, b in edges if rank[b] - rank[a] > 1}


def reorder(layers: list[list[str]], preds: dict, succs: dict) -> None:
    """Sorts each rank by the mean index of its neighbours, sweeping down then up."""
    index = {i: k for layer in layers for k, i in enumerate(layer)}
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        nbrs = preds if down else succs
        for layer in (layers[1:] if down else layers[-2::-1]):
            key = {i: fmean(index[j] for j in nbrs[i]) if nbrs[i] else index[i] for i in layer}
            layer.sort(key=key.__getitem__)
            index.update((i, k) for k, i in enumerate(layer))


def fit(layer: list[str], want: list[float], width: dict[str, float], cx: dict[str, float]) -> None:
    """Centres as near `want` as the order and the gaps allow: pushed apart, then shifted back."""
    placed: list[float] = []
    for k, i in enumerate(layer):
        x = want[k]
        if k:
            x = max(x, placed[-1] + (width[layer[k - 1]] + width[i]) / 2 + GAP_X)
        placed.append(x)
    shift = fmean(p - w for p, w in zip(placed, want))
    for i, p in zip(layer, placed):
        cx[i] = p - shift


def spread(layers: list[list[str]], width: dict[str, float], preds: dict, succs: dict) -> dict[str, float]:
    """Each item's centre x: packed, then pulled towards the mean of its neighbours above and below.

    Both sides at once: pulling only towards one side lets every fork drift the chain
    above it sideways, and the drift adds up over a deep network.
    """
    cx: dict[str, float] = {}
    for layer in layers:
        fit(layer, [0.0] * len(layer), width, cx)
    for sweep in range(2 * SWEEPS):
        for layer in (layers if sweep % 2 == 0 else layers[::-1]):
            want = [fmean(cx[j] for j in preds[i] + succs[i]) if preds[i] or succs[i] else cx[i] for i in layer]
            fit(layer, want, width, cx)
    return cx


def place(sizes: dict[str, tuple[float, float]], edges: list[tuple[str, str]]) -> Placed:
    """Boxes laid out in ranks; an edge down several ranks bends through a point on each between."""
    order, rank = ranks(list(sizes), edges)
    via = chains(edges, rank)
    size = dict(sizes)
    for (a, _), points in via.items():
        size.update((p, (BEND_W, 0.0)) for p in points)
        rank.update((p, rank[a] + k + 1) for k, p in enumerate(points))
    steps = [(a, b) for a, b in edges if (a, b) not in via and rank[a] < rank[b]]
    steps += [pair for (a, b), ps in via.items() for pair in zip([a] + ps, ps + [b])]
    layers: list[list[str]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for i in order + [p for ps in via.values() for p in ps]:
        layers[rank[i]].append(i)
    preds, succs = neighbours(list(size), steps)
    reorder(layers, preds, succs)
    cx = spread(layers, {i: w for i, (w, _) in size.items()}, preds, succs)
    left = min((cx[i] - size[i][0] / 2 for i in size), default=0.0)
    corners, y = {}, 0.0
    for layer in layers:
        height = max(size[i][1] for i in layer)
        for i in layer:
            corners[i] = (cx[i] - size[i][0] / 2 - left, y + (height - size[i][1]) / 2)
        y += height + GAP_Y
    width = max((corners[i][0] + size[i][0] for i in size), default=0.0)
    bends = {e: [(corners[p][0] + BEND_W / 2, corners[p][1]) for p in ps] for e, ps in via.items()}
    return Placed({i: corners[i] for i in sizes}, bends, width, max(y - GAP_Y, 0.0))


@dataclass
class Arranged:
    """Where every item, cluster and edge bend of a drawing goes, and the size of it all."""

    items: dict[str, Box]
    clusters: dict[int, Box]
    bends: dict[tuple[str, str], list[Point]]
    width: float
    height: float


def _moved(points: list[Point], dx: float, dy: float) -> list[Point]:
    return [(x + dx, y + dy) for x, y in points]


def arrange(d: Drawing) -> Arranged:
    """Each expanded group laid out in its own box first, then everything as a whole, under the note."""
    size = {i.id: item_size(i) for i in d.items + [i for _, items in d.clusters.values() for i in items]}
    unit = {i.id: f"grp_{g}" for g, (_, items) in d.clusters.items() for i in items}
    inner = {}
    for g, (_, items) in d.clusters.items():
        ids = {i.id for i in items}
        inner[g] = place({i.id: size[i.id] for i in items}, [e for e in d.edges if e[0] in ids and e[1] in ids])
        size[f"grp_{g}"] = (inner[g].width + 2 * CLUSTER_PAD, inner[g].height + 2 * CLUSTER_PAD + CLUSTER_LABEL)
    units = [i.id for i in d.items] + [f"grp_{g}" for g in d.clusters]
    outer = place({u: size[u] for u in units},
                  sorted({(unit.get(a, a), unit.get(b, b)) for a, b in d.edges} - {(u, u) for u in units}))
    out = Arranged({}, {}, {}, max(outer.width, len(NOTE) * CHAR_W * 0.85), outer.height + NOTE_H)
    for i in d.items:
        x, y = outer.corners[i.id]
        out.items[i.id] = (x, y + NOTE_H, *size[i.id])
    for g, placed in inner.items():
        x0, y0 = outer.corners[f"grp_{g}"][0], outer.corners[f"grp_{g}"][1] + NOTE_H
        out.clusters[g] = (x0, y0, *size[f"grp_{g}"])
        dx, dy = x0 + CLUSTER_PAD, y0 + CLUSTER_PAD + CLUSTER_LABEL
        out.items.update((i, (x + dx, y + dy, *size[i])) for i, (x, y) in placed.corners.items())
        out.bends.update((e, _moved(ps, dx, dy)) for e, ps in placed.bends.items())
    for a, b in d.edges:
        if unit.get(a, a) != unit.get(b, b):
            out.bends[a, b] = _moved(outer.bends.get((unit.get(a, a), unit.get(b, b)), []), 0.0, NOTE_H)
    return out


def _n(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def rounded(box: Box, r: float = 4.0) -> str:
    """The path of a rectangle with rounded corners."""
    x, y, w, h = box
    pts = [(x + r, y), (x + w - r, y), (x + w, y + r), (x + w, y + h - r), (x + w - r, y + h), (x + r, y + h),
           (x, y + h - r), (x, y + r)]
    corners = [(x + w, y), (x + w, y + h), (x, y + h), (x, y)]
    d = f"M{_n(pts[0][0])},{_n(pts[0][1])}"
    for k in range(4):
        (ax, ay), (bx, by), (cx, cy) = pts[2 * k + 1], corners[k], pts[(2 * k + 2) % 8]
        d += f" L{_n(ax)},{_n(ay)} Q{_n(bx)},{_n(by)} {_n(cx)},{_n(cy)}"
    return d + " Z"


def outline(item: Item, box: Box) -> str:
    x, y, w, h = box
    fill = item.fill or "white"
    if item.shape in ("ellipse", "oval"):
        return (f'<ellipse fill="{fill}" stroke="black" cx="{_n(x + w / 2)}" cy="{_n(y + h / 2)}" '
                f'rx="{_n(w / 2)}" ry="{_n(h / 2)}"/>')
    return f'<path fill="{fill}" stroke="black" d="{rounded(box)}"/>'


def text_lines(label: str, box: Box) -> str:
    x, y, w, h = box
    lines = label.split("\n")
    top = y + h / 2 - len(lines) * LINE_H / 2
    return "".join(f'<text text-anchor="middle" x="{_n(x + w / 2)}" y="{_n(top + (k + 0.75) * LINE_H)}" {FONT}>'
                   f"{html.escape(line)}</text>" for k, line in enumerate(lines))


def node_svg(item: Item, box: Box) -> str:
    return (f'<g id="{html.escape(item.id)}" class="node {html.escape(item.classes)}">'
            f"<title>{html.escape(item.id)}</title>{outline(item, box)}{text_lines(item.label, box)}</g>")


def cluster_svg(g: int, color: str, box: Box) -> str:
    x, y, w, _ = box
    return (f'<g id="grp_{g}" class="cluster group"><title>cluster_{g}</title>'
            f'<path fill="{color}" fill-opacity="0.25" stroke="{color}" d="{rounded(box, 6.0)}"/>'
            f'<text text-anchor="start" x="{_n(x + 6)}" y="{_n(y + CLUSTER_PAD + 6)}" {FONT}>group {g}</text></g>')


def edge_svg(a: str, b: str, src: Box, dst: Box, bends: list[Point]) -> str:
    """Curves from the bottom of `src` through its bends to the top of `dst`, with an arrowhead."""
    tip = (dst[0] + dst[2] / 2, dst[1] - ARROW)       # the arrowhead points down onto the top of `dst`
    points = [(src[0] + src[2] / 2, src[1] + src[3])] + bends + [tip]
    path = f"M{_n(points[0][0])},{_n(points[0][1])}"
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        bend = max(abs(y1 - y0) / 2, 12.0)
        path += f" C{_n(x0)},{_n(y0 + bend)} {_n(x1)},{_n(y1 - bend)} {_n(x1)},{_n(y1)}"
    x, y = tip
    head = f"{_n(x - 2.5)},{_n(y)} {_n(x)},{_n(y + ARROW)} {_n(x + 2.5)},{_n(y)}"
    return (f'<g id="{html.escape(f"e_{a}__{b}")}" class="edge"><title>{html.escape(a)}-&gt;{html.escape(b)}</title>'
            f'<path fill="none" stroke="black" d="{path}"/>'
            f'<polygon fill="black" stroke="black" points="{head}"/></g>')


def svg(d: Drawing) -> str:
    """The drawing laid out here, as SVG marked `data-layout="fallback"` with a note on top."""
    at = arrange(d)
    width, height = at.width + 8, at.height + 8
    byid = {i.id: i for i in d.items + [i for _, members in d.clusters.values() for i in members]}
    parts = [f'<svg width="{_n(width)}pt" height="{_n(height)}pt" viewBox="-4 -4 {_n(width)} {_n(height)}" '
             'xmlns="http://www.w3.org/2000/svg" data-layout="fallback">',
             '<g id="graph0" class="graph">',
             f'<text class="jl-layout-note" x="0" y="12" fill="#888888" {FONT}>{html.escape(NOTE)}</text>']
    parts += [cluster_svg(g, color, at.clusters[g]) for g, (color, _) in d.clusters.items()]
    parts += [edge_svg(a, b, at.items[a], at.items[b], at.bends.get((a, b), [])) for a, b in d.edges]
    parts += [node_svg(byid[i], box) for i, box in at.items.items()]
    parts.append("</g>\n</svg>")
    return "\n".join(parts)
