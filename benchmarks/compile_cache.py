"""Time to a first result with simjax's persistent compilation cache (issue 42 item 4):
``python -m benchmarks.compile_cache [--cases cli,arm26_simulate,arm26_gradient]``.

Each case runs twice, each time in a fresh process on all of the machine's cores,
sharing a new, empty cache folder (``SIMJAX_CACHE_DIR``): the first process compiles
and fills the cache, the second should find every program there. In each process the
case's call is made twice: the first call's time is the time to a first result (after
the model is loaded and built), the second call's the run time without compilation.
Cases:

- ``cli``: ``simjax simulate gait10dof18musc`` (the command's ``main``; it prints its
  first call and a later one);
- ``arm26_simulate``: ``simjax.simulate`` of arm26, 1 s from the equilibrated default state;
- ``arm26_gradient``: the reverse-mode gradient of a loss of arm26's final state (1 s)
  with respect to the initial coordinates, ``jax.jit(jax.grad(loss))`` with
  ``simjax.compiler_options()`` and ``simulate(..., throw=False)`` (``throw=True``
  inside a transformation raises through a host callback, which JAX does not cache).

Prints a table: per case and process, the process's wall time, the first call (and
its time in JAX's stages: tracing, lowering to MLIR, XLA's compilation or the cache's
load, from ``jax.monitoring``), a later call, and their ratio (goal for the second
process: <= 1.1), then one JSON line. ``--explain`` prints JAX's reasons for each program it did not cache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from benchmarks import use_all_cores

CASES = ("cli", "arm26_simulate", "arm26_gradient")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


def _case(name: str) -> dict:
    """Run one case in this process (a fresh one).

    **Returns:** ``{"first", "second"}`` (s), and the first call's time in JAX's stages
    (``"trace"``, ``"lower"`` and ``"compile"``: XLA's compilation, or the cache's load).
    """
    use_all_cores()
    import contextlib
    import io

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import simjax as sj
    from benchmarks import suite

    stages = dict.fromkeys(_EVENTS.values(), 0.0)
    counting = [False]

    def listen(event, duration, **kwargs):
        if counting[0] and event in _EVENTS:
            stages[_EVENTS[event]] += duration

    jax.monitoring.register_event_duration_secs_listener(listen)
    if name == "cli":
        from simjax import cli

        text = io.StringIO()
        counting[0] = True
        with contextlib.redirect_stdout(text):
            code = cli.main(["simulate", "gait10dof18musc"])
        out = text.getvalue()
        if code != 0:
            raise RuntimeError(out)
        # (the command times its first call and a later one; its stages are counted
        # from loading the model on, its equilibration included)
        first = float(re.search(r"first call incl\. compilation ([0-9.]+) s", out).group(1))
        second = float(re.search(r"wall time: ([0-9.]+) ms after compilation", out).group(1)) / 1e3
        return {"first": first, "second": second, **stages}
    system = suite.load_simjax("arm26")
    state = suite.initial_state(system)
    jax.block_until_ready(state.z)
    if name == "arm26_simulate":

        def call():
            return sj.simulate(system, state, 1.0, accuracy=1e-5, n_outputs=2).q
    elif name == "arm26_gradient":

        def loss(q0):
            traj = sj.simulate(system, state.replace(q=q0), 1.0, accuracy=1e-5, n_outputs=2, throw=False)
            return jnp.sum(traj.q[-1] ** 2) + jnp.sum(traj.u[-1] ** 2), traj.result

        grad = jax.jit(jax.grad(loss, has_aux=True), compiler_options=sj.compiler_options())

        def call():
            g, result = grad(state.q)
            if int(result) != 0:
                raise RuntimeError(f"the simulation failed: result code {int(result)}")
            return g
    else:
        raise ValueError(f"unknown case {name!r}")
    times = []
    for i in range(2):
        counting[0] = i == 0
        t = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - t)
    return {"first": times[0], "second": times[1], **stages}


def _process(name: str, cache: str, explain: bool) -> dict:
    """One case in a fresh process with the cache folder ``cache``. **Returns:** its
    figures and the process's wall time."""
    env = {k: v for k, v in os.environ.items() if k not in ("SIMJAX_NO_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    env["SIMJAX_CACHE_DIR"] = cache
    if explain:
        env["JAX_EXPLAIN_CACHE_MISSES"] = "1"
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.compile_cache", "--case", name],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"{name}: {out.stderr[-2000:]}")
    if explain:
        for line in out.stderr.splitlines():
            if "Not writing" in line and "< 1.00 seconds" not in line:
                print(f"  [{name}] {line[:300]}", file=sys.stderr)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process": wall}


def measure(cases=CASES, explain: bool = False) -> list:
    """Each case in two fresh processes sharing a new, empty cache folder.

    **Returns:** one dict a case: ``{"case", "cold": {...}, "warm": {...}, "ratio"}``,
    ``ratio`` the second process's first call over its second call.
    """
    rows = []
    for name in cases:
        with tempfile.TemporaryDirectory(prefix="simjax-cache-bench-") as cache:
            cold = _process(name, cache, explain)
            warm = _process(name, cache, explain)
        rows.append({"case": name, "cold": cold, "warm": warm, "ratio": warm["first"] / warm["second"]})
    return rows


def markdown(rows) -> str:
    """The figures as a Markdown table."""
    lines = [
        "| case | process | process wall | first call (trace / lower / XLA compile or load) | later call | "
        "first / later |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for r in rows:
        for which in ("cold", "warm"):
            c = r[which]
            lines.append(
                f"| {r['case']} | {'1 (empty cache)' if which == 'cold' else '2'} | {c['process']:.1f} s | "
                f"{c['first']:.2f} s ({c['trace']:.2f} / {c['lower']:.2f} / {c['compile']:.2f} s) | "
                f"{c['second']:.3f} s | {c['first'] / c['second']:.2f} |"
            )
    return "\n".join(lines) + (
        "\n\nGoal: process 2's first call within 10% of a later call (ratio <= 1.1)."
        " Tracing and lowering are Python work that JAX's persistent cache does not keep."
    )


def main(argv=None) -> None:
    """Measure and print (see the module's docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--case", help=argparse.SUPPRESS)  # (one case, in this process: what each process runs)
    ap.add_argument("--explain", action="store_true", help="print why JAX did not cache a program")
    args = ap.parse_args(argv)
    if args.case:
        print(json.dumps(_case(args.case)))
        return
    rows = measure(args.cases.split(","), args.explain)
    print(markdown(rows))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
