"""The seed's bicep curl (examples/bicep_curl.py) against OpenSim 4.6 running the same
model (written by ``sj.save_osim``) in the same test, and its gradients (issue 6)."""

from __future__ import annotations

import math
import os
import sys

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import bicep_curl  # noqa: E402

FIBER_FORCE, ELBOW = bicep_curl.REPORT


@pytest.fixture(scope="module")
def curl():
    system = bicep_curl.build_model().build()
    return system, bicep_curl.initial_state(system)


def _opensim_run(path, times):
    """OpenSim: the same file, elbow at 0.5 pi, equilibrated, integrated to each time."""
    opensim = pytest.importorskip("opensim")
    m = opensim.Model(str(path))
    s = m.initSystem()
    m.getCoordinateSet().get("elbow_coord_0").setValue(s, 0.5 * math.pi)
    m.equilibrateMuscles(s)
    mgr = opensim.Manager(m)
    mgr.setIntegratorAccuracy(1e-8)
    mgr.initialize(s)
    biceps = opensim.Millard2012EquilibriumMuscle.safeDownCast(m.getMuscles().get("biceps"))
    elbow = m.getCoordinateSet().get("elbow_coord_0")
    out = []
    for t in times:
        if t > 0:
            s = mgr.integrate(float(t))
        m.realizeDynamics(s)
        out.append((biceps.getFiberForce(s), elbow.getValue(s)))
    return np.asarray(out)


def test_bicep_curl_matches_opensim(curl, tmp_path):
    system, state = curl
    path = tmp_path / "bicep_curl.osim"
    sj.save_osim(system.model, path)
    times = np.concatenate([np.linspace(0.0, 1.0, 11), [10.0]])
    ref = _opensim_run(path, times)
    traj = sj.simulate(system, state, 10.0, ts=jnp.asarray(times), accuracy=1e-8)
    got = np.stack([np.asarray(traj.output(FIBER_FORCE)), np.asarray(traj.output(ELBOW))], axis=1)
    early, late = slice(0, 11), slice(11, 12)
    np.testing.assert_allclose(got[early], ref[early], rtol=0.01)
    np.testing.assert_allclose(got[late], ref[late], rtol=0.02)


def test_elbow_angle_gradients_match_finite_differences(curl):
    """d(elbow angle at 1 s) / d(max isometric force) and / d(excitation level)."""
    system, state = curl

    def elbow_at_1s(f_max, level):
        sys_ = eqx.tree_at(lambda s: s.model.find("/forceset/biceps").max_isometric_force, system, f_max)
        traj = sj.simulate(
            sys_, state, 1.0, jnp.reshape(level, (1,)), solver="tsit5", rtol=1e-10, atol=1e-10, n_outputs=2
        )
        return traj.q[-1, 1]

    f0, a0 = jnp.asarray(200.0), jnp.asarray(0.6)
    g_f, g_a = eqx.filter_grad(lambda x: elbow_at_1s(*x))((f0, a0))
    h_f, h_a = 1e-3, 1e-6
    fd_f = (elbow_at_1s(f0 + h_f, a0) - elbow_at_1s(f0 - h_f, a0)) / (2 * h_f)
    fd_a = (elbow_at_1s(f0, a0 + h_a) - elbow_at_1s(f0, a0 - h_a)) / (2 * h_a)
    assert abs(float(fd_a)) > 1e-3  # the excitation moves the elbow
    np.testing.assert_allclose(float(g_f), float(fd_f), rtol=1e-5)
    np.testing.assert_allclose(float(g_a), float(fd_a), rtol=1e-5)
