"""The Forward tool (``ForwardTool`` setups) against OpenSim 4.6, run live on arm26.

A setup authored with OpenSim's API (controls from a ControlSet ``.xml``: linear
controls extrapolated beyond their nodes, one held (``extrapolate`` false), one in
steps, one constant, one actuator without control; the initial state from the last
row of a states file before ``initial_time``) runs 0.1-0.3 s at accuracy 1e-10 in
OpenSim's ForwardTool and in simjax; the final states agree within 1e-6 (measured:
2.5e-8; at accuracy 1e-8 the two adaptive integrations' step sequences part on some
CPUs, and their final states then differ by up to 1.8e-6) and the ``_states.sto``
columns within 1e-5 (simjax's rows, a smooth trajectory, interpolated to OpenSim's
step times). A second
setup takes its controls from a ``.sto`` and its states from a file with OpenSim 3
labels (the same compiled simulation: no recompilation), and a property simjax does
not support is reported by name.
"""

import os

import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

from scipy.interpolate import CubicSpline  # noqa: E402

import simjax as sj  # noqa: E402
import simjax.tools  # noqa: E402
from simjax.io.tables import read_table  # noqa: E402
from simjax.tools.forward import ControlLinear  # noqa: E402
from simjax.tools.setup import SetupError, SetupWarning  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file:UserWarning")

MUSCLES = ["TRIlong", "TRIlat", "TRImed", "BIClong", "BICshort", "BRA"]
T0, T1, ACCURACY = 0.12, 0.3, 1e-10


def _linear(name, nodes, steps=False, extrapolate=True):
    c = opensim.ControlLinear()
    c.setName(name)
    c.setUseSteps(steps)
    c.setExtrapolate(extrapolate)
    for t, v in nodes:
        c.setControlValue(t, v)
    return c


def _control_set(path, controls):
    cs = opensim.ControlSet()
    for c in controls:
        cs.cloneAndAppend(c)
    cs.printToXML(str(path))


def _states_file(model_path, path, old_labels=False):
    """Two rows (0 and 0.1 s) of equilibrated arm26 states; the run starts from the
    second (``initial_time`` 0.12 s is between rows: OpenSim takes the earlier)."""
    model = opensim.Model(str(model_path))
    rows = []
    for elbow, speed, act in ((0.4, 0.0, 0.1), (0.8, 0.5, 0.2)):
        s = model.initSystem()
        model.getCoordinateSet().get("r_shoulder_elev").setValue(s, 0.3)
        model.getCoordinateSet().get("r_elbow_flex").setValue(s, elbow)
        model.getCoordinateSet().get("r_elbow_flex").setSpeedValue(s, speed)
        for m in MUSCLES:
            model.getMuscles().get(m).setActivation(s, act)
        model.equilibrateMuscles(s)
        rows.append(s)
    traj = opensim.StatesTrajectory()
    for t, s in zip((0.0, 0.1), rows):
        s.setTime(t)
        traj.append(s)
    table = traj.exportToTable(model)
    if old_labels:
        labels = []
        for lab in table.getColumnLabels():
            parts = lab.split("/")
            labels.append({"value": parts[-2], "speed": parts[-2] + "_u"}.get(parts[-1], f"{parts[-2]}.{parts[-1]}"))
        table.setColumnLabels(labels)
    opensim.STOFileAdapter.write(table, str(path))


def _tool(root, controls, states, results, name="arm26"):
    tool = opensim.ForwardTool()
    tool.setName(name)
    tool.setModelFilename("arm26.osim")
    tool.setInitialTime(T0)
    tool.setFinalTime(T1)
    tool.setStatesFileName(states)
    tool.setControlsFileName(controls)
    tool.setResultsDir(results)
    tool.setOutputPrecision(16)
    tool.setErrorTolerance(ACCURACY)
    path = str(root / f"setup_{name}.xml")
    tool.printToXML(path)
    return path


def _ours(setup, results, extra=""):
    """Our copy of an OpenSim setup, writing to ``results`` (``extra``: more properties)."""
    path = os.path.join(os.path.dirname(setup), "simjax_" + os.path.basename(setup))
    text = open(setup).read()
    old = text[text.index("<results_directory>") : text.index("</results_directory>")]
    text = text.replace(old, f"<results_directory>{results}").replace("</ForwardTool>", extra + "</ForwardTool>")
    open(path, "w").write(text)
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("forward")
    with open(sj.models.path("arm26")) as src, open(root / "arm26.osim", "w") as dst:
        dst.write(src.read())
    _control_set(
        root / "controls.xml",
        [
            _linear("TRIlong.excitation", [(0.15, 0.2), (0.25, 0.5)]),  # extrapolated on both sides
            _linear("TRIlat.excitation", [(0.0, 0.1), (0.5, 0.6)]),
            _linear("TRImed", [(-0.1, 0.5), (0.1, 0.3)], extrapolate=False),  # held at 0.3
            _linear("BIClong.excitation", [(0.12, 0.9), (0.4, 0.25)], steps=True),  # 0.9 at 0.12 s, then 0.25
            _linear("BICshort.excitation", [(0.0, 0.15)]),  # one node: constant
        ],
    )  # (BRA: no control, 0)
    _states_file(root / "arm26.osim", root / "states.sto")
    _states_file(root / "arm26.osim", root / "states_v3.sto", old_labels=True)
    with open(root / "controls.sto", "w") as fh:
        fh.write(
            "controls\nversion=1\nnRows=3\nnColumns=6\ninDegrees=no\nendheader\n"
            "time\tTRIlong\tTRIlat\tTRImed\tBIClong\tBICshort\n"
            "0.0\t0.1\t0.2\t0.3\t0.4\t0.5\n0.2\t0.3\t0.1\t0.5\t0.2\t0.3\n0.5\t0.2\t0.2\t0.2\t0.2\t0.2\n"
        )
    return root


def _compare(root, setup, name, extra=""):
    opensim.ForwardTool(setup).run()
    written = simjax.tools.run(_ours(setup, "simjax", extra))
    ref_dir, our_dir = root / "Results", root / "simjax"
    ours_files = sorted(os.path.basename(p) for p in written.values())
    assert ours_files == sorted(f for f in os.listdir(ref_dir) if f.startswith(name + "_"))
    for f in ours_files:
        a = open(ref_dir / f).read().splitlines()
        b = open(our_dir / f).read().splitlines()
        end = a.index("endheader")
        assert b.index("endheader") == end
        for i in range(end + 2):  # the header (nRows aside: the step counts may differ) and the labels
            if not a[i].startswith(("nRows", "datarows")):
                assert b[i] == a[i], (f, i)
    ref, ours = read_table(ref_dir / f"{name}_states.sto"), read_table(our_dir / f"{name}_states.sto")
    assert list(ours.labels) == list(ref.labels)
    t_ref, t_ours = np.asarray(ref.times), np.asarray(ours.times)
    assert t_ours[0] == t_ref[0] == pytest.approx(0.1) and t_ours[-1] == t_ref[-1] == pytest.approx(T1)
    # the final states, at the same time, within 1e-6; between them our states are
    # interpolated onto OpenSim's own adaptive steps (a cubic spline through a stiff
    # activation's steps: its error, ~4e-6 on some machines, not the integration's)
    final = np.abs(np.asarray(ours.values)[-1] - np.asarray(ref.values)[-1]).max()
    print(f"final states: largest difference from OpenSim {final:.2e}")
    assert final < 1e-6
    interp = CubicSpline(t_ours, np.asarray(ours.values))(t_ref)
    diff = np.abs(interp - np.asarray(ref.values))
    assert diff.max() < 1e-5, (diff.max(), ref.labels[int(diff.max(axis=0).argmax())])
    cref, cours = read_table(ref_dir / f"{name}_controls.sto"), read_table(our_dir / f"{name}_controls.sto")
    assert list(cours.labels) == list(cref.labels)
    # the controls at the first and last states (same times in both)
    np.testing.assert_allclose(np.asarray(cours.values)[[0, -1]], np.asarray(cref.values)[[0, -1]], atol=1e-12)
    return diff.max()


def test_forward_tool_matches_opensim(root):
    setup = _tool(root, "controls.xml", "states.sto", "Results")
    diff = _compare(root, setup, "arm26")
    print(f"states: largest difference from OpenSim {diff:.2e}")
    controls = read_table(root / "simjax" / "arm26_controls.sto")
    first = dict(zip(controls.labels, np.asarray(controls.values)[0]))
    assert first["BIClong"] == pytest.approx(0.9) and first["TRImed"] == pytest.approx(0.3)
    assert first["BRA"] == 0.0 and first["BICshort"] == pytest.approx(0.15)
    biclong = np.asarray(controls.values)[:, controls.labels.index("BIClong")]
    np.testing.assert_allclose(biclong, np.where(np.asarray(controls.times) <= 0.12, 0.9, 0.25), atol=1e-15)


def test_forward_tool_sto_controls_and_opensim3_states(root):
    setup = _tool(root, "controls.sto", "states_v3.sto", "Results", name="arm26_sto")
    with pytest.warns(SetupWarning, match="1 property simjax does not support.*: use_specified_dt$"):
        diff = _compare(root, setup, "arm26_sto", "<use_specified_dt>true</use_specified_dt>")
    print(f"states: largest difference from OpenSim {diff:.2e}")


def test_control_linear_as_opensim():
    times = [0.1, 0.3, 0.35, 0.6]
    values = [0.2, 0.7, 0.1, 0.4]
    ts = np.r_[times, np.linspace(-0.2, 1.0, 61), 0.3 + 1e-12, 0.35 - 1e-12]
    for steps in (False, True):
        for extrapolate in (True, False):
            ref = _linear("c", list(zip(times, values)), steps, extrapolate)
            ours = ControlLinear("c", np.asarray(times), np.asarray(values), steps, extrapolate)
            np.testing.assert_allclose(
                np.asarray(ours(ts)),
                [ref.getControlValue(float(t)) for t in ts],
                atol=1e-14,
                err_msg=f"use_steps={steps} extrapolate={extrapolate}",
            )


def test_unknown_actuator_is_named(root):
    _control_set(
        root / "bad_controls.xml",
        [
            _linear("TRIlong.excitation", [(0.0, 0.2), (1.0, 0.4)]),
            _linear("NotAMuscle.excitation", [(0.0, 0.2), (1.0, 0.4)]),
        ],
    )
    setup = _tool(root, "bad_controls.xml", "states.sto", "ResultsBad", name="bad")
    with pytest.raises(Exception, match="NotAMuscle"):
        opensim.ForwardTool(setup).run()  # OpenSim refuses it too
    with pytest.raises(SetupError, match="NotAMuscle") as err:
        simjax.tools.run(_ours(setup, "simjax_bad"))
    assert "bad_controls.xml" in str(err.value) and "controls_file" in str(err.value)


def test_states_file_not_covering_initial_time(root):
    setup = _tool(root, "controls.xml", "states.sto", "ResultsEarly", name="early")
    text = open(setup).read().replace(f"<initial_time>{T0!r}", "<initial_time>-0.5")
    assert "<initial_time>-0.5" in text
    open(setup, "w").write(text)
    with pytest.raises(SetupError, match="states_file.*states.sto.*precedes"):
        simjax.tools.run(setup)
    open(setup, "w").write(text.replace("<states_file>states.sto", "<states_file>missing.sto"))
    with pytest.raises(SetupError, match="states_file.*missing.sto"):
        simjax.tools.run(setup)
