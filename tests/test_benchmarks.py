"""The benchmark suite's measurements that a goal depends on (issue 10)."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("opensim")

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # benchmarks/ is not an installed package
    sys.path.insert(0, _ROOT)

from benchmarks import suite  # noqa: E402


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
