"""PointOnLineConstraint against OpenSim 4.6: accelerations and position errors at
random (unassembled) states, for oblique lines on moving bodies."""

import jax
import numpy as np
import pytest

import simjax as sj
from simjax.mechanics.point_on_line import PointOnLineConstraint, perpendicular_axes

from _forces_oracle import assert_close, osim_udot, set_osim_state, sj_states, sj_udot

osim = pytest.importorskip("opensim")

NAMES = ["free_coord_%d" % i for i in range(6)] + ["pin_coord_0"]
LINES = [
    ("c1", "ground", (1.0, 2.0, 3.0), (0.1, 0.2, -0.3), "block", (0.05, -0.1, 0.2)),
    ("c2", "ground", (0.0, 1.0, 0.5), (0.0, 0.0, 0.1), "link", (0.1, 0.3, 0.0)),
]


def build_osim():
    m = osim.Model()
    block = osim.Body("block", 2.0, osim.Vec3(0.1, 0.2, 0.0), osim.Inertia(0.3, 0.4, 0.5, 0.01, 0.02, 0.03))
    link = osim.Body("link", 1.0, osim.Vec3(0, 0.25, 0), osim.Inertia(0.1, 0.01, 0.1, 0, 0, 0))
    m.addBody(block), m.addBody(link)
    m.addJoint(osim.FreeJoint("free", m.getGround(), block))
    m.addJoint(
        osim.PinJoint(
            "pin", block, osim.Vec3(0, 0.1, 0), osim.Vec3(0.2, 0, 0), link, osim.Vec3(0, 0.5, 0), osim.Vec3(0, 0, 0)
        )
    )
    bodies = {"ground": m.getGround(), "block": block, "link": link}
    for name, lb, d, p, fb, s in LINES:
        c = osim.PointOnLineConstraint(bodies[lb], osim.Vec3(*d), osim.Vec3(*p), bodies[fb], osim.Vec3(*s))
        c.setName(name)
        m.addConstraint(c)
    return m, m.initSystem()


def build_sj():
    m = sj.Model("pol")
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
    path = {"ground": "/ground", "block": "/bodyset/block", "link": "/bodyset/link"}
    for name, lb, d, p, fb, s in LINES:
        m = m.add(PointOnLineConstraint(name, path[lb], d, p, path[fb], s))
    return m.build()


def test_perpendicular_axes_are_simbodys():
    z = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    x, y = (np.asarray(a) for a in perpendicular_axes(z))
    np.testing.assert_allclose(x[0], [0, 1, 0])  # z x e_x
    np.testing.assert_allclose(x[1], [0, 0, 1])  # (1,0,0) x e_y: y is the first least-aligned axis
    for a, b, c in zip(x, y, z):
        np.testing.assert_allclose([a @ c, b @ c, a @ b], 0, atol=1e-15)
        np.testing.assert_allclose(np.cross(c, a), b, atol=1e-15)


def test_point_on_line_matches_opensim():
    om, s = build_osim()
    system = build_sj()
    rng = np.random.default_rng(0)
    Q = rng.uniform(-1, 1, (100, 7))
    U = rng.uniform(-2, 2, (100, 7))
    ref, qerr = [], []
    for q, u in zip(Q, U):
        set_osim_state(om, s, NAMES, q, u)
        ref.append(osim_udot(om, s, NAMES))
        qerr.append(np.array(s.getQErr().to_numpy()))
    states = sj_states(system, NAMES, Q, U)
    assert_close(sj_udot(system, NAMES, states), np.array(ref), 1e-9, "udot")
    got = np.asarray(jax.vmap(lambda st: sj.constraint_errors(system, st)["qerr"])(states))
    assert_close(got, np.array(qerr), 1e-9, "position errors")
    acc = jax.vmap(lambda st: sj.constraint_errors(system, st)["udoterr"])(states)
    assert np.abs(np.asarray(acc)).max() < 1e-9
