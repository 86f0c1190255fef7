"""RigidTendonMuscle against OpenSim 4.6 at random states."""

import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import assert_close, osim_arm, osim_eval, random_states, sj_arm, sj_eval

opensim = pytest.importorskip("opensim")


def test_rigid_tendon_matches_opensim_at_random_states():
    osim_model = osim_arm(
        [
            opensim.RigidTendonMuscle("plain", 300.0, 0.12, 0.25, 0.0),
            opensim.RigidTendonMuscle("pennate", 400.0, 0.1, 0.26, 0.3),
        ]
    )
    system = sj_arm(
        [sj.RigidTendonMuscle("plain", 300.0, 0.12, 0.25, 0.0), sj.RigidTendonMuscle("pennate", 400.0, 0.1, 0.26, 0.3)]
    ).build()
    assert system.z_names == ()
    st = random_states(osim_model, 100, np.random.default_rng(13))
    coords = st["coords"]
    ref = osim_eval(osim_model, st, coords)
    got = sj_eval(system, st, ["/forceset/plain", "/forceset/pennate"], coords)
    assert_close("length", ref["length"], got["length"], 0, 1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], 0, 1e-9)
    for key in ("tendon_force", "fiber_force", "fiber_velocity", "activation"):
        assert_close(key, ref[key], got[key], 1e-6, 1e-9)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)


def test_controls_outside_bounds_are_errors():
    system = sj_arm([sj.RigidTendonMuscle("plain", 300.0, 0.12, 0.25)]).build()
    state = system.default_state()
    with pytest.raises(Exception, match=r"/forceset/plain"):
        sj.forward_dynamics(system, state, controls=np.array([1.5]))
