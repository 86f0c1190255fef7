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
    solution = optimize.solve(
        _moco.simjax_problem(ref["problem"], system),
        mesh=50,
        scheme="trapezoidal",
        options=optimize.moco_options(tol, tol),
    )
    assert int(solution.status) == 0
    tf = float(solution.time[-1])
    assert abs(tf - ref["final_time"]) < 1e-6 and abs(tf - 0.4) < 1e-3  # (0.4 s: the continuous optimum)
    states, controls = _compare(solution, ref, system)
    # bang-bang: the control jumps from +50 to -50 N at the switch, where the two optima
    # differ most
    assert states < 1e-4 and controls < 1e-2, (states, controls)
    # the solver's iteration log, printed from the trajectory
    import io

    log = io.StringIO()
    optimize.print_log(solution, file=log)
    lines = log.getvalue().splitlines()
    assert lines[-1] == f"status: solved after {int(solution.iterations)} iterations"
    assert len(lines) == int(solution.iterations) + 3 and float(lines[-2].split()[1]) == pytest.approx(tf, 1e-8)


@pytest.mark.parametrize("scheme", ["hermite-simpson"])
def test_pendulum_swing_up_with_least_effort_matches_moco(tmp_path, scheme):
    ref = _moco.moco_pendulum_swing_up(tmp_path, transcription=scheme, num_mesh_intervals=50)
    system = sj.load_osim(_moco.pendulum_osim(tmp_path)).build()
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(
        _moco.simjax_problem(ref["problem"], system),
        mesh=50,
        scheme=scheme,
        options=optimize.moco_options(tol, tol),
    )
    assert int(solution.status) == 0
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * abs(ref["objective"])
    states, controls = _compare(solution, ref, system)
    assert states < 1e-5 and controls < 1e-4, (states, controls)


def test_multiple_shooting_swings_the_pendulum_up_along_a_simulated_trajectory(tmp_path):
    """The swing-up by multiple shooting (a classical Runge-Kutta step an interval, 10
    intervals; each step more is 4 more copies of the model in the compiled solver):
    its mesh points are where ``simulate`` takes the pendulum with the solution's
    controls (linear between the mesh points) and the same steps, and its objective
    is near Moco's (Hermite-Simpson, 50 intervals)."""
    ref = _moco.moco_pendulum_swing_up(tmp_path, num_mesh_intervals=50)
    system = sj.load_osim(_moco.pendulum_osim(tmp_path)).build()
    problem = _moco.simjax_problem(ref["problem"], system)
    solution = optimize.solve(problem, mesh=10, scheme="multiple-shooting", shooting_steps=1)
    assert int(solution.status) == 0
    controls = sj.ControlTable(solution.time, solution.controls)
    traj = sj.simulate(system, system.default_state(), 1.0, controls, solver="rk4", dt=0.1, ts=solution.time)
    assert np.abs(np.asarray(traj.y) - np.asarray(solution.states)).max() < 1e-9
    assert abs(float(solution.objective) - ref["objective"]) < 0.02 * ref["objective"]
    with pytest.raises(ValueError, match="'multiple-shooting' scheme integrates the explicit dynamics"):
        optimize.solve(problem, mesh=10, scheme="multiple-shooting", dynamics_mode="implicit")


def test_a_batch_of_masses_is_solved_at_once_each_to_its_own_minimum_time(tmp_path):
    # rest to rest over 1 m with |F| <= 50 N: t_f = 2 sqrt(m / 50), 0.4 s for the model's 2 kg
    import equinox as eqx
    import jax.numpy as jnp

    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    problem = _moco.simjax_problem(_moco.SLIDING_MASS_PROBLEM, system)
    masses = jnp.asarray([1.0, 2.0, 4.5])

    def with_mass(system, mass):
        return eqx.tree_at(lambda s: s.model.find("/bodyset/body").mass, system, mass)

    options = optimize.Options(tol=1e-6, constraint_tol=1e-6)
    batch = optimize.solve_batch(problem, masses, with_mass, mesh=50, scheme="trapezoidal", options=options)
    assert [optimize.STATUS[int(s)] for s in batch.status] == ["solved"] * 3
    assert batch.states.shape == (3, 51, 2) and batch.time.shape == (3, 51)
    assert np.allclose(np.asarray(batch.time[:, -1]), 2 * np.sqrt(np.asarray(masses) / 50), atol=1e-3)
    # each at rest at both ends, 0 -> 1 m
    assert np.abs(np.asarray(batch.states[:, [0, -1], 1])).max() < 1e-8
    assert np.allclose(np.asarray(batch.states[:, -1, 0]), 1.0, atol=1e-8)
    with pytest.raises(ValueError, match=r"weights must be \(batch, 1\)"):
        optimize.solve_batch(problem, masses, with_mass, weights=np.ones((3, 2)), mesh=50, scheme="trapezoidal")
    with pytest.raises(ValueError, match=r"batch axes .* differ"):
        optimize.solve_batch(problem, masses, with_mass, weights=np.ones((2, 1)), mesh=50, scheme="trapezoidal")


def test_pendulum_swing_up_in_implicit_mode_matches_moco(tmp_path):
    # Moco's multibody_dynamics_mode = "implicit": the accelerations are variables
    # (bounds +-1000) and the equations of motion a residual at every grid point
    # (with Moco's penalty on the accelerations, minimize_implicit_multibody_accelerations)
    ref = _moco.moco_pendulum_swing_up(
        tmp_path,
        transcription="hermite-simpson",
        num_mesh_intervals=30,
        multibody_dynamics_mode="implicit",
        minimize_implicit_multibody_accelerations=True,
        implicit_multibody_accelerations_weight=1e-3,
    )
    assert ref["settings"]["multibody_dynamics_mode"] == "implicit"
    system = sj.load_osim(_moco.pendulum_osim(tmp_path)).build()
    tol = ref["settings"]["optim_convergence_tolerance"]
    problem = _moco.simjax_problem(ref["problem"], system)
    solution = optimize.solve(
        problem,
        mesh=30,
        scheme="hermite-simpson",
        options=optimize.moco_options(tol, tol),
        dynamics_mode="implicit",
        accelerations_weight=1e-3,
    )
    assert int(solution.status) == 0
    assert solution.nlp.z.shape[-1] == 2 * (2 + 1 + 1)  # (y, c, udot) at the mesh point and the midpoint
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * abs(ref["objective"])
    states, controls = _compare(solution, ref, system)
    assert states < 1e-5 and controls < 1e-4, (states, controls)
    # the accelerations, Moco's derivatives, by its names
    assert solution.derivative_names == tuple(ref["derivatives"]) and len(solution.derivative_names) == 1
    accel, accel_moco = np.asarray(solution.derivatives)[:, 0], ref["derivatives"][solution.derivative_names[0]]
    assert np.abs(accel - accel_moco).max() < 1e-3 * np.abs(accel_moco).max()
    # the penalty is an objective term of its own, as Moco's
    terms = optimize.files.objective_terms(solution, problem)
    assert (
        abs(terms["accelerations"] - ref["objective_terms"]["accelerations"])
        < 1e-3 * ref["objective_terms"]["accelerations"]
    )
    assert abs(sum(terms.values()) - float(solution.objective)) < 1e-9 * abs(float(solution.objective))
    with pytest.raises(ValueError, match="dynamics_mode 'semi'"):
        optimize.transcribe(problem, 30, dynamics_mode="semi")


def test_track_poses_and_solves_moco_track(tmp_path):
    # MocoTrack's defaults (tracking weight 1, effort 0.001, mesh interval 0.02), both
    # solvers converged to 1e-6 (MocoTrack's own 1e-2 stops far from the optimum)
    ref = _moco.moco_track_pendulum(tmp_path, tolerance=1e-6)
    assert ref["settings"]["num_mesh_intervals"] == 50 and ref["settings"]["multibody_dynamics_mode"] == "explicit"
    system = sj.load_osim(ref["model_path"]).build()
    solution = optimize.track(system, ref["reference"], convergence_tolerance=1e-6, constraint_tolerance=1e-6)
    assert int(solution.status) == 0
    assert abs(float(solution.objective) - ref["objective"]) < 1e-5 * abs(ref["objective"]), (
        float(solution.objective),
        ref["objective"],
    )
    states, controls = _compare(solution, ref, system)
    assert states < 1e-3, states
    with pytest.raises(ValueError, match=r"track: the time window 0.0..2.0 s is outside the reference's"):
        optimize.track_problem(system, ref["reference"], final_time=2.0)


def test_the_minimum_time_s_derivative_with_respect_to_the_mass_at_a_bang_bang_optimum(tmp_path):
    # t_f = 2 sqrt(m / 50): d t_f / d m = 1 / sqrt(50 m), 0.1 s/kg at 2 kg. At the optimum
    # the force sits at a bound at every mesh point: holding the active bounds leaves the
    # KKT matrix singular, and the derivative comes from the barrier problem's
    import equinox as eqx
    import jax

    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    base = _moco.simjax_problem(_moco.SLIDING_MASS_PROBLEM, system)

    def final_time(mass):
        heavier = eqx.tree_at(lambda s: s.model.find("/bodyset/body").mass, system, mass)
        problem = optimize.Problem(
            heavier, base.initial_time, base.final_time, base.bounds, base.initial, base.final, base.goals
        )
        return optimize.solve(problem, mesh=50, scheme="trapezoidal").time[-1]

    value, slope = jax.value_and_grad(final_time)(2.0)
    assert abs(float(value) - 0.4) < 1e-3 and abs(float(slope) - 0.1) < 1e-3, (float(value), float(slope))


def test_implicit_tendon_dynamics_match_moco(tmp_path):
    # a DeGroote muscle with a compliant tendon in implicit mode: the normalized tendon
    # force's derivative is a variable at every grid point and the fiber-tendon
    # equilibrium a residual there, as Moco transcribes it
    # with MocoInverse's penalty on the derivatives (minimize_implicit_auxiliary_derivatives, weight 0.01)
    ref = _moco.moco_hanging_muscle(
        tmp_path,
        num_mesh_intervals=20,  # (at 10, Moco's L-BFGS takes 1800 iterations)
        minimize_implicit_auxiliary_derivatives=True,
        implicit_auxiliary_derivatives_weight=0.01,
    )
    system = sj.load_osim(ref["model_path"]).build()
    assert optimize.collocation.implicit_tendons(system)[1] == ("/forceset/muscle",)
    problem = _moco.simjax_problem(ref["problem"], system)
    nlp = optimize.transcribe(problem, mesh=20)[0]
    # per grid point: 4 states, 1 control, 1 tendon force derivative (mesh point and midpoint)
    assert nlp.z_lower.shape == (21, 2 * 6)
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(
        problem, mesh=20, options=optimize.moco_options(tol, tol), auxiliary_derivatives_weight=0.01
    )
    assert optimize.STATUS[int(solution.status)] == "solved"
    assert abs(float(solution.objective) - ref["objective"]) < 2e-6 * ref["objective"]
    # the penalty is part of the objective: 0.01 * integral of w^2 by the Hermite-Simpson quadrature
    # (the derivative, by Moco's name: at the mesh points and at the midpoints)
    assert (
        solution.derivative_names
        == tuple(ref["derivatives"])
        == ("/forceset/muscle/implicitderiv_normalized_tendon_force",)
    )
    w = np.asarray(solution.derivatives)[:, 0]
    assert np.array_equal(w, np.asarray(solution.nlp.z)[:, [5, 11]].reshape(-1)[:-1])
    tau = np.asarray(solution.time)[::2]
    h = np.diff(tau)
    penalty = 0.01 * np.sum(h / 6 * (w[:-1:2] ** 2 + w[2::2] ** 2 + 4 * w[1::2] ** 2))
    assert penalty > 1e-6 * ref["objective"]
    terms = optimize.files.objective_terms(solution, problem)
    assert abs(terms["auxiliary_derivatives"] - penalty) < 1e-12 * penalty
    assert abs(sum(terms.values()) - float(solution.objective)) < 1e-9 * float(solution.objective)
    moco_penalty = ref["objective_terms"]["auxiliary_derivatives"]
    assert abs(penalty - moco_penalty) < 0.05 * moco_penalty, (penalty, moco_penalty)
    states = np.abs(np.asarray(solution.states) - _moco.states_in_system_order(ref, system)).max(axis=0)
    controls = np.abs(np.asarray(solution.controls) - _moco.controls_in_system_order(ref, system)).max()
    # (height m, speed m/s, activation, normalized tendon force; excitation)
    assert np.all(states < [1e-4, 1e-3, 1e-4, 5e-3]) and controls < 1e-3, (states, controls)


def test_kinematic_constraints_are_enforced_as_moco_enforces_them(tmp_path):
    # a double pendulum whose second pin follows the first by a CoordinateCouplerConstraint
    # (q2 = q1 / 2): Moco's Posa et al. (2016) method, multipliers at every grid point,
    # velocity corrections at the midpoints, the constraint's errors zero at the mesh points;
    # and the multipliers minimized (Moco's minimize_lagrange_multipliers, weight 0.5)
    ref = _moco.moco_coupled_pendulum(
        tmp_path, num_mesh_intervals=20, minimize_lagrange_multipliers=True, lagrange_multiplier_weight=0.5
    )
    assert ref["success"], ref["status"]
    system = sj.load_osim(ref["model_path"]).build()
    assert optimize.collocation.constraint_equations(system) == 1
    problem = _moco.simjax_problem(ref["problem"], system)
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(problem, mesh=20, options=optimize.moco_options(tol, tol), multipliers_weight=0.5)
    assert int(solution.status) == 0
    # (measured: equal to 4e-16 relative)
    assert abs(float(solution.objective) - ref["objective"]) < 1e-8 * ref["objective"]
    terms = optimize.files.objective_terms(solution, problem)
    assert abs(terms["multipliers"] - ref["objective_terms"]["multipliers"]) < 1e-6 * ref["objective"]
    moco_states = np.stack([ref["states"][n] for n in problem.state_names], 1)  # (q1, q2, u1, u2)
    states = np.abs(np.asarray(solution.states) - moco_states).max()
    controls = np.abs(np.asarray(solution.controls)[:, 0] - ref["controls"]["/forceset/tau"]).max()
    assert states < 1e-6 and controls < 1e-5, (states, controls)
    q = np.asarray(solution.states)[::2, :2]  # (the mesh points)
    np.testing.assert_allclose(q[:, 1], q[:, 0] / 2, atol=1e-9)
    # the multiplier and the velocity correction, in the solution file by Moco's names
    optimize.write_trajectory(solution, tmp_path / "ours.sto", problem)
    ours, moco = optimize.read_trajectory(tmp_path / "ours.sto"), optimize.read_trajectory(ref["solution_path"])
    assert list(ours["multipliers"]) == list(moco["multipliers"]) == ["lambda_cid2_p0"]
    assert list(ours["slacks"]) == list(moco["slacks"]) == ["gamma_cid2_p0"]
    lam, lam_moco = ours["multipliers"]["lambda_cid2_p0"], moco["multipliers"]["lambda_cid2_p0"]
    assert np.abs(lam - lam_moco).max() < 1e-5 * np.abs(lam_moco).max()
    assert np.abs(ours["slacks"]["gamma_cid2_p0"] - moco["slacks"]["gamma_cid2_p0"]).max() < 1e-12
    with pytest.raises(ValueError, match="needs the 'hermite-simpson' scheme"):
        optimize.transcribe(problem, 20, scheme="trapezoidal")
    with pytest.raises(ValueError, match="kinematic_constraint_method 'Posa2015'"):
        optimize.transcribe(problem, 20, kinematic_constraint_method="Posa2015")


def _by_name(solution, ref, problem):
    """The largest differences of the states and the controls from Moco's, by name."""
    states = np.stack([ref["states"][n] for n in problem.state_names], 1)
    controls = np.stack([ref["controls"][n] for n in problem.control_names], 1)
    return np.abs(np.asarray(solution.states) - states).max(), np.abs(np.asarray(solution.controls) - controls).max()


def test_bordalba_projection_matches_moco(tmp_path):
    # Bordalba et al. (2023)'s method, as Moco's kinematic_constraint_method
    # "Bordalba2023": each interval's defects end at projection states x', and
    # x = x' + [G^T mu_p; G^T mu_v] puts the end point on the constraint manifold.
    # (1) The linear coupler (q2 = q1 / 2), trapezoidal (which Posa et al.'s method
    # does not take) and implicit (the multibody residual at x'): collocation keeps a
    # linear constraint, so the slacks stay at zero.
    tol = 1e-4
    ref = _moco.moco_coupled_pendulum(
        tmp_path,
        20,
        "trapezoidal",
        kinematic_constraint_method="Bordalba2023",
        multibody_dynamics_mode="implicit",
        convergence_tolerance=tol,
        constraint_tolerance=tol,
    )
    assert ref["success"], ref["status"]
    linear = _moco.simjax_problem(ref["problem"], sj.load_osim(ref["model_path"]).build())
    options = optimize.moco_options(tol, tol)
    solution = optimize.solve(
        linear, 20, "trapezoidal", options, dynamics_mode="implicit", kinematic_constraint_method="Bordalba2023"
    )
    assert int(solution.status) == 0
    # (measured: 2e-12 relative; states 4e-7, controls 2e-5)
    assert abs(float(solution.objective) - ref["objective"]) < 1e-8 * ref["objective"]
    states, controls = _by_name(solution, ref, linear)
    assert states < 1e-5 and controls < 1e-3, (states, controls)
    # (2) A quadratic coupler (q2 = 0.1 q1^2 + 0.5 q1), Hermite–Simpson: the slacks
    # project. simjax starts from the linear coupler's solution (from the bounds'
    # midpoints its exact-Hessian steps stall on this problem, with either method)
    folder = tmp_path / "quadratic"
    folder.mkdir()
    ref = _moco.moco_coupled_pendulum(
        folder,
        20,
        coefficients=[0.1, 0.5, 0.0],
        kinematic_constraint_method="Bordalba2023",
        convergence_tolerance=tol,
        constraint_tolerance=tol,
    )
    assert ref["success"], ref["status"]
    problem = _moco.simjax_problem(ref["problem"], sj.load_osim(ref["model_path"]).build())
    start = optimize.solve(
        _moco.simjax_problem(ref["problem"], sj.load_osim(_moco.coupled_pendulum_osim(tmp_path)).build()),
        20,
        options=options,
        kinematic_constraint_method="Bordalba2023",
    )
    solution = optimize.solve(problem, 20, options=options, guess=start, kinematic_constraint_method="Bordalba2023")
    assert int(solution.status) == 0
    # (measured: 2e-8 relative; the projection term 3.31e-19 against Moco's 3.36e-19)
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * ref["objective"]
    terms = optimize.files.objective_terms(solution, problem)
    moco_term = ref["objective_terms"]["state_projection"]
    assert abs(terms["state_projection"] - moco_term) < 0.05 * moco_term, (terms, moco_term)
    states, controls = _by_name(solution, ref, problem)
    assert states < 2e-4 and controls < 0.05, (states, controls)
    assert solution.projection_states.shape == (20, 4)
    q = np.asarray(solution.states)[::2, :2]  # (the mesh points: on the manifold)
    np.testing.assert_allclose(q[:, 1], 0.1 * q[:, 0] ** 2 + 0.5 * q[:, 0], atol=1e-6)
    # the slacks in the solution file by Moco's names, spread over the grid as Moco's
    optimize.write_trajectory(solution, tmp_path / "ours.sto", problem)
    ours, moco = optimize.read_trajectory(tmp_path / "ours.sto"), optimize.read_trajectory(ref["solution_path"])
    assert list(ours["slacks"]) == list(moco["slacks"]) == ["mu_cid2_p0", "mu_cid2_p0_dot"]
    for name, values in moco["slacks"].items():
        assert 1e-8 < np.abs(values).max() < 1e-6  # (measured: 9e-8 and 2e-7)
        assert np.abs(ours["slacks"][name] - values).max() < 0.05 * np.abs(values).max(), name
    # a guess from a table fills the projection states with the states' guess
    with pytest.warns(optimize.files.TrajectoryWarning, match="mu_cid2_p0"):  # (what a guess does not take)
        guess = optimize.guess_from_table(problem, ref["solution_path"], 20, kinematic_constraint_method="Bordalba2023")
    np.testing.assert_array_equal(guess.projection_states, np.asarray(guess.states)[2::2])


def test_multiplier_names_are_moco_s_for_every_kind_of_constraint(tmp_path):
    # a coupler, a prescribed coordinate, a point on a line, a point and a weld: each
    # equation's multiplier by Moco's name (Simbody's constraint index and equation)
    path = _moco.constrained_chain_osim(tmp_path)
    names = optimize.collocation.multiplier_names(sj.load_osim(path).build())
    assert len(names) == 1 + 1 + 2 + 3 + 6
    assert sorted(names) == sorted(_moco.moco_multiplier_names(path))


def test_locked_coordinates_are_refused():
    # (as Moco refuses them), by name
    model = (
        sj.Model("locked")
        .add(sj.Body("b", 1.0, (0, 0, 0), (1, 1, 1, 0, 0, 0)))
        .add(sj.PinJoint("pin", "/ground", "/bodyset/b", coordinates=(sj.Coordinate("q", 0.1, locked=True),)))
    )
    with pytest.raises(ValueError, match="coordinates /jointset/pin/q are locked"):
        optimize.transcribe(optimize.Problem(model.build(), 0.0, 1.0), 5)
