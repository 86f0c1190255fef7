"""Where simjax's writers put files: ``open_output``, and ``discarding_outputs`` for the
processes of a multi-process run that must not write.

In a multi-process JAX program (``jax.distributed.initialize``: one process a host or
a GPU) every process runs the same tool, its batches sharded over all processes'
devices, and every process ends with the same results. ``simjax.tools.run`` writes
them once: processes other than 0 run inside ``discarding_outputs``, where every
writer of simjax (tables, models, setup outputs) writes to the null device.
"""

from __future__ import annotations

import contextlib
import contextvars
import os

__all__ = ["open_output", "discarding_outputs"]

_DISCARD = contextvars.ContextVar("simjax_discard_outputs", default=False)


def open_output(path: str | os.PathLike, mode: str = "w", **kwargs):
    """``open(path, mode, **kwargs)`` for writing, or the null device inside
    ``discarding_outputs``.

    **Returns:** the open file.
    """
    return open(os.devnull if _DISCARD.get() else path, mode, **kwargs)


@contextlib.contextmanager
def discarding_outputs(discard: bool = True):
    """Within the block, ``open_output`` writes nothing (with ``discard``; otherwise
    it changes nothing)."""
    token = _DISCARD.set(bool(discard))
    try:
        yield
    finally:
        _DISCARD.reset(token)
