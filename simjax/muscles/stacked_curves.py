"""Fast evaluation of stacked Millard curves (one SmoothSegmentedFunction per muscle).

``simjax.muscles.curves`` defines OpenSim's curves exactly, with derivatives of any
order. Inside a muscle model's right-hand side the same curves are evaluated for a
whole group of muscles many times per step, so this module recasts a stack of
curves (``stack_curve``) into a form that evaluates in a few fused kernels:

- each quintic Bézier segment is converted once to monomial coefficients
  (``x(u) = sum a_j u^j``, ``y(u) = sum b_j u^j``: Horner's rule, no binomials);
- the Bézier parameter ``u`` of a given ``x`` is found by a fixed number of
  safeguarded Newton steps (the secant of the current bracket where Newton would
  leave it), elementwise: on a CPU each step one fused kernel, on a GPU all steps
  in one;
- derivatives come from the implicit function theorem at the solution
  (``du/dx = 1 / x'(u)``), exact to first order in ``x`` and in the curve's control
  points (hence its properties); the iterations themselves carry no derivatives.

``solve_in_curve`` solves ``alpha * y(v) + beta * v = rhs`` for ``v`` directly in the
Bézier parameter (one Newton iteration per step instead of one ``u`` solve), which
is how the damped Millard fiber velocity is found; with ``alpha = 0, beta = 1`` it
is an evaluation of the curve, so evaluations and solves of several curves batch
into one call (``concat_curves``).

Values agree with ``curves.SmoothSegmentedFunction`` to round-off (about 1e-15
relative).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import unrolled_off_cpu

__all__ = ["StackedCurve", "stack_curve", "concat_curves", "curve_eval", "solve_in_curve"]

# Bernstein (degree 5) -> monomial: a = _B2M @ p
_B2M = np.array(
    [[math.comb(5, j) * math.comb(j, i) * (-1) ** (j - i) if i <= j else 0 for i in range(6)] for j in range(6)],
    dtype=np.float64,
)
_N_NEWTON = 7


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class StackedCurve:
    """``k`` SmoothSegmentedFunctions in monomial form.

    ``start (k, n)``: x at the start of each segment; ``ax``, ``ay`` ``(k, n, 6)``:
    monomial coefficients of x(u), y(u) (lowest power first); ``x0``, ``x1``,
    ``y0``, ``y1``, ``dydx0``, ``dydx1`` ``(k,)``: the domain and the linear
    extrapolation beyond it.
    """

    start: Any
    ax: Any
    ay: Any
    x0: Any
    x1: Any
    y0: Any
    y1: Any
    dydx0: Any
    dydx1: Any


def stack_curve(fn) -> StackedCurve:
    """Convert a SmoothSegmentedFunction whose leaves have a leading member axis.

    **Arguments:** ``fn``: e.g. ``jax.vmap(builder)(...)`` of ``curves`` builders.

    **Returns:** a ``StackedCurve``.
    """
    m = jnp.asarray(_B2M, fn.ctrl_x.dtype)
    return StackedCurve(
        start=fn.ctrl_x[..., 0],
        ax=jnp.einsum("ji,kni->knj", m, fn.ctrl_x),
        ay=jnp.einsum("ji,kni->knj", m, fn.ctrl_y),
        x0=fn.x0,
        x1=fn.x1,
        y0=fn.y0,
        y1=fn.y1,
        dydx0=fn.dydx0,
        dydx1=fn.dydx1,
    )


def concat_curves(curves) -> StackedCurve:
    """Stack several ``StackedCurve`` along the member axis (segments padded), so that
    they are evaluated by one ``curve_eval`` call."""
    n = max(c.start.shape[1] for c in curves)

    def pad(c):
        extra = n - c.start.shape[1]
        if not extra:
            return c
        k = c.start.shape[0]
        return dataclasses.replace(
            c,
            start=jnp.concatenate([c.start, jnp.full((k, extra), jnp.inf, c.start.dtype)], 1),
            ax=jnp.concatenate([c.ax, jnp.repeat(c.ax[:, -1:], extra, 1)], 1),
            ay=jnp.concatenate([c.ay, jnp.repeat(c.ay[:, -1:], extra, 1)], 1),
        )

    padded = [pad(c) for c in curves]
    return jax.tree.map(lambda *a: jnp.concatenate(a, 0), *padded)


def _poly(a, u):
    """Horner's rule; ``a``: a tuple of the 6 coefficient arrays, lowest power first."""
    return ((((a[5] * u + a[4]) * u + a[3]) * u + a[2]) * u + a[1]) * u + a[0]


def _dpoly(a, u):
    """Derivative of ``_poly``."""
    return (((5.0 * a[5] * u + 4.0 * a[4]) * u + 3.0 * a[3]) * u + 2.0 * a[2]) * u + a[1]


def _split(a):
    return tuple(a[..., j] for j in range(6))


def _solve(residual, slope):
    """Root in [0, 1] of an increasing elementwise ``residual(u)`` with
    ``residual(0) <= 0 <= residual(1)``: Newton steps, replaced by the secant of the
    current bracket when they would leave it (no derivatives).

    The loop carries one packed array (the iterate, the bracket and its residuals), so
    each step is a single fused kernel; five separate carries cost a dozen kernels a
    step on the CPU, where a small kernel's launch outweighs its arithmetic.
    """
    lo = jnp.zeros_like(residual(jnp.zeros(())))
    hi = jnp.ones_like(lo)
    r_lo, r_hi = residual(lo), residual(hi)

    def secant(lo, hi, r_lo, r_hi):
        span = r_hi - r_lo
        return jnp.where(span > 0, lo - r_lo * (hi - lo) / jnp.where(span > 0, span, 1.0), 0.5 * (lo + hi))

    def step(_, packed):
        u, lo, hi, r_lo, r_hi = packed
        r, d = residual(u), slope(u)
        neg = r < 0
        lo, r_lo = jnp.where(neg, u, lo), jnp.where(neg, r, r_lo)
        hi, r_hi = jnp.where(neg, hi, u), jnp.where(neg, r_hi, r)
        newton = u - r / jnp.where(d > 0, d, 1.0)
        ok = (d > 0) & (newton >= lo) & (newton <= hi)
        u = jnp.where(r == 0, u, jnp.where(ok, newton, secant(lo, hi, r_lo, r_hi)))
        return jnp.stack([u, lo, hi, r_lo, r_hi])

    packed = jnp.stack([secant(lo, hi, r_lo, r_hi), lo, hi, r_lo, r_hi])
    # unrolled on a GPU: gait10dof18musc's batch of 8192 worlds on an H100 ran 1.6x the
    # world-steps per second of the loop
    steps = lambda unroll, packed: jax.lax.fori_loop(0, _N_NEWTON, step, packed, unroll=unroll)  # noqa: E731
    return unrolled_off_cpu(steps, packed)[0]


def solve_in_curve(c: StackedCurve, alpha, beta, rhs):
    """Solve ``alpha * y(v) + beta * v = rhs`` for ``v`` (elementwise), where the left
    side increases with ``v`` (``y`` nondecreasing, ``alpha >= 0``, ``beta >= 0``,
    ``alpha y' + beta > 0``).

    With ``alpha = 0, beta = 1`` this evaluates the curve at ``v = rhs``.

    **Arguments:** ``c``: stacked curves ``y``; ``alpha``, ``beta``, ``rhs`` ``(k,)``.

    **Returns:** ``(v, y(v), y'(v))``, with implicit-function-theorem derivatives with
    respect to ``alpha``, ``beta``, ``rhs`` and the curves.
    """
    # the left side at every segment start and at the domain's end
    g_start = alpha[:, None] * c.ay[..., 0] + beta[:, None] * c.start
    g_end = alpha * c.y1 + beta * c.x1
    idx = jnp.sum(rhs[:, None] >= g_start[:, 1:], axis=-1)
    pick = lambda a: jnp.take_along_axis(a, idx[:, None, None], axis=1)[:, 0]  # noqa: E731
    ax, ay = _split(pick(c.ax)), _split(pick(c.ay))
    axs, ays, als, bes, rhss = jax.lax.stop_gradient((ax, ay, alpha, beta, rhs))

    def combined(ax, ay, al, be, r):  # coefficients of h(u) = al y(u) + be x(u) - r
        return tuple(al * cy + be * cx - (r if j == 0 else 0.0) for j, (cx, cy) in enumerate(zip(ax, ay)))

    hs = combined(axs, ays, als, bes, rhss)
    u0 = _solve(lambda u: _poly(hs, u), lambda u: _dpoly(hs, u))
    dh = _dpoly(hs, u0)
    u = u0 - _poly(combined(ax, ay, alpha, beta, rhs), u0) / jnp.where(dh > 0, dh, 1.0)
    dx_in = _dpoly(ax, u)
    v_in, y_in, dy_in = _poly(ax, u), _poly(ay, u), _dpoly(ay, u) / jnp.where(dx_in != 0, dx_in, 1.0)
    # beyond the domain the curve is linear: solve directly
    below, above = rhs < g_start[:, 0], rhs > g_end
    den_lo = alpha * c.dydx0 + beta
    den_hi = alpha * c.dydx1 + beta
    v_lo = (rhs - alpha * (c.y0 - c.dydx0 * c.x0)) / jnp.where(below, den_lo, 1.0)
    v_hi = (rhs - alpha * (c.y1 - c.dydx1 * c.x1)) / jnp.where(above, den_hi, 1.0)
    v = jnp.where(below, v_lo, jnp.where(above, v_hi, v_in))
    y = jnp.where(below, c.y0 + c.dydx0 * (v - c.x0), jnp.where(above, c.y1 + c.dydx1 * (v - c.x1), y_in))
    dy = jnp.where(below, c.dydx0, jnp.where(above, c.dydx1, dy_in))
    return v, y, dy


def curve_eval(c: StackedCurve, x):
    """Values and slopes of stacked curves, member ``i`` at ``x[i]``.

    **Arguments:** ``c``: a ``StackedCurve``; ``x (k,)``.

    **Returns:** ``(y, dy/dx)``, each ``(k,)``; linear beyond the domain.
    """
    one = jnp.ones_like(x)
    _, y, dy = solve_in_curve(c, 0.0 * one, one, x)
    return y, dy
