"""Moco studies: a ``MocoStudy`` setup file (``.omoco``, what ``MocoStudy.print`` writes)
read into a ``Problem`` and its solver settings, solved by collocation, and its solution
written as Moco writes it; ``simjax moco STUDY.omoco`` on the command line.

- ``read_study(path)``: a ``Study``: the ``Problem`` (``study.problem``) and the
  arguments of ``collocation.solve`` (``study.settings``), the goals' names, the guess
  file and where the solution goes;
- ``solve_study(study)``: ``collocation.solve`` with those settings (from the study's
  ``guess_file`` if it names one);
- ``run_study(path, output=None)``: both, then the solution written as a
  MocoTrajectory ``.sto`` (``files.write_trajectory``; ``opensim.MocoTrajectory``
  loads it). **Returns:** ``(OptimalTrajectory, the file written)``.

The file (OpenSim 4.6; only properties that differ from their defaults are written)::

    <OpenSimDocument Version="40600">
      <MocoStudy name="sliding_mass">              (write_solution, results_directory)
        <MocoProblem name="problem">
          <MocoPhase name="phases">
            <ModelProcessor name="model">
              <model><Model name="...">...</Model></model>   (setModel / setModelAsCopy)
              or <filepath>model.osim</filepath>             (setModelProcessor("model.osim"))
              (<operators><ModOpAddReserves>...</ModOpAddReserves>...</operators>)
            </ModelProcessor>
            <MocoInitialBounds name="time_initial_bounds"><bounds>0</bounds></MocoInitialBounds>
            <MocoFinalBounds name="time_final_bounds"><bounds>0 5</bounds></MocoFinalBounds>
            (<MocoBounds name="default_speed_bounds">, <bound_activation_from_excitation>)
            <state_infos>                            (also state_infos_pattern: names are regexes)
              <MocoVariableInfo name="/jointset/slider/x/value">
                <bounds>-10 10</bounds><initial_bounds>0</initial_bounds><final_bounds>1</final_bounds>
              </MocoVariableInfo>
            </state_infos>
            <control_infos>...</control_infos>      (also control_infos_pattern)
            <goals>
              <MocoFinalTimeGoal name="time"><weight>1</weight></MocoFinalTimeGoal>
              <MocoControlGoal name="effort"><weight>2</weight><exponent>3</exponent>
                <MocoWeightSet name="control_weights"><objects>
                  <MocoWeight name="/forceset/actuator"><weight>0.5</weight></MocoWeight>
                </objects></MocoWeightSet></MocoControlGoal>
              ...
            </goals>
          </MocoPhase>
        </MocoProblem>
        <MocoCasADiSolver name="solver">
          <num_mesh_intervals>50</num_mesh_intervals><transcription_scheme>trapezoidal</transcription_scheme>
          <optim_convergence_tolerance>1e-08</optim_convergence_tolerance>...
        </MocoCasADiSolver>
      </MocoStudy>
    </OpenSimDocument>

A bound is empty (unset), one value (fixed) or two (lower, upper). Object-valued
properties are elements named by their class with the property's name in ``name``.

What is read, as Moco 4.6 reads it (``MocoProblemRep``, ``MocoCasADiSolver``):

- the model: the inline ``<Model>`` or the ``filepath`` (both is an error), then the
  ``ModOp*`` operators ``model_edits`` mirrors, in order;
- the time bounds (unset: unbounded); state and control infos: the pattern infos
  first (each state or control a pattern matches entirely takes the whole info), then
  the named ones, which replace them; unset bounds take the model's defaults
  (``Problem``'s: a coordinate's range, ``default_speed_bounds`` for its speed, the
  actuator's control range, a muscle's activation its excitation's bounds); initial
  and final bounds must lie within an info's own bounds (``MocoVariableInfo``'s
  check);
- goals (``enabled`` false drops one): ``MocoControlGoal`` → ``ControlEffort``
  (``weight``, ``exponent``, ``control_weights``, ``control_weights_pattern``),
  ``MocoFinalTimeGoal`` → ``FinalTime``, ``MocoStateTrackingGoal`` → ``StateTracking``
  (``reference`` file, ``state_weights``, ``pattern``, ``allow_unused_references``,
  ``scale_weights_with_range``), ``MocoOutputGoal`` → ``OutputIntegral``
  (``output_path``, ``exponent``, ``output_index``), ``MocoInitialActivationGoal`` →
  ``InitialActivation`` (an endpoint constraint, as in Moco), ``MocoMarkerTrackingGoal``
  → ``MarkerTracking`` (``marker_file``, ``marker_weights``,
  ``allow_unused_references``), ``MocoPeriodicityGoal`` → ``Periodicity`` and
  ``MocoAverageSpeedGoal`` → ``AverageSpeed`` (either ``mode``),
  ``MocoContactTrackingGoal`` → ``ContactTracking`` (``contact_groups``,
  ``external_loads_file``, ``projection``, ``projection_vector``,
  ``normalize_tracking_error``);
- ``MocoParameter``s → ``Problem.parameter`` (``component_paths``, ``property_name``,
  ``property_element``); path constraints: ``MocoOutputBoundConstraint`` →
  ``OutputBound``, ``MocoControlBoundConstraint`` → ``ControlBound``,
  ``MocoStateBoundConstraint`` → ``StateBound`` (bounds: any OpenSim Function simjax
  reads), ``MocoFrameDistanceConstraint`` → ``FrameDistance``;
- the solver (``MocoCasADiSolver``): ``num_mesh_intervals`` or ``mesh``,
  ``transcription_scheme`` (``trapezoidal``, ``hermite-simpson``),
  ``interpolate_control_mesh_interior_points``, ``multibody_dynamics_mode``
  (``explicit``, or ``implicit`` with Moco's default acceleration bounds),
  ``minimize_implicit_multibody_accelerations`` / ``implicit_multibody_accelerations_weight``,
  ``minimize_implicit_auxiliary_derivatives`` / ``implicit_auxiliary_derivatives_weight``
  and ``minimize_lagrange_multipliers`` / ``lagrange_multiplier_weight``
  (``transcribe``'s ``accelerations_weight``, ``auxiliary_derivatives_weight`` and
  ``multipliers_weight``), ``kinematic_constraint_method`` (``Posa2016`` or
  ``Bordalba2023``) with ``minimize_state_projection_distance`` /
  ``state_projection_distance_weight`` (``transcribe``'s ``state_projection_weight``),
  ``optim_convergence_tolerance`` / ``optim_constraint_tolerance`` /
  ``optim_max_iterations`` (``ipm.Options``' ``tol``, ``constraint_tol``, ``max_iter``;
  -1, Moco's default, is IPOPT's default: 1e-8, 1e-4, 3000), ``guess_file``
  (``files.guess_from_table``), ``verbosity`` (0 silent, 1 a summary, 2 also the
  iteration log), ``optim_sparsity_detection`` (``random`` or ``initial-guess``:
  ``transcribe``'s ``sparse_derivatives``), ``optim_solver`` ``ipopt`` and
  ``optim_hessian_approximation`` ``exact`` (what simjax does).

Unsupported content is reported as the ``.osim`` reader reports it, each item once
with its line, element and value: what would change the answer (another goal, a goal's
``mode``, ``divide_by_*`` or ``scale_factors``, Legendre–Gauss transcriptions, other
acceleration or auxiliary derivative bounds, parameters, path
constraints, initial or final bounds on controls, a model operator simjax lacks, a
model with controllers, an unknown element) is a ``StudyError`` listing all of it;
what cannot (solver options such as ``parallel``, ``scale_variables_using_bounds``,
...) is ignored with one ``StudyWarning`` listing
it. Kinematic constraints are enforced by Moco's default method (Posa et al. 2016,
derivatives enforced, velocity corrections within (-0.1, 0.1), multipliers not
minimized); other settings of them are errors.

Paths. Moco 4.6's ``MocoStudy`` reads its files (the model, a reference, the guess)
relative to the working directory; here a relative path is looked for next to the
study file first, then in the working directory (a ``StudyWarning`` when both hold a
different file). The solution goes to ``output`` if given, else to
``<results_directory>/<study name>_solution.sto`` (``MocoStudy_solution.sto`` for a
study without a name: ``MocoStudy::solve``'s file when ``write_solution`` is true), the
directory relative to the study file's folder; simjax always writes it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import warnings
from typing import Any

import numpy as np

from .collocation import (
    ACCELERATION_BOUNDS,
    KINEMATIC_CONSTRAINT_METHODS,
    PROJECTION_SLACK_BOUNDS,
    STATE_PROJECTION_WEIGHT,
    TENDON_DERIVATIVE_BOUNDS,
    VELOCITY_CORRECTION_BOUNDS,
)

__all__ = ["MODEL_OPERATORS", "Study", "StudyError", "StudyWarning", "read_study", "run_study", "solve_study"]

#: IPOPT's default max_iter, which Moco's -1 leaves in place (its tolerances': ipm.moco_options)
_IPOPT_MAX_ITER = 3000

#: ``ModOp*`` element -> (``model_edits`` function, {property: (keyword, type)}, fixed keywords)
MODEL_OPERATORS = {
    "ModOpIgnoreActivationDynamics": ("ignore_activation_dynamics", {}, {}),
    "ModOpIgnoreTendonCompliance": ("ignore_tendon_compliance", {}, {}),
    "ModOpScaleMaxIsometricForce": ("scale_max_isometric_force", {"scale_factor": ("scale_factor", float)}, {}),
    "ModOpRemoveMuscles": ("remove_muscles", {}, {}),
    "ModOpAddReserves": (
        "add_reserves",
        {
            "optimal_force": ("optimal_force", float),
            "bound": ("bound", float),
            "skip_coordinates_with_actuators": ("skip_coordinates_with_actuators", bool),
            "skip_residual_coordinates": ("skip_residual_coordinates", bool),
        },
        {},
    ),
    "ModOpAddResiduals": (
        "add_residuals",
        {
            "rotational_optimal_force": ("rotational_optimal_force", float),
            "translational_optimal_force": ("translational_optimal_force", float),
            "bound": ("bound", float),
            "skip_coordinates_with_actuators": ("skip_coordinates_with_actuators", bool),
        },
        {},
    ),
    "ModOpAddExternalLoads": ("add_external_loads", {"filepath": ("path", "path")}, {}),
    "ModOpReplaceMusclesWithPathActuators": ("replace_muscles_with_path_actuators", {}, {}),
    "ModOpReplaceMusclesWithDeGrooteFregly2016": ("replace_muscles_with_degroote", {}, {}),
    "ModOpTendonComplianceDynamicsModeDGF": ("tendon_compliance_dynamics_mode", {"mode": ("mode", str)}, {}),
    "ModOpUseImplicitTendonComplianceDynamicsDGF": ("tendon_compliance_dynamics_mode", {}, {"mode": "implicit"}),
    "ModOpIgnorePassiveFiberForcesDGF": ("ignore_passive_fiber_forces", {}, {}),
    "ModOpPassiveFiberStrainAtOneNormForceDGF": (
        "passive_fiber_strain_at_one_norm_force",
        {"passive_fiber_strain_at_one_norm_force": ("value", float)},
        {},
    ),
    "ModOpScaleActiveFiberForceCurveWidthDGF": (
        "scale_active_fiber_force_curve_width",
        {"scale_factor": ("scale_factor", float)},
        {},
    ),
    "ModOpFiberDampingDGF": ("fiber_damping", {"fiber_damping": ("value", float)}, {}),
}

#: MocoCasADiSolver properties that cannot change the optimum of a problem simjax
#: solves (explicit dynamics, no kinematic constraints, parameters or path
#: constraints): ignored, and listed in a warning
_SOLVER_IGNORED = {
    "optim_ipopt_print_level": "IPOPT's output",
    "optim_write_sparsity": "IPOPT's sparsity pattern",
    "optim_finite_difference_scheme": "simjax differentiates exactly",
    "parallel": "simjax evaluates the grid points vectorized",
    "output_interval": "IPOPT's intermediate output",
    "scale_variables_using_bounds": "simjax scales by gradients, as IPOPT does",
    "parameters_require_initsystem": "simjax sets parameters without re-initializing the model",
    "enforce_path_constraint_mesh_interior_points": "path constraints",
}

#: goal element -> (its properties beyond MocoGoal's, Moco's default mode)
_GOALS = {
    "MocoControlGoal": (
        (
            "control_weights",
            "control_weights_pattern",
            "exponent",
            "ignore_controlled_actuators",
            "ignore_input_controls",
        ),
        "cost",
    ),
    "MocoFinalTimeGoal": ((), "cost"),
    "MocoStateTrackingGoal": (
        ("reference", "state_weights", "pattern", "allow_unused_references", "scale_weights_with_range"),
        "cost",
    ),
    "MocoOutputGoal": (("output_path", "second_output_path", "operation", "exponent", "output_index"), "cost"),
    "MocoInitialActivationGoal": ((), "endpoint_constraint"),
    "MocoMarkerTrackingGoal": (("markers_reference", "allow_unused_references"), "cost"),
    "MocoPeriodicityGoal": (("state_pairs", "control_pairs"), "endpoint_constraint"),
    "MocoAverageSpeedGoal": (("desired_average_speed",), "endpoint_constraint"),
    "MocoContactTrackingGoal": (
        (
            "contact_groups",
            "external_loads",
            "external_loads_file",
            "projection",
            "projection_vector",
            "normalize_tracking_error",
        ),
        "cost",
    ),
}
#: goals whose mode may be either
_BOTH_MODES = ("MocoPeriodicityGoal", "MocoAverageSpeedGoal")
_GOAL_BASE = (
    "enabled",
    "weight",
    "mode",
    "MocoConstraintInfo",
    "scale_factors",
    "divide_by_displacement",
    "divide_by_duration",
    "divide_by_mass",
)


class StudyError(ValueError):
    """A study simjax cannot solve as Moco would: the message names the file and, for
    each problem, its line, the element and the value."""


class StudyWarning(UserWarning):
    """Settings of a study that simjax ignores (they cannot change the answer), or a
    relative path found in two places; the message names the file."""


@dataclasses.dataclass(frozen=True)
class Study:
    """A ``MocoStudy`` file, read.

    **Fields:** ``file``; ``name`` (the study's; ``""`` if none); ``problem`` (a
    ``Problem``); ``goal_names``: Moco's name of each of ``problem.goals``;
    ``mesh`` (intervals, or the normalized mesh); ``scheme``; ``interpolate_controls``;
    ``dynamics_mode`` (``"explicit"`` or ``"implicit"``); ``accelerations_weight``,
    ``auxiliary_derivatives_weight``, ``multipliers_weight`` (``collocation.transcribe``'s;
    ``None``: not minimized); ``sparse_derivatives`` (``optim_sparsity_detection``
    other than ``none``); ``kinematic_constraint_method``, ``state_projection_weight``
    (``collocation.transcribe``'s); ``options`` (``ipm.Options``); ``guess_file`` (resolved, or ``None``);
    ``verbosity``; ``output``: where ``run_study`` writes the solution by default;
    ``ignored``: the unsupported settings ignored (as the warning listed them).
    """

    file: str
    name: str
    problem: Any
    goal_names: tuple
    mesh: Any
    scheme: str
    interpolate_controls: bool
    options: Any
    guess_file: str | None
    verbosity: int
    output: str
    ignored: tuple = ()
    dynamics_mode: str = "explicit"
    accelerations_weight: float | None = None
    auxiliary_derivatives_weight: float | None = None
    multipliers_weight: float | None = None
    sparse_derivatives: bool = False
    kinematic_constraint_method: str = "Posa2016"
    state_projection_weight: float | None = STATE_PROJECTION_WEIGHT

    @property
    def settings(self) -> dict:
        """``collocation.solve``'s keyword arguments: ``mesh``, ``scheme``, ``options``,
        ``interpolate_controls``, ``dynamics_mode``, ``accelerations_weight``,
        ``auxiliary_derivatives_weight``, ``multipliers_weight``, ``sparse_derivatives``,
        ``kinematic_constraint_method``, ``state_projection_weight``
        (``solve(study.problem, **study.settings)``)."""
        return {
            "mesh": self.mesh,
            "scheme": self.scheme,
            "options": self.options,
            "interpolate_controls": self.interpolate_controls,
            "dynamics_mode": self.dynamics_mode,
            "accelerations_weight": self.accelerations_weight,
            "auxiliary_derivatives_weight": self.auxiliary_derivatives_weight,
            "multipliers_weight": self.multipliers_weight,
            "sparse_derivatives": self.sparse_derivatives,
            "kinematic_constraint_method": self.kinematic_constraint_method,
            "state_projection_weight": self.state_projection_weight,
        }


# -- reading helpers --------------------------------------------------------------------------


#: the property an object element without a ``name`` attribute holds, by its class
_UNNAMED = {
    "ModelProcessor": "model",
    "MocoInitialBounds": "time_initial_bounds",
    "MocoFinalBounds": "time_final_bounds",
    "MocoProblem": "problem",
    "MocoPhase": "phases",
}


def _key(node) -> str:
    """The property an element holds: an object's ``name`` attribute (``<MocoBounds
    name="default_speed_bounds">``), else its tag (``<weight>``)."""
    name = node.attrib.get("name")
    if node.tag[:1].isupper():
        return name or _UNNAMED.get(node.tag, node.tag)
    return node.tag


def _label(node) -> str:
    name = node.attrib.get("name")
    return f'<{node.tag} name="{name}">' if name is not None and node.tag[:1].isupper() else f"<{node.tag}>"


class _Reader:
    """The file being read: its folder, and what it holds that simjax does not
    support (``errors``: changes the answer; ``ignored``: cannot)."""

    def __init__(self, file: str):
        self.file = file
        self.folder = os.path.dirname(os.path.abspath(file))
        self.errors: list[tuple[int, str]] = []  # (line, item)
        self.ignored: list[tuple[int, str]] = []
        self.notes: list[str] = []

    @staticmethod
    def _item(node, trail: str, value, message: str) -> str:
        shown = "" if value is None else f" = {value!r}"
        return f"line {node.line}: {trail}{shown}: {message}"

    def error(self, node, trail: str, message: str, value=None) -> None:
        self.errors.append((node.line, self._item(node, trail, value, message)))

    def ignore(self, node, trail: str, reason: str = "", value=None) -> None:
        self.ignored.append((node.line, self._item(node, trail, value, reason or "not supported")))

    def fail(self, node, trail: str, message: str, value=None) -> StudyError:
        """An error that stops the reading at once (a malformed value)."""
        return StudyError(f"{self.file}: {self._item(node, trail, value, message)}")

    # values
    def words(self, node) -> list[str]:
        return node.text.split()

    def number(self, node, trail: str) -> float:
        try:
            (value,) = [float(w) for w in self.words(node)]
        except ValueError:
            raise self.fail(node, trail, "expected one number", node.text) from None
        return value

    def integer(self, node, trail: str) -> int:
        value = self.number(node, trail)
        if value != int(value):
            raise self.fail(node, trail, "expected an integer", node.text)
        return int(value)

    def flag(self, node, trail: str) -> bool:
        text = node.text.strip().lower()
        if text not in ("true", "false"):
            raise self.fail(node, trail, "expected true or false", node.text)
        return text == "true"

    def bounds(self, node, trail: str):
        """A MocoBounds' ``<bounds>`` list: ``None`` (unset), ``(lower, upper)``."""
        if node is None:
            return None
        try:
            values = [float(w) for w in self.words(node)]
        except ValueError:
            raise self.fail(node, trail, "expected at most two numbers", node.text) from None
        if not values:
            return None
        if len(values) > 2:
            raise self.fail(node, trail, "expected at most two numbers", node.text)
        lo, hi = values[0], values[-1]
        if lo > hi:
            raise self.fail(node, trail, "the lower bound is above the upper bound", node.text)
        return (lo, hi)

    def object_bounds(self, node, trail: str):
        """A ``<MocoBounds>``-like element's bounds (``None`` if absent or unset)."""
        if node is None:
            return None
        for child in node.children:
            if child.tag != "bounds":
                self.error(child, f"{trail}/<{child.tag}>", "unknown property")
        return self.bounds(node.find("bounds"), f"{trail}/<bounds>")

    def path(self, text: str, node, trail: str) -> str | None:
        """A file the study names, looked for next to the study, then in the working
        directory (Moco's); ``None`` (and an error recorded) if there is none."""
        if os.path.isabs(text):
            if os.path.exists(text):
                return text
            self.error(node, trail, "no such file", text)
            return None
        here, cwd = os.path.normpath(os.path.join(self.folder, text)), os.path.abspath(text)
        if os.path.exists(here):
            if os.path.exists(cwd) and not os.path.samefile(here, cwd):
                self.notes.append(
                    f"{trail} = {text!r}: using {here!r}, next to the study; Moco 4.6 reads {cwd!r}, "
                    "in the working directory"
                )
            return here
        if os.path.exists(cwd):
            return cwd
        where = here if here == cwd else f"{here}, or in the working directory, {cwd}"
        self.error(node, trail, f"no such file next to the study ({where})", text)
        return None

    def raise_errors(self) -> None:
        """Raise the ``StudyError`` listing every error recorded (if any)."""
        if self.errors:
            listing = "\n".join(f"  {e}" for _, e in sorted(self.errors))
            raise StudyError(
                f"{self.file}: {len(self.errors)} setting(s) simjax does not support, which would "
                f"change the answer:\n{listing}"
            )


def _weights(r: _Reader, node, trail: str) -> dict[str, float]:
    """A ``MocoWeightSet``: ``{name: weight}`` (a weight not written is 1)."""
    out: dict[str, float] = {}
    if node is None:
        return out
    for child in node.children:
        if child.tag == "groups" and not child.children:
            continue
        if child.tag != "objects":
            r.error(child, f"{trail}/<{child.tag}>", "unknown property")
            continue
        for weight in child.children:
            where = f"{trail}/{_label(weight)}"
            if weight.tag != "MocoWeight" or weight.attrib.get("name") is None:
                r.error(weight, where, "expected <MocoWeight name=...>")
                continue
            value = 1.0
            for prop in weight.children:
                if prop.tag == "weight":
                    value = r.number(prop, f"{where}/<weight>")
                else:
                    r.error(prop, f"{where}/<{prop.tag}>", "unknown property")
            out[weight.attrib["name"]] = value
    return out


# -- the model --------------------------------------------------------------------------------


def _model(r: _Reader, node, version: str, strict: bool):
    from ..io.osim import load_osim, loads_osim
    from ..io.osim._xml import Node, serialize

    trail = "<ModelProcessor>"
    if node is None:
        raise StudyError(f'{r.file}: the MocoPhase has no <ModelProcessor name="model">: no model')
    inline = filepath = operators = None
    for child in node.children:
        if child.tag == "model":
            inline = child
        elif child.tag == "filepath":
            filepath = child
        elif child.tag == "operators":
            operators = child
        else:
            r.error(child, f"{trail}/<{child.tag}>", "unknown property")
    models = [c for c in inline.children if c.tag == "Model"] if inline is not None else []
    path_text = filepath.text.strip() if filepath is not None else ""
    if path_text and models:
        raise r.fail(
            filepath,
            f"{trail}/<filepath>",
            "the ModelProcessor has both a model and a filepath (Moco: "
            "'Expected either a Model object or a filepath, but both were provided')",
            path_text,
        )
    if path_text:
        file = r.path(path_text, filepath, f"{trail}/<filepath>")
        if file is None:
            r.raise_errors()
        model = load_osim(file, strict=strict)
    elif models:
        doc = Node("OpenSimDocument", {"Version": version}, children=[models[0]])
        text = '<?xml version="1.0" encoding="UTF-8" ?>\n' + serialize(doc) + "\n"
        model = loads_osim(
            text, strict=strict, source=f"{r.file} (the <Model> of line {models[0].line})", base_dir=r.folder
        )
    else:
        raise r.fail(node, trail, "no source model (neither <model> nor <filepath>)")
    for op in operators.children if operators is not None else ():
        model = _operate(r, op, model)
    if operators is not None and operators.children:
        r.raise_errors()  # (a model not processed as the study asks: nothing after it can be checked)
    return model


def _operate(r: _Reader, node, model):
    from . import model_edits

    trail = f"<ModelProcessor>/<operators>/<{node.tag}>"
    spec = MODEL_OPERATORS.get(node.tag)
    function = getattr(model_edits, spec[0], None) if spec else None
    if function is None:
        r.error(node, trail, "a model operator simjax does not have (it has: " + ", ".join(MODEL_OPERATORS) + ")")
        return model
    _, props, fixed = spec
    kwargs = dict(fixed)
    for child in node.children:
        where = f"{trail}/<{child.tag}>"
        if child.tag not in props:
            r.error(child, where, "unknown property")
            continue
        keyword, kind = props[child.tag]
        if not child.text.strip():  # (an unset optional property, e.g. ModOpAddReserves' bound)
            continue
        if kind is float:
            kwargs[keyword] = r.number(child, where)
        elif kind is bool:
            kwargs[keyword] = r.flag(child, where)
        elif kind == "path":
            kwargs[keyword] = r.path(child.text.strip(), child, where)
        else:
            kwargs[keyword] = child.text.strip()
    if r.errors:  # (not applied: the study fails anyway)
        return model
    return function(model, **kwargs)


# -- the problem --------------------------------------------------------------------------------


def _infos(r: _Reader, node, trail: str) -> list[tuple[str, dict, Any]]:
    """The ``MocoVariableInfo``s of a list property: ``(name, {bounds, initial, final},
    element)``."""
    out = []
    if node is None:
        return out
    for info in node.children:
        where = f"{trail}/{_label(info)}"
        if info.tag != "MocoVariableInfo" or info.attrib.get("name") is None:
            r.error(info, where, "expected <MocoVariableInfo name=...>")
            continue
        values = {"bounds": None, "initial_bounds": None, "final_bounds": None}
        for prop in info.children:
            if prop.tag in values:
                values[prop.tag] = r.bounds(prop, f"{where}/<{prop.tag}>")
            else:
                r.error(prop, f"{where}/<{prop.tag}>", "unknown property")
        out.append((info.attrib["name"], values, info))
    return out


def _resolve_infos(r: _Reader, named, patterns, names, kind: str) -> dict[str, tuple[dict, Any]]:
    """Moco's order: each pattern info (in order) given whole to every name it matches
    entirely, then the named infos, which replace them (a name that is not a variable
    of the model is an error)."""
    out: dict[str, tuple[dict, Any]] = {}
    for pattern, values, node in patterns:
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise r.fail(node, f"<{kind}_infos_pattern>/{_label(node)}", f"not a regular expression: {e}") from None
        for name in names:
            if regex.fullmatch(name):
                out[name] = (values, node)
    for name, values, node in named:
        if name not in names:
            r.error(
                node,
                f"<{kind}_infos>/{_label(node)}",
                f"no {kind} of the model has this name (the model's: {', '.join(names)})",
            )
            continue
        out[name] = (values, node)
    return out


def _goal(r: _Reader, node, problem):
    """A goal element as a simjax goal, ``None`` where it is dropped or unsupported."""
    from .goals import AverageSpeed, MarkerTracking, OutputIntegral, Periodicity, StateTracking
    from .problem import ControlEffort, FinalTime, InitialActivation

    trail = f"<goals>/{_label(node)}"
    if node.tag not in _GOALS:
        enabled = node.find("enabled")
        if enabled is not None and not r.flag(enabled, f"{trail}/<enabled>"):
            r.ignore(node, trail, "a goal simjax does not support, disabled")
            return None
        r.error(node, trail, "a goal simjax does not support (supported: " + ", ".join(_GOALS) + ")")
        return None
    own, default_mode = _GOALS[node.tag]
    props = {}
    for child in node.children:
        if child.tag in _GOAL_BASE or child.tag in own or _key(child) in own:
            props[_key(child) if _key(child) in own else child.tag] = child
        else:
            r.error(child, f"{trail}/{_label(child)}", "unknown property")
    if "enabled" in props and not r.flag(props["enabled"], f"{trail}/<enabled>"):
        return None
    weight = r.number(props["weight"], f"{trail}/<weight>") if "weight" in props else 1.0
    mode = props["mode"].text.strip() if "mode" in props and props["mode"].text.strip() else default_mode
    if node.tag in _BOTH_MODES and mode not in ("cost", "endpoint_constraint"):
        r.error(props["mode"], f"{trail}/<mode>", "expected cost or endpoint_constraint", mode)
    elif node.tag not in _BOTH_MODES and mode != default_mode:
        r.error(
            props["mode"],
            f"{trail}/<mode>",
            f"only the goal's default mode ({default_mode}) is supported",
            props["mode"].text.strip(),
        )
    for flag in ("divide_by_displacement", "divide_by_duration", "divide_by_mass"):
        if flag in props and r.flag(props[flag], f"{trail}/<{flag}>"):
            r.error(props[flag], f"{trail}/<{flag}>", "not supported", props[flag].text.strip())
    if "scale_factors" in props and props["scale_factors"].children:
        r.error(props["scale_factors"], f"{trail}/<scale_factors>", "scale factors (MocoParameters) are not supported")
    info = props.get("MocoConstraintInfo")
    if info is not None and info.children and default_mode == "endpoint_constraint":
        r.error(info, f"{trail}/<MocoConstraintInfo>", "only the default constraint bounds are supported")

    def text(prop, default=""):
        return props[prop].text.strip() if prop in props else default

    def integer(prop, default):
        return r.integer(props[prop], f"{trail}/<{prop}>") if prop in props else default

    def flag(prop, default=False):
        return r.flag(props[prop], f"{trail}/<{prop}>") if prop in props else default

    if node.tag == "MocoFinalTimeGoal":
        return FinalTime(weight)
    if node.tag == "MocoInitialActivationGoal":
        return InitialActivation(weight)
    if node.tag == "MocoControlGoal":
        names = list(problem.control_names)
        exponent = integer("exponent", 2)
        if exponent < 2:
            r.error(props["exponent"], f"{trail}/<exponent>", "Moco requires an exponent of 2 or more", exponent)
        explicit = _weights(r, props.get("control_weights"), f'{trail}/<MocoWeightSet name="control_weights">')
        for name in explicit:
            if name not in names:
                r.error(
                    props["control_weights"],
                    f'{trail}/<control_weights>/<MocoWeight name="{name}">',
                    f"unrecognized control (the model's: {', '.join(names)})",
                )
        weights = {}
        for pattern, w in _weights(
            r, props.get("control_weights_pattern"), f'{trail}/<MocoWeightSet name="control_weights_pattern">'
        ).items():
            weights.update({n: w for n in names if re.fullmatch(pattern, n)})
        weights.update({n: w for n, w in explicit.items() if n in names})
        flag("ignore_input_controls")  # (simjax has no Input controls)
        flag("ignore_controlled_actuators")  # (a model with controllers is refused anyway)
        return ControlEffort(weight, float(exponent), weights or None)
    if node.tag == "MocoPeriodicityGoal":
        pairs = {}
        for prop in ("state_pairs", "control_pairs"):
            pairs[prop] = []
            for pair in props[prop].children if prop in props else ():
                where = f"{trail}/<{prop}>/{_label(pair)}"
                values = {c.tag: c for c in pair.children}
                for tag in set(values) - {"initial_variable", "final_variable", "negate"}:
                    r.error(values[tag], f"{where}/<{tag}>", "unknown property")
                initial = values["initial_variable"].text.strip() if "initial_variable" in values else ""
                final = values["final_variable"].text.strip() if "final_variable" in values else ""
                negate = r.flag(values["negate"], f"{where}/<negate>") if "negate" in values else False
                kind = "state" if prop == "state_pairs" else "control"
                for name in (initial, final):
                    try:
                        found = problem._key(name)[0]
                    except KeyError:
                        found = None
                    if found != kind:
                        r.error(pair, where, f"could not find {kind} {name!r}", name)
                pairs[prop].append((initial, final, negate))
        return Periodicity(tuple(pairs["state_pairs"]), tuple(pairs["control_pairs"]), mode, weight)
    if node.tag == "MocoAverageSpeedGoal":
        speed = (
            r.number(props["desired_average_speed"], f"{trail}/<desired_average_speed>")
            if "desired_average_speed" in props
            else 0.0
        )
        return AverageSpeed(speed, mode, weight)
    if node.tag == "MocoMarkerTrackingGoal":
        ref = props.get("markers_reference")
        where = f'{trail}/<MarkersReference name="markers_reference">'
        filepath, weights = None, {}
        for child in ref.children if ref is not None else ():
            if child.tag == "marker_file":
                filepath = child
            elif _key(child) == "marker_weights":
                for w in child.find("objects").children if child.find("objects") is not None else ():
                    value = w.find("weight")
                    weights[w.attrib.get("name", "")] = (
                        r.number(value, f"{where}/<marker_weights>/{_label(w)}/<weight>") if value is not None else 1.0
                    )
            elif child.tag == "default_weight":
                if r.number(child, f"{where}/<default_weight>") != 1.0:
                    r.error(
                        child, f"{where}/<default_weight>", "only the default weight 1 is supported", child.text.strip()
                    )
            else:
                r.error(child, f"{where}/{_label(child)}", "unknown property")
        if filepath is None or not filepath.text.strip():
            r.error(
                ref if ref is not None else node,
                where,
                "the reference names no marker file (a table set in memory is not written to the study)",
            )
            return None
        reference = r.path(filepath.text.strip(), filepath, f"{where}/<marker_file>")
        if reference is None:
            return None
        return MarkerTracking(reference, weight, weights or None, flag("allow_unused_references"))
    if node.tag == "MocoStateTrackingGoal":
        ref = props.get("reference")
        where = f'{trail}/<TableProcessor name="reference">'
        filepath = None
        for child in ref.children if ref is not None else ():
            if child.tag == "filepath":
                filepath = child
            elif child.tag == "operators" and not child.children:
                continue
            else:
                r.error(
                    child,
                    f"{where}/<{child.tag}>",
                    "not supported (table operators)" if child.tag == "operators" else "unknown property",
                )
        if filepath is None or not filepath.text.strip():
            r.error(
                ref if ref is not None else node,
                where,
                "the reference names no file (a table set in memory is not written to the study)",
            )
            return None
        reference = r.path(filepath.text.strip(), filepath, f"{where}/<filepath>")
        if reference is None:
            return None
        weights = _weights(r, props.get("state_weights"), f'{trail}/<MocoWeightSet name="state_weights">')
        pattern = text("pattern") or None
        return StateTracking(
            reference,
            weight,
            weights or None,
            pattern,
            flag("allow_unused_references"),
            flag("scale_weights_with_range"),
        )
    if node.tag == "MocoContactTrackingGoal":
        return _contact_tracking(r, node, trail, props, weight)
    # MocoOutputGoal
    for prop in ("second_output_path", "operation"):
        if text(prop):
            r.error(props[prop], f"{trail}/<{prop}>", "composite outputs are not supported", text(prop))
    output = text("output_path")
    if not output:
        r.error(node, trail, "no <output_path>")
        return None
    exponent = integer("exponent", 1)
    if exponent < 1:
        r.error(props["exponent"], f"{trail}/<exponent>", "Moco requires an exponent of 1 or more", exponent)
    return OutputIntegral(output, weight, exponent, integer("output_index", -1))


def _contact_tracking(r: _Reader, node, trail: str, props: dict, weight: float):
    """A ``MocoContactTrackingGoal`` element as ``ContactTracking`` (``None`` where in error)."""
    from .contact_tracking import ContactGroup, ContactTracking

    if "external_loads" in props and props["external_loads"].children:
        r.error(
            props["external_loads"],
            f"{trail}/<external_loads>",
            "an ExternalLoads set in memory is not supported (name its file in <external_loads_file>)",
        )
        return None
    where = f"{trail}/<external_loads_file>"
    file = props["external_loads_file"].text.strip() if "external_loads_file" in props else ""
    if not file:
        r.error(node, where, "No ExternalLoads provided.")
        return None
    loads = r.path(file, props["external_loads_file"], where)
    groups = []
    container = props.get("contact_groups")
    for g in container.children if container is not None else ():
        gwhere = f"{trail}/<contact_groups>/{_label(g)}"
        if g.tag != "MocoContactTrackingGoalGroup":
            r.error(g, gwhere, "expected <MocoContactTrackingGoalGroup>")
            continue
        gp = _known_props(r, g, gwhere, ("contact_force_paths", "external_force_name", "alternative_frame_paths"))
        words = {k: gp[k].text.split() if k in gp else [] for k in ("contact_force_paths", "alternative_frame_paths")}
        groups.append(
            ContactGroup(
                tuple(words["contact_force_paths"]),
                gp["external_force_name"].text.strip() if "external_force_name" in gp else "",
                tuple(words["alternative_frame_paths"]),
            )
        )
    projection = props["projection"].text.strip() if "projection" in props else "none"
    vector = None
    if "projection_vector" in props and props["projection_vector"].text.strip():
        try:
            vector = tuple(float(w) for w in props["projection_vector"].text.strip("()[] \n\t").split())
        except ValueError:
            r.error(
                props["projection_vector"],
                f"{trail}/<projection_vector>",
                "expected 3 numbers",
                props["projection_vector"].text.strip(),
            )
    normalize = (
        r.flag(props["normalize_tracking_error"], f"{trail}/<normalize_tracking_error>")
        if "normalize_tracking_error" in props
        else False
    )
    if loads is None:
        return None
    return ContactTracking(tuple(groups), loads, weight, projection or "none", vector, normalize)


def _known_props(r: _Reader, node, trail: str, known) -> dict:
    """An object element's properties, ``{property: element}``; one not in ``known`` is
    an error naming it."""
    props = {_key(c): c for c in node.children}
    for key, child in props.items():
        if key not in known:
            r.error(child, f"{trail}/{_label(child)}", "unknown property")
    return props


def _parameter(r: _Reader, node, problem):
    """A ``MocoParameter`` added to ``problem`` (unchanged where it is in error)."""
    trail = f"<parameters>/{_label(node)}"
    if node.tag != "MocoParameter":
        r.error(node, trail, "not supported")
        return problem
    props = _known_props(r, node, trail, ("MocoBounds", "component_paths", "property_name", "property_element"))
    bounds = r.object_bounds(props.get("MocoBounds"), f"{trail}/<MocoBounds>")
    paths = props["component_paths"].text.split() if "component_paths" in props else []
    name = props["property_name"].text.strip() if "property_name" in props else ""
    element = r.integer(props["property_element"], f"{trail}/<property_element>") if "property_element" in props else -1
    if bounds is None or not paths or not name:
        r.error(node, trail, "a parameter needs bounds, component_paths and a property_name")
        return problem
    try:
        return problem.parameter(node.attrib.get("name", name), paths, name, bounds, None if element < 0 else element)
    except ValueError as exc:
        r.error(node, trail, str(exc))
        return problem


_PATH_CONSTRAINTS = (
    "MocoOutputBoundConstraint",
    "MocoControlBoundConstraint",
    "MocoStateBoundConstraint",
    "MocoFrameDistanceConstraint",
)


def _bound_function(r: _Reader, props: dict, key: str, trail: str):
    """The Function in the property ``key`` (any OpenSim Function simjax reads), or
    ``None`` where the property is absent or empty."""
    from ..io.osim.registry import OsimError, ReadContext, SkipComponent

    node = props.get(key)
    if node is None or not node.children:
        return None
    function = node.children[0]
    if function.tag == "Constant" and function.find("value") is not None:  # (a number: the simpler program)
        return r.number(function.find("value"), f"{trail}/<{key}>/<Constant>/<value>")
    rc = ReadContext(r.file)
    try:
        read = rc.read_function(function, f"{trail}/<{key}>", skippable=False)
    except (OsimError, SkipComponent, ValueError) as exc:
        r.error(function, f"{trail}/<{key}>/<{function.tag}>", f"not a Function simjax reads ({exc})")
        return None
    if rc.unsupported:  # (a property the Function does not have: its value would be silently lost)
        what = "; ".join(f"{u.what}: {u.reason}" for u in rc.unsupported)
        r.error(function, f"{trail}/<{key}>/<{function.tag}>", f"not a Function simjax reads ({what})")
        return None
    return read


def _path_constraint(r: _Reader, node, problem):
    """A path constraint (``_PATH_CONSTRAINTS``) added to ``problem`` (unchanged where
    it is in error)."""
    from . import path_constraints as pc

    trail = f"<path_constraints>/{_label(node)}"
    if node.tag not in _PATH_CONSTRAINTS:
        r.error(node, trail, f"a path constraint simjax does not support (supported: {', '.join(_PATH_CONSTRAINTS)})")
        return problem
    sides = ("lower_bound", "upper_bound", "equality_with_lower")
    own = {
        "MocoOutputBoundConstraint": ("output_path", "second_output_path", "operation", "exponent", "output_index")
        + sides,
        "MocoControlBoundConstraint": ("control_paths",) + sides,
        "MocoStateBoundConstraint": ("state_paths",) + sides,
        "MocoFrameDistanceConstraint": ("frame_pairs", "projection", "projection_vector"),
    }[node.tag]
    props = _known_props(r, node, trail, own + ("MocoConstraintInfo",))
    info = props.get("MocoConstraintInfo")
    if info is not None and info.children:
        r.error(info, f"{trail}/<MocoConstraintInfo>", "only the default constraint bounds are supported")
    if node.tag == "MocoFrameDistanceConstraint":
        return _frame_distance(r, node, props, trail, problem)
    lower, upper = (_bound_function(r, props, key, trail) for key in ("lower_bound", "upper_bound"))
    equality = (
        r.flag(props["equality_with_lower"], f"{trail}/<equality_with_lower>")
        if "equality_with_lower" in props
        else False
    )
    if lower is None and upper is None:
        r.error(node, trail, "no bounds (Moco warns and leaves it free)")
        return problem
    if node.tag != "MocoOutputBoundConstraint":
        key, cls = (
            ("control_paths", pc.ControlBound)
            if node.tag == "MocoControlBoundConstraint"
            else ("state_paths", pc.StateBound)
        )
        paths = tuple(props[key].text.split()) if key in props else ()
        if not paths:
            r.error(node, trail, f"no <{key}>")
            return problem
        return problem.constrain(cls(paths, lower, upper, equality))
    for key in ("second_output_path", "operation"):
        if key in props and props[key].text.strip():
            r.error(props[key], f"{trail}/<{key}>", "composite outputs are not supported", props[key].text.strip())
    output = props["output_path"].text.strip() if "output_path" in props else ""
    if not output:
        r.error(node, trail, "no <output_path>")
        return problem
    exponent = r.integer(props["exponent"], f"{trail}/<exponent>") if "exponent" in props else 1
    index = r.integer(props["output_index"], f"{trail}/<output_index>") if "output_index" in props else -1
    return problem.constrain(pc.OutputBound(output, lower, upper, exponent, index, equality))


def _frame_distance(r: _Reader, node, props: dict, trail: str, problem):
    """A ``MocoFrameDistanceConstraint`` added to ``problem``."""
    from .path_constraints import FrameDistance

    pairs = []
    holder = props.get("frame_pairs")
    for i, pair in enumerate(holder.children if holder is not None else ()):
        where = f"{trail}/<frame_pairs>/<{pair.tag}>[{i}]"
        fields = _known_props(r, pair, where, ("frame1_path", "frame2_path", "minimum_distance", "maximum_distance"))
        frames = [fields[k].text.strip() if k in fields else "" for k in ("frame1_path", "frame2_path")]
        if not all(frames):
            r.error(pair, where, "a frame pair needs <frame1_path> and <frame2_path>")
            continue
        low = (
            r.number(fields["minimum_distance"], f"{where}/<minimum_distance>") if "minimum_distance" in fields else 0.0
        )
        high = (
            r.number(fields["maximum_distance"], f"{where}/<maximum_distance>")
            if "maximum_distance" in fields
            else np.inf
        )
        pairs.append((frames[0], frames[1], low, high))
    if not pairs:
        r.error(node, trail, "no <frame_pairs>")
        return problem
    projection = props["projection"].text.strip() if "projection" in props else "none"
    vector = None
    if "projection_vector" in props and props["projection_vector"].text.split():
        try:
            vector = tuple(float(x) for x in props["projection_vector"].text.split())
        except ValueError:
            raise r.fail(
                props["projection_vector"],
                f"{trail}/<projection_vector>",
                "expected 3 numbers",
                props["projection_vector"].text.strip(),
            ) from None
    constraint = FrameDistance(tuple(pairs), projection, vector)
    try:
        constraint._checked(dataclasses.replace(problem, kinematics=None))
    except (KeyError, ValueError) as exc:
        r.error(node, trail, str(exc).strip("'\""))
        return problem
    return problem.constrain(constraint)


def _phase(r: _Reader, node, version: str, strict: bool):
    """The ``MocoPhase``: ``(problem, goal names)``."""
    from ..control.controllers import Controller
    from .problem import Problem

    props: dict[str, Any] = {}
    for child in node.children:
        props[_key(child)] = child
    known = {
        "model",
        "time_initial_bounds",
        "time_final_bounds",
        "default_speed_bounds",
        "bound_activation_from_excitation",
        "state_infos",
        "state_infos_pattern",
        "control_infos",
        "control_infos_pattern",
        "input_control_infos",
        "input_control_infos_pattern",
        "parameters",
        "goals",
        "path_constraints",
        "kinematic_constraint_bounds",
        "multiplier_bounds",
    }
    for key, child in props.items():
        if key not in known:
            r.error(child, f"<MocoPhase>/{_label(child)}", "unknown property")

    model = _model(r, props.get("model"), version, strict)
    controllers = [p for p, c in model.walk() if isinstance(c, Controller)]
    if controllers:
        r.error(
            props["model"],
            "<ModelProcessor>",
            "the model has controllers (" + ", ".join(controllers) + "): "
            "Moco leaves the actuators they drive out of the problem's controls, simjax does not",
        )
    system = model.build()

    t0 = r.object_bounds(props.get("time_initial_bounds"), '<MocoInitialBounds name="time_initial_bounds">')
    tf = r.object_bounds(props.get("time_final_bounds"), '<MocoFinalBounds name="time_final_bounds">')
    problem = Problem(system, initial_time=t0, final_time=tf)

    for param in props["parameters"].children if "parameters" in props else ():
        problem = _parameter(r, param, problem)
    for constraint in props["path_constraints"].children if "path_constraints" in props else ():
        problem = _path_constraint(r, constraint, problem)
    for key in ("input_control_infos", "input_control_infos_pattern"):
        if key in props and props[key].children:
            r.ignore(props[key], f"<{key}>", "simjax models have no Input controls")
    for key in ("kinematic_constraint_bounds", "multiplier_bounds"):
        if key in props:
            r.ignore(
                props[key],
                _label(props[key]),
                "kinematic constraints",
                props[key].find("bounds").text if props[key].find("bounds") is not None else None,
            )

    states, controls = list(problem.state_names), list(problem.control_names)
    state_infos = _resolve_infos(
        r,
        _infos(r, props.get("state_infos"), "<state_infos>"),
        _infos(r, props.get("state_infos_pattern"), "<state_infos_pattern>"),
        states,
        "state",
    )
    control_infos = _resolve_infos(
        r,
        _infos(r, props.get("control_infos"), "<control_infos>"),
        _infos(r, props.get("control_infos_pattern"), "<control_infos_pattern>"),
        controls,
        "control",
    )
    speed = r.object_bounds(props.get("default_speed_bounds"), '<MocoBounds name="default_speed_bounds">')
    if speed is not None:
        tree = system.topology.tree
        for info in tree.coordinates.values():
            name = tree.u_names[info.u]
            values = state_infos.get(name, ({"bounds": None, "initial_bounds": None, "final_bounds": None}, None))[0]
            if values["bounds"] is None and name in states:
                state_infos[name] = ({**values, "bounds": speed}, props["default_speed_bounds"])
    for name, (values, info_node) in control_infos.items():
        for end in ("initial_bounds", "final_bounds"):
            if values[end] is not None:
                r.error(
                    info_node,
                    f"<control_infos>/{_label(info_node)}/<{end}>",
                    "initial and final bounds on controls are not supported",
                    " ".join(f"{v:g}" for v in values[end]),
                )
        problem = problem.bound(name, values["bounds"])
    for name, (values, _) in state_infos.items():
        problem = problem.bound(name, values["bounds"], initial=values["initial_bounds"], final=values["final_bounds"])
    # MocoVariableInfo's check: initial and final bounds within the info's own bounds
    for name, (values, info_node) in state_infos.items():
        lo, hi = values["bounds"] or (-np.inf, np.inf)
        for end in ("initial_bounds", "final_bounds"):
            b = values[end]
            if b is not None and (b[0] < lo or b[1] > hi):
                raise r.fail(
                    info_node,
                    f"{_label(info_node)}/<{end}>",
                    f"outside the bounds [{lo:g}, {hi:g}] of {name} (Moco refuses this)",
                    " ".join(f"{v:g}" for v in b),
                )

    if (
        "bound_activation_from_excitation" in props
        and not r.flag(props["bound_activation_from_excitation"], "<bound_activation_from_excitation>")
        and problem.activation_pairs()
    ):
        r.error(
            props["bound_activation_from_excitation"],
            "<bound_activation_from_excitation>",
            "simjax always bounds a muscle's activation by its excitation's bounds",
            "false",
        )

    names = []
    for goal_node in props["goals"].children if "goals" in props else ():
        goal = _goal(r, goal_node, problem)
        if goal is not None:
            problem = problem.goal(goal)
            names.append(goal_node.attrib.get("name") or re.sub(r"(?<!^)(?=[A-Z])", "_", goal_node.tag).lower())
    return problem, tuple(names)


# -- the solver ---------------------------------------------------------------------------------


#: solver bounds simjax supports at Moco's default alone: (what they bound, the default)
_DEFAULT_BOUNDS_ONLY = {
    "implicit_multibody_acceleration_bounds": ("accelerations", ACCELERATION_BOUNDS),
    "implicit_auxiliary_derivative_bounds": ("auxiliary derivatives", TENDON_DERIVATIVE_BOUNDS),
    "velocity_correction_bounds": ("velocity corrections", VELOCITY_CORRECTION_BOUNDS),
    "projection_slack_variable_bounds": ("projection slacks", PROJECTION_SLACK_BOUNDS),
}
#: kinematic constraint settings simjax supports at Moco's default alone
_DEFAULT_ONLY = {
    "enforce_constraint_derivatives": "true",
}


def _solver(r: _Reader, node) -> dict:
    from . import ipm

    out = {
        "mesh": 100,
        "scheme": "hermite-simpson",
        "interpolate_controls": True,
        "guess_file": None,
        "verbosity": 2,
        "dynamics_mode": "explicit",
        "sparse_derivatives": False,
        "kinematic_constraint_method": "Posa2016",
    }
    tol, constraint_tol, max_iter = -1.0, -1.0, -1
    node_children = [] if node is None else node.children
    if node is not None and node.tag != "MocoCasADiSolver":
        r.error(node, _label(node), "simjax solves studies posed for MocoCasADiSolver only")
        node_children = []
    mesh = None
    minimize, weights = {}, {}  # (Moco's defaults: not minimized, weight 1)
    for child in node_children:
        where = f"<MocoCasADiSolver>/<{child.tag}>"
        tag, text = child.tag, child.text.strip()
        if tag == "num_mesh_intervals":
            out["mesh"] = r.integer(child, where)
            if out["mesh"] < 1:
                raise r.fail(child, where, "expected a positive number of intervals", text)
        elif tag == "mesh":
            if text:
                try:
                    mesh = np.asarray([float(w) for w in text.split()], float)
                except ValueError:
                    raise r.fail(child, where, "expected numbers", text) from None
                if len(mesh) < 2 or mesh[0] != 0 or mesh[-1] != 1 or np.any(np.diff(mesh) <= 0):
                    raise r.fail(child, where, "Moco requires an increasing mesh from 0 to 1", text)
        elif tag == "transcription_scheme":
            if text not in ("trapezoidal", "hermite-simpson"):
                r.error(child, where, "simjax transcribes by trapezoidal and hermite-simpson only", text)
            out["scheme"] = text
        elif tag == "interpolate_control_mesh_interior_points":
            out["interpolate_controls"] = r.flag(child, where)
        elif tag == "multibody_dynamics_mode":
            if text not in ("explicit", "implicit"):
                r.error(child, where, "expected explicit or implicit", text)
            out["dynamics_mode"] = text
        elif tag in _DEFAULT_BOUNDS_ONLY:
            what, default = _DEFAULT_BOUNDS_ONLY[tag]
            try:
                bounds = tuple(float(w) for w in text.strip("()[] ").split())
            except ValueError:
                bounds = None
            if bounds not in ((), default):
                r.error(child, where, f"simjax bounds the {what} by Moco's default {default} only", text)
        elif tag == "kinematic_constraint_method":
            if text not in KINEMATIC_CONSTRAINT_METHODS:
                r.error(child, where, f"expected one of {', '.join(KINEMATIC_CONSTRAINT_METHODS)}", text)
            out["kinematic_constraint_method"] = text
        elif tag in _DEFAULT_ONLY:
            # (simjax enforces kinematic constraints by Moco's default method alone)
            if text and text.lower() != _DEFAULT_ONLY[tag].lower():
                r.error(
                    child,
                    where,
                    f"simjax enforces kinematic constraints by Moco's default only ({_DEFAULT_ONLY[tag]})",
                    text,
                )
        elif tag in (
            "minimize_implicit_multibody_accelerations",
            "minimize_implicit_auxiliary_derivatives",
            "minimize_lagrange_multipliers",
            "minimize_state_projection_distance",
        ):
            minimize[tag] = r.flag(child, where)
        elif tag in (
            "implicit_multibody_accelerations_weight",
            "implicit_auxiliary_derivatives_weight",
            "lagrange_multiplier_weight",
            "state_projection_distance_weight",
        ):
            weights[tag] = r.number(child, where)
            if not weights[tag] >= 0:
                raise r.fail(child, where, "must be non-negative", text)
        elif tag == "optim_convergence_tolerance":
            tol = r.number(child, where)
        elif tag == "optim_constraint_tolerance":
            constraint_tol = r.number(child, where)
        elif tag == "optim_max_iterations":
            max_iter = r.integer(child, where)
        elif tag == "guess_file":
            out["guess_file"] = r.path(text, child, where) if text else None
        elif tag == "verbosity":
            out["verbosity"] = r.integer(child, where)
        elif tag == "optim_solver":
            if text != "ipopt":
                r.ignore(child, where, "simjax's solver is its own interior-point method, after IPOPT", text)
        elif tag == "optim_hessian_approximation":
            if text != "exact":
                r.ignore(child, where, "simjax uses exact Hessians", text)
        elif tag == "optim_sparsity_detection":
            if text not in ("none", "random", "initial-guess"):
                raise r.fail(child, where, "expected none, random or initial-guess", text)
            out["sparse_derivatives"] = text != "none"
        elif tag in _SOLVER_IGNORED:
            r.ignore(child, where, _SOLVER_IGNORED[tag], text if text else None)
        else:
            r.error(child, where, "unknown property", text if text else None)
    if mesh is not None:
        out["mesh"] = mesh
    for key, flag, weight in (
        (
            "accelerations_weight",
            "minimize_implicit_multibody_accelerations",
            "implicit_multibody_accelerations_weight",
        ),
        (
            "auxiliary_derivatives_weight",
            "minimize_implicit_auxiliary_derivatives",
            "implicit_auxiliary_derivatives_weight",
        ),
        ("multipliers_weight", "minimize_lagrange_multipliers", "lagrange_multiplier_weight"),
    ):
        out[key] = weights.get(weight, 1.0) if minimize.get(flag) else None
    # (minimized by default, with its own default weight)
    out["state_projection_weight"] = (
        weights.get("state_projection_distance_weight", STATE_PROJECTION_WEIGHT)
        if minimize.get("minimize_state_projection_distance", True)
        else None
    )
    for value, name in ((tol, "optim_convergence_tolerance"), (constraint_tol, "optim_constraint_tolerance")):
        if value != -1 and not value > 0:
            raise r.fail(node, f"<MocoCasADiSolver>/<{name}>", "expected -1 or a positive tolerance", value)
    out["options"] = ipm.moco_options(tol, constraint_tol, max_iter=_IPOPT_MAX_ITER if max_iter == -1 else max_iter)
    return out


# -- the study ----------------------------------------------------------------------------------


def read_study(path: str | os.PathLike, strict: bool = True) -> Study:
    """Read a ``MocoStudy`` setup file (see the module).

    **Arguments:** ``path``: the ``.omoco`` file; ``strict``: passed to the ``.osim``
    reader (``False``: skip model content simjax does not model yet, with a warning).

    **Returns:** a ``Study``.

    **Warns:** ``StudyWarning`` listing the settings simjax ignores (once, by name).

    **Raises:** ``StudyError`` naming the file and listing, by line, element and value,
    everything in it that simjax cannot honour and that would change the answer;
    ``FileNotFoundError``; the ``.osim`` reader's errors for the model.
    """
    from ..io.osim._xml import XMLSyntaxError, parse

    file = os.fspath(path)
    with open(file, "rb") as fh:
        data = fh.read()
    try:
        root = parse(data)
    except XMLSyntaxError as e:
        raise StudyError(f"{file}:{e.line}: {e}") from None
    version = root.attrib.get("Version", "40600")
    if root.tag == "OpenSimDocument":
        if len(root.children) != 1 or root.children[0].tag != "MocoStudy":
            raise StudyError(
                f"{file}: expected one <MocoStudy> in <OpenSimDocument>, found {[c.tag for c in root.children]}"
            )
        node = root.children[0]
    else:
        node = root
    if node.tag != "MocoStudy":
        raise StudyError(f"{file}: not a MocoStudy file (its element is <{node.tag}>)")
    r = _Reader(file)
    props = {}
    for child in node.children:
        key = _key(child)
        if key == "solver" or child.tag.endswith("Solver"):
            props["solver"] = child
        elif key in ("problem", "write_solution", "results_directory"):
            props[key] = child
        else:
            r.error(child, f"<MocoStudy>/{_label(child)}", "unknown property")
    solver = _solver(r, props.get("solver"))
    problem_node = props.get("problem")
    phases = [c for c in problem_node.children if c.tag == "MocoPhase"] if problem_node is not None else []
    for c in problem_node.children if problem_node is not None else ():
        if c.tag != "MocoPhase":
            r.error(c, f"<MocoProblem>/{_label(c)}", "unknown property")
    if len(phases) != 1:
        raise StudyError(f"{file}: expected one <MocoPhase> in <MocoProblem>, found {len(phases)}")
    problem, goal_names = _phase(r, phases[0], version, strict)
    if "write_solution" in props:
        r.flag(props["write_solution"], "<write_solution>")  # (simjax always writes the solution)
    name = node.attrib.get("name", "")
    directory = props["results_directory"].text.strip() if "results_directory" in props else ""
    directory = os.path.normpath(os.path.join(r.folder, directory or "."))
    output = os.path.join(directory, f"{name or 'MocoStudy'}_solution.sto")
    r.raise_errors()
    ignored = tuple(e for _, e in sorted(r.ignored))
    if ignored:
        listing = "\n".join(f"  {e}" for e in ignored)
        warnings.warn(
            StudyWarning(
                f"{file}: ignored {len(r.ignored)} setting(s) simjax does not support (they "
                f"cannot change the answer):\n{listing}"
            ),
            stacklevel=2,
        )
    for note in r.notes:
        warnings.warn(StudyWarning(f"{file}: {note}"), stacklevel=2)
    return Study(
        file=file,
        name=name,
        problem=problem,
        goal_names=goal_names,
        mesh=solver["mesh"],
        scheme=solver["scheme"],
        interpolate_controls=solver["interpolate_controls"],
        options=solver["options"],
        guess_file=solver["guess_file"],
        verbosity=solver["verbosity"],
        output=output,
        ignored=ignored,
        dynamics_mode=solver["dynamics_mode"],
        accelerations_weight=solver["accelerations_weight"],
        auxiliary_derivatives_weight=solver["auxiliary_derivatives_weight"],
        multipliers_weight=solver["multipliers_weight"],
        sparse_derivatives=solver["sparse_derivatives"],
        kinematic_constraint_method=solver["kinematic_constraint_method"],
        state_projection_weight=solver["state_projection_weight"],
    )


def solve_study(study: Study):
    """Solve a study's problem with its settings (from its ``guess_file``, if any, as
    ``files.guess_from_table`` reads it; else from the midpoints of the bounds, Moco's
    default guess).

    **Returns:** the ``OptimalTrajectory``.
    """
    import jax

    from .collocation import solve
    from .files import guess_from_table

    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "solving a Moco study needs float64: call jax.config.update('jax_enable_x64', True) "
            "first (the simjax command line does)"
        )
    guess = None
    if study.guess_file is not None:
        if study.dynamics_mode != "explicit":
            raise ValueError(
                f"{study.file}: a guess_file with multibody_dynamics_mode {study.dynamics_mode!r} is not "
                "supported yet (guesses are read for explicit dynamics)"
            )
        guess = guess_from_table(
            study.problem, study.guess_file, study.mesh, study.scheme, study.kinematic_constraint_method
        )
    return solve(
        study.problem,
        study.mesh,
        study.scheme,
        study.options,
        guess,
        study.interpolate_controls,
        study.dynamics_mode,
        study.accelerations_weight,
        study.auxiliary_derivatives_weight,
        study.multipliers_weight,
        sparse_derivatives=study.sparse_derivatives,
        kinematic_constraint_method=study.kinematic_constraint_method,
        state_projection_weight=study.state_projection_weight,
    )


def run_study(path: str | os.PathLike, output: str | os.PathLike | None = None, strict: bool = True):
    """Read a ``MocoStudy`` file, solve it and write its solution (``simjax moco``).

    **Arguments:** ``path``: the ``.omoco`` file; ``output``: the solution's file
    (default: ``Study.output``, ``<results_directory>/<study name>_solution.sto``);
    ``strict``: as ``read_study``'s.

    With the study's ``verbosity`` 1 or more a summary is printed, with 2 (Moco's
    default) also the iteration log.

    **Returns:** ``(solution, output path)``: the ``OptimalTrajectory`` and the
    MocoTrajectory ``.sto`` written (with the goals' terms under Moco's names).
    """
    from .files import MOCO_STATUS, write_trajectory
    from .ipm import print_log

    study = read_study(path, strict)
    if study.verbosity >= 2 and sys.stderr.isatty():  # a terminal: the progress line while it solves
        study = dataclasses.replace(study, options=dataclasses.replace(study.options, progress=True))
    solution = solve_study(study)
    out = os.fspath(output) if output is not None else study.output
    if os.path.dirname(os.path.abspath(out)):
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # each cost goal's term, under its name (an endpoint constraint has none, as in Moco's file)
    costs = [(g, n) for g, n in zip(study.problem.goals, study.goal_names) if not hasattr(g, "initial_rows")]
    write_trajectory(
        solution,
        out,
        dataclasses.replace(study.problem, goals=tuple(g for g, _ in costs)),
        goal_names=[n for _, n in costs],
    )
    if study.verbosity >= 2:
        print_log(solution.nlp)
    if study.verbosity >= 1:
        status = int(solution.status)
        print(
            f"{study.file}: {MOCO_STATUS.get(status, status)} after {int(solution.iterations)} iterations, "
            f"objective {float(solution.objective):.10g}, final time {float(solution.time[-1]):.10g} s; "
            f"solution written to {out}"
        )
    return solution, out
