"""Rigid-body dynamics on the compiled tree: CRBA, RNEA, ABA, energies, momentum.

All spatial quantities are in Ground about Ground's origin (see ``tree``). With the
static ancestor matrix ``anc`` (``anc[i, j]``: ``j`` is ``i`` or an ancestor of it) and
``anc_dof`` (``anc_dof[i, d]``: speed ``d`` moves body ``i``) the recursions of
Featherstone's algorithms become dense products:

- body velocities ``V = anc_dof @ (S u)``; velocity-product accelerations
  ``C = anc @ Crel``;
- composite inertias ``Ic = anc.T @ I`` (each body's subtree);
- mass matrix ``M[d, e] = S_d . Ic[mob(e)] S_e`` for ``mob(d)`` an ancestor of ``mob(e)``;
- generalized forces ``tau_d = S_d . (anc_dof.T @ f)[d]``.

A body's inertia is kept as ``(m, h = m c, J)`` (mass, first moment and rotational
inertia about Ground's origin, in Ground) rather than a 6x6 matrix: sums over subtrees
stay linear, and applying it to a motion vector costs two cross products.

The articulated-body algorithm (``aba``) walks the tree level by level instead (its
program grows with the depth) and must agree with ``M \\ (tau - C)``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..lapack import spd_solve
from .tree import Positions, Tree, TreeParams, Velocities

__all__ = [
    "Inertias",
    "spatial_inertias",
    "mass_matrix",
    "generalized_forces",
    "bias_forces",
    "inverse_dynamics",
    "forward_dynamics_unconstrained",
    "aba",
    "kinetic_energy",
    "gravity_potential_energy",
    "momentum",
    "mass_center",
    "body_accelerations",
    "inertial_forces",
    "mobilizer_reactions",
]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Inertias:
    """Spatial inertias of bodies in Ground about its origin.

    **Fields:** ``m (n,)`` masses; ``h (n,3)`` first moments ``m c`` (``c`` the mass
    centre in Ground); ``J (n,3,3)`` rotational inertias about Ground's origin.
    """

    m: Any
    h: Any
    J: Any

    def apply(self, V):
        """Spatial momenta ``I V`` of motion vectors ``V (n,6)``: ``(J w + h x v, m v - h x w)``."""
        w, v = V[..., :3], V[..., 3:]
        return jnp.concatenate(
            [spatial.mat_vec(self.J, w) + spatial.cross(self.h, v), self.m[..., None] * v - spatial.cross(self.h, w)],
            -1,
        )

    def matrix(self):
        """The 6x6 matrices ``[[J, hx], [-hx, m 1]]`` ``(n, 6, 6)``."""
        hx = spatial.skew(self.h)
        m = self.m[..., None, None] * jnp.eye(3, dtype=self.J.dtype)
        return jnp.concatenate([jnp.concatenate([self.J, hx], -1), jnp.concatenate([-hx, m], -1)], -2)

    def stacked(self):
        """``(n, 13)``: ``m``, ``h`` and ``J`` flattened side by side (for linear maps)."""
        n = self.m.shape[0]
        return jnp.concatenate([self.m[:, None], self.h, self.J.reshape(n, 9)], -1)

    @staticmethod
    def unstack(x):
        """Inverse of ``stacked``."""
        return Inertias(x[:, 0], x[:, 1:4], x[:, 4:].reshape(-1, 3, 3))


def spatial_inertias(params: TreeParams, pos: Positions) -> Inertias:
    """Inertia of every body in Ground about its origin."""
    m = params["mass"]
    c = spatial.transform_point((pos.R0, pos.p0), params["com"])
    Jc = spatial.mat_mul(spatial.mat_mul(pos.R0, params["inertia"]), jnp.swapaxes(pos.R0, -1, -2))
    cc = c[:, :, None] * c[:, None, :]
    eye = jnp.eye(3, dtype=c.dtype)
    J = Jc + m[:, None, None] * ((c * c).sum(-1)[:, None, None] * eye - cc)
    return Inertias(m, m[:, None] * c, J)


def mass_matrix(tree: Tree, params: TreeParams, pos: Positions, I0: Inertias | None = None):
    """The mass matrix ``M (nu, nu)`` by composite rigid bodies.

    **Arguments:** ``tree``, ``params``, ``pos``; optionally precomputed inertias ``I0``.
    """
    if I0 is None:
        I0 = spatial_inertias(params, pos)
    dtype = pos.S.dtype
    # composite inertia of each body's subtree, then of the subtree each speed moves
    # (gathered per part, so that each gather is fused into the product that uses it)
    Ic = Inertias.unstack(jnp.asarray(tree.anc.T, dtype) @ I0.stacked())
    mob = tree.dof_mob
    F = Inertias(Ic.m[mob], Ic.h[mob], Ic.J[mob]).apply(pos.S)
    A = pos.S @ F.T  # A[d, e] = S_d . Ic[mob(e)] S_e
    below = tree.anc_dof[tree.dof_mob].T  # [d, e]: mob(d) is mob(e) or an ancestor of it
    d = np.arange(tree.nu)
    use_A = below & ~((tree.dof_mob[:, None] == tree.dof_mob[None, :]) & (d[:, None] > d[None, :]))
    return jnp.where(use_A, A, jnp.where(use_A.T, A.T, 0.0))  # exactly symmetric


def generalized_forces(tree: Tree, pos: Positions, body_forces):
    """Map spatial forces on bodies (Ground, about its origin) to generalized forces.

    **Arguments:** ``body_forces (n, 6)`` as (torque, force). **Returns:** ``(nu,)``.
    """
    sub = jnp.asarray(tree.anc_dof.T, body_forces.dtype) @ body_forces  # force on each speed's subtree
    return (pos.S * sub).sum(-1)


def body_accelerations(tree: Tree, pos: Positions, vel: Velocities, udot):
    """Spatial accelerations of all bodies ``(n, 6)`` (Ground, about its origin)."""
    return jnp.asarray(tree.anc_dof, udot.dtype) @ (pos.S * udot[:, None]) + vel.C


def _gravity_accel(params, dtype):
    return jnp.concatenate([jnp.zeros(3, dtype), -params["gravity"]])


def inertial_forces(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, udot, I0: Inertias):
    """Spatial forces ``I a + v x* I v`` that give every body its acceleration, gravity
    included as a fictitious upward acceleration of Ground (``udot=None``: zero).

    **Returns:** ``(n, 6)`` in Ground about its origin.
    """
    dtype = vel.V.dtype
    A = vel.C + _gravity_accel(params, dtype)
    if udot is not None:
        A = A + jnp.asarray(tree.anc_dof, dtype) @ (pos.S * udot[:, None])
    return I0.apply(A) + spatial.force_cross(vel.V, I0.apply(vel.V))


def inverse_dynamics(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, udot, body_forces=None):
    """Generalized forces ``tau = M udot + C(q, u) - g(q) - J^T f_ext`` (RNEA).

    **Arguments:** ``udot (nu,)``; optional applied ``body_forces (n, 6)``.

    **Returns:** ``tau (nu,)``: the mobility forces that produce ``udot``.
    """
    I0 = spatial_inertias(params, pos)
    f = inertial_forces(tree, params, pos, vel, udot, I0)
    if body_forces is not None:
        f = f - body_forces
    return generalized_forces(tree, pos, f)


def mobilizer_reactions(
    tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, udot, body_forces=None, I0: Inertias | None = None
):
    """The spatial force each body's inboard mobilizer applies to it (Simbody's
    ``calcMobilizerReactionForces``, taken about Ground's origin).

    Body ``i`` moves by ``I a + v x* I v = f_applied + f_mob(i) - sum of f_mob(child)``,
    so ``f_mob(i)`` is the sum over its subtree of ``I a + v x* I v - f_applied``:
    the inward pass of RNEA, one product with the ancestor matrix. As in Simbody the
    mobilizer's own generalized forces (actuators, limits, constraints acting on its
    speeds) are part of its reaction; constraint forces on bodies are not included
    (pass them in ``body_forces``).

    **Arguments:** ``udot (nu,)``: the accelerations (the forward dynamics' for the
    reactions of the motion); ``body_forces (n, 6)``: the applied spatial forces on the
    bodies (Ground, about its origin; gravity is added here); ``I0``: precomputed inertias.

    **Returns:** ``(n, 6)`` (torque, force) in Ground about its origin, N m and N; row
    0, Ground's, is the sum over the whole tree.
    """
    if I0 is None:
        I0 = spatial_inertias(params, pos)
    f = inertial_forces(tree, params, pos, vel, udot, I0)
    if body_forces is not None:
        f = f - body_forces
    return jnp.asarray(tree.anc.T, f.dtype) @ f


def bias_forces(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, I0: Inertias | None = None):
    """Coriolis, centrifugal and gravity terms: inverse dynamics at ``udot = 0``."""
    if I0 is None:
        I0 = spatial_inertias(params, pos)
    return generalized_forces(tree, pos, inertial_forces(tree, params, pos, vel, None, I0))


def forward_dynamics_unconstrained(tree, params, pos, vel, tau, body_forces=None):
    """``udot = M^-1 (tau + J^T f_ext - C)`` by Cholesky (no constraints)."""
    I0 = spatial_inertias(params, pos)
    M = mass_matrix(tree, params, pos, I0)
    f = inertial_forces(tree, params, pos, vel, None, I0)
    if body_forces is not None:
        f = f - body_forces
    rhs = tau - generalized_forces(tree, pos, f)
    return spd_solve(M, rhs)


@dataclasses.dataclass(frozen=True, eq=False)
class _AbaPlan:
    """Static layout of the per-speed articulated-body recursion (see ``aba``).

    The speed tree's levels are padded to a common width ``W``: ``idx (L, W)`` speed of
    each slot (``nu`` for padding), ``mask (L, W)``, ``child (L, W, W)`` one-hot of
    ``parent slot <- child slot`` between level ``l`` and ``l + 1``, ``ppos (L, W)`` the
    parent's slot in the previous level, ``slot (nu,)`` where each speed sits in the
    flattened ``(L * W)`` layout; per speed, ``carry`` the body whose inertia it carries
    (``n``: none) and ``cbody`` the body whose joint bias acceleration it adds (``n``:
    none); ``collapse (n, n)`` sums welded bodies into their carriers (or ``None``).
    """

    idx: np.ndarray
    mask: np.ndarray
    child: np.ndarray
    ppos: np.ndarray
    slot: np.ndarray
    carry: np.ndarray
    cbody: np.ndarray
    collapse: np.ndarray | None


@functools.lru_cache(maxsize=64)
def _aba_plan(tree: Tree) -> _AbaPlan:
    n, nu = tree.n_mob, tree.nu
    last = np.full(n, -1)  # last speed at or above each body
    carrier = np.arange(n)  # the body (with speeds) a welded body is rigidly fixed to
    dpar = np.full(nu, -1)
    carry = np.full(nu, n)
    cbody = np.full(nu, n)
    for m in range(1, n):
        p, k = tree.parent[m], tree.nu_mob[m]
        if k:
            s0 = tree.u_start[m]
            dpar[s0] = last[p]
            dpar[s0 + 1 : s0 + k] = np.arange(s0, s0 + k - 1)
            last[m] = s0 + k - 1
            carry[last[m]] = m
            cbody[s0] = m
        else:
            last[m] = last[p]
            carrier[m] = carrier[p] if tree.nu_mob[p] == 0 else p
    depth = np.zeros(nu, int)
    for d in range(nu):  # parents have lower indices
        depth[d] = 0 if dpar[d] < 0 else depth[dpar[d]] + 1
    L = int(depth.max(initial=-1)) + 1
    levels = [np.flatnonzero(depth == lv) for lv in range(L)]
    W = max((len(x) for x in levels), default=1)
    idx = np.full((L, W), nu, np.int32)
    mask = np.zeros((L, W), bool)
    child = np.zeros((L, W, W))
    ppos = np.zeros((L, W), np.int32)
    pos_of = np.zeros(nu, np.int64)
    for lv, ds in enumerate(levels):
        idx[lv, : len(ds)] = ds
        mask[lv, : len(ds)] = True
        pos_of[ds] = np.arange(len(ds))
        if lv:
            ppos[lv, : len(ds)] = pos_of[dpar[ds]]
            child[lv - 1, pos_of[dpar[ds]], np.arange(len(ds))] = 1.0
    slot = (depth * W + pos_of).astype(np.int32)
    welded = [m for m in range(1, n) if tree.nu_mob[m] == 0 and carrier[m] != m]
    collapse = None
    if welded:
        collapse = np.eye(n)
        for m in welded:
            collapse[m, m] = 0.0
            collapse[carrier[m], m] = 1.0  # Ground as carrier drops it
    return _AbaPlan(idx, mask, child, ppos, slot, carry, cbody, collapse)


def aba(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, tau, body_forces=None):
    """Forward dynamics by the articulated-body algorithm (Featherstone).

    Every speed is treated as a one-degree-of-freedom joint: a mobilizer with ``k``
    speeds becomes a chain of ``k`` joints whose inner links are massless, which is
    exact and makes every articulated-body step a rank-one update with a scalar pivot.
    The speed tree is processed one depth level at a time by two ``lax.scan`` passes
    (levels padded to a common width; children summed into their parents by a small
    one-hot product), so the program does not grow with the model. Equal to
    ``forward_dynamics_unconstrained`` up to round-off.

    **Arguments:** ``tau (nu,)`` mobility forces; optional applied ``body_forces (n, 6)``
    (Ground, about its origin).

    **Returns:** ``udot (nu,)``.
    """
    dtype = vel.V.dtype
    if tree.nu == 0:
        return jnp.zeros(0, dtype)
    plan = _aba_plan(tree)
    I0 = spatial_inertias(params, pos)
    pA = spatial.force_cross(vel.V, I0.apply(vel.V))
    if body_forces is not None:
        pA = pA - body_forces
    X = jnp.concatenate([I0.stacked(), pA], -1)  # (n, 19)
    if plan.collapse is not None:
        X = jnp.asarray(plan.collapse, dtype) @ X
    zero = jnp.zeros((1, 6), dtype)
    Xd = jnp.concatenate([X, jnp.zeros((1, 19), dtype)])[plan.carry]  # per speed
    Xd = jnp.concatenate([Xd, jnp.zeros((1, 19), dtype)])[plan.idx]  # (L, W, 19)
    IA0 = Inertias.unstack(Xd.reshape(-1, 19)[:, :13]).matrix().reshape(Xd.shape[:2] + (6, 6))
    pA0 = Xd[..., 13:]
    c_rel = vel.C - vel.C[tree.parent]  # the bias acceleration of each joint
    c = jnp.concatenate([jnp.concatenate([c_rel, zero])[plan.cbody], zero])[plan.idx]
    S = jnp.concatenate([pos.S, zero])[plan.idx]
    T = jnp.concatenate([tau, jnp.zeros(1, dtype)])[plan.idx]
    mask = jnp.asarray(plan.mask)

    def inward(carry, x):
        Ia_c, pa_c = carry
        IA, pAl, s, cl, t, ml, oh = x
        IA = IA + (oh[:, :, None, None] * Ia_c[None]).sum(1)
        pAl = pAl + (oh[:, :, None] * pa_c[None]).sum(1)
        U = spatial.mat_vec(IA, s)
        D = jnp.where(ml, (s * U).sum(-1), 1.0)
        u = t - (s * pAl).sum(-1)
        Ia = IA - U[:, :, None] * U[:, None, :] / D[:, None, None]
        pa = pAl + spatial.mat_vec(Ia, cl) + U * (u / D)[:, None]
        return (Ia, pa), (U, D, u)

    W = plan.idx.shape[1]
    init = (jnp.zeros((W, 6, 6), dtype), jnp.zeros((W, 6), dtype))
    oh = jnp.asarray(plan.child, dtype)
    _, (U, D, u) = jax.lax.scan(inward, init, (IA0, pA0, S, c, T, mask, oh), reverse=True)

    def outward(a_prev, x):
        Ul, Dl, ul, s, cl, pp = x
        ap = a_prev[pp] + cl
        ql = (ul - (Ul * ap).sum(-1)) / Dl
        return ap + s * ql[:, None], ql

    a0 = jnp.broadcast_to(_gravity_accel(params, dtype), (W, 6))
    _, qdd = jax.lax.scan(outward, a0, (U, D, u, S, c, jnp.asarray(plan.ppos)))
    return qdd.reshape(-1)[plan.slot]


def kinetic_energy(params: TreeParams, pos: Positions, vel: Velocities):
    """Total kinetic energy ``0.5 sum V.I V`` (J)."""
    I0 = spatial_inertias(params, pos)
    return 0.5 * (vel.V * I0.apply(vel.V)).sum()


def mass_center(params: TreeParams, pos: Positions):
    """``(total mass, mass center in Ground)``."""
    com0 = spatial.transform_point((pos.R0, pos.p0), params["com"])
    mtot = params["mass"].sum()
    return mtot, (params["mass"][:, None] * com0).sum(0) / jnp.where(mtot > 0, mtot, 1.0)


def gravity_potential_energy(params: TreeParams, pos: Positions):
    """Gravitational potential energy ``-m g . r_com`` (J), zero at Ground's origin."""
    mtot, com = mass_center(params, pos)
    return -mtot * jnp.dot(params["gravity"], com)


def momentum(params: TreeParams, pos: Positions, vel: Velocities):
    """System spatial momentum about Ground's origin ``(angular, linear)``."""
    I0 = spatial_inertias(params, pos)
    return I0.apply(vel.V).sum(0)
