"""assign-streams on IR text (no GPU needed: the pass only plans): independent ops on their own
streams, an event where they meet, the stream cap; the program itself is left as it was."""

import pytest

from jitlab.report import StreamEvent
from tests.passes.filecheck import check_rewrite

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")     # matmul of the random inputs' inf and NaN

BRANCHES = """func @f(%x: f32[4,5], %y: f32[5,3]) -> (f32[4,3]) {
  %a = np.exp(%x) : f32[4,5]
  %b = np.tanh(%y) : f32[5,3]
  %c = np.matmul(%a, %b) : f32[4,3]
  func.return(%c)
}
"""


def test_independent_ops_get_their_own_stream_and_the_join_waits():
    program, report = check_rewrite(BRANCHES, "assign-streams")
    plan = report.streams
    exp, tanh, matmul = (op.uid for op in program.ops[:-1])
    assert (plan.streams, plan.ops, plan.stream_of) == (2, [exp, tanh, matmul], [0, 1, 0])
    assert plan.events == [StreamEvent(producer=tanh, consumer=matmul, from_stream=1, to_stream=0)]
    assert report.passes[-1].notes == ["3 op(s) on 2 stream(s), 1 event(s)"]


def test_a_chain_stays_on_one_stream_without_events():
    _, report = check_rewrite("""func @f(%x: f32[4]) -> (f32[4]) {
          %a = np.exp(%x) : f32[4]
          %b = np.tanh(%a) : f32[4]
          %c = np.neg(%b) : f32[4]
          func.return(%c)
        }
        """, "assign-streams")
    assert (report.streams.streams, report.streams.events) == (1, [])


def test_the_stream_count_is_capped():
    _, report = check_rewrite(BRANCHES, "assign-streams{max_streams=1}")
    assert (report.streams.streams, report.streams.stream_of, report.streams.events) == (1, [0, 0, 0], [])
