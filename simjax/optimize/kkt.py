"""Symmetric block-tridiagonal systems with a dense border: factorization, inertia, solves.

Direct collocation's KKT matrix, ordered stage by stage (each mesh point's variables
and the multipliers of its constraints), is block tridiagonal: a stage couples only to
its neighbours. Variables that every stage sees (a free final time, model parameters,
endpoint copies) and the constraints on them form a dense border::

    K = [ T    B ]     T: diagonal blocks D_k (b, b), k = 0..K-1, and below them
        [ B^T  G ]        L_k (b, b): rows of stage k, columns of stage k-1 (L_0 unused)
                       B: (K, b, nb); G: (nb, nb)

``factor`` computes a block LDL^T of ``T`` (the Schur complements ``S_k = D_k -
L_k S_{k-1}^{-1} L_k^T``, each diagonalized by ``eigh``) and then of the border's
Schur complement ``G - B^T T^{-1} B``. Time and memory are linear in the number of
stages. By Sylvester's law and Haynsworth's formula the inertia of ``K`` is the sum of
the eigenvalues' signs over all these blocks: exact, so an interior-point method can
correct the inertia as IPOPT does with a sparse LDL^T.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["Banded", "Factors", "factor", "solve", "dense"]


class Banded(eqx.Module):
    """A symmetric block-tridiagonal matrix with a dense border.

    **Fields:** ``diag (K, b, b)``; ``lower (K, b, b)`` (``lower[k]``: rows of stage
    ``k``, columns of stage ``k - 1``; ``lower[0]`` is ignored); ``border (K, b, nb)``;
    ``corner (nb, nb)``.
    """

    diag: jax.Array
    lower: jax.Array
    border: jax.Array
    corner: jax.Array


class Factors(eqx.Module):
    """``factor``'s output: per-stage eigendecompositions of the Schur complements,
    the couplings, and the border's Schur complement.

    **Fields:** ``vectors (K, b, b)``, ``values (K, b)``: ``S_k = V diag(values) V^T``;
    ``lower``: ``Banded.lower``; ``border``: ``B``; ``tinv_border (K, b, nb)``:
    ``T^{-1} B``; ``border_vectors``, ``border_values``: the border's Schur complement
    diagonalized; ``inertia``: ``(positive, negative, zero)`` counts of ``K``'s
    eigenvalues (zero: ``|value| <= zero_tol`` relative to the block's largest).
    """

    vectors: jax.Array
    values: jax.Array
    lower: jax.Array
    border: jax.Array
    tinv_border: jax.Array
    border_vectors: jax.Array
    border_values: jax.Array
    inertia: jax.Array


def _counts(values, tol):
    scale = jnp.max(jnp.abs(values), initial=0.0)
    small = jnp.abs(values) <= tol * scale + jnp.finfo(values.dtype).tiny
    return jnp.stack([jnp.sum((values > 0) & ~small), jnp.sum((values < 0) & ~small), jnp.sum(small)])


def _apply_inverse(V, w, x):
    """``V diag(1/w) V^T x`` for a vector or matrix ``x``."""
    inv = jnp.where(w == 0, 0.0, 1.0 / jnp.where(w == 0, 1.0, w))
    y = V.T @ x
    y = y * (inv[:, None] if y.ndim == 2 else inv)
    return V @ y


def _forward(vectors, values, lower, rhs):
    """Solve ``L w = r`` of the block LDL^T (``rhs (K, b, ...)``)."""

    def step(prev, k):
        w = rhs[k] - lower[k] @ _apply_inverse(vectors[k - 1], values[k - 1], prev)
        w = jnp.where(k == 0, rhs[k], w)
        return w, w

    _, w = jax.lax.scan(step, jnp.zeros_like(rhs[0]), jnp.arange(rhs.shape[0]))
    return w


def _backward(vectors, values, lower, w):
    """Solve ``D L^T x = w`` of the block LDL^T."""
    K = w.shape[0]
    upper = jnp.swapaxes(jnp.concatenate([lower[1:], jnp.zeros_like(lower[:1])]), 1, 2)  # rows k, cols k+1

    def step(nxt, k):
        x = _apply_inverse(vectors[k], values[k], w[k] - upper[k] @ nxt)
        return x, x

    _, x = jax.lax.scan(step, jnp.zeros_like(w[0]), jnp.arange(K), reverse=True)
    return x


def _solve_tridiagonal(f: Factors, rhs):
    return _backward(f.vectors, f.values, f.lower, _forward(f.vectors, f.values, f.lower, rhs))


def factor(K: Banded, zero_tol: float = 1e-15, truncate: float = 0.0) -> Factors:
    """Factor a ``Banded`` matrix and count its inertia.

    **Arguments:** ``K``; ``zero_tol``: an eigenvalue of a pivot block below this
    fraction of the block's largest counts as zero (a few rounding errors of
    ``eigh``, whose error is about ``eps`` times the largest); ``truncate``: an
    eigenvalue below this fraction of its block's largest is taken as zero in the
    solves (a pseudo-inverse: for a singular matrix, the solution without its null
    directions).

    **Returns:** ``Factors`` for ``solve``.
    """

    def cut(w):
        return jnp.where(jnp.abs(w) <= truncate * jnp.max(jnp.abs(w), initial=0.0), 0.0, w)

    def step(prev, k):
        V, w = prev
        S = K.diag[k] - jnp.where(k == 0, 0.0, K.lower[k] @ _apply_inverse(V, w, K.lower[k].T))
        # (a non-finite entry would stall LAPACK's eigensolver: zeroed, the caller sees it in its inputs)
        w, V = jnp.linalg.eigh(jnp.where(jnp.isfinite(S), 0.5 * (S + S.T), 0.0))
        w = cut(w) if truncate else w
        return (V, w), (V, w)

    b = K.diag.shape[1]
    init = (jnp.eye(b, dtype=K.diag.dtype), jnp.ones(b, K.diag.dtype))
    _, (vectors, values) = jax.lax.scan(step, init, jnp.arange(K.diag.shape[0]))
    inertia = jnp.sum(jax.vmap(lambda v: _counts(v, zero_tol))(values), axis=0)
    partial = Factors(
        vectors,
        values,
        K.lower,
        K.border,
        K.border,
        jnp.zeros((0, 0), K.diag.dtype),
        jnp.zeros(0, K.diag.dtype),
        inertia,
    )
    tinv_border = _solve_tridiagonal(partial, K.border)
    schur = K.corner - jnp.einsum("kbi,kbj->ij", K.border, tinv_border)
    border_values, border_vectors = jnp.linalg.eigh(jnp.where(jnp.isfinite(schur), 0.5 * (schur + schur.T), 0.0))
    border_values = cut(border_values) if truncate else border_values
    return Factors(
        vectors,
        values,
        K.lower,
        K.border,
        tinv_border,
        border_vectors,
        border_values,
        inertia + _counts(border_values, zero_tol),
    )


def solve(f: Factors, rhs_stages, rhs_border):
    """Solve ``K [x; y] = [r; s]`` from ``factor(K)``.

    **Arguments:** ``rhs_stages (K, b)``; ``rhs_border (nb,)``.

    **Returns:** ``(x (K, b), y (nb,))``.
    """
    t = _solve_tridiagonal(f, rhs_stages)
    y = _apply_inverse(f.border_vectors, f.border_values, rhs_border - jnp.einsum("kbi,kb->i", f.border, t))
    return t - jnp.einsum("kbi,i->kb", f.tinv_border, y), y


def dense(K: Banded):
    """The matrix as a dense ``(K b + nb, K b + nb)`` array (for tests and small cases)."""
    n, b, nb = K.diag.shape[0], K.diag.shape[1], K.corner.shape[0]
    M = jnp.zeros((n * b + nb, n * b + nb), K.diag.dtype)
    for k in range(n):  # (tests only)
        M = M.at[k * b : (k + 1) * b, k * b : (k + 1) * b].set(K.diag[k])
        if k:
            M = M.at[k * b : (k + 1) * b, (k - 1) * b : k * b].set(K.lower[k])
            M = M.at[(k - 1) * b : k * b, k * b : (k + 1) * b].set(K.lower[k].T)
        M = M.at[k * b : (k + 1) * b, n * b :].set(K.border[k])
        M = M.at[n * b :, k * b : (k + 1) * b].set(K.border[k].T)
    return M.at[n * b :, n * b :].set(K.corner)
