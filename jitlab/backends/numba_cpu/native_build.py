"""Building a generated kernel's native library (backends/native.py loads and calls it). Importing
this module imports no numba: finding a library needs none (conv_native.py looks before a compile).

numba compiles the kernel's loop nest once more, as a plain function whose parallel loop runs
over part `part_` of `parts_` (the caller's threads take the parts), behind a `cfunc` entry that
unpacks raw pointers and extents into arrays. Its machine code, with every function it calls,
is linked by the system's C compiler (`cc`) with a small C runtime (the few numba runtime
functions such code refers to: scratch allocation, and the error path of the entry, which
these kernels never take) into `native/<code>-<cpu>.so` in the kernel cache's folder, beside
the source it was built from and a manifest.

A kernel whose code raises errors (a scatter's bounds checks) or needs more of numba's runtime
than that is not built: it runs as numba dispatchers, and its record says why.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import JitlabError
from ...report import KernelTiming
from ..base import KernelParam
from ..cache_files import DamagedFile, read_checked, warn_damaged, write_atomic, write_checked
from ..kernel_cache import KernelCache, module_from_source, why_untrusted_folder
from ..native import ENTRY, FORMAT, NativeLibrary, NativeLoadError, library_path, read_manifest
from ..native_caller import compiler

if TYPE_CHECKING:
    from .codegen import GeneratedKernel

ENV_VAR = "JITLAB_NATIVE"        # "0": every kernel runs as numba dispatchers

# What the runtime below defines; everything else a library refers to must be in the process
# already (libc, libm, libpython).
RUNTIME_C = r"""
/* The numba runtime functions jitlab's native kernels refer to, without numba (built by
   jitlab/backends/numba_cpu/native_build.py). Allocation is what scratch rows use; the rest is
   the error path of a cfunc entry, which kernels that raise nothing never take. */
#include <stdint.h>
#include <stdlib.h>

typedef void (*dtor_fn)(void *data, size_t size, void *info);
typedef struct { size_t refct; dtor_fn dtor; void *info; void *data; size_t size; void *external; } MemInfo;

extern int PyGILState_Ensure(void);
extern void PyGILState_Release(int);
extern void PyErr_SetString(void *type, const char *message);
extern void *PyExc_RuntimeError;

#define LOCAL __attribute__((visibility("hidden")))

static void fail(void) { PyErr_SetString(PyExc_RuntimeError, "a jitlab native kernel raised an error"); }
LOCAL void numba_gil_ensure(int *state) { *state = PyGILState_Ensure(); }
LOCAL void numba_gil_release(int *state) { PyGILState_Release(*state); }
LOCAL int numba_do_raise(void *packed) { fail(); return 0; }
LOCAL void *numba_unpickle(const char *data, int n, const char *hashed) { fail(); return NULL; }
LOCAL void *numba_runtime_build_excinfo_struct(void *gv, void *args) { fail(); return NULL; }
LOCAL void *NRT_Allocate(size_t n) { return malloc(n); }
LOCAL void NRT_Free(void *p) { free(p); }

LOCAL MemInfo *NRT_MemInfo_alloc_aligned(size_t size, unsigned align) {
    if (align < 16) align = 16;
    char *block = malloc(sizeof(MemInfo) + size + align);
    if (block == NULL) return NULL;
    MemInfo *mi = (MemInfo *)block;
    uintptr_t data = (uintptr_t)(block + sizeof(MemInfo));
    mi->refct = 1;
    mi->dtor = NULL;
    mi->info = NULL;
    mi->data = (void *)((data + align - 1) / align * align);
    mi->size = size;
    mi->external = NULL;
    return mi;
}
LOCAL MemInfo *NRT_MemInfo_alloc_safe_aligned(size_t size, unsigned align) {
    return NRT_MemInfo_alloc_aligned(size, align);
}
LOCAL MemInfo *NRT_MemInfo_alloc(size_t size) { return NRT_MemInfo_alloc_aligned(size, 16); }
LOCAL void NRT_MemInfo_call_dtor(MemInfo *mi) {
    if (mi->dtor != NULL) mi->dtor(mi->data, mi->size, mi->info);
    free(mi);
}

/* array.reshape without a copy (numba calls this for arrays it cannot prove contiguous, such as
   arena slices): the strides of `newdims` over the same memory, in C order. Returns 0 when the
   memory cannot be viewed so (numba then raises). Axes of length 1 are dropped from the old shape;
   each run of new axes whose product is that of a run of old axes takes its strides from the
   last old axis of the run, provided that run is contiguous within itself. */
LOCAL int numba_attempt_nocopy_reshape(intptr_t nd, const intptr_t *dims, const intptr_t *strides,
                                       intptr_t newnd, const intptr_t *newdims, intptr_t *newstrides,
                                       intptr_t itemsize, int is_f_order) {
    intptr_t od[64], os[64], n = 0, old_size = 1, new_size = 1;
    if (is_f_order || nd > 64) return 0;
    for (intptr_t i = 0; i < nd; i++) {
        old_size *= dims[i];
        if (dims[i] != 1) { od[n] = dims[i]; os[n] = strides[i]; n++; }
    }
    for (intptr_t i = 0; i < newnd; i++) new_size *= newdims[i];
    if (old_size != new_size) return 0;
    if (new_size == 0) {                 /* no element is ever read: C-contiguous strides do */
        intptr_t stride = itemsize;
        for (intptr_t i = newnd - 1; i >= 0; i--) { newstrides[i] = stride; stride *= newdims[i] > 0 ? newdims[i] : 1; }
        return 1;
    }
    intptr_t oi = 0, ni = 0;
    while (oi < n && ni < newnd) {
        intptr_t oj = oi + 1, nj = ni + 1, op = od[oi], np = newdims[ni];
        while (op != np) {
            if (np < op) np *= newdims[nj++];
            else op *= od[oj++];
        }
        for (intptr_t k = oi; k < oj - 1; k++)
            if (os[k] != od[k + 1] * os[k + 1]) return 0;
        newstrides[nj - 1] = os[oj - 1];
        for (intptr_t k = nj - 1; k > ni; k--) newstrides[k - 1] = newstrides[k] * newdims[k];
        oi = oj;
        ni = nj;
    }
    for (; ni < newnd; ni++) newstrides[ni] = itemsize;     /* trailing axes of length 1 */
    return 1;
}
"""
RUNTIME_SYMBOLS = frozenset(re.findall(r"^LOCAL \w+ \*?(\w+)\(", RUNTIME_C, re.M))
_RUNTIME_CODE = hashlib.sha256(RUNTIME_C.encode()).hexdigest()[:12]      # a library links it in: part of its key

_ENTRY_HEADER = """
from numba import carray, cfunc, types

ENTRY = types.void(types.CPointer(types.voidptr), types.CPointer(types.int64))
"""
# What a function only a library's C entry calls goes without: a Python and a C wrapper of its own,
# which numba makes for every function it compiles (a tenth of a test run's compile time).
_NO_WRAPPERS = ", no_cpython_wrapper=True, no_cfunc_wrapper=True"
_NJIT_LINE = re.compile(r"^(@njit\(.*)\)$", re.M)
_PRANGE = re.compile(r"(\s*)for (\w+) in prange\((.*)\):")
_DECLARED = re.compile(r'^declare [^@]*@"?([^"(\s]+)"?\(|^@"?([^"\s]+)"? = external ', re.M)


class BuildError(JitlabError):
    """Why a kernel's native library could not be built."""


def library_for(chunk: str, chunked: bool, params: tuple[KernelParam, ...], signature: tuple,
                parts: dict[str, str], cache: KernelCache, header: str, timing: KernelTiming
                ) -> tuple[NativeLibrary | None, str, str]:
    """The native library of the kernel keyed by `parts` (loaded): from the cache folder's native/
    subfolder, else built now from `chunk` (the source of `k_chunk`, see `kernel_chunk`). Returns
    (library, why it was not on disk: "" on a hit, why there is no library: "" when there is one)."""
    why = _unsupported(chunk, params, signature)
    if why:
        return None, "", why
    text = header + '\n\n@njit(fastmath=FLAGS, error_model="numpy")\n' + chunk + "\n"
    found, miss, why = libraries_for(text, [Entry("k_chunk", params, chunked, ENTRY)], parts, cache, timing)
    return (found[0] if found else None), miss, why


@dataclass
class Entry:
    """A function of a generated module to give a C entry: its parameters and the entry's symbol."""

    fn: str
    params: tuple[KernelParam, ...]
    chunked: bool
    symbol: str


def libraries_for(text: str, entries: list[Entry], parts: dict[str, str], cache: KernelCache,
                  timing: KernelTiming) -> tuple[list[NativeLibrary] | None, str, str]:
    """One shared library with an entry per `entries` function of the module `text` (without its
    entries' cfuncs), keyed by `parts`: from the cache folder, else built now. Returns (its
    entries, loaded; why it was not on disk; why there is none)."""
    if not enabled():
        return None, "", f"native kernels are off ({ENV_VAR}=0)"
    parts, path = located(entries, parts, cache)
    why_failed = failed(path)
    if why_failed:
        return None, "", why_failed
    found = NativeLibrary.read(path)
    if found is not None:
        try:
            for library in found:
                library.load()
            return found, "", ""
        except NativeLoadError as e:            # damaged or foreign: built again below
            if e.damaged:
                warn_damaged(path, e.damaged)
    if compiler() is None:
        return None, "", "no C compiler (cc) to link native libraries with"
    miss = cache.explain_miss(parts)
    try:
        return _build(text, entries, parts, path, timing), miss, ""
    except BuildError as e:
        # remembered, so that the next compile of this code goes to numba at once (a build that
        # fails at the link costs a whole numba compile first: ResNet-50's O2 segments, 13 s)
        _remember_failure(path, parts, str(e))
        return None, "", str(e)
    except NativeLoadError as e:
        return None, "", str(e)


def without_wrappers(text: str) -> str:
    """The module `text` with each `@njit(...)` function compiled for native callers alone."""
    return _NJIT_LINE.sub(lambda m: m.group(1) + _NO_WRAPPERS + ")", text)


def enabled() -> bool:
    """Whether native libraries are wanted ($JITLAB_NATIVE is not "0")."""
    return os.environ.get(ENV_VAR, "1").strip() != "0"


def located(entries: list[Entry], parts: dict[str, str], cache: KernelCache) -> tuple[dict[str, str], str]:
    """The whole key of the library with these entries and where it lives in the cache folder."""
    # the module's source does not name its parameters' types (numba's dispatchers typed them per
    # call): the entries' ABI is part of the key, or a float64 build serves a float32 program
    parts = {**parts, "entries": ";".join(_abi(e) for e in entries), "runtime": _RUNTIME_CODE}
    return parts, library_path(cache.directory, cache.full_key(parts))


def _abi(entry: Entry) -> str:
    params = ",".join(f"{p.dtype.name}[{p.ndim}]" if p.is_array else "int64" for p in entry.params)
    return f"{entry.symbol}={entry.fn}({params}){'/parts' if entry.chunked else ''}"


def failed(path: str) -> str:
    """Why building the library at `path` failed before ("" if it did not, or was never tried)."""
    manifest = read_manifest(path) or {}
    return manifest.get("failed", "") if manifest.get("format") == FORMAT else ""


def _remember_failure(path: str, parts: dict[str, str], why: str) -> None:
    if why_untrusted_folder(os.path.dirname(path)) is None:
        write_checked(path[:-3] + ".json", json.dumps({"format": FORMAT, "failed": why, "parts": parts}).encode())


def _unsupported(chunk: str, params: tuple[KernelParam, ...], signature: tuple) -> str:
    from .codegen import raises

    if raises(chunk):
        return "its code raises errors (bounds checks), which only numba's runtime reports"
    if any(not p.is_array and str(t) != "int64" for p, t in zip(params, signature)):
        return "it takes a scalar parameter other than a loop extent"
    return ""


def kernel_chunk(kernel: GeneratedKernel) -> tuple[str, bool]:
    """The kernel as `k_chunk` and whether it is split: its parallel variant with the prange loop
    over part `part_` of `parts_` where that loop can be split, else its sequential variant."""
    split = split_loop(kernel.par, "k_par") if kernel.splittable else None
    if split is not None:
        return split, True
    return kernel.seq.replace("def k_seq(", "def k_chunk(", 1), False


def split_loop(source: str, name: str) -> str | None:
    """Function `name`'s source (decorators dropped) as `k_chunk(..., part_, parts_)`, its one
    prange loop running over part `part_` of `parts_`; None unless it has exactly one."""
    lines = [line for line in source.split("\n") if not line.startswith("@")]
    loops = [i for i, line in enumerate(lines) if "prange(" in line]
    match = _PRANGE.fullmatch(lines[loops[0]]) if len(loops) == 1 else None
    if match is None or not lines[0].startswith(f"def {name}("):
        return None
    indent, var, extent = match.groups()
    body = re.match(r"\s*", lines[loops[0] + 1]).group()
    # From a start LLVM cannot bound, the index might be negative: numba would wrap each access
    # (a select per load and store, which keeps a flat loop from vectorizing: tanh_gelu ran 2.5x
    # slower). nonneg tells LLVM it is not; prange's own index starts at 0.
    lines[loops[0]:loops[0] + 1] = [
        f"{indent}for {var}_ in range(part_ * ({extent}) // parts_, (part_ + 1) * ({extent}) // parts_):",
        f"{body}{var} = nonneg({var}_)"]
    lines[0] = re.sub(rf"^def {name}\((.*)\):$", r"def k_chunk(\1, part_, parts_):", lines[0])
    return "\n".join(lines)


def entry_source(entry: Entry, name: str) -> str:
    """The cfunc `name(p, n)` calling `entry.fn` with its parameters in order: the k-th array's
    data is at p[k]; n holds every array's shape, then the scalar parameters, then (part, parts)
    when the kernel is split."""
    params = entry.params
    arrays = [p for p in params if p.is_array]
    args, array_at, shape_at, scalar_at = [], 0, 0, sum(p.ndim for p in arrays)
    for p in params:
        if p.is_array:
            shape = "".join(f"n[{shape_at + d}], " for d in range(p.ndim))
            dtype = "np.bool_" if p.dtype.name == "bool" else f"np.{p.dtype.name}"
            args.append(f"carray(p[{array_at}], ({shape}), {dtype})")
            array_at, shape_at = array_at + 1, shape_at + p.ndim
        else:
            args.append(f"n[{scalar_at}]")
            scalar_at += 1
    if entry.chunked:
        args += [f"n[{scalar_at}]", f"n[{scalar_at + 1}]"]
    return (f'@cfunc(ENTRY, fastmath=FLAGS, error_model="numpy")\ndef {name}(p, n):\n'
            f"    {entry.fn}({', '.join(args)})\n")


def _build(text: str, entries: list[Entry], parts: dict[str, str], path: str, timing: KernelTiming
           ) -> list[NativeLibrary]:
    from .helper_bar import first_compile  # imports numba, which a warm start (building nothing) does not

    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    reason = why_untrusted_folder(folder)
    if reason is not None:
        raise BuildError(f"the folder {folder} is not private: {reason}")
    names = [f"k_entry{k}" for k in range(len(entries))]
    text = (without_wrappers(text) + _ENTRY_HEADER
            + "".join("\n\n" + entry_source(e, name) for e, name in zip(entries, names)))
    write_atomic(path[:-3] + ".py", text.encode())
    with first_compile(f"kernel library {os.path.basename(path)}"):
        module, seconds = _import(path[:-3] + ".py", text)
    timing.add(seconds)
    _link([(getattr(module, name), e.symbol) for e, name in zip(entries, names)], path)
    libraries = []
    for e in entries:
        arrays = [p for p in e.params if p.is_array]
        libraries.append(NativeLibrary(path, tuple(p.dtype.name for p in arrays), tuple(p.ndim for p in arrays),
                                       sum(not p.is_array for p in e.params), e.chunked, e.symbol))
        libraries[-1].load()
    manifest = {"format": FORMAT, "entries": [lib.manifest() for lib in libraries], "parts": parts}
    write_checked(path[:-3] + ".json", json.dumps(manifest, indent=1).encode())
    return libraries


def _import(path: str, text: str):
    """Runs the generated module `text`, written at `path` (numba compiles its cfuncs there), timed
    as numba's work."""
    from .timing import timed

    name = "jitlab_native_" + os.path.basename(path)[:-3].replace("-", "_")
    found: list = []
    seconds = timed(lambda: found.append(module_from_source(name, path, text)))
    return found[0], seconds


def _link(entries: list[tuple[object, str]], path: str) -> None:
    """Links each cfunc's machine code (every callee linked in) and the runtime into `path`, each
    cfunc exported as its symbol."""
    folder = os.path.dirname(path)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        command = [compiler(), "-shared", "-o", os.path.join(tmp, "kernel.so")]
        for k, (cfunc, symbol) in enumerate(entries):
            library = cfunc._library      # numba's CodeLibrary: the object code and IR of what it compiled
            unknown = sorted(s for s in _declared(library.get_llvm_str())
                             if s not in RUNTIME_SYMBOLS and not _in_process(s))
            if unknown:
                raise BuildError(f"its code calls {unknown[0]}, part of numba's runtime")
            obj = os.path.join(tmp, f"entry{k}.o")
            with open(obj, "wb") as f:
                f.write(library.serialize_using_object_code()[2][0])
            command += [obj, f"-Wl,--defsym={symbol}={cfunc.native_name}"]
        # numba emits code for the large code model, whose absolute relocations sit in the text
        # section: -z notext lets the loader patch them (no position-independent code to ask for)
        runtime = os.path.join(tmp, "runtime.o")
        with open(runtime, "wb") as f:
            f.write(_runtime_object(folder))
        _run(command + [runtime, "-Wl,-z,notext", "-lm"])
        with open(os.path.join(tmp, "kernel.so"), "rb") as f:
            write_checked(path, f.read())


def _declared(llvm_ir: str) -> set[str]:
    """The functions and globals the module declares but does not define (LLVM intrinsics aside)."""
    names = {a or b for a, b in _DECLARED.findall(llvm_ir)}
    return {n for n in names if not n.startswith("llvm.")}


@functools.cache
def _process() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def _in_process(symbol: str) -> bool:
    return hasattr(_process(), symbol)


def _runtime_object(folder: str) -> bytes:
    """The compiled runtime, built once per cache folder and version of its source (a checked
    file: a damaged one is built again)."""
    path = os.path.join(folder, f"runtime-{_RUNTIME_CODE}.o")
    try:
        return read_checked(path)
    except FileNotFoundError:
        pass
    except (OSError, DamagedFile) as e:
        warn_damaged(path, str(e))
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        source = os.path.join(tmp, "runtime.c")
        with open(source, "w") as f:
            f.write(RUNTIME_C)
        _run([compiler(), "-O2", "-fPIC", "-c", source, "-o", os.path.join(tmp, "runtime.o")])
        with open(os.path.join(tmp, "runtime.o"), "rb") as f:
            code = f.read()
    write_checked(path, code)
    return code


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"{os.path.basename(command[0])} failed: {done.stderr.strip()[-600:]}")

