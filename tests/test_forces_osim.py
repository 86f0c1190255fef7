"""The .osim reader and writer for forces, contact and PointOnLineConstraint.

bouncing_block.osim loads and matches OpenSim; models written by simjax load in
OpenSim 4.6 and give the same accelerations; simjax reads its own files back.
"""

import warnings

import numpy as np
import pytest

import simjax as sj
import simjax.io.osim  # noqa: F401  (registers the classes)
from simjax.io.osim import dumps_osim, loads_osim

from _contact_models import BB_COORDS, BOUNCING_BLOCK
from _forces_oracle import assert_close, coordinate_names, osim_udot, set_osim_state, sj_states, sj_udot

osim = pytest.importorskip("opensim")


def _compare(om, s, system, names, Q, U, rtol):
    ref = []
    for q, u in zip(Q, U):
        set_osim_state(om, s, names, q, u)
        ref.append(osim_udot(om, s, names))
    return assert_close(sj_udot(system, names, sj_states(system, names, Q, U)), np.array(ref), rtol, "udot")


def _osim_from_text(text, tmp_path, name="model.osim"):
    path = tmp_path / name
    path.write_text(text)
    om = osim.Model(str(path))
    return om, om.initSystem()


def test_bouncing_block_loads_and_matches_opensim(tmp_path):
    with warnings.catch_warnings():  # (its display meshes ship with simjax: nothing is missing)
        warnings.simplefilter("error")
        model = sj.load_osim(BOUNCING_BLOCK)
    system = model.build()
    assert system.z_names == ("/forceset/hip_bushing/dissipated_energy",)
    om = osim.Model(BOUNCING_BLOCK)
    s = om.initSystem()
    rng = np.random.default_rng(1)
    Q = rng.uniform(-0.5, 0.5, (100, 8))
    U = rng.uniform(-1.5, 1.5, (100, 8))
    Q[:, 4] = rng.uniform(0.6, 1.1, 100)  # heel from above the platform to well into it
    _compare(om, s, system, BB_COORDS, Q, U, 1e-8)
    # through simjax's writer, read by OpenSim and by simjax
    text = dumps_osim(model)
    om2, s2 = _osim_from_text(text, tmp_path)
    _compare(om2, s2, system, BB_COORDS, Q[:20], U[:20], 1e-8)
    again = loads_osim(text).build()
    np.testing.assert_array_equal(
        sj_udot(again, BB_COORDS, sj_states(again, BB_COORDS, Q, U)),
        sj_udot(system, BB_COORDS, sj_states(system, BB_COORDS, Q, U)),
    )


def test_written_passive_forces_load_in_opensim(tmp_path):
    from test_forces_passive import NAMES, build_sj

    system = build_sj()
    om, s = _osim_from_text(dumps_osim(system.model), tmp_path)
    assert coordinate_names(om) == NAMES
    rng = np.random.default_rng(4)
    Q = rng.uniform(-1, 1, (30, len(NAMES)))
    U = rng.uniform(-1, 1, (30, len(NAMES)))
    _compare(om, s, system, NAMES, Q, U, 1e-9)
    assert loads_osim(dumps_osim(system.model)).build().z_names == system.z_names


@pytest.mark.parametrize("kind", ["hc", "smooth"])
def test_written_walker_loads_in_opensim(tmp_path, kind):
    from test_contact import WALKER, _walker_states, walker_sj

    system = walker_sj(kind).build()
    om, s = _osim_from_text(dumps_osim(system.model), tmp_path)
    Q, U = _walker_states(system, np.random.default_rng(9))
    _compare(om, s, system, WALKER, Q[:30], U[:30], 1e-8)


def test_prescribed_force_round_trip(tmp_path):
    from simjax.forces import PrescribedForce

    m = sj.Model("pf").add(sj.Body("b", mass=2.0, inertia=(0.1, 0.2, 0.3, 0, 0, 0)))
    m = m.add(sj.FreeJoint("free", "/ground", "/bodyset/b"))
    m = m.add(
        PrescribedForce(
            "pf",
            "/bodyset/b",
            (sj.Sine(3, 2, 0.1, 0.5), sj.Constant(1.0), sj.LinearFunction((2.0, -1.0))),
            (sj.Constant(0.1), sj.Constant(0.0), sj.Constant(-0.2)),
            (sj.Constant(0.5), sj.Constant(0.0), sj.Sine(1, 1, 0, 0)),
            forceIsGlobal=False,
        )
    )
    system = m.build()
    text = dumps_osim(m)
    om, s = _osim_from_text(text, tmp_path)
    names = coordinate_names(om)
    rng = np.random.default_rng(2)
    Q, U, T = rng.uniform(-1, 1, (20, 6)), rng.uniform(-1, 1, (20, 6)), rng.uniform(0, 2, 20)
    ref = []
    for q, u, t in zip(Q, U, T):
        set_osim_state(om, s, names, q, u, t)
        ref.append(osim_udot(om, s, names))
    assert_close(sj_udot(system, names, sj_states(system, names, Q, U, T)), np.array(ref), 1e-9, "udot")
    back = loads_osim(text).find("/forceset/pf")
    assert len(back.forceFunctions) == 3 and not back.forceIsGlobal
