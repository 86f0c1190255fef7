"""Millard2012EquilibriumMuscle against OpenSim 4.6: damped, undamped, rigid-tendon and
activation-free members of one group, at random states; its finalize-time checks."""

import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import assert_close, osim_arm, osim_eval, random_states, sj_arm, sj_eval

opensim = pytest.importorskip("opensim")

ARGS = (300.0, 0.12, 0.25, 0.15)
VARIANTS = (
    ("damped", {}),
    ("undamped", {"fiber_damping": 0.0}),
    ("rigid", {"ignore_tendon_compliance": True}),
    ("no_activation", {"ignore_activation_dynamics": True}),
    (
        "custom",
        {
            "fiber_damping": 0.3,
            "maximum_pennation_angle": 1.2,
            "max_contraction_velocity": 8.0,
            "activation_time_constant": 0.02,
            "deactivation_time_constant": 0.05,
            "minimum_activation": 0.05,
        },
    ),
)
CUSTOM_CURVES = {
    "ActiveForceLengthCurve": {"transition_norm_fiber_length": 0.75, "shallow_ascending_slope": 0.7},
    "TendonForceLengthCurve": {"strain_at_one_norm_force": 0.06},
    "FiberForceLengthCurve": {"strain_at_one_norm_force": 0.6},
}


def _osim_muscle(name, props):
    m = opensim.Millard2012EquilibriumMuscle(name, *ARGS)
    for key, value in props.items():
        getattr(m, "set_" + key)(value)
    if name == "custom":
        m.set_min_control(0.05)
        fal = m.upd_ActiveForceLengthCurve()
        fal.set_transition_norm_fiber_length(0.75)
        fal.set_shallow_ascending_slope(0.7)
        m.upd_TendonForceLengthCurve().set_strain_at_one_norm_force(0.06)
        m.upd_FiberForceLengthCurve().set_strain_at_one_norm_force(0.6)
    return m


def _sj_muscle(name, props):
    kwargs = dict(props)
    if name == "custom":
        kwargs["min_control"] = 0.05
        kwargs["ActiveForceLengthCurve"] = sj.muscles.curves.ActiveForceLengthCurve(
            **CUSTOM_CURVES["ActiveForceLengthCurve"]
        )
        kwargs["TendonForceLengthCurve"] = sj.muscles.curves.TendonForceLengthCurve(
            **CUSTOM_CURVES["TendonForceLengthCurve"]
        )
        kwargs["FiberForceLengthCurve"] = sj.muscles.curves.FiberForceLengthCurve(
            **CUSTOM_CURVES["FiberForceLengthCurve"]
        )
    return sj.Millard2012EquilibriumMuscle(name, *ARGS, **kwargs)


def test_millard_matches_opensim_at_random_states():
    osim_model = osim_arm([_osim_muscle(n, p) for n, p in VARIANTS])
    system = sj_arm([_sj_muscle(n, p) for n, p in VARIANTS]).build()
    rng = np.random.default_rng(11)
    st = random_states(osim_model, 100, rng)
    st["controls"] = np.maximum(st["controls"], 0.05)  # the custom muscle's min_control
    coords = st["coords"]
    ref = osim_eval(osim_model, st, coords)
    got = sj_eval(system, st, [f"/forceset/{n}" for n, _ in VARIANTS], coords)
    assert_close("length", ref["length"], got["length"], 0, 1e-9)
    assert_close("lengthening_speed", ref["lengthening_speed"], got["lengthening_speed"], 0, 1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], 0, 1e-9)
    # OpenSim solves the damped fiber velocity to a force tolerance of 1e-10 fiso (3e-8 N)
    assert_close("tendon_force", ref["tendon_force"], got["tendon_force"], 1e-6, 1e-7)
    assert_close("fiber_force", ref["fiber_force"], got["fiber_force"], 1e-6, 1e-7)
    assert_close("fiber_velocity", ref["fiber_velocity"], got["fiber_velocity"], 1e-6, 1e-8)
    assert_close("activation", ref["activation"], got["activation"], 1e-12, 0)
    assert_close("zdot (activation and fiber length derivatives)", ref["zdot"], got["zdot"], 1e-6, 1e-8)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)


def test_state_variables_defaults_and_names():
    system = sj_arm([_sj_muscle(n, p) for n, p in VARIANTS]).build()
    assert system.z_names == (
        "/forceset/damped/activation",
        "/forceset/damped/fiber_length",
        "/forceset/undamped/activation",
        "/forceset/undamped/fiber_length",
        "/forceset/rigid/activation",
        "/forceset/no_activation/fiber_length",
        "/forceset/custom/activation",
        "/forceset/custom/fiber_length",
    )
    z = np.asarray(system.default_state().z)
    # default fiber length 0.1 is above the minimum (0.4441 * 0.12 = 0.0533); activation 0.05
    np.testing.assert_allclose(z[:2], [0.05, 0.1])
    np.testing.assert_allclose(z[6], 0.05)  # custom: minimum_activation 0.05 clamps the default
    model = system.model_from_state(system.default_state().replace(z=z + 0.01))
    assert float(model.find("/forceset/damped").default_fiber_length) == pytest.approx(0.11)


def test_bad_properties_name_the_component():
    def build(**kwargs):
        return sj_arm([sj.Millard2012EquilibriumMuscle("biceps", *ARGS, **kwargs)]).build()

    with pytest.raises(sj.ModelError, match=r"/forceset/biceps.*optimal_fiber_length.*-0.1"):
        sj_arm([sj.Millard2012EquilibriumMuscle("biceps", 300.0, -0.1, 0.25)]).build()
    with pytest.raises(sj.ModelError, match=r"/forceset/biceps.*minimum_activation"):
        build(fiber_damping=0.0, minimum_activation=0.001, min_control=0.001)
    with pytest.raises(sj.ModelError, match=r"/forceset/biceps.*min_control"):
        build(min_control=0.0)
    with pytest.raises(sj.ModelError, match=r"/forceset/biceps.*pennation_angle_at_optimal"):
        sj_arm([sj.Millard2012EquilibriumMuscle("biceps", 300.0, 0.12, 0.25, 1.6)]).build()
