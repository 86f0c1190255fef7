"""DeGrooteFregly2016Muscle against OpenSim 4.6 at random states: explicit, implicit,
damped and rigid-tendon members of one group; its finalize-time checks.

OpenSim 4.6 keeps the activation-dynamics constants in function-level statics (the
first muscle evaluated sets them for all), so every muscle here uses the defaults, and
OpenSim is evaluated in a fresh process (``_fresh_process``).
"""

import numpy as np
import pytest

import simjax as sj
from _fresh_process import in_fresh_process
from _muscle_oracle import assert_close, osim_arm, osim_eval, random_states, select, sj_arm, sj_eval

opensim = pytest.importorskip("opensim")

ARGS = (300.0, 0.12, 0.25, 0.15)
VARIANTS = (
    ("explicit", {}),
    (
        "damped",
        {
            "fiber_damping": 0.05,
            "active_force_width_scale": 1.3,
            "passive_fiber_strain_at_one_norm_force": 0.5,
            "tendon_strain_at_one_norm_force": 0.06,
        },
    ),
    ("implicit", {"tendon_compliance_dynamics_mode": "implicit"}),
    ("rigid", {"ignore_tendon_compliance": True, "ignore_passive_fiber_force": True}),
    ("no_activation", {"ignore_activation_dynamics": True}),
)


def _osim_muscle(name, props):
    m = opensim.DeGrooteFregly2016Muscle()
    m.setName(name)
    m.set_max_isometric_force(ARGS[0])
    m.set_optimal_fiber_length(ARGS[1])
    m.set_tendon_slack_length(ARGS[2])
    m.set_pennation_angle_at_optimal(ARGS[3])
    for key, value in props.items():
        getattr(m, "set_" + key)(value)
    return m


def _opensim_reference(st):
    """OpenSim's values at the states ``st`` (``osim_eval``), in this process."""
    return osim_eval(osim_arm([_osim_muscle(n, p) for n, p in VARIANTS]), st, st["coords"])


def test_degroote_matches_opensim_at_random_states():
    osim_model = osim_arm([_osim_muscle(n, p) for n, p in VARIANTS])
    system = sj_arm([sj.DeGrooteFregly2016Muscle(n, *ARGS, **p) for n, p in VARIANTS]).build()
    assert system.d_names == ("/forceset/implicit/implicitderiv_normalized_tendon_force",)
    rng = np.random.default_rng(14)
    n = 400
    st = random_states(
        osim_model,
        n,
        rng,
        samplers={
            "activation": lambda m, k, r: r.uniform(0.3, 1.0, k),
            "normalized_tendon_force": lambda m, k, r: r.uniform(0.05, 0.7, k),
        },
    )
    st["dnames"] = ["/forceset/implicit/implicitderiv_normalized_tendon_force"]
    st["d"] = rng.uniform(-2.0, 2.0, (n, 1))
    coords = st["coords"]
    ref = in_fresh_process(_opensim_reference, st)
    # keep states whose fibers are within the force-velocity curve's meaningful range
    keep = np.flatnonzero(np.all(np.abs(ref["normalized_fiber_velocity"]) < 1.5, axis=1))[:100]
    assert len(keep) == 100
    ref = select(ref, keep)
    got = sj_eval(system, select(st, keep), [f"/forceset/{n}" for n, _ in VARIANTS], coords)
    assert_close("length", ref["length"], got["length"], 0, 1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], 0, 1e-9)
    for key in ("tendon_force", "fiber_force", "fiber_velocity", "activation"):
        assert_close(key, ref[key], got[key], 1e-6, 1e-9)
    assert_close("zdot (activation and normalized tendon force derivatives)", ref["zdot"], got["zdot"], 1e-6, 1e-9)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)


def test_bad_properties_name_the_component():
    with pytest.raises(sj.ModelError, match=r"/forceset/m.*optimal_force"):
        sj_arm([sj.DeGrooteFregly2016Muscle("m", *ARGS, optimal_force=2.0)]).build()
    with pytest.raises(sj.ModelError, match=r"/forceset/m.*active_force_width_scale"):
        sj_arm([sj.DeGrooteFregly2016Muscle("m", *ARGS, active_force_width_scale=0.5)]).build()
    with pytest.raises(sj.ModelError, match=r"/forceset/m.*tendon_compliance_dynamics_mode"):
        sj_arm([sj.DeGrooteFregly2016Muscle("m", *ARGS, tendon_compliance_dynamics_mode="sideways")]).build()
