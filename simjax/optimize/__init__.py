"""Trajectory optimisation: optimal control problems over a ``System``, posed as OpenSim
Moco poses them and solved by direct collocation with a JAX-native interior-point
method.

- ``problem``: ``Problem`` (one phase: time bounds, bounds on states and controls by
  OpenSim name, initial and final bounds, prescribed kinematics, ``Parameter``s: model
  properties as variables, path constraints) and its goals (``ControlEffort``,
  ``FinalTime``, ``InitialActivation``);
- ``goals``: goals on data, outputs and the phase's ends (``StateTracking``: Moco's
  ``MocoStateTrackingGoal``; ``MarkerTracking``; ``OutputIntegral``: ``MocoOutputGoal``; ``Periodicity``;
  ``AverageSpeed``);
- ``contact_tracking``: ground reaction forces tracked by smooth contact forces
  (``ContactTracking``: ``MocoContactTrackingGoal``, with ``ContactGroup``s);
- ``path_constraints``: bounds at every mesh point on outputs (``OutputBound``:
  ``MocoOutputBoundConstraint``), controls (``ControlBound``), states (``StateBound``)
  and the distances between frames (``FrameDistance``);
- ``collocation``: the trapezoidal and Hermite–Simpson transcriptions (explicit or
  implicit multibody dynamics), ``solve`` and ``solve_batch``
  (derivatives of the solution with respect to the model and the goals' weights, by
  implicit differentiation);
- ``files``: MocoTrajectory ``.sto`` files (``write_trajectory``, ``read_trajectory``)
  and initial guesses from them or any table (``guess_from_table``);
- ``model_edits``: Moco's ``ModelProcessor`` and its operators (DeGroote muscles, rigid
  tendons, reserves, external loads, ...);
- ``moco_tools``: Moco's shortcuts: ``inverse`` (``MocoInverse``: the muscle activity
  behind a known motion, the coordinates prescribed by ``Problem.prescribe``);
- ``nlp``: staged NLPs, the form the transcription produces (a stage per mesh point, a
  border of variables every stage sees);
- ``sparsity``: the pattern of the stages' derivatives, detected at random points, and
  a coloring of it, so that the solver pushes one tangent per color (Moco's
  ``optim_sparsity_detection``);
- ``kkt``: their KKT matrices (block tridiagonal with a dense border): factorization,
  exact inertia and solves, linear in the number of mesh points;
- ``ipm``: a primal-dual interior-point method after IPOPT (barrier, filter line
  search, inertia correction, feasibility restoration, gradient-based scaling), one
  ``lax.while_loop``: ``jit``-able and ``vmap``-able.
"""

from . import (
    collocation,
    contact_tracking,
    files,
    goals,
    ipm,
    kkt,
    model_edits,
    moco_tools,
    nlp,
    path_constraints,
    problem,
    sparsity,
    study,
)
from .contact_tracking import ContactGroup, ContactTracking
from .collocation import OptimalTrajectory, solve, solve_batch, transcribe
from .files import guess_from_table, read_trajectory, write_trajectory
from .goals import AverageSpeed, MarkerTracking, OutputIntegral, Periodicity, StateTracking
from .path_constraints import ControlBound, FrameDistance, OutputBound, StateBound
from .moco_tools import SumSquaredStates, inverse, inverse_problem, track, track_problem
from .ipm import STATUS, Options, Solution, moco_options, print_log
from .model_edits import (
    ModelProcessor,
    add_external_loads,
    add_reserves,
    add_residuals,
    fiber_damping,
    ignore_activation_dynamics,
    ignore_passive_fiber_forces,
    ignore_tendon_compliance,
    passive_fiber_strain_at_one_norm_force,
    remove_muscles,
    replace_muscles_with_degroote,
    replace_muscles_with_path_actuators,
    scale_active_fiber_force_curve_width,
    scale_max_isometric_force,
    tendon_compliance_dynamics_mode,
)
from .nlp import StagedNLP, dense_nlp
from .sparsity import Sparsity, detect_sparsity
from .problem import (
    ControlEffort,
    Ends,
    FinalTime,
    Goal,
    InitialActivation,
    Kinematics,
    Parameter,
    PathConstraint,
    Problem,
)

__all__ = [
    "collocation",
    "contact_tracking",
    "ContactTracking",
    "ContactGroup",
    "files",
    "goals",
    "ipm",
    "kkt",
    "nlp",
    "path_constraints",
    "problem",
    "sparsity",
    "model_edits",
    "moco_tools",
    "study",
    "Problem",
    "Goal",
    "ControlEffort",
    "FinalTime",
    "InitialActivation",
    "Kinematics",
    "StateTracking",
    "OutputIntegral",
    "MarkerTracking",
    "OutputBound",
    "ControlBound",
    "StateBound",
    "FrameDistance",
    "Periodicity",
    "AverageSpeed",
    "Parameter",
    "PathConstraint",
    "Ends",
    "solve_batch",
    "SumSquaredStates",
    "write_trajectory",
    "read_trajectory",
    "guess_from_table",
    "solve",
    "transcribe",
    "OptimalTrajectory",
    "inverse",
    "inverse_problem",
    "track",
    "track_problem",
    "Options",
    "moco_options",
    "Solution",
    "STATUS",
    "print_log",
    "StagedNLP",
    "dense_nlp",
    "Sparsity",
    "detect_sparsity",
    "ModelProcessor",
    "add_external_loads",
    "add_reserves",
    "add_residuals",
    "fiber_damping",
    "ignore_activation_dynamics",
    "ignore_passive_fiber_forces",
    "ignore_tendon_compliance",
    "passive_fiber_strain_at_one_norm_force",
    "remove_muscles",
    "replace_muscles_with_degroote",
    "replace_muscles_with_path_actuators",
    "scale_active_fiber_force_curve_width",
    "scale_max_isometric_force",
    "tendon_compliance_dynamics_mode",
]
