"""06 · From markers to joint loads: OpenSim's gait pipeline (the plain-script twin of notebooks/06_gait_pipeline.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/06_gait_pipeline.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 06 · From markers to joint loads: OpenSim's gait pipeline
#
# OpenSim's walking example for `gait10dof18musc` (shipped with simjax: markers of a walking
# trial, force-plate data and OpenSim's setup files) run by simjax from the setup files
# themselves, step by step: inverse kinematics (markers → joint angles), inverse dynamics
# (→ joint moments), static optimization (→ muscle activations and forces) and the knee's
# joint reaction load. Each step runs every frame at once, in one compiled program. When
# OpenSim 4.6 is installed it runs the same setup files on a second copy of the pipeline,
# and its results are plotted beside simjax's. Last, a derivative OpenSim cannot give: how
# the marker fit of the whole trial changes with the size of each segment.

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

import warnings
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
    return mine, ref, worst

# ## Inverse kinematics
#
# `IK/walk_Setup_IK.xml`: 39 weighted markers; the joint angles that best fit them, every
# frame solved together by a bounded Levenberg–Marquardt method (OpenSim solves frame by
# frame, each from the last, and stops at the setup's `accuracy`, 1e-5: the two agree to a
# few hundredths of a degree, and to 1e-6° when OpenSim is asked for 1e-9). The output is
# OpenSim's `.mot`, in degrees.

tools.run(os.path.join(ours, SETUPS["IK"]))
run_opensim("IK")
ik, ik_ref = results("IK/subject01_walk_IK.mot")
errors, errors_ref = results("IK/_ik_marker_errors.sto")
fig, axes = plt.subplots(1, 2, figsize=(12, 3.5))
worst = compare(axes[0], ik, ik_ref, ["hip_flexion_r", "knee_angle_r", "ankle_angle_r"], ylabel="angle (deg)")
compare(axes[1], errors, errors_ref, ["marker_error_RMS"], scale=1e3, ylabel="RMS marker error (mm)")
fig.tight_layout()
if ik_ref is not None:
    print(f"largest difference from OpenSim's angles: {worst:.1e} deg")
    assert worst < 0.1

# The inverse-kinematics motion in 3D on the subject's scaled model, with the trial's
# markers (blue) beside the model's (pink), the camera following the pelvis: a self-contained
# page (`simjax.view`), shown inline.

scene = sj.view.load_scene(os.path.join(ours, "subject01.osim"))
frames = scene.frames(os.path.join(ours, "IK", "subject01_walk_IK.mot"),
                      markers=os.path.join(ours, "ExperimentalData", "subject01_walk.trc"))
sj.view.write_html("gait_ik.html", scene, frames, follow="/bodyset/pelvis")
sj.view.notebook_html(scene, frames, height=480)

# ## Inverse dynamics
#
# `ID/walk_Setup_ID.xml`: the angles low-pass filtered at 6 Hz and fitted with OpenSim's
# splines, the ground reactions applied to the feet, the muscles left out: the net joint
# moments. Each engine reads its own IK motion, so their moments differ by what their
# angles did (simjax's inverse dynamics alone agrees with OpenSim's to 1e-6 relative).

moments, moments_ref, worst = step("ID", "ID/Results/subject01_walk_ID.sto",
                                  ["hip_flexion_r_moment", "knee_angle_r_moment", "ankle_angle_r_moment"],
                                  "moment (N m)")
assert moments_ref is None or worst < 0.5

# ## Static optimization
#
# `SO/walk_Setup_SO.xml` (an AnalyzeTool): at each frame, the activations with the least sum
# of squares whose muscle forces (force–length–velocity at the frame, rigid tendons), with
# the reserve and residual actuators, reproduce the motion with its ground reactions. simjax
# solves all frames in one batched Newton method on the problem's dual, to machine precision;
# OpenSim's IPOPT stops at its convergence criterion (1e-4 here), so the two agree to about that.

activations, activations_ref, worst = step(
    "SO", "SO/Results/subject01_walk_StaticOptimization_activation.sto",
    ["glut_max_r", "vasti_r", "soleus_r", "tib_ant_r"], "activation")
assert activations_ref is None or worst < 2e-2

# ## Joint reactions
#
# `SO/walk_Setup_JR.xml` (an AnalyzeTool with `JointReaction`): the load the hip, knee and
# ankle joints carry, given the muscle forces static optimization found: here the force the
# femur exerts on the tibia at the knee, in the tibia's frame. (Each engine's from its own
# muscle forces: they differ by what the activations did.)

loads, loads_ref, worst = step("JR", "SO/Results/subject01_walk_JointReaction_ReactionLoads.sto",
                               [f"knee_r_on_tibia_r_in_tibia_r_f{a}" for a in "xyz"], "force (N)")
peak = float(np.abs(loads.values).max())
print(f"peak knee load {peak:.0f} N")
assert loads_ref is None or worst < 0.02 * peak

# ## A derivative OpenSim cannot give
#
# How does the marker fit of the whole trial change with the size of each segment? simjax's
# inverse kinematics is a differentiable function of the model (`solve_inverse_kinematics`:
# the optimum's derivatives by the implicit function theorem, not by differentiating the
# iterations), and `scaled_system` is OpenSim's scaling as a function of the scale factors.
# So one reverse pass gives the gradient of the summed squared marker error, at the optimal
# joint angles of every frame, with respect to every segment's scale factor; a finite
# difference checks one of them.

from simjax.tools import marker_positions, scaled_system, solve_inverse_kinematics

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
ax.set_title("scaling a segment up (>0: the fit gets worse)"); fig.tight_layout()

plt.show()
