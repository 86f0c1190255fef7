"""OpenSim's analysis tools, run from their own setup files or called directly.

Each tool is a function of a ``System`` and tables (``TimeSeriesTable``) that returns
tables, batched over frames (one compiled program for all of them, not a Python loop);
a setup reader maps OpenSim's setup file onto it and writes OpenSim's output files
(``run(setup_path)``, or ``simjax run SETUP.xml`` on the command line).

- ``setup``: reading setup files, resolving their paths, dispatching to the tools;
- ``kinematics``: inverse kinematics (``InverseKinematicsTool``);
- ``dynamics``: inverse dynamics (``InverseDynamicsTool``), on ``motion`` (OpenSim's
  coordinate filtering and splines) and ``external_loads`` (ExternalLoads files);
- ``scaling``: scaling a model to a subject (``ScaleTool``: ModelScaler, MarkerPlacer);
- ``analyze``: the AnalyzeTool and its analyses (``MuscleAnalysis``, ``BodyKinematics``,
  ``PointKinematics``);
- ``optimization``: static optimization (the ``StaticOptimization`` analysis);
- ``reactions``: joint reaction loads (the ``JointReaction`` analysis);
- ``forward``: forward simulation (``ForwardTool``): controls from an OpenSim
  ``ControlSet`` (``.xml`` or ``.sto``), the initial state from a states file, external
  loads and the integrator settings; writes ``_states.sto`` and ``_controls.sto``;
- ``tracking``: what RRA and CMC share: ``CMC_TaskSet`` files (``read_task_set``), the
  desired kinematics prepared as OpenSim does (``desired_kinematics``), and the tracking
  loop (``track``: PD-tracking accelerations and a least-squares control solve every
  window, the windows one ``lax.scan``);
- ``rra``: the Residual Reduction Algorithm (``RRATool``): the mass-centre adjustment
  of ``adjusted_com_body`` from the average residuals, the recommended mass changes,
  the tracking with residual and reserve actuators; writes ``_Kinematics_q.sto``,
  ``_Actuation_force.sto``, ``_pErr.sto``, ``_avgResiduals.txt`` and the adjusted
  model;
- ``cmc``: Computed Muscle Control (``CMCTool``): every window, the PD-tracking
  accelerations, the least-stress actuator forces that give them within the forces the
  muscles can reach over the window, and the excitations that reach those forces (a
  root solve through activation and contraction dynamics); writes ``_controls.sto``
  and ``.xml``, ``_states.sto``, ``_pErr.sto``, ``_Actuation_force.sto``;
- ``gradients``: derivatives through the tools: the IK and SO optima differentiated
  by the implicit function theorem (``solve_inverse_kinematics``,
  ``solve_static_optimization``: pure, ``vmap``-able over trials; the latter's
  arrays from a model by ``static_optimization_problem``), and
  ``scaled_system``, a model scaled by traced segment scale factors.
"""

from .analyze import analyze, body_kinematics, muscle_analysis, point_kinematics
from .dynamics import inverse_dynamics
from .forward import forward
from .gradients import scaled_system
from .kinematics import inverse_kinematics, marker_positions, solve_inverse_kinematics
from .scaling import scale
from .setup import Setup, SetupError, SetupWarning, read_setup, run
from .optimization import solve_static_optimization, static_optimization, static_optimization_problem
from .reactions import joint_reaction
from .rra import rra
from .cmc import cmc

__all__ = [
    "Setup",
    "SetupError",
    "SetupWarning",
    "read_setup",
    "run",
    "inverse_kinematics",
    "inverse_dynamics",
    "analyze",
    "scale",
    "static_optimization",
    "muscle_analysis",
    "body_kinematics",
    "point_kinematics",
    "joint_reaction",
    "solve_inverse_kinematics",
    "marker_positions",
    "solve_static_optimization",
    "static_optimization_problem",
    "scaled_system",
    "forward",
    "rra",
    "cmc",
]
