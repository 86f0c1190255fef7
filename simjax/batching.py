"""Batches of worlds on the whole machine: ``vmap`` in chunks, the chunks side by side.

XLA runs one compiled program on one CPU core, so a single vmapped call leaves the
other cores idle, and a large batch's buffers fall out of cache. ``map_batch`` vmaps a
function over chunks of the batch (one compiled program: the last chunk is padded with
copies of the last element) and, on a CPU, solves the chunks in a thread per core,
each chunk as a loop over vmapped pieces small enough to stay in cache.
``simulate_batch`` is built on it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

from .compiling import jit

__all__ = ["map_batch", "cache_chunk", "usable_cores"]


def map_batch(fn: Callable, *args, chunk_size: int | None = None, workers: int | None = None,
              piece_size: int | None = None):
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
    process may use, else 1); ``piece_size``: on a CPU each chunk runs as a
    ``lax.map`` over vmapped pieces of this many elements, in one program (default:
    ``cache_chunk`` of the numbers in one element of ``args``; on an accelerator the
    whole chunk at once).

    **Returns:** ``fn``'s outputs stacked along a leading batch axis.
    """
    if piece_size is None:
        leaves = jax.tree.leaves(args)
        per_element = sum(int(np.prod(np.shape(a)[1:])) for a in leaves)
        piece_size = cache_chunk(per_element) if jax.default_backend() == "cpu" else None
    return map_chunks(lambda *chunk: _vmapped(fn, piece_size, *chunk), *args, chunk_size=chunk_size,
                      workers=workers, cpu_chunk=1024)


def cache_chunk(per_element: int) -> int:
    """Batch elements per vmapped piece whose buffers stay in a CPU's cache: about
    2048 numbers of input a piece, a power of two from 16 to 512 (measured: a
    simulation of gait10dof18musc, 56 state variables a world, fastest at 32 worlds, a
    double pendulum at 512; forward dynamics of a 40-link chain, 120 numbers a state,
    at 16 to 32, 2.5x faster than in one vmapped call of 4096 states)."""
    return int(np.clip(2 ** int(np.log2(2048 / max(1, per_element))), 16, 512))


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


@jit
def _vmapped(fn, piece_size, *args):
    n = jax.tree.leaves(args)[0].shape[0]
    if piece_size is None or n <= piece_size:
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda element: fn(*element), args, batch_size=piece_size)


def usable_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
