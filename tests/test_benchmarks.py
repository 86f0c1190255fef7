"""The benchmark suite's measurements that a goal depends on (issue 10)."""

import importlib.util
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # benchmarks/ is not an installed package
    sys.path.insert(0, _ROOT)

from benchmarks import stiffness, suite  # noqa: E402

needs_opensim = pytest.mark.skipif(importlib.util.find_spec("opensim") is None, reason="OpenSim is not installed")


@needs_opensim
def test_agreement_with_a_tight_reference_matches_opensims_on_the_double_pendulum():
    """Both engines take the same Runge-Kutta-Merson steps on the double pendulum, so
    their errors against OpenSim's tight solution are the same, and of the size the
    accuracy allows."""
    system, om = suite.load("double_pendulum")
    state = suite.initial_state(system)
    got = suite.agreement(system, state, om, 1e-5, ends=(0.5, 1.0), spreads=(1.0, 1.02))
    assert got["runs"] == 4
    assert 1e-7 < got["opensim"] < 1e-4
    assert got["ratio"] == pytest.approx(1.0, abs=1e-6)


def test_largest_difference_is_over_the_references_coordinates_that_both_have():
    got = suite.largest_difference({"/a": 1.0, "/b": 2.5, "/c": 9.0}, {"/a": 1.5, "/b": 2.25, "/d": 0.0})
    assert got == 0.5


def test_stability_bounds_of_the_explicit_methods_on_the_negative_real_axis():
    from simjax import solvers

    assert stiffness.stability_bound(solvers.RungeKuttaMerson) == pytest.approx(-3.548322344, abs=1e-8)
    assert stiffness.stability_bound(solvers.RK4) == pytest.approx(-2.785293563, abs=1e-8)


def test_a_muscle_models_steps_sit_at_the_stability_bound_of_its_fiber_length():
    """Past the first steps, Runge-Kutta-Merson's step on the tug of war is as large as
    the stiffest rate (a fiber length's) allows: stability, not accuracy, sets it."""
    got = stiffness.measure("Tug_of_War_Millard", samples=4)
    assert got["steps"] > 50
    later = got["rows"][1:]
    assert len(later) == 3
    for row in later:
        assert row["stiffest"].endswith("/fiber_length")
        assert row["rate"] < -200.0
        assert 0.8 < row["h_rate"] / got["bound"] < 1.2
