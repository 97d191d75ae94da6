"""Dimensions: an int, or a symbolic expression (a polynomial over named sizes).

Symbolic dims come from dynamic inputs (`B`, `S`); reshape multiplies them and concat
adds them, so an expression is kept in one canonical form: a sum of integer-weighted
products of symbols. Equal expressions are equal objects, which makes shape inference
and the constraint checks plain comparisons.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ShapeError

Monomial = tuple[str, ...]  # sorted symbol names, repeated for powers; () is the constant


@dataclass(frozen=True)
class Sym:
    """A symbolic dimension: `terms` maps each monomial to its non-zero coefficient."""

    terms: tuple[tuple[Monomial, int], ...]

    @staticmethod
    def named(name: str) -> Sym:
        return Sym((((name,), 1),))

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for mono, _ in self.terms for s in mono)

    @property
    def name(self) -> str | None:
        """The symbol's name if this is one bare symbol, else None."""
        if len(self.terms) == 1 and self.terms[0][1] == 1 and len(self.terms[0][0]) == 1:
            return self.terms[0][0][0]
        return None

    def __add__(self, other: Dim) -> Dim:
        total = _terms(self)
        total.update(_terms(other))      # update, not +: Counter's + drops negative coefficients
        return _make(total)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return _make(Counter({m: -c for m, c in self.terms}))

    def __sub__(self, other: Dim) -> Dim:
        return self + (-_as_sym(other))

    def __rsub__(self, other: Dim) -> Dim:
        return (-self) + other

    def __mul__(self, other: Dim) -> Dim:
        out: Counter = Counter()
        for m1, c1 in _terms(self).items():
            for m2, c2 in _terms(other).items():
                out[tuple(sorted(m1 + m2))] += c1 * c2
        return _make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other: Dim) -> Dim:
        quotient = exact_div(self, other)
        if quotient is None:
            raise ShapeError(f"cannot divide symbolic dim {self} by {other} exactly")
        return quotient

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        total = 0
        for mono, coeff in self.terms:
            value = coeff
            for s in mono:
                if s not in bindings:
                    raise ShapeError(f"symbol {s} has no value")
                value *= bindings[s]
            total += value
        return total

    def __str__(self) -> str:
        parts = []
        for mono, coeff in self.terms:
            body = "*".join(mono)
            if not mono:
                text = str(abs(coeff))
            elif abs(coeff) == 1:
                text = body
            else:
                text = f"{abs(coeff)}*{body}"
            sign = "-" if coeff < 0 else "+"
            parts.append((sign, text))
        first_sign, first = parts[0]
        text = ("-" if first_sign == "-" else "") + first
        return text + "".join(f"{s}{t}" for s, t in parts[1:])

    def __repr__(self) -> str:
        return f"Sym({str(self)!r})"


Dim = int | Sym


def _order(mono: Monomial) -> tuple:
    return (-len(mono), mono)


def _terms(d: Dim) -> Counter:
    if isinstance(d, Sym):
        return Counter(dict(d.terms))
    return Counter({(): int(d)})


def _as_sym(d: Dim) -> Sym:
    return d if isinstance(d, Sym) else Sym((((), int(d)),))


def _make(counter: Counter) -> Dim:
    terms = tuple(sorted(((m, c) for m, c in counter.items() if c != 0), key=lambda t: _order(t[0])))
    if not terms:
        return 0
    if len(terms) == 1 and terms[0][0] == ():
        return terms[0][1]
    return Sym(terms)


def exact_div(a: Dim, b: Dim) -> Dim | None:
    """a / b when it divides exactly as polynomials (b an int or a single monomial), else None."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b != 0 and a % b == 0 else None
    bt = _terms(b)
    if len(bt) != 1:
        return a if a == b else None
    (bmono, bcoeff), = bt.items()
    if bcoeff == 0:
        return None
    out: Counter = Counter()
    for mono, coeff in _terms(a).items():
        rest = Counter(mono)
        rest.subtract(Counter(bmono))
        if any(v < 0 for v in rest.values()) or coeff % bcoeff:
            return None
        out[tuple(sorted(rest.elements()))] += coeff // bcoeff
    return _make(out)


def sym(name: str) -> Sym:
    """A fresh symbolic dim named `name`."""
    return Sym.named(name)


def is_static(shape: tuple[Dim, ...]) -> bool:
    return all(isinstance(d, int) for d in shape)


def evaluate(d: Dim, bindings: Mapping[str, int]) -> int:
    return d.evaluate(bindings) if isinstance(d, Sym) else int(d)


def evaluate_shape(shape: tuple[Dim, ...], bindings: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(evaluate(d, bindings) for d in shape)


def num_elements(shape: tuple[Dim, ...]) -> Dim:
    total: Dim = 1
    for d in shape:
        total = total * d
    return total


def dim_str(d: Dim) -> str:
    return str(d)
