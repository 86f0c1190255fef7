"""Trajectory optimisation's numerical core (work in progress: the problem API and the
collocation transcription are not yet on this branch).

- ``nlp``: staged NLPs, the form direct collocation produces (a stage per mesh point,
  a border of variables every stage sees);
- ``kkt``: their KKT matrices (block tridiagonal with a dense border): factorization,
  exact inertia and solves, linear in the number of stages;
- ``ipm``: a primal-dual interior-point method after IPOPT (barrier, filter line
  search, inertia correction, feasibility restoration, gradient-based scaling), one
  ``lax.while_loop``: ``jit``-able and ``vmap``-able.
"""

from . import ipm, kkt, nlp
from .ipm import Options, Solution, print_log
from .nlp import StagedNLP, dense_nlp

__all__ = ["ipm", "kkt", "nlp", "Options", "Solution", "print_log", "StagedNLP", "dense_nlp"]
