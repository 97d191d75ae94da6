"""O2's program-wide source knows which of its lines each group generated; the Kernels view marks them."""

import re

import numpy as np
import pytest

import jitlab as jl
from jitlab.explore.session import from_object

CALL = re.compile(r"\b(g\d+)_(par|seq)\(")
DEF = re.compile(r"^def (g\d+)_(par|seq)\(")


def model(x, w1, w2):
    h = np.maximum(x @ w1 * 2.0 + 1.0, 0.0)
    return np.tanh(h @ w2) + np.exp(-h.sum(axis=1, keepdims=True))


@pytest.fixture(scope="module")
def exe():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (32, 4))]
    exe = jl.compile(jl.trace(model, *args), level="O2")
    exe(*args)
    return exe


def test_each_group_owns_its_calls_and_its_kernel(exe):
    (record,) = [k for k in exe.report.kernels if k.group_lines]
    lines = record.source.splitlines()
    assert set(record.group_lines) == {g.id for g in exe.report.groups}
    owner = {}
    for gid, spans in record.group_lines.items():
        assert all(1 <= a <= b <= len(lines) for a, b in spans)
        text = [lines[i - 1] for a, b in spans for i in range(a, b + 1)]
        defined = {m.group(1) for line in text if (m := DEF.match(line))}
        called = {m.group(1) for line in text if not DEF.match(line) and (m := CALL.search(line))}
        # A group that calls a generated kernel holds that kernel's definition too.
        assert called <= defined and len(called) <= 1, (gid, called, defined)
        for a, b in spans:
            for i in range(a, b + 1):
                if lines[i - 1].startswith("    ") and not DEF.match(lines[i - 1]) and CALL.search(lines[i - 1]):
                    owner.setdefault(i, set()).add(gid)
    # Every kernel call inside a segment function is exactly one group's line.
    segment = False
    calls = []
    for i, line in enumerate(lines, 1):
        if line.startswith("def "):
            segment = line.startswith("def segment")
        if segment and CALL.search(line):
            calls.append(i)
    assert calls and all(len(owner.get(i, ())) == 1 for i in calls)


def test_kernels_data_carries_the_line_ranges(exe):
    (kernel,) = [k for k in from_object(exe).build()["kernels"] if k["group_lines"]]
    (record,) = [k for k in exe.report.kernels if k.group_lines]
    assert kernel["group_lines"] == {str(g): [list(s) for s in spans] for g, spans in record.group_lines.items()}
