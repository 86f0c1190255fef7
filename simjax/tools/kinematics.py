"""Inverse kinematics: OpenSim's ``InverseKinematicsTool`` / ``InverseKinematicsSolver``.

At each frame OpenSim's Assembler minimizes (Simbody ``Assembler`` with the
``Markers`` and ``QValue`` goals)

``f(q) = sum_i w_i |x_i(q) - m_i|^2 / (2 sum_i w_i) + sum_c w_c (q_c - v_c)^2 / 2``

over the free coordinates: markers ``i`` observed in the frame (a marker missing in
the frame, NaN, leaves both sums), coordinate tasks ``c`` (``IKCoordinateTask``:
``default_value``, ``manual_value`` or ``from_file``), locked and prescribed
coordinates held, clamped coordinates kept inside their ``range`` (bounds), and the
model's constraints enforced as equalities (``constraint_weight = Inf``) or added to
``f`` as ``weight * |qerr|^2 / 2``. OpenSim solves frame by frame with L-BFGS(-B),
starting the first frame from the model's default pose and each later frame from the
previous solution.

simjax solves the same problem as one batched least-squares problem: ``f = |r(q)|^2/2``
with the residuals ``r`` above, minimized by a projected Levenberg–Marquardt
iteration (Gauss–Newton steps in ``u``-space, ``q <- q + N(q) du`` with quaternions
renormalized; an active set for the bounds; enforced constraints through the KKT
system, each trial point restored onto them by Gauss–Newton before it is judged),
``vmap``-ped over frames in one compiled program. OpenSim's result depends on its
warm starts (a different start may end in a different local minimum): it is the
fixed point of ``q_i = solve(frame i, start = q_{i-1})`` with ``q_{-1}`` the default
pose, which simjax reaches by passes that apply that map to all frames at once (two
or three for a smooth motion, at most ``n_frames``). OpenSim stops at its
``accuracy`` (a relative tolerance of L-BFGS: with the usual 1e-5 it can stop 1e-3 rad
short of the minimum); simjax iterates until its steps are below ``tol`` (rad or m),
and a setup's ``accuracy`` is that tolerance. Its Gauss–Newton steps shrink about
tenfold each near the minimum, so a solve ends about ``tol / 10`` from it: with the
usual 1e-5, within 2e-6 rad of the converged solution on the walking example, where
OpenSim's ends up to 1e-3 rad away.

``inverse_kinematics(system, markers, ...)`` is the pure function over a ``System``
and a marker table; the ``InverseKinematicsTool`` setup runner (``simjax run``)
writes OpenSim's ``.mot`` (degrees), ``_ik_marker_errors.sto`` and
``_ik_model_marker_locations.sto``.

``solve_inverse_kinematics(system, markers, positions, weights, ...)`` is the same
solve on arrays, a pure JAX function: ``vmap`` over trials of equal length, and
derivatives of the optimum with respect to the model's properties and the data by the
implicit function theorem (``simjax.tools.gradients``); ``marker_positions(system,
markers, q)`` gives the model's markers at ``q``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import warnings
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import full_precision
from ..io.tables import TimeSeriesTable, read_table
from ..mechanics.joints import ROTATIONAL
from ..state import State
from . import setup as _setup
from ._roots import implicit_root
from ..io.outputs import open_output

__all__ = [
    "IKInfo",
    "IKResult",
    "IKWarning",
    "coordinates_in_degrees",
    "inverse_kinematics",
    "marker_positions",
    "solve_inverse_kinematics",
    "write_storage",
]

#: length units a marker file may declare, in meters
_UNITS = {
    "m": 1.0,
    "meters": 1.0,
    "mm": 1e-3,
    "millimeters": 1e-3,
    "cm": 1e-2,
    "centimeters": 1e-2,
    "dm": 0.1,
    "km": 1e3,
    "in": 0.0254,
    "inches": 0.0254,
    "ft": 0.3048,
    "feet": 0.3048,
}


class IKWarning(UserWarning):
    """A marker or coordinate task OpenSim would ignore (warned, then ignored)."""


@dataclasses.dataclass
class IKResult:
    """What ``inverse_kinematics`` returns.

    **Fields:**

    - ``coordinates``: a ``TimeSeriesTable`` of every coordinate (model order, OpenSim
      names), in rad or m (``inDegrees=no``).
    - ``marker_errors``: ``total_squared_error`` (m^2), ``marker_error_RMS`` and
      ``marker_error_max`` (m) per frame, as OpenSim's ``_ik_marker_errors.sto``.
    - ``marker_locations``: a ``Vec3`` table of the model markers in use, in Ground (m).
    - ``q``: the solved generalized coordinates ``(n_frames, nq)``.
    - ``squared_errors``: ``(n_frames, n_markers)`` squared marker errors (0 where the
      marker is missing), in the order of ``marker_names``.
    - ``marker_names``: the markers in use (data order, those in the model and tasks).
    - ``converged``: ``(n_frames,)`` whether each frame met the tolerance (and held the
      enforced constraints to ``1e-2 sqrt(eps)``: 1.5e-10 rad or m in float64).
    - ``passes``: how many batched passes reproduced OpenSim's warm starts.
    """

    coordinates: TimeSeriesTable
    marker_errors: TimeSeriesTable
    marker_locations: TimeSeriesTable
    q: np.ndarray
    squared_errors: np.ndarray
    marker_names: tuple
    converged: np.ndarray
    passes: int = 0


# -- the batched solver (pure JAX) ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Static:
    """Static description of the problem (hashable)."""

    frames: tuple  # marker parent-frame paths
    marker_paths: tuple  # model marker paths
    coord_q: tuple  # q index of each coordinate task
    coord_u: tuple  # its u index
    movable: tuple  # (nu,) bool: speeds IK may move
    bound_u: tuple  # u indices of clamped coordinates
    bound_q: tuple  # their q indices
    fixed_q: tuple  # q indices of locked/prescribed coordinates
    constrained: bool  # enforce constraints as equalities
    has_constraints: bool
    max_steps: int
    max_passes: int


def _retract(tree, q, du):
    from ..mechanics.assembly import _normalize_quaternions
    from ..mechanics.tree import qdot_from_u

    return _normalize_quaternions(tree, q + qdot_from_u(tree, q, du))


def _context(system, state, params=None):
    from ..forward import Context

    return Context(system, state, parameters=params)


def _tree_params(system, base):
    """The state-independent tree parameters, computed once for every evaluation."""
    return {"tree": _context(system, base).params}


def _pose_state(system) -> State:
    """``system.default_state()``'s time and coordinates, its other state variables zero:
    markers depend on the pose alone, and the muscles' default states cost about a
    third of a walking trial's solve to compute."""
    q, u = system.default_coordinates()
    topo = system.topology
    zeros = functools.partial(jnp.zeros, dtype=q.dtype)
    return State(t=zeros(()), q=q, u=u, z=zeros(topo.nz), d=zeros(len(topo.d_names)))


def _marker_points(system, st: _Static, base: State, q, locations, params=None):
    ctx = _context(system, base.replace(q=q), params)
    R, p = ctx.frames_in_ground(st.frames)
    return jnp.einsum("kij,kj->ki", R, locations) + p


def _problem(system, st: _Static, base, locations, cw, params):
    """One frame's problem: ``(linearize, evaluate)``, functions of ``q`` and the
    frame's data giving the residuals, constraints and their u-space Jacobians; the
    objective with the constraint errors and their Jacobian."""
    tree = system.topology.tree

    def residual(ctx, q, obs, w, cvals, cweights):
        R, p = ctx.frames_in_ground(st.frames)
        x = jnp.einsum("kij,kj->ki", R, locations) + p
        r_m = (jnp.sqrt(w)[:, None] * (x - obs)).reshape(-1)
        parts = [r_m]
        if st.coord_q:
            parts.append(jnp.sqrt(cweights) * (q[np.asarray(st.coord_q)] - cvals))
        if st.has_constraints and not st.constrained:
            parts.append(jnp.sqrt(cw) * ctx.constraints.perr)
        return jnp.concatenate(parts)

    from ..mechanics.tree import frame_table_rows
    from ..spatial import skew

    mobs = tree.frame_mob[frame_table_rows(tree, st.frames)] if st.frames else np.zeros(0, np.int32)
    anc = np.asarray(tree.anc_dof, float)[mobs] if st.frames else np.zeros((0, tree.nu))
    coord_u = np.asarray(st.coord_u, np.int32)

    def linearize(q, data):
        """Residuals ``r``, their Jacobian ``dr/du`` (analytic: station Jacobians from
        the joints' motion subspaces), constraint errors ``c`` and ``dc/du``."""
        obs, w, cvals, cweights = data
        ctx = _context(system, base.replace(q=q), params)
        R, p = ctx.frames_in_ground(st.frames)
        x = jnp.einsum("kij,kj->ki", R, locations) + p
        S = ctx.pos.S  # (nu, 6): (w, v at Ground's origin)
        J = jnp.asarray(anc, q.dtype)[:, None, :] * S.T[None]  # (M, 6, nu)
        Jx = J[:, 3:] - jnp.einsum("kij,kjn->kin", jax.vmap(skew)(x), J[:, :3])
        sw = jnp.sqrt(w)
        r_parts = [(sw[:, None] * (x - obs)).reshape(-1)]
        J_parts = [(sw[:, None, None] * Jx).reshape(-1, tree.nu)]
        if st.coord_q:
            sc = jnp.sqrt(cweights)
            r_parts.append(sc * (q[np.asarray(st.coord_q)] - cvals))
            E = np.zeros((len(coord_u), tree.nu))
            E[np.arange(len(coord_u)), coord_u] = 1.0
            J_parts.append(sc[:, None] * jnp.asarray(E, q.dtype))
        c, G = jnp.zeros(0, q.dtype), jnp.zeros((0, tree.nu), q.dtype)
        if st.has_constraints:
            rows = ctx.constraints
            if st.constrained:
                c, G = rows.perr, rows.G
            else:
                r_parts.append(jnp.sqrt(cw) * rows.perr)
                J_parts.append(jnp.sqrt(cw) * rows.G)
        return jnp.concatenate(r_parts), jnp.concatenate(J_parts), c, G

    def evaluate(q, data):
        """``f``, the enforced constraint errors ``c`` and ``dc/du`` (one realization)."""
        ctx = _context(system, base.replace(q=q), params)
        r = residual(ctx, q, *data)
        rows = ctx.constraints
        return 0.5 * jnp.dot(r, r), rows.perr, rows.G

    return linearize, evaluate


def _constraint_tolerance(dtype):
    """Largest enforced-constraint error (rad or m) counted as satisfied."""
    return 1e-2 * math.sqrt(float(jnp.finfo(dtype).eps))


def _violation(c, G, free, ctol):
    """``max |c|`` over the constraint rows that act on the ``free`` speeds (the rows of
    locked and prescribed coordinates are held by the solver, not by steps), floored
    at ``ctol``: every point within the tolerance counts as equally feasible."""
    return jnp.maximum(jnp.max(jnp.where(_acting(G, free), jnp.abs(c), 0.0), initial=0.0), ctol)


def _acting(G, free):
    """The constraint rows with a nonzero entry on a ``free`` speed."""
    return jnp.any(jnp.where(free[None, :], G, 0.0) != 0.0, axis=1)


def _restore(system, st, evaluate, q, data, var, lo_q, hi_q, ctol, c_shape, iterations: int = 4):
    """Put a trial point back on the constraint manifold: Gauss–Newton on ``c(q) = 0``
    with minimum-norm steps over the free speeds ``var`` (the second-order correction
    of an SQP step), until ``max |c|`` is far below ``ctol`` or after ``iterations``.

    **Returns:** ``(q, f, c, G)`` at the corrected point (``evaluate``'s values there).
    """
    from ..lapack import spd_solve

    tree = system.topology.tree
    dtype = q.dtype
    eps = float(jnp.finfo(dtype).eps)

    def body(carry):
        q, _, _, _, k, _ = carry
        f, c, G = evaluate(q, data)
        done = (k == iterations) | (_violation(c, G, var, 0.0) <= 1e-3 * ctol)
        Gm = jnp.where(var[None, :], G, 0.0)
        acting = _acting(G, var)
        # rows that act on no free speed get a unit pivot and no right-hand side; the
        # shift keeps redundant rows (a loop closed by a 6-equation weld) factorable
        A = Gm @ Gm.T
        shift = 100.0 * eps * (1.0 + jnp.max(jnp.diag(A), initial=0.0))
        lam = spd_solve(A + jnp.diag(jnp.where(acting, shift, 1.0)), jnp.where(acting, c, 0.0))
        q_next = _retract(tree, q, -(Gm.T @ lam))
        if st.bound_u:
            bq = np.asarray(st.bound_q)
            q_next = q_next.at[bq].set(jnp.clip(q_next[bq], lo_q, hi_q))
        return jnp.where(done, q, q_next), f, c, G, k + 1, done

    m, nu = c_shape[0], tree.nu
    init = (q, jnp.zeros((), dtype), jnp.zeros(m, dtype), jnp.zeros((m, nu), dtype), jnp.asarray(0), jnp.asarray(False))
    q, f, c, G, _, _ = jax.lax.while_loop(lambda carry: ~carry[-1], body, init)
    return q, f, c, G


def _lm_step(system, st, problem, q, lin, mu, data, lo_q, hi_q, tol):
    """One projected Levenberg–Marquardt step from ``q``, where ``lin`` is ``linearize``'s
    value; returns ``(q, lin, mu, step size)``, ``lin`` at the returned ``q``.

    The trial point is linearized once: its residuals decide the step's acceptance and,
    when it is accepted, give the next step's model.

    With enforced constraints the step solves the KKT system of the linearized
    constraints, and the trial point is then restored onto the constraints
    (``_restore``): without that, its second-order constraint error outweighs the
    objective's decrease near the optimum and steps are rejected (the Maratos effect).
    A trial is accepted when it lowers the constraint violation (floored at the
    constraint tolerance), or keeps it without raising the objective.
    """
    linearize, evaluate = problem
    tree = system.topology.tree
    dtype = q.dtype
    nu = tree.nu
    movable = jnp.asarray(np.asarray(st.movable, bool))
    r, J, c, G = lin
    g = J.T @ r
    H = J.T @ J
    var = movable
    if st.bound_u:
        bu, bq = np.asarray(st.bound_u), np.asarray(st.bound_q)
        qb = q[bq]
        tol_b = 1e-12 * (1.0 + jnp.abs(qb))
        active = ((qb <= lo_q + tol_b) & (g[bu] > 0)) | ((qb >= hi_q - tol_b) & (g[bu] < 0))
        var = var.at[bu].set(var[bu] & ~active)
    mask2 = var[:, None] & var[None, :]
    d = jnp.diag(H)
    scale = jnp.maximum(d, 1e-12 * (1.0 + jnp.max(d)))
    A = jnp.where(mask2, H, 0.0) + jnp.diag(jnp.where(var, mu * scale, 1.0))
    b = -jnp.where(var, g, 0.0)
    if G.shape[0]:
        Gm = jnp.where(var[None, :], G, 0.0)
        m = G.shape[0]
        K = jnp.block([[A, Gm.T], [Gm, -1e-12 * jnp.eye(m, dtype=dtype)]])
        sol = jnp.linalg.solve(K, jnp.concatenate([b, -c]))
        du, lam = sol[:nu], sol[nu:]
    else:
        du = jnp.linalg.solve(A, b)
    du = jnp.where(var, du, 0.0)
    q_new = _retract(tree, q, du)
    if st.bound_u:
        bq = np.asarray(st.bound_q)
        q_new = q_new.at[bq].set(jnp.clip(q_new[bq], lo_q, hi_q))
    f0 = 0.5 * jnp.dot(r, r)
    if G.shape[0]:
        ctol = _constraint_tolerance(dtype)
        q_new, _, c_new, G_new = _restore(system, st, evaluate, q_new, data, var, lo_q, hi_q, ctol, c.shape)
        lin_new = linearize(q_new, data)
        f1 = 0.5 * jnp.dot(lin_new[0], lin_new[0])
        v0, v1 = _violation(c, G, movable, ctol), _violation(c_new, G_new, movable, ctol)
        # the objective compared through the Lagrangian f + lam . c: constraint errors
        # within the tolerance change f by about -lam . c, more than a step near the
        # optimum gains, and the Lagrangian cancels that to first order
        lam = jnp.where(_acting(G, movable), lam, 0.0)
        L0 = f0 + jnp.dot(lam, c)
        L1 = f1 + jnp.dot(lam, c_new)
        ok = jnp.isfinite(L1) & jnp.all(jnp.isfinite(q_new)) & ((v1 < v0) | ((v1 <= v0) & (L1 <= L0)))
    else:
        lin_new = linearize(q_new, data)
        f1 = 0.5 * jnp.dot(lin_new[0], lin_new[0])
        ok = jnp.isfinite(f1) & (f1 <= f0)
    q_out = jnp.where(ok, q_new, q)
    lin_out = jax.tree_util.tree_map(lambda new, old: jnp.where(ok, new, old), lin_new, lin)
    mu_out = jnp.where(ok, jnp.maximum(mu * 0.1, 1e-10), mu * 10.0)
    size = jnp.where(ok, jnp.max(jnp.abs(du), initial=0.0), jnp.inf)
    # a rejected step that is already tiny means convergence too
    size = jnp.where(~ok & (jnp.max(jnp.abs(du), initial=0.0) < 1e-2 * tol), 0.0, size)
    return q_out, lin_out, mu_out, size


def _solve_frame(system, st, problem, q0, data, lo_q, hi_q, max_steps, tol):
    def cond(carry):
        _, _, _, size, k = carry
        return (k < max_steps) & (size > tol)

    def body(carry):
        q, lin, mu, _, k = carry
        q, lin, mu, size = _lm_step(system, st, problem, q, lin, mu, data, lo_q, hi_q, tol)
        return q, lin, mu, size, k + 1

    dtype = q0.dtype
    init = (q0, problem[0](q0, data), jnp.asarray(1e-6, dtype), jnp.asarray(jnp.inf, dtype), jnp.asarray(0))
    q, lin, _, size, k = jax.lax.while_loop(cond, body, init)
    ok = size <= tol
    if st.constrained and st.has_constraints:
        # (steps that cannot restore the constraints are all rejected, and end tiny)
        ctol = _constraint_tolerance(dtype)
        c, G = lin[2], lin[3]
        ok = ok & (_violation(c, G, jnp.asarray(np.asarray(st.movable, bool)), ctol) <= ctol)
    return q, ok


def _solve(system, st: _Static, base: State, q_start, cweights, lo_q, hi_q, cw, tol, axis, obs, weights, cvals):
    """All frames, in passes of a batched (vmap) solve that reproduce OpenSim's warm starts.

    Run by ``batching.map_shards`` (``_run_solve``): on the whole batch, or on one
    device's shard of the frames, ``axis`` (a ``batching.BatchAxis``) carrying the warm
    start from the shard before and the largest change over every shard.

    **Arguments:** ``obs (F, M, 3)`` observed markers (m, 0 where missing), ``weights
    (F, M)`` the per-frame normalized weights ``w_i / sum w`` (0 where missing),
    ``cvals (F, C)``/``cweights (C,)`` coordinate tasks, ``lo_q/hi_q`` clamped ranges.

    **Returns:** ``q (F, nq)``, converged ``(F,)``, model markers ``(F, M, 3)``, passes
    ``(F,)`` (the same for every frame).
    """
    locations = _marker_locations(system, st)
    params = _tree_params(system, base)
    problem = _problem(system, st, base, locations, cw, params)
    fixed = np.asarray(st.fixed_q, np.int32)
    q_start = q_start.at[fixed].set(base.q[fixed])

    # OpenSim solves the first frame from the default pose and each later frame from
    # the previous frame's solution. Its result is the fixed point of
    # q_i = solve(frame i, start = q_{i-1}), q_{-1} = the default pose; each pass of
    # the loop below applies that map to every frame at once (vmap), until no frame
    # changes. Smooth motions take two or three passes; the sequential chain is
    # reproduced exactly after at most n_frames passes. Solutions of one frame from two
    # starts that agree within the step tolerance count as the same.
    n = obs.shape[0]
    pass_tol = 1e3 * tol

    def full(q, o, w, cv):
        return _solve_frame(system, st, problem, q, (o, w, cv, cweights), lo_q, hi_q, st.max_steps, tol)

    def cond(carry):
        _, _, change, k = carry
        return (k < st.max_passes) & (change > pass_tol)

    def body(carry):
        q, _, _, k = carry
        starts = axis.previous(q, q_start)
        q_new, ok = jax.vmap(full)(starts, obs, weights, cvals)
        return q_new, ok, axis.max(jnp.abs(q_new - q)), k + 1

    q0 = jnp.broadcast_to(q_start, (n,) + q_start.shape)
    init = (q0, jnp.zeros(n, bool), jnp.asarray(jnp.inf, q_start.dtype), jnp.asarray(0))
    q, ok, change, passes = jax.lax.while_loop(cond, body, init)
    ok = ok & (change <= pass_tol)
    x = jax.vmap(lambda qq: _marker_points(system, st, base, qq, locations, params))(q)
    return q, ok, x, jnp.full(n, passes)


def _marker_locations(system, st):
    model = system.model
    if not st.marker_paths:
        return jnp.zeros((0, 3))
    return jnp.stack([jnp.asarray(model.find(p).location) for p in st.marker_paths])


# -- the differentiable core -----------------------------------------------------------


class IKInfo(NamedTuple):
    """How ``solve_inverse_kinematics`` went: ``converged (n_frames,)`` whether each
    frame met the tolerance (and held the enforced constraints, as ``IKResult``'s);
    ``passes``: the batched passes that reproduced OpenSim's warm starts."""

    converged: Any
    passes: Any


def solve_inverse_kinematics(
    system,
    markers,
    positions,
    weights=None,
    *,
    coordinate_tasks: dict | None = None,
    constraint_weight: float = math.inf,
    initial_state: State | None = None,
    tol: float = 1e-10,
    max_steps: int = 100,
    max_passes: int | None = None,
    return_info: bool = False,
    devices=None,
):
    """Inverse kinematics of one trial as a pure JAX function of the system and the data.

    The same problem and solver as ``inverse_kinematics`` (see the module), on arrays.
    Its derivatives, with respect to the system's properties (any traced leaf of
    ``system``: marker locations, joint frames, ...), the marker positions, the
    weights, the coordinate tasks and ``initial_state``, are those of the optimum: the
    implicit function theorem on its first-order conditions (the stationarity of
    ``f`` over the free coordinates, with locked and prescribed coordinates and the
    bounds active at the solution held, and the enforced constraints with their
    multipliers), one linear solve per frame; the iterations are not differentiated.
    It is ``jit``-, ``vmap``- (over trials of equal length) and ``grad``-able.

    **Arguments:**

    - ``system``: the built model.
    - ``markers``: names (or paths) of the model's markers, one per column of
      ``positions``.
    - ``positions``: ``(n_frames, n_markers, 3)`` experimental marker positions in
      Ground (m); NaN where missing.
    - ``weights``: ``(n_markers,)`` or ``(n_frames, n_markers)`` marker weights, 0 where
      missing (normalized per frame, as OpenSim); default 1.
    - ``coordinate_tasks``: ``{coordinate name: (weight, value)}`` with ``value``
      ``None`` (its ``default_value``), a number or an array ``(n_frames,)`` (rad or m).
    - ``constraint_weight``, ``initial_state``, ``tol``, ``max_steps``,
      ``max_passes``: as ``inverse_kinematics``.
    - ``return_info``: also return an ``IKInfo``.
    - ``devices``: a list of devices or a ``jax.sharding.Mesh`` to shard the frames
      over (as ``map_batch``'s; default: all local devices when there are several,
      else one). Each device solves a contiguous block of frames, the warm start
      passed on from the block before; the result equals the unsharded one. Inside
      ``jit``, ``vmap`` or ``grad`` the frames are not sharded.

    **Returns:** ``q (n_frames, nq)`` (rad or m), or ``(q, IKInfo)``.

    The derivatives are the optimum's where the solve converged (``IKInfo.converged``).
    Under ``jit`` or ``vmap`` the Hessians they need are computed even when no
    derivative is asked for; at top level they are not.

    Example, the gradient of the optimal marker error with respect to a segment's
    scale factor (``scaled_system`` in ``simjax.tools.gradients``)::

        def error(k):
            s = scaled_system(system, {"r_humerus": k}, muscle_lengths=False)
            q = solve_inverse_kinematics(s, names, positions)
            return jnp.sum((marker_positions(s, names, q) - positions) ** 2)

        jax.grad(error)(1.0)
    """
    from ..compiling import _at_top_level

    paths = _marker_paths(system, markers)
    base = initial_state if initial_state is not None else _pose_state(system)
    dtype = base.q.dtype
    positions = jnp.asarray(positions, dtype)
    n = positions.shape[0]
    if positions.shape != (n, len(paths), 3):
        raise ValueError(f"positions of shape {positions.shape}, expected (n_frames, {len(paths)}, 3)")
    w = jnp.ones(len(paths), dtype) if weights is None else jnp.asarray(weights, dtype)
    present = jnp.all(jnp.isfinite(positions), axis=-1) & (w > 0)
    w = jnp.where(present, w, 0.0)
    wsum = jnp.sum(w, axis=1, keepdims=True)
    w = w / jnp.where(wsum > 0, wsum, 1.0)
    obs = jnp.where(present[..., None], positions, 0.0)
    st, prob = _prepare(system, paths, n, coordinate_tasks, constraint_weight, base, tol, max_steps, max_passes)
    q, ok, _, passes = _run_solve(system, st, base, obs, w, prob, devices)
    if not _at_top_level():  # (at top level nothing can ask for derivatives)
        q = _implicit(system, st, base, q, obs, w, prob)
    return (q, IKInfo(ok, passes)) if return_info else q


def marker_positions(system, markers, q, state: State | None = None):
    """The model's markers in Ground at the coordinates ``q``.

    **Arguments:** ``markers``: names (or paths) of the model's markers; ``q``: ``(...,
    nq)`` coordinates (rad or m); ``state``: the other state values (default:
    the default pose, ``system.default_coordinates()``; only prescribed motion depends on them).

    **Returns:** ``(..., n_markers, 3)`` positions (m). Differentiable in ``system`` and
    ``q``.
    """
    base = state if state is not None else _pose_state(system)
    return _marker_positions(system, _marker_paths(system, markers), jnp.asarray(q, base.q.dtype), base)


@eqx.filter_jit
@full_precision
def _marker_positions(system, paths, q, base):
    st = _Static(
        frames=tuple(system.topology.connections[(p, "parent_frame")] for p in paths),
        marker_paths=paths,
        coord_q=(),
        coord_u=(),
        movable=(),
        bound_u=(),
        bound_q=(),
        fixed_q=(),
        constrained=True,
        has_constraints=False,
        max_steps=0,
        max_passes=0,
    )
    locations = _marker_locations(system, st)
    flat = q.reshape(-1, q.shape[-1])
    x = jax.vmap(lambda qq: _marker_points(system, st, base, qq, locations))(flat)
    return x.reshape(q.shape[:-1] + x.shape[1:])


@eqx.filter_jit
@full_precision
def _implicit(system, st: _Static, base: State, q_star, obs, weights, prob):
    """``q_star`` (the solver's optimum, ``(F, nq)``) with the derivatives of the
    optimum attached by the implicit function theorem, frame by frame (vmap).

    In the chart ``q = retract(q_star, d)`` (``d`` in u-space) the optimum is a root of
    ``F(d, lam)``: over the free speeds the gradient of the Lagrangian ``f + lam . c``
    (``c``: the enforced constraint errors), over the others the held value (a locked
    or prescribed coordinate at its start value, a coordinate at its active bound), and
    ``c`` itself (a constraint row that acts on no free speed is dropped, as the solver
    drops it). ``implicit_root`` differentiates that root with one linear solve of
    ``dF/d(d, lam)``: the Hessian of the Lagrangian bordered by the constraints.
    """
    tree = system.topology.tree
    nu = tree.nu
    cq, fixed_q = np.asarray(st.coord_q, np.int32), np.asarray(st.fixed_q, np.int32)
    bu, bq = np.asarray(st.bound_u, np.int32), np.asarray(st.bound_q, np.int32)
    movable = np.asarray(st.movable, bool)
    # the q of each speed's coordinate (-1: a quaternion's rotation)
    u_q = np.full(nu, -1, np.int32)
    for info in tree.coordinates.values():
        if info.q >= 0:
            u_q[info.u] = info.q
    has_q = u_q >= 0
    u_q0 = np.where(has_q, u_q, 0)
    enforce = st.has_constraints and st.constrained
    locations = _marker_locations(system, st)
    params = _tree_params(system, base)
    cweights, cw, lo, hi = prob["cweights"], prob["cw"], prob["lo"], prob["hi"]
    q_start = prob["q_start"].at[fixed_q].set(base.q[fixed_q])

    def errors(q):
        return _context(system, base.replace(q=q), params).constraints.perr

    def merit(q, o, w, cv):
        """``f``: as the solver's ``|r|^2 / 2``, written without the square roots of the weights."""
        x = _marker_points(system, st, base, q, locations, params)
        m = 0.5 * jnp.sum(w * jnp.sum((x - o) ** 2, axis=-1))
        if st.coord_q:
            m = m + 0.5 * jnp.sum(cweights * (q[cq] - cv) ** 2)
        if st.has_constraints and not st.constrained:
            m = m + 0.5 * cw * jnp.sum(errors(q) ** 2)
        return m

    def frame(q_star, o, w, cv):
        q_star = jax.lax.stop_gradient(q_star)
        zero = jnp.zeros(nu, q_star.dtype)

        def chart(d):
            return _retract(tree, q_star, d)

        # the free speeds and the multipliers at the solution, as the solver finds them
        g = jax.grad(lambda d: merit(chart(d), *jax.lax.stop_gradient((o, w, cv))))(zero)
        free = jnp.asarray(movable)
        target = q_start[u_q0]
        if st.bound_u:
            qb, lo_, hi_ = jax.lax.stop_gradient((q_star[bq], lo, hi))
            tol_b = 1e-12 * (1.0 + jnp.abs(qb))
            at_lo = (qb <= lo_ + tol_b) & (g[bu] > 0)
            at_hi = (qb >= hi_ - tol_b) & (g[bu] < 0)
            free = free.at[bu].set(free[bu] & ~(at_lo | at_hi))
            target = target.at[bu].set(jnp.where(at_lo, lo, hi))
        lam_star = jnp.zeros(0, q_star.dtype)
        if enforce:
            G = jax.lax.stop_gradient(jax.jacfwd(lambda d: errors(chart(d)))(zero))
            Gf = jnp.where(free[None, :], G, 0.0)
            acting = jnp.any(Gf != 0.0, axis=1)
            lam_star = -jnp.linalg.pinv(Gf.T) @ jnp.where(free, g, 0.0)

        def first_order(v):
            d, lam = v[:nu], v[nu:]

            def lagrangian(d):
                q = chart(d)
                return merit(q, o, w, cv) + (jnp.dot(lam, errors(q)) if enforce else 0.0)

            q = chart(d)
            held = jnp.where(has_q, q[u_q0] - target, d)
            out = jnp.where(free, jax.grad(lagrangian)(d), held)
            if enforce:
                out = jnp.concatenate([out, jnp.where(acting, errors(q), lam)])
            return out

        v = implicit_root(first_order, jnp.concatenate([zero, lam_star]))
        return chart(v[:nu])

    return jax.vmap(frame)(q_star, obs, weights, prob["cvals"])


# -- the public function ----------------------------------------------------------------


def _units_factor(table: TimeSeriesTable, source: str = "markers") -> float:
    units = table.metadata.get("Units", "m").strip()
    factor = _UNITS.get(units, _UNITS.get(units.lower()))
    if factor is None:
        raise ValueError(f"{source}: unknown length units {units!r} (known: {', '.join(sorted(_UNITS))})")
    return factor


def _nearest_row(times: np.ndarray, t: float) -> int:
    return int(np.argmin(np.abs(times - t)))


def _frame_range(times: np.ndarray, time_range, source: str) -> tuple[int, int]:
    """OpenSim's frames: the nearest rows to the time range clamped to the data."""
    if time_range is None:
        return 0, len(times)
    lo = max(float(time_range[0]), float(times[0]))
    hi = min(float(time_range[1]), float(times[-1]))
    if hi < lo:
        raise ValueError(
            f"time_range {float(time_range[0]):g} to {float(time_range[1]):g} s is outside the data of "
            f"{source} ({times[0]:g} to {times[-1]:g} s)"
        )
    return _nearest_row(times, lo), _nearest_row(times, hi) + 1


def _prepare(
    system,
    paths,
    n_frames: int,
    coordinate_tasks,
    constraint_weight,
    base: State,
    tol,
    max_steps,
    max_passes,
    stacklevel: int = 3,
):
    """The static problem (``_Static``) and its traced data, shared by both entry points.

    **Arguments:** ``paths``: model marker paths; ``coordinate_tasks``: ``{coordinate:
    (weight, value)}`` with ``value`` ``None`` (its ``default_value``), a number or an
    array ``(n_frames,)`` (rad or m); the others as ``inverse_kinematics``.

    **Returns:** ``(st, data)``; ``data``: ``cvals (F, C)``, ``cweights (C,)``, ``lo``,
    ``hi`` (clamped ranges), ``cw``, ``tol`` and ``q_start`` (the first frame's start,
    inside the bounds; it holds the locked and prescribed values).
    """
    topo = system.topology
    tree = topo.tree
    dtype = base.q.dtype
    locked = set(topo.locked_u.tolist())
    coord_q, coord_u, cvals, cweights = [], [], [], []
    for name, (weight, value) in (coordinate_tasks or {}).items():
        path = system.coordinate_path(name)
        info = tree.coordinates[path]
        comp = system.model.find(path)
        if info.u in locked or comp.prescribed:
            continue  # OpenSim: locked coordinates are held, their task dropped
        if comp.is_free_to_satisfy_constraints:
            warnings.warn(
                IKWarning(f"coordinate {name!r} is free to satisfy constraints: its task is ignored"),
                stacklevel=stacklevel,
            )
            continue
        if info.q < 0:
            raise ValueError(f"coordinate task {name!r}: the rotations of a quaternion joint cannot be tracked")
        v = jnp.asarray(comp.default_value if value is None else value, dtype)
        if v.ndim == 0:
            v = jnp.full(n_frames, v)
        elif v.shape != (n_frames,):
            raise ValueError(
                f"coordinate task {name!r}: values of shape {v.shape}, expected ({n_frames},), one per frame"
            )
        coord_q.append(info.q)
        coord_u.append(info.u)
        cvals.append(v)
        cweights.append(jnp.asarray(weight, dtype))
    cvals = jnp.stack(cvals, axis=1) if cvals else jnp.zeros((n_frames, 0), dtype)
    cweights = jnp.stack(cweights) if cweights else jnp.zeros(0, dtype)

    # fixed, movable and bounded coordinates
    fixed_q, fixed_u = [], []
    for info in tree.coordinates.values():
        if info.u in locked:
            fixed_u.append(info.u)
            if info.q >= 0:
                fixed_q.append(info.q)
    if topo.prescribed is not None:
        from ..forward import prescribed_motion

        pm = prescribed_motion(system, base.t)
        fixed_q += [int(i) for i in np.asarray(pm[0])]
        fixed_u += [int(i) for i in np.asarray(pm[1])]
    movable = np.ones(tree.nu, bool)
    movable[np.asarray(fixed_u, int)] = False
    bound_u, bound_q, ranges = [], [], []
    for path, info in tree.coordinates.items():
        comp = system.model.find(path)
        if comp.clamped and info.q >= 0 and movable[info.u]:
            bound_u.append(info.u)
            bound_q.append(info.q)
            ranges.append(jnp.asarray(comp.range, dtype))
    lo = jnp.stack([r[0] for r in ranges]) if ranges else jnp.zeros(0, dtype)
    hi = jnp.stack([r[1] for r in ranges]) if ranges else jnp.zeros(0, dtype)
    st = _Static(
        frames=tuple(topo.connections[(p, "parent_frame")] for p in paths),
        marker_paths=tuple(paths),
        coord_q=tuple(coord_q),
        coord_u=tuple(coord_u),
        movable=tuple(bool(b) for b in movable),
        bound_u=tuple(bound_u),
        bound_q=tuple(bound_q),
        fixed_q=tuple(fixed_q),
        constrained=bool(np.isinf(constraint_weight)),
        has_constraints=bool(_n_constraint_rows(system, base)),
        max_steps=int(max_steps),
        max_passes=int(n_frames + 1 if max_passes is None else max_passes),
    )
    q_start = jnp.asarray(base.q)
    if bound_q:  # the start inside the bounds
        q_start = q_start.at[np.asarray(bound_q)].set(jnp.clip(q_start[np.asarray(bound_q)], lo, hi))
    data = {
        "cvals": cvals,
        "cweights": cweights,
        "lo": lo,
        "hi": hi,
        "q_start": q_start,
        "cw": jnp.asarray(constraint_weight if np.isfinite(constraint_weight) else 0.0, dtype),
        "tol": jnp.asarray(max(float(tol), 1e-6 if dtype == jnp.float32 else 0.0), dtype),
    }
    return st, data


def _run_solve(system, st, base, obs, weights, data, devices=None):
    """``_solve`` on the prepared problem, without derivatives, its frames sharded over
    ``devices`` (``batching.map_shards``).

    **Returns:** ``q (F, nq)``, converged ``(F,)``, model markers ``(F, M, 3)`` and the
    passes (a scalar).
    """
    from ..batching import map_shards

    system, base, shared, frames = _no_gradient(
        (
            system,
            base,
            (data["q_start"], data["cweights"], data["lo"], data["hi"], data["cw"], data["tol"]),
            (obs, weights, data["cvals"]),
        )
    )
    call = jax.tree_util.Partial(_solve, system, st, base, *shared)
    q, ok, x, passes = map_shards(call, *frames, devices=devices)
    return q, ok, x, passes[0]


def _no_gradient(tree):
    # (a concrete array has no gradient to stop: only tracers go through stop_gradient,
    # so that a call at top level dispatches nothing per leaf)
    return jax.tree_util.tree_map(lambda x: jax.lax.stop_gradient(x) if isinstance(x, jax.core.Tracer) else x, tree)


def _model_marker_paths(system) -> dict:
    """``{marker name: path}`` of the model's markers (the first of a name)."""
    from ..mechanics.frames import Marker

    out = {}
    for path, comp in system.model.walk():
        if isinstance(comp, Marker):
            out.setdefault(comp.name, path)
    return out


def _marker_paths(system, markers) -> tuple:
    known = _model_marker_paths(system)
    paths = set(known.values())
    out = []
    for m in markers:
        if m in paths:
            out.append(m)
        elif m in known:
            out.append(known[m])
        else:
            raise KeyError(f"no marker named {m!r} in the model")
    return tuple(out)


def inverse_kinematics(
    system,
    markers: TimeSeriesTable,
    *,
    marker_weights: dict | None = None,
    coordinate_tasks: dict | None = None,
    constraint_weight: float = math.inf,
    time_range=None,
    initial_state: State | None = None,
    tol: float = 1e-10,
    max_steps: int = 100,
    max_passes: int | None = None,
    devices=None,
) -> IKResult:
    """OpenSim's inverse kinematics over every frame of a marker table, in one batched solve.

    **Arguments:**

    - ``system``: the built model (``Model.build()``).
    - ``markers``: a ``Vec3`` ``TimeSeriesTable`` of experimental markers (``read_table``
      of a ``.trc``); its ``Units`` metadata (``mm``, ``m``, ...; meters when absent)
      are honoured. Blank or NaN markers leave that frame's sums.
    - ``marker_weights``: ``{marker name: weight}``; only these markers are tracked (as
      OpenSim's ``IKMarkerTask`` set with ``apply``); ``None``: every marker of the data
      that the model has, weight 1.
    - ``coordinate_tasks``: ``{coordinate name: (weight, value)}`` with ``value`` a
      number (``manual_value``, rad or m), ``None`` (the coordinate's
      ``default_value``) or an array ``(n_rows,)`` over the marker table's rows
      (``from_file``, rad or m).
    - ``constraint_weight``: ``inf`` enforces the model's constraints exactly;
      otherwise their squared errors are added with this weight.
    - ``time_range``: ``(t0, t1)`` s, clamped to the data (OpenSim); ``None``: all rows.
    - ``initial_state``: the pose the first frame starts from and the values of locked
      coordinates (default: the default pose, ``system.default_coordinates()``).
    - ``tol``: step-size tolerance of the solve (rad or m; at least 1e-6 in float32).
    - ``max_steps``: iteration limit per frame and pass; ``max_passes``: limit on the
      passes that reproduce OpenSim's frame-to-frame warm starts (default
      ``n_frames + 1``, which reproduces them exactly).
    - ``devices``: a list of devices or a ``jax.sharding.Mesh`` to shard the frames
      over (as ``map_batch``'s; default: all local devices when there are several,
      else one). Each device solves a contiguous block of frames (the last padded with
      copies of the last frame, dropped after), the warm start passed on from the
      block before: the result equals the unsharded one.

    **Returns:** an ``IKResult``.

    **Raises:** ``ValueError`` for a time range outside the data, a frame where every
    tracked marker is missing (and no coordinate task), unknown units, or no markers
    in common between the model, the tasks and the data.

    The solve is ``solve_inverse_kinematics``'s (without its derivatives).
    """
    topo = system.topology
    tree = topo.tree
    if not markers.is_vec3:
        markers = markers.pack(3)
    factor = _units_factor(markers)
    times_all = np.asarray(markers.times)
    first, stop = _frame_range(times_all, time_range, "the marker table")
    times = times_all[first:stop]
    data = np.asarray(markers.values[first:stop], float) * factor

    # the markers in use: data order, in the weight set (if any), in the model
    model_markers = _model_marker_paths(system)
    names, weights, cols, paths = [], [], [], []
    for j, label in enumerate(markers.labels):
        if marker_weights is not None and label not in marker_weights:
            continue
        if label not in model_markers:
            warnings.warn(
                IKWarning(f"marker {label!r} is in the marker data but not in the model: ignored"), stacklevel=2
            )
            continue
        names.append(label)
        weights.append(1.0 if marker_weights is None else float(marker_weights[label]))
        cols.append(j)
        paths.append(model_markers[label])
    if marker_weights is not None:
        for label in marker_weights:
            if not markers.has_column(label):
                warnings.warn(
                    IKWarning(f"marker {label!r} has a task but is not in the marker data: ignored"), stacklevel=2
                )
    obs = data[:, cols, :] if cols else np.zeros((len(times), 0, 3))
    w = np.asarray(weights, float)
    present = np.all(np.isfinite(obs), axis=-1) & (w[None, :] > 0)
    wsum = np.sum(np.where(present, w[None, :], 0.0), axis=1)

    # coordinate tasks: their values over the frames
    tasks = {}
    for name, (weight, value) in (coordinate_tasks or {}).items():
        if value is not None and np.ndim(value) != 0:
            value = np.asarray(value, float)
            if value.shape != (len(times_all),):
                raise ValueError(
                    f"coordinate task {name!r}: values of shape {value.shape}, expected "
                    f"({len(times_all)},), one per marker-table row"
                )
            value = value[first:stop]
        tasks[name] = (weight, value)
    base = initial_state if initial_state is not None else _pose_state(system)
    st, prob = _prepare(system, paths, len(times), tasks, constraint_weight, base, tol, max_steps, max_passes)

    empty = (wsum <= 0) & (not np.any(np.asarray(prob["cweights"]) > 0))
    if np.any(empty):
        bad = times[empty]
        raise ValueError(
            f"inverse kinematics: every tracked marker is missing at {len(bad)} frame(s), "
            f"t = {', '.join(f'{t:g}' for t in bad[:5])}{' ...' if len(bad) > 5 else ''} s; "
            "nothing to solve for there (remove those frames or add coordinate tasks)"
        )
    if not names and not st.coord_q:
        raise ValueError(
            "inverse kinematics: no marker is in the model, the tasks and the data together, and "
            "there is no coordinate task"
        )
    wn = np.where(present, w[None, :], 0.0) / np.where(wsum > 0, wsum, 1.0)[:, None]
    obs0 = np.where(present[..., None], obs, 0.0)
    dtype = base.q.dtype
    q, ok, x, passes = _run_solve(system, st, base, jnp.asarray(obs0, dtype), jnp.asarray(wn, dtype), prob, devices)
    from ..batching import gather

    q, ok, x, passes = gather((q, ok, x, passes))
    passes = int(passes)

    sq = np.where(present, np.sum((x - obs0) ** 2, axis=-1), 0.0)
    total = sq.sum(axis=1)
    nm = len(names)
    rms = np.sqrt(total / nm) if nm else np.zeros_like(total)
    mx = np.sqrt(sq.max(axis=1)) if nm else np.zeros_like(total)
    errors = TimeSeriesTable(
        times,
        np.stack([total, rms, mx], axis=1),
        ["total_squared_error", "marker_error_RMS", "marker_error_max"],
        metadata={"inDegrees": "no"},
    )
    locations = TimeSeriesTable(times, x, names, metadata={"Units": "m"})

    cpaths = [p for p in topo.coordinate_paths if p in tree.coordinates]
    cols_q = [tree.coordinates[p].q for p in cpaths]
    values = (
        np.stack([q[:, i] if i >= 0 else np.full(len(times), np.nan) for i in cols_q], axis=1)
        if cpaths
        else np.zeros((len(times), 0))
    )
    coords = TimeSeriesTable(times, values, [p.rsplit("/", 1)[-1] for p in cpaths], metadata={"inDegrees": "no"})
    return IKResult(
        coordinates=coords,
        marker_errors=errors,
        marker_locations=locations,
        q=q,
        squared_errors=sq,
        marker_names=tuple(names),
        converged=ok,
        passes=passes,
    )


def _n_constraint_rows(system, base):
    """Number of constraint rows other than locked and prescribed coordinates (static)."""
    topo = system.topology
    if not topo.role_groups("constraints") and not topo.tree.loop_welds:
        return 0  # (no constraint components and no loops: no need to trace the rows)
    n_builtin = len(topo.locked_u)
    if topo.prescribed is not None:
        from ..forward import prescribed_motion

        n_builtin += len(np.asarray(prescribed_motion(system, base.t)[0]))
    shape = jax.eval_shape(lambda s: _context(system, s).constraints.perr, base).shape[0]
    return shape - n_builtin


# -- OpenSim's Storage files ----------------------------------------------------------


def write_storage(path, name: str, times, values, labels, in_degrees: bool = False, description: str = "") -> None:
    """Write a table in OpenSim's Storage format (``Storage::print``): name line,
    ``version=1``, ``nRows``, ``nColumns`` (with time), ``inDegrees``, an optional
    description, ``endheader``, labels, rows as ``%16.8f`` tab-separated.

    **Arguments:** ``path``; ``name`` (first line); ``times (n,)`` s; ``values (n, k)``;
    ``labels`` (``k`` column labels, time excluded); ``in_degrees``; ``description``:
    free text written before ``endheader`` (OpenSim's Kinematics adds its units note).
    """
    times = np.asarray(times, float)
    values = np.asarray(values, float).reshape(len(times), -1)
    lines = [
        name,
        "version=1",
        f"nRows={len(times)}",
        f"nColumns={values.shape[1] + 1}",
        f"inDegrees={'yes' if in_degrees else 'no'}",
    ]
    if description:
        lines.append(description)
    lines.append("endheader")
    lines.append("\t".join(["time", *labels]))
    for t, row in zip(times, values):
        lines.append("\t".join(f"{v:16.8f}" for v in (t, *row)))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open_output(path, "w", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")


_KINEMATICS_NOTE = (
    "\nUnits are S.I. units (second, meters, Newtons, ...)\n"
    "If the header above contains a line with 'inDegrees', this indicates whether rotational "
    "values are in degrees (yes) or radians (no).\n"
)


def coordinates_in_degrees(system, table: TimeSeriesTable) -> np.ndarray:
    """The coordinate values of ``table`` (rad or m) with the rotational coordinates
    (OpenSim's motion type) in degrees."""
    out = np.array(table.values, float)
    for j, label in enumerate(table.labels):
        if system.topology.tree.coordinates[system.coordinate_path(label)].motion_type == ROTATIONAL:
            out[:, j] = np.degrees(out[:, j])
    return out


# -- the setup runner -----------------------------------------------------------------


def _tasks(setup):
    """The applied ``IKMarkerTask``s and ``IKCoordinateTask``s of the setup's ``IKTaskSet``."""
    marker_w, coord_tasks = {}, {}
    node = setup.element("IKTaskSet")
    if node is None:
        return None, {}
    objects = node.find("objects")
    for task in objects.children if objects is not None else []:
        name = task.attrib.get("name", "")

        def prop(tag, default=""):
            c = task.find(tag)
            return c.text.strip() if c is not None and c.text.strip() else default

        if prop("apply", "true").lower() != "true":
            continue
        weight = float(prop("weight", "1"))
        if task.tag == "IKMarkerTask":
            marker_w[name] = weight
        elif task.tag == "IKCoordinateTask":
            kind = prop("value_type", "default_value")
            value = float(prop("value", "0"))
            coord_tasks[name] = (weight, kind, value)
        else:
            raise setup.error("IKTaskSet", task.tag, "expected IKMarkerTask or IKCoordinateTask")
    return marker_w, coord_tasks


def _run(setup) -> dict:
    """Run an ``InverseKinematicsTool`` setup; see the module docstring."""
    from ..io.osim import load_osim

    model_path = setup.path("model_file", must_exist=True)
    if model_path is None:
        raise setup.error("model_file", "", "no model file given")
    marker_path = setup.path("marker_file", must_exist=True)
    if marker_path is None:
        raise setup.error("marker_file", "", "no marker file given")
    markers = read_table(marker_path)
    if not markers.is_vec3:
        markers = markers.pack(3)
    rng = setup.numbers("time_range")
    if rng is not None and rng.size != 2:
        raise setup.error("time_range", setup.text("time_range"), "expected two times")
    try:
        _frame_range(np.asarray(markers.times), rng, marker_path)
    except ValueError as e:
        raise setup.error("time_range", setup.text("time_range"), str(e)) from None
    system = load_osim(model_path).build()
    marker_w, ctasks = _tasks(setup)
    if marker_w is not None:
        model_names = {c.name for _, c in system.model.walk() if type(c).__name__ == "Marker"}
        for name in marker_w:
            if not markers.has_column(name):
                setup.warn(f"IKMarkerTask {name!r}: no such marker in {marker_path}; ignored")
            elif name not in model_names:
                setup.warn(f"IKMarkerTask {name!r}: no such marker in the model {model_path}; ignored")
        marker_w = {k: v for k, v in marker_w.items() if markers.has_column(k) and k in model_names}
        if not marker_w and not ctasks:
            marker_w = None  # OpenSim: an empty weight set tracks every marker (weight 1)
    coord_file = setup.path("coordinate_file", must_exist=any(k == "from_file" for _, k, _ in ctasks.values()))
    coordinate_tasks = {}
    coord_table = read_table(coord_file) if coord_file else None
    for name, (weight, kind, value) in ctasks.items():
        try:
            path = system.coordinate_path(name)
        except KeyError:
            raise setup.error("IKTaskSet", name, "IKCoordinateTask names no coordinate of the model") from None
        if kind == "manual_value":
            coordinate_tasks[name] = (weight, value)
        elif kind == "from_file":
            if coord_table is None or not coord_table.has_column(name):
                raise setup.error(
                    "coordinate_file", setup.text("coordinate_file"), f"value for coordinate {name!r} not found"
                )
            from ..functions import GCVSpline

            y = np.asarray(coord_table.column(name), float)
            if coord_table.in_degrees and system.topology.tree.coordinates[path].motion_type == ROTATIONAL:
                y = np.radians(y)
            spline = GCVSpline(3, np.asarray(coord_table.times), y)
            coordinate_tasks[name] = (weight, np.asarray(jax.vmap(spline)(jnp.asarray(markers.times))))
        else:
            coordinate_tasks[name] = (weight, None)
    cw = setup.number("constraint_weight", math.inf)
    tol = setup.number("accuracy", 1e-5)  # OpenSim's default
    if not (math.isfinite(tol) and tol > 0):
        raise setup.error("accuracy", setup.text("accuracy"), "must be a positive number")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IKWarning)  # reported above, through the setup
        result = inverse_kinematics(
            system,
            markers,
            marker_weights=marker_w,
            coordinate_tasks=coordinate_tasks,
            constraint_weight=cw,
            time_range=rng,
            tol=tol,
        )
    out = {}
    times = result.coordinates.times
    motion = setup.path("output_motion_file")
    if motion:
        write_storage(
            motion,
            "Coordinates",
            times,
            coordinates_in_degrees(system, result.coordinates),
            result.coordinates.labels,
            in_degrees=True,
            description=_KINEMATICS_NOTE,
        )
        out["motion"] = motion
    results_dir = setup.path("results_directory") or setup.folder
    if setup.flag("report_errors", True):
        path = os.path.join(results_dir, f"{setup.name}_ik_marker_errors.sto")
        write_storage(
            path, "Model Marker Errors from IK", times, result.marker_errors.values, result.marker_errors.labels
        )
        out["marker_errors"] = path
    if setup.flag("report_marker_locations", False):
        path = os.path.join(results_dir, f"{setup.name}_ik_model_marker_locations.sto")
        labels = [f"{n}{s}" for n in result.marker_names for s in ("_tx", "_ty", "_tz")]
        write_storage(
            path,
            "Model Marker Locations from IK",
            times,
            result.marker_locations.values.reshape(len(times), -1),
            labels,
        )
        out["marker_locations"] = path
    setup.report_unused(ignored=("input_directory",))
    return out


_setup.register_tool("InverseKinematicsTool", _run)
