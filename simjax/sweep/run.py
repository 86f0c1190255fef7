"""Running a sweep: the cases in chunks through ``simulate_batch``, each finished chunk a
Parquet file, finished chunks skipped on a restart.

Every chunk has the spec's ``chunk_size`` rows (the last padded with copies of its
last case, the copies dropped), so the batch compiles once. Within a chunk the model
properties of the case table are batched leaves of one vmapped solve
(``simulate_batch(..., properties=...)``), sharded over the local devices where there
are several. A case that fails (a non-finite state, a step budget exceeded) keeps its
row, with its result code and its inputs; its outputs are NaN or what the solve
reached.

With the spec's ``equilibrate`` each chunk's initial states first go through a vmapped
``equilibrate_muscles`` (each case with its own properties and controls); with
``trajectories`` each chunk's sampled states are written too, to
``_trajectories/chunk-000003.parquet`` before the chunk's own file, so that a finished
chunk always has them.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np

from .parquet import chunk_path, finished_chunks, prepare_folder, write_chunk, write_trajectories
from .spec import SweepSpec, read_spec

__all__ = ["SweepSummary", "sweep"]


@dataclasses.dataclass(frozen=True)
class SweepSummary:
    """What a call of ``sweep`` did.

    **Fields:** ``out_dir``; ``n_cases``; ``n_chunks``; ``chunks_run`` (this call);
    ``chunks_skipped`` (finished before); ``failed`` (cases run by this call whose
    result code is not 0); ``seconds`` (wall time of this call).
    """

    out_dir: str
    n_cases: int
    n_chunks: int
    chunks_run: int
    chunks_skipped: int
    failed: int
    seconds: float


def sweep(spec, out_dir: str, *, cases=None, devices=None, progress: bool = True, on_chunk=None) -> SweepSummary:
    """Run a sweep: every case of the table simulated, the results written to
    ``out_dir`` as Parquet files, one a chunk; finished chunks of an earlier, interrupted
    run of the same sweep are skipped.

    **Arguments:**

    - ``spec``: a path to a ``.json`` (or ``.toml``) spec, a ``dict`` of the same keys,
      or a ``SweepSpec`` (see ``simjax.sweep.spec``).
    - ``out_dir``: the output folder (created; it must be empty or hold this sweep).
    - ``cases``: the case table instead of the spec's (a path, ``pyarrow.Table`` or
      pandas ``DataFrame``).
    - ``devices``: as ``simulate_batch``'s (default: all local devices when several).
    - ``progress``: print a line a chunk (to stderr) with the cases done, cases per
      second and the time left.
    - ``on_chunk``: called as ``on_chunk(index, path)`` after each chunk's file is
      written.

    With the spec's ``trajectories``, every case's states at that many times are
    written too (``read_trajectories``).

    Run in several processes after ``jax.distributed.initialize`` (one a host or a
    GPU; ``simjax sweep --processes N`` on one machine), every process calls ``sweep``
    with the same arguments: each chunk is sharded over all processes' devices, and
    process 0 writes the files and the progress lines.

    **Returns:** a ``SweepSummary``. Each row of the output has ``case``, the inputs
    (the table's columns), the outputs at ``t_final`` (a vector output as
    ``name[i]`` columns), ``result`` (0 = success, else ``simulate``'s result code,
    e.g. ``NONFINITE_STATE``), ``num_steps`` and ``t_end`` (s).

    **Raises:** ``SpecError`` for bad spec input, before any case runs;
    ``ValueError`` if ``out_dir`` holds another sweep's results.
    """
    import jax

    started = time.perf_counter()
    spec = read_spec(spec, cases=cases) if cases is not None or not isinstance(spec, SweepSpec) else spec
    out_dir = str(out_dir)
    n, size = spec.n_cases, spec.chunk_size
    n_chunks = -(-n // size)
    # several processes (after jax.distributed.initialize): all run every chunk, each on
    # its own devices' shard of it; process 0 writes the files
    writer = jax.process_index() == 0
    if writer:
        prepare_folder(out_dir, spec.fingerprint, n, size)
    _barrier("simjax.sweep: folder ready")
    done = finished_chunks(out_dir)
    todo = [k for k in range(n_chunks) if k not in done]
    runner = _Runner(spec, devices)
    ran, failed, t_first, cases_since = 0, 0, None, 0
    cases_done = sum(min(size, n - j * size) for j in done if j < n_chunks)
    for k in todo:
        rows = np.arange(k * size, min((k + 1) * size, n))
        columns, samples = runner(rows)
        failed += int(np.count_nonzero(columns["result"]))
        if writer and samples is not None:
            write_trajectories(out_dir, k, samples)
        path = write_chunk(out_dir, k, columns) if writer else chunk_path(out_dir, k)
        ran += 1
        cases_done += len(rows)
        if t_first is None:
            t_first = time.perf_counter()
        else:
            cases_since += len(rows)
        if progress and writer:
            _report(k, n_chunks, n, cases_done, len(rows), cases_since, t_first, started)
        if on_chunk is not None:
            on_chunk(k, path)
    _barrier("simjax.sweep: done")
    return SweepSummary(
        out_dir=out_dir,
        n_cases=n,
        n_chunks=n_chunks,
        chunks_run=ran,
        chunks_skipped=n_chunks - len(todo),
        failed=failed,
        seconds=time.perf_counter() - started,
    )


def _barrier(name: str) -> None:
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _report(k, n_chunks, n, cases_done, first, cases_since, t_first, started) -> None:
    now = time.perf_counter()
    # (the rate leaves out the first chunk, which compiled the batch)
    rate = cases_since / (now - t_first) if cases_since else first / max(now - started, 1e-9)
    left = (n - cases_done) / rate if rate > 0 else float("inf")
    print(
        f"sweep: chunk {k + 1}/{n_chunks} written, {cases_done}/{n} cases, {rate:.1f} cases/s, {_duration(left)} left",
        file=sys.stderr,
        flush=True,
    )


def _duration(seconds: float) -> str:
    if not np.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _Runner:
    """One chunk of cases -> its rows. Built once a sweep, so the batch and the outputs
    compile once (every chunk has the same size)."""

    def __init__(self, spec: SweepSpec, devices):
        import jax.numpy as jnp

        from ..simulate import property_target

        self.spec, self.devices = spec, devices
        system = spec.system
        base = system.set_coordinates(system.default_state(), spec.coordinates)
        self.base = {f: np.asarray(getattr(base, f)) for f in ("q", "u", "z", "d")}
        self.t0 = float(base.t)
        where = {}
        for field in ("q", "u", "z"):
            for i, name in enumerate(getattr(system, f"{field}_names")):
                where[name] = (field, i)
        self.where = where
        self.targets = tuple(property_target(system, name) for name in spec.properties)
        self.component_outputs = tuple(o for o in spec.outputs if o not in where)
        self.controls = None if spec.controls is None else jnp.asarray(spec.controls)
        if spec.case_controls and self.controls is None:
            self.controls = jnp.zeros(len(system.actuator_paths))
        self._outputs_fn = _outputs_function(system, self.targets, self.component_outputs)
        self._equilibrate_fn = _equilibrate_function(system, self.targets)

    def __call__(self, rows: np.ndarray):
        """The rows of the cases ``rows`` (``{column: (m,) array}``), and their
        trajectories' rows (``None`` without the spec's ``trajectories``)."""
        import jax
        import jax.numpy as jnp

        from ..batching import gather, map_batch
        from ..simulate import simulate_batch
        from ..state import State

        spec, size = self.spec, self.spec.chunk_size
        m = len(rows)
        idx = np.concatenate([rows, np.full(size - m, rows[-1])]) if m < size else rows  # padded to one shape
        arrays = {f: np.tile(v, (size, 1)) for f, v in self.base.items()}
        for name, values in spec.states.items():
            field, i = self.where[name]
            arrays[field][:, i] = values[idx]
        states = State(
            t=jnp.full(size, self.t0),
            q=jnp.asarray(arrays["q"]),
            u=jnp.asarray(arrays["u"]),
            z=jnp.asarray(arrays["z"]),
            d=jnp.asarray(arrays["d"]),
        )
        controls = None
        if self.controls is not None:
            controls = np.tile(np.asarray(self.controls), (size, 1))
            for name, values in spec.case_controls.items():
                controls[:, spec.system.actuator_paths.index(name)] = values[idx]
            controls = jnp.asarray(controls)
        props = {name: jnp.asarray(values[idx]) for name, values in spec.properties.items()}
        if spec.equilibrate:
            values = tuple(props.values())
            args = (values, states) if controls is None else (values, states, controls)
            states = gather(map_batch(self._equilibrate_fn, *args, devices=self.devices))
            states = jax.tree.map(jnp.asarray, states)
        traj = simulate_batch(
            spec.system,
            states,
            spec.t_final,
            controls,
            properties=props,
            devices=self.devices,
            throw=False,
            n_outputs=spec.trajectories or 2,
            **spec.simulate,
        )
        # (every process of a multi-process run gets the whole chunk's results)
        kept = dict(y_end=traj.y_end, t_end=traj.t_end, d=traj.d, result=traj.result, num_steps=traj.num_steps)
        if spec.trajectories:
            kept.update(t=traj.t, y=traj.y)
        got = gather(kept)
        y_end = got["y_end"]
        columns = {"case": spec.case[rows]}
        for name, values in spec.properties.items():
            columns[name] = values[rows]
        for name, values in spec.states.items():
            columns[name] = values[rows]
        outs = {}
        if self.component_outputs:
            nq, nu = states.q.shape[-1], states.u.shape[-1]
            final = State(t=got["t_end"], q=y_end[:, :nq], u=y_end[:, nq : nq + nu], z=y_end[:, nq + nu :], d=got["d"])
            values = tuple(props.values())
            args = (values, final) if controls is None else (values, final, controls)
            outs = gather(map_batch(self._outputs_fn, *args, devices=self.devices))
        offsets = {"q": 0, "u": states.q.shape[-1], "z": states.q.shape[-1] + states.u.shape[-1]}
        for name in spec.outputs:
            if name in self.where:
                field, i = self.where[name]
                columns[name] = y_end[:m, offsets[field] + i]
                continue
            value = np.asarray(outs[name], np.float64).reshape(size, -1)[:m]
            if value.shape[1] == 1:
                columns[name] = value[:, 0]
            else:
                for j in range(value.shape[1]):
                    columns[f"{name}[{j}]"] = value[:, j]
        columns["result"] = np.asarray(got["result"], np.int64)[:m]
        columns["num_steps"] = np.asarray(got["num_steps"], np.int64)[:m]
        columns["t_end"] = np.asarray(got["t_end"], np.float64)[:m]
        return columns, (self._samples(spec.case[rows], got) if spec.trajectories else None)

    def _samples(self, case: np.ndarray, got: dict) -> dict:
        """The trajectories' rows, one a case and time: ``case``, ``time`` (s) and every
        state variable (``y_names``); samples a case did not reach are NaN."""
        m, n = len(case), self.spec.trajectories
        t = np.asarray(got["t"], np.float64)[:m]
        y = np.asarray(got["y"], np.float64)[:m]
        reached = np.isfinite(t)
        columns = {"case": np.repeat(case, n), "time": np.where(reached, t, np.nan).reshape(-1)}
        for j, name in enumerate(self.spec.system.y_names):
            columns[name] = np.where(reached, y[:, :, j], np.nan).reshape(-1)
        return columns


def _equilibrate_function(system, targets):
    """``fn(values, state[, controls]) -> state`` for one case: its muscles in
    equilibrium, with its properties set."""
    from ..muscles.equilibrium import equilibrate_muscles
    from ..simulate import with_properties

    def fn(values, state, controls=None):
        return equilibrate_muscles(with_properties(system, targets, values), state, controls)

    return fn


def _outputs_function(system, targets, names):
    """``fn(values, state[, controls]) -> {output: value}`` for one case: the component
    outputs at its final state, with its properties set."""
    from ..api import output
    from ..simulate import with_properties

    def fn(values, state, controls=None):
        case_system = with_properties(system, targets, values)
        return {name: output(case_system, state, name, controls) for name in names}

    return fn
