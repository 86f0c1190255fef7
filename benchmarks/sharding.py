"""Throughput of gait10dof18musc batches sharded over 1, 2 and 4 forced CPU devices
(issue 42 item 6): ``python -m benchmarks.sharding [--devices 1,2,4] [--batch 64]
[--final-time 0.05] [--model gait10dof18musc]``.

Each device count runs in its own fresh process on all of the machine's cores, with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``: a batch of worlds (the default,
equilibrated state, speeds perturbed: ``suite.perturbed_states``) simulated for
``--final-time`` with Runge-Kutta-Merson at ``--accuracy`` by
``simulate_batch(..., devices=jax.devices())``, which shards the batch axis over the N
devices (``simjax.batching.batch_mesh``; one device: a mesh of one). Prints, per device
count, the wall time after compilation (best of ``--repeat``), worlds per second,
world-seconds simulated per wall second, and the scaling efficiency against one device
(throughput / (N x one device's)), then one JSON line. Forced host devices share the
machine's cores, so efficiency past the core count is bounded by it. The default is a
short run (64 worlds x 0.05 s); on a lent GPU machine ``--devices`` of the GPUs' count
is not what this script measures (``benchmarks.throughput`` is).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchmarks import use_all_cores

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _one(model: str, batch: int, final_time: float, accuracy: float, repeat: int) -> dict:
    """In this process (started with the forced device count): the batch's figures."""
    use_all_cores()
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import simjax as sj
    from benchmarks import suite

    system = suite.load_simjax(model)
    state = suite.initial_state(system)
    states = suite.perturbed_states(system, state, batch)
    devices = jax.devices()

    def run():
        traj = sj.simulate_batch(system, states, final_time, accuracy=accuracy, n_outputs=2, devices=devices)
        return jax.block_until_ready((traj.q, traj.num_steps, traj.result))

    t = time.perf_counter()
    q, steps, result = run()
    first = time.perf_counter() - t
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        walls.append(time.perf_counter() - t)
    wall = min(walls)
    return {
        "devices": len(devices),
        "batch": batch,
        "wall": wall,
        "compile": max(first - wall, 0.0),
        "worlds_per_s": batch / wall,
        "throughput": batch * final_time / wall,
        "world_steps_per_s": float(np.sum(np.asarray(steps))) / wall,
        "failed": int(np.sum(np.asarray(result) != 0)),
        "q_final": np.asarray(q[:, -1]).tolist(),
    }


def measure(
    devices=(1, 2, 4),
    batch: int = 64,
    final_time: float = 0.05,
    accuracy: float = 1e-5,
    model: str = "gait10dof18musc",
    repeat: int = 2,
) -> list:
    """Each device count in a fresh process.

    **Returns:** one dict a device count (see ``_one``), with ``"efficiency"`` against
    the first count's throughput per device and ``"max_diff"``, the largest difference
    of the final coordinates from the first count's (the sharded batch must equal it).
    """
    rows = []
    for n in devices:
        env = dict(os.environ)
        flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform")]
        env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={n}"])
        env["JAX_PLATFORMS"] = "cpu"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.sharding",
                "--one",
                "--batch",
                str(batch),
                "--final-time",
                str(final_time),
                "--accuracy",
                str(accuracy),
                "--model",
                model,
                "--repeat",
                str(repeat),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{n} devices: {out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = rows[0]
    for r in rows:
        r["efficiency"] = r["throughput"] / (base["throughput"] * r["devices"] / base["devices"])
        r["max_diff"] = max(
            (abs(a - b) for qa, qb in zip(r["q_final"], base["q_final"]) for a, b in zip(qa, qb)), default=0.0
        )
    return rows


def main(argv=None) -> None:
    """Measure and print (see the module's docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="1,2,4")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--final-time", type=float, default=0.05)
    ap.add_argument("--accuracy", type=float, default=1e-5)
    ap.add_argument("--model", default="gait10dof18musc")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # (what each process runs)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.model, args.batch, args.final_time, args.accuracy, args.repeat)))
        return
    rows = measure(
        tuple(int(n) for n in args.devices.split(",")),
        args.batch,
        args.final_time,
        args.accuracy,
        args.model,
        args.repeat,
    )
    print(
        f"{args.model}: batch of {args.batch} worlds x {args.final_time:g} s, accuracy {args.accuracy:g}, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"{'devices':>7} {'wall s':>8} {'compile s':>9} {'worlds/s':>9} {'world-s/s':>9} {'efficiency':>10} "
        f"{'max |dq| vs 1':>13}"
    )
    for r in rows:
        print(
            f"{r['devices']:>7} {r['wall']:>8.3f} {r['compile']:>9.1f} {r['worlds_per_s']:>9.1f} "
            f"{r['throughput']:>9.2f} {r['efficiency']:>10.2f} {r['max_diff']:>13.2e}"
        )
    print(json.dumps([{k: v for k, v in r.items() if k != "q_final"} for r in rows]))


if __name__ == "__main__":
    main()
