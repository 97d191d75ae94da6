"""Every generated CUDA kernel lowered to PTX for a real architecture, without a GPU.

The simulator runs kernels as Python: it never types them for the device, never lowers them,
and never shows what NVVM makes of a barrier. This check generates the kernels of the bench
programs, of programs covering every kernel kind and scalar rule, and of random programs
(tests/programs.py, when run from a checkout), lowers each with `numba.cuda.compile_ptx` for
sm_90, and compares the block barriers (`bar.sync`, `bar.red`, `barrier.*`) in the PTX with
the barrier calls of the source: a barrier the compiler duplicated onto two paths (numba issue
#9770, a hang) shows as more barriers than the source has. Loops inside a kernel's outermost
loop may be unrolled, multiplying their barriers: the count must then be the barriers outside
such loops plus a whole multiple of those inside.

It needs NVVM and NVRTC (pip's nvidia-nvvm and nvidia-cuda-nvrtc, or a CUDA toolkit), no driver.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import types
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

ARCH = (9, 0)
BARRIER_PTX = re.compile(r"^\s*(?:@!?%\w+\s+)?(bar\.sync|bar\.red|barrier\.sync|barrier\.red|bar\.arrive"
                         r"|barrier\.cta)\b", re.M)


@dataclass
class Lowered:
    """One kernel's PTX verdict."""

    program: str
    layout: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"PTX {'ok  ' if self.ok else 'FAIL'}  {self.program}: {self.layout} kernel{self.detail}"


def nvvm_missing() -> str | None:
    """Why PTX cannot be made here, or None when NVVM and NVRTC load."""
    try:
        from numba import cuda
        from numba.core import types as nt

        cuda.compile_ptx(lambda a: None, (nt.float32[::1],), cc=ARCH)
    except Exception as e:          # numba raises its own errors for a missing NVVM or NVRTC
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return None


@contextlib.contextmanager
def target_architecture(arch: tuple[int, int] = ARCH) -> Iterator[None]:
    """Device functions compile for `arch` without a device: numba-cuda asks the current device
    for its compute capability when a kernel's call types a device function (dispatcher.compile_device)."""
    from numba.cuda import dispatcher

    real = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=arch)
    try:
        yield
    finally:
        dispatcher.get_current_device = real


def barriers_match(ptx: str, outside: int, inside: int) -> tuple[bool, int]:
    """Whether the PTX's block barriers are `outside` plus a whole multiple (at least 1) of `inside`."""
    found = len(BARRIER_PTX.findall(ptx))
    rest = found - outside
    ok = rest == 0 if inside == 0 else rest >= inside and rest % inside == 0
    return ok, found


# what `quick` leaves out: programs whose kernels are of kinds the others have (2 to 7 s each)
_LARGER = ("mlp_train", "transformer", "tiny_500")


def kinds(quick: bool = False) -> list:
    """Programs covering every kernel kind and scalar rule family, as (name, Program); `quick`: on one
    float and one integer dtype and without the larger bench programs."""
    import jitlab as jl
    from jitlab.ir import Builder, Program, TensorType

    from . import cuda

    programs = [(p.name, jl.trace(p.fn, *p.args)) for p in cuda.suite("small") if not (quick and p.name in _LARGER)]
    for dt in (np.float32, np.int32) if quick else (np.float32, np.float64, np.int32, np.int64):
        x = np.ones((3, 8), dt)
        floats = np.dtype(dt).kind == "f"
        fns = {"arith": lambda x: (x * 3 - x // 2 + x % 3, np.maximum(x, 1), np.abs(x) + x.sum(axis=1, keepdims=True)),
               "reductions": lambda x: (x.max(axis=1), x.min(axis=0), x.prod(axis=1), np.any(x > 1, axis=1),
                                        np.all(x > 1, axis=1))}
        if floats:
            fns["math"] = lambda x: (np.tanh(x) + np.exp2(x) + np.log1p(np.abs(x)) + np.floor(x) + np.round(x)
                                     + np.sign(x) + np.arctan2(x, x) + np.fmod(x, 2.5) + np.mod(x, -1.5)
                                     + np.floor_divide(x, 0.7) + np.power(np.abs(x), 0.3),
                                     (x * 100).astype(np.int32), np.isnan(x))
            fns["matmul epilogue elsewhere"] = lambda x: (x.T @ x).T[::2] + 1
        programs += [(f"{name} {np.dtype(dt).name}", jl.trace(fn, x)) for name, fn in fns.items()]
    programs.append(("composite scalars", composites()))
    programs += loops()
    conv = Program("conv", [TensorType((1, 4, 9, 9), np.float32), TensorType((6, 2, 3, 3), np.float32)], ["x", "w"])
    b = Builder(conv.body, constraints=conv.constraints)
    y = b("np.conv2d", *conv.inputs, strides=(2, 1), pads=(1, 1, 1, 1), dilations=(1, 2), groups=2)
    conv.set_outputs([b("np.relu", y)])
    return programs + [("conv2d", conv)]


def composites():
    """Ops numpy code does not trace to but ONNX and the decompose pass produce."""
    from jitlab.ir import Builder, Program, TensorType

    program = Program("composites", [TensorType((4, 8), np.float32)], ["x"])
    b = Builder(program.body, constraints=program.constraints)
    (x,) = program.inputs
    outs = [b("np.gelu", x, approximate="none"), b("np.gelu", x, approximate="tanh"), b("np.sigmoid", x),
            b("np.erf", x), b("np.relu", x), b("np.rsqrt", b("np.abs", x)), b("np.reciprocal", x),
            b("np.clip", x, min=-1.0, max=1.0), b("np.where", b("np.greater", x, x), x, b("np.neg", x))]
    program.set_outputs(outs)
    return program


def loops() -> list:
    """Control flow's own kernels (the executor's, dynamic.py and copies.py): a loop's induction values,
    dynamic slices and updates along slice and integer-index axes with int64 and int32 offsets, a
    concatenate outside groups (np.roll's); the bodies' groups are ordinary kernels."""
    import jitlab as jl

    def scan(c0, xs):
        return jl.scan(lambda c, x: (c * 0.5 + x, c), c0, xs)

    def window(x, k):
        return jl.fori_loop(1, 7, lambda i, c: np.roll(c, 1) + x[i - 1:i + 2, k], np.zeros(3, np.float32))

    f32 = np.float32
    return [("loop scan", jl.trace(scan, np.ones(8, f32), np.ones((5, 8), f32))),
            ("loop window", jl.trace(window, np.ones((8, 4), f32), np.int32(1)))]


def random_programs(count: int) -> list:
    """`count` programs of the random-program suite (tests/programs.py), the same ones each run;
    none where the tests are not importable (an installed jitlab without its checkout)."""
    try:
        from hypothesis import Phase, given, settings

        from tests.programs import programs
    except ImportError:
        return []
    found = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate], deadline=None)
    @given(case=programs(max_ops=8, special_values=True))
    def collect(case):
        found.append(case.program)

    collect()
    return [(f"random {k}", p) for k, p in enumerate(found)]


def group_modules(fused) -> Iterator[tuple[object, str, list]]:
    """(group, module source, parts) of every jit.group of a fused program (`fused_programs`); generation
    only, nothing is launched."""
    from ..backends.numba_cuda import backend
    from ..backends.numba_cuda.device import DeviceInfo
    from ..backends.numba_cuda.kernels import module_source
    from ..backends.numba_cuda.launch import Policy

    policy = Policy(DeviceInfo(f"sm_{ARCH[0]}{ARCH[1]}", False, 132, 1024, (2**31 - 1, 65535, 65535), 48 << 10,
                               8e10, 3e12))
    for group in (op for op in fused.body.ops if op.name == "jit.group"):
        con = next((op for op in group.body.ops if op.name in ("np.matmul", "np.conv2d")), None)
        parts = (backend.contraction_parts(group, con, policy) if con is not None
                 else backend.generated_parts(group, policy))
        yield group, module_source(group, [(p.source, p.layout) for p in parts]), parts


def fused_programs(program) -> Iterator:
    """`program` through the passes of O1/O2 up to fusion, then each region of its scf ops the same way, as
    the compiler compiles each region as a program of its own (compiler.compile_regions)."""
    from jitlab.dialects.scf import REGION_OPS, region_program
    from jitlab.passes import PassContext, PassManager
    from jitlab.passes.pipelines import FUSE, SIMPLIFY

    pipeline = ",".join(["verify", "infer-shapes", "dce", *SIMPLIFY, *FUSE])
    fused = PassManager.parse(pipeline).run(program, PassContext(target="cuda"))
    yield fused
    for op in fused.body.ops:
        for r in range(len(op.regions) if op.name in REGION_OPS else 0):
            yield from fused_programs(region_program(op, r, fused))


def control_kernels(fused) -> Iterator[tuple[str, str, str, tuple]]:
    """(what, module source, kernel name, numba signature) of the executor's own kernels that a fused
    program launches: the dynamic index kernels (dynamic.py), a loop's induction values, a concatenate's
    copies (copies.py)."""
    import numba
    from numba.core import types as nt

    from ..backends.numba_cuda.copies import COPY_SOURCE
    from ..backends.numba_cuda.dynamic import DYNAMIC_OPS, INDUCTION_SOURCE, kernel_source

    array = lambda v: nt.Array(numba.from_dtype(np.dtype(v.type.dtype)), 1, "C")  # noqa: E731
    i64 = nt.int64
    for op in fused.body.ops:
        if op.name == "scf.for":
            yield "induction", INDUCTION_SOURCE, "induction", (nt.int64[::1], i64, i64, i64)
        if op.name == "np.concatenate":
            yield "np.concatenate", COPY_SOURCE, "copy_block", (array(op.operands[0]), array(op.result), *[i64] * 4)
        if op.name not in DYNAMIC_OPS:
            continue
        update = op.name == "np.dynamic_update_slice"
        x, starts = op.operands[0], op.operands[2 if update else 1:]
        source = kernel_source(update, x.type.rank, op.attrs["axes"], op.attrs["sizes"], op.attrs["index_axes"])
        sig = (array(x), array(x), *([array(x)] if update else []), *map(array, starts),
               *[i64] * x.type.rank, i64, nt.int64[::1], i64, i64, i64)
        yield op.name, source, "k0", sig


def lower_all(programs: list, log=print) -> list[Lowered]:
    """Every kernel of `programs` lowered to PTX, its barriers compared with its source's."""
    from ..backends.kernel_cache import KernelCache

    cache, results = KernelCache(tempfile.mkdtemp(prefix="jitlab-ptx-")), []
    with target_architecture():
        for name, program in programs:
            for fused in fused_programs(program):
                results += _lower_program(name, fused, cache, log)
    return results


def _lower_program(name: str, fused, cache, log) -> list[Lowered]:
    from numba import cuda

    from ..backends.numba_cuda import barriers
    from ..backends.numba_cuda.dynamic import load
    from ..backends.numba_cuda.kernels import load_module, signature

    results = []
    for group, source, parts in group_modules(fused):
        module = load_module(group, source, {"cache": cache}).module
        for k, part in enumerate(parts):
            results.append(_lower(name, part, getattr(module, f"k{k}").py_func, source, f"k{k}",
                                  signature(part.params), cuda, barriers))
            log(results[-1].line())
    for what, source, kernel, sig in control_kernels(fused):
        kernel_fn = load(source, kernel, {"cache": cache})
        results.append(_lower(name, _Part(what), kernel_fn.py_func, source, kernel, sig, cuda, barriers))
        log(results[-1].line())
    return results


@dataclass
class _Part:
    """What `_lower` reads of a part: its layout, here the executor kernel's name."""

    layout: str


def _lower(name, part, fn, source, kernel, sig, cuda, barriers) -> Lowered:
    try:
        ptx, _ = cuda.compile_ptx(fn, sig, cc=ARCH)
    except Exception as e:      # numba's typing and lowering errors
        return Lowered(name, part.layout, False, f": {type(e).__name__}: {e}")
    outside, inside = barriers.block_barriers(next(f for f in barriers.kernels(source) if f.name == kernel))
    ok, found = barriers_match(ptx, outside, inside)
    detail = f", {found} block barrier(s)" + ("" if ok else f", the source has {outside} + {inside} in inner loops: "
                                               "the compiler duplicated or dropped a barrier")
    return Lowered(name, part.layout, ok, detail)
