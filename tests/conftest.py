"""Test configuration: float64 everywhere, quiet OpenSim logging, and each module's
compiled programs released when it ends."""

import gc
import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("OPENSIM_LOG_LEVEL", "off")


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
