"""Test configuration: float64 everywhere, quiet OpenSim logging, each module's
compiled programs released when it ends, and simjax's compilation cache off."""

import gc
import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("OPENSIM_LOG_LEVEL", "off")
# simjax's persistent compilation cache (simjax.compilation_cache) is off in the tests: they
# write nothing to the user's cache folder (tests/test_compilation_cache.py turns it on in
# subprocesses of its own)
os.environ.setdefault("SIMJAX_NO_COMPILATION_CACHE", "1")


def pytest_configure(config):
    try:
        import opensim

        opensim.Logger.setLevelString("Off")
    except Exception:
        pass


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Free each test module's compiled programs when it ends.

    XLA's CPU backend maps memory for every executable it compiles; over the whole
    suite in one process these maps pass the kernel's ``vm.max_map_count`` (65530),
    and the next compilation aborts. Dropping JAX's caches between modules keeps the
    count to one module's programs."""
    yield
    jax.clear_caches()
    gc.collect()
