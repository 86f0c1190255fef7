"""Trajectory optimisation: optimal control problems over a ``System``, posed as OpenSim
Moco poses them and solved by direct collocation with a JAX-native interior-point
method.

- ``problem``: ``Problem`` (one phase: time bounds, bounds on states and controls by
  OpenSim name, initial and final bounds) and its goals (``ControlEffort``,
  ``FinalTime``);
- ``goals``: goals on data and outputs (``StateTracking``: Moco's
  ``MocoStateTrackingGoal``; ``OutputIntegral``: ``MocoOutputGoal``);
- ``collocation``: the trapezoidal and Hermite–Simpson transcriptions and ``solve``
  (derivatives of the solution with respect to the model and the goals' weights, by
  implicit differentiation);
- ``files``: MocoTrajectory ``.sto`` files (``write_trajectory``, ``read_trajectory``)
  and initial guesses from them or any table (``guess_from_table``);
- ``nlp``: staged NLPs, the form the transcription produces (a stage per mesh point, a
  border of variables every stage sees);
- ``kkt``: their KKT matrices (block tridiagonal with a dense border): factorization,
  exact inertia and solves, linear in the number of mesh points;
- ``ipm``: a primal-dual interior-point method after IPOPT (barrier, filter line
  search, inertia correction, feasibility restoration, gradient-based scaling), one
  ``lax.while_loop``: ``jit``-able and ``vmap``-able.
"""

from . import collocation, files, goals, ipm, kkt, nlp, problem
from .collocation import OptimalTrajectory, solve, transcribe
from .files import guess_from_table, read_trajectory, write_trajectory
from .goals import OutputIntegral, StateTracking
from .ipm import STATUS, Options, Solution, print_log
from .nlp import StagedNLP, dense_nlp
from .problem import ControlEffort, FinalTime, Goal, Problem

__all__ = ["collocation", "files", "goals", "ipm", "kkt", "nlp", "problem", "Problem", "Goal", "ControlEffort",
           "FinalTime", "StateTracking", "OutputIntegral", "write_trajectory", "read_trajectory", "guess_from_table",
           "solve",
           "transcribe", "OptimalTrajectory", "Options", "Solution", "STATUS", "print_log", "StagedNLP",
           "dense_nlp"]
