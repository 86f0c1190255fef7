"""Kinematic tracking as OpenSim's RRA and CMC do it: the task set, the desired
kinematics and the per-window tracking step.

OpenSim's ``RRATool`` and ``CMCTool`` share their machinery (``CMC``, ``CMC_TaskSet``,
``ActuatorForceTarget``); this module is that shared part, over arrays:

- ``read_task_set``: a ``CMC_TaskSet`` file (``CMC_Joint`` tasks: ``on``, ``weight``,
  ``active``, ``kp``, ``kv``, ``ka``, ``limit``) as ``TrackingTask`` records;
  ``task_indices`` places them in a system (an error names the file, the task and the
  coordinate when the model has no such coordinate).
- ``desired_kinematics``: the desired coordinates prepared as ``RRATool::run`` does:
  ``Storage::pad(60)``, ``Storage::lowpassFIR(50, fc)`` (``lowpass_fir``), degrees to
  radians, the speeds from the derivative of a quintic ``GCVSpline`` of each
  coordinate (``SimbodyEngine::formCompleteStorages``), and three spline sets: ``q``,
  ``u`` (a spline of those speeds) and ``udot`` (a spline of the derivative of the
  ``u`` splines); ``DesiredKinematics.at(times)`` evaluates them (one compiled program
  for all columns and times).
- ``actuator_inverse_dynamics``: OpenSim's ``InverseDynamics`` analysis with the model's
  actuators (the least-stress actuator forces that give the desired accelerations), as
  RRA uses it to average the residuals; batched over frames.
- ``track``: OpenSim's CMC loop for actuators whose force is ``control *
  optimal_force`` (RRA's residual and reserve actuators): every ``dt`` (the
  ``cmc_time_window``), the PD-tracking accelerations ``ka a_des(t + dt) + kv (u_des(t) -
  u) + kp (q_des(t) - q)``; the controls that minimise ``sum w (a - a_des)^2 +
  stress_weight sum (force / optimal_force)^2`` within the control bounds, with the
  accelerations predicted at the window's end on the desired trajectory shifted by
  the current error (``CMCActuatorSubsystem``); then the model integrated over the
  window with those controls held (``ControlLinear`` steps). The windows are one
  ``lax.scan`` over one compiled window step: the least-squares problem is a dense
  JAX solve (no loop over actuators or coordinates).

CMC proper (muscles: excitations through activation and contraction dynamics) reuses
the task set, the desired kinematics and the PD targets; its window solve differs.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..forward import Context
from ..io.tables import TimeSeriesTable
from ..simulate import rhs
from . import motion
from .setup import SetupError, SetupWarning, read_element

__all__ = [
    "TrackingTask",
    "read_task_set",
    "task_indices",
    "lowpass_fir",
    "DesiredKinematics",
    "desired_kinematics",
    "actuator_inverse_dynamics",
    "actuator_optimal_forces",
    "references",
    "track",
    "stress_term_weight",
]

_EPS = float(np.finfo(float).eps)
#: tasks OpenSim's CMC_TaskSet holds that simjax does not track (yet)
_OTHER_TASKS = ("CMC_Point", "CMC_Orientation", "StateTrackingTask", "SMC_Joint", "MuscleStateTrackingTask")
#: why point tasks are not tracked: OpenSim 4.6 cannot run them either
_POINT_TASKS_IN_OPENSIM = (
    "OpenSim 4.6's RRA and CMC stop on a point task too: CMC_TaskSet::setFunctionsForVelocity looks the "
    "task's name up as a coordinate ('ArrayPtrs.get(aName): No object with name ...')"
)


@dataclasses.dataclass(frozen=True)
class TrackingTask:
    """One ``CMC_Joint`` task of a ``CMC_TaskSet``.

    **Fields:** ``name``; ``coordinate`` (the tracked coordinate's name; the task's
    name when the file gives none); ``on``; ``weight``, ``active``, ``kp``, ``kv``,
    ``ka``: three components each (a coordinate task uses the first); ``limit``: the
    error limit (rad or m) above which CMC lowers the weight of the stress term
    (``0``: none).
    """

    name: str
    coordinate: str
    on: bool = True
    weight: tuple = (1.0, 1.0, 1.0)
    active: tuple = (True, False, False)
    kp: tuple = (1.0, 1.0, 1.0)
    kv: tuple = (1.0, 1.0, 1.0)
    ka: tuple = (1.0, 1.0, 1.0)
    limit: float = 0.0


def _words(node, tag):
    child = node.find(tag)
    return child.text.split() if child is not None else None


def _three(path, task, tag, words, conv, default):
    if words is None:
        return default
    try:
        vals = [conv(w) for w in words]
    except ValueError:
        raise SetupError(f"{path}: task {task!r}: <{tag}> {' '.join(words)!r} is not valid") from None
    if not vals:
        return default
    return tuple(vals[:3]) + tuple(default[len(vals) :]) if len(vals) < 3 else tuple(vals[:3])


def _bool(w):
    w = w.lower()
    if w not in ("true", "false"):
        raise ValueError(w)
    return w == "true"


def read_task_set(path: str | os.PathLike) -> list[TrackingTask]:
    """Read a ``CMC_TaskSet`` file (``<OpenSimDocument><CMC_TaskSet>`` or a bare
    ``<CMC_TaskSet>``).

    **Arguments:** ``path``: the task set file.

    **Returns:** its ``CMC_Joint`` tasks in file order, those switched off (``on``
    false) included (``task_indices`` leaves them out, as OpenSim does).

    **Raises:** ``FileNotFoundError`` for a missing file; ``SetupError`` naming the file,
    the task and the property for a malformed value or a task kind simjax does not
    track (``CMC_Point``, ``CMC_Orientation``).
    """
    path = os.fspath(path)
    node = read_element(path, "CMC_TaskSet", "task set")
    objects = node.find("objects")
    tasks = []
    for c in objects.children if objects is not None else []:
        if c.tag != "CMC_Joint":
            kind = "is a task kind simjax does not track" if c.tag in _OTHER_TASKS else "is not a CMC task"
            why = f"; {_POINT_TASKS_IN_OPENSIM}" if c.tag == "CMC_Point" else ""
            raise SetupError(f"{path}: <{c.tag} name={c.name!r}> {kind} (supported: CMC_Joint{why})")
        name = c.name
        on = _three(path, name, "on", _words(c, "on"), _bool, (True,))[0]
        coord = " ".join(_words(c, "coordinate") or []) or name
        limit_words = _words(c, "limit")
        try:
            limit = float(limit_words[0]) if limit_words else 0.0
        except ValueError:
            raise SetupError(f"{path}: task {name!r}: <limit> {' '.join(limit_words)!r} is not a number") from None
        tasks.append(
            TrackingTask(
                name=name,
                coordinate=coord,
                on=bool(on),
                weight=_three(path, name, "weight", _words(c, "weight"), float, (1.0, 1.0, 1.0)),
                active=_three(path, name, "active", _words(c, "active"), _bool, (True, False, False)),
                kp=_three(path, name, "kp", _words(c, "kp"), float, (1.0, 1.0, 1.0)),
                kv=_three(path, name, "kv", _words(c, "kv"), float, (1.0, 1.0, 1.0)),
                ka=_three(path, name, "ka", _words(c, "ka"), float, (1.0, 1.0, 1.0)),
                limit=limit,
            )
        )
    return tasks


def task_indices(system, tasks, source: str = "task set") -> dict:
    """The tracked coordinates of ``tasks`` in ``system``: the tasks that are on and
    whose first component is active, in task order.

    **Arguments:** ``system``; ``tasks``: ``TrackingTask`` records; ``source``: where
    they come from (for messages).

    **Returns:** ``{"names": task names, "coordinates": coordinate names, "q": q
    indices, "u": u indices, "weight", "kp", "kv", "ka", "limit": float arrays}``.

    **Raises:** ``SetupError`` naming ``source``, the task and the coordinate when the
    system has no such coordinate (or it is not a one-dof coordinate).
    """
    tree = system.topology.tree
    by_name = {p.rsplit("/", 1)[-1]: tree.coordinates[p] for p in system.coordinate_paths}
    out = {k: [] for k in ("names", "coordinates", "q", "u", "weight", "kp", "kv", "ka", "limit")}
    for t in tasks:
        if not t.on:
            continue
        info = by_name.get(t.coordinate)
        if info is None or info.q < 0:
            raise SetupError(
                f"{source}: task {t.name!r} tracks coordinate {t.coordinate!r}, which the model does not have"
                + ("" if info is None else " as a one-dof coordinate")
            )
        if any(t.active[1:]):
            warnings.warn(
                f"{source}: task {t.name!r}: a coordinate task has one component; <active> beyond the first is ignored",
                SetupWarning,
                stacklevel=2,
            )
        if not t.active[0]:
            continue
        out["names"].append(t.name)
        out["coordinates"].append(t.coordinate)
        out["q"].append(info.q)
        out["u"].append(info.u)
        for k in ("weight", "kp", "kv", "ka"):
            out[k].append(float(getattr(t, k)[0]))
        out["limit"].append(float(t.limit))
    for k in ("q", "u"):
        out[k] = np.asarray(out[k], int)
    for k in ("weight", "kp", "kv", "ka", "limit"):
        out[k] = np.asarray(out[k], float)
    return out


# -- desired kinematics ------------------------------------------------------------------------


def lowpass_fir(times, values, cutoff: float, order: int = 50):
    """OpenSim's ``Storage::lowpassFIR(order, cutoff)``: resampled at the smallest step
    when the sampling is not uniform (a quintic ``GCVSpline`` per column,
    ``motion.resample``), then each column convolved with a Hamming-windowed sinc of
    ``2 order + 1`` taps normalised to unit gain at DC, over the column padded by
    ``order`` reflected points at each end (``Signal::LowpassFIR``).

    **Arguments:** ``times (N,)`` (s); ``values (N, k)``; ``cutoff`` (Hz); ``order``.

    **Returns:** ``(times, values)`` (resampled times when the sampling was not
    uniform).

    **Raises:** ``ValueError`` when there are fewer than ``2 order`` rows.
    """
    t = np.asarray(times, float)
    v = np.asarray(values, float).reshape(len(t), -1)
    if len(t) < 2:
        raise ValueError("lowpass_fir: fewer than two rows")
    dtmin = float(np.min(np.diff(t)))
    avg = (t[-1] - t[0]) / (len(t) - 1)
    if dtmin < _EPS:
        raise ValueError("lowpass_fir: the times are not increasing; the data cannot be resampled")
    if avg - dtmin > _EPS:
        t, v = motion.resample(t, v, dtmin)
    n = len(t)
    if n < 2 * order:
        raise ValueError(f"lowpass_fir: {n} rows, fewer than twice the filter order ({order})")
    w = 2.0 * math.pi * cutoff
    k = np.arange(-order, order + 1, dtype=float)
    x = k * w * dtmin
    sinc = np.where(np.abs(x) < 1e-8, 1.0, np.sin(x) / np.where(x == 0, 1.0, x))
    coef = sinc * dtmin * w / math.pi * (0.54 + 0.46 * np.cos(k * math.pi / order))
    _, padded = motion.pad(t, v, order)
    # sigf[n] = sum_k coef[k] s[order + n - k]: a correlation with the reversed taps
    out = np.stack([np.convolve(padded[:, j], coef, mode="valid") for j in range(v.shape[1])], axis=1)
    return t, out / coef.sum()


@dataclasses.dataclass
class DesiredKinematics:
    """Desired coordinates, speeds and accelerations as RRA/CMC track them.

    **Fields:** ``labels``: coordinate names in the system's coordinate order;
    ``times (N,)`` (s, padded); ``q (N, n)`` (rad or m), ``u (N, n)``, ``udot (N, n)``:
    the samples the spline sets fit; ``first_time``, ``last_time``: the file's own
    range (before padding).
    """

    labels: list
    times: np.ndarray
    q: np.ndarray
    u: np.ndarray
    udot: np.ndarray
    first_time: float
    last_time: float

    def table(self, which: str) -> TimeSeriesTable:
        """The samples ``"q"``, ``"u"`` or ``"udot"`` as a table (radians)."""
        return TimeSeriesTable(self.times, getattr(self, which), list(self.labels), {"inDegrees": "no"})

    def at(self, times):
        """The spline sets at ``times`` (s).

        **Returns:** ``(q, qdot, u, udot)``, each ``(len(times), n)``: the ``q``
        splines and their derivative (what CMC's actuator subsystem follows), the
        ``u`` splines and the ``udot`` splines (the PD tracking's references).
        """
        at = np.atleast_1d(np.asarray(times, float))
        q, qd, _ = motion.spline_kinematics(self.table("q"), at)
        u, _, _ = motion.spline_kinematics(self.table("u"), at)
        a, _, _ = motion.spline_kinematics(self.table("udot"), at)
        return np.asarray(q), np.asarray(qd), np.asarray(u), np.asarray(a)


def desired_kinematics(system, table: TimeSeriesTable, cutoff: float = -1.0, source: str = "") -> DesiredKinematics:
    """Prepare a desired kinematics table as ``RRATool::run``/``CMCTool::run`` do.

    **Arguments:** ``system``; ``table``: coordinates by name as read (degrees if the
    header says so); ``cutoff``: low-pass cut-off (Hz), negative for none; ``source``:
    the file (for messages).

    **Returns:** ``DesiredKinematics`` over all the system's coordinates (a coordinate
    the table lacks is zero, with a ``SetupWarning``, as OpenSim's
    ``formCompleteStorages``).

    **Raises:** ``SetupError`` naming ``source`` when the table is too short to pad
    and filter.
    """
    t = np.asarray(table.times, float)
    v = np.asarray(table.values, float).reshape(len(t), -1)
    first, last = float(t[0]), float(t[-1])
    try:
        t, v = motion.pad(t, v, 60)
        if cutoff is not None and cutoff >= 0:
            t, v = lowpass_fir(t, v, cutoff, 50)
    except ValueError as e:
        raise SetupError(f"{source or 'desired kinematics'}: {e}") from None
    labels = list(table.labels)
    names = [p.rsplit("/", 1)[-1] for p in system.coordinate_paths]
    q = np.zeros((len(t), len(names)))
    for j, n in enumerate(names):
        if n in labels:
            q[:, j] = v[:, labels.index(n)]
        else:
            warnings.warn(
                f"{source or 'desired kinematics'}: no column for coordinate {n!r}; it is tracked as 0",
                SetupWarning,
                stacklevel=2,
            )
    if motion.in_degrees(table):
        mask = motion.rotational_mask(system, names)
        q = np.where(mask[None, :], q * (math.pi / 180.0), q)
    qt = TimeSeriesTable(t, q, names, {"inDegrees": "no"})
    _, u, _ = motion.spline_kinematics(qt, t)
    ut = TimeSeriesTable(t, np.asarray(u), names, {"inDegrees": "no"})
    _, ud, _ = motion.spline_kinematics(ut, t)
    return DesiredKinematics(names, t, q, np.asarray(u), np.asarray(ud), first, last)


# -- the actuators ------------------------------------------------------------------------------


def actuator_optimal_forces(model, system, source: str = "model") -> np.ndarray:
    """Each actuator's ``optimal_force`` (force per unit control), in control order.

    **Raises:** ``SetupError`` naming ``source`` and the actuator when one is not an
    ideal actuator (force = control × optimal_force), e.g. a muscle: the tracking here
    (RRA's) drives ideal actuators only.
    """
    out = []
    for p in system.actuator_paths:
        comp = model.find(p)
        f = getattr(comp, "optimal_force", None)
        if f is None or hasattr(comp, "max_isometric_force"):
            raise SetupError(
                f"{source}: actuator {p!r} ({type(comp).__name__}) is not an ideal actuator (force = control x "
                "optimal_force); RRA in simjax drives residual and reserve actuators only (set "
                "<replace_force_set> true or remove the muscles)"
            )
        out.append(float(np.asarray(f)))
    return np.asarray(out, float)


def _udot_map(system, params, t, q, u, z, d, n_controls):
    """``udot`` as an affine map of the controls at ``(t, q, u, z)``: ``(a0 (nu,), A (nu,
    n_controls))``, from the accelerations at zero controls and at each unit control
    (exact for ideal actuators; OpenSim's ``ActuatorForceTarget`` does the same), one
    batched evaluation."""
    nq, nu = q.shape[0], u.shape[0]
    y = jnp.concatenate([q, u, z])
    X = jnp.concatenate([jnp.zeros((1, n_controls), q.dtype), jnp.eye(n_controls, dtype=q.dtype)])
    acc = jax.vmap(lambda x: rhs(system, t, y, d, x, params)[nq : nq + nu])(X)
    return acc[0], (acc[1:] - acc[0]).T


@jit
def _id_frames(system, t, Q, U, Udot_target, z, d):
    state0 = system.default_state()
    params = Context(system, state0).prepared()
    n = len(system.actuator_paths)

    def one(ti, q, u, target):
        a0, A = _udot_map(system, params, ti, q, u, z, d, n)
        # the least-norm controls: A' (A A')^-1 (target - a0)
        return A.T @ jnp.linalg.solve(A @ A.T, target - a0)

    return jax.vmap(one)(t, Q, U, Udot_target)


def actuator_inverse_dynamics(system, times, q, u, udot) -> np.ndarray:
    """OpenSim's ``InverseDynamics`` analysis with the model's actuators: at each frame,
    the controls of least norm (least sum of squared actuator stresses, ``force /
    optimal_force``) that give the accelerations ``udot``.

    **Arguments:** ``system`` (its actuators ideal, its external loads included);
    ``times (N,)`` (s); ``q (N, nq)``, ``u (N, nu)``, ``udot (N, nu)``: states and
    target accelerations.

    **Returns:** the controls ``(N, n_actuators)``; times ``optimal_force`` they are the
    actuator forces (N or N m) OpenSim's analysis stores.
    """
    state0 = system.default_state()
    dt = jnp.asarray(state0.q).dtype
    return np.asarray(
        _id_frames(
            system,
            jnp.asarray(times, dt),
            jnp.asarray(q, dt),
            jnp.asarray(u, dt),
            jnp.asarray(udot, dt),
            jnp.asarray(state0.z),
            state0.d,
        )
    )


# -- the tracking loop ------------------------------------------------------------------------


def _box_lsq(H, c, lo, hi, x0, iters: int = 30):
    """``min 1/2 x'Hx + c'x`` over ``lo <= x <= hi``: projected Newton steps on the free
    variables (a fixed number, so that it traces once)."""
    eye = jnp.eye(H.shape[0], dtype=H.dtype)

    def body(_, x):
        g = H @ x + c
        active = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)) | (lo >= hi)
        free = ~active
        Hm = jnp.where(free[:, None] & free[None, :], H, eye) + 1e-12 * eye
        dx = jnp.linalg.solve(Hm, jnp.where(free, -g, 0.0))
        return jnp.clip(x + jnp.where(free, dx, 0.0), lo, hi)

    return jax.lax.fori_loop(0, iters, body, jnp.clip(x0, lo, hi))


def _window_controls(A, a0, a_des, w, stress_weight, lo, hi):
    """The window's controls: ``min sum w (A x + a0 - a_des)^2 + stress_weight |x|^2``
    within ``[lo, hi]`` (the unconstrained solution when it lies within, as OpenSim's
    ``ActuatorForceTarget::prepareToOptimize``; else a bounded solve)."""
    n = A.shape[1]
    H = A.T @ (w[:, None] * A) + stress_weight * jnp.eye(n, dtype=A.dtype)
    g = A.T @ (w * (a_des - a0))
    x = jnp.linalg.solve(H, g)
    inside = jnp.all((x >= lo) & (x <= hi))
    return jax.lax.cond(inside, lambda: x, lambda: _box_lsq(H, -g, lo, hi, x))


def stress_term_weight(limit, p_err):
    """The weight of the stress term in OpenSim's penalty target (``CMC::computeControls``
    with ``ActuatorForceTarget``): 1, lowered by a smooth step down (``SigmaDn``, time
    constant a tenth of the limit) where a task's position error ``p_err`` nears its
    ``limit`` (tasks of limit 0 have none); the least over the tasks."""
    safe = jnp.where(limit > 0, limit, 1.0)
    sigma = 1.0 - 1.0 / (1.0 + jnp.exp(-(jnp.abs(p_err) - safe) / (0.1 * safe)))
    return jnp.minimum(1.0, jnp.min(jnp.where(limit > 0, sigma, 1.0), initial=1.0))


#: the classical Runge-Kutta tableau (nodes, stage matrix, weights)
_RK4_C = (0.0, 0.5, 0.5, 1.0)
_RK4_A = ((0.0, 0.0, 0.0, 0.0), (0.5, 0.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0))
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


def _rk4_ramp(system, params, t, y, d, x_prev, x, h, steps):
    """One classical RK4 step over ``[t, t + h]`` with the controls going linearly from
    ``x_prev`` at ``t`` to ``x`` at ``t + h`` (OpenSim's ``ControlLinear`` nodes, one per
    window end, interpolated linearly), or held at ``x`` where ``steps`` (``(n,)``
    bools). The stages are a loop over one right-hand side.

    **Returns:** ``(y(t + h), dy/dt at t)``.
    """
    dtype = y.dtype
    c, a, b = (jnp.asarray(v, dtype) for v in (_RK4_C, _RK4_A, _RK4_B))

    def stage(i, K):
        yi = y + h * (a[i] @ K)
        xi = jnp.where(steps, x, x_prev + c[i] * (x - x_prev))
        return K.at[i].set(rhs(system, t + c[i] * h, yi, d, xi, params))

    K = jax.lax.fori_loop(0, 4, stage, jnp.zeros((4, y.shape[0]), dtype))
    return y + h * (b @ K), K[0]


def _solve_window(system, params, n, t1, y, d, ref0, ref1, gains, lo, hi):
    """One CMC control solve for the window ending at ``t1`` from the state ``y``:
    ``(controls, pErr)``."""
    q_idx, u_idx, w, kp, kv, ka, limit = gains
    qs0, qd0, us0, _ = ref0
    qs1, qd1, _, ud1 = ref1
    nq, nu = qs0.shape[0], qd0.shape[0]
    q, u, z = y[:nq], y[nq : nq + nu], y[nq + nu :]
    p_err = qs0[q_idx] - q[q_idx]
    v_err = us0[u_idx] - u[u_idx]
    a_des = ka * ud1[u_idx] + kv * v_err + kp * p_err
    stress_weight = stress_term_weight(limit, p_err)
    # the actuator subsystem's state at the window's end (CMCActuatorSubsystem): the
    # desired coordinates there and the q splines' derivative, shifted by the error now
    q1 = q + (qs1 - qs0)
    u1 = u + (qd1 - qd0)
    a0, A = _udot_map(system, params, t1, q1, u1, z, d, n)
    x = _window_controls(A[u_idx], a0[u_idx], a_des, w, stress_weight, lo, hi)
    return x, p_err


@jit
def _track(system, t_start, t_end, h, ref0, ref1, y0, d, gains, lo, hi, steps):
    state0 = system.default_state()
    params = Context(system, state0).prepared()
    n = lo.shape[1]

    def window(carry, xs):
        y, x_prev = carry
        ts, te, hk, r0, r1, lo_k, hi_k = xs
        x, p_err = _solve_window(system, params, n, te, y, d, r0, r1, gains, lo_k, hi_k)
        y1, ydot = _rk4_ramp(system, params, ts, y, d, x_prev, x, hk, steps)
        return (y1, x), (y, ydot, x_prev, p_err)

    x0 = jnp.zeros((n,), y0.dtype)
    _, (ys, ydots, xs, p_errs) = jax.lax.scan(window, (y0, x0), (t_start, t_end, h, ref0, ref1, lo, hi))
    return ys[1:], ydots[1:], xs[1:], p_errs[1:]


def references(system, desired: DesiredKinematics, times) -> tuple:
    """The desired kinematics at ``times`` as whole state vectors: ``(qs (n, nq), qd
    (n, nu), us (n, nu), ud (n, nu))``: the ``q`` splines, their derivative, the ``u``
    splines and the ``udot`` splines (``DesiredKinematics.at``), each coordinate at its
    ``q`` or ``u`` index; a ``q`` no coordinate owns keeps its default value, other
    entries are zero."""
    tree = system.topology.tree
    nq, nu = tree.nq, tree.nu
    cq = np.asarray([tree.coordinates[p].q for p in system.coordinate_paths], int)
    cu = np.asarray([tree.coordinates[p].u for p in system.coordinate_paths], int)
    keep = cq >= 0
    cq, cu = cq[keep], cu[keep]

    def full(vals, size, idx, base):
        out = np.broadcast_to(np.asarray(base, float), (vals.shape[0], size)).copy()
        out[:, idx] = vals[:, keep]
        return out

    qs, qd, us, ud = desired.at(times)
    q_base = np.asarray(system.default_state().q, float)
    return full(qs, nq, cq, q_base), full(qd, nu, cu, 0.0), full(us, nu, cu, 0.0), full(ud, nu, cu, 0.0)


def track(
    system,
    tasks: dict,
    desired: DesiredKinematics,
    t0: float,
    t1: float,
    dt: float = 0.001,
    bounds=None,
    steps=None,
):
    """OpenSim's CMC tracking loop (``RRATool``) for ideal actuators, from ``t0`` to the
    last window boundary before ``t1 - dt`` (OpenSim integrates to ``t1 - dt``).

    **Arguments:** ``system`` (actuators with force = control × optimal_force, external
    loads included); ``tasks``: ``task_indices(system, ...)``; ``desired``:
    ``desired_kinematics(...)``; ``t0``, ``t1`` (s); ``dt``: the window (s,
    ``cmc_time_window``; RRA uses 0.001); ``bounds``: ``(lo, hi)`` controls
    ``(n_actuators,)``, or a function of the windows' start times ``(K,)`` giving them
    ``(K, n_actuators)`` (default: the actuators' ``min_control``/``max_control``
    properties are not read here: unbounded); ``steps``: ``(n_actuators,)`` bools, the
    controls held over each window (default: none; all linear between the windows'
    ends).

    **Returns:** ``{"times" (K + 1,), "q", "u", "z", "qdot", "udot" (K + 1, ·): the
    states at the window boundaries and their derivatives, "controls" (K + 1,
    n_actuators): the controls in force at each time (the first: the initial solve's),
    "pErr" (K, n_tasks): desired minus actual coordinate at each window's start (rad
    or m), "pErr_times" (K,), "failed_at": None, or the time (s) of the first window
    whose solve or integration gave non-finite values (the arrays then stop before
    it)}``.
    """
    n_win = int(math.floor((t1 - dt - t0) / dt + 1e-6))
    if n_win < 1:
        raise SetupError(f"the time range {t0:g} to {t1:g} s holds no tracking window of {dt:g} s")
    t_grid = t0 + dt * np.arange(n_win + 1)
    tree = system.topology.tree
    state0 = system.default_state(t0)
    dtype = jnp.asarray(state0.q).dtype
    nq, nu = tree.nq, tree.nu

    def refs_at(times):
        return tuple(jnp.asarray(r, dtype) for r in references(system, desired, times))

    # the scan's steps: the initial solve (RRATool: computeControls at t0 with a window
    # of 1e-8 s, no integration), the windows, and one more whose solve is not used but
    # whose first stage gives the derivatives at the last time
    # (the steps padded to a multiple of 64, so that nearby time ranges share one
    # compiled program; the extra windows run past the end and are dropped)
    n_ext = -(-(n_win + 2) // 64) * 64 - 1
    t_ext = t0 + dt * np.arange(n_ext + 1)
    refs = refs_at(t_ext)
    ref_init = refs_at([t0 + 1e-8])
    ref0 = tuple(jnp.concatenate([r[:1], r[:n_ext]]) for r in refs)
    ref1 = tuple(jnp.concatenate([ri, r[1:]]) for ri, r in zip(ref_init, refs))
    t_start = np.concatenate([[t0], t_ext[:n_ext]])
    t_end = np.concatenate([[t0 + 1e-8], t_ext[1:]])
    h = np.concatenate([[0.0], np.diff(t_ext)])
    # the initial state: the q splines and the u splines at t0 (RRATool::run)
    y0 = jnp.concatenate([refs[0][0], refs[2][0], jnp.asarray(state0.z, dtype)])
    n = len(system.actuator_paths)
    if bounds is None:
        bounds = (np.full(n, -np.inf), np.full(n, np.inf))
    lo, hi = bounds(t_start) if callable(bounds) else (np.broadcast_to(b, (len(t_start), n)) for b in bounds)
    gains = (
        jnp.asarray(tasks["q"]),
        jnp.asarray(tasks["u"]),
        *(jnp.asarray(tasks[k], dtype) for k in ("weight", "kp", "kv", "ka", "limit")),
    )
    ys, ydot, xs, p_errs = _track(
        system,
        *(jnp.asarray(v, dtype) for v in (t_start, t_end, h)),
        ref0,
        ref1,
        y0,
        state0.d,
        gains,
        jnp.asarray(lo, dtype),
        jnp.asarray(hi, dtype),
        jnp.asarray(np.zeros(n, bool) if steps is None else steps, bool),
    )
    k = n_win + 1
    ys, ydot, xs, p_errs = np.asarray(ys)[:k], np.asarray(ydot)[:k], np.asarray(xs)[:k], np.asarray(p_errs)[: k - 1]
    # a window whose solve or integration failed (non-finite): the results before it
    bad = ~(np.isfinite(ys).all(axis=1) & np.isfinite(ydot).all(axis=1) & np.isfinite(xs).all(axis=1))
    failed_at = None
    if bad.any():
        first = int(np.argmax(bad))
        failed_at = float(t_grid[first])
        t_grid, ys, ydot, xs, p_errs = t_grid[:first], ys[:first], ydot[:first], xs[:first], p_errs[:first]
    return {
        "times": t_grid,
        "q": ys[:, :nq],
        "u": ys[:, nq : nq + nu],
        "z": ys[:, nq + nu :],
        "qdot": ydot[:, :nq],
        "udot": ydot[:, nq : nq + nu],
        "controls": xs,
        "pErr": p_errs,
        "pErr_times": t_grid[: len(p_errs)],
        "failed_at": failed_at,
    }
