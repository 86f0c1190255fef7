"""simjax's benchmark suite (``python -m benchmarks``) and its scripts.

The suite times single worlds pinned to one core (``taskset -c 0``), and a process
inherits that pinning, XLA's threads included. What belongs to the whole machine
(compile time, batched throughput) is measured by a script run in a fresh process
(``run_fresh``) that first widens its own CPU affinity (``use_all_cores``).
"""

from __future__ import annotations

import json
import os
import sys


def use_all_cores() -> None:
    """Let this process run on every core of the machine; call it before JAX starts."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, range(os.cpu_count()))


def run_fresh(module: str, *args: str, timeout: float = 1200.0) -> dict:
    """Run ``python -m module *args`` in a fresh process, for at most ``timeout`` seconds
    (``subprocess.TimeoutExpired`` after that, so a hung measurement is reported rather
    than waited for). **Returns:** the JSON line it prints last, as a dict."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=root, capture_output=True, text=True, check=True, timeout=timeout
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
