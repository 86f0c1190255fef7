"""Compile time against model size (issue 10): ``simulate`` of the synthetic large model
(``benchmarks.large_model``) with 1, 2, 3, 5 ... copies of gait10dof18musc (18 Millard
muscles and 10 wrap cylinders each), every size compiled from scratch.

Prints, per size: degrees of freedom, muscles, wrap cylinders, the number of XLA
kernels of one right-hand side (``benchmarks.hlo_ops``), the compile time of
``simulate`` (tracing, lowering and XLA together: the first call minus a later one)
and the wall time of a 1 s simulation. Program size and compile time should stay
flat: the model's components are grouped and vectorized, never unrolled.

Run: ``python -m benchmarks.scaling [--copies 1,2,3,5] [--final-time 0.1]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import jax

from benchmarks import hlo_ops, large_model, suite

import simjax as sj


def measure(copies: int, final_time: float, folder: str) -> dict:
    """Sizes, kernel count and timings of the ``copies``-copy model.

    **Returns:** ``{"copies", "dof", "muscles", "cylinders", "kernels", "compile" (s),
    "run" (s, one simulation of ``final_time``)}``.
    """
    path = large_model.write(os.path.join(folder, f"large_x{copies}.osim"), copies)
    system = suite.load_simjax(path)
    state = suite.initial_state(system)
    counts = large_model.counts(open(path, encoding="utf-8").read())
    rhs = suite.jit(lambda st: sj.accelerations(system, st).udot).lower(state).compile().as_text()
    kernels = int(hlo_ops.report(rhs, 0).split()[0])

    def run():
        return jax.block_until_ready(sj.simulate(system, state, final_time, n_outputs=2).q)

    _, first = suite.timed(run)
    wall = suite.best(run, 3)
    return {
        "copies": copies,
        "dof": counts["dof"],
        "muscles": counts["muscles"],
        "cylinders": counts["wrap_cylinders"],
        "kernels": kernels,
        "compile": first - wall,
        "run": wall,
    }


def main(argv=None) -> None:
    """Measure every size and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", default="1,2,3,5")
    ap.add_argument("--final-time", type=float, default=0.1)
    args = ap.parse_args(argv)
    print(
        f"{'copies':>6} {'dof':>5} {'muscles':>8} {'cylinders':>10} {'kernels':>8} {'compile s':>10} "
        f"{'run ms':>8}   ({args.final_time:g} s simulated)"
    )
    with tempfile.TemporaryDirectory() as folder:
        for n in (int(c) for c in args.copies.split(",")):
            r = measure(n, args.final_time, folder)
            print(
                f"{r['copies']:>6} {r['dof']:>5} {r['muscles']:>8} {r['cylinders']:>10} {r['kernels']:>8} "
                f"{r['compile']:>10.1f} {r['run'] * 1e3:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
