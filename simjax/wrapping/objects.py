"""Wrap-object components: WrapCylinder, WrapSphere, WrapEllipsoid, WrapTorus, and PathWrap.

(OpenSim ``WrapObject`` and subclasses, ``PathWrap``.) OpenSim keeps wrap objects
in each PhysicalFrame's ``<WrapObjectSet>``; simjax keeps them as generic
subcomponents of the frame, added with ``model.add(wrap, to="/bodyset/r_humerus")``,
so a wrap object's path is ``/bodyset/r_humerus/TRI`` and the frame it is fixed to
is its owner (``wrap_frame_path``). A ``PathWrap`` belongs to a GeometryPath's
``PathWrapSet`` and names the wrap object through its ``wrap_object`` socket.

The pose of a wrap object in its frame is ``(xyz_body_rotation(xyz_body_rotation),
translation)``; the geometry (``simjax.wrapping.geometry``) works in the wrap
object's own frame: cylinders and tori are about its z axis, all shapes centered on
its origin.
"""

from __future__ import annotations

import numpy as np

from .. import spatial
from ..component import Component, ModelError, flag, prop, socket

__all__ = [
    "WrapObject",
    "WrapCylinder",
    "WrapSphere",
    "WrapEllipsoid",
    "WrapTorus",
    "PathWrap",
    "parse_quadrant",
    "parse_method",
    "wrap_frame_path",
    "find_wrap_object",
    "HYBRID",
    "MIDPOINT",
    "AXIAL",
]

#: PathWrap methods as the geometry functions take them (OpenSim's enum order)
HYBRID, MIDPOINT, AXIAL = 0, 1, 2

_QUADRANTS = {
    "-x": (0, -1),
    "-X": (0, -1),
    "x": (0, 1),
    "+x": (0, 1),
    "X": (0, 1),
    "+X": (0, 1),
    "-y": (1, -1),
    "-Y": (1, -1),
    "y": (1, 1),
    "+y": (1, 1),
    "Y": (1, 1),
    "+Y": (1, 1),
    "-z": (2, -1),
    "-Z": (2, -1),
    "z": (2, 1),
    "+z": (2, 1),
    "Z": (2, 1),
    "+Z": (2, 1),
    "all": (0, 0),
    "ALL": (0, 0),
    "All": (0, 0),
    "Unassigned": (0, 0),
}

_METHODS = {
    "hybrid": HYBRID,
    "Hybrid": HYBRID,
    "HYBRID": HYBRID,
    "Unassigned": HYBRID,
    "midpoint": MIDPOINT,
    "Midpoint": MIDPOINT,
    "MIDPOINT": MIDPOINT,
    "axial": AXIAL,
    "Axial": AXIAL,
    "AXIAL": AXIAL,
}


def parse_quadrant(quadrant: str, where: str = "") -> tuple[int, int]:
    """The ``(wrap_axis, wrap_sign)`` of a quadrant name, as OpenSim parses it.

    **Arguments:** ``quadrant``: ``"all"``, ``"+x"``, ``"x"``, ``"-y"``, ... (the
    spellings ``WrapObject::extendFinalizeFromProperties`` accepts; ``"Unassigned"``
    means all); ``where``: the component path, for the error message.

    **Returns:** ``(axis, sign)`` with axis in 0..2 and sign in {-1, 0, +1}; sign 0
    means unconstrained (axis 0, unused).

    **Raises:** ``ModelError`` for any other spelling.
    """
    try:
        return _QUADRANTS[quadrant]
    except KeyError:
        raise ModelError(
            where or "/",
            "quadrant was specified incorrectly (expected all, +x, -x, +y, -y, +z or -z)",
            prop="quadrant",
            value=quadrant,
        ) from None


def parse_method(method: str, where: str = "") -> int:
    """The wrapping method code (``HYBRID``, ``MIDPOINT``, ``AXIAL``) of a PathWrap method name."""
    try:
        return _METHODS[method]
    except KeyError:
        raise ModelError(
            where or "/", "wrapping method must be hybrid, midpoint or axial", prop="method", value=method
        ) from None


def wrap_frame_path(wrap_path: str) -> str:
    """The path of the PhysicalFrame a wrap object is fixed to (its owner)."""
    return wrap_path.rsplit("/", 1)[0] or "/"


def find_wrap_object(model, name: str) -> str:
    """The path of the wrap object called ``name`` on any PhysicalFrame of ``model``.

    OpenSim's ``PathWrap`` names its wrap object by bare name and searches every
    frame's WrapObjectSet; readers use this to turn that name into a socket path.

    **Raises:** ``KeyError`` if no frame owns a wrap object of that name.
    """
    from ..mechanics.frames import PhysicalFrame

    for path, comp in model.walk():
        if (
            isinstance(comp, WrapObject)
            and comp.name == name
            and isinstance(model.find(wrap_frame_path(path)), PhysicalFrame)
        ):
            return path
    raise KeyError(f"no wrap object named {name!r} on any PhysicalFrame")


class WrapObject(Component):
    """A surface that muscle paths wrap over, fixed to a PhysicalFrame (abstract).

    **Fields:**

    - ``xyz_body_rotation``: body-fixed X-Y-Z angles of the wrap frame in the frame
      the object is attached to (rad).
    - ``translation``: origin of the wrap frame in that frame (m).
    - ``active``: whether paths wrap over it.
    - ``quadrant``: the side the object is active on: ``"all"``, ``"+x"``, ``"-x"``,
      ``"+y"``, ``"-y"``, ``"+z"``, ``"-z"`` (OpenSim's spellings accepted).
    """

    xyz_body_rotation: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="Body-fixed XYZ orientation in the frame (rad).", shape=(3,)
    )
    translation: np.ndarray = prop((0.0, 0.0, 0.0), doc="Translation in the frame (m).", shape=(3,))
    active: bool = flag(True, doc="Whether the wrap object is used when computing paths.")
    quadrant: str = flag("all", doc="The quadrant over which the wrap object is active (all, +x, -x, ...).")

    def __init__(
        self,
        name: str,
        xyz_body_rotation=(0.0, 0.0, 0.0),
        translation=(0.0, 0.0, 0.0),
        active: bool = True,
        quadrant: str = "all",
        components: tuple = (),
    ):
        self.name = name
        self.xyz_body_rotation = xyz_body_rotation
        self.translation = translation
        self.active = active
        self.quadrant = quadrant
        self.components = components

    def validate(self, path: str) -> None:
        """Check the properties and the quadrant's spelling."""
        super().validate(path)
        parse_quadrant(self.quadrant, path)

    @property
    def wrap_axis(self) -> int:
        """The quadrant's axis (0, 1, 2)."""
        return parse_quadrant(self.quadrant, self.name)[0]

    @property
    def wrap_sign(self) -> int:
        """The quadrant's sign: +1, -1, or 0 when unconstrained."""
        return parse_quadrant(self.quadrant, self.name)[1]

    def transform(self):
        """The pose ``(R, p)`` of the wrap frame in the frame the object is attached to."""
        return spatial.xyz_body_rotation(self.xyz_body_rotation), self.translation

    def _positive(self, path: str, names) -> None:
        for n in names:
            v = getattr(self, n)
            if isinstance(v, np.ndarray) and np.any(v <= 0.0):
                raise ModelError(path, "must be positive", prop=n, value=v)


class WrapCylinder(WrapObject):
    """A cylinder along the wrap frame's z axis, centered on its origin.

    **Fields:** ``radius`` (m), ``length`` (m): paths wrap only if a tangent point
    lies within ``|z| <= length / 2`` (OpenSim's rule).
    """

    radius: np.ndarray = prop(1.0, doc="Radius of the cylinder (m).", bounds=(0.0, None))
    length: np.ndarray = prop(1.0, doc="Length of the cylinder (m).", bounds=(0.0, None))

    def __init__(
        self,
        name: str,
        radius=1.0,
        length=1.0,
        xyz_body_rotation=(0.0, 0.0, 0.0),
        translation=(0.0, 0.0, 0.0),
        active: bool = True,
        quadrant: str = "all",
        components: tuple = (),
    ):
        super().__init__(name, xyz_body_rotation, translation, active, quadrant, components)
        self.radius = radius
        self.length = length


class WrapSphere(WrapObject):
    """A sphere centered on the wrap frame's origin. **Fields:** ``radius`` (m)."""

    radius: np.ndarray = prop(0.05, doc="Radius of the sphere (m).", bounds=(0.0, None))

    def __init__(
        self,
        name: str,
        radius=0.05,
        xyz_body_rotation=(0.0, 0.0, 0.0),
        translation=(0.0, 0.0, 0.0),
        active: bool = True,
        quadrant: str = "all",
        components: tuple = (),
    ):
        super().__init__(name, xyz_body_rotation, translation, active, quadrant, components)
        self.radius = radius


class WrapEllipsoid(WrapObject):
    """An ellipsoid with semi-axes ``dimensions`` along the wrap frame's x, y, z (m)."""

    dimensions: np.ndarray = prop((0.05, 0.05, 0.05), doc="Radii of the ellipsoid along x, y, z (m).", shape=(3,))

    def __init__(
        self,
        name: str,
        dimensions=(0.05, 0.05, 0.05),
        xyz_body_rotation=(0.0, 0.0, 0.0),
        translation=(0.0, 0.0, 0.0),
        active: bool = True,
        quadrant: str = "all",
        components: tuple = (),
    ):
        super().__init__(name, xyz_body_rotation, translation, active, quadrant, components)
        self.dimensions = dimensions

    def validate(self, path: str) -> None:
        """Check that every dimension is positive."""
        super().validate(path)
        self._positive(path, ("dimensions",))


class WrapTorus(WrapObject):
    """A torus about the wrap frame's z axis: a tube of radius ``inner_radius`` around
    the circle of radius ``outer_radius`` in the xy plane (m); ``inner < outer``."""

    inner_radius: np.ndarray = prop(0.01, doc="Radius of the tube (m).")
    outer_radius: np.ndarray = prop(0.05, doc="Radius of the tube's center circle (m).")

    def __init__(
        self,
        name: str,
        inner_radius=0.01,
        outer_radius=0.05,
        xyz_body_rotation=(0.0, 0.0, 0.0),
        translation=(0.0, 0.0, 0.0),
        active: bool = True,
        quadrant: str = "all",
        components: tuple = (),
    ):
        super().__init__(name, xyz_body_rotation, translation, active, quadrant, components)
        self.inner_radius = inner_radius
        self.outer_radius = outer_radius

    def validate(self, path: str) -> None:
        """Check ``0 < inner_radius < outer_radius``."""
        super().validate(path)
        self._positive(path, ("inner_radius", "outer_radius"))
        inner, outer = self.inner_radius, self.outer_radius
        if isinstance(inner, np.ndarray) and isinstance(outer, np.ndarray) and outer <= inner:
            raise ModelError(
                path, f"outer_radius must exceed inner_radius ({float(inner)})", prop="outer_radius", value=outer
            )


class PathWrap(Component):
    """One wrap object applied to (a range of) a GeometryPath (OpenSim PathWrap).

    **Fields:**

    - ``wrap_object``: socket to the WrapObject (a path; OpenSim files give a bare
      name, which readers resolve with ``find_wrap_object``).
    - ``method``: ``"hybrid"``, ``"midpoint"`` or ``"axial"`` (used by ellipsoids).
    - ``range``: 1-based indices ``(start, end)`` of the path points whose segments
      may wrap; ``-1`` means the first (or last) point.
    - ``smoothing``: width of the band (m) over which the wrapped length is blended
      to the straight one near OpenSim's wrap/no-wrap boundaries
      (``simjax.wrapping.smooth``); 0, the default, is OpenSim's exact switch. Not an
      OpenSim property: the ``.osim`` writer keeps it only where it is non-zero.
    """

    wrap_object: str = socket("WrapObject", doc="The wrap object this path wraps over.")
    method: str = flag("hybrid", doc="Wrapping method: hybrid, midpoint or axial.")
    range: tuple = flag((-1, -1), doc="1-based range of path points to wrap (-1: first/last).")
    smoothing: float = flag(0.0, doc="Blending band (m) at wrap onset; 0: OpenSim's exact switch.")

    def __init__(
        self,
        name: str,
        wrap_object: str = "",
        method: str = "hybrid",
        range=(-1, -1),
        smoothing: float = 0.0,
        components: tuple = (),
    ):
        self.name = name
        self.wrap_object = wrap_object
        self.method = method
        self.range = tuple(int(i) for i in range)
        self.smoothing = float(smoothing)
        self.components = components

    def validate(self, path: str) -> None:
        """Check the method name and the range's shape."""
        super().validate(path)
        parse_method(self.method, path)
        if len(self.range) != 2:
            raise ModelError(path, "range must hold two indices", prop="range", value=self.range)
        if not (np.isfinite(self.smoothing) and self.smoothing >= 0.0):
            raise ModelError(path, "must be a finite width >= 0 (m)", prop="smoothing", value=self.smoothing)

    @property
    def method_code(self) -> int:
        """``HYBRID``, ``MIDPOINT`` or ``AXIAL``."""
        return parse_method(self.method, self.name)
