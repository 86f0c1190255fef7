"""Batched throughput of a shipped model on whatever device JAX uses (CPU or GPU).

For each batch size: a vmapped batch of worlds (the default state, speeds perturbed)
simulated for ``--final-time`` with Runge-Kutta-Merson at ``--accuracy``; prints wall
time, worlds x simulated seconds per wall second, and integrator world-steps per
second. Needs no OpenSim, so it runs on a GPU machine as it is.

Run: ``python -m benchmarks.throughput [--model gait10dof18musc] [--batches 1,64,1024]``.
"""

from __future__ import annotations

import argparse

import jax

from benchmarks import suite


def main(argv=None) -> None:
    """Run the throughput sweep and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gait10dof18musc")
    ap.add_argument("--batches", default="1,64,1024")
    ap.add_argument("--final-time", type=float, default=0.1)
    ap.add_argument("--accuracy", type=float, default=1e-5)
    args = ap.parse_args(argv)
    system = suite.load_simjax(args.model)
    state = suite.initial_state(system)
    print(f"{args.model}: {args.final_time:g} s per world, accuracy {args.accuracy:g}, device {jax.devices()[0]}")
    print(f"{'batch':>7} {'wall s':>9} {'compile s':>10} {'world-s/s':>11} {'world-steps/s':>14}")
    for n in (int(b) for b in args.batches.split(",")):
        r = suite.simjax_batch(system, state, n, args.final_time, args.accuracy)
        print(f"{n:>7} {r['wall']:>9.3f} {r['compile']:>10.1f} {r['throughput']:>11.2f} "
              f"{r['world_steps_per_s']:>14.0f}", flush=True)


if __name__ == "__main__":
    main()
