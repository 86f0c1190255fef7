"""Trajectory optimisation: optimal control problems over a ``System``, posed as OpenSim
Moco poses them and solved by direct collocation with a JAX-native interior-point
method.

- ``problem``: ``Problem`` (one phase: time bounds, bounds on states and controls by
  OpenSim name, initial and final bounds) and its goals (``ControlEffort``,
  ``FinalTime``);
- ``collocation``: the trapezoidal and Hermite–Simpson transcriptions and ``solve``;
- ``nlp``: staged NLPs, the form the transcription produces (a stage per mesh point, a
  border of variables every stage sees);
- ``kkt``: their KKT matrices (block tridiagonal with a dense border): factorization,
  exact inertia and solves, linear in the number of mesh points;
- ``ipm``: a primal-dual interior-point method after IPOPT (barrier, filter line
  search, inertia correction, feasibility restoration, gradient-based scaling), one
  ``lax.while_loop``: ``jit``-able and ``vmap``-able.
"""

from . import collocation, ipm, kkt, nlp, problem
from .collocation import OptimalTrajectory, solve, transcribe
from .ipm import STATUS, Options, Solution, print_log
from .nlp import StagedNLP, dense_nlp
from .problem import ControlEffort, FinalTime, Goal, Problem

__all__ = ["collocation", "ipm", "kkt", "nlp", "problem", "Problem", "Goal", "ControlEffort", "FinalTime", "solve",
           "transcribe", "OptimalTrajectory", "Options", "Solution", "STATUS", "print_log", "StagedNLP",
           "dense_nlp"]
