"""FileCheck tests of the shape canonicalization rules (transposes, views, broadcasts,
slices, pads, trivial reductions), with symbolic dims where they matter."""

import pytest

from tests.passes.filecheck import check_rewrite
from tests.passes.test_canon_algebra import case, returns

CASES = [
    case('transpose-identity',
         """
        func @f(%x: f32[2,3]) -> (f32[2,3]) {
          %0 = np.transpose(%x) {perm = [0, 1]} : f32[2,3]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('transpose-transpose',
         """
        func @f(%x: f32[2,3,4]) -> (f32[4,3,2]) {
          %0 = np.transpose(%x) {perm = [1, 2, 0]} : f32[3,4,2]
          %1 = np.transpose(%0) {perm = [1, 0, 2]} : f32[4,3,2]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[2,3,4]) -> (f32[4,3,2]) {
          %1 = np.transpose(%x) {perm = [2, 1, 0]} : f32[4,3,2]
          func.return(%1)
        }
        """),
    case('transpose-transpose-identity',
         """
        func @f(%x: f32[2,B]) -> (f32[2,B]) {
          %0 = np.transpose(%x) {perm = [1, 0]} : f32[B,2]
          %1 = np.transpose(%0) {perm = [1, 0]} : f32[2,B]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('transpose-of-exp-kept',
         """
        func @f(%x: f32[2,3]) -> (f32[2,3]) {
          %0 = np.transpose(%x) {perm = [1, 0]} : f32[3,2]
          %1 = np.exp(%0) : f32[3,2]
          %2 = np.transpose(%1) {perm = [1, 0]} : f32[2,3]
          func.return(%2)
        }
        """,
         None,
         misses=[('transpose-transpose', 'operand 0 of np.transpose is np.exp, not np.transpose')]),
    case('view-noop',
         """
        func @f(%x: f32[2,3]) -> (f32[2,3]) {
          %0 = np.reshape(%x) {shape = [2, 3]} : f32[2,3]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('view-chain',
         """
        func @f(%x: f32[B,3]) -> (f32[B,3], f32[B,3,1]) {
          %0 = np.expand_dims(%x) {axes = [0]} : f32[1,B,3]
          %1 = np.reshape(%0) {shape = [B, 3, 1]} : f32[B,3,1]
          %2 = np.squeeze(%1) {axes = [2]} : f32[B,3]
          func.return(%2, %1)
        }
        """,
         """
        func @f(%x: f32[B,3]) -> (f32[B,3], f32[B,3,1]) {
          %1 = np.reshape(%x) {shape = [B, 3, 1]} : f32[B,3,1]
          func.return(%x, %1)
        }
        """),
    case('view-reshape-kept',
         """
        func @f(%x: f32[2,3]) -> (f32[3,2]) {
          %0 = np.reshape(%x) {shape = [3, 2]} : f32[3,2]
          func.return(%0)
        }
        """,
         None,
         misses=[('view-noop', 'f32[2,3] vs f32[3,2]')]),
    case('broadcast-noop',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.broadcast_to(%x) {shape = [4]} : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('broadcast-broadcast',
         """
        func @f(%x: f32[4]) -> (f32[2,3,4]) {
          %0 = np.broadcast_to(%x) {shape = [3, 4]} : f32[3,4]
          %1 = np.broadcast_to(%0) {shape = [2, 3, 4]} : f32[2,3,4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[2,3,4]) {
          %1 = np.broadcast_to(%x) {shape = [2, 3, 4]} : f32[2,3,4]
          func.return(%1)
        }
        """),
    case('broadcast-into-elementwise',
         """
        func @f(%x: f32[4], %y: f32[2,4]) -> (f32[2,4]) {
          %0 = np.broadcast_to(%x) {shape = [2, 4]} : f32[2,4]
          %1 = np.add(%0, %y) : f32[2,4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4], %y: f32[2,4]) -> (f32[2,4]) {
          %1 = np.add(%x, %y) : f32[2,4]
          func.return(%1)
        }
        """),
    case('broadcast-into-elementwise-kept',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[2,4]) {
          %0 = np.broadcast_to(%x) {shape = [2, 4]} : f32[2,4]
          %1 = np.add(%0, %y) : f32[2,4]
          func.return(%1)
        }
        """,
         None,
         misses=[('broadcast-into-elementwise', 'would give another type')]),
    case('slice-noop',
         """
        func @f(%x: f32[B,3]) -> (f32[B,3]) {
          %0 = np.slice(%x) {starts = [0, 0], stops = [B, 3], steps = [1, 1]} : f32[B,3]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('slice-reverse-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.slice(%x) {starts = [3], stops = [-1], steps = [-1]} : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('slice-noop', 'needs $a to be all 0 and $s all 1')]),
    case('slice-slice',
         """
        func @f(%x: f32[10]) -> (f32[2]) {
          %0 = np.slice(%x) {starts = [1], stops = [9], steps = [2]} : f32[4]
          %1 = np.slice(%0) {starts = [1], stops = [4], steps = [2]} : f32[2]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[10]) -> (f32[2]) {
          %1 = np.slice(%x) {starts = [3], stops = [8], steps = [4]} : f32[2]
          func.return(%1)
        }
        """),
    case('slice-slice-symbolic',
         """
        func @f(%x: f32[B]) -> (f32[B-3]) {
          %0 = np.slice(%x) {starts = [2], stops = [B], steps = [1]} : f32[B-2]
          %1 = np.slice(%0) {starts = [1], stops = [B-2], steps = [1]} : f32[B-3]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[B]) -> (f32[B-3]) {
          %1 = np.slice(%x) {starts = [3], stops = [B], steps = [1]} : f32[B-3]
          func.return(%1)
        }
        """),
    case('slice-slice-reversed',
         """
        func @f(%x: f32[4]) -> (f32[3], f32[4]) {
          %0 = np.slice(%x) {starts = [3], stops = [-1], steps = [-1]} : f32[4]
          %1 = np.slice(%0) {starts = [1], stops = [4], steps = [1]} : f32[3]
          %2 = np.slice(%0) {starts = [3], stops = [-1], steps = [-1]} : f32[4]
          func.return(%1, %2)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[3], f32[4]) {
          %1 = np.slice(%x) {starts = [2], stops = [-1], steps = [-1]} : f32[3]
          func.return(%1, %x)
        }
        """),
    case('slice-of-exp-kept',
         """
        func @f(%x: f32[4]) -> (f32[2]) {
          %0 = np.slice(%x) {starts = [1], stops = [4], steps = [1]} : f32[3]
          %1 = np.exp(%0) : f32[3]
          %2 = np.slice(%1) {starts = [0], stops = [2], steps = [1]} : f32[2]
          func.return(%2)
        }
        """,
         None,
         misses=[('slice-slice', 'operand 0 of np.slice is np.exp, not np.slice')]),
    case('pad-noop',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.pad(%x) {pads = [0, 0], mode = "edge"} : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('pad-kept',
         """
        func @f(%x: f32[4]) -> (f32[5]) {
          %0 = np.pad(%x) {pads = [1, 0]} : f32[5]
          func.return(%0)
        }
        """,
         None,
         misses=[('pad-noop', 'needs $p to be all 0')]),
    case('tile-noop',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.tile(%x) {reps = [1]} : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('concatenate-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.concatenate(%x) {axis = 0} : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('split-one',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.split(%x) {axis = 0, sizes = [4]} : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('reduce-trivial',
         """
        func @f(%x: f32[4,1]) -> (f32[4], f32[4,1]) {
          %0 = np.max(%x) {axes = [1]} : f32[4]
          %1 = np.prod(%x) {axes = [], keepdims = true} : f32[4,1]
          func.return(%0, %1)
        }
        """,
         """
        func @f(%x: f32[4,1]) -> (f32[4], f32[4,1]) {
          %0 = np.reshape(%x) {shape = [4]} : f32[4]
          func.return(%0, %x)
        }
        """),
    case('reduce-kept',
         """
        func @f(%x: f32[4,1]) -> (f32[1]) {
          %0 = np.max(%x) {axes = [0]} : f32[1]
          func.return(%0)
        }
        """,
         None,
         misses=[('reduce-trivial', 'every reduced axis of $x to have size 1')]),
    case('sum-trivial-int',
         """
        func @f(%x: i32[4,1]) -> (i32[4]) {
          %0 = np.sum(%x) {axes = [1]} : i32[4]
          func.return(%0)
        }
        """,
         """
        func @f(%x: i32[4,1]) -> (i32[4]) {
          %0 = np.reshape(%x) {shape = [4]} : i32[4]
          func.return(%0)
        }
        """),
    case('sum-trivial-float-kept',
         """
        func @f(%x: f32[4,1]) -> (f32[4]) {
          %0 = np.sum(%x) {axes = [1]} : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('sum-trivial-int', 'a float sum adds +0.0')]),
    case('concatenate-two-kept',
         """
        func @f(%x: f32[4]) -> (f32[8]) {
          %0 = np.concatenate(%x, %x) {axis = 0} : f32[8]
          func.return(%0)
        }
        """,
         None,
         misses=[('concatenate-one', 'np.concatenate has 2 operand(s), the pattern 1')]),
    case('split-two-kept',
         """
        func @f(%x: f32[4]) -> (f32[1], f32[3]) {
          %0, %1 = np.split(%x) {axis = 0, sizes = [1, 3]} : f32[1], f32[3]
          func.return(%0, %1)
        }
        """,
         None,
         misses=[('split-one', 'the rule gives 1 value(s), np.split has 2 results')]),
    case('tile-twice-kept',
         """
        func @f(%x: f32[4]) -> (f32[8]) {
          %0 = np.tile(%x) {reps = [2]} : f32[8]
          func.return(%0)
        }
        """,
         None,
         misses=[('tile-noop', 'needs $n to be all 1')]),
    case('broadcast-kept',
         """
        func @f(%x: f32[4]) -> (f32[2,4]) {
          %0 = np.broadcast_to(%x) {shape = [2, 4]} : f32[2,4]
          func.return(%0)
        }
        """,
         None,
         misses=[('broadcast-noop', 'f32[4] vs f32[2,4]'), ('broadcast-broadcast', 'operand 0 of np.broadcast_to is input %x')]),
    case('transpose-kept',
         """
        func @f(%x: f32[2,3]) -> (f32[3,2]) {
          %0 = np.transpose(%x) {perm = [1, 0]} : f32[3,2]
          func.return(%0)
        }
        """,
         None,
         misses=[('transpose-identity', 'needs $p to be the identity')]),
    case('view-of-exp-kept',
         """
        func @f(%x: f32[2,3]) -> (f32[6]) {
          %0 = np.reshape(%x) {shape = [3, 2]} : f32[3,2]
          %1 = np.exp(%0) : f32[3,2]
          %2 = np.reshape(%1) {shape = [6]} : f32[6]
          func.return(%2)
        }
        """,
         None,
         misses=[('view-chain', 'np.exp, not np.reshape or np.expand_dims or np.squeeze')]),
]


@pytest.mark.parametrize("source,expected,misses,options", CASES)
def test_rule(source, expected, misses, options):
    check_rewrite(source, "canonicalize" + options, expected, misses=misses)
