"""OpenSim's Computed Muscle Control (``CMCTool``), run from its setup file or called
directly (``cmc``).

Thelen and Anderson's algorithm as ``CMC::computeControls`` runs it. Every
``cmc_time_window`` ``T``, from the state at ``ti``:

1. **Desired accelerations** by PD tracking of the desired kinematics with the task
   gains (``tracking``'s, as RRA): ``ka a_des(ti + T) + kv (u_des(ti) - u) + kp
   (q_des(ti) - q)``.
2. **The actuators' reach** (``VectorFunctionForActuators``): the muscles' states
   integrated over the window with every excitation held at a value, the coordinates
   following the desired kinematics shifted by the current error
   (``CMCActuatorSubsystem``); each actuator's force at ``ti + T`` at its control's
   lower and upper bound gives the force bounds.
3. **Desired forces** (``ActuatorForceTargetFast``): the forces within those bounds of
   least ``sum (f / f_opt)^2`` (a muscle's ``f_opt`` its class's
   ``calcInextensibleTendonActiveFiberForce`` at full activation, at the window's end,
   as static optimization computes it; another actuator's its ``optimal_force``) whose
   accelerations equal the desired ones there: a quadratic program solved exactly by
   static optimization's dual Newton method on the constraints orthonormalized. With
   ``use_fast_optimization_target`` false, the penalty target
   (``ActuatorForceTarget``): the forces within those bounds of least ``w_s sum (f /
   f_s)^2 + sum w (a - a_des)^2``, ``f_s`` a muscle's ``max_isometric_force``, another's
   ``optimal_force``, ``w`` the tasks' weights, ``w_s`` lowered from 1 by a sigmoid
   where a task's error nears its ``limit``; solved by the same method.
4. **Excitations** (``RootSolver``): per actuator, the control whose force at the
   window's end is the desired force, by Brent's method to OpenSim's tolerance
   (0.004), all actuators at once.
5. **Forward**: the whole model integrated over the window, the muscles' excitations
   held (``ControlLinear`` steps), the other controls linear between the windows'
   ends.

The initial muscle states come from ``CMC::computeInitialStates``: 0.2 s integrations
with the coordinates held at the initial time (twice at excitation 0.01, once at the
controls of a first 30 ms window), a second 30 ms window solve, and its predicted state;
the tracking then starts 30 ms after the initial time, as OpenSim's.

One compiled program runs the windows one after another in a ``lax.while_loop`` (a
window's work has no loop over muscles or coordinates), stopping at the first failed
window, whose results and those after it are dropped. The initial solves run it on one
window each, the tracking on all of them; the windows' inputs are padded to a multiple
of 64 windows, so that nearby time ranges share the program. It takes the model's
arrays as arguments, so another model of the same structure reuses it too.

Differences from OpenSim, by design: each window's integrations take fixed classical
Runge-Kutta steps of at most 1 ms (OpenSim's Runge-Kutta-Merson takes steps of at most 1
ms in the predictor, to ``integrator_error_tolerance`` in the forward integration); the
desired forces are the exact optimum (OpenSim's IPOPT stops at its convergence
tolerance). The fast target meets the accelerations exactly, so the tasks' weights do
not change its solution; a task of weight 0, whose constraint OpenSim's fast target
multiplies away, is tracked here like the others. ``desired_points_file``,
``rra_controls_file`` (which OpenSim 4.6 does not implement either), analyses and
controllers are refused by name. ``actuators_to_exclude`` leaves actuators out of CMC's
control: theirs stay 0, as OpenSim's. A ``constraints_file`` bounds the controls over
time and sets how each is interpolated, as ``control_constraints`` describes. A
constraint that makes a muscle's excitation linear between the windows' ends
(``use_steps`` false) is followed as OpenSim follows it, but the two then part (0.05 RMS
in some excitations on the Gait10dof18musc pipeline, tracking errors of the same small
size): the root solve assumes excitations held over the window, as OpenSim warns.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..forward import Context
from ..muscles.muscle import Muscle
from ..state import State
from . import tracking
from .analyze import load_model_with_force_sets
from .control_constraints import match_control_constraints
from .optimization import _derived_systems, _dual_newton, _moment_arms, _muscle_kinds, _muscle_strengths
from .rra import (
    _actuator_speeds,
    _control_limits,
    _tables,
    read_tracking_setup,
    run_tracking_tool,
    tracking_inputs,
    write_rra_results,
)
from .setup import Setup, SetupError, SetupWarning, register_tool

__all__ = ["cmc", "write_cmc_results"]

#: CMC's excitation range for muscles (``MIN_CMC_CONTROL_VALUE``, ``MAX_CMC_CONTROL_VALUE``)
_MIN_EXCITATION, _MAX_EXCITATION = 0.02, 1.0
#: ``RootSolver``'s tolerance on the controls, as ``CMC::computeControls`` sets it
_ROOT_TOL = 4.0e-3
#: the most dual Newton steps of a window's desired forces (the loop stops once
#: converged: the hardest window seen, of the Gait10dof18musc walk with ``tib_ant_r``
#: excluded, at 0.63 s, takes 20)
_QP_STEPS = 200
#: the longest integration step (s): OpenSim's predictor's maximum step
_MAX_STEP = 1.0e-3
#: ``computeInitialStates``: the equilibration time (s), excitation, and first window (s)
_HOLD_TIME, _HOLD_EXCITATION, _INITIAL_WINDOW = 0.2, 0.01, 0.030


# -- the window's pieces ----------------------------------------------------------------------


#: the classical Runge-Kutta tableau: stage matrix, weights, and each stage's node in
#: half steps
_RK4_A = ((0.0, 0.0, 0.0, 0.0), (0.5, 0.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0))
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)
_RK4_HALF_STEPS = (0, 1, 1, 2)


def _rk4_steps(f, y0, h, n):
    """``n`` classical Runge-Kutta steps of ``h`` of ``dy/dt = f(j, y)``, ``j`` the time
    in half steps from the start; the stages a loop over one ``f``, so that the model is
    traced once."""
    dtype = y0.dtype
    a, b = jnp.asarray(_RK4_A, dtype), jnp.asarray(_RK4_B, dtype)
    half = jnp.asarray(_RK4_HALF_STEPS)

    def step(k, y):
        def stage(i, K):
            return K.at[i].set(f(2 * k + half[i], y + h * (a[i] @ K)))

        K = jax.lax.fori_loop(0, 4, stage, jnp.zeros((4, y.shape[0]), dtype))
        return y + h * (b @ K)

    return jax.lax.fori_loop(0, n, step, y0)


def _predict(system, params, d, z0, x, ti, h, n, kin):
    """The actuators' states over ``n`` steps of ``h`` from ``ti``, controls ``x`` held,
    the coordinates prescribed: ``kin(j) = (q, u)`` at the ``j``-th half step.

    **Returns:** ``(actuator forces at the end (n_act,), z at the end)``."""

    def context(j, z):
        q, u = kin(j)
        state = State(t=ti + 0.5 * j * h, q=q, u=u, z=z, d=d)
        return Context(system, state, x, parameters=jax.lax.optimization_barrier(params), check_controls=False)

    z = _rk4_steps(lambda j, z: context(j, z).zdot, z0, h, n)
    return context(2 * n, z).group_outputs(system.actuator_paths, "actuation"), z


def _unchecked(system, t, y, d, x, params=None):
    """The context at time ``t`` and state ``y = (q, u, z)`` with controls ``x`` unchecked
    against the actuators' bounds, as OpenSim's (an actuator CMC does not control has
    OpenSim's default, 0, see ``_excitation_bounds``)."""
    nq, nu = system.topology.tree.nq, system.topology.tree.nu
    state = State(t=t, q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=d)
    return Context(system, state, x, parameters=params, check_controls=False)


def _rhs(system, t, y, d, x, params):
    """``simulate.rhs`` with the controls unchecked (``_unchecked``)."""
    acc = _unchecked(system, t, y, d, x, params).acc
    return jnp.concatenate([acc.qdot, acc.udot, acc.zdot])


@jit
def _actuation(system, times, Y, d, X):
    """The actuators' forces at ``times`` (``(K,)``), states ``Y = (q, u, z)`` and controls
    ``X`` (``(K, ·)``), the controls unchecked (``_unchecked``): ``(K, n_actuators)``."""

    def one(t, y, x):
        return _unchecked(system, t, y, d, x).group_outputs(system.actuator_paths, "actuation")

    return jax.vmap(one)(times, Y, X)


def _brent(g, a, b, fa, fb, aux, tol, iterations: int = 60):
    """Roots in ``[a, b]`` of the componentwise function ``g`` (``(n,) -> ((n,), aux)``,
    component ``i`` depending on ``x_i`` only; ``fa``, ``fb``: its values at the ends,
    ``aux`` its other result at ``b``): Brent's method on every component at once, each
    stopping once its bracket is within ``tol`` (``RootSolver::solve``).

    **Returns:** ``(the roots, g's other result there)``."""
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    c, fc = a, fa
    done = jnp.zeros(a.shape, bool)

    def body(carry):
        i, a0, b0, c0, fa0, fb0, fc0, done, _ = carry
        # c on the other side of the root from b, and b the better end
        flip = ((fb0 > 0) & (fc0 > 0)) | ((fb0 < 0) & (fc0 < 0))
        c, fc = jnp.where(flip, a0, c0), jnp.where(flip, fa0, fc0)
        prev = b0 - a0
        swap = jnp.abs(fc) < jnp.abs(fb0)
        a, b, c = jnp.where(swap, b0, a0), jnp.where(swap, c, b0), jnp.where(swap, b0, c)
        fa, fb, fc = jnp.where(swap, fb0, fa0), jnp.where(swap, fc, fb0), jnp.where(swap, fb0, fc)
        tol_act = 2.0 * jnp.finfo(b.dtype).eps * jnp.abs(b) + 0.5 * tol
        step = 0.5 * (c - b)
        converged = (jnp.abs(step) <= tol_act) | (fb == 0.0)
        # interpolation: the secant through two distinct points, else inverse quadratic
        cb = c - b
        nz = lambda v: jnp.where(v == 0.0, 1.0, v)  # noqa: E731
        t1 = fb / nz(fa)
        r, t2 = fa / nz(fc), fb / nz(fc)
        p_quad = t1 * (cb * r * (r - t2) - (b - a) * (t2 - 1.0))
        q_quad = (r - 1.0) * (t2 - 1.0) * (t1 - 1.0)
        p = jnp.where(a == c, cb * t1, p_quad)
        q = jnp.where(a == c, 1.0 - t1, q_quad)
        q = jnp.where(p > 0.0, -q, q)
        p = jnp.abs(p)
        interpolate = (jnp.abs(prev) >= tol_act) & (jnp.abs(fa) > jnp.abs(fb))
        interpolate &= (p < 0.75 * cb * q - 0.5 * jnp.abs(tol_act * q)) & (p < jnp.abs(0.5 * prev * q))
        step = jnp.where(interpolate, p / nz(q), step)
        step = jnp.where(jnp.abs(step) < tol_act, jnp.where(step > 0.0, tol_act, -tol_act), step)
        # a component converged before this pass keeps its values; one converging now
        # keeps the better end
        moving = ~done & ~converged
        keep = lambda new, now, old: jnp.where(moving, new, jnp.where(done, old, now))  # noqa: E731
        a, fa, b, c, fc = keep(b, a, a0), keep(fb, fa, fa0), keep(b + step, b, b0), keep(c, c, c0), keep(fc, fc, fc0)
        b = jnp.clip(b, lo, hi)  # (a step of the tolerance can leave the bracket)
        fb, aux = g(b)
        return i + 1, a, b, c, fa, fb, fc, done | converged, aux

    carry = (0, a, b, c, fa, fb, fc, done, aux)
    carry = jax.lax.while_loop(lambda c: (c[0] < iterations) & ~jnp.all(c[7]), body, carry)
    return carry[2], carry[8]


class _Plan(NamedTuple):
    """What a window needs of the model's structure (static: hashable tuples):
    ``muscle``: per actuator, whether it is a muscle; ``muscles``: their paths;
    ``kept``, ``off_index``: the other actuators and their indices in the muscle-free
    system; ``u_order``: each coordinate's speed index; ``kinds``: the muscles grouped by
    how OpenSim computes their strength (static optimization's ``_muscle_kinds``)."""

    muscle: tuple
    muscles: tuple
    kept: tuple
    off_index: tuple
    u_order: tuple
    kinds: tuple


def _plan(system):
    """``(_Plan, the muscle-free system, the rigid-tendon system)`` of ``system`` (the
    latter two as static optimization derives them).

    **Raises:** ``ModelError`` naming a muscle of a class whose strength OpenSim's
    ``calcInextensibleTendonActiveFiberForce`` gives is not implemented."""
    model = system.model
    paths = system.actuator_paths
    muscle = tuple(isinstance(model.find(p), Muscle) for p in paths)
    muscles = tuple(p for p, m in zip(paths, muscle) if m)
    off, rigid = _derived_systems(system, bool(muscles))
    kept = tuple(i for i, p in enumerate(paths) if p in off.actuator_paths and not muscle[i])
    tree = system.topology.tree
    plan = _Plan(
        muscle,
        muscles,
        kept,
        tuple(off.actuator_paths.index(paths[i]) for i in kept),
        tuple(tree.coordinates[c].u for c in system.coordinate_paths),
        _muscle_kinds(model, muscles),
    )
    return plan, off, rigid


def _acceleration_map(system, off, rigid, plan, opt, controlled, t, q, u, z, d):
    """Accelerations as an affine function of the actuators' forces overridden
    (``ActuatorForceTargetFast``): ``(a0 (nu,), A (nu, n_act))``; and each actuator's
    ``f_opt``: a muscle's ``calcInextensibleTendonActiveFiberForce`` at full activation
    (its class's, as static optimization computes it, on the rigid-tendon system),
    another's ``optimal_force``. An actuator not ``controlled`` (excluded from CMC) other
    than a muscle acts at control 0 in ``a0``, its column of ``A`` zero; an excluded
    muscle's force is held by its bounds, as its predicted force at control 0."""
    dtype = q.dtype
    nu = u.shape[0]
    n_act = len(system.actuator_paths)
    s_off = off.default_state().replace(t=t, q=q, u=u)
    mus = np.flatnonzero(plan.muscle)
    if plan.muscles:
        ctx = Context(system, State(t=t, q=q, u=u, z=z, d=d))
        R = _moment_arms(ctx, plan.muscles)  # (k, n_coordinates), coordinate order
        Ru = jnp.zeros((len(plan.muscles), nu), dtype).at[:, np.asarray(plan.u_order, int)].set(R)
        rigid_ctx = Context(rigid, rigid.default_state().replace(t=t, q=q, u=u))
        strength = _muscle_strengths(rigid_ctx, plan.muscles, plan.kinds, jnp.zeros(len(plan.muscles), dtype))
    else:
        Ru = jnp.zeros((0, nu), dtype)
        strength = jnp.zeros(0, dtype)
    n_off = len(off.actuator_paths)
    cols, off_cols = np.asarray(plan.kept, int), np.asarray(plan.off_index, int)

    def udot(f):
        c = jnp.zeros(n_off, dtype).at[off_cols].set(jnp.where(controlled[cols], f[cols] / opt[cols], 0.0))
        return Context(off, s_off, c, mobility_forces=Ru.T @ f[mus], check_controls=False).acc.udot

    zero = jnp.zeros(n_act, dtype)
    a0 = udot(zero)
    A = jax.jacfwd(udot)(zero)
    f_opt = opt.at[mus].set(strength) if plan.muscles else opt
    return a0, A, f_opt


class _Actuators(NamedTuple):
    """What the windows need of the actuators (arrays, traced): ``opt``: each one's
    ``optimal_force`` (1 for muscles); ``stress``: the force of stress 1 (``getStress``:
    a muscle's ``max_isometric_force``, another's ``optimal_force``); ``controlled``:
    whether CMC controls it; ``fast``: whether the desired forces come from the fast
    target (``use_fast_optimization_target``) rather than the penalty target."""

    opt: jax.Array
    stress: jax.Array
    controlled: jax.Array
    fast: jax.Array


def _least_squares(M, c, lb, ub):
    """``min |x|^2`` subject to ``M x = c`` and ``lb <= x <= ub``, by the dual Newton
    method on the constraints with orthonormal rows (``Q' x = R^-T c`` from ``M' = Q R``:
    the rows of ``M`` are near dependent, and the method converges slowly on them).

    **Returns:** ``(x, whether M x = c is missed by more than 1e-6 of 1 + max |c|)``."""
    Q, R = jnp.linalg.qr(M.T)
    x, *_ = _dual_newton(Q.T, jax.scipy.linalg.solve_triangular(R.T, c, lower=True), lb, ub, 2.0, _QP_STEPS)
    return x, jnp.max(jnp.abs(M @ x - c)) > 1e-6 * (1.0 + jnp.max(jnp.abs(c)))


def _fast_target(A, b, f_min, f_max, scale):
    """``ActuatorForceTargetFast``'s forces: ``min sum (f / scale)^2`` subject to ``A f =
    b`` and ``f_min <= f <= f_max``, exactly.

    **Returns:** ``(f, infeasible)``."""
    s, infeasible = _least_squares(A * scale[None, :], b, f_min / scale, f_max / scale)
    return s * scale, infeasible


def _penalty_target(A, b, f_min, f_max, stress, w, weight):
    """``ActuatorForceTarget``'s forces: ``min weight sum (f / stress)^2 + sum w (A f -
    b)^2`` subject to ``f_min <= f <= f_max``, exactly (OpenSim solves it by least
    squares where that lands within the bounds, else by its optimizer).

    Written for the dual Newton method with the weighted residuals ``r = sqrt(w) (A f -
    b)`` as variables too: ``min |x|^2`` over ``x = (sqrt(weight) f / stress, r)``
    subject to ``r - sqrt(w) A f = -sqrt(w) b``.

    **Returns:** ``(f, not converged)``."""
    n_t = A.shape[0]
    scale = stress / jnp.sqrt(weight)
    sw = jnp.sqrt(w)
    M = jnp.concatenate([-(sw[:, None] * A) * scale[None, :], jnp.eye(n_t, dtype=A.dtype)], axis=1)
    c = -sw * b
    inf = jnp.full(n_t, jnp.inf, A.dtype)
    x, unsolved = _least_squares(M, c, jnp.concatenate([f_min / scale, -inf]), jnp.concatenate([f_max / scale, inf]))
    return x[: A.shape[1]] * scale, unsolved


def _window(system, params, off, rigid, plan, act, gains, lo, hi, steps, y, x_prev, ti, h, n, refs):
    """One ``CMC::computeControls`` and the integration over its window.

    **Arguments:** ``system``; ``params``: its prepared parameters; ``off``, ``rigid``,
    ``plan``: ``_plan(system)``; ``act``: ``_Actuators``; ``gains``: the tasks' indices
    and gains; ``lo``, ``hi``: control bounds; ``steps``: per control, whether it is
    held over the window (else linear from ``x_prev``); ``y = (q, u, z)`` at ``ti``;
    ``x_prev``: the controls at ``ti`` (NaN: none, as before the first solve;
    the controls then held); ``h``, ``n``: the window's steps (s, count); ``refs =
    (qs, qd, us, ud)``: the desired coordinates (the ``q`` splines), their derivative,
    speeds and accelerations at the window's half steps, ``(2 n + 1, ·)`` or more rows.

    **Returns:** ``(y at ti + n h, controls, pErr, the predicted z at ti + n h,
    failed, (qdot, udot) at ti)``, ``failed`` a sum of flags: 1 the desired forces'
    problem has no solution (the fast target: no forces within the actuators' reach
    give the desired accelerations) or its solve did not converge, 2 the controls are
    not finite, 4 the integration is not finite."""
    d = system.default_state().d
    q_idx, u_idx, w, kp, kv, ka, limit = gains
    qs, qd, us, ud = refs
    nq, nu = qs.shape[1], qd.shape[1]
    q, u, z = y[:nq], y[nq : nq + nu], y[nq + nu :]
    dq, du = q - qs[0], u - qd[0]
    p_err = qs[0][q_idx] - q[q_idx]
    v_err = us[0][u_idx] - u[u_idx]
    a_des = ka * ud[2 * n][u_idx] + kv * v_err + kp * p_err
    tf = ti + n * h

    def kin(j):
        return qs[j] + dq, qd[j] + du

    def predict(x):
        return _predict(system, params, d, z, x, ti, h, n, kin)

    (f_lo, f_hi), (_, z_hi) = jax.vmap(predict)(jnp.stack([lo, hi]))
    hi = jnp.where(f_hi - f_lo < 1.0, lo, hi)  # (no force to choose by the control)
    q1, u1 = kin(2 * n)
    a0, A, f_opt = _acceleration_map(system, off, rigid, plan, act.opt, act.controlled, tf, q1, u1, z_hi, d)
    f_min, f_max = jnp.minimum(f_lo, f_hi), jnp.maximum(f_lo, f_hi)
    A, b = A[u_idx], a_des - a0[u_idx]
    tiny = jnp.finfo(q.dtype).tiny

    def fast(_):
        return _fast_target(A, b, f_min, f_max, jnp.maximum(jnp.abs(f_opt), tiny))

    def penalty(_):
        weight = tracking.stress_term_weight(limit, p_err)
        return _penalty_target(A, b, f_min, f_max, act.stress, w, weight)

    f, infeasible = jax.lax.cond(act.fast, fast, penalty, None)

    def miss(xx):
        forces, zz = predict(xx)
        return forces - f, zz

    x, z_pred = _brent(miss, lo, hi, f_lo - f, jnp.where(hi == lo, f_lo, f_hi) - f, z_hi, _ROOT_TOL)

    def controls(tau):  # held, or linear between the window's ends
        along = jnp.clip((tau - ti) / (n * h), 0.0, 1.0)  # (round-off would pass a bound)
        return jnp.where(steps | jnp.isnan(x_prev), x, x_prev + along * (x - x_prev))

    def ydot(j, yy):
        tau = ti + 0.5 * j * h
        # (the barrier keeps XLA from recomputing the parameters' uses in every stage:
        # without it the integration took four times as long)
        return _rhs(system, tau, yy, d, controls(tau), jax.lax.optimization_barrier(params))

    y1 = _rk4_steps(ydot, y, h, n)
    # (qdot, udot) at ti, with the controls in force there: the last window's (a held
    # control's value at a node's time is that node's)
    motion0 = _rhs(system, ti, y, d, jnp.where(jnp.isnan(x_prev), x, x_prev), params)[: nq + nu]
    failed = (
        jnp.where(infeasible, 1, 0)
        + jnp.where(jnp.all(jnp.isfinite(x)), 0, 2)
        + jnp.where(jnp.all(jnp.isfinite(y1)), 0, 4)
    ).astype(jnp.int32)
    return y1, x, p_err, z_pred, failed, motion0


@jit
def _windows(system, off, rigid, plan, act, gains, steps, y, x_prev, times, lo, hi, count, refs, h, n):
    """The first ``count`` of consecutive windows (``_window``) in one program, each from
    the state and controls the one before left, up to the first that fails.

    **Arguments:** as ``_window``'s, per window (a leading axis of ``K >= count``):
    ``times`` (the windows' start times, s), ``lo``, ``hi``, ``refs`` (``(K, rows,
    ·)``); ``y``, ``x_prev``: before the first window.

    **Returns:** ``_window``'s results per window, ``(K, ·)``: ``(y at the window's
    end, controls, pErr, the predicted z, failed, (qdot, udot) at its start)``; zero for the
    windows not run.
    """
    params = Context(system, system.default_state()).prepared()

    def window(k, y, x_prev):
        at = (times[k], lo[k], hi[k], jax.tree.map(lambda r: r[k], refs))
        t, lo_k, hi_k, refs_k = at
        return _window(system, params, off, rigid, plan, act, gains, lo_k, hi_k, steps, y, x_prev, t, h, n, refs_k)

    def body(carry):
        k, y, x_prev, _, outs = carry
        out = window(k, y, x_prev)
        outs = jax.tree.map(lambda o, v: o.at[k].set(v), outs, out)
        return k + 1, out[0], out[1], out[4], outs

    K, nz = times.shape[0], y.shape[0] - refs[0].shape[2] - refs[1].shape[2]
    outs = (
        jnp.zeros((K,) + y.shape, y.dtype),
        jnp.zeros((K,) + x_prev.shape, y.dtype),
        jnp.zeros((K, gains[0].shape[0]), y.dtype),
        jnp.zeros((K, nz), y.dtype),
        jnp.zeros(K, jnp.int32),
        jnp.zeros((K, refs[0].shape[2] + refs[1].shape[2]), y.dtype),
    )
    carry = (jnp.zeros((), jnp.int32), y, x_prev, jnp.zeros((), jnp.int32), outs)
    return jax.lax.while_loop(lambda c: (c[0] < count) & (c[3] == 0), body, carry)[4]


@jit
def _hold(system, x, t, q, u, z, h, n):
    """``obtainActuatorEquilibrium`` with the coordinates held: the actuators' states
    after ``n`` steps of ``h`` at controls ``x``, ``q`` and ``u`` fixed."""
    state0 = system.default_state()
    params = Context(system, state0).prepared()
    return _predict(system, params, state0.d, z, x, t, h, n, lambda j: (q, u))[1]


# -- the tool -----------------------------------------------------------------------------------


def _optimal_forces(model, system, plan, controlled, source) -> np.ndarray:
    """Each actuator's ``optimal_force`` (1 for a muscle and for an actuator CMC does not
    control).

    **Raises:** ``SetupError`` naming ``source`` and a controlled actuator that is neither
    a muscle nor ideal (force = control × optimal_force)."""
    out = []
    for p, is_muscle, on in zip(system.actuator_paths, plan.muscle, controlled):
        f = 1.0 if is_muscle or not on else getattr(model.find(p), "optimal_force", None)
        if f is None:
            raise SetupError(
                f"{source}: actuator {p!r} ({type(model.find(p)).__name__}) is neither a muscle nor an ideal "
                "actuator (force = control x optimal_force); CMC cannot predict its force"
            )
        out.append(float(np.asarray(f)))
    return np.asarray(out, float)


def _excitation_bounds(model, system, plan, controlled) -> tuple[np.ndarray, np.ndarray]:
    """CMC's control bounds (``CMC::extendAddToSystem``): ``min_control`` and
    ``max_control``, infinite ones as ±10000; a muscle's lower bound raised to 0.02 and
    an upper bound under 1 raised to 1, each with a ``SetupWarning``. An actuator not
    ``controlled`` has OpenSim's default control, 0, as both bounds, even outside its
    ``[min_control, max_control]`` (OpenSim does not check; a muscle's activation then
    decays below its minimum, as OpenSim's does)."""
    lo, hi = _control_limits(model, system)
    lo[~controlled] = hi[~controlled] = 0.0
    for i in np.flatnonzero(np.asarray(plan.muscle) & controlled):
        name = system.actuator_names[i]
        if lo[i] < _MIN_EXCITATION:
            warnings.warn(
                f"CMC cannot compute controls for muscles with controls under {_MIN_EXCITATION}; the minimum "
                f"control of muscle {name!r} is reset to {_MIN_EXCITATION}",
                SetupWarning,
                stacklevel=3,
            )
            lo[i] = _MIN_EXCITATION
        if hi[i] < _MAX_EXCITATION:
            warnings.warn(
                f"CMC cannot compute controls for muscles with controls over {_MAX_EXCITATION}; the maximum "
                f"control of muscle {name!r} is reset to {_MAX_EXCITATION}",
                SetupWarning,
                stacklevel=3,
            )
            hi[i] = _MAX_EXCITATION
    return lo, hi


def _controlled_actuators(model, system, excluded, source) -> np.ndarray:
    """Per actuator, whether CMC controls it (``CMCTool::getActuatorsPathsForCMC``): all
    but those named in ``excluded`` and those whose ``appliesForce`` is false (OpenSim
    skips the first actuator in that test, and so does this). OpenSim looks a name up
    as a group of the actuators first, but its actuator set never has groups, so a name
    is an actuator's name.

    **Warns:** a ``SetupWarning`` naming ``source`` and a name of no actuator, as
    OpenSim warns."""
    names = list(system.actuator_names)
    on = np.ones(len(names), bool)
    for i, p in enumerate(system.actuator_paths):
        if i > 0 and not getattr(model.find(p), "applies_force", True):
            on[i] = False
    for name in excluded:
        if name in names:
            on[names.index(name)] = False
        else:
            warnings.warn(
                f"{source}: actuators_to_exclude: no actuator or group is named {name!r}; nothing is excluded for it",
                SetupWarning,
                stacklevel=3,
            )
    return on


def _scalars(*values, dtype):
    """Python numbers as arrays (floats of ``dtype``, ints as int32): traced arguments of
    the compiled steps, not constants baked into them."""
    return tuple(jnp.asarray(v, jnp.int32 if isinstance(v, int) else dtype) for v in values)


def _accumulated(t0: float, dt: float, n: int):
    """``t0, t0 + dt, (t0 + dt) + dt, ...``: ``n + 1`` times summed one by one in floating
    point, as OpenSim's CMC advances its target time."""
    t = t0
    for _ in range(n + 1):
        yield t
        t = t + dt


def _steps(window: float) -> tuple[float, int]:
    """A window's integration steps: ``(h, n)``, ``n`` the fewest of at most 1 ms."""
    n = max(1, int(math.ceil(window / _MAX_STEP - 1e-9)))
    return window / n, n


def _failure(code: int, fast: bool) -> str:
    """What a window's ``failed`` flags (``_window``) mean, in words (``fast``: the fast
    target's)."""
    if code & 1 and not fast:
        return "the optimization of the actuator forces (the penalty target) did not converge"
    if code & 1:
        return (
            "no actuator forces within the actuators' reach give the desired accelerations (the optimization "
            "failed: not all degrees of freedom may be actuated, a task may track a locked coordinate, or the "
            "control bounds may be too tight)"
        )
    if code & 2:
        return "the controls were not finite"
    return "the integration was not finite"


def cmc(
    model,
    desired_kinematics,
    tasks,
    *,
    initial_time: float,
    final_time: float,
    external_loads=None,
    lowpass_cutoff: float = -1.0,
    dt: float = 0.010,
    equilibrate: bool = True,
    constraints=None,
    excluded_actuators=(),
    fast_target: bool = True,
    source: str = "cmc",
) -> dict:
    """OpenSim's Computed Muscle Control (see the module).

    **Arguments:** ``model``: a ``Model`` with its muscles and its reserve and residual
    actuators (ideal), without the external loads; ``desired_kinematics``: a
    coordinates ``TimeSeriesTable`` or file (degrees if its header says so); ``tasks``:
    a ``CMC_TaskSet`` file or ``TrackingTask`` records; ``initial_time``,
    ``final_time`` (s; clamped to the desired kinematics with a ``SetupWarning``);
    ``external_loads``: an ExternalLoads ``.xml`` path or ``ExternalForce`` components;
    ``lowpass_cutoff`` (Hz, negative: no filter); ``dt``: the ``cmc_time_window`` (s);
    ``equilibrate``: ``solve_for_equilibrium_for_auxiliary_states`` (the muscles
    equilibrated at the model's default state first, as OpenSim's tool does);
    ``constraints``: a control constraints file (``constraints_file``, see
    ``control_constraints``) or ``None``; ``excluded_actuators``: names of actuators CMC
    does not control (``actuators_to_exclude``): their controls stay 0 (a muscle's
    passive force and decaying activation still act), their control constraints are
    ignored with a ``SetupWarning``, and ``_controls.xml`` leaves them out, as
    OpenSim's; ``fast_target``: ``use_fast_optimization_target`` (the desired forces
    meet the desired accelerations exactly; false: the penalty target, which trades
    them against the actuators' stress with the tasks' weights); ``source``: a name
    for messages.

    **Returns:** a dict: ``"model"`` (with the external loads), ``"run"``: ``{"times"
    (K + 1,): the window boundaries from ``initial_time + 0.03`` to ``final_time -
    dt``; ``"q"``, ``"u"``, ``"z"``, ``"qdot"``, ``"udot"``: states and derivatives
    there; ``"controls"``: each actuator's control in force there (a muscle's
    excitation over the window that ends there); ``"pErr"``, ``"pErr_times"``: the
    tasks' position errors at every ``computeControls`` (from the second initial
    solve); ``"failed_at"``}``, ``"task_names"``, ``"tables"``: ``{"Kinematics_q",
    "Kinematics_u", "Kinematics_dudt", "Actuation_force", "Actuation_speed",
    "Actuation_power", "controls", "states", "pErr"}`` as OpenSim writes them,
    ``"control_limits"``: ``(min, max)`` per actuator, ``"controlled"``: per actuator,
    whether CMC controls it, ``"failed_at"``: ``None``, or the
    time (s) of the first window whose optimization found no forces that give the
    desired accelerations, or whose controls or integration were not finite (the
    results stop before it, with a ``SetupWarning``).

    **Raises:** ``SetupError`` naming ``source`` for a task naming no coordinate of the
    model, an actuator CMC cannot drive, or a time range without a window.
    """
    from ..muscles.equilibrium import equilibrate_muscles

    model, table, kin_source, tasks, task_source, ti, tf = tracking_inputs(
        model, desired_kinematics, tasks, external_loads, initial_time, final_time, source
    )
    system = model.build()
    plan, off, rigid = _plan(system)
    controlled = _controlled_actuators(model, system, excluded_actuators, source)
    opt = _optimal_forces(model, system, plan, controlled, source)
    desired = tracking.desired_kinematics(system, table, lowpass_cutoff, kin_source)
    gains = tracking.task_indices(system, tasks, task_source)
    if len(gains["names"]) == 0:
        raise SetupError(f"{task_source}: no active task to track")
    lo, hi = _excitation_bounds(model, system, plan, controlled)
    matched = match_control_constraints(constraints, system.actuator_names)
    for i in [i for i in matched.by_actuator if not controlled[i]]:
        warnings.warn(
            f"{constraints}: the control constraint {matched.by_actuator.pop(i).name!r} is for an actuator excluded "
            "from CMC; it is ignored",
            SetupWarning,
            stacklevel=2,
        )
    steps = jnp.asarray(matched.steps(plan.muscle))
    t_start = ti + _INITIAL_WINDOW
    n_win = int(math.floor((tf - dt - t_start) / dt + 1e-6))
    if n_win < 1:
        raise SetupError(
            f"{source}: the time range {ti:g} to {tf:g} s holds no {dt:g} s window after CMC's initial "
            f"{_INITIAL_WINDOW:g} s"
        )
    state0 = system.default_state(ti)
    dtype = jnp.asarray(state0.q).dtype
    tree = system.topology.tree
    nq, nu = tree.nq, tree.nu
    if equilibrate:
        # (at zero controls, within the actuators' bounds: OpenSim's CMC has none yet)
        lo_model, hi_model = _control_limits(model, system)
        state0 = equilibrate_muscles(system, state0, jnp.asarray(np.clip(0.0, lo_model, hi_model), dtype))
    g = (
        jnp.asarray(gains["q"]),
        jnp.asarray(gains["u"]),
        *(jnp.asarray(gains[k], dtype) for k in ("weight", "kp", "kv", "ka", "limit")),
    )
    stress = [
        float(np.asarray(model.find(p).max_isometric_force)) if m else 1.0
        for p, m in zip(system.actuator_paths, plan.muscle)
    ]
    act = _Actuators(
        jnp.asarray(opt, dtype),
        jnp.asarray(np.where(plan.muscle, stress, opt), dtype),
        jnp.asarray(controlled),
        jnp.asarray(bool(fast_target)),
    )
    h0, n0 = _steps(_INITIAL_WINDOW)
    h, n = _steps(dt)
    rows = 2 * max(n0, n) + 1  # (every window's references have the same rows)
    size = -(-(n_win + 1) // 64) * 64  # (nearby time ranges share one compiled program)

    def windows(y, x_prev, times, bounds, h, n, refs):
        """``_windows`` on ``len(times)`` windows, padded to ``size``."""
        k = len(times)

        def pad(a):
            a = np.asarray(a)
            return jnp.asarray(np.concatenate([a, np.repeat(a[-1:], size - k, axis=0)]))

        out = _windows(
            system,
            off,
            rigid,
            plan,
            act,
            g,
            steps,
            y,
            x_prev,
            pad(np.asarray(times, float)).astype(dtype),
            *(pad(b).astype(dtype) for b in bounds),
            jnp.asarray(k, jnp.int32),
            tuple(pad(r).astype(dtype) for r in refs),
            *_scalars(h, n, dtype=dtype),
        )
        return tuple(np.asarray(o)[:k] for o in out)

    def hold(x, t, q, u, z, h, n):
        return _hold(system, x, *_scalars(t, dtype=dtype), q, u, z, *_scalars(h, n, dtype=dtype))

    def refs(t0, h, n):
        return tracking.references(system, desired, t0 + 0.5 * h * np.arange(2 * n + 1))

    # computeInitialStates: 2 x 0.2 s at excitation 0.01 with the coordinates held, a
    # 30 ms solve, 0.2 s at its controls, a second solve and its prediction
    r0 = tuple(r[None] for r in refs(ti, h0, (rows - 1) // 2))
    q0, u0 = (jnp.asarray(r[0, 0], dtype) for r in r0[:2])
    hh, nh = _steps(_HOLD_TIME)
    n_act = len(system.actuator_paths)
    x_hold = jnp.asarray(np.where(controlled, _HOLD_EXCITATION, lo), dtype)
    z = hold(x_hold, ti, q0, u0, jnp.asarray(state0.z, dtype), hh, 2 * nh)
    x_none = jnp.full(n_act, jnp.nan, dtype)  # (no control node before the first solve)
    p_errs = []
    bounds0 = matched.bounds([ti], lo, hi)
    for i in range(2):
        _, xi, p_err, z_pred, failed, _ = windows(jnp.concatenate([q0, u0, z]), x_none, [ti], bounds0, h0, n0, r0)
        if int(failed[0]):
            raise SetupError(
                f"{source}: computing the initial states at t = {ti:g} s, {_failure(int(failed[0]), fast_target)}"
            )
        p_errs.append(p_err[0])
        xi = jnp.asarray(xi[0])
        if i == 0:
            z = hold(xi, ti, q0, u0, z, hh, nh)
    y = jnp.concatenate([jnp.asarray(r0[0][0, 2 * n0], dtype), jnp.asarray(r0[1][0, 2 * n0], dtype), z_pred[0]])

    # the windows, in one compiled program, on a uniform grid of half steps; their
    # times summed window by window, as OpenSim's are: the last solve, at the final time,
    # is recorded where that sum falls short of it (OpenSim's event fires there)
    t_grid = np.asarray(list(_accumulated(t_start, dt, n_win)))
    record_last = t_grid[-1] < tf - dt
    grid = refs(t_start, h, n * (n_win + 1) + (rows - 1) // 2)
    at = 2 * n * np.arange(n_win + 1)[:, None] + np.arange(rows)[None, :]
    y1, x, p_err, _, failed, motion = windows(
        y, xi, t_grid, matched.bounds(t_grid, lo, hi), h, n, tuple(r[at] for r in grid)
    )
    bad = np.flatnonzero(failed)
    last = n_win if len(bad) == 0 else int(bad[0])  # (the windows kept: those before it)
    failed_at = None
    if len(bad):
        failed_at = float(t_grid[last])
        warnings.warn(
            f"{source}: at t = {failed_at:g} s {_failure(int(failed[last]), fast_target)}; the results stop there",
            SetupWarning,
            stacklevel=2,
        )
    p_errs += list(p_err[: last + (1 if len(bad) == 0 and record_last else 0)])
    ys, xs = [np.asarray(y), *y1[:last]], [np.asarray(xi), *x[:last]]
    Y, X = np.stack(ys), np.stack(xs)
    times = t_grid[: len(ys)]
    ydot = motion[: len(times)]
    run = {
        "times": times,
        "q": Y[:, :nq],
        "u": Y[:, nq : nq + nu],
        "z": Y[:, nq + nu :],
        "qdot": ydot[:, :nq],
        "udot": ydot[:, nq : nq + nu],
        "controls": X,
        # (OpenSim records both initial solves at the initial time; a table holds one)
        "pErr": np.asarray(jnp.stack(p_errs[1:])),
        "pErr_times": np.concatenate([[ti], t_grid[: len(p_errs) - 2]]),
        "failed_at": failed_at,
    }
    forces = np.asarray(
        _actuation(system, jnp.asarray(times, dtype), jnp.asarray(Y, dtype), state0.d, jnp.asarray(X, dtype))
    )
    return {
        "model": model,
        "run": run,
        "task_names": list(gains["names"]),
        "tables": _tables(system, run, forces, _actuator_speeds(system, run), gains),
        "control_limits": (lo, hi),
        "controlled": controlled,
        "failed_at": failed_at,
    }


def write_cmc_results(result: dict, results_dir: str, name: str, precision: int = 8) -> dict:
    """Write ``cmc``'s results as OpenSim's ``CMCTool`` names them: ``<name>_controls.sto``
    (every actuator's control) and ``.xml`` (CMC's own actuators'), ``_states.sto``,
    ``_pErr.sto``, ``_Actuation_force/speed/power.sto``, ``_Kinematics_q/u/dudt.sto``.

    **Returns:** ``{key: path}``."""
    return write_rra_results(result, results_dir, name, precision)


# -- the setup ----------------------------------------------------------------------------------

#: the CMCTool properties read and checked but not steering simjax's algorithm (see the module)
_READ_ONLY = (
    "numerical_derivative_step_size",
    "optimization_convergence_tolerance",
    "optimizer_max_iterations",
    "optimizer_print_level",
    "integrator_error_tolerance",
    "maximum_number_of_integrator_steps",
    "maximum_integrator_step_size",
    "minimum_integrator_step_size",
)


def _run(setup: Setup) -> dict:
    """Run a ``<CMCTool>`` setup, writing OpenSim's files (see the module).

    **Returns:** ``{key: path}`` (``write_cmc_results``'s keys).

    **Raises:** ``SetupError`` naming the file, property and value for a missing file, an
    unsupported property value, a task naming no coordinate of the model, an actuator
    CMC cannot drive; after writing the results up to there, for a window whose
    optimization failed.
    """
    if setup.has("rra_controls_file"):
        raise setup.error(
            "rra_controls_file", setup.text("rra_controls_file"), "constraints from RRA's controls are not supported"
        )
    files = read_tracking_setup(setup, _READ_ONLY)
    equilibrate = setup.flag("solve_for_equilibrium_for_auxiliary_states", False)
    t0 = setup.number("initial_time", 0.0)
    t1 = setup.number("final_time", 1.0)
    dt = setup.number("cmc_time_window", 0.01)
    if not dt > 0:
        raise setup.error("cmc_time_window", setup.text("cmc_time_window"), "the window must be positive")
    cutoff = setup.number("lowpass_cutoff_frequency", -1.0)
    precision = int(setup.number("output_precision", 8))
    results = setup.path("results_directory") or setup.folder
    name = setup.name or "cmc"
    model = load_model_with_force_sets(files["model"], files["force_sets"], files["replace"])

    def solve():
        return cmc(
            model,
            files["kinematics"],
            files["tasks"],
            initial_time=t0,
            final_time=t1,
            external_loads=files["loads"],
            lowpass_cutoff=cutoff,
            dt=dt,
            equilibrate=equilibrate,
            constraints=files["constraints"],
            excluded_actuators=setup.words("actuators_to_exclude"),
            fast_target=setup.flag("use_fast_optimization_target", True),
            source=f"{setup.file}: <{setup.tool}>",
        )

    return run_tracking_tool(setup, solve, lambda r: write_cmc_results(r, results, name, precision), results)[1]


register_tool("CMCTool", _run)
