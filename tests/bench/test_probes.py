"""The code-generation probes compute right answers (their timings are only reported)."""

from jitlab.backends.numba_cpu.mathcheck import is_x86
from jitlab.bench import probes


def test_reduction_probe_variants_agree_with_numpy_on_ragged_rows():
    rows = probes.reduction(rows=8, cols=16 * 3 + 5, repeats=1)
    names = [r["variant"] for r in rows]
    assert any("llvm.maximum" in n for n in names) and any("reassoc" in n for n in names)
    assert all(r["ms"] > 0 for r in rows)
    if is_x86():
        vector = {r["variant"]: r["vector"] for r in rows}
        assert vector["max: bits.maximum (llvm.maximum)"] != "no"



def test_spin_ratio_is_wall_over_cpu_time():
    # cores() runs this in child processes; in one quiet process wall time is about the CPU time
    assert probes.spin_ratio(1 << 10, start_at=0.0) > 0.5
