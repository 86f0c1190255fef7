"""Simulation benchmark (issue 5): 10 s of double_pendulum.osim in simjax next to OpenSim 4.6.

Prints, measured in the same run: the wall time of a 10 s simulation after
compilation next to OpenSim's Manager (Runge-Kutta-Merson) at the same accuracy
(goal <= 1x), the time per world of a batch of 1024 by ``simulate_batch`` on the cores
this process may use (goal <= 0.02x OpenSim's single run), and the compile time.

Run: ``python -m benchmarks.simulate [--accuracy 1e-5] [--batch 1024]``.
"""

from __future__ import annotations

import argparse

from benchmarks import suite
from simjax.batching import usable_cores


def main(argv=None) -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accuracy", type=float, default=1e-5)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--final-time", type=float, default=10.0)
    args = ap.parse_args(argv)
    system, om = suite.load("double_pendulum")
    state = suite.initial_state(system)
    T, acc = args.final_time, args.accuracy
    os_run = suite.opensim_simulation(om, T, acc)
    sj_run = suite.simjax_simulation(system, state, T, acc)
    batch = suite.simjax_batch(system, state, args.batch, T, acc)
    dq = max(abs(sj_run["q"][p] - os_run["q"][p]) for p in os_run["q"])
    print(f"double_pendulum.osim, {T:g} s, Runge-Kutta-Merson, accuracy {acc:g}")
    print(f"  OpenSim Manager.integrate      {os_run['wall'] * 1e3:9.2f} ms  ({os_run['steps']} steps)")
    print(
        f"  simjax simulate                {sj_run['wall'] * 1e3:9.2f} ms  ({sj_run['steps']} steps)   "
        f"ratio {sj_run['wall'] / os_run['wall']:.3f} (goal <= 1)"
    )
    print(
        f"  simjax batch of {args.batch} ({usable_cores()} cores), "
        f"per world {batch['per_world'] * 1e3:9.3f} ms   "
        f"ratio {batch['per_world'] / os_run['wall']:.4f} (goal <= 0.02)"
    )
    print(f"  compile: simulate {sj_run['compile']:.1f} s, vmapped batch {batch['compile']:.1f} s")
    print(f"  final coordinates, simjax - OpenSim: max {dq:.2e}")


if __name__ == "__main__":
    main()
