"""A ResNet-50-shaped numpy model (NHWC, bottleneck blocks 3-4-6-3) for large-graph checks."""

import numpy as np


def conv3x3(x, w, stride):
    """A 3x3 convolution as nine shifted slices concatenated along channels, then one matmul."""
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, wd = x.shape[1], x.shape[2]
    taps = [p[:, i:i + h:stride, j:j + wd:stride, :] for i in range(3) for j in range(3)]
    return np.concatenate(taps, axis=3) @ w


def bottleneck(x, params, stride):
    w1, w2, w3, scale, shift, proj = params
    h = np.maximum(x @ w1 * scale[0] + shift[0], 0.0)
    h = np.maximum(conv3x3(h, w2, stride) * scale[1] + shift[1], 0.0)
    h = h @ w3 * scale[2] + shift[2]
    skip = x[:, ::stride, ::stride, :] @ proj if proj is not None else x
    return np.maximum(h + skip, 0.0)


def make_params(rng, width=8, blocks=(3, 4, 6, 3)):
    """Small random weights in ResNet-50's layout: (block params, stride) per bottleneck."""
    layers, cin = [], width
    for stage, n in enumerate(blocks):
        mid = width * 2 ** stage
        for b in range(n):
            cout, stride = mid * 4, (2 if b == 0 and stage > 0 else 1)
            w = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
            scale = [w(c) + 1 for c in (mid, mid, cout)]
            shift = [w(c) for c in (mid, mid, cout)]
            proj = w(cin, cout) if b == 0 else None
            layers.append(((w(cin, mid), w(9 * mid, mid), w(mid, cout), scale, shift, proj), stride))
            cin = cout
    return layers


def resnet(x, stem, layers, head):
    h = np.maximum(x @ stem, 0.0)
    for params, stride in layers:
        h = bottleneck(h, params, stride)
    return h.mean(axis=(1, 2)) @ head


def example(rng=None, size=16, width=8):
    """(function of x, x): the model with its weights captured as constants."""
    rng = rng or np.random.default_rng(0)
    layers = make_params(rng, width)
    stem = (rng.standard_normal((3, width)) * 0.1).astype(np.float32)
    head = (rng.standard_normal((width * 32, 10)) * 0.1).astype(np.float32)
    x = rng.standard_normal((2, size, size, 3)).astype(np.float32)
    return (lambda x: resnet(x, stem, layers, head)), x
