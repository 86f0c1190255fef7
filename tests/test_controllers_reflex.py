"""ToyReflexController against OpenSim 4.6: controls, accelerations and state
derivatives at random states of the muscle arm (with other controllers adding to the
same muscles), the controls of the ToyLanding model, and the .osim round trip."""

from __future__ import annotations

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import assert_close, osim_arm, random_states, set_opensim_state, sj_arm

opensim = pytest.importorskip("opensim")

TOY_LANDING = os.path.join(os.path.dirname(__file__), "data", "collection", "ToyLanding__ToyLandingModel.osim")

# (name, OpenSim muscle class, simjax muscle class, args, max_contraction_velocity)
MUSCLES = (
    ("m0", "Thelen2003Muscle", 300.0, 0.12, 0.25, 0.15, 10.0),
    ("m1", "Millard2012EquilibriumMuscle", 200.0, 0.10, 0.20, 0.10, 10.0),
    ("m2", "Thelen2003Muscle", 250.0, 0.09, 0.22, 0.0, 7.0),
)
# (name, muscles, gain, enabled): m0 is driven by two reflexes, m1 by a reflex and a
# PrescribedController; the disabled one must add nothing
REFLEXES = (
    ("Reflexes", ("m0", "m2"), 0.85, True),
    ("R2", ("m0", "m1"), 2.5, True),
    ("Off", ("m0", "m1", "m2"), 7.0, False),
)
PRESCRIBED = 0.2  # constant control of m1 from a PrescribedController


def _osim_model():
    muscles = []
    for name, cls, fmax, lopt, lts, penn, vmax in MUSCLES:
        m = getattr(opensim, cls)(name, fmax, lopt, lts, penn)
        m.set_max_contraction_velocity(vmax)
        muscles.append(m)
    model = osim_arm(muscles)
    for name, members, gain, enabled in REFLEXES:
        c = opensim.ToyReflexController()
        c.setName(name)
        c.set_gain(gain)
        c.setEnabled(enabled)
        for mu in members:
            c.addActuator(model.getMuscles().get(mu))
        model.addController(c)
    p = opensim.PrescribedController()
    p.setName("brain")
    p.addActuator(model.getMuscles().get("m1"))
    p.prescribeControlForActuator("m1", opensim.Constant(PRESCRIBED))
    model.addController(p)
    model.finalizeConnections()
    model.initSystem()
    return model


def _sj_model():
    muscles = [
        getattr(sj, cls)(name, fmax, lopt, lts, penn, max_contraction_velocity=vmax)
        for name, cls, fmax, lopt, lts, penn, vmax in MUSCLES
    ]
    model = sj_arm(muscles)
    for name, members, gain, enabled in REFLEXES:
        model = model.add(
            sj.ToyReflexController(name, tuple(f"/forceset/{m}" for m in members), gain=gain, enabled=enabled)
        )
    return model.add(sj.PrescribedController("brain").prescribe("/forceset/m1", sj.Constant(PRESCRIBED)))


def _osim_at(model, st):
    """OpenSim's controls (Model::computeControls at Velocity stage), udot and zdot."""
    s = model.initSystem()
    cs = model.getCoordinateSet()
    n_act = model.getActuators().getSize()
    out = {"controls": [], "udot": [], "zdot": []}
    for i in range(len(st["q"])):
        set_opensim_state(model, s, st, i)
        model.realizeVelocity(s)
        controls = opensim.Vector(n_act, 0.0)
        model.computeControls(s, controls)
        out["controls"].append([controls.get(k) for k in range(n_act)])
        model.realizeAcceleration(s)
        out["udot"].append([cs.get(c).getAccelerationValue(s) for c in st["coords"]])
        out["zdot"].append([model.getStateVariableDerivativeValue(s, zn) for zn in st["znames"]])
    return {k: np.asarray(v) for k, v in out.items()}


def _sj_at(system, st):
    """simjax's controls (from the controllers), udot and zdot, vmapped over ``st``."""
    tree = system.topology.tree
    cpaths = [system.coordinate_path(c) for c in st["coords"]]
    qi = np.asarray([tree.coordinates[p].q for p in cpaths])
    ui = np.asarray([tree.coordinates[p].u for p in cpaths])
    zi = np.asarray([system.z_names.index(zn) for zn in st["znames"]])
    ai = np.asarray([system.actuator_names.index(a) for a in st["actuators"]])
    base = system.default_state()

    @jax.jit
    @jax.vmap
    def one(q, u, z):
        state = base.replace(q=base.q.at[qi].set(q), u=base.u.at[ui].set(u), z=base.z.at[zi].set(z))
        acc = sj.accelerations(system, state)
        return {"controls": sj.controls(system, state)[ai], "udot": acc.udot[ui], "zdot": acc.zdot[zi]}

    return {k: np.asarray(v) for k, v in one(jnp.asarray(st["q"]), jnp.asarray(st["u"]), jnp.asarray(st["z"])).items()}


def test_reflex_matches_opensim_at_random_states():
    osim_model = _osim_model()
    system = _sj_model().build()
    # speeds up to 8 rad/s: some muscles shorten (no reflex), some stretch past a control of 1
    st = random_states(osim_model, 40, np.random.default_rng(7), speed=8.0)
    ref, got = _osim_at(osim_model, st), _sj_at(system, st)
    c = ref["controls"]
    assert (c[:, 0] == 0).any() and (c[:, 0] > 1).any() and np.all(c[:, 1] >= PRESCRIBED)
    assert_close("controls", ref["controls"], got["controls"], 1e-9, 1e-12)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)
    assert_close("zdot", ref["zdot"], got["zdot"], 1e-6, 1e-10)


def test_reflex_control_formula_and_gain_gradient():
    system = _sj_model().build()
    state = system.set_coordinates(
        system.default_state(), {"elbow_coord_0": 1.0}, speeds={"shoulder_coord_0": -3.0, "elbow_coord_0": 2.0}
    )
    speeds = np.asarray([sj.output(system, state, f"/forceset/{m}|lengthening_speed") for m, *_ in MUSCLES])
    vmax = {m: lopt * v for m, _, _, lopt, _, _, v in MUSCLES}
    expected = np.zeros(3)
    for _, members, gain, enabled in REFLEXES:
        for m in members:
            i = int(m[1])
            expected[i] += enabled * gain * max(speeds[i], 0.0) / vmax[m]
    expected[1] += PRESCRIBED
    np.testing.assert_allclose(np.asarray(sj.controls(system, state)), expected, rtol=1e-12, atol=1e-15)

    # the gain and the muscles' parameters are traced leaves: d control / d gain = reflex / gain
    def m2_control(sys_):
        return sj.controls(sys_, state)[2]

    grads = jax.grad(m2_control)(system)
    g = grads.model.find("/controllerset/Reflexes").gain
    np.testing.assert_allclose(float(g), max(speeds[2], 0.0) / vmax["m2"], rtol=1e-12)


def test_non_muscle_actuators_are_refused():
    model = _sj_model().add(sj.CoordinateActuator("motor", "/jointset/elbow/elbow_coord_0"))
    model = model.add(sj.ToyReflexController("bad", ("/forceset/m0", "/forceset/motor")))
    with pytest.raises(sj.ModelError, match=r"/controllerset/bad.*non-muscle actuator.*motor"):
        model.build()


def test_toy_landing_reflexes_load_strictly_and_match_opensim():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mesh files not shipped
        model = sj.load_osim(TOY_LANDING)
    reflex = model.find("/controllerset/Reflexes")
    assert isinstance(reflex, sj.ToyReflexController) and reflex.enabled
    assert float(reflex.gain) == 0.85 and len(reflex.actuators) == 70
    system = model.build()

    om = opensim.Model(TOY_LANDING)
    s = om.initSystem()
    cs = om.getCoordinateSet()
    coords = [cs.get(i) for i in range(cs.getSize())]
    acts = om.getActuators()
    rng = np.random.default_rng(3)
    Q, U, ref = [], [], []
    for _ in range(6):
        for c in coords:
            if not c.getLocked(s):
                lo, hi = max(c.getRangeMin(), -1.5), min(c.getRangeMax(), 1.5)
                c.setValue(s, rng.uniform(lo, hi), False)
                c.setSpeedValue(s, rng.uniform(-3.0, 3.0))
        om.realizeVelocity(s)
        controls = opensim.Vector(acts.getSize(), 0.0)
        om.computeControls(s, controls)
        ref.append([controls.get(i) for i in range(acts.getSize())])
        Q.append([c.getValue(s) for c in coords])
        U.append([c.getSpeedValue(s) for c in coords])
    ref = np.asarray(ref)
    assert (ref > 0).sum() > 100

    tree = system.topology.tree
    infos = [tree.coordinates[system.coordinate_path(c.getName())] for c in coords]
    qi, ui = np.asarray([i.q for i in infos]), np.asarray([i.u for i in infos])
    ai = np.asarray([system.actuator_names.index(acts.get(i).getName()) for i in range(acts.getSize())])
    base = system.default_state()

    @jax.jit
    @jax.vmap
    def controls(q, u):
        return sj.controls(system, base.replace(q=base.q.at[qi].set(q), u=base.u.at[ui].set(u)))[ai]

    assert_close("ToyLanding controls", ref, np.asarray(controls(jnp.asarray(Q), jnp.asarray(U))), 1e-9, 1e-12)


def test_save_osim_round_trip(tmp_path):
    model = _sj_model()
    first, second = tmp_path / "reflex.osim", tmp_path / "again.osim"
    sj.save_osim(model, first)
    text = first.read_text()
    assert '<ToyReflexController name="Reflexes">' in text and "<gain>0.85</gain>" in text
    back = sj.load_osim(first)
    sj.save_osim(back, second)
    assert second.read_text() == text
    for name, members, gain, enabled in REFLEXES:
        c = back.find(f"/controllerset/{name}")
        assert isinstance(c, sj.ToyReflexController) and c.enabled == enabled and float(c.gain) == gain
        assert c.actuators == tuple(f"/forceset/{m}" for m in members)

    om = opensim.Model(str(first))
    om.initSystem()
    for name, members, gain, enabled in REFLEXES:
        c = opensim.ToyReflexController.safeDownCast(om.getControllerSet().get(name))
        sock = c.getSocket("actuators")
        assert c.get_gain() == gain and c.isEnabled() == enabled
        assert [sock.getConnecteeAsObject(i).getName() for i in range(sock.getNumConnectees())] == list(members)
