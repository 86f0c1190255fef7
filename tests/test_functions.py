"""simjax.functions against OpenSim 4.6: values and derivatives, inside and outside
the knot range and exactly at knots; exact PP conversion and vectorized stacking;
gradients in x and in the parameters; jit, vmap and float32.

OpenSim functions are built from the same XML a model file would hold, written from
our modules' fields, so these tests also check that the field names are OpenSim's
property names.
"""

import dataclasses
import functools
import math
import os
import tempfile
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax.functions as F
import simjax.models
from simjax.functions import (
    Constant,
    GCVSpline,
    LinearFunction,
    MultiplierFunction,
    NaturalCubicSpline,
    PiecewiseConstantFunction,
    PiecewiseLinearFunction,
    PiecewisePolynomial,
    PolynomialFunction,
    SimmSpline,
    Sine,
    StepFunction,
    stack_pp,
)

from _platforms import assert_loop_only_on_cpu

_MODEL_DIRS = [Path(simjax.models.path("arm26")).parent, Path(__file__).resolve().parent / "data" / "collection"]


def _model(name):
    for d in _MODEL_DIRS:
        if (d / name).exists():
            return d / name
    raise FileNotFoundError(f"model {name} is neither shipped nor in tests/data/collection")


# -- helpers ---------------------------------------------------------------------------


# Every evaluation goes through one jitted function on a fixed number of points, so
# functions of the same type and knot count share one compilation across tests.
_N_PTS = 256
_ORDERS = (0, 1, 2, 3)


@jax.jit
def _all_derivs(f, xs):
    return jnp.stack([f.derivative(xs, o) for o in _ORDERS])


def _evaluate(f, xs):
    """Value and derivatives of orders 1..3 at ``xs``: shape ``(4, len(xs))``."""
    xs = np.asarray(xs, float)
    assert xs.size <= _N_PTS
    return np.asarray(_all_derivs(f, jnp.asarray(np.resize(xs, _N_PTS))))[:, : xs.size]


def _random_knots(rng, n, spread=(0.05, 1.0)):
    x = np.cumsum(rng.uniform(*spread, n))
    x = x - x[0] + rng.uniform(-1, 1)
    return x, rng.normal(size=n)


def _probe_points(x):
    """A grid reaching 30 % beyond both ends, every knot exactly, midpoints, and
    points within OpenSim's 2e-13 'at the end knot' window."""
    x = np.asarray(x, float)
    span = max(x[-1] - x[0], 1.0)
    ends = [x[0] - 1e-13, x[0] + 1e-13, x[-1] - 1e-13, x[-1] + 1e-13]
    pts = [np.linspace(x[0] - 0.3 * span, x[-1] + 0.3 * span, 161), x, ends]
    if len(x) > 1:
        pts.append(0.5 * (x[1:] + x[:-1]))
    return np.concatenate(pts)


def _xml(f):
    tag = type(f).__name__
    body = []
    for fld in dataclasses.fields(f):
        value = getattr(f, fld.name)
        if fld.name == "name" or value is None:
            continue
        if isinstance(value, F.Function):
            text = _xml(value)
        elif fld.name == "half_order":
            text = str(int(value))
        else:
            text = " ".join(repr(float(v)) for v in np.ravel(np.asarray(value)))
        body.append(f"<{fld.name}>{text}</{fld.name}>")
    return f'<{tag} name="{f.name or "f"}">{"".join(body)}</{tag}>'


def _to_osim(f, tag=None):
    """The OpenSim object read from the XML of ``f`` (optionally under another tag)."""
    osim = pytest.importorskip("opensim")
    text = _xml(f)
    if tag is not None:
        text = text.replace(type(f).__name__, tag)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "function.xml")
        with open(path, "w") as fh:
            fh.write('<?xml version="1.0" encoding="UTF-8" ?>\n')
            fh.write(f'<OpenSimDocument Version="40600">{text}</OpenSimDocument>')
        obj = osim.OpenSimObject.makeObjectFromFile(path)
    return getattr(osim, obj.getConcreteClassName()).safeDownCast(obj)


def _osim_derivs(g, xs, orders):
    osim = pytest.importorskip("opensim")
    out = np.empty((len(orders), len(xs)))
    for i, order in enumerate(orders):
        comps = osim.StdVectorInt([0] * order)
        for j, t in enumerate(xs):
            v = osim.Vector(1, float(t))
            out[i, j] = g.calcValue(v) if order == 0 else g.calcDerivative(comps, v)
    return out


def _rel_err(ours, ref):
    ours, ref = np.asarray(ours), np.asarray(ref)
    scale = np.max(np.abs(ref)) or 1.0
    return np.max(np.abs(ours - ref)) / scale


def _check_vs_opensim(f, rtol, orders=(0, 1, 2), xs=None, tag=None):
    """Compare f's value and derivatives with OpenSim's; returns (ours, OpenSim's)."""
    g = _to_osim(f, tag)
    xs = _probe_points(f.x) if xs is None else np.asarray(xs, float)
    ours = _evaluate(f, xs)[list(orders)]
    ref = _osim_derivs(g, xs, orders)
    for i, order in enumerate(orders):
        err = _rel_err(ours[i], ref[i])
        assert err <= rtol, f"{type(f).__name__} order {order}: rel. error {err:.2e} > {rtol:.0e}"
    return ours, ref


# -- OpenSim agreement -----------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4, 9])
def test_simm_spline_matches_opensim(n):
    pytest.importorskip("opensim")
    x, y = _random_knots(np.random.default_rng(n), n)
    _check_vs_opensim(SimmSpline(x, y), 1e-12)


def test_simm_spline_fit_is_a_loop_on_a_cpu_and_unrolled_elsewhere():
    # a GPU waits on the host for every loop iteration's condition: there the knots'
    # elimination is unrolled (the same arithmetic, which the OpenSim tests check here)
    x = jnp.linspace(0.0, 1.0, 12)
    y = jnp.sin(3.0 * x)
    assert_loop_only_on_cpu(jax.jit(F._simm_coefficients), x, y)


def test_natural_cubic_spline_is_opensims_simm_spline():
    pytest.importorskip("opensim")
    x, y = _random_knots(np.random.default_rng(7), 9)
    f = NaturalCubicSpline(x, y)
    assert _to_osim(f).getConcreteClassName() == "SimmSpline"  # OpenSim's own renaming
    _check_vs_opensim(f, 1e-12)
    xs = _probe_points(x)
    np.testing.assert_array_equal(_evaluate(f, xs), _evaluate(SimmSpline(x, y), xs))


def _model_functions(path, tags):
    seen, out = set(), []
    for el in ET.parse(path).getroot().iter():
        if el.tag not in tags:
            continue
        fields = {c.tag: np.array(c.text.split(), float) for c in el}
        if el.tag == "Constant":
            fields["value"] = fields["value"][0]
        key = (el.tag, tuple((k, tuple(np.ravel(v))) for k, v in sorted(fields.items())))
        if key not in seen:
            seen.add(key)
            out.append(getattr(F, el.tag)(**fields))
    return out


def test_gait_model_splines_match_opensim():
    pytest.importorskip("opensim")
    splines = _model_functions(_model("gait10dof18musc.osim"), {"SimmSpline"})
    assert len(splines) >= 4  # knee CustomJoint translations and moving path points
    for f in splines:
        _check_vs_opensim(f, 1e-12)


@pytest.mark.parametrize("model", ["gait10dof18musc.osim", "arm26.osim"])
def test_model_linear_and_constant_functions_match_opensim(model):
    pytest.importorskip("opensim")
    funcs = _model_functions(_model(model), {"LinearFunction", "Constant"})
    assert any(isinstance(f, LinearFunction) for f in funcs)
    for f in funcs:
        _check_vs_opensim(f, 1e-12, xs=np.linspace(-4, 4, 17))


@pytest.mark.parametrize("n", [2, 6])
def test_piecewise_linear_matches_opensim(n):
    pytest.importorskip("opensim")
    x, y = _random_knots(np.random.default_rng(10 + n), n)
    f = PiecewiseLinearFunction(x, y)
    ours, ref = _check_vs_opensim(f, 1e-12, xs=np.concatenate([x, _probe_points(x)]))
    # at exact interior knots the slope is that of the side OpenSim's bisection picks
    np.testing.assert_array_equal(ours[1, :n], ref[1, :n])


@pytest.mark.parametrize("n", [1, 7])
def test_piecewise_constant_matches_opensim(n):
    pytest.importorskip("opensim")
    x, y = _random_knots(np.random.default_rng(20 + n), n)
    f = PiecewiseConstantFunction(x, y)
    _check_vs_opensim(f, 0.0, orders=(0, 1, 2, 3))  # bit-identical, knots included


# OpenSim's GCVSpline keeps GCVSPL's floor of smoothing, so it deviates from the exact
# interpolant (which we compute; see the next test) by this much at most.
_GCV_TOL = {1: 1e-13, 2: 5e-13, 3: 5e-12, 4: 1e-9}


@pytest.mark.parametrize("half_order", [1, 2, 3, 4])
def test_gcv_spline_matches_opensim(half_order):
    pytest.importorskip("opensim")
    rng = np.random.default_rng(30 + half_order)
    for n in sorted({2 * half_order, 9} - {8}):  # the fewest points GCVSPL takes, and more
        x, y = _random_knots(rng, n)
        _check_vs_opensim(GCVSpline(half_order, x, y), _GCV_TOL[half_order], orders=(0, 1, 2, 3))


def _exact_natural_spline(x, y, m):
    """Local power-basis coefficients of the interpolating natural spline of degree
    2m - 1, solved in exact rational arithmetic (an independent formulation: one
    polynomial per interval, interpolation, C^(2m-2) continuity, natural ends)."""
    n, width = len(x), 2 * m
    xs, ys = [Fraction(v) for v in x], [Fraction(v) for v in y]

    def row(i, r, at_right):
        h = xs[i + 1] - xs[i] if at_right else Fraction(0)
        return {i * width + p: F._falling(p, r) * h ** (p - r) for p in range(r, width)}

    eqs = []
    for i in range(n - 1):
        eqs += [(row(i, 0, False), ys[i]), (row(i, 0, True), ys[i + 1])]
    for i in range(1, n - 1):
        for r in range(1, width - 1):
            left, right = row(i - 1, r, True), row(i, r, False)
            eqs.append(({**left, **{c: left.get(c, 0) - v for c, v in right.items()}}, Fraction(0)))
    for r in range(m, width - 1):
        eqs += [(row(0, r, False), Fraction(0)), (row(n - 2, r, True), Fraction(0))]
    size = width * (n - 1)
    a = [[e.get(j, Fraction(0)) for j in range(size)] + [b] for e, b in eqs]
    for c in range(size):  # Gaussian elimination, exact
        piv = next(r for r in range(c, size) if a[r][c] != 0)
        a[c], a[piv] = a[piv], a[c]
        for r in range(c + 1, size):
            if a[r][c] != 0:
                f = a[r][c] / a[c][c]
                a[r] = [u - f * v for u, v in zip(a[r], a[c])]
    sol = [Fraction(0)] * size
    for c in range(size - 1, -1, -1):
        sol[c] = (a[c][size] - sum(a[c][j] * sol[j] for j in range(c + 1, size))) / a[c][c]
    return np.array([[float(sol[i * width + p]) for p in range(width)] for i in range(n - 1)])


@pytest.mark.parametrize("half_order", [2, 3, 4])
def test_gcv_spline_is_the_exact_natural_interpolant(half_order):
    """Against an exact rational solve we agree more tightly than OpenSim does (its
    GCVSPL fit keeps a tiny smoothing term), also for very uneven spacing."""
    x, y = _random_knots(np.random.default_rng(40 + half_order), 9)
    coefs = _exact_natural_spline(x, y, half_order)
    xs = np.linspace(x[0], x[-1], 161)[:-1]
    k = np.searchsorted(x, xs, side="right") - 1
    dx = xs - x[k]
    ours = _evaluate(GCVSpline(half_order, x, y), np.concatenate([x, xs]))
    tol = 1e-13 if half_order < 4 else 5e-12
    for order in range(4):
        powers = range(order, 2 * half_order)
        exact = sum(coefs[k, p] * F._falling(p, order) * dx ** (p - order) for p in powers)
        assert _rel_err(ours[order, x.size :], exact) <= tol, order
    assert _rel_err(ours[0, : x.size], y) <= tol


def _dense_natural_spline(x, y, m):
    """The natural spline of degree 2m - 1 in scipy's B-spline basis on the same
    knots, its collocation matrix dense and solved by LU with partial pivoting."""
    from scipy.interpolate import BSpline

    k = 2 * m - 1
    t = np.r_[[x[0]] * k, x, [x[-1]] * k]
    basis = BSpline(t, np.eye(len(t) - k - 1), k)
    rows = [basis(x)] + [basis(x[[0, -1]], nu=r) for r in range(m, k)]
    return BSpline(t, np.linalg.solve(np.concatenate(rows), np.r_[y, np.zeros(2 * m - 2)]), k)


# the dense reference's own error: the heptic system's condition number is ~1e6 even
# for 10x spacing, and scipy's unscaled end rows lose a little more
_DENSE_TOL = {1: 1e-12, 2: 1e-12, 3: 1e-12, 4: 2e-11}


@pytest.mark.parametrize("half_order", [1, 2, 3, 4])
def test_natural_spline_banded_fit_matches_a_dense_solve(half_order):
    """The O(n) banded elimination (no pivoting) against a dense LU of the same
    system: the fewest points and more, spacings varying 10x (and 1000x where the
    B-spline system stays well conditioned: for degrees 5 and 7 it does not, and both
    solves lose digits alike). Each piece's coefficients are the value and scaled
    derivatives at its left knot, so this compares every derivative order."""
    pytest.importorskip("scipy")
    m = half_order
    rng = np.random.default_rng(60 + m)
    cases = [(2 * m, 0.1), (40, 0.1)] + ([(500, 1e-3)] if m == 2 else [])
    for n, low in cases:
        x, y = _random_knots(rng, n, spread=(low, 1.0))
        ours = np.asarray(F._natural_spline_pp(x, y, m).coefs)
        ref = _dense_natural_spline(x, y, m)
        for p in range(2 * m):
            exact = ref(x[:-1], nu=p) / math.factorial(p)
            assert _rel_err(ours[:, p], exact) <= _DENSE_TOL[m], (n, low, p)


def test_natural_spline_fit_gradient_matches_finite_differences():
    # a long fit, whose rows are a loop on every platform (gradients in the sites,
    # and in short fits: test_grad_in_knots_matches_finite_differences)
    rng = np.random.default_rng(70)
    x, y = _random_knots(rng, 100)
    xs = jnp.asarray(0.5 * (x[1:] + x[:-1]))

    @jax.jit
    def loss(y):
        pp = F._natural_spline_pp(x, y, 3)
        return jnp.sum(jnp.sin(pp(xs))) + 0.1 * jnp.sum(pp.derivative(xs, 2))

    grad = np.asarray(jax.jit(jax.grad(loss))(y))
    v = rng.normal(size=y.size)
    fd = (loss(y + 1e-6 * v) - loss(y - 1e-6 * v)) / 2e-6
    assert abs(grad @ v - float(fd)) <= 1e-8 * np.linalg.norm(grad) * np.linalg.norm(v)


def test_natural_spline_fit_vmaps_over_columns_and_sites():
    rng = np.random.default_rng(71)
    x, _ = _random_knots(rng, 40)
    ys = rng.normal(size=(40, 3))
    xs = x[None, :] * np.array([1.0, 0.5, 2.0])[:, None]

    @jax.jit
    def batched(xs, ys):  # motion.py's case (one x, many columns), and many x too
        fit = lambda x, y: F._natural_spline_pp(x, y, 3).coefs  # noqa: E731
        return jax.vmap(fit, in_axes=(None, 1))(xs[0], ys), jax.vmap(fit, in_axes=(0, 1))(xs, ys)

    by_column, by_both = batched(xs, ys)
    for j in range(3):
        np.testing.assert_allclose(by_column[j], F._natural_spline_pp(x, ys[:, j], 3).coefs, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(by_both[j], F._natural_spline_pp(xs[j], ys[:, j], 3).coefs, rtol=1e-13, atol=1e-13)


def test_natural_spline_fit_is_unrolled_off_the_cpu_only_when_small():
    # small fits (a model's GCVSplines) fuse on a GPU; fits through thousands of data
    # rows stay loops there too, which keeps their programs small
    fit = jax.jit(lambda x, y: F._natural_spline_pp(x, y, 2).coefs)
    x = jnp.linspace(0.0, 1.0, 12)
    assert_loop_only_on_cpu(fit, x, jnp.sin(3.0 * x))
    x = jnp.linspace(0.0, 1.0, 200)
    assert "stablehlo.while" in jax.export.export(fit, platforms=["cuda"])(x, jnp.sin(3.0 * x)).mlir_module()


def test_gcv_spline_from_degree():
    x, y = _random_knots(np.random.default_rng(3), 8)
    assert GCVSpline.from_degree(5, x, y).half_order == 3
    assert GCVSpline.from_degree(1, x, y).half_order == 1


def test_polynomial_linear_constant_match_opensim():
    pytest.importorskip("opensim")
    xs = np.linspace(-3, 3, 41)
    # highest power first, as OpenSim: 2 x^3 - 3 x^2 + 0.5 x + 1
    f = PolynomialFunction([2.0, -3.0, 0.5, 1.0])
    np.testing.assert_allclose(np.asarray(f(2.0)), 2 * 8 - 3 * 4 + 0.5 * 2 + 1, rtol=1e-15)
    rng = np.random.default_rng(5)
    for degree in (3, 7):
        _check_vs_opensim(PolynomialFunction(rng.normal(size=degree + 1)), 1e-12, orders=(0, 1, 2, 3), xs=xs)
    xs = np.linspace(-4, 4, 17)
    lin = LinearFunction([1.5, -0.25])  # [slope, intercept]
    np.testing.assert_allclose(np.asarray(lin(2.0)), 2.75, rtol=1e-15)
    _check_vs_opensim(lin, 1e-12, xs=xs)
    _check_vs_opensim(Constant(2.5), 0.0, xs=xs)


@pytest.mark.parametrize("times", [(0.2, 1.3), (1.3, 0.2)])
def test_step_function_matches_opensim(times):
    pytest.importorskip("opensim")
    t0, t1 = times
    f = StepFunction(t0, t1, -0.5, 2.0)
    xs = np.concatenate([np.linspace(-0.5, 2.0, 101), [t0, t1]])
    _check_vs_opensim(f, 1e-12, orders=(0, 1, 2, 3), xs=xs)


def test_sine_matches_opensim():
    pytest.importorskip("opensim")
    f = Sine(1.7, 2.3, 0.4, -0.3)
    _check_vs_opensim(f, 1e-12, orders=(0, 1, 2, 3), xs=np.linspace(-4, 4, 81))
    fifth = 1.7 * 2.3**5 * np.cos(2.3 * 0.3 + 0.4)
    np.testing.assert_allclose(np.asarray(f.derivative(0.3, 5)), fifth, rtol=1e-14)
    with pytest.raises(NotImplementedError, match="Sine"):
        f.to_pp()


def test_multiplier_function_matches_opensim():
    pytest.importorskip("opensim")
    x, y = _random_knots(np.random.default_rng(50), 7)
    _check_vs_opensim(MultiplierFunction(SimmSpline(x, y), 0.37), 1e-12, xs=_probe_points(x))
    _check_vs_opensim(MultiplierFunction(Sine(2.0, 3.0), -1.5), 1e-12, xs=np.linspace(-2, 2, 21))


def test_fields_are_opensim_property_names():
    osim = pytest.importorskip("opensim")
    classes = [
        Constant,
        LinearFunction,
        PolynomialFunction,
        PiecewiseLinearFunction,
        PiecewiseConstantFunction,
        SimmSpline,
        GCVSpline,
        MultiplierFunction,
        StepFunction,
        Sine,
    ]
    for cls in classes:
        g = getattr(osim, cls.__name__)()
        props = {g.getPropertyByIndex(i).getName() for i in range(g.getNumProperties())}
        ours = {f.name for f in dataclasses.fields(cls)} - {"name"}
        assert ours <= props, (cls.__name__, ours - props)


# -- the piecewise polynomial and stacking ------------------------------------------------


def _mixed_functions():
    """One of every PP-representable kind, sized like the functions above so that the
    individual evaluations reuse their compilations."""
    rng = np.random.default_rng(60)
    kn = lambda n: _random_knots(rng, n)  # noqa: E731
    return [
        Constant(1.25),
        LinearFunction([0.5, -1.0]),
        PolynomialFunction(rng.normal(size=8)),  # degree 7: a wider PP
        PiecewiseLinearFunction(*kn(6)),
        PiecewiseConstantFunction(*kn(7)),
        PiecewiseConstantFunction(*kn(1)),
        SimmSpline(*kn(2)),
        SimmSpline(*kn(9)),
        NaturalCubicSpline(*kn(9)),
        GCVSpline(1, *kn(9)),
        GCVSpline(3, *kn(9)),
        MultiplierFunction(SimmSpline(*kn(7)), -2.0),
        StepFunction(0.1, 0.9, 1.0, 3.0),
        StepFunction(0.9, -0.4, 1.0, 3.0),
    ]


def _points_for(f):
    inner = getattr(f, "function", f)
    knots = np.asarray(inner.x) if hasattr(inner, "x") else np.array([-1.0, 0.0, 0.1, 0.9, 1.0])
    return np.resize(_probe_points(knots), _N_PTS)


def test_stack_pp_vmap_matches_individual_functions():
    funcs = _mixed_functions()
    xs = np.stack([_points_for(f) for f in funcs])
    stacked = jax.jit(stack_pp)(funcs)  # one compilation for all the fits
    assert stacked.breaks.shape[0] == len(funcs) and stacked.coefs.shape[-1] == 8  # degree 7 padded in
    evaluate = jax.jit(jax.vmap(lambda pp, x: jnp.stack([pp.derivative(x, o) for o in _ORDERS])))
    together = np.asarray(evaluate(stacked, jnp.asarray(xs)))
    for i, f in enumerate(funcs):
        alone = _evaluate(f, xs[i])
        for order in (0, 1, 2):
            err = _rel_err(together[i, order], alone[order])
            # exact except MultiplierFunction (scale folded into the coefficients) and
            # StepFunction (SimTK's formula vs its quintic coefficients): rounding
            assert err <= 1e-13, (type(f).__name__, order, err)
    # stack_pp also takes the functions themselves
    assert stack_pp(funcs[:3]).breaks.shape == (3, 2)


def test_pp_knot_conventions():
    # bisection as OpenSim: emulated search equals the reference while-loop everywhere
    def reference(b, x):
        i, j = 0, len(b)
        while True:
            k = (i + j) // 2
            if x < b[k]:
                j = k
            elif x > b[k + 1]:
                i = k
            else:
                return k

    rng = np.random.default_rng(70)
    search = jax.jit(jax.vmap(F._bisect, in_axes=(None, None, 0)))
    b = np.sort(rng.uniform(0, 1, 40))
    for n in (2, 3, 5, 8, 17, 33, 40):  # the first n of 40 breaks: padding is ignored
        xs = np.resize(np.concatenate([b[: n - 1], 0.5 * (b[1:n] + b[: n - 1])]), 80)
        got = np.asarray(search(jnp.asarray(b), jnp.int32(n), jnp.asarray(xs)))
        np.testing.assert_array_equal(got, [reference(b[:n], x) for x in xs])
    # SEARCH_RIGHT (GCVSpline): interior knots belong to the right, the last knot to
    # the (here constant) extrapolation
    f = GCVSpline(1, [0.0, 1.0, 3.0], [0.0, 2.0, 1.0])
    np.testing.assert_array_equal(np.asarray(f.derivative(jnp.array([0.0, 1.0, 3.0]), 1)), [2.0, -0.5, 0.0])


def test_pp_validation_and_batched_call():
    with pytest.raises(ValueError, match="non-decreasing"):
        PiecewisePolynomial([1.0, 0.0], [[1.0]], [1.0], [1.0])
    with pytest.raises(ValueError, match="one more entry"):
        PiecewisePolynomial([0.0, 1.0, 2.0], [[1.0]], [1.0], [1.0])
    stacked = stack_pp([Constant(1.0), LinearFunction([1.0, 0.0])])
    with pytest.raises(ValueError, match="vmap"):
        stacked(0.5)


# -- differentiation ---------------------------------------------------------------------


def _fd(fun, p, h):
    p = np.asarray(p, float)
    out = []
    for i in range(p.size):
        e = np.zeros_like(p)
        e.flat[i] = h
        out.append((float(fun(p + e)) - float(fun(p - e))) / (2 * h))
    return np.array(out).reshape(p.shape)


def test_grad_in_x_matches_analytic_derivatives():
    rng = np.random.default_rng(80)
    x, y = _random_knots(rng, 9)
    funcs = [
        SimmSpline(x, y),
        GCVSpline(3, x, y),
        PiecewiseLinearFunction(x[:6], y[:6]),
        StepFunction(0.1, 0.9, 1.0, 3.0),
        Sine(1.3, 2.0, 0.1, 0.2),
        PolynomialFunction([1.0, -2.0, 0.5, 3.0]),
    ]
    inner = 0.37 * x[1:] + 0.63 * x[:-1]
    ts = np.concatenate([x[0] - [0.7, 0.1], inner, x[-1] + [0.1, 0.7], [0.3, 0.5], x[[0, -1]]])

    @jax.jit
    def autodiff(f, t):
        d1 = jax.vmap(jax.grad(lambda s: f(s)))(t)
        d2 = jax.vmap(jax.grad(jax.grad(lambda s: f(s))))(t)
        return jnp.stack([d1, d2])

    h = 1e-6
    for f in funcs:
        d1, d2 = np.asarray(autodiff(f, jnp.asarray(ts)))
        analytic = _evaluate(f, np.concatenate([ts, ts - h, ts + h]))
        np.testing.assert_allclose(d1, analytic[1, : ts.size], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(d2, analytic[2, : ts.size], rtol=1e-11, atol=1e-11)
        fd = (analytic[0, 2 * ts.size :] - analytic[0, ts.size : 2 * ts.size]) / (2 * h)
        smooth = slice(0, ts.size - 2)  # central differences straddling an end knot are not accurate
        np.testing.assert_allclose(d1[smooth], fd[smooth], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", ["SimmSpline", "PiecewiseLinearFunction", "GCVSpline"])
def test_grad_in_knots_matches_finite_differences(kind):
    rng = np.random.default_rng(90)
    x, y = _random_knots(rng, 8, spread=(0.3, 1.0))
    make = functools.partial(GCVSpline, 3) if kind == "GCVSpline" else getattr(F, kind)
    ts = jnp.asarray(np.concatenate([[x[0] - 0.4], 0.5 * (x[1:] + x[:-1]), [x[-1] + 0.4]]))
    weights = jnp.arange(1.0, ts.size + 1)

    def value(xk, yk):
        return jnp.sum(make(xk, yk)(ts) * weights)

    value_and_grad = jax.jit(jax.value_and_grad(value, argnums=(0, 1)))  # one compilation serves both
    _, (gx, gy) = value_and_grad(x, y)
    fd_y = _fd(lambda p: value_and_grad(x, p)[0], y, 1e-6)
    fd_x = _fd(lambda p: value_and_grad(p, y)[0], x, 1e-6)
    np.testing.assert_allclose(np.asarray(gy), fd_y, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(gx), fd_x, rtol=1e-6, atol=1e-7)
    if kind == "SimmSpline":  # forward mode too
        jx, jy = jax.jit(jax.jacfwd(value, argnums=(0, 1)))(x, y)
        np.testing.assert_allclose(np.asarray(jx), np.asarray(gx), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(jy), np.asarray(gy), rtol=1e-12, atol=1e-12)


def test_grad_in_parameters_of_closed_forms():
    ts = jnp.array([0.2, 0.5, 0.8])

    @jax.jit
    def value(p):
        step = StepFunction(p[0], p[1], p[2], p[3])
        sine = Sine(p[4], p[5], p[6], p[7])
        mult = MultiplierFunction(PolynomialFunction(p[8:11]), p[11])
        terms = [step(ts), sine.derivative(ts, 1), mult(ts), step.to_pp()(ts)]
        return sum(jnp.sum(t) for t in terms)

    p = np.array([0.1, 0.9, -1.0, 2.0, 1.5, 2.0, 0.3, 0.1, 1.0, -2.0, 0.5, 1.7])
    grad = np.asarray(jax.jit(jax.grad(value))(p))
    np.testing.assert_allclose(grad, _fd(value, p, 1e-6), rtol=1e-7, atol=1e-8)


# -- transformations and precision --------------------------------------------------------


def test_jit_and_vmap_over_parameters():
    rng = np.random.default_rng(100)
    x, _ = _random_knots(rng, 9)
    ys = rng.normal(size=(3, 9))
    ts = np.linspace(x[0] - 0.5, x[-1] + 0.5, _N_PTS)
    simm = jax.jit(jax.vmap(lambda yk: SimmSpline(x, yk)(ts)))(ys)
    gcv = jax.jit(jax.vmap(lambda yk: GCVSpline(3, x, yk).derivative(ts, 1)))(ys)
    for i in range(3):
        simm_i, gcv_i = _evaluate(SimmSpline(x, ys[i]), ts)[0], _evaluate(GCVSpline(3, x, ys[i]), ts)[1]
        np.testing.assert_allclose(np.asarray(simm[i]), simm_i, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(np.asarray(gcv[i]), gcv_i, rtol=1e-12, atol=1e-12)
    # elementwise evaluation keeps the shape of x
    f = SimmSpline(x, ys[0])
    assert jax.jit(lambda g, t: g(t))(f, jnp.zeros((2, 3))).shape == (2, 3)
    assert f(0.5).shape == ()


def test_float32_evaluation():
    rng = np.random.default_rng(110)
    x, y = _random_knots(rng, 9, spread=(0.3, 1.0))
    funcs = [SimmSpline(x, y), GCVSpline(3, x, y), StepFunction(0.1, 0.9, 1.0, 3.0), Sine(1.3, 2.0)]
    ts = np.linspace(x[0] - 0.5, x[-1] + 0.5, _N_PTS)
    with jax.enable_x64(False):
        for f in funcs:
            out = _all_derivs(f, jnp.asarray(ts, jnp.float32))
            assert out.dtype == jnp.float32
            ref = _evaluate(f, ts)
            for order in (0, 1):
                assert _rel_err(np.asarray(out[order]), ref[order]) < 1e-4, (type(f).__name__, order)


# -- validation ----------------------------------------------------------------------------


def test_validation_errors_name_class_property_and_value():
    message = r"SimmSpline: property 'x' = \[0\.0, 2\.0, 1\.0\].*strictly increasing"
    with pytest.raises(ValueError, match=message):
        SimmSpline([0.0, 2.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="PiecewiseLinearFunction: property 'y'.*2 values but 'x' has 3"):
        PiecewiseLinearFunction([0.0, 1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="SimmSpline: property 'x'.*at least 2"):
        SimmSpline([0.0], [1.0])
    with pytest.raises(ValueError, match="GCVSpline: property 'x'.*at least 6"):
        GCVSpline(3, np.arange(5.0), np.arange(5.0))
    with pytest.raises(ValueError, match="GCVSpline: property 'half_order'"):
        GCVSpline(5, np.arange(12.0), np.arange(12.0))
    with pytest.raises(NotImplementedError, match="error_variance"):
        GCVSpline(3, np.arange(8.0), np.arange(8.0), error_variance=0.1)
    with pytest.raises(ValueError, match="StepFunction: property 'transition_end_time'"):
        StepFunction(1.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="LinearFunction: property 'coefficients'"):
        LinearFunction([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        PiecewiseConstantFunction([0.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="order"):
        SimmSpline([0.0, 1.0], [0.0, 1.0]).derivative(0.5, -1)
    # traced values are not checked (and do not fail) inside transformations
    jax.jit(lambda xk: SimmSpline(xk, jnp.ones(3))(0.5))(jnp.array([0.0, 1.0, 2.0]))
