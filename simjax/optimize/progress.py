"""The solver's progress display: one line on standard error, rewritten each iteration.

``ipm.solve`` with ``Options(progress=True)`` calls ``report`` from inside the compiled
solver (a host callback) once per iteration. The line shows the iteration, the
objective, the primal and dual infeasibilities and the time since the first iteration,
and ``finish`` ends it with the status. In a batch (``solve_batch``) every problem
reports; the line follows the furthest one, and ``finish_batch`` ends it with the count
of each status.
"""

from __future__ import annotations

import sys
import time

__all__ = ["report", "finish", "finish_batch"]


class _Line:
    """What the display shows now: the furthest iteration and when the solve began."""

    def __init__(self):
        self.furthest, self.start, self.text = -1, time.perf_counter(), ""


_line = _Line()


def _write(text: str, end: str = "") -> None:
    sys.stderr.write("\r" + text.ljust(96) + end)
    sys.stderr.flush()


def report(iteration, done, objective, primal, dual, max_iter) -> None:
    """Show one problem's iteration (called by the solver; values are host scalars).

    **Arguments:** ``iteration``: the iteration just taken (0 the first); ``done``:
    whether the problem has finished; ``objective``, ``primal``, ``dual``: its
    objective and infeasibilities; ``max_iter``: the limit.
    """
    global _line
    iteration = int(iteration)
    if iteration == 0 and not bool(done):  # a new solve (every problem of a batch starts at 0 together)
        _line = _Line()
    if iteration > _line.furthest:
        _line.furthest = iteration
        _line.text = (
            f"iteration {iteration:4d}/{int(max_iter)}  objective {float(objective): .6e}  "
            f"inf_pr {float(primal):.1e}  inf_du {float(dual):.1e}  "
            f"{time.perf_counter() - _line.start:7.1f} s"
        )
        _write(_line.text)


def finish(status, iterations, names: dict) -> None:
    """End the line of one solve with its status (called by the solver).

    **Arguments:** ``status``: the status code; ``iterations``: the iterations taken;
    ``names``: each status code's meaning (``ipm.STATUS``).
    """
    _write(f"{_line.text}  {names.get(int(status), int(status))} after {int(iterations)} iterations", "\n")


def finish_batch(statuses, names: dict) -> None:
    """End a batch's line with how many problems ended with each status.

    **Arguments:** ``statuses``: the batch's status codes (an array or sequence);
    ``names``: each status code's meaning (``ipm.STATUS``).
    """
    from collections import Counter

    counts = Counter(names.get(int(s), str(int(s))) for s in statuses)
    _write(
        f"{len(list(statuses))} problems after {_line.furthest + 1} iterations: "
        + ", ".join(f"{n} {name}" for name, n in counts.items())
        + f"  ({time.perf_counter() - _line.start:.1f} s)",
        "\n",
    )
