"""licm: ops of loop bodies that read only values from outside the loop move before it."""

from tests.passes.filecheck import check_rewrite

LOOP = """
func @f(%x: f32[4], %w: f32[4]) -> (f32[4]) {
  %lo = np.constant() {value = dense<i64[] 0>} : i64[]
  %hi = np.constant() {value = dense<i64[] 3>} : i64[]
  %one = np.constant() {value = dense<i64[] 1>} : i64[]
  %r = scf.for(%lo, %hi, %one, %x, %w) : f32[4] {
  ^bb(%i: i64[], %c: f32[4], %v: f32[4]):
    %e = np.exp(%v) : f32[4]
    %t = np.tanh(%e) : f32[4]
    %a = np.mul(%c, %t) : f32[4]
    scf.yield(%a)
  }
  func.return(%r)
}
"""


def test_an_invariant_chain_moves_before_the_loop():
    check_rewrite(LOOP, "licm", """
    CHECK: np.exp(%w)
    CHECK-NEXT: np.tanh(
    CHECK-NEXT: scf.for(%lo, %hi, %one, %x, %w,
    CHECK: np.mul(%c,
    CHECK-NOT: np.exp(%v)
    CHECK-NOT: np.tanh(%e)
    """)


def test_ops_reading_the_carried_values_or_the_index_stay():
    text = LOOP.replace("%e = np.exp(%v)", "%e = np.exp(%c)")
    check_rewrite(text, "licm", None, misses=[("hoist-loop-invariant", "reads only values from outside the loop")])


def test_a_branch_is_left_alone():
    text = """
func @f(%x: f32[4], %p: bool[]) -> (f32[4]) {
  %r = scf.if(%p, %x) : f32[4] {
  ^bb(%a: f32[4]):
    %b = np.exp(%a) : f32[4]
    scf.yield(%b)
  } {
  ^bb(%c: f32[4]):
    scf.yield(%c)
  }
  func.return(%r)
}
"""
    check_rewrite(text, "licm", None)


def test_a_while_loop_hoists_from_both_regions():
    text = """
func @f(%x: f32[4], %w: f32[4]) -> (f32[4]) {
  %r = scf.while(%x, %w) {max_iterations = 3} : f32[4] {
  ^bb(%c: f32[4], %v: f32[4]):
    %s = np.sum(%v) {axes = [0]} : f32[]
    %t = np.sum(%c) {axes = [0]} : f32[]
    %p = np.less(%t, %s) : bool[]
    scf.condition(%p)
  } {
  ^bb(%d: f32[4], %u: f32[4]):
    %n = np.neg(%u) : f32[4]
    %e = np.sub(%d, %n) : f32[4]
    scf.yield(%e)
  }
  func.return(%r)
}
"""
    check_rewrite(text, "licm", """
    CHECK: np.sum(%w)
    CHECK-NEXT: np.neg(%w)
    CHECK-NEXT: scf.while(%x, %w,
    CHECK-NOT: np.neg(%u)
    CHECK-NOT: np.sum(%v)
    """)
