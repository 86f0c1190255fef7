"""OpenSim's AnalyzeTool: analyses run over the frames of a motion.

``analysis_frames(system, coordinates_table, ...)`` builds the states OpenSim's
AnalyzeTool visits, step by step as ``AnalyzeTool::loadStatesFromFile``:

1. the coordinates are padded and low-pass filtered when a cut-off is given, then
   converted to radians (``motion.filter_coordinates``);
2. ``SimbodyEngine::formCompleteStorages``: every coordinate of the model (those the
   file lacks keep their default value); the speeds are the first derivatives of a
   quintic ``GCVSpline`` of each coordinate, at the (padded) times of the data; the
   coordinates are the (filtered) data themselves;
3. the frames are the rows from ``initial_time`` to ``final_time``
   (``Storage::findIndex``: the last row at or before each); the other state
   variables (muscle activations and fiber lengths) keep their default values
   (``solve_for_equilibrium_for_auxiliary_states`` is not supported).

Every analysis is a pure function of the system and the batch of frame states (one
compiled program for all frames), registered under its setup tag
(``register_analysis``): ``MuscleAnalysis`` (``muscle_analysis``),
``BodyKinematics`` (``body_kinematics``) and ``PointKinematics``
(``point_kinematics``) defined here, ``StaticOptimization`` defined in
``optimization`` and ``JointReaction`` (``joint_reaction``) in ``reactions``, all
registered here. The frames and the job an analysis gets are in ``_analyses``, below
all of them. The setup runner (``AnalyzeTool``) reads the model, appends the actuators
of ``force_set_files`` to its force set (as OpenSim with ``replace_force_set`` false;
replaced with true), adds the external loads, runs each analysis of the
``AnalysisSet`` and writes OpenSim's files,
``<tool name>_<analysis name>_<quantity>.sto``, in ``results_directory``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..analysis.moment_arms import moment_arms as _moment_arms
from ..compiling import jit
from ..forward import Context
from ..io.osim._xml import Node
from ..io.tables import TimeSeriesTable, write_table
from ..mechanics.frames import Body
from ..muscles.muscle import Muscle
from . import motion
from ._analyses import AnalysisJob, Frames, _text, analysis_error, analysis_frames, find_frame, zero_controls
from .external_loads import read_external_loads
from .optimization import _analysis as _static_optimization
from .reactions import _analysis as _joint_reaction
from .setup import Setup, SetupError, register_tool

__all__ = [
    "analyze",
    "analysis_frames",
    "Frames",
    "register_analysis",
    "ANALYSES",
    "muscle_analysis",
    "body_kinematics",
    "point_kinematics",
    "load_model_with_force_sets",
    "zero_controls",
    "find_frame",
    "analysis_error",
]


# -- registry ---------------------------------------------------------------------------------

#: analysis element tag -> ``fn(job, node) -> {quantity: TimeSeriesTable}``
ANALYSES: dict[str, Callable] = {}


def register_analysis(tag: str, fn: Callable) -> None:
    """Teach the AnalyzeTool runner an analysis: ``fn(job, node)`` gets the ``AnalysisJob``
    (system, frames, setup) and the analysis element, and returns
    ``{quantity: TimeSeriesTable}``, each written to
    ``<tool name>_<analysis name>_<quantity>.sto``."""
    ANALYSES[tag] = fn


# -- MuscleAnalysis -----------------------------------------------------------------------------

#: OpenSim's MuscleAnalysis file quantity -> simjax muscle output
_MUSCLE_QUANTITIES = {
    "Length": "length",
    "FiberLength": "fiber_length",
    "NormalizedFiberLength": "normalized_fiber_length",
    "TendonLength": "tendon_length",
    "PennationAngle": "pennation_angle",
    "FiberVelocity": "fiber_velocity",
    "NormFiberVelocity": "normalized_fiber_velocity",
    "PennationAngularVelocity": "pennation_angular_velocity",
    "TendonForce": "tendon_force",
    "FiberForce": "fiber_force",
    "ActiveFiberForce": "active_fiber_force",
    "PassiveFiberForce": "passive_fiber_force",
    "FiberActivePower": "fiber_active_power",
    "FiberPassivePower": "fiber_passive_power",
    "TendonPower": "tendon_power",
}
_EXTRA = ("cos_pennation_angle", "lengthening_speed")


@jit
def _muscle_values(system, states, paths, names, coordinates):
    def one(state):
        ctx = Context(system, state)  # one pass of the stages for every quantity
        out = {n: ctx.group_outputs(paths, n) for n in names}
        if coordinates:
            out["moment_arms"] = _moment_arms(system, state, paths, coordinates, searches=ctx.searches())
        return out

    return jax.vmap(one)(states)


def muscle_analysis(system, states, muscles=None, coordinates=None) -> dict:
    """OpenSim's MuscleAnalysis at a batch of states.

    **Arguments:** ``system``; ``states``: a batched ``State`` (leading axis ``n``);
    ``muscles``: muscle paths (default: every muscle); ``coordinates``: coordinate
    paths for the moment arms and moments (default: all; ``()`` for none).

    **Returns:** ``{quantity: (n, n_muscles)}`` with OpenSim's quantity names
    (``Length``, ``FiberLength``, ``TendonLength``, ``TendonForce``,
    ``ActiveFiberForce``, ``ActiveFiberForceAlongTendon``, ..., m, m/s, rad, N, W),
    plus ``MomentArm_<coordinate>`` (m, or dimensionless) and ``Moment_<coordinate>``
    (N m, or N: moment arm times tendon force).
    """
    model = system.model
    muscles = tuple(model.paths(Muscle) if muscles is None else muscles)
    coordinates = tuple(system.coordinate_paths if coordinates is None else coordinates)
    v = _muscle_values(system, states, muscles, tuple(_MUSCLE_QUANTITIES.values()) + _EXTRA, coordinates)
    res = {k: v[n] for k, n in _MUSCLE_QUANTITIES.items()}
    cos = v["cos_pennation_angle"]
    res["ActiveFiberForceAlongTendon"] = v["active_fiber_force"] * cos
    res["PassiveFiberForceAlongTendon"] = v["passive_fiber_force"] * cos
    res["MuscleActuatorPower"] = -v["tendon_force"] * v["lengthening_speed"]
    for k, c in enumerate(coordinates):
        name = c.rsplit("/", 1)[-1]
        res[f"MomentArm_{name}"] = v["moment_arms"][:, :, k]
        res[f"Moment_{name}"] = v["moment_arms"][:, :, k] * v["tendon_force"]
    return res


def _muscle_analysis(job: AnalysisJob, node) -> dict:
    system = job.system
    model = system.model
    all_muscles = model.paths(Muscle)
    by_name = {p.rsplit("/", 1)[-1]: p for p in all_muscles}
    words = _text(node, "muscle_list", "all").split()
    if any(w.lower() == "all" for w in words):
        muscles = all_muscles
    else:
        missing = [w for w in words if w not in by_name]
        if missing:
            raise SetupError(
                f"MuscleAnalysis {node.name!r}: <muscle_list> names {missing}, not muscles of the "
                f"model (muscles: {sorted(by_name)})"
            )
        muscles = [by_name[w] for w in words]
    coord_by_name = {p.rsplit("/", 1)[-1]: p for p in system.coordinate_paths}
    cwords = _text(node, "moment_arm_coordinate_list", "all").split()
    if any(w.lower() == "all" for w in cwords):
        coords = list(system.coordinate_paths)
    else:
        coords = [coord_by_name[w] for w in cwords if w in coord_by_name]
    compute_moments = _text(node, "compute_moments", "true").lower() == "true"
    values = muscle_analysis(system, job.frames.states, muscles, coords if compute_moments else ())
    labels = [p.rsplit("/", 1)[-1] for p in muscles]
    t = job.frames.times
    return {k: TimeSeriesTable(t, np.asarray(v), labels, {"header": k, "inDegrees": "no"}) for k, v in values.items()}


register_analysis("MuscleAnalysis", _muscle_analysis)


# -- BodyKinematics and PointKinematics ----------------------------------------------------------


def _body_fixed_xyz(R):
    """Body-fixed X-Y-Z angles (rad) of rotation matrices ``(..., 3, 3)``
    (``R = Rx(a) Ry(b) Rz(c)``, Simbody's ``convertRotationToBodyFixedXYZ``)."""
    b = jnp.arctan2(R[..., 0, 2], jnp.sqrt(R[..., 0, 0] ** 2 + R[..., 0, 1] ** 2))
    a = jnp.arctan2(-R[..., 1, 2], R[..., 2, 2])
    c = jnp.arctan2(-R[..., 0, 1], R[..., 0, 0])
    return jnp.stack([a, b, c], axis=-1)


@jit
def _motions(system, states, controls):
    """Per frame: the pose in Ground of every PhysicalFrame (frame-table rows:
    ``R (nf, 3, 3)``, ``p (nf, 3)``), and the spatial velocity and acceleration of
    every mobilized body (``(n_mob, 6)``, Ground, about its origin), the forward
    dynamics' at ``controls``."""
    tree = system.topology.tree
    paths = tuple(sorted(tree.frame_rows, key=tree.frame_rows.get))

    def one(state):
        ctx = Context(system, state, controls)
        R, p = ctx.frames_in_ground(paths)
        return R, p, ctx.vel.V, ctx.body_accelerations()

    return jax.vmap(one)(states)


def _stations(motions, rows, mobs, points):
    """Position, velocity and acceleration in Ground ``(n, k, 3)`` of points
    ``(k, 3)`` fixed in the frames of rows ``rows (k,)`` (on bodies ``mobs``)."""
    R, p, V, A = (np.asarray(x) for x in motions)
    r = np.einsum("nkij,kj->nki", R[:, rows], points) + p[:, rows]
    w, dw = V[:, mobs, :3], A[:, mobs, :3]
    v = V[:, mobs, 3:] + np.cross(w, r)
    a = A[:, mobs, 3:] + np.cross(dw, r) + np.cross(w, v)
    return r, v, a, w, dw, R[:, rows]


def body_kinematics(system, states, bodies=None, in_degrees: bool = True) -> dict:
    """OpenSim's BodyKinematics (``express_results_in_body_local_frame`` false) at a
    batch of states: positions and velocities of the bodies' mass centers in Ground.

    **Arguments:** ``system``; ``states``: a batched ``State``; ``bodies``: body paths
    (default: every body); ``in_degrees``: angles in degrees (OpenSim's default).

    **Returns:** ``{"pos_global": (n, 6 k + 3), "vel_global": ..., "acc_global": ...,
    "labels": [...]}``: per body its mass center ``X, Y, Z`` (m; m/s; m/s^2) and
    orientation as body-fixed X-Y-Z angles ``Ox, Oy, Oz`` (deg or rad; the angular
    velocity and acceleration in Ground, deg/s, deg/s^2 or rad), then the whole
    model's mass center. The accelerations are the forward dynamics' at the state
    with every control zero (clipped to its bounds; no controllers), all the model's
    forces applied.
    """
    model = system.model
    tree = system.topology.tree
    all_bodies = model.paths(Body)
    bodies = tuple(all_bodies if bodies is None else bodies)
    com = np.stack([np.asarray(model.find(b).mass_center, float) for b in all_bodies])
    mass = np.asarray([float(model.find(b).mass) for b in all_bodies])
    rows = np.asarray([tree.frame_rows[b] for b in all_bodies], int)
    motions = _motions(system, states, zero_controls(system))
    c, v, a, w, dw, R = _stations(motions, rows, tree.frame_mob[rows], com)
    total = np.sum(mass)
    C, Cv, Ca = (np.einsum("k,nkj->nj", mass, x) / total for x in (c, v, a))
    sel = np.asarray([all_bodies.index(b) for b in bodies], int)
    scale = 180.0 / math.pi if in_degrees else 1.0
    ang = np.asarray(_body_fixed_xyz(R[:, sel])) * scale
    n = R.shape[0]
    pos = np.concatenate([np.concatenate([c[:, sel], ang], -1).reshape(n, -1), C], -1)
    vel = np.concatenate([np.concatenate([v[:, sel], w[:, sel] * scale], -1).reshape(n, -1), Cv], -1)
    acc = np.concatenate([np.concatenate([a[:, sel], dw[:, sel] * scale], -1).reshape(n, -1), Ca], -1)
    labels = [f"{b.rsplit('/', 1)[-1]}_{s}" for b in bodies for s in ("X", "Y", "Z", "Ox", "Oy", "Oz")]
    labels += ["center_of_mass_X", "center_of_mass_Y", "center_of_mass_Z"]
    return {"pos_global": pos, "vel_global": vel, "acc_global": acc, "labels": labels}


def _body_kinematics_analysis(job: AnalysisJob, node) -> dict:
    system = job.system
    model = system.model
    if _text(node, "express_results_in_body_local_frame", "false").lower() == "true":
        raise SetupError(f"BodyKinematics {node.name!r}: express_results_in_body_local_frame true is not supported")
    by_name = {p.rsplit("/", 1)[-1]: p for p in model.paths(Body)}
    words = _text(node, "bodies", "all").split()
    bodies = None if any(w.lower() == "all" for w in words) else [by_name[w] for w in words if w in by_name]
    deg = _text(node, "in_degrees", "true").lower() == "true"
    res = body_kinematics(system, job.frames.states, bodies, deg)
    t = job.frames.times
    meta = {"inDegrees": "yes" if deg else "no"}
    return {
        "pos_global": TimeSeriesTable(t, res["pos_global"], res["labels"], dict(meta, header="Positions")),
        "vel_global": TimeSeriesTable(t, res["vel_global"], res["labels"], dict(meta, header="Velocities")),
        "acc_global": TimeSeriesTable(t, res["acc_global"], res["labels"], dict(meta, header="Accelerations")),
    }


register_analysis("BodyKinematics", _body_kinematics_analysis)


def point_kinematics(system, states, body: str, point, relative_to: str | None = None) -> dict:
    """OpenSim's PointKinematics at a batch of states: the position, velocity and
    acceleration of a point fixed in a frame.

    **Arguments:** ``system``; ``states``: a batched ``State`` (leading axis ``n``);
    ``body``: the PhysicalFrame the point is fixed in (a path, or a body's name);
    ``point (3,)``: its location in that frame (m); ``relative_to``: a frame (path or
    body name) to express the results in, ``None`` for Ground.

    **Returns:** ``{"pos": (n, 3), "vel": (n, 3), "acc": (n, 3)}``: the point's
    location relative to ``relative_to`` (m), and its velocity (m/s) and
    acceleration (m/s^2) in Ground, expressed in ``relative_to``'s axes (as OpenSim:
    not relative velocities). The accelerations are the forward dynamics' at the
    state with every control zero (clipped to its bounds), all the model's forces
    applied.

    **Raises:** ``ValueError`` naming a frame that is not in the model.
    """
    tree = system.topology.tree
    frames = []
    for what, name in (("body", body), ("relative_to", relative_to)):
        path = None if name is None else find_frame(system, name)
        if name is not None and path is None:
            raise ValueError(f"point_kinematics: {what} {name!r} is not a PhysicalFrame of the model")
        frames.append(path)
    rows = np.asarray([tree.frame_rows[f or "/ground"] for f in frames], int)
    motions = _motions(system, states, zero_controls(system))
    r, v, a = _stations(motions, rows[:1], tree.frame_mob[rows[:1]], np.asarray(point, float).reshape(1, 3))[:3]
    r, v, a = r[:, 0], v[:, 0], a[:, 0]
    if frames[1] is not None:
        R, p = np.asarray(motions[0])[:, rows[1]], np.asarray(motions[1])[:, rows[1]]
        r = np.einsum("nji,nj->ni", R, r - p)
        v, a = (np.einsum("nji,nj->ni", R, x) for x in (v, a))
    return {"pos": r, "vel": v, "acc": a}


def _point_kinematics_analysis(job: AnalysisJob, node) -> dict:
    system = job.system
    body = _text(node, "body_name", "ground")
    if find_frame(system, body) is None:
        raise analysis_error(job, node, "body_name", body, "no PhysicalFrame of the model has this path or name")
    rel = _text(node, "relative_to_body_name", "none")
    if rel.lower() == "none":
        rel = None
    elif find_frame(system, rel) is None:
        raise analysis_error(
            job,
            node,
            "relative_to_body_name",
            rel,
            "no PhysicalFrame of the model has this path or name (or 'none' for Ground)",
        )
    text = _text(node, "point", "0 0 0")
    try:
        point = np.asarray([float(x) for x in text.split()])
    except ValueError:
        point = np.zeros(0)
    if point.shape != (3,):
        raise analysis_error(job, node, "point", text, "expected three numbers (m)")
    name = _text(node, "point_name", "NONAME")
    res = point_kinematics(system, job.frames.states, body, point, rel)
    t = job.frames.times
    # OpenSim 4.6 labels these columns state_0..2 (its point_X labels never reach the files)
    labels = ["state_0", "state_1", "state_2"]
    return {
        f"{name}_{k}": TimeSeriesTable(t, res[k], labels, {"header": header, "inDegrees": "no"})
        for k, header in (("pos", "PointPosition"), ("vel", "PointVelocity"), ("acc", "PointAcceleration"))
    }


register_analysis("PointKinematics", _point_kinematics_analysis)

# the analyses of the other modules: static optimization's and the joint reactions'
register_analysis("StaticOptimization", _static_optimization)
register_analysis("JointReaction", _joint_reaction)


# -- the tool ---------------------------------------------------------------------------------


def _upgrade(node):
    """OpenSim 3 force elements as OpenSim 4 reads them (``isDisabled`` becomes
    ``appliesForce``), in place."""
    for i, c in enumerate(node.children):
        if c.tag == "isDisabled":
            c.tag = "appliesForce"
            c.text = "false" if c.text.strip().lower() == "true" else "true"


def load_model_with_force_sets(model_path, force_set_files=(), replace_force_set: bool = False):
    """Read a model and append (or, with ``replace_force_set``, replace its forces by)
    the forces of OpenSim ``ForceSet`` files (reserve and residual actuators), as
    ``AnalyzeTool`` does.

    **Returns:** the ``Model``.

    **Raises:** ``FileNotFoundError`` naming a missing file.
    """
    from ..io.osim.reader import load_osim, loads_osim

    if not force_set_files:
        return load_osim(model_path)
    from ..io.osim._xml import parse

    with open(model_path, "rb") as fh:
        root = parse(fh.read())
    model_node = root.find("Model")
    fset = model_node.find("ForceSet") if model_node is not None else None
    if fset is None:
        raise SetupError(f"{model_path}: the model has no <ForceSet> to append to")
    objects = fset.find("objects")
    if objects is None:
        raise SetupError(f"{model_path}: the model's <ForceSet> has no <objects>")
    if replace_force_set:
        objects.children = []
    for f in force_set_files:
        if not os.path.exists(f):
            raise FileNotFoundError(f"force set file {f!r} does not exist")
        with open(f, "rb") as fh:
            other = parse(fh.read())
        node = other.find("ForceSet") if other.tag == "OpenSimDocument" else other
        more = node.find("objects") if node is not None else None
        if more is None:
            raise SetupError(f"{f}: no <ForceSet><objects> in the file")
        for c in more.children:
            _upgrade(c)
        objects.children.extend(more.children)
    # (the merged tree read as it is: messages give each node's line in its own file)
    return loads_osim(root, source=os.fspath(model_path), base_dir=os.path.dirname(os.path.abspath(model_path)))


def _loads_window(times, time_range):
    """The span of external-load data to fit: the frames' range, the motion's padding
    (half its length either side) and a second more."""
    return time_range[0] - 0.5 * (times[-1] - times[0]) - 1.0, time_range[1] + 0.5 * (times[-1] - times[0]) + 1.0


def _analysis_node(name: str, spec) -> Node:
    """An analysis element built from ``(tag, {property: value})`` (values: text,
    numbers, or sequences of them, written space-separated as in a setup file)."""
    if isinstance(spec, str):
        tag, props = spec, {}
    else:
        tag, props = spec
    if tag not in ANALYSES:
        raise ValueError(
            f"analysis {name!r}: {tag!r} is not an analysis simjax runs; supported: {', '.join(sorted(ANALYSES))}"
        )

    def text(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (list, tuple, np.ndarray)):
            return " ".join(text(x) for x in v)
        return str(v)

    return Node(tag, {"name": name}, children=[Node(k, text=text(v)) for k, v in props.items()])


def _analyze(system, table, nodes, cutoff, time_range, setup=None) -> dict:
    frames = analysis_frames(system, table, cutoff, time_range)
    job = AnalysisJob(system, frames, setup)
    out = {}
    for node in nodes:
        if _text(node, "on", "true").lower() == "false":
            continue
        for quantity, tab in ANALYSES[node.tag](job, node).items():
            out[f"{node.name}_{quantity}"] = tab
    return out


def analyze(
    system,
    coordinates_table: TimeSeriesTable,
    analyses: dict,
    *,
    external_loads=None,
    lowpass_cutoff: float | None = None,
    time_range=None,
) -> dict:
    """OpenSim's AnalyzeTool on a coordinates table: every analysis over its frames, in
    one compiled program per analysis.

    **Arguments:**

    - ``system``: the built model, with its actuators (reserves included:
      ``load_model_with_force_sets``).
    - ``coordinates_table``: coordinates by name, as read (degrees if its header says
      so); prepared as the AnalyzeTool does (``analysis_frames``).
    - ``analyses``: ``{name: (type, {property: value})}`` with OpenSim's analysis types
      and property names, e.g. ``{"SO": ("StaticOptimization", {"activation_exponent": 2}),
      "knee": ("JointReaction", {"joint_names": ["knee_r"], "express_in_frame": "child",
      "forces_file": "SO_force.sto"})}``; ``{name: type}`` for the defaults. Relative
      file names are relative to the working directory.
    - ``external_loads``: ``ExternalForce`` components (``read_external_loads``) or an
      ExternalLoads ``.xml`` path, added to the model.
    - ``lowpass_cutoff``: Hz (``None``: no filter); ``time_range``: ``(start, end)`` s
      (``None``: every row).

    **Returns:** ``{"<name>_<quantity>": TimeSeriesTable}``, the tables OpenSim writes
    to ``<tool>_<name>_<quantity>.sto`` (e.g. ``SO_activation``, ``knee_ReactionLoads``).

    **Raises:** ``ValueError`` for an unknown analysis type (listing the supported
    ones) or a time range outside the data.
    """
    nodes = [_analysis_node(name, spec) for name, spec in analyses.items()]
    times = np.asarray(coordinates_table.times)
    rng = (times[0], times[-1]) if time_range is None else tuple(time_range)
    if external_loads is not None:
        model = system.model
        if isinstance(external_loads, (str, os.PathLike)):
            external_loads = read_external_loads(external_loads, time_window=_loads_window(times, rng))
        for f in external_loads:
            model = model.add(f)
        system = model.build()
    return _analyze(system, coordinates_table, nodes, -1.0 if lowpass_cutoff is None else lowpass_cutoff, rng)


def _run(setup: Setup) -> dict:
    """Run an ``<AnalyzeTool>`` setup: every analysis of its ``AnalysisSet`` over the
    frames of its coordinates (or states) file, writing OpenSim's files.

    **Returns:** ``{"<analysis name>_<quantity>": path}`` of the files written.

    **Raises:** ``SetupError`` for an unknown analysis (listing the supported ones)
    or a bad property; ``FileNotFoundError`` naming a missing file as resolved.
    """
    model_path = setup.path("model_file", must_exist=True)
    if model_path is None:
        raise setup.error("model_file", "", "no model file given")
    analyses_node = setup.element("AnalysisSet")
    objects = analyses_node.find("objects") if analyses_node is not None else None
    items = [c for c in (objects.children if objects is not None else [])]
    for c in items:
        if c.tag not in ANALYSES:
            raise SetupError(
                f"{setup.file}: <AnalysisSet> holds <{c.tag} name={c.name!r}>, an analysis simjax "
                f"does not run; supported: {', '.join(sorted(ANALYSES))}"
            )
    if not items:
        raise setup.error("AnalysisSet", "", "no analyses have been set")
    coords_path = setup.path("coordinates_file", must_exist=True)
    states_path = setup.path("states_file", must_exist=True)
    if coords_path is None and states_path is None:
        raise setup.error("coordinates_file", "", "either a states file or a coordinates file must be specified")
    cutoff = setup.number("lowpass_cutoff_frequency_for_coordinates", -1.0)
    ti = setup.number("initial_time", None)
    tf = setup.number("final_time", None)
    loads_path = setup.path("external_loads_file", must_exist=True)
    force_files = setup.existing_paths("force_set_files")
    replace = setup.flag("replace_force_set", False)
    results = setup.path("results_directory") or setup.folder
    for prop in (
        "output_precision",
        "solve_for_equilibrium_for_auxiliary_states",
        "speeds_file",
        "maximum_number_of_integrator_steps",
        "maximum_integrator_step_size",
        "minimum_integrator_step_size",
        "integrator_error_tolerance",
        "ControllerSet",
        "controls_file",
    ):
        setup.text(prop)
    if setup.flag("solve_for_equilibrium_for_auxiliary_states", False):
        setup.warn(
            "<solve_for_equilibrium_for_auxiliary_states> true is not supported (muscle states keep their "
            "default values)"
        )
    if setup.text("speeds_file"):
        setup.warn("<speeds_file> is not supported: the speeds are the coordinates' spline derivatives")

    model = load_model_with_force_sets(model_path, force_files, replace)
    system = model.build()
    if states_path is not None:
        from ..io.tables import read_table

        table = read_table(states_path)
        # a states file: its coordinate values (full paths or names) as the coordinates
        names = {}
        for p in system.coordinate_paths:
            names[p + "/value"] = p.rsplit("/", 1)[-1]
        keep = [i for i, lab in enumerate(table.labels) if lab in names]
        table = TimeSeriesTable(
            table.times, np.asarray(table.values)[:, keep], [names[table.labels[i]] for i in keep], {"inDegrees": "no"}
        )
        cutoff = -1.0
    else:
        table = motion.read_coordinates(coords_path)
    times = np.asarray(table.times)
    rng = (times[0] if ti is None else ti, times[-1] if tf is None else tf)
    if rng[1] < times[0] or rng[0] > times[-1] or rng[0] > rng[1]:
        raise setup.error(
            "initial_time", f"{rng[0]:g} to {rng[1]:g}", f"outside the data ({times[0]:g} to {times[-1]:g} s)"
        )
    if loads_path is not None:
        for f in read_external_loads(loads_path, time_window=_loads_window(times, rng)):
            model = model.add(f)
        system = model.build()
    name = setup.name or "AnalyzeTool"
    tables = _analyze(system, table, items, cutoff, rng, setup)
    written = {}
    os.makedirs(results, exist_ok=True)
    for key, tab in tables.items():
        path = os.path.join(results, f"{name}_{key}.sto")
        write_table(tab, path)
        written[key] = path
    setup.report_unused(ignored=("replace_force_set",))
    return written


register_tool("AnalyzeTool", _run)
