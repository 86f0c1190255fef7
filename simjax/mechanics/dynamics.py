"""Rigid-body dynamics on the compiled tree: CRBA, RNEA, ABA, energies, momentum.

All spatial quantities are in Ground about Ground's origin (see ``tree``). With the
static ancestor matrix ``anc`` the recursions of Featherstone's algorithms become
dense products:

- body velocities ``V = anc @ Vrel``; velocity-product accelerations ``C = anc @ Crel``;
- composite inertias ``Ic = anc.T @ I`` (each body's subtree);
- mass matrix ``M[d, e] = S_d . Ic[mob(e)] S_e`` for ``mob(d)`` an ancestor of ``mob(e)``;
- generalized forces ``tau_d = S_d . (anc.T @ f)[mob(d)]``.

The articulated-body algorithm (``aba``) walks the tree level by level instead, and
must agree with ``M \\ (tau - C)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from .tree import Positions, Tree, TreeParams, Velocities

__all__ = ["spatial_inertias", "mass_matrix", "generalized_forces", "bias_forces", "inverse_dynamics",
           "forward_dynamics_unconstrained", "aba", "kinetic_energy", "gravity_potential_energy",
           "momentum", "mass_center"]


def spatial_inertias(params: TreeParams, pos: Positions):
    """Spatial inertia of every body in Ground about its origin, ``(n, 6, 6)``."""
    com0 = spatial.transform_point((pos.R0, pos.p0), params["com"])
    Ic0 = pos.R0 @ params["inertia"] @ jnp.swapaxes(pos.R0, -1, -2)
    return spatial.spatial_inertia(params["mass"], com0, Ic0)


def mass_matrix(tree: Tree, params: TreeParams, pos: Positions, I0=None):
    """The mass matrix ``M (nu, nu)`` by composite rigid bodies.

    **Arguments:** ``tree``, ``params``, ``pos``; optionally precomputed inertias ``I0``.
    """
    if I0 is None:
        I0 = spatial_inertias(params, pos)
    anc = jnp.asarray(tree.anc, I0.dtype)
    Ic = jnp.einsum("ij,ikl->jkl", anc, I0)  # subtree sums
    F = jnp.einsum("dij,dj->di", Ic[tree.dof_mob], pos.S)
    A = pos.S @ F.T  # A[d, e] = S_d . Ic[mob(e)] S_e
    dof_anc = tree.anc[np.ix_(tree.dof_mob, tree.dof_mob)].T  # [d, e]: mob(d) ancestor-or-self of mob(e)
    strict = dof_anc & (tree.dof_mob[:, None] != tree.dof_mob[None, :])
    return jnp.where(dof_anc, A, 0.0) + jnp.where(strict.T, A.T, 0.0)


def generalized_forces(tree: Tree, pos: Positions, body_forces):
    """Map spatial forces on bodies (Ground, about its origin) to generalized forces.

    **Arguments:** ``body_forces (n, 6)`` as (torque, force). **Returns:** ``(nu,)``.
    """
    anc = jnp.asarray(tree.anc, body_forces.dtype)
    sub = anc.T @ body_forces
    return jnp.einsum("di,di->d", pos.S, sub[tree.dof_mob])


def _body_accel_forces(tree, params, pos, vel, udot, I0):
    dtype = vel.V.dtype
    a_rel = jnp.zeros((tree.n_mob, 6), dtype).at[tree.dof_mob].add(pos.S * udot[:, None])
    A = jnp.asarray(tree.anc, dtype) @ a_rel + vel.C
    grav = jnp.concatenate([jnp.zeros(3, dtype), -params["gravity"]])
    A = A + grav
    IV = jnp.einsum("nij,nj->ni", I0, vel.V)
    return jnp.einsum("nij,nj->ni", I0, A) + spatial.force_cross(vel.V, IV)


def inverse_dynamics(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, udot, body_forces=None):
    """Generalized forces ``tau = M udot + C(q, u) - g(q) - J^T f_ext`` (RNEA).

    **Arguments:** ``udot (nu,)``; optional applied ``body_forces (n, 6)``.

    **Returns:** ``tau (nu,)``: the mobility forces that produce ``udot``.
    """
    I0 = spatial_inertias(params, pos)
    f = _body_accel_forces(tree, params, pos, vel, udot, I0)
    if body_forces is not None:
        f = f - body_forces
    return generalized_forces(tree, pos, f)


def bias_forces(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, I0=None):
    """Coriolis, centrifugal and gravity terms: inverse dynamics at ``udot = 0``."""
    if I0 is None:
        I0 = spatial_inertias(params, pos)
    f = _body_accel_forces(tree, params, pos, vel, jnp.zeros(tree.nu, vel.V.dtype), I0)
    return generalized_forces(tree, pos, f)


def forward_dynamics_unconstrained(tree, params, pos, vel, tau, body_forces=None):
    """``udot = M^-1 (tau + J^T f_ext - C)`` by Cholesky (no constraints)."""
    I0 = spatial_inertias(params, pos)
    M = mass_matrix(tree, params, pos, I0)
    rhs = tau - bias_forces(tree, params, pos, vel, I0)
    if body_forces is not None:
        rhs = rhs + generalized_forces(tree, pos, body_forces)
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(M), rhs)


def aba(tree: Tree, params: TreeParams, pos: Positions, vel: Velocities, tau, body_forces=None):
    """Forward dynamics by the articulated-body algorithm (Featherstone), level by level.

    Each mobilizer's speeds are padded to 6 columns so every level is one batched
    step. Equal to ``forward_dynamics_unconstrained`` up to round-off.
    """
    dtype = vel.V.dtype
    n = tree.n_mob
    I0 = spatial_inertias(params, pos)
    # per-mobilizer S (6 x 6 padded) and tau (6 padded)
    S = jnp.zeros((n, 6, 6), dtype).at[tree.dof_mob, :, tree.dof_col].set(pos.S)
    T = jnp.zeros((n, 6), dtype).at[tree.dof_mob, tree.dof_col].set(tau)
    mask = np.zeros((n, 6), dtype=bool)
    mask[tree.dof_mob, tree.dof_col] = True
    maskj = jnp.asarray(mask)
    pA = spatial.force_cross(vel.V, jnp.einsum("nij,nj->ni", I0, vel.V))
    if body_forces is not None:
        pA = pA - body_forces
    IA = I0
    c = vel.C - jnp.concatenate([jnp.zeros((n, 3), dtype), jnp.zeros((n, 3), dtype)], -1)
    # C is accumulated from Ground; the per-joint bias is C[m] - C[parent]
    c_rel = vel.C - vel.C[tree.parent]
    eye = jnp.eye(6, dtype=dtype)
    U = jnp.zeros((n, 6, 6), dtype)
    Dinv = jnp.zeros((n, 6, 6), dtype)
    uu = jnp.zeros((n, 6), dtype)
    for lev in reversed(tree.levels):
        Sl, IAl, pAl = S[lev], IA[lev], pA[lev]
        Ul = IAl @ Sl
        Dl = jnp.swapaxes(Sl, -1, -2) @ Ul
        m = maskj[lev]
        Dl = jnp.where(m[:, :, None] & m[:, None, :], Dl, eye)
        Dli = jnp.linalg.inv(Dl)
        Dli = jnp.where(m[:, :, None] & m[:, None, :], Dli, 0.0)
        ul = T[lev] - jnp.einsum("nij,ni->nj", Sl, pAl)
        ul = jnp.where(m, ul, 0.0)
        Ia = IAl - Ul @ Dli @ jnp.swapaxes(Ul, -1, -2)
        pa = pAl + jnp.einsum("nij,nj->ni", Ia, c_rel[lev]) + jnp.einsum("nij,nj->ni", Ul @ Dli, ul)
        par = tree.parent[lev]
        IA = IA.at[par].add(Ia)
        pA = pA.at[par].add(pa)
        U, Dinv, uu = U.at[lev].set(Ul), Dinv.at[lev].set(Dli), uu.at[lev].set(ul)
    a = jnp.zeros((n, 6), dtype).at[0].set(jnp.concatenate([jnp.zeros(3, dtype), -params["gravity"]]))
    qdd = jnp.zeros((n, 6), dtype)
    for lev in tree.levels:
        ap = a[tree.parent[lev]] + c_rel[lev]
        ql = jnp.einsum("nij,nj->ni", Dinv[lev], uu[lev] - jnp.einsum("nij,ni->nj", U[lev], ap))
        qdd = qdd.at[lev].set(ql)
        a = a.at[lev].set(ap + jnp.einsum("nij,nj->ni", S[lev], ql))
    del c
    return qdd[tree.dof_mob, tree.dof_col]


def kinetic_energy(params: TreeParams, pos: Positions, vel: Velocities):
    """Total kinetic energy ``0.5 sum V.I V`` (J)."""
    I0 = spatial_inertias(params, pos)
    return 0.5 * jnp.einsum("ni,nij,nj->", vel.V, I0, vel.V)


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
    return jnp.einsum("nij,nj->i", I0, vel.V)
