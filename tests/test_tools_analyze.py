"""AnalyzeTool (StaticOptimization, MuscleAnalysis, BodyKinematics, PointKinematics,
JointReaction) against OpenSim 4.6, run live on the Gait10dof18musc pipeline.

OpenSim's IK makes the coordinates (0.5-1.0 s); an AnalyzeTool setup authored with
OpenSim's API (6 Hz low-pass, ground reactions, the pipeline's residual and reserve
actuators appended) runs 0.6-0.7 s in OpenSim and in simjax (OpenSim's static
optimization, converged tightly, takes about 7 s a frame); a second one computes joint
reactions over the same window with OpenSim's static optimization forces. Both
write 16 digits (``output_precision``); every output file is compared column by column.
"""

import os
import shutil

import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

import jax  # noqa: E402

import simjax as sj  # noqa: E402
import simjax.tools  # noqa: E402
from simjax.io.tables import read_table  # noqa: E402
from simjax.tools.setup import SetupError  # noqa: E402

from _pipeline import PIPELINE, run_in, tight_static_optimization  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file:UserWarning")

NAME = "subject01_walk"
JR_NAME = "subject01_walk_JR"

_POINTS = [("PointKinematics", "tibia_r", None, "tib"), ("PointKinematicsPelvis", "tibia_r", "pelvis", "tib_pelvis")]
_REACTIONS = [
    ("JR_knee_hip", ["knee_r", "hip_r"], ["child", "parent"], ["child", "parent"]),
    ("JR_all", ["all"], ["parent"], ["ground"]),
    ("JR_in_pelvis", ["hip_r", "knee_r"], ["child"], ["pelvis"]),
]
_FORCES = f"Results/{NAME}_StaticOptimization_force.sto"


def _strings(words):
    out = opensim.ArrayStr()
    for w in words:
        out.append(w)
    return out


def _tool(name, t0, t1, results, analyses):
    tool = opensim.AnalyzeTool()
    tool.setName(name)
    tool.setModelFilename("../subject01.osim")
    tool.setCoordinatesFileName("../IK/subject01_walk_IK.mot")
    tool.setLowpassCutoffFrequency(6)
    tool.setInitialTime(t0)
    tool.setFinalTime(t1)
    tool.setExternalLoadsFileName("../ExperimentalData/subject01_walk_grf.xml")
    tool.setForceSetFiles(_strings(["../gait10dof_Reserve_Actuators.xml"]))
    tool.setReplaceForceSet(False)
    tool.setResultsDir(results)
    tool.setOutputPrecision(16)
    for a in analyses:
        a.setStartTime(t0)
        a.setEndTime(t1)
        tool.getAnalysisSet().cloneAndAppend(a)
    return tool


def _point_kinematics(model, name, body, relative_to, point_name):
    pk = opensim.PointKinematics(model)  # (its body is set through the model)
    pk.setName(name)
    pk.setBodyPoint(body, opensim.Vec3(0.01, -0.2, 0.02))
    if relative_to:
        pk.setRelativeToBody(model.getBodySet().get(relative_to))
    pk.setPointName(point_name)
    return pk


def _joint_reaction(name, joints, on, frames):
    jr = opensim.JointReaction()
    jr.setName(name)
    jr.setForcesFileName(_FORCES)
    jr.setJointNames(_strings(joints))
    jr.setOnBody(_strings(on))
    jr.setInFrame(_strings(frames))
    return jr


def _setup(root):
    so = tight_static_optimization(opensim)
    ma = opensim.MuscleAnalysis()
    ma.setName("MuscleAnalysis")
    ma.setComputeMoments(True)
    bk = opensim.BodyKinematics()
    bk.setName("BodyKinematics")
    model = opensim.Model(str(root / "subject01.osim"))
    points = [_point_kinematics(model, *p) for p in _POINTS]
    path = str(root / "AN" / "setup_AN.xml")
    _tool(NAME, 0.6, 0.7, "Results", [so, ma, bk] + points).printToXML(path)
    return path


def _setup_reactions(root):
    path = str(root / "AN" / "setup_JR.xml")
    _tool(JR_NAME, 0.6, 0.7, "ResultsJR", [_joint_reaction(*r) for r in _REACTIONS]).printToXML(path)
    return path


def _ours(setup, results):
    """Our copy of an OpenSim setup, writing to ``results``."""
    path = os.path.join(os.path.dirname(setup), "simjax_" + os.path.basename(setup))
    text = open(setup).read()
    old = text[text.index("<results_directory>") : text.index("</results_directory>")]
    open(path, "w").write(text.replace(old, f"<results_directory>{results}"))
    return path


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("analyze") / "Gait10dof18musc"
    shutil.copytree(PIPELINE, root)
    ik = root / "IK" / "walk_Setup_IK.xml"
    ik.write_text(ik.read_text().replace("<time_range> 0 2.5</time_range>", "<time_range>0.5 1.0</time_range>"))
    run_in(root / "IK", lambda: opensim.InverseKinematicsTool("walk_Setup_IK.xml").run())
    (root / "AN").mkdir()
    setup, reactions = _setup(root), _setup_reactions(root)
    try:
        run_in(root / "AN", lambda: opensim.AnalyzeTool(os.path.basename(setup)).run())
        run_in(root / "AN", lambda: opensim.AnalyzeTool(os.path.basename(reactions)).run())
    finally:
        opensim.IO.SetPrecision(8)  # the tools set OpenSim's precision for the whole process
    ours = _ours(setup, "ResultsSimjax")
    out = simjax.tools.run(ours)
    ours_jr = _ours(reactions, "ResultsJRSimjax")
    out_jr = simjax.tools.run(ours_jr)
    return {
        "root": root,
        "setup": ours,
        "out": out,
        "ref": str(root / "AN" / "Results"),
        "setup_jr": ours_jr,
        "out_jr": out_jr,
        "ref_jr": str(root / "AN" / "ResultsJR"),
    }


def _pair(pipeline, key, run=""):
    got = read_table(pipeline["out" + run][key])
    ref = read_table(os.path.join(pipeline["ref" + run], f"{JR_NAME if run else NAME}_{key}.sto"))
    assert list(got.labels) == list(ref.labels), key
    np.testing.assert_allclose(got.times, ref.times, rtol=0, atol=1e-9)
    return np.asarray(got.values), np.asarray(ref.values), list(ref.labels)


def test_files_named_as_opensim(pipeline):
    for run in ("", "_jr"):
        theirs = {f for f in os.listdir(pipeline["ref" + run]) if f.endswith(".sto")}
        ours = {os.path.basename(p) for p in pipeline["out" + run].values()}
        assert theirs - ours == set() and ours - theirs == set()
    ours = {os.path.basename(p) for p in pipeline["out"].values()}
    assert f"{NAME}_StaticOptimization_activation.sto" in ours and f"{NAME}_MuscleAnalysis_TendonLength.sto" in ours
    assert f"{NAME}_PointKinematicsPelvis_tib_pelvis_acc.sto" in ours
    assert f"{JR_NAME}_JR_all_ReactionLoads.sto" in {os.path.basename(p) for p in pipeline["out_jr"].values()}


def test_muscle_analysis_and_body_kinematics_match(pipeline):
    keys = [k for k in pipeline["out"] if k.startswith(("MuscleAnalysis_", "BodyKinematics_"))]
    assert len(keys) > 30 and "BodyKinematics_pos_global" in keys and "MuscleAnalysis_MomentArm_knee_angle_r" in keys
    worst = 0.0
    for key in keys:
        got, ref, _ = _pair(pipeline, key)
        # OpenSim writes 8 decimals: 5e-9 is its rounding; a fiber force is the sum of
        # rounded-in-OpenSim parts, 1.2e-7 N on ~4e4 N
        err = np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)
        tol = 2e-7 if key in ("MuscleAnalysis_FiberForce",) else 2e-8
        assert err.max() <= tol, (key, err.max())
        worst = max(worst, err.max() if key != "MuscleAnalysis_FiberForce" else 0.0)
    assert worst < 2e-8


def test_static_optimization_matches_opensim(pipeline):
    got, ref, labels = _pair(pipeline, "StaticOptimization_activation")
    assert labels[:2] == ["hamstrings_r", "bifemsh_r"] and labels[-1] == "lumbar_extension_reserve"
    assert np.abs(got - ref).max() < 1e-3
    assert np.all((got**2).sum(1) <= (ref**2).sum(1) * (1 + 1e-9))
    fgot, fref, flabels = _pair(pipeline, "StaticOptimization_force")
    assert flabels[28:31] == ["calcn_r_right_Fx", "calcn_r_right_Fy", "calcn_r_right_Fz"]
    # the strengths (force per unit control: use_muscle_physiology) are OpenSim's
    n = got.shape[1]
    strength_got, strength_ref = fgot[:, :n] / got, fref[:, :n] / ref
    np.testing.assert_allclose(strength_got, strength_ref, rtol=1e-6)
    # forces within 1e-3 of each actuator's strength (its force at full activation; 1 N
    # or N m at least: reserves of a few mN m), as the activations are within 1e-3: at some
    # frames OpenSim's IPOPT ends in "Restoration failed" with acceleration violations of
    # ~1e-4, its activations ~1e-4 from the optimum (a weak muscle's force off by ~2e-3
    # of its own peak in this window)
    scale = np.maximum(np.nanmax(np.abs(strength_ref), axis=0), 1.0)
    assert np.all(np.abs(fgot[:, :n] - fref[:, :n]) <= 1e-3 * scale)
    # the external loads ForceReporter records with them
    np.testing.assert_allclose(fgot[:, n:], fref[:, n:], rtol=0, atol=1e-7 * np.abs(fref).max())


def test_output_opens_in_opensim(pipeline):
    for key in (
        "StaticOptimization_activation",
        "StaticOptimization_force",
        "MuscleAnalysis_Length",
        "BodyKinematics_pos_global",
    ):
        ours = opensim.Storage(pipeline["out"][key])
        theirs = opensim.Storage(os.path.join(pipeline["ref"], f"{NAME}_{key}.sto"))
        labels = [ours.getColumnLabels().get(i) for i in range(ours.getColumnLabels().getSize())]
        assert labels == [theirs.getColumnLabels().get(i) for i in range(theirs.getColumnLabels().getSize())]
        assert ours.getSize() == theirs.getSize()


def test_unknown_analysis_lists_supported(pipeline, tmp_path):
    text = open(pipeline["setup"]).read().replace("<BodyKinematics name=", "<InducedAccelerations name=")
    text = text.replace("</BodyKinematics>", "</InducedAccelerations>")
    text = text.replace("../", str(pipeline["root"]) + "/")
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    with pytest.raises(SetupError, match=r"InducedAccelerations.*BodyKinematics.*MuscleAnalysis.*StaticOptimization"):
        simjax.tools.run(str(bad))


def test_component_outputs_one_program(monkeypatch):
    from simjax.forward import Context
    from simjax.muscles.muscle import Muscle

    model = sj.load_osim(os.path.join(PIPELINE, "subject01.osim"))
    system = model.build()
    state = system.default_state()
    paths = model.paths(Muscle)
    calls = []
    original = Context.group_outputs
    monkeypatch.setattr(Context, "group_outputs", lambda self, p, n: calls.append(n) or original(self, p, n))
    one = sj.component_outputs(system, state, paths, "tendon_force")
    assert len(paths) == 18 and calls == ["tendon_force"]  # one gather for all the muscles, traced once
    sj.component_outputs(system, state.replace(t=state.t + 0.1), paths, "tendon_force")
    assert calls == ["tendon_force"]  # and not traced again
    for k in (0, 17):
        np.testing.assert_allclose(one[k], sj.output(system, state, paths[k] + "|tendon_force"), rtol=1e-12)
    batch = jax.tree_util.tree_map(lambda x: np.stack([x, x]), state)
    many = sj.component_outputs(system, batch, paths, "tendon_force")
    assert many.shape == (2, len(paths))
    np.testing.assert_allclose(many[1], one, rtol=1e-12)


def test_point_kinematics_match(pipeline):
    keys = [f"{name}_{point}_{k}" for name, _, _, point in _POINTS for k in ("pos", "vel", "acc")]
    worst = 0.0
    for key in keys:
        got, ref, labels = _pair(pipeline, key)
        assert labels == ["state_0", "state_1", "state_2"]  # as OpenSim 4.6 writes them
        err = np.abs(got - ref) / np.maximum(np.abs(ref).max(0), 1.0)
        worst = max(worst, err.max())
    # the same point in Ground and in the pelvis: different numbers
    a, _, _ = _pair(pipeline, keys[0])
    b, _, _ = _pair(pipeline, keys[3])
    assert np.abs(a - b).max() > 0.1
    assert worst < 1e-9, worst


def test_joint_reactions_match(pipeline):
    worst = 0.0
    for name, *_ in _REACTIONS:
        got, ref, labels = _pair(pipeline, f"{name}_ReactionLoads", "_jr")
        scale = np.abs(ref).max(0)
        err = np.abs(got - ref)
        # relative to each column's scale (a column of rounding errors, e.g. the pelvis's
        # residual balance: relative to the largest load)
        rel = err / np.maximum(scale, 1e-9 * scale.max())
        assert rel.max() < 1e-6, (name, labels[int(np.argmax(rel.max(0)))], rel.max())
        worst = max(worst, rel.max())
        if name == "JR_knee_hip":
            assert labels[0] == "knee_r_on_tibia_r_in_tibia_r_fx" and labels[9] == "hip_r_on_pelvis_in_pelvis_fx"
            assert labels[8] == "knee_r_on_tibia_r_in_tibia_r_pz"
        if name == "JR_all":
            assert len(labels) == 9 * 12 and labels[0] == "ground_pelvis_on_ground_in_ground_fx"
    assert worst < 1e-6
    # a muscle-driven load: the knee's compression is hundreds of newtons
    got, _, labels = _pair(pipeline, "JR_in_pelvis_ReactionLoads", "_jr")
    assert np.abs(got[:, labels.index("knee_r_on_tibia_r_in_pelvis_fy")]).max() > 300


def test_actuator_forces_interpolated_as_opensim():
    from simjax.io.tables import TimeSeriesTable
    from simjax.tools.reactions import actuator_forces_at

    table = TimeSeriesTable(np.array([0.0, 1.0, 2.0]), np.array([[0.0, 5.0], [2.0, 5.0], [6.0, 5.0]]), ["a", "b"])
    # between rows, at a row, and beyond both ends (extrapolated, as Storage::getDataAtTime)
    got = actuator_forces_at(table, ["a"], [0.5, 1.0, 1.5, -1.0, 3.0])
    np.testing.assert_allclose(got[:, 0], [1.0, 2.0, 4.0, -2.0, 10.0])
    with pytest.raises(ValueError, match="'c'"):
        actuator_forces_at(table, ["a", "c"], [0.5])


@pytest.mark.parametrize("where", ["joint", "body"])
def test_unknown_names_are_clear_errors(pipeline, where):
    # a setup of one analysis, which fails before anything is computed
    if where == "joint":
        analysis = _joint_reaction("JR", ["knee_r", "hip_x"], ["child"], ["ground"])
        match = r"bad_joint\.xml: <JointReaction name='JR'> property <joint_names> = 'hip_x': not a joint"
    else:
        model = opensim.Model(str(pipeline["root"] / "subject01.osim"))
        analysis = _point_kinematics(model, "PK", "tibia_r", None, "tib")
        match = r"bad_body\.xml: <PointKinematics name='PK'> property <body_name> = 'tibia_x'"
    bad = pipeline["root"] / "AN" / f"bad_{where}.xml"
    _tool(JR_NAME, 0.6, 0.7, "Bad", [analysis]).printToXML(str(bad))
    bad.write_text(bad.read_text().replace("<body_name>tibia_r<", "<body_name>tibia_x<"))
    with pytest.raises(SetupError, match=match):
        simjax.tools.run(str(bad))


def test_analyze_function_equals_the_setup_run(pipeline):
    """``simjax.tools.analyze`` on tables and a system gives the setup run's tables."""
    from simjax.tools.analyze import load_model_with_force_sets

    root = pipeline["root"]
    model = load_model_with_force_sets(str(root / "subject01.osim"), [str(root / "gait10dof_Reserve_Actuators.xml")])
    name, joints, on, frames = _REACTIONS[0]
    props = {
        "forces_file": str(root / "AN" / _FORCES),
        "joint_names": joints,
        "apply_on_bodies": on,
        "express_in_frame": frames,
    }
    tables = simjax.tools.analyze(
        model.build(),
        read_table(str(root / "IK" / "subject01_walk_IK.mot")),
        {name: ("JointReaction", props)},
        external_loads=str(root / "ExperimentalData" / "subject01_walk_grf.xml"),
        lowpass_cutoff=6,
        time_range=(0.6, 0.7),
    )
    assert set(tables) == {f"{name}_ReactionLoads"}
    got, ref, _ = _pair(pipeline, f"{name}_ReactionLoads", "_jr")
    np.testing.assert_allclose(np.asarray(tables[f"{name}_ReactionLoads"].values), got, rtol=1e-12, atol=1e-9)
    with pytest.raises(ValueError, match="'Bogus' is not an analysis simjax runs; supported: .*JointReaction"):
        simjax.tools.analyze(model.build(), read_table(str(root / "IK" / "subject01_walk_IK.mot")), {"x": "Bogus"})
