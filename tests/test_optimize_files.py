"""Trajectory files (simjax.optimize.files) against OpenSim Moco 4.6: our solution file
loaded by ``opensim.MocoTrajectory``, Moco's solution file read by ``read_trajectory``,
and guesses from Moco's file and from an inverse-kinematics-style ``.mot``.

One simjax solve (the pendulum swing-up, Hermite-Simpson, 50 intervals, started from
the guess built from Moco's solution file) is shared by the module."""

import math
import warnings

import jax
import numpy as np
import pytest

import simjax as sj
from simjax import optimize
from simjax.io.tables import TimeSeriesTable, write_table
from simjax.optimize import files

_moco = pytest.importorskip("_moco")
osim = pytest.importorskip("opensim")

N = 50


@pytest.fixture(scope="module")
def moco(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moco")
    ref = _moco.moco_pendulum_swing_up(folder, transcription="hermite-simpson", num_mesh_intervals=N)
    system = sj.load_osim(ref["model_path"]).build()
    return ref, system, _moco.simjax_problem(ref["problem"], system)


@pytest.fixture(scope="module")
def guess(moco):
    ref, _, problem = moco
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (Moco's file has every column the problem needs)
        return files.guess_from_table(problem, ref["solution_path"], mesh=N, scheme="hermite-simpson")


@pytest.fixture(scope="module")
def solved(moco, guess):
    """The module's one simjax solve, from the guess of Moco's file."""
    ref, _, problem = moco
    tol = ref["settings"]["optim_convergence_tolerance"]
    return optimize.solve(
        problem, mesh=N, scheme="hermite-simpson", options=optimize.moco_options(tol, tol), guess=guess
    )


def _header(path) -> dict:
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line == "endheader":
                return out
            key, _, value = line.partition("=")
            out[key] = value
    raise AssertionError(f"{path}: no endheader")


def test_solve_starts_from_the_guess_of_mocos_file(moco, solved):
    ref, _, _ = moco
    assert int(solved.status) == 0
    assert abs(float(solved.objective) - ref["objective"]) < 1e-6 * abs(ref["objective"])


def test_written_solution_loads_in_opensim(moco, solved, tmp_path):
    ref, system, problem = moco
    path = tmp_path / "simjax_solution.sto"
    files.write_trajectory(solved, path, problem, goal_names=["effort"])
    traj = osim.MocoTrajectory(str(path))
    assert list(traj.getStateNames()) == list(system.y_names)
    assert list(traj.getControlNames()) == list(system.actuator_paths)
    assert traj.getNumTimes() == 2 * N + 1
    n = traj.getNumTimes()
    assert np.abs(np.asarray(traj.getTimeMat()).reshape(n) - np.asarray(solved.time)).max() <= 1e-12
    for name in traj.getStateNames():
        column = np.asarray(traj.getStateMat(name)).reshape(n)
        assert np.abs(column - np.asarray(solved.state(name))).max() <= 1e-12, name
    for name in traj.getControlNames():
        column = np.asarray(traj.getControlMat(name)).reshape(n)
        assert np.abs(column - np.asarray(solved.control(name))).max() <= 1e-12, name
    # the header: Moco's keys, in Moco's (sorted) order, less the solve's duration
    ours, mocos = _header(path), _header(ref["solution_path"])
    assert [k for k in ours if k != "OpenSimVersion"] == [
        k for k in mocos if k not in ("solver_duration", "OpenSimVersion")
    ]
    assert ours["success"] == mocos["success"] == "true"
    assert ours["status"] == mocos["status"] == "Solve_Succeeded"
    assert float(ours["objective"]) == float(solved.objective)
    assert abs(float(ours["objective_effort"]) - float(solved.objective)) < 1e-12 * float(solved.objective)
    assert int(ours["num_iterations"]) == int(solved.iterations)
    # and back with read_trajectory, exactly
    back = files.read_trajectory(path)
    assert np.array_equal(back["time"], np.asarray(solved.time))
    assert np.array_equal(np.stack([back["states"][n] for n in system.y_names], 1), np.asarray(solved.states))
    assert np.array_equal(
        np.stack([back["controls"][n] for n in system.actuator_paths], 1), np.asarray(solved.controls)
    )
    assert back["objective"] == float(solved.objective) and back["success"] is True
    assert back["status"] == "Solve_Succeeded" and set(back["objective_terms"]) == {"effort"}
    # and Moco takes it as its guess (MocoSolver::setGuessFile checks it against its problem)
    study = _moco.study_from_problem(
        ref["model_path"], ref["problem"], transcription="hermite-simpson", num_mesh_intervals=N
    )
    osim.MocoCasADiSolver.safeDownCast(study.updSolver()).setGuessFile(str(path))
    again = _moco.solve(study)
    assert again["success"] and abs(again["objective"] - ref["objective"]) < 1e-8 * ref["objective"]


def test_batched_solution_is_refused(guess, tmp_path):
    batch = jax.tree_util.tree_map(lambda a: np.stack([a, a]), guess)
    with pytest.raises(ValueError, match=r"batched.*\(2, 101, 2\)"):
        files.write_trajectory(batch, tmp_path / "batch.sto")


def test_read_mocos_solution_file(moco):
    ref, _, _ = moco
    out = files.read_trajectory(ref["solution_path"])
    assert out["state_names"] == ref["state_names"] and out["control_names"] == ref["control_names"]
    # (Moco writes 16 significant digits)
    np.testing.assert_allclose(out["time"], ref["time"], rtol=1e-15, atol=1e-16)
    for group in ("states", "controls"):
        assert list(out[group]) == list(ref[group])
        for name, values in ref[group].items():
            np.testing.assert_allclose(out[group][name], values, rtol=2e-15, atol=1e-15, err_msg=name)
    assert out["multipliers"] == {} and out["derivatives"] == {} and out["parameters"] == {}
    # (Moco writes the objective with 6 decimals)
    assert abs(out["objective"] - ref["objective"]) < 1e-6
    assert abs(out["objective_terms"]["effort"] - ref["objective_terms"]["effort"]) < 1e-6
    assert out["success"] is True and out["status"] == ref["status"] == "Solve_Succeeded"
    assert out["iterations"] == ref["iterations"]


def test_guess_of_mocos_file_is_mocos_trajectory(moco, guess):
    ref, system, problem = moco
    states = _moco.states_in_system_order(ref, system)
    controls = _moco.controls_in_system_order(ref, system)
    ny, nc = states.shape[1], controls.shape[1]
    z = np.asarray(guess.nlp.z)
    assert z.shape == (N + 1, 2 * (ny + nc))
    assert np.array_equal(np.asarray(guess.nlp.g), [ref["initial_time"], ref["final_time"]])
    # the stage layout: [y, c] at the mesh points, [y_mid, c_mid] at the midpoints, the
    # last stage's midpoint entries 0
    assert np.abs(z[:, :ny] - states[0::2]).max() <= 1e-12
    assert np.abs(z[:, ny : ny + nc] - controls[0::2]).max() <= 1e-12
    assert np.abs(z[:-1, ny + nc : 2 * ny + nc] - states[1::2]).max() <= 1e-12
    assert np.abs(z[:-1, 2 * ny + nc :] - controls[1::2]).max() <= 1e-12
    assert np.all(z[-1, ny + nc :] == 0.0)
    assert np.abs(np.asarray(guess.time) - ref["time"]).max() <= 1e-12
    assert np.abs(np.asarray(guess.states) - states).max() <= 1e-12
    assert np.abs(np.asarray(guess.controls) - controls).max() <= 1e-12
    assert np.all(np.asarray(guess.nlp.multipliers) == 0.0) and int(guess.status) == -1


def test_guess_from_a_motion_in_degrees_warns_of_missing_and_unknown_columns(moco, tmp_path):
    _, system, problem = moco
    problem = problem.bound("/forceset/tau", (-10.0, 30.0))  # (the default guess: 10)
    t = np.linspace(0.0, 1.0, 11)
    motion = TimeSeriesTable(t, np.stack([180.0 * t**2, np.ones_like(t)], 1), ["q", "bogus"], {"inDegrees": "yes"})
    path = tmp_path / "ik_output.mot"
    write_table(motion, path)
    with pytest.warns(files.TrajectoryWarning) as record:
        guess = files.guess_from_table(problem, path, mesh=10, scheme="trapezoidal")
    messages = [str(w.message) for w in record]
    assert len(messages) == 2 and all(str(path) in m for m in messages), messages
    assert any("bogus" in m for m in messages)
    assert any("/jointset/pin/q/speed" in m and "/forceset/tau" in m for m in messages)
    _, z0, g0, _ = optimize.transcribe(problem, 10, "trapezoidal")
    z = np.asarray(guess.nlp.z)
    assert z.shape == (11, 3)
    grid = np.linspace(0.0, 1.0, 11)
    # q: from degrees, interpolated linearly (the file's samples are the grid's), and
    # clipped to its final bound (pi); the rest: transcribe's default
    np.testing.assert_allclose(z[:, 0], np.minimum(math.pi * grid**2, math.pi), rtol=1e-15, atol=1e-15)
    assert np.array_equal(z[:, 1:], np.asarray(z0)[:, 1:]) and np.all(z[:, 2] == 10.0)
    assert np.array_equal(np.asarray(guess.nlp.g), np.asarray(g0))
    # a table by itself (not a file) is named as such; interpolation between samples
    with pytest.warns(files.TrajectoryWarning, match="the table"):
        guess = files.guess_from_table(problem, motion, mesh=20, scheme="trapezoidal")
    tq = np.linspace(0.0, 1.0, 21)
    np.testing.assert_allclose(np.asarray(guess.nlp.z)[:, 0], np.interp(tq, t, math.pi * t**2), rtol=1e-14)


def test_written_guess_is_a_plain_moco_trajectory(guess, tmp_path):
    path = tmp_path / "guess.sto"
    files.write_trajectory(guess, path)
    header = _header(path)
    assert "success" not in header and "objective" not in header and header["num_states"] == "2"
    traj = osim.MocoTrajectory(str(path))
    n = traj.getNumTimes()
    assert np.array_equal(np.asarray(traj.getStatesTrajectoryMat()).reshape(n, -1), np.asarray(guess.states))


def test_objective_terms_of_mocos_trajectory_are_mocos(moco, guess):
    """Simpson's rule on Moco's own grid gives Moco's objective; an endpoint goal
    its value at the final time; names default to the goals' class names."""
    ref, _, problem = moco
    terms = files.objective_terms(guess, problem.goal(optimize.FinalTime(2.0)))
    assert set(terms) == {"control_effort", "final_time"}
    assert abs(terms["control_effort"] - ref["objective"]) < 1e-10 * ref["objective"]
    assert terms["final_time"] == 2.0 * ref["final_time"]
    with pytest.raises(ValueError, match="1 names for the problem's 2 goals"):
        files.objective_terms(guess, problem.goal(optimize.FinalTime()), goal_names=["effort"])


def test_moco_file_with_multipliers_and_parameters(moco, tmp_path):
    """Every column group of a MocoTrajectory written by OpenSim; a guess ignores the
    groups that are not states or controls (and says so), and holds the end values
    past the file's time range (and says so)."""
    _, _, problem = moco
    time = osim.Vector(3, 0.0)
    for i in range(3):
        time.set(i, 0.25 * i)
    states, controls, multipliers = osim.Matrix(3, 2, 1.0), osim.Matrix(3, 1, 2.0), osim.Matrix(3, 1, 3.0)
    traj = osim.MocoTrajectory(
        time,
        ["/jointset/pin/q/value", "/jointset/pin/q/speed"],
        ["/forceset/tau"],
        ["lambda_0"],
        ["mass"],
        states,
        controls,
        multipliers,
        osim.RowVector(1, 7.0),
    )
    path = tmp_path / "opensim_trajectory.sto"
    traj.write(str(path))
    out = files.read_trajectory(path)
    assert np.array_equal(out["time"], [0.0, 0.25, 0.5])
    assert out["multipliers"].keys() == {"lambda_0"} and np.all(out["multipliers"]["lambda_0"] == 3.0)
    assert out["parameters"] == {"mass": 7.0} and out["objective"] is None and out["success"] is None
    with pytest.warns(files.TrajectoryWarning) as record:
        guess = files.guess_from_table(problem, path, mesh=4, scheme="trapezoidal")
    messages = [str(w.message) for w in record]
    assert all(str(path) in m for m in messages) and len(messages) == 2, messages
    assert any("lambda_0, mass" in m for m in messages) and any("held beyond" in m for m in messages)
    z = np.asarray(guess.nlp.z)  # (fixed time [0, 1]; the ends' fixed values kept)
    assert np.array_equal(z[:, 2], np.full(5, 2.0)) and np.array_equal(z[1:-1, :2], np.ones((3, 2)))
    assert z[0, 0] == 0.0 and z[-1, 0] == math.pi and z[0, 1] == 0.0 and z[-1, 1] == 0.0
    # a table that is not a MocoTrajectory
    plain = tmp_path / "plain.sto"
    write_table(TimeSeriesTable([0.0, 1.0], [[1.0], [2.0]], ["a"]), plain)
    with pytest.raises(ValueError, match=r"plain\.sto: not a MocoTrajectory"):
        files.read_trajectory(plain)
