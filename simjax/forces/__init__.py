"""Forces: actuators, springs, limits, bushings, expression forces, contact, external loads."""

from .base import Actuator, CoordinateActuator, Force, PointActuator, TorqueActuator
from .bushing import BushingForce
from .contact import (
    ContactGeometry,
    ContactHalfSpace,
    ContactMesh,
    ContactParameters,
    ContactSphere,
    ElasticFoundationForce,
    HuntCrossleyForce,
    SmoothSphereHalfSpaceForce,
)
from .expression import ExpressionBasedCoordinateForce
from .external import ExternalForce, PrescribedForce
from .limits import CoordinateLimitForce
from .springs import PointToPointSpring, SpringGeneralizedForce

__all__ = [
    "Actuator",
    "CoordinateActuator",
    "Force",
    "PointActuator",
    "TorqueActuator",
    "BushingForce",
    "ContactGeometry",
    "ContactHalfSpace",
    "ContactMesh",
    "ContactParameters",
    "ContactSphere",
    "ElasticFoundationForce",
    "HuntCrossleyForce",
    "SmoothSphereHalfSpaceForce",
    "ExpressionBasedCoordinateForce",
    "ExternalForce",
    "PrescribedForce",
    "CoordinateLimitForce",
    "PointToPointSpring",
    "SpringGeneralizedForce",
]
