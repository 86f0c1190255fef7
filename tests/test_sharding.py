"""Batches sharded over devices: ``simulate_batch`` and ``map_batch`` over 4 CPU devices
(forced with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``, which must be set
before JAX starts, hence a subprocess) equal the single-device batch world by world,
result codes included; an uneven batch is padded and the padding dropped."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import simjax as sj
from simjax.batching import batch_mesh
from simjax.models import load

_T_FINAL = 0.3
_N = 7  # over 4 devices: padded to 8, the copy dropped
_KW = dict(solver="rk4", dt=0.01)  # (a fixed-step solver compiles fastest)


def _batch():
    system = load("double_pendulum").build()
    base = system.default_state()
    q0 = np.random.default_rng(0).uniform(-1.0, 1.0, (_N, 2))
    q0[3, 0] = np.nan  # a world that fails: its result code must survive the sharding
    states = jax.vmap(lambda q: base.replace(q=q))(jnp.asarray(q0))
    torques = jnp.asarray(np.random.default_rng(1).uniform(-1.0, 1.0, (_N, 2)))
    mass = jnp.linspace(0.5, 2.0, _N)
    return system, states, torques, {"/bodyset/rod1|mass": mass}


def _pendulum_energy(q, m):
    return {"e": m * (1.0 - jnp.cos(q[0])) + 0.5 * jnp.sin(q[1]) ** 2}


_CHILD = textwrap.dedent(f"""
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    import simjax as sj
    sys.path.insert(0, {os.path.dirname(__file__)!r})
    from test_sharding import _batch, _pendulum_energy, _T_FINAL, _KW

    assert jax.local_device_count() == 4, jax.devices()
    system, states, torques, props = _batch()
    traj = sj.simulate_batch(system, states, _T_FINAL, torques, properties=props, n_outputs=4, throw=False, **_KW)
    assert len(traj.q.sharding.device_set) == 4
    q = jnp.asarray(np.linspace(-1.0, 1.0, 16).reshape(8, 2))
    m = jnp.linspace(1.0, 2.0, 8)
    energy = sj.map_batch(_pendulum_energy, q, m)["e"]
    assert len(energy.sharding.device_set) == 4 and energy.sharding.spec[0] == "batch"  # even: stays sharded
    per_call = sj.map_batch(_pendulum_energy, q[:7], m[:7], chunk_size=1)["e"]  # two calls of 4, padded
    np.savez(sys.argv[1], q=traj.q, u=traj.u, t=traj.t, result=traj.result, num_steps=traj.num_steps,
             energy=energy, per_call=per_call)
""")


def test_sharded_batch_equals_single_device_batch(tmp_path):
    out = tmp_path / "sharded.npz"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    # the child compiles while this process does (two programs, on two cores)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        system, states, torques, props = _batch()
        want = sj.simulate_batch(system, states, _T_FINAL, torques, properties=props, n_outputs=4, throw=False, **_KW)
        log, _ = child.communicate(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, log
    got = np.load(out)
    result = np.asarray(want.result)
    assert result[3] == sj.NONFINITE_STATE and (np.delete(result, 3) == 0).all()
    np.testing.assert_array_equal(got["result"], result)
    np.testing.assert_array_equal(got["num_steps"], np.asarray(want.num_steps))
    for name in ("q", "u", "t"):
        w, g = np.asarray(getattr(want, name)), got[name]
        assert g.shape == w.shape
        for i in range(_N):  # world by world (NaN where the failing world's state is)
            np.testing.assert_allclose(g[i], w[i], rtol=1e-12, atol=1e-12, equal_nan=True)
    # the batched property reached each world: a heavier first rod swings differently
    assert not np.allclose(np.asarray(want.q[0, -1]), np.asarray(want.q[1, -1]))
    q = jnp.asarray(np.linspace(-1.0, 1.0, 16).reshape(8, 2))
    m = jnp.linspace(1.0, 2.0, 8)
    energy = jax.vmap(_pendulum_energy)(q, m)["e"]
    np.testing.assert_allclose(got["energy"], energy, rtol=1e-15)
    np.testing.assert_allclose(got["per_call"], energy[:7], rtol=1e-15)


def test_batch_mesh():
    assert batch_mesh() is None or jax.local_device_count() > 1  # one device: today's path
    mesh = batch_mesh(jax.devices()[:1])
    assert mesh.axis_names == ("batch",) and mesh.size == 1
    assert batch_mesh(mesh) is mesh
    try:
        batch_mesh([])
    except ValueError as e:
        assert "empty" in str(e)
    else:  # pragma: no cover
        raise AssertionError("an empty device list must be refused")
    # an explicit one-device mesh runs the sharded path and equals the default one
    q = jnp.asarray(np.linspace(-1.0, 1.0, 10).reshape(5, 2))
    m = jnp.linspace(1.0, 2.0, 5)
    np.testing.assert_allclose(
        sj.map_batch(_pendulum_energy, q, m, devices=jax.devices()[:1])["e"],
        sj.map_batch(_pendulum_energy, q, m)["e"],
        rtol=1e-15,
    )
