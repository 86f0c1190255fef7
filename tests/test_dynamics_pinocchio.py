"""Rigid-body dynamics against Pinocchio on random kinematic trees.

32 random trees (1 to 40 bodies each, two of 40; revolute joints about arbitrary axes as
CustomJoints and offset PinJoints, prismatic joints as CustomJoints and offset
SliderJoints, Ball, Free, Planar and Universal joints; random parent and child
offsets, masses and physically valid inertias) are built in both engines. To share
compilation, the trees are grouped into forests of 8 independent trees hanging from
Ground; each tree is then checked on its own block. At 3 random states per forest:

- the mass matrix (CRBA) against Pinocchio's ``crba``;
- inverse dynamics (RNEA) against ``rnea``;
- forward dynamics against ``aba``;
- ABA == CRBA + Cholesky inside simjax, and forward(inverse(a)) == a.

Ball and Free joints use OpenSim's parametrization (body-fixed XYZ angles, angular
velocity of the child in the parent, expressed in the parent) or quaternions; the
test maps them to Pinocchio's (quaternion ``(x, y, z, w)``, velocities in the child
frame, linear before angular for the free flyer).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax import spatial
from simjax.forward import Context
from simjax.mechanics import dynamics as dyn

pin = pytest.importorskip("pinocchio")

KINDS = ("pin", "custom_rev", "slider", "custom_pri", "ball", "free", "planar", "universal")
TOL = 1e-10


def _rot(angles):
    return np.asarray(spatial.xyz_body_rotation(np.asarray(angles, float)))


def _random_inertia(rng):
    """Mass, mass centre and inertia about it of a few point masses (always valid)."""
    pts = rng.normal(size=(4, 3)) * rng.uniform(0.05, 0.3)
    w = rng.uniform(0.1, 1.0, size=4)
    m = w.sum()
    com = (w[:, None] * pts).sum(0) / m
    d = pts - com
    inertia = sum(wi * (di @ di * np.eye(3) - np.outer(di, di)) for wi, di in zip(w, d))
    return m, com + rng.normal(size=3) * 0.2, inertia


def _other_axes(axis):
    return np.linalg.svd(axis[None])[2][1:]


def _joint(kind, name, parent, child, axis, coord, kw):
    if kind == "pin":
        return sj.PinJoint(name, parent, child, **kw), pin.JointModelRZ()
    if kind == "slider":
        return sj.SliderJoint(name, parent, child, **kw), pin.JointModelPX()
    if kind == "ball":
        return sj.BallJoint(name, parent, child, **kw), pin.JointModelSpherical()
    if kind == "free":
        return sj.FreeJoint(name, parent, child, **kw), pin.JointModelFreeFlyer()
    if kind == "planar":
        return sj.PlanarJoint(name, parent, child, **kw), pin.JointModelPlanar()
    if kind == "universal":
        return (
            sj.UniversalJoint(name, parent, child, **kw),
            pin.JointModelUniversal(np.array([1.0, 0, 0]), np.array([0, 1.0, 0])),
        )
    o1, o2 = _other_axes(axis)
    if kind == "custom_rev":
        axes = [
            sj.TransformAxis(coordinates=(coord,), axis=axis),
            sj.TransformAxis(axis=o1),
            sj.TransformAxis(axis=o2),
        ] + [sj.TransformAxis(axis=e) for e in np.eye(3)]
        jm = pin.JointModelRevoluteUnaligned(axis)
    else:
        axes = [sj.TransformAxis(axis=e) for e in np.eye(3)] + [
            sj.TransformAxis(coordinates=(coord,), axis=axis),
            sj.TransformAxis(axis=o1),
            sj.TransformAxis(axis=o2),
        ]
        jm = pin.JointModelPrismaticUnaligned(axis)
    return sj.CustomJoint(name, parent, child, spatial_transform=sj.SpatialTransform(axes=tuple(axes)), **kw), jm


def random_forest(seed, sizes, quaternions=False):
    """``sizes[t]`` random bodies per tree ``t``, all trees hanging from Ground.

    **Returns:** ``(sj.Model, pinocchio.Model, joints)`` with ``joints[t]`` the list of
    ``(kind, joint name)`` of tree ``t``.
    """
    rng = np.random.default_rng(seed)
    g = np.array([0.0, -9.80665, 0.0])
    model = sj.Model(f"forest{seed}", gravity=g, use_quaternions=quaternions)
    specs, trees = {}, []
    for t, n in enumerate(sizes):
        joints = []
        for b in range(1, n + 1):
            parent = int(rng.integers(0, b))
            kind = KINDS[int(rng.integers(len(KINDS)))]
            m, com, inertia = _random_inertia(rng)
            name, jname = f"t{t}b{b}", f"t{t}j{b}"
            model = model.add(
                sj.Body(
                    name,
                    mass=m,
                    mass_center=com,
                    inertia=(inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]),
                )
            )
            lp, op = rng.normal(size=3) * 0.3, rng.uniform(-np.pi, np.pi, 3)
            lc, oc = rng.normal(size=3) * 0.3, rng.uniform(-np.pi, np.pi, 3)
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            ppath = "/ground" if parent == 0 else f"/bodyset/t{t}b{parent}"
            kw = dict(location_in_parent=lp, orientation_in_parent=op, location_in_child=lc, orientation_in_child=oc)
            joint, jm = _joint(kind, jname, ppath, f"/bodyset/{name}", axis, f"c{t}_{b}", kw)
            model = model.add(joint)
            specs[(t, b)] = (
                (t, parent) if parent else None,
                jm,
                (_rot(op), lp),
                (_rot(oc), lc),
                m,
                com,
                inertia,
                jname,
            )
            joints.append((kind, jname))
        trees.append(joints)
    # Pinocchio's CRBA needs every subtree's speeds contiguous: add the joints depth first
    pm = pin.Model()
    pm.gravity = pin.Motion(g, np.zeros(3))
    children = {}
    for key, spec in specs.items():
        children.setdefault(spec[0], []).append(key)
    X_BM = {None: (np.eye(3), np.zeros(3))}
    pin_id = {None: 0}
    stack = list(reversed(children.get(None, [])))
    while stack:
        key = stack.pop()
        parent, jm, (R_F, p_F), (R_M, p_M), m, com, inertia, jname = specs[key]
        Rp, pp = X_BM[parent]
        jid = pm.addJoint(pin_id[parent], jm, pin.SE3(Rp.T @ R_F, Rp.T @ (p_F - pp)), jname)
        pm.appendBodyToJoint(jid, pin.Inertia(m, R_M.T @ (com - p_M), R_M.T @ inertia @ R_M), pin.SE3.Identity())
        X_BM[key], pin_id[key] = (R_M, p_M), jid
        stack.extend(reversed(children.get(key, [])))
    return model, pm, trees


def _quat_xyzw(R):
    q = np.asarray(spatial.rotation_to_quat(R))
    return np.array([q[1], q[2], q[3], q[0]])


def _joint_speeds(tree, jname):
    infos = sorted((c for c in tree.coordinates.values() if c.joint == f"/jointset/{jname}"), key=lambda c: c.col)
    return [c.u for c in infos], infos[0].mob


def map_state(system, pm, joints, q, u):
    """Pinocchio's ``(q, v)`` and ``T``, ``Tdot_u`` with ``v = T u``, ``vdot = T udot + Tdot_u``."""
    tree = system.topology.tree
    qp = np.zeros(pm.nq)
    T = np.zeros((pm.nv, tree.nu))
    Tdu = np.zeros(pm.nv)
    for kind, jname in joints:
        jj = pm.joints[pm.getJointId(jname)]
        iq, iv = jj.idx_q, jj.idx_v
        ui, mob = _joint_speeds(tree, jname)
        qs = q[tree.q_start[mob] : tree.q_start[mob] + tree.nq_mob[mob]]
        us = u[ui]
        if kind in ("ball", "free"):
            if tree.quaternions:
                R, p = np.asarray(spatial.quat_to_rotation(qs[:4])), qs[4:7]
            else:
                R, p = _rot(qs[:3]), qs[3:6]
            if kind == "ball":
                qp[iq : iq + 4] = _quat_xyzw(R)
                T[iv : iv + 3, ui] = R.T
            else:
                qp[iq : iq + 3], qp[iq + 3 : iq + 7] = p, _quat_xyzw(R)
                T[iv : iv + 3, ui[3:]] = R.T
                T[iv + 3 : iv + 6, ui[:3]] = R.T
                Tdu[iv : iv + 3] = -R.T @ np.cross(us[:3], us[3:])
        elif kind == "planar":
            th, x, y = qs
            c, s = np.cos(th), np.sin(th)
            R2 = np.array([[c, -s], [s, c]])
            qp[iq : iq + 4] = [x, y, c, s]
            T[iv : iv + 2, ui[1:]] = R2.T
            T[iv + 2, ui[0]] = 1.0
            Tdu[iv : iv + 2] = -us[0] * R2.T @ np.array([[0.0, -1.0], [1.0, 0.0]]) @ us[1:]
        else:
            for k in range(len(ui)):
                qp[iq + k] = qs[k]
                T[iv + k, ui[k]] = 1.0
    return qp, T @ u, T, Tdu


@eqx.filter_jit
def _evaluate(system, states, udot, tau):
    """Per state: M, RNEA torques for ``udot``, forward dynamics of those torques and
    of ``tau`` (CRBA + Cholesky, the path of ``sj.forward_dynamics``), and ABA of ``tau``."""

    def one(state, a, f):
        ctx = Context(system, state)
        tau_id = dyn.inverse_dynamics(ctx.tree, ctx.params, ctx.pos, ctx.vel, a)
        ab = dyn.aba(ctx.tree, ctx.params, ctx.pos, ctx.vel, f)
        fds = jax.vmap(lambda g: Context(system, state, mobility_forces=g).acc.udot)(jnp.stack([tau_id, f]))
        return ctx.mass_matrix, tau_id, fds[0], fds[1], ab

    return jax.vmap(one)(states, udot, tau)


def _rel(a, b):
    """Norm-wise relative difference."""
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


FORESTS = [
    (11, [40, 1, 7, 3, 2, 5, 1, 4], False),
    (12, [15, 20, 2, 9, 6, 4, 3, 1], False),
    (13, [25, 6, 14, 2, 8, 3, 1, 2], False),
    (14, [40, 3, 2, 5, 1, 6, 2, 4], True),
]


@pytest.mark.parametrize("seed,sizes,quaternions", FORESTS)
def test_random_trees_match_pinocchio(seed, sizes, quaternions):
    model, pm, trees = random_forest(seed, sizes, quaternions)
    system = model.build()
    tree = system.topology.tree
    rng = np.random.default_rng(seed)
    n_states = 3
    q = rng.uniform(-1.2, 1.2, (n_states, tree.nq))
    if quaternions:
        for k in tree.quat_q:
            quat = rng.normal(size=(n_states, 4))
            q[:, k : k + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    u = rng.normal(size=(n_states, tree.nu))
    udot = rng.normal(size=(n_states, tree.nu))
    tau = rng.normal(size=(n_states, tree.nu))
    base = system.default_state()
    states = jax.vmap(lambda qq, uu: base.replace(q=qq, u=uu))(jnp.asarray(q), jnp.asarray(u))
    M, tau_id, back, fd, ab = (np.asarray(x) for x in _evaluate(system, states, jnp.asarray(udot), jnp.asarray(tau)))
    data = pm.createData()
    all_joints = [j for t in trees for j in t]
    for s in range(n_states):
        qp, v, T, Tdu = map_state(system, pm, all_joints, q[s], u[s])
        M_pin = pin.crba(pm, data, qp).copy()
        M_pin = T.T @ (np.triu(M_pin) + np.triu(M_pin, 1).T) @ T
        tau_pin = T.T @ pin.rnea(pm, data, qp, v, T @ udot[s] + Tdu).copy()
        # Pinocchio's ABA, polished by two steps of iterative refinement with its own
        # RNEA and CRBA: on the worst-conditioned trees here (cond(M) ~ 1e5) plain ABA
        # is only good to ~1e-10 itself
        tau_p = np.linalg.solve(T.T, tau[s])
        a_pin = pin.aba(pm, data, qp, v, tau_p).copy()
        M_raw = pin.crba(pm, data, qp).copy()
        M_raw = np.triu(M_raw) + np.triu(M_raw, 1).T
        for _ in range(2):
            a_pin = a_pin + np.linalg.solve(M_raw, tau_p - pin.rnea(pm, data, qp, v, a_pin))
        fd_pin = np.linalg.solve(T, a_pin - Tdu)
        for joints in trees:
            idx = sorted(i for _, jn in joints for i in _joint_speeds(tree, jn)[0])
            block = np.ix_(idx, idx)
            assert _rel(M[s][block], M_pin[block]) < TOL
            assert _rel(tau_id[s][idx], tau_pin[idx]) < TOL
            assert _rel(fd[s][idx], fd_pin[idx]) < TOL
            assert _rel(ab[s][idx], fd[s][idx]) < TOL
            assert _rel(back[s][idx], udot[s][idx]) < TOL
        # independent trees do not couple
        others = np.ones_like(M_pin, dtype=bool)
        for joints in trees:
            idx = [i for _, jn in joints for i in _joint_speeds(tree, jn)[0]]
            others[np.ix_(idx, idx)] = False
        assert np.all(M[s][others] == 0.0)


def test_mass_matrix_symmetric_positive_definite():
    model, _, _ = random_forest(5, [12])
    system = model.build()
    state = system.default_state().replace(q=jnp.asarray(np.random.default_rng(5).uniform(-1, 1, system.topology.nq)))
    M = np.asarray(sj.mass_matrix(system, state))
    assert np.abs(M - M.T).max() == 0.0
    assert np.linalg.eigvalsh(M).min() > 0.0
