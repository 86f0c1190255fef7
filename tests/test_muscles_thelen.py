"""Thelen2003Muscle against OpenSim 4.6 at random states; its finalize-time checks."""

import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import assert_close, osim_arm, osim_eval, random_states, sj_arm, sj_eval

opensim = pytest.importorskip("opensim")

ARGS = (300.0, 0.12, 0.25, 0.15)
VARIANTS = (
    ("default", {}),
    (
        "arm26_like",
        {
            "FmaxTendonStrain": 0.033,
            "KshapeActive": 0.5,
            "KshapePassive": 4.0,
            "Af": 0.3,
            "Flen": 1.8,
            "activation_time_constant": 0.01,
            "deactivation_time_constant": 0.04,
        },
    ),
    ("unpennated", {"fv_linear_extrap_threshold": 0.9, "minimum_activation": 0.02}),
)


def _osim_muscle(name, props):
    args = ARGS if name != "unpennated" else ARGS[:3] + (0.0,)
    m = opensim.Thelen2003Muscle(name, *args)
    for key, value in props.items():
        getattr(m, "set_" + key)(value)
    if name == "unpennated":
        m.set_min_control(0.02)
    return m


def _sj_muscle(name, props):
    args = ARGS if name != "unpennated" else ARGS[:3] + (0.0,)
    kwargs = dict(props, min_control=0.02) if name == "unpennated" else props
    return sj.Thelen2003Muscle(name, *args, **kwargs)


def test_thelen_matches_opensim_at_random_states():
    osim_model = osim_arm([_osim_muscle(n, p) for n, p in VARIANTS])
    system = sj_arm([_sj_muscle(n, p) for n, p in VARIANTS]).build()
    rng = np.random.default_rng(12)
    st = random_states(osim_model, 100, rng)
    coords = st["coords"]
    ref = osim_eval(osim_model, st, coords)
    got = sj_eval(system, st, [f"/forceset/{n}" for n, _ in VARIANTS], coords)
    assert_close("length", ref["length"], got["length"], 0, 1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], 0, 1e-9)
    assert_close("tendon_force", ref["tendon_force"], got["tendon_force"], 1e-6, 1e-9)
    assert_close("fiber_force", ref["fiber_force"], got["fiber_force"], 1e-6, 1e-9)
    assert_close("fiber_velocity", ref["fiber_velocity"], got["fiber_velocity"], 1e-6, 1e-10)
    assert_close("zdot (activation and fiber length derivatives)", ref["zdot"], got["zdot"], 1e-6, 1e-10)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)


def test_bad_properties_name_the_component():
    with pytest.raises(sj.ModelError, match=r"/forceset/tri.*Flen"):
        sj_arm([sj.Thelen2003Muscle("tri", *ARGS, Flen=0.9)]).build()
    with pytest.raises(sj.ModelError, match=r"/forceset/tri.*ignore_tendon_compliance"):
        sj_arm([sj.Thelen2003Muscle("tri", *ARGS, ignore_tendon_compliance=True)]).build()
    with pytest.raises(sj.ModelError, match=r"/forceset/tri.*min_control"):
        sj_arm([sj.Thelen2003Muscle("tri", *ARGS, min_control=0.0)]).build()
