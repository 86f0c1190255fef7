"""Static optimization with ``use_muscle_physiology`` for every muscle class, against
OpenSim 4.6.

- The muscles' strengths (OpenSim's ``calcInextensibleTendonActiveFiberForce(s, 1)``,
  each class its own) at random states of a two-link arm carrying one muscle of each
  class (written by simjax, read by OpenSim).
- arm26 (Thelen2003Muscle, its paths' wrap objects removed, a reserve at each
  coordinate): an AnalyzeTool setup authored with OpenSim's API runs
  StaticOptimization on a smooth shoulder and elbow motion (0.2 s at 100 Hz) in
  OpenSim and in simjax; activations and forces are compared.
- A muscle class without a strength is an error naming the muscle and its class.
- The solver reaches the optimum (KKT conditions) of problems shaped like static
  optimization's: muscles within [0.01, 1] too weak alone, free reserves.
"""

from __future__ import annotations

import os
import re
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
import simjax.tools
from simjax.io.tables import TimeSeriesTable, read_table, write_table
from simjax.tools import optimization

from _muscle_oracle import random_states, set_opensim_state, simjax_states, sj_arm
from _pipeline import run_in, tight_static_optimization

opensim = pytest.importorskip("opensim")

pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file:UserWarning")

AMPLITUDE = (0.2, 0.6)  # of the shoulder's and the elbow's motion (rad)
RESERVE = 1.0  # the reserves' optimal force (N m)
ARGS = (300.0, 0.12, 0.25, 0.25)  # max isometric force, optimal fiber and tendon slack lengths, pennation


def _muscles():
    return [
        sj.Thelen2003Muscle("thelen", *ARGS),
        sj.Thelen2003Muscle("thelen_unpennated", *ARGS[:3], 0.0),
        sj.Millard2012EquilibriumMuscle("millard", *ARGS),
        sj.DeGrooteFregly2016Muscle("degroote", *ARGS),
        sj.Schutte1993Muscle_Deprecated("schutte", *ARGS),
        sj.RigidTendonMuscle("rigid_tendon", *ARGS),
    ]


def test_strengths_match_opensim(tmp_path):
    model = sj_arm(_muscles())
    path = tmp_path / "arm.osim"
    sj.save_osim(model, path)
    # (simjax writes DeGroote's optimal_force, which OpenSim rejects once read from a file)
    text = path.read_text()
    start = text.index("<DeGrooteFregly2016Muscle")
    path.write_text(text[:start] + text[start:].replace("<optimal_force>1</optimal_force>", "", 1))
    system = model.build()
    om = opensim.Model(str(path))
    s = om.initSystem()
    st = random_states(om, 12, np.random.default_rng(5), speed=4.0)
    muscles = om.getMuscles()
    names = [muscles.get(j).getName() for j in range(muscles.getSize())]
    ref = []
    for i in range(len(st["q"])):
        set_opensim_state(om, s, st, i)
        om.realizeVelocity(s)
        ref.append([muscles.get(j).calcInextensibleTendonActiveFiberForce(s, 1.0) for j in range(len(names))])
    ref = np.asarray(ref)

    states = simjax_states(system, st)[0]
    _, _, F, _, _ = optimization._problem_of(system, states, jnp.zeros_like(states.u), True)
    got = np.asarray(F)[:, [system.actuator_names.index(n) for n in names]]
    assert np.all(np.median(ref, 0) > 50.0)  # (every muscle strong enough to compare)
    # Thelen's force-velocity inverse is OpenSim's Newton iteration to 1e-6 in velocity
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-8)


def _arm26(path):
    """arm26 without its paths' wrap objects (wrapping's tracing and compilation would
    take most of the time; it is not what is tested here)."""
    text = open(sj.models.path("arm26")).read()
    path.write_text(re.sub(r"\s*<PathWrapSet>.*?</PathWrapSet>", "", text, flags=re.S))


def _motion(path):
    """Shoulder elevation and elbow flexion, smooth over 0.2 s at 100 Hz (rad)."""
    t = np.linspace(0.0, 0.2, 21)
    ramp = 0.5 - 0.5 * np.cos(np.pi * t / 0.2)
    q = np.stack([0.2 + AMPLITUDE[0] * ramp, 0.4 + AMPLITUDE[1] * ramp], 1)
    write_table(TimeSeriesTable(t, q, ["r_shoulder_elev", "r_elbow_flex"], {"inDegrees": "no"}), path)


def _reserves(path):
    """A CoordinateActuator for each coordinate (the shoulder's muscles alone are too
    weak for the motion)."""
    forces = opensim.ForceSet()
    for c in ("r_shoulder_elev", "r_elbow_flex"):
        reserve = opensim.CoordinateActuator(c)
        reserve.setName(f"{c}_reserve")
        reserve.setOptimalForce(RESERVE)
        forces.cloneAndAppend(reserve)
    forces.printToXML(str(path))


def _setup(folder):
    so = tight_static_optimization(opensim)
    tool = opensim.AnalyzeTool()
    tool.setName("arm26")
    tool.setModelFilename("arm26.osim")
    tool.setCoordinatesFileName("motion.mot")
    tool.setLowpassCutoffFrequency(-1)
    files = opensim.ArrayStr()
    files.append("reserves.xml")
    tool.setForceSetFiles(files)
    tool.setReplaceForceSet(False)
    tool.setInitialTime(0.0)
    tool.setFinalTime(0.2)
    tool.setResultsDir("Results")
    tool.setOutputPrecision(16)
    so.setStartTime(0.0)
    so.setEndTime(0.2)
    tool.getAnalysisSet().cloneAndAppend(so)
    path = folder / "setup.xml"
    tool.printToXML(str(path))
    return path


def test_arm26_matches_opensim(tmp_path):
    _arm26(tmp_path / "arm26.osim")
    _motion(tmp_path / "motion.mot")
    _reserves(tmp_path / "reserves.xml")
    setup = _setup(tmp_path)
    try:
        run_in(tmp_path, lambda: opensim.AnalyzeTool(setup.name).run())
    finally:
        opensim.IO.SetPrecision(8)  # the tool sets OpenSim's precision for the whole process
    ours = tmp_path / "simjax_setup.xml"
    ours.write_text(setup.read_text().replace("<results_directory>Results", "<results_directory>Ours"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sj.io.osim.OsimWarning)  # missing mesh files (display only)
        out = simjax.tools.run(str(ours))

    def pair(key):
        got, ref = read_table(out[key]), read_table(os.path.join(tmp_path, "Results", f"arm26_{key}.sto"))
        assert list(got.labels) == list(ref.labels)
        np.testing.assert_allclose(got.times, ref.times, rtol=0, atol=1e-9)
        return np.asarray(got.values), np.asarray(ref.values)

    got, ref = pair("StaticOptimization_activation")
    assert got.shape == (21, 8)  # 6 muscles, 2 reserves
    assert np.all(ref[:, :6].max(0) > 0.05) and np.all(ref[:, :6].min(0) == 0.01)  # (each within and at a bound)
    assert np.abs(got - ref).max() < 1e-3
    fgot, fref = pair("StaticOptimization_force")
    assert np.all(np.abs(fgot - fref) <= 1e-3 * np.abs(fref).max(0))
    # the muscles' strengths (force per unit activation) are OpenSim's
    np.testing.assert_allclose(fgot[:, :6] / got[:, :6], fref[:, :6] / ref[:, :6], rtol=1e-7)


def test_muscle_class_without_strength_is_an_error(monkeypatch):
    model = sj_arm(_muscles()[:1] + _muscles()[-1:])
    monkeypatch.setattr(optimization, "_KINDS", optimization._KINDS[:-1])
    with pytest.raises(sj.ModelError, match=r"/forceset/rigid_tendon: .*RigidTendonMuscle.*use_muscle_physiology"):
        optimization._muscle_kinds(model, model.paths(sj.Muscle))


@pytest.mark.parametrize("exponent", [2.0, 3.0])
def test_solver_reaches_the_optimum(exponent):
    rng = np.random.default_rng(7)
    n, m, k = 20, 4, 18
    A = np.concatenate([rng.normal(size=(n, m, k)) * rng.uniform(1.0, 500.0, k), np.tile(np.eye(m), (n, 1, 1))], 2)
    b = np.einsum("nmk,nk->nm", A, np.concatenate([rng.uniform(-0.3, 1.3, (n, k)), rng.normal(size=(n, m))], 1))
    lower = np.concatenate([np.full(k, 0.01), np.full(m, -np.inf)])
    upper = np.concatenate([np.ones(k), np.full(m, np.inf)])
    x, violation = map(np.asarray, optimization.solve_static_optimization(A, b, lower, upper, exponent))
    assert np.all(violation < 1e-10 * np.abs(b).max(1))
    assert np.all((x >= lower) & (x <= upper))
    # stationary where free, the cost's slope pushing against the bound where at one
    slope = exponent * np.sign(x) * np.abs(x) ** (exponent - 1.0)
    for i in range(n):
        free = (x[i] > lower) & (x[i] < upper)
        y = np.linalg.lstsq(A[i][:, free].T, slope[i, free], rcond=None)[0]
        excess = A[i].T @ y - slope[i]
        scale = np.abs(slope[i]).max()
        assert np.all(np.abs(excess[free]) < 1e-9 * scale)
        assert np.all(excess[x[i] == lower] < 1e-9 * scale) and np.all(excess[x[i] == upper] > -1e-9 * scale)
