"""Integrators for ``simulate``: Runge–Kutta–Merson, classical RK4, semi-implicit Euler,
a wrapper that projects every step onto the constraint manifold, and Simbody's
step-size control.

All are Diffrax solvers and step-size controllers, so Diffrax's adjoints, events and
output handling apply to them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ExplicitRungeKutta",
    "RungeKuttaMerson",
    "RK4",
    "SemiImplicitEuler",
    "Projected",
    "SimbodyController",
    "CubicHermite",
]


def _linear_interpolation(*, t0, t1, y0, y1, k=None, **kwargs):
    return diffrax.LocalLinearInterpolation(t0=t0, t1=t1, y0=y0, y1=y1)


def _combine(y0, weights, ks):
    """``y0 + sum_j weights[j] ks[j]`` (weights a numpy or traced row)."""
    return jax.tree.map(lambda y, *k: y + sum(weights[j] * k[j] for j in range(len(ks))), y0, *ks)


def _stage_input(solver, t0, t1, y0, ks, i):
    """Stage ``i``'s (traced) time and state, from the increments ``ks`` of the stages
    before it."""
    dtype = jnp.result_type(*jax.tree.leaves(y0))
    a, c = jnp.asarray(solver.a, dtype), jnp.asarray(solver.c, dtype)
    return t0 + c[i] * (t1 - t0), _combine(y0, a[i], ks)


def _increment(solver, terms, t0, t1, y0, args, ks, i, searches=None):
    """Stage ``i``'s increment ``h f(t_i, y_i)``; with ``searches`` (the results of the
    vector field's searches at that stage), through ``solver.searched``."""
    t, y = _stage_input(solver, t0, t1, y0, ks, i)
    if searches is None:
        return terms.vf_prod(t, y, args, terms.contr(t0, t1))
    return _searched_increment(solver, terms, t0, t1, t, y, args, searches)[0]


def _searched_increment(solver, terms, t0, t1, t, y, args, searches):
    """The increment at stage time ``t`` and state ``y`` through ``solver.searched``, and
    the searches' results: ``(k, found)``. The same as Diffrax's ``vf_prod`` of the
    ``WrapTerm(ODETerm(f))`` it is given, ``f`` being the vector field."""
    dy, found = solver.searched(t * getattr(terms, "direction", 1), y, args, searches)
    return terms.prod(dy, terms.contr(t0, t1)), found


def _with_stage(ks, i, ki):
    """The per-stage buffers ``ks`` with stage ``i``'s (traced) increment ``ki`` put in
    its own."""
    return tuple(jax.tree.map(lambda new, old, j=j: jnp.where(i == j, new, old), ki, kj) for j, kj in enumerate(ks))


def _stage_loop(solver, terms, t0, t1, y0, args, kind):
    """The increments ``k_i = h f(t_i, y_i)`` of all stages, in one loop (one copy of
    the right-hand side in the program), each kept in its own buffer."""
    n = len(solver.c)

    def stage(carry):
        i, ks = carry
        return i + 1, _with_stage(ks, i, _increment(solver, terms, t0, t1, y0, args, ks, i))

    zeros = jax.tree.map(jnp.zeros_like, y0)
    _, ks = eqxi.while_loop(
        lambda carry: carry[0] < n, stage, (jnp.asarray(0), (zeros,) * n), max_steps=n, kind=kind, checkpoints=n
    )
    return ks


def _searched_stage_loop(solver, terms, t0, t1, y0, args):
    """``_stage_loop`` through ``solver.searched``: the increments and, stacked over the
    stages, the results of each stage's searches."""
    n = len(solver.c)

    def searched(ks, i):
        return _searched_increment(solver, terms, t0, t1, *_stage_input(solver, t0, t1, y0, ks, i), args, None)

    def stage(carry):
        i, ks, found = carry
        ki, fi = searched(ks, i)
        return i + 1, _with_stage(ks, i, ki), jax.tree.map(lambda f, x: f.at[i].set(x), found, fi)

    zeros = jax.tree.map(jnp.zeros_like, y0)
    shapes = jax.eval_shape(lambda ks: searched(ks, 0)[1], (zeros,) * n)
    found = jax.tree.map(lambda x: jnp.zeros((n,) + x.shape, x.dtype), shapes)
    _, ks, found = jax.lax.while_loop(lambda carry: carry[0] < n, stage, (jnp.asarray(0), (zeros,) * n, found))
    return ks, found


@eqx.filter_custom_vjp
def _stages(inputs, solver, terms):
    """The stage increments of one explicit Runge–Kutta step, ``inputs = (t0, t1, y0,
    args)``, with a hand-written reverse mode.

    Reverse mode walks the stages backwards, taking one right-hand-side VJP per stage at
    its input (rebuilt from the stored increments). Where the solver has ``searched``,
    the forward rule keeps each stage's searches and the VJPs reuse them (the large
    model's wrap passes are a fifth of its right-hand side's VJP). A step whose
    increments receive no cotangent, a rejected step (the solve keeps its start), skips
    the walk: a differentiated stage loop takes those VJPs too, with zeros
    (gait10dof18musc at OpenSim's accuracy rejects 80 of 453 steps), and keeps a
    checkpoint per stage.
    """
    t0, t1, y0, args = inputs
    return _stage_loop(solver, terms, t0, t1, y0, args, "lax")


@_stages.def_fwd
def _stages_fwd(perturbed, inputs, solver, terms):
    if solver.searched is None:
        ks = _stages.fn(inputs, solver, terms)
        return ks, (ks, None)
    ks, found = _searched_stage_loop(solver, terms, *inputs)
    return ks, (ks, found)


@_stages.def_bwd
def _stages_bwd(residuals, ct_ks, perturbed, inputs, solver, terms):
    ks, found = residuals
    n = len(solver.c)
    diff, static = eqx.partition(inputs, perturbed)
    ct_ks = tuple(
        jax.tree.map(lambda c, k: jnp.zeros_like(k) if c is None else c, ct, k, is_leaf=lambda x: x is None)
        for ct, k in zip(ct_ks, ks)
    )

    def walk(_):
        def back(m, carry):
            ct_k, ct_d = carry
            i = n - 1 - m
            ct_i = jax.tree.map(lambda *c: sum(jnp.where(i == j, c[j], 0.0) for j in range(n)), *ct_k)
            # the VJP in the increments too: stage i's input carries its cotangent on to
            # the earlier stages (and to y0 through ``d``, where differentiated)
            searches = None if found is None else jax.tree.map(lambda f: f[i], found)
            _, pull = jax.vjp(lambda d, k: _increment(solver, terms, *eqx.combine(d, static), k, i, searches), diff, ks)
            g_d, g_k = pull(ct_i)
            return jax.tree.map(jnp.add, ct_k, g_k), jax.tree.map(jnp.add, ct_d, g_d)

        return jax.lax.fori_loop(0, n, back, (ct_ks, zero_d))[1]

    zero_d = jax.tree.map(jnp.zeros_like, diff)
    live = jnp.any(jnp.stack([jnp.any(c != 0) for c in jax.tree.leaves(ct_ks)]))
    return jax.lax.cond(live, walk, lambda _: zero_d, None)


class CubicHermite(diffrax.AbstractLocalInterpolation):
    """Cubic Hermite dense output of one step from its end values and the slopes at
    both ends (given as increments ``k = h f``). Diffrax's own keeps the four
    coefficients stacked in one array; four separate ones keep small models' buffers
    small (see ``ExplicitRungeKutta``).
    """

    t0: jax.Array
    t1: jax.Array
    y0: jax.Array
    y1: jax.Array
    k0: jax.Array
    k1: jax.Array

    def evaluate(self, t0, t1=None, left=True):
        """The interpolant at ``t0`` (or its increment from ``t0`` to ``t1``)."""
        if t1 is not None:
            return self.evaluate(t1) - self.evaluate(t0)
        h = self.t1 - self.t0
        s = jnp.where(h == 0, 0.0, (t0 - self.t0) / jnp.where(h == 0, 1.0, h))
        s2, s3 = s * s, s * s * s
        return jax.tree.map(
            lambda y0, y1, k0, k1: (
                (2 * s3 - 3 * s2 + 1) * y0 + (s3 - 2 * s2 + s) * k0 + (3 * s2 - 2 * s3) * y1 + (s3 - s2) * k1
            ),
            self.y0,
            self.y1,
            self.k0,
            self.k1,
        )


def _hermite_interpolation(*, t0, t1, y0, y1, k0, k1, **kwargs):
    # from the first stage (exact slope at t0) and the last one, which both RK4 and
    # Merson evaluate at t1 (on a 3rd-order estimate of y1): a 3rd-order dense output,
    # good enough for locating events and for off-step outputs
    return CubicHermite(t0=t0, t1=t1, y0=y0, y1=y1, k0=k0, k1=k1)


class ExplicitRungeKutta(diffrax.AbstractAdaptiveSolver):
    """An explicit Runge–Kutta method whose stages run in one loop (one copy of the
    right-hand side in the program), each stage's increment kept in its own buffer.

    Diffrax's own explicit methods stack the increments in one ``(stages, n)`` array;
    on the CPU, XLA runs a program whose buffers all hold at most 512 bytes one kernel
    after another, and any other through a dataflow scheduler that costs ~20% of a
    small model's right-hand side. Separate buffers keep small models under that size.

    Subclasses give the tableau: ``a (s, s)`` (row ``i``: weights of the increments of
    the stages before ``i``), ``b (s,)``, ``b_error (s,)`` or ``None`` (no error
    estimate), ``c (s,)`` (stage times as fractions of the step).
    """

    a: ClassVar[np.ndarray]
    b: ClassVar[np.ndarray]
    b_error: ClassVar[np.ndarray | None]
    c: ClassVar[np.ndarray]
    #: how the stages are differentiated: ``None`` by their hand-written reverse mode
    #: (``_stages``); else the stage loop's ``equinox.internal.while_loop`` kind,
    #: ``"bounded"`` (forward and reverse, for Diffrax's direct adjoint) or ``"lax"``
    #: (forward mode only)
    scan_kind: str | None = None
    #: ``None``, or the terms' vector field ``f(t, y, args)`` (an ``ODETerm``'s) as
    #: ``fn(t, y, args, searches) -> (f, found)``: the results ``found`` of its searches
    #: (work its derivatives hold fixed, ``simjax.forward.Context.search``), made when
    #: ``searches`` is None and used as given otherwise, which reverse mode does
    searched: Callable | None = eqx.field(default=None, static=True)
    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable] = staticmethod(_hermite_interpolation)

    def order(self, terms):
        """The method's order: 4 (Diffrax's solver interface)."""
        return 4

    def init(self, terms, t0, t1, y0, args):
        """The solver state: ``None`` (explicit Runge–Kutta keeps none between steps)."""
        return None

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        """One step from ``t0`` to ``t1`` (s) from ``y0``.

        **Returns:** ``(y1, y_error, dense_info, solver_state, result)`` as Diffrax's
        ``AbstractSolver.step``: ``y_error`` is ``None`` without an error estimate;
        ``dense_info`` holds ``y0``, ``y1`` and the first and last stages for Hermite output."""
        if self.scan_kind is None:
            # reverse mode: the stages' adjoint written out (see ``_stages``)
            ks = _stages((t0, t1, y0, args), self, terms)
        else:
            ks = _stage_loop(self, terms, t0, t1, y0, args, self.scan_kind)
        y1 = _combine(y0, self.b, ks)
        y_error = None
        if self.b_error is not None:
            y_error = jax.tree.map(lambda *k: sum(self.b_error[j] * k[j] for j in range(len(ks))), *ks)
        return y1, y_error, dict(y0=y0, y1=y1, k0=ks[0], k1=ks[-1]), None, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        """The vector field ``terms.vf(t0, y0, args)``, ``dy/dt`` at ``(t0, y0)``."""
        return terms.vf(t0, y0, args)


class RungeKuttaMerson(ExplicitRungeKutta):
    """Runge–Kutta–Merson: 4th order, 5 stages, with Merson's error estimate.

    The method of Simbody's ``RungeKuttaMersonIntegrator`` (OpenSim's default). Its
    last stage is evaluated at the step's end point on a 3rd-order estimate, so dense
    output is a 3rd-order cubic Hermite; ``simulate`` makes requested output times
    step boundaries, so outputs are 4th-order like OpenSim's.
    """

    a: ClassVar[np.ndarray] = np.array(
        [
            [0, 0, 0, 0, 0],
            [1 / 3, 0, 0, 0, 0],
            [1 / 6, 1 / 6, 0, 0, 0],
            [1 / 8, 0, 3 / 8, 0, 0],
            [1 / 2, 0, -3 / 2, 2, 0],
        ]
    )
    b: ClassVar[np.ndarray] = np.array([1 / 6, 0.0, 0.0, 2 / 3, 1 / 6])
    # Merson's error estimate h (2 k1 - 9 k3 + 8 k4 - k5) / 30
    b_error: ClassVar[np.ndarray | None] = np.array([2 / 30, 0.0, -9 / 30, 8 / 30, -1 / 30])
    c: ClassVar[np.ndarray] = np.array([0.0, 1 / 3, 1 / 3, 1 / 2, 1.0])


class RK4(ExplicitRungeKutta):
    """The classical 4th-order Runge–Kutta method (fixed steps; no error estimate)."""

    a: ClassVar[np.ndarray] = np.array([[0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1.0, 0]])
    b: ClassVar[np.ndarray] = np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6])
    b_error: ClassVar[np.ndarray | None] = None
    c: ClassVar[np.ndarray] = np.array([0.0, 0.5, 0.5, 1.0])


class SemiImplicitEuler(diffrax.AbstractSolver):
    """Symplectic (semi-implicit) Euler for ``y = (q, u, z)``, fixed steps.

    ``u1 = u0 + h udot(t0, y0)``, ``z1 = z0 + h zdot(t0, y0)``, then
    ``q1 = q0 + h N(q0) u1``. One right-hand-side evaluation per step.

    **Fields:** ``nq``, ``nu``: sizes of ``q`` and ``u`` in ``y``; ``kinematics``:
    ``fn(t, q, u, args) -> qdot``.
    """

    nq: int = eqx.field(static=True)
    nu: int = eqx.field(static=True)
    kinematics: Callable = eqx.field(static=True)
    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable] = staticmethod(_linear_interpolation)

    def order(self, terms):
        """The method's order: 1."""
        return 1

    def init(self, terms, t0, t1, y0, args):
        """The solver state: ``None`` (none is kept between steps)."""
        return None

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        """One step from ``t0`` to ``t1`` (s): ``u`` and ``z`` by explicit Euler, then ``q``
        from the new ``u``.

        **Returns:** ``(y1, None, dense_info, None, result)`` as Diffrax's ``AbstractSolver.step``
        (no error estimate; linear dense output between ``y0`` and ``y1``)."""
        h = t1 - t0
        dy = terms.vf(t0, y0, args)
        nq, nu = self.nq, self.nu
        u1 = y0[nq : nq + nu] + h * dy[nq : nq + nu]
        z1 = y0[nq + nu :] + h * dy[nq + nu :]
        q1 = y0[:nq] + h * self.kinematics(t0, y0[:nq], u1, args)
        y1 = jnp.concatenate([q1, u1, z1])
        return y1, None, dict(y0=y0, y1=y1), None, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        """The vector field ``terms.vf(t0, y0, args)``, ``dy/dt`` at ``(t0, y0)``."""
        return terms.vf(t0, y0, args)


class Projected(diffrax.AbstractAdaptiveSolver, diffrax.AbstractWrappedSolver):
    """Wraps a solver and projects each step's end state (Simbody-style projection).

    **Fields:** ``solver``; ``project``: ``fn(t, y, args) -> y`` returning the
    nearest state on the constraint manifold (quaternions normalized).
    """

    solver: diffrax.AbstractSolver
    project: Callable = eqx.field(static=True)
    # Diffrax's adjoints set ``scan_kind`` on Runge-Kutta solvers (forward-mode support);
    # it is passed on to the wrapped solver
    scan_kind: str | None = None

    def _inner(self):
        if self.scan_kind is None or not hasattr(self.solver, "scan_kind"):
            return self.solver
        return eqx.tree_at(lambda s: s.scan_kind, self.solver, self.scan_kind, is_leaf=lambda x: x is None)

    @property
    def term_structure(self):
        """The wrapped solver's term structure."""
        return self.solver.term_structure

    @property
    def interpolation_cls(self):
        """The wrapped solver's interpolation class (dense output)."""
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        """The wrapped solver's ``term_compatible_contr_kwargs``."""
        return self.solver.term_compatible_contr_kwargs

    def order(self, terms):
        """The wrapped solver's order."""
        return self.solver.order(terms)

    def strong_order(self, terms):
        """The wrapped solver's strong order."""
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        """The wrapped solver's error order."""
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        """The wrapped solver's initial state."""
        return self.solver.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        """The wrapped solver's step, with its end state ``y1`` projected onto the constraint
        manifold (and the dense output's ``y1`` replaced by it).

        **Returns:** ``(y1, y_error, dense_info, solver_state, result)`` as Diffrax's
        ``AbstractSolver.step``."""
        y1, y_error, dense_info, solver_state, result = self._inner().step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        y1 = self.project(t1, y1, args)
        if "y1" in dense_info:
            dense_info = dict(dense_info, y1=y1)
        return y1, y_error, dense_info, solver_state, result

    def func(self, terms, t0, y0, args):
        """The wrapped solver's vector field at ``(t0, y0)``."""
        return self.solver.func(terms, t0, y0, args)


class SimbodyController(diffrax.AbstractAdaptiveStepSizeController):
    """Simbody's error control and step-size adjustment (OpenSim's integrators).

    The error of a step is the largest of three RMS norms, each over one part of
    ``y = (q, u, z)`` (Simbody's ``calcErrorNorm``): the ``q`` errors as they are
    (unit weights; Simbody maps them through ``N Wu N^+``, which leaves them unchanged
    except along a quaternion, where this is slightly stricter), the ``u`` and ``z``
    errors each divided by ``max(|value|, 1)`` at the step's start. A step is accepted
    when that error is at most ``accuracy``; the next step size is
    ``0.9 h (accuracy / error)^(1/4)``, kept at ``h`` when it would grow by less than
    20% (or the step was cut short to reach an output time) or shrink after an
    accepted step, shrunk by at least 10% after a rejected one, and held within
    ``[0.1 h, 5 h]`` (Simbody's ``adjustStepSize``). Output times ``ts`` are step
    boundaries: a step that would pass one ends on it, and one that would end within
    0.1% before it is stretched to it (Simbody's ``takeOneStep``). The first step is
    ``dt0``, by default 0.01 s (a tenth of Simbody's default system time scale).

    **Fields:** ``accuracy``; ``nq``, ``nu``: the sizes of ``q`` and ``u`` in ``y``;
    ``ts``: output times (sorted) or ``None``; ``dtmax``: largest step or ``None``.
    """

    accuracy: float
    nq: int = eqx.field(static=True)
    nu: int = eqx.field(static=True)
    ts: jax.Array | None = None
    dtmax: float | None = None

    @property
    def rtol(self):
        """The relative tolerance Diffrax sees: ``accuracy``."""
        return self.accuracy

    @property
    def atol(self):
        """The absolute tolerance Diffrax sees: ``accuracy``."""
        return self.accuracy

    @property
    def norm(self):
        """The RMS norm (Diffrax's ``norm`` field)."""
        return _rms

    def wrap(self, direction):
        """The controller itself (time runs forward only; Diffrax's ``wrap`` hook)."""
        return self

    def _target(self, t0, h):
        """The end of the next step from ``t0`` with step size ``h``, and whether an
        output time cut it short."""
        if self.ts is None or self.ts.shape[0] == 0:
            return t0 + h, jnp.asarray(False)
        i = jnp.searchsorted(self.ts, t0, side="right")
        stop = jnp.where(i < self.ts.shape[0], self.ts[jnp.minimum(i, self.ts.shape[0] - 1)], jnp.inf)
        limited = stop < t0 + 0.95 * h
        t1 = jnp.where(limited | (stop <= t0 + 1.001 * h), stop, t0 + h)
        return t1, limited

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        """The first step's end and the controller state.

        **Returns:** ``(t1, (h, limited))``: the end of the first step of size ``dt0``
        (0.01 s by default, at most ``dtmax``), cut at the next output time; ``h`` the step
        size (s) and ``limited`` whether an output time cut it short."""
        h = jnp.asarray(0.01 if dt0 is None else dt0, jnp.result_type(y0, float))
        if self.dtmax is not None:
            h = jnp.minimum(h, self.dtmax)
        t_next, limited = self._target(t0, h)
        return t_next, (h, limited)

    def error(self, y0, y_error):
        """Simbody's error norm of a step from ``y0`` with error estimate ``y_error``."""
        nq, nu = self.nq, self.nu
        scale = 1.0 / jnp.maximum(jnp.abs(y0[nq:]), 1.0)
        return jnp.maximum(
            jnp.maximum(_rms(y_error[:nq]), _rms(y_error[nq : nq + nu] * scale[:nu])),
            _rms(y_error[nq + nu :] * scale[nu:]),
        )

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        """Accept or reject a step by Simbody's error norm and choose the next one.

        **Returns:** ``(keep, next_t0, next_t1, made_jump, state, result)`` as Diffrax's
        ``AbstractAdaptiveStepSizeController.adapt_step_size``: ``keep`` when the error is at
        most ``accuracy``; the next step size (s) follows Simbody's ``adjustStepSize``."""
        h, limited = controller_state
        err = jax.lax.stop_gradient(self.error(y0, y_error))
        acc = self.accuracy
        ratio = acc / jnp.where(err > 0, err, 1.0)
        new = jnp.where(~jnp.isfinite(err), 0.1 * h, jnp.where(err == 0, 5.0 * h, 0.9 * h * ratio**0.25))
        new = jnp.where((new > h) & (limited | (new < 1.2 * h)), h, new)
        new = jnp.where((new < h) & (err <= acc), h, jnp.where(new < h, jnp.minimum(new, 0.9 * h), new))
        new = jnp.clip(new, 0.1 * h, 5.0 * h)
        if self.dtmax is not None:
            new = jnp.minimum(new, self.dtmax)
        keep = err <= acc  # (Simbody: the new step is not smaller; NaN errors reject)
        next_t0 = jnp.where(keep, t1, t0)
        next_t1, next_limited = self._target(next_t0, new)
        return keep, next_t0, next_t1, False, (new, next_limited), diffrax.RESULTS.successful


def _rms(x):
    return jnp.sqrt(jnp.mean(x * x)) if x.size else jnp.zeros((), x.dtype)
