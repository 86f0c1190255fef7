"""Path wrapping: wrap-object components, OpenSim's wrapping geometry, and a smoothed variant.

- ``objects``: ``WrapCylinder``, ``WrapSphere``, ``WrapEllipsoid``, ``WrapTorus``
  (subcomponents of a PhysicalFrame) and ``PathWrap`` (in a GeometryPath).
- ``geometry``: ``wrap_<shape>(p1, p2, ...) -> WrapResult`` for one segment in the
  wrap object's frame, exact to OpenSim 4.6.
- ``paths``: the engine that wraps GeometryPaths with PathWraps as OpenSim's
  ``applyWrapObjects`` does (used by ``simjax.muscles.path``).
- ``smooth``: ``smooth_segment_length`` and ``segment_weight``, blended across
  wrap/no-wrap switches; ``smooth_paths`` turns the blend on for a model's PathWraps.
"""

from .geometry import (
    INSIDE_RADIUS,
    MANDATORY_WRAP,
    NO_WRAP,
    WRAPPED,
    WrapResult,
    no_wrap,
    wrap_cylinder,
    wrap_ellipsoid,
    wrap_sphere,
    wrap_torus,
)
from .objects import (
    AXIAL,
    HYBRID,
    MIDPOINT,
    PathWrap,
    WrapCylinder,
    WrapEllipsoid,
    WrapObject,
    WrapSphere,
    WrapTorus,
    find_wrap_object,
    parse_method,
    parse_quadrant,
    wrap_frame_path,
)
from .smooth import segment_weight, smooth_paths, smooth_segment_length

__all__ = [
    "WrapResult",
    "NO_WRAP",
    "INSIDE_RADIUS",
    "WRAPPED",
    "MANDATORY_WRAP",
    "no_wrap",
    "wrap_cylinder",
    "wrap_sphere",
    "wrap_ellipsoid",
    "wrap_torus",
    "smooth_segment_length",
    "segment_weight",
    "smooth_paths",
    "WrapObject",
    "WrapCylinder",
    "WrapSphere",
    "WrapEllipsoid",
    "WrapTorus",
    "PathWrap",
    "HYBRID",
    "MIDPOINT",
    "AXIAL",
    "find_wrap_object",
    "parse_method",
    "parse_quadrant",
    "wrap_frame_path",
]
