"""OpenSim's MINPACK ``lmdif_C`` for one unknown and one residual, step for step.

``WrapTorus`` finds the point of a line closest to the torus's center circle with
OpenSim's Levenberg-Marquardt solver (``OpenSim/Common/Lmdif.cpp``, a C port of
MINPACK with local changes: a fixed forward-difference step of 1e-5, Jacobian
evaluations not counted, an initial step bound of ``factor`` when ``factor *
|x0|`` is at most 1e-4). Its tolerances are loose (``ftol = xtol = 1e-4``), so the
answer depends on the exact sequence of trial points; this module reproduces that
sequence for ``n = m = 1`` (where the QR factorization and ``lmpar`` reduce to
scalar formulas), with ``lax.while_loop`` so it runs under ``jit`` and ``vmap``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

MACHEP = 1.2e-16
DWARF = 1.0e-38


def _lmpar(r, diag, qtb, delta, par):
    """MINPACK ``lmpar`` for n = 1 (``r != 0``). **Returns:** ``(step, par)``."""
    x = qtb / r
    dxnorm = jnp.abs(diag * x)
    fp = dxnorm - delta
    gauss_newton = fp <= 0.1 * delta

    wa1 = diag * ((diag * x) / dxnorm) / r
    temp = jnp.abs(wa1)
    parl = ((fp / delta) / temp) / temp
    gnorm = jnp.abs((r * qtb) / diag)
    paru = gnorm / delta
    paru = jnp.where(paru == 0.0, DWARF / jnp.minimum(delta, 0.1), paru)
    par = jnp.maximum(par, parl)
    par = jnp.minimum(par, paru)
    par = jnp.where(par == 0.0, gnorm / dxnorm, par)

    def body(c):
        par, parl, paru, fp, _, it, _ = c
        it = it + 1
        par = jnp.where(par == 0.0, jnp.maximum(DWARF, 0.001 * paru), par)
        d = jnp.sqrt(par) * diag
        # qrsolv: one Givens rotation eliminating d against r
        small = jnp.abs(r) < jnp.abs(d)
        cotan = r / jnp.where(small, d, 1.0)
        sin1 = 0.5 / jnp.sqrt(0.25 + 0.25 * cotan * cotan)
        cos1 = sin1 * cotan
        tan = d / jnp.where(small, 1.0, r)
        cos2 = 0.5 / jnp.sqrt(0.25 + 0.25 * tan * tan)
        sin2 = cos2 * tan
        cs = jnp.where(small, cos1, cos2)
        sn = jnp.where(small, sin1, sin2)
        cs = jnp.where(d == 0.0, 1.0, cs)
        sn = jnp.where(d == 0.0, 0.0, sn)
        sdiag = cs * r + sn * d
        wa = cs * qtb + sn * 0.0
        x = jnp.where(sdiag == 0.0, 0.0, wa / jnp.where(sdiag == 0.0, 1.0, sdiag))
        dxnorm = jnp.abs(diag * x)
        fp_old = fp
        fp = dxnorm - delta
        stop = (jnp.abs(fp) <= 0.1 * delta) | ((parl == 0.0) & (fp <= fp_old) & (fp_old < 0.0)) | (it == 10)
        wa1 = diag * ((diag * x) / dxnorm) / sdiag
        temp = jnp.abs(wa1)
        parc = ((fp / delta) / temp) / temp
        nparl = jnp.where(fp > 0.0, jnp.maximum(parl, par), parl)
        nparu = jnp.where(fp < 0.0, jnp.minimum(paru, par), paru)
        npar = jnp.maximum(nparl, par + parc)
        return (jnp.where(stop, par, npar), jnp.where(stop, parl, nparl), jnp.where(stop, paru, nparu), fp, x, it, stop)

    init = (par, parl, paru, fp, x, jnp.zeros((), jnp.int32), gauss_newton)
    par_it, _, _, _, x_it, _, _ = jax.lax.while_loop(lambda c: ~c[6], body, init)
    return jnp.where(gauss_newton, x, x_it), jnp.where(gauss_newton, 0.0, par_it)


def lmdif_1d(fcn, x0, ftol=1e-4, xtol=1e-4, maxfev=500, factor=0.2):
    """Minimize ``fcn(x)^2`` over scalar ``x`` from ``x0`` as OpenSim's ``lmdif_C`` does
    (``gtol = 0``, ``mode = 1``, ``epsfcn = 0``).

    **Arguments:** ``fcn``: scalar residual; ``x0``: start; the rest as MINPACK.

    **Returns:** the final ``x`` (not differentiable; see callers).
    """
    f0 = fcn(x0)
    dtype = jnp.result_type(x0, float)
    zero = jnp.zeros((), dtype)

    # carry: x, fvec, fnorm, par, delta, diag, xnorm, iter, nfev, need_jac, r, qtf, done
    def body(c):
        x, fvec, fnorm, par, delta, diag, xnorm, it, nfev, need_jac, r, qtf, _ = c
        # -- outer loop head: Jacobian, QR, scaling, gradient test
        J = (fcn(x + 1e-5) - fvec) / 1e-5
        jz = J == 0.0
        r_new = jnp.where(jz, -0.0, -J)
        qtf_new = jnp.where(jz, fvec, -fvec)
        acnorm = jnp.abs(J)
        first = it == 1
        diag_first = jnp.where(acnorm == 0.0, 1.0, acnorm)
        diag_j = jnp.where(first, diag_first, diag)
        xnorm_j = jnp.where(first, jnp.abs(diag_j * x), xnorm)
        delta_first = factor * xnorm_j
        delta_first = jnp.where(jnp.abs(delta_first) <= 1e-4, factor, delta_first)
        delta_j = jnp.where(first, delta_first, delta)
        grad_zero = (fnorm == 0.0) | jz  # gnorm <= gtol = 0
        diag_j = jnp.maximum(diag_j, acnorm)
        r = jnp.where(need_jac, r_new, r)
        qtf = jnp.where(need_jac, qtf_new, qtf)
        diag = jnp.where(need_jac, diag_j, diag)
        xnorm = jnp.where(need_jac, xnorm_j, xnorm)
        delta = jnp.where(need_jac, delta_j, delta)
        stop_grad = need_jac & grad_zero

        # -- inner loop: the Levenberg-Marquardt step
        step, par_n = _lmpar(jnp.where(r == 0.0, 1.0, r), diag, qtf, delta, par)
        wa1 = -step
        wa2 = x + wa1
        pnorm = jnp.abs(diag * wa1)
        delta = jnp.where(first, jnp.minimum(delta, pnorm), delta)
        f1 = fcn(wa2)
        nfev = nfev + 1
        fnorm1 = jnp.abs(f1)
        q = fnorm1 / fnorm
        actred = jnp.where(0.1 * fnorm1 < fnorm, 1.0 - q * q, -1.0)
        temp1 = jnp.abs(r * wa1) / fnorm
        temp2 = (jnp.sqrt(par_n) * pnorm) / fnorm
        prered = temp1 * temp1 + (temp2 * temp2) / 0.5
        dirder = -(temp1 * temp1 + temp2 * temp2)
        ratio = jnp.where(prered != 0.0, actred / jnp.where(prered != 0.0, prered, 1.0), 0.0)
        low = ratio <= 0.25
        tmp = jnp.where(actred >= 0.0, 0.5, 0.5 * dirder / (dirder + 0.5 * actred))
        tmp = jnp.where((0.1 * fnorm1 >= fnorm) | (tmp < 0.1), 0.1, tmp)
        grow = (par_n == 0.0) | (ratio >= 0.75)
        delta = jnp.where(low, tmp * jnp.minimum(delta, pnorm / 0.1), jnp.where(grow, pnorm / 0.5, delta))
        par_n = jnp.where(low, par_n / tmp, jnp.where(grow, 0.5 * par_n, par_n))
        success = ratio >= 0.0001
        x = jnp.where(success, wa2, x)
        fvec = jnp.where(success, f1, fvec)
        xnorm = jnp.where(success, jnp.abs(diag * wa2), xnorm)
        fnorm = jnp.where(success, fnorm1, fnorm)
        it = it + success.astype(jnp.int32)
        conv1 = (jnp.abs(actred) <= ftol) & (prered <= ftol) & (0.5 * ratio <= 1.0)
        conv2 = delta <= xtol * xnorm
        strict = ((jnp.abs(actred) <= MACHEP) & (prered <= MACHEP) & (0.5 * ratio <= 1.0)) | (delta <= MACHEP * xnorm)
        done = conv1 | conv2 | (nfev >= maxfev) | strict
        new = (x, fvec, fnorm, par_n, delta, diag, xnorm, it, nfev, success, r, qtf, done)
        old = c[:-1] + (True,)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(stop_grad, a, b), old, new)

    init = (
        jnp.asarray(x0, dtype),
        f0,
        jnp.abs(f0),
        zero,
        zero,
        zero,
        zero,
        jnp.ones((), jnp.int32),
        jnp.ones((), jnp.int32),
        jnp.asarray(True),
        zero,
        zero,
        jnp.asarray(False),
    )
    out = jax.lax.while_loop(lambda c: ~c[-1], body, init)
    return out[0]
