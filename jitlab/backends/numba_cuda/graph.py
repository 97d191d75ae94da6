"""One launch per call: a CUDA graph captured once per input signature and replayed.

The first call with a signature runs its steps directly: it compiles nothing new but loads
modules, creates library handles and allocates, none of which may happen inside a capture.
The second call captures, through the driver's stream capture (`cuStreamBeginCapture` on the
executor's stream), everything one call queues: numpy inputs copied from pinned staging
buffers into the graph's own input buffers, every generated kernel and library call (cuBLAS),
and the results copied into pinned buffers. Every buffer the graph touches is allocated before
the capture and kept by it (or is the static plan's arena), so their addresses hold across
replays. Later calls copy numpy inputs into the staging buffers (or queue one device-to-device
copy per device input), launch the graph, and wait for the stream: one launch instead of one
per step, no per-step Python.

`decide` says whether an executor's calls may be captured at all (not under the simulator, not
with a host step, which synchronises mid-call, and on one stream); `GraphCalls` keeps the
captures by signature, and a capture that fails leaves its signature on the direct path with
the error in the report.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...report import CudaGraphRecord, GraphCapture
from ..device_arrays import c_strides
from .memory import PerBuffer

MAX_CAPTURES = 8        # signatures captured per executable; later ones run directly


def decide(option: bool | None, simulator: bool, host_ops: list[str], streams: int,
           memory_limit: int | None = None, control: list[str] = (), library: list[str] = ()) -> tuple[bool, str]:
    """Whether calls replay captured graphs, and why (or why not); `control` names the program's scf and
    dynamic index ops, `library` the libraries its contractions call."""
    if option is False:
        return False, "graphs=False: every call launches its steps directly"
    if control:
        return False, (f"{', '.join(control)}: a loop or branch runs from the host (its bounds, a while "
                       "loop's condition, an if's predicate read back) and an index op's range check is read "
                       "after the call, which a captured graph cannot hold: every call launches its steps "
                       "directly")
    if "cublas" in library:
        # cuBLAS itself can be captured, but CuPy's bindings check every call (cublas.setStream) and refuse
        return False, ("cuBLAS is called through CuPy, which refuses any cuBLAS call on a stream being captured "
                       "('calling cuBLAS API during stream capture is currently unsupported'): every call "
                       "launches its steps directly")
    if memory_limit is not None:
        return False, ("memory_limit is set, and a graph keeps its own inputs and every buffer the static plan "
                       "does not place, which the limit does not count: every call launches its steps directly")
    if simulator:
        return False, "numba's CUDA simulator cannot capture graphs: every call launches its steps directly"
    if host_ops:
        return False, (f"{', '.join(sorted(set(host_ops)))} run(s) on the host between a synchronisation and two "
                       "transfers, which a graph cannot hold: every call launches its steps directly")
    if streams > 1:
        return False, f"the program runs on {streams} streams; capture covers one: every call launches directly"
    return True, ("the second call with an input signature captures a CUDA graph (kernels, library calls, "
                  "input and result copies); later calls with it replay the graph in one launch")


def signature(arrays: list) -> tuple[tuple | None, list[int]]:
    """What a captured graph is specific to (each input's shape, dtype and whether it is a numpy array;
    None when a device input is not C-contiguous: the direct path refuses it with its error), and the
    device inputs' addresses (0 for numpy inputs), read once from their `__cuda_array_interface__`."""
    key, pointers = [], []
    for a in arrays:
        if isinstance(a, np.ndarray):
            key.append((True, a.shape, a.dtype.str))
            pointers.append(0)
            continue
        # the interface alone: another library's array (a torch tensor) has a dtype numpy cannot read
        interface = a.__cuda_array_interface__
        shape, dtype = tuple(interface["shape"]), np.dtype(interface["typestr"])
        if interface.get("strides") not in (None, c_strides(shape, dtype.itemsize)):
            return None, []
        key.append((False, shape, dtype.str))
        pointers.append(interface["data"][0])
    return tuple(key), pointers


def describe(key: tuple) -> str:
    """A signature as the report shows it: `host <f4 [2, 3], device <f4 [3]`."""
    return ", ".join(f"{'host' if host else 'device'} {dtype} {list(shape)}" for host, shape, dtype in key)


class GraphCalls:
    """The executor's captured graphs by signature; `call` returns None where the direct path must run."""

    def __init__(self, record: CudaGraphRecord, capture: Callable[[list, dict], Any]):
        self.record, self.capture = record, capture
        self.graphs: dict[tuple, Any] = {}
        self.seen: set[tuple] = set()
        self.direct: set[tuple] = set()      # signatures that run directly: capture failed, or too many

    def call(self, arrays: list, bindings: dict[str, int], clock: tuple | None = None) -> list | None:
        """The results of a replay, or None where the direct path runs this call; `clock` is a pair of
        events to record around the replay's device work (device_times)."""
        key, pointers = signature(arrays)
        graph = self.graphs.get(key)
        if graph is not None:
            return graph.replay(arrays, pointers, clock)
        if key is None or key in self.direct:
            return None
        if key not in self.seen:
            self.seen.add(key)
            return None
        return self._capture(key, arrays, pointers, bindings, clock)

    def _capture(self, key: tuple, arrays: list, pointers: list[int], bindings: dict[str, int],
                 clock: tuple | None) -> list | None:
        if len(self.graphs) >= MAX_CAPTURES:
            self.direct.add(key)
            return None
        try:
            graph = self.capture(arrays, bindings)
        except Exception as e:      # a driver refusal inside the capture: that signature runs directly
            self.direct.add(key)
            self.record.failures.append(f"{describe(key)}: {type(e).__name__}: {e}")
            return None
        self.graphs[key] = graph
        self.record.captures.append(graph.record(describe(key)))
        return graph.replay(arrays, pointers, clock)


@dataclass
class _Staging:
    """One input's fixed device buffer, and its pinned host buffer where the input comes from the host."""

    device: Any
    pointer: int
    nbytes: int
    host: np.ndarray | None


class CapturedGraph:
    """One signature's instantiated graph with the buffers it reads and writes."""

    def __init__(self, executor, arrays: list, bindings: dict[str, int]):
        from cuda.bindings import driver as binding
        from numba.cuda.cudadrv.driver import driver

        self.driver, cuda = driver, executor.cuda
        self.stream = executor.streams[0]
        self.device_outputs = executor.device_outputs
        # the results handed out, kept for the next replay while the caller holds none of them: no
        # allocation (and no cuMemFree, which waits for the device) per call
        self.handed = PerBuffer(cuda) if self.device_outputs else None
        self.inputs = [_stage(cuda, a) for a in arrays]
        owned = _owned_buffers(executor, bindings)
        self.results = [] if self.device_outputs else [cuda.pinned_array(shape, dtype)
                                                        for shape, dtype in _result_types(executor, arrays, bindings)]
        start = time.perf_counter()
        graph = self._capture(executor, bindings, owned, binding)
        self.exec = driver.cuGraphInstantiate(graph, 0)
        self.seconds = time.perf_counter() - start
        self.owned = owned          # what the graph writes: kept alive as long as it is
        self.counts = _node_counts(driver, binding, graph)
        self.launches_replaced = (executor.launches_per_call() + sum(s.host is not None for s in self.inputs)
                                  + (0 if self.device_outputs else len(self.results)))
        driver.cuGraphDestroy(graph)
        weakref.finalize(self, driver.cuGraphExecDestroy, self.exec)
        for step in executor.steps:         # temporaries the graph recorded must outlive it
            for kept in (step.kernel.meta.get("kept", ()) if step.kernel is not None else ()):
                kept.pin_all()

    def _capture(self, executor, bindings: dict[str, int], owned: dict[int, Any], binding):
        """The graph of one call: the stream captured while the call is queued on it (nothing runs)."""
        executor.cuda.synchronize()
        mode = binding.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.driver.cuStreamBeginCapture(self.stream.handle, mode)
        try:
            self.results = self._queue(executor, bindings, owned)
        finally:
            graph = self.driver.cuStreamEndCapture(self.stream.handle)
        return graph

    def _queue(self, executor, bindings: dict[str, int], owned: dict[int, Any]) -> list:
        """Everything one call does, queued on the capturing stream: copies in, steps, copies out."""
        handle = self.stream.handle
        for s in self.inputs:
            if s.host is not None and s.nbytes:
                self.driver.cuMemcpyHtoDAsync(s.pointer, s.host.ctypes.data, s.nbytes, handle)
        results = executor.queue_steps([s.device for s in self.inputs], bindings, lambda slot, *_: owned[slot])
        if self.device_outputs:
            return results
        for out, r in zip(self.results, results):      # pinned before the capture: no allocation inside it
            if out.nbytes:
                self.driver.cuMemcpyDtoHAsync(out.ctypes.data, _pointer(r), out.nbytes, handle)
        return self.results

    def replay(self, arrays: list, pointers: list[int], clock: tuple | None) -> list:
        """One call: inputs into the graph's buffers, one graph launch, the results copied out."""
        handle = self.stream.handle
        if clock is not None:
            clock[0].record(self.stream)
        for s, a, pointer in zip(self.inputs, arrays, pointers):
            if s.host is not None:
                np.copyto(s.host, a)
            elif s.nbytes:
                self.driver.cuMemcpyDtoDAsync(s.pointer, pointer, s.nbytes, handle)
        self.driver.cuGraphLaunch(self.exec, handle)
        outs = [self._hand_out(j, r) for j, r in enumerate(self.results)] if self.device_outputs else None
        if clock is not None:
            clock[1].record(self.stream)
        self.stream.synchronize()
        return outs if outs is not None else [r.copy() for r in self.results]

    def _hand_out(self, index: int, result) -> Any:
        """A device array of the caller's holding `result`: the graph's own buffer is overwritten by the next
        replay, so the result is copied (on the stream, after the graph) into one the caller may keep."""
        out = self.handed.get(index, result.shape, result.dtype, self.stream)
        if result.nbytes:
            self.driver.cuMemcpyDtoDAsync(_pointer(out), _pointer(result), result.nbytes, self.stream.handle)
        return out

    def record(self, signature_text: str) -> GraphCapture:
        nodes, kernels, copies = self.counts
        return GraphCapture(signature=signature_text, nodes=nodes, kernel_nodes=kernels, copy_nodes=copies,
                            launches_replaced=self.launches_replaced, seconds=self.seconds)


def _stage(cuda, a) -> _Staging:
    device = cuda.device_array(a.shape, a.dtype)
    host = cuda.pinned_array(a.shape, a.dtype) if isinstance(a, np.ndarray) else None
    return _Staging(device, _pointer(device), device.nbytes, host)


def _owned_buffers(executor, bindings: dict[str, int]) -> dict[int, Any]:
    """A buffer for every kernel result, allocated before the capture and kept by the graph; the static
    plan's arena serves the values it placed (the arena lives as long as the executor)."""
    owned = {}
    for step in executor.steps:
        if step.kernel is None:
            continue
        for slot, shape, t in zip(step.outs, step.shapes(bindings), step.types):
            owned[slot] = executor.fixed_buffer(slot, shape, t.dtype)
    return owned


def _result_types(executor, arrays: list, bindings: dict[str, int]) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Each program result's shape and dtype for these inputs, known before anything is queued."""
    types = {i: (tuple(a.shape), np.dtype(a.dtype)) for i, a in enumerate(arrays)}
    types.update((slot, (a.shape, a.dtype)) for slot, a in executor.resident.items())
    for step in executor.steps:
        types.update((slot, (tuple(shape), np.dtype(t.dtype))) for slot, shape, t in
                     zip(step.outs, step.shapes(bindings), step.types))
    return [types[slot] for slot in executor.outputs]


def _node_counts(driver, binding, graph) -> tuple[int, int, int]:
    """Nodes, kernel nodes and copy nodes of a captured graph."""
    _, count = driver.cuGraphGetNodes(graph, 0)
    nodes, _ = driver.cuGraphGetNodes(graph, count)
    kinds = [driver.cuGraphNodeGetType(node) for node in nodes]
    types = binding.CUgraphNodeType
    return int(count), kinds.count(types.CU_GRAPH_NODE_TYPE_KERNEL), kinds.count(types.CU_GRAPH_NODE_TYPE_MEMCPY)


def _pointer(array) -> int:
    return array.__cuda_array_interface__["data"][0]
