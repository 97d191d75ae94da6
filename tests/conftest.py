import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A test's compile runs the passes it tests, not a result the user's cache kept from an earlier
# run; tests/runtime/test_executable_cache.py turns the executable cache on where it tests it.
os.environ.setdefault("JITLAB_EXECUTABLE_CACHE", "0")

from jitlab.passes.manager import SETTINGS  # noqa: E402

SETTINGS.verify_each = True   # every pass run by the tests is followed by the verifier
