"""Wrapping geometry: one straight path segment over one wrap object, as OpenSim computes it.

Each ``wrap_<shape>`` function takes the two path points bracketing a segment,
already expressed in the wrap object's frame, the object's dimensions and quadrant,
and returns a ``WrapResult``: OpenSim's status code, whether the segment wraps, the
tangent points ``r1`` (nearer ``p1``) and ``r2`` (nearer ``p2``) in the wrap frame, and
the length of the path along the surface between them. The wrapped segment is
``p1 -> r1`` (straight), the surface path (``length``), ``r2 -> p2`` (straight).

The algorithms are OpenSim 4.6's (``WrapSphere``, ``WrapCylinder``, ``WrapEllipsoid``,
``WrapTorus::wrapLine``), including their rules for when a segment does not wrap,
their quadrant logic and their iterations with OpenSim's iteration counts and
tolerances, so lengths agree with OpenSim to rounding. They are written with
``where`` (every branch evaluated, then selected) so ``vmap`` evaluates a batch of
segments at once, and ``quadrant`` (``wrap_axis``, ``wrap_sign``), ``method`` and
``single_wrap`` may be traced arrays.

When a segment does not wrap, ``r1 == r2 ==`` the midpoint of ``p1 p2`` and
``length == 0``, so ``|p1 - r1| + length + |r2 - p2|`` is the straight length
without a branch.

Derivatives. Closed-form steps are differentiated directly; iterations whose result
is the root of an equation (closest points on an ellipse or ellipsoid, the
ellipsoid's tangent points, the torus's closest point) carry the implicit-function
derivative of the exact root (the iteration itself is not differentiated); the
cylinder's discrete tangent-point adjustment (paths with several wraps) passes on
the derivative of the unadjusted points; the ellipsoid's polyline is summed over its
segments in use, and differentiated at its full size. Segments that do not wrap are
computed on a substitute segment that does, so gradients are finite everywhere
(inside points, coincident points, lines through the center, tangency).

Moment arms. OpenSim's ``computeMomentArm`` is a virtual-work moment arm: unit
tension along the straight parts, applied at the path points and at the tangent
points fixed on the wrap object's body. Except for the sphere, OpenSim's tangent
points are heuristics (not exactly tangent), so it differs from ``-d(length)/dq``
of OpenSim's own length (by up to 1e-3 m for cylinders with quadrants, 1e-1 m for
ellipsoids in our rigs). To reproduce it, differentiate the length with ``r1``,
``r2`` and ``length`` held fixed in the wrap frame (``stop_gradient``), which is
also what applying the tension at the tangent points gives.

Where OpenSim is discontinuous: the status (wrap / no wrap) changes where the
straight line starts to cross a sphere, ellipsoid or unconstrained cylinder (length
and derivative continuous, but the extra length grows as the 1.5 power of the line's
penetration, so the second derivative is unbounded; with a quadrant the length
jumps); quadrant
decisions (``DSIGN`` tests) and a cylinder's finite length switch between wrapping
and not, jumping the length; inside the wrapping region, the ellipsoid's surface
path is a polyline of ``int(chord / 1 mm)`` segments (steps of ~1e-8 m) and the
multi-wrap cylinder adjustment is discrete. ``simjax.wrapping.smooth`` blends the
length across the status changes. Where OpenSim returns NaN (an ellipsoid whose
wrapping plane meets the ray-casting axis outside it), simjax returns a finite
length.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import _wrapmath as wm
from ._ellipsoid import wrap_ellipsoid_core
from ._wrapmath import INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP, WRAPPED  # (OpenSim's WrapAction codes)

__all__ = [
    "WrapResult",
    "NO_WRAP",
    "INSIDE_RADIUS",
    "WRAPPED",
    "MANDATORY_WRAP",
    "wrap_sphere",
    "wrap_cylinder",
    "wrap_ellipsoid",
    "wrap_torus",
    "no_wrap",
]


class WrapResult(NamedTuple):
    """The wrapping of one segment over one wrap object (all in the wrap frame).

    **Fields:**

    - ``status``: OpenSim's WrapAction (``NO_WRAP``, ``INSIDE_RADIUS``, ``WRAPPED``,
      ``MANDATORY_WRAP``), int32. ``MANDATORY_WRAP`` means the straight segment
      crosses the object: OpenSim takes the first such segment of a path;
      ``WRAPPED`` is a candidate that competes by the least length change.
    - ``wraps``: bool, whether the segment is replaced by the wrapped path
      (``status >= WRAPPED``).
    - ``r1``, ``r2``: ``(3,)`` tangent points (the midpoint of ``p1 p2`` when not
      wrapping).
    - ``length``: length along the surface from ``r1`` to ``r2`` (m; 0 when not
      wrapping). OpenSim's sphere returns a negative value for far-side wraps; so
      does this.
    """

    status: jax.Array
    wraps: jax.Array
    r1: jax.Array
    r2: jax.Array
    length: jax.Array


def no_wrap(p1, p2, status=NO_WRAP) -> WrapResult:
    """The result of a segment that does not wrap."""
    mid = 0.5 * (p1 + p2)
    zero = jnp.zeros((), jnp.result_type(p1, float))
    return WrapResult(jnp.asarray(status, jnp.int32), jnp.asarray(False), mid, mid, zero)


def _finish(status, p1, p2, r1, r2, length) -> WrapResult:
    wraps = status >= WRAPPED
    mid = 0.5 * (p1 + p2)
    return WrapResult(
        status.astype(jnp.int32),
        wraps,
        jnp.where(wraps, r1, mid),
        jnp.where(wraps, r2, mid),
        jnp.where(wraps, length, 0.0),
    )


def _quadrant(wrap_axis, wrap_sign):
    return jnp.asarray(wrap_axis, jnp.int32), jnp.asarray(wrap_sign, jnp.int32)


# -- sphere ---------------------------------------------------------------------------------


def wrap_sphere(p1, p2, radius, wrap_axis=0, wrap_sign=0) -> WrapResult:
    """Wrap segment ``p1 p2`` over a sphere of ``radius`` centered at the origin.

    OpenSim's ``WrapSphere::wrapLine``: no wrap if either point is inside, or if the
    straight segment does not cross the sphere (with or without a quadrant); the
    tangent points lie in the plane through ``p1``, ``p2`` and the center; with a
    quadrant, the candidates on the active side are chosen and far-side wraps
    return ``-(2 pi - angle) radius`` (OpenSim's sign).

    Where the line passes within 1e-5 (relative) of the center, OpenSim reuses the
    previous call's tangent points; simjax uses the plane containing the line and
    the coordinate axis least aligned with it.

    **Arguments:**

    - ``p1``, ``p2``: ``(3,)`` the segment's end points in the wrap frame (m).
    - ``radius``: the sphere's radius (m).
    - ``wrap_axis``, ``wrap_sign``: the quadrant (``parse_quadrant``); sign 0 = all.

    **Returns:** a ``WrapResult``.
    """
    axis, sign = _quadrant(wrap_axis, wrap_sign)
    r = jnp.asarray(radius, jnp.result_type(p1, float))
    n1, n2 = wm.norm(p1), wm.norm(p2)
    inside = (n1 < r) | (n2 < r)

    ri = p1 - p2
    mp = -p2
    a = wm.dot(ri, ri)
    b = -2.0 * wm.dot(mp, ri)
    c = wm.dot(mp, mp) - r * r
    disc = b * b - 4.0 * a * c
    sq = wm.safe_sqrt(disc)
    sa = jnp.where(a > 0, a, 1.0)
    l1 = (-b + sq) / (2.0 * sa)
    l2 = (-b - sq) / (2.0 * sa)
    crosses = (disc >= 0.0) & (0.0 < l1) & (l1 < 1.0) & (0.0 < l2) & (l2 < 1.0) & ~(l1 < l2)

    # quadrant logic (status)
    constrained = sign != 0
    s1 = wm.dsign(p1[axis]) == sign
    s2 = wm.dsign(p2[axis]) == sign
    mm, tt = wm.closest_point_on_line(jnp.zeros_like(p1), p1, wm.unit(p1 - p2))
    tt = -tt
    mandatory = (wm.dot(mm, mm) < r * r) & (tt > 0.0) & (tt < 1.0)
    maybe = (wm.dsign(p1[axis]) != wm.dsign(p2[axis])) & (wm.dsign(mm[axis]) != sign)
    either = s1 | s2
    q_status = jnp.where(either, jnp.where(mandatory, MANDATORY_WRAP, jnp.where(maybe, WRAPPED, NO_WRAP)), WRAPPED)
    status = jnp.where(constrained, q_status, WRAPPED)
    status = jnp.where(crosses, status, NO_WRAP)
    status = jnp.where(inside, INSIDE_RADIUS, status)

    def tangents(p1, p2):
        n1, n2 = wm.norm(p1), wm.norm(p2)
        p1p2 = wm.unit(p1 - p2)
        np2 = wm.unit(p2)
        hp2 = jnp.cross(p1p2, np2)
        degenerate = wm.norm(hp2) < 0.00001
        fallback_axis = jnp.eye(3, dtype=p1.dtype)[jnp.argmin(jnp.abs(p1p2))]
        n = wm.unit(jnp.where(degenerate, jnp.cross(p1p2, fallback_axis), hp2))

        def candidates(p, pn):
            y = wm.unit(-p)
            z = jnp.cross(n, y)
            ang = jnp.arcsin(jnp.where(pn > r, r / jnp.where(pn > r, pn, 1.0), 0.5))
            ca, sa_ = jnp.cos(ang), jnp.sin(ang)
            ra = p + (ca * y - sa_ * z) * pn * ca
            rb = p + (ca * y + sa_ * z) * pn * ca
            return ra, rb

        r1a, r1b = candidates(p1, n1)
        r2a, r2b = candidates(p2, n2)
        r1am, r1bm, r2am, r2bm = wm.unit(r1a), wm.unit(r1b), wm.unit(r2a), wm.unit(r2b)
        j1, j2, j3, j4 = wm.dot(r1am, r2am), wm.dot(r1am, r2bm), wm.dot(r1bm, r2am), wm.dot(r1bm, r2bm)
        pick_aa = (j1 > j2) & (j1 > j3) & (j1 > j4)
        pick_ab = ~pick_aa & (j2 > j3) & (j2 > j4)
        pick_ba = ~pick_aa & ~pick_ab & (j3 > j4)
        first_a = pick_aa | pick_ab
        second_a = pick_aa | pick_ba
        r1 = jnp.where(first_a, r1a, r1b)
        r2 = jnp.where(second_a, r2a, r2b)

        # quadrant logic
        s1 = wm.dsign(p1[axis]) == sign
        s2 = wm.dsign(p2[axis]) == sign
        not_both = ~(s1 & s2)
        wrapaxis = jnp.where(jnp.arange(3) == axis, sign.astype(p1.dtype), 0.0)
        sum_musc = wm.unit(-p1 - p2)
        c1a = wm.dot(r1am, sum_musc) > wm.dot(r1bm, sum_musc)
        c2a = wm.dot(r2am, sum_musc) > wm.dot(r2bm, sum_musc)
        q1 = jnp.where(c1a, r1a, r1b)
        q11 = jnp.where(c1a, r1b, r1a)
        q2 = jnp.where(c2a, r2a, r2b)
        q22 = jnp.where(c2a, r2b, r2a)
        flip = wm.dot(wm.unit((q1 - p1) + (q2 - p2)), wrapaxis) < 0.0
        q1, q2 = jnp.where(flip, q11, q1), jnp.where(flip, q22, q2)
        far_q = wm.dot(q1 + q2, (q1 - p1) + (q2 - p2)) < 0.0
        use_q = constrained & not_both
        r1 = jnp.where(use_q, q1, r1)
        r2 = jnp.where(use_q, q2, r2)
        far = use_q & far_q

        angle = wm.angle_between(r1, r2)
        angle = jnp.where(far, -(2.0 * jnp.pi - angle), angle)
        length = r * angle

        return r1, r2, length

    # segments that do not wrap are replaced by one that does, so that no branch
    # computes non-finite values (they would poison gradients through `where`)
    wraps = status >= WRAPPED
    d1 = jnp.stack([-2.0 * r, 0.5 * r, 0.0 * r])
    d2 = jnp.stack([2.0 * r, 0.5 * r, 0.1 * r])
    r1, r2, length = tangents(jnp.where(wraps, p1, d1), jnp.where(wraps, p2, d2))
    return _finish(status, p1, p2, r1, r2, length)


# -- cylinder -------------------------------------------------------------------------------

_CYL_MAX_ITERATIONS = 100
_TANGENCY_THRESHOLD = 0.1 * jnp.pi / 180.0


def _adjust_z(p, r, w):
    """``WrapCylinder::_adjust_tangent_point`` for the tangent point ``r``, seen from
    the path point ``p``, with the spiral point ``w`` (components: tuples of arrays).

    OpenSim slides ``r`` along the cylinder's axis by 1.5 times its distance to where
    the line ``p -> w`` passes the axis-parallel line through ``r`` (IntersectLines),
    unless ``p -> r`` and ``r -> w`` make angles with the axis within 0.1 degree. Only
    ``r``'s z changes, so this returns ``(adjusted?, new z)``. The crossing is written
    in closed form (equal to OpenSim's normalized formula to rounding); OpenSim keeps
    ``r`` where the lines are parallel.
    """
    px, py, pz = p
    rx, ry, rz = r
    wx, wy, wz = w
    dx, dy, dz = rx - px, ry - py, rz - pz
    ex, ey, ez = wx - rx, wy - ry, wz - rz
    n1, n2 = jnp.sqrt(dx * dx + dy * dy + dz * dz), jnp.sqrt(ex * ex + ey * ey + ez * ez)
    eps = wm.eps_of(n1)  # (NormalizeOrZero)
    alpha = jnp.arccos(jnp.where(n1 >= eps, dz / n1, 0.0))
    omega = jnp.arccos(jnp.where(n2 >= eps, ez / n2, 0.0))
    adjust = jnp.abs(alpha - omega) > _TANGENCY_THRESHOLD
    vx, vy, vz = wx - px, wy - py, wz - pz
    h = vx * vx + vy * vy
    # IntersectLines' parallel test |unit(v) x dn|^2 > ROUNDOFF_ERROR (and a zero axial part)
    crosses = (h > wm.ROUNDOFF_ERROR * (h + vz * vz)) & (jnp.abs(vz) >= wm.eps_of(vz))
    cross_z = pz + vz * (dx * vx + dy * vy) / jnp.where(crosses, h, 1.0)
    return adjust, jnp.where(adjust & crosses, rz + 1.5 * (cross_z - rz), rz)


def _spiral_angle(r1, r2, long_wrap):
    """The spiral's angle about the axis from ``r1`` to ``r2`` (``(..., 3)`` arrays)."""
    theta = jnp.arctan2(
        r1[..., 0] * r2[..., 1] - r1[..., 1] * r2[..., 0], r1[..., 0] * r2[..., 0] + r1[..., 1] * r2[..., 1]
    )
    return jnp.where(long_wrap, 2.0 * jnp.pi - theta, theta)


def spiral_length(r1, r2, radius, long_wrap):
    """Length ``sqrt((radius theta)^2 + dz^2)`` of the spiral from ``r1`` to ``r2``
    over a cylinder along z (``WrapCylinder::_make_spiral_path``); batched over the
    leading axes of ``(..., 3)`` points."""
    x = radius * _spiral_angle(r1, r2, long_wrap)
    axial = r2[..., 2] - r1[..., 2]
    return wm.safe_sqrt(x * x + axial * axial)


def adjust_tangent_points(p1, p2, r1, r2, radius, long_wrap, go):
    """OpenSim's tangent-point adjustment for paths with several wraps
    (``WrapCylinder::_make_spiral_path``), batched over the leading axes.

    OpenSim restarts the spiral (up to 100 times) while either tangent point is more
    than 0.1 degree from tangency, sliding it along the axis (``_adjust_z``). Only the
    points' z change, so the ``while_loop`` carries the two z's of each segment, and
    an iteration is a few fused kernels. The loop runs on constants; the adjusted
    points take the derivative of the unadjusted ones (they differ by less than
    OpenSim's tolerance, and the adjustment itself is discrete).

    **Arguments:** ``p1``, ``p2``, ``r1``, ``r2``: ``(..., 3)`` path and tangent points
    in the cylinder's frame; ``radius``: broadcastable to ``(...)``; ``long_wrap``,
    ``go``: ``(...)`` bools, the latter choosing the segments to adjust.

    **Returns:** the adjusted ``(r1, r2)``.
    """
    sg = jax.lax.stop_gradient
    c1, c2, s1, s2 = sg(p1), sg(p2), sg(r1), sg(r2)
    long_wrap = sg(long_wrap)
    theta = _spiral_angle(s1, s2, long_wrap)
    rtheta = sg(radius) * theta
    sense = jnp.where(long_wrap, -1.0, 1.0)
    # the second spiral point's angle is sense theta minus the first's
    cq, sq = jnp.cos(sense * theta), jnp.sin(sense * theta)
    x1, y1, x2, y2 = s1[..., 0], s1[..., 1], s2[..., 0], s2[..., 1]
    q1 = tuple(c1[..., i] for i in range(3))
    q2 = tuple(c2[..., i] for i in range(3))

    def step(carry):
        # it >= 0: iterations so far; -1 - it once done
        z1, z2, it = carry
        axial = z2 - z1
        nseg = jnp.maximum(jnp.floor(jnp.sqrt(rtheta * rtheta + axial * axial) / 0.002), 1.0)
        t = 1.0 / nseg
        ang = sense * t * theta
        ca, sa = jnp.cos(ang), jnp.sin(ang)
        adj1, z1n = _adjust_z(q1, (x1, y1, z1), (ca * x1 - sa * y1, sa * x1 + ca * y1, z1 + t * axial))
        cb, sb = cq * ca + sq * sa, sq * ca - cq * sa
        adj2, z2n = _adjust_z(q2, (x2, y2, z2), (cb * x1 - sb * y1, sb * x1 + cb * y1, z1n + (1.0 - t) * axial))
        more = (it >= 0) & (nseg >= 2.0) & (it < _CYL_MAX_ITERATIONS) & (adj1 | adj2)
        it = jnp.where(it < 0, it, jnp.where(more, it + 1, -1 - it))
        return jnp.where(more, z1n, z1), jnp.where(more, z2n, z2), it

    start = (s1[..., 2], s2[..., 2], jnp.where(go, 0, -1).astype(jnp.int32))
    z1, z2, _ = jax.lax.while_loop(lambda c: jnp.any(c[2] >= 0), step, start)
    r1f = r1 + sg(jnp.stack([x1, y1, z1], -1) - s1)
    r2f = r2 + sg(jnp.stack([x2, y2, z2], -1) - s2)
    return r1f, r2f


def wrap_cylinder(p1, p2, radius, length, wrap_axis=0, wrap_sign=0, single_wrap=True) -> WrapResult:
    """Wrap segment ``p1 p2`` over a cylinder along z, centered at the origin.

    OpenSim's ``WrapCylinder::wrapLine``: no wrap if either point is inside the
    (infinite) cylinder; unconstrained, a wrap only where the straight segment
    crosses the cylinder; with a quadrant, OpenSim's candidate choice (which may
    wrap the long way round); the tangent points are slid along the axis onto the
    plane through ``p1``, ``p2`` and the apex; no wrap if both lie beyond
    ``length / 2``; the surface path is a helix of length ``sqrt((r theta)^2 + dz^2)``.

    **Arguments:**

    - ``p1``, ``p2``: ``(3,)`` the segment's end points in the wrap frame (m).
    - ``radius``, ``length``: the cylinder's (m).
    - ``wrap_axis``, ``wrap_sign``: the quadrant (``parse_quadrant``); sign 0 = all.
    - ``single_wrap``: whether the path has a single PathWrap. OpenSim then skips its
      iterative tangent-point adjustment (``WrapResult::singleWrap``); with several
      wraps it adjusts the tangent points to within 0.1 degree of tangency
      (``adjust_tangent_points``). A Python ``True`` skips the loop at trace time.

    **Returns:** a ``WrapResult``.
    """
    status, r1, r2, long_wrap = cylinder_tangents(p1, p2, radius, length, wrap_axis, wrap_sign)
    if not (isinstance(single_wrap, bool) and single_wrap):
        r1, r2 = adjust_tangent_points(
            p1, p2, r1, r2, radius, long_wrap, ~jnp.asarray(single_wrap) & (status >= WRAPPED)
        )
    return _finish(status, p1, p2, r1, r2, spiral_length(r1, r2, radius, long_wrap))


def cylinder_tangents(p1, p2, radius, length, wrap_axis=0, wrap_sign=0):
    """``wrap_cylinder`` before the tangent-point adjustment and the spiral:
    ``(status, r1, r2, long_wrap)`` of one segment (``vmap`` for a batch).

    Segments that do not wrap are computed on a stand-in segment that does, so that
    no branch computes non-finite values (they would poison gradients through
    ``where``); their points are meaningless.
    """
    r = jnp.asarray(radius, jnp.result_type(p1, float))
    early = _cylinder(p1, p2, radius, length, wrap_axis, wrap_sign, early=True)
    ok = early >= WRAPPED
    d1 = jnp.stack([-2.0 * r, 0.5 * r, 0.0 * r])
    d2 = jnp.stack([2.0 * r, 0.5 * r, 0.1 * r])
    status, r1, r2, long_wrap = _cylinder(
        jnp.where(ok, p1, d1), jnp.where(ok, p2, d2), radius, length, wrap_axis, wrap_sign
    )
    return jnp.where(ok, status, early).astype(jnp.int32), r1, r2, long_wrap


def _cylinder(p1, p2, radius, length, wrap_axis, wrap_sign, early=False):
    """``wrap_cylinder``'s algorithm up to the spiral: ``(status, r1, r2, long_wrap)``,
    or with ``early`` only the status from the tests made before the tangent points
    are computed.

    OpenSim's vector formulas are written out where the cylinder's axis makes them
    simpler (points on the axis, vectors normal to it, segments along it); the
    arithmetic is OpenSim's, so the values agree to rounding.
    """
    axis, sign = _quadrant(wrap_axis, wrap_sign)
    dtype = jnp.result_type(p1, float)
    r = jnp.asarray(radius, dtype)
    half = 0.5 * jnp.asarray(length, dtype)
    r_sq = r * r
    eps = wm.eps_of(r)
    constrained = sign != 0
    x1, y1, z1 = p1[0], p1[1], p1[2]
    x2, y2, z2 = p2[0], p2[1], p2[2]

    inside = (x1**2 + y1**2 < r_sq) | (x2**2 + y2**2 < r_sq)

    # IntersectLines(p1, p2, (0, 0, -half), (0, 0, half)): the segment's line and the axis
    v1, mag1 = wm.normalize_or_zero(p2 - p1)
    vx, vy, vz = v1[0], v1[1], v1[2]
    denom = vy * vy + vx * vx
    ok = jnp.abs(denom) > wm.ROUNDOFF_ERROR
    sd = jnp.where(ok, denom, 1.0)
    az = -half - z1
    t_ax = ((-x1) * (vz * vx) + (-y1) * (vz * vy) + az * (-(vx * vx) - vy * vy)) / sd
    s_ln = ((-x1) * vx + (-y1) * vy) / sd
    near12 = jnp.where(ok, p1 + s_ln * v1, p1)
    t12 = jnp.where(ok, wm.safe_div(s_ln, mag1), 0.0)
    near00_z = jnp.where(ok, -half + t_ax, -half)
    d12z = near12[2] - near00_z
    intersects = (
        ok & (((near12[0] * near12[0] + near12[1] * near12[1]) + d12z * d12z) < r_sq) & (t12 > 0.0) & (t12 < 1.0)
    )

    # -- the quadrant's status
    s1 = wm.dsign(p1[axis]) == sign
    s2 = wm.dsign(p2[axis]) == sign
    either = s1 | s2
    maybe = (wm.dsign(p1[axis]) != wm.dsign(p2[axis])) & (wm.dsign(near12[axis]) != sign)
    q_status = jnp.where(either, jnp.where(intersects, MANDATORY_WRAP, jnp.where(maybe, WRAPPED, NO_WRAP)), WRAPPED)
    if early:
        status = jnp.where(constrained, q_status, jnp.where(intersects, MANDATORY_WRAP, NO_WRAP))
        return jnp.where(inside, INSIDE_RADIUS, status)

    # -- the tangent points from each end, in the plane normal to the axis (2-D: the
    # vectors from the end's axis point p11 = (0, 0, z1) or p22 = (0, 0, z2))
    def norm2(x, y):
        return wm.safe_sqrt(x * x + y * y)

    def unit2(x, y):  # (NormalizeOrZero)
        n = norm2(x, y)
        ok = n >= eps
        n = jnp.where(ok, n, 1.0)
        return jnp.where(ok, x / n, 0.0), jnp.where(ok, y / n, 0.0)

    def candidates(x, y):
        d = norm2(x, y)
        ux, uy = unit2(x, y)
        dist = r * (r / jnp.where(d > 0, d, 1.0))
        off = wm.safe_sqrt(r_sq - dist * dist)
        px, py = dist * ux, dist * uy
        # uu = dn x (ux, uy, 0) = (-uy, ux, 0)
        return (px - off * uy, py + off * ux), (px + off * uy, py - off * ux), d

    (a1x, a1y), (b1x, b1y), p11_dist = candidates(x1, y1)
    (a2x, a2y), (b2x, b2y), p22_dist = candidates(x2, y2)
    alpha = wm.acos_raw((a1x * b2x + a1y * b2y) / (norm2(a1x, a1y) * norm2(b2x, b2y)))
    beta = wm.acos_raw((b1x * a2x + b1y * a2y) / (norm2(b1x, b1y) * norm2(a2x, a2y)))
    a_gt_b = alpha > beta
    # (a tangent point's side of the quadrant: its x, its y, or its end's z)
    xyz = jnp.asarray([0, 1, 2]) == axis
    side = lambda x, y, z: wm.dsign(jnp.where(xyz[0], x, jnp.where(xyz[1], y, z))) == sign  # noqa: E731
    sa1, sb1 = side(a1x, a1y, z1), side(b1x, b1y, z1)
    sa2, sb2 = side(a2x, a2y, z2), side(b2x, b2y, z2)
    # candidate pair A = (r1a, r2b), B = (r1b, r2a)
    none_active = ~sa1 & ~sb1 & ~sa2 & ~sb2
    choose_a = jnp.where(
        sa1 & sb1,
        ~sa2,
        jnp.where(sa1 & ~sb1, True, jnp.where(~sa1 & sb1, False, jnp.where(sa2, False, jnp.where(sb2, True, a_gt_b)))),
    )
    far_c = jnp.where(none_active, True, jnp.where(choose_a, a_gt_b, ~a_gt_b))
    # -- unconstrained choice: the pair closest in angle
    (e1x, e1y), (f1x, f1y) = unit2(a1x, a1y), unit2(b1x, b1y)
    (e2x, e2y), (f2x, f2y) = unit2(a2x, a2y), unit2(b2x, b2y)
    d1, d2 = e1x * e2x + e1y * e2y, e1x * f2x + e1y * f2y
    d3, d4 = f1x * e2x + f1y * e2y, f1x * f2x + f1y * f2y
    pick_aa = (d1 > d2) & (d1 > d3) & (d1 > d4)
    pick_ab = ~pick_aa & (d2 > d3) & (d2 > d4)
    pick_ba = ~pick_aa & ~pick_ab & (d3 > d4)
    first_a = jnp.where(constrained, choose_a, pick_aa | pick_ab)
    second_a = jnp.where(constrained, ~choose_a, pick_aa | pick_ba)
    q1x, q1y = jnp.where(first_a, a1x, b1x), jnp.where(first_a, a1y, b1y)
    q2x, q2y = jnp.where(second_a, a2x, b2x), jnp.where(second_a, a2y, b2y)
    # (OpenSim's long-wrap test: the sum of the radial vectors against the sum of the
    # vectors from the ends; the z parts of both are zero)
    sum_musc = ((q1x - x1) + (q2x - x2), (q1y - y1) + (q2y - y2))
    long_wrap = constrained & ((q1x + q2x) * sum_musc[0] + (q1y + q2y) * sum_musc[1] < 0.0)
    far_side = constrained & far_c

    # -- the apex: where the wrap plane meets the cylinder, on the chosen side
    t = p11_dist / (p11_dist + p22_dist)
    mpt = p1 + t * (p2 - p1)
    axispt = mpt * jnp.asarray([0.0, 0.0, 1.0], dtype)
    l1 = wm.unit(p1 - axispt)
    l2 = wm.unit(p2 - axispt)
    pn = wm.unit(wm.unit(jnp.cross(l1, l2)))
    # vert1 = unit(dn x pn) = unit((-pn_y, pn_x, 0)); vert2 = -vert1
    wx, wy = unit2(-pn[1], pn[0])
    dist1 = (mpt[0] - r * wx) ** 2 + (mpt[1] - r * wy) ** 2
    dist2 = (mpt[0] + r * wx) ** 2 + (mpt[1] + r * wy) ** 2
    near1 = dist1 < dist2
    sgn = jnp.where(far_side != near1, 1.0, -1.0)
    apex = axispt + jnp.stack([sgn * r * wx, sgn * r * wy, 0.0 * r])

    # -- slide r1, r2 along the axis onto the plane through p1, p2 and the apex
    # (IntersectLineSegPlane from 10 below to 10 above the point; the result is kept
    # where its closest axis point, OpenSim's GetClosestPointOnLineToPoint with the
    # point p22 as the line's direction, lies on the far side of the other end)
    nrm = wm.unit(jnp.cross(wm.unit(p1 - apex), wm.unit(p2 - apex)))
    d = -x1 * nrm[0] - y1 * nrm[1] - z1 * nrm[2]

    def slide(x, y, z):
        zlo, dz = z - 10.0, (z + 10.0) - (z - 10.0)
        dp = nrm[2] * dz
        hit = jnp.abs(dp) >= wm.LINE_EPSILON
        tt = (-d - nrm[0] * x - nrm[1] * y - nrm[2] * zlo) / jnp.where(hit, dp, 1.0)
        hit = hit & (tt >= -wm.LINE_EPSILON) & (tt <= 1.0 + wm.LINE_EPSILON)
        return hit, jnp.where(hit, zlo + tt * dz, z)

    hit1, r1z = slide(q1x, q1y, z1)
    hit2, r2z = slide(q2x, q2y, z2)
    big = jnp.abs(z2) >= eps
    axis_dir = jnp.where(big, z2 / jnp.where(big, jnp.abs(z2), 1.0), 0.0)  # (the unit "line" p22)
    c1z = z1 + (r1z - z1) * axis_dir * axis_dir
    c2z = z1 + (r2z - z1) * axis_dir * axis_dir
    use1 = hit1 & ((c1z - z2) ** 2 < (z1 - z2) ** 2)
    use2 = hit2 & ((c2z - z1) ** 2 < (z2 - z1) ** 2)
    r1 = jnp.stack([q1x, q1y, jnp.where(use1, r1z, z1)])
    r2 = jnp.stack([q2x, q2y, jnp.where(use2, r2z, z2)])

    beyond = ((r1[2] < -half) | (r1[2] > half)) & ((r2[2] < -half) | (r2[2] > half))

    status = jnp.where(constrained, q_status, jnp.where(intersects, MANDATORY_WRAP, NO_WRAP))
    status = jnp.where((status >= WRAPPED) & beyond, NO_WRAP, status)
    status = jnp.where(inside, INSIDE_RADIUS, status)
    return status, r1, r2, long_wrap


# -- ellipsoid ------------------------------------------------------------------------------


def wrap_ellipsoid(p1, p2, dimensions, wrap_axis=0, wrap_sign=0, method=0, found=None, surface=True) -> WrapResult:
    """Wrap segment ``p1 p2`` over an ellipsoid with semi-axes ``dimensions``.

    OpenSim's ``WrapEllipsoid::wrapLine``: no wrap if either point is inside, if the
    points are nearly collinear with the center, or if the straight segment does
    not pierce the ellipsoid (with or without a quadrant); otherwise always a
    mandatory wrap. The wrapping plane passes through ``p1``, ``p2`` and a surface
    point ``c1`` chosen by ``method``; a quadrant mirrors ``c1`` onto the active
    side; tangent points come from OpenSim's damped Gauss-Newton iteration and the
    surface path is OpenSim's polyline (see ``simjax.wrapping._ellipsoid``).

    **Arguments:**

    - ``p1``, ``p2``: ``(3,)`` the segment's end points in the wrap frame (m).
    - ``dimensions``: ``(3,)`` semi-axes along x, y, z (m).
    - ``wrap_axis``, ``wrap_sign``: the quadrant (``parse_quadrant``); sign 0 = all.
    - ``method``: ``HYBRID`` (0), ``MIDPOINT`` (1) or ``AXIAL`` (2). A Python int
      other than ``HYBRID`` skips the 298-sample fan at trace time.
    - ``found``: ``(r1, r2)`` the tangent points of an earlier call with the same
      arguments, or None. Given, OpenSim's tangent-point iteration is not run again
      (the wrap's derivatives at a known solution cost less).
    - ``surface``: False skips the surface path (``length`` is 0), for the tangent
      points alone.

    **Returns:** a ``WrapResult``.
    """

    axis, sign = _quadrant(wrap_axis, wrap_sign)
    fan = not (isinstance(method, int) and method != 0)
    method = jnp.asarray(method, jnp.int32)
    status, r1, r2, length = wrap_ellipsoid_core(
        p1, p2, dimensions, axis, sign, method, fan=fan, found=found, surface=surface
    )
    return _finish(status, p1, p2, r1, r2, length)


# -- torus ----------------------------------------------------------------------------------

_TORUS_CYL_LENGTH = 10000.0


def _circle_residual(u, p1, p2, radius):
    """``WrapTorus::calcCircleResids``: d/du of the squared distance from the point
    ``p1 + u n`` of the line to the circle of ``radius`` in the z = 0 plane."""
    d = p2 - p1
    mag = jnp.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    n = d / mag
    c2 = 2.0 * (p1[0] * n[0] + p1[1] * n[1] + p1[2] * n[2])
    c3 = p1[0] * n[0] + p1[1] * n[1]
    c4 = n[0] * n[0] + n[1] * n[1]
    c5 = p1[0] * p1[0] + p1[1] * p1[1]
    return c2 + 2.0 * u - 2.0 * radius * (2.0 * c4 * u + 2.0 * c3) / jnp.sqrt(u * u * c4 + 2.0 * c3 * u + c5)


def _closest_on_line_to_circle(p1, p2, radius):
    """One pass of ``WrapTorus::findClosestPoint``: OpenSim's Levenberg-Marquardt
    search along the line from ``p1`` (value), with the derivative of the exact
    stationary point (implicit function theorem).

    **Returns:** ``(a, distance)``: the point of the line and its distance to the circle.
    """
    from ._minpack import lmdif_1d  # noqa: PLC0415

    sg = jax.lax.stop_gradient
    res = lambda u: _circle_residual(u, sg(p1), sg(p2), sg(radius))  # noqa: E731
    u_os = lmdif_1d(res, jnp.zeros((), jnp.result_type(p1, float)))

    def newton(u):
        f, df = jax.jvp(lambda v: _circle_residual(v, p1, p2, radius), (u,), (jnp.ones_like(u),))
        return u - f / jnp.where(df != 0.0, df, 1.0)

    u_exact = u_os
    for _ in range(4):  # polish the loosely converged root, for the derivative only
        u_exact = sg(newton(u_exact))
    step = newton(u_exact)
    u = sg(u_os) + (step - sg(step))
    d = p2 - p1
    n = d / jnp.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    a = p1 + u * n
    rxy = wm.safe_sqrt(a[0] * a[0] + a[1] * a[1])
    dist = wm.safe_sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2] + radius * radius - 2.0 * radius * rxy)
    return a, dist


def wrap_torus(p1, p2, inner_radius, outer_radius, wrap_axis=0, wrap_sign=0, single_wrap=True) -> WrapResult:
    """Wrap segment ``p1 p2`` over a torus about z (tube ``inner_radius`` around the
    circle ``outer_radius`` in the xy plane).

    OpenSim's ``WrapTorus::wrapLine``: find the point of the circle closest to the
    line (two Levenberg-Marquardt searches, from either end; with a quadrant, the one
    on the active side), then wrap over the cylinder of radius ``inner_radius`` tangent
    to the circle there, constrained to the side facing the torus's axis (``+x`` of
    that cylinder), with ``WrapCylinder``'s algorithm. OpenSim then reports WRAPPED
    whatever the cylinder found; here the status is the cylinder's (a non-wrapping
    cylinder means no wrap in OpenSim too).

    **Arguments:** ``p1``, ``p2`` in the wrap frame (m); the radii (m); the quadrant;
    ``single_wrap`` as for ``wrap_cylinder``.

    **Returns:** a ``WrapResult``.
    """
    return _torus(p1, p2, inner_radius, outer_radius, wrap_axis, wrap_sign, single_wrap)[0]


def _torus(p1, p2, inner_radius, outer_radius, wrap_axis, wrap_sign, single_wrap):
    """``wrap_torus`` and its intermediates (the two closest points on the line, the
    points in the cylinder frame, the cylinder's result), for ``smooth``."""
    axis, sign = _quadrant(wrap_axis, wrap_sign)
    dtype = jnp.result_type(p1, float)
    R = jnp.asarray(outer_radius, dtype)
    # degenerate segments would make the line search divide by zero
    same = wm.norm(p2 - p1) == 0.0
    q2 = jnp.where(same, p1 + jnp.asarray([1.0, 0.0, 0.0], dtype), p2)

    # the two passes (from p1 towards p2, and back) in one batch
    aa, dd = jax.vmap(_closest_on_line_to_circle, in_axes=(0, 0, None))(jnp.stack([p1, q2]), jnp.stack([q2, p1]), R)
    a1, a2, dist1, dist2 = aa[0], aa[1], dd[0], dd[1]
    ok1 = wm.dsign(a1[axis]) == sign
    ok2 = wm.dsign(a2[axis]) == sign
    constrained = sign != 0
    first = jnp.where(constrained & ~(ok1 & ok2), ok1, dist1 < dist2)
    found = ~constrained | ok1 | ok2
    a = jnp.where(first, a1, a2)
    mag = wm.safe_sqrt(a[0] * a[0] + a[1] * a[1])
    mag = jnp.where(mag > 0.0, mag, 1.0)
    c = jnp.stack([a[0] * R / mag, a[1] * R / mag, 0.0 * mag])

    # the cylinder's frame: x towards the torus axis, y = -z, z along the circle
    cx = wm.unit(-c)
    cy = jnp.asarray([0.0, 0.0, -1.0], dtype)
    cz = jnp.cross(cx, cy)
    Rc = jnp.stack([cx, cy, cz])
    to_cyl = lambda p: Rc @ (p - c)  # noqa: E731
    res = wrap_cylinder(to_cyl(p1), to_cyl(p2), inner_radius, _TORUS_CYL_LENGTH, 0, 1, single_wrap)
    r1 = Rc.T @ res.r1 + c
    r2 = Rc.T @ res.r2 + c
    status = jnp.where(found & ~same, res.status, NO_WRAP)
    return _finish(status, p1, p2, r1, r2, res.length), (a1, a2, to_cyl(p1), to_cyl(p2), res)
