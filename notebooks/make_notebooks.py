"""Write the notebooks of this folder from the cells below (outputs stripped).

Run ``python notebooks/make_notebooks.py`` after editing a notebook's cells here, so
the committed ``.ipynb`` files and this source stay the same. Each notebook reads
``SIMJAX_CI=1`` to run at a small size (the test suite executes them that way).
"""

from __future__ import annotations

import os

import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))

SETUP = '''import os, sys
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
print("simjax", sj.__version__, "| OpenSim:", opensim.__version__ if opensim else "not installed")'''

BICEP_CURL = [
    ("md", """# 01 · The bicep curl

The OpenSim API guide's first example, written with simjax: two 1 kg links on pin joints,
a `Millard2012EquilibriumMuscle("biceps", 200, 0.6, 0.55, 0)`, a `PrescribedController`
whose excitation steps from 0.3 to 1 between 0.5 s and 3 s, the shoulder locked, the elbow
starting at 90°, the muscle equilibrated. We simulate it, print OpenSim's reporter table,
plot the elbow angle, fiber force and activation, and run the same model in OpenSim when
it is installed."""),
    ("code", SETUP),
    ("code", '''sys.path.insert(0, os.path.join(os.getcwd(), "..", "examples"))
import bicep_curl

T = 2.0 if CI else 10.0
system = bicep_curl.build_model().build()
state = bicep_curl.initial_state(system)
times = jnp.linspace(0.0, T, int(T * 20) + 1)
traj = sj.simulate(system, state, T, ts=times, accuracy=1e-7)
print(f"{int(traj.num_steps)} steps, result code {int(traj.result)}")'''),
    ("md", "The guide's reporter table: fiber force and elbow angle every second."),
    ("code", '''fiber_force = np.asarray(traj.output("/forceset/biceps|fiber_force"))
elbow = np.asarray(traj.output("/jointset/elbow/elbow_coord_0|value"))
print(f"{'time':>8} | {'fiber_force':>12} | {'elbow_angle':>12}")
for k in range(0, len(times), 20):
    print(f"{float(times[k]):8.2f} | {fiber_force[k]:12.4f} | {elbow[k]:12.4f}")'''),
    ("code", '''fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
plot.plot_outputs(traj, ["/jointset/elbow/elbow_coord_0|value"], ax=axes[0])
plot.plot_outputs(traj, ["/forceset/biceps|fiber_force"], ax=axes[1])
plot.plot_outputs(traj, ["/forceset/biceps|activation", "/forceset/biceps|excitation"], ax=axes[2])
fig.tight_layout()'''),
    ("md", "The same model in OpenSim 4.6 (written by `sj.save_osim`), side by side."),
    ("code", '''if opensim is not None:
    path = "bicep_curl_written_by_simjax.osim"
    sj.save_osim(system.model, path)
    om = opensim.Model(path)
    s = om.initSystem()
    om.getCoordinateSet().get("elbow_coord_0").setValue(s, 0.5 * np.pi)
    om.equilibrateMuscles(s)
    manager = opensim.Manager(om)
    manager.setIntegratorAccuracy(1e-7)
    manager.initialize(s)
    biceps = om.getMuscles().get("biceps")
    elbow_c = om.getCoordinateSet().get("elbow_coord_0")
    ref = []
    for t in np.asarray(times):
        if t > 0:
            s = manager.integrate(float(t))
        om.realizeDynamics(s)
        ref.append((biceps.getFiberForce(s), elbow_c.getValue(s)))
    ref = np.asarray(ref)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    axes[0].plot(times, fiber_force, label="simjax"); axes[0].plot(times, ref[:, 0], "--", label="OpenSim")
    axes[0].set_title("fiber force (N)"); axes[0].legend()
    axes[1].plot(times, elbow, label="simjax"); axes[1].plot(times, ref[:, 1], "--", label="OpenSim")
    axes[1].set_title("elbow angle (rad)"); axes[1].legend()
    first = np.asarray(times) <= 1.0
    rel = np.abs(np.stack([fiber_force, elbow], 1)[first] - ref[first]) / np.abs(ref[first])
    print(f"largest relative difference over [0, 1] s: {rel.max():.2e}")
    assert rel.max() < 0.01'''),
    ("md", "A stick figure of the two links (projected on the x-y plane)."),
    ("code", '''from IPython.display import HTML
anim = plot.animate(traj, plane="xy", stride=4 if CI else 2)
HTML(anim.to_jshtml())'''),
    ("md", """The same motion in 3D (`simjax.view`): a self-contained page holding every frame,
played inline with no server (drag to turn, wheel to zoom; time slider, speed, layers).
`sj.view.write_html` writes the same page to a file that opens in any browser; the model,
built in code, has no meshes attached, so its bodies show as a skeleton of sticks."""),
    ("code", '''scene = sj.view.load_scene(system)
frames = scene.frames(traj)
sj.view.write_html("bicep_curl.html", scene, frames)
sj.view.notebook_html(scene, frames, height=420)'''),
]

OPENSIM_MODELS = [
    ("md", """# 05 · OpenSim models

Load `gait10dof18musc.osim` (10 degrees of freedom, 18 Millard muscles), inspect its
components and outputs, compute moment-arm curves over a knee sweep next to OpenSim's,
run a short forward simulation and write an OpenSim states file."""),
    ("code", SETUP),
    ("code", '''model = sj.load_osim(sj.models.path("gait10dof18musc"))
system = model.build()
print(model.name)
print("bodies:", [p for p, c in model.walk() if isinstance(c, sj.Body)])
print("coordinates:", system.coordinate_names)
print("muscles:", system.actuator_names)
print("state variables:", len(system.q_names) + len(system.u_names) + len(system.z_names))
muscle = model.find("/forceset/vasti_r")
print("outputs of a muscle:", sorted(muscle.output_specs())[:12], "...")'''),
    ("md", "Moment arms of the right-leg muscles about the knee, over its range."),
    ("code", '''knee = "knee_angle_r"
muscles = ["/forceset/hamstrings_r", "/forceset/bifemsh_r", "/forceset/rect_fem_r", "/forceset/vasti_r",
           "/forceset/gastroc_r"]
angles = np.linspace(-2.0, 0.1, 11 if CI else 41)
base = system.default_state()
states = jax.vmap(lambda a: system.set_coordinates(base, {knee: a}))(jnp.asarray(angles))
arms = jax.jit(jax.vmap(lambda st: sj.moment_arms(system, st, muscles, [knee])[:, 0]))(states)
reference = None
if opensim is not None:
    om = opensim.Model(str(sj.models.path("gait10dof18musc")))
    s = om.initSystem()
    coord = om.getCoordinateSet().get(knee)
    reference = []
    for a in angles:
        coord.setValue(s, float(a))
        reference.append([om.getMuscles().get(m.split("/")[-1]).computeMomentArm(s, coord) for m in muscles])
    reference = np.asarray(reference)
    print(f"largest difference from OpenSim: {np.abs(np.asarray(arms) - reference).max():.2e} m")
    assert np.abs(np.asarray(arms) - reference).max() < 1e-9
plot.plot_moment_arms(angles, arms, [m.split("/")[-1] for m in muscles], reference, xlabel="knee angle (rad)");'''),
    ("md", "A forward simulation with constant excitations, and a states file OpenSim reads."),
    ("code", '''T = 0.1 if CI else 0.5
controls = jnp.full(len(system.actuator_names), 0.2)
state = sj.equilibrate_muscles(system, system.default_state(), controls)
traj = sj.simulate(system, state, T, controls, n_outputs=51)
plot.plot_trajectory(traj, ["hip_flexion_r", "knee_angle_r", "ankle_angle_r"])
traj.write_states("gait_states.sto")
if opensim is not None:
    table = opensim.TimeSeriesTable("gait_states.sto")
    print("OpenSim read", table.getNumRows(), "rows and", table.getNumColumns(), "columns")
    assert table.getNumRows() == 51'''),
    ("md", """The simulation in 3D with the model's bones (`simjax.view`; the meshes ship with simjax),
the muscles coloured by activation (blue 0 to red 1): a self-contained page, shown inline."""),
    ("code", '''scene = sj.view.load_scene(sj.models.path("gait10dof18musc"))
frames = scene.frames(traj, color_by="activation")
sj.view.write_html("gait10dof18musc.html", scene, frames, follow="/bodyset/pelvis")
sj.view.notebook_html(scene, frames, height=480)'''),
]

BATCHED = [
    ("md", """# 04 · Batched simulation

A Monte-Carlo sensitivity study of the bicep curl: many worlds with different excitation
levels and maximum isometric forces, simulated at once with `sj.map_batch`: `jax.vmap` in
chunks (bounded memory, buffers in cache), the chunks solved side by side on every CPU core
(one vmapped call would use one). We check that batched results equal single runs, and
measure throughput against a Python loop of single runs, on the CPU and on a GPU when JAX
has one."""),
    ("code", SETUP),
    ("code", '''sys.path.insert(0, os.path.join(os.getcwd(), "..", "examples"))
import bicep_curl, time, equinox as eqx

print("devices:", jax.devices())
T = 1.0
N = 64 if CI else 2048
system = bicep_curl.build_model().build()
state = bicep_curl.initial_state(system)
rng = np.random.default_rng(0)
levels = jnp.asarray(rng.uniform(0.2, 1.0, N))          # constant excitation of each world
forces = jnp.asarray(rng.uniform(150.0, 250.0, N))      # the biceps' max isometric force

def final_elbow(level, f_max):
    sys_ = eqx.tree_at(lambda s: s.model.find("/forceset/biceps").max_isometric_force, system, f_max)
    traj = sj.simulate(sys_, state, T, jnp.reshape(level, (1,)), solver="rk4", dt=2e-3, n_outputs=2)
    return traj.q[-1, 1]

single = jax.jit(final_elbow)'''),
    ("code", '''jax.block_until_ready(sj.map_batch(final_elbow, levels, forces))     # compiles once
t0 = time.perf_counter()
angles = jax.block_until_ready(sj.map_batch(final_elbow, levels, forces))
t_batch = time.perf_counter() - t0

jax.block_until_ready(single(levels[0], forces[0]))                              # compile
n_loop = 8 if CI else 64
t0 = time.perf_counter()
loop = [float(single(levels[i], forces[i])) for i in range(n_loop)]
t_loop = (time.perf_counter() - t0) / n_loop * N

np.testing.assert_allclose(np.asarray(angles[:n_loop]), loop, rtol=1e-10)
print(f"{N} worlds x {T} s: batched {t_batch:.2f} s; a Python loop of single runs would take {t_loop:.2f} s")
print(f"throughput {N * T / t_batch:.0f} world-seconds per wall second; speed-up over the loop {t_loop / t_batch:.1f}x")'''),
    ("code", '''fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].hist(np.asarray(angles), bins=30)
axes[0].set_xlabel("elbow angle at 1 s (rad)"); axes[0].set_ylabel("worlds")
sc = axes[1].scatter(np.asarray(levels), np.asarray(angles), c=np.asarray(forces), s=6)
axes[1].set_xlabel("excitation"); axes[1].set_ylabel("elbow angle at 1 s (rad)")
fig.colorbar(sc, ax=axes[1], label="max isometric force (N)")
fig.tight_layout()'''),
    ("md", "Sensitivities of the outcome for many worlds at once: gradients through the batch."),
    ("code", '''grads = jax.jit(jax.vmap(jax.grad(final_elbow, argnums=(0, 1))))(levels[:16], forces[:16])
print("d angle / d excitation:", np.round(np.asarray(grads[0][:4]), 4))
print("d angle / d max force: ", np.round(np.asarray(grads[1][:4]), 6))
assert np.all(np.isfinite(np.asarray(grads[0]))) and np.all(np.isfinite(np.asarray(grads[1])))'''),
]

CONTROL = [
    ("md", """# 02 · Muscle-control optimisation

Find the biceps excitation that brings the bicep-curl arm's elbow from 90° to a target
angle at t = 1 s with the least effort, by gradient descent (`optax.adam`) through
`sj.simulate`. The excitation is piecewise linear in time (a few knots, squashed into
the muscle's control range [0.01, 1] by a sigmoid). We check the gradient against finite differences and compare with
a gradient-free random search given the same number of simulations, and solve the
same task by direct collocation, as Moco would. Then the same job on `arm26.osim`: six
muscles over two joints, with wrapping, checked in OpenSim."""),
    ("code", SETUP),
    ("code", '''sys.path.insert(0, os.path.join(os.getcwd(), "..", "examples"))
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
print("initial loss", float(loss(params)))'''),
    ("md", """The gradient agrees with central finite differences. (OpenSim's first-order
activation dynamics switch time constants where excitation equals activation, so the
loss has kinks there; away from them, as here, both derivatives agree.)"""),
    ("code", '''_, g = value_and_grad(params)
h = 1e-6
fd = np.array([(loss(params.at[i].add(h)) - loss(params.at[i].add(-h))) / (2 * h) for i in range(2)])
print("autodiff:", np.asarray(g[:2]), " finite differences:", fd)
np.testing.assert_allclose(np.asarray(g[:2]), fd, rtol=1e-5)'''),
    ("code", '''def descend(value_and_grad, params, optimiser, steps):
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
assert history[-1] < history[0] / 100 and miss_deg < 1.0'''),
    ("md", "A gradient-free baseline: random search with the same number of simulations."),
    ("code", '''rng = np.random.default_rng(0)
candidates = jnp.asarray(rng.normal(-1.0, 2.0, (steps, 5)))
losses = jax.jit(jax.vmap(loss))(candidates)
best = int(jnp.argmin(losses))
print(f"random search, {steps} simulations: best loss {float(losses[best]):.4f}; gradient descent: {history[-1]:.5f}")
assert history[-1] < float(losses[best])'''),
    ("code", '''fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].semilogy(history); axes[0].axhline(float(losses[best]), ls="--", color="gray", label="random search")
axes[0].set_xlabel("iteration"); axes[0].set_ylabel("loss"); axes[0].legend()
axes[1].plot(KNOTS, excitation(params), "o-"); axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("excitation")
plot.plot_outputs(final, ["/jointset/elbow/elbow_coord_0|value"], ax=axes[2])
axes[2].axhline(TARGET, ls="--", color="gray")
fig.tight_layout()'''),
    ("md", """## The same task by direct collocation

`simjax.optimize` poses the task as Moco would: the elbow's angle and speed and the
biceps' activation and fiber length are the states, its excitation is the control, within
[0.01, 1]. The start is the shooting's, the elbow must be at the target at t = 1 s
exactly, and the integral of the squared excitation is minimised (`ControlEffort`), by
Hermite–Simpson collocation and simjax's interior-point solver. As in Moco, the problem
takes no locked coordinate and no controller: the shoulder is welded and the excitation
is the problem's. The compliant tendon makes the fiber dynamics stiff, so the solver
starts from the shooting's simulated trajectory; from the bounds alone it stalls."""),
    ("code", '''from simjax import optimize
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
assert optimize.STATUS[int(collocated.status)] == "solved" and float(collocated.objective) < shooting_effort'''),
    ("md", """The optimal excitation, simulated forward with OpenSim's integrator (`rkm`), brings
the elbow to the target within the mesh's discretization error: about 1.3° with 20
intervals, 0.6° with 50. The collocation spends less effort than the shooting: its
excitation is free at every mesh point, the shooting's is piecewise linear over five
knots."""),
    ("code", '''optimal = sj.ControlTable(collocated.time, collocated.control("/forceset/biceps")[:, None])
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
fig.tight_layout()'''),
    ("md", """## arm26: six muscles, two joints, wrapping

`arm26.osim` is OpenSim's arm: the shoulder and the elbow, moved by the three heads of
the triceps, the two heads of the biceps and the brachialis, whose paths wrap over
cylinders and ellipsoids. From rest, the arm hanging, it is to reach shoulder elevation
−0.2 rad and elbow flexion 0.8 rad at t = 0.5 s with the least effort: 24 parameters,
four knots per muscle.

We integrate with `rkm`, OpenSim's Runge–Kutta–Merson, at accuracy 1e-4 (its final
poses agree with 1e-7 solves to about 1e-4 rad). Where a tendon goes slack its
muscle's fiber state turns stiff, and a fixed RK4 step of 2 ms is unstable there
(`simulate` then reports `sj.NONFINITE_STATE`); the adaptive steps shrink through it.
The gradient is compiled once, in about two minutes: the derivatives of the wrapping
geometry make a large program."""),
    ("code", '''arm = sj.load_osim(sj.models.path("arm26")).build()
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
arm_params = jnp.full((4, 6), -2.0, dtype=jnp.float64)'''),
    ("code", '''arm_steps = 20 if CI else 80
arm_params, arm_history = descend(arm_value_and_grad, arm_params, optax.adam(0.1, b1=0.5), arm_steps)
arm_final = arm_run(arm_params, throw=False)   # the same compiled solve as the random search's
arm_miss = np.degrees(np.asarray(arm_final.q[-1] - ARM_TARGET))
print(f"loss {arm_history[0]:.3f} -> {arm_history[-1]:.5f}; misses (deg): shoulder {arm_miss[0]:.3f}, "
      f"elbow {arm_miss[1]:.3f}")
assert int(arm_final.result) == 0 and arm_history[-1] < arm_history[0] / 100 and np.all(np.abs(arm_miss) < 1.0)'''),
    ("md", """OpenSim, given the optimised excitations as a `PrescribedController` of piecewise
linear functions, moves its arm26 to the same pose."""),
    ("code", '''def opensim_final_pose(path, times, excitations, t_final, accuracy=1e-6):
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
    assert np.all(np.abs(opensim_miss) < 1.0)'''),
    ("md", """Random search with the same number of simulations over the 24 parameters (a solve
that fails, say by running out of steps, counts as infinitely bad):"""),
    ("code", '''def arm_forward_loss(params):
    traj = arm_run(params, throw=False)
    return float(arm_objective(params, traj)) if int(traj.result) == 0 else np.inf

arm_candidates = jnp.asarray(rng.normal(-1.5, 1.5, (arm_steps, 4, 6)))
arm_losses = np.array([arm_forward_loss(c) for c in arm_candidates])
arm_best = int(np.argmin(arm_losses))
print(f"random search: best loss {arm_losses[arm_best]:.3f}; gradient descent: {arm_history[-1]:.5f}")
assert arm_history[-1] < arm_losses[arm_best]'''),
    ("code", '''fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].semilogy(arm_history); axes[0].axhline(arm_losses[arm_best], ls="--", color="gray", label="random search")
axes[0].set_xlabel("iteration"); axes[0].set_ylabel("loss"); axes[0].legend()
for j, name in enumerate(arm.actuator_names):
    axes[1].plot(ARM_KNOTS, excitation(arm_params)[:, j], "o-", label=name)
axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("excitation"); axes[1].legend(fontsize=7)
for i, name in enumerate(["shoulder elevation", "elbow flexion"]):
    line, = axes[2].plot(arm_final.t, arm_final.q[:, i], label=name)
    axes[2].plot(ARM_T, ARM_TARGET[i], "x", color=line.get_color(), ms=10)
axes[2].set_xlabel("time (s)"); axes[2].set_ylabel("angle (rad)"); axes[2].legend()
fig.tight_layout()'''),
]

FITTING = [
    ("md", """# 03 · Parameter fitting

A "measured" bicep curl: the elbow angle (as from motion capture, noise 0.2°) and the
biceps tendon force (as from a force transducer, noise 0.5 N) over 1.5 s, simulated with
known parameters and perturbed by noise. From a guess 5–20% off we recover the biceps'
max isometric force, optimal fiber length and tendon slack length and the forearm's
mass by Gauss–Newton (Levenberg–Marquardt) least squares, with the Jacobian of the
residuals by forward-mode autodiff through `sj.simulate`, and report each parameter's
uncertainty from the Gauss–Newton Hessian. (The motion alone could not separate the
muscle's strength from the forearm's mass — scaling both leaves the motion unchanged —
which is why the force is measured too.)"""),
    ("code", SETUP),
    ("code", '''sys.path.insert(0, os.path.join(os.getcwd(), "..", "examples"))
import bicep_curl

base = bicep_curl.build_model()
MUSCLE, FOREARM = "/forceset/biceps", "/bodyset/radius"
NAMES = ("max_isometric_force (N)", "optimal_fiber_length (m)", "tendon_slack_length (m)", "forearm mass (kg)")
TRUE = np.array([200.0, 0.6, 0.55, 1.0])
T = 1.5
ts = jnp.linspace(0.0, T, 76)

def measure(p):
    """Elbow angle (rad) and tendon force (N) at `ts` for parameters `p`."""
    model = base.set(MUSCLE, max_isometric_force=p[0], optimal_fiber_length=p[1], tendon_slack_length=p[2])
    system = model.set(FOREARM, mass=p[3]).build()      # a numeric change: same compiled topology
    state = bicep_curl.initial_state(system)            # equilibrated for these parameters
    traj = sj.simulate(system, state, T, solver="rk4", dt=0.002, ts=ts, adjoint="direct")
    return traj.q[:, 1], traj.output(MUSCLE + "|tendon_force")

angle, force = jax.jit(measure)(jnp.asarray(TRUE))
rng = np.random.default_rng(1)
SIGMA_ANGLE, SIGMA_FORCE = np.radians(0.2), 0.5
angle_data = angle + SIGMA_ANGLE * rng.normal(size=angle.shape)
force_data = force + SIGMA_FORCE * rng.normal(size=force.shape)
print(f"elbow {float(angle[0]):.3f} -> {float(angle[-1]):.3f} rad; "
      f"tendon force {float(force.min()):.1f} to {float(force.max()):.1f} N")'''),
    ("md", """Residuals weighted by the noise, parameters on a log scale around the guess (so
all four are of order one and stay positive); Levenberg–Marquardt steps from `J^T J`."""),
    ("code", '''GUESS = TRUE * np.array([0.85, 1.1, 0.95, 1.2])

def residuals(x):
    a, f = measure(GUESS * jnp.exp(x))
    return jnp.concatenate([(a - angle_data) / SIGMA_ANGLE, (f - force_data) / SIGMA_FORCE])

# (the XLA options simjax compiles its own programs with: faster to compile and to run on a CPU)
residuals_and_jacobian = jax.jit(lambda x: (residuals(x), jax.jacfwd(residuals)(x)),
                                 compiler_options=sj.compiler_options())
x, damping = jnp.zeros(4), 1e-3
r, J = residuals_and_jacobian(x)
history = [float(r @ r)]
for iteration in range(40):
    A, g = J.T @ J, J.T @ r
    step = -jnp.linalg.solve(A + damping * jnp.diag(jnp.diag(A)), g)
    r_new, J_new = residuals_and_jacobian(x + step)
    if float(r_new @ r_new) < history[-1]:
        x, r, J, damping = x + step, r_new, J_new, damping / 10
        converged = history[-1] - float(r @ r) < 1e-6 * history[-1]
        history.append(float(r @ r))
        if converged:
            break
    else:
        damping *= 10
print(f"{iteration + 1} iterations; chi^2 {history[0]:.4g} -> {history[-1]:.4g} for {len(r)} residuals")'''),
    ("md", """Uncertainty: the covariance of the log-parameters is `s^2 (J^T J)^-1`, with `s^2` the
residual variance per degree of freedom; standard deviations of the parameters follow."""),
    ("code", '''fit = GUESS * np.exp(np.asarray(x))
s2 = history[-1] / (len(r) - len(x))
sd = fit * np.sqrt(np.diag(np.linalg.inv(np.asarray(J.T @ J)) * s2))
print(f"{'parameter':26s} {'true':>9s} {'guess':>9s} {'fitted':>9s} {'+-1 sd':>8s} {'error':>8s}")
for name, t, g0, p, e in zip(NAMES, TRUE, GUESS, fit, sd):
    print(f"{name:26s} {t:9.4f} {g0:9.4f} {p:9.4f} {e:8.4f} {100 * (p / t - 1):+7.3f}%")
assert np.all(np.abs(fit / TRUE - 1) < 0.02), "each parameter within 2% of the truth"
assert np.all(np.abs(fit - TRUE) < 4 * sd), "the truth within 4 standard deviations"'''),
    ("code", '''angle_fit, force_fit = jax.jit(measure)(jnp.asarray(fit))
angle_guess, force_guess = jax.jit(measure)(jnp.asarray(GUESS))
fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].plot(ts, angle_data, ".", ms=3, label="measured"); axes[0].plot(ts, angle_guess, "--", label="guess")
axes[0].plot(ts, angle_fit, label="fitted"); axes[0].set_xlabel("time (s)"); axes[0].set_ylabel("elbow (rad)")
axes[0].legend()
axes[1].plot(ts, force_data, ".", ms=3); axes[1].plot(ts, force_guess, "--"); axes[1].plot(ts, force_fit)
axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("tendon force (N)")
axes[2].semilogy(history, "o-"); axes[2].set_xlabel("accepted step"); axes[2].set_ylabel("chi^2")
fig.tight_layout()'''),
]

GAIT = [
    ("md", """# 06 · From markers to joint loads: OpenSim's gait pipeline

OpenSim's walking example for `gait10dof18musc` (shipped with simjax: markers of a walking
trial, force-plate data and OpenSim's setup files) run by simjax from the setup files
themselves, step by step: inverse kinematics (markers → joint angles), inverse dynamics
(→ joint moments), static optimization (→ muscle activations and forces) and the knee's
joint reaction load. Each step runs every frame at once, in one compiled program. When
OpenSim 4.6 is installed it runs the same setup files on a second copy of the pipeline,
and its results are plotted beside simjax's. Last, a derivative OpenSim cannot give: how
the marker fit of the whole trial changes with the size of each segment."""),
    ("code", SETUP),
    ("code", '''import warnings
import xml.etree.ElementTree as ET
import simjax.tools as tools
from simjax.io.tables import read_table

warnings.filterwarnings("ignore", message=".*mesh file")   # the bones' display meshes are not shipped
PIPELINE = "Gait10dof18musc"
ours = sj.models.copy_pipeline(PIPELINE, "simjax_run", overwrite=True)       # simjax writes here
theirs = sj.models.copy_pipeline(PIPELINE, "opensim_run", overwrite=True)    # OpenSim writes here
SETUPS = {"IK": "IK/walk_Setup_IK.xml", "ID": "ID/walk_Setup_ID.xml", "SO": "SO/walk_Setup_SO.xml",
          "JR": "SO/walk_Setup_JR.xml"}
T0, T1 = (0.6, 0.9) if CI else (0.5, 2.5)    # s: a part of the stride, or all of it

def set_time_window(setup, t0, t1):
    """Rewrite a setup file's time window (IK/ID's time_range, the AnalyzeTool's and its analyses' times)."""
    tree = ET.parse(setup)
    for el in tree.iter():
        if el.tag == "time_range":
            el.text = f"{t0} {t1}"
        elif el.tag in ("initial_time", "start_time"):
            el.text = str(t0)
        elif el.tag in ("final_time", "end_time"):
            el.text = str(t1)
    tree.write(setup, encoding="UTF-8", xml_declaration=True)

for folder in (ours, theirs):
    for step, setup in SETUPS.items():
        margin = 0.1 if step == "IK" else 0.0    # the motion reaches a little beyond the analyses
        set_time_window(os.path.join(folder, setup), T0 - margin, T1 + margin)

def run_opensim(step):
    """OpenSim's tool on the same setup file, from the setup's folder (as OpenSim's GUI runs it)."""
    if opensim is None:
        return
    opensim.Logger.setLevelString("error")
    setup = os.path.join(theirs, SETUPS[step])
    tool = {"IK": opensim.InverseKinematicsTool, "ID": opensim.InverseDynamicsTool}.get(step, opensim.AnalyzeTool)
    here = os.getcwd()
    os.chdir(os.path.dirname(setup))
    try:
        tool(os.path.basename(setup)).run()
    finally:
        os.chdir(here)

def results(relative_path):
    """The same output file from both runs: (simjax's table, OpenSim's table or None)."""
    mine = read_table(os.path.join(ours, relative_path))
    ref = read_table(os.path.join(theirs, relative_path)) if opensim is not None else None
    return mine, ref

def compare(ax, mine, ref, columns, scale=1.0, ylabel=""):
    """Plot columns of both tables (OpenSim dashed); return the largest difference."""
    worst = 0.0
    for c in columns:
        line, = ax.plot(mine.times, scale * np.asarray(mine.column(c)), label=c)
        if ref is not None:
            ax.plot(ref.times, scale * np.asarray(ref.column(c)), "--", color=line.get_color())
            worst = max(worst, float(np.abs(np.asarray(mine.column(c)) - np.asarray(ref.column(c))).max()))
    ax.set_xlabel("time (s)"); ax.set_ylabel(ylabel); ax.legend(fontsize=7)
    return worst

def step(name, output, columns, ylabel):
    """Run one step's setup in both engines and plot columns of its output file:
    (simjax's table, OpenSim's table or None, their largest difference)."""
    tools.run(os.path.join(ours, SETUPS[name]))
    run_opensim(name)
    mine, ref = results(output)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    worst = compare(ax, mine, ref, columns, ylabel=ylabel)
    if ref is not None:
        print(f"largest difference from OpenSim: {worst:.1e} ({ylabel})")
    return mine, ref, worst'''),
    ("md", """## Inverse kinematics

`IK/walk_Setup_IK.xml`: 39 weighted markers; the joint angles that best fit them, every
frame solved together by a bounded Levenberg–Marquardt method (OpenSim solves frame by
frame, each from the last, and stops at the setup's `accuracy`, 1e-5: the two agree to a
few hundredths of a degree, and to 1e-6° when OpenSim is asked for 1e-9). The output is
OpenSim's `.mot`, in degrees."""),
    ("code", '''tools.run(os.path.join(ours, SETUPS["IK"]))
run_opensim("IK")
ik, ik_ref = results("IK/subject01_walk_IK.mot")
errors, errors_ref = results("IK/_ik_marker_errors.sto")
fig, axes = plt.subplots(1, 2, figsize=(12, 3.5))
worst = compare(axes[0], ik, ik_ref, ["hip_flexion_r", "knee_angle_r", "ankle_angle_r"], ylabel="angle (deg)")
compare(axes[1], errors, errors_ref, ["marker_error_RMS"], scale=1e3, ylabel="RMS marker error (mm)")
fig.tight_layout()
if ik_ref is not None:
    print(f"largest difference from OpenSim's angles: {worst:.1e} deg")
    assert worst < 0.1'''),
    ("md", """The inverse-kinematics motion in 3D on the subject's scaled model, with the trial's
markers (blue) beside the model's (pink), the camera following the pelvis: a self-contained
page (`simjax.view`), shown inline."""),
    ("code", '''scene = sj.view.load_scene(os.path.join(ours, "subject01.osim"))
frames = scene.frames(os.path.join(ours, "IK", "subject01_walk_IK.mot"),
                      markers=os.path.join(ours, "ExperimentalData", "subject01_walk.trc"))
sj.view.write_html("gait_ik.html", scene, frames, follow="/bodyset/pelvis")
sj.view.notebook_html(scene, frames, height=480)'''),
    ("md", """## Inverse dynamics

`ID/walk_Setup_ID.xml`: the angles low-pass filtered at 6 Hz and fitted with OpenSim's
splines, the ground reactions applied to the feet, the muscles left out: the net joint
moments. Each engine reads its own IK motion, so their moments differ by what their
angles did (simjax's inverse dynamics alone agrees with OpenSim's to 1e-6 relative)."""),
    ("code", '''moments, moments_ref, worst = step("ID", "ID/Results/subject01_walk_ID.sto",
                                  ["hip_flexion_r_moment", "knee_angle_r_moment", "ankle_angle_r_moment"],
                                  "moment (N m)")
assert moments_ref is None or worst < 0.5'''),
    ("md", """## Static optimization

`SO/walk_Setup_SO.xml` (an AnalyzeTool): at each frame, the activations with the least sum
of squares whose muscle forces (force–length–velocity at the frame, rigid tendons), with
the reserve and residual actuators, reproduce the motion with its ground reactions. simjax
solves all frames in one batched Newton method on the problem's dual, to machine precision;
OpenSim's IPOPT stops at its convergence criterion (1e-4 here), so the two agree to about that."""),
    ("code", '''activations, activations_ref, worst = step(
    "SO", "SO/Results/subject01_walk_StaticOptimization_activation.sto",
    ["glut_max_r", "vasti_r", "soleus_r", "tib_ant_r"], "activation")
assert activations_ref is None or worst < 2e-2'''),
    ("md", """## Joint reactions

`SO/walk_Setup_JR.xml` (an AnalyzeTool with `JointReaction`): the load the hip, knee and
ankle joints carry, given the muscle forces static optimization found: here the force the
femur exerts on the tibia at the knee, in the tibia's frame. (Each engine's from its own
muscle forces: they differ by what the activations did.)"""),
    ("code", '''loads, loads_ref, worst = step("JR", "SO/Results/subject01_walk_JointReaction_ReactionLoads.sto",
                               [f"knee_r_on_tibia_r_in_tibia_r_f{a}" for a in "xyz"], "force (N)")
peak = float(np.abs(loads.values).max())
print(f"peak knee load {peak:.0f} N")
assert loads_ref is None or worst < 0.02 * peak'''),
]
GAIT += [
    ("md", """## A derivative OpenSim cannot give

How does the marker fit of the whole trial change with the size of each segment? simjax's
inverse kinematics is a differentiable function of the model (`solve_inverse_kinematics`:
the optimum's derivatives by the implicit function theorem, not by differentiating the
iterations), and `scaled_system` is OpenSim's scaling as a function of the scale factors.
So one reverse pass gives the gradient of the summed squared marker error, at the optimal
joint angles of every frame, with respect to every segment's scale factor; a finite
difference checks one of them."""),
    ("code", '''from simjax.tools import marker_positions, scaled_system, solve_inverse_kinematics

model = sj.load_osim(os.path.join(ours, "subject01.osim"))
trial = read_table(os.path.join(ours, "ExperimentalData", "subject01_walk.trc"))
trial = trial.slice_time(T0, T1)
tasks = {t.get("name"): float(t.findtext("weight"))                  # the IK setup's marker tasks
         for t in ET.parse(os.path.join(ours, SETUPS["IK"])).iter("IKMarkerTask")
         if t.findtext("apply").strip() == "true"}
names = [m for m in trial.labels if m in tasks and model.has(f"/markerset/{m}")]
weights = jnp.asarray([tasks[m] for m in names])
positions = jnp.asarray(np.stack([trial.column(m) for m in names], axis=1)) / 1000.0   # mm -> m
if CI:
    positions = positions[::3]
segments = ["pelvis", "femur_r", "tibia_r", "calcn_r", "femur_l", "tibia_l", "calcn_l", "torso"]
unscaled = scaled_system(model.build(), {s: 1.0 for s in segments}, muscle_lengths=False)

def fit_error(factors):
    """The IK's weighted squared marker error (m^2), summed over the frames, with the
    segments scaled by ``factors``."""
    system = scaled_system(unscaled, dict(zip(segments, factors)), muscle_lengths=False)
    q = solve_inverse_kinematics(system, names, positions, weights)
    miss = marker_positions(system, names, q) - positions
    return jnp.nansum(weights[:, None] * miss ** 2)

ones = jnp.ones(len(segments))
error, gradient = jax.jit(jax.value_and_grad(fit_error))(ones)
h = 1e-5
step = jnp.zeros(len(segments)).at[2].set(h)
fd = (jax.jit(fit_error)(ones + step) - jax.jit(fit_error)(ones - step)) / (2 * h)
print(f"{len(positions)} frames, {len(names)} markers: weighted squared error {float(error):.4e} m^2")
print(f"d error / d tibia_r scale: {float(gradient[2]):.6e} (implicit), {float(fd):.6e} (finite difference)")
assert abs(float(gradient[2]) - float(fd)) < 1e-4 * abs(float(fd)) + 1e-12
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.bar(segments, np.asarray(gradient)); ax.set_ylabel("d error / d scale factor (m^2)")
ax.set_title("scaling a segment up (>0: the fit gets worse)"); fig.tight_layout()'''),
]

TRAJECTORY = [
    ("md", """# 07 · Trajectory optimisation: Moco's problems by direct collocation

OpenSim Moco poses optimal control problems over a model (move a mass in minimum time,
swing a pendulum up with least effort, find the muscle activity behind a measured walk)
and solves them by direct collocation with CasADi and IPOPT. `simjax.optimize` poses the
same problems, transcribes them the same way (trapezoidal or Hermite–Simpson) and solves
them with a JAX-native interior-point method whose linear algebra follows the mesh
(block tridiagonal, linear in the number of intervals). Being JAX, it also solves a whole
batch of problems in one call and differentiates the optimum with respect to the model.
When OpenSim 4.6 is installed, Moco solves each problem beside simjax."""),
    ("code", SETUP),
    ("code", '''import tempfile
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
    return solver'''),
    ("md", """## A sliding mass in minimum time

A 2 kg mass slides 1 m, from rest to rest, pushed by a force of at most 50 N. The
fastest motion is bang-bang: full force forward, then full force back, reaching the end
in 2 √(1 m / 25 m/s²) = 0.4 s. The model is built in simjax and written as an `.osim`
file, which Moco reads."""),
    ("code", '''model = sj.Model("sliding_mass")
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
fig.tight_layout()'''),
    ("md", """## A pendulum swing-up with least effort

A 1 kg point mass on a 1 m link swings from hanging at rest to upright at rest in
exactly 1 s, minimising the integral of the squared joint torque (Moco's
`MocoControlGoal`), by Hermite–Simpson collocation."""),
    ("code", '''model = sj.Model("pendulum")
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
fig.tight_layout()'''),
    ("md", """## MocoInverse of walking: the muscle activity behind a measured motion

The walking trial of `gait10dof18musc` shipped with simjax (OpenSim's inverse kinematics of
it, low-pass filtered at 6 Hz) is prescribed, and the 18 muscles' excitations
and the joints' reserve torques that produce it, with the measured ground reaction
forces, are found with least effort. The model is edited as Moco's `MocoInverse` example
edits it: rigid tendons, DeGroote–Fregly muscles without passive fiber force and with a
1.5× wider active force–length curve, and 1 N·m reserves."""),
    ("code", '''import functools
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
axes[0, 0].legend(); fig.supxlabel("time (s)"); fig.supylabel("activation"); fig.tight_layout()'''),
    ("md", """## A batch of problems, and the derivative of an optimum

One compiled solver, `vmap`-ed: the sliding mass for a range of masses at once (on a GPU,
side by side), each to its own minimum time, t_f = 2 √(m / 50) s in the continuous
problem. Each problem ends with its own status. Then a derivative that Moco cannot give:
how the least effort of the pendulum's swing-up changes with its mass, by implicit
differentiation of the optimality conditions. For a point mass on a massless link the
torque is m (L² q̈ + g L sin q): the best motion does not depend on the mass, and the
least effort is m² times that of 1 kg, so its derivative at 1 kg is twice the effort."""),
    ("code", '''import equinox as eqx

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
ax.set_xlabel("mass (kg)"); ax.set_ylabel("minimum time (s)"); ax.legend(); fig.tight_layout()'''),
]

NOTEBOOKS = {"01_bicep_curl.ipynb": BICEP_CURL, "02_muscle_control_optimization.ipynb": CONTROL,
             "03_parameter_fitting.ipynb": FITTING, "04_batched_simulation.ipynb": BATCHED,
             "05_opensim_models.ipynb": OPENSIM_MODELS, "06_gait_pipeline.ipynb": GAIT,
             "07_trajectory_optimization.ipynb": TRAJECTORY}


def write(name: str, cells) -> None:
    """Write one notebook from ``(kind, source)`` cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
                for kind, src in cells]
    for k, cell in enumerate(nb.cells):  # ids from the position, so rewriting changes only edited cells
        cell.id = f"cell-{k:02d}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, os.path.join(HERE, name))


# notebooks whose plain-script twin in examples/ is written from the same cells (01's
# twin is examples/bicep_curl.py itself)
TWINS = ("02_muscle_control_optimization.ipynb", "03_parameter_fitting.ipynb", "04_batched_simulation.ipynb",
         "05_opensim_models.ipynb", "06_gait_pipeline.ipynb", "07_trajectory_optimization.ipynb")


def script(name: str, cells) -> str:
    """The plain-script twin of a notebook: markdown as comments, code as is."""
    title = cells[0][1].splitlines()[0].lstrip("# ")
    out = [f'"""{title} (the plain-script twin of notebooks/{name}).\n\n'
           f'Written by notebooks/make_notebooks.py from the notebook\'s cells; run from the repository\n'
           f'root: ``python examples/{name[:-6]}.py`` (``SIMJAX_CI=1`` for the small sizes).\n"""']
    for kind, src in cells:
        if kind == "md":
            out.append("\n".join(("# " + line).rstrip() for line in src.splitlines()))
        else:
            out.append(src)
    out.append("plt.show()")
    return "\n\n".join(out) + "\n"


def twin_path(name: str) -> str:
    return os.path.join(HERE, "..", "examples", name[:-6] + ".py")


if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        write(name, cells)
        print("wrote", name)
    for name in TWINS:
        with open(twin_path(name), "w", encoding="utf-8") as f:
            f.write(script(name, NOTEBOOKS[name]))
        print("wrote", os.path.relpath(twin_path(name), HERE))
