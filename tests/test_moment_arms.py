"""Moment arms: OpenSim's definition (MomentArmSolver) with coupled and with locked
coordinates, against OpenSim 4.6; the free case equals -dL/dq.

(A coordinate both locked and coupled to the one asked about admits no motion; OpenSim's
answer there comes from an inexact projection and is not reproduced.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import assert_close, osim_arm, sj_arm
from simjax.analysis.moment_arms import coupling_vectors

opensim = pytest.importorskip("opensim")

COORDS = ("shoulder_coord_0", "elbow_coord_0")


def _models(lock_shoulder=False):
    """The arm with the elbow coupled to the shoulder, or (``lock_shoulder``) with the
    shoulder locked instead."""
    om = osim_arm(
        [opensim.RigidTendonMuscle("m0", 300.0, 0.12, 0.25, 0.1), opensim.RigidTendonMuscle("m1", 300.0, 0.1, 0.2, 0.0)]
    )
    if not lock_shoulder:
        cc = opensim.CoordinateCouplerConstraint()
        cc.setName("coupler")
        cc.setIndependentCoordinateNames(opensim.ArrayStr("shoulder_coord_0", 1))
        cc.setDependentCoordinateName("elbow_coord_0")
        cc.setFunction(opensim.LinearFunction(0.6, 0.4))
        om.addConstraint(cc)
    else:
        om.updCoordinateSet().get("shoulder_coord_0").set_locked(True)
    om.finalizeConnections()
    om.initSystem()
    model = sj_arm(
        [sj.RigidTendonMuscle("m0", 300.0, 0.12, 0.25, 0.1), sj.RigidTendonMuscle("m1", 300.0, 0.1, 0.2, 0.0)]
    )
    if not lock_shoulder:
        model = model.add(
            sj.CoordinateCouplerConstraint(
                name="coupler",
                independent_coordinate="/jointset/shoulder/shoulder_coord_0",
                dependent_coordinate="/jointset/elbow/elbow_coord_0",
                coupled_coordinates_function=sj.LinearFunction((0.6, 0.4)),
            )
        )
    else:
        model = model.set("/jointset/shoulder/shoulder_coord_0", locked=True)
    return om, model.build()


@pytest.mark.parametrize("lock_shoulder", [False, True])
def test_coupled_moment_arms_match_opensim(lock_shoulder):
    om, system = _models(lock_shoulder)
    s = om.initSystem()
    cs = om.getCoordinateSet()
    muscles = [om.getMuscles().get(i) for i in range(2)]
    rng = np.random.default_rng(31)
    shoulder = rng.uniform(-1, 1, 50)
    q = np.c_[shoulder, 0.6 * shoulder + 0.4]
    if lock_shoulder:  # OpenSim does not change a locked coordinate's value
        q = np.c_[np.zeros(50), rng.uniform(0.0, 2.0, 50)]
    ref = []
    for qi in q:
        for c, v in zip(COORDS, qi):
            cs.get(c).setValue(s, float(v), False)
        om.realizePosition(s)
        ref.append([[mu.computeMomentArm(s, cs.get(c)) for c in COORDS] for mu in muscles])
    arms = jax.jit(
        jax.vmap(
            lambda qi: sj.moment_arms(
                system, system.default_state().replace(q=qi), ("/forceset/m0", "/forceset/m1"), COORDS
            )
        )
    )
    assert_close("moment_arm", np.asarray(ref), arms(jnp.asarray(q)), 0, 1e-9)
    # coupled: moving the shoulder drags the elbow along at 0.6; locked: the lock of the
    # coordinate itself is released, as OpenSim releases it
    C = coupling_vectors(system, system.default_state().replace(q=jnp.asarray(q[0])), COORDS)
    expected = [[1.0, 0.0], [0.0, 1.0]] if lock_shoulder else [[1.0, 0.6], [1 / 0.6, 1.0]]
    np.testing.assert_allclose(C, expected, rtol=1e-12, atol=1e-15)


def test_free_moment_arm_is_minus_length_gradient():
    system = sj_arm([sj.Millard2012EquilibriumMuscle("m0", 300.0, 0.12, 0.25, 0.1)]).build()
    state = system.default_state().replace(q=jnp.asarray([0.3, 1.1]))

    def length(q):
        return sj.output(system, state.replace(q=q), "/forceset/m0/path|length")

    grad = jax.grad(length)(state.q)
    arms = [sj.moment_arm(system, state, "/forceset/m0", c) for c in COORDS]
    np.testing.assert_allclose(arms, -np.asarray(grad), rtol=1e-13)
    # the path itself, by coordinate path
    r = sj.moment_arm(system, state, "/forceset/m0/path", "/jointset/elbow/elbow_coord_0")
    np.testing.assert_allclose(r, arms[1], rtol=1e-15)
    # central differences of the length
    h = 1e-6
    fd = -(length(state.q + jnp.asarray([0.0, h])) - length(state.q - jnp.asarray([0.0, h]))) / (2 * h)
    np.testing.assert_allclose(arms[1], fd, rtol=1e-7)
    with pytest.raises(KeyError, match="/bodyset/humerus"):
        sj.moment_arm(system, state, "/bodyset/humerus", "elbow_coord_0")
