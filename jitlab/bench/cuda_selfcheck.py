"""One command for a GPU machine: the CUDA tests on the real device, then the cuda bench.

    python -m jitlab.bench.cuda_selfcheck            # tests + full-size bench
    python -m jitlab.bench.cuda_selfcheck --quick    # tests + small bench
    python -m jitlab.bench.cuda_selfcheck --ptx      # no GPU needed: every kernel of the
                                                     # bench programs compiled to PTX

Run from a checkout (the tests live in tests/cuda). The tests run without the simulator,
with JITLAB_TEST_GPU=1, so the ones marked `gpu` run too. `--ptx` needs only NVVM and
NVRTC (e.g. pip's nvidia-nvvm and nvidia-cuda-nvrtc with CUDA_HOME pointing at them):
it type-checks and lowers every generated kernel for a real architecture, which the
simulator never does.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_tests() -> tuple[bool, str]:
    """The tests/cuda suite on the real GPU; returns (passed, pytest's summary line)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(JITLAB_TEST_GPU="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                           "ignore::RuntimeWarning", "-rfs", str(ROOT / "tests" / "cuda")],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    print(done.stdout[-8000:], done.stderr[-2000:], sep="\n")
    summary = next((line for line in reversed(done.stdout.splitlines()) if re.search(r"passed|failed", line)), "")
    return done.returncode == 0, summary.strip("= ")


def _kinds() -> list:
    """Programs covering every kernel kind and scalar rule family, as (name, Program)."""
    import numpy as np

    import jitlab as jl
    from jitlab.ir import Builder, Program, TensorType

    from . import cuda

    programs = [(p.name, jl.trace(p.fn, *p.args)) for p in cuda.suite("small")]
    for dt in (np.float32, np.float64, np.int32, np.int64):
        x = np.ones((3, 8), dt)
        floats = np.dtype(dt).kind == "f"
        fns = {"arith": lambda x: (x * 3 - x // 2 + x % 3, np.maximum(x, 1), np.abs(x) + x.sum(axis=1, keepdims=True)),
               "reductions": lambda x: (x.max(axis=1), x.min(axis=0), x.prod(axis=1), np.any(x > 1, axis=1))}
        if floats:
            fns["math"] = lambda x: (np.tanh(x) + np.exp2(x) + np.log1p(np.abs(x)) + np.floor(x) + np.round(x)
                                     + np.sign(x) + np.arctan2(x, x) + np.fmod(x, 2.5) + np.mod(x, -1.5)
                                     + np.floor_divide(x, 0.7) + np.power(np.abs(x), 0.3),
                                     (x * 100).astype(np.int32), np.isnan(x))
            fns["matmul epilogue elsewhere"] = lambda x: (x.T @ x).T[::2] + 1
        programs += [(f"{name} {np.dtype(dt).name}", jl.trace(fn, x)) for name, fn in fns.items()]
    programs.append(("composite scalars", _composites()))
    conv = Program("conv", [TensorType((1, 4, 9, 9), np.float32), TensorType((6, 2, 3, 3), np.float32)], ["x", "w"])
    b = Builder(conv.body, constraints=conv.constraints)
    y = b("np.conv2d", *conv.inputs, strides=(2, 1), pads=(1, 1, 1, 1), dilations=(1, 2), groups=2)
    conv.set_outputs([b("np.relu", y)])
    return programs + [("conv2d", conv)]


def _composites():
    """Ops numpy code does not trace to but ONNX and the decompose pass produce."""
    import numpy as np

    from jitlab.ir import Builder, Program, TensorType

    program = Program("composites", [TensorType((4, 8), np.float32)], ["x"])
    b = Builder(program.body, constraints=program.constraints)
    (x,) = program.inputs
    outs = [b("np.gelu", x, approximate="none"), b("np.gelu", x, approximate="tanh"), b("np.sigmoid", x),
            b("np.erf", x), b("np.relu", x), b("np.rsqrt", b("np.abs", x)), b("np.reciprocal", x),
            b("np.clip", x, min=-1.0, max=1.0), b("np.where", b("np.greater", x, x), x, b("np.neg", x))]
    program.set_outputs(outs)
    return program


def ptx_check(arch: tuple[int, int] = (9, 0)) -> bool:
    """Compiles every kernel of the bench programs and of each kernel kind to PTX for `arch`."""
    from numba import cuda

    from jitlab.passes import PassContext, PassManager

    from ..backends.kernel_cache import KernelCache
    from ..backends.numba_cuda import backend
    from ..backends.numba_cuda.device import DeviceInfo
    from ..backends.numba_cuda.kernels import load_module, module_source, signature
    from ..backends.numba_cuda.launch import Policy

    policy = Policy(DeviceInfo(f"sm_{arch[0]}{arch[1]}", False, 132, 1024, (2**31 - 1, 65535, 65535), 48 << 10,
                               8e10, 3e12))
    cache, ok = KernelCache(tempfile.mkdtemp(prefix="jitlab-ptx-")), True
    for name, program in _kinds():
        ctx = PassContext(target="cuda")
        fused = PassManager.parse("mark-subgraphs,fuse").run(program, ctx)
        for group in (op for op in fused.body.ops if op.name == "jit.group"):
            con = next((op for op in group.body.ops if op.name in ("np.matmul", "np.conv2d")), None)
            parts = (backend.contraction_parts(group, con, policy) if con is not None
                     else backend.generated_parts(group, policy))
            module = load_module(group, module_source(group, [(p.source, p.layout) for p in parts]),
                                 {"cache": cache}).module
            for k, part in enumerate(parts):
                try:
                    cuda.compile_ptx(getattr(module, f"k{k}").py_func, signature(part.params), cc=arch)
                    print(f"PTX ok    {name}: {part.layout} kernel")
                except Exception as e:      # numba's typing and lowering errors
                    ok = False
                    print(f"PTX FAIL  {name}: {part.layout} kernel: {type(e).__name__}: {e}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CUDA backend self-check on a real GPU")
    parser.add_argument("--quick", action="store_true", help="bench at small sizes")
    parser.add_argument("--ptx", action="store_true", help="only compile the kernels to PTX (no GPU needed)")
    args = parser.parse_args(argv)
    if args.ptx:
        return 0 if ptx_check() else 1
    from ..backends.numba_cuda import device
    from . import cuda

    if device.simulator_enabled() or not device.available():
        print("selfcheck needs a real GPU: unset NUMBA_ENABLE_CUDASIM and run it on a machine with one")
        return 2
    info = device.info()
    print(f"device: {info.name}, {info.sm_count} SMs, {info.total_bytes / 2**30:.1f} GiB, "
          f"peak {info.peak_bytes_per_second / 1e9:.0f} GB/s")
    passed, summary = run_tests()
    results = cuda.bench_cuda(scale="small" if args.quick else "full")
    print("\n===== summary =====")
    print(f"tests/cuda on the GPU: {summary}")
    print(cuda.report(results))
    return 0 if passed and all(r.matches_o0 is not False for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
