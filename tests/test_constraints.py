"""Assembly and projection onto the constraint manifold, and constrained dynamics.

(Agreement of constrained udot and M with OpenSim is in ``test_dynamics_opensim``.)
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.forward import Context
from simjax.mechanics import assembly

I6 = (0.02, 0.03, 0.025, 0.0, 0.0, 0.0)


def fourbar(lock=False, prescribe=False, weld_to_ground=False):
    """A planar four-bar of pin joints (cut by the graph maker into a slave and a weld:
    6 weld equations for 1 loop in the plane, 3 of them redundant), plus a pendulum
    whose pin may be locked and a pendulum whose pin may be prescribed."""
    model = sj.Model("fourbar")
    for name, m, c in (
        ("a", 1.0, (0.25, 0, 0)),
        ("b", 1.5, (0.3, 0, 0)),
        ("c", 0.8, (0.2, 0, 0)),
        ("l", 1.0, (0, -0.3, 0)),
        ("p", 1.0, (0, -0.3, 0)),
    ):
        model = model.add(sj.Body(name, mass=m, mass_center=c, inertia=I6))
    model = model.add(sj.PinJoint("ja", "/ground", "/bodyset/a", coordinates=(sj.Coordinate("qa", 1.2),)))
    model = model.add(
        sj.PinJoint(
            "jb", "/bodyset/a", "/bodyset/b", location_in_parent=(0.5, 0, 0), coordinates=(sj.Coordinate("qb", -1.0),)
        )
    )
    model = model.add(
        sj.PinJoint(
            "jc", "/bodyset/b", "/bodyset/c", location_in_parent=(0.6, 0, 0), coordinates=(sj.Coordinate("qc", -1.5),)
        )
    )
    model = model.add(
        sj.PinJoint(
            "jd",
            "/bodyset/c",
            "/ground",
            location_in_parent=(0.4, 0, 0),
            location_in_child=(0.7, 0, 0),
            coordinates=(sj.Coordinate("qd", 0.5),),
        )
    )
    model = model.add(
        sj.PinJoint(
            "jl",
            "/ground",
            "/bodyset/l",
            location_in_parent=(2, 0, 0),
            coordinates=(sj.Coordinate("ql", 0.3, locked=lock),),
        )
    )
    f = sj.Sine(amplitude=0.5, omega=3.0, phase=0.2, offset=0.1)
    model = model.add(
        sj.PinJoint(
            "jp",
            "/ground",
            "/bodyset/p",
            location_in_parent=(-2, 0, 0),
            coordinates=(sj.Coordinate("qp", 0.0, prescribed=prescribe, prescribed_function=f if prescribe else None),),
        )
    )
    return model


@pytest.fixture(scope="module")
def system():
    return fourbar(lock=True, prescribe=True).build()


@eqx.filter_jit
def _assemble_batch(system, states, weights):
    def one(state):
        st, info = sj.assemble(system, state, weights=weights, tol=1e-12, throw=False, return_info=True)
        ctx = Context(system, st)
        rows = ctx.constraints
        return st, info, rows.perr, rows.verr, ctx.acc.udot_err, ctx.acc.multipliers

    return jax.vmap(one)(states)


def _states(system, rng, n, t=0.4, scale=0.3):
    base = system.default_state(t)
    q = base.q + rng.normal(size=(n, system.topology.nq)) * scale
    u = rng.normal(size=(n, system.topology.nu))
    return jax.vmap(lambda qq, uu: base.replace(q=qq, u=uu))(q, u)


def test_assembly_satisfies_all_constraints(system):
    rng = np.random.default_rng(0)
    states = _states(system, rng, 4)
    st, info, perr, verr, udoterr, lam = _assemble_batch(system, states, jnp.ones(system.topology.nq))
    assert np.all(info.success)
    assert np.abs(perr).max() < 1e-12 and np.abs(verr).max() < 1e-12
    # redundant equations (the planar loop's weld) are harmless: G udot = b holds
    assert np.abs(udoterr).max() < 1e-9 and np.all(np.isfinite(lam))
    tree = system.topology.tree
    ql = tree.coordinates["/jointset/jl/ql"]
    qp = tree.coordinates["/jointset/jp/qp"]
    # locked: held at its value, speed zero; prescribed: the function of time
    np.testing.assert_array_equal(st.q[:, ql.q], states.q[:, ql.q])
    np.testing.assert_allclose(st.u[:, ql.u], 0.0, atol=1e-14)
    t = 0.4
    np.testing.assert_allclose(st.q[:, qp.q], 0.5 * np.sin(3 * t + 0.2) + 0.1, atol=1e-13)
    np.testing.assert_allclose(st.u[:, qp.u], 1.5 * np.cos(3 * t + 0.2), atol=1e-13)


@eqx.filter_jit
def _qerr_jacobian(system, state):
    return jax.jacfwd(lambda q: assembly.position_errors(system, state.replace(q=q)))(state.q)


def test_assembly_is_the_weighted_nearest_state(system):
    rng = np.random.default_rng(1)
    states = _states(system, rng, 3)
    nq = system.topology.nq
    qa = system.topology.tree.coordinates["/jointset/ja/qa"].q
    w = np.ones(nq)
    w[qa] = 1e6
    w[system.topology.tree.coordinates["/jointset/jb/qb"].q] = 3.0
    st, info, *_ = _assemble_batch(system, states, jnp.asarray(w))
    assert np.all(info.success)
    # a stiff coordinate keeps its requested value; the others moved instead
    moved = np.abs(np.asarray(st.q - states.q))
    assert np.all(moved[:, qa] < 1e-5 * moved.max(axis=1))
    # first-order optimality: W (q* - q_req) is a combination of the constraint gradients
    fixed, _ = assembly.fixed_coordinates(system, jax.tree.map(lambda x: x[0], states))
    for k in range(3):
        state = jax.tree.map(lambda x: x[k], st)
        Gq = np.asarray(_qerr_jacobian(system, state))
        free = np.setdiff1d(np.arange(nq), fixed)
        g = (w * np.asarray(st.q[k] - states.q[k]))[free]
        A = Gq[:, free].T
        resid = g - A @ np.linalg.lstsq(A, g, rcond=None)[0]
        assert np.abs(resid).max() < 1e-8 * max(1.0, np.abs(g).max())


def test_assembly_failure_is_reported():
    model = sj.Model("unreachable")
    model = model.add(sj.Body("b", mass=1.0, mass_center=(0, -0.5, 0), inertia=I6))
    model = model.add(sj.PinJoint("j", "/ground", "/bodyset/b"))
    # a point 1 m from the pin cannot reach a Ground point 5 m away
    model = model.add(
        sj.PointConstraint(
            name="pc", body_1="/bodyset/b", body_2="/ground", location_body_1=(0, -1, 0), location_body_2=(0, -5, 0)
        )
    )
    system = model.build()
    state = system.default_state()
    st, info = sj.assemble(system, state, throw=False, return_info=True)
    assert not bool(info.success)
    assert float(info.max_qerr) == pytest.approx(4.0, rel=1e-6)  # the least-squares best
    with pytest.raises(Exception, match="assembly failed"):
        sj.assemble(system, state)


def test_quaternions_normalized_and_reported():
    model = sj.Model("quat", use_quaternions=True)
    model = model.add(sj.Body("b", mass=1.0, mass_center=(0.1, -0.5, 0), inertia=I6))
    model = model.add(sj.BallJoint("ball", "/ground", "/bodyset/b"))
    system = model.build()
    assert system.q_names[:4] == tuple(f"/jointset/ball/quaternion_{c}" for c in "wxyz")
    state = system.default_state().replace(q=jnp.array([2.0, 0.2, -0.4, 0.6]), u=jnp.array([0.3, -0.2, 0.1]))
    err = sj.constraint_errors(system, state)
    assert float(err["qerr"][-1]) == pytest.approx(np.linalg.norm([2.0, 0.2, -0.4, 0.6]) - 1.0)
    st = sj.assemble(system, state)
    np.testing.assert_allclose(np.linalg.norm(st.q[:4]), 1.0, atol=1e-14)
    # the orientation is the same (rotations normalize the quaternion they are given)
    np.testing.assert_allclose(st.q[:4], state.q[:4] / np.linalg.norm(state.q[:4]), atol=1e-14)
    # dynamics do not depend on the quaternion's scale
    np.testing.assert_allclose(sj.forward_dynamics(system, state), sj.forward_dynamics(system, st), atol=1e-12)


def test_project_returns_to_the_manifold(system):
    rng = np.random.default_rng(2)
    st = _assemble_batch(system, _states(system, rng, 1), jnp.ones(system.topology.nq))[0]
    state = jax.tree.map(lambda x: x[0], st)
    nudged = state.replace(
        q=state.q + rng.normal(size=state.q.shape) * 1e-4, u=state.u + rng.normal(size=state.u.shape) * 1e-3
    )
    before = sj.constraint_errors(system, nudged)
    after = sj.constraint_errors(system, sj.project(system, nudged))
    assert np.abs(before["qerr"]).max() > 1e-6
    assert np.abs(after["qerr"]).max() < 1e-11
    assert np.abs(after["uerr"]).max() < 1e-13


def test_assembly_gradient_matches_finite_differences():
    """d(assembled q)/d(requested q) and d(assembled q)/d(a link length), by the implicit
    function theorem, against central differences."""
    model = fourbar()
    system = model.build()
    base = system.default_state()

    def assembled(system, q_req):
        return sj.assemble(system, base.replace(q=q_req), tol=1e-13).q

    q0 = base.q
    direction = jnp.asarray(np.random.default_rng(3).normal(size=q0.shape))
    jvp = jax.jit(lambda s, q, d: jax.jvp(lambda qq: assembled(s, qq), (q,), (d,))[1])
    f = jax.jit(assembled)
    h = 1e-6
    fd = (f(system, q0 + h * direction) - f(system, q0 - h * direction)) / (2 * h)
    np.testing.assert_allclose(jvp(system, q0, direction), fd, atol=1e-7)

    def by_length(length):
        m = model.set("/jointset/jb/a_offset", translation=jnp.stack([length, 0.0, 0.0]))
        return assembled(m.build(), q0)

    g = jax.jit(jax.jacfwd(by_length))(0.5)
    fd = (jax.jit(by_length)(0.5 + h) - jax.jit(by_length)(0.5 - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-7)


def test_constrained_dynamics_respect_constraints_and_energy(system):
    """On the manifold, G udot = b, and the multipliers do no work: the passive four-bar
    and the locked pendulum keep their energy (the prescribed pendulum is driven)."""
    rng = np.random.default_rng(4)
    st = _assemble_batch(system, _states(system, rng, 2), jnp.ones(system.topology.nq))[0]
    p = system.topology.tree.coordinates["/jointset/jp/qp"].u
    udot_err, M, tau = _power_terms(system, st)
    for k in range(2):
        # dE/dt = u . (M udot + C - g) = -u . G^T lambda = 0 where G u = 0
        power = np.delete(np.asarray(st.u[k]) * np.asarray(tau[k]), p).sum()
        assert power == pytest.approx(0.0, abs=1e-10 * float(jnp.abs(M[k]).max()))
        assert np.abs(udot_err[k]).max() < 1e-9


@eqx.filter_jit
def _power_terms(system, states):
    def one(state):
        acc = sj.accelerations(system, state)
        return acc.udot_err, sj.mass_matrix(system, state), sj.inverse_dynamics(system, state, acc.udot)

    return jax.vmap(one)(states)


def test_loop_stays_closed_over_a_long_simulation():
    """A passive four-bar (a loop cut into a slave and a weld) integrated for 10 s at
    accuracy 1e-6 with projection: the position errors stay below the tolerance."""
    system = fourbar().build()
    state = sj.assemble(system, system.default_state(), tol=1e-12)
    traj = sj.simulate(system, state, 10.0, accuracy=1e-6, n_outputs=51)

    @jax.jit
    def errors(q, u):
        e = sj.constraint_errors(system, state.replace(q=q, u=u))
        return jnp.abs(e["qerr"]).max(), jnp.abs(e["uerr"]).max()

    qerr, uerr = jax.vmap(errors)(traj.q, traj.u)
    assert float(qerr.max()) < 1e-6 and float(uerr.max()) < 1e-5
    assert float(jnp.abs(traj.u).max()) > 0.1  # it moves


def test_projected_solves_run_under_every_adjoint():
    """The projection wrapper works under the direct adjoint too (Diffrax sets its
    ``scan_kind``), with the same result as the default adjoint."""
    system = fourbar().build()
    state = sj.assemble(system, system.default_state(), tol=1e-12)
    runs = [
        sj.simulate(system, state, 0.2, solver="rk4", dt=0.01, n_outputs=2, adjoint=a, max_steps=32).q[-1]
        for a in ("checkpoint", "direct")
    ]
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12, atol=1e-14)
