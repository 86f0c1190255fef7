"""Sweeps that lose nothing: 200 cases of a double pendulum in chunks of 50, one Parquet
file a chunk; a muscle model's cases with their own controls, equilibrated, with their
trajectories. An interrupted sweep (an exception after a chunk, or a SIGKILL) restarts
to exactly 200 rows, each case once, equal to an uninterrupted sweep; a failing case
is recorded with its result code and inputs; bad spec input is refused, naming the
column, path or output, before anything runs."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

import simjax as sj
from simjax import cli
from simjax.sweep import SpecError, read_spec, read_sweep, sweep

N = 200
_FAILING = 17  # a case that starts at an absurd speed: its state overflows to inf, then NaN


def _spec(tmp: str, **changes) -> dict:
    rng = np.random.default_rng(0)
    cases = pd.DataFrame(
        {
            "/bodyset/rod1|mass": rng.uniform(0.5, 2.0, N),
            "/forceset/Torq2|optimal_force": rng.uniform(0.5, 2.0, N),
            "/jointset/pin1/q1/value": rng.uniform(-1.0, 1.0, N),
            "/jointset/pin2/q2/speed": rng.uniform(-1.0, 1.0, N),
        }
    )
    cases.loc[_FAILING, "/jointset/pin2/q2/speed"] = 1e300
    path = os.path.join(tmp, "cases.parquet")
    cases.to_parquet(path, index=False)
    spec = {
        "model": "double_pendulum",
        "cases": path,
        "t_final": 0.05,
        "chunk_size": 50,
        "outputs": ["/jointset/pin2/q2/value", "/bodyset/rod2|position", "/forceset/Torq2|actuation"],
        "coordinates": {"q2": 0.3},
        "controls": [0.0, 0.5],
        # (a fixed-step solver compiles fastest)
        "simulate": {"solver": "rk4", "dt": 0.01},
    }
    spec.update(changes)
    return spec


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted sweep: its spec and its rows."""
    tmp = str(tmp_path_factory.mktemp("sweep"))
    spec = _spec(tmp)
    summary = sweep(spec, os.path.join(tmp, "whole"), progress=False)
    assert (summary.n_cases, summary.n_chunks, summary.chunks_run, summary.failed) == (N, 4, 4, 1)
    return spec, read_sweep(os.path.join(tmp, "whole"))


def _check_complete(out_dir: str, want: pd.DataFrame) -> None:
    got = read_sweep(out_dir)
    assert len(got) == N and sorted(got["case"]) == list(range(N))  # each case once
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    # pandas and pyarrow open the folder as one dataset
    assert len(pd.read_parquet(out_dir)) == N and ds.dataset(out_dir).count_rows() == N


def test_rows_inputs_outputs_and_a_failing_case(reference):
    spec, rows = reference
    cases = pd.read_parquet(spec["cases"])
    assert list(rows.columns) == (
        ["case"]
        + list(cases.columns)
        + ["/jointset/pin2/q2/value"]
        + [f"/bodyset/rod2|position[{i}]" for i in range(3)]
        + ["/forceset/Torq2|actuation", "result", "num_steps", "t_end"]
    )
    for name in cases.columns:  # the inputs, as given
        np.testing.assert_array_equal(rows[name], cases[name])
    failed = rows[rows["result"] != 0]
    assert list(failed["case"]) == [_FAILING] and int(failed["result"].iloc[0]) == sj.NONFINITE_STATE
    assert failed["/jointset/pin2/q2/speed"].iloc[0] == 1e300
    ok = rows.drop(index=_FAILING)
    assert (ok["result"] == 0).all() and np.isfinite(ok.drop(columns="case").to_numpy()).all()
    # the batched properties reached each case: the actuation is optimal_force * control
    np.testing.assert_allclose(ok["/forceset/Torq2|actuation"], 0.5 * ok["/forceset/Torq2|optimal_force"], rtol=1e-12)
    # one case against a single simulate with its property and initial state set
    c = 3
    row = rows.iloc[c]
    system = read_spec(spec).system
    system = sj.System(
        system.model.set("/bodyset/rod1", mass=row["/bodyset/rod1|mass"]).set(
            "/forceset/Torq2", optimal_force=row["/forceset/Torq2|optimal_force"]
        ),
        system.topology,
    )
    state = system.set_coordinates(
        system.default_state(),
        {"q1": row["/jointset/pin1/q1/value"], "q2": 0.3},
        {"q2": row["/jointset/pin2/q2/speed"]},
    )
    traj = sj.simulate(system, state, 0.05, np.array([0.0, 0.5]), solver="rk4", dt=0.01, n_outputs=2)
    np.testing.assert_allclose(row["/jointset/pin2/q2/value"], traj.q[-1, 1], rtol=1e-12)


def test_interrupted_sweep_restarts_without_losing_or_repeating_a_case(reference, tmp_path):
    spec, want = reference
    out = str(tmp_path / "out")

    def stop_after_two(index, path):
        if index == 1:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        sweep(spec, out, progress=False, on_chunk=stop_after_two)
    assert sorted(os.listdir(out)) == ["_sweep.json", "chunk-000000.parquet", "chunk-000001.parquet"]
    # a write killed half-way leaves a hidden temporary file: ignored, then removed
    open(os.path.join(out, ".chunk-000002.parquet.tmp999"), "wb").write(b"PAR1 half a file")
    assert len(pd.read_parquet(out)) == 100
    summary = sweep(spec, out, progress=False)
    assert (summary.chunks_skipped, summary.chunks_run) == (2, 2)
    _check_complete(out, want)
    assert not any(name.startswith(".") for name in os.listdir(out))
    # a third run has nothing left to do
    assert sweep(spec, out, progress=False).chunks_run == 0
    # a folder of another sweep is refused
    with pytest.raises(ValueError, match="another sweep"):
        sweep(dict(spec, t_final=0.04), out, progress=False)


_CHILD = textwrap.dedent("""
    import json, sys, time
    import jax
    jax.config.update("jax_enable_x64", True)
    from simjax.sweep import sweep
    # (slowed down, so that the test can kill it between chunks)
    sweep(json.load(open(sys.argv[1])), sys.argv[2], progress=False, on_chunk=lambda k, p: time.sleep(30))
""")


def test_sigkilled_sweep_resumes_from_the_command_line(reference, tmp_path, capsys):
    spec, want = reference
    spec_path, out = tmp_path / "spec.json", str(tmp_path / "out")
    spec_path.write_text(json.dumps(spec))
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(spec_path), out],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(out, "chunk-000000.parquet")):
            assert child.poll() is None, child.stdout.read().decode()
            assert time.monotonic() < deadline, "the sweep wrote no chunk in 120 s"
            time.sleep(0.1)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert len(pd.read_parquet(out)) == 50
    assert cli.main(["sweep", str(spec_path), "--out", out]) == 0
    captured = capsys.readouterr()
    assert "3 chunks run, 1 finished before; 0 failed case(s)"  # (case 17 was in the first in captured.out
    assert "cases/s" in captured.err and "left" in captured.err
    _check_complete(out, want)


def test_equilibrium_controls_and_trajectories_per_case(tmp_path):
    """A muscle model's cases, each with its own optimal fiber length and control
    (a table column of an actuator's path), equilibrated at the start
    (``equilibrate``) and kept at 5 times (``trajectories``): each case equals
    ``equilibrate_muscles`` and ``simulate`` of its own system; the trajectories end
    at the rows' final states and stay out of the rows' dataset."""
    from simjax.sweep import read_trajectories

    n, samples = 3, 5
    cases = pd.DataFrame(
        {
            "/forceset/RightMuscle|optimal_fiber_length": [0.18, 0.2, 0.22],
            "/forceset/LeftMuscle": [0.1, 0.4, 0.8],
            "/forceset/RightMuscle/fiber_length": [0.05, 0.05, 0.05],  # (a guess: equilibrated)
        }
    )
    spec = {
        "model": "Tug_of_War_Millard",
        "cases": str(tmp_path / "cases.csv"),
        "t_final": 0.02,
        "outputs": ["/jointset/ground_block/block_tz/value", "/forceset/LeftMuscle|tendon_force"],
        "controls": 0.3,
        "equilibrate": True,
        "trajectories": samples,
        "chunk_size": 2,
        "simulate": {"solver": "rk4", "dt": 0.002},
    }
    cases.to_csv(spec["cases"], index=False)
    out = str(tmp_path / "out")
    summary = sweep(spec, out, progress=False)
    assert (summary.n_chunks, summary.failed) == (2, 0)
    rows, traj = read_sweep(out), read_trajectories(out)
    assert len(pd.read_parquet(out)) == n  # (the trajectories' subfolder is not read as rows)
    assert list(traj.columns[:2]) == ["case", "time"] and len(traj) == n * samples
    system = read_spec(spec).system
    for c in range(n):
        case_system = sj.System(
            system.model.set("/forceset/RightMuscle", optimal_fiber_length=cases.iloc[c, 0]), system.topology
        )
        controls = np.array([0.3, cases.iloc[c, 1]])
        state = system.default_state()
        state = state.replace(z=state.z.at[system.z_names.index("/forceset/RightMuscle/fiber_length")].set(0.05))
        start = sj.equilibrate_muscles(case_system, state, controls)
        want = sj.simulate(case_system, start, 0.02, controls, solver="rk4", dt=0.002, n_outputs=samples)
        np.testing.assert_allclose(rows.iloc[c]["/jointset/ground_block/block_tz/value"], want.q[-1, 0], rtol=1e-12)
        mine = traj[traj["case"] == c]
        np.testing.assert_allclose(mine["time"], want.t, rtol=1e-12)
        np.testing.assert_allclose(mine[list(system.y_names)].to_numpy(), want.y, rtol=1e-10, atol=1e-12)
    # the equilibrium moved the fiber off the table's guess
    first = traj[traj["time"] == 0.0]
    assert (first["/forceset/RightMuscle/fiber_length"] > 0.09).all()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(cases={"/bodyset/nothing|mass": [1.0]}), r"column '/bodyset/nothing\|mass': .*names no component"),
        (dict(cases={"/bodyset/rod1|mas": [1.0]}), r"column '/bodyset/rod1\|mas': .*no numeric property 'mas'"),
        (dict(cases={"/bodyset/rod1|mass": ["heavy"]}), r"column '/bodyset/rod1\|mass': must be numeric"),
        (dict(cases={"/bodyset/rod1|mass": [-1.0]}), r"column '/bodyset/rod1\|mass': row 0 .*bounds"),
        (dict(cases={"/jointset/pin1/q1/valu": [1.0]}), r"column '/jointset/pin1/q1/valu': neither"),
        (dict(outputs=["/jointset/pin1/q1/valu"]), r"output '/jointset/pin1/q1/valu'"),
        (dict(outputs=["/bodyset/rod2|speed"]), r"output '/bodyset/rod2\|speed': Body '/bodyset/rod2' has no output"),
        (dict(outputs=["/bodyset/rod9|position"]), r"output '/bodyset/rod9\|position': '/bodyset/rod9' names no"),
        (dict(model="no_such_model"), r"'model'"),
        (dict(coordinates={"q9": 0.0}), r"'coordinates'"),
        (dict(chunk_size=0), r"'chunk_size'"),
        (dict(equilibrate="yes"), r"'equilibrate'"),
        (dict(trajectories=1), r"'trajectories'"),
        (dict(cases={"/forceset/Torq9": [1.0]}), r"column '/forceset/Torq9': neither.*nor an actuator's path"),
        (dict(typo=1), r"unknown key"),
    ],
)
def test_bad_spec_is_refused_before_anything_runs(tmp_path, change, message):
    spec = _spec(str(tmp_path))
    cases = change.pop("cases", None)
    spec.update(change)
    out = tmp_path / "out"
    with pytest.raises(SpecError, match=message):
        sweep(spec, str(out), cases=None if cases is None else pd.DataFrame(cases), progress=False)
    assert not out.exists()


def test_bad_spec_on_the_command_line(tmp_path, capsys):
    spec = _spec(str(tmp_path), outputs=["/jointset/pin1/q1/valu"])
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert cli.main(["sweep", str(path)]) == 1
    assert "output '/jointset/pin1/q1/valu'" in capsys.readouterr().err
    assert not (tmp_path / "spec.sweep").exists()


def test_two_processes_on_the_loopback_address_equal_one(reference, tmp_path):
    """``simjax sweep --processes 2``: two processes joined by JAX's distributed runtime
    (CPU collectives, loopback), each chunk sharded over both; the rows equal the
    single-process sweep's, case by case, result codes included, and no process is
    left behind."""
    spec, want = reference
    spec_path, out = tmp_path / "spec.json", str(tmp_path / "out")
    spec_path.write_text(json.dumps(spec))
    command = [sys.executable, "-m", "simjax.cli", "sweep", str(spec_path), "--out", out, "--processes", "2", "--quiet"]
    # (a session of its own, so that a hang kills the launcher and both workers)
    launcher = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        log, _ = launcher.communicate(timeout=240)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    assert launcher.returncode == 0, log
    assert "4 chunks run, 0 finished before; 1 failed case(s)" in log
    got = read_sweep(out)
    assert len(got) == N and sorted(got["case"]) == list(range(N))
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got["result"], want["result"])
    # no worker left: the launcher's session is empty
    leftover = subprocess.run(["pgrep", "-s", str(launcher.pid)], capture_output=True, text=True).stdout.split()
    assert not leftover, leftover
