"""Goals of simjax.optimize.goals (``StateTracking`` = MocoStateTrackingGoal,
``MarkerTracking`` = MocoMarkerTrackingGoal, ``OutputIntegral`` = MocoOutputGoal)
against OpenSim Moco 4.6 run live on the same model and reference files
(tests/_moco.py), and their checks of a problem."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax import optimize
from simjax.functions import GCVSpline
from simjax.io.tables import TimeSeriesTable
from simjax.optimize.goals import OutputIntegral, StateTracking

_moco = pytest.importorskip("_moco")


def _goal(spec: dict):
    """The simjax goal of one of tests/_moco.py's ``add_goals`` specs."""
    if spec["type"] == "MocoStateTrackingGoal":
        return StateTracking(
            spec["reference"],
            spec["weight"],
            weights=spec.get("state_weights"),
            pattern=spec.get("pattern"),
            allow_unused_references=spec.get("allow_unused_references", False),
            scale_weights_with_range=spec.get("scale_weights_with_range", False),
        )
    return OutputIntegral(
        spec["output_path"], spec["weight"], exponent=spec.get("exponent", 1), index=spec.get("output_index", -1)
    )


# -- against Moco ------------------------------------------------------------------------


def test_state_tracking_matches_moco(tmp_path):
    """The pendulum tracking a smooth swing read from a .sto (state weights, plus a
    control effort term), Hermite-Simpson, 30 intervals: the same optimum."""
    pytest.importorskip("opensim")
    ref = _moco.moco_pendulum_tracking(tmp_path, transcription="hermite-simpson", num_mesh_intervals=30)
    assert ref["success"], ref["status"]
    system = sj.load_osim(ref["model_path"]).build()
    problem = _moco.simjax_problem(ref["problem"], system, _goal)
    tracking = problem.goals[-1]
    assert tracking.tracked(problem) == {"/jointset/pin/q/value": 1.0, "/jointset/pin/q/speed": 0.1}
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(problem, mesh=30, scheme="hermite-simpson", options=optimize.moco_options(tol, tol))
    assert int(solution.status) == 0
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * abs(ref["objective"]), (
        float(solution.objective),
        ref["objective"],
    )
    assert np.allclose(np.asarray(solution.time), ref["time"], atol=1e-12)
    states = np.abs(np.asarray(solution.states) - _moco.states_in_system_order(ref, system)).max()
    controls = np.abs(np.asarray(solution.controls) - _moco.controls_in_system_order(ref, system)).max()
    assert states < 1e-5 and controls < 1e-4, (states, controls)


def test_marker_tracking_matches_moco(tmp_path):
    """The pendulum tracking a marker read from a .trc in millimetres (a marker weight,
    an unused reference marker), Hermite-Simpson, 20 intervals: the same optimum."""
    pytest.importorskip("opensim")
    ref = _moco.moco_pendulum_marker_tracking(tmp_path, num_mesh_intervals=20)
    assert ref["success"], ref["status"]
    system = sj.load_osim(ref["model_path"]).build()
    spec = ref["problem"]
    goal = optimize.MarkerTracking(
        spec["markers"],
        spec["marker_goal"]["weight"],
        weights=spec["marker_goal"]["marker_weights"],
        allow_unused_references=True,
    )
    problem = _moco.simjax_problem(spec, system).goal(goal)
    assert goal.tracked(problem) == {"/markerset/tip": 2.0}
    tol = ref["settings"]["optim_convergence_tolerance"]
    solution = optimize.solve(problem, mesh=20, options=optimize.moco_options(tol, tol))
    assert int(solution.status) == 0
    assert abs(float(solution.objective) - ref["objective"]) < 1e-8 * abs(ref["objective"])
    terms = optimize.files.objective_terms(solution, problem, ["effort", "markers"])
    assert abs(terms["markers"] - ref["objective_terms"]["markers"]) < 1e-5 * ref["objective_terms"]["markers"]
    states = np.abs(np.asarray(solution.states) - _moco.states_in_system_order(ref, system)).max()
    controls = np.abs(np.asarray(solution.controls) - _moco.controls_in_system_order(ref, system)).max()
    assert states < 1e-5 and controls < 1e-3, (states, controls)
    with pytest.raises(ValueError, match="marker 'elsewhere' of the reference is not in the model"):
        optimize.MarkerTracking(spec["markers"]).tracked(problem)


def test_goals_match_moco_at_a_given_trajectory(tmp_path):
    """Each goal's value at one trajectory (no optimisation: Moco stops at its
    guess), through simjax's transcription: tracking a table in degrees with
    weights scaled by range, tracking with a pattern and unused columns, past the
    reference's last time (t_f = 1.2 s), and outputs of the three types (SpatialVec
    norm, a Vec3 component squared, an Acceleration-stage double cubed)."""
    pytest.importorskip("opensim")
    model = _moco.pendulum_osim(tmp_path)
    deg = _moco.pendulum_reference_sto(tmp_path, 21, in_degrees=True)
    rad = _moco.pendulum_reference_sto(tmp_path, 51)
    N, tf = 10, 1.2
    spec = {
        "name": "at_guess",
        "time_initial_bounds": (0.0, 0.0),
        "time_final_bounds": (tf, tf),
        "states": {
            "/jointset/pin/q/value": ((-10.0, 10.0), None, None),
            "/jointset/pin/q/speed": ((-50.0, 50.0), None, None),
        },
        "controls": {"/forceset/tau": ((-50.0, 50.0), None, None)},
        "goals": [],
    }
    goals = [
        {
            "type": "MocoStateTrackingGoal",
            "name": "degrees",
            "weight": 3.0,
            "reference": deg,
            "state_weights": {"/jointset/pin/q/speed": 0.5},
            "scale_weights_with_range": True,
        },
        {
            "type": "MocoStateTrackingGoal",
            "name": "pattern",
            "weight": 2.0,
            "reference": rad,
            "pattern": ".*value$",
            "allow_unused_references": True,
        },
        {"type": "MocoOutputGoal", "name": "velocity", "weight": 0.5, "output_path": "/bodyset/body|velocity"},
        {
            "type": "MocoOutputGoal",
            "name": "height",
            "weight": 1.5,
            "output_path": "/bodyset/body|position",
            "output_index": 1,
            "exponent": 2,
        },
        {
            "type": "MocoOutputGoal",
            "name": "qdd",
            "weight": 0.1,
            "output_path": "/jointset/pin/q|acceleration",
            "exponent": 3,
        },
    ]
    study = _moco.study_from_problem(model, spec, num_mesh_intervals=N)
    _moco.add_goals(study, goals)
    t = np.linspace(0.0, tf, 2 * N + 1)
    ref = _moco.objective_at(
        study,
        t,
        {"/jointset/pin/q/value": 0.3 + 2 * t - t**2, "/jointset/pin/q/speed": 1.0 - 3 * np.sin(2 * t)},
        {"/forceset/tau": 3 * np.sin(5 * t) + 1},
    )
    assert ref["iterations"] == 0

    system = sj.load_osim(model).build()
    base = _moco.simjax_problem(spec, system, _goal)
    Y = _moco.states_in_system_order(ref, system)
    C = _moco.controls_in_system_order(ref, system)
    Z = np.zeros((N + 1, 6))  # the stages: y, c at mesh points, then the midpoints' y, c
    Z[:, :2], Z[:, 2:3], Z[:-1, 3:5], Z[:-1, 5:6] = Y[0::2], C[0::2], Y[1::2], C[1::2]
    for goal in goals:
        nlp, _, _, _ = optimize.transcribe(base.goal(_goal(goal)), mesh=N)
        cost = jax.vmap(nlp.cost, in_axes=(0, 0, 0, None, None))
        value = float(
            cost(
                jnp.arange(N + 1),
                jnp.asarray(Z),
                jnp.asarray(np.roll(Z, -1, 0)),
                jnp.asarray([0.0, tf]),
                getattr(nlp, "theta", None),
            ).sum()
        )
        expected = ref["objective_terms"][goal["name"]]
        assert abs(value - expected) < 1e-10 * abs(expected), (goal["name"], value, expected)


# -- checks (no Moco) --------------------------------------------------------------------


@pytest.fixture(scope="module")
def system():
    return sj.models.load("double_pendulum").build()


def _table(labels, in_degrees=False, n=11):
    t = np.linspace(0.0, 1.0, n)
    values = np.stack([np.sin((i + 1) * t) + i for i in range(len(labels))], axis=1)
    metadata = {} if in_degrees is None else {"inDegrees": "yes" if in_degrees else "no"}
    return TimeSeriesTable(t, values, labels, metadata)


def _integrand(goal, problem, t=0.37):
    y = jnp.asarray([0.1, -0.2, 0.3, 0.4])
    return float(goal.integrand(problem, t, y, jnp.zeros(2)))


def test_a_reference_column_that_is_not_a_state_is_an_error_naming_it(system):
    problem = optimize.Problem(system)
    goal = StateTracking(_table(["/jointset/pin1/q1/value", "/jointset/pin9/q9/value"]))
    with pytest.raises(ValueError, match="'/jointset/pin9/q9/value' unrecognized"):
        goal.tracked(problem)
    with pytest.raises(ValueError, match="/jointset/pin9/q9/value"):
        optimize.transcribe(problem.goal(goal), mesh=4)
    # a bare coordinate name is not a state path either
    with pytest.raises(ValueError, match="'q1' unrecognized"):
        StateTracking(_table(["q1"])).tracked(problem)
    # Moco's allow_unused_references drops such columns
    kept = StateTracking(_table(["/jointset/pin1/q1/value", "/jointset/pin9/q9/value"]), allow_unused_references=True)
    assert kept.tracked(problem) == {"/jointset/pin1/q1/value": 1.0}


def test_pattern_and_weights_are_checked_as_moco_checks_them(system):
    problem = optimize.Problem(system)
    both = _table(["/jointset/pin1/q1/value", "/jointset/pin1/q1/speed"])
    with pytest.raises(ValueError, match="'/jointset/pin1/q1/speed' does not match the pattern"):
        StateTracking(both, pattern=".*value$").tracked(problem)
    assert StateTracking(both, pattern=".*value$", allow_unused_references=True).tracked(problem) == {
        "/jointset/pin1/q1/value": 1.0
    }
    with pytest.raises(ValueError, match="'/jointset/pin1/q9/value' but this is not a recognized state"):
        StateTracking(both, weights={"/jointset/pin1/q9/value": 2.0}).tracked(problem)
    with pytest.raises(ValueError, match="does not match the pattern"):
        StateTracking(
            both, pattern=".*value$", allow_unused_references=True, weights={"/jointset/pin2/q2/speed": 2.0}
        ).tracked(problem)
    # a weight for a state the table does not hold is allowed (and unused)
    goal = StateTracking(both, weights={"/jointset/pin2/q2/value": 2.0, "/jointset/pin1/q1/speed": 0.25})
    assert goal.tracked(problem) == {"/jointset/pin1/q1/value": 1.0, "/jointset/pin1/q1/speed": 0.25}
    ranged = StateTracking(both, scale_weights_with_range=True).tracked(problem)
    values = np.asarray(both.values)
    assert np.allclose(list(ranged.values()), 1 / (values.max(0) - values.min(0)), rtol=1e-15)


def test_the_integrand_is_the_weighted_squared_error_to_quintic_gcv_splines(system):
    problem = optimize.Problem(system)
    table = _table(["/jointset/pin2/q2/speed", "/jointset/pin1/q1/value"])
    goal = StateTracking(table, weights={"/jointset/pin2/q2/speed": 0.5})
    times = jnp.asarray([-0.1, 0.0, 0.37, 1.0, 1.3])  # (beyond the ends: the splines' continuation)
    splines = [GCVSpline.from_degree(5, table.times, table.values[:, j]) for j in range(2)]
    expected = np.stack([np.asarray(s(times)) for s in splines], axis=1)
    got = np.asarray(jax.vmap(lambda t: goal.reference_at(problem, t))(times))
    assert np.array_equal(got, expected)
    y = jnp.asarray([0.1, -0.2, 0.3, 0.4])  # (q1, q2, u1, u2)
    r = expected[2]
    assert math.isclose(_integrand(goal, problem), 0.5 * (0.4 - r[0]) ** 2 + (0.1 - r[1]) ** 2, rel_tol=1e-14)
    # traced time, and a derivative with respect to it
    f = jax.jit(jax.value_and_grad(lambda t: goal.integrand(problem, t, y, jnp.zeros(2))))
    value, slope = f(0.37)
    assert math.isclose(float(value), _integrand(goal, problem), rel_tol=1e-14) and np.isfinite(float(slope))


def test_references_in_degrees_are_converted_and_need_the_metadata(system):
    problem = optimize.Problem(system)
    labels = ["/jointset/pin1/q1/value", "/jointset/pin2/q2/speed"]
    radians = _table(labels)
    degrees = TimeSeriesTable(radians.times, np.asarray(radians.values) * 180 / math.pi, labels, {"inDegrees": "yes"})
    assert math.isclose(
        _integrand(StateTracking(degrees), problem), _integrand(StateTracking(radians), problem), rel_tol=1e-13
    )
    with pytest.raises(ValueError, match="no 'inDegrees' metadata"):
        StateTracking(_table(labels, in_degrees=None)).tracked(problem)


def test_a_reference_file_is_read(system, tmp_path):
    from simjax.io.tables import write_table

    problem = optimize.Problem(system)
    table = _table(["/jointset/pin1/q1/value"])
    path = tmp_path / "reference.sto"
    write_table(table, path)
    assert _integrand(StateTracking(str(path)), problem) == _integrand(StateTracking(table), problem)
    with pytest.raises(FileNotFoundError, match="missing.sto"):
        StateTracking(str(tmp_path / "missing.sto")).tracked(problem)


def test_output_integral_values_and_checks(system):
    problem = optimize.Problem(system)
    y = jnp.asarray([0.1, -0.2, 0.3, 0.4])
    assert math.isclose(_integrand(OutputIntegral("/jointset/pin2/q2|speed", exponent=2), problem), 0.16)
    assert math.isclose(_integrand(OutputIntegral("/jointset/pin1/q1|value", exponent=3), problem), 1e-3)
    v = np.asarray(
        sj.api.output(
            system,
            sj.State(t=jnp.asarray(0.37), q=y[:2], u=y[2:], z=jnp.zeros(0), d=system.default_state().d),
            "/bodyset/rod2|velocity",
        )
    )
    assert math.isclose(_integrand(OutputIntegral("/bodyset/rod2|velocity"), problem), np.linalg.norm(v), rel_tol=1e-14)
    assert math.isclose(_integrand(OutputIntegral("/bodyset/rod2|velocity", index=4), problem), v[4], rel_tol=1e-14)
    # the norm's derivative at a zero vector is zero, not NaN
    grad = jax.grad(lambda y: OutputIntegral("/bodyset/rod2|velocity").integrand(problem, 0.0, y, jnp.zeros(2)))
    assert np.all(np.isfinite(np.asarray(grad(jnp.zeros(4)))))
    with pytest.raises(ValueError, match="is a scalar"):
        OutputIntegral("/jointset/pin1/q1|value", index=0).integrand(problem, 0.0, y, jnp.zeros(2))
    with pytest.raises(ValueError, match="greater than 2"):
        OutputIntegral("/bodyset/rod2|position", index=3).integrand(problem, 0.0, y, jnp.zeros(2))
    with pytest.raises(ValueError, match="exponent"):
        OutputIntegral("/bodyset/rod2|position", exponent=0).integrand(problem, 0.0, y, jnp.zeros(2))


def test_contact_tracking_matches_moco(tmp_path):
    """A ball on a slider whose smooth contact force tracks a measured vertical ground
    reaction (MocoContactTrackingGoal, the error projected on +y), read from the
    study file Moco solves: the same optimum, Hermite-Simpson, 20 intervals."""
    pytest.importorskip("opensim")
    ref = _moco.moco_contact_tracking(tmp_path)
    assert ref["success"], ref["status"]
    study = optimize.study.read_study(ref["study_path"])
    goal = study.problem.goals[0]
    assert isinstance(goal, optimize.ContactTracking) and goal.projection == "vector"
    assert goal.groups == (optimize.ContactGroup(("/forceset/contact",), "ball_force"),)
    solution = optimize.study.solve_study(study)
    assert int(solution.status) == 0
    # (measured: 1e-11 relative)
    assert abs(float(solution.objective) - ref["objective"]) < 1e-7 * ref["objective"]
    system = study.problem.system
    states = np.abs(np.asarray(solution.states) - _moco.states_in_system_order(ref, system)).max(axis=0)
    controls = np.abs(np.asarray(solution.controls) - _moco.controls_in_system_order(ref, system)).max()
    assert np.all(states < [1e-6, 1e-5]) and controls < 1e-5, (states, controls)
    # bad input, named: an external force the file lacks, a path that is not a contact
    for group, message in (
        (optimize.ContactGroup(("/forceset/contact",), "foot"), "external force 'foot' not found"),
        (
            optimize.ContactGroup(("/forceset/lift",), "ball_force"),
            "'/forceset/lift' is not a SmoothSphereHalfSpaceForce",
        ),
    ):
        bad = optimize.Problem(system, 0.0, 1.0).goal(optimize.ContactTracking((group,), ref["loads_path"]))
        with pytest.raises(ValueError, match=message):
            optimize.transcribe(bad, 5)
