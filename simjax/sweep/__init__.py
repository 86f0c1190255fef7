"""Sweeps that lose nothing: many simulations of one model, their cases (model
properties, initial states, controls) from a table, run in chunks whose results are written as
Parquet files, one a chunk, so an interrupted sweep resumes where it stopped.

``sweep(spec, out_dir)`` in Python, ``simjax sweep SPEC`` on the command line.
Modules, one idea each: ``spec`` (reading and checking a spec and its case table),
``run`` (running the cases in chunks), ``parquet`` (the output folder).
"""

from .parquet import read_sweep, read_trajectories
from .run import SweepSummary, sweep
from .spec import SpecError, SweepSpec, read_spec

__all__ = ["sweep", "SweepSummary", "SweepSpec", "SpecError", "read_spec", "read_sweep", "read_trajectories"]
