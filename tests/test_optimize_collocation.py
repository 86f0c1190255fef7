"""Direct collocation (simjax.optimize) against OpenSim Moco 4.6 run live on the same
model file, problem, transcription, mesh and tolerances (tests/_moco.py)."""

import numpy as np
import pytest

import simjax as sj
from simjax import optimize

_moco = pytest.importorskip("_moco")
pytest.importorskip("opensim")


def _compare(solution, ref, system):
    states = _moco.states_in_system_order(ref, system)
    controls = _moco.controls_in_system_order(ref, system)
    assert np.allclose(np.asarray(solution.time), ref["time"], atol=1e-9 + 1e-6 * ref["time"][-1])
    return np.abs(np.asarray(solution.states) - states).max(), np.abs(np.asarray(solution.controls) - controls).max()


def test_sliding_mass_in_minimum_time_matches_moco(tmp_path):
    ref = _moco.moco_sliding_mass(tmp_path, transcription="trapezoidal", num_mesh_intervals=50)
    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(_moco.simjax_problem(ref["problem"], system), mesh=50, scheme="trapezoidal",
                              options=optimize.Options(tol=tol, constraint_tol=tol))
    assert int(solution.status) == 0
    tf = float(solution.time[-1])
    assert abs(tf - ref["final_time"]) < 1e-6 and abs(tf - 0.4) < 1e-3  # (0.4 s: the continuous optimum)
    states, controls = _compare(solution, ref, system)
    # bang-bang: the control jumps from +50 to -50 N at the switch, where the two optima
    # differ most
    assert states < 1e-4 and controls < 1e-2, (states, controls)


@pytest.mark.parametrize("scheme", ["hermite-simpson"])
def test_pendulum_swing_up_with_least_effort_matches_moco(tmp_path, scheme):
    ref = _moco.moco_pendulum_swing_up(tmp_path, transcription=scheme, num_mesh_intervals=50)
    system = sj.load_osim(_moco.pendulum_osim(tmp_path)).build()
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(_moco.simjax_problem(ref["problem"], system), mesh=50, scheme=scheme,
                              options=optimize.Options(tol=tol, constraint_tol=tol))
    assert int(solution.status) == 0
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * abs(ref["objective"])
    states, controls = _compare(solution, ref, system)
    assert states < 1e-5 and controls < 1e-4, (states, controls)
