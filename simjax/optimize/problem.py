"""Optimal control problems over a ``System``, posed as Moco poses them.

A ``Problem`` is immutable: ``bound`` and ``goal`` return new problems, so problems
compose and can be built in a loop or a function::

    problem = (Problem(system, initial_time=0.0, final_time=(0.0, 5.0))
               .bound("/jointset/slider/x/value", (-10, 10), initial=0.0, final=1.0)
               .bound("/jointset/slider/x/speed", (-50, 50), initial=0.0, final=0.0)
               .bound("/forceset/actuator", (-50, 50))
               .goal(FinalTime()))

Names are OpenSim's: state variables by path (``system.y_names``), controls by
actuator path or name. Unset bounds are Moco's defaults: a coordinate's range for its
value, ``[-50, 50]`` for its speed, the actuator's ``min_control``/``max_control``, a
muscle's activation its excitation's bounds; unset initial or final bounds are the
path bounds.

``prescribe(table)`` fixes the coordinates to a motion (Moco's ``PositionMotion``, as
``MocoInverse`` uses it): the multibody states leave the problem, and the equations of
motion become a residual the controls must zero at every grid point.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import numpy as np

__all__ = [
    "Problem",
    "ControlEffort",
    "FinalTime",
    "Goal",
    "InitialActivation",
    "Kinematics",
    "Parameter",
    "PathConstraint",
    "Ends",
]


def _interval(value, what: str) -> tuple[float, float]:
    if value is None:
        return (-np.inf, np.inf)
    if np.ndim(value) == 0:
        return (float(value), float(value))
    lo, hi = (float(v) for v in value)
    if lo > hi:
        raise ValueError(f"{what}: lower bound {lo} is above the upper bound {hi}")
    return (lo, hi)


class Goal:
    """A term of the objective: ``weight`` times an integral over the phase
    (``integrand``) or an endpoint value (``endpoint``).

    A goal on the phase's initial and final states (Moco's ``GoalInput``) defines
    ``endpoint_values(problem, ends, system) -> (n,)`` instead, and a ``mode``:
    ``"endpoint_constraint"`` (the values must be zero) or ``"cost"`` (``weight`` times
    the sum of their squares), as Moco's ``MocoGoal`` modes.
    """

    weight: float = 1.0

    def integrand(self, problem, t, y, controls, system=None):  # pragma: no cover - interface
        """The integrand at one time ``t`` (s), state ``y`` and ``controls``, or
        ``None`` where the goal has no integral. ``system``: the system to evaluate the
        model with (default ``problem.system``; the transcription passes it with the
        problem's parameters set, and traced for derivatives)."""
        return None

    def endpoint(self, problem, t0, tf):
        """The endpoint term from the initial and final times (s), or ``None``."""
        return None


@dataclasses.dataclass(frozen=True)
class ControlEffort(Goal):
    """Moco's ``MocoControlGoal``: ``weight * integral of sum_i w_i |c_i| ** exponent
    dt``.

    **Fields:** ``weight``; ``exponent`` (``>= 2``); ``weights``: ``{control name or
    path: w_i}`` (default 1).
    """

    weight: float = 1.0
    exponent: float = 2.0
    weights: Any = None

    def integrand(self, problem, t, y, controls, system=None):
        """The weighted controls to the goal's exponent at one grid point; see ``Goal.integrand``."""
        import jax.numpy as jnp

        w = np.ones(len(problem.control_names))
        for name, value in dict(self.weights or {}).items():
            w[problem.control_index(name)] = value
        return jnp.sum(jnp.asarray(w) * jnp.abs(controls) ** self.exponent)


@dataclasses.dataclass(frozen=True)
class FinalTime(Goal):
    """Moco's ``MocoFinalTimeGoal``: ``weight * final time`` (s)."""

    weight: float = 1.0

    def endpoint(self, problem, t0, tf):
        """The final time's term, ``tf`` (s), as ``Goal.endpoint``."""
        return tf


@dataclasses.dataclass(frozen=True)
class InitialActivation(Goal):
    """Moco's ``MocoInitialActivationGoal`` (as a constraint): each muscle's initial
    activation equals its initial excitation, so that activation is not free at the
    start of the motion (``MocoInverse`` adds it)."""

    weight: float = 1.0

    def initial_rows(self, problem, y, controls):
        """``activation - excitation`` of each muscle with an activation state, at the
        initial time."""
        import jax.numpy as jnp

        pairs = problem.activation_pairs()
        if not pairs:
            return jnp.zeros(0)
        states, controls_ = (np.asarray(i, int) for i in zip(*pairs))
        return y[states] - controls[controls_]


class Ends(typing.NamedTuple):
    """The phase's ends, as an endpoint goal sees them: ``t0``, ``tf`` (s); ``y0``,
    ``yf``: the states in ``problem.state_names`` order; ``c0``, ``cf``: the controls."""

    t0: Any
    y0: Any
    c0: Any
    tf: Any
    yf: Any
    cf: Any


@dataclasses.dataclass(frozen=True)
class Parameter:
    """Moco's ``MocoParameter``: a model property as an optimisation variable, one
    value for the whole phase, within ``bounds``.

    **Fields:** ``name``; ``paths``: the component path, or several (each gets the same
    value, as Moco's ``component_paths``); ``property``: the property's name (a numeric
    field of those components: ``mass``, ``stiffness``, ``max_isometric_force``, ...);
    ``bounds``: ``(lower, upper)`` in the property's units; ``element``: for a
    vector property (``mass_center``, ``location``), the element the parameter sets
    (Moco's ``property_element``).
    """

    name: str
    paths: tuple
    property: str
    bounds: tuple
    element: int | None = None

    def check(self, system) -> None:
        """Check each path's property as ``simulate.property_target`` checks a batch's
        ``"path|property[element]"`` key (one validation, one set of messages).

        **Raises:** ``ValueError`` naming the parameter, the component path, the
        property and what is wrong: a path that names no component, a name that is not
        a numeric property of it, a vector property without ``element`` (or with one
        out of range), an ``element`` of a scalar property.
        """
        from ..simulate import property_target

        index = "" if self.element is None else f"[{self.element}]"
        for path in self.paths:
            try:
                property_target(system, f"{path}|{self.property}{index}")
            except ValueError as exc:
                raise ValueError(f"Parameter {self.name!r}: {exc}") from None

    def apply(self, system, value):
        """``system`` with the property set to ``value`` (traceable) on every path."""
        from ..simulate import with_properties

        return with_properties(
            system, [(p, self.property, self.element) for p in self.paths], [value] * len(self.paths)
        )


class PathConstraint:
    """A constraint at every mesh point (Moco's ``MocoPathConstraint``):
    ``lower <= values(problem, system, t, y, controls) <= upper``, each ``(n,)``.

    As Moco's default (``enforce_path_constraint_midpoints`` false), it holds at the
    mesh points, not at Hermite–Simpson's midpoints.
    """

    def values(self, problem, system, t, y, controls):  # pragma: no cover - interface
        """The constrained values at one mesh point, ``(n,)``."""
        raise NotImplementedError

    def bounds(self, problem) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - interface
        """``(lower, upper)``, each ``(n,)``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Kinematics:
    """A prescribed motion: coordinate values over time, splined as Moco's
    ``PositionMotion`` splines them (quintic ``GCVSpline``s, no smoothing).

    **Fields:** ``times (n,)`` (s); ``values (n, k)`` (rad or m); ``coordinates``: the
    ``k`` coordinate paths the columns belong to.
    """

    times: np.ndarray
    values: np.ndarray
    coordinates: tuple

    def at(self, system, t):
        """``(q, u, udot)`` of every coordinate at times ``t (n,)``: the splines' values
        and derivatives; a coordinate the motion does not name stays at its default
        value, at rest.

        **Returns:** three arrays ``(n, nq)``, ``(n, nu)``, ``(n, nu)``.
        """
        from ..io.tables import TimeSeriesTable
        from ..tools.motion import spline_kinematics

        tree = system.topology.tree
        t = np.asarray(t, float)
        q = np.tile(np.asarray(system.default_state().q, float), (len(t), 1))
        u, a = np.zeros((len(t), tree.nu)), np.zeros((len(t), tree.nu))
        table = TimeSeriesTable(self.times, self.values, list(self.coordinates), {})
        values, speeds, accelerations = (np.asarray(x) for x in spline_kinematics(table, t))
        for j, path in enumerate(self.coordinates):
            info = tree.coordinates[path]
            q[:, info.q], u[:, info.u], a[:, info.u] = values[:, j], speeds[:, j], accelerations[:, j]
        return q, u, a


@dataclasses.dataclass(frozen=True)
class Problem:
    """One phase of an optimal control problem over ``system``.

    **Fields:** ``system``; ``initial_time``, ``final_time``: a value or ``(lower,
    upper)`` (s); ``bounds``, ``initial``, ``final``: ``{name: (lower, upper)}`` of
    states and controls; ``goals``: a tuple of ``Goal``.
    """

    system: Any
    initial_time: Any = 0.0
    final_time: Any = 1.0
    bounds: tuple = ()
    initial: tuple = ()
    final: tuple = ()
    goals: tuple = ()
    kinematics: Any = None
    parameters: tuple = ()
    path_constraints: tuple = ()

    # -- building ------------------------------------------------------------------------

    def bound(self, name: str, bounds=None, *, initial=None, final=None) -> Problem:
        """A new problem with bounds on the state or control ``name``.

        **Arguments:** ``name``: a state variable's path or a control's actuator path
        or name; ``bounds``: ``(lower, upper)`` over the phase; ``initial``, ``final``:
        a value or ``(lower, upper)`` at the phase's ends (states only).

        **Raises:** ``KeyError`` naming an unknown state or control.
        """
        key = self._key(name)
        out = self
        if bounds is not None:
            out = dataclasses.replace(out, bounds=out.bounds + ((key, _interval(bounds, name)),))
        for field, value in (("initial", initial), ("final", final)):
            if value is not None:
                if key[0] != "state":
                    raise ValueError(f"{name}: initial and final bounds are for states, not controls")
                out = dataclasses.replace(out, **{field: getattr(out, field) + ((key, _interval(value, name)),)})
        return out

    def goal(self, goal: Goal) -> Problem:
        """A new problem with ``goal`` added to the objective."""
        return dataclasses.replace(self, goals=self.goals + (goal,))

    def parameter(self, name: str, paths, property: str, bounds, element: int | None = None) -> Problem:
        """A new problem with a model property as an optimisation variable (Moco's
        ``MocoParameter``; see ``Parameter``).

        **Arguments:** ``name``; ``paths``: a component path or a list of them;
        ``property``: the property's name; ``bounds``: ``(lower, upper)``;
        ``element``: the element of a vector property.

        **Raises:** ``ValueError`` naming the parameter, the component path and the
        property when one is missing or not numeric, or the name is taken.
        """
        paths = (paths,) if isinstance(paths, str) else tuple(paths)
        if any(p.name == name for p in self.parameters):
            raise ValueError(f"parameter {name!r} is already in the problem")
        param = Parameter(name, paths, property, _interval(bounds, f"parameter {name!r}"), element)
        param.check(self.system)
        return dataclasses.replace(self, parameters=self.parameters + (param,))

    def constrain(self, constraint: PathConstraint) -> Problem:
        """A new problem with a path constraint (e.g. ``goals.OutputBound``)."""
        return dataclasses.replace(self, path_constraints=self.path_constraints + (constraint,))

    def with_parameters(self, system, values):
        """``system`` with the parameters set to ``values (n_parameters,)`` (traceable)."""
        for i, param in enumerate(self.parameters):
            system = param.apply(system, values[i])
        return system

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The parameters' names, in the order they were added."""
        return tuple(p.name for p in self.parameters)

    def prescribe(self, table, allow_extra_columns: bool = False) -> Problem:
        """A new problem whose coordinates follow a motion (Moco's ``PositionMotion``).

        **Arguments:** ``table``: a ``TimeSeriesTable`` of coordinate values, columns
        named by coordinate name or path or by state path (``.../value``; speed
        columns are ignored: the speeds are the splines' derivatives); rotational
        columns in degrees where the table says ``inDegrees=yes``; it must cover the
        time bounds; ``allow_extra_columns``: ignore columns that name no coordinate.

        **Returns:** the problem with ``kinematics`` set: its states are the
        auxiliary ones (activations, ...) and its dynamics the residual of the
        equations of motion (Moco's implicit mode with prescribed kinematics).

        **Raises:** ``ValueError`` naming a column that is no coordinate of the model.
        """
        import math

        from ..tools.motion import in_degrees, rotational_mask

        system = self.system
        tree = system.topology.tree
        by_name = {p.rsplit("/", 1)[-1]: p for p in system.coordinate_paths}
        paths, columns = [], []
        for j, label in enumerate(table.labels):
            key = label[: -len("/value")] if label.endswith("/value") else label
            path = key if key in tree.coordinates else by_name.get(key.lstrip("/"))
            if path is None:
                if label.endswith("/speed") or allow_extra_columns:
                    continue
                raise ValueError(
                    f"prescribe: column {label!r} names no coordinate of the model "
                    f"({', '.join(sorted(by_name))}); pass allow_extra_columns=True to ignore it"
                )
            if path in paths:
                raise ValueError(f"prescribe: coordinate {path!r} has two columns")
            paths.append(path)
            columns.append(j)
        values = np.asarray(table.values, float)[:, columns]
        if in_degrees(table):
            names = [p.rsplit("/", 1)[-1] for p in paths]
            values = np.where(rotational_mask(system, names)[None, :], values * (math.pi / 180.0), values)
        return dataclasses.replace(self, kinematics=Kinematics(np.asarray(table.times, float), values, tuple(paths)))

    # -- names ---------------------------------------------------------------------------

    @property
    def state_names(self) -> tuple[str, ...]:
        """The states, in ``y = (q, u, z)`` order (``z`` alone where the kinematics are
        prescribed)."""
        return self.system.z_names if self.kinematics is not None else self.system.y_names

    def activation_pairs(self) -> list[tuple[int, int]]:
        """``(state index, control index)`` of each muscle's activation state and its
        excitation."""
        pairs = []
        for i, path in enumerate(self.control_names):
            name = f"{path}/activation"
            if name in self.state_names:
                pairs.append((self.state_names.index(name), i))
        return pairs

    @property
    def control_names(self) -> tuple[str, ...]:
        """The controls by actuator path, in the system's actuator order."""
        return self.system.actuator_paths

    def control_index(self, name: str) -> int:
        """The index of a control given its actuator path or name."""
        kind, i = self._key(name)
        if kind != "control":
            raise KeyError(f"{name!r} is a state, not a control")
        return i

    def _key(self, name: str) -> tuple[str, int]:
        if name in self.state_names:
            return ("state", self.state_names.index(name))
        paths = self.control_names
        if name in paths:
            return ("control", paths.index(name))
        named = [i for i, p in enumerate(paths) if p.rsplit("/", 1)[-1] == name.lstrip("/")]
        if len(named) == 1:
            return ("control", named[0])
        raise KeyError(
            f"{name!r} is neither a state ({', '.join(self.state_names)}) nor a control "
            f"({', '.join(paths)}) of the model"
        )

    # -- resolved bounds -----------------------------------------------------------------

    def time_bounds(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``((t0 lower, t0 upper), (tf lower, tf upper))`` (s)."""
        return _interval(self.initial_time, "initial_time"), _interval(self.final_time, "final_time")

    def path_bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(state lower, state upper, control lower, control upper)`` over the phase,
        Moco's defaults where unset."""
        system = self.system
        tree = system.topology.tree
        ny = len(self.state_names)
        skip = 0 if self.kinematics is None else tree.nq + tree.nu
        ylo, yhi = np.full(ny + skip, -np.inf), np.full(ny + skip, np.inf)
        for path, info in tree.coordinates.items():
            c = system.find(path)
            if info.q >= 0:
                lo, hi = (float(v) for v in np.ravel(c.range)[:2])
                ylo[info.q], yhi[info.q] = lo, hi
            ylo[tree.nq + info.u], yhi[tree.nq + info.u] = -50.0, 50.0
        clo = np.asarray([float(system.find(p).min_control) for p in self.control_names])
        chi = np.asarray([float(system.find(p).max_control) for p in self.control_names])
        ylo, yhi = ylo[skip:], yhi[skip:]
        for (kind, i), (lo, hi) in self.bounds:
            if kind == "control":
                clo[i], chi[i] = lo, hi
        # a muscle's activation within its excitation's bounds (Moco's
        # bound_activation_from_excitation), unless bounded itself
        for i, j in self.activation_pairs():
            ylo[i], yhi[i] = clo[j], chi[j]
        for (kind, i), (lo, hi) in self.bounds:
            if kind == "state":
                ylo[i], yhi[i] = lo, hi
        return ylo, yhi, clo, chi

    def end_bounds(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        """The state bounds at the ``"initial"`` or ``"final"`` time."""
        ylo, yhi, _, _ = self.path_bounds()
        for (_, i), (lo, hi) in getattr(self, which):
            ylo[i], yhi[i] = lo, hi
        return ylo, yhi
