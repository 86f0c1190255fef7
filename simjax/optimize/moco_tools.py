"""Moco's tools: ``inverse`` (``MocoInverse``), the muscle activity behind a known motion,
and ``track`` (``MocoTrack``), a motion that tracks measured states.

The coordinates follow a kinematics table (``Problem.prescribe``: quintic splines, as
Moco's ``PositionMotion``); the unknowns are the auxiliary states (activations) and the
controls (excitations, reserve actuators), found at least effort while the equations
of motion hold at every grid point. As ``MocoInverse::initialize`` poses it:

- the time window: the table's, or ``initial_time``/``final_time`` within it;
  ``ceil(duration / mesh_interval)`` uniform mesh intervals;
- goals: ``ControlEffort`` on every control (``reserves_weight`` on controls whose
  actuator is named ``reserve_*``), ``InitialActivation`` (activation equals
  excitation at the start) and, optionally, the sum of squared activations;
- the solver: Hermite–Simpson with free midpoint controls
  (``interpolate_control_mesh_interior_points = false``), convergence and constraint
  tolerances ``1e-3``.

``track`` poses what ``MocoTrack::initialize`` does with a states reference: a
``StateTracking`` goal (``state_tracking``: every column of the reference, weight
``states_global_tracking_weight``, a constrained coordinate's value weighted 0 unless
``states_weights`` names it) and ``ControlEffort`` (``control_effort``, weight
``control_effort_weight``, 0.001); the time window and mesh as ``inverse``'s; explicit
dynamics, Hermite–Simpson with interpolated midpoint controls, tolerances ``1e-2``,
and the midpoints of the bounds as the guess.

The model edits Moco's ``ModelProcessor`` makes (DeGroote muscles, rigid tendons,
reserves, external loads) are ``model_edits``'; ``inverse`` and ``track`` take the
edited model.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

import jax.numpy as jnp
import numpy as np

from . import ipm
from .collocation import OptimalTrajectory, _recent, solve
from .goals import StateTracking
from .problem import ControlEffort, Goal, InitialActivation, Problem

__all__ = ["inverse", "inverse_problem", "track", "track_problem", "SumSquaredStates"]


@dataclasses.dataclass(frozen=True)
class SumSquaredStates(Goal):
    """Moco's ``MocoSumSquaredStateGoal``: ``weight * integral of sum_i y_i ** 2 dt``
    over the states whose names match ``pattern`` (a regular expression, whole name).
    """

    weight: float = 1.0
    pattern: str = ".*"

    def integrand(self, problem, t, y, controls, system=None):
        """The weighted sum of the squared states at one grid point; see ``Goal.integrand``."""
        idx = [i for i, n in enumerate(problem.state_names) if re.fullmatch(self.pattern, n)]
        if not idx:
            raise ValueError(f"SumSquaredStates: no state matches {self.pattern!r}")
        return jnp.sum(y[np.asarray(idx)] ** 2)


def _system(model):
    from ..io.osim import load_osim

    if isinstance(model, (str, os.PathLike)):
        model = load_osim(os.fspath(model))
    return model.build() if hasattr(model, "build") else model


def _table(kinematics):
    from ..io.tables import read_table

    return read_table(os.fspath(kinematics)) if isinstance(kinematics, (str, os.PathLike)) else kinematics


_POSED: list = []  # (see collocation._recent)


def inverse_problem(
    model,
    kinematics,
    *,
    initial_time=None,
    final_time=None,
    mesh_interval: float = 0.02,
    reserves_weight: float = 1.0,
    minimize_sum_squared_activations: bool = False,
    kinematics_allow_extra_columns: bool = False,
) -> tuple[Problem, int]:
    """The problem ``MocoInverse`` poses, and its number of mesh intervals.

    **Arguments:** as ``inverse``. The same model and kinematics (the same objects)
    with the same settings give the same problem object, so ``inverse`` solves it again
    (other tolerances, a warm start) with the solver it compiled.

    **Returns:** ``(problem, mesh_intervals)``.

    **Raises:** ``ValueError`` for a time outside the table's, a non-positive mesh
    interval, or a column that names no coordinate.
    """
    settings = (
        initial_time,
        final_time,
        mesh_interval,
        reserves_weight,
        minimize_sum_squared_activations,
        kinematics_allow_extra_columns,
    )
    return _recent(_POSED, (model, kinematics), settings, lambda: _posed(model, kinematics, *settings))


def _window(tool, table, initial_time, final_time, mesh_interval):
    """MocoTool's time window and mesh: ``(t0, tf, mesh_intervals)``."""
    times = np.asarray(table.times, float)
    t0 = times[0] if initial_time is None else float(initial_time)
    tf = times[-1] if final_time is None else float(final_time)
    if t0 < times[0] or tf > times[-1]:
        raise ValueError(f"{tool}: the time window {t0}..{tf} s is outside the reference's {times[0]}..{times[-1]} s")
    if tf < t0:
        raise ValueError(f"{tool}: initial time {t0} s is after the final time {tf} s")
    if not mesh_interval > 0:
        raise ValueError(f"{tool}: mesh_interval must be positive, got {mesh_interval!r}")
    # as MocoTool::updateTimeInfo, to the last bit: (0.8 - 0.6) / 0.02 = 10.000000000000004
    # gives 11 intervals there, (1.4 - 0.6) / 0.02 = 39.99999999999999 gives 40
    return t0, tf, int(math.ceil((tf - t0) / mesh_interval))


def _posed(
    model,
    kinematics,
    initial_time,
    final_time,
    mesh_interval,
    reserves_weight,
    minimize_sum_squared_activations,
    kinematics_allow_extra_columns,
):
    system = _system(model)
    table = _table(kinematics)
    t0, tf, n = _window("inverse", table, initial_time, final_time, mesh_interval)
    problem = Problem(system, initial_time=t0, final_time=tf).prescribe(table, kinematics_allow_extra_columns)
    weights = {p: reserves_weight for p in problem.control_names if p.rsplit("/", 1)[-1].startswith("reserve_")}
    problem = problem.goal(ControlEffort(weights=weights)).goal(InitialActivation())
    if minimize_sum_squared_activations:
        problem = problem.goal(SumSquaredStates(pattern=".*activation$"))
    return problem, n


def inverse(
    model,
    kinematics,
    *,
    initial_time=None,
    final_time=None,
    mesh_interval: float = 0.02,
    reserves_weight: float = 1.0,
    minimize_sum_squared_activations: bool = False,
    convergence_tolerance: float = 1e-3,
    constraint_tolerance: float = 1e-3,
    max_iterations: int = 1000,
    kinematics_allow_extra_columns: bool = False,
    guess: OptimalTrajectory | None = None,
    sparse_derivatives: bool = True,
) -> OptimalTrajectory:
    """Solve Moco's ``MocoInverse`` problem.

    **Arguments:** ``model``: a ``System``, a ``Model`` or an ``.osim`` path (edited
    already: see ``model_edits``); ``kinematics``: a coordinates table or file (as
    ``Problem.prescribe``: degrees where the file says so, filtered already);
    ``initial_time``, ``final_time`` (s): default the table's; ``mesh_interval`` (s);
    ``reserves_weight``: the effort weight of ``reserve_*`` actuators' controls;
    ``minimize_sum_squared_activations``; ``convergence_tolerance``,
    ``constraint_tolerance``, ``max_iterations``: the solver's; ``guess``: a previous
    solution of the same problem (a warm start); ``sparse_derivatives``: as
    ``transcribe``'s (on, as MocoInverse sets its solver's sparsity detection to
    ``random``).

    **Returns:** an ``OptimalTrajectory`` of the activations (states) and controls on
    the Hermite–Simpson grid; ``status`` 0 where it converged.
    """
    problem, n = inverse_problem(
        model,
        kinematics,
        initial_time=initial_time,
        final_time=final_time,
        mesh_interval=mesh_interval,
        reserves_weight=reserves_weight,
        minimize_sum_squared_activations=minimize_sum_squared_activations,
        kinematics_allow_extra_columns=kinematics_allow_extra_columns,
    )
    options = ipm.moco_options(convergence_tolerance, constraint_tolerance, max_iter=max_iterations)
    # (MocoInverse's solver minimizes implicit tendons' auxiliary derivatives, weight 0.01)
    return solve(
        problem,
        mesh=n,
        scheme="hermite-simpson",
        options=options,
        guess=guess,
        interpolate_controls=False,
        auxiliary_derivatives_weight=0.01,
        sparse_derivatives=sparse_derivatives,
    )


def track_problem(
    model,
    states_reference,
    *,
    initial_time=None,
    final_time=None,
    mesh_interval: float = 0.02,
    states_global_tracking_weight: float = 1.0,
    states_weights: dict | None = None,
    scale_state_weights_with_range: bool = False,
    allow_unused_references: bool = False,
    minimize_control_effort: bool = True,
    control_effort_weight: float = 0.001,
    controls_weights: dict | None = None,
) -> tuple[Problem, int]:
    """The problem ``MocoTrack`` poses from a states reference, and its number of mesh
    intervals.

    **Arguments:** as ``track``.

    **Returns:** ``(problem, mesh_intervals)``.

    **Raises:** ``ValueError`` for a time outside the reference's, a non-positive mesh
    interval, a negative effort weight, or (when solved) a reference column or weight
    that names no state (``StateTracking``'s checks).
    """
    from .model_edits import _is_constrained

    system = _system(model)
    table = _table(states_reference)
    t0, tf, n = _window("track", table, initial_time, final_time, mesh_interval)
    if control_effort_weight < 0:
        raise ValueError(f"track: control_effort_weight must be non-negative, got {control_effort_weight!r}")
    weights = dict(states_weights or {})
    for path in system.coordinate_paths:
        value = f"{path}/value"
        if value in table.labels and value not in weights and _is_constrained(system.model, system.model.find(path)):
            weights[value] = 0.0
    problem = Problem(system, initial_time=t0, final_time=tf).goal(
        StateTracking(
            table,
            weight=states_global_tracking_weight,
            weights=weights or None,
            allow_unused_references=allow_unused_references,
            scale_weights_with_range=scale_state_weights_with_range,
        )
    )
    if minimize_control_effort:
        problem = problem.goal(ControlEffort(weight=control_effort_weight, weights=dict(controls_weights or {})))
    return problem, n


def track(
    model,
    states_reference,
    *,
    initial_time=None,
    final_time=None,
    mesh_interval: float = 0.02,
    states_global_tracking_weight: float = 1.0,
    states_weights: dict | None = None,
    scale_state_weights_with_range: bool = False,
    allow_unused_references: bool = False,
    minimize_control_effort: bool = True,
    control_effort_weight: float = 0.001,
    controls_weights: dict | None = None,
    convergence_tolerance: float = 1e-2,
    constraint_tolerance: float = 1e-2,
    max_iterations: int = 1000,
    guess: OptimalTrajectory | None = None,
    dynamics_mode: str = "explicit",
    objective_scale: float = 1.0,
) -> OptimalTrajectory:
    """Solve Moco's ``MocoTrack`` problem for a states reference.

    **Arguments:** ``model``: a ``System``, a ``Model`` or an ``.osim`` path (edited
    already: see ``model_edits``); ``states_reference``: a table or file whose columns
    are state paths (``/jointset/hip_r/hip_flexion_r/value``), in degrees where its
    ``inDegrees`` says so; ``initial_time``, ``final_time`` (s): default the
    reference's; ``mesh_interval`` (s); ``states_global_tracking_weight``,
    ``states_weights`` (``{state path: weight}``), ``scale_state_weights_with_range``,
    ``allow_unused_references``: the tracking goal's; ``minimize_control_effort``,
    ``control_effort_weight``, ``controls_weights`` (``{actuator path: weight}``): the
    effort goal's; ``convergence_tolerance``, ``constraint_tolerance``,
    ``max_iterations``: the solver's (Moco's MocoTrack sets 1e-2: its solution is then
    far from the optimum; tighten both for a converged answer); ``guess``: a previous
    solution of the same problem (a warm start); ``dynamics_mode``: ``"explicit"``
    (MocoTrack's default) or ``"implicit"`` (the solver's ``multibody_dynamics_mode``);
    ``objective_scale``: ``Options.objective_scale``. MocoTrack's objective is small
    (about 1e-4 over a gait cycle's fraction), and at tight tolerances a scale of 1e3
    takes the solve to a lower optimum in fewer iterations (see
    ``benchmarks/notes_moco_gait.md``).

    **Returns:** an ``OptimalTrajectory`` on the Hermite–Simpson grid; ``status`` 0
    where it converged.
    """
    problem, n = track_problem(
        model,
        states_reference,
        initial_time=initial_time,
        final_time=final_time,
        mesh_interval=mesh_interval,
        states_global_tracking_weight=states_global_tracking_weight,
        states_weights=states_weights,
        scale_state_weights_with_range=scale_state_weights_with_range,
        allow_unused_references=allow_unused_references,
        minimize_control_effort=minimize_control_effort,
        control_effort_weight=control_effort_weight,
        controls_weights=controls_weights,
    )
    options = ipm.moco_options(
        convergence_tolerance, constraint_tolerance, max_iter=max_iterations, objective_scale=objective_scale
    )
    return solve(problem, mesh=n, scheme="hermite-simpson", options=options, guess=guess, dynamics_mode=dynamics_mode)
