"""simjax.lapack: LAPACK solves that are safe to batch in threads.

Values and derivatives are compared with JAX's own (``jax.scipy.linalg``,
``jnp.linalg.solve``, ``jnp.linalg.pinv``), unbatched and in batches split into
pieces; a subprocess runs batched solves in as many threads as the machine's cores at
once, which made JAX's LAPACK kernels wait forever on their own thread pool.
"""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from simjax import lapack
from simjax.mechanics import linalg

from _platforms import assert_loop_only_on_cpu

jax.config.update("jax_enable_x64", True)


def _spd(batch, n, seed=0):
    a = np.random.default_rng(seed).standard_normal((batch, n, n))
    return a @ a.transpose(0, 2, 1) + n * np.eye(n)


def _reference_solve(M, b):
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(M, lower=True), b)


def _solve(M, b):
    return lapack.cho_solve(lapack.cholesky(M), b)


@pytest.mark.parametrize("batch, n", [(64, 50), (512, 10), (3, 4)])
def test_batched_cholesky_solve_equals_jax(batch, n):
    # 64 x 50^3 flops: one matrix a piece; 512 x 10^3: pieces of 199; 3 x 4^3: one call
    M = _spd(batch, n)
    b = np.random.default_rng(1).standard_normal((batch, n))
    L = jax.jit(jax.vmap(lapack.cholesky))(M)
    np.testing.assert_allclose(L, np.linalg.cholesky(M), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        jax.jit(jax.vmap(_solve))(M, b), np.linalg.solve(M, b[..., None])[..., 0], rtol=1e-10, atol=1e-12
    )
    B = np.random.default_rng(2).standard_normal((batch, n, 3))
    np.testing.assert_allclose(jax.vmap(_solve)(M, B), np.linalg.solve(M, B), rtol=1e-10, atol=1e-12)
    # a shared right-hand side (not batched) is broadcast
    np.testing.assert_allclose(
        jax.vmap(_solve, in_axes=(0, None))(M, b[0]),
        np.linalg.solve(M, b[0][None, :, None].repeat(batch, 0))[..., 0],
        rtol=1e-10,
    )


def _symmetric_part(g):
    """A matrix gradient as a symmetric matrix has it (that of the factorization
    differs in its antisymmetric part)."""
    return 0.5 * (g + np.swapaxes(g, -1, -2))


def test_derivatives_equal_jax():
    M = _spd(8, 6)
    b = np.random.default_rng(3).standard_normal((8, 6))
    dM = _spd(8, 6, seed=4)  # symmetric tangents, as a mass matrix's are
    db = np.random.default_rng(5).standard_normal((8, 6))

    def loss(solve):
        return lambda M, b: jnp.sum(jnp.sin(solve(M, b)))

    want = jax.vmap(jax.grad(loss(_reference_solve), argnums=(0, 1)))(M, b)
    ref = jax.vmap(lambda M, b, dM, db: jax.jvp(_reference_solve, (M, b), (dM, db)))(M, b, dM, db)
    for solve in (_solve, lapack.spd_solve):
        for fn in (
            jax.vmap(jax.grad(loss(solve), argnums=(0, 1))),
            jax.grad(lambda M, b: jnp.sum(jax.vmap(loss(solve))(M, b)), argnums=(0, 1)),
        ):
            (gM, gb), (wM, wb) = fn(M, b), want
            np.testing.assert_allclose(gb, wb, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(_symmetric_part(gM), _symmetric_part(wM), rtol=1e-9, atol=1e-12)
        jvp = jax.vmap(lambda M, b, dM, db: jax.jvp(solve, (M, b), (dM, db)))(M, b, dM, db)
        np.testing.assert_allclose(jvp[0], ref[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(jvp[1], ref[1], rtol=1e-9, atol=1e-12)
    # second order (a gradient of a gradient, as a fitted parameter's Gauss-Newton step takes)
    hess = jax.hessian(lambda b: loss(lapack.spd_solve)(M[0], b))(b[0])
    np.testing.assert_allclose(
        hess, jax.hessian(lambda b: loss(_reference_solve)(M[0], b))(b[0]), rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("batch, n", [(64, 40), (3, 4)])
def test_lu_solve_and_its_derivatives_equal_jax(batch, n):
    rng = np.random.default_rng(9)
    A = rng.standard_normal((batch, n, n)) + n * np.eye(n)
    b, db = rng.standard_normal((2, batch, n))
    dA = rng.standard_normal((batch, n, n))
    np.testing.assert_allclose(
        jax.jit(jax.vmap(lapack.solve))(A, b), np.linalg.solve(A, b[..., None])[..., 0], rtol=1e-10, atol=1e-12
    )
    got = jax.vmap(lambda A, b, dA, db: jax.jvp(lapack.solve, (A, b), (dA, db)))(A, b, dA, db)[1]
    want = jax.vmap(lambda A, b, dA, db: jax.jvp(jnp.linalg.solve, (A, b), (dA, db)))(A, b, dA, db)[1]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    grad = jax.vmap(jax.grad(lambda A, b: jnp.sum(jnp.sin(lapack.solve(A, b))), argnums=(0, 1)))(A, b)
    ref = jax.vmap(jax.grad(lambda A, b: jnp.sum(jnp.sin(jnp.linalg.solve(A, b))), argnums=(0, 1)))(A, b)
    for g, w in zip(grad, ref):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rank", [5, 3])
def test_pinv_and_psd_solve_equal_jax(rank):
    a = np.random.default_rng(6).standard_normal((16, 5, rank))
    A = a @ a.transpose(0, 2, 1)
    da = np.random.default_rng(7).standard_normal((16, 5, rank))
    dA = da @ a.transpose(0, 2, 1) + a @ da.transpose(0, 2, 1)  # keeps the rank
    b = A @ np.random.default_rng(8).standard_normal((16, 5))[..., None]

    def ref(A):
        return jnp.linalg.pinv(A, rtol=linalg.PINV_RTOL, hermitian=True)

    def pinv(A):
        return lapack.pinv(A, linalg.PINV_RTOL)

    np.testing.assert_allclose(jax.vmap(pinv)(A), jax.vmap(ref)(A), rtol=1e-9, atol=1e-12)
    tangent = jax.vmap(lambda A, dA: jax.jvp(pinv, (A,), (dA,))[1])(A, dA)
    np.testing.assert_allclose(
        tangent, jax.vmap(lambda A, dA: jax.jvp(ref, (A,), (dA,))[1])(A, dA), rtol=1e-7, atol=1e-9
    )
    x = jax.vmap(linalg.psd_solve)(A, b[..., 0])
    np.testing.assert_allclose(x, np.einsum("bij,bj->bi", jax.vmap(ref)(A), b[..., 0]), rtol=1e-8, atol=1e-10)


def _finishes(code: str, timeout: float) -> None:
    """Run ``code`` in a fresh Python (this checkout on its path); it must print "done"
    and exit well within ``timeout`` seconds (a hang times out)."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("done")


def test_batched_solves_in_a_thread_per_core_finish():
    # before: the LAPACK kernel split the batch into tasks on XLA's thread pool, whose
    # every thread was running one of these programs and waiting: a hang
    code = textwrap.dedent("""
        from concurrent.futures import ThreadPoolExecutor
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from simjax.batching import usable_cores
        from simjax import lapack
        a = np.random.default_rng(0).standard_normal((64, 50, 50))
        M = a @ a.transpose(0, 2, 1) + 50 * np.eye(50)
        b = np.ones((64, 50))
        solve = jax.vmap(lambda M, b: lapack.cho_solve(lapack.cholesky(M), b))
        f = jax.jit(lambda M, b: jax.lax.fori_loop(0, 50, lambda i, x: solve(M, b + 1e-9 * x), b))
        f(M, b).block_until_ready()
        threads = max(2, usable_cores())
        with ThreadPoolExecutor(threads) as pool:
            for _ in range(10):
                list(pool.map(lambda _: f(M, b).block_until_ready(), range(threads)))
        print("done")
    """)
    _finishes(code, timeout=300)


def test_batched_derivative_solves_run_at_once_finish():
    # before: the derivatives' solves called LAPACK bare; batched, each split its batch
    # over XLA's thread pool and blocked a pool thread, and independent ones that XLA
    # ran at once (as many as the pool's threads) waited for each other: a hang
    code = textwrap.dedent("""
        import os
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        from simjax import lapack
        a = np.random.default_rng(0).standard_normal((512, 12, 12))
        M = jnp.asarray(a @ a.transpose(0, 2, 1) + 12 * np.eye(12))
        B = jnp.asarray(np.ones((512, 12, 12)))
        tangents = jax.vmap(lambda M, b, db: jax.jvp(lambda b: lapack.spd_solve(M, b), (b,), (db,))[1])
        independent = max(4, 2 * (os.cpu_count() or 1))
        f = jax.jit(lambda M, B: [tangents(M * (1 + 0.1 * i), B, B * (i + 1)) for i in range(independent)])
        for _ in range(20):
            jax.block_until_ready(f(M, B))
        print("done")
    """)
    _finishes(code, timeout=120)


def test_only_the_cpu_splits_a_batch():
    # a GPU's solver takes the whole batch in one call: no loop over pieces there
    assert_loop_only_on_cpu(jax.jit(jax.vmap(lapack.cholesky)), jnp.broadcast_to(jnp.eye(50), (64, 50, 50)))


@pytest.mark.parametrize("n", [1, 2, 5, 10, 16])
def test_fused_solves_equal_lapack(n):
    # what a GPU runs for small matrices, run here: the lower triangle alone is read
    rng = np.random.default_rng(n)
    M = _spd(1, n, seed=n)[0]
    junk = np.triu(rng.standard_normal((n, n)), 1)
    L = np.linalg.cholesky(M)
    np.testing.assert_allclose(lapack._fused_cholesky(M + junk), L, rtol=1e-13, atol=1e-14)
    for b in (rng.standard_normal(n), rng.standard_normal((n, 3))):
        for transpose in (False, True):
            x = lapack._fused_triangular_solve(L + junk, b, transpose)
            np.testing.assert_allclose(x, np.linalg.solve(L.T if transpose else L, b), rtol=1e-12, atol=1e-13)
    # not positive definite: NaN in the lower triangle, as JAX's LAPACK call gives
    bad = M - 2 * np.linalg.eigvalsh(M)[0] * np.eye(n)
    np.testing.assert_array_equal(np.isnan(lapack._fused_cholesky(bad)), np.isnan(lapack.cholesky(bad)))
    assert np.isnan(lapack._fused_cholesky(bad)).any()


def test_scalar_pinv_equals_jax():
    for a in (0.0, -4.0, 3e-20, 7.5):
        A = jnp.array([[a]])
        np.testing.assert_array_equal(lapack._scalar_pinv(A), jnp.linalg.pinv(A, rtol=linalg.PINV_RTOL, hermitian=True))
    assert np.isnan(lapack._scalar_pinv(jnp.array([[np.nan]])))


def test_small_solves_are_fused_off_the_cpu():
    # the CUDA program of a small solve calls no cuSOLVER or cuBLAS; a large one does,
    # and the CPU's calls LAPACK at every size
    def program(fn, n, platform):
        M, b = jnp.broadcast_to(jnp.eye(n), (8, n, n)), jnp.ones((8, n))
        return export.export(jax.jit(jax.vmap(fn)), platforms=[platform])(M, b).mlir_module()

    def constrained(M, b):
        return lapack.spd_solve(M, b) + linalg.psd_solve(M[:1, :1], b[:1])

    assert "custom_call" not in program(constrained, 10, "cuda")
    assert "custom_call" in program(constrained, 10, "cpu")
    assert "custom_call" in program(lapack.spd_solve, lapack._FUSED_MAX + 1, "cuda")
