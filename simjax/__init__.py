"""simjax: a JAX-based, differentiable multibody simulator for musculoskeletal biomechanics.

The public API is re-exported here by name; the modules behind it may change.
"""

from . import spatial
from .api import (accelerations, assemble, component_outputs, body_poses, constraint_errors, controls, forward_dynamics,
                  frame_acceleration, frame_jacobian, frame_transform, frame_velocity, inverse_dynamics,
                  kinetic_energy, mass_center, mass_matrix, momentum, output, outputs, potential_energy, project,
                  station_acceleration, station_jacobian, station_location, station_velocity)
from .component import Component, ModelError, ModelWarning, Set, Stage
from .control.controllers import Controller, PolicyController, PrescribedController
from .control.reflex import ToyReflexController
from .forces.base import Actuator, CoordinateActuator, Force, PointActuator, TorqueActuator
from .forward import Accelerations
from .functions import (Constant, Function, GCVSpline, LinearFunction, MultiplierFunction, NaturalCubicSpline,
                        PiecewiseConstantFunction, PiecewiseLinearFunction, PolynomialFunction, SimmSpline, Sine,
                        StepFunction)
from .mechanics.constraints import CoordinateCouplerConstraint, Constraint, PointConstraint, WeldConstraint
from .mechanics.frames import Body, Frame, Ground, Marker, PhysicalFrame, PhysicalOffsetFrame, Station
from .mechanics.joints import (BallJoint, Coordinate, CustomJoint, EllipsoidJoint, FreeJoint, GimbalJoint, Joint,
                               PinJoint, PlanarJoint, SliderJoint, SpatialTransform, TransformAxis, UniversalJoint,
                               WeldJoint)
from .model import Model, RemovalReport
from .state import State
from .system import System, Topology

__all__ = [
    "spatial",
    "accelerations", "assemble", "component_outputs", "body_poses", "constraint_errors", "controls", "forward_dynamics", "frame_transform",
    "inverse_dynamics", "kinetic_energy", "mass_center", "mass_matrix", "momentum", "output", "outputs",
    "potential_energy", "project", "station_location", "frame_velocity", "frame_acceleration", "frame_jacobian",
    "station_velocity", "station_acceleration", "station_jacobian",
    "Component", "ModelError", "ModelWarning", "Set", "Stage",
    "Controller", "PolicyController", "PrescribedController",
    "ToyReflexController",
    "Actuator", "CoordinateActuator", "Force", "PointActuator", "TorqueActuator",
    "Accelerations",
    "Constant", "Function", "GCVSpline", "LinearFunction", "MultiplierFunction", "NaturalCubicSpline",
    "PiecewiseConstantFunction", "PiecewiseLinearFunction", "PolynomialFunction", "SimmSpline", "Sine",
    "StepFunction",
    "CoordinateCouplerConstraint", "Constraint", "PointConstraint", "WeldConstraint",
    "Body", "Frame", "Ground", "Marker", "PhysicalFrame", "PhysicalOffsetFrame", "Station",
    "BallJoint", "Coordinate", "CustomJoint", "EllipsoidJoint", "FreeJoint", "GimbalJoint", "Joint", "PinJoint",
    "PlanarJoint", "SliderJoint", "SpatialTransform", "TransformAxis", "UniversalJoint", "WeldJoint",
    "Model", "RemovalReport", "State", "System", "Topology",
]
__version__ = "0.1.0"

from .simulate import NONFINITE_STATE, ControlTable, Event, Trajectory, simulate, simulate_batch  # noqa: E402
from .batching import map_batch  # noqa: E402
from .compiling import compiler_options  # noqa: E402

__all__ += ["NONFINITE_STATE", "ControlTable", "Event", "Trajectory", "simulate", "simulate_batch", "map_batch",
            "compiler_options"]

from . import models  # noqa: E402
from .io.osim import load_osim, save_osim  # noqa: E402
from .io.states import prescribe_motion, read_states, state_from_motion, states_table, write_states  # noqa: E402

__all__ += ["models", "load_osim", "save_osim", "prescribe_motion", "read_states", "state_from_motion",
            "states_table", "write_states"]

# muscles, geometry paths, moment arms (issue 6)
from .analysis.moment_arms import moment_arm, moment_arms  # noqa: E402
from .io import osim_muscles  # noqa: E402,F401  (registers the .osim classes)
from .io import osim_wrapping  # noqa: E402,F401
from .muscles import (ConditionalPathPoint, DeGrooteFregly2016Muscle, GeometryPath, Millard2012EquilibriumMuscle,  # noqa: E402
                      MovingPathPoint, Muscle, PathActuator, PathPoint, RigidTendonMuscle, Thelen2003Muscle,
                      equilibrate_muscles)

__all__ += ["moment_arm", "moment_arms", "ConditionalPathPoint", "DeGrooteFregly2016Muscle", "GeometryPath",
            "Millard2012EquilibriumMuscle", "MovingPathPoint", "Muscle", "PathActuator", "PathPoint",
            "RigidTendonMuscle", "Thelen2003Muscle", "equilibrate_muscles"]
from .muscles import Schutte1993Muscle_Deprecated  # noqa: E402
__all__ += ["Schutte1993Muscle_Deprecated"]

from .forces import (BushingForce, ContactGeometry, ContactHalfSpace, ContactMesh, ContactParameters,  # noqa: E402
                     ContactSphere, CoordinateLimitForce, ElasticFoundationForce, ExpressionBasedCoordinateForce,
                     ExternalForce, HuntCrossleyForce, PointToPointSpring, PrescribedForce,
                     SmoothSphereHalfSpaceForce, SpringGeneralizedForce)
from .forces.path_forces import Ligament, PathSpring, default_ligament_curve  # noqa: E402
from .mechanics.point_on_line import PointOnLineConstraint  # noqa: E402

__all__ += ["BushingForce", "ContactGeometry", "ContactHalfSpace", "ContactMesh", "ContactParameters",
            "ContactSphere", "CoordinateLimitForce", "ElasticFoundationForce", "ExpressionBasedCoordinateForce",
            "ExternalForce", "HuntCrossleyForce", "PointToPointSpring", "PrescribedForce",
            "SmoothSphereHalfSpaceForce", "SpringGeneralizedForce", "PointOnLineConstraint", "Ligament", "PathSpring",
            "default_ligament_curve"]

# probes (OpenSim Probe, Umberger2010MuscleMetabolicsProbe)
from .control.probes import Probe  # noqa: E402
from .control.metabolics import (Umberger2010MuscleMetabolicsProbe,  # noqa: E402
                                 Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter)

__all__ += ["Probe", "Umberger2010MuscleMetabolicsProbe", "Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter"]

# 3D views: scenes, playback, HTML and video (issue 41); VTK and viser are imported on use
from . import view  # noqa: E402

__all__ += ["view"]
