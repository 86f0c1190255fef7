"""The batched goals on whatever device JAX uses, in one run: what a lent GPU measures.

The issues' batched goals compare simjax's time per world (or per state) with the
single-run time of a reference engine: forward dynamics vmapped over states against
Pinocchio's ``aba`` (issue 3), batches of 10 s double-pendulum and bicep-curl
simulations against OpenSim's single run (issues 5 and 6); gait10dof18musc's
world-steps per second (issue 10) are ``benchmarks.throughput``'s. A GPU machine here has neither OpenSim nor
Pinocchio (OpenSim's wheel alone is larger than what may travel to it), so the
references are read from a JSON file measured on a CPU machine with both installed
(``--measure-reference``), and the report names both machines.

Run: ``python -m benchmarks.device [--reference benchmarks/recorded/reference.json]
[--states 4096,65536] [--worlds 1024,8192] [--json OUT]``; on a CPU machine with
OpenSim and Pinocchio, ``python -m benchmarks.device --measure-reference OUT`` writes
the reference file (Pinocchio's ``aba`` per model, OpenSim's 10 s double pendulum and
bicep curl at accuracy 1e-5).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import simjax as sj  # noqa: E402
from benchmarks import dynamics, muscles, suite  # noqa: E402

_T_FINAL = 10.0
_ACCURACY = 1e-5
_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded", "reference.json")


def _wall(fn, repeat=3):
    """Best wall time of ``fn()`` (its outputs waited for), after one warm-up call."""
    suite.timed(fn)
    return suite.best(lambda: jax.block_until_ready(fn()), repeat)


def forward_dynamics_per_state(n_states) -> dict:
    """Seconds per state of forward dynamics (CRBA + Cholesky, and ABA) vmapped over
    ``n`` random states in one call, by model and batch size."""
    rows = {}
    for label, spec in dynamics.MODELS:
        system, params, crba, aba = dynamics.core_functions(dynamics.simjax_model(spec()))
        tree = system.topology.tree
        for n in n_states:
            states = dynamics.random_states(tree, n, seed=1)
            for name, fn in (("crba", crba), ("aba", aba)):
                f = jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, 0)))
                rows[f"{label}|{name}|{n}"] = _wall(lambda f=f: f(params, *states)) / n
    return rows


def batches_per_world(worlds) -> dict:
    """Seconds per world of batches of 10 s simulations: the double pendulum (speeds
    perturbed) and the bicep curl (excitation steps to levels 0.4 .. 1), by batch size."""
    rows = {}
    pendulum = suite.load_simjax("double_pendulum")
    bicep = muscles.bicep_curl.build_model().build()
    for n in worlds:
        r = suite.simjax_batch(pendulum, suite.initial_state(pendulum), n, _T_FINAL, _ACCURACY)
        rows[f"double_pendulum|{n}"] = r["per_world"]
        states, controls = muscles.excitation_batch(bicep, muscles.bicep_curl.initial_state(bicep), n)
        run = lambda: sj.simulate_batch(bicep, states, _T_FINAL, controls, accuracy=_ACCURACY, n_outputs=2).q  # noqa: E731
        rows[f"bicep_curl|{n}"] = _wall(run, repeat=1) / n
    return rows


def measure_reference(path: str) -> None:
    """Pinocchio's ``aba`` per model and OpenSim's 10 s runs, written to ``path``."""
    import pinocchio as pin

    ref = {"machine": _machine(), "date": datetime.date.today().isoformat(), "pinocchio_aba": {}}
    for label, spec in dynamics.MODELS:
        _, pm = dynamics.build(spec())
        data = pm.createData()
        q = pin.integrate(pm, pin.neutral(pm), 0.3 * np.ones(pm.nv))
        v = tau = np.ones(pm.nv)
        ref["pinocchio_aba"][label] = dynamics._median_time(lambda: pin.aba(pm, data, q, v, tau), 5, 2000)
    _, om = suite.load("double_pendulum")
    ref["opensim_double_pendulum"] = suite.opensim_simulation(om, _T_FINAL, _ACCURACY)["wall"]
    ref["opensim_bicep_curl"] = muscles.opensim_bicep_curl(_T_FINAL, _ACCURACY)[0]
    with open(path, "w") as f:
        json.dump(ref, f, indent=1)
    print(json.dumps(ref, indent=1))


def _machine() -> str:
    return f"{platform.platform()}, {os.cpu_count()} CPUs, JAX {jax.__version__} on {jax.devices()[0]}"


def main(argv=None) -> None:
    """Measure the batched figures and print them against the reference engines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=_REFERENCE)
    ap.add_argument("--measure-reference", metavar="OUT", default=None)
    ap.add_argument("--states", default="4096,65536")
    ap.add_argument("--worlds", default="1024,8192")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.measure_reference:
        measure_reference(args.measure_reference)
        return
    with open(args.reference) as f:
        ref = json.load(f)
    n_states = [int(n) for n in args.states.split(",")]
    worlds = [int(n) for n in args.worlds.split(",")]
    print(f"this run: {_machine()}\nreferences: {ref['machine']}, {ref['date']}")
    fd = forward_dynamics_per_state(n_states)
    print("\nforward dynamics vmapped over N states, per state (goal <= 1x Pinocchio aba)")
    for label, _ in dynamics.MODELS:
        pin_t = ref["pinocchio_aba"][label]
        for n in n_states:
            crba, aba = fd[f"{label}|crba|{n}"], fd[f"{label}|aba|{n}"]
            print(
                f"  {label:14s} N={n:6d}  crba {crba * 1e9:9.1f} ns  aba {aba * 1e9:9.1f} ns  "
                f"Pinocchio {pin_t * 1e9:7.1f} ns  ratio {min(crba, aba) / pin_t:.4f}"
            )
    sims = batches_per_world(worlds)
    print(f"\n{_T_FINAL:g} s simulations at accuracy {_ACCURACY:g}, per world of a batch")
    for name, key, goal in (("double pendulum", "double_pendulum", 0.02), ("bicep curl", "bicep_curl", 0.01)):
        os_t = ref[f"opensim_{key}"]
        for n in worlds:
            per = sims[f"{key}|{n}"]
            print(
                f"  {name:15s} {n:6d} worlds  {per * 1e3:9.4f} ms  OpenSim {os_t * 1e3:7.1f} ms  "
                f"ratio {per / os_t:.5f} (goal <= {goal})"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"machine": _machine(), "reference": ref, "forward_dynamics": fd, "simulations": sims}, f, indent=1
            )


if __name__ == "__main__":
    main()
