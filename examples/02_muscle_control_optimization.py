"""02 · Muscle-control optimisation (the plain-script twin of notebooks/02_muscle_control_optimization.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/02_muscle_control_optimization.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 02 · Muscle-control optimisation
#
# Find the biceps excitation that brings the bicep-curl arm's elbow from 90° to a target
# angle at t = 1 s with the least effort, by gradient descent (`optax.adam`) through
# `sj.simulate`. The excitation is piecewise linear in time (a few knots, squashed into
# the muscle's control range [0.01, 1] by a sigmoid). We check the gradient against finite differences and compare with
# a gradient-free random search given the same number of simulations.

import os, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import matplotlib
import matplotlib.pyplot as plt
import simjax as sj
from simjax import plot

CI = os.environ.get("SIMJAX_CI") == "1"   # small sizes when the test suite runs this notebook
try:
    import opensim
except ImportError:
    opensim = None
print("simjax", sj.__version__, "| OpenSim:", opensim.__version__ if opensim else "not installed")

sys.path.insert(0, os.path.join(os.getcwd(), "..", "examples"))
import bicep_curl, optax

system = bicep_curl.build_model().build()
state = bicep_curl.initial_state(system)
T, TARGET = 1.0, 1.2                          # s, rad
KNOTS = jnp.linspace(0.0, T, 5)

def excitation(params):
    return 0.01 + 0.99 * jax.nn.sigmoid(params)   # within the biceps' control bounds [0.01, 1]

def run(params):
    table = sj.ControlTable(KNOTS, excitation(params)[:, None])
    return sj.simulate(system, state, T, table, solver="rk4", dt=0.002, n_outputs=51)

def loss(params):
    traj = run(params)
    miss = traj.q[-1, 1] - TARGET
    return 100.0 * miss ** 2 + 0.1 * jnp.mean(excitation(params) ** 2)

value_and_grad = jax.jit(jax.value_and_grad(loss))
params = jnp.linspace(-2.0, -1.0, 5)         # start from a low, slowly rising excitation
print("initial loss", float(loss(params)))

# The gradient agrees with central finite differences. (OpenSim's first-order
# activation dynamics switch time constants where excitation equals activation, so the
# loss has kinks there; away from them, as here, both derivatives agree.)

_, g = value_and_grad(params)
h = 1e-6
fd = np.array([(loss(params.at[i].add(h)) - loss(params.at[i].add(-h))) / (2 * h) for i in range(2)])
print("autodiff:", np.asarray(g[:2]), " finite differences:", fd)
np.testing.assert_allclose(np.asarray(g[:2]), fd, rtol=1e-5)

steps = 80 if CI else 200
opt = optax.adam(0.2)
opt_state = opt.init(params)
history = []
for k in range(steps):
    value, g = value_and_grad(params)
    updates, opt_state = opt.update(g, opt_state)
    params = optax.apply_updates(params, updates)
    history.append(float(value))
final = run(params)
miss_deg = np.degrees(abs(float(final.q[-1, 1]) - TARGET))
print(f"loss {history[0]:.3f} -> {history[-1]:.5f}; final angle misses the target by {miss_deg:.3f} deg")
assert history[-1] < history[0] / 100 and miss_deg < 1.0

# A gradient-free baseline: random search with the same number of simulations.

rng = np.random.default_rng(0)
candidates = jnp.asarray(rng.normal(-1.0, 2.0, (steps, 5)))
losses = jax.jit(jax.vmap(loss))(candidates)
best = int(jnp.argmin(losses))
print(f"random search, {steps} simulations: best loss {float(losses[best]):.4f}; gradient descent: {history[-1]:.5f}")

fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].semilogy(history); axes[0].axhline(float(losses[best]), ls="--", color="gray", label="random search")
axes[0].set_xlabel("iteration"); axes[0].set_ylabel("loss"); axes[0].legend()
axes[1].plot(KNOTS, excitation(params), "o-"); axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("excitation")
plot.plot_outputs(final, ["/jointset/elbow/elbow_coord_0|value"], ax=axes[2])
axes[2].axhline(TARGET, ls="--", color="gray")
fig.tight_layout()

plt.show()
