"""The spanning tree, compiled once into static index arrays, and its kinematics.

``compile_tree`` runs the multibody graph maker on the model's bodies and joints and
numbers the mobilized bodies parents-first (index 0 is Ground). Everything it returns
is static numpy. ``tree_params`` gathers the traced parameters (mass properties,
constant joint offsets, transform-axis functions) from the model, and
``position_kinematics`` / ``velocity_kinematics`` compute, for all bodies at once:

- ``X0``: each body's pose in Ground (one level of the tree per step);
- ``S``: the motion subspace of every generalized speed as a spatial motion vector in
  Ground, about Ground's origin, so that body velocities are ``V = sum over ancestor
  dofs of S u`` (a masked matrix product, no recursion);
- ``V`` and the velocity-product accelerations ``C`` of every body.

Spatial vectors are expressed in Ground about Ground's origin throughout, which turns
the mass matrix and inverse dynamics into a few dense products (see ``dynamics``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import ModelError
from ..function_bank import FunctionBank, bank_eval, bank_params
from ..graph import GraphError, MultibodyGraphMaker
from .frames import Body, Ground, PhysicalFrame, PhysicalOffsetFrame
from .joints import ROTATIONAL, TRANSLATIONAL, BallJoint, CustomJoint, FreeJoint, Joint

__all__ = ["Tree", "CoordinateInfo", "compile_tree", "tree_params", "position_kinematics",
           "velocity_kinematics", "qdot_from_u", "TreeParams", "Positions", "Velocities"]


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
    their master's path), ``parent[m]``, ``joint_paths[m]`` (``""`` for Ground and
    added free joints), ``kind[m]`` (``"ground"``, ``"transform"``, ``"ball"``,
    ``"free"``), ``reversed[m]``, ``q_start``/``nq_mob``, ``u_start``/``nu_mob``.
    ``anc[i, j]``: whether ``j`` is ``i`` or an ancestor of ``i``. Per speed ``d``:
    ``dof_mob[d]``, ``dof_col[d]``.
    """

    n_mob: int
    nq: int
    nu: int
    body_paths: tuple
    is_slave: np.ndarray
    fragments: np.ndarray
    parent: np.ndarray
    levels: tuple
    joint_paths: tuple
    kind: tuple
    reversed: np.ndarray
    q_start: np.ndarray
    nq_mob: np.ndarray
    u_start: np.ndarray
    nu_mob: np.ndarray
    anc: np.ndarray
    dof_mob: np.ndarray
    dof_col: np.ndarray
    groups: dict
    tf_qidx: np.ndarray
    tf_col: np.ndarray
    tf_bank: FunctionBank
    frames: dict
    coordinates: dict
    slave_welds: tuple
    q_names: tuple
    u_names: tuple
    quaternions: bool
    graph_dump: str
    quat_q: np.ndarray

    @property
    def n_bodies(self) -> int:
        """Number of mobilized bodies including Ground."""
        return self.n_mob


# -- compile (static, pure Python) ------------------------------------------------------


def _frame_chain(model, path: str, connections: dict) -> tuple[str, tuple[str, ...]]:
    """Resolve a PhysicalFrame to its base body path and the offset frames in between."""
    chain = []
    seen = set()
    while True:
        comp = model.find(path)
        if isinstance(comp, (Body, Ground)):
            return path, tuple(reversed(chain))
        if not isinstance(comp, PhysicalOffsetFrame):
            raise ModelError(path, f"{type(comp).__name__} is not a PhysicalFrame simjax can attach to")
        if path in seen:
            raise ModelError(path, "offset frames form a cycle")
        seen.add(path)
        chain.append(path)
        path = connections[(path, "parent")]


def _concrete_mass(body) -> float:
    m = body.mass
    if isinstance(m, np.ndarray):
        return float(m)
    return 1.0


def _joint_nu(joint: Joint) -> int:
    return len(joint.coordinates)


def compile_tree(model, connections: dict, use_quaternions: bool = False) -> Tree:
    """Build the static tree of a model (runs once per model structure).

    **Arguments:**

    - ``model``: the Model.
    - ``connections``: resolved sockets, ``{(component path, socket): target path}``.
    - ``use_quaternions``: parametrize Ball and Free joints by quaternions (nq=4/7)
      instead of OpenSim's default body-fixed XYZ angles (nq=3/6).

    **Returns:** a ``Tree``.

    **Raises:** ``ModelError`` for impossible structures (a joint whose parent and child
    are the same body, a massless terminal body, ...).
    """
    ground_path = "/ground"
    body_entries = [(p, c) for p, c in model.walk() if isinstance(c, Body)]
    joint_entries = [(p, c) for p, c in model.walk() if isinstance(c, Joint)]

    gm = MultibodyGraphMaker(weld_type_name="WeldJoint", free_type_name="FreeJoint")
    registered = {"WeldJoint", "FreeJoint"}
    gm.add_body(ground_path, float("inf"), False, None)
    for p, b in body_entries:
        gm.add_body(p, _concrete_mass(b), False, p)
    frames: dict[str, tuple[str, tuple[str, ...]]] = {}

    def frame_of(path: str):
        if path not in frames:
            frames[path] = _frame_chain(model, path, connections)
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
            raise ModelError(p, f"parent frame {pf!r} and child frame {cf!r} are on the same body {pb!r}")
        joint_sides[p] = (pf, cf)
        try:
            gm.add_joint(p, tname, pb, cb, False, p)
        except GraphError as e:
            raise ModelError(p, str(e)) from None
    for p, _ in body_entries:
        frame_of(p)
    frame_of(ground_path)
    for p, c in model.walk():
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
            j = model.find(jp)
            kinds.append({BallJoint: "ball", FreeJoint: "free"}.get(type(j), "transform"))
    levels = tuple(np.flatnonzero(level == L).astype(np.int32) for L in range(1, int(level.max(initial=0)) + 1))

    # state layout, per mobilizer in order
    nq_mob = np.zeros(n_mob, dtype=np.int32)
    nu_mob = np.zeros(n_mob, dtype=np.int32)
    for i, k in enumerate(kinds):
        if k == "transform":
            nu_mob[i] = nq_mob[i] = _joint_nu(model.find(joint_paths[i]))
        elif k == "ball":
            nu_mob[i], nq_mob[i] = 3, (4 if use_quaternions else 3)
        elif k == "free":
            nu_mob[i], nq_mob[i] = 6, (7 if use_quaternions else 6)
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
            base = body_paths[i] + "/free"
            rot = [f"{base}_r{a}" for a in "xyz"]
            tra = [f"{base}_t{a}" for a in "xyz"]
            cnames = rot + tra
            ctypes = [ROTATIONAL] * 3 + [TRANSLATIONAL] * 3
            cpaths = [None] * 6
        else:
            j = model.find(jp)
            cpaths = [f"{jp}/{c.name}" for c in j.coordinates]
            cnames = cpaths
            ctypes = list(j.motion_types())
        for col, (cname, ctype, cpath) in enumerate(zip(cnames, ctypes, cpaths)):
            ui = int(u_start[i] + col)
            u_names[ui] = f"{cname}/speed" if cpath else f"{cname}_speed"
            if k in ("ball", "free") and use_quaternions:
                qi = -1 if col < 3 else int(q_start[i] + 4 + col - 3)
            else:
                qi = int(q_start[i] + col)
            if qi >= 0:
                q_names[qi] = f"{cname}/value" if cpath else f"{cname}_value"
            if cpath:
                coordinates[cpath] = CoordinateInfo(i, col, qi, ui, ctype, jp)
        if k in ("ball", "free") and use_quaternions:
            base = jp or body_paths[i] + "/free"
            for a, comp in enumerate("wxyz"):
                q_names[int(q_start[i]) + a] = f"{base}/quaternion_{comp}"
            quat_q.append(int(q_start[i]))

    # transform joints: per-axis coordinate indices and function kinds
    tf_rows = np.flatnonzero(np.asarray([k == "transform" for k in kinds])).astype(np.int32)
    tf_qidx = np.full((len(tf_rows), 6), nq, dtype=np.int32)
    tf_col = np.full((len(tf_rows), 6), -1, dtype=np.int32)
    axis_functions = []
    for r, m in enumerate(tf_rows):
        j = model.find(joint_paths[m])
        names = [c.name for c in j.coordinates]
        for a, ax in enumerate(j.transform_axes().axes):
            if ax.coordinates:
                col = names.index(ax.coordinates[0])
                tf_col[r, a] = col
                tf_qidx[r, a] = q_start[m] + col
            axis_functions.append(ax.function)
    groups = {k: np.flatnonzero(np.asarray(kinds) == k).astype(np.int32) for k in ("transform", "ball", "free")}
    return Tree(
        n_mob=n_mob, nq=nq, nu=nu, body_paths=tuple(body_paths), is_slave=np.asarray(is_slave),
        fragments=np.asarray(fragments, dtype=np.float64), parent=parent, levels=levels,
        joint_paths=tuple(joint_paths), kind=tuple(kinds), reversed=np.asarray(rev), q_start=q_start,
        nq_mob=nq_mob, u_start=u_start, nu_mob=nu_mob, anc=anc, dof_mob=dof_mob, dof_col=dof_col,
        groups=groups, tf_qidx=tf_qidx, tf_col=tf_col,
        tf_bank=FunctionBank.of(axis_functions), frames=frames, coordinates=coordinates,
        slave_welds=tuple((int(parent_mob), int(slave_mob)) for parent_mob, slave_mob in
                          _slave_pairs(gm, body_to_mob)),
        q_names=tuple(q_names), u_names=tuple(u_names), quaternions=bool(use_quaternions),
        graph_dump=gm.dump_graph(), quat_q=np.asarray(quat_q, dtype=np.int32),
    )


def _slave_pairs(gm, body_to_mob):
    for lc in gm.loop_constraints:
        if lc.is_slave_weld:
            yield body_to_mob[lc.parent_body], body_to_mob[lc.child_body]
        elif lc.type_name != gm.free_type_name:
            raise ModelError(gm.joints[lc.joint].name, "loop-joint constraints are not supported")


# -- traced parameters ----------------------------------------------------------------


class TreeParams(dict):
    """Traced arrays of the tree, gathered from the model's properties (a dict pytree)."""


jax.tree_util.register_pytree_node(
    TreeParams, lambda d: (tuple(d.values()), tuple(d.keys())), lambda k, v: TreeParams(zip(k, v)))


def _offset_transform(model, chain: tuple[str, ...]):
    R, p = spatial.identity_transform(jnp.result_type(float))
    for fp in chain:
        R, p = spatial.compose((R, p), model.find(fp).offset_transform())
    return R, p


def frame_offset(model, tree: Tree, path: str):
    """``(mob index, X_BF)``: the body a frame is fixed to and its constant pose in it."""
    body, chain = tree.frames[path]
    mob = tree.body_paths.index(body)
    return mob, _offset_transform(model, chain)


def tree_params(model, tree: Tree) -> TreeParams:
    """Gather the tree's traced parameters from the model.

    **Returns:** a ``TreeParams`` with ``mass (n)``, ``com (n,3)``, ``inertia (n,3,3)``
    (about the mass center, in the body frame; slaves share their master's equally),
    ``R_in, p_in`` / ``R_out, p_out`` (pose of the joint frame on the inboard /
    outboard body in that body), ``tf_axis (n_tf,6,3)``, ``tf_functions`` (a
    function bank of the transform axes) and ``gravity``.
    """
    dtype = jnp.result_type(float)
    n = tree.n_mob
    masses, coms, inertias = [jnp.zeros((), dtype)], [jnp.zeros(3, dtype)], [jnp.zeros((3, 3), dtype)]
    for m in range(1, n):
        b = model.find(tree.body_paths[m])
        frac = 1.0 / tree.fragments[m]
        masses.append(jnp.asarray(b.mass, dtype) * frac)
        coms.append(jnp.asarray(b.mass_center, dtype))
        inertias.append(spatial.inertia_matrix(jnp.asarray(b.inertia, dtype)) * frac)
    eye = jnp.eye(3, dtype=dtype)
    zero = jnp.zeros(3, dtype=dtype)
    Rin, pin, Rout, pout = [eye], [zero], [eye], [zero]
    for m in range(1, n):
        jp = tree.joint_paths[m]
        if not jp:
            Rin.append(eye), pin.append(zero), Rout.append(eye), pout.append(zero)
            continue
        pf = _joint_frame_path(model, jp, "parent_frame")
        cf = _joint_frame_path(model, jp, "child_frame")
        XF = _offset_transform(model, tree.frames[pf][1])
        XM = _offset_transform(model, tree.frames[cf][1])
        if tree.reversed[m]:
            XF, XM = XM, XF
        Rin.append(XF[0]), pin.append(XF[1]), Rout.append(XM[0]), pout.append(XM[1])
    tf = tree.groups["transform"]
    axes, functions, has_arg = [], [], []
    for m in tf:
        st = model.find(tree.joint_paths[m]).transform_axes()
        axes.append(jnp.stack([jnp.asarray(a.axis, dtype) / jnp.linalg.norm(jnp.asarray(a.axis, dtype))
                               for a in st.axes]))
        functions.extend(a.function for a in st.axes)
        has_arg.extend(bool(a.coordinates) for a in st.axes)
    p = TreeParams(
        mass=jnp.stack(masses), com=jnp.stack(coms), inertia=jnp.stack(inertias),
        R_in=jnp.stack(Rin), p_in=jnp.stack(pin), R_out=jnp.stack(Rout), p_out=jnp.stack(pout),
        tf_axis=jnp.stack(axes) if len(tf) else jnp.zeros((0, 6, 3), dtype),
        gravity=jnp.asarray(model.gravity, dtype),
        tf_functions=bank_params(tree.tf_bank, functions, has_arg),
    )
    return p


def _joint_frame_path(model, joint_path: str, socket: str) -> str:
    from ..model import resolve_path

    return resolve_path(getattr(model.find(joint_path), socket), joint_path)


# -- kinematics -----------------------------------------------------------------------


def _axis_values(tree: Tree, params: TreeParams, q_ext):
    """Value, first and second derivative of every transform-axis function."""
    x = q_ext[tree.tf_qidx.reshape(-1)]
    vals = bank_eval(tree.tf_bank, params["tf_functions"], x, orders=(0, 1, 2))
    return tuple(v.reshape(tree.tf_qidx.shape) for v in vals)


def _transform_joint(axes, th, dth, d2th, qd, col):
    """Kinematics of one transform joint.

    **Arguments:** ``axes (6,3)``; per-axis function value ``th``, derivatives
    ``dth``, ``d2th`` and coordinate rate ``qd`` (6,); ``col (6,)`` local column of
    each axis' coordinate (-1: none).

    **Returns:** ``R_FM, p_FM``, ``H (6, 6)`` (columns per local coordinate, spatial
    velocity of M in F about F's origin), ``Hu`` (6,) and ``Hdot_u`` (6,).
    """
    R1 = spatial.rotation_about_axis(axes[0], th[0])
    R2 = spatial.rotation_about_axis(axes[1], th[1])
    R3 = spatial.rotation_about_axis(axes[2], th[2])
    R12 = R1 @ R2
    R = R12 @ R3
    e = jnp.stack([axes[0], R1 @ axes[1], R12 @ axes[2]])
    p = th[3:] @ axes[3:]
    rate = dth * qd
    w_parts = e * rate[:3, None]
    w = w_parts.sum(0)
    pdot = rate[3:] @ axes[3:]
    wcols = e * dth[:3, None]
    per_axis = jnp.concatenate([
        jnp.concatenate([wcols, jnp.cross(p, wcols)], -1),
        jnp.concatenate([jnp.zeros((3, 3), axes.dtype), axes[3:] * dth[3:, None]], -1),
    ])  # (6 axes, 6)
    onehot = (col[:, None] == jnp.arange(6)[None, :]).astype(axes.dtype)
    H = per_axis.T @ onehot
    Hu = jnp.concatenate([w, pdot + jnp.cross(p, w)])
    acc2 = d2th * qd * qd
    alpha = (jnp.cross(w_parts[0], e[1]) * rate[1] + jnp.cross(w_parts[0] + w_parts[1], e[2]) * rate[2]
             + (e * acc2[:3, None]).sum(0))
    lin = acc2[3:] @ axes[3:] + jnp.cross(pdot, w) + jnp.cross(p, alpha)
    return R, p, H, Hu, jnp.concatenate([alpha, lin])


def _euler_rate_matrix(angles):
    """``E`` with ``w_F = E @ angle_rates`` for body-fixed XYZ angles."""
    dtype = angles.dtype
    Rx = spatial.rotation_x(angles[0])
    Rxy = Rx @ spatial.rotation_y(angles[1])
    return jnp.stack([jnp.array([1.0, 0.0, 0.0], dtype), Rx[:, 1], Rxy[:, 2]], -1)


@dataclasses.dataclass(frozen=True)
class _Local:
    R: Any
    p: Any
    H: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Positions:
    """Position-stage kinematics of all mobilized bodies.

    ``R0 (n,3,3)``, ``p0 (n,3)``: body poses in Ground. ``R_F (n,3,3)``, ``p_F (n,3)``:
    the pose in Ground of each mobilizer's joint frame F. ``H (n,6,6)``: local motion
    subspaces (in F, about F's origin). ``S (nu,6)``: every speed's motion subspace
    in Ground about its origin (sign included for reversed mobilizers).
    """

    R0: Any
    p0: Any
    R_F: Any
    p_F: Any
    H: Any
    S: Any
    q: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Velocities:
    """Velocity-stage kinematics: ``V (n,6)`` body spatial velocities and ``C (n,6)``
    velocity-product accelerations (both in Ground about its origin), ``u``, ``qdot``."""

    V: Any
    C: Any
    u: Any
    qdot: Any


def _local_transforms(tree: Tree, params: TreeParams, q, u=None):
    """Joint-local R_FM, p_FM, H for every mobilizer, plus Hu and Hdot_u if ``u`` given."""
    dtype = q.dtype
    n = tree.n_mob
    R = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (n, 3, 3))
    p = jnp.zeros((n, 3), dtype)
    H = jnp.zeros((n, 6, 6), dtype)
    Hu = jnp.zeros((n, 6), dtype)
    Hdu = jnp.zeros((n, 6), dtype)
    q_ext = jnp.concatenate([q, jnp.zeros(1, dtype)])
    u_ext = jnp.concatenate([u if u is not None else jnp.zeros(tree.nu, dtype), jnp.zeros(1, dtype)])
    tf = tree.groups["transform"]
    if len(tf):
        th, dth, d2th = _axis_values(tree, params, q_ext)
        uidx = np.where(tree.tf_col >= 0, tree.u_start[tf][:, None] + tree.tf_col, tree.nu)
        qd = u_ext[uidx]
        Rt, pt, Ht, Hut, Hdt = jax.vmap(_transform_joint)(params["tf_axis"], th, dth, d2th, qd,
                                                         jnp.asarray(tree.tf_col))
        R, p, H = R.at[tf].set(Rt), p.at[tf].set(pt), H.at[tf].set(Ht)
        Hu, Hdu = Hu.at[tf].set(Hut), Hdu.at[tf].set(Hdt)
    for kind in ("ball", "free"):
        ms = tree.groups[kind]
        if not len(ms):
            continue
        qs = q[tree.q_start[ms][:, None] + np.arange(tree.nq_mob[ms[0]])]
        if tree.quaternions:
            Rk = spatial.quat_to_rotation(qs[:, :4])
            pk = qs[:, 4:7] if kind == "free" else jnp.zeros((len(ms), 3), dtype)
        else:
            Rk = spatial.xyz_body_rotation(qs[:, :3])
            pk = qs[:, 3:6] if kind == "free" else jnp.zeros((len(ms), 3), dtype)
        eye = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (len(ms), 3, 3))
        Hk = jnp.zeros((len(ms), 6, 6), dtype)
        Hk = Hk.at[:, :3, :3].set(eye)
        Hk = Hk.at[:, 3:, :3].set(spatial.skew(pk))
        if kind == "free":
            Hk = Hk.at[:, 3:, 3:6].set(eye)
        R, p, H = R.at[ms].set(Rk), p.at[ms].set(pk), H.at[ms].set(Hk)
        if u is not None:
            us = u[tree.u_start[ms][:, None] + np.arange(tree.nu_mob[ms[0]])]
            w = us[:, :3]
            v = us[:, 3:6] if kind == "free" else jnp.zeros_like(w)
            Hu = Hu.at[ms].set(jnp.concatenate([w, v + jnp.cross(pk, w)], -1))
            Hdu = Hdu.at[ms].set(jnp.concatenate([jnp.zeros_like(w), jnp.cross(v, w)], -1))
    return R, p, H, Hu, Hdu


def position_kinematics(tree: Tree, params: TreeParams, q) -> Positions:
    """Poses of all bodies and motion subspaces of all speeds (Position stage).

    **Arguments:** ``tree``; ``params`` from ``tree_params``; ``q (nq,)``.

    **Returns:** ``Positions``.
    """
    R_FM, p_FM, H, _, _ = _local_transforms(tree, params, q)
    # pose of the outboard body in the inboard body: X_in * J * X_out^-1
    R_J = jnp.where(tree.reversed[:, None, None], jnp.swapaxes(R_FM, -1, -2), R_FM)
    p_J = jnp.where(tree.reversed[:, None], -jnp.einsum("nji,nj->ni", R_FM, p_FM), p_FM)
    X_io = spatial.compose(spatial.compose((params["R_in"], params["p_in"]), (R_J, p_J)),
                           spatial.inverse((params["R_out"], params["p_out"])))
    dtype = q.dtype
    R0 = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (tree.n_mob, 3, 3))
    p0 = jnp.zeros((tree.n_mob, 3), dtype)
    for lev in tree.levels:
        par = tree.parent[lev]
        Rl, pl = spatial.compose((R0[par], p0[par]), (X_io[0][lev], X_io[1][lev]))
        R0, p0 = R0.at[lev].set(Rl), p0.at[lev].set(pl)
    # joint frame F in Ground: on the inboard body, or the outboard one if reversed
    X_F_in = spatial.compose((R0[tree.parent], p0[tree.parent]), (params["R_in"], params["p_in"]))
    X_F_out = spatial.compose((R0, p0), (params["R_out"], params["p_out"]))
    rv = tree.reversed
    R_F = jnp.where(rv[:, None, None], X_F_out[0], X_F_in[0])
    p_F = jnp.where(rv[:, None], X_F_out[1], X_F_in[1])
    sign = jnp.where(rv, -1.0, 1.0).astype(dtype)
    Ad = spatial.motion_transform((R_F, p_F)) * sign[:, None, None]
    S_mob = Ad @ H  # (n, 6, 6 cols)
    S = S_mob[tree.dof_mob, :, tree.dof_col] if tree.nu else jnp.zeros((0, 6), dtype)
    return Positions(R0=R0, p0=p0, R_F=R_F, p_F=p_F, H=H, S=S, q=q)


def velocity_kinematics(tree: Tree, params: TreeParams, pos: Positions, u) -> Velocities:
    """Spatial velocities and velocity-product accelerations of all bodies (Velocity stage).

    **Arguments:** ``tree``; ``params``; ``pos`` from ``position_kinematics``; ``u (nu,)``.

    **Returns:** ``Velocities``.
    """
    _, _, _, Hu, Hdu = _local_transforms(tree, params, pos.q, u)
    sign = jnp.where(tree.reversed, -1.0, 1.0).astype(u.dtype)
    Ad = spatial.motion_transform((pos.R_F, pos.p_F)) * sign[:, None, None]
    V_rel = jnp.einsum("nij,nj->ni", Ad, Hu)
    anc = jnp.asarray(tree.anc, u.dtype)
    V = anc @ V_rel
    C_rel = spatial.motion_cross(V[tree.parent], V_rel) + jnp.einsum("nij,nj->ni", Ad, Hdu)
    C_rel = C_rel.at[0].set(0.0)
    C = anc @ C_rel
    return Velocities(V=V, C=C, u=u, qdot=qdot_from_u(tree, pos.q, u))


def qdot_from_u(tree: Tree, q, u):
    """The kinematic differential equation ``qdot = N(q) u``.

    Transform joints have ``qdot = u``; Ball and Free joints map the angular velocity
    (in F) to Euler-angle or quaternion rates.
    """
    dtype = u.dtype
    qdot = jnp.zeros(tree.nq, dtype)
    tf = tree.groups["transform"]
    if len(tf):
        qi = np.concatenate([tree.q_start[m] + np.arange(tree.nq_mob[m]) for m in tf])
        ui = np.concatenate([tree.u_start[m] + np.arange(tree.nu_mob[m]) for m in tf])
        qdot = qdot.at[qi].set(u[ui])
    for kind in ("ball", "free"):
        ms = tree.groups[kind]
        if not len(ms):
            continue
        nqk = int(tree.nq_mob[ms[0]])
        qs = q[tree.q_start[ms][:, None] + np.arange(nqk)]
        us = u[tree.u_start[ms][:, None] + np.arange(tree.nu_mob[ms[0]])]
        w = us[:, :3]
        if tree.quaternions:
            rot = jnp.einsum("nij,nj->ni", spatial.quat_derivative_matrix(qs[:, :4]), w)
        else:
            rot = jnp.linalg.solve(jax.vmap(_euler_rate_matrix)(qs[:, :3]), w[..., None])[..., 0]
        parts = [rot] + ([us[:, 3:6]] if kind == "free" else [])
        qdot = qdot.at[tree.q_start[ms][:, None] + np.arange(nqk)].set(jnp.concatenate(parts, -1))
    return qdot
