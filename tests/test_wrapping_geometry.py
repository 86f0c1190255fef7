"""Wrapping geometry against OpenSim 4.6 (sphere, cylinder, ellipsoid, torus): single-muscle rigs with and
without quadrants, wrapping and not wrapping (see ``tests/_wrapping_rigs.py``).

Moment arms: OpenSim's ``computeMomentArm`` is the virtual-work moment arm (unit
tension applied along the path's straight segments, at the path points and at the
tangent points fixed on the wrap object's body). Its heuristic tangent points are
not exactly tangent, so that is *not* the derivative of OpenSim's length; simjax
reproduces it by differentiating the length with the tangent points and the
surface length held fixed in the wrap frame (``stop_gradient``), and its true
derivative of the length is checked against finite differences.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

from _wrapping_rigs import H, N_Q, RIGS, _compare, _params, _simjax, _sweep, fd_mask  # noqa: E402

from simjax.wrapping import (
    MANDATORY_WRAP,
    NO_WRAP,
    WRAPPED,
    PathWrap,
    WrapCylinder,
    WrapEllipsoid,  # noqa: E402
    WrapSphere,
    WrapTorus,
    parse_quadrant,
)

KINDS = ("sphere", "cylinder", "ellipsoid", "torus")


@pytest.mark.parametrize("kind", KINDS)
def test_length_and_moment_arm_match_opensim(kind):
    ref, val, der, status, real = _compare(kind)
    # finite values and derivatives everywhere, the degenerate rigs included
    assert np.all(np.isfinite(val)) and np.all(np.isfinite(der))
    ref, val, der, status = ref[real], val[real], der[real], status[real]
    L_os, ma_os = ref[:, 0], ref[:, 1]
    ok = np.isfinite(L_os)
    # OpenSim's ellipsoid returns NaN where its wrapping plane meets the ray-casting
    # axis outside the ellipsoid; simjax returns a finite length there
    assert ok.mean() > 0.98
    np.testing.assert_allclose(val[..., 0][ok], L_os[ok], rtol=0, atol=1e-7)
    np.testing.assert_allclose(-der[..., 1][ok], ma_os[ok], rtol=0, atol=1e-7)
    # every rig both wraps and does not wrap along its sweep
    wraps = status[:, :N_Q] >= WRAPPED
    assert np.all(wraps.any(axis=1)) and np.all((~wraps).any(axis=1))


@pytest.mark.parametrize("kind", KINDS)
def test_quadrants_and_statuses_are_exercised(kind):
    _, _, _, status, real = _compare(kind)
    seen = set(np.unique(status).tolist())
    assert {NO_WRAP, MANDATORY_WRAP} <= seen
    if kind in ("sphere", "cylinder", "torus"):
        assert WRAPPED in seen  # quadrant-constrained wraps that do not cross the object


@pytest.mark.parametrize("kind, tol", [("sphere", 1e-6), ("cylinder", 1e-6), ("torus", 1e-6), ("ellipsoid", 2e-3)])
def test_length_gradient_matches_finite_differences(kind, tol):
    """d(length)/dq by autodiff vs central differences of the same (OpenSim-exact)
    length, away from status changes. The ellipsoid's length is only piecewise
    smooth at the 1e-8 m level (polyline segment count, tangent points converged to
    OpenSim's loose tolerance), hence its looser bound."""
    _, val, der, status, real = _compare(kind)
    val, der, status = val[real], der[real], status[real]
    n = N_Q
    fd = (val[:, 2 * n :, 0] - val[:, n : 2 * n, 0]) / (2 * H)
    ad = der[:, :n, 0]
    mask = fd_mask(status, n)
    if kind == "cylinder":  # OpenSim's discrete tangent adjustment (several wraps) jumps
        mask &= np.asarray([not r["multi"] for r in RIGS[kind] if not r["degenerate"]])[:, None]
    err = np.abs(fd - ad)[mask]
    assert mask.mean() > 0.5
    assert np.quantile(err, 0.95) < tol * 0.1 and err.max() < max(tol, 1e-6) * (100 if kind == "ellipsoid" else 1)


@pytest.mark.parametrize("kind", KINDS)
def test_smoothed_length(kind):
    """Equal to OpenSim's where the weight is 1 or nothing wraps, between the
    straight and the wrapped length elsewhere; finite derivatives everywhere."""
    _, val, der, status, _ = _compare(kind)
    exact, smooth = val[..., 0], val[..., 2]
    assert np.all(np.isfinite(der[..., 2]))
    straight_side = np.minimum(exact, smooth) - 1e-12
    assert np.all(smooth >= straight_side)
    nowrap = status < WRAPPED
    np.testing.assert_allclose(smooth[nowrap], exact[nowrap], atol=1e-15)
    dev = np.abs(smooth - exact)
    # the band is narrow: most wrapping samples are untouched
    assert np.mean(dev[~nowrap] == 0.0) > 0.8


def test_wrap_components():
    import simjax as sj

    model = sj.Model("m").add(sj.Body("arm", mass=1.0))
    model = model.add(WrapCylinder("TRI", radius=0.016, length=0.05, quadrant="-y"), to="/bodyset/arm")
    model = model.add(WrapEllipsoid("hh", dimensions=(0.03, 0.02, 0.02), quadrant="z"), to="/bodyset/arm")
    model = model.add(WrapSphere("s"), to="/ground").add(WrapTorus("t", 0.01, 0.05), to="/ground")
    cyl = model.find("/bodyset/arm/TRI")
    assert (cyl.wrap_axis, cyl.wrap_sign) == (1, -1)
    from simjax.wrapping import find_wrap_object, wrap_frame_path

    assert find_wrap_object(model, "hh") == "/bodyset/arm/hh"
    assert wrap_frame_path("/bodyset/arm/hh") == "/bodyset/arm"
    assert parse_quadrant("Unassigned") == (0, 0) and parse_quadrant("X") == (0, 1)
    with pytest.raises(sj.ModelError, match="quadrant"):
        WrapSphere("bad", quadrant="up").validate("/ground/bad")
    with pytest.raises(sj.ModelError, match="outer_radius"):
        WrapTorus("bad", 0.05, 0.01).validate("/ground/bad")
    with pytest.raises(sj.ModelError, match="method"):
        PathWrap("pw", "/bodyset/arm/TRI", method="spiral").validate("/forceset/m/path/pw")
    assert PathWrap("pw", "TRI", method="Axial").method_code == 2
    with pytest.raises(sj.ModelError, match=r"/forceset/m/path/pw.*smoothing.*-0\.001"):
        PathWrap("pw", "/bodyset/arm/TRI", smoothing=-1e-3).validate("/forceset/m/path/pw")


@pytest.mark.parametrize("kind, index, window", [("cylinder", 1, (0.96, 1.02)), ("sphere", 1, (-0.624, -0.576))])
def test_smoothing_bridges_a_quadrant_jump(kind, index, window):
    """Across a status change where OpenSim's length jumps (a quadrant-constrained
    cylinder starting to wrap the long way round; a constrained sphere wrapping at
    onset), the smoothed length is continuous and its derivative integrates to its
    change."""
    rigs = RIGS[kind]
    f = _simjax(kind)
    base = np.stack([_sweep(r) for r in rigs])

    def run(lo, hi):
        qs = base.copy()
        qs[index] = np.linspace(lo, hi, qs.shape[1])
        val, der, status = f(_params(rigs), jnp.asarray(qs))
        return qs[index], np.asarray(val)[index], np.asarray(der)[index], np.asarray(status)[index]

    q, _, _, status = run(*window)
    k = np.flatnonzero(np.diff(status != NO_WRAP))[0]
    q_jump = 0.5 * (q[k] + q[k + 1])
    q, val, der, status = run(q_jump - 1e-2, q_jump + 1e-2)
    exact, smooth, dsmooth = val[:, 0], val[:, 2], der[:, 2]
    dq = q[1] - q[0]
    assert np.abs(np.diff(exact)).max() > 1e-2  # OpenSim's jump
    assert np.all(np.isfinite(dsmooth))
    assert np.abs(np.diff(smooth)).max() < 1.5 * np.abs(dsmooth).max() * dq + 1e-12
    integral = np.sum(0.5 * (dsmooth[1:] + dsmooth[:-1]) * dq)
    np.testing.assert_allclose(integral, smooth[-1] - smooth[0], rtol=0.02)
    # outside the blending band the smoothed length is OpenSim's
    far = np.abs(q - q_jump) > 8e-3
    np.testing.assert_allclose(smooth[far], exact[far], atol=1e-15)
