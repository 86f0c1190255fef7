"""Batches of worlds on the whole machine: ``vmap`` in chunks, the chunks side by side.

XLA runs one compiled program on one CPU core, so a single vmapped call leaves the
other cores idle, and a large batch's buffers fall out of cache. ``map_batch`` vmaps a
function over chunks of the batch (one compiled program: the last chunk is padded with
copies of the last element) and, on a CPU, solves the chunks in a thread per core,
each chunk as a loop over vmapped pieces small enough to stay in cache.
``simulate_batch`` is built on it.

With several devices (several GPUs, or CPU devices forced with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``), the batch axis is sharded
over them instead (``jax.sharding.NamedSharding`` over a one-axis ``Mesh``, the
program run per device by ``jax.shard_map``, so no device waits for another's
worlds): each device solves its shard, which stays on it, and the caller gathers
what it reads. A batch that does not divide evenly is padded with copies of its last
element, and the padding dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .compiling import jit

__all__ = ["map_batch", "cache_chunk", "usable_cores", "batch_mesh", "gather"]


def map_batch(
    fn: Callable,
    *args,
    chunk_size: int | None = None,
    workers: int | None = None,
    piece_size: int | None = None,
    devices=None,
):
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
    whole chunk at once); ``devices``: a list of devices or a ``jax.sharding.Mesh``
    to shard the batch over (see ``batch_mesh``; default: all local devices when
    there are several, else the single-device path above). Sharded, ``chunk_size`` is
    the elements per device and call (default: the whole batch in one call) and
    ``workers`` is unused.

    **Returns:** ``fn``'s outputs stacked along a leading batch axis (sharded over the
    devices' mesh when sharded).
    """
    if piece_size is None:
        leaves = jax.tree.leaves(args)
        per_element = sum(int(np.prod(np.shape(a)[1:])) for a in leaves)
        piece_size = cache_chunk(per_element) if jax.default_backend() == "cpu" else None
    # (a Partial of a module-level function: hashable by its function and piece size, so
    # a sharded call compiles once per ``fn``)
    call = jax.tree_util.Partial(_vmapped, fn, piece_size)
    return map_chunks(call, *args, chunk_size=chunk_size, workers=workers, cpu_chunk=1024, devices=devices)


def cache_chunk(per_element: int) -> int:
    """Batch elements per vmapped piece whose buffers stay in a CPU's cache: about
    2048 numbers of input a piece, a power of two from 16 to 512 (measured: a
    simulation of gait10dof18musc, 56 state variables a world, fastest at 32 worlds, a
    double pendulum at 512; forward dynamics of a 40-link chain, 120 numbers a state,
    at 16 to 32, 2.5x faster than in one vmapped call of 4096 states)."""
    return int(np.clip(2 ** int(np.log2(2048 / max(1, per_element))), 16, 512))


def map_chunks(call: Callable, *args, chunk_size: int | None, workers: int | None, cpu_chunk: int, devices=None):
    """Call ``call`` (an already batched, jitted function) on chunks of ``args`` and
    concatenate its outputs; see ``map_batch`` for the arguments, ``cpu_chunk`` being
    the default chunk's upper bound on a CPU.

    Sharded over several devices, ``call`` must be a pytree (e.g. a
    ``jax.tree_util.Partial`` of a module-level function) whose array leaves are
    shared by every element: they are replicated on the devices, and its other
    leaves are hashed to cache the compiled program."""
    leaves = jax.tree.leaves(args)
    n = leaves[0].shape[0]
    # inside jit or grad the chunks join the caller's trace, which is per thread: they
    # are traced one after another, by default as one chunk (one copy of the program)
    traced = any(isinstance(a, jax.core.Tracer) for a in leaves)
    mesh = None if traced else batch_mesh(devices)
    if mesh is not None:
        return _map_sharded(call, args, n, mesh, chunk_size)
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


def batch_mesh(devices=None) -> Mesh | None:
    """The mesh a batch is sharded over.

    **Arguments:** ``devices``: ``None`` (all local devices, ``jax.local_devices()``,
    when there are several; in a multi-process run after ``jax.distributed.initialize``,
    all processes' devices, ``jax.devices()``), a sequence of ``jax.Device``, or a
    ``jax.sharding.Mesh`` (the batch axis is split over all of its axes).

    **Returns:** a ``Mesh`` with the axis ``"batch"`` (or the given mesh), or ``None``
    where ``devices`` is ``None`` and there is a single device (the batch then runs on
    it, in threads on a CPU).

    **Raises:** ``ValueError`` for an empty sequence of devices.
    """
    if isinstance(devices, Mesh):
        return devices
    if devices is None:
        devices = jax.devices() if jax.process_count() > 1 else jax.local_devices()
        return Mesh(np.asarray(devices), ("batch",)) if len(devices) > 1 else None
    devices = list(devices)
    if not devices:
        raise ValueError("devices is empty: give at least one device, or None for all local devices")
    return Mesh(np.asarray(devices), ("batch",))


def gather(tree):
    """A batch's results as NumPy arrays, whole, in this process.

    Sharded over the devices of several processes (after ``jax.distributed.initialize``),
    each process holds only its shards: this gathers them from every process (a
    collective: every process must call it, with the same tree). Otherwise it is
    ``jax.device_get``.

    **Arguments:** ``tree``: a pytree of arrays (e.g. a ``Trajectory``'s fields).

    **Returns:** the same pytree of ``numpy`` arrays.
    """
    leaves = jax.tree.leaves(tree)
    if any(isinstance(a, jax.Array) and not a.is_fully_addressable for a in leaves):
        from jax.experimental import multihost_utils

        return jax.tree.map(lambda a: np.asarray(multihost_utils.process_allgather(a, tiled=True)), tree)
    return jax.tree.map(np.asarray, jax.device_get(tree))


def _map_sharded(call, args, n: int, mesh: Mesh, chunk_size: int | None):
    """``call`` over the batch ``args`` (``n`` elements) sharded over ``mesh``: in calls
    of ``chunk_size`` elements a device (default: the whole batch at once), the last
    padded with copies of the last element."""
    size = mesh.size
    per_device = -(-n // size)
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size ({chunk_size}) must be positive")
        per_device = min(per_device, chunk_size)
    step = per_device * size
    batched = NamedSharding(mesh, PartitionSpec(mesh.axis_names))
    dyn, static = eqx.partition(call, eqx.is_array)
    dyn = _place(dyn, NamedSharding(mesh, PartitionSpec()))
    outs = []
    for start in range(0, n, step):
        idx = np.minimum(np.arange(start, start + step), n - 1)  # the last call padded
        chunk = jax.tree.map(lambda a: a[idx], args)
        outs.append(_on_mesh(static, mesh, dyn, _place(chunk, batched)))
    out = outs[0] if len(outs) == 1 else jax.tree.map(lambda *a: jnp.concatenate(a), *outs)
    return out if len(outs) * step == n else jax.tree.map(lambda a: a[:n], out)


def _place(tree, sharding: NamedSharding):
    """``jax.device_put(tree, sharding)``; over several processes' devices, each process
    fills its own devices' shards from its copy of the values (which every process
    holds: ``device_put`` would compare them across processes, and NaNs never compare
    equal)."""
    if sharding.is_fully_addressable:
        return jax.device_put(tree, sharding)

    def one(a):
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(one, tree)


@jit
def _on_mesh(static, mesh, dyn, chunk):
    spec = PartitionSpec(mesh.axis_names)

    def local(dyn, chunk):  # one device's shard, solved on it alone
        return eqx.combine(dyn, static)(*chunk)

    return jax.shard_map(local, mesh=mesh, in_specs=(PartitionSpec(), spec), out_specs=spec, check_vma=False)(
        dyn, chunk
    )


def usable_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
