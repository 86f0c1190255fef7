"""Where a batched right-hand side spends its device time, kernel by kernel.

Times ``jax.vmap`` of the right-hand side (udot and zdot) of a shipped model over a
batch of worlds (its state-independent parameters computed once, as in a simulation),
and the batched Cholesky factorization of its mass matrices alone,
then traces a few right-hand sides with ``jax.profiler`` and prints the kernels (on a
GPU) or XLA operations (on a CPU) that took the most time, per evaluation. Needs no
OpenSim, so it runs on a GPU machine as it is.

Run: ``python -m benchmarks.kernels [--model gait10dof18musc] [--batch 8192] [--top 25]
[--trace DIR]`` (``--trace``: where the profile is written, default a temporary folder).
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import tempfile

from benchmarks import suite

_TRACED = 5  # right-hand sides in the profile


def main(argv=None) -> None:
    """Time and profile the batched right-hand side; print the top kernels."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gait10dof18musc")
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--trace", default=None)
    args = ap.parse_args(argv)
    import jax

    import simjax as sj
    from simjax import lapack
    from simjax.forward import Context

    system = suite.load_simjax(args.model)
    states = suite.perturbed_states(system, suite.initial_state(system), args.batch)

    # the state-independent parameters (spline coefficients, curves) computed once, as
    # ``simulate`` does outside its loop
    params = jax.jit(lambda system, state: Context(system, state).prepared())(system, suite.initial_state(system))

    @jax.jit
    def rhs(system, params, states):
        acc = jax.vmap(lambda s: Context(system, s, parameters=params).acc)(states)
        return acc.udot, acc.zdot

    @jax.jit
    def mass_matrices(system, states):
        return jax.vmap(lambda s: sj.mass_matrix(system, s))(states)

    cholesky = jax.jit(jax.vmap(lapack.cholesky))
    M = jax.block_until_ready(mass_matrices(system, states))
    jax.block_until_ready(rhs(system, params, states))
    jax.block_until_ready(cholesky(M))
    t_rhs = suite.best(lambda: jax.block_until_ready(rhs(system, params, states)), 10)
    t_chol = suite.best(lambda: jax.block_until_ready(cholesky(M)), 10)
    print(f"{args.model}: batch {args.batch}, {states.q.dtype}, device {jax.devices()[0]}")
    print(
        f"  right-hand side {t_rhs * 1e3:.3f} ms a batch ({t_rhs / args.batch * 1e9:.1f} ns a world); "
        f"Cholesky of the {M.shape[-1]}x{M.shape[-1]} mass matrices alone {t_chol * 1e3:.3f} ms"
    )

    folder = args.trace or tempfile.mkdtemp(prefix="simjax-kernels-")
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        for _ in range(_TRACED):
            jax.block_until_ready(rhs(system, params, states))
    totals, counts = _kernel_totals(folder)
    total = sum(totals.values())
    print(
        f"  traced: {sum(counts.values()) / _TRACED:.0f} kernels and {total / _TRACED / 1e3:.3f} ms "
        f"of kernel time per right-hand side; the top {args.top}:"
    )
    print(f"  {'ms/eval':>8} {'share':>6} {'calls':>6}  kernel")
    for name, dur in sorted(totals.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {dur / _TRACED / 1e3:>8.3f} {dur / total:>6.1%} {counts[name] / _TRACED:>6.0f}  {name[:110]}")


def _kernel_totals(folder: str):
    """Total duration (us) and count by name of the device's kernels in the perfetto
    trace under ``folder`` (on a CPU, of the XLA operations the program ran)."""
    (path,) = glob.glob(f"{folder}/**/perfetto_trace.json.gz", recursive=True)
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpu = {pid for pid, name in processes.items() if "GPU" in name}

    def is_kernel(e):
        if gpu:
            return e["pid"] in gpu
        return "hlo_op" in e.get("args", {})

    totals, counts = collections.Counter(), collections.Counter()
    for e in events:
        if e.get("ph") == "X" and is_kernel(e):
            totals[e["name"]] += float(e.get("dur", 0.0))
            counts[e["name"]] += 1
    return totals, counts


if __name__ == "__main__":
    main()
