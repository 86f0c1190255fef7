"""Assembly and projection onto the constraint manifold (Simbody's Assembler and project).

A state satisfies its position constraints when ``qerr(q, t) = 0`` (constraint
position errors, locked and prescribed coordinates, loop-closing welds, and the norm
of every quaternion) and its velocity constraints when ``uerr = G u - c(t) = 0``.

``assemble`` finds the ``q`` satisfying every position constraint that is nearest to
the requested coordinates in the weighted norm ``sum_i w_i (q_i - q_req_i)^2``:
locked coordinates keep their value and prescribed ones take their function's value;
all others may move. It is the fixed point of a sequential-quadratic-programming
iteration with an identity Hessian,

``q <- q_req - W^-1 Gq^T (Gq W^-1 Gq^T)^+ (qerr(q) + Gq (q_req - q))``,

(``Gq = d qerr / d q`` by forward-mode autodiff; the pseudo-inverse makes redundant
constraints harmless) whose fixed points are exactly the first-order optimality
conditions. It is solved by ``optimistix.fixed_point`` and differentiated by the
implicit function theorem (exact derivatives of the assembled ``q`` with respect to
the requested state and every model property, without unrolling the iterations).
Then ``u`` is projected onto the velocity constraints.

``project`` is the cheap, local version the integrator calls after each step
(Simbody ``project``): a few Gauss-Newton steps in ``u``-space, ``dq = N(q) du`` with
``G du = -qerr`` minimum-norm, quaternions renormalized, then the minimum-norm change
of ``u`` that satisfies ``G u = c``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ..state import State
from .linalg import min_norm_correction, psd_solve

__all__ = ["AssemblyInfo", "assemble", "project", "project_u", "project_y", "position_errors", "fixed_coordinates"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class AssemblyInfo:
    """How an assembly went: ``success`` (bool), ``max_qerr`` (largest position
    error left), ``max_uerr`` (largest velocity error left), ``steps``."""

    success: Any
    max_qerr: Any
    max_uerr: Any
    steps: Any


def _context(system, state, controls=None, parameters=None):
    from ..forward import Context

    return Context(system, state, controls, parameters=parameters)


def position_errors(system, state: State):
    """All position-level errors ``qerr (m,)``: constraint rows, then quaternion norms."""
    from ..forward import quaternion_errors

    ctx = _context(system, state)
    return jnp.concatenate([ctx.constraints.perr, quaternion_errors(ctx.tree, state.q)])


def fixed_coordinates(system, state: State, ctx=None):
    """Static indices into ``q`` of locked and prescribed coordinates, and their values
    (locked: the value in ``state``; prescribed: the function at ``state.t``);
    ``ctx``: a ``Context`` of the system whose parameters to use, or None."""
    from ..forward import prescribed_motion

    topo = system.topology
    tree = topo.tree
    locked_q = np.asarray(
        [info.q for info in tree.coordinates.values() if info.u in set(topo.locked_u.tolist())], np.int32
    )
    idx, vals = [locked_q], [state.q[locked_q]]
    pm = prescribed_motion(system, state.t, ctx)
    if pm is not None:
        idx.append(pm[0])
        vals.append(pm[2])
    return np.concatenate(idx).astype(np.int32), jnp.concatenate(vals)


def _weights(system, weights, dtype):
    nq = system.topology.nq
    if weights is None:
        return jnp.ones(nq, dtype)
    if isinstance(weights, dict):
        w = np.ones(nq)
        for name, value in weights.items():
            info = system.topology.tree.coordinates[system.coordinate_path(name)]
            if info.q < 0:
                raise KeyError(f"coordinate {name!r} is a rotation of a quaternion joint; weight q entries directly")
            w[info.q] = value
        return jnp.asarray(w, dtype)
    w = jnp.asarray(weights, dtype)
    if w.shape != (nq,):
        raise ValueError(f"weights must be a dict of coordinates or an array of shape ({nq},), got {w.shape}")
    return w


def _sqp_map(q, args):
    system, state, q_req, w_inv = args
    f = lambda qq: position_errors(system, state.replace(q=qq))  # noqa: E731
    perr = f(q)
    Gq = jax.jacfwd(f)(q)
    Gw = Gq * w_inv
    A = Gw @ Gq.T
    lam = psd_solve(A, perr + Gq @ (q_req - q))
    return q_req - Gw.T @ lam


def assemble(
    system,
    state: State,
    weights=None,
    tol: float = 1e-10,
    max_steps: int = 100,
    throw: bool = True,
    return_info: bool = False,
):
    """Satisfy the position and velocity constraints, keeping coordinates near ``state``'s.

    **Arguments:**

    - ``system``, ``state``: the requested coordinates are ``state.q``.
    - ``weights``: how strongly each coordinate keeps its requested value, a dict
      ``{coordinate name or path: weight}`` (others 1) or an array ``(nq,)``; larger
      is stiffer. Locked and prescribed coordinates are always held.
    - ``tol``: required largest position error (and fixed-point tolerance).
    - ``max_steps``: iteration limit.
    - ``throw``: raise (under jit: ``eqx.error_if``) when the constraints cannot be
      satisfied to ``tol``; with ``throw=False`` check ``info.success``.
    - ``return_info``: also return an ``AssemblyInfo``.

    **Returns:** the assembled ``State`` (or ``(state, info)``).

    Inconsistent constraints (no ``q`` satisfies them) fail; redundant ones are fine.
    """
    dtype = state.q.dtype
    fixed, fixed_vals = fixed_coordinates(system, state)
    q_req = state.q.at[fixed].set(fixed_vals)
    w = _weights(system, weights, dtype)
    w_inv = jnp.where(w > 0, 1.0 / jnp.maximum(w, 1e-12), 1e12)
    w_inv = w_inv.at[fixed].set(0.0)
    if position_errors(system, state).shape[0] == 0:
        q = q_req
        steps = jnp.asarray(0)
    else:
        sol = optx.fixed_point(
            _sqp_map,
            optx.FixedPointIteration(rtol=0.0, atol=tol * 1e-2),
            q_req,
            args=(system, state, q_req, w_inv),
            max_steps=max_steps,
            throw=False,
        )
        q = sol.value
        steps = sol.stats["num_steps"]
    # one realization at the assembled q gives qerr, G and the velocity errors
    from ..forward import quaternion_errors

    st = state.replace(q=q)
    ctx = _context(system, st)
    rows = ctx.constraints
    qerr = jnp.concatenate([rows.perr, quaternion_errors(ctx.tree, q)])
    uerr = rows.verr
    if rows.G.shape[0]:
        du = min_norm_correction(rows.G, rows.verr)
        st = st.replace(u=st.u - du)
        uerr = rows.verr - rows.G @ du
    max_q = jnp.max(jnp.abs(qerr), initial=0.0)
    max_u = jnp.max(jnp.abs(uerr), initial=0.0)
    ok = (max_q <= tol) & jnp.all(jnp.isfinite(st.q))
    if throw:
        st = eqx.error_if(
            st,
            ~ok,
            "assembly failed: the position constraints cannot be satisfied to the tolerance "
            "(inconsistent constraints, or a requested state too far from any assembled one)",
        )
    info = AssemblyInfo(success=ok, max_qerr=max_q, max_uerr=max_u, steps=steps)
    return (st, info) if return_info else st


def project_u(system, state: State):
    """The nearest ``u`` (least squares) satisfying the velocity constraints ``G u = c``."""
    rows = _context(system, state).constraints
    if rows.G.shape[0] == 0:
        return state
    return state.replace(u=state.u - min_norm_correction(rows.G, rows.verr))


def _normalize_quaternions(tree, q):
    if not len(tree.quat_q):
        return q
    idx = tree.quat_q[:, None] + np.arange(4)
    quats = q[idx]
    return q.at[idx].set(quats / jnp.linalg.norm(quats, axis=-1, keepdims=True))


def project(system, state: State, iterations: int = 2, tol: float | None = None, parameters=None):
    """Project ``q`` then ``u`` onto the constraint manifold (Simbody-style, local).

    ``iterations`` Gauss-Newton steps ``dq = N(q) du`` with ``du`` the minimum-norm
    solution of ``G du = -qerr`` (quaternions renormalized after each), then the
    least-squares correction of ``u``. Meant for states already near the manifold (an
    integrator step); use ``assemble`` from arbitrary states.

    With a tolerance ``tol`` (Simbody's constraint tolerance), the positions are
    projected only when the RMS of the position errors exceeds ``tol / 10``, and the
    speeds only when the RMS of the velocity errors does (Simbody's rule: nothing
    happens to a state that already satisfies its constraints). Locked and prescribed
    coordinates are always reset and quaternions always normalized. ``parameters``:
    the system's ``Context.prepared()`` when computed outside a loop, or None.

    **Returns:** the projected ``State``.
    """
    from ..mechanics.tree import qdot_from_u

    tree = system.topology.tree
    # the parameters from outside the conditionals below, where XLA can hoist them out
    # of the integrator's loop
    outer = _context(system, state, parameters=parameters)
    parameters = outer.prepared()
    fixed, fixed_vals = fixed_coordinates(system, state, outer)
    q = state.q.at[fixed].set(fixed_vals)
    q = _normalize_quaternions(tree, q)
    st = state.replace(q=q)
    ctx = _context(system, st, parameters=parameters)
    rows = ctx.constraints
    if not rows.G.shape[0]:
        return st

    def project_q(st):
        for _ in range(iterations):
            rows = _context(system, st, parameters=parameters).constraints
            du = -min_norm_correction(rows.G, rows.perr)
            st = st.replace(q=_normalize_quaternions(tree, st.q + qdot_from_u(tree, st.q, du)))
        return st, _context(system, st, parameters=parameters).constraints

    def correct_u(st, rows):
        return st.replace(u=st.u - min_norm_correction(rows.G, rows.verr))

    if tol is None:
        st, rows = project_q(st)
        return correct_u(st, rows)
    limit = 0.1 * tol
    st, rows = jax.lax.cond(_rms(rows.perr) > limit, project_q, lambda st: (st, rows), st)
    return jax.lax.cond(_rms(rows.verr) > limit, correct_u, lambda st, rows: st, st, rows)


def _rms(x):
    return jnp.sqrt(jnp.mean(x * x))


def project_y(system, t, y, d, tol: float | None = None, parameters=None):
    """``project`` on an ODE state vector ``y = (q, u, z)`` (for the integrator;
    ``parameters``: ``Context.prepared()`` of the system, computed outside its loop)."""
    tree = system.topology.tree
    nq, nu = tree.nq, tree.nu
    st = State(t=jnp.asarray(t, y.dtype), q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=d)
    st = project(system, st, tol=tol, parameters=parameters)
    return jnp.concatenate([st.q, st.u, y[nq + nu :]])
