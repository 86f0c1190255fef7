"""InverseDynamicsTool against OpenSim 4.6, run live on the Gait10dof18musc pipeline.

OpenSim's IK makes the coordinates file (over 0.4-1.0 s, to keep the test short),
then OpenSim's and simjax's InverseDynamicsTool run the same setup (6 Hz low-pass,
muscles excluded, ground reactions from the ExternalLoads file, body forces reported
at every joint).
"""

import os
import shutil
import sys

import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

import simjax.tools  # noqa: E402
from simjax.io.tables import read_table  # noqa: E402
from simjax.tools import motion  # noqa: E402
from simjax.tools.external_loads import read_external_loads  # noqa: E402
from simjax.tools.setup import SetupError  # noqa: E402

from _pipeline import PIPELINE, run_in  # noqa: E402

# the pipeline's model names display meshes that are not shipped
pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file:UserWarning")

RANGE = "0.4 1.0"


def _edit(path, old, new, out=None):
    text = open(path).read()
    assert old in text, (path, old)
    with open(out or path, "w") as fh:
        fh.write(text.replace(old, new))
    return out or path


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("id") / "Gait10dof18musc"
    shutil.copytree(PIPELINE, root)
    ik = _edit(
        str(root / "IK" / "walk_Setup_IK.xml"), "<time_range> 0 2.5</time_range>", f"<time_range>{RANGE}</time_range>"
    )
    setup = _edit(
        str(root / "ID" / "walk_Setup_ID.xml"), "<time_range> 0 2.5</time_range>", f"<time_range>{RANGE}</time_range>"
    )
    _edit(setup, "<joints_to_report_body_forces />", "<joints_to_report_body_forces>All</joints_to_report_body_forces>")
    _edit(setup, "<output_body_forces_file />", "<output_body_forces_file>body_forces.sto</output_body_forces_file>")
    # OpenSim 4.6 resolves the model_file of these (version 30000) setups against the
    # working directory: run each tool from its setup's folder
    run_in(root / "IK", lambda: opensim.InverseKinematicsTool(os.path.basename(ik)).run())
    run_in(root / "ID", lambda: opensim.InverseDynamicsTool(os.path.basename(setup)).run())
    ours = _edit(
        setup,
        "<results_directory>Results</results_directory>",
        "<results_directory>ResultsSimjax</results_directory>",
        str(root / "ID" / "simjax_Setup_ID.xml"),
    )
    out = simjax.tools.run(ours)
    return {
        "root": root,
        "setup": ours,
        "opensim": str(root / "ID" / "Results" / "subject01_walk_ID.sto"),
        "simjax": out["output_gen_force_file"],
        "opensim_body": str(root / "ID" / "Results" / "body_forces.sto"),
        "simjax_body": out["output_body_forces_file"],
    }


def test_generalized_forces_match_opensim(pipeline):
    ref, got = read_table(pipeline["opensim"]), read_table(pipeline["simjax"])
    assert list(got.labels) == list(ref.labels)
    assert "knee_angle_r_moment" in got.labels and "pelvis_tx_force" in got.labels
    np.testing.assert_allclose(got.times, ref.times, rtol=0, atol=1e-9)  # OpenSim writes 8 decimals
    err = np.abs(np.asarray(got.values) - np.asarray(ref.values))
    assert np.all(err <= 1e-6 * np.maximum(np.abs(np.asarray(ref.values)), 1.0)), err.max()


def test_joint_body_forces_match_opensim(pipeline):
    ref, got = read_table(pipeline["opensim_body"]), read_table(pipeline["simjax_body"])
    assert list(got.labels) == list(ref.labels)
    assert "knee_r_tibia_r_offset_MZ" in got.labels and len(got.labels) == 6 * 12  # every joint, welds too
    np.testing.assert_allclose(got.times, ref.times, rtol=0, atol=1e-9)
    err = np.abs(np.asarray(got.values) - np.asarray(ref.values))
    assert np.all(err <= 1e-6 * np.maximum(np.abs(np.asarray(ref.values)), 1.0)), err.max()


def test_output_opens_in_opensim(pipeline):
    for key in ("simjax", "simjax_body"):
        ours = opensim.TimeSeriesTable(pipeline[key])
        theirs = opensim.TimeSeriesTable(pipeline[key.replace("simjax", "opensim")])
        assert list(ours.getColumnLabels()) == list(theirs.getColumnLabels())
        assert ours.getNumRows() == theirs.getNumRows()


def test_filter_matches_opensim(pipeline):
    path = str(pipeline["root"] / "IK" / "subject01_walk_IK.mot")
    storage = opensim.Storage(path)
    storage.pad(storage.getSize() // 2)
    storage.lowpassIIR(6.0)
    n, k = storage.getSize(), storage.getColumnLabels().getSize() - 1
    times = np.array([storage.getStateVector(i).getTime() for i in range(n)])
    values = np.array([[storage.getStateVector(i).getData().get(j) for j in range(k)] for i in range(n)])
    table = read_table(path)
    t, v = motion.pad(table.times, table.values, len(table.times) // 2)
    t, v = motion.lowpass_iir(t, v, 6.0)  # resamples at the smallest step first, as OpenSim
    np.testing.assert_array_equal(t, times)
    np.testing.assert_allclose(v, values, rtol=0, atol=1e-10 * np.abs(values).max())


def test_identifier_without_columns(pipeline, tmp_path):
    src = pipeline["root"] / "ExperimentalData" / "subject01_walk_grf.xml"
    bad = _edit(
        str(src),
        "<force_identifier>1_ground_force_v</force_identifier>",
        "<force_identifier>2_ground_force_v</force_identifier>",
        str(src.parent / "bad_grf.xml"),
    )
    with pytest.raises(SetupError, match=r"2_ground_force_v.*subject01_walk_grf\.mot"):
        read_external_loads(bad)
    setup = _edit(pipeline["setup"], "subject01_walk_grf.xml", "bad_grf.xml", str(tmp_path / "s.xml"))
    _edit(setup, "<model_file>../subject01.osim", f"<model_file>{pipeline['root']}/subject01.osim")
    _edit(setup, "<coordinates_file>../IK", f"<coordinates_file>{pipeline['root']}/IK")
    _edit(setup, "<external_loads_file>../ExperimentalData", f"<external_loads_file>{src.parent}")
    with pytest.raises(SetupError, match=r"'left'.*2_ground_force_v.*subject01_walk_grf\.mot"):
        simjax.tools.run(setup)


def test_time_range_outside_data(pipeline):
    setup = _edit(
        pipeline["setup"],
        f"<time_range>{RANGE}</time_range>",
        "<time_range>5 6</time_range>",
        str(pipeline["root"] / "ID" / "late_Setup_ID.xml"),
    )
    with pytest.raises(SetupError, match=r"time_range.*outside the data"):
        simjax.tools.run(setup)


def test_missing_coordinates_file(pipeline):
    setup = _edit(
        pipeline["setup"],
        "../IK/subject01_walk_IK.mot",
        "../IK/nowhere.mot",
        str(pipeline["root"] / "ID" / "nocoords_Setup_ID.xml"),
    )
    resolved = os.path.normpath(str(pipeline["root"] / "IK" / "nowhere.mot"))
    with pytest.raises(FileNotFoundError, match=resolved.replace("\\", "\\\\").replace(".", r"\.")):
        simjax.tools.run(setup)


def test_function_is_exported():
    inverse_dynamics = sys.modules["simjax.tools.dynamics"].inverse_dynamics
    assert simjax.tools.inverse_dynamics is inverse_dynamics


def test_force_set_files_must_exist(tmp_path):
    from simjax.tools.setup import read_setup

    (tmp_path / "reserves.xml").write_text("<OpenSimDocument/>")
    path = tmp_path / "setup.xml"
    path.write_text(
        '<OpenSimDocument Version="40000"><AnalyzeTool name="a">'
        "<force_set_files>reserves.xml more/missing.xml</force_set_files></AnalyzeTool></OpenSimDocument>"
    )
    setup = read_setup(path)
    with pytest.raises(SetupError, match=r"force_set_files.*more/missing\.xml.*does not exist"):
        setup.existing_paths("force_set_files")
    path.write_text(path.read_text().replace(" more/missing.xml", ""))
    assert read_setup(path).existing_paths("force_set_files") == [str(tmp_path / "reserves.xml")]


def test_xml_files_are_read_with_errors_naming_them(tmp_path):
    from simjax.tools.setup import read_element

    path = tmp_path / "loads.xml"
    path.write_text('<OpenSimDocument Version="40000"><ExternalLoads name="x"/></OpenSimDocument>')
    assert read_element(path, "ExternalLoads", "external loads").tag == "ExternalLoads"
    with pytest.raises(SetupError, match=r"loads\.xml: no <CMC_TaskSet> element \(a hint\)"):
        read_element(path, "CMC_TaskSet", "task set", "a hint")
    path.write_text("<OpenSimDocument><ExternalLoads></OpenSimDocument>")
    with pytest.raises(SetupError, match=r"loads\.xml:1:"):
        read_element(path, "ExternalLoads", "external loads")
    with pytest.raises(FileNotFoundError, match="task set file .*nowhere.xml"):
        read_element(tmp_path / "nowhere.xml", "CMC_TaskSet", "task set")
