"""A batch of MocoInverse problems solved at once: issue 40's batched goal.

``python -m benchmarks.optimize_batch [--batch 64] [--repeat 2] [--json OUT]``

The problem is ``benchmarks.optimize.gait_inverse_problem`` (MocoInverse of
gait10dof18musc walking, 40 mesh intervals, Moco's tolerances 1e-3), varied over the
batch by the reserves' strength: every ``reserve_*`` actuator's optimal force scaled
by a factor from 0.5 to 2 (``optimize.solve_batch``). Reported: the compile time, the
batch's wall time (best of ``--repeat`` after the first run), the time per problem,
the iterations and statuses, and, for comparison, one problem solved alone by
``optimize.solve`` on the same device (unless ``--no-single``). With ``benchmarks/recorded/reference.json``'s
``moco_inverse_gait`` (Moco's own time for one such problem, measured on a CPU
machine with OpenSim: ``--measure-reference``), the ratio of simjax's time per problem
to Moco's; the goal on a GPU is <= 0.01.

Needs no OpenSim except for ``--measure-reference``; runs on whatever device JAX uses.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import optimize as bench  # noqa: E402
from simjax.optimize import collocation, ipm, moco_options  # noqa: E402

_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded", "reference.json")
TOLERANCE = 1e-3  # Moco's MocoInverse defaults (convergence and constraints)


def reserve_scaling(problem):
    """``edit(system, scale)`` for ``solve_batch``: every ``reserve_*`` actuator's
    optimal force times ``scale``."""
    paths = [p for p in problem.control_names if p.rsplit("/", 1)[-1].startswith("reserve_")]

    def edit(system, scale):
        return eqx.tree_at(
            lambda s: [s.model.find(p).optimal_force for p in paths],
            system,
            [scale * system.model.find(p).optimal_force for p in paths],
        )

    return edit


def _timed(fn, repeat: int):
    """``fn()``'s first run (compilation included) and best of ``repeat`` after it (s),
    and its last result."""
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = jax.block_until_ready(fn())
        walls.append(time.perf_counter() - t)
    return first, walls, out


def measure_batch(batch: int = 64, repeat: int = 2) -> dict:
    """The batch, timed (s). **Returns:** a dict of figures."""
    problem, n = bench.gait_inverse_problem()
    options = moco_options(TOLERANCE, TOLERANCE)
    scales = jnp.linspace(0.5, 2.0, batch)
    edit = reserve_scaling(problem)
    first, walls, sols = _timed(
        lambda: collocation.solve_batch(problem, scales, edit, mesh=n, options=options, interpolate_controls=False),
        repeat,
    )
    status = np.asarray(sols.status)
    at_one = int(np.argmin(np.abs(np.asarray(scales) - 1.0)))
    return {
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "batch": batch,
        "mesh_intervals": n,
        "batch_first_run_with_compile": first,
        "batch_wall": min(walls),
        "batch_walls": walls,
        "per_problem": min(walls) / batch,
        "iterations_max": int(np.max(sols.iterations)),
        "iterations_mean": float(np.mean(sols.iterations)),
        "statuses": {ipm.STATUS[int(k)]: int(np.sum(status == k)) for k in np.unique(status)},
        "objectives_first_last": [float(sols.objective[0]), float(sols.objective[-1])],
        "scale_nearest_one": float(scales[at_one]),
        "objective_there": float(sols.objective[at_one]),
    }


def measure_one(repeat: int = 2) -> dict:
    """One problem alone on the same device (``optimize.solve``), timed (s)."""
    problem, n = bench.gait_inverse_problem()
    options = moco_options(TOLERANCE, TOLERANCE)
    first, walls, one = _timed(
        lambda: collocation.solve(problem, mesh=n, options=options, interpolate_controls=False), repeat
    )
    return {
        "one_first_run_with_compile": first,
        "one_wall": min(walls),
        "one_iterations": int(one.iterations),
        "one_objective": float(one.objective),
        "one_status": int(one.status),
    }


def measure_reference(path: str, repeat: int = 3) -> None:
    """Moco's own MocoInverse of the same problem (tests/_moco_gait.py), best of
    ``repeat`` after a warm-up, written into the reference file ``path`` as
    ``moco_inverse_gait`` (s), the file's other entries kept."""
    bench._moco_helpers()
    import _moco_gait as mg

    with tempfile.TemporaryDirectory() as tmp:
        runs = [mg.moco_inverse_gait(os.path.join(tmp, f"moco_{i}")) for i in range(repeat + 1)][1:]
    ref = json.load(open(path)) if os.path.exists(path) else {}
    ref["moco_inverse_gait"] = min(r["solve_seconds"] for r in runs)
    ref["moco_inverse_gait_machine"] = f"{os.cpu_count()} CPUs, OpenSim Moco (MocoCasADiSolver), best of {repeat}"
    with open(path, "w") as f:
        json.dump(ref, f, indent=1)
    print(json.dumps({k: ref[k] for k in ("moco_inverse_gait", "moco_inverse_gait_machine")}, indent=1))


def main(argv=None) -> None:
    """Measure and print the figures (and the ratio to Moco where recorded)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--reference", default=_REFERENCE)
    ap.add_argument("--measure-reference", action="store_true", help="time Moco here and record it")
    ap.add_argument("--no-single", action="store_true", help="skip the one problem solved alone")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.measure_reference:
        measure_reference(args.reference)
        return
    ref = json.load(open(args.reference)) if os.path.exists(args.reference) else {}
    moco = ref.get("moco_inverse_gait")
    row = {}
    for part in ("batch", "one"):
        if part == "one" and args.no_single:
            continue
        row.update(measure_batch(args.batch, args.repeat) if part == "batch" else measure_one(args.repeat))
        if moco:
            row["moco_per_problem"] = moco
            row["ratio_per_problem"] = row["per_problem"] / moco
            if "one_wall" in row:
                row["ratio_one"] = row["one_wall"] / moco
        print(json.dumps(row, indent=1), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
