"""Test configuration: float64 everywhere, XLA's older CPU emitters at LLVM's
optimization level 1, quiet OpenSim logging, each module's compiled programs released when it
ends, simjax's compilation cache off, and the tests grouped and ordered for the two
workers of ``pytest -n 2 --dist loadgroup``."""

import collections
import gc
import json
import os

import jax
import pytest

# Every program of the suite compiled with XLA's older CPU emitters, as simjax's own jit
# boundaries are (simjax.compiling): the tests' own jax.jit of simjax functions too, which
# otherwise get XLA's defaults. A/B on one core: test_wrapping_paths.py 441 -> 240 s, with
# results equal to round-off. Set before JAX starts its backend (importing jax does not);
# the notebooks' kernels and the tests' subprocesses inherit it. (jaxlib 0.11 dropped the
# option, and a flag XLA does not know is fatal there.)
if jax.__version_info__ < (0, 11) and "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_use_fusion_emitters=false".strip()
# ...and with LLVM's optimization level 1 (XLA's default: 3): the suite's time is mostly
# compilation, of programs run for a few steps each. A/B alone on a 2-core machine:
# test_contact.py 196 -> 128 s; results equal to round-off. (Level 0 was slower, 152 s,
# and on jaxlib 0.10.2 it compiles test_wrapping_recorded.py's ellipsoid wrap to another
# answer.) What simjax compiles for its users is unchanged.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=1".strip()

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("OPENSIM_LOG_LEVEL", "off")
# simjax's persistent compilation cache (simjax.compilation_cache) is off in the tests: they
# write nothing to the user's cache folder (tests/test_compilation_cache.py turns it on in
# subprocesses of its own)
os.environ.setdefault("SIMJAX_NO_COMPILATION_CACHE", "1")

#: each test group's time on a 2-core machine (s): the slowest groups start first, so
#: that neither worker is left alone with one of them at the end. Rewrite it with
#: ``pytest -n 2 --dist loadgroup --write-group-durations tests/durations.json``.
DURATIONS_FILE = os.path.join(os.path.dirname(__file__), "durations.json")
#: a group that the file does not know yet (a new module) is taken to take this long (s)
UNKNOWN_DURATION = 60.0


def _group(nodeid: str) -> str:
    """The test group of a test (its node id, with or without xdist's ``@group``): its
    module, or for a notebook the notebook alone."""
    tail = nodeid.rsplit("]", 1)[-1]
    if "@" in tail:  # (xdist's suffix; a parameter may hold an "@" of its own)
        nodeid = nodeid[: len(nodeid) - len(tail) + tail.index("@")]
    path, _, test = nodeid.partition("::")
    if os.path.basename(path) == "test_notebooks.py" and test.startswith("test_notebook_runs["):
        return f"notebook:{test[len('test_notebook_runs[') : -1]}"
    return f"tests/{os.path.basename(path)}"


def pytest_addoption(parser):
    parser.addoption(
        "--write-group-durations",
        metavar="PATH",
        default=None,
        help="write each test group's total time (s) as JSON to PATH when the run ends",
    )


@pytest.hookimpl(tryfirst=True)  # (before xdist's own hook, which reads the groups)
def pytest_collection_modifyitems(config, items):
    """Group the tests for ``--dist loadgroup``: each module one group (its
    module-scoped compiled fixtures built once, as with ``--dist loadfile``), except
    the notebooks, one group each so that both workers run them; the groups run
    slowest first (``DURATIONS_FILE``), in collection order where equal."""
    try:
        with open(DURATIONS_FILE, encoding="utf-8") as f:
            durations = json.load(f)
    except FileNotFoundError:
        durations = {}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item.nodeid)))
    items.sort(key=lambda item: -durations.get(_group(item.nodeid), UNKNOWN_DURATION))  # (stable)


_group_times: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
    # (on the controller, which receives every worker's reports; and without xdist)
    _group_times[_group(report.nodeid)] += report.duration


def pytest_sessionfinish(session):
    path = session.config.getoption("--write-group-durations")
    if path and not hasattr(session.config, "workerinput"):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({g: round(t, 1) for g, t in _group_times.most_common()}, f, indent=1)
            f.write("\n")


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
