"""The numba.cuda GPU backend: kernels generated from fused groups, run on the device.

- device.py: is a GPU (or numba's simulator) there, its properties; numba.cuda is imported lazily
- backend.py: which ops it compiles, a jit.group into launchable kernels
- codegen.py, contraction.py: kernel source (elementwise, rows, columns; tiled matmul and conv)
- scalar.py, devicefns.py: numpy's scalar semantics and block reductions as device functions
- barriers.py: every barrier of a generated kernel is reached by the whole block (checked at generation)
- launch.py: grid and block sizes; kernels.py: loading through the compile cache, launching
- executor.py, sequence.py, memory.py: the device runtime (O1 steps, O2 launch sequence, buffers)
- its bandwidth benchmarks and the one-command check for a GPU machine live with the bench
  (jitlab/bench/cuda.py, cuda_selfcheck.py, cuda_ptx.py): they compile whole programs, above the backends
"""
