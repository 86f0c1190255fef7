"""float32 on a GPU against the CPU and float64 (issue 42 item 5): the right-hand side's
parts at four states of gait10dof18musc (each through a plain ``jax.jit``, so at JAX's
default matrix-product precision) and a 0.1 s simulation (through simjax's own jits).

    export PYTHONPATH=$PWD
    python -m benchmarks.float32_probe 64 OUT        # float64 on the CPU
    python -m benchmarks.float32_probe 32 OUT        # float32 on the CPU (and the GPU)
    python -m benchmarks.float32_probe compare OUT   # the largest differences from float64

Measured on an H200 (2026-11-27, before compiling.full_precision covered
``equilibrate_muscles``): ``sim_q`` 4.6e-4 rad from float64 on the GPU, 1.0e-6 on the
CPU, and 1.0e-6 on the GPU with ``JAX_DEFAULT_MATMUL_PRECISION=highest``.
"""

import sys

if sys.argv[1:2] == ["compare"]:
    import numpy as np

    d = sys.argv[2]
    ref = np.load(f"{d}/probe_64_cpu.npz")
    for other in ("32_cpu", "32_gpu"):
        try:
            x = np.load(f"{d}/probe_{other}.npz")
        except FileNotFoundError:
            continue
        print("==", other)
        for k in ref.files:
            if k in x.files and ref[k].size:
                err = np.abs(ref[k] - x[k]).max()
                print(f"{k:28s} max abs {err:.3e}  rel-to-max {err / max(np.abs(ref[k]).max(), 1e-30):.3e}")
    sys.exit(0)

import numpy as np
import jax

x64 = sys.argv[1] == "64"
jax.config.update("jax_enable_x64", x64)
import jax.numpy as jnp
import simjax as sj
from simjax.forward import Context

system = sj.load_osim(sj.models.path("gait10dof18musc")).build()
paths = tuple(system.model.paths(sj.Muscle))
rng = np.random.default_rng(0)
base = system.default_state()
qs = [np.asarray(base.q, float)] + [np.asarray(base.q, float) + rng.normal(0, 0.2, base.q.shape) for _ in range(3)]
us = [np.zeros(base.u.shape)] + [rng.normal(0, 1.0, base.u.shape) for _ in range(3)]


def parts(state):
    ctx = Context(system, state)
    acc = ctx.acc
    out = {"udot": acc.udot, "zdot": acc.zdot, "M": ctx.mass_matrix.ravel(), "applied": ctx.generalized_applied}
    for name in (
        "tendon_force",
        "fiber_velocity",
        "fiber_length",
        "active_fiber_force",
        "passive_fiber_force",
        "length",
        "lengthening_speed",
    ):
        try:
            out[name] = ctx.group_outputs(paths, name)
        except KeyError:
            pass
    return out


def run(device):
    res = {}
    with jax.default_device(device):
        f = jax.jit(parts)
        for k, (q, u) in enumerate(zip(qs, us)):
            st = base.replace(q=jnp.asarray(q, base.q.dtype), u=jnp.asarray(u, base.u.dtype))
            st = sj.equilibrate_muscles(system, st)
            for key, v in f(st).items():
                res[f"s{k}_{key}"] = np.asarray(v, float)
        s0 = sj.equilibrate_muscles(system, base)
        traj = sj.simulate(system, s0, 0.1, n_outputs=2, throw=False)
        res["sim_q"] = np.asarray(traj.q[-1], float)
        res["sim_steps"] = np.asarray(traj.stats["num_steps"] if hasattr(traj, "stats") and traj.stats else -1)
    return res


out = sys.argv[2]
devices = {"cpu": jax.devices("cpu")[0]}
if not x64 and jax.default_backend() == "gpu":
    devices["gpu"] = jax.devices("gpu")[0]
for name, dev in devices.items():
    np.savez(f"{out}/probe_{sys.argv[1]}_{name}.npz", **run(dev))
    print("done", sys.argv[1], name, flush=True)
