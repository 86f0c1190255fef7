"""Batches sharded over devices: ``simulate_batch`` and ``map_batch`` over 4 CPU devices
(forced with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``, which must be set
before JAX starts, hence a subprocess) equal the single-device batch world by world,
result codes included; an uneven batch is padded and the padding dropped. The batched
tools sharded over 2 devices of one process, and over the devices of 2 processes joined
by JAX's distributed runtime, equal them unsharded."""

import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import simjax as sj
from simjax.batching import batch_mesh
from simjax.models import load

_T_FINAL = 0.3
_N = 7  # over 4 devices: padded to 8, the copy dropped
_KW = dict(solver="rk4", dt=0.01)  # (a fixed-step solver compiles fastest)


def _batch():
    system = load("double_pendulum").build()
    base = system.default_state()
    q0 = np.random.default_rng(0).uniform(-1.0, 1.0, (_N, 2))
    q0[3, 0] = np.nan  # a world that fails: its result code must survive the sharding
    states = jax.vmap(lambda q: base.replace(q=q))(jnp.asarray(q0))
    torques = jnp.asarray(np.random.default_rng(1).uniform(-1.0, 1.0, (_N, 2)))
    mass = jnp.linspace(0.5, 2.0, _N)
    return system, states, torques, {"/bodyset/rod1|mass": mass}


def _pendulum_energy(q, m):
    return {"e": m * (1.0 - jnp.cos(q[0])) + 0.5 * jnp.sin(q[1]) ** 2}


_CHILD = textwrap.dedent(f"""
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    import simjax as sj
    sys.path.insert(0, {os.path.dirname(__file__)!r})
    from test_sharding import _batch, _pendulum_energy, _T_FINAL, _KW

    assert jax.local_device_count() == 4, jax.devices()
    system, states, torques, props = _batch()
    traj = sj.simulate_batch(system, states, _T_FINAL, torques, properties=props, n_outputs=4, throw=False, **_KW)
    assert len(traj.q.sharding.device_set) == 4
    q = jnp.asarray(np.linspace(-1.0, 1.0, 16).reshape(8, 2))
    m = jnp.linspace(1.0, 2.0, 8)
    energy = sj.map_batch(_pendulum_energy, q, m)["e"]
    assert len(energy.sharding.device_set) == 4 and energy.sharding.spec[0] == "batch"  # even: stays sharded
    per_call = sj.map_batch(_pendulum_energy, q[:7], m[:7], chunk_size=1)["e"]  # two calls of 4, padded
    np.savez(sys.argv[1], q=traj.q, u=traj.u, t=traj.t, result=traj.result, num_steps=traj.num_steps,
             energy=energy, per_call=per_call)
""")


def _beside_child(here, child_args, devices: int, timeout: float):
    """``here()`` in this process while a child Python (``python -c *child_args``) runs
    on ``devices`` forced CPU devices, both compiling at once (two programs, two
    cores). The child compiles with this process's XLA flags (the same code but for the
    devices). **Returns:** ``here()``'s value, once the child has ended well."""
    flags = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    child = subprocess.Popen(
        [sys.executable, "-c", *child_args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        value = here()
        log, _ = child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, log
    return value


def test_sharded_batch_equals_single_device_batch(tmp_path):
    out = tmp_path / "sharded.npz"

    def here():
        system, states, torques, props = _batch()
        return sj.simulate_batch(system, states, _T_FINAL, torques, properties=props, n_outputs=4, throw=False, **_KW)

    want = _beside_child(here, [_CHILD, str(out)], devices=4, timeout=240)
    got = np.load(out)
    result = np.asarray(want.result)
    assert result[3] == sj.NONFINITE_STATE and (np.delete(result, 3) == 0).all()
    np.testing.assert_array_equal(got["result"], result)
    np.testing.assert_array_equal(got["num_steps"], np.asarray(want.num_steps))
    for name in ("q", "u", "t"):
        w, g = np.asarray(getattr(want, name)), got[name]
        assert g.shape == w.shape
        for i in range(_N):  # world by world (NaN where the failing world's state is)
            np.testing.assert_allclose(g[i], w[i], rtol=1e-12, atol=1e-12, equal_nan=True)
    # the batched property reached each world: a heavier first rod swings differently
    assert not np.allclose(np.asarray(want.q[0, -1]), np.asarray(want.q[1, -1]))
    q = jnp.asarray(np.linspace(-1.0, 1.0, 16).reshape(8, 2))
    m = jnp.linspace(1.0, 2.0, 8)
    energy = jax.vmap(_pendulum_energy)(q, m)["e"]
    np.testing.assert_allclose(got["energy"], energy, rtol=1e-15)
    np.testing.assert_allclose(got["per_call"], energy[:7], rtol=1e-15)


def test_batch_mesh():
    assert batch_mesh() is None or jax.local_device_count() > 1  # one device: today's path
    mesh = batch_mesh(jax.devices()[:1])
    assert mesh.axis_names == ("batch",) and mesh.size == 1
    assert batch_mesh(mesh) is mesh
    try:
        batch_mesh([])
    except ValueError as e:
        assert "empty" in str(e)
    else:  # pragma: no cover
        raise AssertionError("an empty device list must be refused")
    # an explicit one-device mesh runs the sharded path and equals the default one
    q = jnp.asarray(np.linspace(-1.0, 1.0, 10).reshape(5, 2))
    m = jnp.linspace(1.0, 2.0, 5)
    np.testing.assert_allclose(
        sj.map_batch(_pendulum_energy, q, m, devices=jax.devices()[:1])["e"],
        sj.map_batch(_pendulum_energy, q, m)["e"],
        rtol=1e-15,
    )


# -- the batched tools: IK and static optimization over frames, a batch of trajectory optimisations

_FRAMES = 5  # over 2 devices: padded to 6, the copy dropped


def _tools_system():
    model = load("double_pendulum")  # (with its two coordinate actuators)
    for name, body, location in (("m1", "rod1", (0.0, -0.5, 0.0)), ("m2", "rod2", (0.0, -0.5, 0.1))):
        model = model.add(sj.Marker(name, f"/bodyset/{body}", location))
    return model.add(sj.Marker("m3", "/bodyset/rod2", (0.1, -1.0, 0.0))).build()


def _tools(devices=None):
    """Inverse kinematics (a missing marker; frames warm-started one from another across
    the devices), static optimization of a motion, and its solver on arrays."""
    from simjax.io.tables import TimeSeriesTable
    from simjax.tools import inverse_kinematics, marker_positions
    from simjax.tools.optimization import solve_static_optimization, static_optimization

    system = _tools_system()
    t = np.linspace(0.0, 0.4, _FRAMES)
    q = np.stack([0.3 + np.sin(3 * t), 0.5 - 2 * t], axis=1)
    names = ("m1", "m2", "m3")
    x = np.array(marker_positions(system, names, jnp.asarray(q)))
    x[2, 0] = np.nan
    ik = inverse_kinematics(system, TimeSeriesTable(t, x, names, metadata={"Units": "m"}), devices=devices)
    t = np.linspace(0.0, 0.4, 2 * _FRAMES - 1)
    motion = TimeSeriesTable(t, np.stack([0.3 + np.sin(3 * t), 0.5 - 2 * t], 1), ["q1", "q2"], {"inDegrees": "no"})
    acts, forces, violation = static_optimization(system, motion, devices=devices)
    rng = np.random.default_rng(3)  # (three bounded controls and two free reserves: feasible)
    A = np.concatenate([rng.normal(size=(_FRAMES, 2, 3)), np.tile(np.eye(2), (_FRAMES, 1, 1))], 2)
    b = 2.0 * rng.normal(size=(_FRAMES, 2))
    bounds = np.array([1.0, 1.0, 1.0, np.inf, np.inf])
    x, v = solve_static_optimization(A, b, -bounds, bounds, devices=devices)
    return {
        "ik_q": ik.q,
        "ik_converged": ik.converged,
        "ik_passes": ik.passes,
        "ik_squared_errors": ik.squared_errors,
        "so_controls": np.asarray(acts.values),
        "so_forces": np.asarray(forces.values),
        "so_violation": violation,
        "solver_x": np.asarray(x),
        "solver_violation": np.asarray(v),
    }


def _trajectories(devices=None):
    """Minimum-time rest-to-rest slides of three masses (``solve_batch``; the second mass
    NaN: its status must survive the sharding)."""
    import equinox as eqx

    from simjax import optimize

    model = sj.Model("sliding_mass", gravity=(0, 0, 0))
    model = model.add(sj.Body("body", 2.0, (0, 0, 0), (0, 0, 0, 0, 0, 0)))
    coordinate = sj.Coordinate("x", 0.0, range=(-10, 10))
    model = model.add(sj.SliderJoint("slider", "/ground", "/bodyset/body", coordinates=(coordinate,)))
    system = model.add(sj.CoordinateActuator("actuator", "/jointset/slider/x", optimal_force=1.0)).build()
    problem = optimize.Problem(system, initial_time=(0.0, 0.0), final_time=(0.0, 5.0))
    problem = problem.bound("/jointset/slider/x/value", (-10.0, 10.0), initial=0.0, final=1.0)
    problem = problem.bound("/jointset/slider/x/speed", (-50.0, 50.0), initial=0.0, final=0.0)
    problem = problem.bound("/forceset/actuator", (-50.0, 50.0)).goal(optimize.FinalTime(1.0))

    def with_mass(system, mass):
        return eqx.tree_at(lambda s: s.model.find("/bodyset/body").mass, system, mass)

    options = optimize.Options(tol=1e-8, constraint_tol=1e-8)
    masses = jnp.asarray([1.0, np.nan, 4.5])
    sol = optimize.solve_batch(
        problem, masses, with_mass, mesh=8, scheme="trapezoidal", options=options, devices=devices
    )
    return {f"ocp_{k}": np.asarray(getattr(sol, k)) for k in ("time", "states", "controls", "objective", "status")}


_TOOLS_CHILD = textwrap.dedent(f"""
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import simjax.batching as batching
    sys.path.insert(0, {os.path.dirname(__file__)!r})
    import test_sharding

    assert jax.local_device_count() == 2, jax.devices()
    sharded = []
    on_mesh = batching._on_mesh
    batching._on_mesh = lambda static, mesh, *a: sharded.append(mesh.size) or on_mesh(static, mesh, *a)
    out = getattr(test_sharding, sys.argv[2])()
    # IK, SO's problems and solve, the solver on arrays; or solve_batch
    assert sharded == ([2, 2, 2, 2] if sys.argv[2] == "_tools" else [2]), sharded
    np.savez(sys.argv[1], **out)
""")


_PROCESSES_CHILD = textwrap.dedent(f"""
    import sys
    import jax
    # (one process of two, joined on the loopback address before JAX starts its backends)
    jax.distributed.initialize(sys.argv[3], num_processes=2, process_id=int(sys.argv[4]))
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import simjax.batching as batching
    sys.path.insert(0, {os.path.dirname(__file__)!r})
    import test_sharding

    assert jax.process_count() == 2 and jax.local_device_count() == 1, jax.devices()
    sharded = []
    on_mesh = batching._on_mesh
    batching._on_mesh = lambda static, mesh, *a: sharded.append(mesh.size) or on_mesh(static, mesh, *a)
    out = getattr(test_sharding, sys.argv[2])()
    assert sharded == [2, 2, 2, 2], sharded  # (each over both processes' devices)
    if jax.process_index() == 0:
        np.savez(sys.argv[1], **out)
""")


@functools.cache
def _unsharded_tools():
    return _tools()


def _beside_processes(here, child_args, timeout: float):
    """``here()`` in this process while two child Pythons (``python -c *child_args
    ADDRESS RANK``) run as one multi-process JAX program on the loopback address, one
    CPU device each. **Returns:** ``here()``'s value, once both children have ended
    well."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", *child_args, address, str(rank)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        value = here()
        logs = [child.communicate(timeout=timeout)[0] for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, log in zip(children, logs):
        assert child.returncode == 0, log
    return value


def _sharded_equals_unsharded(tmp_path, cases, tol=1e-12, processes=False):
    """``cases()`` here (one device: unsharded) and, at once, in a child process on 2 CPU
    devices, or (``processes``) in two child processes of one CPU device each joined by
    JAX's distributed runtime (sharded); their outputs, ``{name: array}``, compared.
    **Returns:** this process's outputs."""
    out = tmp_path / "sharded.npz"
    if processes:
        want = _beside_processes(_unsharded_tools, [_PROCESSES_CHILD, str(out), cases.__name__], timeout=480)
    else:
        here = _unsharded_tools if cases is _tools else cases
        want = _beside_child(here, [_TOOLS_CHILD, str(out), cases.__name__], devices=2, timeout=480)
    got = np.load(out)
    assert sorted(got.files) == sorted(want)
    for name, w in want.items():
        g, w = got[name], np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, name
        if w.dtype.kind == "f":
            atol = tol * max(1.0, float(np.nanmax(np.abs(w), initial=0.0)))
            np.testing.assert_allclose(g, w, rtol=tol, atol=atol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    return want


def test_sharded_tools_equal_unsharded_tools(tmp_path):
    want = _sharded_equals_unsharded(tmp_path, _tools)
    assert want["ik_converged"].all() and want["ik_passes"] > 1  # (the warm starts crossed the devices)


def test_tools_in_two_processes_equal_unsharded_tools(tmp_path):
    """The batched tools in a multi-process run (after ``jax.distributed.initialize``,
    as on a cluster: one process a host or a GPU): the frames sharded over both
    processes' devices, the same results as in one process."""
    want = _sharded_equals_unsharded(tmp_path, _tools, processes=True)
    assert want["ik_converged"].all()


_SETUP_CHILD = textwrap.dedent("""
    import builtins
    import os
    import sys
    import jax
    jax.distributed.initialize(sys.argv[2], num_processes=2, process_id=int(sys.argv[3]))
    jax.config.update("jax_enable_x64", True)
    folder = os.path.dirname(sys.argv[1])
    opened = []  # the files this process opens for writing in the setup's folder
    real_open = builtins.open

    def spying_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and os.fspath(file).startswith(folder):
            opened.append(os.fspath(file))
        return real_open(file, mode, *args, **kwargs)

    builtins.open = spying_open
    import simjax.tools

    written = simjax.tools.run(sys.argv[1])
    assert sorted(opened) == (sorted(written.values()) if jax.process_index() == 0 else []), (opened, written)
""")


def _ik_setup(folder) -> str:
    """An InverseKinematicsTool setup of ``_tools_system``'s pendulum in ``folder``: its
    model, its markers along a motion (``.trc``, one frame a marker short).
    **Returns:** the setup's path."""
    from simjax.io.tables import TimeSeriesTable, write_table
    from simjax.tools import marker_positions

    os.makedirs(folder)
    system = _tools_system()
    sj.save_osim(system.model, os.path.join(folder, "pendulum.osim"))
    t = np.linspace(0.0, 0.4, _FRAMES)
    names = ("m1", "m2", "m3")
    x = np.array(marker_positions(system, names, jnp.asarray(np.stack([0.3 + np.sin(3 * t), 0.5 - 2 * t], 1))))
    x[2, 0] = np.nan
    write_table(TimeSeriesTable(t, x, names, {"Units": "m", "DataRate": "10"}), os.path.join(folder, "markers.trc"))
    setup = os.path.join(folder, "setup.xml")
    with open(setup, "w") as f:
        f.write(
            '<?xml version="1.0" encoding="UTF-8" ?>\n<OpenSimDocument Version="40000">\n'
            '<InverseKinematicsTool name="pendulum"><model_file>pendulum.osim</model_file>'
            "<marker_file>markers.trc</marker_file><output_motion_file>pendulum_ik.mot</output_motion_file>"
            "<report_errors>true</report_errors></InverseKinematicsTool>\n</OpenSimDocument>\n"
        )
    return setup


def test_setup_run_in_two_processes_writes_once(tmp_path):
    """``simjax.tools.run`` of an IK setup by both processes of a multi-process run:
    process 0 alone writes the files (each process's writes spied on), and they equal a
    one-process run's."""
    from simjax.io.tables import read_table

    one, two = _ik_setup(tmp_path / "one"), _ik_setup(tmp_path / "two")
    written = _beside_processes(lambda: sj.tools.run(one), [_SETUP_CHILD, two], timeout=480)
    assert sorted(os.path.basename(p) for p in written.values()) == ["pendulum_ik.mot", "pendulum_ik_marker_errors.sto"]
    for path in written.values():
        want, got = read_table(path), read_table(path.replace(os.sep + "one" + os.sep, os.sep + "two" + os.sep))
        assert got.labels == want.labels
        np.testing.assert_allclose(got.values, want.values, rtol=1e-12, atol=1e-12)


def test_sharded_solve_batch_equals_unsharded(tmp_path):
    # (the interior-point iterations carry round-off further: 4e-12 of the states here)
    want = _sharded_equals_unsharded(tmp_path, _trajectories, tol=1e-10)
    status = want["ocp_status"]
    assert status[0] == status[2] == 0 and status[1] != 0, status  # (the NaN mass fails alone)
