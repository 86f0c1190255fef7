"""03 · Parameter fitting (the plain-script twin of notebooks/03_parameter_fitting.ipynb).

Written by notebooks/make_notebooks.py from the notebook's cells; run from the repository
root: ``python examples/03_parameter_fitting.py`` (``SIMJAX_CI=1`` for the small sizes).
"""

# # 03 · Parameter fitting
#
# A "measured" bicep curl: the elbow angle (as from motion capture, noise 0.2°) and the
# biceps tendon force (as from a force transducer, noise 0.5 N) over 1.5 s, simulated with
# known parameters and perturbed by noise. From a guess 5–20% off we recover the biceps'
# max isometric force, optimal fiber length and tendon slack length and the forearm's
# mass by Gauss–Newton (Levenberg–Marquardt) least squares, with the Jacobian of the
# residuals by forward-mode autodiff through `sj.simulate`, and report each parameter's
# uncertainty from the Gauss–Newton Hessian. (The motion alone could not separate the
# muscle's strength from the forearm's mass — scaling both leaves the motion unchanged —
# which is why the force is measured too.)

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
      f"tendon force {float(force.min()):.1f} to {float(force.max()):.1f} N")

# Residuals weighted by the noise, parameters on a log scale around the guess (so
# all four are of order one and stay positive); Levenberg–Marquardt steps from `J^T J`.

GUESS = TRUE * np.array([0.85, 1.1, 0.95, 1.2])

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
print(f"{iteration + 1} iterations; chi^2 {history[0]:.4g} -> {history[-1]:.4g} for {len(r)} residuals")

# Uncertainty: the covariance of the log-parameters is `s^2 (J^T J)^-1`, with `s^2` the
# residual variance per degree of freedom; standard deviations of the parameters follow.

fit = GUESS * np.exp(np.asarray(x))
s2 = history[-1] / (len(r) - len(x))
sd = fit * np.sqrt(np.diag(np.linalg.inv(np.asarray(J.T @ J)) * s2))
print(f"{'parameter':26s} {'true':>9s} {'guess':>9s} {'fitted':>9s} {'+-1 sd':>8s} {'error':>8s}")
for name, t, g0, p, e in zip(NAMES, TRUE, GUESS, fit, sd):
    print(f"{name:26s} {t:9.4f} {g0:9.4f} {p:9.4f} {e:8.4f} {100 * (p / t - 1):+7.3f}%")
assert np.all(np.abs(fit / TRUE - 1) < 0.02), "each parameter within 2% of the truth"
assert np.all(np.abs(fit - TRUE) < 4 * sd), "the truth within 4 standard deviations"

angle_fit, force_fit = jax.jit(measure)(jnp.asarray(fit))
angle_guess, force_guess = jax.jit(measure)(jnp.asarray(GUESS))
fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].plot(ts, angle_data, ".", ms=3, label="measured"); axes[0].plot(ts, angle_guess, "--", label="guess")
axes[0].plot(ts, angle_fit, label="fitted"); axes[0].set_xlabel("time (s)"); axes[0].set_ylabel("elbow (rad)")
axes[0].legend()
axes[1].plot(ts, force_data, ".", ms=3); axes[1].plot(ts, force_guess, "--"); axes[1].plot(ts, force_fit)
axes[1].set_xlabel("time (s)"); axes[1].set_ylabel("tendon force (N)")
axes[2].semilogy(history, "o-"); axes[2].set_xlabel("accepted step"); axes[2].set_ylabel("chi^2")
fig.tight_layout()

plt.show()
