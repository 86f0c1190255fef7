"""OpenSim's tools, simjax against OpenSim 4.6 on the same setup files in one run:
``python -m benchmarks.tools [--pipeline DIR]`` (also part of ``python -m benchmarks``).

On the Gait10dof18musc walking example (``simjax.models.pipeline_path("Gait10dof18musc")``),
copied to a temporary folder so that both engines write their outputs there:

- inverse kinematics over every frame of ``subject01_walk.trc`` (``IK/walk_Setup_IK.xml``);
- inverse dynamics of that motion with the ground reactions (``ID/walk_Setup_ID.xml``);
- static optimization of that motion (``SO/walk_Setup_SO.xml``: an AnalyzeTool, 0.5-2.5 s);
- the residual reduction algorithm on it (``RRA/walk_Setup_RRA.xml``, 0-2.5 s);
- computed muscle control of RRA's kinematics (``CMC/walk_Setup_CMC.xml``, 0.6-1.9 s).

Each engine runs its tool from the setup file (``opensim.InverseKinematicsTool(setup)
.run()``, ``simjax.tools.run(setup)``), best of 3 after a first run (simjax's first run
compiles; its compile time is reported apart). Goals (issues 39 and 44): IK <= 0.1x
OpenSim's time, ID <= 0.5x, static optimization <= 0.1x, RRA and CMC <= 0.1x. ``--tools`` picks
some (the tools before them run once first, unmeasured, for their outputs). Pin to one
core to compare with OpenSim's single thread (``taskset -c 0 python -m benchmarks.tools``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import tempfile
import time
import warnings

import jax

import simjax as sj
from benchmarks import suite

jax.config.update("jax_enable_x64", True)

PIPELINE = sj.models.pipeline_path("Gait10dof18musc")

#: (tool, setup file in the pipeline, OpenSim's class, goal: simjax / OpenSim)
TOOLS = (
    ("inverse kinematics", "IK/walk_Setup_IK.xml", "InverseKinematicsTool", 0.1),
    ("inverse dynamics", "ID/walk_Setup_ID.xml", "InverseDynamicsTool", 0.5),
    ("static optimization", "SO/walk_Setup_SO.xml", "AnalyzeTool", 0.1),
    ("residual reduction", "RRA/walk_Setup_RRA.xml", "RRATool", 0.1),
    ("computed muscle control", "CMC/walk_Setup_CMC.xml", "CMCTool", 0.1),
)


@contextlib.contextmanager
def _in(folder: str):
    # OpenSim opens a setup's model relative to the working directory
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def measure(pipeline: str = PIPELINE, reference: dict | None = None, tools=None) -> list[dict]:
    """Time each tool in both engines, or simjax alone against ``reference``.

    **Arguments:** ``pipeline``: the folder; ``reference``: OpenSim's time per tool
    (s, by tool name, as ``measure_reference`` records it; a tool it lacks is left
    out), or ``None`` to run OpenSim here; ``tools``: the names to measure (default all).

    **Returns:** a row per tool (seconds).
    """
    import simjax.tools

    if reference is None:
        import opensim

        opensim.Logger.setLevelString("Error")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = os.path.join(tmp, "pipeline")
        shutil.copytree(pipeline, work)
        for name, rel, cls, goal in TOOLS:
            setup = os.path.join(work, rel)
            folder = os.path.dirname(setup)

            def theirs():
                with _in(folder):
                    getattr(opensim, cls)(setup).run()

            def ours():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    simjax.tools.run(setup)

            wanted = tools is None or name in tools
            if reference is None or not wanted:
                # first: OpenSim's IK output is the ID's input (else simjax's own, same name)
                (theirs if reference is None else ours)()
            if not wanted or (reference is not None and name not in reference):
                continue
            t = time.perf_counter()
            ours()
            first = time.perf_counter() - t
            os_time = suite.best(theirs) if reference is None else reference[name]
            sj_time = suite.best(ours)
            rows.append(
                {
                    "tool": name,
                    "setup": rel,
                    "opensim": os_time,
                    "simjax": sj_time,
                    "simjax_first_run": first,
                    "ratio": sj_time / os_time,
                    "goal": goal,
                }
            )
    return rows


def markdown(rows) -> str:
    """The rows as a Markdown table, with each goal met or missed."""
    lines = [
        "| tool (Gait10dof18musc pipeline) | OpenSim | simjax | ratio | goal | simjax first run (compiles) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        verdict = "met" if r["ratio"] <= r["goal"] else f"missed by {r['ratio'] / r['goal']:.1f}x"
        lines.append(
            f"| {r['tool']} ({r['setup']}) | {r['opensim'] * 1e3:.1f} ms | {r['simjax'] * 1e3:.1f} ms | "
            f"{r['ratio']:.2f} | <= {r['goal']:g}: {verdict} | {r['simjax_first_run']:.1f} s |"
        )
    return "\n".join(lines) + "\n"


def measure_reference(path: str, pipeline: str = PIPELINE) -> dict:
    """Measure OpenSim's time per tool here and record it as ``path``'s ``opensim_tools``
    (the file's other entries are kept). **Returns:** the recorded entry."""
    rows = measure(pipeline)
    entry = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} used",
        "date": datetime.date.today().isoformat(),
        **{r["tool"]: r["opensim"] for r in rows},
    }
    ref = {}
    if os.path.exists(path):
        with open(path) as f:
            ref = json.load(f)
    ref["opensim_tools"] = entry
    with open(path, "w") as f:
        json.dump(ref, f, indent=1)
    return entry


def main(argv=None) -> None:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", default=PIPELINE, help="a pipeline folder laid out as Gait10dof18musc's")
    ap.add_argument("--reference", default=None, help="OpenSim's times from this file (no OpenSim needed)")
    ap.add_argument("--measure-reference", metavar="FILE", default=None)
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--tools", nargs="+", default=None, help=f"measure only these: {[t[0] for t in TOOLS]}")
    args = ap.parse_args(argv)
    if args.measure_reference:
        print(json.dumps(measure_reference(args.measure_reference, args.pipeline), indent=1))
        return
    reference = None
    if args.reference:
        with open(args.reference) as f:
            reference = json.load(f)["opensim_tools"]
        print(f"OpenSim's times: {reference['machine']}, {reference['date']}; simjax on {jax.devices()[0]}")
    rows = measure(args.pipeline, reference, args.tools)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(jax.devices()[0]), "jax": jax.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
