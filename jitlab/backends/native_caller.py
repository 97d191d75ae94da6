"""The C caller of native kernels (native_call.c): built once per machine into the kernel cache's
native folder, loaded as an extension module.

A call through cffi wraps each array's buffer in a cdata and builds the pointer and int arrays
in Python: about 2 us for two arrays, more than a numba dispatcher's whole call. The caller reads
the pointers and shapes from the arrays in C. Without a C compiler, Python's headers or a private
cache folder, calls go through cffi as before (`why_not` says why).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from types import ModuleType

import numpy as np

from ..errors import JitlabError
from .cache_files import warn_damaged, why_damaged, write_checked
from .kernel_cache import NATIVE_FOLDER, default_directory, why_untrusted, why_untrusted_folder

NAME = "jitlab_native_call"          # the module name its PyInit_ function is named for
SOURCE = os.path.join(os.path.dirname(__file__), "native_call.c")

why_not = ""          # why calls go through cffi ("" while the caller is in use or not yet tried)


@functools.cache
def caller() -> ModuleType | None:
    """The caller module, built now if this machine has none; None when it cannot be."""
    global why_not
    try:
        with open(SOURCE, "rb") as f:
            source = f.read()
        folder = os.path.join(default_directory(), NATIVE_FOLDER)
        version = f"{sys.implementation.cache_tag} {sysconfig.get_config_var('EXT_SUFFIX')} numpy {np.__version__}"
        path = os.path.join(folder, f"caller-{hashlib.sha256(source + version.encode()).hexdigest()[:16]}.so")
        damaged = why_damaged(path) if os.path.exists(path) else None
        if damaged is not None:
            warn_damaged(path, damaged)
        if damaged is not None or not os.path.exists(path):
            _build(source, folder, path)
        reason = why_untrusted_folder(folder) or why_untrusted(path)
        if reason is not None:
            raise OSError(f"not loading {path}: {reason}")
        loader = importlib.machinery.ExtensionFileLoader(NAME, path)
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(NAME, path, loader=loader))
        loader.exec_module(module)
        module.configure(JitlabError)
        return module
    except (OSError, ImportError, subprocess.SubprocessError) as e:
        why_not = f"the C caller is unavailable ({e}); kernels are called through cffi"
        return None


@functools.cache
def compiler() -> str | None:
    """The C compiler that links native libraries and builds the caller: $CC, else cc."""
    return shutil.which(os.environ.get("CC") or "cc")


def _build(source: bytes, folder: str, path: str) -> None:
    cc = compiler()
    include = sysconfig.get_paths()["include"]
    if cc is None or not os.path.exists(os.path.join(include, "Python.h")):
        raise OSError("no C compiler" if cc is None else f"no Python.h in {include}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    reason = why_untrusted_folder(folder)
    if reason is not None:
        raise OSError(f"the folder {folder} is not private: {reason}")
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        done = subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-I{include}", f"-I{np.get_include()}", SOURCE,
                               "-o", os.path.join(tmp, "caller.so")], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OSError(f"cc failed: {done.stderr.strip()[-400:]}")
        with open(os.path.join(tmp, "caller.so"), "rb") as f:
            write_checked(path, f.read())
