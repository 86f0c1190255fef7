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

Batches whose elements see each other (inverse kinematics' frames, each warm-started
from the one before) run per device through ``map_shards``: each device's program
gets a ``BatchAxis`` whose collectives (``previous``, ``max``) reach across the
shards.
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

__all__ = [
    "BatchAxis",
    "map_batch",
    "map_shards",
    "cache_chunk",
    "usable_cores",
    "batch_mesh",
    "gather",
    "mesh_for",
]


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
    traced = _traced(leaves)
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


def mesh_for(devices, *trees) -> Mesh | None:
    """The mesh a batch of ``trees`` is sharded over: ``batch_mesh(devices)``, or ``None``
    where any of their leaves is traced (inside ``jax.jit``, ``jax.grad`` or
    ``jax.vmap`` the batch joins the caller's program, unsharded).

    **Arguments:** ``devices``: as ``batch_mesh``; ``trees``: the batch's pytrees.

    **Returns:** a ``Mesh`` or ``None`` (run unsharded).
    """
    return None if _traced(jax.tree.leaves(trees)) else batch_mesh(devices)


def _traced(leaves) -> bool:
    return any(isinstance(a, jax.core.Tracer) for a in leaves)


class BatchAxis(eqx.Module):
    """The batch axis as one shard of a ``map_shards`` batch sees it: which of its
    elements are real (not padding), and collectives over the whole batch.

    **Fields:** ``valid``: ``(n_shard,)`` bool, ``False`` at the padding;
    ``names``: the mesh axes the batch is split over (``None`` unsharded: the shard is
    the whole batch); ``size``: the number of shards.
    """

    valid: jax.Array
    names: tuple | None = eqx.field(static=True, default=None)
    size: int = eqx.field(static=True, default=1)

    def previous(self, x, first):
        """Each element's predecessor in the whole batch (across shards).

        **Arguments:** ``x``: an array whose leading axis is the shard's batch;
        ``first``: what the batch's first element gets (the shape of ``x[0]``).

        **Returns:** ``y`` of ``x``'s shape with ``y[i] = x[i - 1]`` over the whole
        batch, ``y[0] = first``.
        """
        head = jnp.asarray(first, x.dtype)[None]
        if self.names is not None and self.size > 1:  # the last element of the shard before
            incoming = jax.lax.ppermute(x[-1:], self.names, [(i, i + 1) for i in range(self.size - 1)])
            head = jnp.where(jax.lax.axis_index(self.names) == 0, head, incoming)
        return jnp.concatenate([head, x[:-1]])

    def max(self, x):
        """The largest of ``x`` over the whole batch's real elements.

        **Arguments:** ``x``: an array whose leading axis is the shard's batch.

        **Returns:** a scalar, the same on every shard (``-inf`` for an empty batch).
        """
        x = jnp.where(self.valid.reshape(self.valid.shape + (1,) * (x.ndim - 1)), x, -jnp.inf)
        m = jnp.max(x, initial=-jnp.inf)
        return jax.lax.pmax(m, self.names) if self.names is not None else m


def map_shards(call: Callable, *args, devices=None):
    """``call(axis, *args)`` over a batch whose elements see each other: each device runs
    ``call`` on its shard, and ``axis`` (a ``BatchAxis``) reaches the others.

    Unsharded (one device, or inside a trace), ``call`` runs once on the whole batch.
    Sharded, the batch is padded to a multiple of the devices with copies of its last
    element (``axis.valid`` is ``False`` there) and split into contiguous shards, one a
    device, all in one call (one compiled program; ``jax.shard_map``), and the padding
    is dropped from the outputs.

    **Arguments:** ``call``: a pytree (e.g. a ``jax.tree_util.Partial`` of a
    module-level function) called as ``call(axis, *shard)``; its array leaves are
    shared by every element (replicated on the devices) and its other leaves hashed to
    cache the compiled program; it returns a pytree of arrays, each with the shard's
    batch as leading axis; ``args``: pytrees of arrays with a common leading batch
    axis; ``devices``: as ``map_batch``'s.

    **Returns:** ``call``'s outputs over the whole batch (sharded over the mesh when
    sharded).
    """
    leaves = jax.tree.leaves(args)
    n = leaves[0].shape[0]
    mesh = mesh_for(devices, args, call)
    if mesh is None:
        return _whole(call, *args)
    return _map_sharded(call, args, n, mesh, None, collective=True)


@jit
def _whole(call, *args):
    n = jax.tree.leaves(args)[0].shape[0]
    return call(BatchAxis(jnp.ones(n, bool)), *args)


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


def _map_sharded(call, args, n: int, mesh: Mesh, chunk_size: int | None, collective: bool = False):
    """``call`` over the batch ``args`` (``n`` elements) sharded over ``mesh``: in calls
    of ``chunk_size`` elements a device (default: the whole batch at once), the last
    padded with copies of the last element. ``collective``: ``call`` takes a
    ``BatchAxis`` first (``map_shards``), and the batch goes in one call."""
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
        outs.append(_on_mesh(static, mesh, n if collective else None, dyn, _place(chunk, batched)))
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
def _on_mesh(static, mesh, n, dyn, chunk):
    spec = PartitionSpec(mesh.axis_names)

    def local(dyn, chunk):  # one device's shard, solved on it alone
        fn = eqx.combine(dyn, static)
        if n is None:
            return fn(*chunk)
        # (map_shards: the shard's place in the batch, its padding, the collectives)
        m = jax.tree.leaves(chunk)[0].shape[0]
        position = jax.lax.axis_index(mesh.axis_names) * m + jnp.arange(m)
        return fn(BatchAxis(position < n, mesh.axis_names, mesh.size), *chunk)

    return jax.shard_map(local, mesh=mesh, in_specs=(PartitionSpec(), spec), out_specs=spec, check_vma=False)(
        dyn, chunk
    )


def usable_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
