"""The fixed benchmark suite (issue 4 item 9): each benchmark is written once against a
numpy-like namespace `xp`, so numpy, jitlab (which traces the numpy version), jax.numpy and a
torch shim run the same code."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

GELU_C = math.sqrt(2 / math.pi)


def chain(x, y, xp=np):
    """Memory-bound elementwise chain."""
    return xp.maximum((x * y + x - 0.5 * y) ** 2, 0.0)


def tanh_gelu(x, xp=np):
    """Transcendental chain: tanh, then gelu in its tanh form."""
    h = xp.tanh(x)
    return 0.5 * h * (1.0 + xp.tanh(GELU_C * (h + 0.044715 * h * h * h)))


def softmax(x, xp=np):
    """Row softmax, max-subtracted."""
    e = xp.exp(x - xp.max(x, axis=1, keepdims=True))
    return e / xp.sum(e, axis=1, keepdims=True)


def layernorm(x, gamma, beta, xp=np):
    """Row layer normalization with scale and shift."""
    mean = xp.mean(x, axis=1, keepdims=True)
    centered = x - mean
    var = xp.mean(centered * centered, axis=1, keepdims=True)
    return centered / xp.sqrt(var + 1e-5) * gamma + beta


def mlp(x, w1, b1, w2, b2, xp=np):
    """MLP block: two matmuls with bias and relu."""
    return xp.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def mlp_train(x, target, w1, b1, w2, b2, xp=np):
    """A training step of the MLP block as a numpy user writes it: forward, mean squared error,
    backward by hand, SGD; returns the new weights."""
    h = x @ w1 + b1
    a = xp.maximum(h, 0.0)
    d = (a @ w2 + b2 - target) * (2.0 / (target.shape[0] * target.shape[1]))
    da = (d @ w2.T) * (h > 0.0)
    lr = 0.01
    return (w1 - lr * (x.T @ da), b1 - lr * xp.sum(da, axis=0, keepdims=False),
            w2 - lr * (a.T @ d), b2 - lr * xp.sum(d, axis=0, keepdims=False))


TRANSFORMER_HEADS = 4


def transformer(x, ln1_g, ln1_b, wqkv, bqkv, wo, bo, ln2_g, ln2_b, w1, b1, w2, b2, xp=np):
    """A pre-norm transformer encoder block on x (seq, d_model): TRANSFORMER_HEADS-head attention
    and a tanh-gelu MLP, each with a residual connection."""
    s, d = x.shape
    dh = d // TRANSFORMER_HEADS
    qkv = layernorm(x, ln1_g, ln1_b, xp) @ wqkv + bqkv
    q, k, v = (xp.transpose(qkv[:, i * d:(i + 1) * d].reshape(s, TRANSFORMER_HEADS, dh), (1, 0, 2))
               for i in range(3))
    scores = q @ xp.transpose(k, (0, 2, 1)) * (1.0 / math.sqrt(dh))
    e = xp.exp(scores - xp.max(scores, axis=-1, keepdims=True))
    attention = xp.transpose(e / xp.sum(e, axis=-1, keepdims=True) @ v, (1, 0, 2)).reshape(s, d)
    x = x + attention @ wo + bo
    u = layernorm(x, ln2_g, ln2_b, xp) @ w1 + b1
    return x + 0.5 * u * (1.0 + xp.tanh(GELU_C * (u + 0.044715 * u * u * u))) @ w2 + b2


def _transformer_shapes(seq: int, d: int, d_ff: int) -> list[tuple]:
    return [(seq, d), (d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,), (d, d_ff), (d_ff,), (d_ff, d), (d,)]


TINY_OPS = 500


def tiny_chain(x, xp=np):
    """A chain of TINY_OPS cheap elementwise ops, where per-op dispatch cost is everything."""
    for i in range(TINY_OPS // 4):
        x = x * 0.999 + 0.001 * (i % 7)
        x = xp.maximum(x, -1.0)
        x = x - 0.0005
        x = xp.minimum(x, 1.0)
    return x


HEAT_K = 0.1
HEAT_STEPS = 4


def heat(u):
    """Heat equation (Jacobi stencil) written imperatively: HEAT_STEPS explicit time steps,
    each copying the grid and writing its interior in place (the boundary stays fixed)."""
    for _ in range(HEAT_STEPS):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + HEAT_K * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                                    - 4 * u[1:-1, 1:-1])
        u = new
    return u


def conv_loop(x, w):
    """A valid 2-D convolution (x: channels, height, width; w: out, in, k, k) filled pixel by
    pixel into a preallocated output, as a numpy user without a conv function writes it."""
    o, c, k, _ = w.shape
    h, wd = x.shape[1] - k + 1, x.shape[2] - k + 1
    flat = w.reshape(o, c * k * k)
    out = np.zeros((o, h, wd), dtype=np.float32)
    for i in range(h):
        for j in range(wd):
            # copy() before reshape: numba reshapes only contiguous arrays
            out[:, i, j] = flat @ x[:, i:i + k, j:j + k].copy().reshape(c * k * k)
    return out


LOOP_K, LOOP_DT, LOOP_SOFTENING = np.float32(0.1), np.float32(0.01), np.float32(0.01)


def heat_loop(u):
    """A 1-D heat stencil time loop, 10,000 steps (issue 31's figure): one scf.for when captured."""
    for _ in range(10_000):
        u = u + LOOP_K * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def heat_loop_10(u):
    """heat_loop with 10 steps: its compile time against heat_loop's (it must not grow with the steps)."""
    for _ in range(10):
        u = u + LOOP_K * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def floyd_warshall(d):
    """All-pairs shortest paths: a loop over the pivot reading a row and a column at the loop's index
    (the distances made non-negative first: a negative cycle would run them to -inf)."""
    d = np.abs(d)
    for k in range(d.shape[0]):
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return d


def nbody(pos, vel):
    """An N-body step loop (softened gravity, unit masses, explicit Euler), 10 steps."""
    for _ in range(10):
        diff = pos.reshape(1, -1, 3) - pos.reshape(-1, 1, 3)
        r2 = (diff * diff).sum(axis=2) + LOOP_SOFTENING
        inv = 1 / (r2 * np.sqrt(r2))
        vel = vel + LOOP_DT * (diff * inv.reshape(inv.shape[0], inv.shape[1], 1)).sum(axis=1)
        pos = pos + LOOP_DT * vel
    return pos, vel


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its function, how to make its inputs, and its traffic."""

    name: str
    fn: Callable                       # numpy-like function of arrays (and xp=)
    shapes: dict[bool, list[tuple]]    # quick -> input shapes
    memory_bound: bool                 # whether the streaming lower bound is a meaningful target
    rtol: float = 1e-4                 # result tolerance against numpy (float32 arithmetic)
    atol: float = 1e-5
    weights: bool = False              # 2-D inputs after the first are weights, scaled by 1/sqrt(fan-in)
    imperative: bool = False           # plain numpy with in-place writes (no xp=): numpy, numba and jitlab run it
    label: dict[bool, str] | None = None   # quick -> the size column's text, where the shapes are too many to list
    loops: bool = False                # jitlab traces it under jl.capture_loops: its loops become scf ops

    def inputs(self, quick: bool, seed: int = 0) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        arrays = [rng.standard_normal(s, dtype=np.float32) for s in self.shapes[quick]]
        if self.weights:
            arrays[1:] = [a / np.float32(math.sqrt(a.shape[0])) if a.ndim == 2 else a for a in arrays[1:]]
        return tuple(arrays)

    def bytes_moved(self, inputs, output: np.ndarray) -> int:
        """Bytes a perfect kernel must read and write: every input once and the output once."""
        return sum(a.nbytes for a in inputs) + output.nbytes

    def size(self, quick: bool) -> str:
        if self.label:
            return self.label[quick]
        return " ".join("x".join(map(str, s)) for s in self.shapes[quick])


SUITE = [
    Benchmark("chain", chain, {False: [(1 << 24,), (1 << 24,)], True: [(1 << 16,), (1 << 16,)]}, True),
    Benchmark("tanh_gelu", tanh_gelu, {False: [(1 << 24,)], True: [(1 << 14,)]}, True),
    Benchmark("softmax", softmax, {False: [(4096, 1024)], True: [(256, 128)]}, True),
    Benchmark("layernorm", layernorm, {False: [(4096, 1024), (1024,), (1024,)], True: [(256, 128), (128,), (128,)]},
              True, rtol=1e-3, atol=1e-4),
    Benchmark("mlp", mlp, {False: [(256, 1024), (1024, 4096), (4096,), (4096, 1024), (1024,)],
                           True: [(32, 64), (64, 256), (256,), (256, 64), (64,)]}, False, rtol=1e-3, atol=1e-3,
              weights=True),
    Benchmark("mlp_train", mlp_train, {False: [(256, 1024), (256, 1024), (1024, 4096), (4096,), (4096, 1024), (1024,)],
                                       True: [(32, 64), (32, 64), (64, 256), (256,), (256, 64), (64,)]}, False,
              rtol=1e-3, atol=1e-3, weights=True),
    Benchmark("transformer", transformer, {False: _transformer_shapes(128, 256, 1024),
                                           True: _transformer_shapes(16, 32, 64)}, False, rtol=1e-3, atol=1e-3,
              weights=True, label={False: "seq 128, d 256, d_ff 1024", True: "seq 16, d 32, d_ff 64"}),
    Benchmark("tiny_500", tiny_chain, {False: [(64,)], True: [(64,)]}, False),
    Benchmark("heat", heat, {False: [(2048, 2048)], True: [(128, 128)]}, True, imperative=True),
    # 8x8 output pixels at both sizes; both pixel loops are captured, the inner one called from the outer's
    # native loop (docs/control-flow.md)
    Benchmark("conv_loop", conv_loop, {False: [(128, 10, 10), (128, 128, 3, 3)], True: [(8, 10, 10), (16, 8, 3, 3)]},
              False, rtol=1e-3, atol=1e-3, imperative=True),
]

# Loops captured into scf ops (issue 31): in a full run and by --only, not in --quick's smoke run
# (their step counts are the figures' own: 10,000 steps take numpy seconds).
LOOP_SUITE = [
    Benchmark("heat_loop", heat_loop, {False: [(4096,)], True: [(4096,)]}, False, imperative=True, loops=True,
              rtol=1e-3, atol=1e-4),
    Benchmark("heat_loop_10", heat_loop_10, {False: [(4096,)], True: [(4096,)]}, False, imperative=True, loops=True),
    Benchmark("floyd_warshall", floyd_warshall, {False: [(512, 512)], True: [(64, 64)]}, False, imperative=True,
              loops=True),
    Benchmark("nbody", nbody, {False: [(1024, 3), (1024, 3)], True: [(64, 3), (64, 3)]}, False, imperative=True,
              loops=True, rtol=1e-3, atol=1e-3),
]


def flat(result, to_numpy=np.asarray) -> np.ndarray:
    """A benchmark's result as one array: several outputs (new weights) raveled end to end."""
    if isinstance(result, (tuple, list)):
        return np.concatenate([np.ravel(to_numpy(r)) for r in result])
    return to_numpy(result)


def by_name(names: list[str] | None, quick: bool = False) -> list[Benchmark]:
    """The benchmarks named, or by default the suite (with the loops, but for a quick run)."""
    if not names:
        return list(SUITE) + ([] if quick else list(LOOP_SUITE))
    known = {b.name: b for b in SUITE + LOOP_SUITE}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; the suite has {', '.join(known)}")
    return [known[n] for n in names]
