"""CUDA graph replay: when calls may be captured and why not, the per-signature capture policy, and
the executor's capture seam (its steps queued on buffers a graph owns) run under the simulator by a
stand-in that reruns the steps on those same buffers, against O0. The driver's capture itself
needs a GPU (cuda_selfcheck runs the suite there)."""

from types import SimpleNamespace

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.numba_cuda import executor as executor_module
from jitlab.backends.numba_cuda import graph
from jitlab.report import CudaGraphRecord, GraphCapture
from tests.budget import slow_o2
from tests.cuda.helpers import rand


def program(level="O2", **options):
    fn = lambda x, w: np.tanh(x * 2.0 + w).sum(axis=1)  # noqa: E731
    x, w = rand(4, 6), rand(4, 6)
    return jl.compile(jl.trace(fn, x, w), level=level, target="cuda", progress=False, **options), (x, w), fn


def test_decide_says_why_calls_run_directly():
    assert graph.decide(False, False, [], 1) == (False, "graphs=False: every call launches its steps directly")
    assert "simulator" in graph.decide(None, True, [], 1)[1]
    replay, reason = graph.decide(None, False, ["np.cumsum", "np.cumsum"], 1)
    assert not replay and "np.cumsum run(s) on the host" in reason
    assert "3 streams" in graph.decide(None, False, [], 3)[1]
    assert "memory_limit is set" in graph.decide(None, False, [], 1, memory_limit=1 << 30)[1]
    replay, reason = graph.decide(None, False, [], 1, library=["cublas"])     # what an H200 showed CuPy does
    assert not replay and "CuPy, which refuses any cuBLAS call on a stream being captured" in reason
    replay, reason = graph.decide(True, False, [], 1)
    assert replay and "second call" in reason


@pytest.mark.simulator
def test_under_the_simulator_calls_run_directly_and_the_report_says_why():
    exe, args, fn = program()
    for _ in range(3):
        np.testing.assert_allclose(exe(*args)[0], fn(*args), rtol=2e-6, atol=1e-6)
    record = exe.report.cuda_graphs
    assert record.replay is False and "simulator" in record.reason and record.captures == []


class FakeGraph:
    def __init__(self, log, key):
        self.log, self.key = log, key

    def replay(self, arrays, pointers, clock):
        self.log.append(("replay", self.key))
        return ["replayed"]

    def record(self, text):
        return GraphCapture(signature=text, nodes=1, kernel_nodes=1, copy_nodes=0, launches_replaced=1, seconds=0.0)


def test_a_signature_is_captured_on_its_second_call_and_replayed_after():
    log = []

    def capture(arrays, bindings):
        log.append(("capture", arrays[0].shape))
        return FakeGraph(log, arrays[0].shape)

    calls = graph.GraphCalls(CudaGraphRecord(replay=True, reason=""), capture)
    a, b = np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)
    assert calls.call([a], {}) is None                 # first: the direct path warms up
    assert calls.call([b], {}) is None
    assert calls.call([a], {}) == ["replayed"]         # second: captured, then replayed
    assert calls.call([a], {}) == ["replayed"]
    assert log == [("capture", (2, 3)), ("replay", (2, 3)), ("replay", (2, 3))]
    assert [c.signature for c in calls.record.captures] == ["host <f4 [2, 3]"]
    assert calls.call([a.astype(np.float64)], {}) is None      # another dtype is another signature


def test_a_failed_capture_leaves_its_signature_on_the_direct_path_with_the_error():
    def capture(arrays, bindings):
        raise RuntimeError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    calls = graph.GraphCalls(CudaGraphRecord(replay=True, reason=""), capture)
    a = np.zeros(3, np.float32)
    assert calls.call([a], {}) is None and calls.call([a], {}) is None and calls.call([a], {}) is None
    assert calls.record.failures == ["host <f4 [3]: RuntimeError: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"]


def test_captures_stop_at_the_limit():
    calls = graph.GraphCalls(CudaGraphRecord(replay=True, reason=""), lambda arrays, b: FakeGraph([], None))
    for n in range(graph.MAX_CAPTURES + 2):
        a = np.zeros(n + 1, np.float32)
        calls.call([a], {})
        calls.call([a], {})
    assert len(calls.graphs) == graph.MAX_CAPTURES and len(calls.direct) == 2


class RerunGraph:
    """Stands in for CapturedGraph: fixed input and result buffers like a graph's, the steps rerun."""

    def __init__(self, executor, arrays, bindings):
        self.executor, self.bindings = executor, bindings
        self.inputs = [executor.cuda.device_array(a.shape, a.dtype) for a in arrays]
        self.owned = graph._owned_buffers(executor, bindings)
        self.replays = 0

    def replay(self, arrays, pointers, clock):
        self.replays += 1
        for buffer, a in zip(self.inputs, arrays):
            buffer.copy_to_device(a if isinstance(a, np.ndarray) else a.copy_to_host())
        results = self.executor.queue_steps(self.inputs, self.bindings, lambda slot, *_: self.owned[slot])
        return [r.copy_to_host() for r in results]

    def record(self, text):
        return GraphCapture(signature=text, nodes=0, kernel_nodes=0, copy_nodes=0,
                            launches_replaced=self.executor.launches_per_call(), seconds=0.0)


@pytest.fixture
def rerun_graphs(monkeypatch):
    monkeypatch.setattr(executor_module, "decide", lambda *a: (True, "replay (stand-in)"))
    monkeypatch.setattr(executor_module, "CapturedGraph", RerunGraph)


@pytest.mark.parametrize("level", slow_o2("O1", "O2"))
def test_replays_on_the_graph_s_own_buffers_match_o0_and_results_stay_the_user_s(rerun_graphs, level):
    exe, (x, w), fn = program(level)
    inputs = [(x + k, w - k) for k in range(4)]
    results = [exe(*args)[0] for args in inputs]      # direct, capture + replay, replay, replay
    for args, got in zip(inputs, results):
        np.testing.assert_allclose(got, fn(*args), rtol=2e-6, atol=1e-6)
    capture = exe.report.cuda_graphs.captures
    assert len(capture) == 1 and capture[0].signature == "host <f4 [4, 6], host <f4 [4, 6]"
    assert capture[0].launches_replaced >= 1


def test_graphs_false_keeps_every_call_direct():
    exe, args, _ = program(graphs=False)
    exe(*args), exe(*args)
    assert exe.report.cuda_graphs.reason.startswith("graphs=False") and exe.report.cuda_graphs.captures == []


class DeviceLike:
    """Any array with `__cuda_array_interface__` (CuPy's, torch's): the simulator's arrays have none."""

    def __init__(self, shape, strides=None, pointer=4096):
        self.shape, self.dtype = shape, np.dtype(np.float32)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (pointer, False),
                                         "strides": strides, "version": 3}


def test_device_inputs_are_keyed_apart_and_read_their_address_once():
    key, pointers = graph.signature([DeviceLike((2, 3)), np.zeros(3, np.float32), DeviceLike((2, 3), (12, 4), 8192)])
    assert key == ((False, (2, 3), "<f4"), (True, (3,), "<f4"), (False, (2, 3), "<f4"))
    assert pointers == [4096, 0, 8192]
    assert graph.describe(key) == "device <f4 [2, 3], host <f4 [3], device <f4 [2, 3]"


def test_a_signature_reads_the_interface_not_the_dtype():
    # a torch CUDA tensor's dtype (torch.float32) is nothing numpy can read: seen failing on an H200
    tensor = DeviceLike((4, 2))
    tensor.dtype = "torch.float32"
    assert graph.signature([tensor]) == (((False, (4, 2), "<f4"),), [4096])


def test_a_strided_device_input_is_never_replayed():
    assert graph.signature([DeviceLike((2, 3), (24, 8))]) == (None, [])
    calls = graph.GraphCalls(CudaGraphRecord(replay=True, reason=""), lambda arrays, b: FakeGraph([], None))
    strided = DeviceLike((2, 3), (24, 8))
    assert calls.call([strided], {}) is None and calls.call([strided], {}) is None and not calls.graphs


def test_kept_buffers_are_bounded_except_those_a_graph_pinned():
    from jitlab.backends.numba_cuda.memory import KeptBuffers

    kept = KeptBuffers(np.float32, limit=2)
    first = kept.get((3,), 0)
    assert kept.get((3,), 0) is first                  # kept across calls
    kept.pin_all()                                     # a graph recorded (3,)
    for n in range(4, 9):
        kept.get((n,), 0)
    assert kept.get((3,), 0) is first and set(kept.buffers) == {(3,), (7,), (8,)}


def test_a_replay_hands_out_a_buffer_the_caller_no_longer_holds_and_never_one_it_holds(monkeypatch):
    from numba import cuda

    from jitlab.backends.numba_cuda.memory import PerBuffer

    copies = []

    class Driver:
        def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):     # noqa: N802 (the driver's name)
            copies.append((id(dst), id(src), nbytes))
            dst.copy_to_device(src)

    monkeypatch.setattr(graph, "_pointer", lambda array: array)    # the simulator's arrays have no addresses
    captured = object.__new__(graph.CapturedGraph)
    captured.driver, captured.stream = Driver(), SimpleNamespace(handle=0)
    captured.handed = PerBuffer(cuda)
    own = cuda.to_device(np.arange(4, dtype=np.float32))            # the graph's result buffer
    first = captured._hand_out(0, own)
    kept_id = id(first)
    del first                                                       # dropped: the next replay reuses it
    second = captured._hand_out(0, own)
    assert id(second) == kept_id and captured.handed.allocations == 1
    own.copy_to_device(np.full(4, 7, np.float32))
    third = captured._hand_out(0, own)                              # `second` is held: a new buffer
    assert third is not second and captured.handed.allocations == 2
    np.testing.assert_array_equal(second.copy_to_host(), np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(third.copy_to_host(), np.full(4, 7, np.float32))
    assert len(copies) == 3
