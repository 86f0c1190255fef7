"""The spanning tree, compiled once into static index arrays, and its kinematics.

``compile_tree`` runs the multibody graph maker on the model's bodies and joints and
numbers the mobilized bodies parents-first (index 0 is Ground). Everything it returns
is static numpy. ``tree_params`` gathers the traced parameters (mass properties,
constant frame offsets, transform-axis functions) from the model into stacked arrays
with one vectorized computation per kind, and ``position_kinematics`` /
``velocity_kinematics`` compute, for all bodies at once:

- ``R0, p0``: each body's pose in Ground;
- ``S``: the motion subspace of every generalized speed as a spatial motion vector in
  Ground, about Ground's origin, so that body velocities are ``V = sum over ancestor
  dofs of S u`` (a masked matrix product, no recursion);
- ``V`` and the velocity-product accelerations ``C`` of every body.

Spatial vectors are expressed in Ground about Ground's origin throughout, which turns
the mass matrix and inverse dynamics into a few dense products (see ``dynamics``).

Joints come in kinds, each evaluated for all its mobilizers at once:

- ``transform``: six transform axes (three body-fixed rotations, then translations
  along F's axes), each a Function of at most one coordinate; ``qdot = u``. Weld, Pin,
  Slider, Universal, Gimbal, Planar and Custom joints. A CustomJoint's ``Hdot u``
  reproduces Simbody's FunctionBased mobilizer, which is not the exact time
  derivative when several rotations are driven by one coordinate (see
  ``_transform_bias``).
- ``ball``, ``free``, ``ellipsoid``: a rotation parametrized by body-fixed XYZ angles
  (OpenSim's default) or a quaternion (``use_quaternions``), with ``u`` the angular
  velocity of M in F expressed in F; Free adds the position of M's origin in F (``u``:
  its velocity in F); Ellipsoid places M's origin on an ellipsoid at ``radii * Mz``.

Program size: every kind is one vectorized block; body poses are composed by
*pointer jumping* (``ceil(log2(depth))`` batched steps, each body composing with its
ancestor ``2^k`` levels up), or in deep trees by a ``lax.scan`` over the levels, so a
traced program grows at most with the logarithm of the tree depth and not with the
number of bodies.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import ModelError
from ..function_bank import FunctionBank, bank_eval, bank_params
from ..graph import GraphError, MultibodyGraphMaker
from .frames import Body, Ground, PhysicalFrame, PhysicalOffsetFrame
from .joints import ROTATIONAL, TRANSLATIONAL, BallJoint, CustomJoint, EllipsoidJoint, FreeJoint, Joint

__all__ = [
    "Tree",
    "CoordinateInfo",
    "compile_tree",
    "tree_params",
    "position_kinematics",
    "velocity_kinematics",
    "qdot_from_u",
    "TreeParams",
    "Positions",
    "Velocities",
    "ROTATION_KINDS",
    "frame_table_rows",
    "component_table",
]

#: joint kinds whose rotation is three angles or a quaternion with ``u = w_FM`` in F
ROTATION_KINDS = ("ball", "free", "ellipsoid")
_KINDS = ("transform",) + ROTATION_KINDS
_NU = {"ball": 3, "free": 6, "ellipsoid": 3}


@dataclasses.dataclass(frozen=True)
class CoordinateInfo:
    """Where a Coordinate lives in the state.

    ``mob``: its mobilized body; ``col``: its index among the joint's speeds;
    ``q``: its index in ``q`` (-1 for the rotations of a quaternion joint);
    ``u``: its index in ``u``; ``motion_type``: Rotational, Translational or Coupled;
    ``joint``: the joint's path.
    """

    mob: int
    col: int
    q: int
    u: int
    motion_type: str
    joint: str


@dataclasses.dataclass(frozen=True, eq=False)
class Tree:
    """The static multibody topology (numbered parents first; 0 is Ground).

    Per mobilized body ``m``: ``body_paths[m]`` (the Body it stands for; slaves repeat
    their master's path), ``parent[m]``, ``level[m]``, ``joint_paths[m]`` (``""`` for
    Ground and added free joints), ``kind[m]`` (``"ground"``, ``"transform"``,
    ``"ball"``, ``"free"``, ``"ellipsoid"``), ``reversed[m]``, ``q_start``/``nq_mob``,
    ``u_start``/``nu_mob``, ``mob_frames[m]`` (frame-table rows of the joint frames on
    the inboard and the outboard body). ``anc[i, j]``: whether ``j`` is ``i`` or an
    ancestor of ``i``; ``anc_dof[i, d]``: whether speed ``d`` moves body ``i``. Per speed
    ``d``: ``dof_mob[d]``, ``dof_col[d]``. ``jumps``: the ancestor ``2^k`` levels up of
    every body, for pointer jumping.

    Frames: ``frames[path] = (body path, offset-frame chain)`` for every PhysicalFrame;
    ``frame_rows[path]`` its row in the frame table; ``frame_mob``, ``frame_chain``
    (rows of ``offset_paths``, padded with ``len(offset_paths)``).

    Per transform joint (rows of ``groups["transform"]``), per axis: ``tf_qidx``,
    ``tf_uidx`` (its coordinate's index in ``q``, ``u``; ``nq``/``nu`` if none),
    ``tf_col`` (that coordinate's column among the joint's speeds; -1 if none) and
    ``tf_spin (n_tf, 2, 3)``: which rotation axes' rates make up the angular
    velocities that turn the second and the third rotation axis in ``Hdot u`` (see
    ``_transform_bias``).

    ``loop_welds``: ``(mob1, frame row 1, mob2, frame row 2)`` of every weld that
    closes a loop (slave bodies re-joined to their masters, and WeldJoints the graph
    maker turned into constraints). ``slave_welds``: ``(master mob, slave mob)`` pairs.
    """

    n_mob: int
    nq: int
    nu: int
    body_paths: tuple
    is_slave: np.ndarray
    fragments: np.ndarray
    parent: np.ndarray
    level: np.ndarray
    levels: tuple
    jumps: tuple
    joint_paths: tuple
    kind: tuple
    reversed: np.ndarray
    q_start: np.ndarray
    nq_mob: np.ndarray
    u_start: np.ndarray
    nu_mob: np.ndarray
    anc: np.ndarray
    anc_dof: np.ndarray
    dof_mob: np.ndarray
    dof_col: np.ndarray
    groups: dict
    mob_row: np.ndarray
    dof_row: np.ndarray
    tf_qidx: np.ndarray
    tf_uidx: np.ndarray
    tf_col: np.ndarray
    tf_spin: np.ndarray
    tf_bank: FunctionBank
    frames: dict
    frame_rows: dict
    frame_mob: np.ndarray
    frame_chain: np.ndarray
    offset_paths: tuple
    mob_frames: np.ndarray
    coordinates: dict
    loop_welds: tuple
    slave_welds: tuple
    q_names: tuple
    u_names: tuple
    quaternions: bool
    graph_dump: str
    quat_q: np.ndarray
    qdot_perm: np.ndarray

    @property
    def n_bodies(self) -> int:
        """Number of mobilized bodies including Ground."""
        return self.n_mob

    @property
    def depth(self) -> int:
        """Number of levels below Ground."""
        return len(self.levels)


# -- compile (static, pure Python) ------------------------------------------------------


def component_table(model) -> dict:
    """``{path: component}`` for every component of ``model``, from one walk.

    Much cheaper than repeated ``model.find`` when many components are looked up.
    """
    table = dict(model.walk())
    table["/"] = model
    return table


def _frame_chain(model, path: str, connections: dict) -> tuple[str, tuple[str, ...]]:
    """Resolve a PhysicalFrame to its base body path and the offset frames in between.

    ``model`` is a component table (see ``component_table``).
    """
    chain = []
    seen = set()
    while True:
        comp = model[path]
        if isinstance(comp, (Body, Ground)):
            return path, tuple(reversed(chain))
        if not isinstance(comp, PhysicalOffsetFrame):
            raise ModelError(path, f"{type(comp).__name__} is not a PhysicalFrame simjax can attach to")
        if path in seen:
            raise ModelError(path, "offset frames form a cycle", prop="socket_parent", value=comp.parent)
        seen.add(path)
        chain.append(path)
        path = connections[(path, "parent")]


def _concrete_mass(body) -> float:
    m = body.mass
    if isinstance(m, np.ndarray):
        return float(m)
    return 1.0


def _joint_kind(joint: Joint) -> str:
    if isinstance(joint, BallJoint):
        return "ball"
    if isinstance(joint, FreeJoint):
        return "free"
    if isinstance(joint, EllipsoidJoint):
        return "ellipsoid"
    return "transform"


def _rot_nq(kind: str, quaternions: bool) -> int:
    return (4 if quaternions else 3) + (3 if kind == "free" else 0)


def compile_tree(model, connections: dict, use_quaternions: bool = False) -> Tree:
    """Build the static tree of a model (runs once per model structure).

    **Arguments:**

    - ``model``: the Model.
    - ``connections``: resolved sockets, ``{(component path, socket): target path}``.
    - ``use_quaternions``: parametrize Ball, Free and Ellipsoid joints by quaternions
      (nq = 4, 7, 4) instead of OpenSim's default body-fixed XYZ angles (nq = 3, 6, 3).

    **Returns:** a ``Tree``.

    **Raises:** ``ModelError`` for impossible structures (a joint whose parent and child
    frames are on the same body, a massless terminal body, ...).
    """
    ground_path = "/ground"
    table = component_table(model)
    body_entries = [(p, c) for p, c in table.items() if isinstance(c, Body)]
    joint_entries = [(p, c) for p, c in table.items() if isinstance(c, Joint)]

    gm = MultibodyGraphMaker(weld_type_name="WeldJoint", free_type_name="FreeJoint")
    registered = {"WeldJoint", "FreeJoint"}
    gm.add_body(ground_path, float("inf"), False, None)
    for p, b in body_entries:
        gm.add_body(p, _concrete_mass(b), False, p)
    frames: dict[str, tuple[str, tuple[str, ...]]] = {}

    def frame_of(path: str):
        if path not in frames:
            frames[path] = _frame_chain(table, path, connections)
        return frames[path]

    joint_sides = {}
    for p, j in joint_entries:
        tname = type(j).__name__
        if tname not in registered:
            gm.add_joint_type(tname, type(j).num_coordinates_default(), False, None)
            registered.add(tname)
        pf = connections[(p, "parent_frame")]
        cf = connections[(p, "child_frame")]
        pb, _ = frame_of(pf)
        cb, _ = frame_of(cf)
        if pb == cb:
            what = "the same frame" if pf == cf else f"frames on the same body {pb!r}"
            raise ModelError(
                p,
                f"parent frame {pf!r} and child frame {cf!r} are {what}; a joint must connect two different bodies",
                prop="socket_child_frame",
                value=j.child_frame,
            )
        joint_sides[p] = (pf, cf)
        try:
            gm.add_joint(p, tname, pb, cb, False, p)
        except GraphError as e:
            raise ModelError(p, str(e)) from None
    frame_of(ground_path)
    for p, c in table.items():
        if isinstance(c, PhysicalFrame):
            frame_of(p)
    try:
        gm.generate_graph()
    except GraphError as e:
        raise ModelError("/", f"multibody graph: {e}") from None

    mobs = gm.mobilizers
    n_mob = len(mobs)
    body_to_mob = {mb.outboard_body: i for i, mb in enumerate(mobs) if i > 0}
    body_to_mob[0] = 0
    parent = np.zeros(n_mob, dtype=np.int32)
    level = np.zeros(n_mob, dtype=np.int32)
    body_paths, joint_paths, kinds, is_slave, fragments, rev = [], [], [], [], [], []
    for i, mb in enumerate(mobs):
        if i == 0:
            body_paths.append(ground_path)
            joint_paths.append("")
            kinds.append("ground")
            is_slave.append(False)
            fragments.append(1)
            rev.append(False)
            continue
        parent[i] = body_to_mob[mb.inboard_body]
        if parent[i] >= i:
            raise ModelError("/", "internal error: mobilizers are not numbered parents first")
        level[i] = level[parent[i]] + 1
        master = gm.bodies[mb.outboard_master_body]
        body_paths.append(master.name)
        is_slave.append(mb.is_slave_mobilizer)
        fragments.append(mb.num_fragments)
        rev.append(bool(mb.is_reversed))
        if mb.is_added_base_mobilizer:
            joint_paths.append("")
            kinds.append("free")
        else:
            jp = gm.joints[mb.joint].name
            joint_paths.append(jp)
            kinds.append(_joint_kind(table[jp]))
    depth = int(level.max(initial=0))
    levels = tuple(np.flatnonzero(level == L).astype(np.int32) for L in range(1, depth + 1))
    jumps = []
    ptr = parent.copy()
    for _ in range(math.ceil(math.log2(depth)) if depth > 1 else 0):
        jumps.append(ptr.copy())
        ptr = ptr[ptr]

    # state layout, per mobilizer in order
    nq_mob = np.zeros(n_mob, dtype=np.int32)
    nu_mob = np.zeros(n_mob, dtype=np.int32)
    for i, k in enumerate(kinds):
        if k == "transform":
            nu_mob[i] = nq_mob[i] = len(table[joint_paths[i]].coordinates)
        elif k in ROTATION_KINDS:
            nu_mob[i], nq_mob[i] = _NU[k], _rot_nq(k, use_quaternions)
    q_start = np.concatenate([[0], np.cumsum(nq_mob)[:-1]]).astype(np.int32)
    u_start = np.concatenate([[0], np.cumsum(nu_mob)[:-1]]).astype(np.int32)
    nq, nu = int(nq_mob.sum()), int(nu_mob.sum())

    anc = np.zeros((n_mob, n_mob), dtype=bool)
    for i in range(n_mob):
        j = i
        anc[i, 0] = True
        while j > 0:
            anc[i, j] = True
            j = parent[j]
    dof_mob = np.repeat(np.arange(n_mob, dtype=np.int32), nu_mob)
    dof_col = np.concatenate([np.arange(n, dtype=np.int32) for n in nu_mob]) if nu else np.zeros(0, np.int32)

    # rows of each kind's per-mobilizer and per-speed results in their concatenation
    groups = {k: np.flatnonzero(np.asarray(kinds) == k).astype(np.int32) for k in _KINDS}
    mob_row = np.zeros(n_mob, np.int32)
    dof_row = np.zeros(nu, np.int32)
    mrow, drow = 1, 0
    for k in _KINDS:
        width = 6 if k == "transform" else _NU[k]
        for r, m in enumerate(groups[k]):
            mob_row[m] = mrow + r
            dof_row[u_start[m] : u_start[m] + nu_mob[m]] = drow + r * width + np.arange(nu_mob[m])
        mrow += len(groups[k])
        drow += len(groups[k]) * width

    # names and coordinates
    coordinates: dict[str, CoordinateInfo] = {}
    q_names = [""] * nq
    u_names = [""] * nu
    quat_q = []
    for i, k in enumerate(kinds):
        if k == "ground":
            continue
        jp = joint_paths[i]
        if not jp:
            # OpenSim adds a FreeJoint named free_<body> to the JointSet
            bname = body_paths[i].rsplit("/", 1)[-1]
            base = f"/jointset/free_{bname}"
            cnames = [f"{base}/free_{bname}_coord_{c}" for c in range(6)]
            ctypes = [ROTATIONAL] * 3 + [TRANSLATIONAL] * 3
            cpaths = [None] * 6
        else:
            j = table[jp]
            base = jp
            cpaths = [f"{jp}/{c.name}" for c in j.coordinates]
            cnames = cpaths
            ctypes = list(j.motion_types())
        for col, (cname, ctype, cpath) in enumerate(zip(cnames, ctypes, cpaths)):
            ui = int(u_start[i] + col)
            u_names[ui] = f"{cname}/speed"
            if k in ROTATION_KINDS and use_quaternions:
                qi = -1 if col < 3 else int(q_start[i] + 4 + col - 3)
            else:
                qi = int(q_start[i] + col)
            if qi >= 0:
                q_names[qi] = f"{cname}/value"
            if cpath:
                coordinates[cpath] = CoordinateInfo(i, col, qi, ui, ctype, jp)
        if k in ROTATION_KINDS and use_quaternions:
            for a, comp in enumerate("wxyz"):
                q_names[int(q_start[i]) + a] = f"{base}/quaternion_{comp}"
            quat_q.append(int(q_start[i]))

    # transform joints: per-axis coordinate indices
    tf = groups["transform"]
    tf_qidx = np.full((len(tf), 6), nq, dtype=np.int32)
    tf_uidx = np.full((len(tf), 6), nu, dtype=np.int32)
    tf_col = np.full((len(tf), 6), -1, dtype=np.int32)
    # exact: the second axis turns with the first rotation, the third with the first two
    tf_spin = np.broadcast_to(np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]), (len(tf), 2, 3)).copy()
    axis_functions = []
    for r, m in enumerate(tf):
        j = table[joint_paths[m]]
        names = [c.name for c in j.coordinates]
        for a, ax in enumerate(j.transform_axes().axes):
            if ax.coordinates:
                col = names.index(ax.coordinates[0])
                tf_col[r, a] = col
                tf_qidx[r, a] = q_start[m] + col
                tf_uidx[r, a] = u_start[m] + col
            axis_functions.append(ax.function)
        if isinstance(j, CustomJoint):
            # Simbody's FunctionBased mobilizer (FunctionBasedImpl::buildHdot) turns them
            # with the rotation rates of its first speed, and of all speeds but the
            # third (all speeds if it has at most two): see _transform_bias. Its speeds
            # are in OpenSim's order (SpatialTransform::getCoordinateNames: by first use
            # along rotation1..translation3), which may not be the joint's own.
            axes = j.transform_axes().axes
            order = list(dict.fromkeys([ax.coordinates[0] for ax in axes if ax.coordinates] + names))
            mob = np.array([order.index(ax.coordinates[0]) if ax.coordinates else -1 for ax in axes[:3]])
            tf_spin[r, 0] = mob == 0
            tf_spin[r, 1] = (mob != 2) if len(order) > 2 else 1.0

    # qdot = N u is assembled from per-kind pieces; their q indices, concatenated:
    order = [np.concatenate([q_start[m] + np.arange(nq_mob[m]) for m in tf])] if len(tf) else []
    for k in ROTATION_KINDS:
        ms = groups[k]
        if len(ms):
            order.append((q_start[ms][:, None] + np.arange(nq_mob[ms[0]])).reshape(-1))
    qdot_perm = np.argsort(np.concatenate(order)).astype(np.int32) if order else np.zeros(0, np.int32)

    # frame table: every PhysicalFrame, as a body and a chain of offset frames
    offset_paths = tuple(sorted({f for _, chain in frames.values() for f in chain}))
    off_index = {p: i for i, p in enumerate(offset_paths)}
    frame_list = sorted(frames)
    frame_rows = {p: i for i, p in enumerate(frame_list)}
    L = max((len(frames[p][1]) for p in frame_list), default=0)
    frame_chain = np.full((len(frame_list), L), len(offset_paths), dtype=np.int32)
    for i, p in enumerate(frame_list):
        for k, f in enumerate(frames[p][1]):
            frame_chain[i, k] = off_index[f]
    path_to_mob = {p: m for m, p in enumerate(body_paths) if not is_slave[m]}
    frame_mob = np.asarray([path_to_mob[frames[p][0]] for p in frame_list], np.int32)

    mob_frames = np.zeros((n_mob, 2), np.int32)
    mob_frames[0] = frame_rows[ground_path]
    for m in range(1, n_mob):
        jp = joint_paths[m]
        if not jp:
            mob_frames[m] = (frame_rows[ground_path], frame_rows[body_paths[m]])
            continue
        pf, cf = joint_sides[jp]
        mob_frames[m] = (frame_rows[cf], frame_rows[pf]) if rev[m] else (frame_rows[pf], frame_rows[cf])

    loop_welds, slave_pairs = [], []
    for lc in gm.loop_constraints:
        if lc.is_slave_weld:
            mm, sm = body_to_mob[lc.parent_body], body_to_mob[lc.child_body]
            slave_pairs.append((int(mm), int(sm)))
            loop_welds.append((int(mm), frame_rows[body_paths[mm]], int(sm), frame_rows[body_paths[mm]]))
        elif lc.type_name == "WeldJoint":
            jp = gm.joints[lc.joint].name
            pf, cf = joint_sides[jp]
            loop_welds.append(
                (int(body_to_mob[lc.parent_body]), frame_rows[pf], int(body_to_mob[lc.child_body]), frame_rows[cf])
            )
        elif lc.type_name != gm.free_type_name:
            raise ModelError(gm.joints[lc.joint].name, f"a {lc.type_name} cannot close a loop as a constraint")

    return Tree(
        n_mob=n_mob,
        nq=nq,
        nu=nu,
        body_paths=tuple(body_paths),
        is_slave=np.asarray(is_slave),
        fragments=np.asarray(fragments, dtype=np.float64),
        parent=parent,
        level=level,
        levels=levels,
        jumps=tuple(jumps),
        joint_paths=tuple(joint_paths),
        kind=tuple(kinds),
        reversed=np.asarray(rev),
        q_start=q_start,
        nq_mob=nq_mob,
        u_start=u_start,
        nu_mob=nu_mob,
        anc=anc,
        anc_dof=anc[:, dof_mob],
        dof_mob=dof_mob,
        dof_col=dof_col,
        groups=groups,
        mob_row=mob_row,
        dof_row=dof_row,
        tf_qidx=tf_qidx,
        tf_uidx=tf_uidx,
        tf_col=tf_col,
        tf_spin=tf_spin,
        tf_bank=FunctionBank.of(axis_functions),
        frames=frames,
        frame_rows=frame_rows,
        frame_mob=frame_mob,
        frame_chain=frame_chain,
        offset_paths=offset_paths,
        mob_frames=mob_frames,
        coordinates=coordinates,
        loop_welds=tuple(loop_welds),
        slave_welds=tuple(slave_pairs),
        q_names=tuple(q_names),
        u_names=tuple(u_names),
        quaternions=bool(use_quaternions),
        graph_dump=gm.dump_graph(),
        quat_q=np.asarray(quat_q, dtype=np.int32),
        qdot_perm=qdot_perm,
    )


def frame_table_rows(tree: Tree, frame_paths) -> np.ndarray:
    """Rows of the frame table for some PhysicalFrame paths (static)."""
    return np.asarray([tree.frame_rows[f] for f in frame_paths], np.int32)


# -- traced parameters ----------------------------------------------------------------


class TreeParams(dict):
    """Traced arrays of the tree, gathered from the model's properties (a dict pytree)."""


jax.tree_util.register_pytree_node(
    TreeParams, lambda d: (tuple(d.values()), tuple(d.keys())), lambda k, v: TreeParams(zip(k, v))
)


def _stack(values, dtype, shape=()):
    if not values:
        return jnp.zeros((0,) + shape, dtype)
    return jnp.stack([jnp.asarray(v, dtype) for v in values])


def tree_params(model, tree: Tree) -> TreeParams:
    """Gather the tree's traced parameters from the model (vectorized per kind).

    **Returns:** a ``TreeParams`` with ``mass (n)``, ``com (n,3)``, ``inertia (n,3,3)``
    (about the mass center, in the body frame; slaves share their master's equally),
    the frame table ``frame_R (nf,3,3)``, ``frame_p (nf,3)`` (each PhysicalFrame's
    pose in its body), ``R_in, p_in`` / ``R_out, p_out`` (pose of the joint frame on
    the inboard / outboard body in that body), ``tf_axis (n_tf,6,3)``,
    ``tf_functions`` (a function bank of the transform axes), ``radii (n_ell,3)`` and
    ``gravity``.
    """
    dtype = jnp.result_type(float)
    table = component_table(model)
    bodies = [table[p] for p in tree.body_paths[1:]]
    frac = jnp.asarray(1.0 / tree.fragments, dtype)
    zero = jnp.zeros((1,), dtype)
    mass = jnp.concatenate([zero, _stack([b.mass for b in bodies], dtype)]) * frac
    com = jnp.concatenate([jnp.zeros((1, 3), dtype), _stack([b.mass_center for b in bodies], dtype, (3,))])
    i6 = jnp.concatenate([jnp.zeros((1, 6), dtype), _stack([b.inertia for b in bodies], dtype, (6,))])
    inertia = spatial.inertia_matrix(i6) * frac[:, None, None]

    offsets = [table[p] for p in tree.offset_paths]
    R_off = spatial.xyz_body_rotation(_stack([f.orientation for f in offsets], dtype, (3,)))
    p_off = _stack([f.translation for f in offsets], dtype, (3,))
    R_off = jnp.concatenate([R_off, jnp.eye(3, dtype=dtype)[None]])
    p_off = jnp.concatenate([p_off, jnp.zeros((1, 3), dtype)])
    nf = len(tree.frame_rows)
    frame_R = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (nf, 3, 3))
    frame_p = jnp.zeros((nf, 3), dtype)
    for k in range(tree.frame_chain.shape[1]):
        idx = tree.frame_chain[:, k]
        frame_R, frame_p = spatial.compose((frame_R, frame_p), (R_off[idx], p_off[idx]))
    fin, fout = tree.mob_frames[:, 0], tree.mob_frames[:, 1]

    tf = tree.groups["transform"]
    axes, functions, has_arg = [], [], []
    for m in tf:
        for a in table[tree.joint_paths[m]].transform_axes().axes:
            axes.append(a.axis)
            functions.append(a.function)
            has_arg.append(bool(a.coordinates))
    tf_axis = _stack(axes, dtype, (3,))
    tf_axis = (tf_axis / jnp.linalg.norm(tf_axis, axis=-1, keepdims=True)).reshape(len(tf), 6, 3)
    ell = tree.groups["ellipsoid"]
    radii = _stack([table[tree.joint_paths[m]].radii_x_y_z for m in ell], dtype, (3,))
    return TreeParams(
        mass=mass,
        com=com,
        inertia=inertia,
        frame_R=frame_R,
        frame_p=frame_p,
        R_in=frame_R[fin],
        p_in=frame_p[fin],
        R_out=frame_R[fout],
        p_out=frame_p[fout],
        tf_axis=tf_axis,
        tf_functions=bank_params(tree.tf_bank, functions, has_arg),
        radii=radii,
        gravity=jnp.asarray(model.gravity, dtype),
    )


# -- kinematics -----------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Positions:
    """Position-stage kinematics of all mobilized bodies.

    ``R0 (n,3,3)``, ``p0 (n,3)``: body poses in Ground. ``R_F (n,3,3)``, ``p_F (n,3)``:
    the pose in Ground of each mobilizer's joint frame F. ``S (nu,6)``: every speed's
    motion subspace in Ground about its origin (sign included for reversed
    mobilizers). ``q``; ``local``: per-kind joint data the velocity stage reuses.
    """

    R0: Any
    p0: Any
    R_F: Any
    p_F: Any
    S: Any
    q: Any
    local: dict


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Velocities:
    """Velocity-stage kinematics: ``V (n,6)`` body spatial velocities and ``C (n,6)``
    velocity-product accelerations (both in Ground about its origin), ``u``, ``qdot``."""

    V: Any
    C: Any
    u: Any
    qdot: Any


def _transform_joint(axes, th, dth):
    """Position kinematics of one transform joint.

    **Arguments:** ``axes (6,3)`` unit axes; per-axis function values ``th`` and first
    derivatives ``dth`` (6,).

    **Returns:** ``R_FM``, ``p_FM``, the motion vector (in F, about F's origin) of each
    axis per unit coordinate rate ``(6, 6)``, and the rotation axes in F ``e (3,3)``.
    """
    R1 = spatial.rotation_about_axis(axes[0], th[0])
    R2 = spatial.rotation_about_axis(axes[1], th[1])
    R12 = spatial.mat_mul(R1, R2)
    R = spatial.mat_mul(R12, spatial.rotation_about_axis(axes[2], th[2]))
    e = jnp.stack([axes[0], spatial.mat_vec(R1, axes[1]), spatial.mat_vec(R12, axes[2])])
    p = _sum3(th[3:, None] * axes[3:])
    we = e * dth[:3, None]
    per_axis = jnp.concatenate(
        [
            jnp.concatenate([we, spatial.cross(p, we)], -1),
            jnp.concatenate([jnp.zeros((3, 3), axes.dtype), axes[3:] * dth[3:, None]], -1),
        ]
    )
    return R, p, per_axis, e


def _transform_bias(axes, e, p, dth, d2th, qd, spin):
    """``Hdot u`` (in F, about F's origin) of one transform joint with coordinate
    rates ``qd`` per axis.

    The angular velocity is ``w = sum_i e_i r_i`` (``e_i`` the rotation axes in F,
    ``r_i`` the rates of the rotation functions), so ``Hdot u`` has ``w_1 x e_2 r_2 +
    w_2 x e_3 r_3`` where ``w_k`` is the angular velocity that turns axis ``e_(k+1)``:
    ``w_k = sum_i spin[k-1, i] e_i r_i``. Exactly, ``w_1 = e_1 r_1`` and ``w_2 = e_1 r_1
    + e_2 r_2`` (``spin = [[1,0,0],[1,1,0]]``). Simbody's FunctionBased mobilizer, which
    OpenSim's CustomJoint uses, takes ``w_1`` as the angular velocity of its first
    speed alone and ``w_2`` as that of all speeds but the third (``buildHdot`` in
    Simbody's MobilizedBodyImpl.h: ``uv1``, ``uv2``). That is exact when each rotation
    is a function of its own speed in order, but not when one coordinate drives
    several rotations (Rajagopal's knee: flexion, adduction and rotation are all
    functions of knee_angle, so ``w_1 = w_2 = w`` and the angular acceleration has an
    extra ``e_3 r_3 x e_2 r_2``). OpenSim being the reference, CustomJoints take
    Simbody's ``spin`` (from ``compile_tree``), and their ``C`` is not the exact time
    derivative of their velocities there.
    """
    rate = dth * qd
    w_parts = e * rate[:3, None]
    w = _sum3(w_parts)
    pdot = _sum3(rate[3:, None] * axes[3:])
    acc2 = d2th * qd * qd
    w1, w2 = (_sum3(w_parts * spin[k, :, None]) for k in range(2))
    alpha = spatial.cross(w1, w_parts[1]) + spatial.cross(w2, w_parts[2]) + _sum3(e * acc2[:3, None])
    lin = _sum3(acc2[3:, None] * axes[3:]) + spatial.cross(pdot, w) + spatial.cross(p, alpha)
    return jnp.concatenate([alpha, lin], -1)


def _sum3(x):
    """``x.sum(0)`` over three rows, as additions (fused, not a reduction: see
    ``spatial.mat_mul``)."""
    return x[0] + x[1] + x[2]


def _rotation_of(tree: Tree, q_rot):
    """``R_FM`` from three XYZ body-fixed angles or a quaternion, ``(k, 3 or 4)``."""
    return spatial.quat_to_rotation(q_rot) if tree.quaternions else spatial.xyz_body_rotation(q_rot)


def _kind_q(tree: Tree, kind: str, q):
    ms = tree.groups[kind]
    return q[tree.q_start[ms][:, None] + np.arange(tree.nq_mob[ms[0]])]


def _kind_u(tree: Tree, kind: str, u):
    ms = tree.groups[kind]
    return u[tree.u_start[ms][:, None] + np.arange(tree.nu_mob[ms[0]])]


def _axes_motion(p, k, dtype):
    """Motion vectors (about F's origin) of unit angular velocities about F's axes of a
    body whose origin is at ``p (k,3)``: ``(k, 3, 6)``."""
    eye = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (k, 3, 3))
    return jnp.concatenate([eye, spatial.cross(p[:, None, :], eye)], -1)


def _local_kinematics(tree: Tree, params: TreeParams, q):
    """``R_FM (n,3,3)``, ``p_FM (n,3)``, per-speed ``H (nu, 6)`` (in F about F's
    origin) and the per-kind data the velocity stage needs."""
    dtype = q.dtype
    Rs = [jnp.eye(3, dtype=dtype)[None]]
    ps = [jnp.zeros((1, 3), dtype)]
    Hs = []
    local = {}
    tf = tree.groups["transform"]
    if len(tf):
        q_ext = jnp.concatenate([q, jnp.zeros(1, dtype)])
        x = q_ext[tree.tf_qidx.reshape(-1)]
        th, dth, d2th = (
            v.reshape(tree.tf_qidx.shape) for v in bank_eval(tree.tf_bank, params["tf_functions"], x, orders=(0, 1, 2))
        )
        R, p, per_axis, e = jax.vmap(_transform_joint)(params["tf_axis"], th, dth)
        # each axis adds its motion to its coordinate's column: one small static mask per
        # axis (a (k, 6, 6) one-hot would be a constant too big for XLA's sequential runs)
        Hs.append(
            sum(
                jnp.asarray(tree.tf_col[:, a, None] == np.arange(6), dtype)[:, :, None] * per_axis[:, a, None, :]
                for a in range(6)
            ).reshape(-1, 6)
        )
        Rs.append(R)
        ps.append(p)
        local["transform"] = (e, p, dth, d2th)
    for kind in ROTATION_KINDS:
        ms = tree.groups[kind]
        if not len(ms):
            continue
        k = len(ms)
        qs = _kind_q(tree, kind, q)
        nrot = 4 if tree.quaternions else 3
        R = _rotation_of(tree, qs[:, :nrot])
        if kind == "ball":
            p = jnp.zeros((k, 3), dtype)
            H = _axes_motion(p, k, dtype)
        elif kind == "free":
            p = qs[:, nrot:]
            lin = jnp.concatenate(
                [jnp.zeros((k, 3, 3), dtype), jnp.broadcast_to(jnp.eye(3, dtype=dtype), (k, 3, 3))], -1
            )
            H = jnp.concatenate([_axes_motion(p, k, dtype), lin], 1)
        else:
            radii = params["radii"]
            n = R[:, :, 2]
            p = radii * n
            # dp/dw_i = radii * (e_i x n); about F's origin add p x e_i
            eye = jnp.eye(3, dtype=dtype)
            dp = radii[:, None, :] * spatial.cross(eye[None], n[:, None, :])
            H = jnp.concatenate([jnp.broadcast_to(eye, (k, 3, 3)), dp + spatial.cross(p[:, None, :], eye[None])], -1)
            local["ellipsoid"] = (n, p)
        Rs.append(R)
        ps.append(p)
        Hs.append(H.reshape(-1, 6))
        if kind == "free":
            local["free"] = p
    R_FM = jnp.concatenate(Rs)[tree.mob_row]
    p_FM = jnp.concatenate(ps)[tree.mob_row]
    H = jnp.concatenate(Hs)[tree.dof_row] if tree.nu else jnp.zeros((0, 6), dtype)
    return R_FM, p_FM, H, local


def _motion_to_ground(R, p, m, rows=None):
    """Motion vectors ``m (k, 6)`` given in frames at poses ``(R, p)`` (about their
    origins), re-expressed in Ground about Ground's origin. With ``rows (k,)``, vector
    ``i`` is in frame ``rows[i]`` of ``(R (n,3,3), p (n,3))``."""
    # R's columns gathered one by one: small arrays, fused into their products (a
    # gathered (k, 3, 3) block would be stored, and buffers over 512 bytes turn off
    # XLA's cheap sequential execution of small programs)
    cols = [R[:, :, c] if rows is None else R[:, :, c][rows] for c in range(3)]
    w = sum(cols[c] * m[:, c, None] for c in range(3))
    v = sum(cols[c] * m[:, 3 + c, None] for c in range(3)) + spatial.cross(p if rows is None else p[rows], w)
    return jnp.concatenate([w, v], -1)


# from this depth on, poses are composed level by level: pointer jumping does
# log2(depth) passes over every body, a scan one short pass per level (cheaper for
# chains of 6 and more, single or vmapped; shallow, wide trees favour jumping, and so
# does reverse mode: gait10dof18musc, depth 6, has its gradient 4% faster by jumping)
_SCAN_DEPTH = 7


@functools.lru_cache(maxsize=64)
def _level_slots(tree: Tree):
    """Bodies by level, padded to the widest level ``W``: ``body (L, W)`` the body in
    each slot (``n``: padding), ``parent (L, W)`` its parent's slot in the level above
    (0 at the first level, whose parent is Ground), ``flat (n,)`` each body's slot in
    the flattened ``(L * W)`` layout (Ground: ``L * W``, an appended identity)."""
    L, W, n = len(tree.levels), max(len(b) for b in tree.levels), tree.n_mob
    body = np.full((L, W), n, np.int32)
    parent = np.zeros((L, W), np.int32)
    flat = np.full(n, L * W, np.int32)
    for lv, bodies in enumerate(tree.levels):
        body[lv, : len(bodies)] = bodies
        flat[bodies] = lv * W + np.arange(len(bodies))
        if lv:
            parent[lv, : len(bodies)] = flat[tree.parent[bodies]] - (lv - 1) * W
    return body, parent, flat


def _poses_in_ground(tree: Tree, R, p):
    """Compose every body's pose in its parent ``(R (n,3,3), p (n,3))`` (Ground's the
    identity) into its pose in Ground."""
    if len(tree.levels) < _SCAN_DEPTH:
        # pointer jumping: after step k each pose is relative to the ancestor 2^(k+1)
        # levels up (Ground's pose is the identity: ancestors beyond it change nothing)
        for ptr in tree.jumps:
            R, p = spatial.compose((R[ptr], p[ptr]), (R, p))
        return R, p
    body, parent, flat = _level_slots(tree)
    dtype = R.dtype
    eye, zero = jnp.eye(3, dtype=dtype)[None], jnp.zeros((1, 3), dtype)

    def level(above, x):
        R_up, p_up = above
        R_l, p_l, up = x
        pose = spatial.compose((R_up[up], p_up[up]), (R_l, p_l))
        return pose, pose

    W = body.shape[1]
    first = (jnp.broadcast_to(eye, (W, 3, 3)), jnp.zeros((W, 3), dtype))
    _, (R_s, p_s) = jax.lax.scan(
        level, first, (jnp.concatenate([R, eye])[body], jnp.concatenate([p, zero])[body], jnp.asarray(parent))
    )
    R_s = jnp.concatenate([R_s.reshape(-1, 3, 3), eye])
    p_s = jnp.concatenate([p_s.reshape(-1, 3), zero])
    return R_s[flat], p_s[flat]


def position_kinematics(tree: Tree, params: TreeParams, q) -> Positions:
    """Poses of all bodies and motion subspaces of all speeds (Position stage).

    **Arguments:** ``tree``; ``params`` from ``tree_params``; ``q (nq,)``.

    **Returns:** ``Positions``.
    """
    R_FM, p_FM, H, local = _local_kinematics(tree, params, q)
    rv = tree.reversed
    if rv.any():
        # a reversed mobilizer keeps X_FM(q) with F on the outboard body
        R_J = jnp.where(rv[:, None, None], jnp.swapaxes(R_FM, -1, -2), R_FM)
        p_J = jnp.where(rv[:, None], -spatial.mat_vec(jnp.swapaxes(R_FM, -1, -2), p_FM), p_FM)
    else:
        R_J, p_J = R_FM, p_FM
    R, p = spatial.compose(
        spatial.compose((params["R_in"], params["p_in"]), (R_J, p_J)),
        spatial.inverse((params["R_out"], params["p_out"])),
    )
    R0, p0 = _poses_in_ground(tree, R, p)
    # joint frame F in Ground: on the inboard body, or on the outboard one if reversed
    par = tree.parent
    if rv.any():
        Rb = jnp.where(rv[:, None, None], R0, R0[par])
        pb = jnp.where(rv[:, None], p0, p0[par])
        Rf = jnp.where(rv[:, None, None], params["R_out"], params["R_in"])
        pf = jnp.where(rv[:, None], params["p_out"], params["p_in"])
    else:
        Rb, pb, Rf, pf = R0[par], p0[par], params["R_in"], params["p_in"]
    R_F, p_F = spatial.compose((Rb, pb), (Rf, pf))
    S = _motion_to_ground(R_F, p_F, H, tree.dof_mob)
    if rv.any():
        S = jnp.where(rv[tree.dof_mob][:, None], -S, S)
    return Positions(R0=R0, p0=p0, R_F=R_F, p_F=p_F, S=S, q=q, local=local)


def velocity_kinematics(tree: Tree, params: TreeParams, pos: Positions, u) -> Velocities:
    """Spatial velocities and velocity-product accelerations of all bodies (Velocity stage).

    **Arguments:** ``tree``; ``params``; ``pos`` from ``position_kinematics``; ``u (nu,)``.

    **Returns:** ``Velocities``.
    """
    dtype = u.dtype
    n = tree.n_mob
    Su = pos.S * u[:, None]
    V = jnp.asarray(tree.anc_dof, dtype) @ Su
    V_rel = V - V[tree.parent]
    # Hdot u of every mobilizer, in F about F's origin
    parts = [jnp.zeros((1, 6), dtype)]
    tf = tree.groups["transform"]
    if len(tf):
        e, p, dth, d2th = pos.local["transform"]
        qd = jnp.concatenate([u, jnp.zeros(1, dtype)])[tree.tf_uidx]
        parts.append(
            jax.vmap(_transform_bias)(params["tf_axis"], e, p, dth, d2th, qd, jnp.asarray(tree.tf_spin, dtype))
        )
    for kind in ROTATION_KINDS:
        ms = tree.groups[kind]
        if not len(ms):
            continue
        us = _kind_u(tree, kind, u)
        w = us[:, :3]
        if kind == "ball":
            parts.append(jnp.zeros((len(ms), 6), dtype))
        elif kind == "free":
            parts.append(jnp.concatenate([jnp.zeros_like(w), spatial.cross(us[:, 3:], w)], -1))
        else:
            nrm, p = pos.local["ellipsoid"]
            radii = params["radii"]
            ndot = spatial.cross(w, nrm)
            pdot = radii * ndot
            pdd = radii * spatial.cross(w, ndot)
            parts.append(jnp.concatenate([jnp.zeros_like(w), pdd + spatial.cross(pdot, w)], -1))
    Hdu = jnp.concatenate(parts)[tree.mob_row]
    Hdu = _motion_to_ground(pos.R_F, pos.p_F, Hdu)
    if tree.reversed.any():
        Hdu = jnp.where(tree.reversed[:, None], -Hdu, Hdu)
    C_rel = spatial.motion_cross(V[tree.parent], V_rel) + Hdu
    C = jnp.asarray(tree.anc, dtype) @ C_rel.at[0].set(0.0) if n > 1 else jnp.zeros((n, 6), dtype)
    return Velocities(V=V, C=C, u=u, qdot=qdot_from_u(tree, pos.q, u))


def euler_rates(angles, w):
    """Body-fixed XYZ angle rates from the angular velocity ``w`` in the parent frame.

    **Arguments:** ``angles (...,3)``; ``w (...,3)``. Singular at a middle angle of
    ``+-pi/2`` (gimbal lock), as Simbody's.
    """
    sa, ca = jnp.sin(angles[..., 0]), jnp.cos(angles[..., 0])
    sb, cb = jnp.sin(angles[..., 1]), jnp.cos(angles[..., 1])
    r3 = (ca * w[..., 2] - sa * w[..., 1]) / cb
    r2 = ca * w[..., 1] + sa * w[..., 2]
    r1 = w[..., 0] - sb * r3
    return jnp.stack([r1, r2, r3], -1)


def qdot_from_u(tree: Tree, q, u):
    """The kinematic differential equation ``qdot = N(q) u``.

    Transform joints have ``qdot = u``; Ball, Free and Ellipsoid joints map the angular
    velocity (in F) to Euler-angle or (unnormalized) quaternion rates.
    """
    parts = []
    tf = tree.groups["transform"]
    if len(tf):
        parts.append(u[np.concatenate([tree.u_start[m] + np.arange(tree.nu_mob[m]) for m in tf])])
    for kind in ROTATION_KINDS:
        ms = tree.groups[kind]
        if not len(ms):
            continue
        qs = _kind_q(tree, kind, q)
        us = _kind_u(tree, kind, u)
        w = us[:, :3]
        if tree.quaternions:
            rot = spatial.mat_vec(spatial.quat_derivative_matrix(qs[:, :4]), w)
        else:
            rot = euler_rates(qs[:, :3], w)
        piece = jnp.concatenate([rot, us[:, 3:6]], -1) if kind == "free" else rot
        parts.append(piece.reshape(-1))
    if not parts:
        return jnp.zeros(0, u.dtype)
    return jnp.concatenate(parts)[tree.qdot_perm]
