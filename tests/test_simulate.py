"""Forward simulation: conservation, accuracy, events, gradients, batching (issue 5)."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.solvers import RungeKuttaMerson, SimbodyController


def chain(n, gravity=(0.0, -9.81, 0.0), free=False):
    """An n-link pendulum of unit rods (or a single free body if ``free``)."""
    m = sj.Model(f"chain{n}", gravity=gravity)
    parent = "/ground"
    for i in range(n):
        m = m.add(sj.Body(f"b{i}", 1.0 + 0.1 * i, (0.0, -0.5, 0.0), (0.08, 0.01, 0.08, 0.0, 0.0, 0.0)))
        if free:
            m = m.add(sj.FreeJoint(f"j{i}", parent, f"/bodyset/b{i}"))
        else:
            m = m.add(
                sj.PinJoint(
                    f"j{i}",
                    parent,
                    f"/bodyset/b{i}",
                    location_in_parent=(0.0, -1.0 if i else 0.0, 0.0),
                    location_in_child=(0, 0, 0),
                )
            )
        parent = f"/bodyset/b{i}"
    return m.build()


@pytest.fixture(scope="module")
def pendulum5():
    return chain(5)


def energy(system, state):
    return sj.kinetic_energy(system, state) + sj.potential_energy(system, state)


def test_passive_pendulum_conserves_energy(pendulum5):
    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    traj = sj.simulate(pendulum5, s, 10.0, solver="dopri8", rtol=1e-12, atol=1e-12, n_outputs=11)
    e0, e1 = energy(pendulum5, traj.state(0)), energy(pendulum5, traj.state(-1))
    assert abs(e1 - e0) / abs(e0) < 1e-9


def test_free_body_conserves_momentum():
    system = chain(1, gravity=(0.0, 0.0, 0.0), free=True)
    s = system.default_state().replace(q=[0.1, 0.2, 0.3, 1.0, 2.0, 3.0], u=[1.0, -2.0, 0.5, 0.3, 0.1, -0.2])
    traj = sj.simulate(system, s, 3.0, solver="tsit5", rtol=1e-11, atol=1e-11, n_outputs=4)
    h0, h1 = sj.momentum(system, traj.state(0)), sj.momentum(system, traj.state(-1))
    np.testing.assert_allclose(h1, h0, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize(
    "solver,kw", [("rkm", {}), ("tsit5", {}), ("dopri5", {}), ("kvaerno5", {}), ("rk4", {"dt": 1e-3})]
)
def test_solvers_agree(pendulum5, solver, kw):
    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    ref = sj.simulate(pendulum5, s, 1.0, solver="dopri8", rtol=1e-12, atol=1e-12, n_outputs=2)
    traj = sj.simulate(pendulum5, s, 1.0, solver=solver, accuracy=1e-9, n_outputs=2, **kw)
    np.testing.assert_allclose(traj.q[-1], ref.q[-1], atol=2e-6)


def test_semi_implicit_euler_is_first_order(pendulum5):
    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    ref = sj.simulate(pendulum5, s, 0.5, solver="dopri8", rtol=1e-12, atol=1e-12, n_outputs=2).q[-1]
    e1 = np.abs(sj.simulate(pendulum5, s, 0.5, solver="semi_implicit_euler", dt=1e-3, n_outputs=2).q[-1] - ref).max()
    e2 = np.abs(sj.simulate(pendulum5, s, 0.5, solver="semi_implicit_euler", dt=5e-4, n_outputs=2).q[-1] - ref).max()
    assert 1.6 < e1 / e2 < 2.4


def test_runge_kutta_methods_have_their_order():
    """RK4 and Merson's method (simjax's own stage loop) on y' = -y + sin t: the error
    of a fixed-step run falls ~16x when the step halves; Merson's error estimate
    bounds a step's true error from above (it is conservative: ~11x here)."""
    from simjax.solvers import RK4, RungeKuttaMerson

    term = diffrax.ODETerm(lambda t, y, args: -y + jnp.sin(t))
    exact = lambda t: 1.5 * jnp.exp(-t) + 0.5 * (jnp.sin(t) - jnp.cos(t))  # noqa: E731
    for solver in (RK4(), RungeKuttaMerson()):
        errors = [
            abs(float(diffrax.diffeqsolve(term, solver, 0.0, 2.0, dt, jnp.asarray(1.0)).ys[-1] - exact(2.0)))
            for dt in (0.025, 0.0125)
        ]
        assert 13 < errors[0] / errors[1] < 19
    y1, y_err, dense, _, _ = RungeKuttaMerson().step(term, 0.0, 0.2, jnp.asarray(1.0), None, None, False)
    assert 1 < abs(float(y_err)) / abs(float(y1 - exact(0.2))) < 30


def test_cubic_hermite_dense_output():
    """Matches values and slopes at both ends, and a cubic exactly."""
    from simjax.solvers import CubicHermite

    f = lambda t: 1.0 + 2 * t - t**2 + 0.5 * t**3  # noqa: E731
    df = lambda t: 2 - 2 * t + 1.5 * t**2  # noqa: E731
    t0, t1 = 0.3, 0.8
    h = CubicHermite(
        t0=jnp.asarray(t0),
        t1=jnp.asarray(t1),
        y0=jnp.asarray(f(t0)),
        y1=jnp.asarray(f(t1)),
        k0=jnp.asarray((t1 - t0) * df(t0)),
        k1=jnp.asarray((t1 - t0) * df(t1)),
    )
    for t in (t0, 0.45, 0.6, t1):
        np.testing.assert_allclose(h.evaluate(jnp.asarray(t)), f(t), rtol=1e-13)
    np.testing.assert_allclose(h.evaluate(jnp.asarray(0.4), jnp.asarray(0.7)), f(0.7) - f(0.4), rtol=1e-12)
    np.testing.assert_allclose(jax.grad(h.evaluate)(jnp.asarray(0.5)), df(0.5), rtol=1e-12)


def test_trajectory_outputs_and_tables(pendulum5):
    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    traj = sj.simulate(pendulum5, s, 0.2, n_outputs=5)
    assert traj.q.shape == (5, 5) and traj.t.tolist()[0] == 0.0 and traj.t[-1] == pytest.approx(0.2)
    v = traj.output("/jointset/j2/j2_coord_0|value")
    np.testing.assert_allclose(v, traj.q[:, 2])
    table = traj.to_table(outputs=["/jointset/j0/j0_coord_0|speed"])
    assert table.labels[0] == "/jointset/j0/j0_coord_0/value"
    np.testing.assert_allclose(table.column("/jointset/j0/j0_coord_0|speed"), traj.u[:, 0])
    st = traj.state(3)
    assert float(st.t) == pytest.approx(0.15)


def test_saved_steps_end_with_the_final_step(pendulum5):
    """``save_steps`` outputs every accepted step, the last one ending at ``t_final``,
    and that last state is the one a run with output times ends in (same steps)."""
    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    steps = sj.simulate(pendulum5, s, 0.2, save_steps=True, max_steps=500)
    ends = sj.simulate(pendulum5, s, 0.2, n_outputs=2)
    t = np.asarray(steps.t)
    n = int(np.isfinite(t).sum())
    assert t.shape == (500,) and np.all(np.isinf(t[n:])) and np.all(np.diff(t[:n]) > 0)
    assert n > 3 and t[0] > 0.0 and t[n - 1] == pytest.approx(0.2, abs=1e-15)
    np.testing.assert_array_equal(np.asarray(steps.q)[n - 1], np.asarray(ends.q)[-1])
    assert float(steps.final_state.t) == pytest.approx(0.2, abs=1e-15)


def test_states_file_round_trip(tmp_path, pendulum5):
    from simjax.io.tables import read_table

    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    traj = sj.simulate(pendulum5, s, 0.1, n_outputs=3)
    traj.write_states(str(tmp_path / "states.sto"))
    table = read_table(str(tmp_path / "states.sto"))
    np.testing.assert_array_equal(table.column("/jointset/j1/j1_coord_0/value"), np.asarray(traj.q[:, 1]))


def test_control_kinds():
    m = sj.Model("act", gravity=(0, 0, 0))
    m = m.add(sj.Body("b", 2.0, (0, 0, 0), (1, 1, 1, 0, 0, 0)))
    m = m.add(sj.SliderJoint("s", "/ground", "/bodyset/b"))
    m = m.add(sj.CoordinateActuator("f", "/jointset/s/s_coord_0", optimal_force=4.0))
    system = m.build()
    s = system.default_state()
    # constant control 1 -> a = 4/2 = 2; x(1) = 1
    traj = sj.simulate(system, s, 1.0, jnp.array([1.0]), n_outputs=2, accuracy=1e-10)
    assert float(traj.q[-1, 0]) == pytest.approx(1.0, rel=1e-8)
    # a ramp control table: c = t -> a = 2t; x(1) = 1/3
    table = sj.ControlTable(jnp.array([0.0, 1.0]), jnp.array([[0.0], [1.0]]))
    traj = sj.simulate(system, s, 1.0, table, n_outputs=2, accuracy=1e-10)
    assert float(traj.q[-1, 0]) == pytest.approx(1 / 3, rel=1e-7)
    # a callable policy (an Equinox module is a pytree: differentiable)
    policy = lambda t, st: -st.q[:1]  # noqa: E731
    traj = sj.simulate(system, s.replace(q=[1.0]), 1.0, policy, n_outputs=2, accuracy=1e-10)
    assert float(traj.q[-1, 0]) == pytest.approx(np.cos(np.sqrt(2.0)), rel=1e-7)


def test_backsolve_with_simbody_s_step_control_is_refused_by_name():
    system = chain(2)
    with pytest.raises(ValueError, match="adjoint='backsolve' cannot use solver='rkm'"):
        sj.simulate(system, system.default_state(), 0.1, adjoint="backsolve")


@pytest.mark.parametrize(
    "solver,adjoint",
    [("tsit5", "checkpoint"), ("tsit5", "backsolve"), ("rk4", "direct"), ("rkm", "checkpoint"), ("rk4", "checkpoint")],
)
def test_gradients_match_finite_differences(solver, adjoint):
    """Reverse-mode gradients w.r.t. the initial state and a body mass vs central differences."""
    system = chain(2)
    s0 = system.default_state().replace(q=[0.5, -0.4])
    kw = dict(dt=2e-3) if solver == "rk4" else dict(rtol=1e-10, atol=1e-10)

    def loss(sys_, q0):
        traj = sj.simulate(sys_, s0.replace(q=q0), 0.5, solver=solver, n_outputs=2, adjoint=adjoint, **kw)
        return jnp.sum(traj.q[-1] ** 2) + traj.u[-1, 1]

    q0 = jnp.array([0.5, -0.4])
    gsys, gq = eqx.filter_grad(lambda args: loss(*args))((system, q0))
    h = 1e-6
    fd = np.array([(loss(system, q0.at[i].add(h)) - loss(system, q0.at[i].add(-h))) / (2 * h) for i in range(2)])
    np.testing.assert_allclose(gq, fd, rtol=1e-5)
    mass = float(system.model.find("/bodyset/b1").mass)

    def with_mass(v):
        return eqx.tree_at(lambda s: s.model.find("/bodyset/b1").mass, system, np.asarray(v))

    fdm = (loss(with_mass(mass + h), q0) - loss(with_mass(mass - h), q0)) / (2 * h)
    np.testing.assert_allclose(gsys.model.find("/bodyset/b1").mass, fdm, rtol=1e-5)


def test_stage_adjoint_equals_differentiated_stage_loop():
    """The Runge-Kutta stages' hand-written reverse mode (default adjoint), which skips
    rejected steps, gives the gradient of the differentiated stage loop (direct adjoint)."""
    system = chain(3)
    s0 = system.default_state().replace(q=[0.9, -0.7, 0.4], u=[1.0, 0.0, -2.0])

    def loss(sys_, q0, adjoint):
        # adaptive RKM at 1e-6 rejects 23 of this run's 152 steps
        traj = sj.simulate(sys_, s0.replace(q=q0), 1.0, n_outputs=5, accuracy=1e-6, adjoint=adjoint, max_steps=4096)
        return jnp.sum(traj.q[1:] ** 2) + jnp.sum(traj.u[-1] ** 3)

    q0 = jnp.array([0.9, -0.7, 0.4])
    grads = {
        adjoint: eqx.filter_jit(eqx.filter_grad(lambda a, adj=adjoint: loss(*a, adj)))((system, q0))
        for adjoint in ("checkpoint", "direct")
    }
    (sys_c, q_c), (sys_d, q_d) = grads["checkpoint"], grads["direct"]
    np.testing.assert_allclose(q_c, q_d, rtol=1e-10)
    mass = lambda s: s.model.find("/bodyset/b1").mass  # noqa: E731
    np.testing.assert_allclose(mass(sys_c), mass(sys_d), rtol=1e-10)


def test_stage_adjoint_reuses_the_forward_searches():
    """Given a ``searched`` vector field, the stages' reverse mode makes each stage's
    searches once, in its forward rule, and gives them to that stage's VJP; the
    gradient is that of the differentiated stage loop (direct adjoint)."""
    traced = []

    def searched(t, y, args, searches):
        traced.append(searches is not None)
        if searches is None:  # a result derivatives hold fixed
            searches = {"scale": jax.lax.stop_gradient(1.0 + jnp.sum(y**2))}
        return -searches["scale"] * y + args * jnp.sin(t), searches

    def loss(y0, adjoint):
        direct = adjoint == "direct"
        solver = RungeKuttaMerson(scan_kind="bounded" if direct else None, searched=None if direct else searched)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: searched(t, y, a, None)[0]),
            solver,
            0.0,
            1.0,
            0.05,
            y0,
            args=jnp.asarray(0.3),
            max_steps=256,
            stepsize_controller=SimbodyController(1e-6, 1, 1),
            adjoint=diffrax.DirectAdjoint() if direct else diffrax.RecursiveCheckpointAdjoint(),
        )
        return jnp.sum(sol.ys[-1] ** 2)

    y0 = jnp.array([0.5, -0.3, 0.8])
    g = jax.jit(jax.grad(lambda y: loss(y, "checkpoint")))(y0)
    assert any(traced)
    np.testing.assert_allclose(g, jax.jit(jax.grad(lambda y: loss(y, "direct")))(y0), rtol=1e-12)


def test_forward_mode_gradient():
    system = chain(2)
    s0 = system.default_state()

    def final(q0):
        return sj.simulate(system, s0.replace(q=q0), 0.3, solver="rk4", dt=1e-2, n_outputs=2, adjoint="direct").q[-1]

    q0 = jnp.array([0.5, -0.4])
    J = jax.jacfwd(final)(q0)
    h = 1e-6
    fd = np.stack([(final(q0.at[i].add(h)) - final(q0.at[i].add(-h))) / (2 * h) for i in range(2)], 1)
    np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-9)


def test_vmapped_batch_equals_single_runs():
    system = chain(2)
    base = system.default_state()
    rng = np.random.default_rng(0)
    q0 = jnp.asarray(rng.uniform(-1, 1, (1000, 2)))
    states = jax.vmap(lambda q: base.replace(q=q))(q0)
    # four chunks on two threads, the last padded (900..999 and 100 copies of world 999)
    batch = sj.simulate_batch(system, states, 0.5, solver="rk4", dt=5e-3, n_outputs=2, chunk_size=300, workers=2)
    assert batch.q.shape == (1000, 2, 2) and batch.num_steps.shape == (1000,)
    assert batch.system is system
    for i in [0, 17, 650, 999]:
        single = sj.simulate(system, base.replace(q=q0[i]), 0.5, solver="rk4", dt=5e-3, n_outputs=2)
        np.testing.assert_allclose(batch.q[i], single.q, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="chunk_size"):
        sj.simulate_batch(system, states, 0.5, solver="rk4", dt=5e-3, chunk_size=0)


def test_result_code_without_throw():
    system = chain(2)
    s = system.default_state().replace(q=[1.0, 1.0])
    traj = sj.simulate(system, s, 5.0, max_steps=5, throw=False, n_outputs=2)
    assert int(traj.result) != 0
    with pytest.raises(Exception):
        jax.block_until_ready(sj.simulate(system, s, 5.0, max_steps=5, n_outputs=2).q)


def test_nonfinite_state_is_an_error_not_a_result():
    """A fixed step far beyond a stiff spring's stability limit overflows the state to
    NaN: simulate raises (or, with throw=False, reports NONFINITE_STATE) instead of
    returning NaNs as a success; a step within the limit is a success."""
    # (no gravity, so a world at the spring's rest length stays there)
    m = ball(gravity=(0.0, 0.0, 0.0)).model.add(
        sj.SpringGeneralizedForce("stiff", "height", stiffness=1e8, rest_length=0.5)
    )
    system = m.build()
    s = system.default_state()
    traj = sj.simulate(system, s, 1.0, solver="rk4", dt=1e-2, n_outputs=3, throw=False)
    assert int(traj.result) == sj.NONFINITE_STATE == 100
    assert not np.isfinite(np.asarray(traj.q)).all()
    with pytest.raises(Exception, match="non-finite"):
        jax.block_until_ready(sj.simulate(system, s, 1.0, solver="rk4", dt=1e-2, n_outputs=3).q)
    ok = sj.simulate(system, s, 0.01, solver="rk4", dt=1e-5, n_outputs=3)
    assert int(ok.result) == 0 and np.isfinite(np.asarray(ok.q)).all()
    # a vmapped batch flags only the world that failed: the second starts at rest
    states = jax.tree.map(lambda x: jnp.stack([x, x]), s)
    states = states.replace(q=states.q.at[1].set(0.5))
    dts = sj.simulate_batch(system, states, 1.0, solver="rk4", dt=1e-2, n_outputs=3, throw=False)
    assert np.asarray(dts.result).tolist() == [100, 0]
    np.testing.assert_array_equal(np.asarray(dts.q[1]), 0.5)


def ball(**model_kwargs):
    m = sj.Model("ball", **model_kwargs)
    m = m.add(sj.Body("ball", 1.0, (0, 0, 0), (0.001, 0.001, 0.001, 0, 0, 0)))
    # slider along Ground's y: rotate the joint frames so their x axis points up
    m = m.add(
        sj.SliderJoint(
            "drop",
            "/ground",
            "/bodyset/ball",
            orientation_in_parent=(0, 0, np.pi / 2),
            orientation_in_child=(0, 0, np.pi / 2),
            coordinates=(sj.Coordinate("height", 1.0, range=(-10, 10)),),
        )
    )
    return m.build()


def test_terminating_event_locates_impact():
    system = ball()
    s = system.default_state()
    hit = sj.Event(lambda sys_, st: st.q[0] - 0.1)
    traj = sj.simulate(system, s, 2.0, events=[hit], accuracy=1e-10, n_outputs=201)
    g = 9.80665
    t_hit = np.sqrt(2 * 0.9 / g)
    final = traj.final_state
    assert float(final.t) == pytest.approx(t_hit, abs=1e-8)
    assert float(final.q[0]) == pytest.approx(0.1, abs=1e-8)
    assert not np.all(np.asarray(traj.valid))


def test_bouncing_ball_with_restitution():
    system = ball()
    s = system.default_state()
    e = 0.8

    def bounce(sys_, st):
        return st.replace(u=-e * st.u)

    hit = sj.Event(lambda sys_, st: st.q[0], handler=bounce, direction=-1)
    traj = sj.simulate(system, s, 1.5, events=[hit], accuracy=1e-11, n_outputs=151)
    g = 9.80665
    t1 = np.sqrt(2.0 / g)
    v1 = g * t1
    t2 = t1 + 2 * e * v1 / g
    ev = np.asarray(traj.event_times)
    np.testing.assert_allclose(ev[:2], [t1, t2], rtol=1e-7)
    # peak height after the first bounce: (e v1)^2 / 2g
    assert float(np.max(traj.q[traj.t > t1 + 0.01, 0])) == pytest.approx((e * v1) ** 2 / (2 * g), rel=1e-3)


def test_stepping_api_reproduces_simulate(pendulum5):
    from simjax.control.stepping import Simulation

    s = pendulum5.default_state().replace(q=[0.4, -0.3, 0.2, 0.5, -0.6])
    sim = Simulation(pendulum5, s, max_step_size=0.05, accuracy=1e-10)
    sim.run_to(0.5)
    ref = sj.simulate(pendulum5, s, 0.5, rtol=1e-10, atol=1e-10, n_outputs=2)
    np.testing.assert_allclose(sim.state.q, ref.q[-1], atol=1e-7)
    assert sim.steps_taken == 10


def test_probe_window_and_waypoint_reset():
    """ArtiSynth manual §2.2.4: a probe sets x = 10 over [2, 4]; x was 0 before; resetting
    to a WayPoint at t = 1 restores x = 0."""
    from simjax.control.stepping import NumericInputProbe, Simulation

    m = sj.Model("probe", gravity=(0, 0, 0))
    m = m.add(sj.Body("b", 1.0, (0, 0, 0), (1, 1, 1, 0, 0, 0)))
    m = m.add(sj.SliderJoint("s", "/ground", "/bodyset/b"))
    m = m.add(sj.CoordinateActuator("x", "/jointset/s/s_coord_0", optimal_force=0.0))
    system = m.build()
    sim = Simulation(system, system.default_state(), max_step_size=0.5, controls=jnp.array([1.0]))
    sim.add_input_probe(NumericInputProbe("/forceset/x", "optimal_force", [2.0, 4.0], [10.0, 10.0]))
    sim.add_waypoint(1.0)
    sim.run_to(3.0)
    assert float(sim.system.model.find("/forceset/x").optimal_force) == 10.0
    assert float(sim.state.u[0]) > 0
    sim.reset(1.0)
    assert sim.time == 1.0
    assert float(sim.system.model.find("/forceset/x").optimal_force) == 0.0
    assert float(sim.state.u[0]) == 0.0


def test_adaptive_stepping_retries_and_aborts(pendulum5):
    from simjax.control.stepping import Agent, Simulation, StepAdjustment, StepError

    class Picky(Agent):
        """Rejects steps longer than 0.01 s, asking for half."""

        def apply(self, sim, t0, t1):
            return StepAdjustment(0.5, "too long") if t1 - t0 > 0.01 + 1e-12 else None

    s = pendulum5.default_state()
    sim = Simulation(pendulum5, s, max_step_size=0.04)
    sim.add_controller(Picky())
    sim.run_to(0.05)
    assert sim.steps_rejected > 0 and sim.time == pytest.approx(0.05)

    class Never(Agent):
        def apply(self, sim, t0, t1):
            return StepAdjustment(0.0, "never happy")

    sim = Simulation(pendulum5, s, max_step_size=0.04, min_step_size=1e-3)
    sim.add_controller(Never())
    with pytest.raises(StepError, match="never happy"):
        sim.run_to(0.05)
