"""Compile time of ``simulate`` on all of this machine's cores: ``python -m benchmarks.compile_time MODEL``.

The suite times runs pinned to one core (``taskset -c 0``), and a process inherits
that pinning, XLA's compiler threads included. Compile time is a property of the
machine a user runs on, so this script first widens its own CPU affinity to every
core, then measures the first call of a 1 s simulation less a later one (tracing,
lowering and XLA's compilation). Prints one JSON line: ``{"model", "cores",
"compile_simulate"}`` (s).
"""

from __future__ import annotations

import json
import sys

from benchmarks import run_fresh, use_all_cores


def main(argv=None) -> None:
    """Measure and print (see the module's docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    name = argv[0] if argv else "gait10dof18musc"
    accuracy = float(argv[1]) if len(argv) > 1 else 1e-5
    use_all_cores()  # before JAX starts its threads
    import jax

    jax.config.update("jax_enable_x64", True)
    from benchmarks import suite
    from simjax.batching import usable_cores

    system = suite.load_simjax(name)
    state = suite.initial_state(system)
    run = suite.simjax_simulation(system, state, 1.0, accuracy, repeat=2)
    print(json.dumps({"model": name, "cores": usable_cores(), "compile_simulate": run["compile"]}))


def measure(name: str, accuracy: float = 1e-5) -> dict:
    """Run this script in a fresh process. **Returns:** its JSON line as a dict."""
    return run_fresh("benchmarks.compile_time", name, str(accuracy))


if __name__ == "__main__":
    main()
