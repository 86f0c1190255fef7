"""PathSpring and Ligament against OpenSim 4.6: a two-link arm written by OpenSim with
one of each, loaded by both engines (issue 8)."""

from __future__ import annotations

import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

import simjax as sj  # noqa: E402
from simjax.io.osim import dumps_osim, loads_osim  # noqa: E402
from simjax.io.osim.validate import validate  # noqa: E402

from _muscle_oracle import osim_arm  # noqa: E402


@pytest.fixture(scope="module")
def arm_file(tmp_path_factory):
    m = osim_arm([])
    spring = opensim.PathSpring("spring", 0.2, 150.0, 0.3)
    spring.updGeometryPath().appendNewPathPoint("a", m.getGround(), opensim.Vec3(0.02, 0.05, 0.0))
    spring.updGeometryPath().appendNewPathPoint("b", m.getBodySet().get("radius"), opensim.Vec3(0.03, -0.1, 0.0))
    m.addForce(spring)
    lig = opensim.Ligament()
    lig.setName("lig")
    lig.set_resting_length(0.25)
    lig.set_pcsa_force(300.0)
    lig.updGeometryPath().appendNewPathPoint("a", m.getBodySet().get("humerus"), opensim.Vec3(-0.02, -0.05, 0.0))
    lig.updGeometryPath().appendNewPathPoint("b", m.getBodySet().get("radius"), opensim.Vec3(-0.02, -0.08, 0.0))
    m.addForce(lig)
    m.finalizeConnections()
    m.initSystem()
    path = tmp_path_factory.mktemp("pathforces") / "arm_path_forces.osim"
    m.printToXML(str(path))
    return path


def test_udot_matches_opensim(arm_file):
    for r in validate(arm_file, n_states=40, seed=4):
        assert r.max_rel <= 1e-10, r


def test_tensions_and_round_trip(arm_file):
    model = sj.load_osim(arm_file)
    assert isinstance(model.find("/forceset/spring"), sj.PathSpring)
    lig = model.find("/forceset/lig")
    assert isinstance(lig, sj.Ligament) and lig.force_length_curve is None  # OpenSim's default curve
    text = dumps_osim(model)
    assert dumps_osim(loads_osim(text)) == text
    system = model.build()
    state = system.set_coordinates(system.default_state(), {"elbow_coord_0": 1.2}, speeds={"elbow_coord_0": 0.5})
    L = float(sj.output(system, state, "/forceset/lig|length"))
    T = float(sj.output(system, state, "/forceset/lig|tension"))
    expected = 300.0 * float(sj.default_ligament_curve()(L / 0.25)) if L > 0.25 else 0.0
    assert T == pytest.approx(expected, rel=1e-12)
    Ls = float(sj.output(system, state, "/forceset/spring|length"))
    v = float(sj.output(system, state, "/forceset/spring|lengthening_speed"))
    Ts = float(sj.output(system, state, "/forceset/spring|tension"))
    assert Ts == pytest.approx(150.0 * max(Ls - 0.2, 0.0) * (1 + 0.3 * v), rel=1e-12)


def test_bad_ligament_resting_length_names_the_component():
    lig = sj.Ligament("lig", resting_length=0.0, pcsa_force=10.0)
    lig = lig.add_new_path_point("a", "/ground", (0, 0, 0)).add_new_path_point("b", "/bodyset/b", (0, -0.1, 0))
    m = sj.Model("m").add(sj.Body("b", 1.0, (0, 0, 0), (1, 1, 1, 0, 0, 0)))
    m = m.add(sj.PinJoint("j", "/ground", "/bodyset/b")).add(lig)
    with pytest.raises(sj.ModelError, match=r"/forceset/lig.*resting_length"):
        m.build()
    np.testing.assert_allclose(float(sj.default_ligament_curve()(1.6)), 2.0)
