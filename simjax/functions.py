"""OpenSim's one-argument ``Function`` family as differentiable Equinox modules.

OpenSim couples coordinates, path points and controls to scalar functions of one
variable: ``Constant``, ``LinearFunction``, ``PolynomialFunction``,
``PiecewiseLinearFunction``, ``PiecewiseConstantFunction``, ``SimmSpline`` (read
from files also under its old name ``NaturalCubicSpline``), ``GCVSpline``,
``MultiplierFunction``, ``StepFunction`` and ``Sine``. Each is an Equinox module here
whose fields carry the OpenSim XML property names, so a model reader/writer maps
them one to one. Numeric fields are float arrays (pytree leaves), so

- every function works under ``jax.jit`` and ``jax.vmap``, in float32 and float64;
- values are differentiable with respect to the argument *and* the parameters: a
  spline's coefficients are recomputed from its knots in ``jax.numpy`` on every
  evaluation, so ``jax.grad`` with respect to the knot values ``y`` (or sites
  ``x``) is exact.

The results match OpenSim 4.6 to rounding, including its conventions outside the
knot range, exactly at knots and within its 2e-13 end-knot window (see each class;
``GCVSpline`` differs from OpenSim by OpenSim's own small smoothing residual). Everything except ``Sine``
converts exactly (``to_pp``) to a ``PiecewisePolynomial``, a single array layout
for all of them; ``stack_pp`` pads several to a common size so that
``jax.vmap(lambda pp, x: pp(x))(stack_pp(pps), xs)`` evaluates dozens of different
functions in one vectorized call.
"""

from __future__ import annotations

import abc
import functools
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .compiling import unrolled_off_cpu

__all__ = [
    "Function",
    "Constant",
    "LinearFunction",
    "PolynomialFunction",
    "PiecewiseLinearFunction",
    "PiecewiseConstantFunction",
    "SimmSpline",
    "NaturalCubicSpline",
    "GCVSpline",
    "MultiplierFunction",
    "StepFunction",
    "Sine",
    "PiecewisePolynomial",
    "stack_pp",
    "SEARCH_BISECT",
    "SEARCH_BISECT_CLOSED",
    "SEARCH_RIGHT",
]

# OpenSim's SimmMacros.h: the floor on a knot spacing, and the distance within which
# an argument counts as "at" an end knot.
TINY_NUMBER = 1e-7
ROUNDOFF_ERROR = 2e-13

#: Knot convention of SimmSpline / PiecewiseLinearFunction: OpenSim's bisection
#: decides which side an exact interior knot belongs to; an argument inside the range
#: but within ``ROUNDOFF_ERROR`` of an end knot is evaluated *at* that knot.
SEARCH_BISECT = 0
#: OpenSim's bisection, and an argument within ``ROUNDOFF_ERROR`` of an end knot
#: belongs to the extrapolation (PiecewiseConstantFunction, StepFunction).
SEARCH_BISECT_CLOSED = 1
#: Intervals closed on the left, the last knot belongs to the right extrapolation,
#: no snapping: GCVSpline (GCVSPL's ``splder``), global polynomials, and the default.
SEARCH_RIGHT = 2

Array = Any


# -- small helpers ---------------------------------------------------------------------


def _as_float(x: Any) -> Any:
    """Field converter: jax arrays (and tracers) pass, anything else -> float64 numpy."""
    if x is None or isinstance(x, jax.Array):
        return x
    return np.asarray(x, dtype=np.float64)


def _as_int(x: Any) -> Any:
    if isinstance(x, jax.Array):
        return x
    return np.asarray(x, dtype=np.int32)


def _concrete(a: Any) -> np.ndarray | None:
    """The value of ``a`` as numpy if it is known now (not a tracer), else ``None``."""
    if a is None or isinstance(a, jax.core.Tracer):
        return None
    try:
        return np.asarray(a)
    except Exception:  # an abstract value of some other kind
        return None


def _fmt(a: Any) -> str:
    v = _concrete(a)
    return repr(v.tolist()) if v is not None else repr(a)


def _error(cls: str, prop: str, value: Any, message: str) -> ValueError:
    return ValueError(f"{cls}: property '{prop}' = {_fmt(value)}: {message}")


def _check_order(order: Any) -> int:
    if isinstance(order, (bool, np.bool_)) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"derivative order must be a non-negative int, got {order!r}")
    return int(order)


def _check_knots(cls: str, x: Any, y: Any, min_points: int) -> None:
    """Shape checks always; value checks (finite, increasing) when concrete."""
    if jnp.ndim(x) != 1:
        raise _error(cls, "x", x, f"must be a 1-D array, got shape {jnp.shape(x)}")
    if jnp.ndim(y) != 1:
        raise _error(cls, "y", y, f"must be a 1-D array, got shape {jnp.shape(y)}")
    if jnp.shape(x)[0] != jnp.shape(y)[0]:
        raise _error(cls, "y", y, f"has {jnp.shape(y)[0]} values but 'x' has {jnp.shape(x)[0]}")
    if jnp.shape(x)[0] < min_points:
        raise _error(cls, "x", x, f"needs at least {min_points} points, got {jnp.shape(x)[0]}")
    for prop, a in (("x", x), ("y", y)):
        v = _concrete(a)
        if v is not None and not np.all(np.isfinite(v)):
            raise _error(cls, prop, a, "must be finite")
    xv = _concrete(x)
    if xv is not None and np.any(np.diff(xv) <= 0):
        raise _error(cls, "x", x, "must be strictly increasing")


def _falling(j: int, r: int) -> int:
    """j! / (j - r)!, the factor a power t**j picks up in its r-th derivative."""
    out = 1
    for i in range(r):
        out *= j - i
    return out


def _horner(c: Array, dx: Array, order: int) -> Array:
    """The ``order``-th derivative of ``sum_j c[j] dx**j`` (``c`` on the last axis)."""
    w = c.shape[-1]
    if order >= w:
        return jnp.zeros_like(dx * c[..., 0])
    acc = c[..., w - 1] * _falling(w - 1, order)
    for j in range(w - 2, order - 1, -1):
        f = _falling(j, order)
        acc = acc * dx + (c[..., j] if f == 1 else c[..., j] * f)
    return acc


def _pad_last(a: Array, width: int) -> Array:
    """Zero-pad the last axis to ``width`` (numpy stays numpy)."""
    extra = width - a.shape[-1]
    if extra <= 0:
        return a
    pad = [(0, 0)] * (a.ndim - 1) + [(0, extra)]
    return np.pad(a, pad) if isinstance(a, np.ndarray) else jnp.pad(a, pad)


def _global_poly_pp(low_to_high: Array) -> PiecewisePolynomial:
    """A polynomial in ``x`` itself as a PP: both breaks at 0, so every region
    evaluates the same coefficients in ``x - 0``."""
    c = jnp.asarray(low_to_high)
    width = max(6, c.shape[-1])
    c = _pad_last(c, width)
    zero = jnp.zeros((2,), c.dtype)
    return PiecewisePolynomial(zero, c[None, :], c, c, search=SEARCH_RIGHT)


# -- the piecewise polynomial ----------------------------------------------------------


def _bisect(b: Array, n: Array, x: Array) -> Array:
    """OpenSim's interval bisection over the first ``n`` breaks, for ``b[0] <= x <= b[n-1]``.

    OpenSim (SimmSpline, PiecewiseLinearFunction, PiecewiseConstantFunction) halves
    ``[i, j)`` until ``b[k] <= x <= b[k+1]``; at an exact interior knot that stops on
    whichever side the halving reaches first, which decides the value of a
    discontinuous derivative (or of a piecewise constant) there. A fixed number of
    masked steps reproduces it: the bracket at least halves each step, so
    ``ceil(log2(size)) + 1`` steps always reach the stop.
    """
    size = b.shape[0]
    steps = max(1, math.ceil(math.log2(size))) + 1
    i = jnp.zeros((), jnp.int32)
    j = jnp.asarray(n, jnp.int32)
    k = (i + j) // 2
    done = jnp.zeros((), bool)
    for _ in range(steps):
        k = jnp.where(done, k, (i + j) // 2)
        below = x < b[k]
        above = x > b[jnp.minimum(k + 1, size - 1)]
        j = jnp.where(~done & below, k, j)
        i = jnp.where(~done & ~below & above, k, i)
        done = done | (~below & ~above)
    return k


#: up to this many knots, a piece is found by comparing with every knot
_COMPARE_ALL_KNOTS = 64


def _pp_eval(breaks, coefs, left, right, n, search, x, order):
    """Scalar evaluation of one (unbatched) piecewise polynomial."""
    breaks, coefs, left, right = (jnp.asarray(a) for a in (breaks, coefs, left, right))
    n, search = jnp.asarray(n), jnp.asarray(search)
    b0 = breaks[0]
    bn = breaks[n - 1]
    closed = search == SEARCH_BISECT_CLOSED
    in_left = jnp.where(closed, x <= b0 + ROUNDOFF_ERROR, x < b0)
    in_right = jnp.where(closed, x >= bn - ROUNDOFF_ERROR, jnp.where(search == SEARCH_RIGHT, x >= bn, x > bn))
    # a comparison with every knot is the fastest search for a few knots (muscle curves,
    # splines of a few dozen); a binary search for long data (ground reactions: 1000s)
    method = "compare_all" if breaks.shape[-1] <= _COMPARE_ALL_KNOTS else "scan"
    k_sorted = jnp.searchsorted(breaks, x, side="right", method=method).astype(jnp.int32) - 1
    # OpenSim's bisection lands in the interval holding x, as k_sorted does, except on
    # an exact knot, where its halving decides the side: found once per knot (a
    # function of the breaks alone, which a simulation computes once, outside its loop)
    k_on_knot = jax.vmap(lambda b: _bisect(breaks, n, b))(breaks)
    on_knot = breaks[jnp.maximum(k_sorted, 0)] == x
    k_bisect = jnp.where(on_knot, k_on_knot[jnp.maximum(k_sorted, 0)], k_sorted)
    k = jnp.where(search == SEARCH_RIGHT, k_sorted, k_bisect)
    # SEARCH_BISECT: OpenSim returns the end-knot values for arguments within
    # ROUNDOFF_ERROR of an end knot. Evaluate at that knot, but keep the tangent of
    # x - knot (t - stop_gradient(t) is 0 with derivative 1), so that autodiff
    # still sees the polynomial there.
    snap = search == SEARCH_BISECT
    at_lo = snap & (x - b0 <= ROUNDOFF_ERROR)
    at_hi = snap & ~at_lo & (bn - x <= ROUNDOFF_ERROR)
    k = jnp.clip(jnp.where(at_lo, 0, jnp.where(at_hi, n - 2, k)), 0, n - 2)
    knot = jnp.where(at_lo, b0, bn)
    tangent = (x - knot) - jax.lax.stop_gradient(x - knot)
    dx = jnp.where(at_lo | at_hi, (knot - breaks[k]) + tangent, x - breaks[k])
    # pick the piece first, then evaluate once
    c = jnp.where(in_left, left, jnp.where(in_right, right, coefs[k]))
    dx = jnp.where(in_left, x - b0, jnp.where(in_right, x - bn, dx))
    return _horner(c, dx, order)


class PiecewisePolynomial(eqx.Module):
    """A piecewise polynomial in the local power basis, with polynomial extrapolation.

    On interval ``k`` (``breaks[k] <= x <= breaks[k+1]``) the value is
    ``sum_j coefs[k, j] * (x - breaks[k])**j``; left of ``breaks[0]`` it is
    ``sum_j left[j] * (x - breaks[0])**j`` and right of the last break
    ``sum_j right[j] * (x - breaks[-1])**j``. Every PP-representable OpenSim function
    maps onto this exactly (``Function.to_pp``). Which region an argument exactly on
    (or within OpenSim's 2e-13 of) a knot belongs to follows OpenSim, per ``search``
    (``SEARCH_BISECT``, ``SEARCH_BISECT_CLOSED`` or ``SEARCH_RIGHT``).

    A PP may carry leading batch axes (see ``stack_pp``); evaluate a batched one
    under ``jax.vmap``. The integer leaves (``num_breaks``, ``search``) mean that
    gradients with respect to a PP itself are taken with ``eqx.filter_grad``.

    **Arguments:**

    - ``breaks``: ``(K+1,)`` non-decreasing break points.
    - ``coefs``: ``(K, W)`` coefficients, lowest power first (``W = 6`` for degree 5).
    - ``left``, ``right``: ``(W,)`` (or shorter, zero-padded) extrapolation
      polynomials about ``breaks[0]`` and the last break.
    - ``num_breaks``: how many leading breaks are real (the rest is padding, equal to
      the last real break); default all.
    - ``search``: the knot convention (default ``SEARCH_RIGHT``).
    """

    breaks: Array
    coefs: Array
    left: Array
    right: Array
    num_breaks: Array
    search: Array

    def __init__(self, breaks, coefs, left, right, num_breaks=None, search=SEARCH_RIGHT):
        breaks, coefs = _as_float(breaks), _as_float(coefs)
        left, right = _as_float(left), _as_float(right)
        if coefs.ndim < 2 or breaks.shape[:-1] != coefs.shape[:-2]:
            raise ValueError(
                f"PiecewisePolynomial: 'coefs' must have shape (..., K, W) matching 'breaks' (..., K+1); "
                f"got {coefs.shape} and {breaks.shape}"
            )
        if breaks.shape[-1] != coefs.shape[-2] + 1 or coefs.shape[-2] < 1:
            raise ValueError(
                f"PiecewisePolynomial: 'breaks' must have one more entry than 'coefs' has rows "
                f"(and at least 2); got {breaks.shape[-1]} and {coefs.shape[-2]}"
            )
        width = max(coefs.shape[-1], left.shape[-1], right.shape[-1])
        coefs, left, right = (_pad_last(a, width) for a in (coefs, left, right))
        batch = breaks.shape[:-1]
        if left.shape != batch + (width,) or right.shape != batch + (width,):
            raise ValueError(
                f"PiecewisePolynomial: 'left' and 'right' must have shape {batch + (width,)}, "
                f"got {left.shape} and {right.shape}"
            )
        if num_breaks is None:
            num_breaks = np.full(batch, breaks.shape[-1], np.int32)
        num_breaks = _as_int(num_breaks)
        search = _as_int(search)
        if jnp.shape(search) != batch:
            xp = jnp if isinstance(search, jax.Array) else np
            search = xp.array(xp.broadcast_to(search, batch))
        bv, nv = _concrete(breaks), _concrete(num_breaks)
        if bv is not None and np.any(np.diff(bv, axis=-1) < 0):
            raise ValueError(f"PiecewisePolynomial: 'breaks' must be non-decreasing, got {bv.tolist()}")
        if nv is not None and (np.any(nv < 2) or np.any(nv > breaks.shape[-1])):
            raise ValueError(
                f"PiecewisePolynomial: 'num_breaks' must lie in [2, {breaks.shape[-1]}], got {nv.tolist()}"
            )
        self.breaks = breaks
        self.coefs = coefs
        self.left = left
        self.right = right
        self.num_breaks = num_breaks
        self.search = search

    def __call__(self, x: Array) -> Array:
        """The value at ``x``.

        **Arguments:** ``x``: a scalar or array (elementwise).

        **Returns:** an array of ``x``'s shape.
        """
        return self.derivative(x, 0)

    def derivative(self, x: Array, order: int = 1) -> Array:
        """The ``order``-th derivative at ``x`` (analytic, from the coefficients).

        **Arguments:** ``x``: a scalar or array (elementwise); ``order``: a
        non-negative int (0 gives the value).

        **Returns:** an array of ``x``'s shape.
        """
        order = _check_order(order)
        if self.breaks.ndim != 1:
            raise ValueError("PiecewisePolynomial: this PP is batched (see stack_pp); evaluate it under jax.vmap")
        return _pp_apply(self, jnp.asarray(x), order)


# Jitted so that eager calls compile once per shape instead of dispatching every
# primitive; inside an outer jit / vmap / grad they are simply inlined.
@functools.partial(jax.jit, static_argnums=2)
def _pp_apply(pp: PiecewisePolynomial, x: Array, order: int) -> Array:
    def one(xs):
        return _pp_eval(pp.breaks, pp.coefs, pp.left, pp.right, pp.num_breaks, pp.search, xs, order)

    return jnp.vectorize(one)(x)


def stack_pp(pps) -> PiecewisePolynomial:
    """Stack piecewise polynomials along a new leading axis, padding to common sizes.

    Intervals are padded by repeating the last break (and zero coefficients), which
    the evaluation never selects, and polynomial widths by zero coefficients, so
    ``jax.vmap(lambda pp, x: pp(x))(stack_pp(pps), xs)`` equals evaluating each PP on
    its own row of ``xs``.

    **Arguments:** ``pps``: a non-empty sequence of unbatched ``PiecewisePolynomial``
    (or of ``Function`` objects with an exact ``to_pp``).

    **Returns:** a ``PiecewisePolynomial`` with a leading axis of length ``len(pps)``.
    """
    pps = [p.to_pp() if isinstance(p, Function) else p for p in pps]
    if not pps:
        raise ValueError("stack_pp: need at least one PiecewisePolynomial")
    for p in pps:
        if not isinstance(p, PiecewisePolynomial) or p.breaks.ndim != 1:
            raise ValueError(f"stack_pp: expected unbatched PiecewisePolynomials, got {type(p).__name__}")
    nb = max(p.breaks.shape[0] for p in pps)
    width = max(p.coefs.shape[1] for p in pps)
    use_np = all(isinstance(a, np.ndarray) for p in pps for a in (p.breaks, p.coefs, p.left, p.right))
    xp = np if use_np else jnp
    breaks, coefs, lefts, rights = [], [], [], []
    for p in pps:
        extra = nb - p.breaks.shape[0]
        breaks.append(xp.concatenate([p.breaks, xp.repeat(p.breaks[-1:], extra)]))
        coefs.append(xp.pad(p.coefs, [(0, extra), (0, width - p.coefs.shape[1])]))
        lefts.append(_pad_last(p.left, width))
        rights.append(_pad_last(p.right, width))
    dtype = xp.result_type(*breaks, *coefs, *lefts, *rights)
    stack = lambda arrs: xp.stack([xp.asarray(a, dtype) for a in arrs])  # noqa: E731
    return PiecewisePolynomial(
        stack(breaks),
        stack(coefs),
        stack(lefts),
        stack(rights),
        num_breaks=xp.stack([xp.asarray(p.num_breaks, xp.int32) for p in pps]),
        search=xp.stack([xp.asarray(p.search, xp.int32) for p in pps]),
    )


# -- the function family ---------------------------------------------------------------


class Function(eqx.Module):
    """Base of OpenSim's scalar functions of one variable (``OpenSim::Function``).

    Subclasses hold their OpenSim properties as fields. ``__call__`` and
    ``derivative`` are elementwise in ``x`` and differentiable in ``x`` and in every
    numeric field.

    **Fields:** ``name``: the optional OpenSim object name (static, keyword-only).
    """

    name: str = eqx.field(default="", static=True, kw_only=True)

    def __call__(self, x: Array) -> Array:
        """The value ``f(x)``.

        **Arguments:** ``x``: a scalar or array (elementwise).

        **Returns:** an array of ``x``'s shape.
        """
        return self.to_pp()(x)

    def derivative(self, x: Array, order: int = 1) -> Array:
        """The ``order``-th derivative ``d^order f / dx^order`` (analytic, as OpenSim's).

        **Arguments:** ``x``: a scalar or array (elementwise); ``order``: a
        non-negative int (0 gives the value).

        **Returns:** an array of ``x``'s shape.
        """
        return self.to_pp().derivative(x, _check_order(order))

    @abc.abstractmethod
    def to_pp(self) -> PiecewisePolynomial:
        """The exact ``PiecewisePolynomial`` form of this function.

        **Returns:** a ``PiecewisePolynomial`` that evaluates as this function does,
        with OpenSim's conventions at knots and outside the knot range.

        **Raises:** ``NotImplementedError`` when no exact form exists (``Sine``).
        """


class Constant(Function):
    """``OpenSim::Constant``: ``f(x) = value``; every derivative is 0.

    **Arguments:** ``value``: the constant (OpenSim default 0).
    """

    value: Array = eqx.field(default=0.0, converter=_as_float)

    def __check_init__(self):
        if jnp.ndim(self.value) != 0:
            raise _error("Constant", "value", self.value, "must be a scalar")

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: one global degree-0 piece."""
        return _global_poly_pp(jnp.reshape(self.value, (1,)))


class LinearFunction(Function):
    """``OpenSim::LinearFunction``: ``f(x) = slope * x + intercept``.

    **Arguments:** ``coefficients``: ``[slope, intercept]``, in OpenSim's order
    (default ``[1, 0]``).
    """

    coefficients: Array = eqx.field(default=(1.0, 0.0), converter=_as_float)

    def __check_init__(self):
        if jnp.shape(self.coefficients) != (2,):
            raise _error("LinearFunction", "coefficients", self.coefficients, "must be [slope, intercept]")

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: one global degree-1 piece."""
        c = jnp.asarray(self.coefficients)
        return _global_poly_pp(c[::-1])


class PolynomialFunction(Function):
    """``OpenSim::PolynomialFunction`` (SimTK ``Function::Polynomial``).

    ``f(x) = c[0] x^(n-1) + c[1] x^(n-2) + ... + c[n-1]``: highest power first.

    **Arguments:** ``coefficients``: the ``n >= 1`` coefficients (default ``[1]``).
    """

    coefficients: Array = eqx.field(default=(1.0,), converter=_as_float)

    def __check_init__(self):
        if jnp.ndim(self.coefficients) != 1 or jnp.shape(self.coefficients)[0] < 1:
            raise _error("PolynomialFunction", "coefficients", self.coefficients, "must be a non-empty 1-D array")

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: one global piece with these
        coefficients."""
        c = jnp.asarray(self.coefficients)
        return _global_poly_pp(c[::-1])


class PiecewiseLinearFunction(Function):
    """``OpenSim::PiecewiseLinearFunction``: linear interpolation of ``(x, y)``.

    Outside ``[x[0], x[-1]]`` it continues the first / last segment linearly. The
    slope at an exact interior knot is that of the segment OpenSim's bisection
    lands on; second and higher derivatives are 0.

    **Arguments:** ``x``: strictly increasing sites (at least 2); ``y``: values.
    """

    x: Array = eqx.field(converter=_as_float)
    y: Array = eqx.field(converter=_as_float)

    def __check_init__(self):
        _check_knots("PiecewiseLinearFunction", self.x, self.y, 2)

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: one linear piece per interval, extended
        linearly past the ends."""
        x, y = jnp.asarray(self.x), jnp.asarray(self.y)
        slope = (y[1:] - y[:-1]) / jnp.maximum(TINY_NUMBER, x[1:] - x[:-1])
        coefs = jnp.stack([y[:-1], slope], axis=1)
        left = jnp.stack([y[0], slope[0]])
        right = jnp.stack([y[-1], slope[-1]])
        return PiecewisePolynomial(x, _pad_last(coefs, 6), left, right, search=SEARCH_BISECT)


class PiecewiseConstantFunction(Function):
    """``OpenSim::PiecewiseConstantFunction``: ``y[k]`` between ``x[k]`` and ``x[k+1]``.

    ``y[0]`` at and left of ``x[0]``, ``y[-1]`` at and right of ``x[-1]`` (each end
    within OpenSim's 2e-13); at an exact interior knot the value is that of the
    interval OpenSim's bisection lands on. Every derivative is 0.

    **Arguments:** ``x``: strictly increasing sites (at least 1); ``y``: values.
    """

    x: Array = eqx.field(converter=_as_float)
    y: Array = eqx.field(converter=_as_float)

    def __check_init__(self):
        _check_knots("PiecewiseConstantFunction", self.x, self.y, 1)

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: one constant piece per interval (the
        value at its left knot), constant past the ends."""
        x, y = jnp.asarray(self.x), jnp.asarray(self.y)
        if x.shape[0] == 1:  # one point: a constant, bracketed by a zero-width interval
            x, y = jnp.concatenate([x, x]), jnp.concatenate([y, y])
        coefs = _pad_last(y[:-1, None], 6)
        return PiecewisePolynomial(x, coefs, y[:1], y[-1:], search=SEARCH_BISECT_CLOSED)


def _simm_coefficients(x: Array, y: Array) -> tuple[Array, Array, Array]:
    """Per-knot cubic coefficients ``(b, c, d)`` of OpenSim's SimmSpline.

    The interpolating cubic (Forsythe, Malcolm & Moler's ``spline``) whose end
    conditions match the third derivative to that of the cubic through the first /
    last four points; with three points they make it the parabola through them, with
    two the result is a line. The same elimination order as OpenSim, in
    ``jax.numpy``; ``c`` is half the second derivative, ``d`` a sixth of the third.
    """
    n = x.shape[0]
    d = jnp.maximum(TINY_NUMBER, x[1:] - x[:-1])
    slope = (y[1:] - y[:-1]) / d
    if n == 2:
        b = jnp.stack([slope[0], slope[0]])
        return b, jnp.zeros_like(b), jnp.zeros_like(b)
    diag = jnp.concatenate([-d[:1], 2.0 * (d[:-1] + d[1:]), -d[-1:]])
    mid = slope[1:] - slope[:-1]
    if n > 3:
        gap = lambda i, j: jnp.maximum(TINY_NUMBER, x[i] - x[j])  # noqa: E731
        c0 = (mid[1] / gap(3, 1) - mid[0] / gap(2, 0)) * d[0] * d[0] / gap(3, 0)
        cn = -(mid[-1] / gap(n - 1, n - 3) - mid[-2] / gap(n - 2, n - 4)) * d[-1] * d[-1] / gap(n - 1, n - 4)
    else:
        c0 = cn = jnp.zeros_like(mid[0])
    rhs = jnp.concatenate([c0[None], mid, cn[None]])

    def forward(carry, row):
        b_prev, c_prev = carry
        d_prev, b_i, c_i = row
        t = d_prev / b_prev
        new = (b_i - t * d_prev, c_i - t * c_prev)
        return new, new

    _, (b_fw, c_fw) = _knot_scan(forward, (diag[0], rhs[0]), (d, diag[1:], rhs[1:]))
    b_el = jnp.concatenate([diag[:1], b_fw])
    c_el = jnp.concatenate([rhs[:1], c_fw])
    c_last = c_el[-1] / b_el[-1]

    def backward(c_next, row):
        c_i, d_i, b_i = row
        c_new = (c_i - d_i * c_next) / b_i
        return c_new, c_new

    _, c_bs = _knot_scan(backward, c_last, (c_el[:-1], d, b_el[:-1]), reverse=True)
    sig = jnp.concatenate([c_bs, c_last[None]])
    b = jnp.concatenate([slope - d * (sig[1:] + 2.0 * sig[:-1]), (slope[-1] + d[-1] * (sig[-2] + 2.0 * sig[-1]))[None]])
    dd = (sig[1:] - sig[:-1]) / d
    return b, 3.0 * sig, jnp.concatenate([dd, dd[-1:]])


def _knot_scan(f, init, xs, reverse=False):
    """``lax.scan`` over a spline's knots, unrolled off the CPU (``unrolled_off_cpu``: as
    a loop, gait10dof18musc's 12 splines, fitted inside a jitted right-hand side, cost a
    GPU 20 ms a call in 340 iterations)."""
    scan = lambda unroll, init, xs: jax.lax.scan(f, init, xs, reverse=reverse, unroll=unroll)  # noqa: E731
    return unrolled_off_cpu(scan, init, xs)


@jax.jit
def _simm_pp(x: Array, y: Array) -> PiecewisePolynomial:
    x, y = jnp.asarray(x), jnp.asarray(y)
    b, c, d = _simm_coefficients(x, y)
    coefs = jnp.stack([y[:-1], b[:-1], c[:-1], d[:-1]], axis=1)
    left = jnp.stack([y[0], b[0]])
    right = jnp.stack([y[-1], b[-1]])
    return PiecewisePolynomial(x, _pad_last(coefs, 6), left, right, search=SEARCH_BISECT)


class SimmSpline(Function):
    """``OpenSim::SimmSpline``: the interpolating cubic spline of SIMM.

    Not a natural spline: the end conditions fit the third derivative to the cubic
    through the four points nearest each end (three points: the parabola through
    them; two points: a line). Outside ``[x[0], x[-1]]`` it extrapolates linearly
    with the end slope (second derivative 0 there). OpenSim offers derivatives of
    order 1 and 2; higher orders here are those of the cubic pieces.

    **Arguments:** ``x``: strictly increasing sites (at least 2); ``y``: values.
    """

    x: Array = eqx.field(converter=_as_float)
    y: Array = eqx.field(converter=_as_float)

    def __check_init__(self):
        _check_knots(type(self).__name__, self.x, self.y, 2)

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: OpenSim's SimmSpline cubics, one per
        interval."""
        return _simm_pp(self.x, self.y)


class NaturalCubicSpline(SimmSpline):
    """OpenSim's old name for ``SimmSpline``, which OpenSim 4.6 still reads.

    OpenSim renamed the class because it is *not* a natural cubic spline, and maps
    ``<NaturalCubicSpline>`` in files onto ``SimmSpline``; this class therefore
    computes exactly ``SimmSpline``.

    **Arguments:** ``x``: strictly increasing sites (at least 2); ``y``: values.
    """


def _bspline_pieces(t: Array, k: int, starts: np.ndarray) -> Array:
    """The ``k + 1`` B-splines of degree ``k`` (knots ``t``) that are nonzero on each
    interval ``[t[l], t[l+1]]``, ``l`` in ``starts``, as polynomials in
    ``s = (x - t[l]) / (t[l+1] - t[l])``.

    The Cox-de Boor recurrence carried out on coefficient vectors (multiplying by a
    linear factor in ``s`` is a scale plus a shift), for all intervals at once.
    ``starts`` is static, so every knot lookup is plain indexing.

    **Returns:** ``(len(starts), k + 1, k + 1)``: interval, B-spline, power of ``s``.
    """
    count = starts.shape[0]
    t_l = t[starts][:, None, None]
    h = (t[starts + 1] - t[starts])[:, None, None]
    basis = jnp.zeros((count, 1, k + 1), t.dtype).at[:, 0, 0].set(1.0)
    for j in range(1, k + 1):
        q = np.arange(1, j + 1)
        right = t[starts[:, None] + q][..., None]
        left = t[starts[:, None] + q - j][..., None]
        w = basis / (right - left)
        w_s = jnp.concatenate([jnp.zeros_like(w[..., :1]), w[..., :-1]], axis=-1) * h  # w * (h s)
        falling = (right - t_l) * w - w_s  # w * (right - x)
        rising = (t_l - left) * w + w_s  # w * (x - left)
        pad = jnp.zeros_like(w[:, :1])
        basis = jnp.concatenate([falling, pad], axis=1) + jnp.concatenate([pad, rising], axis=1)
    return basis


#: Banded systems of at most this many rows are unrolled off the CPU (``_knot_scan``);
#: larger ones (GCVSplines through data: thousands of rows) stay loops everywhere,
#: which keeps their programs small.
_UNROLLED_BAND_ROWS = 64


def _banded_solve(band: Array, rhs: Array) -> Array:
    """Solve ``A c = rhs`` for a banded ``A`` by Gaussian elimination without pivoting.

    Forward elimination is a scan over the rows that carries the last ``w`` rows of
    ``U`` (and their right-hand sides); back substitution is a reverse scan carrying
    the last ``w`` unknowns. O(rows * w**2), differentiable and batchable like any scan.
    Without pivoting it needs nonzero leading minors and is stable for diagonally
    dominant or totally positive matrices, such as B-spline collocation (de Boor).

    **Arguments:** ``band (rows, 2w + 1)``: ``band[p, j] = A[p, p - w + j]``, zero where
    that column is outside ``A``; ``rhs (rows,)``.

    **Returns:** ``c (rows,)``.
    """
    rows, w = band.shape[0], band.shape[1] // 2
    scan = _knot_scan if rows <= _UNROLLED_BAND_ROWS else jax.lax.scan

    def eliminate(carry, row):
        u, g = carry  # U's last w rows (diagonal first) and their right-hand sides
        a, b = row
        for s in range(w):  # a[s] is column p - w + s, the diagonal of carried row s
            f = a[s] / u[s, 0]
            a = a - f * jnp.pad(u[s], (s, w - s))
            b = b - f * g[s]
        u_p = a[w:]
        return (jnp.concatenate([u, u_p[None]])[1:], jnp.concatenate([g, b[None]])[1:]), (u_p, b)

    # rows "above" the first are the identity, so columns left of A eliminate nothing
    init = (jnp.zeros((w, w + 1), band.dtype).at[:, 0].set(1.0), jnp.zeros((w,), rhs.dtype))
    _, (u, g) = scan(eliminate, init, (band, rhs))

    def substitute(after, row):  # after: the next w unknowns
        u_p, g_p = row
        c_p = (g_p - u_p[1:] @ after) / u_p[0]
        return jnp.concatenate([c_p[None], after])[:w], c_p

    _, c = scan(substitute, jnp.zeros((w,), rhs.dtype), (u, g), reverse=True)
    return c


@functools.partial(jax.jit, static_argnums=2)
def _natural_spline_pp(x: Array, y: Array, m: int) -> PiecewisePolynomial:
    """The interpolating natural spline of degree ``k = 2m - 1`` through ``(x, y)``.

    Solved in the B-spline basis on the data sites (end knots of multiplicity
    ``k + 1``): ``n`` interpolation rows plus derivatives ``m..2m-2`` vanishing at
    both ends, a banded system solved in O(n) (``_banded_solve``). The pieces are the
    B-spline combinations on each interval; the extrapolation is the degree ``m - 1``
    Taylor polynomial at each end knot.
    """
    dtype = jnp.result_type(x, y, float)
    x, y = jnp.asarray(x, dtype), jnp.asarray(y, dtype)
    n, k, w = x.shape[0], 2 * m - 1, m - 1
    size = n + k - 1
    t = jnp.concatenate([jnp.repeat(x[:1], k), x, jnp.repeat(x[-1:], k)])
    starts = np.arange(k, k + n - 1)  # the knot interval that x[i] starts, i < n - 1
    pieces = _bspline_pieces(t, k, starts)  # (n - 1, k + 1, k + 1)
    cols = starts[:, None] - k + np.arange(k + 1)  # the B-splines alive on each interval
    # derivative of order r at s = 1, times h**r: sum_p falling(p, r) * coef_p
    at_one = np.array([[_falling(p, r) for r in range(k + 1)] for p in range(k + 1)], dtype=float)
    last_end = pieces[-1] @ at_one  # (k + 1 splines, order)

    # Rows ordered so that B-spline p is row p's diagonal, w columns either side:
    # x[0] (where only B-spline 0 is nonzero), the left end's derivatives m..2m-2
    # (order w + p touches B-splines 0..w + p), x[i] for 0 < i < n - 1 (B-splines
    # i..i+k-1, centred on i + w), the right end's derivatives 2m-2..m, then x[-1]
    # (only the last B-spline). The end rows break collocation's total positivity,
    # yet elimination without pivoting measures as accurate as a dense pivoted LU
    # against a 60-digit solve (both lose digits alike where spacings jump 1000x
    # between neighbours for m >= 3: the system's condition number reaches 1e7-1e14).
    band = jnp.zeros((size, k), dtype)
    band = band.at[0, w].set(pieces[0, 0, 0])
    band = band.at[w + 1 : w + n - 1].set(pieces[1:, :k, 0])
    band = band.at[size - 1, w].set(last_end[k, 0])
    for p in range(1, m):  # natural end conditions, scaled by the end spacing**r
        r = w + p
        band = band.at[p, w - p :].set(pieces[0, : r + 1, r] * math.factorial(r))
        band = band.at[size - 1 - p, : r + 1].set(last_end[k - r :, r])
    rhs = jnp.zeros((size,), dtype).at[np.r_[0, w + 1 : w + n - 1, size - 1]].set(y)
    ctrl = _banded_solve(band, rhs)

    local = jnp.einsum("ij,ijp->ip", ctrl[cols], pieces)  # in powers of s
    hx = x[1:] - x[:-1]
    coefs = local / hx[:, None] ** np.arange(k + 1)
    facts = np.array([math.factorial(r) for r in range(m)], dtype=float)
    right = (local[-1] @ at_one[:, :m]) / (facts * hx[-1] ** np.arange(m))
    width = max(6, k + 1)
    left = coefs[0, :m]  # the Taylor polynomial of degree m - 1 at x[0]
    return PiecewisePolynomial(
        x, _pad_last(coefs, width), _pad_last(left, width), _pad_last(right, width), search=SEARCH_RIGHT
    )


class GCVSpline(Function):
    """``OpenSim::GCVSpline`` with ``error_variance = 0`` (OpenSim's default).

    OpenSim fits Woltring's GCVSPL natural spline of degree ``2 * half_order - 1``
    with smoothing chosen for zero error variance, which drives the smoothing
    parameter down to GCVSPL's floor but not to zero: OpenSim's curve is the
    interpolating natural spline up to a residual of about 1e-13 (cubic) to 1e-10
    (heptic), relative. This class computes that interpolant itself, to rounding
    (a well-conditioned B-spline solve), so it agrees with OpenSim to within
    OpenSim's own residual and passes exactly through the data. Outside
    the knots it is the degree ``half_order - 1`` polynomial continuing the end
    (constant, linear, quadratic, cubic for half_order 1..4); the last knot belongs
    to that extrapolation and interior knots to the interval on their right, as in
    GCVSPL's ``splder``.

    **Arguments:**

    - ``half_order``: 1..4 (linear, cubic, quintic, heptic); static.
    - ``x``: strictly increasing sites, at least ``2 * half_order``.
    - ``y``: values.
    - ``error_variance``: must be 0 (smoothing fits are not supported); static.
    - ``weights``: kept for round-tripping files only: OpenSim 4.6 ignores it when
      fitting, and so does this class.
    """

    half_order: int = eqx.field(static=True)
    x: Array = eqx.field(converter=_as_float)
    y: Array = eqx.field(converter=_as_float)
    error_variance: float = eqx.field(default=0.0, static=True)
    weights: Array | None = eqx.field(default=None, converter=_as_float)

    def __check_init__(self):
        if not isinstance(self.half_order, (int, np.integer)) or not 1 <= self.half_order <= 4:
            raise _error("GCVSpline", "half_order", self.half_order, "must be an int in 1..4")
        _check_knots("GCVSpline", self.x, self.y, 2 * int(self.half_order))
        if self.error_variance != 0:
            raise NotImplementedError(
                f"GCVSpline: property 'error_variance' = {self.error_variance!r}: only 0 "
                "(interpolation, OpenSim's default) is supported; smoothing fits are not"
            )

    @classmethod
    def from_degree(cls, degree: int, x: Array, y: Array, **kwargs) -> GCVSpline:
        """Construct from a spline degree, as OpenSim's ``GCVSpline(degree, n, x, y)``.

        **Arguments:** ``degree``: odd degree (OpenSim maps it to
        ``half_order = (degree + 1) // 2``, clamped to 1..4); ``x``, ``y``: the
        data; ``kwargs``: further fields (``name``, ...).

        **Returns:** a ``GCVSpline``.
        """
        half = min(max((int(degree) + 1) // 2, 1), 4)
        return cls(half, x, y, **kwargs)

    def to_pp(self) -> PiecewisePolynomial:
        """This function as a ``PiecewisePolynomial``: the natural spline of order
        ``2 * half_order - 1`` through the knots, one piece per interval."""
        return _natural_spline_pp(self.x, self.y, int(self.half_order))


class MultiplierFunction(Function):
    """``OpenSim::MultiplierFunction``: ``f(x) = scale * function(x)``.

    **Arguments:** ``function``: the wrapped ``Function``; ``scale``: the factor
    (default 1).
    """

    function: Function
    scale: Array = eqx.field(default=1.0, converter=_as_float)

    def __check_init__(self):
        if not isinstance(self.function, Function):
            raise _error("MultiplierFunction", "function", self.function, "must be a Function")
        if jnp.ndim(self.scale) != 0:
            raise _error("MultiplierFunction", "scale", self.scale, "must be a scalar")

    def __call__(self, x: Array) -> Array:
        """``scale * function(x)``, multiplied after evaluation as OpenSim does."""
        return self.function(x) * self.scale

    def derivative(self, x: Array, order: int = 1) -> Array:
        """``scale`` times the wrapped function's derivative."""
        return self.function.derivative(x, _check_order(order)) * self.scale

    def to_pp(self) -> PiecewisePolynomial:
        """The wrapped function's PP with ``scale`` folded into its coefficients
        (``NotImplementedError`` if the wrapped function has none)."""
        pp = self.function.to_pp()
        s = jnp.asarray(self.scale)
        return PiecewisePolynomial(
            pp.breaks, pp.coefs * s, pp.left * s, pp.right * s, num_breaks=pp.num_breaks, search=pp.search
        )


def _step_up(u, order):
    """Derivatives of SimTK's quintic ``stepUp`` (10u^3 - 15u^4 + 6u^5) on [0, 1]."""
    if order == 0:
        return u * u * u * (10 + u * (6 * u - 15))
    if order == 1:
        q = u * (u - 1)
        return 30 * q * q
    if order == 2:
        return 60 * u * (1 + u * (2 * u - 3))
    return 60 + 360 * u * (u - 1)


class StepFunction(Function):
    """``OpenSim::StepFunction`` (SimTK ``Function::Step``): a smooth quintic step.

    ``start_value`` for ``x`` at or before ``transition_start_time``, ``end_value``
    at or after ``transition_end_time``, in between ``y0 + (y1 - y0) * stepUp(u)``
    with ``u = (x - x0) / (x1 - x0)``: zero first and second derivatives at both
    ends. The times may be in either order but must differ.

    **Arguments:** ``transition_start_time`` (default 0.99),
    ``transition_end_time`` (1.01), ``start_value`` (0), ``end_value`` (1).
    """

    transition_start_time: Array = eqx.field(default=0.99, converter=_as_float)
    transition_end_time: Array = eqx.field(default=1.01, converter=_as_float)
    start_value: Array = eqx.field(default=0.0, converter=_as_float)
    end_value: Array = eqx.field(default=1.0, converter=_as_float)

    def __check_init__(self):
        for prop in ("transition_start_time", "transition_end_time", "start_value", "end_value"):
            if jnp.ndim(getattr(self, prop)) != 0:
                raise _error("StepFunction", prop, getattr(self, prop), "must be a scalar")
        t0, t1 = _concrete(self.transition_start_time), _concrete(self.transition_end_time)
        if t0 is not None and t1 is not None and t0 == t1:
            raise _error(
                "StepFunction",
                "transition_end_time",
                self.transition_end_time,
                "must differ from 'transition_start_time' (a zero-length transition)",
            )

    def __call__(self, x: Array) -> Array:
        """The step's value, by SimTK's formula."""
        return self.derivative(x, 0)

    def derivative(self, x: Array, order: int = 1) -> Array:
        """Orders 1-3 by SimTK's formulas (0 outside the transition and at its ends);
        higher orders (which SimTK refuses) from the quintic."""
        order = _check_order(order)
        if order > 3:
            return self.to_pp().derivative(x, order)
        x = jnp.asarray(x)
        x0, x1 = self.transition_start_time, self.transition_end_time
        y0, y1 = self.start_value, self.end_value
        ooxr = 1 / (x1 - x0)
        sign = jnp.sign(ooxr)
        u = jnp.clip((x - x0) * ooxr, 0.0, 1.0)
        yr = y1 - y0
        if order == 0:
            inner, before, after = y0 + yr * _step_up(u, 0), y0, y1
        else:
            inner = yr * ooxr**order * _step_up(u, order)
            before = after = jnp.zeros_like(inner)
        return jnp.where((x - x0) * sign <= 0, before, jnp.where((x - x1) * sign >= 0, after, inner))

    def to_pp(self) -> PiecewisePolynomial:
        """The quintic on the transition interval, constants outside (ends closed)."""
        x0, x1 = jnp.asarray(self.transition_start_time), jnp.asarray(self.transition_end_time)
        y0, y1 = jnp.asarray(self.start_value), jnp.asarray(self.end_value)
        up = x0 < x1
        # stepUp(1 - v) = 1 - stepUp(v): a falling step is a rising one over [x1, x0]
        a, b = jnp.where(up, x0, x1), jnp.where(up, x1, x0)
        ya, yb = jnp.where(up, y0, y1), jnp.where(up, y1, y0)
        h, yr = b - a, yb - ya
        zero = jnp.zeros_like(yr)
        coefs = jnp.stack([ya, zero, zero, 10 * yr / h**3, -15 * yr / h**4, 6 * yr / h**5])
        return PiecewisePolynomial(jnp.stack([a, b]), coefs[None], ya[None], yb[None], search=SEARCH_BISECT_CLOSED)


class Sine(Function):
    """``OpenSim::Sine``: ``amplitude * sin(omega * x + phase) + offset``.

    The ``n``-th derivative is OpenSim's ``amplitude * omega**n * sin(omega * x +
    phase + n * pi / 2)``. Not representable as a piecewise polynomial.

    **Arguments:** ``amplitude`` (default 1), ``omega`` (angular frequency, 1),
    ``phase`` (0), ``offset`` (0).
    """

    amplitude: Array = eqx.field(default=1.0, converter=_as_float)
    omega: Array = eqx.field(default=1.0, converter=_as_float)
    phase: Array = eqx.field(default=0.0, converter=_as_float)
    offset: Array = eqx.field(default=0.0, converter=_as_float)

    def __check_init__(self):
        for prop in ("amplitude", "omega", "phase", "offset"):
            if jnp.ndim(getattr(self, prop)) != 0:
                raise _error("Sine", prop, getattr(self, prop), "must be a scalar")

    def __call__(self, x: Array) -> Array:
        """``amplitude * sin(omega * x + phase) + offset``."""
        return self.amplitude * jnp.sin(self.omega * jnp.asarray(x) + self.phase) + self.offset

    def derivative(self, x: Array, order: int = 1) -> Array:
        """OpenSim's closed form, any order."""
        order = _check_order(order)
        if order == 0:
            return self(x)
        arg = self.omega * jnp.asarray(x) + self.phase + order * np.pi / 2
        return self.amplitude * self.omega**order * jnp.sin(arg)

    def to_pp(self) -> PiecewisePolynomial:
        """Always raises ``NotImplementedError``: a sine is not piecewise polynomial."""
        raise NotImplementedError("Sine has no exact piecewise-polynomial representation; evaluate it directly")
