"""Test configuration: float64 everywhere, quiet OpenSim logging, each module's
compiled programs released when it ends, simjax's compilation cache off, and the
tests grouped and ordered for the two workers of ``pytest -n 2 --dist loadgroup``."""

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

#: the slowest test groups (measured on the 2-core CI machines), started first so that
#: neither worker is left alone with one of them at the end
SLOWEST_FIRST = (
    "notebook:07_trajectory_optimization.ipynb",
    "notebook:02_muscle_control_optimization.ipynb",
    "tests/test_optimize_inverse.py",
    "tests/test_tools_analyze.py",
    "tests/test_optimize_goals.py",
    "notebook:06_gait_pipeline.ipynb",
    "tests/test_optimize_collocation.py",
    "tests/test_sharding.py",
    "tests/test_tools_rra.py",
)


@pytest.hookimpl(tryfirst=True)  # (before xdist's own hook, which reads the groups)
def pytest_collection_modifyitems(config, items):
    """Group the tests for ``--dist loadgroup``: each module one group (its
    module-scoped compiled fixtures built once, as with ``--dist loadfile``), except
    the notebooks, one group each so that both workers run them; the groups in
    ``SLOWEST_FIRST`` go first, the others keep their order."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}

    def group(item) -> str:
        if item.path.name == "test_notebooks.py" and hasattr(item, "callspec"):
            return f"notebook:{item.callspec.params['name']}"
        return f"tests/{item.path.name}"

    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))
    items.sort(key=lambda item: rank.get(group(item), len(rank)))  # (stable: the rest in order)


def pytest_configure(config):
    # xdist would otherwise start the groups with the most tests first, whatever their time
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
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
