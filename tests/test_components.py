"""The component framework, Model editing, build, state layout and names (issue 2)."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.control.reporters import TableReporter


def arm():
    """Two links on pin joints, an actuator on the elbow, a controller and a reporter."""
    m = sj.Model("arm")
    m = m.add(sj.Body("humerus", 1.0, (0, 0.5, 0), (0.1, 0.01, 0.1, 0, 0, 0)))
    m = m.add(sj.Body("radius", 1.0, (0, 0.5, 0), (0.1, 0.01, 0.1, 0, 0, 0)))
    m = m.add(
        sj.PinJoint(
            "shoulder", "/ground", "/bodyset/humerus", location_in_parent=(0, 0, 0), location_in_child=(0, 1, 0)
        )
    )
    m = m.add(
        sj.PinJoint(
            "elbow",
            "/bodyset/humerus",
            "/bodyset/radius",
            location_in_parent=(0, 0, 0),
            location_in_child=(0, 1, 0),
            coordinates=(sj.Coordinate("elbow_flex", 0.3),),
        )
    )
    m = m.add(sj.CoordinateActuator("elbow_motor", "/jointset/elbow/elbow_flex", optimal_force=10.0))
    m = m.add(sj.PrescribedController("brain").prescribe("/forceset/elbow_motor", sj.Constant(0.5)))
    m = m.add(TableReporter("reporter", 0.1).add_to_report("/jointset/elbow/elbow_flex|value", "elbow"))
    return m


# -- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, bad", [("a/b", "/"), ("a*b", "*"), ("a+b", "+"), ("a b", " "), ("a\\b", "\\"), ("a\tb", "\t")]
)
def test_names_opensim_rejects_are_rejected_naming_the_character(name, bad):
    with pytest.raises(sj.ModelError, match=re.escape(f"component name {name!r} must not contain {bad!r}")):
        sj.Body(name)


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_empty_names_and_path_elements_are_rejected(name):
    with pytest.raises(sj.ModelError, match="name"):
        sj.Body(name)


def test_names_opensim_accepts_are_accepted():
    """OpenSim 4.6 accepts dots, colons, a leading digit and more (every scaled model's
    markers are named like ``R.ASIS``); so does simjax."""
    for name in ["a1", "_x", "r_humerus", "TRI-long", "bifemlh_r-P1", "R.ASIS", "a:b", "1abc", "null", "a?b", "a|b"]:
        assert sj.Body(name).name == name


def test_dotted_marker_names_work_in_paths():
    m = arm().add(sj.Marker("R.ASIS", "/bodyset/humerus", (0.1, 0.0, 0.0)))
    m = m.add(sj.Marker("a:b", "/bodyset/humerus", (0.1, 0.0, 0.0)))
    assert m.find("../R.ASIS", relative_to="/markerset/a:b").name == "R.ASIS"
    assert m.find("/markerset/./R.ASIS").name == "R.ASIS"
    system = m.build()
    state = system.default_state()
    loc = sj.output(system, state, "/markerset/R.ASIS|location_in_ground")
    assert np.array_equal(loc, sj.output(system, state, "/markerset/a:b|location_in_ground"))


def test_duplicate_sibling_names_are_rejected():
    m = sj.Model().add(sj.Body("b"))
    with pytest.raises(sj.ModelError, match=r"/bodyset.*already has a component named 'b'"):
        m.add(sj.Body("b"))


def test_rename_checks_name_and_uniqueness():
    m = sj.Model().add(sj.Body("a")).add(sj.Body("b"))
    with pytest.raises(sj.ModelError):
        m.rename("/bodyset/a", "b")
    with pytest.raises(sj.ModelError):
        m.rename("/bodyset/a", "9/z")
    assert m.rename("/bodyset/a", "c").has("/bodyset/c")


# -- paths and lookup ------------------------------------------------------------------


def test_paths_find_and_relative_paths():
    m = arm()
    paths = m.paths()
    assert "/bodyset/humerus" in paths and "/jointset/elbow/elbow_flex" in paths
    assert "/jointset/elbow/humerus_offset" in paths
    assert m.find("/jointset/elbow/elbow_flex").name == "elbow_flex"
    assert m.find("../humerus_offset", "/jointset/elbow/elbow_flex").name == "humerus_offset"
    assert m.find("../../shoulder", "/jointset/elbow/elbow_flex").name == "shoulder"
    assert m.find("./elbow_flex", "/jointset/elbow").name == "elbow_flex"
    with pytest.raises(KeyError, match="/bodyset/nope"):
        m.find("/bodyset/nope")
    with pytest.raises(sj.ModelError, match="above the model root"):
        m.find("../../../..", "/bodyset")


def test_components_of_type_in_tree_order():
    m = arm()
    assert [b.name for b in m.components_of(sj.Body)] == ["humerus", "radius"]
    assert [c.name for c in m.components_of(sj.Coordinate)] == ["shoulder_coord_0", "elbow_flex"]
    assert m.paths(sj.Joint) == ["/jointset/shoulder", "/jointset/elbow"]
    assert m.path_of_name("elbow_flex") == "/jointset/elbow/elbow_flex"


# -- properties are leaves ----------------------------------------------------------------


def test_properties_are_array_leaves_and_tree_at_changes_them():
    m = arm()
    b = m.find("/bodyset/humerus")
    assert isinstance(b.mass, np.ndarray) and b.mass.dtype == np.float64
    leaves = jax.tree.leaves(b)
    assert any(leaf is b.mass for leaf in leaves)
    m2 = eqx.tree_at(lambda mm: mm.find("/bodyset/humerus").mass, m, np.asarray(2.5))
    assert float(m2.find("/bodyset/humerus").mass) == 2.5
    assert float(m.find("/bodyset/humerus").mass) == 1.0  # immutable
    m3 = m.set("/bodyset/humerus", mass=3.0)
    assert float(m3.find("/bodyset/humerus").mass) == 3.0


def test_property_bounds_and_shapes_checked_at_build():
    with pytest.raises(sj.ModelError, match=r"/bodyset/humerus \(property 'mass' = -1.0\).*>= 0"):
        arm().set("/bodyset/humerus", mass=-1.0).build()
    with pytest.warns(sj.ModelWarning, match=r"/bodyset/humerus \(property 'inertia' = \[1.0, 1.0, 3.0.*triangle"):
        arm().set("/bodyset/humerus", inertia=(1.0, 1.0, 3.0, 0, 0, 0)).build()
    with pytest.raises(sj.ModelError, match="negative principal moment"):
        arm().set("/bodyset/humerus", inertia=(-1.0, 1.0, 1.0, 0, 0, 0)).build()
    with pytest.raises(sj.ModelError, match=r"/bodyset/humerus \(property 'inertia'.*not finite"):
        arm().set("/bodyset/humerus", inertia=(0.0, np.inf, 0.0, 0, 0, 0)).build()
    with pytest.raises(sj.ModelError, match="mass_center.*shape"):
        arm().set("/bodyset/humerus", mass_center=(1.0, 2.0)).build()
    with pytest.raises(sj.ModelError, match="range"):
        arm().set("/jointset/elbow/elbow_flex", range=(1.0, -1.0)).build()


def test_an_edited_model_revalidates_only_what_changed(monkeypatch):
    """``validate_once``: building a model validates each component once; an edit's
    model shares the unchanged components and validates only the new ones; a warning
    is issued again at every build, and a bad edit still fails."""
    calls = []
    validate = sj.Body.validate
    monkeypatch.setattr(sj.Body, "validate", lambda self, path: calls.append(path) or validate(self, path))
    model = arm()
    model.build()
    model.build()
    assert sorted(calls) == ["/bodyset/humerus", "/bodyset/radius"]
    calls.clear()
    model.set("/bodyset/radius", mass=2.0).build()
    assert calls == ["/bodyset/radius"]
    skewed = model.set("/bodyset/humerus", inertia=(1.0, 1.0, 3.0, 0, 0, 0))
    for _ in range(2):
        with pytest.warns(sj.ModelWarning, match="triangle"):
            skewed.build()
    for _ in range(2):
        with pytest.raises(sj.ModelError, match="mass"):
            model.set("/bodyset/radius", mass=-1.0).build()


# -- sockets ----------------------------------------------------------------------------------


def test_dangling_socket_names_both_paths():
    m = arm().add(sj.PinJoint("wrist", "/bodyset/radius", "/bodyset/hand"))
    with pytest.raises(sj.ModelError, match=r"/jointset/wrist.*child_frame.*'/bodyset/hand'.*PhysicalFrame"):
        m.build()


def test_mistyped_socket_names_expected_type():
    m = arm().add(sj.CoordinateActuator("bad", "/bodyset/humerus"))
    with pytest.raises(sj.ModelError, match=r"/forceset/bad.*expects a Coordinate.*'/bodyset/humerus' is a Body"):
        m.build()


def test_connect_socket_and_input():
    m = arm().add(sj.CoordinateActuator("motor2"))
    m = m.connect("/forceset/motor2", "coordinate", "/jointset/shoulder/shoulder_coord_0")
    m = m.connect("/reporter", "inputs", "/forceset/motor2|actuation", alias="m2")
    system = m.build()
    assert system.topology.connections[("/forceset/motor2", "coordinate")] == "/jointset/shoulder/shoulder_coord_0"
    assert ("/forceset/motor2", "actuation", None, "m2") in system.topology.inputs[("/reporter", "inputs")]
    with pytest.raises(sj.ModelError, match="no output 'nope'"):
        m.connect("/reporter", "inputs", "/forceset/motor2|nope").build()


# -- removal with hard and soft references ------------------------------------------------


def test_remove_body_removes_hard_referrers_and_prunes_soft_references():
    m = arm()
    m2, rep = m.remove("/bodyset/radius", return_report=True)
    # the elbow joint (via its offset frame) and the actuator on its coordinate go too
    assert set(rep.removed) == {"/bodyset/radius", "/jointset/elbow", "/forceset/elbow_motor"}
    # the controller's soft reference is pruned together with its function, the reporter's input too
    assert ("/controllerset/brain", "actuators", "/forceset/elbow_motor") in rep.pruned
    assert m2.find("/controllerset/brain").actuators == ()
    assert m2.find("/controllerset/brain").control_functions == ()
    assert m2.find("/reporter").inputs == ()
    system = m2.build()
    assert system.coordinate_names == ("shoulder_coord_0",)


def test_remove_leaf_keeps_everything_else():
    m = arm().remove("/reporter")
    assert not m.has("/reporter") and m.has("/forceset/elbow_motor")


# -- build, state layout, names -----------------------------------------------------------


def test_state_layout_and_names():
    system = arm().build()
    assert system.q_names == ("/jointset/shoulder/shoulder_coord_0/value", "/jointset/elbow/elbow_flex/value")
    assert system.u_names == ("/jointset/shoulder/shoulder_coord_0/speed", "/jointset/elbow/elbow_flex/speed")
    assert system.coordinate_names == ("shoulder_coord_0", "elbow_flex")
    assert system.actuator_names == ("elbow_motor",)
    assert system.state_variable_names[:2] == system.q_names[:1] + system.u_names[:1]
    s = system.default_state()
    assert s.q.tolist() == [0.0, 0.3] and s.u.tolist() == [0.0, 0.0]
    s = system.set_coordinates(s, {"elbow_flex": 1.0}, speeds={"/jointset/shoulder/shoulder_coord_0": 2.0})
    assert system.get_state_variable(s, "/jointset/elbow/elbow_flex/value") == 1.0
    assert system.state_variables(s)["/jointset/shoulder/shoulder_coord_0/speed"] == 2.0
    assert s.y.tolist() == [0.0, 1.0, 2.0, 0.0]
    with pytest.raises(KeyError):
        system.set_coordinates(s, {"nope": 1.0})


def test_state_round_trip_through_properties():
    """Stop, save the state into the default properties, rebuild, resume (OpenSim guide §IV)."""
    system = arm().build()
    s = system.set_coordinates(
        system.default_state(), {"elbow_flex": 0.7, "shoulder_coord_0": -0.2}, speeds={"elbow_flex": 1.5}
    )
    system2 = system.model_from_state(s).build()
    s2 = system2.default_state()
    np.testing.assert_array_equal(s2.q, s.q)
    np.testing.assert_array_equal(s2.u, s.u)
    assert system2.topology is system.topology  # same structure: the compiled topology is reused


def test_build_reuses_topology_and_property_change_does_not_retrace():
    m = arm()
    s1 = m.build()
    s2 = m.set("/bodyset/radius", mass=2.0).build()
    assert s1.topology is s2.topology

    @eqx.filter_jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def f(system, state):
        return sj.accelerations(system, state).udot

    st = s1.default_state()
    a1 = f(s1, st)
    a2 = f(s2, st)
    assert not np.allclose(a1, a2)


def test_gradient_flows_to_properties():
    system = arm().build()
    state = system.default_state()

    def loss(sys_):
        return sj.forward_dynamics(sys_, state)[1]

    g = eqx.filter_grad(loss)(system)
    dm = g.model.find("/bodyset/radius").mass
    h = 1e-6
    fd = (
        loss(eqx.tree_at(lambda s: s.model.find("/bodyset/radius").mass, system, np.asarray(1.0 + h)))
        - loss(eqx.tree_at(lambda s: s.model.find("/bodyset/radius").mass, system, np.asarray(1.0 - h)))
    ) / (2 * h)
    np.testing.assert_allclose(dm, fd, rtol=1e-6)


def test_outputs_by_path():
    system = arm().build()
    s = system.default_state()
    assert float(sj.output(system, s, "/jointset/elbow/elbow_flex|value")) == pytest.approx(0.3)
    assert float(sj.output(system, s, "/forceset/elbow_motor|actuation")) == pytest.approx(5.0)
    R, p = sj.output(system, s, "/bodyset/humerus|transform_in_ground")
    np.testing.assert_allclose(p, [0.0, -1.0, 0.0], atol=1e-15)
    with pytest.raises(KeyError, match="no output 'bogus'"):
        sj.output(system, s, "/bodyset/humerus|bogus")


def test_controls_from_controller_and_explicit_controls_checked():
    m = arm().set("/forceset/elbow_motor", min_control=-1.0, max_control=1.0)
    system = m.build()
    s = system.default_state()
    np.testing.assert_allclose(sj.controls(system, s), [0.5])
    with pytest.raises(Exception, match="/forceset/elbow_motor"):
        jax.block_until_ready(sj.forward_dynamics(system, s, controls=jnp.array([2.0])))


def test_outputs_and_inputs_declared_on_classes():
    assert {"value", "speed", "acceleration"} <= set(sj.Coordinate.output_specs())
    assert sj.Coordinate.output_specs()["value"].stage == sj.Stage.POSITION
    assert "inputs" in TableReporter.input_fields()
    assert sj.PinJoint.socket_fields()["parent_frame"].metadata["socket"] == "PhysicalFrame"
