"""Reporters: components that collect outputs over a simulation (OpenSim TableReporter,
ConsoleReporter).

A reporter's list input ``inputs`` is wired to outputs (``"/forceset/biceps|fiber_force"``,
optionally with an alias). After ``simulate``, ``report(trajectory)`` evaluates every
reporter at its report times (every ``report_time_interval`` seconds; 0 means every
sample) and returns one ``TimeSeriesTable`` per reporter, printing the ConsoleReporters
in OpenSim's layout.
"""

from __future__ import annotations

import numpy as np

from ..component import Component, Stage, input_, prop
from ..io.tables import TimeSeriesTable

__all__ = ["Reporter", "TableReporter", "ConsoleReporter", "report", "format_console_table"]


class Reporter(Component):
    """Collects the values of its inputs at report times (abstract).

    **Fields:** ``inputs`` (list input of outputs); ``report_time_interval`` (s; 0:
    every sample of the trajectory).
    """

    inputs: tuple = input_("double", stage=Stage.REPORT, many=True, doc="Outputs to report.")
    report_time_interval: np.ndarray = prop(
        0.0, doc="Time between reports (s); 0 reports every sample.", bounds=(0.0, None)
    )

    def __init__(self, name: str, report_time_interval=0.0, inputs: tuple = (), components: tuple = ()):
        self.name = name
        self.report_time_interval = report_time_interval
        self.inputs = tuple(inputs)
        self.components = components

    def add_to_report(self, output: str, alias: str | None = None) -> Reporter:
        """A copy with one more input connection (``"path|output"``, optional alias)."""
        return self.replace(inputs=self.inputs + (output + (f"({alias})" if alias else ""),))


class TableReporter(Reporter):
    """Reports to a ``TimeSeriesTable`` (OpenSim TableReporter)."""


class ConsoleReporter(Reporter):
    """Reports by printing a table to the console (OpenSim ConsoleReporter)."""


def _report_indices(times: np.ndarray, interval: float) -> np.ndarray:
    if interval <= 0:
        return np.arange(len(times))
    t0 = times[0]
    targets = np.arange(t0, times[-1] + 0.5 * interval, interval)
    idx = [int(np.argmin(np.abs(times - t))) for t in targets]
    keep = [i for i, t in zip(idx, targets) if abs(times[i] - t) <= 1e-9 * max(1.0, abs(t))]
    return np.asarray(keep, dtype=int)


def report(trajectory, verbose: bool = True) -> dict:
    """Evaluate every reporter of the trajectory's model.

    **Arguments:** ``trajectory`` from ``simulate`` (its output times should include
    the report times, e.g. ``ts=np.arange(0, T + dt/2, dt)``); ``verbose``: print the
    ConsoleReporters.

    **Returns:** ``{reporter path: TimeSeriesTable}``.
    """
    from ..system import parse_connection

    system = trajectory.system
    out = {}
    times = np.asarray(trajectory.t)
    valid = np.isfinite(times)
    for path, comp in system.model.walk():
        if not isinstance(comp, Reporter):
            continue
        idx = _report_indices(times[valid], float(comp.report_time_interval))
        labels, cols = [], []
        for conn in comp.inputs:
            tpath, name, _, alias = parse_connection(conn)
            values = np.asarray(trajectory.output(f"{tpath}|{name}"))[valid][idx]
            labels.append(alias or f"{tpath}|{name}")
            cols.append(values.reshape(len(idx), -1)[:, 0] if values.ndim > 1 else values)
        data = np.stack(cols, axis=1) if cols else np.zeros((len(idx), 0))
        table = TimeSeriesTable(times[valid][idx], data, labels)
        out[path] = table
        if verbose and isinstance(comp, ConsoleReporter):
            print(format_console_table(comp.name, table))
    return out


def format_console_table(name: str, table: TimeSeriesTable, width: int = 14) -> str:
    """Text of a table in OpenSim ConsoleReporter's layout.

    A ``[name]`` line, the column labels broken into right-aligned chunks of
    ``width`` characters (the last chunk on the last header line), a rule, then one
    row per report time; every cell is ``width`` wide and ends in ``|``, cells are
    separated by a space.
    """
    labels = ["time"] + list(table.labels)
    chunks = [[lab[i : i + width] for i in range(0, max(len(lab), 1), width)] for lab in labels]
    n_lines = max(len(c) for c in chunks)
    lines = [f"[{name}]"]
    for k in range(n_lines):
        cells = []
        for c in chunks:
            j = k - (n_lines - len(c))
            cells.append((c[j] if j >= 0 else "").rjust(width) + "|")
        lines.append(" ".join(cells))
    lines.append(" ".join(["-" * width + "|"] * len(labels)))
    for i, t in enumerate(table.times):
        vals = [t] + list(table.values[i])
        lines.append(" ".join(f"{v:.8e}".rjust(width) + "|" for v in vals))
    return "\n".join(lines)
