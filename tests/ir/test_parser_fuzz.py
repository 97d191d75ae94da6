"""Parser fuzzing: valid IR texts, mutated (tokens and lines deleted, duplicated, swapped or
replaced, numbers made huge or negative, types changed, text truncated, bytes inserted),
are read by jl.parse and verified. Every outcome is a Program that round-trips or a
JitlabError: never another exception, never a hang, never a large allocation. Small
programs that verify are also compiled and run at O0."""

from __future__ import annotations

import pathlib
import re
import tracemalloc
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import jitlab as jl
from jitlab.errors import JitlabError
from jitlab.ir import registered_ops
from jitlab.ir.verifier import verify
from jitlab.passes.pipelines import pipeline_for
from tests.explore.fixtures import GROUPED
from tests.ir.test_text import HAND_WRITTEN
from tests.limits import time_limit
from tests.programs import programs

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECONDS = 10                   # one example's parse, verify and O0 run; a hang fails the test
PARSE_BYTES = 32 << 20         # what reading and verifying one small text may allocate at its peak
RUN_ELEMENTS = 1 << 12         # programs whose values hold at most this many elements are run
OUTCOMES: Counter = Counter()  # what the examples came to, for a long run to report


def _views(x):
    a = x.reshape(6, 4).T
    b = np.concatenate([a, a], axis=1)
    s = np.split(b, 2, axis=1)[0]
    return (np.pad(s, ((1, 0), (0, 2))), np.stack([x, x], axis=0)[:, :, 1:, ::2],
            np.expand_dims(x, 0).squeeze(0), np.tile(x, (1, 2, 1)), np.broadcast_to(x[:, :1], (2, 3, 4)))


def _indexing(x, i):
    return (np.take(x, i, axis=0), np.argmax(x, axis=1), np.cumsum(x, axis=2),
            x[:, :, [0, 3]], x[:, i])


def _integers(x, n):
    k = (x * 4).astype(np.int32)
    return (k & n) | (k ^ 3), np.where(k > n, k, n) // 2, (k % 3 == 0).any(axis=1), x.mean(axis=(0, 2)).prod()


def traced_seeds() -> list[str]:
    """IR texts the tracer and the O2 pipeline print, for ops the random programs do not make."""
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    i = np.array([1, 0], np.int64)
    n = np.int32(2) * np.ones((2, 3, 4), np.int32)
    seeds = []
    for f, args in ((_views, (x,)), (_indexing, (x, i)), (_integers, (x, n))):
        program = jl.trace(f, *args)
        seeds += [str(program), str(jl.opt(program, pipeline_for("O2")))]
    return seeds


SEEDS = HAND_WRITTEN + [GROUPED] + [p.read_text() for p in sorted((ROOT / "examples/ir").glob("*.jir"))] \
    + traced_seeds()
LEX = re.compile(r'\s+|"(?:[^"\\\n]|\\.)*"|[%@^]?[A-Za-z0-9_.$?]+|->|==|.', re.S)
VOCAB = ["(", ")", "[", "]", "{", "}", ",", ":", "=", "<", ">", "->", "==", "*", "+", "-", "func", "where",
         "loc", "dense", "true", "false", "none", "inf", "nan", "%0", "%x", "@f", "^bb", "np.add", "np.reshape",
         "jit.group", "jit.yield", "func.return", "f32", "i64", "bool", "u8", "f16", "q32", '"s"', '"\\q"',
         '"\\u12"', '"\\ud800"', "B", "S+1", "0", "1", "-1", "1e999", "1.5", "9" * 5000, str(10**12), str(2**63),
         str(2**64 + 1), str(10**30), "0.0"]
NUMBERS = ["0", "1", "-1", "-7", "3", str(10**12), str(2**31), str(2**63 - 1), str(2**63), str(10**40),
           "9" * 5000, "1e999", "-0.0", "nan", "2*B", "B-3"]
OPS = sorted(op.name for op in registered_ops())
DTYPES = ["bool", "i8", "i32", "i64", "u8", "u64", "f16", "f32", "f64", "c64", "f33", "str"]

REPLACEMENTS = {"number": (lambda t: t[:1].isdigit(), NUMBERS), "dtype": (lambda t: t in DTYPES, DTYPES),
                "op": (lambda t: t in OPS, OPS)}


def _tokens(text: str) -> list[str]:
    return LEX.findall(text)


@st.composite
def _mutate(draw, text: str) -> str:
    toks = _tokens(text)
    kind = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "number", "number", "number", "dtype",
                                 "dtype", "op", "op", "line_delete", "line_duplicate", "line_swap", "truncate",
                                 "insert", "nest"]))
    k = draw(st.integers(0, max(len(toks) - 1, 0)))
    j = draw(st.integers(0, max(len(toks) - 1, 0)))
    if kind == "delete" and toks:
        del toks[k]
    elif kind == "duplicate" and toks:
        toks.insert(k, toks[k])
    elif kind == "swap" and toks:
        toks[k], toks[j] = toks[j], toks[k]
    elif kind == "replace" and toks:
        toks[k] = draw(st.sampled_from(VOCAB))
    elif kind in REPLACEMENTS and toks:
        pick, choices = REPLACEMENTS[kind]
        places = [m for m, t in enumerate(toks) if pick(t)] or [k]
        toks[draw(st.sampled_from(places))] = draw(st.sampled_from(choices))
    elif kind.startswith("line"):
        return _mutate_lines(draw, text, kind)
    elif kind == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    elif kind == "insert":
        junk = draw(st.one_of(st.text(max_size=6), st.binary(max_size=6).map(lambda b: b.decode("latin-1"))))
        toks.insert(k, junk)
    elif kind == "nest":
        toks.insert(k, draw(st.sampled_from(["(", "[", "-", "[["])) * draw(st.integers(1, 3000)))
    return "".join(toks)


def _mutate_lines(draw, text: str, kind: str) -> str:
    lines = text.split("\n")
    k, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
    if kind == "line_delete":
        del lines[k]
    elif kind == "line_duplicate":
        lines.insert(k, lines[k])
    else:
        lines[k], lines[j] = lines[j], lines[k]
    return "\n".join(lines)


@st.composite
def mutated_texts(draw) -> str:
    if draw(st.booleans()):
        text = draw(st.sampled_from(SEEDS))
    else:
        text = str(draw(programs(max_ops=6, dtypes=("f32", "f64"))).program)
    for _ in range(draw(st.integers(1, 3))):
        text = draw(_mutate(text))
    return text


def read(text: str) -> jl.Program | None:
    """The verified Program the text gives, or None after a JitlabError; the peak allocation is checked."""
    tracemalloc.start()
    try:
        program = jl.parse(text, verify=False)
        OUTCOMES["parsed"] += 1
        verify(program)
        OUTCOMES["verified"] += 1
        return program
    except JitlabError as e:
        OUTCOMES[type(e).__name__] += 1
        return None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < PARSE_BYTES + 64 * len(text), f"reading {len(text)} characters allocated {peak} bytes"


def small(program: jl.Program) -> bool:
    values = list(program.inputs) + [r for op in program.walk() for r in op.results]
    return all(v.type.is_static and v.type.size <= RUN_ELEMENTS for v in values)


def example_inputs(program: jl.Program) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(v.type.shape).astype(v.type.dtype) if v.type.dtype.kind == "f"
            else rng.integers(0, 3, v.type.shape).astype(v.type.dtype) for v in program.inputs]


def check(text: str) -> None:
    with time_limit(SECONDS):
        program = read(text)
        if program is None:
            return
        printed = str(program)
        assert str(jl.parse(printed)) == printed
        if small(program):
            try:
                with np.errstate(all="ignore"):
                    jl.compile(program, level="O0")(*example_inputs(program))
                OUTCOMES["ran at O0"] += 1
            except JitlabError as e:
                OUTCOMES[f"O0: {type(e).__name__}"] += 1


@settings(max_examples=300)      # seconds in CI; run longer with settings(max_examples=5000)(test)
@given(mutated_texts())
def test_mutated_ir_gives_a_program_or_a_jitlab_error(text):
    check(text)


def test_every_seed_is_valid_and_round_trips():
    assert len(SEEDS) >= 12
    for text in SEEDS:
        check(text)
        assert read(text) is not None, text
