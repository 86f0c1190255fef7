"""Batched throughput of a shipped model on whatever device JAX uses (CPU or GPU).

For each batch size: a batch of worlds (the default state, speeds perturbed) simulated
for ``--final-time`` with Runge-Kutta-Merson at ``--accuracy`` by ``sj.simulate_batch``;
prints wall time, worlds x simulated seconds per wall second, and integrator
world-steps per second. A batch is meant to use the whole machine, so on a CPU this
script first widens its own CPU affinity to every core (the suite runs pinned to one)
and ``simulate_batch`` solves its chunks on all of them. Needs no OpenSim, so it runs on
a GPU machine as it is.

Run: ``python -m benchmarks.throughput [--model gait10dof18musc] [--batches 1,64,1024]
[--chunk-size N] [--float32] [--save-final DIR] [--json]`` (``--chunk-size``: worlds per
vmapped solve, default ``simulate_batch``'s; ``--float32``: the model and states in
single precision; ``--save-final``: the first 16 worlds' final coordinates of each batch
to ``DIR/q_final_<dtype>_<batch>.npy``, to compare devices; ``--json``: one JSON line
of figures by batch size, for the suite).
"""

from __future__ import annotations

import argparse
import json

from benchmarks import run_fresh, use_all_cores


def main(argv=None) -> None:
    """Run the throughput sweep and print its table (or its JSON line)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gait10dof18musc")
    ap.add_argument("--batches", default="1,64,1024")
    ap.add_argument("--final-time", type=float, default=0.1)
    ap.add_argument("--accuracy", type=float, default=1e-5)
    ap.add_argument("--chunk-size", type=int, default=None)
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--save-final", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    use_all_cores()  # before JAX starts its threads
    import jax
    import numpy as np

    from benchmarks import suite
    from simjax.batching import usable_cores

    if args.float32:  # after the suite's import, which asks for float64
        jax.config.update("jax_enable_x64", False)
    system = suite.load_simjax(args.model)
    state = suite.initial_state(system)
    dtype = state.q.dtype.name
    rows = {}
    if not args.json:
        print(
            f"{args.model}: {args.final_time:g} s per world, accuracy {args.accuracy:g}, {dtype}, "
            f"device {jax.devices()[0]}, {usable_cores()} cores"
        )
        print(f"{'batch':>7} {'wall s':>9} {'compile s':>10} {'world-s/s':>11} {'world-steps/s':>14}")
    for n in (int(b) for b in args.batches.split(",")):
        r = rows[str(n)] = suite.simjax_batch(system, state, n, args.final_time, args.accuracy, args.chunk_size)
        q_final = r.pop("q_final")
        if args.save_final:
            np.save(f"{args.save_final}/q_final_{dtype}_{n}.npy", q_final[:16])
        if not args.json:
            print(
                f"{n:>7} {r['wall']:>9.3f} {r['compile']:>10.1f} {r['throughput']:>11.2f} "
                f"{r['world_steps_per_s']:>14.0f}",
                flush=True,
            )
    if args.json:
        print(json.dumps({"model": args.model, "cores": usable_cores(), "batch": rows}))


def measure(name: str, batches, t_final: float, accuracy: float) -> dict:
    """Run this script in a fresh process on all cores. **Returns:** ``{"cores": n,
    "batch": {batch size (str): suite.simjax_batch's figures}}``."""
    return run_fresh(
        "benchmarks.throughput",
        "--model",
        name,
        "--json",
        "--batches",
        ",".join(map(str, batches)),
        "--final-time",
        str(t_final),
        "--accuracy",
        str(accuracy),
    )


if __name__ == "__main__":
    main()
