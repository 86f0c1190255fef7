"""Where OpenSim 4.6 is lenient, simjax reads what OpenSim reads: names with dots and
colons, a model's ``<defaults>``, and physically odd values OpenSim tolerates (with a
warning naming the file, line, component path, property and value)."""

import os
import warnings

import numpy as np
import pytest

import simjax as sj
from simjax.io.osim import OsimWarning, dumps_osim, load_osim, loads_osim

from _collection import COLLECTION, forget_opensim_defaults
from test_osim_errors import doc

DEFAULTS = """<defaults>
			<CoordinateActuator name="default">
				<min_control>-5</min_control>
				<optimal_force>300</optimal_force>
			</CoordinateActuator>
			<Body name="default"><mass>7</mass></Body>
		</defaults>"""


def _opensim_property(path, component, prop):
    opensim = pytest.importorskip("opensim")
    om = opensim.Model(str(path))
    forget_opensim_defaults(path)
    return np.array(
        [float(x) for x in str(om.getComponent(component).getPropertyByName(prop).toString()).strip("()").split()]
    )


def test_defaults_supply_omitted_properties_as_in_opensim(tmp_path):
    """A component that omits a property takes it from the model's ``<defaults>``;
    one that gives it keeps its own (the Body's mass 2, not the default's 7)."""
    text = doc(model_extra=DEFAULTS)
    (tmp_path / "m.osim").write_text(text)
    model = loads_osim(text, source="m.osim")
    act = model.find("/forceset/a")
    assert float(act.optimal_force) == 300.0 and float(act.min_control) == -5.0
    assert float(act.max_control) == np.inf  # neither given nor in the defaults: the class default
    assert float(model.find("/bodyset/b").mass) == 2.0
    for prop, value in (("optimal_force", 300.0), ("min_control", -5.0)):
        assert _opensim_property(tmp_path / "m.osim", "/forceset/a", prop) == value
    # written back: the defaults and the component's own values; the second write is identical
    first = dumps_osim(model)
    assert "<defaults>" in first and "<optimal_force>300</optimal_force>" in first
    assert dumps_osim(loads_osim(first)) == first


def test_collection_model_relying_on_defaults_matches_opensim():
    """Rajagopal2016's muscles omit ``min_control``; its ``<defaults>`` give 0.01."""
    path = os.path.join(COLLECTION, "Rajagopal__Rajagopal2016.osim")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model = load_osim(path)
    for muscle in ("/forceset/addbrev_r", "/forceset/vasint_l"):
        for prop in ("min_control", "max_contraction_velocity", "optimal_force"):
            ours = float(getattr(model.find(muscle), prop))
            assert ours == _opensim_property(path, muscle, prop)[0], (muscle, prop)
    assert float(model.find("/forceset/addbrev_r").min_control) == 0.01


def test_tolerated_inertia_warns_once_naming_file_line_path_property_and_value():
    text = doc().replace("<inertia>1 1 1 0 0 0</inertia>", "<inertia>1 1 3 0 0 0</inertia>")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if '<Body name="b">' in s)
    with pytest.warns(OsimWarning) as record:
        model = loads_osim(text, source="m.osim")
    messages = [str(w.message) for w in record if "triangle" in str(w.message)]
    assert messages == [
        f"m.osim:{line}: /bodyset/b (property 'inertia' = [1.0, 1.0, 3.0, 0.0, 0.0, 0.0]): inertia "
        "violates the triangle inequality (I1 + I2 >= I3); OpenSim accepts it, and so does simjax"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.build()  # reported once, by the reader: not again when building
    with pytest.raises(sj.ModelError, match="negative principal moment"):
        loads_osim(doc().replace("<inertia>1 1 1 0 0 0</inertia>", "<inertia>-1 1 1 0 0 0</inertia>"))


def test_dotted_names_load_and_resolve():
    text = doc(
        model_extra="""<MarkerSet name="markerset"><objects>
        <Marker name="R.ASIS"><socket_parent_frame>/bodyset/b</socket_parent_frame><location>0.1 0 0</location></Marker>
        <Marker name="L:ASIS"><socket_parent_frame>/bodyset/b</socket_parent_frame><location>0 0.1 0</location></Marker>
        </objects><groups /></MarkerSet>"""
    )
    model = loads_osim(text)
    assert model.find("../R.ASIS", relative_to="/markerset/L:ASIS").name == "R.ASIS"
    assert dumps_osim(loads_osim(dumps_osim(model))) == dumps_osim(model)
