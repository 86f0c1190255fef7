"""Sparse second derivatives of a staged NLP's stages, by coloring.

The interior-point solver needs, at every iteration and for every stage, the Hessian
of the stage's Lagrangian and the Jacobian of its rows over the stage's inputs
``v = (z_k, z_{k+1}, g)``. Forward differentiation pushes one tangent per input
(``jacfwd``), but these matrices are sparse: in a collocation stage, a muscle's
activation meets only its own excitation and the joints it crosses. Columns that
share no nonzero row can be pushed as one tangent (their sum), and each entry read
back from the sum where the pattern places it (Curtis, Powell and Reid, 1974;
Coleman and Moré, 1983). For gait10dof18musc's MocoInverse, 186 tangents become 23.

The pattern is detected numerically, as Moco's ``optim_sparsity_detection = "random"``
does: the dense derivatives at a few points spread inside the bounds, with random
multipliers; an entry is structural where it is nonzero (or not finite) at any of
them, in any stage. A few rows of the Hessian that meet most columns (a free final
time scales every dynamics row) are left out of the coloring and filled from their
columns, the Hessian being symmetric.

What a missed entry could change is the Newton step, not the answer: the solver's
optimality test uses the Lagrangian's gradient by reverse differentiation, whole.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Sparsity", "detect_sparsity"]


@dataclasses.dataclass(frozen=True, eq=False)
class Sparsity:
    """The structure of a stage's derivatives over its inputs ``v (n,)``, and a
    coloring of its columns (a static, hashable value).

    **Fields:** ``hessian (n, n)`` and ``jacobian (m, n)``: bool patterns;
    ``color (n,)``: each column's tangent; ``dense_rows (n,)``: the Hessian rows
    filled from their columns (each such column has a tangent of its own).
    """

    hessian: np.ndarray
    jacobian: np.ndarray
    color: np.ndarray
    dense_rows: np.ndarray

    @property
    def n_colors(self) -> int:
        """The number of tangents pushed per stage."""
        return int(self.color.max(initial=-1)) + 1

    def seeds(self, dtype) -> jax.Array:
        """``(n_colors, n)``: the tangents, each the sum of its columns' unit vectors."""
        return jnp.asarray(np.arange(self.n_colors)[:, None] == self.color[None, :], dtype)

    def hessian_from(self, compressed) -> jax.Array:
        """The Hessian ``(..., n, n)`` from the tangents' Hessian-vector products
        ``compressed (..., n_colors, n)``."""
        by_column = jnp.swapaxes(compressed, -1, -2)[..., self.color]  # [i, j] = (H seed(j))_i
        H = jnp.where(self.hessian, by_column, 0.0)
        return jnp.where(self.dense_rows[:, None], jnp.swapaxes(H, -1, -2), H)

    def jacobian_from(self, compressed) -> jax.Array:
        """The Jacobian ``(..., m, n)`` from the tangents' Jacobian-vector products
        ``compressed (..., n_colors, m)``."""
        return jnp.where(self.jacobian, jnp.swapaxes(compressed, -1, -2)[..., self.color], 0.0)

    def _key(self):
        arrays = (self.hessian, self.jacobian, self.color.astype(np.int64), self.dense_rows)
        return tuple((a.shape, a.tobytes()) for a in arrays)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, Sparsity) and self._key() == other._key()


def _greedy_coloring(pattern: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Colors of ``pattern``'s columns such that no row meets two columns of one color
    (the columns meeting most rows first); the columns in ``own`` get a color each."""
    color = -np.ones(pattern.shape[1], np.int64)
    met: list[np.ndarray] = []  # per color: the rows its columns meet
    shared: list[bool] = []  # per color: whether it takes more columns
    for j in np.argsort(-pattern.sum(axis=0), kind="stable"):
        if not own[j]:
            for c in range(len(met)):
                if shared[c] and not np.any(met[c] & pattern[:, j]):
                    color[j] = c
                    met[c] |= pattern[:, j]
                    break
        if color[j] < 0:
            color[j] = len(met)
            met.append(pattern[:, j].copy())
            shared.append(not own[j])
    return color


def coloring(hessian: np.ndarray, jacobian: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A coloring of the stage's columns for its Hessian and Jacobian patterns.

    The Hessian's densest rows are tried, a few at a time, as rows filled by symmetry
    (out of the conflicts, their columns colored alone); the split with the fewest
    colors is kept.

    **Returns:** ``(color (n,), dense_rows (n,))``.
    """
    n = hessian.shape[0]
    counts = hessian.sum(axis=1)
    best = None
    for k in sorted({0, *[int(np.sum(counts >= c)) for c in np.unique(counts) if np.sum(counts >= c) <= n // 4]}):
        dense = np.zeros(n, bool)
        dense[np.argsort(-counts, kind="stable")[:k]] = True
        rows = np.concatenate([hessian[~dense], jacobian], axis=0)
        color = _greedy_coloring(rows, dense)
        if best is None or color.max(initial=-1) < best[0].max(initial=-1):
            best = (color, dense)
    return best


def detect_sparsity(nlp, z0, g0=None, points: int = 4, seed: int = 0) -> Sparsity:
    """The derivative pattern of ``nlp``'s stages, detected at ``points`` points (see
    the module), and its coloring.

    **Arguments:** ``nlp``: a ``StagedNLP`` whose ``theta`` holds values, not tracers;
    ``z0 (K, nz)``, ``g0 (ng,)``: the starting point, around which half the points lie
    (within 10% of each variable's range); the others are spread over the bounds
    (where finite); ``seed``: of the random points and multipliers.

    **Returns:** a ``Sparsity`` (pass it as ``StagedNLP.sparsity``).
    """
    from ..compiling import jit
    from .ipm import _Problem

    K, nz, m, ng, mg = nlp.shape
    dtype = nlp.z_lower.dtype
    g0 = jnp.zeros(ng, dtype) if g0 is None else jnp.asarray(g0, dtype)
    dense = dataclasses.replace(nlp, sparsity=None)
    P = _Problem(dense, jnp.ones((), dtype), jnp.ones((K, m), dtype), jnp.ones(mg, dtype))
    evaluate = jit(lambda V, Y: P.evaluate(V, Y)[:2])
    rng = np.random.default_rng(seed)

    def sample(x0, lo, hi, spread):
        x0, lo, hi = (np.asarray(a, float) for a in (x0, lo, hi))
        finite = np.isfinite(lo) & np.isfinite(hi)
        with np.errstate(invalid="ignore"):  # (inf - inf where a bound is infinite: not used)
            span = np.where(finite, hi - lo, 1.0 + np.abs(x0))
        if spread:
            inside = np.where(finite, lo, 0.0) + rng.uniform(size=x0.shape) * span
            x = np.where(finite, inside, x0 + span * rng.standard_normal(x0.shape))
        else:
            x = x0 + 0.1 * span * rng.standard_normal(x0.shape)
        return jnp.asarray(np.clip(x, lo, hi), dtype)

    hessian = np.zeros((2 * nz + ng,) * 2, bool)
    jacobian = np.zeros((m, 2 * nz + ng), bool)
    for i in range(points):
        spread = i >= points // 2
        z = sample(z0, nlp.z_lower, nlp.z_upper, spread)
        g = sample(g0, nlp.border_lower, nlp.border_upper, spread)
        V = (z, jnp.zeros((K, m), dtype), g, jnp.zeros(mg, dtype))
        Y = (jnp.asarray(rng.standard_normal((K, m)), dtype), jnp.asarray(rng.standard_normal(mg), dtype))
        H, J = (np.asarray(a) for a in evaluate(V, Y))
        hessian |= np.any((H != 0) | ~np.isfinite(H), axis=0)
        jacobian |= np.any((J != 0) | ~np.isfinite(J), axis=0)
    hessian |= hessian.T
    color, dense_rows = coloring(hessian, jacobian)
    return Sparsity(hessian, jacobian, color, dense_rows)
