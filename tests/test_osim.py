"""The .osim reader and writer on the shipped models, against OpenSim 4.6.

OpenSim loads the same file in the same test; states are drawn at random within the
coordinate ranges (``simjax.io.osim.validate``) and copied across by coordinate
name. Content simjax skips with ``strict=False`` (muscles, wrap objects) is switched
off in OpenSim for the comparison.
"""

import os
import warnings

import jax
import numpy as np
import pytest

import simjax as sj
from simjax.io.osim import OsimWarning, dumps_osim, loads_osim, read_osim, save_osim

SHIPPED = sj.models.names()


def _quiet_load(name, strict=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        return read_osim(sj.models.path(name), strict=strict)


def test_models_package():
    assert set(SHIPPED) >= {"double_pendulum", "arm26", "gait10dof18musc", "Tug_of_War_Millard", "bouncing_block"}
    assert sj.models.path("arm26.osim") == sj.models.path("arm26")
    with pytest.raises(KeyError, match="available"):
        sj.models.path("nope")
    credits = open(sj.models.credits_file()).read()
    assert "Creative Commons" in credits
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the meshes are not shipped, and not complained about
        assert sj.models.load("double_pendulum").name == "double_pendulum"


def test_shipped_pipeline_copies_and_keeps_existing_results(tmp_path):
    assert "Gait10dof18musc" in sj.models.pipeline_names()
    with pytest.raises(KeyError, match="available: Gait10dof18musc"):
        sj.models.pipeline_path("nope")
    work = sj.models.copy_pipeline("Gait10dof18musc", tmp_path)
    for setup in (
        "IK/walk_Setup_IK.xml",
        "ID/walk_Setup_ID.xml",
        "SO/walk_Setup_SO.xml",
        "Scale/subject01_Setup_Scale.xml",
    ):
        assert os.path.exists(os.path.join(work, setup)), setup
    results = os.path.join(work, "IK", "result.mot")
    open(results, "w").close()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        sj.models.copy_pipeline("Gait10dof18musc", tmp_path)
    assert os.path.exists(results)
    sj.models.copy_pipeline("Gait10dof18musc", tmp_path, overwrite=True)
    assert not os.path.exists(results)


def test_double_pendulum_paths_and_names():
    model, report = _quiet_load("double_pendulum", strict=True)
    assert not report.unsupported
    paths = model.paths()
    for p in (
        "/ground",
        "/bodyset/rod1",
        "/jointset/pin1",
        "/jointset/pin1/q1",
        "/jointset/pin1/ground_offset",
        "/forceset/Torq1",
        "/bodyset/rod1/rod1_geom_frame_1",
    ):
        assert p in paths
    act = model.find("/forceset/Torq2")
    assert act.coordinate == "/jointset/pin2/q2"
    system = model.build()
    assert system.state_variable_names == (
        "/jointset/pin1/q1/value",
        "/jointset/pin1/q1/speed",
        "/jointset/pin2/q2/value",
        "/jointset/pin2/q2/speed",
    )
    assert system.actuator_paths == ("/forceset/Torq1", "/forceset/Torq2")
    np.testing.assert_allclose(model.find("/jointset/pin1/q1").default_value, -0.78539816)
    np.testing.assert_array_equal(model.gravity, [0, -9.80665, 0])
    assert model.credits == "Ajay Seth, Ayman Habib"


def test_double_pendulum_matches_opensim():
    pytest.importorskip("opensim")
    from simjax.io.osim.validate import validate

    results = validate(sj.models.path("double_pendulum"), n_states=60, seed=1)
    assert [r.name for r in results] == ["mass matrix", "accelerations"]
    for r in results:
        assert r.n_states == 60
        assert r.max_rel <= 1e-10, r


@pytest.mark.parametrize("name", ["arm26", "gait10dof18musc"])
def test_skeletons_match_opensim(name):
    pytest.importorskip("opensim")
    from simjax.io.osim.validate import validate

    for r in validate(sj.models.path(name), n_states=50, seed=2, checks=["mass matrix"]):
        assert r.max_rel <= 1e-10, r


@pytest.mark.parametrize("name", SHIPPED)
def test_round_trip_text_and_model(name, tmp_path):
    model, _ = _quiet_load(name)
    first = dumps_osim(model)
    again = loads_osim(first, strict=True)
    second = dumps_osim(again)
    assert first == second
    # the same model: same structure and the same numbers, so the same dynamics
    leaves1, tree1 = jax.tree_util.tree_flatten(model)
    leaves2, tree2 = jax.tree_util.tree_flatten(again)
    assert tree1 == tree2
    for a, b in zip(leaves1, leaves2):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # display content survives
    assert "frame_geometry" in first and "<mesh_file>" in first
    save_osim(model, tmp_path / "out.osim")
    assert (tmp_path / "out.osim").read_text() == first


@pytest.mark.parametrize("name", SHIPPED)
def test_opensim_loads_written_files(name, tmp_path):
    osim = pytest.importorskip("opensim")
    model, _ = _quiet_load(name)
    path = tmp_path / f"{name}.osim"
    save_osim(model, path)
    om = osim.Model(str(path))
    om.initSystem()
    system = model.build()
    assert om.getNumCoordinates() == len(system.coordinate_paths)
    assert om.getNumBodies() == len(model.bodyset.objects)
    assert om.getForceSet().getSize() == len(model.forceset.objects)
    cs = om.getCoordinateSet()
    for i in range(cs.getSize()):
        c = cs.get(i)
        mine = model.find(c.getAbsolutePathString())
        assert c.getDefaultValue() == float(mine.default_value)
        assert (c.getRangeMin(), c.getRangeMax()) == tuple(float(x) for x in mine.range)


def test_written_file_simulates_identically_in_opensim(tmp_path):
    pytest.importorskip("opensim")
    from simjax.io.osim.validate import validate

    model, _ = _quiet_load("double_pendulum")
    save_osim(model, tmp_path / "dp.osim")
    for r in validate(tmp_path / "dp.osim", n_states=50, seed=3):
        assert r.max_rel <= 1e-10, r


def test_model_name_with_dot_kept_on_writing():
    model, _ = _quiet_load("gait10dof18musc")
    assert model.name == "gait10dof18musc.osim"
    assert '<Model name="gait10dof18musc.osim">' in dumps_osim(model)
