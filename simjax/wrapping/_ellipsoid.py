"""OpenSim's ellipsoid wrapping (``WrapEllipsoid::wrapLine``), reproduced step by step.

The algorithm (Peter Loan's, after SIMM) works in coordinates scaled by
``factor = 3 / sum(dimensions)``: it finds where the straight segment pierces the
ellipsoid, chooses a point ``c1`` on the surface (the "Frans" technique along the
most parallel axis, the "fan" average of 298 closest-point directions, or a blend:
the PathWrap ``method``), builds the plane through ``p1``, ``p2`` and ``c1``, finds
the tangent points in that plane with a damped Gauss-Newton iteration, and measures
the surface path as a polyline of ``int(chord / 1 mm)`` segments (at most 499)
cast from a point on a coordinate axis. Every iteration keeps OpenSim's start,
update, stopping rule and iteration cap, so results agree with OpenSim to
rounding; derivatives of the iterative steps are those of their exact roots
(implicit function theorem), not of the iterations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _wrapmath as wm
from ._wrapmath import INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP

MU_BLEND_MIN = 0.7073
MU_BLEND_MAX = 0.9
NUM_FAN_SAMPLES = 300
SV_BOUNDARY_BLEND = 0.3
ELLIPSOID_TINY = 0.00000001
DESIRED_SEG_LENGTH = 0.001
MAX_SEGMENTS = 499

sg = jax.lax.stop_gradient


def _implicit(root, newton_map):
    """Value ``root`` (found without gradients) with the derivative of the exact root.

    ``newton_map(r)`` is one Newton step of the root's equation at ``r`` (depending on
    the differentiable parameters through closure); at a root its derivative with
    respect to the parameters is the implicit-function derivative.
    """
    root = sg(root)
    step = newton_map(root)
    return root + (step - sg(step))


# -- closest point on an ellipse / ellipsoid (Eberly, Graphics Gems IV) -------------------------


def _newton_loop(f_and_fp, t0):
    """OpenSim's 64-step Newton loop with the ``|f| < 1e-9`` stop; returns the last
    evaluated ``t`` (the one the caller uses).

    A step that leaves ``t`` unchanged ends the loop: OpenSim's would evaluate the same
    ``t`` until its stop or its 64th evaluation and return it. Once ``|f| < 1e-9``,
    and at the 64th evaluation, ``t`` does not step. So ``f`` is evaluated once per
    pass, in one kernel with the step.
    """

    def body(c):
        _, t, i = c
        f, fp = f_and_fp(t)
        step = jnp.where((jnp.abs(f) < 1e-09) | (i == 63), 0.0, f / jnp.where(fp != 0, fp, 1.0))
        return t, t - step, i + 1

    def more(c):
        t_prev, t, i = c
        return (i == 0) | ((i < 64) & (t != t_prev))

    return jax.lax.while_loop(more, body, (t0, t0, jnp.zeros((), jnp.int32)))[1]


def _ellipse_special_cases(a, b, u, v):
    """``closestPointToEllipse``'s closed forms for points within 2e-13 of an axis.

    **Returns:** ``(near_x, near_y, x, y)``; ``x, y`` valid where either is near.
    """
    a2, b2 = a * a, b * b
    near_x = jnp.abs(u) <= wm.ROUNDOFF_ERROR
    near_y = jnp.abs(v) <= wm.ROUNDOFF_ERROR
    both_x = jnp.where(a < b, jnp.where(u < 0.0, -a, a), u)
    both_y = jnp.where(a < b, v, jnp.where(v < 0.0, -b, b))
    cap_x = (a >= b) | (jnp.abs(v) >= b - a2 / b)
    yx = b2 * v / jnp.where(cap_x, 1.0, b2 - a2)
    nx_x = jnp.where(cap_x, u, a * wm.safe_sqrt(jnp.abs(1.0 - (yx / b) ** 2)))
    nx_y = jnp.where(cap_x, jnp.where(v >= 0.0, b, -b), yx)
    cap_y = (b >= a) | (jnp.abs(u) >= a - b2 / a)
    xy = a2 * u / jnp.where(cap_y, 1.0, a2 - b2)
    ny_x = jnp.where(cap_y, jnp.where(u >= 0.0, a, -a), xy)
    ny_y = jnp.where(cap_y, v, b * wm.safe_sqrt(jnp.abs(1.0 - (xy / a) ** 2)))
    x = jnp.where(near_x & near_y, both_x, jnp.where(near_x, nx_x, ny_x))
    y = jnp.where(near_x & near_y, both_y, jnp.where(near_x, nx_y, ny_y))
    return near_x, near_y, x, y


def closest_point_ellipsoid(a, uvw, special_axis=-1):
    """``WrapEllipsoid::findClosestPoint``: the point of the ellipsoid with semi-axes
    ``a`` closest to ``uvw`` (Eberly, Graphics Gems IV).

    Points within 2e-13 of a coordinate plane (or all points when ``special_axis`` is
    0, 1 or 2) are solved in that plane's elliptical cross-section
    (``closestPointToEllipse``, with its closed forms near the axes), as OpenSim does.
    Both cases share one Newton iteration (OpenSim's: start, 64 steps, stop at
    ``|f| < 1e-9``): the planar quartic is the sextic with the plane's factor set to 1.

    **Returns:** ``(3,)`` the closest point.
    """
    special_axis = jnp.asarray(special_axis, jnp.int32)
    near = jnp.abs(uvw) <= wm.ROUNDOFF_ERROR
    sums = wm.sum_last(a) - a
    auto = jnp.argmin(jnp.where(near, sums, jnp.inf))
    axis = jnp.where(special_axis >= 0, special_axis, jnp.where(jnp.any(near), auto, -1))
    planar = axis >= 0
    active = jnp.arange(3) != axis
    m = active.astype(uvw.dtype)

    # the planar problem's own closed forms (OpenSim's (a, b, u, v) order)
    k = jnp.maximum(axis, 0)
    i1 = jnp.asarray([1, 2, 0])[k]
    i2 = jnp.asarray([2, 0, 1])[k]
    near_x, near_y, sx, sy = _ellipse_special_cases(a[i1], a[i2], uvw[i1], uvw[i2])
    closed = planar & (near_x | near_y)
    closed_pt = uvw.at[i1].set(sx).at[i2].set(sy)

    a2 = a * a
    A = jnp.where(active, a2 * (uvw * uvw), 0.0)

    def f_and_fp(t):
        P0, P1, P2 = (jnp.where(active[i], t + a2[i], 1.0) for i in range(3))
        S0, S1, S2 = P0 * P0, P1 * P1, P2 * P2
        f = S0 * S1 * S2 - A[0] * S1 * S2 - A[1] * S0 * S2 - A[2] * S0 * S1
        fp = 2.0 * (
            P0 * P1 * P2 * (m[0] * P1 * P2 + m[1] * P0 * P2 + m[2] * P0 * P1)
            - A[0] * P1 * P2 * (m[1] * P2 + m[2] * P1)
            - A[1] * P0 * P2 * (m[0] * P2 + m[2] * P0)
            - A[2] * P0 * P1 * (m[0] * P1 + m[1] * P0)
        )
        return f, fp

    q = jnp.where(active, uvw / a, 0.0)
    inside = wm.sum_last(q * q) < 1.0
    t0 = jnp.where(inside, 0.0, jnp.max(jnp.where(active, a, 0.0)) * jnp.sqrt(wm.sum_last(m * uvw * uvw)))
    t = _newton_loop(lambda t: sg(f_and_fp(t)), sg(t0))
    t = _implicit(t, lambda t: t - f_and_fp(t)[0] / f_and_fp(t)[1])
    newton_pt = jnp.where(active, a2 * uvw / (t + a2), uvw)
    return jnp.where(closed, closed_pt, newton_pt)


# -- tangent point in the wrapping plane ---------------------------------------------------------


def _residual(r1, d1, p1, a, vs, vs4):
    # OpenSim's residuals and its summation order
    nr1 = 2.0 * r1 / (a * a)
    ee0 = wm.dot(vs, r1) + vs4
    q = (r1 / a) ** 2
    ee1 = ((-1.0 + q[0]) + q[1]) + q[2]
    ee2 = wm.dot(nr1, r1) + d1
    ee3 = wm.dot(nr1, p1) + d1
    ee = jnp.stack([ee0, ee1, ee2, ee3])
    sq = ee * ee
    return ee, ((sq[0] + sq[1]) + sq[2]) + sq[3]


def _tangent_point_iteration(p1e, r1, p1, a, vs, vs4):
    """``WrapEllipsoid::calcTangentPoint``'s damped Gauss-Newton iteration, verbatim.

    OpenSim nests three loops (an outer Gauss-Newton loop; raising the damping until
    the sum of squares stops growing; extrapolating the step while it shrinks); they
    are flattened here into one loop over phases (0: outer head, 1: damping, 2:
    extrapolation) in which every pass evaluates the residual once: the outer head and
    the switch from damping to extrapolation, which evaluate nothing, are taken in the
    pass of the next evaluation. The loop carries three packed arrays (each carried
    array costs a copy per pass).
    """
    dtype = r1.dtype
    a2 = a * a
    nr1 = 2.0 * r1 / a2
    d1 = -wm.dot(nr1, r1)
    ee, ssq = _residual(r1, d1, p1, a, vs, vs4)
    p1m = wm.unit(p1)
    eye = jnp.eye(4, dtype=dtype)
    zero1, one1 = jnp.zeros(1, dtype), jnp.ones(1, dtype)
    # dedth[i][j]: variable i, equation j; the columns that do not depend on r1
    col0 = jnp.concatenate([vs, zero1])
    col3 = jnp.concatenate([2.0 * p1 / a2, one1])

    def body(c):
        # xef = (x, ee, f): x = (r1, d1), the residuals ee, f = (ssq, ssqo, alpha, dd,
        # fakt); n = (nit, nit2, phase, done); dg = (dedth2, diag, v, vt): the
        # Gauss-Newton system dedth2 with its diagonal, right-hand side and step
        xef, n, dg = c
        x, ee, f = xef[0:4], xef[4:8], xef[8:13]
        dedth2, g = dg[:16].reshape(4, 4), dg[16:].reshape(3, 4)
        r1, d1 = x[:3], x[3]
        ssq, ssqo, alpha, dd, fakt = f[0], f[1], f[2], f[3], f[4]
        nit, nit2, phase = n[0], n[1], n[2]
        diag, v, vt = g[0], g[1], g[2]
        # the outer loop's head: the Gauss-Newton system at r1, then straight on to damping
        go = (ssq > ELLIPSOID_TINY) & (nit < 50)
        start = (phase == 0) & go
        done = (phase == 0) & ~go
        dedth = jnp.stack(
            [col0, jnp.concatenate([2.0 * r1 / a2, zero1]), jnp.concatenate([2.0 * (2.0 * r1) / a2, one1]), col3],
            axis=1,
        )
        pcos = wm.dot(wm.unit(p1 - r1), p1m)
        dd = jnp.where(start, jnp.where(pcos > 0.1, 1.0 - pcos**100, 1.0), dd)
        v = jnp.where(start, -wm.sum_last(dedth * ee), v)
        square = wm.sum_last(dedth[:, None, :] * dedth[None, :, :])
        dedth2 = jnp.where(start, square, dedth2)
        diag = jnp.where(start, jnp.diagonal(square), diag)
        nit = nit + start.astype(jnp.int32)
        nit2 = jnp.where(start, 0, nit2)
        is1 = (phase == 1) | start
        # damping ends once the sum of squares drops: straight on to extrapolation
        in1 = (ssq >= ssqo) & (nit2 < 1000)
        leave1 = is1 & ~in1
        alpha = jnp.where(leave1, alpha / 8.0, alpha)
        fakt = jnp.where(leave1, 0.5, fakt)
        nit2 = jnp.where(leave1, 0, nit2)
        is2 = (phase == 2) | leave1
        # one residual evaluation: a damped step, a doubled extrapolation, or one step back
        step1 = is1 & in1
        m = dedth2 * (1.0 - eye) + eye * (diag * (1.0 + alpha))
        vt = jnp.where(step1, wm.sum_last(dd * _inv4(m) * v[None, :] / 16.0), vt)
        in2 = (ssq <= ssqo) & (nit2 < 1000)
        step2 = is2 & in2
        final = is2 & ~in2
        fakt2 = fakt * 2.0
        delta = jnp.where(step1, vt, jnp.where(step2, vt * fakt2, jnp.where(final, -(vt * fakt), 0.0)))
        evaluated = step1 | step2 | final
        ee_n, ssq_n = _residual(r1 + delta[:3], d1 + delta[3], p1, a, vs, vs4)
        f = jnp.stack(
            [
                jnp.where(evaluated, ssq_n, ssq),
                jnp.where(step1 | step2, ssq, jnp.where(final, ssq_n, ssqo)),
                jnp.where(step1, alpha * 4.0, alpha),
                dd,
                jnp.where(step2, fakt2, fakt),
            ]
        )
        n = jnp.stack(
            [
                nit,
                nit2 + (step1 | step2).astype(jnp.int32),
                jnp.where(step1, 1, jnp.where(is2, jnp.where(final, 0, 2), phase)),
                done.astype(jnp.int32),
            ]
        )
        return (
            jnp.concatenate([jnp.where(evaluated, x + delta, x), jnp.where(evaluated, ee_n, ee), f]),
            n,
            jnp.concatenate([dedth2.reshape(16), diag, v, vt]),
        )

    init = (
        jnp.concatenate(
            [
                r1,
                d1[None],
                ee,
                jnp.stack([ssq, ssq, jnp.asarray(0.01, dtype), jnp.ones((), dtype), jnp.asarray(0.5, dtype)]),
            ]
        ),
        jnp.zeros(4, jnp.int32),
        jnp.zeros(28, dtype),
    )
    r1 = jax.lax.while_loop(lambda c: c[1][3] == 0, body, init)[0][:3]
    return jnp.where(jnp.abs(p1e) < 0.0001, p1, r1)


def _inv4(m):
    """Inverse of a 4x4 matrix by cofactors (cheaper to compile than a factorization)."""
    s0 = m[0, 0] * m[1, 1] - m[1, 0] * m[0, 1]
    s1 = m[0, 0] * m[1, 2] - m[1, 0] * m[0, 2]
    s2 = m[0, 0] * m[1, 3] - m[1, 0] * m[0, 3]
    s3 = m[0, 1] * m[1, 2] - m[1, 1] * m[0, 2]
    s4 = m[0, 1] * m[1, 3] - m[1, 1] * m[0, 3]
    s5 = m[0, 2] * m[1, 3] - m[1, 2] * m[0, 3]
    c5 = m[2, 2] * m[3, 3] - m[3, 2] * m[2, 3]
    c4 = m[2, 1] * m[3, 3] - m[3, 1] * m[2, 3]
    c3 = m[2, 1] * m[3, 2] - m[3, 1] * m[2, 2]
    c2 = m[2, 0] * m[3, 3] - m[3, 0] * m[2, 3]
    c1 = m[2, 0] * m[3, 2] - m[3, 0] * m[2, 2]
    c0 = m[2, 0] * m[3, 1] - m[3, 0] * m[2, 1]
    det = s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0
    adj = jnp.stack(
        [
            jnp.stack(
                [
                    m[1, 1] * c5 - m[1, 2] * c4 + m[1, 3] * c3,
                    -m[0, 1] * c5 + m[0, 2] * c4 - m[0, 3] * c3,
                    m[3, 1] * s5 - m[3, 2] * s4 + m[3, 3] * s3,
                    -m[2, 1] * s5 + m[2, 2] * s4 - m[2, 3] * s3,
                ]
            ),
            jnp.stack(
                [
                    -m[1, 0] * c5 + m[1, 2] * c2 - m[1, 3] * c1,
                    m[0, 0] * c5 - m[0, 2] * c2 + m[0, 3] * c1,
                    -m[3, 0] * s5 + m[3, 2] * s2 - m[3, 3] * s1,
                    m[2, 0] * s5 - m[2, 2] * s2 + m[2, 3] * s1,
                ]
            ),
            jnp.stack(
                [
                    m[1, 0] * c4 - m[1, 1] * c2 + m[1, 3] * c0,
                    -m[0, 0] * c4 + m[0, 1] * c2 - m[0, 3] * c0,
                    m[3, 0] * s4 - m[3, 1] * s2 + m[3, 3] * s0,
                    -m[2, 0] * s4 + m[2, 1] * s2 - m[2, 3] * s0,
                ]
            ),
            jnp.stack(
                [
                    -m[1, 0] * c3 + m[1, 1] * c1 - m[1, 2] * c0,
                    m[0, 0] * c3 - m[0, 1] * c1 + m[0, 2] * c0,
                    -m[3, 0] * s3 + m[3, 1] * s1 - m[3, 2] * s0,
                    m[2, 0] * s3 - m[2, 1] * s1 + m[2, 2] * s0,
                ]
            ),
        ]
    )
    return adj / det


def _tangent_newton(r, p1, a2, vs, vs4):
    """One Newton step on the exact tangent-point equations: ``r`` in the plane
    ``vs . r + vs4 = 0``, on the ellipsoid, and ``p1 -> r`` tangent to it."""
    F = jnp.stack([wm.dot(vs, r) + vs4, wm.dot(r / a2, r) - 1.0, wm.dot(r / a2, p1 - r)])
    j0, j1, j2 = vs, 2.0 * r / a2, (p1 - 2.0 * r) / a2
    c12, c20, c01 = jnp.cross(j1, j2), jnp.cross(j2, j0), jnp.cross(j0, j1)
    det = wm.dot(j0, c12)
    ok = jnp.abs(det) > 1e-300
    return r - jnp.where(ok, (F[0] * c12 + F[1] * c20 + F[2] * c01) / jnp.where(ok, det, 1.0), 0.0)


def tangent_point(p1e, r1_start, p1, a, vs, vs4, found=None):
    """The tangent point from ``p1`` to the ellipse (plane ``vs . x + vs4 = 0``) x
    (ellipsoid ``a``), found by OpenSim's iteration from ``r1_start``, or ``found``
    where given (the iteration's result at the same arguments, from an earlier call).

    The value is OpenSim's (converged to its loose ``1e-8`` sum of squares); the
    derivative is that of the exact tangent point near it.
    """
    a2 = a * a
    if found is None:
        r_os = _tangent_point_iteration(sg(p1e), sg(r1_start), sg(p1), sg(a), sg(vs), sg(vs4))
    else:
        r_os = sg(found)

    newton = _tangent_newton
    r_exact = r_os
    for _ in range(3):  # polish the loose root for the derivative (values unaffected)
        r_exact = sg(newton(r_exact, p1, a2, vs, vs4))
    step = newton(r_exact, p1, a2, vs, vs4)
    on_surface = jnp.abs(p1e) < 0.0001
    return jnp.where(on_surface, p1, r_os + (step - sg(step)))


# -- the surface path ----------------------------------------------------------------------------


def _surface_frame(r1, r2, a, vs, vs4, factor):
    """``CalcDistanceOnEllipsoid``'s set-up: the chord (unscaled), the number of
    segments, and the ray-casting origin ``a0`` on a coordinate axis with the unit
    vectors ``ar1`` (towards ``r1``) and ``vsy`` spanning the wrapping plane, and the
    angle ``phi0`` between the rays to ``r1`` and ``r2``."""
    dr = r1 - r2
    chord = wm.norm(dr) / factor
    nseg = jnp.clip(jnp.floor(chord / DESIRED_SEG_LENGTH), 1.0, float(MAX_SEGMENTS))
    imax = jnp.argmax(jnp.abs(vs))
    u = jnp.eye(3, dtype=r1.dtype)[imax]
    mu = wm.safe_div(-vs4, wm.dot(vs, u))
    a0 = mu * u
    ar1 = wm.unit(r1 - a0)
    ar2 = wm.unit(r2 - a0)
    phi0 = wm.angle_between(ar1, ar2)
    vsz = wm.unit(jnp.cross(ar1, ar2))
    vsy = jnp.cross(vsz, ar1)
    return chord, nseg, a0, ar1, vsy, phi0


def _surface_points(k, dphi, a, a0, ar1, vsy):
    """The polyline's points ``s_k`` (``k (n,)``): where the ray from ``a0`` at angle
    ``k dphi`` from ``ar1`` leaves the ellipsoid."""
    phi = k * dphi
    r = jnp.cos(phi)[:, None] * ar1 + jnp.sin(phi)[:, None] * vsy
    f1 = r / a
    f2 = a0 / a
    aa = wm.dot(f1, f1)
    bb = 2.0 * wm.dot(f1, f2)
    cc = wm.dot(f2, f2) - 1.0
    mu3 = (-bb + wm.safe_sqrt(bb * bb - 4.0 * aa * cc)) / (2.0 * aa)
    return a0 + mu3[:, None] * r


def distance_on_ellipsoid(r1, r2, a, vs, vs4, far_side, factor):
    """``WrapEllipsoid::CalcDistanceOnEllipsoid`` (scaled coordinates), at its full
    size of ``MAX_SEGMENTS`` (differentiable; ``surface_length`` gives the value).

    **Returns:** the polyline's length (scaled).
    """
    chord, nseg, a0, ar1, vsy, phi0 = _surface_frame(r1, r2, a, vs, vs4, factor)
    dphi = jnp.where(far_side, -(2.0 * jnp.pi - phi0), phi0) / nseg
    k = jnp.arange(1, MAX_SEGMENTS, dtype=r1.dtype)  # interior points s_{k-1}, k = 1..498
    s = _surface_points(k, dphi, a, a0, ar1, vsy)
    interior = (k <= nseg - 1.0)[:, None]
    pts = jnp.concatenate([r1[None], jnp.where(interior, s, r2), r2[None]], 0)
    length = jnp.sum(wm.norm(pts[1:] - pts[:-1]))
    return jnp.where(chord < DESIRED_SEG_LENGTH, wm.norm(r1 - r2), length)


_CHUNK = 64  # polyline segments per pass of surface_length's loop


@jax.custom_jvp
def surface_length(r1, r2, a, vs, vs4, far_side, factor):
    """The length of ``CalcDistanceOnEllipsoid``'s polyline (scaled coordinates), on the
    side ``far_side``: its ``int(chord / 1 mm)`` segments, ``_CHUNK`` at a time (a
    ``while_loop``), rather than all ``MAX_SEGMENTS``. Its derivative is that of
    ``distance_on_ellipsoid``, evaluated only when differentiated."""
    chord, nseg, a0, ar1, vsy, phi0 = _surface_frame(r1, r2, a, vs, vs4, factor)
    dphi = jnp.where(far_side, -(2.0 * jnp.pi - phi0), phi0) / nseg
    j = jnp.arange(_CHUNK + 1, dtype=r1.dtype)

    def chunk(carry):
        k0, total = carry
        k = k0 + j  # points s_k .. s_{k + _CHUNK}: s_0 = r1, s_nseg = r2 and beyond
        s = _surface_points(k, dphi, a, a0, ar1, vsy)
        s = jnp.where((k == 0.0)[:, None], r1, jnp.where((k >= nseg)[:, None], r2, s))
        return k0 + _CHUNK, total + jnp.sum(wm.norm(s[1:] - s[:-1]))

    zero = jnp.zeros((), r1.dtype)
    _, length = jax.lax.while_loop(lambda c: c[0] < nseg, chunk, (zero, zero))
    return jnp.where(chord < DESIRED_SEG_LENGTH, wm.norm(r1 - r2), length)


@surface_length.defjvp
def _surface_length_jvp(primals, tangents):
    r1, r2, a, vs, vs4, far_side, factor = primals

    def dense(r1, r2, a, vs, vs4, factor):
        return distance_on_ellipsoid(r1, r2, a, vs, vs4, far_side, factor)

    _, t = jax.jvp(dense, (r1, r2, a, vs, vs4, factor), tuple(tangents[:5]) + (tangents[6],))
    return surface_length(*primals), t


def _wrong_way(p1, p2, r1, r2, a, vs, vs4, factor):
    """OpenSim's test after the near-side polyline: more than two points, and the
    first (last) interior point lies on the side of ``r1`` (``r2``) facing ``p1``
    (``p2``), so the path runs the wrong way round."""
    chord, nseg, a0, ar1, vsy, phi0 = _surface_frame(r1, r2, a, vs, vs4, factor)
    w = _surface_points(jnp.stack([1.0, nseg - 1.0]), phi0 / nseg, a, a0, ar1, vsy)
    several = (chord >= DESIRED_SEG_LENGTH) & (nseg >= 2.0)
    return several & (
        (wm.dot(wm.unit(p1 - r1), wm.unit(w[0] - r1)) > 0.0) | (wm.dot(wm.unit(p2 - r2), wm.unit(w[1] - r2)) > 0.0)
    )


# -- the wrap ------------------------------------------------------------------------------------


def _pierce(p1, p2, a):
    """OpenSim's early tests: points inside, nearly collinear with the center, the
    line missing the ellipsoid; and where the segment pierces it (scaled)."""
    p1e = -1.0 + wm.sum_last((p1 / a) ** 2)
    p2e = -1.0 + wm.sum_last((p2 / a) ** 2)
    inside = (p1e < -0.0001) | (p2e < -0.0001)
    p1p2 = p1 - p2
    ppm = wm.dot(wm.unit(p1), wm.unit(p2)) - 1.0
    collinear = jnp.abs(ppm) < 0.0001
    f1 = p1p2 / a
    f2 = p2 / a
    aa = wm.dot(f1, f1)
    bb = 2.0 * wm.dot(f1, f2)
    cc = wm.dot(f2, f2) - 1.0
    disc = bb * bb - 4.0 * aa * cc
    sq = wm.safe_sqrt(disc)
    saa = jnp.where(aa > 0, aa, 1.0)
    l1 = (-bb + sq) / (2.0 * saa)
    l2 = (-bb - sq) / (2.0 * saa)
    crosses = (disc >= 0.0) & (0.0 < l1) & (l1 < 1.0) & (0.0 < l2) & (l2 < 1.0)
    return p1e, p2e, inside, collinear, crosses, p2 + l1 * p1p2, p2 + l2 * p1p2


def wrap_ellipsoid_status(P1, P2, dimensions):
    """The status ``wrap_ellipsoid_core`` returns, without the wrap (cheap).

    An ellipsoid either does not wrap a segment or wraps it mandatorily, so a path
    takes the first segment with a mandatory wrap and only that one needs solving.
    """
    dims = jnp.asarray(dimensions, P1.dtype)
    factor = 3.0 / wm.sum_last(dims)
    _, _, inside, collinear, crosses, _, _ = _pierce(P1 * factor, P2 * factor, dims * factor)
    return _status(inside, collinear, crosses)


def _status(inside, collinear, crosses):
    """OpenSim's status from the early tests: inside, else no wrap, else mandatory."""
    return jnp.where(inside, INSIDE_RADIUS, jnp.where(collinear | ~crosses, NO_WRAP, MANDATORY_WRAP)).astype(jnp.int32)


def wrap_ellipsoid_core(P1, P2, dimensions, axis, sign, method, fan: bool = True, found=None, surface: bool = True):
    """``WrapEllipsoid::wrapLine`` (see ``geometry.wrap_ellipsoid``).

    ``found``: ``(r1, r2)`` (unscaled) the tangent points of an earlier call at the
    same arguments, or None: the tangent-point iteration is skipped where the
    segment wraps. ``surface``: False skips the surface path (the length is 0).

    **Returns:** ``(status, r1, r2, length)`` in unscaled wrap-frame coordinates.
    """
    dtype = P1.dtype
    dims = jnp.asarray(dimensions, dtype)
    factor = 3.0 / wm.sum_last(dims)
    p1, p2, a = P1 * factor, P2 * factor, dims * factor
    hybrid, axial, midpoint = method == 0, method == 2, method == 1

    p1e, p2e, inside, collinear, crosses, x1, x2 = _pierce(p1, p2, a)
    wraps = ~inside & ~collinear & crosses
    # segments that do not wrap are replaced by one that does, so that no branch
    # computes non-finite values (they would poison gradients through `where`)
    d1 = jnp.stack([-2.0 * a[0], 0.5 * a[1], 0.25 * a[2]])
    d2 = jnp.stack([2.0 * a[0], 0.5 * a[1], -0.25 * a[2]])
    p1 = jnp.where(wraps, p1, d1)
    p2 = jnp.where(wraps, p2, d2)
    p1e, p2e, _, _, _, x1, x2 = _pierce(p1, p2, a)
    p1p2 = p1 - p2
    r1r2 = x2 - x1

    # (1) Frans: the point of the segment on the plane of the most parallel axis
    mu = jnp.abs(wm.unit(p1p2))
    tpar = wm.safe_div(-x1, r1r2)
    t_sv = x1[None, :] + tpar[:, None] * r1r2[None, :]
    # one batch of closest points: Frans (3, planar), midpoint (1), fan (298)
    sv_mid = x1 + 0.5 * r1r2
    tt = jnp.arange(1, NUM_FAN_SAMPLES - 1, dtype=dtype) / NUM_FAN_SAMPLES
    fan_pts = x1[None, :] + tt[:, None] * r1r2[None, :]
    queries = [t_sv, (x1 + 0.5 * (x2 - x1))[None]] + ([fan_pts] if fan else [])
    specials = jnp.concatenate([jnp.arange(3), -jnp.ones(len(tt) + 1 if fan else 1, jnp.int32)])
    cps = jax.vmap(closest_point_ellipsoid, in_axes=(None, 0, 0))(a, jnp.concatenate(queries), specials)
    t_c1, c1_midpoint = cps[:3], cps[3]
    best = jnp.argmax(mu)
    mu_b = mu[best]
    t_b = tpar[best]
    s = jnp.where(
        (t_b < 0.0) | (t_b > 1.0),
        0.0,
        jnp.where(
            t_b < SV_BOUNDARY_BLEND,
            t_b / SV_BOUNDARY_BLEND,
            jnp.where(t_b > 1.0 - SV_BOUNDARY_BLEND, (1.0 - t_b) / SV_BOUNDARY_BLEND, 1.0),
        ),
    )
    fade = hybrid & (mu_b > MU_BLEND_MIN) & (s < 1.0)
    mu_b = jnp.where(fade, MU_BLEND_MIN + s * (mu_b - MU_BLEND_MIN), mu_b)
    c1 = t_c1[best]

    # (2) fan: average direction from the segment's points to their closest surface
    # points; then the blend with Frans, the method, and the quadrant's mirror. Three
    # dependent closest-point solves (fan c1, blended c1, pulled mirror) share one
    # traced solver through a scan.
    c1_frans = c1
    c1_fan_pre = sv_mid + wm.unit(jnp.sum(jax.vmap(wm.unit)(cps[4:] - fan_pts), axis=0)) if fan else sv_mid
    use_fan = hybrid & (mu_b < MU_BLEND_MAX) & fan
    only_fan = mu_b <= MU_BLEND_MIN
    blend = (mu_b - MU_BLEND_MIN) / (MU_BLEND_MAX - MU_BLEND_MIN)
    constrained = sign != 0

    def choose(c1_fan, c1_mix):
        c1 = jnp.where(use_fan, jnp.where(only_fan, c1_fan, c1_mix), c1_frans)
        c1 = jnp.where(midpoint, c1_midpoint, c1)
        fan_weight = jnp.where(use_fan, jnp.where(only_fan, 1.0, 1.0 - blend), -jnp.inf)
        # quadrant: mirror c1 onto the active side, pulled towards the plane of
        # symmetry by the fan weight (OpenSim's test for an unset weight never fires)
        flip = constrained & (wm.dsign(c1[axis]) != sign)
        c1f = c1.at[axis].set(-c1[axis])
        fw = jnp.minimum(fan_weight, 1.0)
        fw = jnp.where(fw > 0.0, fw, 0.0)
        bis = 0.5 * (c1[axis] + c1f[axis])
        pull = c1f.at[axis].set(c1f[axis] + fw * (bis - c1f[axis]))
        return c1, flip, c1f, fw, pull

    def solve(carry, k):
        c1_fan, c1_mix = carry
        pull = choose(c1_fan, c1_mix)[4]
        q = jnp.where(k == 0, c1_fan_pre, jnp.where(k == 1, blend * c1_frans + (1.0 - blend) * c1_fan, pull))
        res = closest_point_ellipsoid(a, q)
        return (jnp.where(k == 0, res, c1_fan), jnp.where(k == 1, res, c1_mix)), res

    (c1_fan, c1_mix), outs = jax.lax.scan(solve, (c1_frans, c1_frans), jnp.arange(3))
    c1, flip, c1f, fw, _ = choose(c1_fan, c1_mix)
    use_c1 = jnp.where(axial, (t_b > 0.0) & (t_b < 1.0), True)
    r1 = jnp.where(flip, c1f, jnp.where(use_c1, c1, x1))
    r2 = jnp.where(flip, c1f, jnp.where(use_c1, c1, x2))
    c1 = jnp.where(flip, jnp.where(fw > 0.0, outs[2], c1f), c1)

    # the wrapping plane through p1, p2 and c1, and the tangent points in it
    vs = wm.unit(jnp.cross(p1p2, p1 - c1))
    vs4 = -wm.dot(vs, c1)
    starts = jnp.stack([r1, r2])
    if found is not None:
        # (a stand-in segment polishes its iteration's start instead: finite, unused)
        found = jnp.where(wraps, jnp.stack(found) * factor, starts)
    tan = jax.vmap(tangent_point, in_axes=(0, 0, 0, None, None, None, None if found is None else 0))
    r1, r2 = tan(jnp.stack([p1e, p2e]), starts, jnp.stack([p1, p2]), a, vs, vs4, found)
    if not surface:
        return _status(inside, collinear, crosses), r1 / factor, r2 / factor, jnp.zeros((), dtype)

    # the polyline over the near side, or with a quadrant, over the far side where
    # the near side runs the wrong way
    redo = constrained & _wrong_way(p1, p2, jax.lax.stop_gradient(r1), jax.lax.stop_gradient(r2), a, vs, vs4, factor)
    length = surface_length(r1, r2, a, vs, vs4, redo, factor)

    return _status(inside, collinear, crosses), r1 / factor, r2 / factor, length / factor
