"""``map_batch``: vmapped chunks side by side on the cores, equal to one ``jax.vmap``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj


def _pendulum_energy(q, params):
    return {"e": params["m"] * 9.81 * (1 - jnp.cos(q)) + 0.5 * params["m"] * q**2, "q2": jnp.stack([q, 2 * q])}


def test_map_batch_equals_vmap_over_padded_chunks():
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.uniform(-1, 1, 103))
    params = {"m": jnp.asarray(rng.uniform(1, 2, 103))}
    want = jax.vmap(_pendulum_energy)(q, params)
    # 103 = 4 chunks of 30 (the last padded with copies of element 102) on two threads
    got = sj.map_batch(_pendulum_energy, q, params, chunk_size=30, workers=2)
    assert got["e"].shape == (103,) and got["q2"].shape == (103, 2)
    np.testing.assert_allclose(got["e"], want["e"], rtol=1e-15)
    np.testing.assert_allclose(got["q2"], want["q2"], rtol=1e-15)
    # each chunk of 30 as a loop over vmapped pieces of 7 (four, and a remainder of 2)
    got = sj.map_batch(_pendulum_energy, q, params, chunk_size=30, workers=2, piece_size=7)
    np.testing.assert_allclose(got["q2"], want["q2"], rtol=1e-15)
    # the defaults: one chunk per core
    np.testing.assert_allclose(sj.map_batch(_pendulum_energy, q, params)["e"], want["e"], rtol=1e-15)
    with pytest.raises(ValueError, match="workers"):
        sj.map_batch(_pendulum_energy, q, params, workers=0)


def test_map_batch_inside_jit_and_grad():
    q = jnp.linspace(-1.0, 1.0, 50)
    params = {"m": jnp.full(50, 1.5)}

    def loss(m):
        return jnp.sum(sj.map_batch(_pendulum_energy, q, {"m": m}, chunk_size=16, workers=2)["e"])

    want = jax.grad(lambda m: jnp.sum(jax.vmap(_pendulum_energy)(q, {"m": m})["e"]))(params["m"])
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(params["m"]), want, rtol=1e-14)
    pieces = jax.grad(lambda m: jnp.sum(sj.map_batch(_pendulum_energy, q, {"m": m}, piece_size=8)["e"]))
    np.testing.assert_allclose(jax.jit(pieces)(params["m"]), want, rtol=1e-14)
    # by default one chunk inside a trace
    got = jax.jit(lambda m: sj.map_batch(_pendulum_energy, q, {"m": m})["e"])(params["m"])
    np.testing.assert_allclose(got, jax.vmap(_pendulum_energy)(q, params)["e"], rtol=1e-15)


def test_cache_chunk_keeps_about_2048_numbers_a_piece():
    from simjax.batching import cache_chunk

    assert [cache_chunk(n) for n in (1, 4, 56, 120, 1000, 10**6)] == [512, 512, 32, 16, 16, 16]
