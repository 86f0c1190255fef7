"""A system's state-independent parameters, computed once (``Context.prepared``).

``simulate`` computes them before the integrator's loop and hands them to every
right-hand side; a parameter the prepared set lacked would be recomputed inside the
loop (in reverse mode, once per step). These tests check that the prepared set is
complete for every kind of component the shipped models use, and that the right-hand
side is the same with and without it.
"""

import os
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.forward import Context
from simjax.simulate import rhs

from test_constraints import fourbar

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import bicep_curl  # noqa: E402


def _system(name):
    if name == "bicep_curl":
        return bicep_curl.build_model().build()
    if name == "fourbar":
        return fourbar(lock=True, prescribe=True).build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sj.load_osim(sj.models.path(name)).build()


_MODELS = [
    "double_pendulum",
    "arm26",
    "gait10dof18musc",
    "Tug_of_War_Millard",
    "bouncing_block",
    "bicep_curl",
    "fourbar",
]


def _state(system):
    state = system.default_state(0.3)
    rng = np.random.default_rng(0)
    return state.replace(u=state.u + 0.1 * rng.standard_normal(state.u.shape))


@pytest.mark.parametrize("name", _MODELS)
def test_prepared_parameters_are_all_a_right_hand_side_uses(name):
    system = _system(name)
    state = _state(system)
    found = {}

    def trace(y):
        st = state
        prepared = Context(system, st).prepared()
        ctx = Context(system, st, parameters=prepared)
        ctx.acc, ctx.constraints
        found["prepared"], found["used"] = set(prepared), set(ctx._parameters)
        return ctx.acc.udot

    jax.make_jaxpr(trace)(state.y)  # traced only
    assert found["used"] == found["prepared"], found["used"] - found["prepared"]


@pytest.mark.parametrize("name", ["Tug_of_War_Millard", "bouncing_block", "bicep_curl", "fourbar"])
def test_right_hand_side_is_the_same_with_prepared_parameters(name):
    system = _system(name)
    state = _state(system)

    @jax.jit
    def both(y):
        given = rhs(system, state.t, y, state.d, parameters=Context(system, state).prepared())
        return rhs(system, state.t, y, state.d), given

    plain, given = both(state.y)
    np.testing.assert_array_equal(np.asarray(given), np.asarray(plain))


def test_gradient_flows_through_prepared_parameters():
    # a model property reaches the right-hand side only through the prepared parameters
    system = _system("double_pendulum")
    state = system.default_state()

    def udot(mass):
        sys2 = eqx.tree_at(lambda s: s.model.find("/bodyset/rod2").mass, system, mass)
        params = Context(sys2, state).prepared()
        return rhs(sys2, state.t, state.y, state.d, parameters=params)[-1]

    m0 = jnp.asarray(system.model.find("/bodyset/rod2").mass, float)
    h = 1e-6
    fd = (udot(m0 + h) - udot(m0 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(udot)(m0), fd, rtol=1e-6)
