"""OpenSim's JointReaction analysis: the loads a joint transmits between its two bodies.

A joint's reaction is Simbody's mobilizer reaction (``mechanics.dynamics.
mobilizer_reactions``: the force and moment the joint applies to its child body,
the joint's own generalized forces included) at the state with the forward dynamics'
accelerations, every force of the model applied (external loads included). The
actuators' forces are

- without a forces table: what the model computes at the state, every control zero
  (clipped to its bounds), the muscles from their state variables (as OpenSim's
  AnalyzeTool without a controls file);
- with one (a static optimization's ``_force.sto``): each actuator's value there, as
  ``ScalarActuator::overrideActuation`` -- a muscle pulls along its path with that
  tension (its activation, fiber length and passive force play no part), any other
  actuator applies it as its actuation (``control * optimal_force``). The table is
  read by actuator name (other columns, such as the external loads a ForceReporter
  records, are ignored) and interpolated linearly at the frames' times, extrapolated
  beyond its ends (``Storage::getDataAtTime``). OpenSim uses the file only when it
  names every actuator of the model; otherwise it warns and computes the forces from
  the states, and so does the setup runner.

Each joint's load is reported on its child body, at the origin of the joint's child
frame, or on its parent body (equal and opposite) at the origin of the parent frame:
the force, the moment about that point and the point itself, expressed in Ground, in
the child's or the parent's body frame, or in any frame of the model.

The setup analysis (``<JointReaction>`` in an AnalyzeTool's ``AnalysisSet``) reads
``forces_file`` (relative to the setup's folder), ``joint_names`` (``all``: the
model's joints), ``apply_on_bodies`` (``child``/``parent``) and ``express_in_frame``
(``ground``, ``child``, ``parent`` or a frame's name), each with one entry or one per
joint, and writes ``<tool>_<analysis>_ReactionLoads.sto`` with OpenSim's labels
``<joint>_on_<body>_in_<frame>_fx, _fy, _fz, _mx, _my, _mz, _px, _py, _pz``.

Differences from OpenSim: a joint name the model lacks is an error (OpenSim warns and
skips it). Joints reversed in the multibody tree or turned into loop constraints, and
constraints that act on bodies (welds, point constraints), are not supported: an error
says so (constraints on coordinates -- locked, prescribed, coupled -- are).
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..forces.base import Actuator
from ..forward import Context
from ..io.tables import TimeSeriesTable, read_table
from ..mechanics.constraints import CoordinateCouplerConstraint
from ..mechanics.dynamics import generalized_forces, mobilizer_reactions
from ..mechanics.joints import Joint
from ..muscles.path import PathActuator, path_forces
from ._analyses import AnalysisJob, _text, analysis_error, find_frame, zero_controls
from .dynamics import exclude_forces

__all__ = ["joint_reaction", "actuator_forces_at"]


# -- which joints, on which body, in which frame --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Reactions:
    """The loads to report, one per joint: ``labels`` (9 per joint), the joint's
    mobilized body ``mob``, the frame-table row of the point of application
    ``point_row`` (the joint's child or parent frame), ``sign`` (+1 on the child, -1
    on the parent) and the row of the frame to express them in ``frame_row``."""

    labels: list
    mob: np.ndarray
    point_row: np.ndarray
    sign: np.ndarray
    frame_row: np.ndarray


def _per_joint(values, n, prop, error):
    values = list(values)
    if len(values) not in (1, n):
        raise error(prop, " ".join(values), f"expected one entry or one per joint ({n})")
    return values * n if len(values) == 1 else values


def _reactions(system, joints, apply_on, express_in, error) -> _Reactions:
    """Resolve the joints (names or paths, ``None`` for all), the bodies and the frames
    as OpenSim's ``JointReaction::setupReactionList``; ``error(prop, value, message)``
    makes the exception to raise."""
    model = system.model
    topo = system.topology
    tree = topo.tree
    paths = model.paths(Joint)
    by_name = {p.rsplit("/", 1)[-1]: p for p in paths}
    if joints is None:
        chosen = list(paths)
    else:
        chosen = []
        for j in joints:
            path = j if j in paths else by_name.get(j)
            if path is None:
                raise error("joint_names", j, f"not a joint of the model (joints: {', '.join(by_name)})")
            chosen.append(path)
    n = len(chosen)
    sides = _per_joint(apply_on, n, "apply_on_bodies", error)
    wheres = _per_joint(express_in, n, "express_in_frame", error)
    labels, mob, point_row, sign, frame_row = [], [], [], [], []
    for jp, side, where in zip(chosen, sides, wheres):
        name = jp.rsplit("/", 1)[-1]
        if jp not in tree.joint_paths:
            raise error(
                "joint_names",
                name,
                "the joint closes a kinematic loop (a constraint in simjax): its reaction is not supported",
            )
        m = tree.joint_paths.index(jp)
        if tree.reversed[m]:
            raise error(
                "joint_names", name, "the joint is reversed in the multibody tree: its reaction is not supported"
            )
        parent, child = topo.connections[(jp, "parent_frame")], topo.connections[(jp, "child_frame")]
        if side.lower() not in ("child", "parent"):
            raise error("apply_on_bodies", side, "expected 'child' or 'parent'")
        on_child = side.lower() == "child"
        at = child if on_child else parent
        frame = find_frame(system, where)
        if frame is None and f"/jointset/{where}" in tree.frames:
            frame = f"/jointset/{where}"
        if frame is None and where.lower() in ("child", "parent"):
            frame = tree.frames[child if where.lower() == "child" else parent][0]  # its body
        if frame is None:
            raise error("express_in_frame", where, "not a frame of the model, nor 'child' or 'parent'")
        body = tree.frames[at][0].rsplit("/", 1)[-1]
        root = f"{name}_on_{body}_in_{frame.rsplit('/', 1)[-1]}"
        labels += [f"{root}_{s}" for s in ("fx", "fy", "fz", "mx", "my", "mz", "px", "py", "pz")]
        mob.append(m)
        point_row.append(tree.frame_rows[at])
        sign.append(1.0 if on_child else -1.0)
        frame_row.append(tree.frame_rows[frame])
    return _Reactions(
        labels, np.asarray(mob, int), np.asarray(point_row, int), np.asarray(sign), np.asarray(frame_row, int)
    )


def _check_supported(system):
    topo = system.topology
    on_bodies = [
        p
        for g in topo.role_groups("constraints")
        if not issubclass(g.cls, CoordinateCouplerConstraint)
        for p in g.paths
    ]
    if on_bodies or topo.tree.loop_welds:
        what = ", ".join(on_bodies) or "the welds that close kinematic loops"
        raise ValueError(f"joint reactions: the model's constraints on bodies ({what}) are not supported")


# -- actuator forces --------------------------------------------------------------------------


def actuator_forces_at(table: TimeSeriesTable, names, times) -> np.ndarray:
    """Actuator forces from a table (a static optimization's ``_force.sto``) at some
    times, as OpenSim's ``Storage::getDataAtTime``: linear interpolation between the
    rows around each time, linear extrapolation beyond the first and last rows.

    **Arguments:** ``table``; ``names``: the actuators' names (column labels);
    ``times (n,)`` (s).

    **Returns:** ``(n, len(names))`` (N or N m).

    **Raises:** ``ValueError`` listing the names the table lacks.
    """
    labels = list(table.labels)
    missing = [n for n in names if n not in labels]
    if missing:
        raise ValueError(f"the forces table has no column for the actuators {missing}")
    T = np.asarray(table.times, float)
    V = np.asarray(table.values, float)[:, [labels.index(n) for n in names]]
    times = np.asarray(times, float)
    if len(T) < 2:
        return np.broadcast_to(V[:1], (len(times), V.shape[1])).copy()
    i = np.clip(np.searchsorted(T, times, side="right") - 1, 0, len(T) - 2)
    den = T[i + 1] - T[i]
    pct = np.where(den < np.finfo(float).eps, 0.0, (times - T[i]) / np.where(den > 0, den, 1.0))
    return V[i] + pct[:, None] * (V[i + 1] - V[i])


class _WithControls:
    """A context seen with other controls, unchecked against their bounds (an
    overridden actuation may lie outside them)."""

    def __init__(self, ctx, controls):
        self._ctx = ctx
        self.controls = controls

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _actuator_forces(ctx, actuation):
    """Body and mobility forces ``((n_mob, 6), (nu,))`` of every actuator applying
    ``actuation (n_actuators,)``: path actuators and muscles as a tension along their
    paths, the others at the control ``actuation / optimal_force``."""
    topo = ctx.topology
    dtype = actuation.dtype
    body = jnp.zeros((ctx.tree.n_mob, 6), dtype)
    mob = jnp.zeros(ctx.tree.nu, dtype)
    for g in topo.role_groups("forces"):  # a few groups, each vectorized over its members
        if not issubclass(g.cls, Actuator):
            continue
        idx = np.asarray([topo.actuators.index(p) for p in g.paths], int)
        a = actuation[idx]
        if issubclass(g.cls, PathActuator):
            b, m = path_forces(ctx, g.static["rows"], jnp.where(g.static["on"], a, 0.0))
        else:
            opt = ctx.group_params(g)["optimal_force"]
            controls = jnp.zeros(len(topo.actuators), dtype).at[idx].set(jnp.where(opt != 0, a / opt, 0.0))
            f = g.cls.group_forces(g, ctx.group_params(g), _WithControls(ctx, controls))
            b, m = f.body, f.mobility
        if b is not None:
            body = body + b
        if m is not None:
            mob = mob + m
    return body, mob


def _without_actuators(system):
    """The system with its actuators removed (or, where referenced, not applied)."""
    off = exclude_forces(system.model, ["Actuators"])[0].build()
    assert off.topology.tree.joint_paths == system.topology.tree.joint_paths
    return off


# -- the batched programs -----------------------------------------------------------------------


def _frame_poses(ctx):
    tree = ctx.tree
    return ctx.frames_in_ground(tuple(sorted(tree.frame_rows, key=tree.frame_rows.get)))


@jit
def _from_states(system, states, controls):
    """Per frame: every mobilizer's reaction ``(n_mob, 6)`` and every frame's pose, the
    actuators' forces from the state at ``controls``."""

    def one(state):
        ctx = Context(system, state, controls)
        F = mobilizer_reactions(ctx.tree, ctx.params, ctx.pos, ctx.vel, ctx.acc.udot, ctx.applied[0], ctx.inertias)
        return (F,) + tuple(_frame_poses(ctx))

    return jax.vmap(one)(states)


@jit
def _from_actuation(system, off, states, off_state, off_controls, actuation):
    """Per frame: every mobilizer's reaction and every frame's pose, the actuators
    applying ``actuation (n, n_actuators)``. ``off``: the system without actuators,
    whose forward dynamics gets the actuators' generalized forces as mobility forces."""

    def one(state, a):
        ctx = Context(system, state)  # the actuators' paths and frames
        body, mob = _actuator_forces(ctx, a)
        octx = Context(
            off,
            off_state.replace(t=state.t, q=state.q, u=state.u),
            off_controls,
            mobility_forces=generalized_forces(ctx.tree, ctx.pos, body) + mob,
        )
        F = mobilizer_reactions(
            octx.tree, octx.params, octx.pos, octx.vel, octx.acc.udot, octx.applied[0] + body, octx.inertias
        )
        return (F,) + tuple(_frame_poses(ctx))

    return jax.vmap(one)(states, actuation)


def _loads(F, R, p, spec: _Reactions) -> np.ndarray:
    """``(n, 9 k)``: per joint force, moment about the point, point, in the frame."""
    F, R, p = np.asarray(F), np.asarray(R), np.asarray(p)
    Fj = F[:, spec.mob]  # on the child, about Ground's origin
    point = p[:, spec.point_row]
    s = spec.sign[None, :, None]
    force = s * Fj[..., 3:]
    moment = s * (Fj[..., :3] - np.cross(point, Fj[..., 3:]))
    Re, pe = R[:, spec.frame_row], p[:, spec.frame_row]
    out = [np.einsum("nkji,nkj->nki", Re, x) for x in (force, moment, point - pe)]
    return np.concatenate(out, -1).reshape(F.shape[0], -1)


def _compute(system, states, forces, spec: _Reactions, off=None) -> np.ndarray:
    _check_supported(system)
    if forces is None:
        F, R, p = _from_states(system, states, zero_controls(system))
    else:
        off = _without_actuators(system) if off is None else off
        dtype = jnp.asarray(states.q).dtype
        F, R, p = _from_actuation(
            system, off, states, off.default_state(), zero_controls(off), jnp.asarray(forces, dtype)
        )
    return _loads(F, R, p, spec)


def joint_reaction(system, states, forces=None, joints=None, apply_on="child", express_in="ground") -> dict:
    """OpenSim's JointReaction at a batch of states: the load each joint transmits.

    **Arguments:**

    - ``system``: the built model with all its forces (external loads added).
    - ``states``: a batched ``State`` (leading axis ``n``), e.g.
      ``analyze.analysis_frames(...).states``.
    - ``forces``: ``None``: the actuators' forces computed from the states (every
      control zero, clipped to its bounds); or each actuator's force, replacing what
      the model computes (see the module): a ``TimeSeriesTable`` with a column per
      actuator name (a static optimization's forces; interpolated at the states'
      times), or an array ``(n, n_actuators)`` in ``system.actuator_names`` order
      (N, N m).
    - ``joints``: joint names or paths; ``None`` or ``"all"``: every joint.
    - ``apply_on``: ``"child"`` or ``"parent"``: the body the load acts on; one, or a
      sequence with one per joint.
    - ``express_in``: ``"ground"``, ``"child"``, ``"parent"`` (the joint's body), or a
      frame's path or name; one, or one per joint.

    **Returns:** ``{"ReactionLoads": (n, 9 k), "labels": [...]}``: per joint the force
    (N), the moment (N m) about the point of application and that point (m: the
    origin of the joint's child frame, or of its parent frame for ``parent``), all
    expressed in the chosen frame; OpenSim's labels
    ``<joint>_on_<body>_in_<frame>_fx ... _mz, _px ... _pz``.

    **Raises:** ``ValueError`` naming an unknown joint or frame, a bad ``apply_on``,
    a forces table that lacks an actuator, or an unsupported model (see the module).
    """

    def error(prop, value, message):
        arg = {"joint_names": "joints", "apply_on_bodies": "apply_on", "express_in_frame": "express_in"}[prop]
        return ValueError(f"joint_reaction: {arg} {value!r}: {message}")

    if isinstance(joints, str):
        joints = None if joints.lower() == "all" else [joints]
    apply_on = [apply_on] if isinstance(apply_on, str) else list(apply_on)
    express_in = [express_in] if isinstance(express_in, str) else list(express_in)
    spec = _reactions(system, joints, apply_on, express_in, error)
    n = int(np.shape(states.t)[0])
    if isinstance(forces, TimeSeriesTable):
        forces = actuator_forces_at(forces, system.actuator_names, np.asarray(states.t))
    elif forces is not None:
        forces = np.asarray(forces, float)
        if forces.shape != (n, len(system.actuator_names)):
            raise ValueError(
                f"joint_reaction: forces of shape {forces.shape}, expected ({n}, "
                f"{len(system.actuator_names)}) in the order {system.actuator_names}"
            )
    return {"ReactionLoads": _compute(system, states, forces, spec), "labels": spec.labels}


def _analysis(job: AnalysisJob, node) -> dict:
    system = job.system

    def error(prop, value, message):
        return analysis_error(job, node, prop, value, message)

    def warn(message):
        text = f"<JointReaction name={node.name!r}>: {message}"
        job.setup.warn(text) if job.setup is not None else warnings.warn(text, stacklevel=2)

    words = _text(node, "joint_names", "all").split()
    joints = None if not words or words[0].upper() == "ALL" else words
    apply_on = _text(node, "apply_on_bodies", "child").split() or ["child"]
    express_in = _text(node, "express_in_frame", "ground").split() or ["ground"]
    spec = _reactions(system, joints, apply_on, express_in, error)
    forces = None
    name = _text(node, "forces_file", "")
    if name:
        path = os.path.join(job.setup.folder, name) if job.setup is not None else name
        if not os.path.exists(path):
            raise error("forces_file", name, f"resolved from the setup's folder to {path!r}, which does not exist")
        table = read_table(path)
        missing = [a for a in system.actuator_names if a not in table.labels]
        if missing:
            warn(
                f"the forces file {name!r} lacks the actuators {missing}: the actuators' forces are computed from "
                "the states (as OpenSim)"
            )
        else:
            forces = actuator_forces_at(table, system.actuator_names, job.frames.times)
    off = None
    if forces is not None:
        if "system without actuators" not in job.shared:
            job.shared["system without actuators"] = _without_actuators(system)
        off = job.shared["system without actuators"]
    values = _compute(system, job.frames.states, forces, spec, off)
    return {
        "ReactionLoads": TimeSeriesTable(
            job.frames.times, values, spec.labels, {"header": "Joint Reaction Loads", "inDegrees": "no"}
        )
    }
