"""Forward simulations against OpenSim 4.6 on the same files (issue 5 acceptance)."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj

opensim = pytest.importorskip("opensim")


def opensim_trajectory(path, values, times, accuracy):
    model = opensim.Model(path)
    s = model.initSystem()
    for name, v in values.items():
        model.getCoordinateSet().get(name).setValue(s, v, False)
    manager = opensim.Manager(model)
    manager.setIntegratorAccuracy(accuracy)
    s.setTime(0.0)
    manager.initialize(s)
    out = []
    for t in times[1:]:
        s = manager.integrate(float(t))
        out.append([s.getQ().get(i) for i in range(s.getNQ())])
    return np.asarray(out)


def test_double_pendulum_matches_opensim():
    path = sj.models.path("double_pendulum")
    system = sj.load_osim(path).build()
    values = {"q1": 0.9, "q2": -0.4}
    state = system.set_coordinates(system.default_state(), values)
    times = np.linspace(0.0, 2.0, 21)
    traj = sj.simulate(system, state, 2.0, ts=jnp.asarray(times), rtol=1e-11, atol=1e-11, solver="dopri8")
    ref = opensim_trajectory(path, values, times, 1e-10)
    np.testing.assert_allclose(np.asarray(traj.q)[1:], ref, atol=1e-6)


def test_runge_kutta_merson_takes_opensims_steps():
    """At OpenSim's own accuracy, ``rkm`` controls its error and step sizes as Simbody
    does, with output times as step boundaries: it takes the same steps as OpenSim's
    Manager, so the two trajectories agree to rounding, not just to the tolerance."""
    path = sj.models.path("double_pendulum")
    system = sj.load_osim(path).build()
    values = {"q1": 0.9, "q2": -0.4}
    state = system.set_coordinates(system.default_state(), values)
    times = np.linspace(0.0, 3.0, 7)
    traj = sj.simulate(system, state, 3.0, ts=jnp.asarray(times), accuracy=1e-5)
    ref = opensim_trajectory(path, values, times, 1e-5)
    np.testing.assert_allclose(np.asarray(traj.q)[1:], ref, atol=1e-10)


def test_cli_simulate_writes_states_opensim_reads(tmp_path):
    out = tmp_path / "states.sto"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "simjax.cli",
            "simulate",
            "double_pendulum",
            "--final-time",
            "0.5",
            "--out",
            str(out),
            "--outputs",
            "11",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "result code 0" in proc.stdout
    model = opensim.Model(sj.models.path("double_pendulum"))
    table = opensim.TimeSeriesTable(str(out))
    states = opensim.StatesTrajectory.createFromStatesTable(model, table)
    assert states.getSize() == 11
    assert states.get(10).getTime() == pytest.approx(0.5)
