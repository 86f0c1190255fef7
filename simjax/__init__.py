"""simjax: a JAX-based, differentiable multibody simulator for musculoskeletal biomechanics.

The public API is re-exported here by name; the modules behind it may change.
"""

from . import spatial
from .api import (accelerations, body_poses, constraint_errors, controls, forward_dynamics, frame_transform,
                  inverse_dynamics, kinetic_energy, mass_center, mass_matrix, momentum, output, outputs,
                  potential_energy, station_location)
from .component import Component, ModelError, Set, Stage
from .control.controllers import Controller, PrescribedController
from .forces.base import Actuator, CoordinateActuator, Force, PointActuator, TorqueActuator
from .forward import Accelerations
from .functions import (Constant, Function, GCVSpline, LinearFunction, MultiplierFunction, NaturalCubicSpline,
                        PiecewiseConstantFunction, PiecewiseLinearFunction, PolynomialFunction, SimmSpline, Sine,
                        StepFunction)
from .mechanics.constraints import CoordinateCouplerConstraint, Constraint, PointConstraint, WeldConstraint
from .mechanics.frames import Body, Frame, Ground, Marker, PhysicalFrame, PhysicalOffsetFrame, Station
from .mechanics.joints import (BallJoint, Coordinate, CustomJoint, FreeJoint, GimbalJoint, Joint, PinJoint,
                               PlanarJoint, SliderJoint, SpatialTransform, TransformAxis, UniversalJoint, WeldJoint)
from .model import Model, RemovalReport
from .state import State
from .system import System, Topology

__all__ = [
    "spatial",
    "accelerations", "body_poses", "constraint_errors", "controls", "forward_dynamics", "frame_transform",
    "inverse_dynamics", "kinetic_energy", "mass_center", "mass_matrix", "momentum", "output", "outputs",
    "potential_energy", "station_location",
    "Component", "ModelError", "Set", "Stage",
    "Controller", "PrescribedController",
    "Actuator", "CoordinateActuator", "Force", "PointActuator", "TorqueActuator",
    "Accelerations",
    "Constant", "Function", "GCVSpline", "LinearFunction", "MultiplierFunction", "NaturalCubicSpline",
    "PiecewiseConstantFunction", "PiecewiseLinearFunction", "PolynomialFunction", "SimmSpline", "Sine",
    "StepFunction",
    "CoordinateCouplerConstraint", "Constraint", "PointConstraint", "WeldConstraint",
    "Body", "Frame", "Ground", "Marker", "PhysicalFrame", "PhysicalOffsetFrame", "Station",
    "BallJoint", "Coordinate", "CustomJoint", "FreeJoint", "GimbalJoint", "Joint", "PinJoint", "PlanarJoint",
    "SliderJoint", "SpatialTransform", "TransformAxis", "UniversalJoint", "WeldJoint",
    "Model", "RemovalReport", "State", "System", "Topology",
]
__version__ = "0.1.0"

from .simulate import ControlTable, Event, Trajectory, simulate, simulate_batch  # noqa: E402

__all__ += ["ControlTable", "Event", "Trajectory", "simulate", "simulate_batch"]
