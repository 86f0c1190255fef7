"""04 · Batched simulation (the plain-script twin of notebooks/04_batched_simulation.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/04_batched_simulation.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 04 · Batched simulation
#
# A Monte-Carlo sensitivity study of the bicep curl: many worlds with different excitation
# levels and maximum isometric forces, simulated at once with `sj.map_batch`: `jax.vmap` in
# chunks (bounded memory, buffers in cache), the chunks solved side by side on every CPU core
# (one vmapped call would use one). We check that batched results equal single runs, and
# measure throughput against a Python loop of single runs, on the CPU and on a GPU when JAX
# has one.

import os, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
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
import bicep_curl, time, equinox as eqx

print("devices:", jax.devices())
T = 1.0
N = 64 if CI else 2048
system = bicep_curl.build_model().build()
state = bicep_curl.initial_state(system)
rng = np.random.default_rng(0)
levels = jnp.asarray(rng.uniform(0.2, 1.0, N))          # constant excitation of each world
forces = jnp.asarray(rng.uniform(150.0, 250.0, N))      # the biceps' max isometric force

def final_elbow(level, f_max):
    sys_ = eqx.tree_at(lambda s: s.model.find("/forceset/biceps").max_isometric_force, system, f_max)
    traj = sj.simulate(sys_, state, T, jnp.reshape(level, (1,)), solver="rk4", dt=2e-3, n_outputs=2)
    return traj.q[-1, 1]

single = jax.jit(final_elbow)

jax.block_until_ready(sj.map_batch(final_elbow, levels, forces))     # compiles once
t0 = time.perf_counter()
angles = jax.block_until_ready(sj.map_batch(final_elbow, levels, forces))
t_batch = time.perf_counter() - t0

jax.block_until_ready(single(levels[0], forces[0]))                              # compile
n_loop = 8 if CI else 64
t0 = time.perf_counter()
loop = [float(single(levels[i], forces[i])) for i in range(n_loop)]
t_loop = (time.perf_counter() - t0) / n_loop * N

np.testing.assert_allclose(np.asarray(angles[:n_loop]), loop, rtol=1e-10)
print(f"{N} worlds x {T} s: batched {t_batch:.2f} s; a Python loop of single runs would take {t_loop:.2f} s")
print(f"throughput {N * T / t_batch:.0f} world-seconds per wall second; speed-up over the loop {t_loop / t_batch:.1f}x")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].hist(np.asarray(angles), bins=30)
axes[0].set_xlabel("elbow angle at 1 s (rad)"); axes[0].set_ylabel("worlds")
sc = axes[1].scatter(np.asarray(levels), np.asarray(angles), c=np.asarray(forces), s=6)
axes[1].set_xlabel("excitation"); axes[1].set_ylabel("elbow angle at 1 s (rad)")
fig.colorbar(sc, ax=axes[1], label="max isometric force (N)")
fig.tight_layout()

# Sensitivities of the outcome for many worlds at once: gradients through the batch.

grads = jax.jit(jax.vmap(jax.grad(final_elbow, argnums=(0, 1))))(levels[:16], forces[:16])
print("d angle / d excitation:", np.round(np.asarray(grads[0][:4]), 4))
print("d angle / d max force: ", np.round(np.asarray(grads[1][:4]), 6))
assert np.all(np.isfinite(np.asarray(grads[0]))) and np.all(np.isfinite(np.asarray(grads[1])))

plt.show()
