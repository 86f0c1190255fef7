"""A controller that is any Equinox module: an MLP policy as a model component, with
gradients reaching its weights through a simulation (issue 6)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj


class Policy(eqx.Module):
    """A small MLP from (t, elbow angle, elbow speed) to one control."""

    mlp: eqx.nn.MLP

    def __call__(self, t, state):
        return jax.nn.sigmoid(self.mlp(jnp.stack([t, state.q[0], state.u[0]])))


def model(policy):
    m = sj.Model("policy_arm", gravity=(0, -9.80665, 0))
    m = m.add(sj.Body("arm", 1.0, (0, -0.3, 0), (0.01, 0.01, 0.01, 0, 0, 0)))
    m = m.add(sj.PinJoint("elbow", "/ground", "/bodyset/arm"))
    m = m.add(sj.CoordinateActuator("motor", "/jointset/elbow/elbow_coord_0", optimal_force=5.0))
    return m.add(sj.PolicyController("brain", policy, actuators=("/forceset/motor",)))


@pytest.fixture(scope="module")
def system():
    mlp = eqx.nn.MLP(3, 1, 8, 2, key=jax.random.PRNGKey(0), final_activation=lambda x: x)
    return model(Policy(mlp)).build()


def test_policy_drives_the_actuator(system):
    state = system.default_state()
    policy = system.model.find("/controllerset/brain").policy
    expected = 5.0 * float(policy(state.t, state)[0])
    assert float(sj.controls(system, state)[0]) == pytest.approx(expected / 5.0, rel=1e-12)
    tau = sj.inverse_dynamics(system, state, jnp.zeros(1), include_applied=False)
    udot = sj.forward_dynamics(system, state)
    # M udot = tau_gravity + actuator
    M = sj.mass_matrix(system, state)
    np.testing.assert_allclose(M @ udot, -tau + expected, rtol=1e-12)


def test_gradient_reaches_the_policy_weights(system):
    state = system.default_state().replace(q=jnp.array([0.3]))

    def loss(sys_):
        traj = sj.simulate(sys_, state, 0.3, solver="rk4", dt=0.01, n_outputs=2)
        return (traj.q[-1, 0] - 0.5) ** 2

    grads = eqx.filter_grad(loss)(system)
    w = grads.model.find("/controllerset/brain").policy.mlp.layers[0].weight
    assert np.all(np.isfinite(np.asarray(w))) and float(jnp.abs(w).max()) > 0
    # central difference along one weight
    h = 1e-6

    def with_weight(v):
        return eqx.tree_at(
            lambda s: s.model.find("/controllerset/brain").policy.mlp.layers[0].weight,
            system,
            system.model.find("/controllerset/brain").policy.mlp.layers[0].weight.at[0, 1].set(v),
        )

    w01 = float(system.model.find("/controllerset/brain").policy.mlp.layers[0].weight[0, 1])
    fd = (loss(with_weight(w01 + h)) - loss(with_weight(w01 - h))) / (2 * h)
    np.testing.assert_allclose(float(w[0, 1]), float(fd), rtol=1e-5)


def test_policy_with_a_wrong_output_size_names_the_controller():
    bad = model(lambda t, st: jnp.zeros(2)).build()
    with pytest.raises(sj.ModelError, match=r"/controllerset/brain.*shape"):
        sj.forward_dynamics(bad, bad.default_state())
