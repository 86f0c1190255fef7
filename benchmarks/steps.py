"""Wall time, device events and device busy time per integrator step of batched
simulations: where a GPU's batch of small models loses its time.

A batch of a few thousand small worlds gives each kernel little arithmetic, so a step
costs what the host takes to launch its kernels and copies, and the waits for the
loops' conditions. For the bicep curl (excitation levels 0.4 .. 1) and the double
pendulum (speeds perturbed), this script times a ``--final-time`` run of ``--batch``
worlds by ``sj.simulate_batch``, then profiles a ``--profile-time`` run and prints the
device events (kernels and memory copies) a step, the device's busy time, and the
events that run most often. Needs no OpenSim, so it runs on a GPU machine as it is; on
a CPU the profile counts XLA's operations instead.

Run: ``python -m benchmarks.steps [--batch 1024] [--final-time 10] [--profile-time 0.5]
[--top 15]``.
"""

from __future__ import annotations

import argparse
import tempfile

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import simjax as sj  # noqa: E402
from benchmarks import kernels, muscles, suite  # noqa: E402

_ACCURACY = 1e-5


def batches(n: int) -> dict:
    """``{name: run(t_final)}``: the two batched simulations, each returning its
    ``Trajectory``."""
    bicep = muscles.bicep_curl.build_model().build()
    states, controls = muscles.excitation_batch(bicep, muscles.bicep_curl.initial_state(bicep), n)
    pendulum = suite.load_simjax("double_pendulum")
    p_states = suite.perturbed_states(pendulum, suite.initial_state(pendulum), n)
    return {
        "bicep curl": lambda t: sj.simulate_batch(bicep, states, t, controls, accuracy=_ACCURACY, n_outputs=2),
        "double pendulum": lambda t: sj.simulate_batch(pendulum, p_states, t, accuracy=_ACCURACY, n_outputs=2),
    }


def profile(run, top: int) -> None:
    """Print the device events a step of ``run()`` and the ``top`` most frequent (on a
    CPU, of the XLA operations it ran). One call before the traced one compiles it,
    if it needs compiling, and gives the step count."""
    steps = int(jnp.max(jax.block_until_ready(run()).num_steps))
    folder = tempfile.mkdtemp(prefix="simjax-steps-")
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        jax.block_until_ready(run())
    totals, counts = kernels._kernel_totals(folder)
    print(
        f"    profile of {steps} steps: {sum(counts.values()) / steps:.0f} device events and "
        f"{sum(totals.values()) / steps:.1f} us of device time a step"
    )
    for name, count in counts.most_common(top):
        print(f"    {count / steps:7.1f} a step {totals[name] / count:7.2f} us  {name[:90]}")


def main(argv=None) -> None:
    """Time and profile the batched runs; print per-world and per-step figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--final-time", type=float, default=10.0)
    ap.add_argument("--profile-time", type=float, default=0.5)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    print(f"batches of {args.batch} worlds, accuracy {_ACCURACY:g}, device {jax.devices()[0]}")
    for name, run in batches(args.batch).items():
        traj, compile_and_run = suite.timed(lambda: run(args.final_time))
        wall = suite.best(lambda: jax.block_until_ready(run(args.final_time)), 2)
        steps = int(jnp.max(traj.num_steps))
        print(
            f"  {name}, {args.final_time:g} s: {wall:.3f} s ({wall / args.batch * 1e3:.4f} ms a world, "
            f"{wall / steps * 1e6:.0f} us a step of the {steps} steps of the longest world; "
            f"first call {compile_and_run:.1f} s)"
        )
        profile(lambda: run(args.profile_time), args.top)


if __name__ == "__main__":
    main()
