"""OpenSim evaluated in a fresh Python process.

OpenSim 4.6 keeps DeGrooteFregly2016Muscle's activation time constants in
function-level statics (``DeGrooteFregly2016Muscle.cpp``): the first such muscle
evaluated in a process sets them for every later one, in any model. A test worker runs
many modules, so a test comparing DeGroote muscles with OpenSim or Moco gets its
reference from a process of its own, whatever the worker evaluated before.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def in_fresh_process(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a newly spawned interpreter.

    **Arguments:** ``fn``: a module-level function (picklable), its arguments picklable.

    **Returns:** its value (picklable: arrays, dicts, numbers), or raises its exception.
    """
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        return fresh.submit(fn, *args, **kwargs).result()
