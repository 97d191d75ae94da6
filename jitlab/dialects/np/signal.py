"""The discrete Fourier transform of the `np` dialect, on complex numbers stored as a
trailing dim of (real, imaginary) pairs (or of 1, a real signal)."""

from __future__ import annotations

import numpy as np

from ...ir.attributes import BOOL, INT
from ...ir.opdef import Trait, defop, static_int
from .common import FLOAT, attr, check_dtype, normalize_axis


def _fft_infer(ctx, types, attrs):
    (t,) = types
    check_dtype(ctx, t, FLOAT, "the operand")
    if t.rank < 2 or t.shape[-1] not in (1, 2):
        raise ctx.error(f"{t} must end in a dim of 1 (real) or 2 (real, imaginary)")
    axis, length = attrs["axis"], attrs["length"]
    if normalize_axis(ctx, axis, t.rank - 1) != axis:
        raise ctx.error(f"axis {axis} must be a non-negative signal axis (not the last dim)")
    static_int(t.shape[axis], ctx, f"dim {axis}")
    if length < 1:
        raise ctx.error(f"length must be positive, got {length}")
    inverse, onesided = attrs["inverse"], attrs["onesided"]
    size = length if inverse and onesided else (length // 2 + 1 if onesided else length)
    last = 1 if inverse and onesided else 2
    return [t.with_shape(tuple(size if i == axis else d for i, d in enumerate(t.shape[:-1])) + (last,))]


def _fft(x, axis, length, inverse, onesided):
    """numpy's FFT in the input's precision (complex64 for float16 and float32)."""
    work = np.float64 if x.dtype == np.float64 else np.float32
    signal = x[..., 0].astype(work) if x.shape[-1] == 1 else x[..., 0].astype(work) + 1j * x[..., 1].astype(work)
    if inverse and onesided:
        return np.fft.irfft(signal, n=length, axis=axis)[..., None].astype(x.dtype)
    if inverse:
        out = np.fft.ifft(signal, n=length, axis=axis)
    elif onesided and x.shape[-1] == 1:
        out = np.fft.rfft(signal, n=length, axis=axis)
    else:
        out = np.fft.fft(signal, n=length, axis=axis)
        if onesided:
            out = np.take(out, np.arange(length // 2 + 1), axis=axis)
    return np.stack([out.real, out.imag], axis=-1).astype(x.dtype)


defop("np.fft", attrs={"axis": attr(INT), "length": attr(INT), "inverse": attr(BOOL, False),
                       "onesided": attr(BOOL, False)},
      traits=(Trait.PURE,), infer=_fft_infer, reference=_fft, operand_names=("x",),
      doc="DFT along axis (cut or zero-padded to length); inverse scales by 1/length; onesided keeps the "
          "non-negative frequencies (or, inverse, takes them and gives the real signal).")
