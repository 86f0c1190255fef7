"""Vectorized scalar root finding for muscle models.

Muscle models solve one scalar equation per muscle (a damped fiber velocity, an
equilibrium fiber length, a normalized tendon force). ``bracketed_newton`` solves a
whole stack of them at once: Newton's method, safeguarded by bisection inside a
bracket, iterated (``lax.while_loop``) until every member has converged. Its
iterations carry no derivatives; ``simjax.muscles.muscle.newton_ift`` attaches the
implicit-function-theorem derivatives to the converged roots.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["bracketed_newton"]


def bracketed_newton(residual, x0, lo, hi, args=(), *, tol, max_iter: int = 60):
    """Roots of ``residual(x) = 0`` for a stack of independent scalar equations.

    **Arguments:**

    - ``residual(x, *args) -> (k,)``: elementwise in ``x (k,)``; increasing through
      the root (``residual(lo) <= 0 <= residual(hi)``). It must take every traced
      value it depends on through ``args`` (they are cut from differentiation, so the
      loop never needs a derivative).
    - ``x0 (k,)``: the starting guesses (clipped into the brackets).
    - ``lo``, ``hi`` ``(k,)``: brackets (``-inf``/``inf`` allowed: then plain Newton
      steps are taken until a sign change gives a finite bracket).
    - ``args``: a pytree of arguments of ``residual``.
    - ``tol``: absolute residual tolerance ``(k,)`` or scalar.
    - ``max_iter``: iteration cap.

    **Returns:** ``(x, residual(x), converged)`` ``(k,)`` each, without derivatives.
    """
    x0, lo, hi, args = jax.lax.stop_gradient((x0, lo, hi, args))
    tol = jax.lax.stop_gradient(jnp.broadcast_to(tol, x0.shape))

    def value_slope(x):
        return jax.jvp(lambda y: residual(y, *args), (x,), (jnp.ones_like(x),))

    x = jnp.clip(x0, lo, hi)
    r, dr = value_slope(x)

    def cond(carry):
        i, x, r, dr, lo, hi = carry
        return (i < max_iter) & jnp.any(~_done(r, lo, hi, x, tol))

    def body(carry):
        i, x, r, dr, lo, hi = carry
        done = _done(r, lo, hi, x, tol)
        lo = jnp.where(r <= 0, x, lo)
        hi = jnp.where(r >= 0, x, hi)
        ok = dr > 0
        step = x - r / jnp.where(ok, dr, 1.0)
        finite = jnp.isfinite(lo) & jnp.isfinite(hi)
        mid = jnp.where(
            finite,
            0.5 * (lo + hi),
            jnp.where(jnp.isfinite(lo), lo + 2.0 * jnp.abs(x - lo) + 1.0, hi - 2.0 * jnp.abs(hi - x) - 1.0),
        )
        inside = ok & (step > lo) & (step < hi)
        x_new = jnp.where(inside, step, mid)
        x_new = jnp.where(done, x, x_new)
        r_new, dr_new = value_slope(x_new)
        return i + 1, x_new, r_new, dr_new, lo, hi

    _, x, r, _, lo, hi = jax.lax.while_loop(cond, body, (0, x, r, dr, lo, hi))
    return x, r, _done(r, lo, hi, x, tol)


def _done(r, lo, hi, x, tol):
    width = hi - lo
    return (jnp.abs(r) <= tol) | (width <= 4.0 * jnp.finfo(x.dtype).eps * jnp.maximum(1.0, jnp.abs(x)))
