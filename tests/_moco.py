"""OpenSim Moco (4.6, ``MocoCasADiSolver``) run live, for tests that compare simjax's
trajectory optimisation with it.

The builders write each model as an ``.osim`` file in a given folder, so that simjax
loads the very file Moco solves (``sj.load_osim(path)``). Each problem is described
once, as a plain dictionary (``SLIDING_MASS_PROBLEM``, ``PENDULUM_PROBLEM``): the
Moco study is built from it and every result carries it under ``"problem"``, with
the solver settings under ``"settings"``, so the simjax side can pose the same
problem with the same tolerances.

Names. Moco names states by their path in the model, ``<coordinate path>/value`` and
``<coordinate path>/speed`` (``/jointset/slider/x/value``, ``/jointset/slider/x/speed``;
auxiliary states ``<component path>/<state name>``, e.g. ``/forceset/m/activation``), and
controls by the actuator's path (``/forceset/actuator``). simjax's ``System`` uses the
same state names (``q_names == ("/jointset/slider/x/value",)``, ``u_names ==
("/jointset/slider/x/speed",)``, ``state_variable_names == y_names == q_names + u_names
+ z_names``); its ``actuator_names`` are the bare names (``("actuator",)``) and its
``actuator_paths`` (``("/forceset/actuator",)``) are Moco's control names.
``states_in_system_order`` and ``controls_in_system_order`` stack a result's columns in
a System's order.

Grid. ``"time"`` holds every point of the transcription's grid, as the MocoTrajectory
does: the N+1 mesh points for ``"trapezoidal"``; for ``"hermite-simpson"`` the 2N+1
points ``t_0, t_0.5, t_1, ..., t_N`` (mesh points and interval midpoints). ``"mesh_indices"``
picks the mesh points out of it.

Everything here runs in a few seconds (OpenSim's Python bindings must be installed).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import sys
import time as _time
from pathlib import Path

import numpy as np

#: Tolerances the helpers give IPOPT (``optim_convergence_tolerance`` sets IPOPT's
#: ``tol``, ``dual_inf_tol``, ``compl_inf_tol`` and their ``acceptable_*`` versions;
#: ``optim_constraint_tolerance`` sets ``constr_viol_tol`` and
#: ``acceptable_constr_viol_tol``).
CONVERGENCE_TOLERANCE = 1e-8
CONSTRAINT_TOLERANCE = 1e-8

#: Minimum-time, rest-to-rest, 0 -> 1 m with |F| <= 50 N on a 2 kg mass (Moco's
#: exampleSlidingMass, with the coordinate named ``x`` in the jointset). The exact
#: continuous optimum is bang-bang, t_f = 2 sqrt(1 m / 25 m/s^2) = 0.4 s.
SLIDING_MASS_PROBLEM = {
    "name": "sliding_mass",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (0.0, 5.0),
    # name: (bounds, initial bounds, final bounds); a scalar fixes the value.
    "states": {
        "/jointset/slider/x/value": ((-10.0, 10.0), 0.0, 1.0),
        "/jointset/slider/x/speed": ((-50.0, 50.0), 0.0, 0.0),
    },
    "controls": {"/forceset/actuator": ((-50.0, 50.0), None, None)},
    "goals": [{"type": "MocoFinalTimeGoal", "name": "time", "weight": 1.0}],
}

#: Swing-up of a 1 kg point mass on a 1 m massless link, from hanging at rest
#: (q = 0) to upright at rest (q = pi) in exactly 1 s, minimising the integral of
#: tau^2 (MocoControlGoal, exponent 2, weight 1). In 1 s the optimum swings straight
#: up (q stays in [0, pi]; |tau| peaks near 18.5 N m, well inside the bounds), so the
#: problem is smooth and has no pumping local minima.
PENDULUM_PROBLEM = {
    "name": "pendulum_swing_up",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (1.0, 1.0),
    "states": {
        "/jointset/pin/q/value": ((-10.0, 10.0), 0.0, math.pi),
        "/jointset/pin/q/speed": ((-50.0, 50.0), 0.0, 0.0),
    },
    "controls": {"/forceset/tau": ((-30.0, 30.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 1.0, "exponent": 2}],
}


def _opensim():
    import opensim

    opensim.Logger.setLevelString("Off")
    return opensim


def states_in_system_order(result: dict, system) -> np.ndarray:
    """``result["states"]`` as a (num grid points, len(system.state_variable_names))
    array, columns in the System's order (the names are the same in both)."""
    return np.stack([result["states"][n] for n in system.state_variable_names], axis=1)


def controls_in_system_order(result: dict, system) -> np.ndarray:
    """``result["controls"]`` as a (num grid points, num actuators) array, columns in
    ``system.actuator_paths`` order (Moco names controls by actuator path)."""
    return np.stack([result["controls"][p] for p in system.actuator_paths], axis=1)


# ----------------------------------------------------------------------------- models


def sliding_mass_osim(folder) -> str:
    """Write ``sliding_mass.osim`` in ``folder`` and return its path: a 2 kg body
    ``/bodyset/body`` (inertia 0) on SliderJoint ``/jointset/slider`` along ground's
    x, coordinate ``x`` (range [-10, 10]), and CoordinateActuator
    ``/forceset/actuator`` (optimal force 1) on it. Gravity is left at OpenSim's
    default (0, -9.80665, 0); it does no work along the horizontal slider."""
    osim = _opensim()
    model = osim.Model()
    model.setName("sliding_mass")
    body = osim.Body("body", 2.0, osim.Vec3(0), osim.Inertia(0))
    model.addBody(body)
    joint = osim.SliderJoint("slider", model.getGround(), body)
    return _actuated_and_written(model, joint, "x", "actuator", folder)


def pendulum_osim(folder) -> str:
    """Write ``pendulum.osim`` in ``folder`` and return its path: a 1 kg point mass
    ``/bodyset/body`` (inertia 0) 1 m below PinJoint ``/jointset/pin`` (rotation
    about ground's z; the joint frame sits at (0, 1, 0) in the body, so at q = 0 the
    mass hangs at (0, -1, 0)), coordinate ``q`` (range [-10, 10]), gravity (0, -9.81,
    0), and CoordinateActuator ``/forceset/tau`` (optimal force 1) on q. Its
    equation of motion is q'' = tau - 9.81 sin(q)."""
    osim = _opensim()
    model = osim.Model()
    model.setName("pendulum")
    model.setGravity(osim.Vec3(0, -9.81, 0))
    body = osim.Body("body", 1.0, osim.Vec3(0), osim.Inertia(0))
    model.addBody(body)
    joint = osim.PinJoint("pin", model.getGround(), osim.Vec3(0), osim.Vec3(0), body, osim.Vec3(0, 1, 0), osim.Vec3(0))
    return _actuated_and_written(model, joint, "q", "tau", folder)


def _actuated_and_written(model, joint, coordinate: str, actuator: str, folder) -> str:
    """Add ``joint`` with its coordinate named ``coordinate`` (range [-10, 10]) and a
    CoordinateActuator ``actuator`` (optimal force 1) on it; write the model as
    ``<model name>.osim`` in ``folder``; return its path."""
    osim = _opensim()
    coord = joint.updCoordinate()
    coord.setName(coordinate)
    coord.setRangeMin(-10.0)
    coord.setRangeMax(10.0)
    model.addJoint(joint)
    actu = osim.CoordinateActuator()
    actu.setCoordinate(coord)
    actu.setName(actuator)
    actu.setOptimalForce(1.0)
    model.addForce(actu)
    model.finalizeConnections()
    path = Path(folder) / f"{model.getName()}.osim"
    model.printToXML(str(path))
    return str(path)


# ----------------------------------------------------------------------------- studies


def _bounds_args(osim, value, kind):
    """``MocoBounds``/``MocoInitialBounds``/``MocoFinalBounds`` from None (unset),
    a scalar (fixed) or a pair."""
    cls = {"path": osim.MocoBounds, "initial": osim.MocoInitialBounds, "final": osim.MocoFinalBounds}[kind]
    if value is None:
        return cls()
    if np.ndim(value) == 0:
        return cls(float(value))
    return cls(float(value[0]), float(value[1]))


def study_from_problem(
    model_path,
    problem: dict,
    *,
    transcription="hermite-simpson",
    num_mesh_intervals=50,
    convergence_tolerance=CONVERGENCE_TOLERANCE,
    constraint_tolerance=CONSTRAINT_TOLERANCE,
    **solver_properties,
):
    """A ``MocoStudy`` on the model at ``model_path`` posed by ``problem`` (a dict like
    ``SLIDING_MASS_PROBLEM``) with a MocoCasADiSolver: the given transcription, mesh
    and tolerances, verbosity 0, and any other solver property by name
    (``multibody_dynamics_mode="implicit"`` calls ``set_multibody_dynamics_mode``)."""
    osim = _opensim()
    study = osim.MocoStudy()
    study.setName(problem["name"])
    prob = study.updProblem()
    prob.setModel(osim.Model(str(model_path)))
    prob.setTimeBounds(
        _bounds_args(osim, problem["time_initial_bounds"], "initial"),
        _bounds_args(osim, problem["time_final_bounds"], "final"),
    )
    for name, (bounds, initial, final) in problem["states"].items():
        prob.setStateInfo(
            name,
            _bounds_args(osim, bounds, "path"),
            _bounds_args(osim, initial, "initial"),
            _bounds_args(osim, final, "final"),
        )
    for name, (bounds, initial, final) in problem["controls"].items():
        prob.setControlInfo(
            name,
            _bounds_args(osim, bounds, "path"),
            _bounds_args(osim, initial, "initial"),
            _bounds_args(osim, final, "final"),
        )
    for spec in problem["goals"]:
        if spec["type"] == "MocoFinalTimeGoal":
            goal = osim.MocoFinalTimeGoal(spec["name"], float(spec.get("weight", 1.0)))
        elif spec["type"] == "MocoControlGoal":
            goal = osim.MocoControlGoal(spec["name"], float(spec.get("weight", 1.0)))
            goal.setExponent(int(spec.get("exponent", 2)))
            goal.setDivideByDisplacement(bool(spec.get("divide_by_displacement", False)))
            for control, w in spec.get("control_weights", {}).items():
                goal.setWeightForControl(control, float(w))
        else:
            raise ValueError(f"unsupported goal type {spec['type']!r}")
        prob.addGoal(goal)
    solver = study.initCasADiSolver()
    solver.set_transcription_scheme(transcription)
    solver.set_num_mesh_intervals(int(num_mesh_intervals))
    solver.set_optim_convergence_tolerance(float(convergence_tolerance))
    solver.set_optim_constraint_tolerance(float(constraint_tolerance))
    solver.set_verbosity(0)
    for key, value in solver_properties.items():
        getattr(solver, f"set_{key}")(value)
    return study


_SETTINGS = (
    "transcription_scheme",
    "num_mesh_intervals",
    "optim_convergence_tolerance",
    "optim_constraint_tolerance",
    "optim_hessian_approximation",
    "optim_solver",
    "optim_max_iterations",
    "optim_finite_difference_scheme",
    "optim_sparsity_detection",
    "multibody_dynamics_mode",
    "interpolate_control_mesh_interior_points",
    "enforce_path_constraint_mesh_interior_points",
    "minimize_implicit_multibody_accelerations",
    "implicit_multibody_accelerations_weight",
    "minimize_implicit_auxiliary_derivatives",
    "scale_variables_using_bounds",
    "parameters_require_initsystem",
    "kinematic_constraint_method",
    "enforce_constraint_derivatives",
    "minimize_lagrange_multipliers",
)


def solver_settings(study) -> dict:
    """The study's MocoCasADiSolver properties that shape the NLP and its optimum,
    as plain Python values (``implicit_multibody_acceleration_bounds`` as a pair)."""
    osim = _opensim()
    solver = osim.MocoCasADiSolver.safeDownCast(study.updSolver())
    out = {}
    for key in _SETTINGS:
        value = getattr(solver, f"get_{key}")()
        out[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    b = solver.get_implicit_multibody_acceleration_bounds()
    out["implicit_multibody_acceleration_bounds"] = (b.getLower(), b.getUpper())
    return out


def trajectory_arrays(traj) -> dict:
    """A MocoTrajectory (or MocoSolution) as numpy: ``time`` (every grid point),
    ``states``, ``controls``, ``multipliers``, ``derivatives`` (each ``{Moco name:
    array}``), ``parameters`` (``{name: float}``), plus ``state_names`` and
    ``control_names`` in Moco's order. A failed (sealed) solution must be unsealed
    first (``solve`` does)."""

    def columns(names, mat):
        names = list(names)
        mat = np.asarray(mat, dtype=float).reshape(len(np.atleast_1d(traj.getTimeMat())), -1)
        return {n: mat[:, i].copy() for i, n in enumerate(names)}

    t = np.asarray(traj.getTimeMat(), dtype=float).reshape(-1).copy()
    params = np.asarray(traj.getParametersMat(), dtype=float).reshape(-1)
    return {
        "time": t,
        "states": columns(traj.getStateNames(), traj.getStatesTrajectoryMat()),
        "controls": columns(traj.getControlNames(), traj.getControlsTrajectoryMat()),
        "multipliers": columns(traj.getMultiplierNames(), traj.getMultipliersTrajectoryMat()),
        "derivatives": columns(traj.getDerivativeNames(), traj.getDerivativesTrajectoryMat()),
        "parameters": {n: float(params[i]) for i, n in enumerate(traj.getParameterNames())},
        "state_names": list(traj.getStateNames()),
        "control_names": list(traj.getControlNames()),
    }


@contextlib.contextmanager
def _c_stdout_silenced(enabled: bool):
    """Send file descriptor 1 to /dev/null (IPOPT's banner and CasADi's timing table
    are printed from C, past Moco's verbosity setting)."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def solve(study, solution_path=None, *, quiet: bool = True) -> dict:
    """Solve ``study`` and return plain numpy results.

    Keys: ``time``, ``states``, ``controls``, ``multipliers``, ``derivatives``,
    ``parameters``, ``state_names``, ``control_names`` (see ``trajectory_arrays``);
    ``mesh_indices`` (the mesh points in ``time``: all for trapezoidal, every other
    one for Hermite-Simpson); ``objective`` (IPOPT's final f = sum of weight * goal);
    ``objective_terms`` (``{goal name: weighted value}``); ``initial_time``,
    ``final_time``; ``solve_seconds`` (wall time of ``study.solve()``);
    ``solver_seconds`` (Moco's own timer); ``iterations``; ``status`` (IPOPT's return
    status, e.g. ``"Solve_Succeeded"``); ``success``; ``settings``
    (``solver_settings``); ``solution_path`` (the MocoTrajectory ``.sto`` written,
    or None when ``solution_path`` is None)."""
    settings = solver_settings(study)
    with _c_stdout_silenced(quiet):
        t0 = _time.perf_counter()
        sol = study.solve()
        seconds = _time.perf_counter() - t0
    success = bool(sol.success())
    status = str(sol.getStatus())
    if sol.isSealed():
        sol.unseal()
    out = trajectory_arrays(sol)
    n = len(out["time"])
    if settings["transcription_scheme"] == "hermite-simpson":
        out["mesh_indices"] = np.arange(0, n, 2)
    else:
        out["mesh_indices"] = np.arange(n)
    out["objective"] = float(sol.getObjective())
    out["objective_terms"] = {name: float(sol.getObjectiveTerm(name)) for name in sol.getObjectiveTermNames()}
    out["initial_time"] = float(sol.getInitialTime())
    out["final_time"] = float(sol.getFinalTime())
    out["solve_seconds"] = seconds
    out["solver_seconds"] = float(sol.getSolverDuration())
    out["iterations"] = int(sol.getNumIterations())
    out["status"] = status
    out["success"] = success
    out["settings"] = settings
    if solution_path is not None:
        sol.write(str(solution_path))
        solution_path = str(solution_path)
    out["solution_path"] = solution_path
    return out


def _solve_problem(model_path, problem, folder, transcription, num_mesh_intervals, **kw):
    study = study_from_problem(
        model_path, problem, transcription=transcription, num_mesh_intervals=num_mesh_intervals, **kw
    )
    path = Path(folder) / f"{problem['name']}_{transcription}_{num_mesh_intervals}_solution.sto"
    out = solve(study, path)
    out["problem"] = copy.deepcopy(problem)
    out["model_path"] = str(model_path)
    return out


def moco_sliding_mass(folder, transcription="trapezoidal", num_mesh_intervals=50, **kw) -> dict:
    """Minimum-time rest-to-rest slide 0 -> 1 m (``SLIDING_MASS_PROBLEM``), final time
    free in [0, 5], |F| <= 50 N, MocoFinalTimeGoal; solved by Moco on
    ``sliding_mass_osim(folder)``. Moco's default guess (midpoints of the bounds:
    t_f = 2.5, interior x = 0, v = 0, F = 0). Returns ``solve``'s dict plus ``problem``
    and ``model_path``; ``kw`` goes to ``study_from_problem`` (e.g.
    ``convergence_tolerance``, ``optim_hessian_approximation="exact"``)."""
    return _solve_problem(
        sliding_mass_osim(folder), SLIDING_MASS_PROBLEM, folder, transcription, num_mesh_intervals, **kw
    )


def moco_pendulum_swing_up(folder, transcription="hermite-simpson", num_mesh_intervals=50, **kw) -> dict:
    """Minimum-effort swing-up of ``pendulum_osim(folder)`` (``PENDULUM_PROBLEM``):
    q 0 -> pi, at rest at both ends, t_f = 1 s fixed, |tau| <= 30, MocoControlGoal
    (exponent 2, weight 1: J = integral of tau^2). Moco ships no single-pendulum
    swing-up example; the model follows examplePredictAndTrack.py's pendulum (1 kg
    point bodies, 1 m links, CoordinateActuators with optimal force 1) and the
    bounds follow exampleSlidingMass ([-10, 10] on values, [-50, 50] on speeds).
    Moco's default guess (bounds midpoints: interior q = 0, u = 0, tau = 0). Returns
    ``solve``'s dict plus ``problem`` and ``model_path``."""
    return _solve_problem(pendulum_osim(folder), PENDULUM_PROBLEM, folder, transcription, num_mesh_intervals, **kw)


# ----------------------------------------------------------------------------- tracking
# (MocoStateTrackingGoal and MocoOutputGoal studies; the goal specs live next to the
# problem dict's ``"goals"``, which ``study_from_problem`` builds, and are added to
# the study after it)


def pendulum_reference(t) -> tuple[np.ndarray, np.ndarray]:
    """The smooth swing the tracking problem follows: ``q_ref(t) = pi (1 - cos(pi
    t)) / 2`` (0 -> pi over 1 s, at rest at both ends) and its speed ``u_ref(t) =
    pi^2 sin(pi t) / 2``."""
    t = np.asarray(t, dtype=float)
    return math.pi * (1.0 - np.cos(math.pi * t)) / 2.0, math.pi**2 * np.sin(math.pi * t) / 2.0


def write_sto(path, time, columns: dict, *, in_degrees: bool = False) -> str:
    """Write a ``.sto`` with OpenSim's own STOFileAdapter: ``time`` and ``columns``
    (``{label: values}``), header ``inDegrees=yes|no`` (Moco requires the key).
    Returns the path."""
    osim = _opensim()
    table = osim.TimeSeriesTable()
    labels = list(columns)
    table.setColumnLabels(labels)
    data = np.stack([np.asarray(columns[k], dtype=float) for k in labels], axis=1)
    for i, ti in enumerate(np.asarray(time, dtype=float)):
        table.appendRow(float(ti), osim.RowVector([float(v) for v in data[i]]))
    table.addTableMetaDataString("inDegrees", "yes" if in_degrees else "no")
    osim.STOFileAdapter.write(table, str(path))
    return str(path)


def pendulum_reference_sto(folder, num_rows: int = 51, *, in_degrees: bool = False) -> str:
    """Write ``pendulum_reference.sto`` in ``folder`` (``num_rows`` uniform times on
    [0, 1] s; columns ``/jointset/pin/q/value`` and ``/jointset/pin/q/speed`` from
    ``pendulum_reference``, in degrees if ``in_degrees``) and return its path."""
    t = np.linspace(0.0, 1.0, num_rows)
    q, u = pendulum_reference(t)
    f = 180.0 / math.pi if in_degrees else 1.0
    name = "pendulum_reference_deg.sto" if in_degrees else "pendulum_reference.sto"
    return write_sto(
        Path(folder) / name, t, {"/jointset/pin/q/value": q * f, "/jointset/pin/q/speed": u * f}, in_degrees=in_degrees
    )


#: The pendulum of ``pendulum_osim`` tracking ``pendulum_reference`` for 1 s from
#: rest at q = 0 (final state free), |tau| <= 50: MocoStateTrackingGoal weight 10
#: (q weight 1, u weight 0.1, reference ``"reference"`` = a .sto path filled in by
#: ``moco_pendulum_tracking``) plus MocoControlGoal weight 0.01.
PENDULUM_TRACKING_PROBLEM = {
    "name": "pendulum_tracking",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (1.0, 1.0),
    "states": {
        "/jointset/pin/q/value": ((-10.0, 10.0), 0.0, None),
        "/jointset/pin/q/speed": ((-50.0, 50.0), 0.0, None),
    },
    "controls": {"/forceset/tau": ((-50.0, 50.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 0.01, "exponent": 2}],
    "tracking_goals": [
        {
            "type": "MocoStateTrackingGoal",
            "name": "tracking",
            "weight": 10.0,
            "reference": None,
            "state_weights": {"/jointset/pin/q/speed": 0.1},
        }
    ],
}


def add_goals(study, specs) -> None:
    """Add goals that ``study_from_problem`` does not build to ``study``'s problem:
    ``MocoStateTrackingGoal`` (keys ``name``, ``weight``, ``reference`` (a file path),
    optional ``state_weights`` ``{state: w}``, ``pattern``,
    ``allow_unused_references``, ``scale_weights_with_range``) and ``MocoOutputGoal``
    (``name``, ``weight``, ``output_path``, optional ``exponent``,
    ``output_index``)."""
    osim = _opensim()
    prob = study.updProblem()
    for spec in specs:
        if spec["type"] == "MocoStateTrackingGoal":
            goal = osim.MocoStateTrackingGoal(spec["name"], float(spec.get("weight", 1.0)))
            goal.setReference(osim.TableProcessor(str(spec["reference"])))
            for state, w in spec.get("state_weights", {}).items():
                goal.setWeightForState(state, float(w))
            if spec.get("pattern") is not None:
                goal.setPattern(spec["pattern"])
            goal.setAllowUnusedReferences(bool(spec.get("allow_unused_references", False)))
            goal.setScaleWeightsWithRange(bool(spec.get("scale_weights_with_range", False)))
        elif spec["type"] == "MocoOutputGoal":
            goal = osim.MocoOutputGoal(spec["name"], float(spec.get("weight", 1.0)))
            goal.setOutputPath(spec["output_path"])
            goal.setExponent(int(spec.get("exponent", 1)))
            goal.setOutputIndex(int(spec.get("output_index", -1)))
        else:
            raise ValueError(f"unsupported goal type {spec['type']!r}")
        prob.addGoal(goal)


@contextlib.contextmanager
def cwd(folder):
    """Run the block with ``folder`` as the working directory."""
    old = os.getcwd()
    os.chdir(str(folder))
    try:
        yield
    finally:
        os.chdir(old)


def moco_track_pendulum(folder, tolerance: float = 1e-6) -> dict:
    """Moco's ``MocoTrack`` of ``pendulum_osim(folder)`` following
    ``pendulum_reference_sto(folder)`` (value and speed columns): MocoTrack's defaults
    (tracking weight 1, control effort 0.001, mesh interval 0.02 over the reference's
    0-1 s, explicit Hermite-Simpson, the bounds' midpoints as the guess) except the
    tolerances, which MocoTrack sets to 1e-2 and this sets to ``tolerance`` on the
    solver after ``initialize()``. Returns ``solve``'s dict plus ``model_path`` and
    ``reference`` (the .sto path)."""
    osim = _opensim()
    model_path, reference = pendulum_osim(folder), pendulum_reference_sto(folder)
    track = osim.MocoTrack()
    track.setName("pendulum_track")
    track.setModel(osim.ModelProcessor(model_path))
    track.setStatesReference(osim.TableProcessor(reference))
    with cwd(folder):  # (MocoTrack writes <name>_tracked_states.sto in the working directory)
        study = track.initialize()
    solver = osim.MocoCasADiSolver.safeDownCast(study.updSolver())
    solver.set_optim_convergence_tolerance(float(tolerance))
    solver.set_optim_constraint_tolerance(float(tolerance))
    out = solve(study, Path(folder) / "pendulum_track_solution.sto")
    out.update(model_path=str(model_path), reference=str(reference))
    return out


def moco_pendulum_tracking(folder, transcription="hermite-simpson", num_mesh_intervals=30, **kw) -> dict:
    """``PENDULUM_TRACKING_PROBLEM`` solved by Moco on ``pendulum_osim(folder)``, the
    reference written by ``pendulum_reference_sto(folder)``. Moco's default guess.
    Returns ``solve``'s dict plus ``problem`` (its tracking goal's ``"reference"``
    filled in) and ``model_path``; ``kw`` goes to ``study_from_problem``."""
    problem = copy.deepcopy(PENDULUM_TRACKING_PROBLEM)
    problem["tracking_goals"][0]["reference"] = pendulum_reference_sto(folder)
    model_path = pendulum_osim(folder)
    study = study_from_problem(
        model_path, problem, transcription=transcription, num_mesh_intervals=num_mesh_intervals, **kw
    )
    add_goals(study, problem["tracking_goals"])
    path = Path(folder) / f"{problem['name']}_{transcription}_{num_mesh_intervals}_solution.sto"
    out = solve(study, path)
    out["problem"] = problem
    out["model_path"] = str(model_path)
    return out


def objective_at(study, time, states: dict, controls: dict) -> dict:
    """Moco's objective at a given trajectory, without optimising: ``study`` (its
    solver a MocoCasADiSolver) is solved with ``optim_max_iterations = 0`` from a
    guess holding ``states`` and ``controls`` (``{Moco name: values at time}``,
    ``time`` the solver's grid), so IPOPT evaluates the objective at the guess and
    stops. Keep the guess at least 1e-2 (relative) inside its bounds: IPOPT pushes
    a starting point off its bounds by that much. Returns ``solve``'s dict: its
    ``objective`` and ``objective_terms`` are at the returned ``time``/``states``/
    ``controls`` (the guess, as IPOPT saw it)."""
    osim = _opensim()
    solver = osim.MocoCasADiSolver.safeDownCast(study.updSolver())
    guess = solver.createGuess("bounds")
    guess.setTime(osim.Vector([float(v) for v in time]))
    for name, values in states.items():
        guess.setState(name, osim.Vector([float(v) for v in values]))
    for name, values in controls.items():
        guess.setControl(name, osim.Vector([float(v) for v in values]))
    solver.setGuess(guess)
    solver.set_optim_max_iterations(0)
    return solve(study)


def simjax_problem(spec: dict, system, tracking=None):
    """The ``simjax.optimize.Problem`` of one of this module's problem descriptions:
    its time, state and control bounds and its goals (``MocoFinalTimeGoal``,
    ``MocoControlGoal``; ``tracking(goal_spec)`` makes each of ``spec["tracking_goals"]``)."""
    from simjax import optimize

    problem = optimize.Problem(system, initial_time=spec["time_initial_bounds"], final_time=spec["time_final_bounds"])
    for name, (bounds, initial, final) in {**spec["states"], **spec["controls"]}.items():
        problem = problem.bound(name, bounds, initial=initial, final=final)
    for goal in spec["goals"]:
        if goal["type"] == "MocoFinalTimeGoal":
            problem = problem.goal(optimize.FinalTime(goal["weight"]))
        else:
            problem = problem.goal(optimize.ControlEffort(goal["weight"], goal["exponent"]))
    for goal in spec.get("tracking_goals", ()):
        problem = problem.goal(tracking(goal))
    return problem


# ----------------------------------------------------------------------------- parameters, ends, path constraints


#: A 2 kg mass on a spring (rest at x = 0) released at rest from x = 0.1 m, at x = 0
#: after exactly 0.5 s: a quarter period, so the spring's stiffness is a parameter
#: (MocoParameter, bounds [1, 100] N/m) with one value inside its bounds that needs no
#: force, k = m (pi / (2 T))^2 = 2 pi^2 = 19.74 N/m; minimum effort.
SPRING_MASS_PROBLEM = {
    "name": "spring_mass",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (0.5, 0.5),
    "states": {
        "/jointset/slider/x/value": ((-10.0, 10.0), 0.1, 0.0),
        "/jointset/slider/x/speed": ((-50.0, 50.0), 0.0, None),
    },
    "controls": {"/forceset/actuator": ((-50.0, 50.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 1.0, "exponent": 2}],
    "parameter": ("stiffness", "/forceset/spring", "stiffness", (1.0, 100.0)),
}


def spring_mass_osim(folder) -> str:
    """Write ``spring_mass.osim`` in ``folder`` and return its path:
    ``sliding_mass_osim``'s 2 kg body and slider with a SpringGeneralizedForce
    ``/forceset/spring`` on ``x`` (stiffness 50 N/m, rest length 0, no viscosity)."""
    osim = _opensim()
    model = osim.Model(sliding_mass_osim(folder))
    model.setName("spring_mass")
    spring = osim.SpringGeneralizedForce("x")
    spring.setName("spring")
    spring.setStiffness(50.0)
    spring.setRestLength(0.0)
    spring.setViscosity(0.0)
    model.addForce(spring)
    model.finalizeConnections()
    path = Path(folder) / "spring_mass.osim"
    model.printToXML(str(path))
    return str(path)


def moco_spring_mass(folder, transcription="hermite-simpson", num_mesh_intervals=20, **kw) -> dict:
    """``SPRING_MASS_PROBLEM`` solved by Moco on ``spring_mass_osim(folder)``, the
    stiffness a MocoParameter (``parameters_require_initsystem`` off: the spring reads
    its stiffness when it applies its force). Returns ``solve``'s dict
    (``parameters``: ``{"stiffness": N/m}``) plus ``problem`` and ``model_path``."""
    osim = _opensim()
    problem = SPRING_MASS_PROBLEM
    model_path = spring_mass_osim(folder)
    study = study_from_problem(
        model_path,
        problem,
        transcription=transcription,
        num_mesh_intervals=num_mesh_intervals,
        parameters_require_initsystem=False,
        **kw,
    )
    name, path, prop, (lo, hi) = problem["parameter"]
    study.updProblem().addParameter(osim.MocoParameter(name, path, prop, osim.MocoBounds(lo, hi)))
    out = solve(study, Path(folder) / "spring_mass_solution.sto")
    out["problem"] = copy.deepcopy(problem)
    out["model_path"] = model_path
    return out


#: A 2 kg mass slides from rest at x = 0 for exactly 1 s, forward (it ends at x >= 0.5
#: m), with least effort, subject to MocoAverageSpeedGoal (0.8 m/s, an endpoint
#: constraint), MocoPeriodicityGoal (the speed, and the force negated: F(0) = -F(1))
#: and MocoOutputBoundConstraint (the body's speed along x, ``/bodyset/body|velocity``
#: element 3, at most 1 m/s). Without the bound the optimum is rest to rest over 0.8 m,
#: F = 9.6 (1 - 2 t) N, effort 12 m^2 d^2 / T^3 = 30.72 N^2 s, peaking at 1.2 m/s: the
#: bound is active mid-motion.
CRUISE_PROBLEM = {
    "name": "cruise",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (1.0, 1.0),
    "states": {
        "/jointset/slider/x/value": ((-10.0, 10.0), 0.0, (0.5, 10.0)),
        "/jointset/slider/x/speed": ((-50.0, 50.0), 0.0, None),
    },
    "controls": {"/forceset/actuator": ((-50.0, 50.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 1.0, "exponent": 2}],
    "average_speed": 0.8,
    "periodic_states": ["/jointset/slider/x/speed"],
    "negated_periodic_controls": ["/forceset/actuator"],
    "speed_bound": ("/bodyset/body|velocity", 3, 1.0),
}


def moco_cruise(folder, problem=CRUISE_PROBLEM, transcription="hermite-simpson", num_mesh_intervals=20, **kw) -> dict:
    """``CRUISE_PROBLEM`` (or a variant of it) solved by Moco on
    ``sliding_mass_osim(folder)``: the goals and path constraint the dict names
    (``average_speed``, ``periodic_states``, ``negated_periodic_controls``,
    ``speed_bound``). Returns ``solve``'s dict plus ``problem`` and ``model_path``."""
    osim = _opensim()
    model_path = sliding_mass_osim(folder)
    study = study_from_problem(
        model_path, problem, transcription=transcription, num_mesh_intervals=num_mesh_intervals, **kw
    )
    prob = study.updProblem()
    if "average_speed" in problem:
        speed = osim.MocoAverageSpeedGoal("speed")
        speed.set_desired_average_speed(problem["average_speed"])
        prob.addGoal(speed)
    if "periodic_states" in problem:
        periodic = osim.MocoPeriodicityGoal("periodic")
        for name in problem["periodic_states"]:
            periodic.addStatePair(osim.MocoPeriodicityGoalPair(name))
        for name in problem["negated_periodic_controls"]:
            periodic.addNegatedControlPair(osim.MocoPeriodicityGoalPair(name))
        prob.addGoal(periodic)
    if "speed_bound" in problem:
        output, index, upper = problem["speed_bound"]
        bound = osim.MocoOutputBoundConstraint()
        bound.setName("speed_limit")
        bound.setOutputPath(output)
        bound.setOutputIndex(index)
        bound.setUpperBound(osim.Constant(upper))
        prob.addPathConstraint(bound)
    out = solve(study, Path(folder) / f"{problem['name']}_solution.sto")
    out["problem"] = copy.deepcopy(problem)
    out["model_path"] = model_path
    return out


#: Rest to rest, 0 -> 1 m in exactly 1 s with least effort (free: F = 12 - 24 t N, peak
#: speed 1.5 m/s) under three path constraints: the force within
#: [-11, 10 - 4 t] N (MocoControlBoundConstraint, a LinearFunction upper bound), the
#: speed at most 1.45 m/s (MocoStateBoundConstraint) and the body's distance from
#: ground's origin along x at most 1 m (MocoFrameDistanceConstraint, vector projection).
BOUNDED_SLIDE_PROBLEM = {
    "name": "bounded_slide",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (1.0, 1.0),
    "states": {
        "/jointset/slider/x/value": ((-10.0, 10.0), 0.0, 1.0),
        "/jointset/slider/x/speed": ((-50.0, 50.0), 0.0, 0.0),
    },
    "controls": {"/forceset/actuator": ((-50.0, 50.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 1.0, "exponent": 2}],
    "force_bounds": (-11.0, (-4.0, 10.0)),  # (constant lower, (slope, intercept) upper)
    "speed_upper": 1.45,
    "frame_pair": ("/ground", "/bodyset/body", 0.0, 1.0),
    "projection_vector": (1.0, 0.0, 0.0),
}


def moco_bounded_slide(
    folder, problem=BOUNDED_SLIDE_PROBLEM, transcription="hermite-simpson", num_mesh_intervals=20, **kw
) -> dict:
    """``BOUNDED_SLIDE_PROBLEM`` solved by Moco on ``sliding_mass_osim(folder)``; the
    study is also written as ``bounded_slide.omoco`` (``study_path``). Returns
    ``solve``'s dict plus ``problem``, ``model_path`` and ``study_path``."""
    osim = _opensim()
    model_path = sliding_mass_osim(folder)
    study = study_from_problem(
        model_path, problem, transcription=transcription, num_mesh_intervals=num_mesh_intervals, **kw
    )
    prob = study.updProblem()
    lower, (slope, intercept) = problem["force_bounds"]
    force = osim.MocoControlBoundConstraint()
    force.setName("force_bounds")
    force.addControlPath("/forceset/actuator")
    force.setLowerBound(osim.Constant(lower))
    force.setUpperBound(osim.LinearFunction(slope, intercept))
    prob.addPathConstraint(force)
    speed = osim.MocoStateBoundConstraint()
    speed.setName("speed_limit")
    speed.addStatePath("/jointset/slider/x/speed")
    speed.setUpperBound(osim.Constant(problem["speed_upper"]))
    prob.addPathConstraint(speed)
    distance = osim.MocoFrameDistanceConstraint()
    distance.setName("reach")
    distance.addFramePair(osim.MocoFrameDistanceConstraintPair(*problem["frame_pair"]))
    distance.setProjection("vector")
    distance.setProjectionVector(osim.Vec3(*problem["projection_vector"]))
    prob.addPathConstraint(distance)
    study_path = Path(folder) / "bounded_slide.omoco"
    study.printToXML(str(study_path))
    out = solve(study, Path(folder) / f"{problem['name']}_solution.sto")
    out["problem"] = copy.deepcopy(problem)
    out["model_path"] = model_path
    out["study_path"] = str(study_path)
    return out


# ----------------------------------------------------------------------------- implicit tendon dynamics


def hanging_muscle_osim(folder) -> str:
    """Write ``hanging_muscle.osim`` in ``folder`` and return its path: a 0.5 kg body on
    SliderJoint ``/jointset/joint`` along ground's x (coordinate ``height``, range
    [-1, 1]), gravity 9.81 m/s^2 along +x, and a DeGrooteFregly2016Muscle
    ``/forceset/muscle`` from ground's origin to the body (F0 30 N, optimal fiber 0.10 m,
    tendon slack 0.05 m, pennation 0.10 rad, compliant tendon, strain 0.10 at one
    normalized force) with implicit tendon compliance dynamics (Moco's hanging-muscle test
    model)."""
    osim = _opensim()
    model = osim.Model()
    model.setName("hanging_muscle")
    model.set_gravity(osim.Vec3(9.81, 0, 0))
    body = osim.Body("body", 0.5, osim.Vec3(0), osim.Inertia(1))
    model.addBody(body)
    joint = osim.SliderJoint("joint", model.getGround(), body)
    coord = joint.updCoordinate()
    coord.setName("height")
    coord.setRangeMin(-1.0)
    coord.setRangeMax(1.0)
    model.addJoint(joint)
    muscle = osim.DeGrooteFregly2016Muscle()
    muscle.setName("muscle")
    muscle.set_max_isometric_force(30.0)
    muscle.set_optimal_fiber_length(0.10)
    muscle.set_tendon_slack_length(0.05)
    muscle.set_tendon_strain_at_one_norm_force(0.10)
    muscle.set_pennation_angle_at_optimal(0.10)
    muscle.set_ignore_tendon_compliance(False)
    muscle.set_tendon_compliance_dynamics_mode("implicit")
    muscle.addNewPathPoint("origin", model.updGround(), osim.Vec3(0))
    muscle.addNewPathPoint("insertion", body, osim.Vec3(0))
    model.addForce(muscle)
    model.finalizeConnections()
    path = Path(folder) / "hanging_muscle.osim"
    model.printToXML(str(path))
    return str(path)


#: The hanging mass raised 0.15 -> 0.14 m (towards the muscle's origin) in 0.5 s, rest to
#: rest, with least excitation squared; the muscle's activation and normalized tendon
#: force start free (its tendon equilibrium holds at every grid point).
HANGING_MUSCLE_PROBLEM = {
    "name": "hanging_muscle",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (0.5, 0.5),
    "states": {
        "/jointset/joint/height/value": ((0.12, 0.16), 0.15, 0.14),
        "/jointset/joint/height/speed": ((-1.0, 1.0), 0.0, 0.0),
        "/forceset/muscle/activation": ((0.01, 1.0), None, None),
        "/forceset/muscle/normalized_tendon_force": ((0.0, 5.0), None, None),
    },
    "controls": {"/forceset/muscle": ((0.01, 1.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 1.0, "exponent": 2}],
}


def moco_hanging_muscle(folder, transcription="hermite-simpson", num_mesh_intervals=20, **kw) -> dict:
    """``HANGING_MUSCLE_PROBLEM`` solved by Moco on ``hanging_muscle_osim(folder)``
    (implicit tendon dynamics: the normalized tendon force's derivative a variable, the
    equilibrium residual zero at every grid point). Returns ``solve``'s dict plus
    ``problem`` and ``model_path``."""
    return _solve_problem(
        hanging_muscle_osim(folder), HANGING_MUSCLE_PROBLEM, folder, transcription, num_mesh_intervals, **kw
    )


# ----------------------------------------------------------------------------- marker tracking


def pendulum_marker_osim(folder) -> str:
    """Write ``pendulum_marker.osim`` in ``folder`` and return its path:
    ``pendulum_osim``'s pendulum with a Marker ``/markerset/tip`` on its body at (0.1,
    0, 0), which sits at ``(sin q + 0.1 cos q, 0.1 sin q - cos q, 0)`` in Ground."""
    osim = _opensim()
    model = osim.Model(pendulum_osim(folder))
    model.setName("pendulum_marker")
    model.addMarker(osim.Marker("tip", model.getBodySet().get("body"), osim.Vec3(0.1, 0, 0)))
    model.finalizeConnections()
    path = Path(folder) / "pendulum_marker.osim"
    model.printToXML(str(path))
    return str(path)


def pendulum_markers_trc(folder, num_rows: int = 51) -> str:
    """Write ``pendulum_markers.trc`` in ``folder`` with OpenSim's TRCFileAdapter, in
    millimetres: ``tip`` where ``pendulum_marker_osim``'s marker is along
    ``pendulum_reference``, and ``elsewhere``, a marker the model does not have.
    Returns its path."""
    osim = _opensim()
    t = np.linspace(0.0, 1.0, num_rows)
    q, _ = pendulum_reference(t)
    tip = np.stack([np.sin(q) + 0.1 * np.cos(q), 0.1 * np.sin(q) - np.cos(q), np.zeros_like(q)], 1) * 1000.0
    table = osim.TimeSeriesTableVec3()
    table.setColumnLabels(["tip", "elsewhere"])
    for i, ti in enumerate(t):
        row = osim.RowVectorVec3([osim.Vec3(*tip[i]), osim.Vec3(0.0, 0.0, 1000.0)])
        table.appendRow(float(ti), row)
    rate = str((num_rows - 1) / (t[-1] - t[0]))
    for key, value in (
        ("DataRate", rate),
        ("CameraRate", rate),
        ("OrigDataRate", rate),
        ("Units", "mm"),
        ("NumFrames", str(num_rows)),
        ("NumMarkers", "2"),
        ("OrigDataStartFrame", "1"),
        ("OrigNumFrames", str(num_rows)),
    ):
        table.addTableMetaDataString(key, value)
    path = Path(folder) / "pendulum_markers.trc"
    osim.TRCFileAdapter.write(table, str(path))
    return str(path)


#: ``PENDULUM_TRACKING_PROBLEM`` with MocoMarkerTrackingGoal (weight 10; marker
#: ``tip`` weighted 2, ``elsewhere`` unused) in place of the state tracking.
PENDULUM_MARKER_PROBLEM = {
    **{k: v for k, v in PENDULUM_TRACKING_PROBLEM.items() if k != "tracking_goals"},
    "name": "pendulum_marker_tracking",
    "marker_goal": {"weight": 10.0, "marker_weights": {"tip": 2.0}},
}


def moco_pendulum_marker_tracking(folder, transcription="hermite-simpson", num_mesh_intervals=20, **kw) -> dict:
    """``PENDULUM_MARKER_PROBLEM`` solved by Moco on ``pendulum_marker_osim(folder)``
    with ``pendulum_markers_trc(folder)``. Returns ``solve``'s dict plus ``problem``
    (``"markers"``: the .trc path), ``model_path``."""
    osim = _opensim()
    problem = copy.deepcopy(PENDULUM_MARKER_PROBLEM)
    problem["markers"] = pendulum_markers_trc(folder)
    model_path = pendulum_marker_osim(folder)
    study = study_from_problem(
        model_path, problem, transcription=transcription, num_mesh_intervals=num_mesh_intervals, **kw
    )
    spec = problem["marker_goal"]
    weights = osim.SetMarkerWeights()
    for name, w in spec["marker_weights"].items():
        weights.cloneAndAppend(osim.MarkerWeight(name, w))
    goal = osim.MocoMarkerTrackingGoal("markers", spec["weight"])
    goal.setMarkersReference(osim.MarkersReference(problem["markers"], weights))
    goal.setAllowUnusedReferences(True)
    study.updProblem().addGoal(goal)
    out = solve(study, Path(folder) / f"{problem['name']}_solution.sto")
    out["problem"] = problem
    out["model_path"] = model_path
    return out


# ----------------------------------------------------------------------------- contact tracking


def bouncer_osim(folder) -> str:
    """Write ``bouncer.osim`` in ``folder`` and return its path: a 1 kg ball (radius
    0.05 m) on a vertical slider (coordinate ``height``), a CoordinateActuator ``lift``
    (optimal force 10 N) and a SmoothSphereHalfSpaceForce ``contact`` (stiffness 1e5,
    dissipation 1) with a floor whose normal is Ground's +y."""
    osim = _opensim()
    m = osim.Model()
    m.setName("bouncer")
    ball = osim.Body("ball", 1.0, osim.Vec3(0), osim.Inertia(0.001))
    m.addBody(ball)
    slider = osim.SliderJoint(
        "slider",
        m.getGround(),
        osim.Vec3(0),
        osim.Vec3(0, 0, math.pi / 2),
        ball,
        osim.Vec3(0),
        osim.Vec3(0, 0, math.pi / 2),
    )
    slider.updCoordinate().setName("height")
    m.addJoint(slider)
    lift = osim.CoordinateActuator("height")
    lift.setName("lift")
    lift.setOptimalForce(10.0)
    m.addForce(lift)
    sphere = osim.ContactSphere(0.05, osim.Vec3(0), ball, "sphere")
    floor = osim.ContactHalfSpace(osim.Vec3(0), osim.Vec3(0, 0, -math.pi / 2), m.getGround(), "floor")
    m.addContactGeometry(sphere)
    m.addContactGeometry(floor)
    contact = osim.SmoothSphereHalfSpaceForce("contact", sphere, floor)
    contact.set_stiffness(1e5)
    contact.set_dissipation(1.0)
    m.addForce(contact)
    m.finalizeConnections()
    path = Path(folder) / "bouncer.osim"
    m.printToXML(str(path))
    return str(path)


def bouncer_grf(folder) -> str:
    """Write ``grf.mot`` (a vertical ground reaction m g (1 + 0.5 sin 2 pi t) on [0, 1]
    s, 101 rows, columns ``ground_force_v{x,y,z}`` and ``ground_force_p{x,y,z}``) and
    ``grf.xml``, an ExternalLoads file applying it to ``ball`` as ``ball_force``, in
    ``folder``. Returns the ``.xml``'s path."""
    osim = _opensim()
    t = np.linspace(0.0, 1.0, 101)
    fy = 9.80665 * (1.0 + 0.5 * np.sin(2 * math.pi * t))
    zero = np.zeros_like(t)
    write_sto(
        Path(folder) / "grf.mot",
        t,
        {
            "ground_force_vx": zero,
            "ground_force_vy": fy,
            "ground_force_vz": zero,
            "ground_force_px": zero,
            "ground_force_py": zero,
            "ground_force_pz": zero,
        },
    )
    loads = osim.ExternalLoads()
    force = osim.ExternalForce()
    force.setName("ball_force")
    force.set_applied_to_body("ball")
    force.set_force_expressed_in_body("ground")
    force.set_point_expressed_in_body("ground")
    force.set_force_identifier("ground_force_v")
    force.set_point_identifier("ground_force_p")
    loads.cloneAndAppend(force)
    loads.setDataFileName("grf.mot")
    path = Path(folder) / "grf.xml"
    loads.printToXML(str(path))
    return str(path)


def moco_contact_tracking(folder, num_mesh_intervals=20) -> dict:
    """The bouncer tracking ``bouncer_grf``'s force for 1 s (MocoContactTrackingGoal
    ``grf``, weight 1, the error projected on +y; MocoControlGoal ``effort`` 1e-3),
    speed 0 at the start, height free; Hermite-Simpson, tolerances 1e-8. The study is
    printed to ``contact_tracking.omoco`` (key ``study_path``) and solved by Moco."""
    osim = _opensim()
    model, loads = bouncer_osim(folder), bouncer_grf(folder)
    study = osim.MocoStudy()
    study.setName("contact_tracking")
    problem = study.updProblem()
    problem.setModelProcessor(osim.ModelProcessor(model))
    problem.setTimeBounds(0.0, 1.0)
    problem.setStateInfo("/jointset/slider/height/value", [-0.5, 0.5])
    problem.setStateInfo("/jointset/slider/height/speed", [-5, 5], 0.0)
    problem.setControlInfo("/forceset/lift", [-5, 5])
    goal = osim.MocoContactTrackingGoal("grf", 1.0)
    goal.setExternalLoadsFile(loads)
    goal.addContactGroup(osim.MocoContactTrackingGoalGroup(["/forceset/contact"], "ball_force"))
    goal.setProjection("vector")
    goal.setProjectionVector(osim.Vec3(0, 1, 0))
    problem.addGoal(goal)
    problem.addGoal(osim.MocoControlGoal("effort", 1e-3))
    solver = study.initCasADiSolver()
    solver.set_num_mesh_intervals(num_mesh_intervals)
    solver.set_optim_convergence_tolerance(1e-8)
    solver.set_optim_constraint_tolerance(1e-8)
    solver.set_verbosity(0)
    path = Path(folder) / "contact_tracking.omoco"
    study.printToXML(str(path))
    out = solve(study)
    out.update(model_path=model, loads_path=loads, study_path=str(path))
    return out


# ----------------------------------------------------------------------------- kinematic constraints


def coupled_pendulum_osim(folder, coefficients=None) -> str:
    """Write ``coupled.osim`` in ``folder`` and return its path: a double pendulum of
    two 1 kg links (inertia 0.01 kg m^2, mass centres at the links' middles, 1 m
    apart), pins ``/jointset/j1`` (coordinate ``q1``) and ``/jointset/j2`` (``q2``), a
    CoordinateActuator ``/forceset/tau`` (optimal force 1) on q1, and a
    CoordinateCouplerConstraint ``coupler``: q2 = q1 / 2, or with ``coefficients`` a
    PolynomialFunction of q1 (highest power first; written as ``coupled_poly.osim``)."""
    osim = _opensim()
    m = osim.Model()
    m.setName("coupled")
    b1 = osim.Body("b1", 1.0, osim.Vec3(0), osim.Inertia(0.01))
    b2 = osim.Body("b2", 1.0, osim.Vec3(0), osim.Inertia(0.01))
    m.addBody(b1)
    m.addBody(b2)
    j1 = osim.PinJoint("j1", m.getGround(), osim.Vec3(0), osim.Vec3(0), b1, osim.Vec3(0, 0.5, 0), osim.Vec3(0))
    j1.updCoordinate().setName("q1")
    j2 = osim.PinJoint("j2", b1, osim.Vec3(0, -0.5, 0), osim.Vec3(0), b2, osim.Vec3(0, 0.5, 0), osim.Vec3(0))
    j2.updCoordinate().setName("q2")
    m.addJoint(j1)
    m.addJoint(j2)
    tau = osim.CoordinateActuator("q1")
    tau.setName("tau")
    tau.setOptimalForce(1.0)
    m.addForce(tau)
    coupler = osim.CoordinateCouplerConstraint()
    coupler.setName("coupler")
    coupler.setIndependentCoordinateNames(osim.ArrayStr("q1", 1))
    coupler.setDependentCoordinateName("q2")
    if coefficients is None:
        coupler.setFunction(osim.LinearFunction(0.5, 0.0))
    else:
        coupler.setFunction(osim.PolynomialFunction(osim.Vector([float(a) for a in coefficients])))
    m.addConstraint(coupler)
    m.finalizeConnections()
    path = Path(folder) / ("coupled.osim" if coefficients is None else "coupled_poly.osim")
    m.printToXML(str(path))
    return str(path)


#: The coupled pendulum swung from rest at q1 = 0 to rest at q1 = pi/2 in 1 s with
#: least effort (q2 follows by the coupler: its own bounds only, no initial or final
#: ones, which would repeat the constraint at the ends).
COUPLED_PENDULUM_PROBLEM = {
    "name": "coupled_swing",
    "time_initial_bounds": (0.0, 0.0),
    "time_final_bounds": (1.0, 1.0),
    "states": {
        "/jointset/j1/q1/value": ((-10.0, 10.0), 0.0, math.pi / 2),
        "/jointset/j1/q1/speed": ((-50.0, 50.0), 0.0, 0.0),
        "/jointset/j2/q2/value": ((-10.0, 10.0), None, None),
        "/jointset/j2/q2/speed": ((-50.0, 50.0), None, None),
    },
    "controls": {"/forceset/tau": ((-100.0, 100.0), None, None)},
    "goals": [{"type": "MocoControlGoal", "name": "effort", "weight": 1.0, "exponent": 2}],
}


def constrained_chain_osim(folder) -> str:
    """Write ``constrained_chain.osim`` in ``folder`` and return its path: a chain of five
    1 kg bodies ``b1``..``b5`` from ground, by pins ``q1``-``q3``, a slider ``q4`` and a
    pin ``q5``, each body 1 m below its parent, with one constraint of each kind
    simjax supports, all satisfied at the default pose: a CoordinateCouplerConstraint
    (``q2 = q1 / 2``), ``q4`` prescribed (constant 0), a PointOnLineConstraint (``b5``'s
    origin on ground's line through (0, -4, 0) along x), a PointConstraint (``b5``'s
    point (0, -1, 0) at ground's (0, -5, 0)) and a WeldConstraint (``b3`` to ``b1``,
    2 m below it); a CoordinateActuator on each coordinate."""
    osim = _opensim()
    model = osim.Model()
    model.setName("constrained_chain")
    parent, bodies = model.getGround(), []
    for i, joint_class in enumerate((osim.PinJoint,) * 3 + (osim.SliderJoint, osim.PinJoint)):
        body = osim.Body(f"b{i + 1}", 1.0, osim.Vec3(0, -0.5, 0), osim.Inertia(0.1, 0.1, 0.1))
        model.addBody(body)
        offset = osim.Vec3(0, -1.0, 0) if i else osim.Vec3(0)
        joint = joint_class(f"j{i + 1}", parent, offset, osim.Vec3(0), body, osim.Vec3(0), osim.Vec3(0))
        joint.updCoordinate().setName(f"q{i + 1}")
        model.addJoint(joint)
        bodies.append(body)
        parent = body
    coupler = osim.CoordinateCouplerConstraint()
    coupler.setName("coupler")
    coupler.setIndependentCoordinateNames(osim.ArrayStr("q1", 1))
    coupler.setDependentCoordinateName("q2")
    coupler.setFunction(osim.LinearFunction(0.5, 0.0))
    model.addConstraint(coupler)
    model.updCoordinateSet().get("q4").setPrescribedFunction(osim.Constant(0.0))
    model.updCoordinateSet().get("q4").setDefaultIsPrescribed(True)
    ground = model.getGround()
    on_line = osim.PointOnLineConstraint(ground, osim.Vec3(1, 0, 0), osim.Vec3(0, -4, 0), bodies[4], osim.Vec3(0))
    on_line.setName("on_line")
    model.addConstraint(on_line)
    point = osim.PointConstraint(ground, osim.Vec3(0, -5, 0), bodies[4], osim.Vec3(0, -1, 0))
    point.setName("point")
    model.addConstraint(point)
    weld = osim.WeldConstraint("weld", bodies[0], osim.Transform(osim.Vec3(0, -2, 0)), bodies[2], osim.Transform())
    model.addConstraint(weld)
    for i in range(5):
        actuator = osim.CoordinateActuator(f"q{i + 1}")
        actuator.setName(f"tau{i + 1}")
        model.addForce(actuator)
    model.finalizeConnections()
    model.initSystem()
    path = os.path.join(str(folder), "constrained_chain.osim")
    model.printToXML(path)
    return path


def moco_multiplier_names(model_path) -> list[str]:
    """Moco's names of the kinematic constraints' multipliers for the model at
    ``model_path`` (those of the ``MocoCasADiSolver``'s initial guess: nothing solved)."""
    osim = _opensim()
    study = osim.MocoStudy()
    problem = study.updProblem()
    problem.setModel(osim.Model(str(model_path)))
    problem.setTimeBounds(0.0, 1.0)
    return list(study.initCasADiSolver().createGuess().getMultiplierNames())


def moco_coupled_pendulum(
    folder, num_mesh_intervals=20, transcription="hermite-simpson", coefficients=None, **kw
) -> dict:
    """``COUPLED_PENDULUM_PROBLEM`` solved by Moco (by default Hermite-Simpson, with its
    default Posa2016 kinematic constraint method; ``kw`` to ``study_from_problem``, e.g.
    ``kinematic_constraint_method="Bordalba2023"``) on
    ``coupled_pendulum_osim(folder, coefficients)``."""
    return _solve_problem(
        coupled_pendulum_osim(folder, coefficients),
        COUPLED_PENDULUM_PROBLEM,
        folder,
        transcription,
        num_mesh_intervals,
        **kw,
    )
