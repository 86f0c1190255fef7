"""Motions to play: a ``Trajectory``, batched ``State``s, a states ``.sto``, a
coordinates ``.mot``/``.sto``, or a ``TimeSeriesTable``, as one batched ``State``;
and experimental markers from a ``.trc``.

A table whose columns name state variables (``/jointset/hip_r/hip_flexion_r/value``)
is read as states (``simjax.io.states.states_from_table``); otherwise its columns are
matched to coordinates by name or path (``coordinates_from_table``), degrees converted
to radians as its ``inDegrees`` header says. Variables a file lacks keep the model's
default values.
"""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np

from ..io.states import coordinates_from_table, states_from_table
from ..io.tables import TimeSeriesTable, read_table
from ..state import State

__all__ = ["MotionError", "motion_states", "resample_states", "marker_trajectories"]


class MotionError(ValueError):
    """A motion that does not fit the model (names the source and lists the model's
    coordinates)."""


def _describe(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"the {type(source).__name__}"


def _from_table(system, table: TimeSeriesTable, where: str) -> State:
    names = set(system.q_names) | set(system.u_names) | set(system.z_names)
    labels = ["/" + lab.lstrip("/") for lab in table.labels]
    if any(lab in names for lab in labels):
        return states_from_table(system, table, allow_missing=True, allow_extra=True)
    times, values, speeds = coordinates_from_table(system, table)
    if not values:
        raise MotionError(
            f"{where}: no column names a coordinate of model {system.model.name!r}. Its columns: "
            f"{', '.join(table.labels)}. The model's coordinates: {', '.join(system.coordinate_names)}"
        )
    coords = system.topology.tree.coordinates
    base = system.default_state()
    n = len(times)
    q = np.array(np.broadcast_to(np.asarray(base.q, float), (n, len(base.q))))
    u = np.zeros((n, len(base.u)))
    for path, v in values.items():
        info = coords[path]
        if info.q < 0:
            raise MotionError(
                f"{where}: column for {path!r} sets a rotation of a quaternion joint; build the "
                "model with use_quaternions=False to play coordinate motions"
            )
        q[:, info.q] = v
        if path in speeds:
            u[:, info.u] = speeds[path]
    z = np.broadcast_to(np.asarray(base.z, float), (n, len(base.z)))
    d = np.broadcast_to(np.asarray(base.d, float), (n, len(base.d)))
    return State(t=jnp.asarray(times), q=jnp.asarray(q), u=jnp.asarray(u), z=jnp.asarray(z), d=jnp.asarray(d))


def motion_states(system, source) -> State:
    """The states of a motion, batched over its frames.

    **Arguments:** ``system``: the built system; ``source``: a ``Trajectory`` (its
    valid rows), a ``State`` (batched, or one state), a ``TimeSeriesTable``, or a file
    path (``.sto``, ``.mot``, ``.csv``).

    **Returns:** a ``State`` with a leading frame axis (``t (n,)``, ``q (n, nq)``, ...).

    **Raises:** ``MotionError`` for a table whose columns name no coordinate or state
    variable of the model (listing the model's coordinates); ``TypeError`` for other
    sources.
    """
    if isinstance(source, State):
        if np.ndim(source.t) == 0:
            return State(*(jnp.asarray(x)[None] for x in (source.t, source.q, source.u, source.z, source.d)))
        return source
    if hasattr(source, "valid") and hasattr(source, "q") and hasattr(source, "system"):  # a Trajectory
        keep = np.flatnonzero(np.asarray(source.valid))
        d = np.asarray(source.d)
        d = np.broadcast_to(d, (len(keep),) + d.shape[-1:]) if d.ndim == 1 else d[keep]
        return State(
            t=jnp.asarray(source.t)[keep],
            q=jnp.asarray(source.q)[keep],
            u=jnp.asarray(source.u)[keep],
            z=jnp.asarray(source.z)[keep],
            d=jnp.asarray(d),
        )
    if isinstance(source, (str, os.PathLike)):
        return _from_table(system, read_table(source), os.fspath(source))
    if isinstance(source, TimeSeriesTable):
        return _from_table(system, source, "the motion table")
    raise TypeError(
        f"cannot play a {type(source).__name__}: give a Trajectory, a State, a TimeSeriesTable or a file path"
    )


def resample_states(system, states: State, times) -> State:
    """States at other times, interpolated linearly between a motion's frames (held
    constant outside it); quaternions are renormalized.

    **Arguments:** ``system``; ``states``: batched, with increasing ``t``; ``times (k,)`` (s).

    **Returns:** a batched ``State`` at ``times``.
    """
    t = np.asarray(states.t, float)
    times = np.asarray(times, float)

    def interp(x):
        x = np.asarray(x, float)
        if x.shape[1] == 0 or len(t) == 1:
            return np.broadcast_to(x[:1], (len(times),) + x.shape[1:]).copy()
        return np.stack([np.interp(times, t, x[:, j]) for j in range(x.shape[1])], -1)

    q = interp(states.q)
    for m in np.asarray(system.topology.tree.quat_q, int):
        q[:, m : m + 4] /= np.linalg.norm(q[:, m : m + 4], axis=1, keepdims=True)
    d = np.asarray(states.d)
    d = np.broadcast_to(d[:1] if d.ndim == 2 else d[None], (len(times), d.shape[-1]))
    return State(
        t=jnp.asarray(times),
        q=jnp.asarray(q),
        u=jnp.asarray(interp(states.u)),
        z=jnp.asarray(interp(states.z)),
        d=jnp.asarray(d),
    )


def marker_trajectories(source, times) -> tuple[tuple[str, ...], np.ndarray]:
    """Experimental marker positions at given times, from a ``.trc`` file or a ``Vec3``
    table, in metres (converted from the file's ``Units``).

    **Arguments:** ``source``: a path or a ``TimeSeriesTable`` of ``Vec3`` columns;
    ``times (n,)`` (s): where to sample them (linear interpolation; NaN outside the
    data and where a marker is missing).

    **Returns:** ``(names, positions (n, k, 3))``.

    **Raises:** ``MotionError`` for a table that is not of 3-vectors or has unknown units.
    """
    where = _describe(source)
    table = read_table(source) if isinstance(source, (str, os.PathLike)) else source
    values = np.asarray(table.values, float)
    if values.ndim != 3 or values.shape[2] != 3:
        raise MotionError(
            f"{where}: experimental markers must be a table of 3-vectors (a .trc file), got values "
            f"of shape {values.shape}"
        )
    units = str(table.metadata.get("Units", "m")).strip().lower()
    scale = {"m": 1.0, "mm": 1e-3, "cm": 1e-2, "meters": 1.0, "millimeters": 1e-3}.get(units)
    if scale is None:
        raise MotionError(f"{where}: unknown marker units {units!r} (Units header; expected m, cm or mm)")
    t = np.asarray(table.times, float)
    times = np.asarray(times, float)
    out = np.full((len(times), values.shape[1], 3), np.nan)
    inside = (times >= t[0]) & (times <= t[-1])
    for k in range(values.shape[1]):
        for c in range(3):
            col = values[:, k, c]
            ok = np.isfinite(col)
            if ok.sum() >= 2:
                out[inside, k, c] = np.interp(times[inside], t[ok], col[ok])
            # markers missing in some frames: NaN there again (no interpolation across gaps)
            if not ok.all():
                nearest = np.clip(np.searchsorted(t, times, side="left"), 0, len(t) - 1)
                out[~ok[nearest], k, c] = np.nan
    return tuple(table.labels), out * scale
