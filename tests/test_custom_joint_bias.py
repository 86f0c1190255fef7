"""CustomJoints whose rotations share a coordinate, against OpenSim 4.6 (Simbody).

OpenSim's CustomJoint is Simbody's FunctionBased mobilizer, whose ``Hdot u`` turns the
second and third rotation axes with the angular velocity of its first speed and of
all speeds but its third (``FunctionBasedImpl::buildHdot``), not with those of the
rotations before them. That is the exact time derivative only when each rotation is
driven by its own speed, in order. Rajagopal's knee (flexion, adduction and rotation
all functions of knee_angle) is not such a joint: there simjax's exact ``C`` gave udot
off by ~1e-3 relative. simjax reproduces Simbody's rule (``tree._transform_bias``);
these models check it, including the speed order OpenSim gives a CustomJoint (by first
use in its SpatialTransform, not the joint's own list).
"""

import numpy as np
import pytest

from test_dynamics_opensim import I6, J, Coord, build, compare, constant, linear, simm

pytest.importorskip("opensim")

SX = [-2.0, -1.0, 0.0, 1.0, 2.0]


def _joint(name, parent, child, coords, axes, rng):
    P = lambda: tuple(rng.normal(size=3) * 0.3)  # noqa: E731
    R = lambda: tuple(rng.uniform(-1, 1, 3))  # noqa: E731
    return J("CustomJoint", name, parent, child, coords, P(), R(), P(), R(), axes=axes)


def test_rotations_sharing_a_coordinate_match_opensim(tmp_path):
    """A Rajagopal-like 1-dof knee (three rotations and two translations of one
    coordinate, a patella on it), a 2-dof joint whose transform uses its coordinates in
    another order than the joint lists them, and a 3-dof joint with the second and
    third rotations swapped: udot, frame and station accelerations to 1e-9."""
    rng = np.random.default_rng(11)
    knee = [
        (("k",), (0, 0, 1), linear(1.0, 0.0)),
        (("k",), (1, 0, 0), simm(SX, [0.3, -0.1, 0.05, 0.2, -0.2])),
        (("k",), (0, 1, 0), simm(SX, [-0.2, 0.1, 0.0, -0.15, 0.3])),
        (("k",), (1, 0, 0), simm(SX, [0.01, -0.02, 0.0, 0.03, 0.01])),
        (("k",), (0, 1, 0), linear(0.05, -0.4)),
        ((), (0, 0, 1), constant(0.0)),
    ]
    patella = [
        (("kb",), (0, 0, 1), linear(-0.8, 0.0)),
        ((), (1, 0, 0), constant(0.0)),
        ((), (0, 1, 0), constant(0.0)),
        (("kb",), (1, 0, 0), simm(SX, [0.05, 0.04, 0.03, 0.02, 0.04])),
        (("kb",), (0, 1, 0), simm(SX, [-0.02, -0.03, -0.01, 0.0, 0.01])),
        ((), (0, 0, 1), constant(0.0)),
    ]
    # listed a, b; the transform uses b first, so OpenSim's speeds are (b, a, c)
    swapped = [
        (("b",), (0, 0, 1), linear(1.0, 0.0)),
        (("a",), (1, 0, 0), simm(SX, [0.3, -0.1, 0.05, 0.2, -0.2])),
        (("b",), (0, 1, 0), linear(-0.6, 0.1)),
        (("a",), (1, 0, 0), simm(SX, [0.01, -0.02, 0.0, 0.03, 0.01])),
        (("c",), (0, 1, 0), linear(0.05, -0.4)),
        ((), (0, 0, 1), constant(0.0)),
    ]
    # listed x, y, z; rotations use x, z, y: OpenSim's speeds (x, z, y) make it exact
    three = [
        (("x",), (0, 0, 1), linear(1.0, 0.0)),
        (("z",), (1, 0, 0), simm(SX, [0.3, -0.1, 0.05, 0.2, -0.2])),
        (("y",), (0, 1, 0), linear(-0.6, 0.1)),
        (("x",), (1, 0, 0), simm(SX, [0.01, -0.02, 0.0, 0.03, 0.01])),
        ((), (0, 1, 0), constant(0.0)),
        ((), (0, 0, 1), constant(0.0)),
    ]
    bodies = [(f"b{i}", float(rng.uniform(0.5, 2.0)), tuple(rng.normal(size=3) * 0.1), I6) for i in range(1, 6)]
    C = Coord
    joints = [
        J("PinJoint", "hip", "ground", "b1", [C("h", 0.3)]),
        _joint("knee", "b1", "b2", [C("k", -0.4)], knee, rng),
        _joint("patella", "b2", "b3", [C("kb", -0.4)], patella, rng),
        _joint("swapped", "ground", "b4", [C("a", 0.2), C("b"), C("c")], swapped, rng),
        _joint("three", "b4", "b5", [C("x"), C("y"), C("z")], three, rng),
    ]
    markers = [("m3", "b3", (0.1, -0.1, 0.0))]
    frames = ("/bodyset/b2", "/bodyset/b5")
    xml, model = build(bodies, joints, markers=markers)
    compare(tmp_path, xml, model, frames=frames, markers=[m[0] for m in markers], rng=rng)
