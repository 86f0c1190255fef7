"""More of Moco's goals and constraints: ``StateTracking`` (``MocoStateTrackingGoal``),
``MarkerTracking`` (``MocoMarkerTrackingGoal``), ``OutputIntegral`` (``MocoOutputGoal``),
``Periodicity`` (``MocoPeriodicityGoal``), ``AverageSpeed`` (``MocoAverageSpeedGoal``) and
the path constraint ``OutputBound`` (``MocoOutputBoundConstraint``).

They follow the interfaces of ``problem``: a ``Goal`` is ``weight`` times an integral
over the phase of ``integrand(problem, t, y, controls, system)``, a pure JAX expression
at one grid point (``t`` may be traced, e.g. with a free final time), integrated by the
transcription's quadrature as Moco integrates (``collocation``), or a function of the
phase's ends (``endpoint_values``); a ``PathConstraint`` bounds values at every mesh
point.

Everything a goal needs from the model (which states it tracks, their weights, the
reference splines) is resolved once per system, eagerly, on the first call (the
transcription makes that call before it traces anything); errors Moco raises when it
initializes the problem are raised then, by ``transcribe``/``solve``, or earlier by
``StateTracking.tracked``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .problem import Goal

__all__ = ["StateTracking", "MarkerTracking", "OutputIntegral", "Periodicity", "AverageSpeed"]


def _cached(goal, problem, build):
    """``build(problem)``, computed once per system and state names, outside any trace."""
    key = (problem.system, problem.state_names, problem.control_names)
    hit = goal._cache.get("prepared")
    if hit is not None and hit[0][0] is key[0] and hit[0][1:] == key[1:]:
        return hit[1]
    with jax.ensure_compile_time_eval():
        value = build(problem)
    goal._cache["prepared"] = (key, value)
    return value


# -- StateTracking ---------------------------------------------------------------------


def _reference_table(reference, goal: str = "StateTracking"):
    """The reference as a ``TimeSeriesTable``: a table as is, or a file read with
    simjax's table readers (``.sto``, ``.mot``, ``.trc``, ``.csv``, ...), as Moco's
    ``TableProcessor(filepath)`` reads it (relative to the working directory)."""
    from ..io.tables import TimeSeriesTable, read_table

    if isinstance(reference, TimeSeriesTable):
        return reference
    if isinstance(reference, (str, os.PathLike)):
        path = os.fspath(reference)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{goal}: reference file {path!r} does not exist")
        return read_table(path)
    raise TypeError(f"{goal}: reference must be a TimeSeriesTable or a file path, got {type(reference).__name__}")


def _in_degrees(table) -> bool:
    """``TableUtilities::isInDegrees``: the ``inDegrees`` metadata must be present and
    ``yes`` or ``no``."""
    if "inDegrees" not in table.metadata:
        raise ValueError(
            "StateTracking: the reference table has no 'inDegrees' metadata (Moco requires it: "
            "set table.in_degrees = False, or write inDegrees=no in the file's header)"
        )
    value = str(table.metadata["inDegrees"]).strip()
    if value not in ("yes", "no"):
        raise ValueError(
            f"StateTracking: expected the reference table's 'inDegrees' metadata to be 'yes' or 'no', but got {value!r}"
        )
    return value == "yes"


def _rotational_columns(system, labels) -> np.ndarray:
    """The columns ``SimbodyEngine::scaleRotationalDofColumns`` converts: a label
    names a coordinate by its whole text, else by its last path element, else by
    the element before that (so ``/jointset/knee/flexion/value`` and ``.../speed``
    are coordinate ``flexion``); converted if that coordinate is Rotational."""
    from ..mechanics.joints import ROTATIONAL
    from ..tools.motion import motion_types

    types = motion_types(system)

    def coordinate(label):
        if label in types:
            return label
        prefix, _, short = label.rpartition("/")
        if short in types:
            return short
        return prefix.rpartition("/")[2]

    return np.asarray([types.get(coordinate(lab)) == ROTATIONAL for lab in labels], bool)


@dataclasses.dataclass(frozen=True)
class StateTracking(Goal):
    """Moco's ``MocoStateTrackingGoal``: ``weight * integral of sum_i w_i (y_i(t) -
    ref_i(t)) ** 2 dt``, over the columns ``i`` of a reference table.

    As Moco 4.6 (``MocoStateTrackingGoal.cpp``, ``initializeOnModelImpl``):

    - the reference is processed as ``TableProcessor::processAndConvertToRadians``:
      its ``inDegrees`` metadata must say ``yes`` or ``no`` (an error without it);
      if ``yes``, the columns of Rotational coordinates, values and speeds, are
      converted to radians;
    - every column is splined by ``GCVSplineSet(table)``: a quintic ``GCVSpline``
      with error variance 0 (the natural quintic interpolant; ``simjax.functions``),
      evaluated at the grid's times (beyond the table's times the splines'
      quadratic continuation, as GCVSpline's);
    - every column is tracked: a column that is not a state path of the model
      (``problem.state_names``), or that does not match ``pattern``, is an error
      unless ``allow_unused_references``, which drops it;
    - ``w_i`` is ``weights[label]`` or 1, times ``1 / |max - min|`` of the column's
      data (the whole table, after conversion) if ``scale_weights_with_range``; a
      weight named for something that is not a state, or that does not match
      ``pattern``, is an error.

    **Fields:** ``reference``: a ``TimeSeriesTable`` or the path of a table file
    (``.sto``, ...), columns labelled by state path (``/jointset/pin/q/value``);
    ``weight``; ``weights``: ``{state path: w}``; ``pattern``: a regular
    expression a tracked state path must match entirely (``".*value$"``);
    ``allow_unused_references``; ``scale_weights_with_range``.

    Moco's ``MocoScaleFactor`` parameters (``addScaleFactor``) and the
    ``divide_by_*`` options of ``MocoGoal`` are not supported.
    """

    reference: Any
    weight: float = 1.0
    weights: Any = None
    pattern: str | None = None
    allow_unused_references: bool = False
    scale_weights_with_range: bool = False
    _cache: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def _prepare(self, problem):
        from ..functions import GCVSpline, stack_pp

        table = _reference_table(self.reference)
        if table.vec_size is not None:
            raise ValueError(f"StateTracking: the reference must be a table of scalars, not {table.data_type}")
        labels = list(table.labels)
        values = np.asarray(table.values, float)
        if _in_degrees(table):
            values = np.where(_rotational_columns(problem.system, labels)[None, :], values * (math.pi / 180.0), values)
        times = np.asarray(table.times, float)
        splines = [GCVSpline.from_degree(5, times, values[:, j], name=lab) for j, lab in enumerate(labels)]

        states = list(problem.state_names)
        regex = re.compile(self.pattern) if self.pattern is not None else None
        weights = dict(self.weights or {})
        for name in weights:
            if name not in states:
                raise ValueError(
                    f"StateTracking: weight provided with name {name!r} but this is not a recognized "
                    f"state (states: {', '.join(states)})"
                )
            if regex is not None and not regex.fullmatch(name):
                raise ValueError(
                    f"StateTracking: weight provided with name {name!r} but this name does not match "
                    f"the pattern {self.pattern!r}"
                )
        index, w, pps, names = [], [], [], []
        for j, label in enumerate(labels):
            if label not in states:
                if self.allow_unused_references:
                    continue
                raise ValueError(
                    f"StateTracking: state reference {label!r} unrecognized: the model's states are "
                    f"{', '.join(states)} (allow_unused_references=True ignores the column)"
                )
            if regex is not None and not regex.fullmatch(label):
                if self.allow_unused_references:
                    continue
                raise ValueError(
                    f"StateTracking: state reference {label!r} does not match the pattern {self.pattern!r}"
                )
            wj = float(weights.get(label, 1.0))
            if self.scale_weights_with_range:
                with np.errstate(divide="ignore"):
                    wj *= 1.0 / np.abs(np.max(values[:, j]) - np.min(values[:, j]))
            index.append(states.index(label))
            w.append(wj)
            pps.append(splines[j].to_pp())
            names.append(label)
        if not names:
            return None
        pp = stack_pp(pps)
        pp = jax.tree.map(lambda a: np.asarray(a) if isinstance(a, jax.Array) else a, pp)
        return dict(names=tuple(names), index=np.asarray(index, int), weights=np.asarray(w, float), pp=pp)

    def tracked(self, problem) -> dict:
        """The tracked states and their weights ``w_i``, ``{state path: w_i}``, in the
        reference's column order (checks the reference against the problem as
        ``solve`` does; raises what it raises)."""
        prep = _cached(self, problem, self._prepare)
        return {} if prep is None else dict(zip(prep["names"], prep["weights"].tolist()))

    def reference_at(self, problem, t):
        """The tracked references at time ``t`` (s; traceable), ``(n_tracked,)`` in
        ``tracked``'s order."""
        prep = _cached(self, problem, self._prepare)
        if prep is None:
            return jnp.zeros((0,))
        return jax.vmap(lambda pp: pp(t))(prep["pp"])

    def integrand(self, problem, t, y, controls, system=None):
        """The weighted squared tracking errors at one grid point; see ``Goal.integrand``."""
        prep = _cached(self, problem, self._prepare)
        if prep is None:  # (Moco tracks nothing, and integrates zero)
            return jnp.zeros((), jnp.result_type(y, float))
        error = y[prep["index"]] - self.reference_at(problem, t)
        return jnp.sum(jnp.asarray(prep["weights"]) * error * error)


# -- MarkerTracking --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MarkerTracking(Goal):
    """Moco's ``MocoMarkerTrackingGoal``: ``weight * integral of sum_i w_i |p_i(q) -
    ref_i(t)| ** 2 dt`` over the reference's markers ``i``, ``p_i`` the model marker's
    position in Ground (m).

    As Moco 4.6 (``MocoMarkerTrackingGoal.cpp``, ``MarkersReference``): the reference
    is a marker table (a ``.trc`` file or a table of ``Vec3`` columns), converted to
    meters from its ``Units`` metadata (meters without it); each coordinate of each
    marker is splined by a quintic ``GCVSpline`` with error variance 0 (as
    ``GCVSplineSet(table.flatten())``); a reference marker names a model marker by
    path or by name; one the model lacks is an error unless
    ``allow_unused_references``, which drops it; ``w_i`` is ``weights[name]`` or 1.

    **Fields:** ``reference``: a ``TimeSeriesTable`` or a file path; ``weight``;
    ``weights``: ``{marker name: w}``; ``allow_unused_references``.

    Moco's ``MocoScaleFactor``s on markers are not supported.
    """

    reference: Any
    weight: float = 1.0
    weights: Any = None
    allow_unused_references: bool = False
    _cache: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def _prepare(self, problem):
        from ..functions import GCVSpline, stack_pp
        from ..tools.kinematics import _model_marker_paths, _units_factor

        if problem.kinematics is not None:
            raise ValueError("MarkerTracking: the markers need the coordinates as states; this problem prescribes them")
        table = _reference_table(self.reference, "MarkerTracking")
        if table.vec_size != 3:
            raise ValueError(
                f"MarkerTracking: the reference must be a marker table (Vec3 columns, e.g. a .trc "
                f"file), not {table.data_type}"
            )
        if len(set(table.labels)) != len(table.labels):
            raise ValueError(f"MarkerTracking: the reference repeats a marker: {', '.join(table.labels)}")
        values = np.asarray(table.values, float) * _units_factor(table, "MarkerTracking reference")
        times = np.asarray(table.times, float)
        known = _model_marker_paths(problem.system)
        paths_known = set(known.values())
        weights = dict(self.weights or {})
        for name in weights:
            if name not in table.labels:
                raise ValueError(
                    f"MarkerTracking: a weight is given for {name!r}, which the reference does not have "
                    f"(its markers: {', '.join(table.labels)})"
                )
        paths, w, pps = [], [], []
        for j, label in enumerate(table.labels):
            path = label if label in paths_known else known.get(label)
            if path is None:
                if self.allow_unused_references:
                    continue
                raise ValueError(
                    f"MarkerTracking: marker {label!r} of the reference is not in the model (its "
                    f"markers: {', '.join(sorted(known))}; allow_unused_references=True drops it)"
                )
            if not np.all(np.isfinite(values[:, j])):
                raise ValueError(f"MarkerTracking: marker {label!r} of the reference has missing (NaN) values")
            paths.append(path)
            w.append(float(weights.get(label, 1.0)))
            pps += [GCVSpline.from_degree(5, times, values[:, j, d], name=f"{label}_{d}").to_pp() for d in range(3)]
        if not paths:
            return None
        pp = jax.tree.map(lambda a: np.asarray(a) if isinstance(a, jax.Array) else a, stack_pp(pps))
        return dict(paths=tuple(paths), weights=np.asarray(w, float), pp=pp)

    def tracked(self, problem) -> dict:
        """The tracked model markers and their weights, ``{marker path: w_i}``."""
        prep = _cached(self, problem, self._prepare)
        return {} if prep is None else dict(zip(prep["paths"], prep["weights"].tolist()))

    def integrand(self, problem, t, y, controls, system=None):
        """The weighted squared marker errors at one grid point (m^2); see ``Goal.integrand``."""
        from ..tools.kinematics import _marker_positions

        prep = _cached(self, problem, self._prepare)
        if prep is None:
            return jnp.zeros((), jnp.result_type(y, float))
        system = problem.system if system is None else system
        base = system.default_state()
        positions = _marker_positions(system, prep["paths"], y[: base.q.shape[0]].astype(base.q.dtype), base)
        reference = jax.vmap(lambda pp: pp(t))(prep["pp"]).reshape(-1, 3)
        error = positions - reference
        return jnp.sum(jnp.asarray(prep["weights"]) * jnp.sum(error * error, axis=-1))


# -- OutputIntegral --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OutputIntegral(Goal):
    """Moco's ``MocoOutputGoal``: ``weight * integral of v(t) ** exponent dt``, ``v``
    the value of a model output (``MocoOutputGoal.cpp``, ``MocoOutputBase``).

    As Moco 4.6: a scalar output is used as it is; a ``Vec3`` output (3 components)
    by its norm, or its component ``index``; a ``SpatialVec`` (6 components,
    angular first) by the norm of all six, or its component ``index`` (0-5); the
    power is ``v`` for exponent 1, ``v * v`` for 2 and ``|v| ** exponent`` above. The
    output is evaluated as ``simjax.api.output`` evaluates it, at the grid point's
    time, state and controls.

    **Fields:** ``output``: ``"component path|output name"``, as
    ``simjax.api.output`` takes it (``"/jointset/pin/q|speed"``,
    ``"/bodyset/body|position"``); ``weight``; ``exponent``: an int ``>= 1``
    (default 1, Moco's); ``index``: ``-1`` (default: the norm of a vector output)
    or a component.

    Moco's composite outputs (``second_output_path``, ``operation``) and the
    ``divide_by_*`` options of ``MocoGoal`` are not supported.

    Where Moco 4.6 itself goes wrong this does not follow it: for an output whose
    depends-on stage is ``Model`` (a Coordinate's ``value`` and ``speed``) Moco
    does not copy the grid point's states into the state it evaluates the output
    at (``MocoCasOCProblem.h``, ``convertStatesToSimTKState`` copies them only from
    stage ``Time`` up), so it integrates a stale value; here every output is
    evaluated at the grid point.
    """

    output: str
    weight: float = 1.0
    exponent: int = 1
    index: int = -1
    _cache: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def _check(self, problem):
        from ..api import output
        from ..state import State

        if not isinstance(self.exponent, (int, np.integer)) or self.exponent < 1:
            raise ValueError(f"OutputIntegral: exponent must be an int, 1 or greater, got {self.exponent!r}")
        if self.index < -1:
            raise ValueError(f"OutputIntegral: invalid output index {self.index}")
        if "|" not in self.output:
            raise ValueError(f"OutputIntegral: output {self.output!r}: expected 'component path|output name'")
        if problem.kinematics is not None:  # (the grid's states are the auxiliary ones alone)
            raise ValueError(
                f"OutputIntegral: output {self.output!r}: outputs of a problem whose kinematics are "
                "prescribed are not supported yet"
            )
        system = problem.system
        s = system.default_state()
        value = jax.eval_shape(
            lambda c: output(system, State(t=s.t, q=s.q, u=s.u, z=s.z, d=s.d), self.output, c),
            jnp.zeros(len(problem.control_names)),
        )
        shape = getattr(value, "shape", None)
        if shape == ():
            if self.index != -1:
                raise ValueError(f"OutputIntegral: an output index was provided, but {self.output!r} is a scalar")
        elif shape == (3,):
            if self.index > 2:
                raise ValueError(
                    f"OutputIntegral: {self.output!r} is a Vec3, but the output index {self.index} is greater than 2"
                )
        elif shape == (6,):
            if self.index > 5:
                raise ValueError(
                    f"OutputIntegral: {self.output!r} is a SpatialVec, but the output index "
                    f"{self.index} is greater than 5"
                )
        else:
            raise ValueError(
                f"OutputIntegral: the type of output {self.output!r} is not supported (a scalar, Vec3 or SpatialVec is)"
            )
        return shape

    def value(self, problem, t, y, controls, system=None):
        """The output's scalar value ``v`` at one grid point (before the exponent);
        ``system``: the system to evaluate it with (default ``problem.system``)."""
        from ..api import output
        from ..state import State

        shape = _cached(self, problem, self._check)
        system = problem.system if system is None else system
        tree = system.topology.tree
        nq, nu = tree.nq, tree.nu
        d = system.default_state().d
        state = State(t=jnp.asarray(t, jnp.result_type(y)), q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=d)
        v = jnp.asarray(output(system, state, self.output, controls))
        if shape == ():
            return v
        if self.index == -1:  # (the norm, with a zero derivative rather than NaN at 0)
            sq = jnp.sum(v * v)
            positive = sq > 0
            return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)
        return v[self.index]

    def integrand(self, problem, t, y, controls, system=None):
        """The output's value to the goal's exponent at one grid point; see ``Goal.integrand``."""
        return _power(self.value(problem, t, y, controls, system), self.exponent)


def _power(v, exponent: int):
    """Moco's power of an output value: ``v`` for exponent 1, ``v * v`` for 2,
    ``|v| ** exponent`` above."""
    if exponent == 1:
        return v
    if exponent == 2:
        return v * v
    return jnp.abs(v) ** exponent


# -- endpoint goals --------------------------------------------------------------------


def _check_mode(goal) -> None:
    if goal.mode not in ("endpoint_constraint", "cost"):
        raise ValueError(f"{type(goal).__name__}: mode {goal.mode!r}: choose 'endpoint_constraint' or 'cost'")


@dataclasses.dataclass(frozen=True)
class Periodicity(Goal):
    """Moco's ``MocoPeriodicityGoal``: for each pair, ``sign * initial value - final
    value``, ``sign = -1`` where the pair says ``negate``.

    **Fields:** ``states``, ``controls``: the pairs, each a name (the same variable at
    both ends), ``(initial name, final name)`` or ``(initial name, final name,
    negate)``; states by path, controls by actuator path or name; ``mode``:
    ``"endpoint_constraint"`` (Moco's default: each value zero) or ``"cost"``
    (``weight`` times the sum of their squares); ``weight``.

    **Raises** (on ``transcribe``): ``KeyError`` naming a state or control the model
    does not have.
    """

    states: tuple = ()
    controls: tuple = ()
    mode: str = "endpoint_constraint"
    weight: float = 1.0

    @staticmethod
    def _pairs(pairs):
        out = []
        for pair in pairs:
            if isinstance(pair, str):
                pair = (pair, pair)
            initial, final, *negate = pair
            out.append((initial, final, -1.0 if negate and negate[0] else 1.0))
        return out

    def endpoint_values(self, problem, ends, system=None):
        """Each pair's ``sign * initial - final`` value (the variables' units; zero where periodic)."""
        _check_mode(self)
        values = []
        for pairs, kind, first, last in (
            (self.states, "state", ends.y0, ends.yf),
            (self.controls, "control", ends.c0, ends.cf),
        ):
            for initial, final, sign in self._pairs(pairs):
                i, j = (_index(problem, name, kind) for name in (initial, final))
                values.append(sign * first[i] - last[j])
        return jnp.stack(values) if values else jnp.zeros(0, jnp.result_type(ends.y0))


def _index(problem, name: str, kind: str) -> int:
    found, i = problem._key(name)
    if found != kind:
        raise KeyError(f"{name!r} is a {found}, not a {kind}")
    return i


@dataclasses.dataclass(frozen=True)
class AverageSpeed(Goal):
    """Moco's ``MocoAverageSpeedGoal``: ``desired_average_speed - |r(tf) - r(t0)| /
    (tf - t0)``, ``r`` the whole model's mass center (m; speeds in m/s).

    **Fields:** ``desired_average_speed`` (m/s); ``mode``: ``"endpoint_constraint"``
    (Moco's default) or ``"cost"`` (``weight`` times its square); ``weight``.
    """

    desired_average_speed: float = 0.0
    mode: str = "endpoint_constraint"
    weight: float = 1.0

    def endpoint_values(self, problem, ends, system=None):
        """The average speed's error at the phase's ends, ``displacement / duration - desired`` (m/s)."""
        from ..api import mass_center
        from ..state import State

        _check_mode(self)
        if problem.kinematics is not None:
            raise ValueError(
                "AverageSpeed: the mass center needs the coordinates as states; this problem prescribes them"
            )
        system = problem.system if system is None else system
        tree = system.topology.tree
        nq, nu = tree.nq, tree.nu
        d = system.default_state().d

        def center(t, y):
            return mass_center(system, State(t=t, q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=d))[1]

        step = center(ends.tf, ends.yf) - center(ends.t0, ends.y0)
        sq = jnp.sum(step * step)
        distance = jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)
        return jnp.reshape(self.desired_average_speed - distance / (ends.tf - ends.t0), (1,))
