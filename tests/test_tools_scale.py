"""ScaleTool (``simjax.tools.scaling``) against OpenSim 4.6's ScaleTool, run live on the
same setup: the Gait10dof18musc pipeline's ``Scale/subject01_Setup_Scale.xml``
(the generic ``gait10dof18musc`` with the pipeline's marker set, scaled by marker-pair
measurements on ``subject01_static.trc`` and manual factors), and ``Model::scale``
on ``arm26`` (wrap objects, mass not preserved)."""

import os
import shutil
import warnings

import numpy as np
import pytest

import simjax as sj
import simjax.tools as tools
from simjax.tools import SetupWarning
from simjax.tools.scaling import move_markers, scale_model
from simjax.wrapping.objects import WrapCylinder

osim = pytest.importorskip("opensim")

HERE = os.path.dirname(os.path.abspath(__file__))
SCALE = os.path.join(sj.models.pipeline_path("Gait10dof18musc"), "Scale")
SETUP = os.path.join(SCALE, "subject01_Setup_Scale.xml")
TOL = 1e-9

pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file")


def _v3(v):
    return np.array([v.get(i) for i in range(3)])


def _properties(path: str) -> dict:
    """The scaled properties of a model file, read by OpenSim."""
    m = osim.Model(path)
    out = {}
    for b in m.getBodySet():
        out[f"{b.getName()}.mass"] = [b.getMass()]
        out[f"{b.getName()}.mass_center"] = _v3(b.getMassCenter())
        inertia = b.getInertia()
        out[f"{b.getName()}.inertia"] = np.r_[_v3(inertia.getMoments()), _v3(inertia.getProducts())]
        for w in b.getWrapObjectSet():
            out[f"{b.getName()}/{w.getName()}.translation"] = _v3(w.get_translation())
            for prop in ("radius", "length", "dimensions", "inner_radius", "outer_radius"):
                if w.hasProperty(prop):
                    out[f"{b.getName()}/{w.getName()}.{prop}"] = [
                        float(x) for x in w.getPropertyByName(prop).toString().strip("()").replace(",", " ").split()
                    ]
    for j in m.getJointSet():
        for k in range(j.getPropertyByName("frames").size()):
            f = j.get_frames(k)
            out[f"{j.getName()}/{f.getName()}.translation"] = _v3(f.get_translation())
            out[f"{j.getName()}/{f.getName()}.orientation"] = _v3(f.get_orientation())
        cj = osim.CustomJoint.safeDownCast(j)
        if cj:
            st = cj.getSpatialTransform()
            for i in range(6):
                ta = st.getTransformAxis(i)
                if ta.hasFunction():
                    out[f"{j.getName()}.transform_axis{i}"] = [
                        ta.getFunction().calcValue(osim.Vector(1, x)) for x in (-1.5, -0.7, 0.0, 0.3)
                    ]
    for mk in m.getMarkerSet():
        out[f"marker {mk.getName()}"] = _v3(mk.get_location())
    for mu in m.getMuscles():
        out[f"{mu.getName()}.optimal_fiber_length"] = [mu.getOptimalFiberLength()]
        out[f"{mu.getName()}.tendon_slack_length"] = [mu.getTendonSlackLength()]
        points = mu.getGeometryPath().getPathPointSet()
        for k in range(points.getSize()):
            pp = points.get(k)
            moving = osim.MovingPathPoint.safeDownCast(pp)
            if moving:
                fns = (moving.get_x_location(), moving.get_y_location(), moving.get_z_location())
                out[f"{mu.getName()}/{pp.getName()}"] = [
                    f.calcValue(osim.Vector(1, x)) for f in fns for x in (-1.5, -0.5, 0.0)
                ]
            else:
                out[f"{mu.getName()}/{pp.getName()}"] = _v3(osim.PathPoint.safeDownCast(pp).get_location())
    return out


def _compare(expected: dict, actual: dict) -> float:
    assert expected.keys() == actual.keys(), set(expected) ^ set(actual)
    worst = 0.0
    for k in expected:
        x, y = np.asarray(expected[k], float), np.asarray(actual[k], float)
        err = float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(x))))
        assert err <= TOL, (k, x, y)
        worst = max(worst, err)
    return worst


def _setup_copy(folder: str, edit=None) -> str:
    """The pipeline's setup written into ``folder`` (OpenSim joins the marker file's
    name to the setup's folder, so the trial is copied next to it)."""
    os.makedirs(folder, exist_ok=True)
    tool = osim.ScaleTool(SETUP)
    gmm = tool.getGenericModelMaker()
    gmm.setModelFileName(os.path.normpath(os.path.join(SCALE, gmm.getModelFileName())))
    gmm.setMarkerSetFileName(os.path.join(SCALE, gmm.getMarkerSetFileName()))
    ms = tool.getModelScaler()
    shutil.copy(os.path.normpath(os.path.join(SCALE, ms.getMarkerFileName())), folder)
    ms.setMarkerFileName(os.path.basename(ms.getMarkerFileName()))
    mp = tool.getMarkerPlacer()
    mp.setStaticPoseFileName(os.path.basename(mp.getStaticPoseFileName()))
    if edit is not None:
        edit(tool)
    path = os.path.join(folder, "setup.xml")
    tool.printToXML(path)
    return path


def _scale_sets(path: str) -> dict:
    s = osim.ScaleSet(path)
    return {s.get(i).getSegmentName(): _v3(s.get(i).getScaleFactors()) for i in range(s.getSize())}


def _run_both(tmp_path, edit=None):
    os_setup = _setup_copy(str(tmp_path / "opensim"), edit)
    sj_setup = _setup_copy(str(tmp_path / "simjax"), edit)
    tool = osim.ScaleTool(os_setup)
    assert tool.run()
    pose = tool.getMarkerPlacer().getOutputStorage()  # OpenSim's static pose, unrounded
    names = pose.getColumnLabels()
    labels = [names.get(i) for i in range(1, names.getSize())]
    data = pose.getStateVector(0).getData()
    pose = {label: data.get(i) for i, label in enumerate(labels)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = tools.run(sj_setup)
    return tmp_path / "opensim", written, caught, pose


def _weighted_marker_cost(model_file: str, motion_file: str, trc: str, weights: dict) -> float:
    """OpenSim's IK objective at a motion's pose: the weighted squared distances of
    the model markers to the static trial averaged over 0.5 to 1.5 s."""
    model = osim.Model(model_file)
    state = model.initSystem()
    motion = osim.TimeSeriesTable(motion_file)
    for c in model.getCoordinateSet():
        c.setValue(state, motion.getDependentColumn(c.getAbsolutePathString() + "/value")[0], False)
    model.realizePosition(state)
    table = osim.TimeSeriesTableVec3(trc)
    times = np.array(table.getIndependentColumn())
    rows = np.nonzero((times >= 0.5) & (times <= 1.5))[0]
    cost = 0.0
    for name, w in weights.items():
        col = table.getDependentColumn(name)
        x = np.mean([[col[int(r)].get(i) for i in range(3)] for r in rows], axis=0) / 1000.0
        cost += w * float(np.sum((_v3(model.getMarkerSet().get(name).getLocationInGround(state)) - x) ** 2))
    return cost


def test_setup_matches_opensim(tmp_path):
    os_dir, written, _, pose = _run_both(tmp_path)
    assert set(written) == {"model", "scale_set", "placed_model", "marker_set", "motion"}
    worst = _compare(_properties(str(os_dir / "subject01_scaled.osim")), _properties(written["model"]))
    assert worst <= TOL
    # the scale factors applied, and the subject's mass
    expected = _scale_sets(str(os_dir / "subject01_scale_set_applied.xml"))
    actual = _scale_sets(written["scale_set"])
    assert set(actual) <= set(expected)
    for name, f in actual.items():
        np.testing.assert_allclose(f, expected[name], rtol=5e-6, atol=0)  # OpenSim writes 6 digits
    assert not np.allclose(actual["tibia_r"], 1.0) and not np.allclose(actual["talus_l"], actual["talus_l"][0])
    model = sj.load_osim(written["model"])
    assert sum(float(b.mass) for b in model.components_of(sj.Body)) == pytest.approx(72.6, rel=1e-12)

    # MarkerPlacer. OpenSim's one-frame IK stops at its assembler's accuracy: simjax's
    # pose is at least as good on OpenSim's own objective ...
    tool = osim.ScaleTool(SETUP)
    tasks = tool.getMarkerPlacer().getIKTaskSet()
    weights = {tasks.get(i).getName(): tasks.get(i).getWeight() for i in range(tasks.getSize())}
    trc = str(os_dir / "subject01_static.trc")
    cost_os = _weighted_marker_cost(
        str(os_dir / "subject01_scaled.osim"), str(os_dir / "subject01_static_output.mot"), trc, weights
    )
    cost_sj = _weighted_marker_cost(str(os_dir / "subject01_scaled.osim"), written["motion"], trc, weights)
    assert cost_sj <= cost_os + 1e-9
    # ... the placed model equals OpenSim's but for the markers, which sit on the
    # experimental ones at simjax's pose ...
    placed_os = _properties(str(os_dir / "subject01_scaled_placed.osim"))
    placed_sj = _properties(written["placed_model"])
    _compare(
        {k: v for k, v in placed_os.items() if not k.startswith("marker ")},
        {k: v for k, v in placed_sj.items() if not k.startswith("marker ")},
    )
    # ... and moved at OpenSim's pose, the markers are OpenSim's to 1e-9
    scaled = sj.load_osim(written["model"])
    system = scaled.build()
    motion = osim.TimeSeriesTable(str(os_dir / "subject01_static_output.mot"))
    state = system.set_coordinates(
        system.default_state(),
        {name: pose[path + "/value"] for name, path in zip(system.coordinate_names, system.coordinate_paths)},
    )
    table = sj.io.tables.read_table(trc)
    rows = (table.times >= 0.5) & (table.times <= 1.5)
    locations = {name: table.values[rows, i].mean(0) / 1000.0 for i, name in enumerate(table.labels)}
    moved = move_markers(scaled, np.asarray(state.q), locations)
    sj.save_osim(moved, str(tmp_path / "moved.osim"))
    moved_props = _properties(str(tmp_path / "moved.osim"))
    _compare(
        {k: v for k, v in placed_os.items() if k.startswith("marker ")},
        {k: v for k, v in moved_props.items() if k.startswith("marker ")},
    )
    # the outputs open in OpenSim, with OpenSim's labels
    assert osim.MarkerSet(written["marker_set"]).getSize() == osim.Model(written["placed_model"]).getNumMarkers()
    assert list(osim.TimeSeriesTable(written["motion"]).getColumnLabels()) == list(motion.getColumnLabels())


def test_marker_absent_from_data_or_model(tmp_path):
    """A measurement naming a marker absent from the data (or the model) is not used,
    with a warning, as OpenSim."""

    def edit(tool):
        for name, pair in (("bogus_data", ("R.ASIS", "NotInTheData")), ("bogus_model", ("R.ASIS", "R.Wrist.Med"))):
            m = osim.Measurement()
            m.setName(name)
            m.getMarkerPairSet().cloneAndAppend(osim.MarkerPair(*pair))
            bs = osim.BodyScale()
            bs.setName("torso")
            axes = osim.ArrayStr()
            axes.append("Y")
            bs.setAxisNames(axes)
            m.getBodyScaleSet().cloneAndAppend(bs)
            tool.getModelScaler().addMeasurement(m)

    os_dir, written, caught, _ = _run_both(tmp_path, edit)
    messages = [str(w.message) for w in caught if issubclass(w.category, SetupWarning)]
    assert any("NotInTheData" in m for m in messages), messages
    assert any("R.Wrist.Med" in m for m in messages), messages
    assert any("'bogus_data' measurement not used" in m for m in messages), messages
    _compare(_properties(str(os_dir / "subject01_scaled.osim")), _properties(written["model"]))


def test_missing_model_file(tmp_path):
    text = open(SETUP).read().replace("<model_file>gait10dof18musc.osim<", "<model_file>no/such_model.osim<")
    setup = tmp_path / "setup.xml"
    setup.write_text(text)
    with pytest.raises(FileNotFoundError) as err:
        tools.run(str(setup))
    assert os.path.join(str(tmp_path), "no", "such_model.osim") in str(err.value)


def test_scale_model_arm26_matches_opensim(tmp_path):
    """``Model::scale`` with non-uniform factors, masses scaled (mass distribution not
    preserved) then set to a subject mass: bodies, joint frames, markers and wrap
    objects (muscles, and their paths' compile time, are left to the gait setup)."""
    src = os.path.join(os.path.dirname(sj.__file__), "models", "arm26.osim")
    factors = {"r_humerus": (1.1, 1.2, 0.9), "r_ulna_radius_hand": (0.95, 1.05, 1.1), "base": (1.02, 1.02, 1.02)}

    model = osim.Model(src)
    model.updForceSet().clearAndDestroy()
    state = model.initSystem()
    scale_set = osim.ScaleSet()
    for name, f in factors.items():
        s = osim.Scale()
        s.setSegmentName(name)
        s.setScaleFactors(osim.Vec3(*f))
        s.setApply(True)
        scale_set.cloneAndAppend(s)
    model.scale(state, scale_set, False, 30.0)
    model.printToXML(str(tmp_path / "opensim.osim"))

    generic = sj.load_osim(src)
    for path in [p for p, c in generic.walk() if isinstance(c, sj.Force)]:
        generic = generic.remove(path)
    assert generic.components_of(WrapCylinder)
    scaled = scale_model(generic, factors, preserve_mass_distribution=False, mass=30.0)
    sj.save_osim(scaled, str(tmp_path / "simjax.osim"))
    expected = _properties(str(tmp_path / "opensim.osim"))
    assert any(k.endswith(".dimensions") for k in expected) and any(k.endswith(".radius") for k in expected)
    _compare(expected, _properties(str(tmp_path / "simjax.osim")))
