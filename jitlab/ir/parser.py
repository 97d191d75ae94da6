"""Reads IR text back into a Program. A recursive-descent parser over a regex lexer;
it builds values and ops only, never evaluates code, and reports line and column."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import JitlabError, ParseError, ShapeError
from .attributes import Dense
from .core import Block, Location, Operation, Region, Value
from .dtypes import DTYPE_NAMES, dtype_from_name
from .opdef import ConstraintSet
from .program import Program
from .shapes import Dim, sym
from .types import TensorType

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|//[^\n]*)
  | (?P<nl>\n)
  | (?P<value>%[A-Za-z0-9_.$?]+)
  | (?P<symbol>@[A-Za-z0-9_.$]+)
  | (?P<block>\^bb)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.$]*)
  | (?P<punct>->|==|[()\[\]{},:=<>*+\-])
""", re.VERBOSE)


MAX_DEPTH = 200     # brackets, signs and regions nested deeper are an error, not a RecursionError
MAX_INT = 2**64 - 1     # the largest integer any dtype holds: longer literals are an error, not a huge int
MAX_DIM = 2**63 - 1     # the largest dimension an int64 shape holds
MAX_TERMS, MAX_DEGREE = 64, 16      # of a symbolic dim: (A+B+C)*(A+B+C)*... grows exponentially


@dataclass
class Token:
    kind: str
    text: str
    line: int
    col: int


def tokenize(text: str) -> list[Token]:
    tokens, pos, line, line_start = [], 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1,
                             _line_text(text, line))
        kind = m.lastgroup
        if kind == "nl":
            line, line_start = line + 1, m.end()
        elif kind != "ws":
            tokens.append(Token(kind, m.group(), line, pos - line_start + 1))
        pos = m.end()
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens


def _line_text(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


class Parser:
    """One parse of one text; `parse_program` is the entry point."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.scope: dict[str, Value] = {}
        self.op_lines: dict[int, int] = {}
        self.depth = 0

    # -- token helpers -------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.tok
        found = "end of input" if tok.kind == "eof" else repr(tok.text)
        return ParseError(f"{message}, found {found}", tok.line, tok.col, _line_text(self.text, tok.line))

    def next(self) -> Token:
        tok = self.tok
        self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind in ("punct", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text):
            raise self.error(f"expected {what or repr(text)}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}")
        return self.next()

    @contextlib.contextmanager
    def nested(self):
        """One level deeper into brackets, a sign or a region, within MAX_DEPTH."""
        if self.depth >= MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def integer(self, tok: Token) -> int:
        """The value of an int token, which no dtype's range can be exceeded by."""
        digits = tok.text.lstrip("0") or "0"
        if len(digits) > len(str(MAX_INT)) or int(digits) > MAX_INT:
            short = tok.text if len(tok.text) <= 24 else f"{tok.text[:20]}… ({len(tok.text)} digits)"
            raise self.error(f"integer {short} is out of range (at most 2**64 - 1)", tok)
        return int(digits)

    def string(self, tok: Token) -> str:
        """The value of a string token: JSON's escapes, no raw control characters."""
        try:
            return json.loads(tok.text)
        except ValueError as e:
            raise self.error(f"malformed string ({e.msg})", tok) from None

    def comma_list(self, close: str, item) -> list:
        items = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            self.expect(",", f"',' or {close!r}")

    # -- program -------------------------------------------------------------------
    def parse_program(self) -> Program:
        self.expect("func", "'func'")
        name = self.expect_kind("symbol", "a function name like @main").text[1:]
        self.expect("(")
        args = self.comma_list(")", self.parse_arg)
        self.expect("->", "'->'")
        self.expect("(")
        out_types = self.comma_list(")", self.parse_type)
        constraints = ConstraintSet()
        if self.accept("where"):
            while True:
                start, a = self.tok, self.parse_dim()
                self.expect("==", "'=='")
                try:
                    constraints.add(a, self.parse_dim(), "declared")
                except ShapeError as e:
                    raise ParseError(f"the constraints cannot all hold: {e}", start.line, start.col,
                                     _line_text(self.text, start.line)) from None
                if not self.accept(","):
                    break
        program = Program(name, [t for _, t, _ in args], [n for n, _, _ in args], constraints=constraints)
        for (n, _, tok), value in zip(args, program.inputs):
            self.define(n, value, tok)
        self.expect("{")
        self.parse_ops(program.body)
        self.expect("}", "'}' closing the function")
        if self.tok.kind != "eof":
            raise self.error("expected end of input after the function")
        self.check_return(program, out_types)
        return program

    def check_return(self, program: Program, out_types: list[TensorType]) -> None:
        term = program.body.terminator
        if term is None or term.name != "func.return":
            raise ParseError("the function body must end with func.return", self.tok.line, 1)
        got = [v.type for v in term.operands]
        if got != out_types:
            line = self.op_lines.get(term.uid, 1)
            raise ParseError(f"func.return gives ({', '.join(map(str, got))}) but the header declares "
                             f"({', '.join(map(str, out_types))})", line, 1, _line_text(self.text, line))

    def parse_arg(self) -> tuple[str, TensorType, Token]:
        tok = self.expect_kind("value", "an argument like %x")
        self.expect(":", "':' and a type")
        return tok.text[1:], self.parse_type(), tok

    def define(self, name: str, value: Value, tok: Token) -> None:
        if name in self.scope:
            raise ParseError(f"value %{name} is defined twice", tok.line, tok.col, _line_text(self.text, tok.line))
        value.name = name
        self.scope[name] = value

    # -- ops -------------------------------------------------------------------------
    def parse_ops(self, block: Block) -> None:
        while not self.at("}") and self.tok.kind not in ("eof", "block"):
            block.append(self.parse_op())

    def parse_op(self) -> Operation:
        start = self.tok
        results: list[Token] = []
        if self.tok.kind == "value":
            results = [self.next()]
            while self.accept(","):
                results.append(self.expect_kind("value", "a result name"))
            self.expect("=", "'='")
        name_tok = self.expect_kind("ident", "an op name like np.add")
        self.expect("(", "'(' and the operands")
        operands = self.comma_list(")", self.parse_operand)
        attrs = self.parse_attr_dict() if self.at("{") else {}
        types: list[TensorType] = []
        if self.accept(":"):
            if self.accept("("):
                self.expect(")", "')'")
            else:
                types = [self.parse_type()]
                while self.accept(","):
                    types.append(self.parse_type())
        if len(types) != len(results):
            raise ParseError(f"{name_tok.text} names {len(results)} result(s) but gives {len(types)} type(s)",
                             name_tok.line, name_tok.col, _line_text(self.text, name_tok.line))
        loc = self.parse_loc() if self.at("loc") else None
        try:
            op = Operation(name_tok.text, operands, types, attrs, loc=loc)
        except JitlabError as e:
            raise ParseError(str(e), name_tok.line, name_tok.col, _line_text(self.text, name_tok.line)) from None
        self.op_lines[op.uid] = start.line
        for tok, value in zip(results, op.results):
            self.define(tok.text[1:], value, tok)
        if self.accept("{"):
            with self.nested():
                self.parse_regions(op)
        return op

    def parse_operand(self) -> Value:
        tok = self.expect_kind("value", "an operand like %0")
        if tok.text[1:] not in self.scope:
            raise ParseError(f"use of undefined value {tok.text}", tok.line, tok.col, _line_text(self.text, tok.line))
        return self.scope[tok.text[1:]]

    def parse_regions(self, op: Operation) -> None:
        while True:
            region = op.add_region(Region())
            if self.tok.kind != "block":
                raise self.error("expected '^bb(...)' starting a region")
            while self.tok.kind == "block":
                self.next()
                self.expect("(")
                args = self.comma_list(")", self.parse_arg)
                self.expect(":", "':' after the block arguments")
                block = region.add_block(Block([t for _, t, _ in args]))
                for (n, _, tok), value in zip(args, block.args):
                    self.define(n, value, tok)
                self.parse_ops(block)
            self.expect("}", "'}' closing the region")
            if not self.accept("{"):
                return

    def parse_loc(self) -> Location:
        self.expect("loc")
        self.expect("(")
        file = self.string(self.expect_kind("string", "a file name"))
        self.expect(":")
        line = self.integer(self.expect_kind("int", "a line number"))
        scope: list[str] = []
        if self.accept("scope"):
            self.expect("[", "'[' and the scope's names")
            scope = self.comma_list("]", lambda: self.string(self.expect_kind("string", "a scope name")))
        self.expect(")")
        return Location(file, line, scope=tuple(scope))

    # -- types and dims ------------------------------------------------------------
    def parse_type(self) -> TensorType:
        tok = self.expect_kind("ident", "a type like f32[2,3]")
        if tok.text not in DTYPE_NAMES:
            raise self.error(f"unknown element type {tok.text!r} (expected one of "
                             f"{', '.join(sorted(DTYPE_NAMES))})", tok)
        self.expect("[", "'[' and the shape")
        dims = self.comma_list("]", self.parse_dim)
        for d in dims:
            if isinstance(d, int) and not 0 <= d <= MAX_DIM:
                raise self.error("dimensions cannot be negative" if d < 0 else
                                 "a dimension is too large (at most 2**63 - 1)", tok)
        return TensorType(tuple(dims), dtype_from_name(tok.text))

    def parse_dim(self) -> Dim:
        value = self.parse_term()
        while self.at("+") or self.at("-"):
            op = self.next()
            value = self.bounded(value + self.parse_term() if op.text == "+" else value - self.parse_term(), op)
        return value

    def parse_term(self) -> Dim:
        value = self.parse_factor()
        while self.at("*"):
            op = self.next()
            value = self.bounded(value * self.parse_factor(), op)
        return value

    def bounded(self, d: Dim, tok: Token) -> Dim:
        """`d`, checked to stay small: each expanded product costs time, each digit memory."""
        terms = [((), d)] if isinstance(d, int) else d.terms
        if len(terms) > MAX_TERMS or any(len(m) > MAX_DEGREE or abs(c) > MAX_INT for m, c in terms):
            raise self.error(f"dimension expression too large (at most {MAX_TERMS} terms of degree "
                             f"{MAX_DEGREE}, coefficients within 2**64 - 1)", tok)
        return d

    def parse_factor(self) -> Dim:
        if self.accept("-"):
            with self.nested():
                return -self.parse_factor()
        if self.accept("("):
            with self.nested():
                value = self.parse_dim()
            self.expect(")")
            return value
        tok = self.tok
        if tok.kind == "int":
            return self.integer(self.next())
        if tok.kind == "ident" and tok.text not in DTYPE_NAMES and tok.text not in _KEYWORDS:
            self.next()
            return sym(tok.text)
        raise self.error("expected a dimension (an integer or a symbol)")

    # -- attributes ----------------------------------------------------------------
    def parse_attr_dict(self) -> dict[str, Any]:
        self.expect("{")
        attrs: dict[str, Any] = {}

        def item():
            key = self.expect_kind("ident", "an attribute name")
            self.expect("=", "'=' after the attribute name")
            if key.text in attrs:
                raise self.error(f"attribute {key.text!r} given twice", key)
            attrs[key.text] = self.parse_attr_value()

        self.comma_list("}", item)
        return attrs

    def parse_attr_value(self) -> Any:
        tok = self.tok
        if tok.kind == "string":
            return self.string(self.next())
        if self.accept("["):
            with self.nested():
                return tuple(self.comma_list("]", self.parse_attr_value))
        if tok.kind == "ident" and tok.text in _KEYWORDS:
            self.next()
            return _KEYWORDS[tok.text]
        if tok.kind == "ident" and tok.text in DTYPE_NAMES:
            self.next()
            return dtype_from_name(tok.text)
        if tok.kind == "ident" and tok.text == "dense":
            return self.parse_dense()
        if tok.kind == "float":
            self.next()
            return float(tok.text)
        if tok.text == "-" and self.tokens[self.pos + 1].kind == "float" or (
                tok.text == "-" and self.tokens[self.pos + 1].text == "inf"):
            self.next()
            with self.nested():
                return -self.parse_attr_value()
        return self.parse_dim()

    def parse_dense(self) -> Dense:
        self.expect("dense")
        self.expect("<", "'<'")
        t = self.parse_type()
        if not t.is_static:
            raise self.error("a dense constant needs a static shape")
        start = self.tok
        data = self.parse_nested()
        self.expect(">", "'>' closing the dense constant")
        try:
            array = np.array(data, dtype=t.dtype)
        except (ValueError, OverflowError, TypeError) as e:      # TypeError: a complex value in a real dtype
            raise self.error(f"dense values do not fit {t}: {e}", start) from None
        if array.shape != t.shape:
            raise self.error(f"dense values have shape {list(array.shape)} but the type says {t}", start)
        return Dense(array)

    def parse_nested(self) -> Any:
        if self.accept("["):
            with self.nested():
                return self.comma_list("]", self.parse_nested)
        if self.accept("("):        # a complex number: (real, imaginary)
            real = self.parse_number()
            self.expect(",", "',' between the real and imaginary parts")
            imag = self.parse_number()
            self.expect(")", "')' closing the complex number")
            return complex(real, imag)
        return self.parse_number()

    def parse_number(self) -> Any:
        negative = self.accept("-")
        tok = self.next()
        if tok.kind == "float":
            value: Any = float(tok.text)
        elif tok.kind == "int":
            value = self.integer(tok)
        elif tok.text in ("true", "false", "inf", "nan"):
            value = _KEYWORDS[tok.text]
        else:
            raise self.error("expected a number", tok)
        return -value if negative else value


_KEYWORDS: dict[str, Any] = {"true": True, "false": False, "none": None,
                             "inf": float("inf"), "nan": float("nan")}


def parse(text: str, weights: dict[str, np.ndarray] | None = None, verify: bool = True) -> Program:
    """Reads a Program from IR text; `weights` gives the arrays its np.weight ops name."""
    if not isinstance(text, str):
        raise ParseError(f"IR text must be a str, got {type(text).__name__}", 1, 1)
    parser = Parser(text)
    program = parser.parse_program()
    if weights:
        program.weights.update({k: np.asarray(v) for k, v in weights.items()})
    if verify:
        from .verifier import verify as run_verifier

        run_verifier(program, op_lines=parser.op_lines)
    return program
