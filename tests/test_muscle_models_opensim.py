"""Shipped muscle-driven models against OpenSim 4.6 loading the same file in the same test:
udot, activation and fiber-state derivatives, tendon and fiber forces, path lengths,
lengthening speeds and moment arms at random valid states (issue 6 acceptance)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

import simjax as sj  # noqa: E402
from simjax.io.osim import OsimWarning  # noqa: E402

from _muscle_oracle import assert_close, osim_eval, random_states, sj_eval  # noqa: E402

N_STATES = 50


def _load_both(name):
    path = sj.models.path(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model = sj.load_osim(path)  # strict: nothing skipped
    om = opensim.Model(str(path))
    om.initSystem()
    return model.build(), om


@pytest.mark.parametrize(
    "name, arm_coords",
    [
        ("gait10dof18musc", ("hip_flexion_r", "knee_angle_r", "ankle_angle_r", "lumbar_extension")),
        ("Tug_of_War_Millard", None),
    ],
)
def test_model_matches_opensim_at_random_states(name, arm_coords):
    system, om = _load_both(name)
    muscles = om.getMuscles()
    paths = [muscles.get(i).getAbsolutePathString() for i in range(muscles.getSize())]
    if arm_coords is None:
        cs = om.getCoordinateSet()
        arm_coords = tuple(cs.get(i).getName() for i in range(cs.getSize()))
    st = random_states(om, N_STATES, np.random.default_rng(7))
    ref = osim_eval(om, st, arm_coords)
    got = sj_eval(system, st, paths, arm_coords)
    assert_close("udot", ref["udot"], got["udot"], rtol=1e-6, atol=1e-6 * np.abs(ref["udot"]).max())
    assert_close("zdot", ref["zdot"], got["zdot"], rtol=1e-6, atol=1e-8)
    for k in ("tendon_force", "fiber_force", "activation"):
        # near-zero forces (slack tendons) are compared on the model's force scale
        assert_close(k, ref[k], got[k], rtol=1e-6, atol=1e-9 * max(1.0, np.abs(ref[k]).max()))
    assert_close("length", ref["length"], got["length"], rtol=0, atol=1e-9)
    assert_close("lengthening_speed", ref["lengthening_speed"], got["lengthening_speed"], rtol=0, atol=1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], rtol=0, atol=1e-9)


def test_gait_forward_simulation_matches_opensim():
    """0.5 s of gait10dof18musc with constant excitations, from the equilibrated default
    state, at accuracy 1e-8 in both engines."""
    import jax.numpy as jnp

    level, t_final, accuracy = 0.2, 0.5, 1e-8
    system, _ = _load_both("gait10dof18musc")
    om = opensim.Model(str(sj.models.path("gait10dof18musc")))
    brain = opensim.PrescribedController()
    acts = om.getActuators()
    for i in range(acts.getSize()):
        brain.addActuator(acts.get(i))
        brain.prescribeControlForActuator(acts.get(i).getName(), opensim.Constant(level))
    om.addController(brain)
    s = om.initSystem()
    om.equilibrateMuscles(s)
    mgr = opensim.Manager(om)
    mgr.setIntegratorAccuracy(accuracy)
    mgr.initialize(s)
    s = mgr.integrate(t_final)
    cs = om.getCoordinateSet()
    ref = {cs.get(i).getAbsolutePathString(): cs.get(i).getValue(s) for i in range(cs.getSize())}

    controls = jnp.full(len(system.actuator_names), level)
    state = sj.equilibrate_muscles(system, system.default_state(), controls)
    traj = sj.simulate(system, state, t_final, controls, accuracy=accuracy, n_outputs=2)
    tree = system.topology.tree
    got = {p: float(traj.q[-1, tree.coordinates[p].q]) for p in ref}
    err = max(abs(got[p] - ref[p]) for p in ref)
    assert err < 1e-5, {p: (got[p], ref[p]) for p in ref}


def test_validate_reports_muscle_quantities():
    from simjax.io.osim.validate import validate

    results = {r.name: r for r in validate(sj.models.path("Tug_of_War_Millard"), n_states=10, seed=3)}
    assert {"path lengths", "lengthening speeds", "tendon forces", "moment arms"} <= set(results)
    assert all(r.passed for r in results.values()), results
