"""07 · Trajectory optimisation: Moco's problems by direct collocation (the plain-script twin of notebooks/07_trajectory_optimization.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/07_trajectory_optimization.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 07 · Trajectory optimisation: Moco's problems by direct collocation
#
# OpenSim Moco poses optimal control problems over a model (move a mass in minimum time,
# swing a pendulum up with least effort, find the muscle activity behind a measured walk)
# and solves them by direct collocation with CasADi and IPOPT. `simjax.optimize` poses the
# same problems, transcribes them the same way (trapezoidal or Hermite–Simpson) and solves
# them with a JAX-native interior-point method whose linear algebra follows the mesh
# (block tridiagonal, linear in the number of intervals). Being JAX, it also solves a whole
# batch of problems in one call and differentiates the optimum with respect to the model.
# When OpenSim 4.6 is installed, Moco solves each problem beside simjax.

import os, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import matplotlib.pyplot as plt
import simjax as sj
from simjax import plot

CI = os.environ.get("SIMJAX_CI") == "1"   # small sizes when the test suite runs this notebook
try:
    import opensim
except ImportError:
    opensim = None
print("simjax", sj.__version__, "| OpenSim:", opensim.__version__ if opensim else "not installed")

import tempfile
from simjax import optimize
from simjax.io.osim.writer import save_osim

work = tempfile.mkdtemp()
if opensim is not None:
    opensim.Logger.setLevelString("error")

def moco_solver(study, mesh, scheme, tol=1e-8):
    """Moco's CasADi solver on a study, with simjax's transcription, mesh and tolerances."""
    solver = study.initCasADiSolver()
    solver.set_num_mesh_intervals(mesh)
    solver.set_transcription_scheme(scheme)
    solver.set_optim_convergence_tolerance(tol)
    solver.set_optim_constraint_tolerance(tol)
    solver.set_verbosity(0)
    return solver

# ## A sliding mass in minimum time
#
# A 2 kg mass slides 1 m, from rest to rest, pushed by a force of at most 50 N. The
# fastest motion is bang-bang: full force forward, then full force back, reaching the end
# in 2 √(1 m / 25 m/s²) = 0.4 s. The model is built in simjax and written as an `.osim`
# file, which Moco reads.

model = sj.Model("sliding_mass")
model = model.add(sj.Body("body", 2.0, (0, 0, 0), (0, 0, 0, 0, 0, 0)))
model = model.add(sj.SliderJoint("slider", "/ground", "/bodyset/body"))
model = model.add(sj.CoordinateActuator("actuator", "/jointset/slider/slider_coord_0"))
mass_file = os.path.join(work, "sliding_mass.osim")
save_osim(model, mass_file)
mass_system = model.build()
X, V = mass_system.y_names
MESH = 50

sliding = (optimize.Problem(mass_system, initial_time=0.0, final_time=(0.0, 5.0))
           .bound(X, (-10, 10), initial=0.0, final=1.0)
           .bound(V, (-50, 50), initial=0.0, final=0.0)
           .bound("/forceset/actuator", (-50, 50))
           .goal(optimize.FinalTime()))
mass_solution = optimize.solve(sliding, mesh=MESH, scheme="trapezoidal")
print(optimize.STATUS[int(mass_solution.status)], f"after {int(mass_solution.iterations)} iterations: "
      f"final time {float(mass_solution.time[-1]):.6f} s")

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot(mass_solution.time, mass_solution.state(X), label="simjax")
axes[1].plot(mass_solution.time, mass_solution.control("/forceset/actuator"), label="simjax")
if opensim is not None:
    study = opensim.MocoStudy()
    problem = study.updProblem()
    problem.setModel(opensim.Model(mass_file))
    problem.setTimeBounds(opensim.MocoInitialBounds(0.0), opensim.MocoFinalBounds(0.0, 5.0))
    problem.setStateInfo(X, [-10, 10], 0.0, 1.0)
    problem.setStateInfo(V, [-50, 50], 0.0, 0.0)
    problem.setControlInfo("/forceset/actuator", [-50, 50])
    problem.addGoal(opensim.MocoFinalTimeGoal())
    moco_solver(study, MESH, "trapezoidal")
    moco = study.solve()
    print(f"Moco: final time {moco.getFinalTime():.6f} s")
    assert abs(float(mass_solution.time[-1]) - moco.getFinalTime()) < 1e-6
    axes[0].plot(moco.getTimeMat(), moco.getStateMat(X), "--", label="Moco")
    axes[1].plot(moco.getTimeMat(), moco.getControlMat("/forceset/actuator"), "--", label="Moco")
axes[0].set_ylabel("position (m)"); axes[1].set_ylabel("force (N)")
for ax in axes:
    ax.set_xlabel("time (s)"); ax.legend()
fig.tight_layout()

# ## A pendulum swing-up with least effort
#
# A 1 kg point mass on a 1 m link swings from hanging at rest to upright at rest in
# exactly 1 s, minimising the integral of the squared joint torque (Moco's
# `MocoControlGoal`), by Hermite–Simpson collocation.

model = sj.Model("pendulum")
model = model.add(sj.Body("body", 1.0, (0, 0, 0), (0, 0, 0, 0, 0, 0)))
model = model.add(sj.PinJoint("pin", "/ground", "/bodyset/body", location_in_child=(0, 1, 0)))
model = model.add(sj.CoordinateActuator("tau", "/jointset/pin/pin_coord_0"))
pendulum_file = os.path.join(work, "pendulum.osim")
save_osim(model, pendulum_file)
pendulum = model.build()
Q, U = pendulum.y_names
MESH = 20 if CI else 50

swing = (optimize.Problem(pendulum, initial_time=0.0, final_time=1.0)
         .bound(Q, (-10, 10), initial=0.0, final=np.pi)
         .bound(U, (-50, 50), initial=0.0, final=0.0)
         .bound("/forceset/tau", (-30, 30))
         .goal(optimize.ControlEffort()))
swing_solution = optimize.solve(swing, mesh=MESH)
print(optimize.STATUS[int(swing_solution.status)], f"objective {float(swing_solution.objective):.8f}")

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot(swing_solution.time, swing_solution.state(Q), label="simjax")
axes[1].plot(swing_solution.time, swing_solution.control("/forceset/tau"), label="simjax")
if opensim is not None:
    study = opensim.MocoStudy()
    problem = study.updProblem()
    problem.setModel(opensim.Model(pendulum_file))
    problem.setTimeBounds(opensim.MocoInitialBounds(0.0), opensim.MocoFinalBounds(1.0))
    problem.setStateInfo(Q, [-10, 10], 0.0, np.pi)
    problem.setStateInfo(U, [-50, 50], 0.0, 0.0)
    problem.setControlInfo("/forceset/tau", [-30, 30])
    problem.addGoal(opensim.MocoControlGoal("effort"))
    moco_solver(study, MESH, "hermite-simpson")
    moco = study.solve()
    print(f"Moco: objective {moco.getObjective():.8f}")
    assert abs(float(swing_solution.objective) - moco.getObjective()) < 1e-6 * moco.getObjective()
    axes[0].plot(moco.getTimeMat(), moco.getStateMat(Q), "--", label="Moco")
    axes[1].plot(moco.getTimeMat(), moco.getControlMat("/forceset/tau"), "--", label="Moco")
axes[0].set_ylabel("angle (rad)"); axes[1].set_ylabel("torque (N m)")
for ax in axes:
    ax.set_xlabel("time (s)"); ax.legend()
fig.tight_layout()

# ## MocoInverse of walking: the muscle activity behind a measured motion
#
# The walking trial of `gait10dof18musc` shipped with simjax (OpenSim's inverse kinematics of
# it, low-pass filtered at 6 Hz) is prescribed, and the 18 muscles' excitations
# and the joints' reserve torques that produce it, with the measured ground reaction
# forces, are found with least effort. The model is edited as Moco's `MocoInverse` example
# edits it: rigid tendons, DeGroote–Fregly muscles without passive fiber force and with a
# 1.5× wider active force–length curve, and 1 N·m reserves.

import functools
from simjax.io.tables import read_table
from simjax.optimize import model_edits as edits
from simjax.tools.motion import filter_lowpass

folder = sj.models.pipeline_path("Gait10dof18musc")
model_file = os.path.join(folder, "subject01.osim")
loads_file = os.path.join(folder, "ExperimentalData", "subject01_walk_grf.xml")
motion_file = os.path.join(folder, "OutputReference", "IK", "subject01_walk_IK.mot")
T0, T1 = 0.6, 1.0 if CI else 1.4   # s (a shorter window at CI size)

walker = edits.ModelProcessor(
    model_file, functools.partial(edits.add_external_loads, path=loads_file), edits.ignore_tendon_compliance,
    edits.replace_muscles_with_degroote, edits.ignore_passive_fiber_forces,
    functools.partial(edits.scale_active_fiber_force_curve_width, scale_factor=1.5),
    functools.partial(edits.add_reserves, optimal_force=1.0)).process().build()
kinematics = filter_lowpass(read_table(motion_file), 6.0)
walk = optimize.inverse(walker, kinematics, initial_time=T0, final_time=T1, mesh_interval=0.02)
print(optimize.STATUS[int(walk.status)], f"after {int(walk.iterations)} iterations: objective "
      f"{float(walk.objective):.6f}")

muscles = [n for n in walk.state_names if n.endswith("/activation")][:9]
fig, axes = plt.subplots(3, 3, figsize=(11, 7), sharex=True)
for ax, name in zip(axes.flat, muscles):
    ax.plot(walk.time, walk.state(name), label="simjax")
    ax.set_title(name.split("/")[2], fontsize=9); ax.set_ylim(0, 1)
if opensim is not None:
    inverse = opensim.MocoInverse()
    processor = opensim.ModelProcessor(model_file)
    for op in (opensim.ModOpAddExternalLoads(loads_file), opensim.ModOpIgnoreTendonCompliance(),
               opensim.ModOpReplaceMusclesWithDeGrooteFregly2016(), opensim.ModOpIgnorePassiveFiberForcesDGF(),
               opensim.ModOpScaleActiveFiberForceCurveWidthDGF(1.5), opensim.ModOpAddReserves(1.0)):
        processor.append(op)
    inverse.setModel(processor)
    table = opensim.TableProcessor(motion_file)
    table.append(opensim.TabOpLowPassFilter(6.0))
    inverse.setKinematics(table)
    inverse.set_initial_time(T0); inverse.set_final_time(T1); inverse.set_mesh_interval(0.02)
    moco_inverse = inverse.solve()    # (kept: the MocoSolution below lives in it)
    moco = moco_inverse.getMocoSolution()
    print(f"Moco: objective {moco.getObjective():.6f}")
    assert abs(float(walk.objective) - moco.getObjective()) < 1e-3 * moco.getObjective()
    for ax, name in zip(axes.flat, muscles):
        ax.plot(moco.getTimeMat(), moco.getStateMat(name), "--", label="Moco")
axes[0, 0].legend(); fig.supxlabel("time (s)"); fig.supylabel("activation"); fig.tight_layout()

# ## A batch of problems, and the derivative of an optimum
#
# One compiled solver, `vmap`-ed: the sliding mass for a range of masses at once (on a GPU,
# side by side), each to its own minimum time, t_f = 2 √(m / 50) s in the continuous
# problem. Each problem ends with its own status. Then a derivative that Moco cannot give:
# how the least effort of the pendulum's swing-up changes with its mass, by implicit
# differentiation of the optimality conditions. For a point mass on a massless link the
# torque is m (L² q̈ + g L sin q): the best motion does not depend on the mass, and the
# least effort is m² times that of 1 kg, so its derivative at 1 kg is twice the effort.

import equinox as eqx

def with_mass(system, mass):
    return eqx.tree_at(lambda s: s.model.find("/bodyset/body").mass, system, mass)

masses = jnp.linspace(1.0, 4.0, 4 if CI else 16)
batch = optimize.solve_batch(sliding, masses, with_mass, mesh=50, scheme="trapezoidal",
                             options=optimize.Options(tol=1e-6, constraint_tol=1e-6))
print([optimize.STATUS[int(s)] for s in batch.status])
exact = 2 * np.sqrt(np.asarray(masses) / 50)
print("final times (s):", np.round(np.asarray(batch.time[:, -1]), 5), "continuous:", np.round(exact, 5))
assert np.allclose(np.asarray(batch.time[:, -1]), exact, atol=2e-3)

def least_effort(mass):
    """The swing-up's optimal objective (N^2 m^2 s) for a pendulum of this mass (kg)."""
    problem = optimize.Problem(with_mass(pendulum, mass), swing.initial_time, swing.final_time, swing.bounds,
                               swing.initial, swing.final, swing.goals)
    return optimize.solve(problem, mesh=MESH).objective

effort, slope = jax.value_and_grad(least_effort)(1.0)
print(f"least effort {float(effort):.6f}; d effort / d mass at 1 kg: {float(slope):.6f} (2 x effort: "
      f"{2 * float(effort):.6f})")
assert abs(float(slope) - 2 * float(effort)) < 1e-6 * float(effort)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(masses, batch.time[:, -1], "o", label="simjax, one batch")
ax.plot(masses, exact, label="2 sqrt(m / 50)")
ax.set_xlabel("mass (kg)"); ax.set_ylabel("minimum time (s)"); ax.legend(); fig.tight_layout()

plt.show()
