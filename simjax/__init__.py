"""simjax: a JAX-based, differentiable multibody simulator for musculoskeletal biomechanics."""

from .component import Component, ModelError, Set, Stage
from .mechanics.frames import Body, Frame, Ground, Marker, PhysicalFrame, PhysicalOffsetFrame, Station
from .mechanics.joints import (BallJoint, Coordinate, CustomJoint, FreeJoint, GimbalJoint, Joint, PinJoint,
                               PlanarJoint, SliderJoint, SpatialTransform, TransformAxis, UniversalJoint, WeldJoint)
from .model import Model, RemovalReport
from .state import State
from .system import System, Topology

__all__ = [
    "Component", "ModelError", "Set", "Stage",
    "Body", "Frame", "Ground", "Marker", "PhysicalFrame", "PhysicalOffsetFrame", "Station",
    "BallJoint", "Coordinate", "CustomJoint", "FreeJoint", "GimbalJoint", "Joint", "PinJoint", "PlanarJoint",
    "SliderJoint", "SpatialTransform", "TransformAxis", "UniversalJoint", "WeldJoint",
    "Model", "RemovalReport", "State", "System", "Topology",
]
__version__ = "0.1.0"
