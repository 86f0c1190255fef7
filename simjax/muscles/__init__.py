"""Muscles, geometry paths and the curves muscles are built from (OpenSim's Actuators
library).

- ``path``: PathPoint, ConditionalPathPoint, MovingPathPoint, GeometryPath,
  PathActuator and the path subsystem (all paths of a model in one pass);
- ``muscle``: the Muscle base class, fixed-width pennation, first-order activation;
- ``millard``, ``thelen``, ``degroote``, ``rigid_tendon``, ``schutte``: the muscle models;
- ``equilibrium``: ``equilibrate_muscles``;
- ``curves``: Millard, Thelen and DeGroote-Fregly curves (``stacked_curves``: their
  fast stacked evaluation inside muscle models; ``solvers``: vectorized root
  finding).
"""

from .path import AbstractPathPoint, ConditionalPathPoint, GeometryPath, MovingPathPoint, PathActuator, PathPoint
from .muscle import Muscle
from .millard import Millard2012EquilibriumMuscle
from .thelen import Thelen2003Muscle
from .degroote import DeGrooteFregly2016Muscle
from .rigid_tendon import RigidTendonMuscle
from .schutte import Schutte1993Muscle_Deprecated
from .equilibrium import equilibrate_muscles

__all__ = [
    "AbstractPathPoint",
    "ConditionalPathPoint",
    "GeometryPath",
    "MovingPathPoint",
    "PathActuator",
    "PathPoint",
    "Muscle",
    "Millard2012EquilibriumMuscle",
    "Thelen2003Muscle",
    "DeGrooteFregly2016Muscle",
    "RigidTendonMuscle",
    "equilibrate_muscles",
]
__all__ += ["Schutte1993Muscle_Deprecated"]
