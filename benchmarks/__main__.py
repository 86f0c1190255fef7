"""The benchmark suite (issue 10): ``python -m benchmarks [--models a,b] [--batches 1,64,1024]``.

For each shipped model and the synthetic large model (``large``: 50 DoF, 90 Millard
muscles, 50 wrap cylinders; ``benchmarks.large_model``), measured in one run on this
machine next to OpenSim 4.6:

- a 1 s forward simulation after compilation, simjax vs OpenSim (Runge-Kutta-Merson at
  the same accuracy), their ratio, and the largest difference of the final coordinates;
- each engine's agreement, at that accuracy, with a tight-tolerance reference solution
  (OpenSim at accuracy 1e-9): the median error of the final coordinates over 33 runs
  (``suite.agreement``);
- one right-hand-side evaluation (udot and zdot) vs OpenSim's ``realizeAcceleration``;
- batched throughput (worlds x simulated seconds per wall second) at several batch
  sizes, by ``simulate_batch`` on whatever device JAX uses, in a fresh process on all
  of the machine's cores (``benchmarks.throughput``);
- compile time of ``simulate`` (in this process, pinned as it is, and in a fresh one
  on all of the machine's cores: ``benchmarks.compile_time``) and of its reverse-mode
  gradient, and the gradient's wall time relative to the forward run;
- the process's peak memory;
- the issue's goals, each met or missed by a factor, and why;
- OpenSim's tools (IK, ID, static optimization, RRA) run from the Gait10dof18musc pipeline's setup files by both
  engines (``benchmarks.tools``; ``--no-tools`` skips them);
- trajectory optimisation against OpenSim Moco's MocoCasADiSolver on tests/_moco.py's problems
  (``benchmarks.optimize``; ``--no-optimize`` skips it).

Writes ``benchmarks/results/report.json`` and ``report.md`` (with the machine's
description) and prints the summary table last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import jax

from benchmarks import compile_time, optimize, suite, throughput, tools

MODELS = ("double_pendulum", "arm26", "gait10dof18musc", "Tug_of_War_Millard", "bouncing_block", "large")


def measure(name: str, batches, accuracy: float, batch_time: float) -> dict:
    """Every measurement of one model. **Returns:** a dict of figures (s unless named)."""
    system, om = suite.load(name)
    state = suite.initial_state(system)
    os_run = suite.opensim_simulation(om, 1.0, accuracy)
    sj_run = suite.simjax_simulation(system, state, 1.0, accuracy)
    dq = suite.largest_difference(sj_run["q"], os_run["q"])
    agree = suite.agreement(system, state, om, accuracy)
    rhs = suite.simjax_rhs(system, state)
    grad = suite.simjax_gradient(system, state, 1.0, accuracy)
    batch = throughput.measure(name, batches, batch_time, accuracy)
    return {
        "model": name,
        "dof": len(system.coordinate_names),
        "muscles_or_z": int(system.topology.nz),
        "opensim_1s": os_run["wall"],
        "simjax_1s": sj_run["wall"],
        "ratio": sj_run["wall"] / os_run["wall"],
        "steps_opensim": os_run["steps"],
        "steps_simjax": sj_run["steps"],
        "final_q_diff": dq,
        "error_opensim": agree["opensim"],
        "error_simjax": agree["simjax"],
        "error_ratio": agree["ratio"],
        "opensim_rhs": suite.opensim_rhs(om),
        "simjax_rhs_call": rhs["call"],
        "simjax_rhs_in_jit": rhs["in_jit"],
        "batch_time": batch_time,
        "compile_simulate": sj_run["compile"],
        "compile_simulate_all_cores": compile_time.measure(name, accuracy)["compile_simulate"],
        "compile_gradient": grad["compile"],
        "gradient_over_forward": grad["wall"] / grad["forward"],
        "batch_cores": batch["cores"],
        "batch": {
            n: {"throughput": b["throughput"], "per_world": b["per_world"], "world_steps_per_s": b["world_steps_per_s"]}
            for n, b in batch["batch"].items()
        },
        "peak_memory_mb": suite.peak_memory_mb(),
    }


def markdown(rows, machine) -> str:
    """The report as a Markdown table."""
    lines = [
        f"# simjax benchmarks\n\nMachine: {machine}\n",
        "| model | dof | OpenSim 1 s | simjax 1 s | ratio | error vs reference (OpenSim / simjax) | RHS OpenSim "
        "| RHS simjax (in jit) | compile (this process / all cores) | grad compile | grad/fwd | best batch "
        "world-s/s | peak MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        best = max(r["batch"].items(), key=lambda kv: kv[1]["throughput"])
        lines.append(
            f"| {r['model']} | {r['dof']} | {r['opensim_1s'] * 1e3:.1f} ms | {r['simjax_1s'] * 1e3:.1f} ms | "
            f"{r['ratio']:.2f} | {r['error_opensim']:.2e} / {r['error_simjax']:.2e} | "
            f"{r['opensim_rhs'] * 1e6:.1f} us | {r['simjax_rhs_in_jit'] * 1e6:.1f} us | "
            f"{r['compile_simulate']:.1f} / {r['compile_simulate_all_cores']:.1f} s | "
            f"{r['compile_gradient']:.1f} s | "
            f"{r['gradient_over_forward']:.1f} | {best[1]['throughput']:.1f} (batch {best[0]}, "
            f"{r['batch_cores']} cores) | "
            f"{r['peak_memory_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


# the issue's goals: (what, model, measure(row) -> value, bound, why it may be missed). The
# one-world goals ask for "equal or better agreement to a tight-tolerance reference": a
# median error ratio within the statistic's own spread (suite.agreement) counts as equal.
AGREEMENT = 1.15
GOALS = (
    (
        "1 s simulation / OpenSim's, one world",
        "arm26",
        lambda r: r["ratio"],
        0.5,
        "OpenSim's ellipsoid wrap, reproduced pass for pass, is about two thirds of its right-hand side (the "
        "tangent-point iteration's ~28 passes of ~23 kernels, the fan of 298 closest points, the surface polyline): "
        "benchmarks.wrapping, benchmarks.hlo_ops; and the steps, OpenSim's as well, are held at the stability bound "
        "of the stiffest fiber length (benchmarks.stiffness), as many as OpenSim's; solvers treating the fiber "
        "lengths implicitly took more at this accuracy, and erred more (README)",
    ),
    ("1 s simulation / OpenSim's, one world", "gait10dof18musc", lambda r: r["ratio"], 0.5, ""),
    (
        "1 s simulation / OpenSim's, one world",
        "large",
        lambda r: r["ratio"],
        0.3,
        "wrapping, as arm26 (met since the cylinders' tangent points are solved only where a segment can wrap)",
    ),
    *(
        (
            "final coordinates' error against a tight reference / OpenSim's (median of 33 runs)",
            model,
            lambda r: r["error_ratio"],
            AGREEMENT,
            "more than the ~15% by which the median of one engine's own runs moves between accuracies 1-5% apart: "
            "look for a difference of the models or of the step-size control",
        )
        for model in ("arm26", "gait10dof18musc", "large")
    ),
    (
        "best batch's time per world-second / OpenSim's 1 s run",
        "gait10dof18musc",
        lambda r: min(b["per_world"] / r["batch_time"] for b in r["batch"].values()) / r["opensim_1s"],
        0.05,
        "in a vmapped chunk a world's right-hand side costs ~17 us against ~21 us alone: XLA's CPU kernels "
        "for the gathers, concatenations and small reductions over per-body blocks run at ~1 GFLOP/s whatever the "
        "layout (a batch-minor layout, evaluated by a jaxpr interpreter, gave no gain), and the steps are held at "
        "the stability bound of the stiffest fiber length (benchmarks.stiffness); a GPU would close it",
    ),
    (
        "compile time of simulate on all cores (s)",
        "gait10dof18musc",
        lambda r: r["compile_simulate_all_cores"],
        10.0,
        "XLA's optimisation of one right-hand side inlined in the solver's stages",
    ),
    (
        "compile time of simulate on all cores (s)",
        "large",
        lambda r: r["compile_simulate_all_cores"],
        30.0,
        "as gait10dof18musc, plus the wrapping engine's loops",
    ),
    (
        "reverse-mode gradient / forward wall time",
        "gait10dof18musc",
        lambda r: r["gradient_over_forward"],
        5.0,
        "the backward sweep re-runs each accepted step and takes a VJP per stage, ~3x a right-hand side",
    ),
    (
        "reverse-mode gradient / forward wall time",
        "arm26",
        lambda r: r["gradient_over_forward"],
        5.0,
        "the tangent points' derivative, taken at the passes' solution, still evaluates the ellipsoid's fan of 298 "
        "closest points (about 40% of a right-hand side's VJP: benchmarks.gradient_parts; met since each stage's "
        "VJP reuses the stage's wrap passes)",
    ),
    (
        "reverse-mode gradient / forward wall time",
        "large",
        lambda r: r["gradient_over_forward"],
        5.0,
        "the backward sweep re-runs each step and takes a right-hand side's VJP per stage, given the stage's wrap "
        "passes ~2.2x a right-hand side; the paths' derivatives are ~40% of that VJP (the tangent points sliding "
        "over the surfaces, for the forces' and speeds' derivatives, ~20%), many small kernels rather than "
        "arithmetic: benchmarks.gradient_parts (met since each stage's VJP reuses the stage's wrap passes)",
    ),
)


def goals(rows) -> str:
    """The issue's goals against this run's figures, each met or missed by a factor."""
    by_name = {r["model"]: r for r in rows}
    lines = ["\n## Goals\n"]
    for what, model, value, bound, why in GOALS:
        if model not in by_name:
            continue
        try:
            v = value(by_name[model])
        except KeyError:  # (a row measured without this figure)
            continue
        verdict = "met" if v <= bound else f"missed by {v / bound:.1f}x" + (f" ({why})" if why else "")
        lines.append(f"- {model}: {what} = {v:.3g} (goal <= {bound:g}): {verdict}")
    if len(lines) == 1:
        lines.append("(no goal concerns the models measured)")
    return "\n".join(lines) + "\n"


def _rows_or_none(name: str, what: str, measure_rows) -> list:
    """``measure_rows()``, or no rows where it fails (reported, not fatal)."""
    print(f"measuring {what} ...", flush=True)
    try:
        return measure_rows()
    except Exception as e:
        print(f"  {name}: not measured ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
        return []


def main(argv=None) -> None:
    """Run the suite, write the reports, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,64,1024")
    ap.add_argument("--batch-time", type=float, default=0.1, help="simulated seconds per world in batches")
    ap.add_argument("--accuracy", type=float, default=1e-5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--no-tools", action="store_true", help="skip the tools' measurements (benchmarks.tools)")
    ap.add_argument("--no-optimize", action="store_true", help="skip trajectory optimisation (benchmarks.optimize)")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    machine = f"{platform.platform()}, {os.cpu_count()} CPUs, JAX {jax.__version__} on {jax.devices()[0]}"
    rows = []
    for name in args.models.split(","):
        print(f"measuring {name} ...", flush=True)
        try:
            rows.append(measure(name, batches, args.accuracy, args.batch_time))
        except Exception as e:  # a model simjax cannot load yet is reported, not fatal
            print(f"  {name}: not measured ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
    tool_rows = [] if args.no_tools else _rows_or_none("tools", "the tools", tools.measure)
    optimize_rows = [] if args.no_optimize else _rows_or_none("optimize", "trajectory optimisation", optimize.measure)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(
            {
                "machine": machine,
                "accuracy": args.accuracy,
                "models": rows,
                "tools": tool_rows,
                "optimize": optimize_rows,
            },
            f,
            indent=1,
        )
    text = markdown(rows, machine) + goals(rows) + ("\n## Tools\n\n" + tools.markdown(tool_rows) if tool_rows else "")
    text += ("\n## Trajectory optimisation\n\n" + optimize.markdown(optimize_rows)) if optimize_rows else ""
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
