"""Measurements shared by the benchmark scripts: simjax next to OpenSim 4.6, same run.

Each function measures one thing on one model and returns plain numbers (seconds
unless named otherwise), so the scripts can print them and ``python -m benchmarks``
can gather them into a report. Compile times are always measured separately from
run times; run times are the best of a few repeats after compilation.
"""

from __future__ import annotations

import importlib
import os
import resource
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import simjax as sj  # noqa: E402
from simjax.io.osim import OsimWarning  # noqa: E402


def jit(fn):
    """``jax.jit`` with the XLA options simjax compiles its own programs with
    (``sj.compiler_options``), so a benchmark's program is compiled as ``simulate``'s.
    Only for programs called at top level: JAX refuses compiler options on a nested jit."""
    return jax.jit(fn, compiler_options=sj.compiler_options())


def best(fn, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls of ``fn()`` (s)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def timed(fn):
    """``(result, seconds)`` of one call of ``fn()`` (blocking on JAX arrays)."""
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def model_file(name: str) -> str:
    """The ``.osim`` file of a benchmark model: a shipped model's name, ``"large"`` (the
    synthetic large model of ``benchmarks.large_model``, 5 copies, written to
    ``benchmarks/results/``), or a path to any ``.osim`` file."""
    if name.endswith(".osim"):
        return name
    if name == "large":
        from benchmarks import large_model

        out = os.path.join(os.path.dirname(__file__), "results")
        os.makedirs(out, exist_ok=True)
        return large_model.write(os.path.join(out, "large_model.osim"))
    return str(sj.models.path(name))


def load_simjax(name: str):
    """The model ``name`` (see ``model_file``) loaded and built in simjax (no OpenSim needed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        return sj.load_osim(model_file(name)).build()


def load(name: str):
    """The model ``name`` (see ``model_file``) in simjax (built) and OpenSim, from the same file.

    **Returns:** ``(system, opensim_model)``.
    """
    import opensim

    system = load_simjax(name)
    om = opensim.Model(model_file(name))
    om.setUseVisualizer(False)
    om.initSystem()
    return system, om


def initial_state(system):
    """The default state, with muscles equilibrated when the model has any."""
    state = system.default_state()
    if state.z.size:
        state = sj.equilibrate_muscles(system, state)
    return state


def solve_args(system, state):
    """The arguments ``simulate`` passes its vector field (``simjax.simulate._vector_field(t,
    y, args)``) for a solve from ``state`` without controls: the model, the discrete
    variables and the state-independent parameters prepared once."""
    simulation = importlib.import_module("simjax.simulate")  # the module, which the function shadows
    return simulation._Packed.of(system, None, state.d, simulation.Context(system, state).prepared())


def _opensim_manager(om, accuracy: float):
    """A Runge-Kutta-Merson ``Manager`` at ``accuracy``, initialized at the default,
    equilibrated state (the ``initSystem`` and equilibrium are not timed by callers)."""
    import opensim

    s = om.initSystem()
    if om.getMuscles().getSize():
        om.equilibrateMuscles(s)
    t = time.perf_counter()
    man = opensim.Manager(om)
    man.setIntegratorMethod(opensim.Manager.IntegratorMethod_RungeKuttaMerson)
    man.setIntegratorAccuracy(accuracy)
    man.initialize(s)
    return man, t


def _opensim_q(om, s) -> dict:
    """OpenSim's coordinate values in state ``s``, by path."""
    cs = om.getCoordinateSet()
    return {cs.get(i).getAbsolutePathString(): cs.get(i).getValue(s) for i in range(cs.getSize())}


def _simjax_q(system, traj) -> dict:
    """simjax's final coordinate values of ``traj``, by path."""
    return {p: float(traj.q[-1, c.q]) for p, c in system.topology.tree.coordinates.items() if c.q >= 0}


def largest_difference(q: dict, reference: dict) -> float:
    """The largest difference of the coordinate values ``q`` from ``reference`` (both by
    coordinate path; rad or m), over the reference's coordinates that ``q`` has."""
    return max(abs(q[p] - reference[p]) for p in reference if p in q)


def opensim_simulation(om, t_final: float, accuracy: float, repeat: int = 3) -> dict:
    """OpenSim's Manager (Runge-Kutta-Merson) from the default, equilibrated state.

    Only ``Manager.initialize`` and ``integrate`` are timed: ``initSystem`` and the
    muscle equilibrium are OpenSim's counterparts of simjax's build and compile, which
    are left out of simjax's times too.

    **Returns:** ``{"wall": s, "steps": n, "q": final coordinate values by path}``.
    """

    def run():
        man, t = _opensim_manager(om, accuracy)
        s = man.integrate(t_final)
        return man, s, time.perf_counter() - t

    wall = min(run()[2] for _ in range(repeat))
    man, s, _ = run()
    return {"wall": wall, "steps": int(man.getStatesTable().getNumRows()) - 1, "q": _opensim_q(om, s)}


def simjax_simulation(system, state, t_final: float, accuracy: float, repeat: int = 3) -> dict:
    """``sj.simulate`` (RKM) at the same accuracy.

    **Returns:** ``{"wall": s, "compile": s (first call), "steps": n, "q": final values by
    coordinate path}``.
    """

    def run():
        return sj.simulate(system, state, t_final, accuracy=accuracy, n_outputs=2)

    traj, first = timed(run)
    wall = best(lambda: jax.block_until_ready(run().q), repeat)
    return {"wall": wall, "compile": max(first - wall, 0.0), "steps": int(traj.num_steps), "q": _simjax_q(system, traj)}


def agreement(
    system,
    state,
    om,
    accuracy: float,
    ends=tuple(np.linspace(0.5, 1.0, 11)),
    spreads=(1.0, 1.01, 1.02),
    reference_accuracy: float = 1e-9,
) -> dict:
    """How close simjax's and OpenSim's runs at ``accuracy`` come to a tight-tolerance
    reference solution (OpenSim's Runge-Kutta-Merson at ``reference_accuracy``).

    Each engine runs from the default, equilibrated state to each end time of ``ends``
    (s) at each accuracy ``accuracy * spreads`` (a fresh run each time, as a user's
    run to that time), and the error of a run is the largest difference of its final
    coordinates from the reference's at that time (rad or m). One run's error is a poor
    statistic: the two engines take the same steps at first, but the step sizes,
    chosen from error estimates computed with cancellation, drift apart at rounding
    level and the error of a run then changes by several times with a 1% change of
    accuracy; the median over all runs is steadier.

    **Returns:** ``{"opensim": median error, "simjax": median error, "ratio": simjax's
    median / OpenSim's, "runs": number of runs per engine, "reference_accuracy"}``.
    """
    man, _ = _opensim_manager(om, reference_accuracy)
    reference = [_opensim_q(om, man.integrate(float(t))) for t in ends]

    os_errors, sj_errors = [], []
    for spread in spreads:
        for t, ref in zip(ends, reference):
            man, _ = _opensim_manager(om, accuracy * spread)
            os_errors.append(largest_difference(_opensim_q(om, man.integrate(float(t))), ref))
            traj = sj.simulate(system, state, float(t), accuracy=accuracy * spread, n_outputs=2)
            sj_errors.append(largest_difference(_simjax_q(system, traj), ref))
    os_median, sj_median = float(np.median(os_errors)), float(np.median(sj_errors))
    ratio = sj_median / os_median if os_median > 0 else (1.0 if sj_median == 0 else float("inf"))
    return {
        "opensim": os_median,
        "simjax": sj_median,
        "ratio": ratio,
        "runs": len(os_errors),
        "reference_accuracy": reference_accuracy,
    }


def opensim_rhs(om, n: int = 2000) -> float:
    """One ``realizeAcceleration`` after changing the time (so nothing is cached) (s)."""
    s = om.initSystem()
    if om.getMuscles().getSize():
        om.equilibrateMuscles(s)

    def run():
        for i in range(n):
            s.setTime(1e-6 * i)
            om.realizeAcceleration(s)

    return best(run, 3) / n


def simjax_rhs(system, state, n: int = 2000) -> dict:
    """The right-hand side (udot and zdot) per evaluation: one jitted call from Python,
    and ``n`` evaluations inside one jitted loop (the cost inside a simulation).

    **Returns:** ``{"call": s, "in_jit": s}``.
    """

    def rhs(system, state):
        acc = sj.accelerations(system, state)
        return acc.udot, acc.zdot

    one = jit(rhs)

    @jit
    def loop(system, state):
        def body(i, carry):
            # every stage's input changes each iteration, so nothing is hoisted out of the loop
            eps = 1e-12 * carry[0][0]
            st = state.replace(t=state.t + 1e-9 * i, q=state.q + eps, u=state.u + eps, z=state.z + eps)
            return rhs(system, st)

        return jax.lax.fori_loop(0, n, body, rhs(system, state))

    jax.block_until_ready(one(system, state))
    jax.block_until_ready(loop(system, state))
    call = best(lambda: jax.block_until_ready(one(system, state)), 5)
    in_jit = best(lambda: jax.block_until_ready(loop(system, state)), 3) / n
    return {"call": call, "in_jit": in_jit}


def perturbed_states(system, state, n: int, scale: float = 0.05, seed: int = 0):
    """``n`` copies of ``state`` with speeds perturbed by ``scale`` (a batch of worlds)."""
    rng = np.random.default_rng(seed)
    batch = jax.tree.map(lambda a: jnp.broadcast_to(a, (n,) + a.shape), state)
    return batch.replace(u=batch.u + scale * jnp.asarray(rng.standard_normal(batch.u.shape)))


def simjax_batch(system, state, n: int, t_final: float, accuracy: float, chunk_size: int | None = None) -> dict:
    """A batch of ``n`` worlds simulated for ``t_final`` by ``sj.simulate_batch`` (vmapped
    chunks of ``chunk_size`` worlds, by default ``simulate_batch``'s, solved side by side
    on the cores this process may use).

    **Returns:** ``{"wall": s, "compile": s, "per_world": s, "throughput": world-seconds
    simulated per wall second, "world_steps_per_s": integrator steps of all worlds per
    wall second, "q_final": the worlds' final coordinates (n, nq)}``.
    """
    states = perturbed_states(system, state, n)

    def run():
        traj = sj.simulate_batch(system, states, t_final, accuracy=accuracy, n_outputs=2, chunk_size=chunk_size)
        return traj.q, traj.num_steps

    (q, steps), first = timed(run)
    wall = best(lambda: jax.block_until_ready(run()), 1 if n > 64 else 3)
    return {
        "wall": wall,
        "compile": max(first - wall, 0.0),
        "per_world": wall / n,
        "throughput": n * t_final / wall,
        "world_steps_per_s": float(np.sum(np.asarray(steps))) / wall,
        "q_final": np.asarray(q[:, -1]),
    }


def simjax_gradient(system, state, t_final: float, accuracy: float, repeat: int = 3) -> dict:
    """Reverse-mode gradient of a loss of the final state w.r.t. the initial state, and
    the forward run it is compared with, timed alternately (this machine's speed drifts
    by 10-40% between minutes, so a ratio of runs timed apart drifts with it).

    **Returns:** ``{"wall": s, "forward": s, "compile": s}`` (each wall time the best
    of ``repeat``).
    """

    def loss(q0):
        traj = sj.simulate(system, state.replace(q=q0), t_final, accuracy=accuracy, n_outputs=2)
        return jnp.sum(traj.q[-1] ** 2) + jnp.sum(traj.u[-1] ** 2)

    def forward():
        return sj.simulate(system, state, t_final, accuracy=accuracy, n_outputs=2).q

    grad = jit(jax.grad(loss))
    _, first = timed(lambda: grad(state.q))
    timed(forward)
    walls, forwards = [], []
    for _ in range(repeat):
        forwards.append(timed(forward)[1])
        walls.append(timed(lambda: grad(state.q))[1])
    wall = min(walls)
    return {"wall": wall, "forward": min(forwards), "compile": max(first - wall, 0.0)}
