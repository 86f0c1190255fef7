"""AnalyzeTool (StaticOptimization, MuscleAnalysis, BodyKinematics) against OpenSim 4.6,
run live on the Gait10dof18musc pipeline.

OpenSim's IK makes the coordinates (0.5-1.0 s); an AnalyzeTool setup authored with
OpenSim's API (6 Hz low-pass, ground reactions, the pipeline's residual and reserve
actuators appended) runs 0.6-0.9 s in OpenSim and in simjax; every output file is
compared column by column.
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

from _pipeline import PIPELINE, run_in  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file:UserWarning")

NAME = "subject01_walk"


def _setup(root):
    tool = opensim.AnalyzeTool()
    tool.setName(NAME)
    tool.setModelFilename("../subject01.osim")
    tool.setCoordinatesFileName("../IK/subject01_walk_IK.mot")
    tool.setLowpassCutoffFrequency(6)
    tool.setInitialTime(0.6)
    tool.setFinalTime(0.9)
    tool.setExternalLoadsFileName("../ExperimentalData/subject01_walk_grf.xml")
    files = opensim.ArrayStr()
    files.append("../gait10dof_Reserve_Actuators.xml")
    tool.setForceSetFiles(files)
    tool.setReplaceForceSet(False)
    tool.setResultsDir("Results")
    so = opensim.StaticOptimization()
    so.setName("StaticOptimization")
    so.setActivationExponent(2)
    so.setUseModelForceSet(True)
    so.setConvergenceCriterion(1e-4)
    so.setMaxIterations(100)
    ma = opensim.MuscleAnalysis()
    ma.setName("MuscleAnalysis")
    ma.setComputeMoments(True)
    bk = opensim.BodyKinematics()
    bk.setName("BodyKinematics")
    for a in (so, ma, bk):
        a.setStartTime(0.6)
        a.setEndTime(0.9)
        tool.getAnalysisSet().cloneAndAppend(a)
    path = str(root / "AN" / "setup_AN.xml")
    tool.printToXML(path)
    return path


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("analyze") / "Gait10dof18musc"
    shutil.copytree(PIPELINE, root)
    ik = root / "IK" / "walk_Setup_IK.xml"
    ik.write_text(ik.read_text().replace("<time_range> 0 2.5</time_range>", "<time_range>0.5 1.0</time_range>"))
    run_in(root / "IK", lambda: opensim.InverseKinematicsTool("walk_Setup_IK.xml").run())
    (root / "AN").mkdir()
    setup = _setup(root)
    run_in(root / "AN", lambda: opensim.AnalyzeTool(os.path.basename(setup)).run())
    ours = root / "AN" / "simjax_setup_AN.xml"
    ours.write_text(open(setup).read().replace("<results_directory>Results</results_directory>",
                                               "<results_directory>ResultsSimjax</results_directory>"))
    out = simjax.tools.run(str(ours))
    return {"root": root, "setup": str(ours), "out": out, "ref": str(root / "AN" / "Results")}


def _pair(pipeline, key):
    got = read_table(pipeline["out"][key])
    ref = read_table(os.path.join(pipeline["ref"], f"{NAME}_{key}.sto"))
    assert list(got.labels) == list(ref.labels), key
    np.testing.assert_allclose(got.times, ref.times, rtol=0, atol=1e-9)
    return np.asarray(got.values), np.asarray(ref.values), list(ref.labels)


def test_files_named_as_opensim(pipeline):
    theirs = {f for f in os.listdir(pipeline["ref"]) if f.endswith(".sto")}
    ours = {os.path.basename(p) for p in pipeline["out"].values()}
    assert theirs - ours == set() and ours - theirs == set()
    assert f"{NAME}_StaticOptimization_activation.sto" in ours and f"{NAME}_MuscleAnalysis_TendonLength.sto" in ours


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
    # OpenSim's IPOPT stops at optimizer_convergence_criterion 1e-4: its activations sit
    # a few 1e-3 from the optimum (ours, to machine precision, costs less every frame)
    assert np.abs(got - ref).max() < 6e-3
    assert np.all((got ** 2).sum(1) <= (ref ** 2).sum(1) * (1 + 1e-9))
    fgot, fref, flabels = _pair(pipeline, "StaticOptimization_force")
    assert flabels[28:31] == ["calcn_r_right_Fx", "calcn_r_right_Fy", "calcn_r_right_Fz"]
    # the strengths (force per unit control: use_muscle_physiology) are OpenSim's
    n = got.shape[1]
    strength_got, strength_ref = fgot[:, :n] / got, fref[:, :n] / ref
    np.testing.assert_allclose(strength_got, strength_ref, rtol=1e-6)
    # the external loads ForceReporter records with them
    np.testing.assert_allclose(fgot[:, n:], fref[:, n:], rtol=0, atol=1e-7 * np.abs(fref).max())


def test_output_opens_in_opensim(pipeline):
    for key in ("StaticOptimization_activation", "StaticOptimization_force", "MuscleAnalysis_Length",
                "BodyKinematics_pos_global"):
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
