"""Muscle benchmark: the seed's bicep curl and gait10dof18musc.osim next to OpenSim 4.6.

1. The bicep curl (examples/bicep_curl.py), 10 s: simjax's wall time after
   compilation next to OpenSim's (RungeKuttaMerson at the same accuracy, same run;
   goal <= 0.5x), and the compile time of ``simulate`` (goal <= 10 s).
2. A batch of bicep curls with different excitation levels (the step's end
   value): time per world (goal <= 0.01x OpenSim's single run).
3. The right-hand side of gait10dof18musc.osim (10 dof, 18 Millard muscles): simjax
   evaluated inside one jitted loop (no Python dispatch) next to OpenSim's
   ``realizeAcceleration`` after setting a state (goal: faster).

Run: ``python -m benchmarks.muscles [--accuracy 1e-5] [--batch 1024] [--skip-batch]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import simjax as sj  # noqa: E402
from benchmarks.suite import best as _best, jit  # noqa: E402
from simjax.batching import usable_cores  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import bicep_curl  # noqa: E402

GAIT = os.environ.get("SIMJAX_GAIT10DOF", str(sj.models.path("gait10dof18musc")))


def opensim_bicep_curl(t_final, accuracy):
    """OpenSim's bicep curl (the API guide's code): ``(wall time, fiber force, elbow)``."""
    import opensim as osim

    osim.Logger.setLevelString("Off")
    m = osim.Model()
    m.setName("bicep_curl")
    h = osim.Body("humerus", 1, osim.Vec3(0), osim.Inertia(0))
    r = osim.Body("radius", 1, osim.Vec3(0), osim.Inertia(0))
    sh = osim.PinJoint("shoulder", m.getGround(), osim.Vec3(0), osim.Vec3(0), h, osim.Vec3(0, 1, 0), osim.Vec3(0))
    el = osim.PinJoint("elbow", h, osim.Vec3(0), osim.Vec3(0), r, osim.Vec3(0, 1, 0), osim.Vec3(0))
    b = osim.Millard2012EquilibriumMuscle("biceps", 200, 0.6, 0.55, 0)
    b.addNewPathPoint("origin", h, osim.Vec3(0, 0.8, 0))
    b.addNewPathPoint("insertion", r, osim.Vec3(0, 0.7, 0))
    brain = osim.PrescribedController()
    brain.addActuator(b)
    brain.prescribeControlForActuator("biceps", osim.StepFunction(0.5, 3, 0.3, 1))
    for x in (h, r):
        m.addBody(x)
    m.addJoint(sh)
    m.addJoint(el)
    m.addForce(b)
    m.addController(brain)
    s = m.initSystem()
    sh.getCoordinate().setLocked(s, True)
    el.getCoordinate().setValue(s, 0.5 * math.pi)
    m.equilibrateMuscles(s)

    def run():
        mgr = osim.Manager(m)
        mgr.setIntegratorAccuracy(accuracy)
        mgr.initialize(osim.State(s))
        return mgr, mgr.integrate(t_final)  # the state belongs to the manager

    wall = _best(run)
    mgr, s1 = run()
    m.realizeDynamics(s1)
    return wall, b.getFiberForce(s1), el.getCoordinate().getValue(s1)


def bicep(args):
    system = bicep_curl.build_model().build()
    state = bicep_curl.initial_state(system)
    kw = dict(accuracy=args.accuracy, n_outputs=2)
    t = time.perf_counter()
    traj = sj.simulate(system, state, args.t_final, **kw)
    jax.block_until_ready(traj.q)
    first = time.perf_counter() - t
    wall = _best(lambda: jax.block_until_ready(sj.simulate(system, state, args.t_final, **kw).q))
    os_wall, os_force, os_elbow = opensim_bicep_curl(args.t_final, args.accuracy)
    force = float(traj.output(bicep_curl.REPORT[0])[-1])
    elbow = float(traj.output(bicep_curl.REPORT[1])[-1])
    print(f"bicep curl, {args.t_final:g} s at accuracy {args.accuracy:g}")
    print(f"  compile (first call minus a run)  {first - wall:8.2f} s   (goal <= 10 s)")
    print(f"  simjax wall after compilation     {wall * 1e3:8.1f} ms  ({int(traj.num_steps)} steps)")
    print(f"  OpenSim wall                      {os_wall * 1e3:8.1f} ms")
    print(f"  ratio simjax / OpenSim            {wall / os_wall:8.3f}     (goal <= 0.5)")
    print(f"  final fiber force  simjax {force:.6f}  OpenSim {os_force:.6f}")
    print(f"  final elbow angle  simjax {elbow:.6f}  OpenSim {os_elbow:.6f}")
    return system, state, os_wall


class _Excitation(eqx.Module):
    """The biceps' excitation as ``controls(t, state)``: its controller's step function."""

    step: eqx.Module

    def __call__(self, t, state):
        return jnp.atleast_1d(self.step(t))


def excitation_batch(system, state, n: int):
    """``(states, controls)`` of ``n`` bicep curls from ``state`` whose excitations step
    to levels 0.4 .. 1 (the step's end value), for ``sj.simulate_batch``."""
    levels = jnp.linspace(0.4, 1.0, n)
    step = system.model.find("/controllerset/brain").control_functions[0]
    controls = jax.vmap(lambda level: _Excitation(eqx.tree_at(lambda f: f.end_value, step, level)))(levels)
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (n,) + a.shape), state), controls


def batch(args, system, state, os_wall):
    """1024 bicep curls whose excitation steps to different levels, by ``simulate_batch``
    (its chunks solved side by side on the cores this process may use)."""
    states, controls = excitation_batch(system, state, args.batch)

    def run():
        return sj.simulate_batch(
            system, states, args.t_final, controls, rtol=args.accuracy, atol=args.accuracy, n_outputs=2
        ).q

    t = time.perf_counter()
    jax.block_until_ready(run())
    first = time.perf_counter() - t
    wall = _best(lambda: jax.block_until_ready(run()), repeat=2)
    per = wall / args.batch
    print(f"batch of {args.batch} bicep curls (excitation levels 0.4 .. 1) on {usable_cores()} cores")
    print(f"  compile                           {first - wall:8.2f} s")
    print(f"  time per world                    {per * 1e3:8.3f} ms")
    print(f"  per world / OpenSim single run    {per / os_wall:8.4f}     (goal <= 0.01)")


def gait_rhs(args):
    import opensim as osim

    from simjax.forward import Context

    warnings.simplefilter("ignore")
    osim.Logger.setLevelString("Off")
    system = sj.load_osim(GAIT).build()
    state = system.default_state()
    state = sj.equilibrate_muscles(system, state, controls=jnp.full(len(system.actuator_names), 0.3))
    controls = jnp.full(len(system.actuator_names), 0.3)
    n = 2000

    @jit
    def loop(sys_, y):
        def body(i, y):
            st = state.with_y(y)
            acc = Context(sys_, st, controls).acc
            return y + 1e-12 * jnp.concatenate([acc.qdot, acc.udot, acc.zdot])

        return jax.lax.fori_loop(0, n, body, y)

    t = time.perf_counter()
    jax.block_until_ready(loop(system, state.y))
    compile_time = time.perf_counter() - t
    per = _best(lambda: jax.block_until_ready(loop(system, state.y))) / n
    m = osim.Model(GAIT)
    s = m.initSystem()
    m.equilibrateMuscles(s)
    cs = m.getCoordinateSet()
    c0 = cs.get(0)

    def osim_once():
        for _ in range(200):
            c0.setValue(s, c0.getValue(s), False)
            m.realizeAcceleration(s)

    os_per = _best(osim_once) / 200
    print("gait10dof18musc.osim right-hand side (10 dof, 18 Millard muscles)")
    print(f"  simjax in a jitted loop           {per * 1e6:8.1f} us  (compile {compile_time:.1f} s)")
    print(f"  OpenSim realizeAcceleration       {os_per * 1e6:8.1f} us")
    print(f"  ratio simjax / OpenSim            {per / os_per:8.3f}     (goal < 1)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--accuracy", type=float, default=1e-5)
    p.add_argument("--t-final", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--skip-batch", action="store_true")
    p.add_argument("--skip-gait", action="store_true")
    args = p.parse_args(argv)
    system, state, os_wall = bicep(args)
    if not args.skip_batch:
        batch(args, system, state, os_wall)
    if not args.skip_gait:
        gait_rhs(args)


if __name__ == "__main__":
    main()
