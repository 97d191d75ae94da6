"""The executable cache (issue 19 item 4): a compile that finds its entry skips the passes and
gives an executable that behaves as the one the passes made; bad entries are never used."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitlab as jl
from jitlab.backends.kernel_cache import KernelCache
from jitlab.passes.manager import PassManager
from jitlab.runtime import executable_cache

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jitlab as jl
    from jitlab.passes.manager import PassManager

    runs = []
    run = PassManager.run
    PassManager.run = lambda self, *a, **k: runs.append(1) or run(self, *a, **k)

    def step(x, w, acc):
        acc += x.sum(axis=0)            # written in place: donated, written back
        return np.tanh(x @ w) * 2.0 + 1.0

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 4), dtype=np.float32), rng.standard_normal((4, 3), dtype=np.float32)
    out = {}
    for level in ("O1", "O2"):
        fn = jl.jit(step, level=level, target="cpu", dynamic={"x": {0: "B"}})
        acc = np.zeros(4, np.float32)
        y5, y2 = fn(x, w, acc), fn(x[:2].copy(), w, acc)
        out[level] = {"hit": fn.last.report.executable_cache.hit,
                      "y5": y5.tolist(), "y2": y2.tolist(), "acc": acc.tolist()}
    print(json.dumps({"runs": len(runs), "levels": out}))
""")


def run_child(cache_dir) -> dict:
    env = {**os.environ, "JITLAB_CACHE_DIR": str(cache_dir), "JITLAB_EXECUTABLE_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_new_process_skips_the_passes_and_computes_the_same(tmp_path):
    cold, warm = run_child(tmp_path), run_child(tmp_path)
    assert cold["runs"] > 0 and warm["runs"] == 0          # no pipeline ran in the second process
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 4), dtype=np.float32), rng.standard_normal((4, 3), dtype=np.float32)
    for level in ("O1", "O2"):
        assert cold["levels"][level]["hit"] is False and warm["levels"][level]["hit"] is True
        assert warm["levels"][level] == {**cold["levels"][level], "hit": True}
        got = warm["levels"][level]
        np.testing.assert_allclose(got["y5"], np.tanh(x @ w) * 2 + 1, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["y2"], np.tanh(x[:2] @ w) * 2 + 1, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["acc"], x.sum(axis=0) + x[:2].sum(axis=0), rtol=1e-5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The executable cache on, in a folder of its own; counts pipeline runs."""
    monkeypatch.setenv("JITLAB_EXECUTABLE_CACHE", "1")
    runs = []
    run = PassManager.run
    monkeypatch.setattr(PassManager, "run", lambda self, *a, **k: runs.append(1) or run(self, *a, **k))
    return KernelCache(str(tmp_path)), runs


def f(x, y):
    return np.maximum(x * y + 1.0, 0.0).sum(axis=1), np.exp(x) - y


XY = [np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), np.full((3, 4), 0.5, np.float32)]


def compile_f(kernels: KernelCache, level="O1", **options):
    return jl.compile(jl.trace(f, *XY), level=level, target="cpu", cache=kernels, **options)


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_a_hit_behaves_as_the_compile_that_stored_it(cache, level):
    kernels, runs = cache
    cold = compile_f(kernels, level)
    n = len(runs)
    warm = compile_f(kernels, level)
    assert len(runs) == n and warm.report.executable_cache.hit and not cold.report.executable_cache.hit
    expected = f(*XY)
    for got in (cold(*XY), warm(*XY)):
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert str(warm.program) == str(cold.program)
    assert warm.report.memory == cold.report.memory
    assert [p.name for p in warm.report.passes] == [p.name for p in cold.report.passes]
    assert warm.report.graph == cold.report.graph
    with pytest.raises(jl.InputError) as cold_error:
        cold(XY[0][:2], XY[1])
    with pytest.raises(jl.InputError) as warm_error:
        warm(XY[0][:2], XY[1])
    assert str(warm_error.value) == str(cold_error.value)


def _cell(folder: str, above: str = ""):
    """A function as IPython runs a notebook cell: compiled as <tmp>/ipykernel_<pid>/<hash>.py."""
    scope = {"np": np}
    code = above + "def g(x, y):\n    return np.exp(x) * y + 1.0\n"
    exec(compile(code, f"/tmp/{folder}/4032.py", "exec"), scope)
    return scope["g"]


def test_a_notebook_cell_hits_in_a_new_kernel_and_shows_its_own_locations(cache):
    kernels, runs = cache

    def compile_cell(folder, above=""):
        return jl.compile(jl.trace(_cell(folder, above), *XY), level="O1", target="cpu", cache=kernels)

    assert not compile_cell("ipykernel_111").report.executable_cache.hit
    n = len(runs)
    warm = compile_cell("ipykernel_222")
    assert len(runs) == n and warm.report.executable_cache.hit
    assert {op.loc.file for op in warm.program.walk() if op.loc is not None} == {"/tmp/ipykernel_222/4032.py"}
    np.testing.assert_allclose(warm(*XY)[0], np.exp(XY[0]) * XY[1] + 1.0, rtol=1e-6)
    moved = compile_cell("ipykernel_222", above="\n")       # the locations differ: the passes run again
    assert len(runs) > n and not moved.report.executable_cache.hit


def test_donated_inputs_are_written_as_before(cache):
    kernels, _ = cache

    def update(w, g):
        return w - 0.1 * g

    results = []
    for _ in range(2):
        w, g = np.ones(8, np.float32), np.arange(8, dtype=np.float32)
        exe = jl.compile(jl.trace(update, w, g), level="O1", target="cpu", cache=kernels, donate=("w",))
        (out,) = exe(w, g)
        results.append((exe.report.executable_cache.hit, out is w, exe.report.donations))
        np.testing.assert_allclose(out, 1 - 0.1 * g, rtol=1e-6)
    assert [r[0] for r in results] == [False, True]
    assert results[0][1:] == results[1][1:]


def entry_path(kernels: KernelCache) -> str:
    folder = os.path.join(kernels.directory, executable_cache.FOLDER)
    (name,) = [n for n in os.listdir(folder) if n.endswith(".pkl")]      # beside it: its kept kernels
    return os.path.join(folder, name)


@pytest.mark.parametrize("damage", ["truncate", "garble", "not an entry"])
def test_a_corrupt_entry_is_ignored_with_a_warning_and_replaced(cache, damage):
    kernels, runs = cache
    compile_f(kernels)
    path = entry_path(kernels)
    data = open(path, "rb").read()
    broken = {"truncate": data[:-100], "garble": data[:-100] + bytes(100), "not an entry": b"hello"}[damage]
    open(path, "wb").write(broken)
    n = len(runs)
    with pytest.warns(jl.CacheWarning, match="corrupt"):
        exe = compile_f(kernels)
    assert len(runs) > n and not exe.report.executable_cache.hit
    np.testing.assert_allclose(exe(*XY)[1], f(*XY)[1], rtol=1e-6)
    assert compile_f(kernels).report.executable_cache.hit         # rewritten whole


def test_an_entry_from_other_versions_is_ignored(cache):
    kernels, runs = cache
    compile_f(kernels)
    path = entry_path(kernels)
    data = open(path, "rb").read()
    magic = executable_cache.MAGIC
    end = data.index(b"\n", len(magic))
    header = json.loads(data[len(magic):end])
    header["parts"]["versions"] = header["parts"]["versions"].replace("numpy", "numpy 0.1 was")
    open(path, "wb").write(magic + json.dumps(header).encode() + data[end:])
    n = len(runs)
    with pytest.warns(jl.CacheWarning, match="foreign .*versions"):
        exe = compile_f(kernels)
    assert len(runs) > n and not exe.report.executable_cache.hit


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
@pytest.mark.parametrize("where", ["folder", "entry"])
def test_nothing_is_unpickled_from_a_place_others_may_write(cache, where, monkeypatch):
    kernels, runs = cache
    compile_f(kernels)
    path = entry_path(kernels)
    os.chmod(os.path.dirname(path) if where == "folder" else path, 0o777 if where == "folder" else 0o666)
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled an untrusted entry"))
    n = len(runs)
    with pytest.warns(jl.CacheWarning, match="writable by other users"):
        exe = compile_f(kernels)
    assert len(runs) > n and not exe.report.executable_cache.hit


def test_the_key_changes_with_level_target_options_and_pipeline(cache):
    kernels, _ = cache
    program = jl.trace(f, *XY)

    def parts(level="O1", target="cpu", pipeline="p", **options):
        return executable_cache.key_parts(program, level, target, pipeline, options)

    base = KernelCache.full_key(parts())
    others = [parts(level="O2"), parts(target="numpy"), parts(pipeline="p,cse"), parts(donate=("x",)),
              parts(memory_limit=1 << 20), parts(autotune=True)]
    keys = {KernelCache.full_key(p) for p in others}
    assert base not in keys and len(keys) == len(others)
    assert KernelCache.full_key(parts(progress=False, cache=kernels)) == base      # do not change the result
    other = jl.trace(lambda x, y: f(x, y)[::-1], *XY)
    assert executable_cache.key_parts(other, "O1", "cpu", "p", {})["structure"] != parts()["structure"]
    paths = {compile_f(kernels, level).report.executable_cache.path for level in ("O1", "O2")}
    paths.add(compile_f(kernels, donate=("x",)).report.executable_cache.path)
    assert len(paths) == 3


def test_it_can_be_turned_off(cache, monkeypatch):
    kernels, runs = cache
    assert compile_f(kernels, executable_cache=False).report.executable_cache is None
    monkeypatch.setenv("JITLAB_EXECUTABLE_CACHE", "0")
    assert compile_f(kernels).report.executable_cache is None
    assert not os.path.exists(os.path.join(kernels.directory, executable_cache.FOLDER)) or \
        not os.listdir(os.path.join(kernels.directory, executable_cache.FOLDER))
    assert compile_f(kernels, executable_cache=True).report.executable_cache.stored


def test_pass_printouts_bypass_it(cache, capsys):
    kernels, _ = cache
    compile_f(kernels)
    exe = compile_f(kernels, print_after_all=True)
    assert exe.report.executable_cache is None and "after" in capsys.readouterr().out.lower()


def test_folded_weights_are_stored_and_checked_against_the_source_weights(cache):
    kernels, _ = cache
    source = jl.parse("func @g(%x: f32[4]) -> (f32[4]) {\n  %w = np.weight() {name = \"w\"} : f32[4]\n"
                      "  %y = np.add(%x, %w) : f32[4]\n  func.return(%y)\n}\n")
    source.weights = {"w": np.ones(4, np.float32)}
    compiled = source.clone()
    compiled.weights = {"w": np.full(4, 2.0, np.float32)}          # as a folding pass would compute it
    entry = executable_cache.locate(executable_cache.key_parts(source, "O1", "cpu", "p", {}), {"cache": kernels})
    executable_cache.store(entry, compiled, jl.CompileReport(), source)
    program, _ = executable_cache.load(entry, source)
    np.testing.assert_array_equal(program.weights["w"], 2.0)
    # mapped from the entry without a copy, as compiled kernels take arrays: writable and aligned
    w = program.weights["w"]
    assert w.flags.writeable and w.flags.c_contiguous and w.ctypes.data % executable_cache.ALIGN == 0
    del program, w                                                 # no mapping of the file lives on
    data = bytearray(open(entry.path, "rb").read())
    data[-1] ^= 0xFF                                               # the folded weight's last byte
    open(entry.path, "wb").write(bytes(data))
    with pytest.warns(jl.CacheWarning, match="checksum"):
        assert executable_cache.load(entry, source) is None
    executable_cache.store(entry, compiled, jl.CompileReport(), source)
    source.weights = {"w": np.zeros(4, np.float32)}                # other values: the folded ones are stale
    assert executable_cache.load(entry, source) is None


def test_the_explorer_says_where_the_passes_came_from(cache):
    from jitlab.explore.model import build

    kernels, _ = cache
    compile_f(kernels)
    data = build(compile_f(kernels).report)
    assert data["executable_cache"]["hit"] is True
    json.dumps(data["executable_cache"])
    assert len(data["passes"]) > 0          # the pass records, unpickled when the explorer reads them


def test_a_pass_of_the_users_is_part_of_the_key(cache, tmp_path, monkeypatch):
    from jitlab.passes.manager import PASSES, Pass

    program = jl.trace(f, *XY)
    before = executable_cache.key_parts(program, "O1", "cpu", "p", {})["extensions"]
    module = tmp_path / "my_pass.py"
    module.write_text("from jitlab.passes.manager import Pass\nclass MyPass(Pass):\n    name = 'my-pass'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_pass

    monkeypatch.setitem(PASSES, "my-pass", my_pass.MyPass)
    added = executable_cache.key_parts(program, "O1", "cpu", "p", {})["extensions"]
    module.write_text(module.read_text() + "    summary = 'edited'\n")
    edited = executable_cache.key_parts(program, "O1", "cpu", "p", {})["extensions"]
    assert len({before, added, edited}) == 3
    assert issubclass(my_pass.MyPass, Pass)


def test_a_hit_under_recompute_keeps_the_plan_that_met_the_limit(cache):
    kernels, runs = cache

    def chain(x):
        a = np.exp(x)
        b = np.tanh(a) * a
        return (b + a).sum(axis=0), (b * 2.0).sum(axis=0)

    x = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    exes = [jl.compile(jl.trace(chain, x), level="O1", target="cpu", cache=kernels, recompute=True,
                       memory_limit=48 << 10) for _ in range(2)]
    assert [e.report.executable_cache.hit for e in exes] == [False, True]
    assert exes[0].memory_limit == exes[1].memory_limit
    for got, want in zip(exes[1](x), chain(x)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
