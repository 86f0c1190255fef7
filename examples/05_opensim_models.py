"""05 · OpenSim models (the plain-script twin of notebooks/05_opensim_models.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/05_opensim_models.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 05 · OpenSim models
#
# Load `gait10dof18musc.osim` (10 degrees of freedom, 18 Millard muscles), inspect its
# components and outputs, compute moment-arm curves over a knee sweep next to OpenSim's,
# run a short forward simulation and write an OpenSim states file.

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

model = sj.load_osim(sj.models.path("gait10dof18musc"))
system = model.build()
print(model.name)
print("bodies:", [p for p, c in model.walk() if isinstance(c, sj.Body)])
print("coordinates:", system.coordinate_names)
print("muscles:", system.actuator_names)
print("state variables:", len(system.q_names) + len(system.u_names) + len(system.z_names))
muscle = model.find("/forceset/vasti_r")
print("outputs of a muscle:", sorted(muscle.output_specs())[:12], "...")

# Moment arms of the right-leg muscles about the knee, over its range.

knee = "knee_angle_r"
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
plot.plot_moment_arms(angles, arms, [m.split("/")[-1] for m in muscles], reference, xlabel="knee angle (rad)");

# A forward simulation with constant excitations, and a states file OpenSim reads.

T = 0.1 if CI else 0.5
controls = jnp.full(len(system.actuator_names), 0.2)
state = sj.equilibrate_muscles(system, system.default_state(), controls)
traj = sj.simulate(system, state, T, controls, n_outputs=51)
plot.plot_trajectory(traj, ["hip_flexion_r", "knee_angle_r", "ankle_angle_r"])
traj.write_states("gait_states.sto")
if opensim is not None:
    table = opensim.TimeSeriesTable("gait_states.sto")
    print("OpenSim read", table.getNumRows(), "rows and", table.getNumColumns(), "columns")
    assert table.getNumRows() == 51

# The simulation in 3D with the model's bones (`simjax.view`; the meshes ship with simjax),
# the muscles coloured by activation (blue 0 to red 1): a self-contained page, shown inline.

scene = sj.view.load_scene(sj.models.path("gait10dof18musc"))
frames = scene.frames(traj, color_by="activation")
sj.view.write_html("gait10dof18musc.html", scene, frames, follow="/bodyset/pelvis")
sj.view.notebook_html(scene, frames, height=480)

plt.show()
