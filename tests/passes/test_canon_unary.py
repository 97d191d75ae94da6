"""FileCheck tests of the canonicalization rules for chains of unary ops, selects and
casts: idempotent and absorbing ops, where/maximum/minimum of one value, and cast round
trips that lose nothing (and those that would, which must stay)."""

import pytest

from tests.passes.filecheck import check_rewrite
from tests.passes.test_canon_algebra import case, returns

CASES = [
    case('abs-neg',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.abs(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %1 = np.abs(%x) : f32[4]
          func.return(%1)
        }
        """),
    case('square-neg',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.neg(%x) : f32[4]
          %1 = np.square(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %1 = np.square(%x) : f32[4]
          func.return(%1)
        }
        """),
    case('abs-abs',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.abs(%x) : f32[4]
          %1 = np.abs(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.abs(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('abs-relu',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.relu(%x) : f32[4]
          %1 = np.abs(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.relu(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('relu-relu',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.relu(%x) : f32[4]
          %1 = np.relu(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.relu(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('relu-abs',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.abs(%x) : f32[4]
          %1 = np.relu(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.abs(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('relu-abs-int-kept',
         """
        func @f(%x: i8[4]) -> (i8[4]) {
          %0 = np.abs(%x) : i8[4]
          %1 = np.relu(%0) : i8[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('relu-abs', 'needs $x to be a float: it is i8')]),
    case('round-integral',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.ceil(%x) : f32[4]
          %1 = np.floor(%0) : f32[4]
          %2 = np.sign(%1) : f32[4]
          %3 = np.round(%2) : f32[4]
          func.return(%3)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.ceil(%x) : f32[4]
          %2 = np.sign(%0) : f32[4]
          func.return(%2)
        }
        """),
    case('round-of-exp-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.exp(%x) : f32[4]
          %1 = np.floor(%0) : f32[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('round-integral', 'np.exp, not np.floor or np.ceil or np.trunc or np.round or np.sign')]),
    case('sign-sign',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.sign(%x) : f32[4]
          %1 = np.sign(%0) : f32[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.sign(%x) : f32[4]
          func.return(%0)
        }
        """),
    case('select-self',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.maximum(%x, %x) : f32[4]
          %1 = np.minimum(%0, %0) : f32[4]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('select-self-different-kept',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %0 = np.maximum(%x, %y) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('select-self', '$x would be both input %x and input %y')]),
    case('where-same',
         """
        func @f(%c: bool[4], %x: f32[4]) -> (f32[4]) {
          %0 = np.where(%c, %x, %x) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('where-same-broadcasts',
         """
        func @f(%c: bool[2,4], %x: f32[4]) -> (f32[2,4]) {
          %0 = np.where(%c, %x, %x) : f32[2,4]
          func.return(%0)
        }
        """,
         None,
         misses=[('where-same', 'needs $x and $r to have the same type: f32[4] vs f32[2,4]')]),
    case('where-true',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<bool[] true>} : bool[]
          %0 = np.where(%c, %x, %y) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('where-false',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<bool[4] [false, false, false, false]>} : bool[4]
          %0 = np.where(%c, %x, %y) : f32[4]
          func.return(%0)
        }
        """,
         returns('%y')),
    case('where-mixed-kept',
         """
        func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
          %c = np.constant() {value = dense<bool[4] [true, false, true, true]>} : bool[4]
          %0 = np.where(%c, %x, %y) : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('where-true', 'splat of true'), ('where-false', 'splat of false')]),
    case('not-not',
         """
        func @f(%x: bool[4]) -> (bool[4]) {
          %0 = np.logical_not(%x) : bool[4]
          %1 = np.logical_not(%0) : bool[4]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('invert-invert',
         """
        func @f(%x: u8[4]) -> (u8[4]) {
          %0 = np.bitwise_not(%x) : u8[4]
          %1 = np.bitwise_not(%0) : u8[4]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('clip-unbounded',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.clip(%x) : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('clip-bounded-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.clip(%x) {min = 0.0} : f32[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('clip-unbounded', 'attribute min of np.clip is 0.0, not none')]),
    case('cast-noop',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.cast(%x) {dtype = f32} : f32[4]
          func.return(%0)
        }
        """,
         returns('%x')),
    case('cast-roundtrip',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.cast(%x) {dtype = f64} : f64[4]
          %1 = np.cast(%0) {dtype = f32} : f32[4]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('cast-roundtrip-int',
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %0 = np.cast(%x) {dtype = f64} : f64[4]
          %1 = np.cast(%0) {dtype = i32} : i32[4]
          func.return(%1)
        }
        """,
         returns('%x')),
    case('cast-narrowing-kept',
         """
        func @f(%x: f64[4]) -> (f64[4]) {
          %0 = np.cast(%x) {dtype = f32} : f32[4]
          %1 = np.cast(%0) {dtype = f64} : f64[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('cast-roundtrip', 'needs $x to convert to $mid without loss'), ('cast-chain', 'needs cast($x, $mid) then $t to equal cast($x, $t)')]),
    case('cast-i64-through-f64-kept',
         """
        func @f(%x: i64[4]) -> (i64[4]) {
          %0 = np.cast(%x) {dtype = f64} : f64[4]
          %1 = np.cast(%0) {dtype = i64} : i64[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('cast-roundtrip', 'without loss')]),
    case('cast-chain',
         """
        func @f(%x: f32[4]) -> (f16[4]) {
          %0 = np.cast(%x) {dtype = f64} : f64[4]
          %1 = np.cast(%0) {dtype = f16} : f16[4]
          func.return(%1)
        }
        """,
         """
        func @f(%x: f32[4]) -> (f16[4]) {
          %1 = np.cast(%x) {dtype = f16} : f16[4]
          func.return(%1)
        }
        """),
    case('cast-chain-saturating-kept',
         """
        func @f(%x: i16[4]) -> (i8[4]) {
          %0 = np.cast(%x) {dtype = f32} : f32[4]
          %1 = np.cast(%0) {dtype = i8} : i8[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('cast-chain', 'to equal cast($x, $t)')]),
    case('cast-widening-kept',
         """
        func @f(%x: f32[4]) -> (f64[4]) {
          %0 = np.cast(%x) {dtype = f64} : f64[4]
          func.return(%0)
        }
        """,
         None,
         misses=[('cast-noop', 'needs $t to be the dtype of $x')]),
    case('abs-exp-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.exp(%x) : f32[4]
          %1 = np.abs(%0) : f32[4]
          %2 = np.square(%1) : f32[4]
          %3 = np.sign(%2) : f32[4]
          func.return(%3)
        }
        """,
         None,
         misses=[('abs-neg', 'np.exp, not np.neg'), ('abs-abs', 'np.exp, not np.abs'), ('abs-relu', 'np.exp, not np.relu'), ('square-neg', 'np.abs, not np.neg'), ('sign-sign', 'np.square, not np.sign')]),
    case('relu-exp-kept',
         """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0 = np.exp(%x) : f32[4]
          %1 = np.relu(%0) : f32[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('relu-relu', 'np.exp, not np.relu')]),
    case('not-isnan-kept',
         """
        func @f(%x: f32[4]) -> (bool[4]) {
          %0 = np.isnan(%x) : bool[4]
          %1 = np.logical_not(%0) : bool[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('not-not', 'np.isnan, not np.logical_not')]),
    case('invert-neg-kept',
         """
        func @f(%x: i32[4]) -> (i32[4]) {
          %0 = np.neg(%x) : i32[4]
          %1 = np.bitwise_not(%0) : i32[4]
          func.return(%1)
        }
        """,
         None,
         misses=[('invert-invert', 'np.neg, not np.bitwise_not')]),
]

@pytest.mark.parametrize("source,expected,misses,options", CASES)
def test_rule(source, expected, misses, options):
    check_rewrite(source, "canonicalize" + options, expected, misses=misses)
