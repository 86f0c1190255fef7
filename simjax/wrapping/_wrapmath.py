"""Small vector helpers for the wrapping geometry (OpenSim ``WrapMath``), NaN-safe.

Every helper is written so that its gradient is finite even where the value takes a
degenerate branch (zero vectors, parallel lines): the divisor or square-root argument
is replaced by a harmless one before the operation, and ``where`` selects afterwards
(the "double where" idiom). Shapes are single vectors ``(3,)``; callers ``vmap``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

#: OpenSim's ``SimmMacros.h`` ROUNDOFF_ERROR (used by EQUAL_WITHIN_ERROR)
ROUNDOFF_ERROR = 0.0000000000002
#: WrapMath LINE_EPSILON
LINE_EPSILON = 0.00001
#: OpenSim ``WrapObject::WrapAction`` codes
NO_WRAP, INSIDE_RADIUS, WRAPPED, MANDATORY_WRAP = 0, 1, 2, 3


def sum_last(x, axis=-1):
    """Sum over a short axis, written out as ``((x0 + x1) + x2) + ...``.

    XLA's CPU backend runs each reduction as a kernel of its own (and a cross-axis one
    through its library); element-wise additions fuse with their neighbours.
    """
    x = jnp.moveaxis(jnp.asarray(x), axis, -1)
    total = x[..., 0]
    for i in range(1, x.shape[-1]):
        total = total + x[..., i]
    return total


def dot(a, b):
    """Dot product over the last axis."""
    return sum_last(a * b)


def eps_of(x):
    """Machine epsilon of an array's floating dtype (SimTK::Eps in float64)."""
    return jnp.finfo(jnp.result_type(x, float)).eps


def safe_sqrt(x):
    """``sqrt(max(x, 0))`` with a finite gradient at and below zero."""
    ok = x > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, x, 1.0)), 0.0)


def norm(v):
    """Euclidean norm with a zero (not NaN) gradient at the zero vector."""
    return safe_sqrt(dot(v, v))


def safe_div(a, b):
    """``a / b``, and 0 where ``b == 0`` (finite gradient)."""
    ok = b != 0
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def normalize_or_zero(v):
    """OpenSim ``NormalizeOrZero``: ``(v / |v|, |v|)``, or ``(0, |v|)`` if ``|v| < eps``."""
    mag = norm(v)
    ok = mag >= eps_of(v)
    safe = jnp.where(ok, mag, 1.0)
    return jnp.where(ok[..., None], v / safe[..., None], 0.0), mag


def unit(v):
    """``normalize_or_zero(v)[0]``."""
    return normalize_or_zero(v)[0]


def dsign(x):
    """OpenSim's DSIGN: +1 for ``x >= 0``, else -1 (integer)."""
    return jnp.where(x >= 0.0, 1, -1)


def angle_between(a, b):
    """The angle between two vectors (rad, in [0, pi]): ``acos(a.b / |a||b|)``.

    Evaluated as ``atan2(|a x b|, a.b)``, equal to OpenSim's ``acos`` to rounding but
    with a finite gradient at 0 and pi.
    """
    return jnp.arctan2(norm(jnp.cross(a, b)), dot(a, b))


def acos_raw(x):
    """``acos`` as C computes it, NaN outside [-1, 1] (used only in comparisons)."""
    return jnp.arccos(jax.lax.stop_gradient(x))


def closest_point_on_line(pt, line_pt, line):
    """OpenSim ``GetClosestPointOnLineToPoint``: the point on the line through
    ``line_pt`` along ``line`` (any length; zero gives ``line_pt``) closest to ``pt``.

    **Returns:** ``(closest, t)`` with ``t`` the parameter along ``line`` (in units of
    ``|line|``).
    """
    v1, mag = normalize_or_zero(pt - line_pt)
    v2, mag2 = normalize_or_zero(line)
    t = dot(v1, v2) * mag
    closest = line_pt + t * v2
    return closest, safe_div(t, mag2)


def det_rows(r0, r1, r2):
    """Determinant of the 3x3 matrix with rows ``r0, r1, r2``."""
    return dot(r0, jnp.cross(r1, r2))


def intersect_lines(p1, p2, p3, p4):
    """OpenSim ``IntersectLines``: closest points of lines ``p1->p2`` and ``p3->p4``.

    **Returns:** ``(ok, pint1, s, pint2, t)``: ``ok`` false where the lines are
    parallel (OpenSim returns NaN parameters there; here the points are ``p1``, ``p3``
    and the parameters NaN-free zeros, and callers must use ``ok``); ``pint1 = p1 +
    s (p2 - p1)`` and ``pint2 = p3 + t (p4 - p3)``.
    """
    vec1, mag1 = normalize_or_zero(p2 - p1)
    vec2, mag2 = normalize_or_zero(p4 - p3)
    cross = jnp.cross(vec1, vec2)
    denom = dot(cross, cross)
    ok = jnp.abs(denom) > ROUNDOFF_ERROR
    sd = jnp.where(ok, denom, 1.0)
    t = det_rows(p3 - p1, vec1, cross) / sd
    pint2 = p3 + t * vec2
    s = det_rows(p3 - p1, vec2, cross) / sd
    pint1 = p1 + s * vec1
    s = jnp.where(ok, safe_div(s, mag1), 0.0)
    t = jnp.where(ok, safe_div(t, mag2), 0.0)
    pint1 = jnp.where(ok, pint1, p1)
    pint2 = jnp.where(ok, pint2, p3)
    return ok, pint1, s, pint2, t


def intersect_segment_plane(pt1, pt2, normal, d):
    """OpenSim ``IntersectLineSegPlane``: where segment ``pt1->pt2`` meets the plane
    ``normal . x + d = 0``.

    **Returns:** ``(ok, point)``; ``ok`` false if the segment is parallel to the plane
    (within LINE_EPSILON) or misses it (``point`` is then ``pt1``).
    """
    vec = pt2 - pt1
    dp = dot(vec, normal)
    ok = jnp.abs(dp) >= LINE_EPSILON
    t = (-d - normal[0] * pt1[0] - normal[1] * pt1[1] - normal[2] * pt1[2]) / jnp.where(ok, dp, 1.0)
    ok = ok & (t >= -LINE_EPSILON) & (t <= 1.0 + LINE_EPSILON)
    return ok, jnp.where(ok, pt1 + t * vec, pt1)


def rotate_about_z(v, angle):
    """Rotate ``v`` about the z axis by ``angle`` (right-handed)."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.stack([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]])
