"""Schutte1993Muscle_Deprecated against OpenSim 4.6 on the wrist model (all 25 of its
muscles are of this class): state derivatives, accelerations, tendon forces and path
lengths at random states, the fiber lengths of ``equilibrate_muscles``, and the
``.osim`` round trip.

The wrist model's bodies are massless (OpenSim's accelerations are NaN there), so
the dynamics are compared with every body given the same small mass in both engines.
Its coupled auxiliary coordinates have ranges of +-99999.9; they are drawn in [-1, 1].
Half of the muscles of a second copy of the file lose their passive force-length curve,
so that OpenSim's default exponential passive force is exercised too.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import assert_close, osim_eval, random_states, sj_eval

opensim = pytest.importorskip("opensim")

WRIST = Path(__file__).parent / "data" / "collection" / "WristModel__wrist.osim"
pytestmark = pytest.mark.skipif(not WRIST.exists(), reason="the wrist model is not available")

MASS, INERTIA = 0.2, (2e-4, 3e-4, 4e-4)
N_MUSCLES = 25


def _load(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sj.io.osim.OsimWarning)  # missing mesh files (display only)
        return sj.load_osim(path, **kwargs)


def _osim(path, masses=False):
    m = opensim.Model(str(path))
    if masses:
        bodies = m.getBodySet()
        for i in range(bodies.getSize()):
            bodies.get(i).setMass(MASS)
            bodies.get(i).setInertia(opensim.Inertia(*INERTIA))
    m.initSystem()
    return m


def _states(om, n, seed):
    """Random states; the coupled coordinates in [-1, 1]; in the last state the first
    three muscles' fibers are shorter than the muscles are wide (90 degrees
    pennation)."""
    rng = np.random.default_rng(seed)
    st = random_states(om, n, rng)
    cs = om.getCoordinateSet()
    wide = [j for j, c in enumerate(st["coords"]) if cs.get(c).getRangeMax() > 100.0]
    st["q"][:, wide] = rng.uniform(-1.0, 1.0, (n, len(wide)))
    for j in range(3):
        st["z"][-1, st["znames"].index(f"/forceset/{om.getMuscles().get(j).getName()}/fiber_length")] = 0.002
    return st


@pytest.fixture(scope="module")
def exp_file(tmp_path_factory):
    """The wrist model with the passive curve of every other muscle removed."""
    blocks = re.split(r"(?=<Schutte1993Muscle_Deprecated name=)", WRIST.read_text())
    out = [blocks[0]]
    for i, block in enumerate(blocks[1:]):
        if i % 2 == 0:
            block = re.sub(
                r'\s*(<!--[^>]*-->\s*)?<SimmSpline name="passive_force_length_curve">.*?</SimmSpline>',
                "",
                block,
                count=1,
                flags=re.S,
            )
        out.append(block)
    path = tmp_path_factory.mktemp("schutte") / "wrist_exp.osim"
    path.write_text("".join(out))
    return path


def test_wrist_model_loads_strictly():
    model = _load(WRIST)
    paths = model.paths(sj.Schutte1993Muscle_Deprecated)
    assert len(paths) == N_MUSCLES
    fcr = model.find("/forceset/FCR")
    assert float(fcr.damping) == 0.05 and float(fcr.time_scale) == 0.1
    assert isinstance(fcr.passive_force_length_curve, sj.SimmSpline)
    system = model.build()
    assert system.z_names[:2] == ("/forceset/FCR/activation", "/forceset/FCR/fiber_length")
    # OpenSim's ActivationFiberLengthMuscle_Deprecated starts from zero activation and fiber length
    assert np.all(np.asarray(system.default_state().z) == 0.0)


def test_matches_opensim_at_random_states():
    om = _osim(WRIST, masses=True)
    model = _load(WRIST)
    for body in model.paths(sj.Body):
        model = model.set(body, mass=MASS, inertia=INERTIA + (0.0, 0.0, 0.0))
    system = model.build()
    st = _states(om, 5, seed=3)
    muscles = om.getMuscles()
    ref = osim_eval(om, st)
    got = sj_eval(system, st, [f"/forceset/{muscles.get(i).getName()}" for i in range(muscles.getSize())])
    assert np.isfinite(ref["udot"]).all()
    assert_close("length", ref["length"], got["length"], 0, 1e-9)  # no wrap objects on the wrist's paths
    assert_close("lengthening_speed", ref["lengthening_speed"], got["lengthening_speed"], 1e-9, 1e-12)
    assert_close("tendon_force", ref["tendon_force"], got["tendon_force"], 1e-6, 1e-9)
    assert_close("fiber_velocity", ref["fiber_velocity"], got["fiber_velocity"], 1e-6, 1e-10)
    assert_close("activation", ref["activation"], got["activation"], 0, 0)
    assert_close("zdot (activation and fiber length derivatives)", ref["zdot"], got["zdot"], 1e-6, 1e-10)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)
    # OpenSim never computes this class's fiber force (NaN), nor does simjax
    assert np.isnan(ref["fiber_force"]).all() and np.isnan(got["fiber_force"]).all()


def test_equilibrium_matches_opensim(exp_file):
    om = _osim(exp_file)
    system = _load(exp_file).build()
    paths = system.model.paths(sj.Schutte1993Muscle_Deprecated)
    curves = [system.model.find(p).passive_force_length_curve for p in paths]
    assert sum(c is None for c in curves) == 13
    st = _states(om, 3, seed=5)
    st["u"][:] = 0.0
    cs = om.getCoordinateSet()
    s = om.initSystem()
    ref = []
    for i in range(len(st["q"])):
        for j, c in enumerate(st["coords"]):
            cs.get(c).setValue(s, float(st["q"][i, j]), False)
            cs.get(c).setSpeedValue(s, 0.0)
        for j, zn in enumerate(st["znames"]):
            om.setStateVariableValue(s, zn, float(st["z"][i, j]))
        om.equilibrateMuscles(s)
        ref.append([om.getStateVariableValue(s, zn) for zn in st["znames"]])
    tree = system.topology.tree
    qi = np.asarray([tree.coordinates[system.coordinate_path(c)].q for c in st["coords"]])
    zi = np.asarray([system.z_names.index(zn) for zn in st["znames"]])
    base = system.default_state()
    n = len(st["q"])
    batch = lambda x: jnp.broadcast_to(x, (n,) + x.shape)  # noqa: E731
    states = sj.State(
        t=jnp.zeros(n),
        q=batch(base.q).at[:, qi].set(st["q"]),
        u=jnp.zeros((n,) + base.u.shape),
        z=batch(base.z).at[:, zi].set(st["z"]),
        d=batch(base.d),
    )
    got = jax.vmap(lambda state: sj.equilibrate_muscles(system, state))(states).z[:, zi]
    assert_close("equilibrium states", np.asarray(ref), got, 0, 1e-9)


def test_round_trip(exp_file, tmp_path):
    for source in (WRIST, exp_file):
        model = _load(source)
        first, second = tmp_path / "first.osim", tmp_path / "second.osim"
        sj.save_osim(model, first)
        again = _load(first)
        sj.save_osim(again, second)
        assert first.read_text() == second.read_text()
        leaves1, tree1 = jax.tree_util.tree_flatten(model)
        leaves2, tree2 = jax.tree_util.tree_flatten(again)
        assert tree1 == tree2
        for a, b in zip(leaves1, leaves2):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        om = _osim(first)
        muscles = om.getMuscles()
        assert muscles.getSize() == N_MUSCLES
        for i in range(N_MUSCLES):
            mu = muscles.get(i)
            assert mu.getConcreteClassName() == "Schutte1993Muscle_Deprecated"
            mine = model.find(f"/forceset/{mu.getName()}")
            assert mu.getOptimalFiberLength() == float(mine.optimal_fiber_length)
            # a passive curve left at OpenSim's default is not written: OpenSim keeps its default too
            default = mu.getPropertyByName("passive_force_length_curve").getValueIsDefault()
            assert default == (mine.passive_force_length_curve is None)
            assert float(mu.getPropertyByName("damping").toString()) == float(mine.damping)


def test_ignoring_tendon_compliance_is_refused_as_in_opensim():
    model = _load(WRIST).set("/forceset/FCR", ignore_tendon_compliance=True)
    with pytest.raises(sj.ModelError, match=r"/forceset/FCR.*ignore_tendon_compliance"):
        model.build()
