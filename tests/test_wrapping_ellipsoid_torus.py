"""Wrapping geometry against OpenSim 4.6 (ellipsoid and torus): single-muscle rigs with and
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

from _wrapping_rigs import H, N_Q, RIGS, _compare, fd_mask  # noqa: E402

from simjax.wrapping import MANDATORY_WRAP, NO_WRAP, WRAPPED  # noqa: E402

KINDS = ("ellipsoid", "torus")


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


@pytest.mark.parametrize("kind, tol", [("torus", 1e-6), ("ellipsoid", 2e-3)])
def test_length_gradient_matches_finite_differences(kind, tol):
    """d(length)/dq by autodiff vs central differences of the same (OpenSim-exact)
    length, away from status changes. The ellipsoid's length is only piecewise
    smooth at the 1e-8 m level (polyline segment count, tangent points converged to
    OpenSim's loose tolerance), hence its looser bound."""
    _, val, der, status, real = _compare(kind)
    val, der, status = val[real], der[real], status[real]
    n = N_Q
    fd = (val[:, 2 * n:, 0] - val[:, n:2 * n, 0]) / (2 * H)
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
