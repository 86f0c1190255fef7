"""Contact benchmark: bouncing_block.osim in simjax next to OpenSim 4.6, same run.

1. Per-call cost of the accelerations (contact, springs, bushing, limit force and
   point-on-line constraints included): OpenSim's ``realizeAcceleration`` after
   setting the state, against simjax's jitted ``accelerations`` for one state and
   vmapped over 1024 states (time per world).
2. A 1 s simulation from the model's default state with both engines' Runge-Kutta-
   Merson at the same accuracy: wall time, ratio (goal <= 0.5) and final-state
   difference.
3. A batch of 1024 drops from random heights and orientations by ``simulate_batch``,
   on the cores this process may use (time per world).

Run: ``python -m benchmarks.contact [--accuracy 1e-5] [--batch 1024] [--skip-batch]``.
Compile times are reported separately and excluded from the timings.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import simjax as sj  # noqa: E402
import simjax.io.osim  # noqa: E402,F401  (registers forces and contact with the .osim reader)
from benchmarks import suite  # noqa: E402
from benchmarks.suite import jit  # noqa: E402

MODEL = os.environ.get("SIMJAX_BOUNCING_BLOCK", str(sj.models.path("bouncing_block")))


def _per_call(fn, calls: int = 200) -> float:
    """Best time of one call of ``fn()`` (s), from ``calls`` calls in a row (best of 5)."""
    return suite.best(lambda: [fn() for _ in range(calls)], repeat=5) / calls


def _coordinate_indices(system, names):
    tree = system.topology.tree
    paths = [system.coordinate_path(n) for n in names]
    return np.asarray([tree.coordinates[p].q for p in paths]), np.asarray([tree.coordinates[p].u for p in paths])


def _random_states(system, names, n, seed=0):
    rng = np.random.default_rng(seed)
    qi, ui = _coordinate_indices(system, names)
    Q = rng.uniform(-0.5, 0.5, (n, len(names)))
    U = rng.uniform(-1.5, 1.5, (n, len(names)))
    Q[:, names.index("yTranslation")] = rng.uniform(0.6, 1.1, n)
    base = system.default_state()
    q = jnp.broadcast_to(base.q, (n, base.q.size)).at[:, qi].set(Q)
    u = jnp.broadcast_to(base.u, (n, base.u.size)).at[:, ui].set(U)
    states = sj.State(t=jnp.zeros(n), q=q, u=u, z=jnp.zeros((n, base.z.size)), d=jnp.zeros((n, base.d.size)))
    return states, Q, U


def bench_calls(system, om, s, names):
    import opensim as osim  # noqa: F401

    print("\n1. accelerations per call (contact + passive forces + constraints)")
    states, Q, U = _random_states(system, names, 1024)
    cs = om.getCoordinateSet()
    coords = [cs.get(n) for n in names]

    def osim_call(i=[0]):
        k = i[0] % len(Q)
        i[0] += 1
        for c, q, u in zip(coords, Q[k], U[k]):
            c.setValue(s, float(q), False)
            c.setSpeedValue(s, float(u))
        om.realizeAcceleration(s)

    t_os = _per_call(osim_call)
    one = jax.tree_util.tree_map(lambda x: x[0], states)
    f1 = jit(lambda st: sj.accelerations(system, st).udot)
    _, c1 = suite.timed(lambda: f1(one))
    t_sj = _per_call(lambda: f1(one).block_until_ready())
    fb = jit(jax.vmap(lambda st: sj.accelerations(system, st).udot))
    _, cb = suite.timed(lambda: fb(states))
    t_b = suite.best(lambda: fb(states).block_until_ready(), repeat=5) / len(Q)
    print(f"   OpenSim set state + realizeAcceleration: {t_os * 1e6:9.1f} us/call")
    print(
        f"   simjax jitted accelerations (1 state):   {t_sj * 1e6:9.1f} us/call   ratio {t_sj / t_os:6.2f}"
        f"   (compile {c1:.1f} s)"
    )
    print(
        f"   simjax vmapped over 1024 states:         {t_b * 1e6:9.1f} us/world  ratio {t_b / t_os:6.2f}"
        f"   (compile {cb:.1f} s)"
    )


def _osim_final(om, names, accuracy):
    """OpenSim's 1 s simulation: final q and u, and the seconds of ``Manager.initialize``
    and ``integrate`` (``initSystem``, like simjax's build and compile, is not timed)."""
    import opensim as osim

    s = om.initSystem()
    t = time.perf_counter()
    man = osim.Manager(om)
    man.setIntegratorMethod(osim.Manager.IntegratorMethod_RungeKuttaMerson)
    man.setIntegratorAccuracy(accuracy)
    s.setTime(0.0)
    man.initialize(s)
    s2 = man.integrate(1.0)
    wall = time.perf_counter() - t
    cs = om.getCoordinateSet()
    return (
        np.array([cs.get(n).getValue(s2) for n in names]),
        np.array([cs.get(n).getSpeedValue(s2) for n in names]),
        wall,
    )


def bench_simulation(system, om, names, accuracy):
    print(f"\n2. 1 s simulation from the default state (Runge-Kutta-Merson, accuracy {accuracy:g})")
    t_os = min(_osim_final(om, names, accuracy)[2] for _ in range(5))
    q_os, u_os, _ = _osim_final(om, names, accuracy)
    state = system.default_state()
    project = True

    def run():
        return sj.simulate(system, state, 1.0, accuracy=accuracy, project=project, n_outputs=2)

    t0 = time.perf_counter()
    try:
        traj = run()
    except ImportError as e:  # projection not available yet
        project = False
        print(f"   (simjax without constraint projection: {e})")
        t0 = time.perf_counter()
        traj = run()
    jax.block_until_ready(traj.q)
    comp = time.perf_counter() - t0
    t_sj = suite.best(lambda: jax.block_until_ready(run().q), repeat=5)  # as many as OpenSim
    qi, ui = _coordinate_indices(system, names)
    q_sj, u_sj = np.asarray(traj.q[-1])[qi], np.asarray(traj.u[-1])[ui]
    print(f"   OpenSim Manager.integrate:  {t_os * 1e3:8.1f} ms")
    print(
        f"   simjax simulate:            {t_sj * 1e3:8.1f} ms   ratio {t_sj / t_os:5.2f} (goal <= 0.5)   "
        f"(compile {comp:.1f} s)"
    )
    print(
        f"   final state difference: q {np.abs(q_sj - q_os).max():.2e}, u {np.abs(u_sj - u_os).max():.2e} "
        f"(accuracy {accuracy:g})"
    )


def bench_batch(system, names, n, accuracy):
    print(f"\n3. vmapped batch of {n} drops, 1 s each (heights 1.0-1.4 m, tilts within 0.2 rad)")
    rng = np.random.default_rng(1)
    base = system.default_state()
    qi, _ = _coordinate_indices(system, names)
    q = np.tile(np.asarray(base.q), (n, 1))
    q[:, qi[names.index("yTranslation")]] = rng.uniform(1.0, 1.4, n)
    q[:, qi[names.index("zRotation")]] += rng.uniform(-0.2, 0.2, n)
    q[:, qi[names.index("pin1_rot")]] += rng.uniform(-0.2, 0.2, n)
    states = sj.State(
        t=jnp.zeros(n),
        q=jnp.asarray(q),
        u=jnp.zeros((n, base.u.size)),
        z=jnp.zeros((n, base.z.size)),
        d=jnp.zeros((n, base.d.size)),
    )

    def run():
        return sj.simulate_batch(system, states, 1.0, accuracy=accuracy, n_outputs=2)

    traj, comp = suite.timed(run)
    t = suite.best(lambda: jax.block_until_ready(run().q), repeat=1)
    steps = np.asarray(getattr(traj, "num_steps", np.zeros(n)))
    print(
        f"   total {t:.2f} s, {t / n * 1e3:.2f} ms per world; steps per world: median {np.median(steps):.0f}, "
        f"max {steps.max():.0f}   (first call incl. compile {comp:.1f} s)"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--accuracy", type=float, default=1e-5)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--skip-batch", action="store_true")
    args = p.parse_args(argv)
    import opensim as osim

    osim.Logger.setLevelString("Off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sj.load_osim(MODEL)
    system = model.build()
    om = osim.Model(MODEL)
    s = om.initSystem()
    names = [om.getCoordinateSet().get(i).getName() for i in range(om.getCoordinateSet().getSize())]
    print(
        f"bouncing_block: {system.tree.nu} speeds, {len(system.z_names)} auxiliary states; jax "
        f"{jax.__version__} on {jax.devices()[0].platform}; opensim {osim.__version__}"
    )
    bench_calls(system, om, s, names)
    if hasattr(sj, "simulate"):
        bench_simulation(system, om, names, args.accuracy)
        if not args.skip_batch:
            bench_batch(system, names, args.batch, args.accuracy)
    else:
        print("\n(simjax.simulate is not available: simulation benchmarks skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
