"""The Residual Reduction Algorithm (``RRATool`` setups) against OpenSim 4.6, run live.

OpenSim's own RRA setup of the Gait10dof18musc walking example shipped with simjax
(residual and reserve actuators, the tracking tasks, ground reactions, 6 Hz filtering)
is copied with a short window (0.6-0.7 s) and the mass-centre adjustment of the torso switched on. OpenSim's
RRATool and ``simjax run`` both run it; the adjusted mass centre, the average
residuals, the tracking errors, the actuators' forces, speeds and powers and the files'
names, headers and labels are compared.
Bad input (an unknown body, a task for a coordinate the model lacks, a task kind simjax
does not track) is reported by name.
"""

import os
import re
import shutil
import warnings

import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

import simjax.tools  # noqa: E402
from _pipeline import PIPELINE  # noqa: E402
from simjax.io.tables import read_table  # noqa: E402
from simjax.tools.setup import SetupError, SetupWarning  # noqa: E402
from simjax.tools.tracking import read_task_set  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file:UserWarning")

T0, T1 = 0.6, 0.7
NAME = "subject_adjusted"


def _setup_text(results: str, adjust: bool = True, body: str = "torso", tasks: str = "../tasks.xml") -> str:
    with open(os.path.join(PIPELINE, "RRA", "walk_Setup_RRA.xml")) as fh:
        s = fh.read()
    s = s.replace("<initial_time>0</initial_time>", f"<initial_time>{T0}</initial_time>")
    s = s.replace("<final_time>2.5</final_time>", f"<final_time>{T1}</final_time>")
    s = s.replace("<adjust_com_to_reduce_residuals>false<", f"<adjust_com_to_reduce_residuals>{str(adjust).lower()}<")
    s = s.replace("<adjusted_com_body />", f"<adjusted_com_body>{body}</adjusted_com_body>")
    s = s.replace("<results_directory>Results</results_directory>", f"<results_directory>{results}</results_directory>")
    s = s.replace("Results/subject01_adjusted.osim", f"{results}/subject01_adjusted.osim")
    s = s.replace("../gait10dof_Kinematics_Tracking_Tasks.xml", tasks)
    return s


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("rra")
    for f in ("subject01.osim", "gait10dof_Reserve_Actuators.xml"):
        shutil.copy(os.path.join(PIPELINE, f), root / f)
    shutil.copy(os.path.join(PIPELINE, "gait10dof_Kinematics_Tracking_Tasks.xml"), root / "tasks.xml")
    shutil.copytree(os.path.join(PIPELINE, "ExperimentalData"), root / "ExperimentalData")
    os.makedirs(root / "IK")
    shutil.copy(os.path.join(PIPELINE, "OutputReference", "IK", "subject01_walk_IK.mot"), root / "IK")
    os.makedirs(root / "RRA")
    for results in ("ResultsOS", "ResultsSJ"):
        (root / "RRA" / f"setup_{results}.xml").write_text(_setup_text(results))
    return root


@pytest.fixture(scope="module")
def runs(pipeline):
    opensim.RRATool(str(pipeline / "RRA" / "setup_ResultsOS.xml")).run()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = simjax.tools.run(pipeline / "RRA" / "setup_ResultsSJ.xml")
    # every property of OpenSim's own setup is read: nothing is reported as ignored
    assert not [w for w in caught if issubclass(w.category, SetupWarning)], [str(w.message) for w in caught]
    return pipeline / "RRA" / "ResultsOS", pipeline / "RRA" / "ResultsSJ", written


def _averages(path) -> dict:
    with open(path) as fh:
        return {m[0]: float(m[1]) for m in re.findall(r"^(\w\w) average = (\S+)$", fh.read(), re.M)}


def test_adjusted_mass_center_and_residuals(runs):
    os_dir, sj_dir, written = runs
    assert written["model"] == str(sj_dir / "subject01_adjusted.osim")
    com = {}
    for key, d in (("os", os_dir), ("sj", sj_dir)):
        model = opensim.Model(str(d / "subject01_adjusted.osim"))
        com[key] = np.array([model.getBodySet().get("torso").getMassCenter()[i] for i in range(3)])
        # the adjusted model keeps its muscles and has no reserve actuators
        names = [model.getForceSet().get(i).getName() for i in range(model.getForceSet().getSize())]
        assert "FX" not in names and len(names) == 18
    assert np.abs(com["sj"] - com["os"]).max() < 1e-4
    assert np.abs(com["sj"] - com["os"]).max() < 1e-10  # (in fact to rounding)
    a_os = _averages(os_dir / f"{NAME}_avgResiduals.txt")
    a_sj = _averages(sj_dir / f"{NAME}_avgResiduals.txt")
    assert list(a_sj) == ["FX", "FY", "FZ", "MX", "MY", "MZ"] == list(a_os)
    for k in a_os:
        assert abs(a_sj[k] - a_os[k]) <= 0.05 * abs(a_os[k]) + 1e-9, (k, a_sj[k], a_os[k])


def test_tracking_errors_and_forces(runs):
    os_dir, sj_dir, _ = runs
    p_os = read_table(os_dir / f"{NAME}_pErr.sto")
    p_sj = read_table(sj_dir / f"{NAME}_pErr.sto")
    assert list(p_sj.labels) == list(p_os.labels)
    np.testing.assert_allclose(p_sj.times, p_os.times, atol=1e-9)
    rms_os = np.degrees(np.sqrt(np.mean(np.asarray(p_os.values) ** 2, axis=0)))
    rms_sj = np.degrees(np.sqrt(np.mean(np.asarray(p_sj.values) ** 2, axis=0)))
    assert np.all(rms_sj <= rms_os + 0.1), (rms_sj, rms_os)
    np.testing.assert_allclose(rms_sj, rms_os, rtol=1e-3, atol=1e-5)
    f_os = read_table(os_dir / f"{NAME}_Actuation_force.sto")
    f_sj = read_table(sj_dir / f"{NAME}_Actuation_force.sto")
    assert list(f_sj.labels) == list(f_os.labels)
    np.testing.assert_allclose(f_sj.times, f_os.times, atol=1e-9)
    np.testing.assert_allclose(np.asarray(f_sj.values), np.asarray(f_os.values), atol=1e-3)
    # the controls as a ControlSet, read back by OpenSim: the same controls, nodes and limits
    sets = [opensim.ControlSet(str(d / f"{NAME}_controls.xml")) for d in (os_dir, sj_dir)]
    for key in ("names", "times", "nodes", "limits"):
        got, want = ([_control_set(c)[key] for c in sets])[::-1]
        if key in ("names", "times"):
            assert got == want, key
        else:
            np.testing.assert_allclose(got, want, atol=1e-3 if key == "nodes" else 0, err_msg=key)
    # the actuators' speeds and powers (OpenSim's Actuation analysis)
    for key, tol in (("Actuation_speed", 1e-4), ("Actuation_power", 1e-3)):
        a_os, a_sj = read_table(os_dir / f"{NAME}_{key}.sto"), read_table(sj_dir / f"{NAME}_{key}.sto")
        assert list(a_sj.labels) == list(a_os.labels)
        np.testing.assert_allclose(np.asarray(a_sj.values), np.asarray(a_os.values), atol=tol, err_msg=key)
    for key in ("Kinematics_q", "Kinematics_u"):
        k_os, k_sj = read_table(os_dir / f"{NAME}_{key}.sto"), read_table(sj_dir / f"{NAME}_{key}.sto")
        assert list(k_sj.labels) == list(k_os.labels)
        np.testing.assert_allclose(np.asarray(k_sj.values), np.asarray(k_os.values), atol=1e-4)


def _control_set(cs) -> dict:
    """An OpenSim ControlSet's names, node values ``(n_controls, n_nodes)`` (times
    rounded: OpenSim's first node is 1e-8 s after the start) and limits."""
    controls = [opensim.ControlLinear.safeDownCast(cs.get(i)) for i in range(cs.getSize())]
    names = [c.getName() for c in controls]
    nodes = [[c.getParameterValue(j) for j in range(c.getNumParameters())] for c in controls]
    times = {round(c.getParameterTime(j), 6) for c in controls for j in range(c.getNumParameters())}
    limits = [(c.getDefaultParameterMin(), c.getDefaultParameterMax()) for c in controls]
    return {"names": names, "times": sorted(times), "nodes": np.asarray(nodes), "limits": np.asarray(limits)}


def test_output_headers(runs):
    os_dir, sj_dir, _ = runs
    for key in (
        "Kinematics_q",
        "Kinematics_u",
        "Kinematics_dudt",
        "Actuation_force",
        "Actuation_speed",
        "Actuation_power",
        "controls",
        "pErr",
    ):
        heads = []
        for d in (os_dir, sj_dir):
            with open(d / f"{NAME}_{key}.sto") as fh:
                lines = fh.read().split("\n")
            heads.append(lines[: lines.index("endheader") + 2])
        assert heads[1] == heads[0], key


def test_bad_input(pipeline):
    setup = pipeline / "RRA" / "bad_body.xml"
    setup.write_text(_setup_text("ResultsBad", body="no_such_body"))
    with pytest.raises(SetupError, match=r"bad_body\.xml.*adjusted_com_body.*no_such_body"):
        simjax.tools.run(setup)
    tasks = (
        (pipeline / "tasks.xml")
        .read_text()
        .replace("<coordinate>lumbar_extension</coordinate>", "<coordinate>no_such_coordinate</coordinate>")
    )
    (pipeline / "bad_tasks.xml").write_text(tasks)
    setup = pipeline / "RRA" / "bad_task.xml"
    setup.write_text(_setup_text("ResultsBad", tasks="../bad_tasks.xml"))
    with pytest.raises(SetupError, match=r"bad_tasks\.xml.*'lumbar_extension'.*'no_such_coordinate'"):
        simjax.tools.run(setup)
    point = tasks.replace("<CMC_Joint name=", "<CMC_Point name=", 1).replace("</CMC_Joint>", "</CMC_Point>", 1)
    (pipeline / "point_tasks.xml").write_text(point)
    with pytest.raises(SetupError, match=r"point_tasks\.xml.*CMC_Point.*pelvis_tx"):
        read_task_set(pipeline / "point_tasks.xml")


def test_point_tasks_are_refused_as_opensim_cannot_run_them(pipeline):
    """A ``CMC_Point`` task with its ``desired_points_file``: OpenSim 4.6's RRATool stops
    before tracking (``CMC_TaskSet`` looks the task's name up as a coordinate), and simjax
    refuses the file and the task by name, saying so."""
    task = (
        '<CMC_Point name="heel_r"><on>true</on><weight>10 10 10</weight><wrt_body>calcn_r</wrt_body>'
        "<express_body>ground</express_body><active>true true false</active><kp>100 100 100</kp>"
        "<kv>20 20 20</kv><point>0.02 0.01 0</point></CMC_Point>"
    )
    (pipeline / "heel_tasks.xml").write_text(
        (pipeline / "tasks.xml").read_text().replace("<objects>", "<objects>" + task, 1)
    )
    times = np.arange(0.0, 2.51, 0.01)
    rows = "".join(f"{t:.2f}\t{0.1 + 1.2 * t:.6f}\t0.05\t0.08\n" for t in times)
    header = (
        f"points\nversion=1\nnRows={len(times)}\nnColumns=4\ninDegrees=no\nendheader\ntime\theel_r\theel_r\theel_r\n"
    )
    (pipeline / "RRA" / "heel.sto").write_text(header + rows)
    for results in ("PointOS", "PointSJ"):
        text = _setup_text(results, adjust=False, tasks="../heel_tasks.xml")
        text = text.replace("<desired_points_file />", "<desired_points_file>heel.sto</desired_points_file>")
        (pipeline / "RRA" / f"point_{results}.xml").write_text(text)
    # (a sink of its own: OpenSim keeps one log file a process, opened by an earlier tool)
    log, level = opensim.StringLogSink(), opensim.Logger.getLevelString()
    opensim.Logger.addSink(log)
    opensim.Logger.setLevelString("error")
    try:
        assert not opensim.RRATool(str(pipeline / "RRA" / "point_PointOS.xml")).run()
    finally:
        opensim.Logger.setLevelString(level)
        opensim.Logger.removeSink(log)
    assert "No object with name heel_r" in log.getString(), log.getString()
    assert not (pipeline / "RRA" / "PointOS" / f"{NAME}_pErr.sto").exists()
    with pytest.raises(
        SetupError, match=r"point_PointSJ\.xml.*desired_points_file.*heel\.sto.*OpenSim 4\.6's RRA and CMC"
    ):
        simjax.tools.run(pipeline / "RRA" / "point_PointSJ.xml")
    with pytest.raises(SetupError, match=r"heel_tasks\.xml.*CMC_Point name='heel_r'.*OpenSim 4\.6's RRA and CMC"):
        read_task_set(pipeline / "heel_tasks.xml")


def _constraint(name, lo, hi, steps, mins=(), maxs=()):
    node = lambda tag, pts: (
        f"<{tag}>"
        + "".join(  # noqa: E731
            f"<ControlLinearNode><t>{t}</t><value>{v}</value></ControlLinearNode>" for t, v in pts
        )
        + f"</{tag}>"
    )
    nodes = node("min_nodes", mins) + node("max_nodes", maxs) if mins else ""
    return (
        f'<ControlLinear name="{name}"><default_min>{lo}</default_min><default_max>{hi}</default_max>'
        f"<use_steps>{steps}</use_steps><x_nodes />{nodes}</ControlLinear>"
    )


def test_control_constraints(pipeline):
    """A constraints file (deprecated in OpenSim's RRA, and used): the pelvis residual
    moment bounded by nodes to 12 N m at 0.6 s, 8 N m at 0.7 s (unconstrained it reaches
    20 N m), ``FY`` held over each window, and a constraint OpenSim ignores (a bare
    actuator name). OpenSim's RRATool and simjax run the same setup, without the
    adjustment."""
    body = _constraint("MZ.excitation", -1000, 1000, "false", [(0.6, -12), (0.7, -8)], [(0.6, 12), (0.7, 8)])
    body += _constraint("FY.excitation", -1000, 1000, "true") + _constraint("FX", -1, 1, "false")
    (pipeline / "constraints.xml").write_text(
        "<OpenSimDocument Version='30000'><ControlSet name='c'><objects>"
        f"{body}</objects></ControlSet></OpenSimDocument>"
    )
    for results in ("ResultsOSc", "ResultsSJc"):
        text = _setup_text(results, adjust=False)
        text = text.replace("<constraints_file />", "<constraints_file>../constraints.xml</constraints_file>")
        (pipeline / "RRA" / f"{results}.xml").write_text(text)
    opensim.RRATool(str(pipeline / "RRA" / "ResultsOSc.xml")).run()
    with pytest.warns(SetupWarning) as caught:
        simjax.tools.run(pipeline / "RRA" / "ResultsSJc.xml")
    told = [str(w.message) for w in caught if issubclass(w.category, SetupWarning)]
    assert any("constraint 'FX' names no actuator" in m and "'FX.excitation'" in m for m in told), told
    assert any("deprecated" in m for m in told), told
    sj = read_table(pipeline / "RRA" / "ResultsSJc" / f"{NAME}_Actuation_force.sto")
    os_ = read_table(pipeline / "RRA" / "ResultsOSc" / f"{NAME}_Actuation_force.sto")
    t, f, labels = np.asarray(sj.times), np.asarray(sj.values), sj.labels
    f_os = np.stack([np.interp(t, os_.times, np.asarray(os_.values)[:, os_.labels.index(k)]) for k in labels], 1)
    mz = labels.index("MZ")
    bound = np.interp(t, [0.6, 0.7], [12, 8])
    assert np.all(np.abs(f[:, mz]) <= bound + 0.05) and f[:, mz].min() < -8, f[:, mz]
    # each actuator's force within 0.05 N (N m) RMS of OpenSim's
    rms = np.sqrt(np.mean((f - f_os) ** 2, axis=0))
    assert np.all(rms < 0.05), dict(zip(labels, rms.round(4)))


def test_lowpass_fir_matches_opensim(pipeline):
    from simjax.tools import motion
    from simjax.tools.tracking import lowpass_fir

    path = str(pipeline / "IK" / "subject01_walk_IK.mot")
    store = opensim.Storage(path)
    store.pad(60)
    store.lowpassFIR(50, 6.0)
    out = str(pipeline / "filtered_os.sto")
    store.printToFile(out, "w")
    filtered = read_table(out)
    t_os, v_os = np.asarray(filtered.times), np.asarray(filtered.values)
    table = motion.read_coordinates(path)
    t, v = motion.pad(table.times, table.values, 60)
    t, v = lowpass_fir(t, v, 6.0, 50)
    np.testing.assert_allclose(t, t_os, atol=1e-9)
    np.testing.assert_allclose(v, v_os, atol=1e-6)


def test_bounded_window_solve():
    """The window's least squares with active control bounds (OpenSim hands these to
    IPOPT) against SciPy's bounded least squares."""
    import jax.numpy as jnp
    from scipy.optimize import lsq_linear

    from simjax.tools.tracking import _window_controls

    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 9)) * 10
    a0, a_des, w = rng.normal(size=6), rng.normal(size=6) * 50, rng.uniform(1, 500, size=6)
    lo, hi = -np.full(9, 0.5), np.full(9, 0.8)
    hi[2] = lo[2] = 0.1  # a control held fixed
    x = np.asarray(_window_controls(*(jnp.asarray(v) for v in (A, a0, a_des, w, 1.0, lo, hi))))
    M = np.vstack([np.sqrt(w)[:, None] * A, np.eye(9)])
    b = np.concatenate([np.sqrt(w) * (a_des - a0), np.zeros(9)])
    ref = lsq_linear(M, b, bounds=(lo, hi + 1e-15), tol=1e-12).x
    assert np.all(x >= lo - 1e-12) and np.all(x <= hi + 1e-12)
    np.testing.assert_allclose(x, ref, atol=1e-6)
