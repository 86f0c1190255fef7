"""JAX's LAPACK solves (Cholesky, triangular, LU, pseudo-inverse), safe to batch in threads,
and fused in XLA's own operations for small matrices off the CPU.

On the CPU, JAX's LAPACK kernels split a batch (a ``vmap``) of more than about 2e5
flops into tasks on XLA's intra-op thread pool and block the pool thread that runs
the program until the tasks are done. Programs running at once in as many threads as
the pool has (``simulate_batch``'s chunks, one thread per core) then all block, and
nothing is left to run the tasks: the process hangs (a 50-DoF model's batch of 32
worlds is enough). So simjax calls LAPACK only through this module: its functions go
through ``_serial_lapack``, whose batching rule gives LAPACK pieces of the batch small
enough to be solved on the calling thread, one piece after another (the pieces cost
what the split batch did on one core). The derivatives' solves, which JAX must be able
to transpose (it cannot through a batching rule), are ``lax.custom_linear_solve``s
whose solve and transposed solve both go through ``_serial_lapack``: a program's
independent derivative solves, which XLA runs at once, would otherwise hang it the
same way (a collocation Hessian of gait10dof18musc on 2 cores did).

On a GPU, a batched cuSOLVER or cuBLAS call costs a handful of kernels (pointer arrays,
status flags, the factorization) whatever the matrix's size, each launched from the
host: for a 2-DoF model's mass matrix, more than its arithmetic. There, matrices of
order up to ``_FUSED_MAX`` are factored and solved by loops over their columns written
out in elementwise operations (``_fused_cholesky``, ``_fused_triangular_solve``), which
XLA fuses with the work around them; the CPU keeps LAPACK.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

__all__ = ["cholesky", "cho_solve", "spd_solve", "triangular_solve", "solve", "pinv"]

#: jaxlib solves a batched LAPACK call on the calling thread below this many flops
_INLINE_FLOPS = 200_000
#: largest matrix order solved in fused elementwise operations off the CPU
_FUSED_MAX = 16


def _serial_lapack(raw, flops):
    """``raw`` (a function of unbatched arrays that calls LAPACK) whose ``vmap`` hands
    LAPACK pieces of the batch costing less than ``_INLINE_FLOPS`` each (``flops``:
    an upper bound on the cost of one element, from the unbatched arguments' shapes),
    in a ``lax.map``; a batch that costs less goes in one call. Not differentiable:
    the public functions below give it derivatives with ``custom_jvp``."""

    @custom_vmap
    def call(*args):
        return raw(*args)

    def in_pieces(*args):
        piece = max(1, (_INLINE_FLOPS - 1) // max(1, flops(*(a[0] for a in args))))
        if piece >= args[0].shape[0]:
            return jax.vmap(raw)(*args)
        if piece == 1:  # one element at a time, through ``call`` so an outer vmap is split too
            return jax.lax.map(lambda xs: call(*xs), args)
        return jax.lax.map(lambda xs: raw(*xs), args, batch_size=piece)

    @call.def_vmap
    def rule(axis_size, in_batched, *args):
        args = tuple(a if b else jnp.broadcast_to(a, (axis_size,) + a.shape) for a, b in zip(args, in_batched))
        # only the CPU's kernels split a batch over threads; a GPU solves it in one call
        out = jax.lax.platform_dependent(*args, cpu=in_pieces, default=jax.vmap(raw))
        return out, jax.tree.map(lambda _: True, out)

    return call


def _fused_off_cpu(lapack, fused, *args, max_order: int = _FUSED_MAX):
    """``lapack(*args)`` on a CPU, and ``fused(*args)`` elsewhere where the matrix
    ``args[0]`` has order at most ``max_order`` (module docstring). Every order goes
    through the same platform choice, so a program's size does not depend on it."""
    small = args[0].shape[-1] <= max_order
    return jax.lax.platform_dependent(*args, cpu=lapack, default=fused if small else lapack)


def _fused_cholesky(M):
    """The lower Cholesky factor of ``M (n, n)`` (its lower triangle read), column by
    column with rank-one updates of the rest (right-looking), all in elementwise
    operations; NaN in its lower triangle where a pivot is not positive, as JAX's
    LAPACK call gives."""
    n = M.shape[-1]
    rows = jnp.arange(n)
    A, cols, ok = M, [], True
    for j in range(n):
        ok = ok & (A[j, j] > 0)
        col = jnp.where(rows >= j, A[:, j] / jnp.sqrt(A[j, j]), 0.0)
        cols.append(col)
        A = A - col[:, None] * col[None, :]
    return jnp.where(ok, jnp.stack(cols, axis=1), jnp.tril(jnp.full_like(M, jnp.nan)))


def _fused_triangular_solve(L, b, transpose):
    """``_raw_triangular_solve`` by substitution in elementwise operations: each
    unknown in turn, then its column (``L^T``: its row) taken from the remaining
    right-hand sides."""
    n = L.shape[-1]
    rows = jnp.arange(n)
    B, x = b.reshape(n, -1), [None] * n
    for j in reversed(range(n)) if transpose else range(n):
        x[j] = B[j] / L[j, j]
        coupled = jnp.where(rows < j, L[j, :], 0.0) if transpose else jnp.where(rows > j, L[:, j], 0.0)
        B = B - coupled[:, None] * x[j][None, :]
    return jnp.stack(x).reshape(b.shape)


# (the costs are jaxlib's own estimates; the eigendecomposition's bounds its 4 n^3)
_potrf = _serial_lapack(lambda M: jax.lax.linalg.cholesky(M, symmetrize_input=False), lambda M: M.shape[-1] ** 3 // 3)


@jax.custom_jvp
def cholesky(M):
    """The lower Cholesky factor ``L`` of a symmetric positive definite ``M (n, n)``
    (its lower triangle is read), as ``jax.scipy.linalg.cho_factor(M, lower=True)``
    but safe to batch in threads (module docstring). NaN where ``M`` is not positive
    definite."""
    return _fused_off_cpu(_potrf, _fused_cholesky, M)


@cholesky.defjvp
def _cholesky_jvp(primals, tangents):
    (M,), (dM,) = primals, tangents
    L = cholesky(M)
    # dL = L phi(L^-1 dM L^-T), phi: the lower triangle with the diagonal halved
    X = _tangent_triangular_solve(L, _tangent_triangular_solve(L, dM.T, False).T, False)
    phi = jnp.tril(X) * (1.0 - 0.5 * jnp.eye(M.shape[-1], dtype=M.dtype))
    return L, L @ phi


def _tangent_triangular_solve(L, b, transpose):
    """``_raw_triangular_solve`` for the derivatives, safe to batch in threads.

    JAX transposes the derivatives' solves, and cannot transpose through
    ``_serial_lapack``'s batching rule; called bare, a batched LAPACK solve splits its
    batch over XLA's intra-op thread pool and blocks a pool thread, and when XLA runs
    as many such solves at once as the pool has threads (independent parts of one
    program: two on a 2-core machine) the process hangs. As a
    ``lax.custom_linear_solve`` the solve goes through ``_serial_lapack`` in every
    direction: its transpose is the transposed solve, and its batches are split."""
    lower = jnp.tril(L)

    def matvec(x):  # L x, or L^T x
        return ((lower.T if transpose else lower) @ x.reshape(L.shape[0], -1)).reshape(x.shape)

    return jax.lax.custom_linear_solve(
        matvec,
        b,
        solve=lambda _, r: _trsm(transpose)(L, r),
        transpose_solve=lambda _, r: _trsm(not transpose)(L, r),
    )


def _raw_triangular_solve(L, b, transpose):
    """``L^-1 b`` (``L^-T b`` if ``transpose``) for a lower-triangular ``L (n, n)``,
    ``b (n,)`` or ``(n, k)``."""
    x = jax.lax.linalg.triangular_solve(L, b.reshape(b.shape[0], -1), left_side=True, lower=True, transpose_a=transpose)
    return x.reshape(b.shape)


@functools.cache
def _trsm(transpose: bool):
    return _serial_lapack(
        functools.partial(_raw_triangular_solve, transpose=transpose),
        lambda L, b: L.shape[-1] ** 2 * (b.shape[-1] if b.ndim == 2 else 1),
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def triangular_solve(L, b, transpose: bool = False):
    """``L^-1 b``, or ``L^-T b`` if ``transpose``, for a lower-triangular ``L (n, n)``
    (its lower triangle is read) and ``b (n,)`` or ``(n, k)``; safe to batch in
    threads (module docstring)."""
    transpose = bool(transpose)
    return _fused_off_cpu(_trsm(transpose), functools.partial(_fused_triangular_solve, transpose=transpose), L, b)


@triangular_solve.defjvp
def _triangular_solve_jvp(transpose, primals, tangents):
    (L, b), (dL, db) = primals, tangents
    x = triangular_solve(L, b, transpose)
    dL = jnp.tril(dL)
    return x, _tangent_triangular_solve(L, db - (dL.T if transpose else dL) @ x, transpose)


def cho_solve(L, b):
    """``M^-1 b`` from ``M``'s lower Cholesky factor ``L (n, n)`` (``cholesky``);
    ``b (n,)`` or ``(n, k)``."""
    return triangular_solve(L, triangular_solve(L, b, False), True)


@jax.custom_jvp
def spd_solve(M, b):
    """``M^-1 b`` for a symmetric positive definite ``M (n, n)`` (its lower triangle is
    read) and ``b (n,)`` or ``(n, k)``, by Cholesky (``cho_solve(cholesky(M), b)``).

    Its derivative is that of the solution, ``dx = M^-1 (db - dM x)``, two triangular
    solves with the factor, rather than the derivative of the factorization (solves
    with ``n`` right-hand sides) carried through the two solves; reverse mode is
    likewise one pair of solves and an outer product.
    """
    return cho_solve(cholesky(M), b)


@spd_solve.defjvp
def _spd_solve_jvp(primals, tangents):
    (M, b), (dM, db) = primals, tangents
    L = cholesky(M)
    x = cho_solve(L, b)
    # (all of dM, as ``cholesky``'s derivative takes it: the two agree for the symmetric
    # tangents a symmetric matrix has)
    r = db - dM @ x
    return x, _tangent_triangular_solve(L, _tangent_triangular_solve(L, r, False), True)


@functools.cache
def _pinv(rtol: float):
    return _serial_lapack(lambda A: jnp.linalg.pinv(A, rtol=rtol, hermitian=True), lambda A: 10 * A.shape[-1] ** 3)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def pinv(A, rtol: float):
    """The pseudo-inverse of a symmetric ``A (m, m)`` (eigenvalues below ``rtol`` times
    the largest treated as zero), as ``jnp.linalg.pinv(A, rtol, hermitian=True)`` but
    safe to batch in threads (module docstring). Off the CPU, a ``(1, 1)`` ``A``'s is
    ``1 / a`` (0 where ``a`` is 0) in one elementwise operation."""
    return _fused_off_cpu(_pinv(float(rtol)), _scalar_pinv, A, max_order=1)


def _scalar_pinv(A):
    """The pseudo-inverse of a ``(1, 1)`` ``A``: ``1 / a``, or 0 where ``a`` is 0."""
    return jnp.where(A == 0, 0.0, 1.0 / jnp.where(A == 0, 1.0, A))


@pinv.defjvp
def _pinv_jvp(rtol, primals, tangents):
    # the derivative of the pseudo-inverse at constant rank (Golub and Pereyra)
    (A,), (dA,) = primals, tangents
    p = pinv(A, rtol)
    eye = jnp.eye(A.shape[-1], dtype=A.dtype)
    dp = -p @ dA @ p + p @ p.T @ dA.T @ (eye - A @ p) + (eye - p @ A) @ dA.T @ p.T @ p
    return p, dp


_lu_solve = _serial_lapack(jnp.linalg.solve, lambda A, b: A.shape[-1] ** 3)


@jax.custom_jvp
def solve(A, b):
    """``A^-1 b`` for a square nonsingular ``A (n, n)`` and ``b (n,)`` (LU with partial
    pivoting), as ``jnp.linalg.solve`` but safe to batch in threads (module docstring)."""
    return _lu_solve(A, b)


@solve.defjvp
def _solve_jvp(primals, tangents):
    (A, b), (dA, db) = primals, tangents
    x = solve(A, b)
    # (through the serial LU in every direction: see ``_tangent_triangular_solve``)
    dx = jax.lax.custom_linear_solve(
        lambda v: A @ v, db - dA @ x, solve=lambda _, r: _lu_solve(A, r), transpose_solve=lambda _, r: _lu_solve(A.T, r)
    )
    return x, dx
