"""Trajectory files: solutions written and read as OpenSim Moco's ``MocoTrajectory``
``.sto`` files, and initial guesses from any time-series table.

- ``write_trajectory``: an ``OptimalTrajectory`` as the ``.sto`` file
  ``MocoSolution::write`` writes (``opensim.MocoTrajectory(path)`` loads it);
- ``read_trajectory``: such a file (Moco's or ours) as numpy arrays by name;
- ``guess_from_table``: an initial guess for ``optimize.solve(..., guess=...)`` from a
  MocoTrajectory file or any table (``.sto``/``.mot``, e.g. inverse-kinematics output),
  interpolated onto the problem's grid.

The file layout (``MocoTrajectory::convertToTable``): a ``time`` column (every point of
the grid: with Hermite–Simpson the mesh points and the midpoints between them), then the
states by path (``/jointset/pin/q/value``), the controls by actuator path
(``/forceset/tau``), then input controls (none), the kinematic constraints'
multipliers (``lambda_cid2_p0``), derivatives (implicit mode's ``.../accel``, implicit
tendons' ``.../implicitderiv_normalized_tendon_force``), slacks (the velocity
corrections, ``gamma_cid2_p0``) and parameters (a parameter's value sits in the first
row, NaN below). The header counts each group (``num_states=``,
``num_controls=``, ``num_input_controls=``, ``num_multipliers=``,
``num_derivatives=``, ``num_slacks=``, ``num_parameters=``), says ``inDegrees=no``, and
for a solution adds ``success=true|false``, ``status=`` (IPOPT's return status:
``Solve_Succeeded``, ...), ``objective=``, ``objective_<goal name>=`` per goal and
``num_iterations=``; the keys are sorted, as Moco's ``std::map`` sorts them.

Deliberate differences from Moco's files: numbers (the objective and its terms
included) are written with the shortest text that reads back as the same float64
(Moco: 16 significant digits in the data, 6 decimals in the header); there is no
``solver_duration`` (simjax does not time the solve).
"""

from __future__ import annotations

import math
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..io.tables import TimeSeriesTable, read_table, write_table
from ..mechanics.joints import ROTATIONAL
from . import ipm
from .collocation import OptimalTrajectory, _trajectory, transcribe

__all__ = [
    "write_trajectory",
    "read_trajectory",
    "guess_from_table",
    "trajectory_table",
    "objective_terms",
    "TrajectoryWarning",
    "MOCO_STATUS",
]

#: ``ipm.STATUS`` codes as the IPOPT return statuses Moco writes (``status=``)
MOCO_STATUS = {
    0: "Solve_Succeeded",
    1: "Maximum_Iterations_Exceeded",
    2: "Infeasible_Problem_Detected",
    3: "Invalid_Number_Detected",
    4: "Error_In_Step_Computation",
}

# MocoTrajectory's column groups, in the file's order, with their header counts
_GROUPS = (
    ("states", "num_states"),
    ("controls", "num_controls"),
    ("input_controls", "num_input_controls"),
    ("multipliers", "num_multipliers"),
    ("derivatives", "num_derivatives"),
    ("slacks", "num_slacks"),
    ("parameters", "num_parameters"),
)


class TrajectoryWarning(UserWarning):
    """A table given as a guess lacks some of the problem's variables or has columns
    that name none of them (the message names the file)."""


# -- writing ----------------------------------------------------------------------------------


def _status_text(code: int) -> str:
    if code in MOCO_STATUS:
        return MOCO_STATUS[code]
    words = ipm.STATUS.get(code, f"status {code}")
    return "_".join(w.capitalize() for w in str(words).split())


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _goal_names(problem, goal_names) -> list[str]:
    goals = problem.goals
    if goal_names is not None:
        names = [str(n) for n in goal_names]
        if len(names) != len(goals):
            raise ValueError(f"goal_names: {len(names)} names for the problem's {len(goals)} goals")
    else:
        names = [str(getattr(g, "name", None) or _snake(type(g).__name__)) for g in goals]
        seen: dict[str, int] = {}
        for i, n in enumerate(names):  # (Moco's goal names are unique)
            seen[n] = seen.get(n, 0) + 1
            if seen[n] > 1:
                names[i] = f"{n}_{seen[n]}"
    if len(set(names)) != len(names):
        raise ValueError(f"goal_names must be unique, got {names}")
    bad = [n for n in names if not n or n != n.strip() or any(ch in n for ch in "=\n\r\t")]
    if bad:
        raise ValueError(f"goal names {bad} cannot be written as header keys 'objective_<name>='")
    return names


def _is_hermite_simpson(solution) -> bool:
    K = int(np.shape(solution.nlp.z)[-2])  # (mesh points; Hermite-Simpson's grid adds the midpoints)
    return K > 1 and int(np.shape(solution.time)[-1]) == 2 * K - 1


def objective_terms(solution: OptimalTrajectory, problem, goal_names=None) -> dict[str, float]:
    """Each goal's weighted term of the objective at ``solution`` (``{goal name:
    value}``), as Moco's ``MocoSolution.getObjectiveTerm``: endpoint terms at the
    solution's initial and final times, integrals by the transcription's own rule on
    its grid (Simpson's with Hermite–Simpson, else the trapezoidal rule). Where the
    solve minimized the implicit variables (``accelerations_weight``,
    ``auxiliary_derivatives_weight``) or the projection distance (Bordalba et al.'s
    method), their terms too, by Moco's names ``accelerations``,
    ``auxiliary_derivatives`` and ``state_projection``.

    **Arguments:** ``solution`` (not batched); ``problem``: the problem it solves;
    ``goal_names``: one name per goal (default: each goal's ``name`` if it has one,
    else its class's name in snake case, ``control_effort``, ``final_time``).
    """
    from .problem import Ends

    names = _goal_names(problem, goal_names)
    t = np.asarray(solution.time, float)
    y, c = jnp.asarray(solution.states), jnp.asarray(solution.controls)
    system = (
        problem.with_parameters(problem.system, jnp.asarray(solution.parameters))
        if problem.parameters
        else problem.system
    )
    hs = _is_hermite_simpson(solution)
    out = {}
    for name, goal in zip(names, problem.goals):
        value = 0.0
        end = goal.endpoint(problem, t[0], t[-1])
        if end is not None:
            value += goal.weight * float(end)
        if getattr(goal, "mode", "cost") == "cost" and hasattr(goal, "endpoint_values"):
            ends = Ends(jnp.asarray(t[0]), y[0], c[0], jnp.asarray(t[-1]), y[-1], c[-1])
            value += goal.weight * float(jnp.sum(goal.endpoint_values(problem, ends, system) ** 2))
        if goal.integrand(problem, t[0], y[0], c[0]) is not None:
            f = np.asarray(
                jax.vmap(lambda ti, yi, ci: goal.integrand(problem, ti, yi, ci, system))(jnp.asarray(t), y, c), float
            )
            value += goal.weight * _integral(t, f, hs)
        out[name] = value
    # Moco's penalties on the multipliers and the implicit variables, named and ordered as Moco's
    weights = solution.penalty_weights
    multipliers = np.zeros((len(t), 0)) if solution.multipliers is None else np.asarray(solution.multipliers, float)
    if weights[2] is not None and multipliers.shape[1]:
        out["multipliers"] = weights[2] * _integral(t, np.sum(multipliers**2, axis=1), hs)
    derivatives = np.zeros((len(t), 0)) if solution.derivatives is None else np.asarray(solution.derivatives, float)
    accelerations = np.asarray([n.endswith("/accel") for n in solution.derivative_names], bool)
    for name, weight, columns in zip(
        ("accelerations", "auxiliary_derivatives"), weights[:2], (accelerations, ~accelerations)
    ):
        if weight is not None and columns.any():
            out[name] = weight * _integral(t, np.sum(derivatives[:, columns] ** 2, axis=1), hs)
    if weights[3] is not None and solution.projection_states is not None:  # (a sum over the intervals' ends)
        projected = np.asarray(solution.projection_states, float)
        ends = np.asarray(y, float)[slice(2, None, 2) if hs else slice(1, None), : projected.shape[1]]
        out["state_projection"] = weights[3] * float(np.sum((projected - ends) ** 2))
    return out


def _integral(t, f, hs: bool) -> float:
    """The integral of ``f`` over the grid ``t`` by the transcription's quadrature:
    Simpson's rule with Hermite–Simpson, else the trapezoidal rule."""
    if hs:
        h = t[2::2] - t[:-2:2]
        return float(np.sum(h / 6.0 * (f[:-2:2] + 4.0 * f[1::2] + f[2::2])))
    return float(np.sum(np.diff(t) / 2.0 * (f[:-1] + f[1:])))


def _check_single(solution) -> None:
    t, y, c = (np.shape(a) for a in (solution.time, solution.states, solution.controls))
    if len(t) != 1 or len(y) != 2 or len(c) != 2:
        raise ValueError(
            f"a trajectory file holds one solution, but this one is batched: time {t}, states {y}, "
            f"controls {c} (pick one, e.g. jax.tree_util.tree_map(lambda a: a[i], solution))"
        )


def trajectory_table(solution: OptimalTrajectory, problem=None, goal_names=None) -> TimeSeriesTable:
    """The ``TimeSeriesTable`` ``write_trajectory`` writes (see there)."""
    _check_single(solution)
    time = np.asarray(solution.time, float)
    states, controls = np.asarray(solution.states, float), np.asarray(solution.controls, float)
    names = list(solution.state_names) + list(solution.control_names)
    if states.shape[1] != len(solution.state_names) or controls.shape[1] != len(solution.control_names):
        raise ValueError(
            f"states {states.shape} and controls {controls.shape} do not match "
            f"{len(solution.state_names)} state and {len(solution.control_names)} control names"
        )
    # (Moco's order: multipliers, derivatives, slacks)
    others = []
    for kind in ("multipliers", "derivatives", "slacks"):
        labels = tuple(getattr(solution, kind[:-1] + "_names"))
        values = getattr(solution, kind)
        values = np.zeros((len(time), 0)) if values is None else np.asarray(values, float)
        if values.shape != (len(time), len(labels)):
            raise ValueError(f"the solution's {kind} {values.shape} do not match its {len(labels)} {kind[:-1]} names")
        names += list(labels)
        others.append(values)
    parameters = np.asarray(solution.parameters, float)
    names += list(solution.parameter_names)
    meta = {
        "inDegrees": "no",
        "num_states": str(states.shape[1]),
        "num_controls": str(controls.shape[1]),
        "num_input_controls": "0",
        "num_multipliers": str(others[0].shape[1]),
        "num_derivatives": str(others[1].shape[1]),
        "num_slacks": str(others[2].shape[1]),
        "num_parameters": str(len(parameters)),
    }
    status = int(np.asarray(solution.status))
    if status >= 0:  # a solution (a guess, status -1, is a plain MocoTrajectory)
        meta["success"] = "true" if status == 0 else "false"
        meta["status"] = _status_text(status)
        meta["objective"] = repr(float(np.asarray(solution.objective)))
        meta["num_iterations"] = str(int(np.asarray(solution.iterations)))
        if problem is not None:
            if tuple(problem.state_names) != tuple(solution.state_names) or tuple(problem.control_names) != tuple(
                solution.control_names
            ):
                raise ValueError("the problem's states and controls are not the solution's")
            for name, value in objective_terms(solution, problem, goal_names).items():
                meta[f"objective_{name}"] = repr(float(value))
    meta = dict(sorted(meta.items()))  # (Moco's metadata is a std::map)
    try:
        # (a parameter's column: its value in the first row, NaN below, as Moco's)
        columns = np.full((len(time), len(parameters)), np.nan)
        columns[:1] = parameters
        return TimeSeriesTable(time, np.concatenate([states, controls, *others, columns], axis=1), names, meta)
    except ValueError as exc:
        raise ValueError(f"the solution cannot be written as a table: {exc}") from None


def write_trajectory(solution: OptimalTrajectory, path, problem=None, *, goal_names=None) -> None:
    """Write a solution as a Moco ``MocoTrajectory`` ``.sto`` file (see the module),
    which ``opensim.MocoTrajectory(path)`` loads.

    **Arguments:** ``solution``: an ``OptimalTrajectory`` of one problem (a guess from
    ``guess_from_table`` is written as a plain MocoTrajectory, without ``success``,
    ``status`` and ``objective``); ``path``: the file (``.sto``); ``problem``: the
    problem it solves, to write each goal's term (``objective_<name>=``, see
    ``objective_terms``); ``goal_names``: their names.

    **Raises:** ``ValueError`` for a batched solution (naming its shapes).
    """
    write_table(trajectory_table(solution, problem, goal_names), path)


# -- reading ----------------------------------------------------------------------------------


def _count(meta: dict, key: str, path, required: bool) -> int:
    if key not in meta:
        if required:
            raise ValueError(f"{path}: not a MocoTrajectory file (its header has no '{key}=')")
        return 0
    try:
        n = int(str(meta[key]).strip())
    except ValueError:
        raise ValueError(f"{path}: {key}={meta[key]!r} is not a count") from None
    if n < 0:
        raise ValueError(f"{path}: invalid {key}={n}")
    return n


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_trajectory(path) -> dict:
    """Read a ``MocoTrajectory`` ``.sto`` file (Moco's or ``write_trajectory``'s).

    **Returns:** a dict: ``time (n,)``; ``states``, ``controls``, ``input_controls``,
    ``multipliers``, ``derivatives``, ``slacks`` (each ``{name: (n,) array}``, in the
    file's order); ``parameters`` (``{name: float}``); ``state_names``,
    ``control_names`` (lists); ``objective`` (float or ``None``), ``objective_terms``
    (``{goal name: float}``), ``success`` (bool or ``None``), ``status`` (str or
    ``None``), ``iterations`` (int or ``None``): what a solution's header says;
    ``metadata``: the whole header.

    **Raises:** ``ValueError`` naming the file when it is not a MocoTrajectory (no
    ``num_states=`` ...) or its counts do not add up to its columns.
    """
    path = os.fspath(path)
    table = read_table(path)
    if table.vec_size is not None:
        raise ValueError(f"{path}: a MocoTrajectory has scalar columns, this file has {table.data_type}")
    meta = dict(table.metadata)
    counts = [(group, _count(meta, key, path, key != "num_input_controls")) for group, key in _GROUPS]
    total = sum(n for _, n in counts)
    if total != table.n_columns:
        raise ValueError(
            f"{path}: the header counts {total} columns "
            f"({', '.join(f'{k}={n}' for (_, k), (_, n) in zip(_GROUPS, counts))}) "
            f"but the file has {table.n_columns}"
        )
    labels, values = list(table.labels), table.to_numpy()
    out: dict = {"time": np.asarray(table.times, float).copy()}
    j = 0
    for group, n in counts:
        cols = {labels[j + i]: values[:, j + i].copy() for i in range(n)}
        out[group] = {k: float(v[0]) for k, v in cols.items()} if group == "parameters" else cols
        j += n
    out["state_names"], out["control_names"] = list(out["states"]), list(out["controls"])
    out["objective"] = _number(meta.get("objective"))
    out["objective_terms"] = {k[len("objective_") :]: _number(v) for k, v in meta.items() if k.startswith("objective_")}
    success = str(meta.get("success", "")).strip().lower()
    out["success"] = {"true": True, "false": False}.get(success)
    out["status"] = meta.get("status")
    iterations = _number(meta.get("num_iterations"))
    out["iterations"] = None if iterations is None else int(iterations)
    out["metadata"] = meta
    return out


# -- guesses ----------------------------------------------------------------------------------


def _variables(problem) -> dict[str, tuple[str, int]]:
    """``{column label: ("state" | "control", index)}``: the names a table may use for
    the problem's variables (state paths; coordinates by path or, if unique, by name,
    for their values, and ``<path>/speed``; actuators by path or, if unique, by name).
    Labels are matched with a leading ``/`` added where they lack one."""
    out: dict[str, tuple[str, int]] = {}
    states = list(problem.state_names)
    for i, n in enumerate(states):
        out[n] = ("state", i)
    tree = problem.system.topology.tree
    by_name: dict[str, list[str]] = {}
    for path, info in tree.coordinates.items():
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        if info.q >= 0 and tree.q_names[info.q] in states:
            out.setdefault(path, ("state", states.index(tree.q_names[info.q])))
    for name, paths in by_name.items():
        if len(paths) == 1 and paths[0] in out:
            out.setdefault("/" + name, out[paths[0]])
    controls = list(problem.control_names)
    for i, p in enumerate(controls):
        out.setdefault(p, ("control", i))
    bare: dict[str, list[int]] = {}
    for i, p in enumerate(controls):
        bare.setdefault(p.rsplit("/", 1)[-1], []).append(i)
    for name, idx in bare.items():
        if len(idx) == 1:
            out.setdefault("/" + name, ("control", idx[0]))
    return out


def _rotational_states(problem) -> set[int]:
    tree = problem.system.topology.tree
    states = list(problem.state_names)
    out = set()
    for info in tree.coordinates.values():
        if info.motion_type == ROTATIONAL:
            for n in ((tree.q_names[info.q],) if info.q >= 0 else ()) + (tree.u_names[info.u],):
                if n in states:
                    out.add(states.index(n))
    return out


def _in_degrees(table: TimeSeriesTable) -> bool:
    return str(table.metadata.get("inDegrees", "no")).strip().lower() == "yes"


def _moco_columns(table: TimeSeriesTable) -> set[str] | None:
    """The state and control columns of a MocoTrajectory table (``None`` for another
    table): Moco names them by path; other groups are not the problem's variables."""
    meta = table.metadata
    if "num_states" not in meta or "num_controls" not in meta:
        return None
    try:
        n = int(meta["num_states"]) + int(meta["num_controls"])
    except ValueError:
        return None
    return set(table.labels[:n])


def guess_from_table(
    problem, source, mesh=50, scheme: str = "hermite-simpson", kinematic_constraint_method: str = "Posa2016"
) -> OptimalTrajectory:
    """An initial guess for ``optimize.solve(problem, mesh, scheme, guess=...)`` from a
    table.

    **Arguments:**

    - ``problem``: the ``Problem``;
    - ``source``: a ``TimeSeriesTable`` or a file (``.sto``/``.mot``/``.csv``): a
      MocoTrajectory (``write_trajectory``'s or Moco's), a states file, or a
      coordinates file such as inverse-kinematics output. Columns are matched to the
      problem's states by path (``/jointset/pin/q/value``, ``.../speed``), coordinate
      values also by coordinate path or name (``/jointset/pin/q``, ``q``), controls by
      actuator path or name; a label may lack the leading ``/``. With
      ``inDegrees=yes`` the values and speeds of rotational coordinates are converted
      to radians;
    - ``mesh``, ``scheme``, ``kinematic_constraint_method``: as ``solve``'s (the
      transcription the guess is for).

    The initial and final times are the table's first and last, clipped to the
    problem's time bounds; every variable is interpolated linearly onto the grid
    (with Hermite–Simpson the midpoints too; held at the table's end values outside
    its time range) and clipped to its bounds. Variables the table lacks take
    ``transcribe``'s default (the midpoint of their bounds); Bordalba et al.'s
    projection states take the states' guess at the intervals' ends.

    **Returns:** an ``OptimalTrajectory`` (``status`` -1, ``objective`` NaN, zero
    ``iterations``) whose ``nlp`` holds the NLP's starting point (``z``, ``g``, and
    zero multipliers); ``solve(..., guess=...)`` starts from it.

    **Warns:** ``TrajectoryWarning`` naming the file (and the columns) when the table
    lacks some of the problem's states or controls, has columns that name none of
    them, or does not cover the problem's time range.

    **Raises:** ``ValueError`` for a table without rows or with vector columns.
    """
    if isinstance(source, TimeSeriesTable):
        table, where = source, "the table"
    elif isinstance(source, (str, os.PathLike)):
        table, where = read_table(source), os.fspath(source)
    else:
        raise TypeError(f"source: expected a TimeSeriesTable or a file path, got {type(source).__name__}")
    if table.vec_size is not None:
        raise ValueError(f"{where}: a guess needs scalar columns; this table has {table.data_type} columns")
    if table.n_rows == 0:
        raise ValueError(f"{where}: the table has no rows")
    nlp, z0, g0, unpack = transcribe(problem, mesh, scheme, kinematic_constraint_method=kinematic_constraint_method)
    K, nz, m, ng, mg = nlp.shape
    ny, nc = len(problem.state_names), len(problem.control_names)
    hs = scheme == "hermite-simpson"

    # -- columns --------------------------------------------------------------------------
    names = _variables(problem)
    moco = _moco_columns(table)
    found: dict[tuple[str, int], int] = {}
    unknown, repeated = [], []
    for j, label in enumerate(table.labels):
        if label in problem.parameter_names:
            continue
        key = names.get(label if label.startswith("/") else "/" + label)
        if key is None or (moco is not None and label not in moco):
            unknown.append(label)
        elif key in found:
            repeated.append(f"{label} (the variable of column {table.labels[found[key]]})")
        else:
            found[key] = j
    if unknown or repeated:
        parts = (
            [f"columns that name none of the problem's states and controls: {', '.join(unknown)}"] if unknown else []
        ) + ([f"columns for a variable already given: {', '.join(repeated)}"] if repeated else [])
        warnings.warn(f"{where}: {'; '.join(parts)} (ignored)", TrajectoryWarning, stacklevel=2)
    missing = [n for i, n in enumerate(problem.state_names) if ("state", i) not in found] + [
        n for i, n in enumerate(problem.control_names) if ("control", i) not in found
    ]
    if missing:
        warnings.warn(
            f"{where}: no column for {', '.join(missing)}: the default guess (the midpoint of the bounds) is used",
            TrajectoryWarning,
            stacklevel=2,
        )

    # -- the grid ------------------------------------------------------------------------------
    times = np.asarray(table.times, float)
    lower, upper = np.asarray(nlp.border_lower, float), np.asarray(nlp.border_upper, float)
    g = np.clip(np.asarray([times[0], times[-1]]), lower[:2], upper[:2])
    if not g[1] > g[0]:  # (a one-row table, or one outside the time bounds)
        g = np.asarray(g0, float)[:2]
    grid = np.asarray(unpack(_Point(z0, jnp.asarray(g, z0.dtype)))[0], float)
    if grid[0] < times[0] - 1e-12 * max(1.0, abs(times[0])) or grid[-1] > times[-1] + 1e-12 * max(1.0, abs(times[-1])):
        warnings.warn(
            f"{where}: the table covers [{times[0]!r}, {times[-1]!r}] s, the problem's grid "
            f"[{grid[0]!r}, {grid[-1]!r}] s: its end values are held beyond",
            TrajectoryWarning,
            stacklevel=2,
        )

    # -- values on the grid --------------------------------------------------------------------
    values = table.to_numpy()
    degrees = _in_degrees(table)
    rotational = _rotational_states(problem)
    Z = np.array(z0, float)
    for (kind, i), j in found.items():
        column = values[:, j] * (math.pi / 180.0 if degrees and kind == "state" and i in rotational else 1.0)
        v = np.interp(grid, times, column) if len(times) > 1 else np.full(len(grid), column[0])
        col = i if kind == "state" else ny + i
        if hs:
            Z[:, col] = v[0::2]
            Z[:-1, ny + nc + col] = v[1::2]
        else:
            Z[:, col] = v
    others = unpack(_Point(z0, g0))[3]
    if others["projection_states"] is not None:  # (a stage's last variables: x', then 2 nl slacks)
        nmb, nl = others["projection_states"].shape[-1], others["multipliers"].shape[-1]
        start = nz - nmb - 2 * nl
        Z[1:, start : start + nmb] = Z[1:, :nmb]
    Z = np.clip(Z, np.asarray(nlp.z_lower, float), np.asarray(nlp.z_upper, float))
    # the border beyond the times: the parameters (a column named as one: its first
    # value), then the copies of the ends (the grid's first and last point)
    npar = len(problem.parameters)
    g = np.concatenate([g, np.asarray(g0, float)[2:]])
    for i, param in enumerate(problem.parameters):
        if param.name in table.labels:
            g[2 + i] = values[0, table.labels.index(param.name)]
    g[2 : 2 + npar] = np.clip(g[2 : 2 + npar], lower[2 : 2 + npar], upper[2 : 2 + npar])
    ne = (ng - 2 - npar) // 2
    if ne:
        g[2 + npar :] = np.concatenate([Z[0, :ne], Z[-1, :ne]])

    dtype = z0.dtype
    sol = ipm.Solution(
        z=jnp.asarray(Z, dtype),
        g=jnp.asarray(g, dtype),
        multipliers=jnp.zeros((K, m), dtype),
        border_multipliers=jnp.zeros(mg, dtype),
        objective=jnp.asarray(jnp.nan, dtype),
        status=jnp.asarray(-1),
        iterations=jnp.asarray(0),
        bad_stage=jnp.asarray(-1),
        constraint_violation=jnp.asarray(jnp.nan, dtype),
        log=jnp.zeros((0, 7), dtype),
    )
    return _trajectory(problem, unpack, sol)


class _Point:
    """What ``transcribe``'s ``unpack`` reads: ``z`` and ``g``."""

    def __init__(self, z, g):
        self.z, self.g = z, g
