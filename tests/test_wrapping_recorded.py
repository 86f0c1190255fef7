"""The ellipsoid's wrap evaluated at a solution found before (``wrap_ellipsoid(found=...)``,
what ``wrapping.paths._recorded`` differentiates): the same tangent points and the same
derivatives as a fresh solve, without re-running OpenSim's tangent-point iteration."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simjax.wrapping import geometry as G

jax.config.update("jax_enable_x64", True)

# segments over arm26-sized ellipsoids (m), with and without a quadrant
CASES = [
    ((-0.05, 0.004, 0.012), (0.05, 0.007, 0.009), (0.035, 0.02, 0.02), 2, 1),
    ((0.004, -0.03, 0.01), (0.006, 0.035, -0.004), (0.025, 0.02, 0.02), 1, -1),
    ((-0.045, 0.006, 0.015), (0.048, 0.002, 0.011), (0.035, 0.02, 0.02), 0, 0),
]


def test_ellipsoid_at_a_found_solution():
    p1, p2, dims, axis, sign = (jnp.asarray(np.asarray(v)) for v in zip(*CASES))
    fresh = jax.vmap(G.wrap_ellipsoid)(p1, p2, dims, axis, sign)
    assert np.all(np.asarray(fresh.status) == G.MANDATORY_WRAP)

    def jvp(found, surface=True):
        def one(p1, p2, dims, axis, sign, f1, f2, d):
            def f(p1, p2, dims):
                res = G.wrap_ellipsoid(p1, p2, dims, axis, sign, found=None if found is None else (f1, f2),
                                       surface=surface)
                return jnp.concatenate([res.r1, res.r2, res.length[None]])
            return jax.jvp(f, (p1, p2, dims), d)
        return jax.jit(jax.vmap(one))

    rng = np.random.default_rng(0)
    args = (p1, p2, dims, axis, sign, fresh.r1, fresh.r2)
    plain, at_found, points_only = jvp(None), jvp(True), jvp(True, surface=False)
    for _ in range(3):
        d = tuple(jnp.asarray(rng.normal(size=(len(CASES), 3))) for _ in range(3))
        v0, t0 = plain(*args, d)
        v1, t1 = at_found(*args, d)
        v2, t2 = points_only(*args, d)
        np.testing.assert_allclose(v1, v0, rtol=0, atol=1e-15)
        np.testing.assert_allclose(t1, t0, rtol=1e-10, atol=1e-12)
        # without the surface path: the same tangent points and derivatives, no length
        np.testing.assert_allclose(v2[:, :6], v0[:, :6], rtol=0, atol=1e-15)
        np.testing.assert_allclose(t2[:, :6], t0[:, :6], rtol=1e-10, atol=1e-12)
        assert np.all(np.asarray(v2[:, 6]) == 0.0) and np.all(np.asarray(t2[:, 6]) == 0.0)


def test_ellipsoid_found_for_a_segment_that_misses_stays_finite():
    """Reverse mode multiplies the derivatives of wraps not taken by zero, so a
    ``found`` that is meaningless (here zeros, for a segment that misses) must still
    give finite derivatives."""
    dims = jnp.asarray((0.035, 0.02, 0.02))

    def f(p1, p2):
        res = G.wrap_ellipsoid(p1, p2, dims, 2, 1, found=(jnp.zeros(3), jnp.zeros(3)), surface=False)
        return jnp.sum(res.r1) + jnp.sum(res.r2)

    p1, p2 = jnp.asarray([1.0, 0.0, 0.0]), jnp.asarray([1.0, 1.0, 0.0])
    g = jax.jit(jax.grad(f, argnums=(0, 1)))(p1, p2)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in g)
