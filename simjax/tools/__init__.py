"""OpenSim's analysis tools, run from their own setup files or called directly.

Each tool is a pure function of a ``System`` and tables (``TimeSeriesTable``) that
returns tables, batched over frames (one compiled program for all of them, not a
Python loop), on CPU or GPU and differentiable; a setup reader maps OpenSim's setup
file onto it and writes OpenSim's output files (``run(setup_path)``, or
``simjax run SETUP.xml`` on the command line).

- ``setup``: reading setup files, resolving their paths, dispatching to the tools.
"""

from .setup import Setup, SetupError, SetupWarning, read_setup, run

__all__ = ["Setup", "SetupError", "SetupWarning", "read_setup", "run"]
