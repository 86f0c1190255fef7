"""Probes against OpenSim 4.6: Umberger2010MuscleMetabolicsProbe.

The collection's gait10dof18musc metabolics model is extended with four more probes
that switch the probe's options (basal rate, Bhargava recruitment, negative work, the
clamps, effort scaling, provided and computed muscle masses, gain, 'integrate' with
initial conditions, total only), so that one group evaluation covers every branch.
Both engines load the same file; ``probe_outputs`` and the integrals' derivatives are
compared at random states (simjax: one compiled, vmapped evaluation), and the rate
formula alone on OpenSim's own muscle quantities. An arm integrates its probe over a
0.3 s simulation in both engines. The collection's four metabolics models load
strictly and are written back identically; OpenSim reads the written files.
"""

import glob
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.control.probes import probe_group
from simjax.forward import Context
from simjax.io.osim import OsimWarning, dumps_osim, loads_osim, save_osim
from simjax.control.metabolics import Umberger2010MuscleMetabolicsProbe, umberger2010_rates

from _muscle_oracle import assert_close, random_states, set_opensim_state

COLLECTION = os.path.join(os.path.dirname(__file__), "data", "collection")  # OpenSim's model collection
METABOLICS = os.path.join(COLLECTION, "Gait10dof18musc__subject01_metabolics.osim")

_P = "Umberger2010MuscleMetabolicsProbe"


def _param(name, ratio, extra=""):
    return (
        f'<{_P}_MetabolicMuscleParameter name="{name}"><ratio_slow_twitch_fibers>{ratio}'
        f"</ratio_slow_twitch_fibers>{extra}</{_P}_MetabolicMuscleParameter>"
    )


# an integrating probe with every option flipped: basal on, no Bhargava model, no negative work, no clamps
_INTEGRATE = f"""
<{_P} name="metabolics_int">
  <probe_operation>integrate</probe_operation>
  <initial_conditions_for_integration>0.5 -1 2 3.25 0.125</initial_conditions_for_integration>
  <gain>2</gain>
  <basal_rate_on>true</basal_rate_on>
  <basal_coefficient>1.3</basal_coefficient>
  <basal_exponent>0.9</basal_exponent>
  <aerobic_factor>1.2</aerobic_factor>
  <muscle_effort_scaling_factor>0.8</muscle_effort_scaling_factor>
  <use_Bhargava_recruitment_model>false</use_Bhargava_recruitment_model>
  <include_negative_mechanical_work>false</include_negative_mechanical_work>
  <forbid_negative_total_power>false</forbid_negative_total_power>
  <enforce_minimum_heat_rate_per_muscle>false</enforce_minimum_heat_rate_per_muscle>
  <report_total_metabolics_only>false</report_total_metabolics_only>
  <{_P}_MetabolicMuscleParameterSet><objects>
    {
    _param(
        "soleus_r",
        0.8,
        "<use_provided_muscle_mass>true</use_provided_muscle_mass><provided_muscle_mass>0.75</provided_muscle_mass>",
    )
}
    {_param("vasti_l", 0.5, "<specific_tension>300000</specific_tension><density>1100</density>")}
    {_param("hamstrings_r", 0.49)}
  </objects><groups /></{_P}_MetabolicMuscleParameterSet>
</{_P}>"""

# total only, heat rates without activation/maintenance, no work rate; the clamp on
_TOTAL = f"""
<{_P} name="metabolics_total">
  <gain>0.5</gain>
  <activation_maintenance_rate_on>false</activation_maintenance_rate_on>
  <mechanical_work_rate_on>false</mechanical_work_rate_on>
  <aerobic_factor>1</aerobic_factor>
  <{_P}_MetabolicMuscleParameterSet><objects>
    {_param("glut_max_r", 0.55)}{_param("tib_ant_l", 0.7)}{_param("gastroc_r", 0.54)}
  </objects><groups /></{_P}_MetabolicMuscleParameterSet>
</{_P}>"""

# no shortening rate, Bhargava model, the enforced minimum (inactive: shortening off)
_NO_SHORTENING = f"""
<{_P} name="metabolics_am">
  <shortening_rate_on>false</shortening_rate_on>
  <basal_rate_on>false</basal_rate_on>
  <forbid_negative_total_power>false</forbid_negative_total_power>
  <report_total_metabolics_only>false</report_total_metabolics_only>
  <{_P}_MetabolicMuscleParameterSet><objects>
    {_param("rect_fem_l", 0.39)}{_param("iliopsoas_r", 0.5)}
  </objects><groups /></{_P}_MetabolicMuscleParameterSet>
</{_P}>"""

# zero effort: zero excitation and activation (the recruitment model's special case, A = 0)
_REST = f"""
<{_P} name="metabolics_rest">
  <muscle_effort_scaling_factor>0</muscle_effort_scaling_factor>
  <report_total_metabolics_only>false</report_total_metabolics_only>
  <{_P}_MetabolicMuscleParameterSet><objects>{_param("bifemsh_l", 0.53)}</objects>
  <groups /></{_P}_MetabolicMuscleParameterSet>
</{_P}>"""

PROBES = ("metabolics", "metabolics_int", "metabolics_total", "metabolics_am", "metabolics_rest")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    text = open(METABOLICS).read()
    end = f"</{_P}>\n"  # after the file's probe
    text = text.replace(end, end + _INTEGRATE + _TOTAL + _NO_SHORTENING + _REST, 1)
    assert text.count(f"<{_P} ") == 5
    path = tmp_path_factory.mktemp("probes") / "metabolics_probes.osim"
    path.write_text(text)
    return str(path)


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)  # missing display meshes
        return sj.load_osim(path, **kw)


def _osim_eval(om, st, zp):
    """OpenSim's probe outputs and the integrals' derivatives at each state (the
    integrating probe's anonymous Z block follows the named state variables)."""
    import opensim as osim

    s = om.initSystem()
    nz = sum(1 for i in range(om.getNumStateVariables()) if om.getStateVariableNames().get(i).startswith("/forceset"))
    assert s.getNZ() == nz + zp.shape[1]
    probes = [om.getProbeSet().get(p) for p in PROBES]
    out = {p: [] for p in PROBES}
    out["zdot"] = []
    for i in range(len(st["q"])):
        set_opensim_state(om, s, st, i)
        z = s.updZ()
        for j in range(zp.shape[1]):
            z.set(nz + j, float(zp[i, j]))
        s.invalidateAll(osim.Stage(osim.Stage.Time))  # else SimTK's Integrate measure keeps its old value
        om.realizeVelocity(s)
        om.setControls(s, osim.Vector(st["controls"][i].tolist()))
        om.realizeReport(s)
        for p, probe in zip(PROBES, probes):
            v = probe.getProbeOutputs(s)
            out[p].append([v.get(k) for k in range(v.size())])
        out["zdot"].append([s.getZDot().get(nz + j) for j in range(zp.shape[1])])
    return {k: np.asarray(v) for k, v in out.items()}


def _sj_eval(system, st, zp_names, zp):
    tree = system.topology.tree
    cpaths = [system.coordinate_path(c) for c in st["coords"]]
    qi = np.asarray([tree.coordinates[p].q for p in cpaths])
    ui = np.asarray([tree.coordinates[p].u for p in cpaths])
    zi = np.asarray([system.z_names.index(zn) for zn in list(st["znames"]) + list(zp_names)], np.int64)
    ci = np.asarray([system.actuator_names.index(a) for a in st["actuators"]])
    base = system.default_state()
    n = len(st["q"])
    states = sj.State(
        t=jnp.zeros(n),
        q=jnp.broadcast_to(base.q, (n, tree.nq)).at[:, qi].set(st["q"]),
        u=jnp.broadcast_to(base.u, (n, tree.nu)).at[:, ui].set(st["u"]),
        z=jnp.broadcast_to(base.z, (n, len(system.z_names))).at[:, zi].set(np.concatenate([st["z"], zp], 1)),
        d=jnp.broadcast_to(base.d, (n,) + base.d.shape),
    )
    controls = jnp.zeros((n, len(system.actuator_names))).at[:, ci].set(st["controls"])
    zpi = zi[len(st["znames"]) :]

    def one(state, c):
        ctx = Context(system, state, c)
        out = {}
        for p in PROBES:
            comp = system.model.find(f"/probeset/{p}")
            out[p] = comp.output_specs()["probe_outputs"].fn(comp, ctx.at(f"/probeset/{p}"))
        out["zdot"] = ctx.acc.zdot[zpi]
        return out

    return {k: np.asarray(v) for k, v in jax.jit(jax.vmap(one))(states, controls).items()}


@pytest.fixture(scope="module")
def oracle(model_file):
    """Both engines on the same file at three random states: ``(model, system, st,
    zp_names, zp, OpenSim model, OpenSim's values)``."""
    osim = pytest.importorskip("opensim")
    model = _load(model_file)  # strict: every probe is modelled
    system = model.build()
    zp_names = tuple(
        f"/probeset/metabolics_int/{lab}" for lab in model.find("/probeset/metabolics_int").probe_output_labels()
    )
    om = osim.Model(model_file)
    om.initSystem()
    rng = np.random.default_rng(7)
    st = random_states(om, 3, rng)
    zp = rng.uniform(-5.0, 5.0, (3, len(zp_names)))
    return model, system, st, zp_names, zp, om, _osim_eval(om, st, zp)


def test_umberger2010_matches_opensim(oracle):
    model, system, st, zp_names, zp, om, ref = oracle
    assert all(n in system.z_names for n in zp_names)
    assert not any(n.startswith("/probeset/metabolics/") for n in system.z_names)  # 'value' owns no state
    got = _sj_eval(system, st, zp_names, zp)
    # OpenSim's muscle states (fiber velocities, forces) agree to ~1e-10; entries that are 0 in exact
    # arithmetic (the negative-power clamp) are rounding noise in both engines, hence the atol (W)
    for k in PROBES + ("zdot",):
        assert_close(k, ref[k], got[k], rtol=1e-8, atol=1e-8)
    assert np.ptp(ref["metabolics"]) > 0

    # muscle masses: computed from max_isometric_force and optimal_fiber_length, or provided
    import opensim as osim

    for p in ("metabolics", "metabolics_int"):
        oprobe = osim.Umberger2010MuscleMetabolicsProbe.safeDownCast(om.getProbeSet().get(p))
        for name, mass in model.find(f"/probeset/{p}").muscle_masses(model).items():
            assert float(mass) == pytest.approx(oprobe.getMuscleMass(name), rel=1e-14)


def test_umberger2010_formula_is_opensims(oracle):
    """Given OpenSim's own muscle quantities, every muscle's rate is OpenSim's to
    rounding: the probe adds no error of its own."""
    import opensim as osim

    model, system, st, _, _, om, ref = oracle
    group = probe_group(Context(system, system.default_state()), "/probeset/metabolics")
    static, params = group.static, Umberger2010MuscleMetabolicsProbe.group_params(model, group)
    muscles = om.getMuscles()
    ms = [muscles.get(p.rsplit("/", 1)[1]) for p in static["muscles"]]
    getters = {
        "activation": "getActivation",
        "excitation": "getControl",
        "active_fiber_force": "getActiveFiberForce",
        "normalized_fiber_length": "getNormalizedFiberLength",
        "fiber_velocity": "getFiberVelocity",
        "active_force_length_multiplier": "getActiveForceLengthMultiplier",
    }
    s = om.initSystem()
    for i in range(len(st["q"])):
        set_opensim_state(om, s, st, i)
        om.realizeVelocity(s)
        om.setControls(s, osim.Vector(st["controls"][i].tolist()))
        om.realizeReport(s)
        q = {k: jnp.asarray([getattr(m, g)(s) for m in ms]) for k, g in getters.items()}
        q.update(
            {
                k: jnp.asarray([getattr(m, g)() for m in ms])
                for k, g in (
                    ("max_isometric_force", "getMaxIsometricForce"),
                    ("optimal_fiber_length", "getOptimalFiberLength"),
                    ("max_contraction_velocity", "getMaxContractionVelocity"),
                )
            }
        )
        edot = np.asarray(umberger2010_rates(static, params, q))
        for j, p in enumerate(group.paths):
            name = p.rsplit("/", 1)[1]
            per_muscle = ref["zdot"][i] if name == "metabolics_int" else ref[name][i]
            if model.find(p).report_total_metabolics_only:
                continue
            np.testing.assert_allclose(edot[static["probe"] == j], per_muscle[2:], rtol=1e-13, atol=1e-12)


def test_probe_operations_and_checks(model_file):
    model = _load(model_file)
    p = model.find("/probeset/metabolics_int")
    assert p.z_variables() == p.probe_output_labels() and len(p.z_variables()) == 5
    assert p.replace(enabled=False).z_variables() == ()
    # OpenSim's fallback: initial conditions of the wrong size are zeros
    assert np.all(np.asarray(p.replace(initial_conditions_for_integration=(1.0,)).initial_conditions()) == 0)
    # model_from_state folds the integrals into the initial conditions
    folded = p.with_defaults_from_state(jnp.arange(5.0), None)
    assert np.allclose(folded.initial_conditions(), np.asarray(p.initial_conditions()) + np.arange(5.0))
    with pytest.raises(sj.ModelError, match="probe_operation"):
        model.set("/probeset/metabolics", probe_operation="sum").build()
    with pytest.raises(sj.ModelError, match="ratio_slow_twitch_fibers"):
        bad = p.muscle_parameters[0].__class__("soleus_r", ratio_slow_twitch_fibers=1.5)
        model.set("/probeset/metabolics_int", muscle_parameters=(bad,)).build()
    with pytest.raises(sj.ModelError, match="not a muscle"):
        model.update("/probeset/metabolics_am", lambda c: c.add_muscle("no_such_muscle")).build()
    # operations OpenSim computes from the simulation's history are read but not evaluated
    system = model.set("/probeset/metabolics", probe_operation="maximum").build()
    with pytest.raises(sj.ModelError, match="maximum"):
        sj.output(system, system.default_state(), "/probeset/metabolics|probe_outputs")
    system = model.set("/probeset/metabolics", enabled=False).build()
    with pytest.raises(sj.ModelError, match="disabled"):
        sj.output(system, system.default_state(), "/probeset/metabolics|probe_outputs")


def test_built_probe_from_the_api():
    probe = (
        sj.Umberger2010MuscleMetabolicsProbe("metabolics", report_total_metabolics_only=False)
        .add_muscle("soleus_r", 0.8)
        .add_muscle("vasti_r", 0.5, muscle_mass=2.0)
    )
    assert probe.probe_output_labels() == (
        "metabolics_TOTAL",
        "metabolics_BASAL",
        "metabolics_soleus_r",
        "metabolics_vasti_r",
    )
    assert probe.remove_muscle("soleus_r").probe_output_labels()[2:] == ("metabolics_vasti_r",)
    model = sj.Model("m").add(probe)
    assert model.find("/probeset/metabolics") is not None
    text = dumps_osim(model)
    assert "<provided_muscle_mass>2</provided_muscle_mass>" in text
    assert dumps_osim(loads_osim(text)) == text


@pytest.mark.parametrize(
    "path", sorted(glob.glob(os.path.join(COLLECTION, "Gait10dof18musc__subject01_metabolics*"))), ids=os.path.basename
)
def test_collection_models_round_trip(path, tmp_path):
    osim = pytest.importorskip("opensim")
    model = _load(path)  # strict
    first = dumps_osim(model)
    assert dumps_osim(loads_osim(first)) == first
    out = tmp_path / "written.osim"
    save_osim(model, out)
    values = []
    for f in (path, str(out)):
        om = osim.Model(f)
        s = om.initSystem()
        om.realizeReport(s)
        v = om.getProbeSet().get("metabolics").getProbeOutputs(s)
        values.append([v.get(i) for i in range(v.size())])
    assert values[0] == values[1]
    assert re.search(r"<Umberger2010MuscleMetabolicsProbe name=\"metabolics\">", first)


def _arm_with_probes(osim):
    """The two-muscle arm of ``_muscle_oracle`` with an integrating and a 'value'
    metabolics probe and constant excitations, built in OpenSim."""
    from _muscle_oracle import osim_arm

    args = (300.0, 0.12, 0.25, 0.15)
    om = osim_arm([osim.Millard2012EquilibriumMuscle("m0", *args), osim.Millard2012EquilibriumMuscle("m1", *args)])
    for name, op in (("met_int", "integrate"), ("met", "value")):
        p = osim.Umberger2010MuscleMetabolicsProbe(True, True, True, True)
        p.setName(name)
        om.addProbe(p)
        p.addMuscle("m0", 0.5)
        p.addMuscle("m1", 0.3, 0.4)  # a provided mass
        p.setOperation(op)
        p.set_report_total_metabolics_only(False)
        if op == "integrate":
            p.setInitialConditions(osim.Vector([1.0, 2.0, 3.0, 4.0]))
    brain = osim.PrescribedController()
    brain.setName("brain")
    for name, u in (("m0", 0.6), ("m1", 0.3)):
        brain.addActuator(om.getMuscles().get(name))
        brain.prescribeControlForActuator(name, osim.Constant(u))
    om.addController(brain)
    om.finalizeConnections()
    return om


def test_integrate_over_a_simulation_matches_opensim(tmp_path):
    """'integrate': the integrals are state variables that the simulation carries; after
    0.3 s of the arm, OpenSim's and simjax's integrals agree to the integrators'
    accuracy."""
    osim = pytest.importorskip("opensim")
    om = _arm_with_probes(osim)
    s = om.initSystem()
    om.equilibrateMuscles(s)
    names = [om.getStateVariableNames().get(i) for i in range(om.getNumStateVariables())]
    initial = {n: om.getStateVariableValue(s, n) for n in names}
    manager = osim.Manager(om)
    manager.setIntegratorAccuracy(1e-8)
    manager.initialize(s)
    s = manager.integrate(0.3)
    om.realizeReport(s)
    v = om.getProbeSet().get("met_int").getProbeOutputs(s)
    ref = np.array([v.get(i) for i in range(v.size())])
    path = tmp_path / "arm_probes.osim"
    om.printToXML(str(path))

    system = sj.load_osim(path).build()
    assert system.z_names[-4:] == tuple(f"/probeset/met_int/met_int_{n}" for n in ("TOTAL", "BASAL", "m0", "m1"))
    start = system.default_state()
    for n, v in initial.items():  # OpenSim's equilibrated fiber lengths
        start = system.set_state_variable(start, n, v)
    traj = sj.simulate(system, start, 0.3, accuracy=1e-8)
    got = np.asarray(traj.output("/probeset/met_int|probe_outputs"))
    assert_close("integrals", ref, got[-1], rtol=1e-6, atol=0.0)
    # at t = 0 the integrals are the initial conditions; the basal rate is gain * 1.2 W/kg * 2.1 kg
    assert np.allclose(got[0], [1.0, 2.0, 3.0, 4.0])
    assert got[-1][1] == pytest.approx(2.0 + 1.2 * 2.1 * 0.3, rel=1e-12)

    # derivatives: of the 'value' probe's total with respect to the excitations, against central
    # differences, with excitation above activation (m0, m1) and below it (m0 at activation 0.9)
    controls = jnp.asarray([0.6, 0.3])
    f = jax.jit(lambda state, c: sj.output(system, state, "/probeset/met|probe_outputs", c)[0])
    df = jax.jit(jax.grad(f, argnums=1))
    h = 1e-6
    for state in (start, system.set_state_variable(start, "/forceset/m0/activation", 0.9)):
        fd = [(f(state, controls.at[k].add(h)) - f(state, controls.at[k].add(-h))) / (2 * h) for k in range(2)]
        np.testing.assert_allclose(df(state, controls), fd, rtol=1e-6)
