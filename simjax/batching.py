"""Batches of worlds on the whole machine: ``vmap`` in chunks, the chunks side by side.

XLA runs one compiled program on one CPU core, so a single vmapped call leaves the
other cores idle, and a large batch's buffers fall out of cache. ``map_batch`` vmaps a
function over chunks of the batch (one compiled program: the last chunk is padded with
copies of the last element) and, on a CPU, solves the chunks in a thread per core.
``simulate_batch`` is built on it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["map_batch", "usable_cores"]


def map_batch(fn: Callable, *args, chunk_size: int | None = None, workers: int | None = None):
    """``jax.vmap(fn)(*args)``, in vmapped chunks solved side by side on the cores.

    ``fn`` is compiled once per function object (define it once, not per call) and
    per chunk shape. Its arguments' array leaves all carry the batch as their leading
    axis (close over anything shared). Inside ``jax.jit`` or ``jax.grad`` the chunks
    are traced one after another into the caller's program (differentiable as
    ``jax.vmap``), by default as a single chunk.

    **Arguments:** ``fn``: a function of one element of each argument, returning a
    pytree of arrays; ``args``: pytrees of arrays with a common leading batch axis;
    ``chunk_size``: elements per vmapped call (default: on a CPU the batch split evenly
    over the workers, at most 1024 a chunk; on an accelerator the whole batch, at most
    8192); ``workers``: chunks computed at once (default: on a CPU the cores this
    process may use, else 1).

    **Returns:** ``fn``'s outputs stacked along a leading batch axis.
    """
    return map_chunks(lambda *chunk: _vmapped(fn, *chunk), *args, chunk_size=chunk_size, workers=workers,
                      cpu_chunk=1024)


def map_chunks(call: Callable, *args, chunk_size: int | None, workers: int | None, cpu_chunk: int):
    """Call ``call`` (an already batched, jitted function) on chunks of ``args`` and
    concatenate its outputs; see ``map_batch`` for the arguments, ``cpu_chunk`` being
    the default chunk's upper bound on a CPU."""
    leaves = jax.tree.leaves(args)
    n = leaves[0].shape[0]
    # inside jit or grad the chunks join the caller's trace, which is per thread: they
    # are traced one after another, by default as one chunk (one copy of the program)
    traced = any(isinstance(a, jax.core.Tracer) for a in leaves)
    on_cpu = jax.default_backend() == "cpu"
    if workers is None:
        workers = usable_cores() if on_cpu and not traced else 1
    if chunk_size is None and traced:
        chunk_size = n
    elif chunk_size is None:
        chunk_size = min(-(-n // max(workers, 1)), cpu_chunk) if on_cpu else min(n, 8192)
    if chunk_size < 1 or workers < 1:
        raise ValueError(f"chunk_size ({chunk_size}) and workers ({workers}) must be positive")
    chunk_size = min(chunk_size, n)

    def run(start):
        idx = np.minimum(np.arange(start, start + chunk_size), n - 1)  # the last chunk padded
        chunk = jax.tree.map(lambda a: a[idx], args)
        return call(*chunk)

    starts = range(0, n, chunk_size)
    if traced:
        outs = [run(start) for start in starts]
    else:
        # every thread calls the same compiled program; JAX compiles it once (the first
        # caller), the others wait for it
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outs = list(pool.map(lambda start: jax.block_until_ready(run(start)), starts))
    return jax.tree.map(lambda *a: jnp.concatenate(a)[:n], *outs)


@eqx.filter_jit
def _vmapped(fn, *args):
    return jax.vmap(fn)(*args)


def usable_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
