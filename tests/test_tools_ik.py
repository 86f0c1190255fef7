"""Inverse kinematics (``simjax.tools.kinematics``) against OpenSim 4.6's
``InverseKinematicsTool`` run live on the same setup files.

The gait pipeline runs over all 151 frames of ``subject01_walk.trc``; its setup copy
asks for ``accuracy`` 1e-9 (the shipped 1e-5 stops OpenSim's L-BFGS up to 1e-3 rad
short of the minimum, which simjax, converging to 1e-10, reaches: its weighted
objective is lower than OpenSim's at every frame) so that the two solutions can be
compared at 1e-4 rad.
"""

import importlib
import os
import shutil
import warnings

import numpy as np
import pytest

import simjax as sj
from simjax.io.tables import TimeSeriesTable, read_table, write_table
from simjax.tools import SetupError, SetupWarning
from simjax.tools import run as run_setup

from _pipeline import PIPELINE, run_in  # noqa: E402

opensim = pytest.importorskip("opensim")
ikm = importlib.import_module("simjax.tools.kinematics")


def _copy_pipeline(tmp):
    dst = os.path.join(tmp, "Gait10dof18musc")
    shutil.copytree(PIPELINE, dst)
    for root, dirs, files in os.walk(dst):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    return dst


def _edit(path, *pairs):
    with open(path) as fh:
        text = fh.read()
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    with open(path, "w") as fh:
        fh.write(text)


def _run_opensim(setup):
    """OpenSim's tool, run from the setup's folder (it opens the model relative to
    the working directory)."""
    opensim.Logger.setLevelString("error")
    assert run_in(os.path.dirname(setup), lambda: opensim.InverseKinematicsTool(os.path.basename(setup)).run())


def _gait_system():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # display meshes not shipped
        return sj.load_osim(os.path.join(PIPELINE, "subject01.osim")).build()


def _in_radians(system, table):
    out = np.array(table.values, float)
    for j, label in enumerate(table.labels):
        if system.topology.tree.coordinates[system.coordinate_path(label)].motion_type == "Rotational":
            out[:, j] = np.radians(out[:, j])
    return out


@pytest.fixture(scope="module")
def gait(tmp_path_factory):
    """The gait pipeline run by OpenSim and by simjax (same setup, two folders)."""
    tmp = tmp_path_factory.mktemp("ik")
    out = {}
    for who in ("opensim", "simjax"):
        folder = _copy_pipeline(str(tmp / who))
        setup = os.path.join(folder, "IK", "walk_Setup_IK.xml")
        _edit(
            setup,
            ("<accuracy>1e-005</accuracy>", "<accuracy>1e-9</accuracy>"),
            ("<report_marker_locations>false", "<report_marker_locations>true"),
            # a task for a marker that is neither in the data nor the model
            (
                '<IKMarkerTask name="Sternum">',
                '<IKMarkerTask name="NoSuchMarker"><weight>5</weight></IKMarkerTask>\n<IKMarkerTask name="Sternum">',
            ),
        )
        if who == "opensim":
            _run_opensim(setup)
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                written = run_setup(setup)
            out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, SetupWarning)]
            out["written"] = written
        out[who] = os.path.join(folder, "IK")
    return out


def test_gait_pipeline_matches_opensim(gait):
    system = _gait_system()
    ref = read_table(os.path.join(gait["opensim"], "subject01_walk_IK.mot"))
    got = read_table(os.path.join(gait["simjax"], "subject01_walk_IK.mot"))
    assert got.labels == ref.labels and got.n_rows == ref.n_rows == 151
    np.testing.assert_allclose(got.times, ref.times, atol=1e-12)
    a, b = _in_radians(system, got), _in_radians(system, ref)
    for j, label in enumerate(ref.labels):
        tol = 1e-5 if label.endswith(("_tx", "_ty", "_tz")) else 1e-4
        assert np.max(np.abs(a[:, j] - b[:, j])) < tol, label
    err_ref = read_table(os.path.join(gait["opensim"], "_ik_marker_errors.sto"))
    err = read_table(os.path.join(gait["simjax"], "_ik_marker_errors.sto"))
    assert err.labels == err_ref.labels == ("total_squared_error", "marker_error_RMS", "marker_error_max")
    assert np.all(err["marker_error_RMS"] <= err_ref["marker_error_RMS"] + 1e-6)
    np.testing.assert_allclose(err.values, err_ref.values, atol=1e-6)
    loc_ref = read_table(os.path.join(gait["opensim"], "_ik_model_marker_locations.sto"))
    loc = read_table(os.path.join(gait["simjax"], "_ik_model_marker_locations.sto"))
    assert loc.labels == loc_ref.labels
    np.testing.assert_allclose(loc.values, loc_ref.values, atol=1e-6)


def test_gait_shipped_accuracy_stops_near_the_minimum(gait):
    """The setup's ``accuracy`` is simjax's step tolerance: with the shipped 1e-5 the
    solution is within 2e-6 rad of the one at 1e-9 (OpenSim's, at 1e-5, is up to 1e-3
    rad from it)."""
    system = _gait_system()
    setup = os.path.join(gait["simjax"], "walk_Setup_IK.xml")
    loose = os.path.join(gait["simjax"], "walk_Setup_IK_shipped_accuracy.xml")
    shutil.copy(setup, loose)
    _edit(
        loose,
        ("<accuracy>1e-9</accuracy>", "<accuracy>1e-005</accuracy>"),
        ("subject01_walk_IK.mot", "subject01_walk_IK_shipped_accuracy.mot"),
        ("<report_errors>true", "<report_errors>false"),
        ("<report_marker_locations>true", "<report_marker_locations>false"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SetupWarning)
        run_setup(loose)
    tight = _in_radians(system, read_table(os.path.join(gait["simjax"], "subject01_walk_IK.mot")))
    shipped = _in_radians(system, read_table(os.path.join(gait["simjax"], "subject01_walk_IK_shipped_accuracy.mot")))
    assert np.max(np.abs(shipped - tight)) < 2e-6


def test_gait_files_open_in_opensim(gait):
    for name in ("subject01_walk_IK.mot", "_ik_marker_errors.sto", "_ik_model_marker_locations.sto"):
        ref = opensim.TimeSeriesTable(os.path.join(gait["opensim"], name))
        got = opensim.TimeSeriesTable(os.path.join(gait["simjax"], name))
        assert list(got.getColumnLabels()) == list(ref.getColumnLabels())
        assert got.getNumRows() == ref.getNumRows()
        sto = opensim.Storage(os.path.join(gait["simjax"], name))
        assert sto.getSize() == ref.getNumRows()
        with open(os.path.join(gait["opensim"], name)) as f1, open(os.path.join(gait["simjax"], name)) as f2:
            h1, h2 = f1.read().split("endheader")[0], f2.read().split("endheader")[0]
        assert h1 == h2  # OpenSim's header, byte for byte
    assert sorted(gait["written"]) == ["marker_errors", "marker_locations", "motion"]


def test_gait_marker_task_absent_warns(gait):
    assert any("NoSuchMarker" in w for w in gait["warnings"])


def test_gait_synthetic_markers_recovered(gait):
    """Markers computed by simjax from a known motion (the pipeline's) give it back."""
    system = _gait_system()
    q_true = _in_radians(system, read_table(os.path.join(gait["simjax"], "subject01_walk_IK.mot")))
    loc = read_table(os.path.join(gait["simjax"], "_ik_model_marker_locations.sto"))
    # the known motion, exactly: the model's markers at these coordinates
    labels = read_table(os.path.join(gait["simjax"], "subject01_walk_IK.mot")).labels
    coords = TimeSeriesTable(loc.times, q_true, labels)
    state = system.default_state()
    q = np.zeros((loc.n_rows, system.topology.tree.nq))
    for j, label in enumerate(coords.labels):
        q[:, system.topology.tree.coordinates[system.coordinate_path(label)].q] = coords.values[:, j]
    names = tuple(lab[:-3] for lab in loc.labels[::3])
    markers = _model_markers(system, state, q, names, loc.times, units="m")
    weights = dict(ikm._tasks(sj.tools.read_setup(os.path.join(gait["simjax"], "walk_Setup_IK.xml")))[0])
    weights.pop("NoSuchMarker")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ikm.inverse_kinematics(system, markers, marker_weights=weights)
    assert res.converged.all()
    np.testing.assert_allclose(res.q, q, atol=1e-8)
    assert np.max(res.marker_errors["marker_error_max"]) < 1e-9


def _model_markers(system, state, q, names, times, units="m", drop=None):
    """A marker table of the model's markers at the coordinates ``q (n, nq)``."""
    import jax

    paths = {c.name: p for p, c in system.model.walk() if isinstance(c, sj.Marker)}
    st = ikm._Static(
        frames=tuple(system.topology.connections[(paths[n], "parent_frame")] for n in names),
        marker_paths=tuple(paths[n] for n in names),
        coord_q=(),
        coord_u=(),
        movable=(),
        bound_u=(),
        bound_q=(),
        fixed_q=(),
        constrained=True,
        has_constraints=False,
        max_steps=1,
        max_passes=1,
    )
    locations = ikm._marker_locations(system, st)
    x = np.asarray(jax.jit(jax.vmap(lambda qq: ikm._marker_points(system, st, state, qq, locations)))(q))
    scale = {"m": 1.0, "mm": 1000.0}[units]
    x = x * scale
    if drop is not None:
        for frame, marker in drop:
            x[frame, marker] = np.nan
    return TimeSeriesTable(times, x, names, metadata={"Units": units, "DataRate": "100"})


ARM_MOTION_FRAMES = 21


def _arm_motion():
    t = np.linspace(0.0, 0.2, ARM_MOTION_FRAMES)
    shoulder = 0.3 + 0.4 * np.sin(6 * t)
    elbow = 0.5 + 0.9 * t / 0.2
    return t, shoulder, elbow


def test_arm26_synthetic_mm_missing_markers():
    """arm26: markers of a known motion, in mm, one marker blank in some frames."""
    system = sj.models.load("arm26").build()
    t, shoulder, elbow = _arm_motion()
    state = system.default_state()
    q = np.tile(np.asarray(state.q), (len(t), 1))
    tree = system.topology.tree
    q[:, tree.coordinates[system.coordinate_path("r_shoulder_elev")].q] = shoulder
    q[:, tree.coordinates[system.coordinate_path("r_elbow_flex")].q] = elbow
    names = ("r_acromion", "r_humerus_epicondyle", "r_radius_styloid")
    markers = _model_markers(system, state, q, names, t, units="mm", drop=[(3, 0), (4, 0), (10, 0)])
    res = ikm.inverse_kinematics(system, markers)
    assert res.converged.all() and res.marker_names == names
    np.testing.assert_allclose(res.q, q, atol=1e-8)
    assert np.all(res.squared_errors[[3, 4, 10], 0] == 0)
    # a data marker the model lacks: warned, then ignored (same solution)
    extra = TimeSeriesTable(
        t,
        np.concatenate([markers.values, markers.values[:, :1] + 10.0], axis=1),
        names + ("not_in_model",),
        metadata=markers.metadata,
    )
    with pytest.warns(ikm.IKWarning, match="not_in_model.*not in the model"):
        res_extra = ikm.inverse_kinematics(system, extra)
    np.testing.assert_array_equal(res_extra.q, res.q)
    # time_range: OpenSim's nearest rows, clamped to the data
    assert ikm._frame_range(t, (0.05, 9.0), "") == (5, len(t))
    assert ikm._frame_range(t, (-1.0, 0.061), "") == (0, 7)
    with pytest.raises(ValueError, match="outside the data"):
        ikm.inverse_kinematics(system, markers, time_range=(5.0, 6.0))
    blank = np.array(markers.values)
    blank[7] = np.nan
    with pytest.raises(ValueError, match="every tracked marker is missing"):
        ikm.inverse_kinematics(system, TimeSeriesTable(t, blank, names, metadata=markers.metadata))


def _arm_setup(tmp, tasks, time_range="0.02 0.18", blank=True):
    folder = os.path.join(tmp, "arm")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(sj.models.path("arm26"), os.path.join(folder, "arm26.osim"))
    system = sj.models.load("arm26").build()
    t, shoulder, elbow = _arm_motion()
    state = system.default_state()
    q = np.tile(np.asarray(state.q), (len(t), 1))
    tree = system.topology.tree
    q[:, tree.coordinates[system.coordinate_path("r_shoulder_elev")].q] = shoulder
    q[:, tree.coordinates[system.coordinate_path("r_elbow_flex")].q] = elbow
    names = ("r_acromion", "r_humerus_epicondyle", "r_radius_styloid")
    markers = _model_markers(system, state, q, names, t, units="mm")
    # noise, so that the tasks compete; a blank marker in two frames
    rng = np.random.default_rng(0)
    vals = np.array(markers.values) + rng.normal(0, 5.0, markers.values.shape)
    write_table(TimeSeriesTable(t, vals, names, metadata=markers.metadata), os.path.join(folder, "arm.trc"))
    trc = os.path.join(folder, "arm.trc")
    lines = open(trc).read().split("\n")
    for row in (6 + 5, 6 + 6) if blank else ():  # frames 5 and 6: r_radius_styloid blank
        fields = lines[row].split("\t")
        fields[2 + 6 : 2 + 9] = ["", "", ""]
        lines[row] = "\t".join(fields)
    open(trc, "w").write("\n".join(lines))
    xml = f"""<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="40000">
  <InverseKinematicsTool name="arm">
    <results_directory>results</results_directory>
    <model_file>arm26.osim</model_file>
    <constraint_weight>Inf</constraint_weight>
    <accuracy>1e-10</accuracy>
    <IKTaskSet><objects>
      <IKMarkerTask name="r_acromion"><apply>true</apply><weight>1</weight></IKMarkerTask>
      <IKMarkerTask name="r_humerus_epicondyle"><apply>true</apply><weight>2</weight></IKMarkerTask>
      <IKMarkerTask name="r_radius_styloid"><apply>true</apply><weight>1</weight></IKMarkerTask>
      {tasks}
    </objects><groups /></IKTaskSet>
    <marker_file>arm.trc</marker_file>
    <time_range>{time_range}</time_range>
    <report_errors>true</report_errors>
    <output_motion_file>results/arm_ik.mot</output_motion_file>
    <report_marker_locations>false</report_marker_locations>
  </InverseKinematicsTool>
</OpenSimDocument>
"""
    setup = os.path.join(folder, "setup.xml")
    open(setup, "w").write(xml)
    return folder, setup


def test_arm26_coordinate_tasks_and_blank_markers_match_opensim(tmp_path):
    """``manual_value`` and ``from_file`` coordinate tasks (a coordinate file in degrees,
    sampled more finely than the markers: OpenSim's quintic GCV spline through it),
    markers in mm with one blank in two frames, a time range inside the data."""
    tasks = (
        '<IKCoordinateTask name="r_elbow_flex"><apply>true</apply><weight>0.001</weight>'
        "<value_type>manual_value</value_type><value>1.2</value></IKCoordinateTask>"
        '<IKCoordinateTask name="r_shoulder_elev"><apply>true</apply><weight>0.002</weight>'
        "<value_type>from_file</value_type></IKCoordinateTask>"
    )
    out = {}
    for who in ("opensim", "simjax"):
        folder, setup = _arm_setup(str(tmp_path / who), tasks)
        tc = np.linspace(0.0, 0.2, 57)
        ikm.write_storage(
            os.path.join(folder, "coords.mot"),
            "coords",
            tc,
            np.degrees(np.stack([0.5 + 0.3 * np.cos(9 * tc), 0.7 + tc], axis=1)),
            ["r_shoulder_elev", "r_elbow_flex"],
            in_degrees=True,
        )
        _edit(setup, ("<marker_file>", "<coordinate_file>coords.mot</coordinate_file>\n    <marker_file>"))
        if who == "opensim":
            os.makedirs(os.path.join(folder, "results"), exist_ok=True)
            _run_opensim(setup)
        else:
            run_setup(setup)
        out[who] = os.path.join(folder, "results")
    ref = read_table(os.path.join(out["opensim"], "arm_ik.mot"))
    got = read_table(os.path.join(out["simjax"], "arm_ik.mot"))
    assert got.labels == ref.labels and got.n_rows == ref.n_rows == 17
    np.testing.assert_allclose(np.radians(got.values), np.radians(ref.values), atol=1e-6)
    e_ref = read_table(os.path.join(out["opensim"], "arm_ik_marker_errors.sto"))
    e = read_table(os.path.join(out["simjax"], "arm_ik_marker_errors.sto"))
    np.testing.assert_allclose(e.values, e_ref.values, atol=1e-7)


def test_bad_setups(tmp_path):
    folder, setup = _arm_setup(str(tmp_path), "", time_range="5 6")
    with pytest.raises(SetupError, match="time_range.*outside the data"):
        run_setup(setup)
    _edit(setup, ("<time_range>5 6", "<time_range>0 0.1"), ("<accuracy>1e-10", "<accuracy>-1"))
    with pytest.raises(SetupError, match="accuracy.*-1.*positive"):
        run_setup(setup)
    _edit(setup, ("<model_file>arm26.osim</model_file>", "<model_file>../models/none.osim</model_file>"))
    with pytest.raises(FileNotFoundError, match=os.path.join(str(tmp_path), "models", "none.osim")):
        run_setup(setup)


def _lock_and_clamp(model):
    coords = model.updCoordinateSet()
    shoulder = coords.get("r_shoulder_elev")
    shoulder.set_default_value(0.2)
    shoulder.set_locked(True)
    elbow = coords.get("r_elbow_flex")
    elbow.set_range(1, 1.0)  # the motion goes to 1.4 rad: the bound is active
    elbow.set_clamped(True)


def _couple(model):
    cc = opensim.CoordinateCouplerConstraint()
    cc.setName("couple")
    names = opensim.ArrayStr()
    names.append("r_shoulder_elev")
    cc.setIndependentCoordinateNames(names)
    cc.setDependentCoordinateName("r_elbow_flex")
    cc.setFunction(opensim.LinearFunction(1.5, 0.4))
    model.addConstraint(cc)
    model.getCoordinateSet().get("r_shoulder_elev").set_default_value(0.6)


@pytest.mark.parametrize("edit", [_lock_and_clamp, _couple], ids=["locked_clamped", "coupler_constraint"])
def test_arm26_locked_clamped_constrained_match_opensim(tmp_path, edit):
    """A locked coordinate is held, a clamped one stays in its range (at the bound
    where the markers pull it out), a CoordinateCouplerConstraint holds exactly."""
    out = {}
    for who in ("opensim", "simjax"):
        # a default_value task pulling against the markers
        task = (
            (
                '<IKCoordinateTask name="r_shoulder_elev"><apply>true</apply><weight>0.001</weight>'
                "<value_type>default_value</value_type></IKCoordinateTask>"
            )
            if edit is _couple
            else ""
        )
        folder, setup = _arm_setup(str(tmp_path / who), task, blank=False)
        model = opensim.Model(os.path.join(folder, "arm26.osim"))
        edit(model)
        model.finalizeFromProperties()
        model.printToXML(os.path.join(folder, "arm26.osim"))
        if who == "opensim":
            os.makedirs(os.path.join(folder, "results"), exist_ok=True)
            _run_opensim(setup)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_setup(setup)
        out[who] = os.path.join(folder, "results")
    ref = read_table(os.path.join(out["opensim"], "arm_ik.mot"))
    got = read_table(os.path.join(out["simjax"], "arm_ik.mot"))
    assert got.labels == ref.labels == ("r_shoulder_elev", "r_elbow_flex")
    q, q_ref = np.radians(got.values), np.radians(ref.values)
    np.testing.assert_allclose(q, q_ref, atol=1e-4)
    if edit is _lock_and_clamp:
        np.testing.assert_allclose(q[:, 0], 0.2, atol=1e-12)
        assert np.all(q[:, 1] <= 1.0 + 1e-12) and np.any(q[:, 1] >= 1.0 - 1e-9)
    else:
        np.testing.assert_allclose(q[:, 1], 1.5 * q[:, 0] + 0.4, atol=1e-7)  # .mot: 8 decimals of degrees
    e_ref = read_table(os.path.join(out["opensim"], "arm_ik_marker_errors.sto"))
    e = read_table(os.path.join(out["simjax"], "arm_ik_marker_errors.sto"))
    assert np.all(e["marker_error_RMS"] <= e_ref["marker_error_RMS"] + 1e-6)


LEG39 = os.path.join(os.path.dirname(__file__), "data", "collection", "Leg39__leg39.osim")


def _leg39_markers(path, t):
    """Leg39's markers along a known motion (OpenSim assembles the coupled coordinates)
    plus 3 mm of noise, so that the optimum leaves residuals; written to ``path``
    (``.trc``, m). **Returns:** the marker names and positions ``(n, M, 3)``."""
    model = opensim.Model(LEG39)
    s = model.initSystem()
    coords, markers = model.getCoordinateSet(), model.getMarkerSet()
    names = [markers.get(i).getName() for i in range(markers.getSize())]
    x = np.zeros((len(t), len(names), 3))
    for k, tk in enumerate(t):
        for name, value in (
            ("pelvis_tx", 0.3 * tk),
            ("pelvis_ty", 0.9),
            ("hip_angle_r", 0.3 * np.sin(4 * tk)),
            ("knee_angle_r", -0.2 - np.sin(3 * tk)),
            ("ankle_angle_r", 0.2 * np.cos(5 * tk)),
        ):
            coords.get(name).setValue(s, float(value), False)
        model.assemble(s)
        model.realizePosition(s)
        x[k] = [[markers.get(i).getLocationInGround(s).get(j) for j in range(3)] for i in range(len(names))]
    x += np.random.default_rng(0).normal(0.0, 3e-3, x.shape)
    write_table(TimeSeriesTable(t, x, tuple(names), metadata={"Units": "m", "DataRate": "20"}), path)
    return tuple(names), x


def _opensim_ik(trc, names, weights, t, accuracy):
    """OpenSim's ``InverseKinematicsSolver`` with the model's constraints enforced, frame
    by frame as its ``InverseKinematicsTool`` runs it (the first frame assembled from
    the default pose, each later one tracked from the previous), at full precision.

    **Returns:** ``q (n, n_coordinates)``, the coordinate names, and ``markers(q)``:
    OpenSim's model markers ``(n, M, 3)`` at coordinates ``(n, n_coordinates)``."""
    model = opensim.Model(LEG39)
    s = model.initSystem()
    weight_set = opensim.SetMarkerWeights()
    for name, w in zip(names, weights):
        weight_set.cloneAndAppend(opensim.MarkerWeight(name, float(w)))
    solver = opensim.InverseKinematicsSolver(
        model, opensim.MarkersReference(trc, weight_set), opensim.SimTKArrayCoordinateReference(), float("inf")
    )
    solver.setAccuracy(accuracy)
    coords = model.getCoordinateSet()
    q = []
    for k, tk in enumerate(t):
        s.setTime(float(tk))
        solver.assemble(s) if k == 0 else solver.track(s)
        q.append([coords.get(i).getValue(s) for i in range(coords.getSize())])

    def markers(q):
        out = []
        for row in q:
            for i, v in enumerate(row):
                coords.get(i).setValue(s, float(v), False)
            model.realizePosition(s)
            out.append([[model.getMarkerSet().get(m).getLocationInGround(s).get(j) for j in range(3)] for m in names])
        return np.array(out)

    return np.array(q), [coords.get(i).getName() for i in range(coords.getSize())], markers


def test_leg39_nonlinear_couplers_match_opensim(tmp_path):
    """Leg39's five CoordinateCouplerConstraints (the tibia's and the patella's
    translations and the patella's angle, splines of the knee angle) enforced, with
    locked and clamped coordinates: every frame converges onto the constraints, to
    OpenSim's optimum (solved to accuracy 1e-12: the tool's usual 1e-5 stops short),
    with marker errors no larger than OpenSim's."""
    t = np.linspace(0.0, 0.25, 6)
    trc = str(tmp_path / "leg.trc")
    names, x = _leg39_markers(trc, t)
    weights = 1.0 + np.arange(len(names)) % 3
    q_ref, labels, markers = _opensim_ik(trc, names, weights, t, accuracy=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # display meshes not shipped
        system = sj.load_osim(LEG39).build()
    res = ikm.inverse_kinematics(system, read_table(trc), marker_weights=dict(zip(names, weights)))
    assert res.converged.all()  # (which includes the constraints held to 1.5e-10)
    q = res.coordinates.values[:, [res.coordinates.labels.index(n) for n in labels]]
    np.testing.assert_allclose(q, q_ref, rtol=0, atol=1e-8)
    rms = [np.sqrt(np.mean(np.sum((markers(qq) - x) ** 2, axis=-1), axis=-1)) for qq in (q, q_ref)]
    assert np.all(rms[0] <= rms[1] + 1e-9)
    np.testing.assert_allclose(res.marker_errors["marker_error_RMS"], rms[0], rtol=0, atol=1e-12)
