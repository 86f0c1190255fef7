"""ExternalForce (data tables fitted as OpenSim does) and PrescribedForce against
OpenSim 4.6, at random states and times."""

import jax
import numpy as np
import pytest

import simjax as sj
from simjax.forces import ExternalForce, PrescribedForce
from simjax.io.tables import STOFileAdapter, TimeSeriesTable
from simjax.mechanics.frames import PhysicalOffsetFrame

from _forces_oracle import assert_close, osim_udot, set_osim_state, sj_states, sj_udot

osim = pytest.importorskip("opensim")

NAMES = ["free_coord_0", "free_coord_1", "free_coord_2", "free_coord_3", "free_coord_4", "free_coord_5", "pin_coord_0"]
N_STATES = 100


def grf_table(n_rows):
    t = np.linspace(0.0, 1.0, n_rows)
    rng = np.random.default_rng(n_rows)
    cols = {
        "ground_force_vx": 50 * np.sin(3 * t),
        "ground_force_vy": 700 + 100 * np.cos(5 * t),
        "ground_force_vz": rng.normal(0, 5, n_rows),
        "ground_force_px": 0.1 * t,
        "ground_force_py": 0.0 * t,
        "ground_force_pz": 0.05 + 0.02 * np.sin(7 * t),
        "ground_torque_x": 0 * t,
        "ground_torque_y": 3 * t**2,
        "ground_torque_z": -t,
        "other": t,
    }
    return TimeSeriesTable(t, np.stack(list(cols.values()), 1), list(cols))


def _bodies_osim(m):
    block = osim.Body("block", 2.0, osim.Vec3(0.1, 0.2, 0.0), osim.Inertia(0.3, 0.4, 0.5, 0.01, 0.02, 0.03))
    link = osim.Body("link", 1.0, osim.Vec3(0, 0.25, 0), osim.Inertia(0.1, 0.01, 0.1, 0, 0, 0))
    m.addBody(block), m.addBody(link)
    m.addJoint(osim.FreeJoint("free", m.getGround(), block))
    m.addJoint(
        osim.PinJoint(
            "pin", block, osim.Vec3(0, 0.1, 0), osim.Vec3(0.2, 0, 0), link, osim.Vec3(0, 0.5, 0), osim.Vec3(0, 0, 0)
        )
    )
    return block, link


def _bodies_sj():
    m = sj.Model("ext")
    m = m.add(sj.Body("block", mass=2.0, mass_center=(0.1, 0.2, 0.0), inertia=(0.3, 0.4, 0.5, 0.01, 0.02, 0.03)))
    m = m.add(sj.Body("link", mass=1.0, mass_center=(0, 0.25, 0), inertia=(0.1, 0.01, 0.1, 0, 0, 0)))
    m = m.add(sj.FreeJoint("free", "/ground", "/bodyset/block"))
    m = m.add(
        sj.PinJoint(
            "pin",
            "/bodyset/block",
            "/bodyset/link",
            location_in_parent=(0, 0.1, 0),
            orientation_in_parent=(0.2, 0, 0),
            location_in_child=(0, 0.5, 0),
        )
    )
    return m


def _random(seed):
    rng = np.random.default_rng(seed)
    return (
        rng.uniform(-1, 1, (N_STATES, len(NAMES))),
        rng.uniform(-1, 1, (N_STATES, len(NAMES))),
        rng.uniform(-0.1, 1.1, N_STATES),
    )


def _compare(om, s, system, Q, U, T):
    ref = []
    for q, u, t in zip(Q, U, T):
        set_osim_state(om, s, NAMES, q, u, t)
        ref.append(osim_udot(om, s, NAMES))
    got = sj_udot(system, NAMES, sj_states(system, NAMES, Q, U, T))
    return assert_close(got, np.array(ref), 1e-9, "udot")


@pytest.mark.parametrize("n_rows", [3, 25])  # linear interpolation, and the GCV spline
def test_external_force_matches_opensim(tmp_path, n_rows):
    table = grf_table(n_rows)
    path = tmp_path / "grf.sto"
    STOFileAdapter().write(table, path)
    om = osim.Model()
    _bodies_osim(om)
    storage = osim.Storage(str(path))
    ef1 = osim.ExternalForce(storage, "ground_force_v", "ground_force_p", "ground_torque_", "link", "ground", "block")
    ef1.setName("ef1")
    om.addForce(ef1)
    ef2 = osim.ExternalForce(storage, "ground_force_v", "", "ground_torque_", "block", "link", "ground")
    ef2.setName("ef2")
    om.addForce(ef2)
    s = om.initSystem()
    m = _bodies_sj()
    m = m.add(
        ExternalForce(
            "ef1",
            "link",
            table,
            force_identifier="ground_force_v",
            point_identifier="ground_force_p",
            torque_identifier="ground_torque_",
            force_expressed_in_body="ground",
            point_expressed_in_body="block",
        )
    )
    m = m.add(
        ExternalForce(
            "ef2",
            "block",
            table,
            force_identifier="ground_force_v",
            torque_identifier="ground_torque_",
            force_expressed_in_body="link",
        )
    )
    system = m.build()
    Q, U, T = _random(n_rows)
    _compare(om, s, system, Q, U, T)


def test_external_force_errors():
    table = grf_table(5)
    with pytest.raises(sj.ModelError, match="force_identifier"):
        ExternalForce("bad", "block", table, force_identifier="ground_force")  # 6 columns match
    m = _bodies_sj().add(ExternalForce("ef", "nobody", table, force_identifier="ground_force_v"))
    with pytest.raises(sj.ModelError, match="applied_to_body"):
        m.build()


def test_prescribed_force_matches_opensim():
    om = osim.Model()
    block, link = _bodies_osim(om)
    frame = osim.PhysicalOffsetFrame("link_frame", link, osim.Transform(osim.Vec3(0.1, 0.2, 0.3)))
    om.addComponent(frame)
    f1 = osim.PrescribedForce("pf1", frame)
    f1.setForceFunctions(osim.Sine(10, 2, 0.3, 1), osim.LinearFunction(5, -1), osim.Constant(2))
    f1.setPointFunctions(osim.Constant(0.1), osim.LinearFunction(0.2, 0), osim.Constant(-0.05))
    f1.setTorqueFunctions(osim.Constant(1), osim.Sine(2, 3, 0, 0), osim.LinearFunction(-1, 0.5))
    f1.set_forceIsGlobal(False)
    f1.set_pointIsGlobal(True)
    om.addForce(f1)
    f2 = osim.PrescribedForce("pf2", block)
    f2.setForceFunctions(osim.Constant(3), osim.Constant(-4), osim.Sine(1, 1, 0, 0))
    om.addForce(f2)
    s = om.initSystem()
    m = _bodies_sj().add(PhysicalOffsetFrame("link_frame", "/bodyset/link", translation=(0.1, 0.2, 0.3)))
    m = m.add(
        PrescribedForce(
            "pf1",
            "/link_frame",
            (sj.Sine(10, 2, 0.3, 1), sj.LinearFunction((5, -1)), sj.Constant(2.0)),
            (sj.Constant(0.1), sj.LinearFunction((0.2, 0.0)), sj.Constant(-0.05)),
            (sj.Constant(1.0), sj.Sine(2, 3, 0, 0), sj.LinearFunction((-1, 0.5))),
            forceIsGlobal=False,
            pointIsGlobal=True,
        )
    )
    m = m.add(PrescribedForce("pf2", "/bodyset/block", (sj.Constant(3.0), sj.Constant(-4.0), sj.Sine(1, 1, 0, 0))))
    system = m.build()
    Q, U, T = _random(7)
    _compare(om, s, system, Q, U, T)
    # the outputs: force in Ground at the state's time
    st = jax.tree_util.tree_map(lambda x: x[0], sj_states(system, NAMES, Q[:1], U[:1], T[:1]))
    f = np.asarray(sj.output(system, st, "/forceset/pf2|force_in_ground"))
    np.testing.assert_allclose(f, [3.0, -4.0, np.sin(T[0])], rtol=1e-14)
