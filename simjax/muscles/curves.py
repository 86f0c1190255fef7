"""Muscle curves, exact to OpenSim 4.6 and differentiable.

Three families are provided:

- **Millard2012 curves** (``ActiveForceLengthCurve``, ``ForceVelocityCurve``,
  ``ForceVelocityInverseCurve``, ``FiberForceLengthCurve``,
  ``TendonForceLengthCurve``, ``FiberCompressiveForceLengthCurve``,
  ``FiberCompressiveForceCosPennationCurve``). Each is an Equinox module whose fields
  are the OpenSim properties (same names, same defaults, same rules for the optional
  properties). The curve itself is OpenSim's ``SmoothSegmentedFunction``: a chain of
  quintic Bézier segments whose control points are built exactly as
  ``SmoothSegmentedFunctionFactory`` builds them, extrapolated linearly outside its
  domain. Evaluating one at ``x`` needs the Bézier parameter ``u`` with
  ``x(u) = x``; it is found by bisection followed by safeguarded Newton steps (a
  fixed number of each, so it vectorises), and differentiated by the implicit
  function theorem (``du/dx = 1/x'(u)``), never through the iterations. Gradients
  with respect to ``x`` and with respect to the curve's properties are exact, to any
  order.

- **Thelen2003Muscle curves** as pure functions of the muscle's property values
  (``thelen_*``).

- **DeGrooteFregly2016Muscle curves** as pure functions (``degroote_*``).

Everything works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``, in float32 and
float64 (a curve computes in the floating dtype of its argument).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = [
    "SmoothSegmentedFunction",
    "quintic_bezier_corner_control_points",
    "ActiveForceLengthCurve",
    "ForceVelocityCurve",
    "ForceVelocityInverseCurve",
    "FiberForceLengthCurve",
    "TendonForceLengthCurve",
    "FiberCompressiveForceLengthCurve",
    "FiberCompressiveForceCosPennationCurve",
    "thelen_active_force_length",
    "thelen_active_force_length_derivative",
    "thelen_passive_force_length",
    "thelen_passive_force_length_derivative",
    "thelen_tendon_force_length",
    "thelen_tendon_force_length_derivative",
    "thelen_norm_fiber_velocity",
    "thelen_force_velocity_multiplier",
    "thelen_clamp_activation",
    "thelen_activation_derivative",
    "degroote_active_force_length",
    "degroote_active_force_length_derivative",
    "degroote_passive_force_length",
    "degroote_passive_force_length_derivative",
    "degroote_passive_force_length_integral",
    "degroote_force_velocity",
    "degroote_force_velocity_inverse",
    "degroote_tendon_stiffness_parameter",
    "degroote_tendon_force_length",
    "degroote_tendon_force_length_derivative",
    "degroote_tendon_force_length_integral",
    "degroote_tendon_force_length_inverse",
    "degroote_tendon_force_length_inverse_derivative",
    "degroote_activation_derivative",
]

_EPS = float(np.finfo(np.float64).eps)
_ROOT_EPS = math.sqrt(_EPS)
# SimTK::SignificantReal, i.e. eps**(7/8).
_SIGNIFICANT_REAL = _EPS**0.875

# Iteration counts of the u(x) solve: 12 halvings leave a bracket of width 2.4e-4,
# from which the safeguarded Newton steps converge quadratically.
_N_BISECT = 12
_N_NEWTON = 6

# 5-point Gauss-Legendre on [0, 1]: exact for the degree-9 integrand y(u) x'(u).
_GL_T, _GL_W = np.polynomial.legendre.leggauss(5)
_GL_T = 0.5 * (_GL_T + 1.0)
_GL_W = 0.5 * _GL_W


# ======================================================================================
# Quintic Bézier helpers
# ======================================================================================


def _bernstein(u, p):
    """Evaluate the Bernstein polynomial with coefficients ``p[..., :]`` at ``u[...]``."""
    n = p.shape[-1] - 1
    t = 1.0 - u
    up, tp = [jnp.ones_like(u)], [jnp.ones_like(u)]
    for _ in range(n):
        up.append(up[-1] * u)
        tp.append(tp[-1] * t)
    return sum(math.comb(n, i) * up[i] * tp[n - i] * p[..., i] for i in range(n + 1))


def _bezier_derivative(u, p, order):
    """``d^order/du^order`` of the Bézier curve with control points ``p[..., :]``."""
    n = p.shape[-1] - 1
    scale = 1.0
    for k in range(order):
        scale *= n - k
        p = p[..., 1:] - p[..., :-1]
    if p.shape[-1] == 0:
        return jnp.zeros(p.shape[:-1], p.dtype)
    return scale * _bernstein(u, p)


def _solve_u_impl(x, px):
    dpx = px[..., 1:] - px[..., :-1]

    def bisect(_, carry):
        lo, hi = carry
        mid = 0.5 * (lo + hi)
        below = _bernstein(mid, px) < x
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = lax.fori_loop(0, _N_BISECT, bisect, (jnp.zeros_like(x), jnp.ones_like(x)))

    def newton(_, carry):
        lo, hi, u = carry
        f = _bernstein(u, px) - x
        d = 5.0 * _bernstein(u, dpx)
        below = f < 0
        lo = jnp.where(below, u, lo)
        hi = jnp.where(below, hi, u)
        ok = d > 0
        step = u - f / jnp.where(ok, d, 1.0)
        # A step leaving the bracket is clipped to its end rather than replaced by a
        # bisection: lo and hi are points already evaluated on either side of the
        # root, so Newton restarted there converges, including on roots at u = 0 or 1
        # (x on a segment boundary) that overshooting steps jump past.
        return lo, hi, jnp.where(ok, jnp.clip(step, lo, hi), 0.5 * (lo + hi))

    _, _, u = lax.fori_loop(0, _N_NEWTON, newton, (lo, hi, 0.5 * (lo + hi)))
    return u


@jax.custom_jvp
def _solve_u(x, px):
    """The Bézier parameter ``u`` in [0, 1] at which the (increasing) curve ``px`` is ``x``."""
    return _solve_u_impl(lax.stop_gradient(x), lax.stop_gradient(px))


@_solve_u.defjvp
def _solve_u_jvp(primals, tangents):
    x, px = primals
    dx, dpx = tangents
    u = _solve_u(x, px)
    # Implicit function theorem on B(u; px) - x = 0 (B is linear in px).
    du = (dx - _bernstein(u, dpx)) / _bezier_derivative(u, px, 1)
    return u, du


def _scale_curviness(curviness):
    return 0.1 + 0.8 * curviness


def quintic_bezier_corner_control_points(x0, y0, dydx0, x1, y1, dydx1, curviness, xp=np):
    """Control points of one quintic Bézier 'corner' (OpenSim
    ``SegmentedQuinticBezierToolkit::calcQuinticBezierCornerControlPoints``).

    The corner joins ``(x0, y0)`` with slope ``dydx0`` to ``(x1, y1)`` with slope
    ``dydx1``. The two tangent lines meet at a corner point; the inner control points
    sit a fraction ``curviness`` of the way from each end towards it.

    **Arguments:**

    - ``x0, y0, dydx0``: the start point and its slope.
    - ``x1, y1, dydx1``: the end point and its slope.
    - ``curviness``: the *scaled* curviness in [0, 1] (OpenSim passes
      ``0.1 + 0.8 * c`` for a user curviness ``c``).
    - ``xp``: the array module, ``numpy`` (default) or ``jax.numpy``.

    **Returns:** ``(px, py, ok)``: the six x and six y control points, and whether the
    tangent lines form a proper C-shaped corner (OpenSim raises when they don't).
    """
    denom = dydx0 - dydx1
    parallel = xp.abs(denom) <= _ROOT_EPS
    safe = xp.where(parallel, 1.0, denom)
    xc = xp.where(parallel, 0.5 * (x1 + x0), (y1 - y0 - x1 * dydx1 + x0 * dydx0) / safe)
    yc = (xc - x1) * dydx1 + y1
    a = (xc - x0) ** 2 + (yc - y0) ** 2
    b = (xc - x1) ** 2 + (yc - y1) ** 2
    c = (x1 - x0) ** 2 + (y1 - y0) ** 2
    ok = (c > a) & (c > b)
    x0m = x0 + curviness * (xc - x0)
    y0m = y0 + curviness * (yc - y0)
    x1m = x1 + curviness * (xc - x1)
    y1m = y1 + curviness * (yc - y1)
    px = xp.stack([xp.asarray(v) * xp.ones(xp.shape(xc)) for v in (x0, x0m, x0m, x1m, x1m, x1)], axis=-1)
    py = xp.stack([xp.asarray(v) * xp.ones(xp.shape(xc)) for v in (y0, y0m, y0m, y1m, y1m, y1)], axis=-1)
    return px, py, ok


# ======================================================================================
# SmoothSegmentedFunction
# ======================================================================================


def _as_float(x: Any) -> Any:
    if x is None or isinstance(x, jax.Array):
        return x
    return np.asarray(x, dtype=np.float64)


def _float_input(x):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _locate(cx, x0, x1, x):
    """Clamp ``x`` into the domain, pick its segment (as OpenSim's calcIndex does)."""
    xc = jnp.where(x < x0, x0, jnp.where(x > x1, x1, x))
    idx = jnp.sum(xc[..., None] >= cx[1:, 0], axis=-1) if cx.shape[0] > 1 else jnp.zeros(x.shape, jnp.int32)
    return xc, idx


@functools.partial(jax.jit, static_argnames=("orders",))
def _ssf_eval(data, x, orders):
    cx, cy, x0, x1, y0, y1, dydx0, dydx1 = (jnp.asarray(d, x.dtype) for d in data)
    xc, idx = _locate(cx, x0, x1, x)
    px, py = cx[idx], cy[idx]
    u = _solve_u(xc, px)
    below, above = x < x0, x > x1
    out = []
    for order in orders:
        if order == 0:
            inner = _bernstein(u, py)
            lo, hi = y0 + dydx0 * (x - x0), y1 + dydx1 * (x - x1)
        elif order == 1:
            inner = _bezier_derivative(u, py, 1) / _bezier_derivative(u, px, 1)
            lo, hi = dydx0, dydx1
        else:
            dx, ddx = _bezier_derivative(u, px, 1), _bezier_derivative(u, px, 2)
            dy, ddy = _bezier_derivative(u, py, 1), _bezier_derivative(u, py, 2)
            inner = (ddy * dx - dy * ddx) / dx**3
            lo = hi = jnp.zeros((), x.dtype)
        out.append(jnp.where(below, lo, jnp.where(above, hi, inner)))
    return tuple(out)


def _segment_integral(u, px, py):
    """``∫_0^u y(t) x'(t) dt`` on one segment (exact Gauss-Legendre quadrature)."""
    t = u[..., None] * jnp.asarray(_GL_T, u.dtype)
    f = _bernstein(t, py[..., None, :]) * _bezier_derivative(t, px[..., None, :], 1)
    return u * jnp.sum(jnp.asarray(_GL_W, u.dtype) * f, axis=-1)


@functools.partial(jax.jit, static_argnames=("left_to_right",))
def _ssf_integral(data, x, left_to_right):
    cx, cy, x0, x1, y0, y1, dydx0, dydx1 = (jnp.asarray(d, x.dtype) for d in data)
    totals = _segment_integral(jnp.ones(cx.shape[0], x.dtype), cx, cy)
    starts = jnp.concatenate([jnp.zeros(1, x.dtype), jnp.cumsum(totals)[:-1]])
    total = jnp.sum(totals)
    xc, idx = _locate(cx, x0, x1, x)
    px, py = cx[idx], cy[idx]
    u = _solve_u(xc, px)
    inner = starts[idx] + _segment_integral(u, px, py)
    dlo, dhi = x - x0, x - x1
    lo = y0 * dlo + 0.5 * dydx0 * dlo**2
    hi = total + y1 * dhi + 0.5 * dydx1 * dhi**2
    ltr = jnp.where(x < x0, lo, jnp.where(x > x1, hi, inner))
    return ltr if left_to_right else total - ltr


class SmoothSegmentedFunction(eqx.Module):
    """A C2-continuous chain of quintic Bézier segments, linear outside its domain
    (OpenSim ``SmoothSegmentedFunction``).

    **Fields:**

    - ``ctrl_x``, ``ctrl_y``: ``(n_segments, 6)`` control points; segment ``i`` spans
      ``ctrl_x[i, 0] <= x <= ctrl_x[i, 5]``, with ``x`` increasing along each segment.
    - ``x0``, ``x1``: the domain; ``y0``, ``y1``, ``dydx0``, ``dydx1``: values and
      slopes at its ends, used for the linear extrapolation.
    - ``integrate_left_to_right``: static; ``integral(x)`` is ``∫_{x0}^{x} y`` when
      true, ``∫_{x}^{x1} y`` when false (OpenSim's ``intx0x1``).
    """

    ctrl_x: Any = eqx.field(converter=_as_float)
    ctrl_y: Any = eqx.field(converter=_as_float)
    x0: Any = eqx.field(converter=_as_float)
    x1: Any = eqx.field(converter=_as_float)
    y0: Any = eqx.field(converter=_as_float)
    y1: Any = eqx.field(converter=_as_float)
    dydx0: Any = eqx.field(converter=_as_float)
    dydx1: Any = eqx.field(converter=_as_float)
    integrate_left_to_right: bool = eqx.field(default=True, static=True)

    def _data(self):
        return (self.ctrl_x, self.ctrl_y, self.x0, self.x1, self.y0, self.y1, self.dydx0, self.dydx1)

    def __call__(self, x):
        """The curve's value at ``x``.

        **Arguments:** ``x``: a scalar or array.

        **Returns:** an array of the shape of ``x``, in its floating dtype.
        """
        return _ssf_eval(self._data(), _float_input(x), (0,))[0]

    def derivative(self, x, order: int = 1):
        """``d^order y / dx^order`` at ``x`` (OpenSim ``calcDerivative(x, order)``).

        **Arguments:** ``x``: a scalar or array; ``order``: 0, 1 or 2.

        **Returns:** an array of the shape of ``x``. Outside the domain the first
        derivative is the end slope and the second is zero, as in OpenSim.
        """
        if order not in (0, 1, 2):
            raise ValueError(f"derivative order must be 0, 1 or 2, got {order!r}")
        return _ssf_eval(self._data(), _float_input(x), (order,))[0]

    def value_and_derivative(self, x):
        """The value and first derivative at ``x``, sharing one ``u(x)`` solve.

        **Arguments:** ``x``: a scalar or array.

        **Returns:** ``(y, dydx)``.
        """
        return _ssf_eval(self._data(), _float_input(x), (0, 1))

    def evaluate(self, x, orders: tuple[int, ...] = (0, 1, 2)):
        """Several derivative orders at ``x`` at once, sharing one ``u(x)`` solve.

        **Arguments:** ``x``: a scalar or array; ``orders``: a tuple of orders in
        {0, 1, 2}.

        **Returns:** a tuple with one array per requested order.
        """
        orders = tuple(int(o) for o in orders)
        if any(o not in (0, 1, 2) for o in orders):
            raise ValueError(f"derivative orders must be 0, 1 or 2, got {orders!r}")
        return _ssf_eval(self._data(), _float_input(x), orders)

    def integral(self, x):
        """The integral of the curve, exact (OpenSim fits a spline to a numerical one).

        **Arguments:** ``x``: a scalar or array.

        **Returns:** ``∫_{x0}^{x} y`` if ``integrate_left_to_right`` else
        ``∫_{x}^{x1} y``, extended analytically outside the domain.
        """
        return _ssf_integral(self._data(), _float_input(x), self.integrate_left_to_right)

    def curve_domain(self):
        """The extent of the Bézier segments (OpenSim ``getCurveDomain``).

        **Returns:** ``(x_min, x_max)``.
        """
        return self.ctrl_x[0, 0], self.ctrl_x[-1, -1]


def _make_ssf(xp, segments, x0, x1, y0, y1, dydx0, dydx1, left_to_right=True, swap=False):
    px = xp.stack([s[0] for s in segments])
    py = xp.stack([s[1] for s in segments])
    if swap:
        px, py = py, px
    if xp is jnp:
        px, py = jnp.asarray(px), jnp.asarray(py)
    return SmoothSegmentedFunction(px, py, x0, x1, y0, y1, dydx0, dydx1, left_to_right)


# ======================================================================================
# Curve construction (SmoothSegmentedFunctionFactory)
# ======================================================================================


class _Checker:
    """Collects OpenSim's argument checks; only enforced on concrete values."""

    def __init__(self, name: str, enforce: bool):
        self.name, self.enforce = name, enforce

    def __call__(self, condition, message):
        if self.enforce and not bool(np.all(condition)):
            raise ValueError(f"{self.name}: {message}")


def _corner(check, xp, *args):
    px, py, ok = quintic_bezier_corner_control_points(*args, xp=xp)
    check(
        ok,
        "the tangent lines of a Bézier corner do not form a C-shaped corner (the curve's parameters are inconsistent)",
    )
    return px, py


def _check_curviness(check, value, label="curviness"):
    shown = float(value) if check.enforce else value
    check((value >= 0) & (value <= 1), f"{label} must be in [0, 1], got {shown}")


def _build_active_force_length(xp, check, x0, x1, x3, dydx, ylow):
    x2 = 1.0
    check(
        (x0 >= 0) & (x1 > x0 + _ROOT_EPS) & (x2 > x1 + _ROOT_EPS) & (x3 > x2 + _ROOT_EPS),
        "0 <= min_norm_active_fiber_length < transition_norm_fiber_length < 1 < max_norm_active_fiber_length must hold",
    )
    check(ylow >= 0, "minimum_value must be >= 0")
    upper = (1 - ylow) / (x2 - x1)
    check(
        (dydx >= 0) & (dydx < upper),
        "shallow_ascending_slope must be >= 0 and < (1 - minimum_value) / (1 - transition_norm_fiber_length)",
    )
    c = _scale_curviness(1.0)
    x_delta = 0.05 * x2
    xs = x2 - x_delta
    y0, y1 = 0.0, 1 - dydx * (xs - x1)
    dydx01 = 1.25 * (y1 - y0) / (x1 - x0)
    x01, y01 = x0 + 0.5 * (x1 - x0), y0 + 0.5 * (y1 - y0)
    x1s, y1s = x1 + 0.5 * (xs - x1), y1 + 0.5 * (1 - y1)
    y2, y3 = 1.0, 0.0
    x23 = (x2 + x_delta) + 0.5 * (x3 - (x2 + x_delta))
    y23 = y2 + 0.5 * (y3 - y2)
    dydx23 = (y3 - y2) / ((x3 - x_delta) - (x2 + x_delta))
    segs = [
        _corner(check, xp, x0, ylow, 0.0, x01, y01, dydx01, c),
        _corner(check, xp, x01, y01, dydx01, x1s, y1s, dydx, c),
        _corner(check, xp, x1s, y1s, dydx, x2, y2, 0.0, c),
        _corner(check, xp, x2, y2, 0.0, x23, y23, dydx23, c),
        _corner(check, xp, x23, y23, dydx23, x3, ylow, 0.0, c),
    ]
    return _make_ssf(xp, segs, x0, x3, ylow, ylow, 0.0, 0.0)


def _force_velocity_segments(
    xp, check, fmax_e, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e, conc_curviness, ecc_curviness
):
    cc, ce = _scale_curviness(conc_curviness), _scale_curviness(ecc_curviness)
    xc, yc = -1.0, 0.0
    x_near_c = -0.9
    y_near_c = yc + 0.5 * dydx_near_c * (x_near_c - xc) + 0.5 * dydx_c * (x_near_c - xc)
    x_iso, y_iso = 0.0, 1.0
    xe, ye = 1.0, fmax_e
    x_near_e = 0.9
    y_near_e = ye + 0.5 * dydx_near_e * (x_near_e - xe) + 0.5 * dydx_e * (x_near_e - xe)
    return [
        _corner(check, xp, xc, yc, dydx_c, x_near_c, y_near_c, dydx_near_c, cc),
        _corner(check, xp, x_near_c, y_near_c, dydx_near_c, x_iso, y_iso, dydx_iso, cc),
        _corner(check, xp, x_iso, y_iso, dydx_iso, x_near_e, y_near_e, dydx_near_e, ce),
        _corner(check, xp, x_near_e, y_near_e, dydx_near_e, xe, ye, dydx_e, ce),
    ]


def _build_force_velocity(
    xp, check, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e, fmax_e, conc_curviness, ecc_curviness
):
    check(fmax_e > 1, "max_eccentric_velocity_force_multiplier must be > 1")
    check((dydx_c >= 0) & (dydx_c < 1), "concentric_slope_at_vmax must be in [0, 1)")
    check(
        (dydx_near_c > dydx_c) & (dydx_near_c <= 1),
        "concentric_slope_near_vmax must be > concentric_slope_at_vmax and <= 1",
    )
    check(dydx_iso > 1, "isometric_slope must be > 1")
    check(
        (dydx_e >= 0) & (dydx_e < fmax_e - 1),
        "eccentric_slope_at_vmax must be >= 0 and < max_eccentric_velocity_force_multiplier - 1",
    )
    check(
        (dydx_near_e >= dydx_e) & (dydx_near_e < fmax_e - 1),
        "eccentric_slope_near_vmax must be >= eccentric_slope_at_vmax and < "
        "max_eccentric_velocity_force_multiplier - 1",
    )
    _check_curviness(check, conc_curviness, "concentric_curviness")
    _check_curviness(check, ecc_curviness, "eccentric_curviness")
    segs = _force_velocity_segments(
        xp, check, fmax_e, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e, conc_curviness, ecc_curviness
    )
    return _make_ssf(xp, segs, -1.0, 1.0, 0.0, fmax_e, dydx_c, dydx_e)


def _build_force_velocity_inverse(
    xp, check, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e, fmax_e, conc_curviness, ecc_curviness
):
    check(fmax_e > 1, "max_eccentric_velocity_force_multiplier must be > 1")
    check((dydx_c > _SIGNIFICANT_REAL) & (dydx_c < 1), "concentric_slope_at_vmax must be in (0, 1)")
    check(
        (dydx_near_c > dydx_c) & (dydx_near_c < 1),
        "concentric_slope_near_vmax must be > concentric_slope_at_vmax and < 1",
    )
    check(dydx_iso > 1, "isometric_slope must be > 1")
    check(
        (dydx_e > _SIGNIFICANT_REAL) & (dydx_e < fmax_e - 1),
        "eccentric_slope_at_vmax must be > 0 and < max_eccentric_velocity_force_multiplier - 1",
    )
    check(
        (dydx_near_e >= dydx_e) & (dydx_near_e < fmax_e - 1),
        "eccentric_slope_near_vmax must be >= eccentric_slope_at_vmax and < "
        "max_eccentric_velocity_force_multiplier - 1",
    )
    _check_curviness(check, conc_curviness, "concentric_curviness")
    _check_curviness(check, ecc_curviness, "eccentric_curviness")
    segs = _force_velocity_segments(
        xp, check, fmax_e, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e, conc_curviness, ecc_curviness
    )
    # The inverse is the same Bézier chain with x and y exchanged.
    return _make_ssf(xp, segs, 0.0, fmax_e, -1.0, 1.0, 1 / dydx_c, 1 / dydx_e, swap=True)


def _build_fiber_force_length(xp, check, e_zero, e_iso, k_low, k_iso, curviness):
    check(e_iso > e_zero, "strain_at_one_norm_force must be > strain_at_zero_force")
    check(
        k_iso > 1 / (e_iso - e_zero),
        "stiffness_at_one_norm_force must be > 1 / (strain_at_one_norm_force - strain_at_zero_force)",
    )
    check(
        (k_low > 0) & (k_low < 1 / (e_iso - e_zero)),
        "stiffness_at_low_force must be > 0 and < 1 / (strain_at_one_norm_force - strain_at_zero_force)",
    )
    _check_curviness(check, curviness)
    c = _scale_curviness(curviness)
    x_zero, x_iso = 1 + e_zero, 1 + e_iso
    delta_x = xp.minimum(0.1 * (1 / k_iso), 0.1 * (x_iso - x_zero))
    x_low = x_zero + delta_x
    x_foot = x_zero + 0.5 * (x_low - x_zero)
    y_low = k_low * (x_low - x_foot)
    segs = [
        _corner(check, xp, x_zero, 0.0, 0.0, x_low, y_low, k_low, c),
        _corner(check, xp, x_low, y_low, k_low, x_iso, 1.0, k_iso, c),
    ]
    return _make_ssf(xp, segs, x_zero, x_iso, 0.0, 1.0, 0.0, k_iso)


def _build_tendon_force_length(xp, check, e_iso, k_iso, f_toe, curviness):
    check(e_iso > 0, "strain_at_one_norm_force must be > 0")
    check((f_toe > 0) & (f_toe < 1), "norm_force_at_toe_end must be in (0, 1)")
    check(k_iso > 1 / e_iso, "stiffness_at_one_norm_force must be > 1 / strain_at_one_norm_force")
    _check_curviness(check, curviness)
    c = _scale_curviness(curviness)
    x_iso = 1.0 + e_iso
    x_toe = (f_toe - 1) / k_iso + x_iso
    x_foot = 1.0 + (x_toe - 1.0) / 10.0
    y_toe_mid = 0.5 * f_toe
    x_toe_mid = (y_toe_mid - 1.0) / k_iso + x_iso
    dydx_toe_mid = y_toe_mid / (x_toe_mid - x_foot)
    x_toe_ctrl = x_foot + 0.5 * (x_toe_mid - x_foot)
    y_toe_ctrl = dydx_toe_mid * (x_toe_ctrl - x_foot)
    segs = [
        _corner(check, xp, 1.0, 0.0, 0.0, x_toe_ctrl, y_toe_ctrl, dydx_toe_mid, c),
        _corner(check, xp, x_toe_ctrl, y_toe_ctrl, dydx_toe_mid, x_toe, f_toe, k_iso, c),
    ]
    return _make_ssf(xp, segs, 1.0, x_toe, 0.0, f_toe, 0.0, k_iso)


def _build_fiber_compressive_force_length(xp, check, l_max, k, curviness):
    check(l_max > 0, "norm_length_at_zero_force must be > 0")
    check(k < -(1.0 / l_max), "stiffness_at_zero_length must be < -1 / norm_length_at_zero_force")
    _check_curviness(check, curviness)
    seg = _corner(check, xp, 0.0, 1.0, k, l_max, 0.0, 0.0, _scale_curviness(curviness))
    return _make_ssf(xp, [seg], 0.0, l_max, 1.0, 0.0, k, 0.0, left_to_right=False)


def _build_fiber_compressive_force_cos_pennation(xp, check, cos_phi0, k, curviness):
    check((cos_phi0 > 0) & (cos_phi0 < 1), "engagement_angle_in_degrees must give 0 < cos(angle) < 1")
    check(k < 1 / cos_phi0, "stiffness_at_perpendicular must be < 1 / cos(engagement angle)")
    _check_curviness(check, curviness)
    seg = _corner(check, xp, 0.0, 1.0, k, cos_phi0, 0.0, 0.0, _scale_curviness(curviness))
    return _make_ssf(xp, [seg], 0.0, cos_phi0, 1.0, 0.0, k, 0.0, left_to_right=False)


# ======================================================================================
# The Millard2012 curve objects
# ======================================================================================


def _curve_prop(default, doc):
    """A numeric curve property: a float64 leaf (``None`` means 'not set')."""
    return eqx.field(default=default, converter=_as_float, metadata={"property": True, "doc": doc})


def _is_concrete(values) -> bool:
    return not any(isinstance(v, jax.core.Tracer) for v in values)


@functools.lru_cache(maxsize=512)
def _cached_function(cls, key):
    obj = object.__new__(cls)
    for name, value in zip(cls._names(), key):
        object.__setattr__(obj, name, None if value is None else np.float64(value))
    return obj._build(np, _Checker(cls.__name__, True))


class _MillardCurve(eqx.Module):
    """Shared behaviour of the Millard2012 curve objects."""

    _optional: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def _values(self):
        return tuple(getattr(self, n) for n in self._names())

    def __check_init__(self):
        present = [getattr(self, n) is not None for n in self._optional]
        if any(present) and not all(present):
            raise ValueError(
                f"{type(self).__name__}: the optional properties {', '.join(self._optional)} "
                "must either all be set or all be empty"
            )
        for n in self._names():
            v = getattr(self, n)
            if v is not None and not isinstance(v, jax.core.Tracer) and np.shape(v) != ():
                raise ValueError(f"{type(self).__name__}: property {n} must be a scalar, got shape {np.shape(v)}")
        # (methods through the class: Equinox wraps an instance's in a new Module each time)
        if _is_concrete(type(self)._values(self)):
            type(self).function(self)  # validates (raises ValueError like OpenSim) and fills the cache

    def _build(self, xp, check):  # pragma: no cover - overridden
        raise NotImplementedError

    def function(self) -> SmoothSegmentedFunction:
        """The ``SmoothSegmentedFunction`` defined by the current property values.

        Built in numpy (and cached) when the properties are concrete; built with
        ``jax.numpy`` when any is traced, so that gradients reach the properties.
        """
        values = type(self)._values(self)
        if _is_concrete(values):
            key = tuple(None if v is None else float(v) for v in values)
            return _cached_function(type(self), key)
        return self._build(jnp, _Checker(type(self).__name__, False))

    def replace(self, **changes):
        """A copy with some properties changed (re-validated)."""
        return dataclasses.replace(self, **changes)

    def __call__(self, x):
        """The curve's value at ``x`` (OpenSim ``calcValue``).

        **Arguments:** ``x``: a scalar or array.

        **Returns:** an array of the shape of ``x``, in its floating dtype.
        """
        return self.function()(x)

    def derivative(self, x, order: int = 1):
        """``d^order y/dx^order`` at ``x`` (OpenSim ``calcDerivative(x, order)``).

        **Arguments:** ``x``: a scalar or array; ``order``: 0, 1 or 2.

        **Returns:** an array of the shape of ``x``.
        """
        return self.function().derivative(x, order)

    def value_and_derivative(self, x):
        """The value and slope at ``x`` (OpenSim ``calcValueAndDerivative``).

        **Arguments:** ``x``: a scalar or array.

        **Returns:** ``(y, dydx)``.
        """
        return self.function().value_and_derivative(x)

    def evaluate(self, x, orders: tuple[int, ...] = (0, 1, 2)):
        """Several derivative orders at ``x`` at once (one ``u(x)`` solve).

        **Arguments:** ``x``: a scalar or array; ``orders``: orders in {0, 1, 2}.

        **Returns:** a tuple with one array per requested order.
        """
        return self.function().evaluate(x, orders)

    def integral(self, x):
        """The exact integral of the curve (see ``SmoothSegmentedFunction.integral``).

        OpenSim offers it on the fiber/tendon force-length and compressive curves, where
        it is a spline fitted to a numerical integral, so agreement with OpenSim is to
        that fit's accuracy (about 1e-9) rather than to round-off.

        **Arguments:** ``x``: a scalar or array.

        **Returns:** an array of the shape of ``x``.
        """
        return self.function().integral(x)

    def curve_domain(self):
        """The extent of the Bézier section (OpenSim ``getCurveDomain``).

        **Returns:** ``(x_min, x_max)``.
        """
        return self.function().curve_domain()


class ActiveForceLengthCurve(_MillardCurve):
    """Active fiber force-length multiplier vs normalized fiber length (OpenSim
    ``ActiveForceLengthCurve``): five quintic Bézier segments rising from
    ``minimum_value`` at ``min_norm_active_fiber_length`` through a shallow ascending
    limb to 1 at a normalized length of 1, then back down to ``minimum_value`` at
    ``max_norm_active_fiber_length``; constant ``minimum_value`` outside.

    **Fields:** the OpenSim properties, with their defaults.
    """

    min_norm_active_fiber_length: Any = _curve_prop(
        0.47 - 0.0259, "normalized fiber length where the steep ascending limb starts"
    )
    transition_norm_fiber_length: Any = _curve_prop(
        0.73, "normalized fiber length where the steep ascending limb becomes shallow"
    )
    max_norm_active_fiber_length: Any = _curve_prop(1.8123, "normalized fiber length where the descending limb ends")
    shallow_ascending_slope: Any = _curve_prop(0.8616, "slope of the shallow ascending limb")
    minimum_value: Any = _curve_prop(0.1, "minimum value of the curve")

    def _build(self, xp, check):
        return _build_active_force_length(
            xp,
            check,
            self.min_norm_active_fiber_length,
            self.transition_norm_fiber_length,
            self.max_norm_active_fiber_length,
            self.shallow_ascending_slope,
            self.minimum_value,
        )


class _ForceVelocityProperties(_MillardCurve):
    """The properties shared by the force-velocity curve and its inverse."""

    concentric_slope_at_vmax: Any = _curve_prop(0.0, "slope at normalized velocity -1")
    concentric_slope_near_vmax: Any = _curve_prop(0.25, "slope at normalized velocity -0.9")
    isometric_slope: Any = _curve_prop(5.0, "slope at normalized velocity 0")
    eccentric_slope_at_vmax: Any = _curve_prop(0.0, "slope at normalized velocity 1")
    eccentric_slope_near_vmax: Any = _curve_prop(0.15, "slope at normalized velocity 0.9")
    max_eccentric_velocity_force_multiplier: Any = _curve_prop(1.4, "value at normalized velocity 1")
    concentric_curviness: Any = _curve_prop(0.6, "curviness of the concentric branch, in [0, 1]")
    eccentric_curviness: Any = _curve_prop(0.9, "curviness of the eccentric branch, in [0, 1]")

    def _args(self):
        return (
            self.concentric_slope_at_vmax,
            self.concentric_slope_near_vmax,
            self.isometric_slope,
            self.eccentric_slope_at_vmax,
            self.eccentric_slope_near_vmax,
            self.max_eccentric_velocity_force_multiplier,
            self.concentric_curviness,
            self.eccentric_curviness,
        )


class ForceVelocityCurve(_ForceVelocityProperties):
    """Force-velocity multiplier vs normalized fiber velocity in [-1, 1] (OpenSim
    ``ForceVelocityCurve``), linear beyond ±1 with the slopes at vmax.

    **Fields:** the OpenSim properties, with their defaults.
    """

    def _build(self, xp, check):
        return _build_force_velocity(xp, check, *self._args())


class ForceVelocityInverseCurve(_ForceVelocityProperties):
    """Normalized fiber velocity vs force-velocity multiplier: the exact inverse of
    ``ForceVelocityCurve`` with the same properties (OpenSim
    ``ForceVelocityInverseCurve``). The slopes at vmax must be positive, so their
    defaults differ (0.1).

    **Fields:** the OpenSim properties, with their defaults.
    """

    concentric_slope_at_vmax: Any = _curve_prop(0.1, "forward curve's slope at normalized velocity -1 (> 0)")
    eccentric_slope_at_vmax: Any = _curve_prop(0.1, "forward curve's slope at normalized velocity 1 (> 0)")

    def _build(self, xp, check):
        return _build_force_velocity_inverse(xp, check, *self._args())


class FiberForceLengthCurve(_MillardCurve):
    """Passive fiber force-length multiplier vs normalized fiber length (OpenSim
    ``FiberForceLengthCurve``): zero below ``1 + strain_at_zero_force``, one at
    ``1 + strain_at_one_norm_force``, linear beyond.

    The three optional properties must be all set or all empty; when empty OpenSim's
    fitted values are used: ``stiffness_at_one_norm_force = 2 / (e1 - e0)``,
    ``stiffness_at_low_force = 0.2``, ``curviness = 0.75``.

    **Fields:** the OpenSim properties, with their defaults.
    """

    _optional: ClassVar[tuple[str, ...]] = ("stiffness_at_low_force", "stiffness_at_one_norm_force", "curviness")

    strain_at_zero_force: Any = _curve_prop(0.0, "fiber strain at which the passive force starts")
    strain_at_one_norm_force: Any = _curve_prop(0.7, "fiber strain at which the passive force is one")
    stiffness_at_low_force: Any = _curve_prop(None, "optional: normalized stiffness at low force")
    stiffness_at_one_norm_force: Any = _curve_prop(None, "optional: normalized stiffness at one norm. force")
    curviness: Any = _curve_prop(None, "optional: curviness in [0, 1]")

    @property
    def stiffness_at_low_force_in_use(self):
        """The low-force stiffness actually used (OpenSim ``getStiffnessAtLowForceInUse``)."""
        return 0.2 if self.stiffness_at_low_force is None else self.stiffness_at_low_force

    @property
    def stiffness_at_one_norm_force_in_use(self):
        """The stiffness at one normalized force actually used."""
        if self.stiffness_at_one_norm_force is None:
            return 2.0 / (self.strain_at_one_norm_force - self.strain_at_zero_force)
        return self.stiffness_at_one_norm_force

    @property
    def curviness_in_use(self):
        """The curviness actually used."""
        return 0.75 if self.curviness is None else self.curviness

    @property
    def is_fitted_curve_being_used(self) -> bool:
        """Whether the optional properties are empty (OpenSim ``isFittedCurveBeingUsed``)."""
        return self.curviness is None

    def _build(self, xp, check):
        return _build_fiber_force_length(
            xp,
            check,
            self.strain_at_zero_force,
            self.strain_at_one_norm_force,
            self.stiffness_at_low_force_in_use,
            self.stiffness_at_one_norm_force_in_use,
            self.curviness_in_use,
        )


class TendonForceLengthCurve(_MillardCurve):
    """Tendon force-length multiplier vs normalized tendon length (OpenSim
    ``TendonForceLengthCurve``): zero below 1, a toe region up to
    ``norm_force_at_toe_end``, then linear (through one at
    ``1 + strain_at_one_norm_force``).

    The three optional properties must be all set or all empty; when empty OpenSim's
    fitted values are used: ``stiffness_at_one_norm_force = 1.375 / e0``,
    ``norm_force_at_toe_end = 2/3``, ``curviness = 0.5``.

    **Fields:** the OpenSim properties, with their defaults.
    """

    _optional: ClassVar[tuple[str, ...]] = ("stiffness_at_one_norm_force", "norm_force_at_toe_end", "curviness")

    strain_at_one_norm_force: Any = _curve_prop(0.049, "tendon strain at one normalized force")
    stiffness_at_one_norm_force: Any = _curve_prop(None, "optional: normalized linear-region stiffness")
    norm_force_at_toe_end: Any = _curve_prop(None, "optional: normalized force at the end of the toe region")
    curviness: Any = _curve_prop(None, "optional: curviness in [0, 1]")

    @property
    def stiffness_at_one_norm_force_in_use(self):
        """The linear-region stiffness actually used."""
        if self.stiffness_at_one_norm_force is None:
            return 1.375 / self.strain_at_one_norm_force
        return self.stiffness_at_one_norm_force

    @property
    def norm_force_at_toe_end_in_use(self):
        """The toe-end force actually used."""
        return 2.0 / 3.0 if self.norm_force_at_toe_end is None else self.norm_force_at_toe_end

    @property
    def curviness_in_use(self):
        """The curviness actually used."""
        return 0.5 if self.curviness is None else self.curviness

    @property
    def is_fitted_curve_being_used(self) -> bool:
        """Whether the optional properties are empty."""
        return self.curviness is None

    def __check_init__(self):
        if self.stiffness_at_one_norm_force is not None and _is_concrete(self._values()):
            # OpenSim's setOptionalProperties checks, before the factory's.
            name = type(self).__name__
            if not self.stiffness_at_one_norm_force > _SIGNIFICANT_REAL * 1000:
                raise ValueError(f"{name}: the tendon must have a non-zero stiffness")
            if not (_SIGNIFICANT_REAL * 1000 < self.norm_force_at_toe_end <= 1):
                raise ValueError(f"{name}: norm_force_at_toe_end must be in (0, 1]")

    def _build(self, xp, check):
        return _build_tendon_force_length(
            xp,
            check,
            self.strain_at_one_norm_force,
            self.stiffness_at_one_norm_force_in_use,
            self.norm_force_at_toe_end_in_use,
            self.curviness_in_use,
        )


class FiberCompressiveForceLengthCurve(_MillardCurve):
    """Compressive force vs normalized fiber length, preventing fibers from becoming
    too short (OpenSim ``FiberCompressiveForceLengthCurve``): one at zero length, zero
    from ``norm_length_at_zero_force`` on. Its integral runs right to left.

    The optional properties must both be set or both be empty; when empty:
    ``stiffness_at_zero_length = -2 / norm_length_at_zero_force``,
    ``curviness = 0.5``.

    **Fields:** the OpenSim properties, with their defaults.
    """

    _optional: ClassVar[tuple[str, ...]] = ("stiffness_at_zero_length", "curviness")

    norm_length_at_zero_force: Any = _curve_prop(0.5, "normalized fiber length where the force reaches 0")
    stiffness_at_zero_length: Any = _curve_prop(None, "optional: slope at zero length (negative)")
    curviness: Any = _curve_prop(None, "optional: curviness in [0, 1]")

    @property
    def stiffness_at_zero_length_in_use(self):
        """The stiffness at zero length actually used."""
        if self.stiffness_at_zero_length is None:
            return -2.0 / self.norm_length_at_zero_force
        return self.stiffness_at_zero_length

    @property
    def curviness_in_use(self):
        """The curviness actually used."""
        return 0.5 if self.curviness is None else self.curviness

    @property
    def is_fitted_curve_being_used(self) -> bool:
        """Whether the optional properties are empty."""
        return self.curviness is None

    def _build(self, xp, check):
        return _build_fiber_compressive_force_length(
            xp, check, self.norm_length_at_zero_force, self.stiffness_at_zero_length_in_use, self.curviness_in_use
        )


class FiberCompressiveForceCosPennationCurve(_MillardCurve):
    """Compressive force vs cosine of the pennation angle, preventing the pennation
    angle from reaching 90 degrees (OpenSim ``FiberCompressiveForceCosPennationCurve``):
    one at ``cos = 0``, zero from ``cos(engagement_angle_in_degrees)`` on. Its
    integral runs right to left.

    The optional properties must both be set or both be empty; when empty:
    ``stiffness_at_perpendicular = -2 / cos(engagement angle)``, ``curviness = 0.1``.

    **Fields:** the OpenSim properties, with their defaults.
    """

    _optional: ClassVar[tuple[str, ...]] = ("stiffness_at_perpendicular", "curviness")

    engagement_angle_in_degrees: Any = _curve_prop(85.0, "pennation angle (degrees) where the force engages")
    stiffness_at_perpendicular: Any = _curve_prop(None, "optional: slope at cos(pennation) = 0 (negative)")
    curviness: Any = _curve_prop(None, "optional: curviness in [0, 1]")

    def _cos_engagement(self, xp):
        return xp.cos(self.engagement_angle_in_degrees * math.pi / 180.0)

    @property
    def stiffness_at_perpendicular_in_use(self):
        """The stiffness at a perpendicular fiber actually used."""
        if self.stiffness_at_perpendicular is None:
            xp = np if _is_concrete([self.engagement_angle_in_degrees]) else jnp
            return -2.0 / self._cos_engagement(xp)
        return self.stiffness_at_perpendicular

    @property
    def curviness_in_use(self):
        """The curviness actually used."""
        return 0.1 if self.curviness is None else self.curviness

    @property
    def is_fitted_curve_being_used(self) -> bool:
        """Whether the optional properties are empty."""
        return self.curviness is None

    def _build(self, xp, check):
        return _build_fiber_compressive_force_cos_pennation(
            xp, check, self._cos_engagement(xp), self.stiffness_at_perpendicular_in_use, self.curviness_in_use
        )


# ======================================================================================
# Thelen2003Muscle
# ======================================================================================


def _f(x):
    return _float_input(x)


def thelen_active_force_length(norm_fiber_length, KshapeActive=0.45):
    """Thelen2003 active force-length multiplier, ``exp(-(l - 1)^2 / KshapeActive)``
    (OpenSim ``Thelen2003Muscle::calcfal``).

    **Arguments:** ``norm_fiber_length``: fiber length / optimal fiber length;
    ``KshapeActive``: the Gaussian's width parameter.

    **Returns:** the multiplier, shaped like ``norm_fiber_length``.
    """
    x = _f(norm_fiber_length)
    return jnp.exp(-((x - 1.0) ** 2) / KshapeActive)


def thelen_active_force_length_derivative(norm_fiber_length, KshapeActive=0.45):
    """Derivative of ``thelen_active_force_length`` w.r.t. normalized fiber length
    (OpenSim ``calcDfalDlceN``).

    **Arguments:** as ``thelen_active_force_length``.

    **Returns:** ``d fal / d lceN``.
    """
    x = _f(norm_fiber_length)
    return -2.0 * (x - 1.0) / KshapeActive * jnp.exp(-((x - 1.0) ** 2) / KshapeActive)


def thelen_passive_force_length(norm_fiber_length, FmaxMuscleStrain=0.6, KshapePassive=5.0):
    """Thelen2003 passive force-length multiplier (OpenSim ``calcfpe``):
    ``(exp(k (l - 1) / e0) - 1) / (exp(k) - 1)`` for ``l > 1``, zero otherwise.

    **Arguments:** ``norm_fiber_length``; ``FmaxMuscleStrain`` (``e0``): the strain at
    one normalized passive force; ``KshapePassive`` (``k``): the exponential shape
    factor.

    **Returns:** the multiplier.
    """
    x = _f(norm_fiber_length)
    stretched = x > 1.0
    xs = jnp.where(stretched, x, 1.0)
    val = (jnp.exp(KshapePassive * (xs - 1.0) / FmaxMuscleStrain) - 1.0) / (jnp.exp(KshapePassive) - 1.0)
    return jnp.where(stretched, val, 0.0)


def thelen_passive_force_length_derivative(norm_fiber_length, FmaxMuscleStrain=0.6, KshapePassive=5.0):
    """Derivative of ``thelen_passive_force_length`` (OpenSim ``calcDfpeDlceN``).

    **Arguments:** as ``thelen_passive_force_length``.

    **Returns:** ``d fpe / d lceN`` (zero for ``l <= 1``).
    """
    x = _f(norm_fiber_length)
    stretched = x > 1.0
    xs = jnp.where(stretched, x, 1.0)
    val = (
        (KshapePassive / FmaxMuscleStrain)
        * jnp.exp(KshapePassive * (xs - 1.0) / FmaxMuscleStrain)
        / (jnp.exp(KshapePassive) - 1.0)
    )
    return jnp.where(stretched, val, 0.0)


def _thelen_tendon_constants(FmaxTendonStrain):
    e3 = math.exp(3.0)
    # Exact toe-end strain and linear stiffness of Thelen's curve (kToe = 3, Ftoe = 0.33).
    e_toe = 99.0 * FmaxTendonStrain * e3 / (166.0 * e3 - 67.0)
    k_lin = 0.67 / (FmaxTendonStrain - 99.0 * FmaxTendonStrain * e3 / (166.0 * e3 - 67.0))
    return 3.0, 0.33, e_toe, k_lin


def thelen_tendon_force_length(norm_tendon_length, FmaxTendonStrain=0.04):
    """Thelen2003 tendon force-length multiplier (OpenSim ``calcfse``): an exponential
    toe (``kToe = 3``) up to normalized force 0.33, then linear; zero when slack.

    **Arguments:** ``norm_tendon_length``: tendon length / tendon slack length;
    ``FmaxTendonStrain``: the strain at one normalized force.

    **Returns:** the multiplier.
    """
    k_toe, f_toe, e_toe, k_lin = _thelen_tendon_constants(FmaxTendonStrain)
    x = _f(norm_tendon_length) - 1.0
    xt = jnp.clip(x, 0.0, e_toe)
    toe = (f_toe / (math.exp(k_toe) - 1.0)) * (jnp.exp(k_toe * xt / e_toe) - 1.0)
    lin = k_lin * (x - e_toe) + f_toe
    return jnp.where(x > e_toe, lin, jnp.where(x > 0.0, toe, 0.0))


def thelen_tendon_force_length_derivative(norm_tendon_length, FmaxTendonStrain=0.04):
    """Derivative of ``thelen_tendon_force_length`` (OpenSim ``calcDfseDtlN``).

    **Arguments:** as ``thelen_tendon_force_length``.

    **Returns:** ``d fse / d tlN``.
    """
    k_toe, f_toe, e_toe, k_lin = _thelen_tendon_constants(FmaxTendonStrain)
    x = _f(norm_tendon_length) - 1.0
    xt = jnp.clip(x, 0.0, e_toe)
    toe = (f_toe / (math.exp(k_toe) - 1.0)) * (k_toe / e_toe) * jnp.exp(k_toe * xt / e_toe)
    return jnp.where(x > e_toe, k_lin + 0.0 * x, jnp.where(x > 0.0, toe, 0.0))


def thelen_norm_fiber_velocity(
    activation, active_force_length_multiplier, active_force, Af=0.25, Flen=1.4, fv_linear_extrap_threshold=0.95
):
    """Normalized fiber velocity from the force-velocity relation of Thelen (2003),
    eqs. 6-7, with OpenSim's linear extrapolation (OpenSim ``calcdlceN``).

    **Arguments:**

    - ``activation``: the (already clamped) activation ``a``.
    - ``active_force_length_multiplier``: ``fal``.
    - ``active_force``: the normalized active fiber force ``a * fal * fv``
      (OpenSim computes it as ``fse / cos(phi) - fpe``).
    - ``Af``, ``Flen``, ``fv_linear_extrap_threshold``: the muscle's properties.

    **Returns:** the fiber velocity divided by ``optimal_fiber_length *
    max_contraction_velocity``. Below zero force, and above
    ``fv_linear_extrap_threshold * Flen * a * fal``, the curve continues linearly with
    its slope at the threshold.
    """
    a = _f(activation)
    afl = a * active_force_length_multiplier
    fm = _f(active_force)
    k = 0.25 + 0.75 * a
    c = (2.0 + 2.0 / Af) / (Flen - 1.0)
    fm_ecc_end = fv_linear_extrap_threshold * Flen * afl

    # Each branch is evaluated at a force clamped into its own region, so that the
    # discarded branches stay finite (and their gradients NaN-free).
    fc = jnp.clip(fm, 0.0, afl)
    conc = k * (fc - afl) / (afl + fc / Af)
    fe = jnp.clip(fm, afl, fm_ecc_end)
    ecc = k * (fe - afl) / (c * (afl * Flen - fe))

    # Linear extrapolation below zero force ...
    b0 = afl
    v0 = k * (0.0 - afl) / b0
    s0 = k / b0 - k * (0.0 - afl) / b0**2 * (1.0 / Af)
    lin_c = v0 + s0 * fm
    # ... and above the eccentric threshold.
    b1 = c * (afl * Flen - fm_ecc_end)
    v1 = k * (fm_ecc_end - afl) / b1
    s1 = k / b1 - k * (fm_ecc_end - afl) / b1**2 * (-c)
    lin_e = v1 + s1 * (fm - fm_ecc_end)

    in_region = (fm > 0.0) & (fm < fm_ecc_end)
    return jnp.where(in_region, jnp.where(fm <= afl, conc, ecc), jnp.where(fm <= 0.0, lin_c, lin_e))


def thelen_force_velocity_multiplier(
    activation, active_force_length_multiplier, norm_fiber_velocity, Af=0.25, Flen=1.4, fv_linear_extrap_threshold=0.95
):
    """The force-velocity multiplier for a given normalized fiber velocity: the exact
    inverse of ``thelen_norm_fiber_velocity``, floored at zero (OpenSim
    ``calcfvInv``, which finds it by Newton's method to a tolerance of 1e-6 in
    velocity; here every branch is inverted in closed form).

    **Arguments:**

    - ``activation``: the (already clamped) activation.
    - ``active_force_length_multiplier``: ``fal``.
    - ``norm_fiber_velocity``: fiber velocity / (optimal fiber length * vmax).
    - ``Af``, ``Flen``, ``fv_linear_extrap_threshold``: the muscle's properties.

    **Returns:** ``max(0, fv)`` where ``a * fal * fv`` is the active force giving that
    velocity.
    """
    a = _f(activation)
    afl = a * active_force_length_multiplier
    v = _f(norm_fiber_velocity)
    k = 0.25 + 0.75 * a
    c = (2.0 + 2.0 / Af) / (Flen - 1.0)
    fm_ecc_end = fv_linear_extrap_threshold * Flen * afl

    b1 = c * (afl * Flen - fm_ecc_end)
    v1 = k * (fm_ecc_end - afl) / b1
    s1 = k / b1 + k * c * (fm_ecc_end - afl) / b1**2
    s0 = (k / afl) * (1.0 + 1.0 / Af)

    vc = jnp.clip(v, -k, 0.0)
    conc = afl * (k + vc) / (k - vc / Af)
    ve = jnp.clip(v, 0.0, v1)
    ecc = afl * (k + c * Flen * ve) / (k + c * ve)
    lin_c = (v + k) / s0
    lin_e = fm_ecc_end + (v - v1) / s1

    fm = jnp.where(v <= -k, lin_c, jnp.where(v <= 0.0, conc, jnp.where(v < v1, ecc, lin_e)))
    return jnp.maximum(0.0, fm / afl)


def thelen_clamp_activation(activation, minimum_activation=0.01):
    """Clamp activation into ``[minimum_activation, 1]`` (OpenSim
    ``MuscleFirstOrderActivationDynamicModel::clampActivation``).

    **Arguments:** ``activation``; ``minimum_activation``.

    **Returns:** the clamped activation.
    """
    return jnp.clip(_f(activation), minimum_activation, 1.0)


def thelen_activation_derivative(
    activation, excitation, activation_time_constant=0.015, deactivation_time_constant=0.05, minimum_activation=0.01
):
    """Thelen's first-order activation dynamics (OpenSim
    ``MuscleFirstOrderActivationDynamicModel::calcDerivative``).

    Activation is first clamped into ``[minimum_activation, 1]``; then
    ``da/dt = (e - a) / tau`` with ``tau = activation_time_constant * (0.5 + 1.5 a)``
    when ``e > a`` and ``deactivation_time_constant / (0.5 + 1.5 a)`` otherwise.

    **Arguments:** ``activation``, ``excitation``, and the muscle's properties
    (the Thelen2003Muscle defaults).

    **Returns:** ``da/dt``.
    """
    a = thelen_clamp_activation(activation, minimum_activation)
    e = _f(excitation)
    s = 0.5 + 1.5 * a
    tau = jnp.where(e > a, activation_time_constant * s, deactivation_time_constant / s)
    return (e - a) / tau


# ======================================================================================
# DeGrooteFregly2016Muscle
# ======================================================================================

# Active force-length: (b1, b2, b3, b4) of the three Gaussian-like terms.
_DG_B = (
    (0.8150671134243542, 1.055033428970575, 0.162384573599574, 0.063303448465465),
    (0.433004984392647, 0.716775413397760, -0.029947116970696, 0.200356847296188),
    (0.1, 1.0, 0.353553390593274, 0.0),
)
_DG_KPE = 4.0
_DG_C1, _DG_C2, _DG_C3 = 0.200, 1.0, 0.200
_DG_D1, _DG_D2, _DG_D3, _DG_D4 = -0.3211346127989808, -8.149, -0.374, 0.8825327733249912
_DG_MIN_NORM_FIBER_LENGTH = 0.2
_DG_MIN_NORM_TENDON_FORCE = 0.0


def degroote_active_force_length(norm_fiber_length, active_force_width_scale=1.0):
    """DeGroote-Fregly active force-length multiplier: a sum of three Gaussian-like
    terms ``b1 exp(-(x - b2)^2 / (2 (b3 + b4 x)^2))``, evaluated at
    ``x = (l - 1) / active_force_width_scale + 1`` (OpenSim
    ``calcActiveForceLengthMultiplier``).

    **Arguments:** ``norm_fiber_length``; ``active_force_width_scale`` (>= 1 widens).

    **Returns:** the multiplier (1 at ``l = 1``).
    """
    x = (_f(norm_fiber_length) - 1.0) / active_force_width_scale + 1.0
    return sum(b1 * jnp.exp(-0.5 * (x - b2) ** 2 / (b3 + b4 * x) ** 2) for b1, b2, b3, b4 in _DG_B)


def degroote_active_force_length_derivative(norm_fiber_length, active_force_width_scale=1.0):
    """Derivative of ``degroote_active_force_length`` w.r.t. normalized fiber length.

    **Arguments:** as ``degroote_active_force_length``.

    **Returns:** ``d fal / d lceN``.
    """
    x = (_f(norm_fiber_length) - 1.0) / active_force_width_scale + 1.0
    total = 0.0
    for b1, b2, b3, b4 in _DG_B:
        s = b3 + b4 * x
        total = total + b1 * jnp.exp(-0.5 * (x - b2) ** 2 / s**2) * (b2 - x) * (b3 + b2 * b4) / s**3
    return total / active_force_width_scale


def _dg_passive_offset(e0):
    return jnp.exp(_DG_KPE * (_DG_MIN_NORM_FIBER_LENGTH - 1.0) / e0)


def degroote_passive_force_length(norm_fiber_length, passive_fiber_strain_at_one_norm_force=0.6):
    """DeGroote-Fregly passive force-length multiplier, an exponential (``kPE = 4``)
    that is zero at the minimum normalized fiber length 0.2 and one at
    ``1 + passive_fiber_strain_at_one_norm_force`` (OpenSim
    ``calcPassiveForceMultiplier``; ``ignore_passive_fiber_force`` is the caller's).

    **Arguments:** ``norm_fiber_length``; ``passive_fiber_strain_at_one_norm_force``.

    **Returns:** the multiplier (negative below 0.2).
    """
    e0 = passive_fiber_strain_at_one_norm_force
    offset = _dg_passive_offset(e0)
    return (jnp.exp(_DG_KPE * (_f(norm_fiber_length) - 1.0) / e0) - offset) / (jnp.exp(_DG_KPE) - offset)


def degroote_passive_force_length_derivative(norm_fiber_length, passive_fiber_strain_at_one_norm_force=0.6):
    """Derivative of ``degroote_passive_force_length``.

    **Arguments:** as ``degroote_passive_force_length``.

    **Returns:** ``d fpe / d lceN``.
    """
    e0 = passive_fiber_strain_at_one_norm_force
    offset = _dg_passive_offset(e0)
    x = _f(norm_fiber_length)
    return _DG_KPE * jnp.exp(_DG_KPE * (x - 1.0) / e0) / (e0 * (jnp.exp(_DG_KPE) - offset))


def degroote_passive_force_length_integral(norm_fiber_length, passive_fiber_strain_at_one_norm_force=0.6):
    """Integral of ``degroote_passive_force_length`` from 0.2 to ``norm_fiber_length``
    (OpenSim ``calcPassiveForceMultiplierIntegral``).

    **Arguments:** as ``degroote_passive_force_length``.

    **Returns:** the integral.
    """
    e0 = passive_fiber_strain_at_one_norm_force
    x = _f(norm_fiber_length)
    offset = _dg_passive_offset(e0)
    ek = math.exp(_DG_KPE)
    # offset = exp(kPE (l_min - 1) / e0) is also the primitive's value at l_min.
    primitive = e0 / _DG_KPE * (jnp.exp(_DG_KPE * (x - 1.0) / e0) - offset)
    return (primitive - offset * (x - _DG_MIN_NORM_FIBER_LENGTH)) / (ek - offset)


def degroote_force_velocity(norm_fiber_velocity):
    """DeGroote-Fregly force-velocity multiplier, ``d1 asinh(d2 v + d3) + d4`` (OpenSim
    ``calcForceVelocityMultiplier``, written there as a log).

    **Arguments:** ``norm_fiber_velocity``: fiber velocity / (optimal fiber length *
    ``max_contraction_velocity``), meaningful in [-1, 1].

    **Returns:** the multiplier (0 at -1, 1 at 0).
    """
    v = _f(norm_fiber_velocity)
    return _DG_D1 * jnp.arcsinh(_DG_D2 * v + _DG_D3) + _DG_D4


def degroote_force_velocity_inverse(force_velocity_multiplier):
    """Inverse of ``degroote_force_velocity``: ``(sinh((fv - d4) / d1) - d3) / d2``
    (OpenSim ``calcForceVelocityInverseCurve``).

    **Arguments:** ``force_velocity_multiplier``.

    **Returns:** the normalized fiber velocity.
    """
    fv = _f(force_velocity_multiplier)
    return (jnp.sinh((fv - _DG_D4) / _DG_D1) - _DG_D3) / _DG_D2


def degroote_tendon_stiffness_parameter(tendon_strain_at_one_norm_force=0.049):
    """The tendon shape factor ``kT`` that puts one normalized force at the given
    strain: ``log((1 + c3) / c1) / (1 + strain - c2)``.

    **Arguments:** ``tendon_strain_at_one_norm_force``.

    **Returns:** ``kT``.
    """
    return jnp.log((1.0 + _DG_C3) / _DG_C1) / (1.0 + jnp.asarray(tendon_strain_at_one_norm_force) - _DG_C2)


def degroote_tendon_force_length(norm_tendon_length, tendon_strain_at_one_norm_force=0.049):
    """DeGroote-Fregly tendon force multiplier, ``c1 exp(kT (l - c2)) - c3`` (OpenSim
    ``calcTendonForceMultiplier``).

    **Arguments:** ``norm_tendon_length``; ``tendon_strain_at_one_norm_force``.

    **Returns:** the multiplier (0 at ``l = 1``, negative below).
    """
    kt = degroote_tendon_stiffness_parameter(tendon_strain_at_one_norm_force)
    return _DG_C1 * jnp.exp(kt * (_f(norm_tendon_length) - _DG_C2)) - _DG_C3


def degroote_tendon_force_length_derivative(norm_tendon_length, tendon_strain_at_one_norm_force=0.049):
    """Derivative of ``degroote_tendon_force_length``.

    **Arguments:** as ``degroote_tendon_force_length``.

    **Returns:** ``d fse / d tlN``.
    """
    kt = degroote_tendon_stiffness_parameter(tendon_strain_at_one_norm_force)
    return _DG_C1 * kt * jnp.exp(kt * (_f(norm_tendon_length) - _DG_C2))


def degroote_tendon_force_length_inverse(norm_tendon_force, tendon_strain_at_one_norm_force=0.049):
    """Normalized tendon length for a normalized tendon force (OpenSim
    ``calcTendonForceLengthInverseCurve``).

    **Arguments:** ``norm_tendon_force``; ``tendon_strain_at_one_norm_force``.

    **Returns:** the normalized tendon length.
    """
    kt = degroote_tendon_stiffness_parameter(tendon_strain_at_one_norm_force)
    return jnp.log((_f(norm_tendon_force) + _DG_C3) / _DG_C1) / kt + _DG_C2


def degroote_tendon_force_length_inverse_derivative(
    norm_tendon_force_derivative, norm_tendon_length, tendon_strain_at_one_norm_force=0.049
):
    """Normalized tendon velocity from the time derivative of normalized tendon force
    (OpenSim ``calcTendonForceLengthInverseCurveDerivative``).

    **Arguments:** ``norm_tendon_force_derivative``; ``norm_tendon_length``;
    ``tendon_strain_at_one_norm_force``.

    **Returns:** ``d tlN / dt``.
    """
    return _f(norm_tendon_force_derivative) / degroote_tendon_force_length_derivative(
        norm_tendon_length, tendon_strain_at_one_norm_force
    )


def degroote_tendon_force_length_integral(norm_tendon_length, tendon_strain_at_one_norm_force=0.049):
    """Integral of ``degroote_tendon_force_length`` from the length at zero force to
    ``norm_tendon_length`` (OpenSim ``calcTendonForceMultiplierIntegral``).

    **Arguments:** as ``degroote_tendon_force_length``.

    **Returns:** the integral.
    """
    kt = degroote_tendon_stiffness_parameter(tendon_strain_at_one_norm_force)
    x = _f(norm_tendon_length)
    x_min = degroote_tendon_force_length_inverse(_DG_MIN_NORM_TENDON_FORCE, tendon_strain_at_one_norm_force)
    exponential = (jnp.exp(kt * x) - jnp.exp(kt * x_min)) * _DG_C1 * jnp.exp(-_DG_C2 * kt) / kt
    return exponential - _DG_C3 * (x - x_min)


def degroote_activation_derivative(
    activation,
    excitation,
    activation_time_constant=0.015,
    deactivation_time_constant=0.060,
    activation_dynamics_smoothing=0.1,
):
    """DeGroote-Fregly activation dynamics with a tanh blend between activation and
    deactivation (OpenSim ``DeGrooteFregly2016Muscle::computeStateVariableDerivatives``):

    ``f = 0.5 tanh(b (e - a))``, ``z = 0.5 + 1.5 a``,
    ``da/dt = [(f + 0.5) / (tau_a z) + (0.5 - f) z / tau_d] (e - a)``.

    Activation is not clamped. (OpenSim 4.6 reads the three properties into
    function-level statics, so within one process it uses the values of the first
    muscle whose derivatives it computes; this function uses the values it is given.)

    **Arguments:** ``activation``, ``excitation``, and the muscle's properties
    ``activation_time_constant``, ``deactivation_time_constant`` and
    ``activation_dynamics_smoothing`` (``b``).

    **Returns:** ``da/dt``.
    """
    a, e = _f(activation), _f(excitation)
    z = 0.5 + 1.5 * a
    f = 0.5 * jnp.tanh(activation_dynamics_smoothing * (e - a))
    return ((f + 0.5) / (activation_time_constant * z) + (0.5 - f) * z / deactivation_time_constant) * (e - a)
