import os

import pytest
from hypothesis import HealthCheck, settings

try:
    from _pytest.nodeid import NodeId  # pytest >= 9.2: a node's id is structured
except ImportError:                                   # before, xdist's own group names take effect
    NodeId = None

settings.register_profile("ci", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=250, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A test's compile runs the passes it tests, not a result the user's cache kept from an earlier
# run; tests/runtime/test_executable_cache.py turns the executable cache on where it tests it.
os.environ.setdefault("JITLAB_EXECUTABLE_CACHE", "0")

from jitlab.passes.manager import SETTINGS  # noqa: E402

SETTINGS.verify_each = True   # every pass run by the tests is followed by the verifier


@pytest.fixture(scope="session")
def run_kernels(tmp_path_factory) -> str:
    """A kernel cache folder for this test run, shared by xdist's workers: apart from the user's cache,
    and a kernel two workers need is compiled once (the cache takes concurrent processes)."""
    base = tmp_path_factory.getbasetemp()
    return str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kernels")


@pytest.fixture
def private_cache(run_kernels, monkeypatch):
    """Compiles into the run's kernel cache (run_kernels), not the user's."""
    monkeypatch.setenv("JITLAB_CACHE_DIR", run_kernels)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Names each test of an `xdist_group` by its group, as `--dist loadgroup` needs to send the group to
    one worker: xdist 3.8 writes the name into `item._nodeid`, which pytest 9.2 no longer reads (a node's
    id is its `_id`), so without this every group was split across the workers."""
    if NodeId is None or not getattr(config.option, "loadgroup", False):     # set in xdist's workers under loadgroup
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")
