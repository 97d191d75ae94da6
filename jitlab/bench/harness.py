"""Measuring: what machine and BLAS ran (interleaved medians: jitlab/timing.py)."""

from __future__ import annotations

import os
import platform

import numpy as np

from ..runtime.bounds import cpu_name


def blas_info() -> list[dict]:
    """The BLAS libraries loaded, whose each is (numpy's, or scipy's that numba's np.dot may load),
    and the kernel each selected (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    np.ones((2, 2)) @ np.ones((2, 2))
    keys = ("internal_api", "version", "architecture", "num_threads", "threading_layer")
    return [{**{k: info.get(k) for k in keys},
             "owner": os.path.basename(os.path.dirname(info.get("filepath") or "")).removesuffix(".libs")}
            for info in threadpool_info() if info.get("user_api") == "blas"]


def machine() -> dict:
    """What the numbers were measured on."""
    import numba

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "load_average": os.getloadavg()[0],
            "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "blas": blas_info(),
            "env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
                                               "NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY") if k in os.environ}}
