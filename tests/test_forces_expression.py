"""The Lepton expression parser and evaluator (ExpressionBasedCoordinateForce)."""

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simjax as sj
from simjax.forces import ExpressionBasedCoordinateForce
from simjax.forces.expression import ExpressionError, compile_expression, parse_expression

Q = np.array([-1.5, -0.3, 0.0, 0.7, 2.0])
QD = np.array([0.4, -2.0, 1.0, 0.0, -0.5])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-q^2", -(Q**2)),  # ^ binds tighter than unary minus
        ("2^3^2", 2.0**9 + 0 * Q),  # ^ is right-associative
        ("1-2-3", -4.0 + 0 * Q),  # - and / are left-associative
        ("8/2/2", 2.0 + 0 * Q),
        ("-2*3", -6.0 + 0 * Q),
        ("q*qdot + sin(q) - max(q, qdot)", Q * QD + np.sin(Q) - np.maximum(Q, QD)),
        ("(-q)^3", (-Q) ** 3),  # integer powers of negative bases
        ("(q+3)^-2 + recip(qdot^2 + 1)", (Q + 3) ** -2.0 + 1 / (QD**2 + 1)),
        (".5e1*q + 1.e-1", 5 * Q + 0.1),
        ("step(q) + delta(qdot)", (Q >= 0).astype(float) + (QD == 0.0)),
        ("square(q) + cube(qdot) + abs(q)", Q**2 + QD**3 + np.abs(Q)),
        ("sec(q) + csc(qdot + 3) + cot(q + 4)", 1 / np.cos(Q) + 1 / np.sin(QD + 3) + 1 / np.tan(Q + 4)),
        (
            "atan(q) + asin(qdot/3) + acos(q/2) + tanh(q) + sinh(qdot) + cosh(q)",
            np.arctan(Q) + np.arcsin(QD / 3) + np.arccos(Q / 2) + np.tanh(Q) + np.sinh(QD) + np.cosh(Q),
        ),
        ("exp(q) + log(qdot^2 + 1) + sqrt(q^2)", np.exp(Q) + np.log(QD**2 + 1) + np.abs(Q)),
        ("erf(q) + erfc(qdot)", np.array([math.erf(a) + math.erfc(b) for a, b in zip(Q, QD)])),
        ("min(q, 0) * 2", np.minimum(Q, 0) * 2),
        ("  - 10 * q  -  0.5*qdot ", -10 * Q - 0.5 * QD),
        ("x*y; y = x*qdot; x = q + 1", (Q + 1) * (Q + 1) * QD),  # Lepton reads definitions last first
    ],
)
def test_values(text, expected):
    got = compile_expression(text)(Q, QD)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize(
    "text, message",
    [
        ("q+", "unexpected end"),
        ("(q", "unbalanced"),
        ("q)", "unexpected text"),
        ("foo(q)", "unknown function"),
        ("z*q", "unknown variable"),
        ("min(q)", "takes 2 argument"),
        ("", "unexpected end"),
        ("*q", "unexpected token"),
        ("q; = 1", "does not specify a name"),
    ],
)
def test_errors(text, message):
    with pytest.raises(ExpressionError, match=message):
        compile_expression(text)


def test_constant_folding_and_gradients():
    assert parse_expression("2*3 + 4^0.5") == ("const", 8.0)
    f = compile_expression("q^3 - 2*q*qdot")
    g = jax.grad(lambda q: f(q, 0.5))(1.5)
    np.testing.assert_allclose(g, 3 * 1.5**2 - 1.0)


def test_build_reports_bad_expression():
    m = sj.Model("m").add(sj.Body("b", mass=1.0, inertia=(1, 1, 1, 0, 0, 0)))
    m = m.add(sj.PinJoint("pin", "/ground", "/bodyset/b"))
    with pytest.raises(sj.ModelError, match=r"/forceset/f \(property 'expression'"):
        m.add(ExpressionBasedCoordinateForce("f", "pin_coord_0", "q**2")).build()
    with pytest.raises(sj.ModelError, match=r"property 'coordinate' = 'nope'"):
        m.add(ExpressionBasedCoordinateForce("f", "nope", "q")).build()


def test_members_with_different_expressions():
    m = sj.Model("m").add(sj.Body("b", mass=2.0, inertia=(1, 1, 1, 0, 0, 0)))
    m = m.add(sj.SliderJoint("slide", "/ground", "/bodyset/b"))
    for i, e in enumerate(["-3*q", "qdot^2", "-3*q"]):
        m = m.add(ExpressionBasedCoordinateForce(f"f{i}", "slide_coord_0", e))
    system = m.build()
    state = system.set_coordinates(system.default_state(), {"slide_coord_0": 0.2}, {"slide_coord_0": 1.5})
    udot = sj.forward_dynamics(system, state)
    np.testing.assert_allclose(udot[0], (-0.6 + 2.25 - 0.6) / 2.0, rtol=1e-14)
    assert float(sj.output(system, state, "/forceset/f1|force_magnitude")) == pytest.approx(2.25)


# random arithmetic against Python's own arithmetic (hypothesis)
_leaf = st.one_of(st.sampled_from(["q", "qdot"]), st.floats(0.1, 9.0).map(lambda x: f"{x:.3f}"))


def _combine(children):
    ops = st.sampled_from(["+", "-", "*"])
    return st.one_of(
        st.tuples(children, ops, children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda c: f"-{c}"),
        children.map(lambda c: f"sin({c})"),
    )


@settings(max_examples=60, deadline=None)
@given(st.recursive(_leaf, _combine, max_leaves=8), st.floats(-2, 2), st.floats(-2, 2))
def test_random_expressions_match_python(text, q, qdot):
    expected = eval(text.replace("sin", "math.sin"), {"math": math, "q": q, "qdot": qdot})  # the oracle only
    got = float(compile_expression(text)(np.float64(q), np.float64(qdot)))
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
