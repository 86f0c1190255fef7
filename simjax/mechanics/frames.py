"""Frames and points: Ground, Body, PhysicalOffsetFrame, Station, Marker.

(OpenSim API guide, "Frames" and "Points, Stations and Markers".) These classes
declare the properties; their kinematics (transforms, velocities, accelerations in
Ground) are computed by ``simjax.mechanics.kinematics`` from the state.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .. import spatial
from ..component import Component, ModelError, Stage, flag, model_warning, output, prop, socket

__all__ = ["Frame", "PhysicalFrame", "Ground", "Body", "PhysicalOffsetFrame", "Station", "Marker"]


class Frame(Component):
    """A reference frame: an origin and three axes (abstract)."""

    @output(Stage.POSITION, "Transform")
    def transform_in_ground(self, ctx):
        """The frame's pose in Ground as ``(R, p)``."""
        return ctx.frame_transform(ctx.path)

    @output(Stage.POSITION, "Vec3")
    def position(self, ctx):
        """The frame origin's location in Ground (m)."""
        return ctx.frame_transform(ctx.path)[1]

    @output(Stage.VELOCITY, "SpatialVec")
    def velocity(self, ctx):
        """The frame's spatial velocity ``(w, v)`` in Ground (v of the frame origin)."""
        return ctx.frame_velocity(ctx.path)

    @output(Stage.ACCELERATION, "SpatialVec")
    def acceleration(self, ctx):
        """The frame's spatial acceleration ``(dw/dt, a)`` in Ground (a of the origin)."""
        return ctx.frame_acceleration(ctx.path)


class PhysicalFrame(Frame):
    """A frame that joints, constraints and forces can attach to (abstract)."""


class Ground(PhysicalFrame):
    """The inertial frame. Every model has exactly one, named ``ground``."""

    def __init__(self, name: str = "ground", components: tuple = ()):
        self.name = name
        self.components = components


class Body(PhysicalFrame):
    """A rigid body: a PhysicalFrame with mass properties.

    **Fields:**

    - ``mass``: kg, >= 0.
    - ``mass_center``: location of the mass center in the body frame (m).
    - ``inertia``: moments and products about the mass center, in the body frame,
      OpenSim's order ``(Ixx, Iyy, Izz, Ixy, Ixz, Iyz)`` (kg m^2).
    """

    set_name: ClassVar[str | None] = "bodyset"

    mass: np.ndarray = prop(1.0, doc="Mass of the body (kg).", bounds=(0.0, None))
    mass_center: np.ndarray = prop((0.0, 0.0, 0.0), doc="Mass center in the body frame (m).", shape=(3,))
    inertia: np.ndarray = prop(
        (0.0,) * 6, doc="Inertia about the mass center: Ixx Iyy Izz Ixy Ixz Iyz (kg m^2).", shape=(6,)
    )

    def __init__(self, name: str, mass=1.0, mass_center=(0.0, 0.0, 0.0), inertia=(0.0,) * 6, components: tuple = ()):
        self.name = name
        self.mass = mass
        self.mass_center = mass_center
        inertia = np.asarray(inertia, dtype=float) if not hasattr(inertia, "aval") else inertia
        if getattr(inertia, "shape", None) == (3,):
            inertia = np.concatenate([inertia, np.zeros(3)])
        self.inertia = inertia
        self.components = components

    def validate(self, path: str) -> None:
        """Check that the mass properties are finite, mass >= 0 and the inertia symmetric
        with non-negative principal moments (errors: the dynamics would be undefined).

        Principal moments that violate the triangle inequality (I1 + I2 >= I3, which
        SimTK::Inertia does not enforce) only give a ``ModelWarning``: OpenSim loads
        and simulates such models (feet and toes with a zero moment about an axis).
        """
        super().validate(path)
        for name in ("mass", "mass_center", "inertia"):
            value = getattr(self, name)
            if isinstance(value, np.ndarray) and not np.all(np.isfinite(value)):
                raise ModelError(path, f"{name} is not finite", prop=name, value=value)
        if isinstance(self.inertia, np.ndarray):
            i = self.inertia
            I = np.array([[i[0], i[3], i[4]], [i[3], i[1], i[5]], [i[4], i[5], i[2]]])
            if not np.allclose(I, I.T):
                raise ModelError(path, "inertia matrix is not symmetric", prop="inertia", value=self.inertia)
            w = np.linalg.eigvalsh(I)
            tol = 1e-9 * max(1.0, float(np.abs(w).max()))
            if w.min() < -tol:
                raise ModelError(path, "inertia has a negative principal moment", prop="inertia", value=self.inertia)
            if w[0] + w[1] < w[2] - tol:
                model_warning(
                    path,
                    "inertia violates the triangle inequality (I1 + I2 >= I3); OpenSim accepts it, and so does simjax",
                    prop="inertia",
                    value=self.inertia,
                )

    @output(Stage.POSITION, "Vec3")
    def mass_center_in_ground(self, ctx):
        """The mass center's location in Ground (m)."""
        return spatial.transform_point(ctx.frame_transform(ctx.path), ctx.param(self.mass_center))


class PhysicalOffsetFrame(PhysicalFrame):
    """A frame fixed to another PhysicalFrame (its ``parent``) by a constant offset.

    Offset frames can be chained: the parent may itself be an offset frame.

    **Fields:**

    - ``parent``: socket to the PhysicalFrame this frame is fixed to.
    - ``translation``: origin of this frame in the parent frame (m).
    - ``orientation``: body-fixed X-Y-Z angles of this frame in the parent (rad).
    """

    parent: str = socket("PhysicalFrame", doc="The frame this offset frame is fixed to.")
    translation: np.ndarray = prop((0.0, 0.0, 0.0), doc="Translation in the parent frame (m).", shape=(3,))
    orientation: np.ndarray = prop((0.0, 0.0, 0.0), doc="Body-fixed XYZ orientation in the parent (rad).", shape=(3,))

    def __init__(
        self,
        name: str,
        parent: str = "",
        translation=(0.0, 0.0, 0.0),
        orientation=(0.0, 0.0, 0.0),
        components: tuple = (),
    ):
        self.name = name
        self.parent = parent
        self.translation = translation
        self.orientation = orientation
        self.components = components

    def offset_transform(self):
        """The constant pose of this frame in its parent, ``(R, p)``."""
        return spatial.xyz_body_rotation(self.orientation), self.translation


class Station(Component):
    """A point fixed to a PhysicalFrame (OpenSim Station).

    **Fields:** ``parent_frame``: socket to the frame; ``location``: the point in that
    frame (m).
    """

    parent_frame: str = socket("PhysicalFrame", doc="The frame the station is fixed to.")
    location: np.ndarray = prop((0.0, 0.0, 0.0), doc="Location in the parent frame (m).", shape=(3,))

    def __init__(self, name: str, parent_frame: str = "", location=(0.0, 0.0, 0.0), components: tuple = ()):
        self.name = name
        self.parent_frame = parent_frame
        self.location = location
        self.components = components

    @output(Stage.POSITION, "Vec3")
    def location_in_ground(self, ctx):
        """The point's location in Ground (m)."""
        return ctx.station_location(ctx.path)

    @output(Stage.VELOCITY, "Vec3")
    def velocity_in_ground(self, ctx):
        """The point's velocity in Ground (m/s)."""
        return ctx.station_velocity(ctx.path)

    @output(Stage.ACCELERATION, "Vec3")
    def acceleration_in_ground(self, ctx):
        """The point's acceleration in Ground (m/s^2)."""
        return ctx.station_acceleration(ctx.path)


class Marker(Station):
    """A Station standing for an experimental motion-capture marker.

    ``fixed``: whether inverse kinematics may move it (OpenSim's flag).
    """

    set_name: ClassVar[str | None] = "markerset"

    fixed: bool = flag(False, doc="Whether the marker is fixed during marker placement.")

    def __init__(
        self, name: str, parent_frame: str = "", location=(0.0, 0.0, 0.0), fixed: bool = False, components: tuple = ()
    ):
        super().__init__(name, parent_frame, location, components)
        self.fixed = fixed
