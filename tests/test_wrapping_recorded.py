"""Shortcuts of the wrap engine. The ellipsoid's wrap evaluated at a solution found
before (``wrap_ellipsoid(found=...)``, what ``wrapping.paths._recorded``
differentiates): the same tangent points and the same derivatives as a fresh solve,
without re-running OpenSim's tangent-point iteration. The cylinders' tangent points
computed only where a segment can wrap: those of every segment solved."""

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
                res = G.wrap_ellipsoid(
                    p1, p2, dims, axis, sign, found=None if found is None else (f1, f2), surface=surface
                )
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


def test_cylinders_solved_only_where_they_can_wrap():
    """The passes compute a cylinder's tangent points only for the candidate segments
    that can wrap, a chunk at a time (``paths._cylinders_that_wrap``): the statuses of
    all candidates, and the tangent points and arcs of those that wrap, are those of
    every segment solved at once (to rounding: the two compile differently), when the
    segments to solve fill several chunks."""
    from simjax.wrapping import paths as P

    g, K = 40, 3
    rng = np.random.default_rng(1)
    p1w = jnp.asarray(rng.normal(scale=0.05, size=(g, K, 3)))
    p2w = jnp.asarray(rng.normal(scale=0.05, size=(g, K, 3)))
    cand = jnp.asarray(rng.random((g, K)) < 0.8)
    radius, length = jnp.full(g, 0.03), jnp.full(g, 0.2)
    axis = jnp.asarray(rng.integers(0, 3, g), jnp.int32)
    sign = jnp.asarray(rng.integers(-1, 2, g), jnp.int32)
    st, r1, r2, long_wrap, arc = jax.jit(P._cylinders_that_wrap)(p1w, p2w, cand, radius, length, axis, sign)
    st0, a0, b0, lw0 = P._over_segments(G._cylinder, p1w, p2w, radius, length, axis, sign)
    st, st0, c = np.asarray(st), np.asarray(st0), np.asarray(cand)
    wraps = c & (st0 >= G.WRAPPED)
    assert g * K > P._CYLINDERS_AT_ONCE and wraps.sum() > 3 * max(P._CYLINDER_CHUNK, g // 4)  # (several chunks)
    np.testing.assert_array_equal(st[c], st0[c])
    np.testing.assert_allclose(np.asarray(r1)[wraps], np.asarray(a0)[wraps], rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.asarray(r2)[wraps], np.asarray(b0)[wraps], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(long_wrap)[wraps], np.asarray(lw0)[wraps])
    np.testing.assert_allclose(
        np.asarray(arc)[wraps], np.asarray(G.spiral_length(a0, b0, radius[:, None], lw0))[wraps], rtol=0, atol=1e-14
    )
