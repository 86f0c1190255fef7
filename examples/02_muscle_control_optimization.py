"""02 · Muscle-control optimisation (the plain-script twin of notebooks/02_muscle_control_optimization.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/02_muscle_control_optimization.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 02 · Muscle-control optimisation
#
# Find the biceps excitation that brings the bicep-curl arm's elbow from 90° to a target
# angle at t = 1 s with the least effort, by gradient descent (`optax.adam`) through
# `sj.simulate`. The excitation is piecewise linear in time (a few knots, squashed into
# the muscle's control range [0.01, 1] by a sigmoid). We check the gradient against finite differences and compare with
# a gradient-free random search given the same number of simulations, and solve the
# same task by direct collocation, as Moco would. Then the same job on `arm26.osim`: six
# muscles over two joints, with wrapping, checked in OpenSim.

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

sys.path.insert(0, os.path.join(os.getcwd(), "..", "examples"))
import bicep_curl, optax

system = bicep_curl.build_model().build()
state = bicep_curl.initial_state(system)
T, TARGET = 1.0, 1.2                          # s, rad
KNOTS = jnp.linspace(0.0, T, 5)

def excitation(params):
    return 0.01 + 0.99 * jax.nn.sigmoid(params)   # within the biceps' control bounds [0.01, 1]

def run(params):
    table = sj.ControlTable(KNOTS, excitation(params)[:, None])
    return sj.simulate(system, state, T, table, solver="rk4", dt=0.002, n_outputs=51)

def loss(params):
    traj = run(params)
    miss = traj.q[-1, 1] - TARGET
    return 100.0 * miss ** 2 + 0.1 * jnp.mean(excitation(params) ** 2)

# (the XLA options simjax compiles its own programs with: faster to compile and to run on a CPU)
value_and_grad = jax.jit(jax.value_and_grad(loss), compiler_options=sj.compiler_options())
params = jnp.linspace(-2.0, -1.0, 5)         # start from a low, slowly rising excitation
print("initial loss", float(loss(params)))

# The gradient agrees with central finite differences. (OpenSim's first-order
# activation dynamics switch time constants where excitation equals activation, so the
# loss has kinks there; away from them, as here, both derivatives agree.)

_, g = value_and_grad(params)
h = 1e-6
fd = np.array([(loss(params.at[i].add(h)) - loss(params.at[i].add(-h))) / (2 * h) for i in range(2)])
print("autodiff:", np.asarray(g[:2]), " finite differences:", fd)
np.testing.assert_allclose(np.asarray(g[:2]), fd, rtol=1e-5)

def descend(value_and_grad, params, optimiser, steps):
    """``steps`` optax updates: the final parameters and the loss at each step."""
    opt_state, history = optimiser.init(params), []
    for _ in range(steps):
        value, g = value_and_grad(params)
        updates, opt_state = optimiser.update(g, opt_state)
        params = optax.apply_updates(params, updates)
        history.append(float(value))
    return params, history

steps = 40 if CI else 100
# little momentum (b1): near the target the loss is a narrow valley
params, history = descend(value_and_grad, params, optax.adam(0.2, b1=0.5), steps)
final = run(params)
miss_deg = np.degrees(abs(float(final.q[-1, 1]) - TARGET))
print(f"loss {history[0]:.3f} -> {history[-1]:.5f}; final angle misses the target by {miss_deg:.3f} deg")
assert history[-1] < history[0] / 100 and miss_deg < 1.0

# A gradient-free baseline: random search with the same number of simulations.

rng = np.random.default_rng(0)
candidates = jnp.asarray(rng.normal(-1.0, 2.0, (steps, 5)))
losses = jax.jit(jax.vmap(loss))(candidates)
best = int(jnp.argmin(losses))
print(f"random search, {steps} simulations: best loss {float(losses[best]):.4f}; gradient descent: {history[-1]:.5f}")
assert history[-1] < float(losses[best])

fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].semilogy(history); axes[0].axhline(float(losses[best]), ls="--", color="gray", label="random search")
axes[0].set_xlabel("iteration"); axes[0].set_ylabel("loss"); axes[0].legend()
axes[1].plot(KNOTS, excitation(params), "o-"); axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("excitation")
plot.plot_outputs(final, ["/jointset/elbow/elbow_coord_0|value"], ax=axes[2])
axes[2].axhline(TARGET, ls="--", color="gray")
fig.tight_layout()

# ## The same task by direct collocation
#
# `simjax.optimize` poses the task as Moco would: the elbow's angle and speed and the
# biceps' activation and fiber length are the states, its excitation is the control, within
# [0.01, 1]. The start is the shooting's, the elbow must be at the target at t = 1 s
# exactly, and the integral of the squared excitation is minimised (`ControlEffort`), by
# Hermite–Simpson collocation and simjax's interior-point solver. As in Moco, the problem
# takes no locked coordinate and no controller: the shoulder is welded and the excitation
# is the problem's. The compliant tendon makes the fiber dynamics stiff, so the solver
# starts from the shooting's simulated trajectory; from the bounds alone it stalls.

from simjax import optimize
from simjax.io.tables import TimeSeriesTable

arm = bicep_curl.build_model().remove(["/controllerset/brain", "/jointset/shoulder"])
arm = arm.add(sj.WeldJoint("shoulder", "/ground", "/bodyset/humerus", location_in_parent=(0, 0, 0),
                           location_in_child=(0, 1, 0))).build()
ELBOW, SPEED, ACTIVATION, FIBER = arm.y_names
shooting = dict(zip(system.y_names, np.asarray(final.y).T))   # each state's samples along the shooting
start = {name: float(shooting[name][0]) for name in arm.y_names}
task = (optimize.Problem(arm, initial_time=0.0, final_time=T)
        .bound(ELBOW, (0.0, np.pi), initial=start[ELBOW], final=TARGET)
        .bound(SPEED, (-50.0, 50.0), initial=start[SPEED])
        .bound(ACTIVATION, (0.01, 1.0), initial=start[ACTIVATION])
        .bound(FIBER, (0.12, 1.08), initial=start[FIBER])     # 0.2 to 1.8 optimal fiber lengths
        .bound("/forceset/biceps", (0.01, 1.0))
        .goal(optimize.ControlEffort()))
guess = TimeSeriesTable(np.asarray(final.t),
                        np.column_stack([shooting[name] for name in arm.y_names]
                                        + [np.interp(final.t, KNOTS, excitation(params))]),
                        list(arm.y_names) + ["/forceset/biceps"], {"inDegrees": "no"})
MESH = 20 if CI else 50
collocated = optimize.solve(task, mesh=MESH, guess=optimize.guess_from_table(task, guess, mesh=MESH))
fine = np.linspace(0.0, T, 401)
shooting_effort = np.trapezoid(np.interp(fine, KNOTS, excitation(params)) ** 2, fine)
print(optimize.STATUS[int(collocated.status)], f"after {int(collocated.iterations)} iterations; "
      f"integral of the squared excitation: collocation {float(collocated.objective):.5f}, "
      f"shooting {shooting_effort:.5f}")
assert optimize.STATUS[int(collocated.status)] == "solved" and float(collocated.objective) < shooting_effort

# The optimal excitation, simulated forward with OpenSim's integrator (`rkm`), brings
# the elbow to the target within the mesh's discretization error: about 1.3° with 20
# intervals, 0.6° with 50. The collocation spends less effort than the shooting: its
# excitation is free at every mesh point, the shooting's is piecewise linear over five
# knots.

optimal = sj.ControlTable(collocated.time, collocated.control("/forceset/biceps")[:, None])
arm_start = arm.default_state().with_y(jnp.asarray([start[name] for name in arm.y_names]))
check = sj.simulate(arm, arm_start, T, optimal, solver="rkm", accuracy=1e-8, n_outputs=101)
check_miss = np.degrees(abs(float(check.q[-1, 0]) - TARGET))
print(f"simulated: the elbow ends {check_miss:.3f} deg from the target (shooting: {miss_deg:.3f} deg)")
assert check_miss < (2.0 if CI else 1.0)

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot(fine, np.interp(fine, KNOTS, excitation(params)), label="shooting (5 knots)")
axes[0].plot(collocated.time, collocated.control("/forceset/biceps"), "o-", ms=3, label="collocation")
axes[0].set_xlabel("time (s)"); axes[0].set_ylabel("excitation"); axes[0].legend()
axes[1].plot(final.t, final.q[:, 1], label="shooting")
axes[1].plot(check.t, check.q[:, 0], "--", label="collocation, simulated")
axes[1].axhline(TARGET, ls=":", color="gray")
axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("elbow angle (rad)"); axes[1].legend()
fig.tight_layout()

# ## arm26: six muscles, two joints, wrapping
#
# `arm26.osim` is OpenSim's arm: the shoulder and the elbow, moved by the three heads of
# the triceps, the two heads of the biceps and the brachialis, whose paths wrap over
# cylinders and ellipsoids. From rest, the arm hanging, it is to reach shoulder elevation
# −0.2 rad and elbow flexion 0.8 rad at t = 0.5 s with the least effort: 24 parameters,
# four knots per muscle.
#
# We integrate with `rkm`, OpenSim's Runge–Kutta–Merson, at accuracy 1e-4 (its final
# poses agree with 1e-7 solves to about 1e-4 rad). Where a tendon goes slack its
# muscle's fiber state turns stiff, and a fixed RK4 step of 2 ms is unstable there
# (`simulate` then reports `sj.NONFINITE_STATE`); the adaptive steps shrink through it.
# The gradient is compiled once, in about two minutes: the derivatives of the wrapping
# geometry make a large program.

arm = sj.load_osim(sj.models.path("arm26")).build()
arm_state = sj.equilibrate_muscles(arm, arm.default_state())
ARM_T, ARM_TARGET = 0.5, jnp.array([-0.2, 0.8])   # s; shoulder elevation, elbow flexion (rad)
ARM_KNOTS = jnp.linspace(0.0, ARM_T, 4)
print("muscles:", ", ".join(arm.actuator_names))

def arm_run(params, throw=True):
    """params (knots, muscles) -> the trajectory, 26 samples."""
    table = sj.ControlTable(ARM_KNOTS, excitation(params))
    return sj.simulate(arm, arm_state, ARM_T, table, solver="rkm", accuracy=1e-4, max_steps=4000,
                       n_outputs=26, throw=throw)

def arm_objective(params, traj):
    miss = traj.q[-1] - ARM_TARGET
    return 100.0 * jnp.sum(miss ** 2) + 0.1 * jnp.mean(excitation(params) ** 2)

arm_value_and_grad = jax.jit(jax.value_and_grad(lambda p: arm_objective(p, arm_run(p))),
                             compiler_options=sj.compiler_options())
# float64 and not weakly typed, like the optimiser's updates, so jit compiles once
arm_params = jnp.full((4, 6), -2.0, dtype=jnp.float64)

arm_steps = 20 if CI else 80
arm_params, arm_history = descend(arm_value_and_grad, arm_params, optax.adam(0.1, b1=0.5), arm_steps)
arm_final = arm_run(arm_params, throw=False)   # the same compiled solve as the random search's
arm_miss = np.degrees(np.asarray(arm_final.q[-1] - ARM_TARGET))
print(f"loss {arm_history[0]:.3f} -> {arm_history[-1]:.5f}; misses (deg): shoulder {arm_miss[0]:.3f}, "
      f"elbow {arm_miss[1]:.3f}")
assert int(arm_final.result) == 0 and arm_history[-1] < arm_history[0] / 100 and np.all(np.abs(arm_miss) < 1.0)

# OpenSim, given the optimised excitations as a `PrescribedController` of piecewise
# linear functions, moves its arm26 to the same pose.

def opensim_final_pose(path, times, excitations, t_final, accuracy=1e-6):
    """OpenSim's coordinates at t_final, excitations (knots, actuators) prescribed."""
    model = opensim.Model(str(path))
    brain = opensim.PrescribedController()
    actuators = model.getActuators()
    for j in range(actuators.getSize()):
        brain.addActuator(actuators.get(j))
        f = opensim.PiecewiseLinearFunction()
        for t, v in zip(times, excitations[:, j]):
            f.addPoint(float(t), float(v))
        brain.prescribeControlForActuator(actuators.get(j).getName(), f)
    model.addController(brain)
    s = model.initSystem()
    model.equilibrateMuscles(s)
    manager = opensim.Manager(model)
    manager.setIntegratorAccuracy(accuracy)
    manager.initialize(s)
    s = manager.integrate(t_final)
    coordinates = model.getCoordinateSet()
    return np.array([coordinates.get(i).getValue(s) for i in range(coordinates.getSize())])

if opensim is not None:
    opensim.Logger.setLevelString("error")   # (not the missing display meshes and the Manager's report)
    pose = opensim_final_pose(sj.models.path("arm26"), np.asarray(ARM_KNOTS), np.asarray(excitation(arm_params)),
                              ARM_T)
    opensim_miss = np.degrees(pose - np.asarray(ARM_TARGET))
    print("OpenSim's final pose misses the target by (deg):", opensim_miss.round(3))
    assert np.all(np.abs(opensim_miss) < 1.0)

# Random search with the same number of simulations over the 24 parameters (a solve
# that fails, say by running out of steps, counts as infinitely bad):

def arm_forward_loss(params):
    traj = arm_run(params, throw=False)
    return float(arm_objective(params, traj)) if int(traj.result) == 0 else np.inf

arm_candidates = jnp.asarray(rng.normal(-1.5, 1.5, (arm_steps, 4, 6)))
arm_losses = np.array([arm_forward_loss(c) for c in arm_candidates])
arm_best = int(np.argmin(arm_losses))
print(f"random search: best loss {arm_losses[arm_best]:.3f}; gradient descent: {arm_history[-1]:.5f}")
assert arm_history[-1] < arm_losses[arm_best]

fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].semilogy(arm_history); axes[0].axhline(arm_losses[arm_best], ls="--", color="gray", label="random search")
axes[0].set_xlabel("iteration"); axes[0].set_ylabel("loss"); axes[0].legend()
for j, name in enumerate(arm.actuator_names):
    axes[1].plot(ARM_KNOTS, excitation(arm_params)[:, j], "o-", label=name)
axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("excitation"); axes[1].legend(fontsize=7)
for i, name in enumerate(["shoulder elevation", "elbow flexion"]):
    line, = axes[2].plot(arm_final.t, arm_final.q[:, i], label=name)
    axes[2].plot(ARM_T, ARM_TARGET[i], "x", color=line.get_color(), ms=10)
axes[2].set_xlabel("time (s)"); axes[2].set_ylabel("angle (rad)"); axes[2].legend()
fig.tight_layout()

plt.show()
