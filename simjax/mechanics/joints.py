"""Coordinates and joints (OpenSim Coordinate, Joint and its subclasses).

A joint connects a parent frame F to a child frame M and gives the pose of M in F as
a function of the joint's coordinates. Two kinematic kinds cover every joint:

- *transform* joints: six ``TransformAxis`` entries (three body-fixed rotations,
  then three translations along axes of F), each a Function of at most one
  coordinate, with ``qdot = u``. CustomJoint is this directly; Pin, Slider,
  Universal, Gimbal, Planar and Weld are fixed instances of it (Simbody's
  conventions for those mobilizers coincide with this form).
- *rotation* joints: Ball, Free and Ellipsoid, whose rotation is three body-fixed
  XYZ angles (OpenSim's default) or a unit quaternion (``Model(use_quaternions=True)``),
  with ``u`` the angular velocity of M in F expressed in F; Free adds the position of
  M's origin in F (``u``: its velocity in F); Ellipsoid keeps M's origin on an
  ellipsoid centred at F's origin (at ``radii * Mz``, as Simbody does).

This module only declares the components; ``simjax.mechanics.tree`` compiles them
into vectorized kinematics.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import numpy as np

from ..component import Component, ModelError, Stage, flag, output, prop, socket
from ..functions import Function, LinearFunction
from .frames import PhysicalOffsetFrame

__all__ = [
    "Coordinate",
    "TransformAxis",
    "SpatialTransform",
    "Joint",
    "WeldJoint",
    "PinJoint",
    "SliderJoint",
    "UniversalJoint",
    "GimbalJoint",
    "PlanarJoint",
    "CustomJoint",
    "BallJoint",
    "FreeJoint",
    "EllipsoidJoint",
    "ROTATIONAL",
    "TRANSLATIONAL",
    "COUPLED",
]

ROTATIONAL, TRANSLATIONAL, COUPLED = "Rotational", "Translational", "Coupled"


class Coordinate(Component):
    """A generalized coordinate of a joint (OpenSim Coordinate).

    **Fields:**

    - ``default_value``: the value in the default state (rad or m).
    - ``default_speed_value``: the speed in the default state (rad/s or m/s).
    - ``range``: ``(min, max)``, used by ``clamped`` and by sampling tools.
    - ``clamped``: keep the value within ``range`` (during assembly and projection).
    - ``locked``: hold the coordinate at its current value (a constraint).
    - ``prescribed`` / ``prescribed_function``: the value follows a Function of time.
    - ``is_free_to_satisfy_constraints``: may move during assembly.
    """

    default_value: np.ndarray = prop(0.0, doc="Default value (rad or m).")
    default_speed_value: np.ndarray = prop(0.0, doc="Default speed (rad/s or m/s).")
    range: np.ndarray = prop((-10.0, 10.0), doc="Allowed range (min, max).", shape=(2,))
    clamped: bool = flag(False, doc="Whether the value is limited to the range.")
    locked: bool = flag(False, doc="Whether the coordinate is held at its value.")
    prescribed: bool = flag(False, doc="Whether the value follows prescribed_function.")
    prescribed_function: Function | None = None
    is_free_to_satisfy_constraints: bool = flag(False, doc="Whether assembly may move this coordinate freely.")

    def __init__(
        self,
        name: str,
        default_value=0.0,
        default_speed_value=0.0,
        range=(-10.0, 10.0),
        clamped: bool = False,
        locked: bool = False,
        prescribed: bool = False,
        prescribed_function: Function | None = None,
        is_free_to_satisfy_constraints: bool = False,
        components: tuple = (),
    ):
        self.name = name
        self.default_value = default_value
        self.default_speed_value = default_speed_value
        self.range = range
        self.clamped = clamped
        self.locked = locked
        self.prescribed = prescribed
        self.prescribed_function = prescribed_function
        self.is_free_to_satisfy_constraints = is_free_to_satisfy_constraints
        self.components = components

    def validate(self, path: str) -> None:
        """Check the range is ordered and a prescribed coordinate has its function."""
        super().validate(path)
        r = self.range
        if isinstance(r, np.ndarray) and r[0] > r[1]:
            raise ModelError(path, "range minimum exceeds maximum", prop="range", value=r)
        if self.prescribed and self.prescribed_function is None:
            raise ModelError(path, "prescribed is true but prescribed_function is empty", prop="prescribed", value=True)
        if self.locked and self.prescribed:
            raise ModelError(path, "a coordinate cannot be both locked and prescribed", prop="locked", value=True)

    @output(Stage.POSITION)
    def value(self, ctx):
        """The coordinate's value (rad or m)."""
        return ctx.coordinate_value(ctx.path)

    @output(Stage.VELOCITY)
    def speed(self, ctx):
        """The coordinate's speed (rad/s or m/s)."""
        return ctx.coordinate_speed(ctx.path)

    @output(Stage.ACCELERATION)
    def acceleration(self, ctx):
        """The coordinate's acceleration (rad/s^2 or m/s^2)."""
        return ctx.coordinate_acceleration(ctx.path)


class TransformAxis(eqx.Module):
    """One of the six axes of a SpatialTransform.

    **Fields:** ``coordinates``: names of the joint coordinates the function takes
    (at most one is supported); ``axis``: unit direction in F (for rotations, in the
    frame rotated by the preceding rotations); ``function``: the Function of the
    coordinate giving the angle (rad) or displacement (m); ``None`` means the
    identity for an axis with a coordinate and zero for one without.
    """

    coordinates: tuple = eqx.field(static=True, default=())
    axis: np.ndarray = prop((1.0, 0.0, 0.0), shape=(3,))
    function: Function | None = None


class SpatialTransform(eqx.Module):
    """Six TransformAxis entries: rotation1..3 then translation1..3 (OpenSim's order)."""

    axes: tuple = ()

    def __check_init__(self):
        if len(self.axes) != 6:
            raise ValueError(f"SpatialTransform needs 6 TransformAxis entries, got {len(self.axes)}")


_AXIS_NAMES = ("rotation1", "rotation2", "rotation3", "translation1", "translation2", "translation3")


def _axis(coord: str | None, direction, function=None) -> TransformAxis:
    return TransformAxis(coordinates=(coord,) if coord else (), axis=np.asarray(direction, float), function=function)


def _default_spatial_transform(coords: list[str], kinds: list[str], directions) -> SpatialTransform:
    """Axes for a standard joint: ``coords[i]`` drives ``directions[i]`` of kind ``kinds[i]``."""
    rot = [(c, d) for c, k, d in zip(coords, kinds, directions) if k == ROTATIONAL]
    tra = [(c, d) for c, k, d in zip(coords, kinds, directions) if k == TRANSLATIONAL]
    free_rot = [d for d in np.eye(3) if not any(np.allclose(d, r[1]) for r in rot)]
    free_tra = [d for d in np.eye(3) if not any(np.allclose(d, t[1]) for t in tra)]
    axes = [_axis(c, d) for c, d in rot] + [_axis(None, d) for d in free_rot[: 3 - len(rot)]]
    axes += [_axis(c, d) for c, d in tra] + [_axis(None, d) for d in free_tra[: 3 - len(tra)]]
    return SpatialTransform(axes=tuple(axes))


class Joint(Component):
    """A joint between a parent frame F and a child frame M (abstract).

    **Fields:**

    - ``parent_frame``, ``child_frame``: sockets to PhysicalFrames (often offset frames
      owned by the joint, listed in ``frames``).
    - ``coordinates``: the joint's Coordinates, in the joint's order.
    - ``frames``: PhysicalOffsetFrames owned by the joint.

    Construct with OpenSim's convenience arguments to create the offset frames:
    ``PinJoint("elbow", "/bodyset/humerus", "/bodyset/radius",
    location_in_child=(0, 1, 0))``.
    """

    set_name: ClassVar[str | None] = "jointset"

    parent_frame: str = socket("PhysicalFrame", doc="The parent frame for the joint.")
    child_frame: str = socket("PhysicalFrame", doc="The child frame for the joint.")
    coordinates: tuple = ()
    frames: tuple = ()

    #: kinematic kind: "transform" or "quaternion"
    kind: ClassVar[str] = "transform"
    #: (motion type, axis direction) of each coordinate for standard joints
    coordinate_axes: ClassVar[tuple] = ()

    def __init__(
        self,
        name: str,
        parent: str = "",
        child: str = "",
        *,
        location_in_parent=None,
        orientation_in_parent=None,
        location_in_child=None,
        orientation_in_child=None,
        coordinates: tuple | None = None,
        frames: tuple = (),
        components: tuple = (),
    ):
        self.name = name
        frames = tuple(frames)
        if location_in_parent is not None or orientation_in_parent is not None:
            parent, frames = self._offset(parent, location_in_parent, orientation_in_parent, frames)
        if location_in_child is not None or orientation_in_child is not None:
            child, frames = self._offset(child, location_in_child, orientation_in_child, frames)
        self.parent_frame = parent
        self.child_frame = child
        self.frames = frames
        if coordinates is None:
            coordinates = tuple(Coordinate(f"{name}_coord_{i}") for i in range(self.num_coordinates_default()))
        self.coordinates = tuple(coordinates)
        self.components = components

    @staticmethod
    def _offset(target: str, location, orientation, frames):
        base = target.rstrip("/").split("/")[-1] or "ground"
        frame = PhysicalOffsetFrame(
            f"{base}_offset",
            parent=target,
            translation=(0.0, 0.0, 0.0) if location is None else location,
            orientation=(0.0, 0.0, 0.0) if orientation is None else orientation,
        )
        return frame.name, frames + (frame,)

    @classmethod
    def num_coordinates_default(cls) -> int:
        """Number of coordinates a joint of this type has."""
        return len(cls.coordinate_axes)

    def validate(self, path: str) -> None:
        """Check the number of coordinates matches the joint type."""
        super().validate(path)
        n = self.num_coordinates_default()
        if self.kind != "custom" and len(self.coordinates) != n:
            raise ModelError(
                path,
                f"{type(self).__name__} needs {n} coordinates, got {len(self.coordinates)}",
                prop="coordinates",
                value=[c.name for c in self.coordinates],
            )

    def motion_types(self) -> tuple[str, ...]:
        """Motion type (Rotational, Translational, Coupled) of each coordinate."""
        return tuple(kind for kind, _ in self.coordinate_axes)

    def transform_axes(self) -> SpatialTransform:
        """The joint as six transform axes (transform-kind joints only)."""
        names = [c.name for c in self.coordinates]
        kinds = [k for k, _ in self.coordinate_axes]
        dirs = [d for _, d in self.coordinate_axes]
        return _default_spatial_transform(names, kinds, dirs)


class WeldJoint(Joint):
    """A joint with no degrees of freedom: M is fixed in F."""

    coordinate_axes: ClassVar[tuple] = ()


class PinJoint(Joint):
    """One rotation about F's (and M's) z axis."""

    coordinate_axes: ClassVar[tuple] = ((ROTATIONAL, (0.0, 0.0, 1.0)),)


class SliderJoint(Joint):
    """One translation along F's x axis."""

    coordinate_axes: ClassVar[tuple] = ((TRANSLATIONAL, (1.0, 0.0, 0.0)),)


class UniversalJoint(Joint):
    """Rotation about x, then about the new y (body-fixed)."""

    coordinate_axes: ClassVar[tuple] = ((ROTATIONAL, (1.0, 0.0, 0.0)), (ROTATIONAL, (0.0, 1.0, 0.0)))


class GimbalJoint(Joint):
    """Body-fixed X-Y-Z rotations (three Euler angles, ``u = qdot``)."""

    coordinate_axes: ClassVar[tuple] = (
        (ROTATIONAL, (1.0, 0.0, 0.0)),
        (ROTATIONAL, (0.0, 1.0, 0.0)),
        (ROTATIONAL, (0.0, 0.0, 1.0)),
    )


class PlanarJoint(Joint):
    """Rotation about z and translation along F's x and y."""

    coordinate_axes: ClassVar[tuple] = (
        (ROTATIONAL, (0.0, 0.0, 1.0)),
        (TRANSLATIONAL, (1.0, 0.0, 0.0)),
        (TRANSLATIONAL, (0.0, 1.0, 0.0)),
    )


class CustomJoint(Joint):
    """A joint defined by a SpatialTransform of Functions of its coordinates.

    **Fields:** ``spatial_transform``: rotation1..3 (body-fixed sequence) then
    translation1..3 (along axes of F), each a Function of one coordinate.
    """

    spatial_transform: SpatialTransform = None
    kind: ClassVar[str] = "custom"

    def __init__(
        self,
        name: str,
        parent: str = "",
        child: str = "",
        *,
        spatial_transform: SpatialTransform,
        coordinates: tuple | None = None,
        **kwargs,
    ):
        if coordinates is None:
            used = []
            for ax in spatial_transform.axes:
                for c in ax.coordinates:
                    if c not in used:
                        used.append(c)
            coordinates = tuple(Coordinate(c) for c in used)
        super().__init__(name, parent, child, coordinates=coordinates, **kwargs)
        self.spatial_transform = spatial_transform

    def validate(self, path: str) -> None:
        """Check every axis references at most one of this joint's coordinates."""
        super().validate(path)
        names = {c.name for c in self.coordinates}
        for label, ax in zip(_AXIS_NAMES, self.spatial_transform.axes):
            if len(ax.coordinates) > 1:
                raise ModelError(
                    path,
                    f"{label}: functions of several coordinates are not supported",
                    prop="coordinates",
                    value=list(ax.coordinates),
                )
            for c in ax.coordinates:
                if c not in names:
                    raise ModelError(
                        path,
                        f"{label} refers to coordinate {c!r}, which this joint does not have",
                        prop="coordinates",
                        value=c,
                    )
            if isinstance(ax.axis, np.ndarray) and np.linalg.norm(ax.axis) < 1e-12:
                raise ModelError(path, f"{label} has a zero-length axis", prop="axis", value=ax.axis)

    def motion_types(self) -> tuple[str, ...]:
        """The motion type of each coordinate, by OpenSim's rule (CustomJoint): an axis
        driven through a LinearFunction of slope +-1 makes the coordinate Rotational
        (axes 1-3) or Translational (4-6), the last such axis deciding; any other
        function makes it Coupled unless such an axis already decided."""
        out = []
        for c in self.coordinates:
            kind = None
            for i, ax in enumerate(self.spatial_transform.axes):
                if c.name not in ax.coordinates:
                    continue
                f = ax.function  # None: the identity
                if f is None or (isinstance(f, LinearFunction) and abs(float(np.asarray(f.coefficients)[0])) == 1.0):
                    kind = ROTATIONAL if i < 3 else TRANSLATIONAL
                elif kind is None:
                    kind = COUPLED
            out.append(kind or COUPLED)
        return tuple(out)

    def transform_axes(self) -> SpatialTransform:
        """The joint's SpatialTransform."""
        return self.spatial_transform


class BallJoint(Joint):
    """Three rotational degrees of freedom; ``q`` is a unit quaternion (nq=4, nu=3).

    ``u`` is the angular velocity of M in F, expressed in F.
    """

    kind: ClassVar[str] = "quaternion"
    coordinate_axes: ClassVar[tuple] = (
        (ROTATIONAL, (1.0, 0.0, 0.0)),
        (ROTATIONAL, (0.0, 1.0, 0.0)),
        (ROTATIONAL, (0.0, 0.0, 1.0)),
    )


class FreeJoint(Joint):
    """Six degrees of freedom: a quaternion and the position of M's origin in F.

    ``q = (quaternion(4), position(3))``, ``u = (angular velocity(3), velocity(3))``,
    both the angular velocity and the velocity of M's origin expressed in F.
    """

    kind: ClassVar[str] = "quaternion"
    coordinate_axes: ClassVar[tuple] = (
        (ROTATIONAL, (1.0, 0.0, 0.0)),
        (ROTATIONAL, (0.0, 1.0, 0.0)),
        (ROTATIONAL, (0.0, 0.0, 1.0)),
        (TRANSLATIONAL, (1.0, 0.0, 0.0)),
        (TRANSLATIONAL, (0.0, 1.0, 0.0)),
        (TRANSLATIONAL, (0.0, 0.0, 1.0)),
    )


class EllipsoidJoint(Joint):
    """Three rotations with M's origin on an ellipsoid (Simbody's Ellipsoid mobilizer).

    The orientation of M in F is parametrized as for a BallJoint (body-fixed XYZ angles
    or a quaternion; ``u`` the angular velocity of M in F, in F). M's origin sits on the
    ellipsoid ``(x/rx)^2 + (y/ry)^2 + (z/rz)^2 = 1`` centred on F's origin, at
    ``p_FM = radii * Mz`` elementwise (``Mz`` M's z axis in F), exactly as Simbody's
    Ellipsoid mobilizer places it (the surface normal there is along ``Mz`` only for a
    sphere); at zero rotation M is displaced by ``rz`` along F's z axis.

    **Fields:** ``radii_x_y_z``: the semi-axes along F's x, y, z (m).
    """

    kind: ClassVar[str] = "quaternion"
    coordinate_axes: ClassVar[tuple] = (
        (ROTATIONAL, (1.0, 0.0, 0.0)),
        (ROTATIONAL, (0.0, 1.0, 0.0)),
        (ROTATIONAL, (0.0, 0.0, 1.0)),
    )

    radii_x_y_z: np.ndarray = prop(
        (1.0, 1.0, 1.0), doc="Semi-axes of the ellipsoid along F's x, y, z (m).", shape=(3,), bounds=(0.0, None)
    )

    def __init__(self, name: str, parent: str = "", child: str = "", *, radii_x_y_z=(1.0, 1.0, 1.0), **kwargs):
        super().__init__(name, parent, child, **kwargs)
        self.radii_x_y_z = radii_x_y_z
