"""Contact test models built with simjax's API, identical to OpenSim ones.

``bouncing_block`` mirrors the shipped bouncing_block.osim component by
component (until the .osim reader can load it).
"""

import simjax as sj
from simjax.forces import (
    BushingForce,
    ContactHalfSpace,
    ContactSphere,
    CoordinateLimitForce,
    HuntCrossleyForce,
    PointToPointSpring,
)
from simjax.mechanics.point_on_line import PointOnLineConstraint

BOUNCING_BLOCK = sj.models.path("bouncing_block")  # the shipped copy (its display meshes are not shipped)
BB_COORDS = [
    "xRotation",
    "yRotation",
    "zRotation",
    "xTranslation",
    "yTranslation",
    "zTranslation",
    "pin1_rot",
    "pin2_rot",
]


def bouncing_block():
    """simjax model equal to bouncing_block.osim."""
    m = sj.Model("toy_with_forces")
    m = m.add(sj.Body("block", mass=20.0, inertia=(0.533333, 0.533333, 0.533333, 0, 0, 0)))
    m = m.add(sj.Body("link1", mass=5.0, mass_center=(0, 0.25, 0), inertia=(8.333e-05, 8e-06, 8.333e-05, 0, 0, 0)))
    m = m.add(sj.Body("link2", mass=5.0, mass_center=(0, 0.25, 0), inertia=(8.333e-05, 8e-06, 8.333e-05, 0, 0, 0)))
    defaults = [0.0, 0.0, 0.698131700797732, 0.000277983525703001, 1.1, 0.0]
    ranges = [(-2, 2)] * 3 + [(-10, 10)] * 3
    coords = tuple(sj.Coordinate(n, default_value=v, range=r) for n, v, r in zip(BB_COORDS[:6], defaults, ranges))
    m = m.add(
        sj.FreeJoint(
            "ground_block",
            "/ground",
            "/bodyset/block",
            location_in_parent=(0, 0, 0),
            location_in_child=(0, 0, 0),
            coordinates=coords,
        )
    )
    m = m.add(
        sj.PinJoint(
            "pin1",
            "/bodyset/block",
            "/bodyset/link1",
            location_in_parent=(0, 0, 0),
            location_in_child=(0, 0.5, 0),
            coordinates=(sj.Coordinate("pin1_rot"),),
        )
    )
    m = m.add(
        sj.PinJoint(
            "pin2",
            "/bodyset/link1",
            "/bodyset/link2",
            location_in_parent=(0, 0, 0),
            location_in_child=(0, 0.5, 0),
            coordinates=(sj.Coordinate("pin2_rot", default_value=-1.39626340159546),),
        )
    )
    for name, body in (("lock_block_to_y_axis", "/bodyset/block"), ("lock_foot_to_y_axis", "/bodyset/link2")):
        m = m.add(PointOnLineConstraint(name, "/ground", (0, 1, 0), (0, 0, 0), body, (0, 0, 0)))
    m = m.add(ContactHalfSpace("platform", "/ground", orientation=(0, 0, -1.57079633)))
    m = m.add(ContactSphere("heel", "/bodyset/link2", radius=0.05))
    m = m.add(
        HuntCrossleyForce(
            "foot_contact_force",
            ("platform", "heel"),
            stiffness=1e8,
            dissipation=0.5,
            static_friction=0.9,
            dynamic_friction=0.9,
            viscous_friction=0.6,
            transition_velocity=0.1,
        )
    )
    m = m.add(
        PointToPointSpring(
            "spring", "/bodyset/block", (0, 0, 0), "/bodyset/link2", (0, 0, 0), stiffness=2000, rest_length=0.8
        )
    )
    m = m.add(
        CoordinateLimitForce(
            "knee_limit",
            "pin2_rot",
            upper_limit=0,
            upper_stiffness=20,
            lower_limit=-140,
            lower_stiffness=20,
            damping=1,
            transition=5,
        )
    )
    m = m.add(
        BushingForce(
            "hip_bushing",
            "/bodyset/block",
            "/bodyset/link1",
            location_in_frame2=(0, 0.5, 0),
            rotational_stiffness=(10, 10, 10),
            rotational_damping=(0.1, 0.1, 0.1),
        )
    )
    return m
