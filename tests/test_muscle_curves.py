"""Muscle curves against OpenSim 4.6: Millard2012 curve objects, Thelen2003Muscle and
DeGrooteFregly2016Muscle curve functions; gradients, jit, vmap and float32."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simjax.muscles import curves as C

from _fresh_process import in_fresh_process
from _platforms import assert_loop_only_on_cpu

opensim = pytest.importorskip("opensim")

RTOL = 1e-10
N_RANDOM = 4


# --------------------------------------------------------------------------------------
# Parameter sets: defaults and random valid ones (validity decided by OpenSim itself)
# --------------------------------------------------------------------------------------


def _afl(rng):
    x0 = rng.uniform(0.3, 0.6)
    x1 = rng.uniform(x0 + 0.1, 0.9)
    ylow = rng.uniform(0.0, 0.3)
    return (x0, x1, rng.uniform(1.4, 2.0), rng.uniform(0.0, 0.95) * (1 - ylow) / (1 - x1), ylow)


def _fv(rng, inverse=False):
    fmax = rng.uniform(1.2, 1.8)
    c = rng.uniform(0.01 if inverse else 0.0, 0.3)
    e = rng.uniform(0.01 if inverse else 0.0, 0.5 * (fmax - 1))
    return (
        c,
        rng.uniform(c + 0.01, 0.99),
        rng.uniform(1.5, 8.0),
        e,
        rng.uniform(e, 0.99 * (fmax - 1)),
        fmax,
        rng.uniform(0, 1),
        rng.uniform(0, 1),
    )


def _fpe(rng):
    e0 = rng.uniform(-0.1, 0.2)
    d = rng.uniform(0.3, 0.9)
    if rng.uniform() < 0.3:
        return (e0, e0 + d)
    return (e0, e0 + d, rng.uniform(0.05, 0.9) / d, rng.uniform(1.2, 5.0) / d, rng.uniform(0, 1))


def _fse(rng):
    e = rng.uniform(0.02, 0.1)
    if rng.uniform() < 0.3:
        return (e,)
    return (e, rng.uniform(1.2, 3.0) / e, rng.uniform(0.3, 0.9), rng.uniform(0, 1))


def _fcl(rng):
    lmax = rng.uniform(0.3, 0.8)
    if rng.uniform() < 0.3:
        return (lmax,)
    return (lmax, rng.uniform(-5.0, -1.1) / lmax, rng.uniform(0, 1))


def _fccos(rng):
    angle = rng.uniform(60.0, 89.0)
    if rng.uniform() < 0.3:
        return (angle,)
    return (angle, rng.uniform(-5.0, -1.1) / math.cos(math.radians(angle)), rng.uniform(0, 1))


def _osim_curve(name, params):
    cls = getattr(opensim, name)
    if not params:
        return cls()
    if name == "TendonForceLengthCurve" and len(params) == 1:
        return cls(*params)
    if name.startswith("FiberCompressive"):
        if len(params) == 1:
            c = cls()
            setter = "setNormLengthAtZeroForce" if "Length" in name else "setEngagementAngleInDegrees"
            getattr(c, setter)(params[0])
            return c
        return cls(*params, "m")
    if name == "FiberForceLengthCurve" and len(params) == 2:
        c = cls()
        c.setCurveStrains(*params)
        return c
    return cls(*params)


SAMPLERS = {
    "ActiveForceLengthCurve": _afl,
    "ForceVelocityCurve": _fv,
    "ForceVelocityInverseCurve": lambda rng: _fv(rng, inverse=True),
    "FiberForceLengthCurve": _fpe,
    "TendonForceLengthCurve": _fse,
    "FiberCompressiveForceLengthCurve": _fcl,
    "FiberCompressiveForceCosPennationCurve": _fccos,
}


def _cases():
    cases = []
    rng = np.random.default_rng(20240611)
    for name, sampler in SAMPLERS.items():
        cases.append((name, ()))
        found = 0
        while found < N_RANDOM:
            params = tuple(float(p) for p in sampler(rng))
            try:
                _osim_curve(name, params)
            except Exception:
                continue  # OpenSim rejects it (e.g. a corner that is not C-shaped)
            cases.append((name, params))
            found += 1
    return cases


CASES = _cases()


def _ours(name, params):
    return getattr(C, name)(*params)


def _grid(theirs, curve):
    """150 points across and beyond the domain plus every segment boundary (and its
    neighbours), padded to a fixed length so all curves share compiled code."""
    dom = theirs.getCurveDomain()
    a, b = dom.get(0), dom.get(1)
    w = b - a
    knots = np.asarray(curve.function().ctrl_x)[:, 0].tolist() + [b]
    special = []
    for k in knots:
        special += [k, k - 1e-9 * w, k + 1e-9 * w]
    x = np.concatenate([np.linspace(a - 0.3 * w, b + 0.3 * w, 150), special])
    return np.concatenate([x, np.full(200 - x.size, a + 0.37 * w)])


def _close(ours, ref, rtol, what):
    ours, ref = np.asarray(ours), np.asarray(ref)
    err = np.abs(ours - ref) / np.maximum(1.0, np.abs(ref))
    assert np.all(err <= rtol), f"{what}: max scaled error {err.max():.3e} at index {err.argmax()}"


# --------------------------------------------------------------------------------------
# Millard2012 curves vs OpenSim
# --------------------------------------------------------------------------------------


CASE_IDS = [f"{n}-{i % (N_RANDOM + 1)}" for i, (n, _) in enumerate(CASES)]


@pytest.mark.parametrize("name,params", CASES, ids=CASE_IDS)
def test_millard_curve_matches_opensim(name, params):
    theirs = _osim_curve(name, params)
    ours = _ours(name, params)
    x = _grid(theirs, ours)
    y, dy, d2y = ours.evaluate(x)
    _close(y, [theirs.calcValue(v) for v in x], RTOL, "value")
    _close(dy, [theirs.calcDerivative(v, 1) for v in x], RTOL, "first derivative")
    # d2y/dx2 = (y''x' - y'x'')/x'^3 cancels near segment ends (it is 0 there), so it
    # is compared on the scale of the curve's largest curvature.
    ref2 = np.array([theirs.calcDerivative(v, 2) for v in x])
    _close(d2y, ref2, 1e-9 * max(1.0, np.abs(ref2).max()), "second derivative")
    d0, d1 = ours.curve_domain()
    dom = theirs.getCurveDomain()
    assert abs(float(d0) - dom.get(0)) < 1e-15 and abs(float(d1) - dom.get(1)) < 1e-15
    for attr in (
        "StiffnessAtOneNormForce",
        "StiffnessAtLowForce",
        "NormForceAtToeEnd",
        "Curviness",
        "StiffnessAtZeroLength",
        "StiffnessAtPerpendicular",
    ):
        getter = getattr(theirs, f"get{attr}InUse", None)
        if getter is not None:
            snake = "".join("_" + c.lower() if c.isupper() else c for c in attr).lstrip("_") + "_in_use"
            assert abs(float(getattr(ours, snake)) - getter()) < 1e-14, snake


@pytest.mark.parametrize(
    "name",
    [
        "FiberForceLengthCurve",
        "TendonForceLengthCurve",
        "FiberCompressiveForceLengthCurve",
        "FiberCompressiveForceCosPennationCurve",
    ],
)
def test_integral_matches_opensim(name):
    # OpenSim's integral is a spline fitted to a numerical integration; it is accurate
    # to round-off at the domain ends and to ~1e-5 in between. Ours is exact: its
    # derivative is the curve itself (checked in test_gradients_are_exact).
    theirs, ours = _osim_curve(name, ()), _ours(name, ())
    x = _grid(theirs, ours)
    ref = np.array([theirs.calcIntegral(v) for v in x])
    _close(ours.integral(x), ref, 5e-5, "integral")
    dom = theirs.getCurveDomain()
    ends = np.array([dom.get(0) - 0.1, dom.get(0), dom.get(1), dom.get(1) + 0.1])
    _close(ours.integral(ends), [theirs.calcIntegral(v) for v in ends], 1e-12, "integral at the domain ends")


def test_invalid_parameters_raise_like_opensim():
    bad = [
        ("ActiveForceLengthCurve", (0.44, 0.73, 1.8, 5.0, 0.1)),
        ("ActiveForceLengthCurve", (0.8, 0.73, 1.8, 0.8, 0.1)),
        ("ForceVelocityCurve", (0.0, 0.25, 0.5, 0.0, 0.15, 1.4, 0.6, 0.9)),
        ("ForceVelocityInverseCurve", (0.0, 0.25, 5.0, 0.1, 0.15, 1.4, 0.6, 0.9)),
        ("FiberForceLengthCurve", (0.0, 0.7, 0.2, 1.0, 0.75)),
        ("TendonForceLengthCurve", (0.049, 10.0, 0.5, 0.5)),
        ("FiberCompressiveForceLengthCurve", (0.5, -1.0, 0.5)),
        ("FiberCompressiveForceCosPennationCurve", (85.0, 0.0, 2.0)),
    ]
    for name, params in bad:
        with pytest.raises(Exception):
            _osim_curve(name, params)
        with pytest.raises(ValueError):
            _ours(name, params)
    with pytest.raises(ValueError, match="all be set or all be empty"):
        C.FiberForceLengthCurve(curviness=0.5)
    with pytest.raises(ValueError, match="all be set or all be empty"):
        C.FiberCompressiveForceLengthCurve(stiffness_at_zero_length=-5.0)


def test_property_names_and_defaults_match_opensim():
    for name in SAMPLERS:
        theirs = getattr(opensim, name)()
        ours = getattr(C, name)()
        names = [theirs.getPropertyByIndex(i).getName() for i in range(theirs.getNumProperties())]
        assert list(type(ours)._names()) == names
        for n in names:
            text = theirs.getPropertyByName(n).toString()
            value = getattr(ours, n)
            if text == "()":
                assert value is None, n
            else:
                assert float(value) == pytest.approx(float(text), rel=1e-4), n
                assert np.asarray(value).dtype == np.float64


# --------------------------------------------------------------------------------------
# Differentiability, jit, vmap, float32
# --------------------------------------------------------------------------------------


def _sample_x(curve, n=41):
    d0, d1 = (float(v) for v in curve.curve_domain())
    w = d1 - d0
    return np.linspace(d0 - 0.2 * w, d1 + 0.2 * w, n) + 1e-3 * w  # avoid the exact kinks of the extension


# One curve per segment count (5, 4, 2, 1), swapped axes and both integral directions.
GRAD_CURVES = [
    "ActiveForceLengthCurve",
    "ForceVelocityInverseCurve",
    "TendonForceLengthCurve",
    "FiberCompressiveForceCosPennationCurve",
]


@pytest.mark.parametrize("name", GRAD_CURVES)
def test_gradients_are_exact(name):
    curve = getattr(C, name)()
    x = jnp.asarray(_sample_x(curve))
    eps = 1e-6 * float(jnp.ptp(x))

    @jax.jit
    def checks(x):
        y, dy, d2y = curve.evaluate(x)
        g = jax.vmap(jax.grad(curve))(x)
        h = jax.vmap(jax.grad(jax.grad(curve)))(x)
        gi = jax.vmap(jax.grad(curve.integral))(x)
        fd = (curve(x + eps) - curve(x - eps)) / (2 * eps)
        return y, dy, d2y, g, h, gi, fd

    y, dy, d2y, g, h, gi, fd = checks(x)
    _close(g, dy, 1e-12, "grad vs derivative(1)")
    _close(h, d2y, 1e-9, "grad(grad) vs derivative(2)")
    _close(dy, fd, 1e-6, "derivative vs central differences")
    # The integral's derivative is the curve (minus it when integrating right to left).
    sign = 1.0 if curve.function().integrate_left_to_right else -1.0
    _close(gi, sign * y, 1e-12, "d(integral)/dx vs value")


def test_gradient_with_respect_to_curve_properties():
    x = jnp.linspace(0.4, 1.9, 31)

    def f_afl(p):
        return jnp.sum(C.ActiveForceLengthCurve(minimum_value=p[0], shallow_ascending_slope=p[1])(x) ** 2)

    p0 = np.array([0.1, 0.8616])
    g = jax.jit(jax.grad(f_afl))(jnp.asarray(p0))
    for i in range(2):
        e = np.zeros(2)
        e[i] = 1e-6
        fd = (float(f_afl(p0 + e)) - float(f_afl(p0 - e))) / 2e-6
        assert abs(float(g[i]) - fd) <= 1e-6 * max(1.0, abs(fd))

    lt = jnp.linspace(0.99, 1.06, 29)

    def f_fse(e):
        return jnp.sum(C.TendonForceLengthCurve(strain_at_one_norm_force=e)(lt))

    g = jax.jit(jax.grad(f_fse))(0.049)
    fd = (float(f_fse(0.049 + 1e-7)) - float(f_fse(0.049 - 1e-7))) / 2e-7
    assert abs(float(g) - fd) <= 1e-5 * abs(fd)


def test_jit_vmap_and_traced_properties():
    curve = C.FiberForceLengthCurve()
    x = jnp.linspace(0.9, 1.9, 50)
    ref = curve(x)
    # Properties traced by jit: the curve is rebuilt with jax.numpy inside the trace.
    traced = jax.jit(lambda c, x: c(x))(curve, x)
    np.testing.assert_allclose(traced, ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jax.jit(lambda x: curve(x))(x), ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(curve)(x), ref, rtol=1e-13, atol=1e-15)
    # vmap over a property.
    mins = jnp.array([0.0, 0.1, 0.2])
    lce = jnp.array([0.2, 1.0, 2.5])
    vals = jax.jit(jax.vmap(lambda m: C.ActiveForceLengthCurve(minimum_value=m)(lce)))(mins)
    np.testing.assert_allclose(vals, np.array([[m, 1.0, m] for m in (0.0, 0.1, 0.2)]), atol=1e-14)
    # Shapes are preserved.
    assert curve(1.3).shape == ()
    assert curve(jnp.ones((2, 3)) * 1.3).shape == (2, 3)


def test_float32():
    for name in SAMPLERS:
        curve = getattr(C, name)()
        x = _grid(_osim_curve(name, ()), curve)
        y32, dy32, _ = curve.evaluate(x.astype(np.float32))
        assert y32.dtype == jnp.float32 and dy32.dtype == jnp.float32
        y64, dy64, _ = curve.evaluate(x)
        _close(y32, y64, 2e-5, f"{name} float32 value")
        _close(dy32, dy64, 5e-4 * max(1.0, float(jnp.max(jnp.abs(dy64)))), f"{name} float32 slope")


def test_stacked_curve_newton_steps_unrolled_for_gpu():
    # The stacked curves' safeguarded Newton steps run as a loop on a CPU and unrolled
    # (one fused kernel) elsewhere; both solve the equation.
    from simjax.muscles import stacked_curves

    solve = jax.jit(lambda r: stacked_curves._solve(lambda u: u**3 + u - r, lambda u: 3 * u**2 + 1))
    r = jnp.linspace(0.0, 2.0, 9)
    u = solve(r)
    np.testing.assert_allclose(u**3 + u, r, atol=1e-14)
    assert_loop_only_on_cpu(solve, r)


# --------------------------------------------------------------------------------------
# Thelen2003Muscle
# --------------------------------------------------------------------------------------


def _slider_model(muscle):
    model = opensim.Model()
    body = opensim.Body("b", 1.0, opensim.Vec3(0), opensim.Inertia(1))
    model.addBody(body)
    model.addJoint(opensim.SliderJoint("s", model.getGround(), body))
    muscle.addNewPathPoint("o", model.getGround(), opensim.Vec3(0))
    muscle.addNewPathPoint("i", body, opensim.Vec3(0))
    model.addForce(muscle)
    return model, model.initSystem()


THELEN_PROPS = [
    {},
    dict(
        FmaxTendonStrain=0.05,
        FmaxMuscleStrain=0.5,
        KshapeActive=0.5,
        KshapePassive=4.0,
        Af=0.3,
        Flen=1.6,
        fv_linear_extrap_threshold=0.9,
    ),
]


@pytest.mark.parametrize("props", THELEN_PROPS, ids=["default", "custom"])
def test_thelen_curves_match_opensim(props):
    fiso, lopt, lts, penn = 1000.0, 0.1, 0.2, 0.2
    muscle = opensim.Thelen2003Muscle("m", fiso, lopt, lts, penn)
    for k, v in props.items():
        getattr(muscle, "set_" + k)(v)
    model, s = _slider_model(muscle)
    coord = model.getCoordinateSet().get(0)
    names = (
        "FmaxTendonStrain",
        "FmaxMuscleStrain",
        "KshapeActive",
        "KshapePassive",
        "Af",
        "Flen",
        "fv_linear_extrap_threshold",
    )
    p = {k: getattr(muscle, "get_" + k)() for k in names}
    h = lopt * math.sin(penn)
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(40):
        lce_n, tl_n, a = rng.uniform(0.5, 1.7), rng.uniform(0.97, 1.08), rng.uniform(0.0, 1.0)
        lce = lce_n * lopt
        cos = math.sqrt(1 - (h / lce) ** 2)
        coord.setValue(s, tl_n * lts + lce * cos)
        coord.setSpeedValue(s, rng.uniform(-0.5, 0.5))
        muscle.setActivation(s, a)
        muscle.setFiberLength(s, lce)
        model.realizeDynamics(s)
        rows.append(
            (
                lce_n,
                tl_n,
                a,
                cos,
                muscle.getActiveForceLengthMultiplier(s),
                muscle.getPassiveForceMultiplier(s),
                muscle.getTendonForce(s) / fiso,
                muscle.getNormalizedFiberVelocity(s),
                muscle.getForceVelocityMultiplier(s),
            )
        )
    lce_n, tl_n, a, cos, fal_o, fpe_o, fse_o, v_o, fv_o = np.array(rows).T
    ac = C.thelen_clamp_activation(a)
    fal = C.thelen_active_force_length(lce_n, p["KshapeActive"])
    fpe = C.thelen_passive_force_length(lce_n, p["FmaxMuscleStrain"], p["KshapePassive"])
    fse = C.thelen_tendon_force_length(tl_n, p["FmaxTendonStrain"])
    _close(fal, fal_o, 1e-13, "fal")
    _close(fpe, fpe_o, 1e-13, "fpe")
    _close(fse, fse_o, 1e-13, "fse")
    active = fse / cos - fpe
    fv_args = (p["Af"], p["Flen"], p["fv_linear_extrap_threshold"])
    _close(C.thelen_norm_fiber_velocity(ac, fal, active, *fv_args), v_o, 1e-12, "dlceN")
    _close(active / (ac * fal), fv_o, 1e-12, "fv")
    # The closed-form inverse against OpenSim's Newton inverse (tolerance 1e-6 there).
    vs = np.linspace(-1.5, 1.5, 61)
    fal1 = C.thelen_active_force_length(1.1, p["KshapeActive"])
    cos1 = math.sqrt(1 - (h / 0.11) ** 2)
    force = np.array([muscle.calcActiveFiberForceAlongTendon(0.6, 0.11, float(v * lopt * 10)) for v in vs])
    fv_ref = force / (fiso * 0.6 * fal1 * cos1)
    _close(C.thelen_force_velocity_multiplier(0.6, fal1, vs, *fv_args), fv_ref, 1e-6, "fvInv")
    # ... and as an exact inverse of the forward relation, in all four branches.
    fv = np.linspace(-0.2, 1.0 * p["Flen"], 57)
    v = C.thelen_norm_fiber_velocity(0.6, fal1, 0.6 * fal1 * fv, *fv_args)
    _close(C.thelen_force_velocity_multiplier(0.6, fal1, v, *fv_args), np.maximum(fv, 0.0), 1e-12, "inverse")


def test_thelen_derivatives_and_activation():
    x = jnp.linspace(0.4, 1.9, 37) + 1e-4
    for f, df, args in [
        (C.thelen_active_force_length, C.thelen_active_force_length_derivative, (0.5,)),
        (C.thelen_passive_force_length, C.thelen_passive_force_length_derivative, (0.5, 4.0)),
    ]:
        _close(jax.jit(jax.vmap(jax.grad(lambda v: f(v, *args))))(x), df(x, *args), 1e-12, f.__name__)
    t = jnp.linspace(0.98, 1.07, 37) + 1e-5
    dfse = jax.jit(jax.vmap(jax.grad(C.thelen_tendon_force_length)))
    _close(dfse(t), C.thelen_tendon_force_length_derivative(t), 1e-12, "fse'")
    assert np.all(np.isfinite(dfse(jnp.array([0.5, 1.0, 3.0]))))
    g = jax.jit(jax.vmap(jax.grad(C.thelen_norm_fiber_velocity, argnums=2), in_axes=(None, None, 0)))(
        0.5, 0.9, jnp.linspace(-0.3, 0.7, 21)
    )
    assert np.all(np.isfinite(g)) and np.all(g > 0)

    model = opensim.MuscleFirstOrderActivationDynamicModel(0.02, 0.07, 0.05, "m")
    for a in (0.0, 0.03, 0.2, 0.7, 1.0, 1.2):
        for e in (0.0, 0.05, 0.5, 1.0):
            ours = C.thelen_activation_derivative(a, e, 0.02, 0.07, 0.05)
            assert float(ours) == pytest.approx(model.calcDerivative(a, e), rel=1e-14, abs=1e-14)
            assert float(C.thelen_clamp_activation(a, 0.05)) == model.clampActivation(a)


# --------------------------------------------------------------------------------------
# DeGrooteFregly2016Muscle
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("width,e_pe,e_t", [(1.0, 0.6, 0.049), (1.7, 0.45, 0.08)])
def test_degroote_curves_match_opensim(width, e_pe, e_t):
    m = opensim.DeGrooteFregly2016Muscle()
    m.set_active_force_width_scale(width)
    m.set_passive_fiber_strain_at_one_norm_force(e_pe)
    m.set_tendon_strain_at_one_norm_force(e_t)
    lce = np.linspace(0.15, 1.9, 71)
    lt = np.linspace(0.95, 1.0 + 1.5 * e_t, 71)
    v = np.linspace(-1.1, 1.1, 71)
    fv = np.linspace(0.05, 1.75, 71)
    ft = np.linspace(0.0, 4.5, 71)
    dg = opensim.DeGrooteFregly2016Muscle
    checks = [
        (C.degroote_active_force_length(lce, width), m.calcActiveForceLengthMultiplier, lce),
        (C.degroote_active_force_length_derivative(lce, width), m.calcActiveForceLengthMultiplierDerivative, lce),
        (C.degroote_passive_force_length(lce, e_pe), m.calcPassiveForceMultiplier, lce),
        (C.degroote_passive_force_length_derivative(lce, e_pe), m.calcPassiveForceMultiplierDerivative, lce),
        (C.degroote_passive_force_length_integral(lce, e_pe), m.calcPassiveForceMultiplierIntegral, lce),
        (C.degroote_force_velocity(v), dg.calcForceVelocityMultiplier, v),
        (C.degroote_force_velocity_inverse(fv), dg.calcForceVelocityInverseCurve, fv),
        (C.degroote_tendon_force_length(lt, e_t), m.calcTendonForceMultiplier, lt),
        (C.degroote_tendon_force_length_derivative(lt, e_t), m.calcTendonForceMultiplierDerivative, lt),
        (C.degroote_tendon_force_length_integral(lt, e_t), m.calcTendonForceMultiplierIntegral, lt),
        (C.degroote_tendon_force_length_inverse(ft, e_t), m.calcTendonForceLengthInverseCurve, ft),
        (
            C.degroote_tendon_force_length_inverse_derivative(0.7, lt, e_t),
            lambda x: m.calcTendonForceLengthInverseCurveDerivative(0.7, x),
            lt,
        ),
    ]
    for i, (ours, fn, xs) in enumerate(checks):
        _close(ours, [fn(float(x)) for x in xs], 1e-12, f"DeGroote check {i}")
    # Derivatives are the autodiff derivatives of the curves.
    _close(
        jax.jit(jax.vmap(jax.grad(lambda x: C.degroote_active_force_length(x, width))))(lce),
        C.degroote_active_force_length_derivative(lce, width),
        1e-12,
        "fal'",
    )
    _close(
        jax.jit(jax.vmap(jax.grad(lambda x: C.degroote_passive_force_length_integral(x, e_pe))))(lce),
        C.degroote_passive_force_length(lce, e_pe),
        1e-12,
        "d(int fpe)",
    )
    _close(
        jax.jit(jax.vmap(jax.grad(lambda x: C.degroote_tendon_force_length_integral(x, e_t))))(lt),
        C.degroote_tendon_force_length(lt, e_t),
        1e-12,
        "d(int fse)",
    )
    _close(C.degroote_force_velocity(C.degroote_force_velocity_inverse(fv)), fv, 1e-12, "fv(fv^-1)")


def _opensim_activation_derivatives(ta, td, b, grid):
    """OpenSim's DeGroote activation derivative at each ``(activation, excitation)`` of
    ``grid``, for a muscle of these time constants (s) and smoothing (run in a fresh
    process: ``_fresh_process``)."""
    import opensim

    opensim.Logger.setLevelString("Off")
    m = opensim.DeGrooteFregly2016Muscle()
    m.setName("m")
    m.set_activation_time_constant(ta)
    m.set_deactivation_time_constant(td)
    m.set_activation_dynamics_smoothing(b)
    m.set_ignore_tendon_compliance(True)
    model = opensim.Model()
    body = opensim.Body("b", 1.0, opensim.Vec3(0), opensim.Inertia(1))
    model.addBody(body)
    model.addJoint(opensim.SliderJoint("s", model.getGround(), body))
    m.addNewPathPoint("o", model.getGround(), opensim.Vec3(0))
    m.addNewPathPoint("i", body, opensim.Vec3(0))
    model.addForce(m)
    s = model.initSystem()
    model.getCoordinateSet().get(0).setValue(s, 0.3)
    out = []
    for a, e in grid:
        m.setActivation(s, a)
        model.realizeVelocity(s)
        controls = model.updControls(s)
        m.setControls(opensim.Vector(1, e), controls)
        model.setControls(s, controls)
        model.realizeAcceleration(s)
        out.append(m.getStateVariableDerivativeValue(s, "activation"))
    return out


def test_degroote_activation_dynamics_matches_opensim():
    # (OpenSim's activation constants are process-wide statics: _fresh_process)
    ta, td, b = 0.03, 0.08, 5.0
    grid = [(a, e) for a in (0.0, 0.1, 0.5, 0.95) for e in (0.0, 0.3, 0.6, 1.0)]
    ref = in_fresh_process(_opensim_activation_derivatives, ta, td, b, grid)
    a, e = np.array(grid).T
    _close(C.degroote_activation_derivative(a, e, ta, td, b), ref, 1e-13, "DeGroote da/dt")
    g = jax.grad(C.degroote_activation_derivative)(0.3, 0.31)
    assert np.isfinite(g)
