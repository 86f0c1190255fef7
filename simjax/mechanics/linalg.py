"""Small dense solves for constraint equations: ``A x = b`` with ``A`` symmetric positive
semidefinite (``G M^-1 G^T``, ``G G^T``), possibly singular when constraints are
redundant (a planar loop closed by a 6-equation weld).

The pseudo-inverse gives the minimum-norm solution whatever the rank, but an
eigendecomposition per call costs several times a Cholesky factorization. So
``psd_solve`` factors first and keeps the Cholesky solution when ``A`` is safely
positive definite, the usual case; only a (numerically) singular ``A`` takes the
pseudo-inverse, through ``lax.cond``, so one world pays for it only when it needs it
(under ``vmap`` both branches run and the right one is selected).

The factorizations are ``simjax.lapack``'s (safe to batch in threads).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..lapack import cho_solve, cholesky, pinv

__all__ = ["PINV_RTOL", "psd_solve", "min_norm_correction"]

#: relative eigenvalue cutoff of the pseudo-inverse (redundant constraints)
PINV_RTOL = 1e-10
#: smallest Cholesky pivot, relative to the largest diagonal entry, trusted as nonsingular
_PIVOT_RTOL = 1e-8


def psd_solve(A, b, rtol: float = PINV_RTOL):
    """``A^+ b`` for a symmetric positive semidefinite ``A``.

    **Arguments:** ``A (m, m)``; ``b (m,)`` or ``(m, k)``; ``rtol``: eigenvalues below
    ``rtol`` times the largest are treated as zero (pseudo-inverse branch).

    **Returns:** ``x`` shaped like ``b``: the Cholesky solution when every pivot of
    ``A``'s factorization exceeds 1e-8 of its largest diagonal entry (then ``A`` is
    invertible and the two agree to rounding), else the minimum-norm least-squares
    solution.
    """
    if A.shape[0] == 0:
        return b
    L = cholesky(A)
    pivots = jnp.diagonal(L) ** 2
    scale = jnp.max(jnp.abs(jnp.diagonal(A)))
    ok = jnp.all(jnp.isfinite(L)) & (jnp.min(pivots) > _PIVOT_RTOL * scale)

    def cholesky_solve(L, A, b):
        return cho_solve(jnp.where(ok, L, jnp.eye(A.shape[0], dtype=A.dtype)), b)

    def pinv_solve(L, A, b):
        return pinv(A, rtol) @ b

    return jax.lax.cond(ok, cholesky_solve, pinv_solve, L, A, b)


def min_norm_correction(G, err):
    """The minimum-norm ``dx`` with ``G dx = err`` (least squares if inconsistent).

    **Arguments:** ``G (m, n)``; ``err (m,)``. **Returns:** ``dx (n,)``.
    """
    return G.T @ psd_solve(G @ G.T, err)
