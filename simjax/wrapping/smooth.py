"""Smoothed wrapping: OpenSim's wrapped length, blended to the straight length near
the boundaries where OpenSim switches between wrapping and not wrapping.

In a model, set a PathWrap's ``smoothing`` (the band ``eps`` below, m; or all of a
model's with ``smooth_paths``): the wrapping engine (``simjax.wrapping.paths``) then
blends that wrap's segment, with forces and speeds that are the blended length's
(generalized force ``-T dL/dq``), so simulations and gradients see one smooth length.

OpenSim's wrap/no-wrap decision is a Boolean formula of sign tests (the straight
segment pierces the object; an end point is inside; a tangent point lies beyond a
cylinder's end; with a quadrant, which side each point and the line's closest
approach lie on). Where it flips, the path length jumps (quadrants, cylinder ends),
and a gradient says nothing about the jump; at onset by tangency it bends sharply
(the extra length grows as the 1.5 power of the line's penetration: an unbounded
second derivative).

``smooth_segment_length`` evaluates each test's signed margin ``m`` (m, positive on
the wrapping side), replaces each test by the one-sided C1 ramp ``h(m) =
smoothstep(clip(m / eps, 0, 1))``, combines them with the same formula (``and`` =
product, ``or`` = ``1 - (1-a)(1-b)``) into a weight ``w`` in [0, 1] that is 0 wherever
OpenSim does not wrap, and returns ``L_straight + w (L_wrapped - L_straight)``.

Tolerance to OpenSim: identical wherever every margin exceeds ``eps`` (the weight is
exactly 1) or OpenSim does not wrap (the weight is irrelevant); within a band of
width ``eps`` on the wrapping side of a boundary the difference is at most
``L_wrapped - L_straight`` there (for onset at tangency, O(eps^1.5 / sqrt(r)); for a
quadrant or end-cap flip, the size of OpenSim's jump). The smoothed length is
continuous with a continuous gradient across these boundaries. Not smoothed: jumps
inside the wrapping region (OpenSim's quadrant candidate switches, the ellipsoid's
polyline segment count, the ellipsoid's choice of side with a quadrant, the
cylinder's discrete tangent adjustment with several wraps) and the jump to a straight
path when an end point enters the object (OpenSim's "inside radius"): path points are
often placed just off a wrap object's surface on the same body (in ``arm26``,
``BIClong``'s third point lies 0.2 mm off ``BIClonghh``), and a margin for that test
would blend such a wrap away for good.
"""

from __future__ import annotations

import jax.numpy as jnp

from . import _wrapmath as wm
from .geometry import _torus as _torus_impl
from .geometry import wrap_cylinder, wrap_ellipsoid, wrap_sphere, wrap_torus

__all__ = ["smooth_segment_length", "segment_weight", "smooth_paths", "ramp"]


def ramp(m, eps):
    """``smoothstep(clip(m / eps, 0, 1))``: 0 for ``m <= 0``, 1 for ``m >= eps``, C1."""
    t = jnp.clip(m / eps, 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def _or(a, b):
    return 1.0 - (1.0 - a) * (1.0 - b)


def _segment_distance(c, p1, p2):
    """Distance from point ``c`` to segment ``p1 p2`` (and the closest point)."""
    d = p2 - p1
    t = jnp.clip(wm.safe_div(wm.dot(c - p1, d), wm.dot(d, d)), 0.0, 1.0)
    q = p1 + t * d
    return wm.norm(c - q), q


def _quadrant_weight(p1, p2, near, crossing, axis, sign, eps):
    """Soft version of OpenSim's sphere/cylinder quadrant test:
    ``either(p1, p2 active) & (crossing | (opposite sides & near inactive)) | neither``."""
    s1 = sign * p1[axis]
    s2 = sign * p2[axis]
    a1, a2, i1, i2 = ramp(s1, eps), ramp(s2, eps), ramp(-s1, eps), ramp(-s2, eps)
    either = _or(a1, a2)
    neither = i1 * i2
    maybe = (a1 * i2 + i1 * a2) * ramp(-sign * near[axis], eps)
    return either * _or(crossing, maybe) + neither


def _sphere(p1, p2, radius, wrap_axis=0, wrap_sign=0, *, eps):
    dist, _ = _segment_distance(jnp.zeros_like(p1), p1, p2)
    crossing = ramp(radius - dist, eps)
    near = wm.closest_point_on_line(jnp.zeros_like(p1), p1, p2 - p1)[0]
    quad = jnp.where(wrap_sign != 0, _quadrant_weight(p1, p2, near, crossing, wrap_axis, wrap_sign, eps), 1.0)
    return crossing * quad


def _cylinder_weight(p1, p2, radius, length, wrap_axis, wrap_sign, res, eps):
    half = 0.5 * length
    z0 = jnp.zeros(3, p1.dtype)
    ok, near12, t12, near00, _ = wm.intersect_lines(p1, p2, z0.at[2].set(-half), z0.at[2].set(half))
    seg = wm.norm(p2 - p1)
    m_int = jnp.minimum(radius - wm.norm(near12 - near00), jnp.minimum(t12, 1.0 - t12) * seg)
    crossing = jnp.where(ok, ramp(m_int, eps), 0.0)
    cap = ramp(jnp.maximum(half - jnp.abs(res.r1[2]), half - jnp.abs(res.r2[2])), eps)
    quad = jnp.where(wrap_sign != 0, _quadrant_weight(p1, p2, near12, crossing, wrap_axis, wrap_sign, eps), crossing)
    return cap * quad


def _cylinder(p1, p2, radius, length, wrap_axis=0, wrap_sign=0, single_wrap=True, *, eps):
    # (the end-cap test needs the tangent points)
    res = wrap_cylinder(p1, p2, radius, length, wrap_axis, wrap_sign, single_wrap)
    return _cylinder_weight(p1, p2, radius, length, wrap_axis, wrap_sign, res, eps)


def _ellipsoid(p1, p2, dimensions, wrap_axis=0, wrap_sign=0, method=0, *, eps):
    a = jnp.asarray(dimensions, p1.dtype)
    scale = jnp.mean(a)  # scaled-coordinate margins to (roughly) metres
    ppm = wm.dot(wm.unit(p1), wm.unit(p2)) - 1.0
    apart = ramp(scale * (jnp.abs(ppm) - 0.0001), eps)
    d = (p2 - p1) / a
    f = p1 / a
    t = jnp.clip(wm.safe_div(-wm.dot(f, d), wm.dot(d, d)), 0.0, 1.0)
    qmin = wm.dot(f + t * d, f + t * d)
    crossing = ramp(0.5 * scale * (1.0 - qmin), eps)
    return apart * crossing


def _torus(p1, p2, inner_radius, outer_radius, wrap_axis=0, wrap_sign=0, single_wrap=True, *, eps):
    # (the tests are the inner cylinder's, in its frame, and the quadrant's on the closest points)
    _, (a1, a2, c1, c2, cyl) = _torus_impl(p1, p2, inner_radius, outer_radius, wrap_axis, wrap_sign, single_wrap)
    found = _or(ramp(wrap_sign * a1[wrap_axis], eps), ramp(wrap_sign * a2[wrap_axis], eps))
    found = jnp.where(wrap_sign != 0, found, 1.0)
    return found * _cylinder_weight(c1, c2, inner_radius, 10000.0, 0, 1, cyl, eps)


_WEIGHTS = {"sphere": _sphere, "cylinder": _cylinder, "ellipsoid": _ellipsoid, "torus": _torus}
#: the exact geometry function of each shape, by name
WRAP_FUNCTIONS = {"sphere": wrap_sphere, "cylinder": wrap_cylinder, "ellipsoid": wrap_ellipsoid, "torus": wrap_torus}


def segment_weight(kind: str, p1, p2, *params, eps=1e-4):
    """The blending weight of segment ``p1 p2`` over a wrap object, where OpenSim wraps it.

    **Arguments:** as ``smooth_segment_length``.

    **Returns:** the weight in [0, 1]: 1 where every margin of OpenSim's wrap test
    exceeds ``eps``, falling smoothly to 0 at the test's boundaries. It is meaningful
    only where OpenSim wraps the segment (elsewhere the length is straight anyway).
    """
    fn = _WEIGHTS.get(kind)
    if fn is None:
        raise ValueError(f"unknown wrap kind {kind!r}")
    return fn(p1, p2, *params, eps=eps)


def smooth_segment_length(kind: str, p1, p2, *params, eps=1e-4):
    """The smoothed length of segment ``p1 p2`` wrapped over a wrap object.

    **Arguments:**

    - ``kind``: ``"sphere"``, ``"cylinder"``, ``"ellipsoid"`` or ``"torus"``.
    - ``p1``, ``p2``: ``(3,)`` end points in the wrap frame (m).
    - ``params``: the remaining arguments of the matching ``wrap_<kind>`` function
      (dimensions, ``wrap_axis``, ``wrap_sign``, ...).
    - ``eps``: width of the blending band (m).

    **Returns:** ``(length, weight, result)``: the blended segment length
    ``|p1 p2| + weight (L_wrapped - |p1 p2|)``, the weight, and the exact
    ``WrapResult``. Differentiate ``length`` for moment arms in smoothed mode.
    """
    w = segment_weight(kind, p1, p2, *params, eps=eps)
    res = WRAP_FUNCTIONS[kind](p1, p2, *params)
    straight = wm.norm(p2 - p1)
    wrapped = wm.norm(p1 - res.r1) + res.length + wm.norm(res.r2 - p2)
    w = jnp.where(res.wraps, w, 0.0)
    return straight + w * (wrapped - straight), w, res


def smooth_paths(model, width: float = 1e-3):
    """``model`` with every PathWrap's ``smoothing`` set to ``width`` (m; 0 restores
    OpenSim's exact switch).

    **Returns:** the new Model.
    """
    from .objects import PathWrap

    for path in model.paths(PathWrap):
        model = model.set(path, smoothing=width)
    return model
