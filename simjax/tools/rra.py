"""OpenSim's Residual Reduction Algorithm (``RRATool``), run from its setup file or
called directly (``rra``).

The steps of ``RRATool::run``:

1. The model with the residual and reserve actuators of ``force_set_files``
   (``replace_force_set``) and the external loads; the desired kinematics padded,
   filtered (``lowpass_cutoff_frequency``, OpenSim's FIR filter) and fitted with
   splines (``tracking.desired_kinematics``); the tracking tasks (``task_set_file``).
2. With ``adjust_com_to_reduce_residuals``: the average residuals (``FX`` ... ``MZ``,
   by actuator name) of OpenSim's ``InverseDynamics`` analysis over the desired
   states between ``initial_time_for_com_adjustment`` and
   ``final_time_for_com_adjustment`` (trapezoidal time averages, ``Storage::
   computeAverage``); the mass centre of ``adjusted_com_body`` moved by
   ``dx = MZ / W``, ``dz = -MX / W`` (``W`` its weight; each clamped to 0.1 m); the
   recommended mass change ``FY / g_y`` shared among the bodies in proportion to their
   masses; the residuals again with the adjusted model.
3. The tracking (``tracking.track``): every ``0.001`` s, the controls of least
   squared stress that achieve the PD-tracking accelerations, and the model
   integrated over the window with them (one ``lax.scan`` over one compiled window
   step).
4. The outputs: ``<name>_Kinematics_q/u/dudt.sto`` (degrees),
   ``_Actuation_force/speed/power.sto``, ``_controls.sto`` and ``.xml``, ``_states.sto``,
   ``_pErr.sto``, ``_avgResiduals.txt`` and, with the adjustment, the adjusted model
   (the original model, its own forces, the new mass centre) as ``output_model_file``.

Differences from OpenSim, by design: the model is integrated over each window by one
classical Runge-Kutta step (OpenSim's adaptive Runge-Kutta-Merson takes one step per
window too at its default accuracy), so ``integrator_error_tolerance`` and the step
settings are read but do not steer it; the per-window least squares are solved
exactly (OpenSim's ``optimizer_algorithm`` settings are checked, not used); actuators
must be ideal (force = control × optimal_force: RRA's residual and reserve
actuators), so a model that keeps its muscles (``replace_force_set`` false) is refused
naming the first muscle (OpenSim 4.6's RRATool stops with a segmentation fault on the
walking example set up so); ``desired_points_file`` and point tasks (which OpenSim
4.6's RRA and CMC cannot run either), analyses and controllers in the setup are refused
by name. A ``constraints_file`` (deprecated in OpenSim's RRA, and still used) bounds the
controls over time, as ``control_constraints`` describes.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from ..io.tables import TimeSeriesTable
from . import motion, tracking
from .control_constraints import match_control_constraints
from .analyze import load_model_with_force_sets
from .external_loads import read_external_loads
from ..io.states import state_variable_columns
from .forward import print_storage, write_control_set
from .setup import Setup, SetupError, SetupWarning, register_tool
from ..io.outputs import open_output

__all__ = [
    "rra",
    "tracking_inputs",
    "read_tracking_setup",
    "run_tracking_tool",
    "average_residuals",
    "com_adjustment",
    "write_rra_results",
]

#: ``CMC``'s stand-in for unbounded controls (``MAX_CONTROLS_FOR_RRA``)
_MAX_CONTROL = 10000.0
_RESIDUALS = ("FX", "FY", "FZ", "MX", "MY", "MZ")
_UNITS = (
    "If the header above contains a line with 'inDegrees', this indicates whether rotational values are in "
    "degrees (yes) or radians (no)."
)
_ACTUATION_DESCRIPTION = f"""This file contains either the forces, speeds, or powers developed
by the actuators of a model during a simulation.

An actuator force is a generalized force, meaning that it can be either a force (N) or a torque (Nm).

An actuator speed is the rate at which an actuator shortens. Depending on the actuator,
a speed can be either a translational speed (m/s) or an angular speed (deg/s or rad/s).

An actuator power (Watts) is the rate at which an actuator does work.  Positive power means
that the actuator is delivering energy to the model; negative power means that the actuator
is absorbing energy from the model.

Units are S.I. units (second, meters, Newtons, ...)
{_UNITS}
"""
_KINEMATICS_DESCRIPTION = f"""
Units are S.I. units (second, meters, Newtons, ...)
{_UNITS}
"""


def _time_average(times, values) -> np.ndarray:
    """``Storage::computeAverage``: the trapezoidal integral over the rows divided by
    the time spanned."""
    t = np.asarray(times, float)
    v = np.asarray(values, float).reshape(len(t), -1)
    if len(t) < 2 or not t[-1] > t[0]:
        return np.zeros(v.shape[1])
    return np.trapezoid(v, t, axis=0) / (t[-1] - t[0])


def _residual_vectors(names, averages) -> tuple[np.ndarray, np.ndarray]:
    """``(F, M)``: the averages of the actuators named FX..MZ (0 for those missing)."""
    names = list(names)
    vals = [float(averages[names.index(k)]) if k in names else 0.0 for k in _RESIDUALS]
    return np.asarray(vals[:3]), np.asarray(vals[3:])


def _full_states(system, desired: tracking.DesiredKinematics, first: int, stop: int):
    tree = system.topology.tree
    state0 = system.default_state()
    cq = np.asarray([tree.coordinates[p].q for p in system.coordinate_paths], int)
    cu = np.asarray([tree.coordinates[p].u for p in system.coordinate_paths], int)
    keep = cq >= 0
    T = desired.times[first:stop]
    Q = np.broadcast_to(np.asarray(state0.q, float), (len(T), tree.nq)).copy()
    U = np.zeros((len(T), tree.nu))
    A = np.zeros((len(T), tree.nu))
    Q[:, cq[keep]] = desired.q[first:stop][:, keep]
    U[:, cu[keep]] = desired.u[first:stop][:, keep]
    _, ud, _ = motion.spline_kinematics(desired.table("u"), T)
    A[:, cu[keep]] = np.asarray(ud)[:, keep]
    return T, Q, U, A


def average_residuals(system, optimal_forces, desired: tracking.DesiredKinematics, t0: float, t1: float) -> dict:
    """The average residuals RRA adjusts the mass centre by (``RRATool::
    computeAverageResiduals``): OpenSim's ``InverseDynamics`` analysis with the model's
    actuators over the desired states from the last sample at or before ``t0`` to the
    last at or before ``t1``, time-averaged.

    **Arguments:** ``system`` (with the actuators and external loads);
    ``optimal_forces (n_actuators,)``; ``desired``; ``t0``, ``t1`` (s).

    **Returns:** ``{"F": (3,) N, "M": (3,) N m, "times": (t_first, t_last) s,
    "forces": (N, n_actuators) N or N m}``.
    """
    first, stop = motion.frame_indices(desired.times, (t0, t1))
    T, Q, U, A = _full_states(system, desired, first, stop)
    forces = tracking.actuator_inverse_dynamics(system, T, Q, U, A) * np.asarray(optimal_forces)[None, :]
    F, M = _residual_vectors(system.actuator_names, _time_average(T, forces))
    return {"F": F, "M": M, "times": (float(T[0]), float(T[-1])), "forces": forces}


def com_adjustment(model, body: str, F, M) -> dict:
    """OpenSim's mass-centre adjustment and mass recommendations for average residual
    forces ``F`` (N) and moments ``M`` (N m) (``RRATool::adjustCOMToReduceResiduals``).

    **Arguments:** ``model``; ``body``: the name of the body whose mass centre moves.

    **Returns:** ``{"body", "dx", "dz" (m, each clamped to ±0.1), "mass_center" (the
    new one, m, in the body frame), "mass_change" (kg, total), "masses": {body:
    (original, recommended)}}``.

    **Raises:** ``SetupError`` when the body has no weight.
    """
    g = np.asarray(model.gravity, float)
    b = model.find(f"/bodyset/{body}")
    mass = float(np.asarray(b.mass))
    weight = abs(g[1]) * mass
    if weight < 1e-14:
        raise SetupError(f"adjusted_com_body {body!r} has no weight (mass {mass:g} kg, gravity {g[1]:g})")
    dx = float(np.clip(M[2] / weight, -0.1, 0.1))
    dz = float(np.clip(-M[0] / weight, -0.1, 0.1))
    com = np.array(np.asarray(b.mass_center, float))
    com[0] -= dx
    com[2] -= dz
    dmass = float(F[1] / g[1])
    bodies = [(c.name, float(np.asarray(c.mass))) for c in _bodies(model)]
    total = sum(m for _, m in bodies)
    masses = {n: (m, m + dmass * m / total) for n, m in bodies}
    return {"body": body, "dx": dx, "dz": dz, "mass_center": com, "mass_change": dmass, "masses": masses}


def _bodies(model):
    from ..mechanics.frames import Body

    return [c for c in model.components_of(Body)]


def _control_limits(model, system) -> tuple[np.ndarray, np.ndarray]:
    """The actuators' ``min_control``/``max_control``, infinite ones as ±10000 (CMC's
    ``MAX_CONTROLS_FOR_RRA``)."""
    lo, hi = [], []
    for p in system.actuator_paths:
        a = model.find(p)
        lo.append(max(float(np.asarray(getattr(a, "min_control", -np.inf))), -_MAX_CONTROL))
        hi.append(min(float(np.asarray(getattr(a, "max_control", np.inf))), _MAX_CONTROL))
    return np.asarray(lo), np.asarray(hi)


def _control_bounds(system, limits, optimal_forces) -> tuple[np.ndarray, np.ndarray]:
    """CMC's control bounds: the ``limits`` (``(n,)`` or ``(K, n)`` per time), an
    actuator whose force range is under 1 held at its minimum (reported once)."""
    lo, hi = (np.asarray(b, float) for b in limits)
    f = np.asarray(optimal_forces)
    fixed = np.abs(hi * f - lo * f) < 1.0
    for p in np.asarray(system.actuator_paths)[fixed.reshape(-1, len(f)).any(axis=0)]:
        warnings.warn(f"actuator {p!r} has a force range under 1; its control is held at its minimum", SetupWarning)
    return lo, np.where(fixed, lo, hi)


def _format(x: float) -> str:
    """C++ ``ostream << double`` (6 significant digits)."""
    return f"{x:g}"


def tracking_inputs(model, desired_kinematics, tasks, external_loads, initial_time, final_time, source):
    """The inputs RRA and CMC share, read and checked as their tools do: the desired
    kinematics and the task set (read when given as files), the external loads added
    to ``model``, and the time range clamped to the desired kinematics with a
    ``SetupWarning``.

    **Returns:** ``(model, desired kinematics table, its source, tasks, their source,
    initial time, final time)``.

    **Raises:** ``SetupError`` naming ``source`` for an empty time range."""
    if isinstance(desired_kinematics, (str, os.PathLike)):
        kin_source = os.fspath(desired_kinematics)
        desired_kinematics = motion.read_coordinates(kin_source)
    else:
        kin_source = f"{source}: desired kinematics"
    if isinstance(tasks, (str, os.PathLike)):
        task_source = os.fspath(tasks)
        tasks = tracking.read_task_set(task_source)
    else:
        task_source = f"{source}: task set"
    if external_loads is not None:
        if isinstance(external_loads, (str, os.PathLike)):
            # (a window in whole seconds: nearby time ranges read loads of the same shape,
            # and share the compiled programs)
            window = (math.floor(initial_time - 1.0), math.ceil(final_time + 1.0))
            external_loads = read_external_loads(external_loads, time_window=window)
        for f in external_loads:
            model = model.add(f)
    times = np.asarray(desired_kinematics.times, float)
    ti, tf = float(initial_time), float(final_time)
    if ti < times[0]:
        warnings.warn(
            f"{kin_source}: the initial time {ti:g} s precedes the desired kinematics; reset to {times[0]:g} s",
            SetupWarning,
            stacklevel=2,
        )
        ti = float(times[0])
    if tf > times[-1]:
        warnings.warn(
            f"{kin_source}: the final time {tf:g} s is past the desired kinematics; reset to {times[-1]:g} s",
            SetupWarning,
            stacklevel=2,
        )
        tf = float(times[-1])
    if not tf > ti:
        raise SetupError(f"{source}: the time range {ti:g} to {tf:g} s is empty (desired kinematics {kin_source})")
    return model, desired_kinematics, kin_source, tasks, task_source, ti, tf


def rra(
    model,
    desired_kinematics,
    tasks,
    *,
    initial_time: float,
    final_time: float,
    external_loads=None,
    lowpass_cutoff: float = -1.0,
    adjusted_com_body: str | None = None,
    com_time_range=None,
    dt: float = 0.001,
    constraints=None,
    source: str = "rra",
) -> dict:
    """OpenSim's Residual Reduction Algorithm.

    **Arguments:** ``model``: a ``Model`` with its residual and reserve actuators (ideal:
    force = control × optimal_force) and without the external loads; ``desired_kinematics``:
    a coordinates ``TimeSeriesTable`` or file (degrees if its header says so);
    ``tasks``: a ``CMC_TaskSet`` file or ``TrackingTask`` records; ``initial_time``,
    ``final_time`` (s; clamped to the desired kinematics with a ``SetupWarning``);
    ``external_loads``: an ExternalLoads ``.xml`` path or ``ExternalForce``
    components; ``lowpass_cutoff`` (Hz, negative: no filter); ``adjusted_com_body``:
    a body name to adjust the mass centre of (``None``: no adjustment);
    ``com_time_range``: ``(t0, t1)`` s for the averages (default the tracking's);
    ``dt``: the tracking window (s); ``constraints``: a control constraints file
    (``constraints_file``, see ``control_constraints``) or ``None``; ``source``: a name
    for messages.

    **Returns:** a dict: ``"model"`` (the tracked model, adjusted), ``"adjustment"``
    (``com_adjustment``'s dict, or ``None``), ``"residuals_before"``,
    ``"residuals_after"`` (``average_residuals`` dicts, or ``None``), ``"track"``
    (``tracking.track``'s arrays), ``"task_names"``, ``"average_residuals"``: ``(F,
    M)`` of the tracking's actuator forces, ``"tables"``: ``{"Kinematics_q",
    "Kinematics_u", "Kinematics_dudt", "Actuation_force", "Actuation_speed",
    "Actuation_power", "controls", "states", "pErr"}`` as OpenSim writes them,
    ``"control_limits"``: ``(min, max)`` of each actuator's control (as
    ``_control_limits``), ``"message"``: OpenSim's summary text,
    ``"failed_at"``: ``None``, or the time (s) of the first window whose solve or
    integration failed (the results stop before it).

    **Raises:** ``SetupError`` naming ``source`` for an unknown body, a task naming no
    coordinate of the model, a non-ideal actuator, or a time range without data.
    """
    from ..mechanics.frames import Body

    if adjusted_com_body is not None:
        names = [c.name for c in model.components_of(Body)]
        if adjusted_com_body not in names:
            raise SetupError(f"{source}: adjusted_com_body {adjusted_com_body!r} is not a body of the model")
    model, desired_kinematics, kin_source, tasks, task_source, ti, tf = tracking_inputs(
        model, desired_kinematics, tasks, external_loads, initial_time, final_time, source
    )
    system = model.build()
    opt = tracking.actuator_optimal_forces(model, system, source)
    desired = tracking.desired_kinematics(system, desired_kinematics, lowpass_cutoff, kin_source)
    gains = tracking.task_indices(system, tasks, task_source)
    if len(gains["names"]) == 0:
        raise SetupError(f"{task_source}: no active task to track")
    adjustment = before = after = None
    message = ""
    if adjusted_com_body is not None:
        c0, c1 = (ti, tf) if com_time_range is None else tuple(map(float, com_time_range))
        before = average_residuals(system, opt, desired, c0, c1)
        adjustment = com_adjustment(model, adjusted_com_body, before["F"], before["M"])
        model = model.set(f"/bodyset/{adjusted_com_body}", mass_center=adjustment["mass_center"])
        system = model.build()
        after = average_residuals(system, opt, desired, c0, c1)
        message = _adjustment_message(adjustment, before, after)
    limits = _control_limits(model, system)
    matched = match_control_constraints(constraints, system.actuator_names)
    if constraints is not None:
        warnings.warn(f"{source}: control constraints in RRA are deprecated in OpenSim (and used)", SetupWarning)

    def bounds(times):
        return _control_bounds(system, matched.bounds(times, *limits), opt)

    steps = matched.steps(np.zeros(len(system.actuator_paths), bool))
    run = tracking.track(system, gains, desired, ti, tf, dt, bounds, steps)
    forces = run["controls"] * opt[None, :]
    F, M = _residual_vectors(system.actuator_names, _time_average(run["times"], forces))
    message += _final_message(adjusted_com_body or "", F, M)
    return {
        "model": model,
        "adjustment": adjustment,
        "residuals_before": before,
        "residuals_after": after,
        "track": run,
        "task_names": list(gains["names"]),
        "average_residuals": (F, M),
        "tables": _tables(system, run, forces, _actuator_speeds(system, run), gains),
        "control_limits": limits,
        "message": message,
        "failed_at": run["failed_at"],
    }


def _actuator_speeds(system, run) -> np.ndarray:
    """Each actuator's speed (m/s or rad/s; its ``speed`` output, OpenSim's
    ``Actuator::getSpeed``) at each time of the run, ``(K + 1, n_actuators)``."""
    import jax.numpy as jnp

    from ..api import component_outputs
    from ..state import State

    d = system.default_state().d
    t, q, u, z = (jnp.asarray(run[k]) for k in ("times", "q", "u", "z"))
    states = State(t=t, q=q, u=u, z=z, d=jnp.broadcast_to(d, t.shape + d.shape))
    return np.asarray(component_outputs(system, states, system.actuator_paths, "speed", jnp.asarray(run["controls"])))


def _tables(system, run, forces, speeds, gains) -> dict:
    # OpenSim's Kinematics analysis: the coordinates in the model's order
    tree = system.topology.tree
    paths = [lab[: -len("/value")] for lab in state_variable_columns(system) if lab.endswith("/value")]
    paths = [p for p in paths if p in tree.coordinates and tree.coordinates[p].q >= 0]
    names = [p.rsplit("/", 1)[-1] for p in paths]
    cq = np.asarray([tree.coordinates[p].q for p in paths], int)
    cu = np.asarray([tree.coordinates[p].u for p in paths], int)
    rot = motion.rotational_mask(system, names)
    scale = np.where(rot, 180.0 / math.pi, 1.0)[None, :]
    t = run["times"]
    deg = {"inDegrees": "yes"}
    out = {
        "Kinematics_q": TimeSeriesTable(t, run["q"][:, cq] * scale, names, dict(deg)),
        "Kinematics_u": TimeSeriesTable(t, run["u"][:, cu] * scale, names, dict(deg)),
        "Kinematics_dudt": TimeSeriesTable(t, run["udot"][:, cu] * scale, names, dict(deg)),
        "Actuation_force": TimeSeriesTable(t, forces, list(system.actuator_names), {"inDegrees": "no"}),
        "Actuation_speed": TimeSeriesTable(t, speeds, list(system.actuator_names), {"inDegrees": "no"}),
        "Actuation_power": TimeSeriesTable(t, forces * speeds, list(system.actuator_names), {"inDegrees": "no"}),
        "controls": TimeSeriesTable(t, run["controls"], list(system.actuator_names), {"inDegrees": "no"}),
        "pErr": TimeSeriesTable(run["pErr_times"], run["pErr"], list(gains["names"]), {"inDegrees": "no"}),
    }
    out["states"] = _states(system, run)
    return out


def _states(system, run) -> TimeSeriesTable:
    """The states at the window boundaries, columns named and ordered as OpenSim's
    ``_states.sto``."""
    where = {}
    for f, ns in (("q", system.q_names), ("u", system.u_names), ("z", system.z_names)):
        for i, n in enumerate(ns):
            where[n] = (f, i)
    labels = [lab for lab in state_variable_columns(system) if lab in where]
    values = np.stack([run[where[lab][0]][:, where[lab][1]] for lab in labels], axis=1)
    return TimeSeriesTable(run["times"], values, labels, {"inDegrees": "no"})


def _adjustment_message(adj, before, after) -> str:
    lines = [
        "",
        "************************************************************",
        "*      Summary of Mass Adjustments to Reduce Residuals     *",
        "************************************************************",
        f"* Body adjusted: {adj['body']}",
        f"* Mass Center (COM) adjustment: dx ={_format(adj['dx'])}, dz ={_format(adj['dz'])}",
        "* New COM location: ~[" + ",".join(_format(v) for v in adj["mass_center"]) + "]",
        "************************************************************",
        "* Recommended mass adjustments:                             ",
        f"*  Total mass change: {_format(adj['mass_change'])}",
    ]
    for name, (m0, m1) in adj["masses"].items():
        lines.append(f"*  {name}: orig mass = {_format(m0)}, new mass = {_format(m1)}")
    lines += ["************************************************************"]
    for when, r in (("before", before), ("after", after)):
        F, M = r["F"], r["M"]
        lines += [
            f"* Average residuals {when} adjusting {adj['body']} COM:",
            f"*  FX={_format(F[0])} FY={_format(F[1])} FZ={_format(F[2])}",
            f"*  MX={_format(M[0])} MY={_format(M[1])} MZ={_format(M[2])}",
            "************************************************************",
        ]
    return "\n".join(lines) + "\n"


def _final_message(body, F, M) -> str:
    return "\n".join(
        [
            "",
            "************************************************************",
            "*                   Final Average Residuals                *",
            "************************************************************",
            f"* After {body} COM and Kinematics adjustments:",
            f"*  FX={_format(F[0])} FY={_format(F[1])} FZ={_format(F[2])}",
            f"*  MX={_format(M[0])} MY={_format(M[1])} MZ={_format(M[2])}",
            "************************************************************",
            "",
        ]
    )


def _print_described(path, table, name, precision, in_degrees, description):
    """``Storage::print`` with a description between the header and ``endheader``
    (OpenSim's analyses' files)."""
    print_storage(path, table, name, precision, in_degrees)
    with open(path) as fh:
        lines = fh.read().split("\n")
    k = lines.index("endheader")
    lines[k:k] = description.rstrip("\n").split("\n") + [""]
    with open_output(path, "w", newline="\n") as fh:
        fh.write("\n".join(lines))


def write_rra_results(result: dict, results_dir: str, name: str, precision: int = 8) -> dict:
    """Write ``rra``'s results as OpenSim's ``RRATool`` names them.

    **Arguments:** ``result``: ``rra``'s dict; ``results_dir``; ``name``: the tool's
    name (the files' prefix); ``precision``: digits after the point.

    **Returns:** ``{key: path}`` for ``Kinematics_q``, ``Kinematics_u``,
    ``Kinematics_dudt``, ``Actuation_force``, ``Actuation_speed``, ``Actuation_power``,
    ``controls``, ``controls_xml``, ``states``, ``pErr``, and ``avgResiduals`` where ``result``
    has ``average_residuals``.
    """
    os.makedirs(results_dir, exist_ok=True)
    tabs = result["tables"]
    written = {}
    for key, header, deg, desc in (
        ("Kinematics_q", "Coordinates", True, _KINEMATICS_DESCRIPTION),
        ("Kinematics_u", "Speeds", True, _KINEMATICS_DESCRIPTION),
        ("Kinematics_dudt", "Accelerations", True, _KINEMATICS_DESCRIPTION),
        ("Actuation_force", "ActuatorForces", False, "\n" + _ACTUATION_DESCRIPTION),
        ("Actuation_speed", "ActuatorSpeeds", False, "\n" + _ACTUATION_DESCRIPTION),
        ("Actuation_power", "ActuatorPowers", False, "\n" + _ACTUATION_DESCRIPTION),
    ):
        path = os.path.join(results_dir, f"{name}_{key}.sto")
        _print_described(path, tabs[key], header, precision, deg, desc)
        written[key] = path
    for key, header in (("controls", "controls"), ("states", name), ("pErr", "PositionErrors")):
        path = os.path.join(results_dir, f"{name}_{key}.sto")
        print_storage(path, tabs[key], header, precision, False)
        written[key] = path
    path = os.path.join(results_dir, f"{name}_controls.xml")
    controls, limits = tabs["controls"], result.get("control_limits")
    if "controlled" in result:  # (CMC's ControlSet: only the actuators it controls)
        on = np.asarray(result["controlled"], bool)
        controls = controls.select_columns([lab for lab, k in zip(controls.labels, on) if k])
        limits = tuple(np.asarray(b)[on] for b in limits)
    write_control_set(path, result["model"].name, controls, limits)
    written["controls_xml"] = path
    if "average_residuals" in result:  # (RRA's; CMC writes none)
        F, M = result["average_residuals"]
        path = os.path.join(results_dir, f"{name}_avgResiduals.txt")
        with open_output(path, "w", newline="\n") as fh:
            fh.write("Average Residuals:\n\n")
            for k, v in zip(_RESIDUALS, (*F, *M)):
                fh.write(f"{k} average = {_format(float(v))}\n")
        written["avgResiduals"] = path
    return written


# -- the setup ----------------------------------------------------------------------------------


def _existing(setup: Setup, prop: str, required: bool = False) -> str | None:
    path = setup.path(prop)
    if path is None:
        if required:
            raise setup.error(prop, "", "no file given")
        return None
    if not os.path.exists(path):
        raise setup.error(prop, setup.text(prop), f"resolved to {path!r}, which does not exist")
    return path


def read_tracking_setup(setup: Setup, numbers_read) -> dict:
    """What RRA and CMC setups share, read and checked: the model and force set files,
    the desired kinematics, task set, external loads and control constraints files
    (``{"model", "force_sets", "replace", "kinematics", "tasks", "loads",
    "constraints"}``, resolved paths); no analyses or
    controllers and no desired points; a known optimizer algorithm; ``numbers_read``
    (properties read to check their values, not acted on) and ``use_verbose_printing``.

    **Raises:** ``SetupError`` naming the file, property and value."""
    paths = {
        "model": _existing(setup, "model_file", required=True),
        "force_sets": setup.existing_paths("force_set_files"),
        "replace": setup.flag("replace_force_set", False),
    }
    if setup.has("desired_points_file"):
        raise setup.error(
            "desired_points_file",
            setup.text("desired_points_file"),
            f"point tracking is not supported ({tracking._POINT_TASKS_IN_OPENSIM})",
        )
    paths["kinematics"] = _existing(setup, "desired_kinematics_file")
    if paths["kinematics"] is None:
        raise setup.error("desired_kinematics_file", "", "no desired kinematics file given")
    paths["tasks"] = _existing(setup, "task_set_file", required=True)
    paths["loads"] = _existing(setup, "external_loads_file")
    paths["constraints"] = _existing(setup, "constraints_file")
    for prop in ("AnalysisSet", "ControllerSet"):
        node = setup.element(prop)
        objects = node.find("objects") if node is not None else None
        if objects is not None and objects.children:
            raise setup.error(
                prop, objects.children[0].tag, f"analyses and controllers in a {setup.tool} setup are not supported"
            )
    algorithm = setup.text("optimizer_algorithm", "ipopt")
    if algorithm.upper() not in ("IPOPT", "CFSQP"):
        raise setup.error("optimizer_algorithm", algorithm, "unrecognized optimizer algorithm (ipopt or cfsqp)")
    for prop in numbers_read:
        setup.number(prop)
    setup.flag("use_verbose_printing", False)
    return paths


def run_tracking_tool(setup: Setup, solve, write, results: str) -> dict:
    """``solve()`` (RRA's or CMC's function), its ``SetupError`` prefixed with the setup
    file; unused properties reported; ``write(result)``'s files.

    **Returns:** ``(result, {key: path})``.

    **Raises:** ``SetupError`` naming the setup, after writing the results, when the
    tracking failed at a window."""
    try:
        result = solve()
    except SetupError as e:
        msg = str(e)
        raise SetupError(msg if msg.startswith(setup.file) else f"{setup.file}: {msg}") from None
    setup.report_unused(ignored=("replace_force_set",))
    written = write(result)
    if result["failed_at"] is not None:
        raise SetupError(
            f"{setup.file}: <{setup.tool}>: the tracking failed at t = {result['failed_at']:g} s; the results up to "
            f"there are written to {results!r}"
        )
    return result, written


def _run(setup: Setup) -> dict:
    """Run an ``<RRATool>`` setup, writing OpenSim's files (see the module).

    **Returns:** ``{key: path}`` (``write_rra_results``'s keys, and ``"model"`` for the
    adjusted model when the setup asks for the adjustment).

    **Raises:** ``SetupError`` naming the file, property and value for a missing file,
    an unknown ``adjusted_com_body``, an unsupported property value, a task naming no
    coordinate of the model.
    """
    files = read_tracking_setup(
        setup,
        (
            "numerical_derivative_step_size",
            "optimization_convergence_tolerance",
            "integrator_error_tolerance",
            "maximum_number_of_integrator_steps",
            "maximum_integrator_step_size",
            "minimum_integrator_step_size",
        ),
    )
    setup.flag("solve_for_equilibrium_for_auxiliary_states", False)
    t0 = setup.number("initial_time", 0.0)
    t1 = setup.number("final_time", 1.0)
    dt = setup.number("cmc_time_window", 0.001)
    if dt != 0.001:
        setup.warn(f"<cmc_time_window> {dt:g} is ignored by RRA; 0.001 is used (as OpenSim)")
    cutoff = setup.number("lowpass_cutoff_frequency", -1.0)
    precision = int(setup.number("output_precision", 8))
    adjust = setup.flag("adjust_com_to_reduce_residuals", False)
    body = setup.text("adjusted_com_body")
    com_t0 = setup.number("initial_time_for_com_adjustment", -1.0)
    com_t1 = setup.number("final_time_for_com_adjustment", -1.0)
    results = setup.path("results_directory") or setup.folder
    out_model = setup.path("output_model_file") or os.path.join(setup.folder, "adjusted_model.osim")
    name = setup.name or "rra"
    if adjust and not body:
        raise setup.error("adjusted_com_body", "", "adjust_com_to_reduce_residuals is true but no body is named")

    from ..io.osim.reader import load_osim
    from ..io.osim.writer import save_osim
    from ..mechanics.frames import Body

    original = load_osim(files["model"])
    if adjust and body not in [c.name for c in original.components_of(Body)]:
        raise setup.error("adjusted_com_body", body, f"no such body in {files['model']}")
    model = load_model_with_force_sets(files["model"], files["force_sets"], files["replace"])

    def solve():
        return rra(
            model,
            files["kinematics"],
            files["tasks"],
            initial_time=t0,
            final_time=t1,
            external_loads=files["loads"],
            lowpass_cutoff=cutoff,
            adjusted_com_body=body if adjust else None,
            com_time_range=None if com_t0 == -1 and com_t1 == -1 else (com_t0, com_t1),
            dt=0.001,
            constraints=files["constraints"],
            source=f"{setup.file}: <{setup.tool}>",
        )

    def write(result):
        written = write_rra_results(result, results, name, precision)
        if adjust:
            adjusted = original.set(f"/bodyset/{body}", mass_center=result["adjustment"]["mass_center"])
            os.makedirs(os.path.dirname(os.path.abspath(out_model)), exist_ok=True)
            save_osim(adjusted, out_model)
            written["model"] = out_model
        return written

    return run_tracking_tool(setup, solve, write, results)[1]


register_tool("RRATool", _run)
