"""OpenSim Moco (4.6, ``MocoCasADiSolver``) run live on the Gait10dof18musc walking
data, for tests that compare simjax's MocoInverse/MocoTrack with Moco's.

Both problems use the same model edits (``gait_model_processor``, in
exampleMocoInverse.py's order): ``ModOpAddExternalLoads(subject01_walk_grf.xml)``,
``ModOpIgnoreTendonCompliance``, ``ModOpReplaceMusclesWithDeGrooteFregly2016``,
``ModOpIgnorePassiveFiberForcesDGF``, ``ModOpScaleActiveFiberForceCurveWidthDGF(1.5)``,
``ModOpAddReserves(1.0)`` on ``subject01.osim``, and the same kinematics: the IK
``.mot`` through ``TabOpLowPassFilter(6)`` (``kinematics_processor``).

What Moco does with them (read in OpenSim 4.6's sources and checked here):

- ``ModOpAddReserves(1.0)`` adds a CoordinateActuator ``/forceset/reserve<coordinate
  path with '/' -> '_'>`` (e.g. ``/forceset/reserve_jointset_hip_r_hip_flexion_r``),
  optimal force 1, control bounds (-inf, inf), on every unconstrained coordinate:
  all 10, the three pelvis coordinates included (the model has no other
  CoordinateActuator). The DeGrooteFregly2016 muscles have excitation and activation
  bounds [0.01, 1] (the muscles' ``min_control``).
- ``TabOpLowPassFilter(6)`` (``TableUtilities::filterLowpass`` with padding, then
  trimmed to the original time range): the IK times (printed with 8 decimals) are
  not uniform, so the table is first resampled at its smallest step (0.01666666 s,
  a quintic GCVSpline per column, times ``0, dt, 2 dt, ...`` accumulated, last
  2.499999), then padded by ``rows // 2`` reflected-and-negated rows, filtered
  forward and backward by OpenSim's third-order Butterworth recursion, and trimmed.
  The output stays in degrees (``inDegrees=yes``); the tools convert rotational
  columns to radians afterwards (``processAndConvertToRadians``).
- MocoInverse (``MocoInverse::initializeInternal``) matches the bare coordinate
  names of the ``.mot`` to the model's states itself (pre-4.0 label rules, so no
  ``TabOpUseAbsoluteStateNames`` and no extra columns here), assembles each row,
  fits a quintic ``GCVSplineSet`` to the radians table and prescribes q(t) with a
  ``PositionMotion`` (q, qdot, qddot from the splines). Its problem: states are the
  18 activations only; controls 18 excitations + 10 reserves; goals
  ``excitation_effort`` (MocoControlGoal, weight 1, exponent 2, reserve pattern
  weight ``reserves_weight`` = 1) and ``initial_activation``
  (MocoInitialActivationGoal, endpoint constraint: excitation(t0) = activation(t0)
  for every muscle). Solver: Hermite-Simpson, implicit multibody dynamics,
  ``interpolate_control_mesh_interior_points = False`` (midpoint controls are free
  variables), ``minimize_implicit_auxiliary_derivatives = True`` (weight 0.01; no
  auxiliary derivatives exist with rigid tendons), tolerances 1e-3/1e-3,
  sparsity detection ``random``, forward finite differences,
  ``ceil((tf - t0) / mesh_interval)`` mesh intervals (40 for 0.6-1.4 s at 0.02).
- MocoTrack (``MocoTrack::initialize``/``configureStateTracking``) needs full state
  paths in its reference, hence ``TabOpUseAbsoluteStateNames``; with MocoTrack's
  defaults it tracks the 10 coordinate values (weight 1 each, no speeds:
  ``track_reference_position_derivatives = False``) with ``state_tracking``
  (MocoStateTrackingGoal, weight ``states_global_tracking_weight`` = 1, reference a
  quintic GCVSplineSet of the radians table) plus ``control_effort``
  (MocoControlGoal, weight 0.001, all controls). Solver: Hermite-Simpson, explicit
  multibody dynamics, interpolated midpoint controls (the solver default),
  tolerances 1e-2/1e-2, forward differences, guess from the bounds. It writes
  ``<name>_tracked_states.sto`` in the working directory (here: ``folder``).

Names follow ``tests/_moco.py``: states ``<path>/value``, ``/speed``,
``/forceset/<muscle>/activation``; controls by actuator path.

Timings on a 2-core machine (``benchmarks/notes_moco_gait.md``): MocoInverse ~5 s in all
(12 IPOPT iterations, objective 1085.70); MocoTrack ~50 s at its default tolerance 1e-2
(32 iterations, objective 0.01140) and ~310 s at 1e-4 (118 iterations, objective 0.00553:
the 1e-2 solution is far from the optimum). OpenSim's Python bindings must be installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
import time as _time
from pathlib import Path

import numpy as np

try:  # as pytest imports the tests' helpers (tests/ on sys.path)
    import _moco
except ImportError:  # imported as tests._moco_gait
    from tests import _moco

from simjax.models import pipeline_path as _pipeline_path  # noqa: E402

#: The Gait10dof18musc data: the pipeline shipped with simjax, and OpenSim's IK result
#: of its walking trial (the pipeline's OutputReference, copied into tests/data)
GAIT_DIR = Path(os.environ.get("SIMJAX_GAIT10DOF_DIR", _pipeline_path("Gait10dof18musc")))
MODEL_PATH = GAIT_DIR / "subject01.osim"
GRF_XML_PATH = GAIT_DIR / "ExperimentalData" / "subject01_walk_grf.xml"
IK_MOT_PATH = Path(__file__).parent / "data" / "pipelines" / "Gait10dof18musc" / "subject01_walk_IK.mot"
#: ``TabOpLowPassFilter`` cutoff (Hz)
CUTOFF_HZ = 6.0
#: ``ModOpScaleActiveFiberForceCurveWidthDGF`` and ``ModOpAddReserves`` arguments
ACTIVE_FORCE_WIDTH_SCALE = 1.5
RESERVE_OPTIMAL_FORCE = 1.0


def _opensim():
    return _moco._opensim()


def gait_available() -> bool:
    """Whether the walking data files are where this module expects them."""
    return MODEL_PATH.exists() and GRF_XML_PATH.exists() and IK_MOT_PATH.exists()


# ----------------------------------------------------------------------------- inputs


def gait_model_processor(*, external_loads: bool = True):
    """The ``ModelProcessor`` both problems use, operators in exampleMocoInverse.py's
    order: external loads, rigid tendons, DeGrooteFregly2016 muscles, no passive
    fiber force, active force-length curve 1.5x wider, reserves (optimal force 1).
    ``external_loads=False`` leaves out the first (the rest is unchanged: same
    muscles, same reserve names)."""
    osim = _opensim()
    mp = osim.ModelProcessor(str(MODEL_PATH))
    if external_loads:
        mp.append(osim.ModOpAddExternalLoads(str(GRF_XML_PATH)))
    mp.append(osim.ModOpIgnoreTendonCompliance())
    mp.append(osim.ModOpReplaceMusclesWithDeGrooteFregly2016())
    mp.append(osim.ModOpIgnorePassiveFiberForcesDGF())
    mp.append(osim.ModOpScaleActiveFiberForceCurveWidthDGF(ACTIVE_FORCE_WIDTH_SCALE))
    mp.append(osim.ModOpAddReserves(RESERVE_OPTIMAL_FORCE))
    return mp


def kinematics_processor(cutoff: float = CUTOFF_HZ, *, absolute_state_names: bool = False):
    """``TableProcessor(IK .mot) | TabOpLowPassFilter(cutoff)`` (``cutoff=None``: no
    filter), then ``TabOpUseAbsoluteStateNames`` if asked (MocoTrack needs it)."""
    osim = _opensim()
    tp = osim.TableProcessor(str(IK_MOT_PATH))
    if cutoff is not None:
        tp.append(osim.TabOpLowPassFilter(float(cutoff)))
    if absolute_state_names:
        tp.append(osim.TabOpUseAbsoluteStateNames())
    return tp


def table_arrays(table) -> dict:
    """An OpenSim ``TimeSeriesTable`` as numpy: ``time``, ``columns`` (``{label:
    array}``), ``labels`` (in order), ``in_degrees`` (its ``inDegrees`` header; None
    if absent)."""
    labels = list(table.getColumnLabels())
    t = np.asarray(table.getIndependentColumn(), float).copy()
    mat = np.asarray(table.getMatrix().to_numpy(), float).reshape(len(t), len(labels))
    in_deg = None
    if table.hasTableMetaDataKey("inDegrees"):
        in_deg = table.getTableMetaDataString("inDegrees").strip().lower() == "yes"
    return {
        "time": t,
        "columns": {n: mat[:, i].copy() for i, n in enumerate(labels)},
        "labels": labels,
        "in_degrees": in_deg,
    }


def filtered_kinematics(cutoff: float = CUTOFF_HZ) -> dict:
    """OpenSim's ``TableProcessor(IK .mot) | TabOpLowPassFilter(cutoff)`` output, as
    ``table_arrays`` (bare coordinate names, degrees for rotational columns, the
    resampled times: see the module docstring)."""
    return table_arrays(kinematics_processor(cutoff).process())


def processed_model(folder, name: str = "subject01_moco_gait.osim", *, external_loads: bool = True):
    """Process ``gait_model_processor(external_loads=...)``, write it as
    ``folder/name`` and return ``(path, model)`` (the model initialised). With
    external loads, the ExternalLoads component is written inside the model (simjax's
    ``load_osim`` refuses it unless ``strict=False``, which skips it); its
    ``datafile`` is set to the absolute path of the GRF ``.mot`` so that OpenSim
    loads the written file from any folder."""
    osim = _opensim()
    model = gait_model_processor(external_loads=external_loads).process()
    model.initSystem()
    for comp in model.getComponentsList():
        if comp.getConcreteClassName() == "ExternalLoads":
            el = osim.ExternalLoads.safeDownCast(comp)
            datafile = el.getDataFileName()
            if datafile and not os.path.isabs(datafile):
                el.setDataFileName(str((GRF_XML_PATH.parent / datafile).resolve()))
    model.finalizeConnections()
    path = Path(folder) / name
    model.printToXML(str(path))
    return str(path), model


def processed_models(folder) -> dict:
    """Write both processed models in ``folder`` (``processed_model``): ``{"model_path":
    with the ExternalLoads component (the very model Moco solves),
    "model_path_without_external_loads": the same edits without it (loads strictly
    in simjax; add ``external_loads_path`` with simjax's own tools),
    "external_loads_path": the GRF .xml}``."""
    return {
        "model_path": processed_model(folder)[0],
        "model_path_without_external_loads": processed_model(
            folder, "subject01_moco_gait_no_external_loads.osim", external_loads=False
        )[0],
        "external_loads_path": str(GRF_XML_PATH),
    }


# ----------------------------------------------------------------------------- problem readback


def _bounds(b):
    return (float(b.getLower()), float(b.getUpper()))


def problem_description(study) -> dict:
    """What the study's MocoProblem holds, read back through a ``MocoProblemRep``:
    ``state_bounds``/``control_bounds`` (``{name: {"bounds", "initial", "final"}}``,
    each a (lower, upper) pair; an unset initial/final bound is (-inf, inf) or
    None), ``goals`` (``[{name, class, mode, weight, ...}]``, costs first, then
    endpoint constraints), ``time_initial_bounds``/``time_final_bounds``,
    ``prescribed_kinematics`` and ``reserves`` (``{actuator path: {"coordinate",
    "optimal_force", "min_control", "max_control"}}``, every CoordinateActuator)."""
    osim = _opensim()
    rep = study.getProblem().createRep()
    model = rep.getModelBase()

    def info_dict(info):
        out = {"bounds": _bounds(info.getBounds())}
        for key, getter in (("initial", "getInitialBounds"), ("final", "getFinalBounds")):
            b = getattr(info, getter)()
            out[key] = _bounds(b) if b.isSet() else None
        return out

    states = {n: info_dict(rep.getStateInfo(n)) for n in rep.createStateInfoNames()}
    controls = {n: info_dict(rep.getControlInfo(n)) for n in rep.createControlInfoNames()}
    goals = []
    for i in range(rep.getNumCosts()):
        goals.append(_goal_info(rep.getCostByIndex(i)))
    for i in range(rep.getNumEndpointConstraints()):
        goals.append(_goal_info(rep.getEndpointConstraintByIndex(i)))
    reserves = {}
    for f in model.getForceSet():
        if f.getConcreteClassName() == "CoordinateActuator":
            ca = osim.CoordinateActuator.safeDownCast(f)
            reserves[ca.getAbsolutePathString()] = {
                "coordinate": ca.getCoordinate().getAbsolutePathString(),
                "optimal_force": float(ca.getOptimalForce()),
                "min_control": float(ca.getMinControl()),
                "max_control": float(ca.getMaxControl()),
            }
    muscles = {}
    for f in model.getForceSet():
        if f.getConcreteClassName() == "DeGrooteFregly2016Muscle":
            m = osim.DeGrooteFregly2016Muscle.safeDownCast(f)
            muscles[m.getAbsolutePathString()] = {
                "ignore_tendon_compliance": bool(m.get_ignore_tendon_compliance()),
                "ignore_passive_fiber_force": bool(m.get_ignore_passive_fiber_force()),
                "active_force_width_scale": float(m.get_active_force_width_scale()),
                "max_isometric_force": float(m.get_max_isometric_force()),
                "min_control": float(m.getMinControl()),
                "max_control": float(m.getMaxControl()),
                "activation_time_constant": float(m.get_activation_time_constant()),
                "deactivation_time_constant": float(m.get_deactivation_time_constant()),
            }
    return {
        "state_bounds": states,
        "control_bounds": controls,
        "goals": goals,
        "time_initial_bounds": _bounds(rep.getTimeInitialBounds()),
        "time_final_bounds": _bounds(rep.getTimeFinalBounds()),
        "prescribed_kinematics": bool(rep.isPrescribedKinematics()),
        "reserves": reserves,
        "muscles": muscles,
        "coordinates": [c.getAbsolutePathString() for c in model.getCoordinateSet()],
    }


def _goal_info(goal) -> dict:
    """A MocoGoal's name, class, mode, weight, the divide_by_* flags and, read from
    its XML, every weight set it holds (MocoControlGoal: ``control_weights``,
    ``control_weights_pattern`` and ``exponent``; MocoStateTrackingGoal:
    ``state_weights``, ``scale_weights_with_range``, ``allow_unused_references``),
    as ``{set name: {name or pattern: weight}}`` and plain values."""
    out = {
        "name": goal.getName(),
        "class": goal.getConcreteClassName(),
        "mode": goal.getModeAsString(),
        "weight": float(goal.getWeight()),
        "divide_by_displacement": bool(goal.getDivideByDisplacement()),
        "divide_by_duration": bool(goal.getDivideByDuration()),
        "divide_by_mass": bool(goal.getDivideByMass()),
    }
    if out["class"] == "MocoControlGoal":
        out["exponent"] = int(_opensim().MocoControlGoal.safeDownCast(goal).getExponent())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "goal.xml")
        goal.printToXML(path)
        root = ET.parse(path).getroot()
    node = root.find(out["class"]) if root.tag == "OpenSimDocument" else root
    if node is not None:
        for child in node:
            if child.tag == "MocoWeightSet":  # a weight-set property: the element is named by the property
                out[child.get("name")] = {
                    w.get("name"): float(w.findtext("weight", "1")) for w in child.findall("./objects/MocoWeight")
                }
            elif child.tag in ("scale_weights_with_range", "allow_unused_references", "pattern"):
                out[child.tag] = (child.text or "").strip()
    return out


_EXTRA_SETTINGS = (
    "implicit_auxiliary_derivatives_weight",
    "optim_ipopt_print_level",
    "verbosity",
    "output_interval",
    "lagrange_multiplier_weight",
)


def solver_settings(study) -> dict:
    """``_moco.solver_settings`` plus ``implicit_auxiliary_derivatives_weight``,
    ``parallel`` (None when unset: Moco then uses all hardware threads or
    ``OPENSIM_MOCO_PARALLEL``), the guess's kind, and a few more."""
    osim = _opensim()
    out = _moco.solver_settings(study)
    solver = osim.MocoCasADiSolver.safeDownCast(study.updSolver())
    for key in _EXTRA_SETTINGS:
        with contextlib.suppress(Exception):
            value = getattr(solver, f"get_{key}")()
            out[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    try:
        out["parallel"] = int(solver.get_parallel())
    except Exception:
        out["parallel"] = None
    out["OPENSIM_MOCO_PARALLEL"] = os.environ.get("OPENSIM_MOCO_PARALLEL")
    with contextlib.suppress(Exception):
        out["guess_file"] = solver.get_guess_file()
    return out


# ----------------------------------------------------------------------------- solving

_IPOPT_COUNTS = {
    "num_variables": r"Total number of variables\.*:\s*(\d+)",
    "num_equality_constraints": r"Total number of equality constraints\.*:\s*(\d+)",
    "num_inequality_constraints": r"Total number of inequality constraints\.*:\s*(\d+)",
    "nnz_jacobian_equality": r"Number of nonzeros in equality constraint Jacobian\.*:\s*(\d+)",
    "nnz_jacobian_inequality": r"Number of nonzeros in inequality constraint Jacobian\.*:\s*(\d+)",
    "nnz_hessian": r"Number of nonzeros in Lagrangian Hessian\.*:\s*(\d+)",
    "variables_with_only_lower_bounds": r"variables with only lower bounds:\s*(\d+)",
    "variables_with_lower_and_upper_bounds": r"variables with lower and upper bounds:\s*(\d+)",
    "variables_with_only_upper_bounds": r"variables with only upper bounds:\s*(\d+)",
}


def parse_ipopt_log(text: str) -> dict:
    """IPOPT's problem size and a few final figures from its printed log (print
    level 5): ``num_variables``, ``num_equality_constraints``,
    ``num_inequality_constraints``, the Jacobian/Hessian nonzeros, bound counts,
    ``ipopt_iterations``, ``ipopt_exit`` and (when CasADi prints its timing table)
    nothing more; missing entries are left out."""
    out = {}
    for key, pat in _IPOPT_COUNTS.items():
        m = re.search(pat, text)
        if m:
            out[key] = int(m.group(1))
    m = re.search(r"Number of Iterations\.*:\s*(\d+)", text)
    if m:
        out["ipopt_iterations"] = int(m.group(1))
    m = re.search(r"EXIT:\s*(.+)", text)
    if m:
        out["ipopt_exit"] = m.group(1).strip()
    for key, pat in (
        ("objective_scaled", r"Objective\.*:\s*(\S+)\s+(\S+)"),
        ("constraint_violation", r"Constraint violation\.*:\s*(\S+)\s+(\S+)"),
        ("dual_infeasibility", r"Dual infeasibility\.*:\s*(\S+)\s+(\S+)"),
        ("complementarity", r"Complementarity\.*:\s*(\S+)\s+(\S+)"),
    ):
        m = re.search(pat, text)
        if m:
            out[key] = (float(m.group(1)), float(m.group(2)))  # (scaled, unscaled)
    return out


@contextlib.contextmanager
def _c_output_to(path, *, echo: bool):
    """Send file descriptors 1 and 2 to ``path`` (IPOPT's log and CasADi's timing
    table are printed from C); print the file afterwards when ``echo``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)
        if echo:
            print(Path(path).read_text(errors="replace"))


def _apply_overrides(tool, overrides: dict) -> tuple[dict, dict]:
    """Split ``overrides`` into the tool's properties (``set_<key>`` exists on the
    tool) and the solver's (applied later); returns ``(tool_part, solver_part)``."""
    tool_part, solver_part = {}, {}
    for key, value in overrides.items():
        if hasattr(tool, f"set_{key}"):
            getattr(tool, f"set_{key}")(value)
            tool_part[key] = value
        else:
            solver_part[key] = value
    return tool_part, solver_part


def _solve_study(study, folder, stem, solver_part, quiet, bounds_guess: bool = False) -> dict:
    """Apply ``solver_part`` (``set_<key>`` on the MocoCasADiSolver; an unknown key
    raises), solve with IPOPT printing at level 5 into ``folder/<stem>_ipopt.log``
    (Moco's Logger stays off), with ``folder`` as the working directory, and return ``_moco.solve``'s keys plus ``nlp``
    (``parse_ipopt_log``) and ``ipopt_log``. ``bounds_guess``: the tool guesses from the
    bounds, a guess made again where ``multibody_dynamics_mode`` is overridden."""
    osim = _opensim()
    solver = osim.MocoCasADiSolver.safeDownCast(study.updSolver())
    for key, value in solver_part.items():
        if not hasattr(solver, f"set_{key}"):
            raise TypeError(f"unknown override {key!r}: neither the tool nor MocoCasADiSolver has set_{key}")
        getattr(solver, f"set_{key}")(value)
    if bounds_guess and "multibody_dynamics_mode" in solver_part:
        # the tool's guess from the bounds was made before the change: made again, with
        # (or without) the accelerations
        solver.resetProblem(study.getProblem())
        solver.setGuess("bounds")
    solver.set_verbosity(2)  # IPOPT prints (Moco's own log goes to the Logger, which is off)
    solver.set_optim_ipopt_print_level(5)
    settings = solver_settings(study)
    folder = Path(folder).resolve()
    log_path = folder / f"{stem}_ipopt.log"
    # in ``folder``: Moco creates (and, unless killed, removes) a
    # ``delete_this_to_stop_optimization_*.txt`` file in the working directory while it solves
    with _moco.cwd(folder), _c_output_to(log_path, echo=not quiet):
        t0 = _time.perf_counter()
        sol = study.solve()
        seconds = _time.perf_counter() - t0
    success = bool(sol.success())
    status = str(sol.getStatus())
    if sol.isSealed():
        sol.unseal()
    out = _moco.trajectory_arrays(sol)
    n = len(out["time"])
    out["mesh_indices"] = np.arange(0, n, 2) if settings["transcription_scheme"] == "hermite-simpson" else np.arange(n)
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
    solution_path = Path(folder) / f"{stem}_solution.sto"
    sol.write(str(solution_path))
    out["solution_path"] = str(solution_path)
    text = log_path.read_text(errors="replace")
    out["nlp"] = parse_ipopt_log(text)
    out["ipopt_log"] = str(log_path)
    return out


def _position_motion_arrays(study, times) -> dict:
    """The PositionMotion that MocoInverse added (``/position_motion``) evaluated at
    ``times``: ``{"q": {coordinate path: rad or m}, "u": {...}, "udot": {...}}`` (the
    quintic GCVSplines and their first and second derivatives: exactly what the
    multibody system was given)."""
    osim = _opensim()
    rep = study.getProblem().createRep()
    model = rep.getModelBase()
    pm = osim.PositionMotion.safeDownCast(model.getComponent("/position_motion"))
    fs = pm.get_functions()
    q, u, udot = {}, {}, {}
    arg = osim.Vector(1, 0.0)
    d1 = osim.StdVectorInt([0])
    d2 = osim.StdVectorInt([0, 0])
    for i in range(fs.getSize()):
        f = fs.get(i)
        name = f.getName()
        vals = np.empty((3, len(times)))
        for k, t in enumerate(times):
            arg.set(0, float(t))
            vals[0, k] = f.calcValue(arg)
            vals[1, k] = f.calcDerivative(d1, arg)
            vals[2, k] = f.calcDerivative(d2, arg)
        q[name], u[name], udot[name] = vals
    return {"q": q, "u": u, "udot": udot}


def moco_inverse_gait(folder, mesh_interval=0.02, time=(0.6, 1.4), *, quiet: bool = True, **overrides) -> dict:
    """OpenSim's MocoInverse on the walking trial (model edits: ``gait_model_processor``;
    kinematics: ``kinematics_processor()``, i.e. the IK ``.mot`` low-pass filtered at
    6 Hz), ``initial_time, final_time = time``, ``mesh_interval``, everything else
    MocoInverse's defaults (see the module docstring). ``overrides``: a MocoInverse
    property by name when the tool has ``set_<key>`` (``convergence_tolerance``,
    ``max_iterations``, ``minimize_sum_squared_activations``, ``reserves_weight``,
    ``kinematics_allow_extra_columns``, ...), otherwise a MocoCasADiSolver property
    set on the study MocoInverse built (``optim_hessian_approximation``,
    ``parallel``, ``transcription_scheme``, ...).

    Writes in ``folder``: the processed model (``subject01_moco_gait.osim``, see
    ``processed_model``), ``moco_inverse_gait_solution.sto`` (the MocoSolution
    without the kinematics), ``moco_inverse_gait_ipopt.log``.

    Returns ``_moco.solve``'s keys (``time`` (the 2N+1 Hermite-Simpson grid),
    ``states`` (activations), ``controls`` (excitations and reserves), ``objective``,
    ``objective_terms``, ``iterations``, ``status``, ``success``, ``solve_seconds``
    (wall time of ``study.solve()``), ``solver_seconds``, ``settings``, ...) plus:

    - ``initialize_seconds``: ``MocoInverse.initialize()`` (model processing,
      filtering, assembly, splines);
    - ``nlp``: IPOPT's problem size (``num_variables``, ``num_equality_constraints``,
      ...; ``parse_ipopt_log``);
    - ``problem``: ``problem_description`` (bounds, goals with their modes and
      weights, reserves, muscles) plus ``mesh_interval``, ``num_mesh_intervals``,
      ``time``, the input paths and the tool's properties;
    - ``kinematics``: ``MocoInverse.initializeKinematics()`` as ``table_arrays``
      (the PositionMotion at the filtered table's times; columns
      ``<coordinate path>/value`` and ``/speed``, radians and m; no inDegrees header);
    - ``prescribed``: the PositionMotion at ``time`` (``{"q", "u", "udot"}``, each
      ``{coordinate path: array}``, radians): the exact q(t) of the solved problem;
    - ``filtered_table``: ``filtered_kinematics()`` (degrees, bare names);
    - ``model_path``, ``model_path_without_external_loads``, ``external_loads_path``:
      ``processed_models``.
    """
    osim = _opensim()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    models = processed_models(folder)
    inverse = osim.MocoInverse()
    inverse.setName("moco_inverse_gait")
    inverse.setModel(gait_model_processor())
    inverse.setKinematics(kinematics_processor())
    inverse.set_initial_time(float(time[0]))
    inverse.set_final_time(float(time[1]))
    inverse.set_mesh_interval(float(mesh_interval))
    tool_part, solver_part = _apply_overrides(inverse, overrides)
    t0 = _time.perf_counter()
    study = inverse.initialize()
    init_seconds = _time.perf_counter() - t0
    kin = table_arrays(inverse.initializeKinematics())
    description = problem_description(study)
    out = _solve_study(study, folder, "moco_inverse_gait", solver_part, quiet)
    out["initialize_seconds"] = init_seconds
    out["kinematics"] = kin
    out["prescribed"] = _position_motion_arrays(study, out["time"])
    out["filtered_table"] = filtered_kinematics()
    out.update(models)
    description.update(
        {
            "tool": "MocoInverse",
            "mesh_interval": float(mesh_interval),
            "time": tuple(map(float, time)),
            "num_mesh_intervals": out["settings"]["num_mesh_intervals"],
            "model_source": str(MODEL_PATH),
            "external_loads": str(GRF_XML_PATH),
            "kinematics_source": str(IK_MOT_PATH),
            "cutoff_hz": CUTOFF_HZ,
            "tool_properties": {
                k: _tool_property(inverse, k)
                for k in (
                    "kinematics_allow_extra_columns",
                    "minimize_sum_squared_activations",
                    "convergence_tolerance",
                    "constraint_tolerance",
                    "reserves_weight",
                    "clip_time_range",
                    "max_iterations",
                )
            },
            "overrides": dict(overrides),
        }
    )
    out["problem"] = description
    return out


def _tool_property(tool, key):
    try:
        value = getattr(tool, f"get_{key}")()
    except Exception:  # an empty optional property
        return None
    return value if isinstance(value, (bool, int, float, str)) else str(value)


def moco_track_gait(folder, mesh_interval=0.02, time=(0.6, 1.4), *, quiet: bool = True, **overrides) -> dict:
    """OpenSim's MocoTrack of the same motion with the same model edits: model
    ``gait_model_processor()``, ``states_reference`` =
    ``kinematics_processor(absolute_state_names=True)`` (the 6 Hz filtered IK
    coordinates, values only), ``initial_time, final_time = time``,
    ``mesh_interval``; everything else MocoTrack's defaults (tracking weight 1 on
    each coordinate value, control effort weight 0.001, explicit dynamics,
    tolerances 1e-2, guess from the bounds; see the module docstring).
    ``overrides``: MocoTrack properties by name (``states_global_tracking_weight``,
    ``track_reference_position_derivatives``, ``control_effort_weight``,
    ``apply_tracked_states_to_guess``, ...), otherwise MocoCasADiSolver properties
    (``optim_convergence_tolerance``, ``optim_constraint_tolerance``,
    ``multibody_dynamics_mode``, ...).

    Writes in ``folder``: the processed model, ``moco_track_gait_tracked_states.sto``
    (MocoTrack's own copy of the reference, radians), the solution and the IPOPT log.

    Returns the keys of ``moco_inverse_gait`` except ``prescribed``/``kinematics``,
    plus ``reference`` (the tracked table as ``table_arrays``, radians) and
    ``reference_on_grid`` (``{state name: values at time}``: the quintic
    GCVSplines MocoStateTrackingGoal evaluates).
    """
    osim = _opensim()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    models = processed_models(folder)
    track = osim.MocoTrack()
    track.setName("moco_track_gait")
    track.setModel(gait_model_processor())
    track.setStatesReference(kinematics_processor(absolute_state_names=True))
    track.set_initial_time(float(time[0]))
    track.set_final_time(float(time[1]))
    track.set_mesh_interval(float(mesh_interval))
    tool_part, solver_part = _apply_overrides(track, overrides)
    with _moco.cwd(folder):  # MocoTrack writes <name>_tracked_states.sto in the working directory
        t0 = _time.perf_counter()
        study = track.initialize()
        init_seconds = _time.perf_counter() - t0
    description = problem_description(study)
    # (MocoTrack guesses from the bounds unless given a guess file)
    out = _solve_study(
        study, folder, "moco_track_gait", solver_part, quiet, bounds_guess=not overrides.get("guess_file")
    )
    out["initialize_seconds"] = init_seconds
    ref_table = osim.TimeSeriesTable(str(folder / "moco_track_gait_tracked_states.sto"))
    out["reference"] = table_arrays(ref_table)
    splines = osim.GCVSplineSet(ref_table, ref_table.getColumnLabels(), 5, 0.0)
    arg = osim.Vector(1, 0.0)
    ref_grid = {}
    for i in range(splines.getSize()):
        f = splines.get(i)
        vals = np.empty(len(out["time"]))
        for k, t in enumerate(out["time"]):
            arg.set(0, float(t))
            vals[k] = f.calcValue(arg)
        ref_grid[f.getName()] = vals
    out["reference_on_grid"] = ref_grid
    out["filtered_table"] = filtered_kinematics()
    out.update(models)
    description.update(
        {
            "tool": "MocoTrack",
            "mesh_interval": float(mesh_interval),
            "time": tuple(map(float, time)),
            "num_mesh_intervals": out["settings"]["num_mesh_intervals"],
            "model_source": str(MODEL_PATH),
            "external_loads": str(GRF_XML_PATH),
            "kinematics_source": str(IK_MOT_PATH),
            "cutoff_hz": CUTOFF_HZ,
            "tool_properties": {
                k: _tool_property(track, k)
                for k in (
                    "states_global_tracking_weight",
                    "scale_state_weights_with_range",
                    "track_reference_position_derivatives",
                    "allow_unused_references",
                    "apply_tracked_states_to_guess",
                    "minimize_control_effort",
                    "control_effort_weight",
                    "clip_time_range",
                )
            },
            "overrides": dict(overrides),
        }
    )
    out["problem"] = description
    return out


def tracking_error_rad(result: dict) -> dict:
    """Per coordinate, the max |q - reference| over ``result["time"]`` of a
    ``moco_track_gait`` result (rad or m)."""
    return {
        n: float(np.max(np.abs(result["states"][n] - ref)))
        for n, ref in result["reference_on_grid"].items()
        if n in result["states"]
    }
