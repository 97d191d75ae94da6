"""Property tests of the handlers with many attributes, against onnxruntime (an independent
implementation that follows the ONNX spec) and numpy: random slices, pads, reshapes,
convolutions, pools, resizes, einsums and recurrent cells with variable lengths."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from onnx import helper

from tests.onnx.models import jitlab_run, model, onnxruntime_run, reference, tensor
from tests.programs import assert_same

pytest.importorskip("onnxruntime")

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


def check(m, feeds, rtol=1e-5, atol=1e-5):
    assert_same(jitlab_run(m, feeds), onnxruntime_run(m, feeds), rtol=rtol, atol=atol)


def _data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@given(shapes, st.data())
def test_slice_clamps_as_the_spec_says(shape, data):
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                              unique_by=lambda a: a % len(shape)))
    bound = st.one_of(st.integers(-8, 8), st.sampled_from([2**62, -2**62]))
    starts = [data.draw(bound) for _ in axes]
    ends = [data.draw(bound) for _ in axes]
    steps = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes]
    inits = {"s": np.array(starts), "e": np.array(ends), "a": np.array(axes), "st": np.array(steps)}
    m = model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])], [tensor("x", np.float32, shape)],
              [tensor("y", np.float32, [None] * len(shape))], inits, opset=13)
    check(m, {"x": _data(shape)})


@given(shapes, st.sampled_from(["constant", "reflect", "edge", "wrap"]), st.data())
def test_pad_modes(shape, mode, data):
    low = 0 if mode != "constant" else -1
    high = [d - 1 if mode == "reflect" else 4 for d in shape]
    pads = [data.draw(st.integers(low, max(low, h))) for h in high] * 2
    assume(all(d + pads[i] + pads[len(shape) + i] >= 0 for i, d in enumerate(shape)))
    inits = {"p": np.array(pads), "v": np.array(1.5, np.float32)}
    m = model([helper.make_node("Pad", ["x", "p", "v"], ["y"], mode=mode)], [tensor("x", np.float32, shape)],
              [tensor("y", np.float32, [None] * len(shape))], inits, opset=19)
    check(m, {"x": _data(shape)})


@given(st.sampled_from([(2, 3, 4), (6, 4), (24,)]), st.sampled_from([[0, -1], [-1, 2], [4, 0, -1], [2, 0, 0],
                                                                      [0, 0, 2, 2]]))
def test_reshape_with_zero_and_minus_one(shape, target):
    size = int(np.prod(shape))
    resolved = [shape[i] if t == 0 and i < len(shape) else t for i, t in enumerate(target)]
    assume(all(r != 0 for r in resolved))
    known = int(np.prod([r for r in resolved if r != -1]))
    assume(size % known == 0 and (-1 in resolved or known == size))
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [tensor("x", np.float32, shape)],
              [tensor("y", np.float32, [None] * len(target))], {"shape": np.array(target)})
    check(m, {"x": _data(shape)})


@given(st.integers(1, 3), st.data())
def test_conv_and_conv_transpose(rank, data):
    groups = data.draw(st.sampled_from([1, 2]))
    channels, out = 2 * groups, 2 * groups
    kernel = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [data.draw(st.integers(0, 1)) for _ in range(2 * rank)]
    size = [data.draw(st.integers(4, 6)) for _ in range(rank)]
    assume(all((k - 1) * d + 1 <= s + pads[i] + pads[rank + i] for i, (k, d, s) in enumerate(zip(kernel, dil, size))))
    transpose = data.draw(st.booleans())
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dil, "pads": pads, "group": groups}
    if transpose:
        attrs["output_padding"] = [data.draw(st.integers(0, min(s, d) - 1)) for s, d in zip(strides, dil)]
        w_shape = (channels, out // groups, *kernel)
    else:
        w_shape = (out, channels // groups, *kernel)
    node = helper.make_node("ConvTranspose" if transpose else "Conv", ["x", "w", "b"], ["y"], **attrs)
    m = model([node], [tensor("x", np.float32, (1, channels, *size))], [tensor("y", np.float32, [None] * (rank + 2))],
              {"w": _data(w_shape, 1), "b": _data((out,), 2)})
    check(m, {"x": _data((1, channels, *size))}, rtol=1e-4, atol=1e-4)


@given(st.integers(1, 3), st.sampled_from(["MaxPool", "AveragePool", "LpPool"]), st.data())
def test_pools(rank, op, data):
    kernel = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    pads = [data.draw(st.integers(0, k - 1)) for k in kernel] * 2
    attrs = {"kernel_shape": kernel, "strides": [data.draw(st.integers(1, 2)) for _ in range(rank)], "pads": pads}
    if op != "LpPool":
        attrs["ceil_mode"] = int(data.draw(st.booleans()))
    if op == "AveragePool":
        attrs["count_include_pad"] = int(data.draw(st.booleans()))
    if op == "MaxPool":
        attrs["dilations"] = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    size = [data.draw(st.integers(3, 6)) for _ in range(rank)]
    dil = attrs.get("dilations", [1] * rank)
    assume(all((k - 1) * d + 1 <= s + pads[i] + pads[rank + i] for i, (k, d, s) in enumerate(zip(kernel, dil, size))))
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], [tensor("x", np.float32, (2, 2, *size))],
              [tensor("y", np.float32, [None] * (rank + 2))], opset=18)
    check(m, {"x": _data((2, 2, *size))}, rtol=1e-4, atol=1e-5)


@given(st.sampled_from(["nearest", "linear", "cubic"]),
       st.sampled_from(["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "half_pixel_symmetric"]),
       st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
       st.lists(st.sampled_from([0.5, 0.75, 1.0, 1.5, 2.0, 2.5]), min_size=2, max_size=2), st.booleans())
def test_resize_modes(mode, transform, nearest, scales, exclude_outside):
    attrs = {"mode": mode, "coordinate_transformation_mode": transform, "nearest_mode": nearest,
             "exclude_outside": int(exclude_outside and mode == "cubic")}
    """Against onnx's reference, which the conformance cases come from: onnxruntime's align_corners
    divides by the integer output length, the spec (and reference) by scale * length."""
    m = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)], [tensor("x", np.float32, (1, 2, 5, 4))],
              [tensor("y", np.float32, [None] * 4)], {"scales": np.array([1.0, 1.0, *scales], np.float32)}, opset=19)
    feeds = {"x": _data((1, 2, 5, 4))}
    assert_same(jitlab_run(m, feeds), reference(m, feeds), rtol=1e-4, atol=1e-5)


EQUATIONS = ["ij,jk->ik", "bij,bjk->bik", "ii->i", "ii", "ij->ji", "i,i", "ij,ij->", "...ij,...jk->...ik",
             "bii->bi", "abc,cd->abd", "ij,jk,kl->il", "i,j->ij", "ba,ca->bc"]


@pytest.mark.parametrize("equation", EQUATIONS)
def test_einsum_matches_numpy(equation):
    rng = np.random.default_rng(3)
    terms = equation.split("->")[0].split(",")
    sizes = dict(zip("abcdijkl", (2, 3, 4, 5, 3, 3, 4, 2)))
    operands = [rng.standard_normal([sizes[c] for c in t.replace("...", "")] if "..." not in t
                                    else (2, *[sizes[c] for c in t.replace("...", "")])).astype(np.float32)
                for t in terms]
    names = [f"x{i}" for i in range(len(operands))]
    expected = np.einsum(equation, *operands)
    m = model([helper.make_node("Einsum", names, ["y"], equation=equation)],
              [tensor(nm, np.float32, a.shape) for nm, a in zip(names, operands)],
              [tensor("y", np.float32, expected.shape)])
    assert_same(jitlab_run(m, dict(zip(names, operands))), [expected], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_cells_with_variable_lengths(op, direction):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    dirs, hidden, steps, batch, features = (2 if direction == "bidirectional" else 1), 3, 4, 3, 2
    inits = {"W": _data((dirs, gates * hidden, features), 1), "R": _data((dirs, gates * hidden, hidden), 2),
             "B": _data((dirs, 2 * gates * hidden), 3), "lens": np.array([4, 1, 2], np.int32)}
    node = helper.make_node(op, ["x", "W", "R", "B", "lens"], ["y", "y_h"], hidden_size=hidden, direction=direction)
    m = model([node], [tensor("x", np.float32, (steps, batch, features))],
              [tensor("y", np.float32, (steps, dirs, batch, hidden)), tensor("y_h", np.float32, (dirs, batch, hidden))],
              inits)
    check(m, {"x": _data((steps, batch, features))}, rtol=1e-4, atol=1e-5)


@given(st.sampled_from(["linear", "nearest", "cubic"]), st.sampled_from(["zeros", "border", "reflection"]),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_grid_sample_against_the_reference(mode, padding, align, seed):
    """Grid points spread past the borders on every side, so every padding rule is exercised."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, (1, 3, 4, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=int(align))
    m = model([node], [tensor("x", np.float32, x.shape), tensor("grid", np.float32, grid.shape)],
              [tensor("y", np.float32, (1, 2, 3, 4))], opset=20)
    feeds = {"x": x, "grid": grid}
    assert_same(jitlab_run(m, feeds), reference(m, feeds), rtol=1e-4, atol=1e-5)
