"""The .osim reader's errors, warnings and extension points (no OpenSim needed).

Every error names the file, the line and the component path; unsupported content
is listed once, all of it; ``strict=False`` skips what can be skipped.
"""

import re
import warnings

import numpy as np
import pytest

import simjax as sj
from simjax.component import prop, socket
from simjax.io.osim import OsimError, OsimWarning, UnsupportedContentError, dumps_osim, load_osim, loads_osim, register

DOC = """<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="{version}">
	<Model name="m">
		<gravity>0 -9.81 0</gravity>
		<BodySet name="bodyset">
			<objects>
				<Body name="b">
					<mass>{mass}</mass>
					<mass_center>0 0 0</mass_center>
					<inertia>1 1 1 0 0 0</inertia>
					{body_extra}
				</Body>
			</objects>
		</BodySet>
		<JointSet name="jointset">
			<objects>
				<PinJoint name="j">
					<socket_parent_frame>/ground</socket_parent_frame>
					<socket_child_frame>{child}</socket_child_frame>
					<coordinates>
						<Coordinate name="q">
							<default_value>0.5</default_value>
							<locked>{locked}</locked>
						</Coordinate>
					</coordinates>
				</PinJoint>
				{joint_extra}
			</objects>
		</JointSet>
		<ForceSet name="forceset">
			<objects>
				<CoordinateActuator name="a">
					<coordinate>{coordinate}</coordinate>
				</CoordinateActuator>
				{force_extra}
			</objects>
		</ForceSet>
		{model_extra}
	</Model>
</OpenSimDocument>
"""

DEFAULTS = dict(
    version="40000",
    mass="2",
    body_extra="",
    child="/bodyset/b",
    locked="false",
    joint_extra="",
    coordinate="q",
    force_extra="",
    model_extra="",
)


def doc(**changes):
    return DOC.format(**{**DEFAULTS, **changes})


def line_of(text, needle):
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def load(text, **kw):
    return loads_osim(text, source="test.osim", **kw)


def test_minimal_document_loads():
    model = load(doc())
    assert model.find("/forceset/a").coordinate == "/jointset/j/q"
    assert float(model.find("/bodyset/b").mass) == 2.0
    system = model.build()
    assert system.coordinate_names == ("q",)
    # OpenSim 4.0 files may omit empty sets; the writer puts them all back
    assert "<ControllerSet" in dumps_osim(model)


def test_old_versions_are_refused_with_advice():
    with pytest.raises(OsimError, match=r"test.osim:2: document version 30000 is older than OpenSim 4.0.*upgrade"):
        load(doc(version="30000"))
    with pytest.raises(OsimError, match="numeric Version"):
        load(doc(version="4.0"))


@pytest.mark.parametrize("cut", [40, 300, 900, -30])
def test_truncated_files(cut):
    text = doc()[:cut]
    with pytest.raises(OsimError, match=r"test.osim:\d+: malformed XML"):
        load(text)


def test_bad_number_names_file_line_path_and_property():
    text = doc(mass="2.0kg")
    with pytest.raises(OsimError) as info:
        load(text)
    e = info.value
    assert (e.file, e.line, e.path, e.prop) == ("test.osim", line_of(text, "<mass>"), "/bodyset/b", "mass")
    assert "'2.0kg' is not a number" in str(e)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("locked", "maybe", "expected true or false"),
        ("mass", "1 2", "expected 1 number"),
        ("mass", "nan", "must not be NaN"),
        ("mass", "-1", "must be >= 0"),
    ],
)
def test_bad_values(field, value, message):
    with pytest.raises(OsimError, match=re.escape(message)):
        load(doc(**{field: value}))


def test_missing_required_property():
    text = doc().replace("<mass>2</mass>", "")
    with pytest.raises(OsimError, match=r"test.osim:\d+: /bodyset/b: Body is missing the required property <mass>"):
        load(text)
    with pytest.raises(OsimError, match="PinJoint is missing the required property <coordinates>"):
        load(
            doc(
                joint_extra="<PinJoint name='k'><socket_parent_frame>/ground</socket_parent_frame>"
                "<socket_child_frame>/bodyset/b</socket_child_frame></PinJoint>"
            )
        )


def test_dangling_references():
    text = doc(child="../nowhere")
    with pytest.raises(OsimError) as info:
        load(text)
    assert info.value.line == line_of(text, "socket_child_frame")
    assert info.value.path == "/jointset/j"
    assert "no component at '/jointset/nowhere'" in str(info.value)
    text = doc(coordinate="qq")
    with pytest.raises(
        OsimError,
        match=r"test.osim:\d+: /forceset/a \(property 'coordinate' = 'qq'\): refers to "
        r"coordinate 'qq'",
    ):
        load(text)
    with pytest.raises(OsimError, match="expects a PhysicalFrame"):
        load(doc(child="/forceset/a"))


def test_unsupported_content_is_listed_once_and_skipped_on_request():
    text = doc(
        force_extra='<McKibbenActuator name="m1"><max_isometric_force>10</max_isometric_force>'
        '</McKibbenActuator><Gizmo name="g"/>',
        body_extra="<colour>red</colour>",
        model_extra="<ProbeSet name='probeset'><objects><JointInternalPowerProbe name='p'/></objects></ProbeSet>",
    )
    with pytest.raises(UnsupportedContentError) as info:
        load(text)
    items = info.value.items
    assert [(u.what, u.path) for u in items] == [
        ("<colour>", "/bodyset/b"),
        ("McKibbenActuator", "/forceset/m1"),
        ("Gizmo", "/forceset/g"),
        ("JointInternalPowerProbe", "/probeset/p"),
    ]
    assert items[1].line == line_of(text, "McKibbenActuator")
    message = str(info.value)
    for u in items:
        assert message.count(f" at {u.path}") == 1
    with pytest.warns(OsimWarning, match="skipped 4 unsupported") as rec:
        model = load(text, strict=False)
    assert "/forceset/m1" in str(rec[0].message)
    assert not model.has("/forceset/m1") and model.has("/forceset/a")


def test_skeleton_content_is_never_skipped():
    text = doc(joint_extra='<ScapulothoracicJoint name="s"/>')
    with pytest.raises(UnsupportedContentError, match="(?s)cannot be skipped.*ScapulothoracicJoint at /jointset/s"):
        load(text, strict=False)
    custom = """<CustomJoint name="c"><socket_parent_frame>/ground</socket_parent_frame>
        <socket_child_frame>/bodyset/b</socket_child_frame>
        <coordinates><Coordinate name="x"/><Coordinate name="y"/></coordinates>
        <SpatialTransform><TransformAxis name="rotation1"><coordinates>x y</coordinates>
        <axis>1 0 0</axis></TransformAxis></SpatialTransform></CustomJoint>"""
    with pytest.raises(UnsupportedContentError, match="function of 2 coordinates"):
        load(doc(joint_extra=custom), strict=False)


def test_skipping_prunes_references_to_skipped_components():
    ctrl = """<ControllerSet name="controllerset"><objects><PrescribedController name="c">
        <actuator_list>a m1</actuator_list>
        <FunctionSet name="ControlFunctions"><objects><Constant><value>1</value></Constant>
        <Constant><value>2</value></Constant></objects></FunctionSet></PrescribedController></objects>
        </ControllerSet>"""
    text = doc(force_extra='<McKibbenActuator name="m1"/>', model_extra=ctrl)
    with pytest.warns(OsimWarning) as rec:
        model = load(text, strict=False)
    messages = " ".join(str(w.message) for w in rec)
    assert "McKibbenActuator at /forceset/m1" in messages and "pruned /forceset/m1 from /controllerset/c" in messages
    c = model.find("/controllerset/c")
    assert c.actuators == ("/forceset/a",)
    assert [float(f.value) for f in c.control_functions] == [1.0]


def test_old_controller_lists_resolve_by_name():
    ctrl = """<ControllerSet name="controllerset"><objects><PrescribedController name="c">
        <actuator_list>ALL</actuator_list>
        <FunctionSet name="ControlFunctions"><objects><LinearFunction><coefficients>2 1</coefficients>
        </LinearFunction></objects></FunctionSet></PrescribedController></objects></ControllerSet>"""
    model = load(doc(model_extra=ctrl))
    c = model.find("/controllerset/c")
    assert c.actuators == ("/forceset/a",)
    text = dumps_osim(model)
    assert "<socket_actuators>/forceset/a</socket_actuators>" in text and "actuator_list" not in text
    assert load(text).find("/controllerset/c") == c


def test_hostile_xml():
    bomb = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]><OpenSimDocument Version="40000"/>'
    with pytest.raises(OsimError, match="DOCTYPE and entity declarations are not allowed"):
        load(bomb)
    deep = doc(body_extra="<a>" * 500 + "</a>" * 500)
    with pytest.raises(OsimError, match="nested deeper"):
        load(deep)
    with pytest.raises(OsimError, match="expected an <OpenSimDocument> root"):
        load("<Model name='m'/>")


def test_duplicate_names_and_properties():
    body = '<Body name="b"><mass>1</mass></Body>'
    text = doc().replace("</Body>", "</Body>" + body, 1)
    with pytest.raises(OsimError, match="two components named 'b'"):
        load(text)
    with pytest.raises(OsimError, match=r"property <mass> given twice \(first at line \d+\)"):
        load(doc(body_extra="<mass>3</mass>"))


def test_invalid_names():
    with pytest.raises(OsimError, match=r"component name 'b\*1' must not contain '\*'"):
        load(doc().replace('<Body name="b">', '<Body name="b*1">'))


def test_missing_meshes_only_warn(tmp_path):
    geometry = (
        "<attached_geometry><Mesh name='g'><socket_frame>..</socket_frame>"
        "<mesh_file>bone.vtp</mesh_file></Mesh></attached_geometry>"
    )
    path = tmp_path / "m.osim"
    path.write_text(doc(body_extra=geometry))
    with pytest.warns(OsimWarning, match="1 mesh file.*bone.vtp"):
        model = load_osim(path)
    assert "<mesh_file>bone.vtp</mesh_file>" in dumps_osim(model)
    (tmp_path / "Geometry").mkdir()
    (tmp_path / "Geometry" / "bone.vtp").write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_osim(path)


def test_functions_in_both_xml_forms():
    st = """<CustomJoint name="c"><socket_parent_frame>/ground</socket_parent_frame>
        <socket_child_frame>/bodyset/b2</socket_child_frame>
        <coordinates><Coordinate name="x"><prescribed_function><Sine><omega>2</omega></Sine>
        </prescribed_function><prescribed>true</prescribed></Coordinate></coordinates>
        <SpatialTransform>
        <TransformAxis name="rotation1"><coordinates>x</coordinates><axis>0 0 1</axis>
          <function><MultiplierFunction><LinearFunction name="function"><coefficients>1 0</coefficients>
          </LinearFunction><scale>2</scale></MultiplierFunction></function></TransformAxis>
        <TransformAxis name="translation1"><coordinates>x</coordinates><axis>1 0 0</axis>
          <GCVSpline name="function"><half_order>2</half_order><x>0 1 2 3 4</x><y>0 1 0 1 0</y>
          <coefficients>9 9 9</coefficients></GCVSpline></TransformAxis>
        <TransformAxis name="translation2"><coordinates>x</coordinates><axis>0 1 0</axis></TransformAxis>
        </SpatialTransform></CustomJoint>"""
    body = '<Body name="b2"><mass>1</mass><inertia>1 1 1 0 0 0</inertia></Body>'
    text = doc(joint_extra=st).replace("</Body>", "</Body>" + body, 1)
    model = load(text)
    joint = model.find("/jointset/c")
    axes = joint.spatial_transform.axes
    assert isinstance(axes[0].function, sj.MultiplierFunction) and float(axes[0].function.scale) == 2.0
    assert isinstance(axes[3].function, sj.GCVSpline) and axes[3].function.half_order == 2
    assert isinstance(axes[4].function, sj.Constant)  # OpenSim's default for a missing function
    coord = model.find("/jointset/c/x")
    assert coord.prescribed and float(coord.prescribed_function.omega) == 2.0
    again = load(dumps_osim(model))
    assert dumps_osim(again) == dumps_osim(model)
    with pytest.raises(UnsupportedContentError, match="WeirdFunction at /jointset/c/SpatialTransform/rotation1"):
        load(text.replace("MultiplierFunction", "WeirdFunction"))


class OnlyForTestsDamper(sj.Force):
    """A made-up force to exercise registration."""

    coordinate: str = socket("Coordinate")
    damping: np.ndarray = prop(1.0)
    anchor: sj.Station = None


def test_registering_a_new_component_class():
    register(
        "OnlyForTestsDamper", OnlyForTestsDamper, order=("components", "appliesForce", "socket_coordinate", "damping")
    )
    force = (
        '<OnlyForTestsDamper name="d"><appliesForce>false</appliesForce><damping>3.5</damping>'
        "<socket_coordinate>/jointset/j/q</socket_coordinate>"
        '<Station name="anchor"><socket_parent_frame>/bodyset/b</socket_parent_frame>'
        "<location>1 2 3</location></Station></OnlyForTestsDamper>"
    )
    model = load(doc(force_extra=force))
    d = model.find("/forceset/d")
    assert isinstance(d, OnlyForTestsDamper) and float(d.damping) == 3.5 and not d.applies_force
    np.testing.assert_array_equal(model.find("/forceset/d/anchor").location, [1, 2, 3])
    text = dumps_osim(model)
    assert re.search(
        r"<OnlyForTestsDamper name=\"d\">\s*<appliesForce>false</appliesForce>\s*"
        r"<socket_coordinate>/jointset/j/q</socket_coordinate>\s*<damping>3.5</damping>\s*"
        r"<Station name=\"anchor\">",
        text,
    )
    assert dumps_osim(load(text)) == text
    with pytest.raises(OsimError, match="refers to '/jointset/j/nope'"):
        load(doc(force_extra=force.replace("j/q<", "j/nope<")))


def test_writer_refuses_what_opensim_cannot_read():
    model = load(doc())
    bad = sj.PointActuator("p", body="/ground")
    with pytest.raises(OsimError, match="can only name a body of the BodySet"):
        dumps_osim(model.add(bad))


class OnlyForTestsWidget(sj.Component):
    """A simjax-only component, with no OpenSim class."""


def test_components_without_opensim_class():
    model = load(doc()).add(OnlyForTestsWidget("w"))
    with pytest.raises(OsimError, match=r"/w: OnlyForTestsWidget cannot be written to .osim.*strict=False"):
        dumps_osim(model)
    with pytest.warns(OsimWarning, match=r"left out 1 component\(s\) OpenSim has no class for: /w"):
        text = dumps_osim(model, strict=False)
    assert dumps_osim(load(text)) == text
