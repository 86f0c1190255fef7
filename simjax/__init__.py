"""simjax: a JAX-based, differentiable multibody simulator for musculoskeletal biomechanics.

The public API is re-exported here by name; the modules behind it may change.
"""

from . import compilation_cache  # noqa: F401  (first: it turns JAX's persistent cache on before anything compiles)
from . import models, spatial, view
from .analysis.moment_arms import moment_arm, moment_arms
from .api import (accelerations, assemble, body_poses, component_outputs, constraint_errors, controls, forward_dynamics,
                  frame_acceleration, frame_jacobian, frame_transform, frame_velocity, inverse_dynamics,
                  kinetic_energy, mass_center, mass_matrix, momentum, output, outputs, potential_energy, project,
                  station_acceleration, station_jacobian, station_location, station_velocity)
from .batching import map_batch
from .compiling import compiler_options
from .component import Component, ModelError, ModelWarning, Set, Stage
from .control.controllers import Controller, PolicyController, PrescribedController
from .control.metabolics import (Umberger2010MuscleMetabolicsProbe,
                                 Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter)
from .control.probes import Probe
from .control.reflex import ToyReflexController
from .forces import (BushingForce, ContactGeometry, ContactHalfSpace, ContactMesh, ContactParameters, ContactSphere,
                     CoordinateLimitForce, ElasticFoundationForce, ExpressionBasedCoordinateForce, ExternalForce,
                     HuntCrossleyForce, PointToPointSpring, PrescribedForce, SmoothSphereHalfSpaceForce,
                     SpringGeneralizedForce)
from .forces.base import Actuator, CoordinateActuator, Force, PointActuator, TorqueActuator
from .forces.path_forces import Ligament, PathSpring, default_ligament_curve
from .forward import Accelerations
from .functions import (Constant, Function, GCVSpline, LinearFunction, MultiplierFunction, NaturalCubicSpline,
                        PiecewiseConstantFunction, PiecewiseLinearFunction, PolynomialFunction, SimmSpline, Sine,
                        StepFunction)
from .io.osim import load_osim, save_osim
from .io.states import prescribe_motion, read_states, state_from_motion, states_table, write_states
from .mechanics.constraints import CoordinateCouplerConstraint, Constraint, PointConstraint, WeldConstraint
from .mechanics.frames import Body, Frame, Ground, Marker, PhysicalFrame, PhysicalOffsetFrame, Station
from .mechanics.joints import (BallJoint, Coordinate, CustomJoint, EllipsoidJoint, FreeJoint, GimbalJoint, Joint,
                               PinJoint, PlanarJoint, SliderJoint, SpatialTransform, TransformAxis, UniversalJoint,
                               WeldJoint)
from .mechanics.point_on_line import PointOnLineConstraint
from .model import Model, RemovalReport
from .muscles import (ConditionalPathPoint, DeGrooteFregly2016Muscle, GeometryPath, Millard2012EquilibriumMuscle,
                      MovingPathPoint, Muscle, PathActuator, PathPoint, RigidTendonMuscle, Schutte1993Muscle_Deprecated,
                      Thelen2003Muscle, equilibrate_muscles)
from .simulate import NONFINITE_STATE, ControlTable, Event, Trajectory, simulate, simulate_batch
from .state import State
from .system import System, Topology

__version__ = "0.1.0"

__all__ = [
    # modules
    "models", "spatial", "view",
    # model building: components, bodies, joints, constraints, forces, muscles, controllers, functions
    "Component", "ModelError", "ModelWarning", "Set", "Stage", "Model", "RemovalReport",
    "Body", "Frame", "Ground", "Marker", "PhysicalFrame", "PhysicalOffsetFrame", "Station",
    "BallJoint", "Coordinate", "CustomJoint", "EllipsoidJoint", "FreeJoint", "GimbalJoint", "Joint", "PinJoint",
    "PlanarJoint", "SliderJoint", "SpatialTransform", "TransformAxis", "UniversalJoint", "WeldJoint",
    "CoordinateCouplerConstraint", "Constraint", "PointConstraint", "WeldConstraint", "PointOnLineConstraint",
    "Actuator", "CoordinateActuator", "Force", "PointActuator", "TorqueActuator",
    "BushingForce", "ContactGeometry", "ContactHalfSpace", "ContactMesh", "ContactParameters", "ContactSphere",
    "CoordinateLimitForce", "ElasticFoundationForce", "ExpressionBasedCoordinateForce", "ExternalForce",
    "HuntCrossleyForce", "PointToPointSpring", "PrescribedForce", "SmoothSphereHalfSpaceForce",
    "SpringGeneralizedForce", "Ligament", "PathSpring", "default_ligament_curve",
    "ConditionalPathPoint", "DeGrooteFregly2016Muscle", "GeometryPath", "Millard2012EquilibriumMuscle",
    "MovingPathPoint", "Muscle", "PathActuator", "PathPoint", "RigidTendonMuscle", "Schutte1993Muscle_Deprecated",
    "Thelen2003Muscle", "equilibrate_muscles",
    "Controller", "PolicyController", "PrescribedController", "ToyReflexController",
    "Probe", "Umberger2010MuscleMetabolicsProbe", "Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter",
    "Constant", "Function", "GCVSpline", "LinearFunction", "MultiplierFunction", "NaturalCubicSpline",
    "PiecewiseConstantFunction", "PiecewiseLinearFunction", "PolynomialFunction", "SimmSpline", "Sine",
    "StepFunction",
    # the system and its state
    "System", "Topology", "State",
    # evaluations at a state
    "accelerations", "assemble", "body_poses", "component_outputs", "constraint_errors", "controls",
    "forward_dynamics", "frame_acceleration", "frame_jacobian", "frame_transform", "frame_velocity",
    "inverse_dynamics", "kinetic_energy", "mass_center", "mass_matrix", "momentum", "output", "outputs",
    "potential_energy", "project", "station_acceleration", "station_jacobian", "station_location",
    "station_velocity", "Accelerations", "moment_arm", "moment_arms",
    # simulation and batches
    "NONFINITE_STATE", "ControlTable", "Event", "Trajectory", "simulate", "simulate_batch", "map_batch",
    "compiler_options",
    # files
    "load_osim", "save_osim", "prescribe_motion", "read_states", "state_from_motion", "states_table",
    "write_states",
]
