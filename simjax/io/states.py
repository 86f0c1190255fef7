"""States and coordinate files: OpenSim ``.sto`` states and IK-style ``.mot`` motions.

A *states file* has one column per continuous state variable, labelled by its full
OpenSim name (``/jointset/pin1/q1/value``, ``/jointset/pin1/q1/speed``,
``/forceset/biceps/activation``), as ``Manager.getStatesTable()`` writes them:

- ``states_table``/``write_states``: simjax states (a single ``State`` or a batch
  with a leading time axis, such as the rows of a trajectory) to a table/file that
  OpenSim reads with ``StatesTrajectory.createFromStatesTable``;
- ``states_from_table``/``read_states``: back into a batched ``State``, by name.

A *coordinates file* (inverse-kinematics output) has one column per coordinate,
labelled by the coordinate's name or path, in degrees when its header says
``inDegrees=yes`` (only rotational coordinates are converted, as OpenSim does):

- ``coordinates_from_table``: the values (radians/metres) per coordinate path;
- ``state_from_motion``: an initial state from a row (or any time) of a motion;
- ``prescribe_motion``: a Model whose coordinates follow the motion (an
  interpolating ``SimmSpline`` per coordinate, so speeds and accelerations are its
  derivatives).

Tables come from ``simjax.io.tables`` (``read_table`` picks the adapter by extension).
"""

from __future__ import annotations

import math
import os

import jax.numpy as jnp
import numpy as np

from ..functions import Constant, SimmSpline
from ..mechanics.joints import ROTATIONAL
from ..state import State
from .tables import TimeSeriesTable, read_table, write_table

__all__ = [
    "state_variable_columns",
    "states_table",
    "write_states",
    "states_from_table",
    "read_states",
    "coordinates_from_table",
    "state_from_motion",
    "prescribe_motion",
]


def _as_table(source) -> TimeSeriesTable:
    if isinstance(source, TimeSeriesTable):
        return source
    if isinstance(source, (str, os.PathLike)):
        return read_table(source)
    raise TypeError(f"expected a TimeSeriesTable or a file path, got {type(source).__name__}")


def _index(system) -> dict[str, tuple[str, int]]:
    out = {}
    for field, names in (("q", system.q_names), ("u", system.u_names), ("z", system.z_names)):
        for i, n in enumerate(names):
            out[n] = (field, i)
    return out


def state_variable_columns(system) -> tuple[str, ...]:
    """Column labels of a states table: OpenSim's state-variable names, in its order.

    (Per coordinate its ``value`` then ``speed``, then the other continuous
    variables; a model built with ``use_quaternions`` adds its quaternion entries,
    which OpenSim does not know.)
    """
    names = list(system.state_variable_names)
    present = set(names)
    names += [n for n in system.q_names if n not in present]
    return tuple(names)


def _rotational_columns(system) -> set[str]:
    tree = system.topology.tree
    out = set()
    for info in tree.coordinates.values():
        if info.motion_type == ROTATIONAL:
            if info.q >= 0:
                out.add(tree.q_names[info.q])
            out.add(tree.u_names[info.u])
    return out


def states_table(system, states: State, name: str | None = None) -> TimeSeriesTable:
    """A states table of ``states`` (OpenSim's ``Manager.getStatesTable()`` layout).

    **Arguments:** ``system``: the built system; ``states``: one ``State`` or a batch
    with a leading time axis; ``name``: the table's header line (default: the model
    name).

    **Returns:** a ``TimeSeriesTable`` in radians (``inDegrees=no``).
    """
    t = np.atleast_1d(np.asarray(states.t, dtype=float))
    arrays = {f: np.asarray(getattr(states, f), dtype=float).reshape(len(t), -1) for f in ("q", "u", "z")}
    index = _index(system)
    labels = state_variable_columns(system)
    values = np.empty((len(t), len(labels)))
    for j, lab in enumerate(labels):
        field, i = index[lab]
        values[:, j] = arrays[field][:, i]
    meta = {"inDegrees": "no", "header": name or system.model.name}
    return TimeSeriesTable(t, values, labels, meta)


def write_states(system, states: State, path: str | os.PathLike, name: str | None = None) -> None:
    """Write ``states`` as an OpenSim states file (``.sto``; see ``states_table``)."""
    write_table(states_table(system, states, name), path)


def _label_to_name(label: str) -> str:
    return label if label.startswith("/") else "/" + label


def states_from_table(
    system, source, *, allow_missing: bool = False, allow_extra: bool = False, template: State | None = None
) -> State:
    """Simjax states from a states table or file, matched by state-variable name.

    **Arguments:**

    - ``system``: the built system.
    - ``source``: a ``TimeSeriesTable`` or a file path.
    - ``allow_missing``: fill variables the table lacks from ``template``
      (default: ``system.default_state()``) instead of raising.
    - ``allow_extra``: ignore columns that name no state variable instead of
      raising.
    - ``template``: see ``allow_missing``; its discrete variables are used too.

    Labels may omit the leading ``/`` (older OpenSim files). With ``inDegrees=yes``
    the values and speeds of rotational coordinates are converted to radians.

    **Returns:** a ``State`` batched over the table's rows (``t`` of shape ``(n,)``).

    **Raises:** ``KeyError`` listing missing or unknown columns.
    """
    table = _as_table(source)
    index = _index(system)
    wanted = state_variable_columns(system)
    cols = {}
    extra = []
    for j, lab in enumerate(table.labels):
        n = _label_to_name(lab)
        if n in index:
            cols[n] = j
        else:
            extra.append(lab)
    if extra and not allow_extra:
        raise KeyError(
            f"states table columns name no state variable of model {system.model.name!r}: "
            f"{', '.join(extra)} (pass allow_extra=True to ignore them)"
        )
    missing = [n for n in wanted if n not in cols]
    if missing and not allow_missing:
        raise KeyError(
            f"states table lacks state variables: {', '.join(missing)} "
            "(pass allow_missing=True to take them from a template state)"
        )
    values = table.to_numpy()
    if table.in_degrees:
        rot = _rotational_columns(system)
        for n, j in cols.items():
            if n in rot:
                values[:, j] = values[:, j] * (math.pi / 180.0)
    base = template if template is not None else system.default_state()
    nrow = table.n_rows
    arrays = {
        f: np.array(np.broadcast_to(np.asarray(getattr(base, f), float), (nrow,) + getattr(base, f).shape))
        for f in ("q", "u", "z", "d")
    }
    for n, j in cols.items():
        field, i = index[n]
        arrays[field][:, i] = values[:, j]
    return State(
        t=jnp.asarray(table.times),
        q=jnp.asarray(arrays["q"]),
        u=jnp.asarray(arrays["u"]),
        z=jnp.asarray(arrays["z"]),
        d=jnp.asarray(arrays["d"]),
    )


def read_states(system, path: str | os.PathLike, **options) -> State:
    """Read an OpenSim states file into a batched ``State`` (see ``states_from_table``)."""
    return states_from_table(system, path, **options)


# -- coordinate motions ---------------------------------------------------------------------


def _coordinate_columns(system, table: TimeSeriesTable) -> dict[str, tuple[int, int | None]]:
    """``{coordinate path: (value column, speed column or None)}`` of a motion table."""
    coords = system.topology.tree.coordinates
    by_name: dict[str, list[str]] = {}
    for p in coords:
        by_name.setdefault(p.rsplit("/", 1)[-1], []).append(p)
    out: dict[str, list] = {}
    for j, lab in enumerate(table.labels):
        key, kind = lab, 0
        for suffix, k in (("/value", 0), ("/speed", 1)):
            if lab.endswith(suffix):
                key, kind = lab[: -len(suffix)], k
        path = _label_to_name(key)
        if path not in coords:
            hits = by_name.get(key, [])
            if len(hits) != 1:
                continue  # not a coordinate of this model (or an ambiguous name)
            path = hits[0]
        out.setdefault(path, [None, None])[kind] = j
    return {p: (v[0], v[1]) for p, v in out.items() if v[0] is not None}


def coordinates_from_table(system, source) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Coordinate values (and speeds, where the table has them) of a motion.

    **Arguments:** ``system``: the built system; ``source``: a table or a file path
    (``.mot``/``.sto``). Columns are matched to coordinates by name, path or
    ``path/value`` (``path/speed`` for speeds); others are ignored.

    **Returns:** ``(times, values, speeds)``: ``values``/``speeds`` map coordinate
    paths to arrays in radians or metres (converted from degrees for rotational
    coordinates when ``inDegrees=yes``).
    """
    table = _as_table(source)
    cols = _coordinate_columns(system, table)
    data = table.to_numpy()
    coords = system.topology.tree.coordinates
    scale = math.pi / 180.0 if table.in_degrees else 1.0
    values, speeds = {}, {}
    for p, (jv, js) in cols.items():
        k = scale if coords[p].motion_type == ROTATIONAL else 1.0
        values[p] = data[:, jv] * k
        if js is not None:
            speeds[p] = data[:, js] * k
    return np.asarray(table.times, float), values, speeds


def _motion_function(times: np.ndarray, values: np.ndarray):
    if len(times) == 1:
        return Constant(float(values[0]))
    return SimmSpline(x=times, y=values)


def state_from_motion(
    system, source, time: float | None = None, state: State | None = None, speeds: str = "spline"
) -> State:
    """A state whose coordinates take a motion's values at ``time``.

    **Arguments:**

    - ``system``, ``source``: as ``coordinates_from_table``.
    - ``time``: where in the motion (default: its first time).
    - ``state``: the state to modify (default: ``system.default_state()``).
    - ``speeds``: ``"spline"`` (speed columns if present, else the derivative of the
      interpolating spline ``prescribe_motion`` uses), ``"zero"`` or ``"keep"``.

    **Returns:** a single ``State`` at ``time``.
    """
    if speeds not in ("spline", "zero", "keep"):
        raise ValueError(f"speeds must be 'spline', 'zero' or 'keep', got {speeds!r}")
    times, values, given = coordinates_from_table(system, source)
    t = float(times[0]) if time is None else float(time)
    base = state if state is not None else system.default_state()
    coords = system.topology.tree.coordinates
    q, u = np.array(base.q, float), np.array(base.u, float)
    for p, v in values.items():
        info = coords[p]
        if info.q < 0:
            raise ValueError(
                f"{p}: a quaternion joint's angles cannot be set from a motion; build the model "
                "with use_quaternions=False"
            )
        f = _motion_function(times, v)
        q[info.q] = float(f(t))
        if speeds == "zero":
            u[info.u] = 0.0
        elif speeds == "spline":
            u[info.u] = float(np.interp(t, times, given[p])) if p in given else float(f.derivative(t, 1))
    return State(t=jnp.asarray(t, base.t.dtype), q=jnp.asarray(q), u=jnp.asarray(u), z=base.z, d=base.d)


def prescribe_motion(model, source, coordinates=None):
    """A Model whose coordinates follow a motion (OpenSim's prescribed coordinates).

    **Arguments:**

    - ``model``: the Model.
    - ``source``: a motion table or file (see ``coordinates_from_table``).
    - ``coordinates``: names or paths of the coordinates to prescribe (default:
      every coordinate the motion has).

    Each coordinate gets ``prescribed=True`` and a ``SimmSpline`` through the
    motion's values as ``prescribed_function`` (a ``Constant`` for a one-row motion).

    **Returns:** the new Model.

    **Raises:** ``KeyError`` for a requested coordinate the motion lacks;
    ``ValueError`` for a locked coordinate.
    """
    system = model.build()
    times, values, _ = coordinates_from_table(system, source)
    if coordinates is not None:
        paths = [system.coordinate_path(c) for c in coordinates]
        lacking = [p for p in paths if p not in values]
        if lacking:
            raise KeyError(f"the motion has no column for {', '.join(lacking)}")
        values = {p: values[p] for p in paths}
    for p, v in values.items():
        if model.find(p).locked:
            raise ValueError(f"{p}: a locked coordinate cannot be prescribed; unlock it first")
        model = model.set(p, prescribed=True, prescribed_function=_motion_function(times, v))
    return model
