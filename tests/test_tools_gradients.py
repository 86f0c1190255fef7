"""Derivatives through the tools (``simjax.tools.gradients``): the inverse-kinematics
optimum and the static-optimization optimum differentiated by the implicit function
theorem, checked against finite differences of the solvers themselves, and batches of
trials under ``vmap``.

The IK data are arm26's markers along a known motion plus 1.5 mm of noise, so that the
optimum leaves residuals (its Hessian is not the Gauss-Newton one); the elbow is
clamped below the motion's last angle, so that a bound is active in some frame.
Finite differences are five-point central differences of the solvers' results.

Static optimization from a model (``static_optimization_problem``) is differentiated
with respect to the model's properties, on gait10dof18musc with reserves.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.tools import (
    marker_positions,
    scaled_system,
    solve_inverse_kinematics,
    solve_static_optimization,
    static_optimization_problem,
)

jax.config.update("jax_enable_x64", True)

NAMES = ("r_acromion", "r_humerus_epicondyle", "r_radius_styloid")
WEIGHTS = np.array([1.0, 2.0, 1.0])
ELBOW = "/jointset/r_elbow/r_elbow_flex"
OFFSET = "/jointset/r_elbow/r_humerus_offset"  # the elbow's frame on the humerus
UPPER = 1.3  # the elbow's upper bound (rad): the motion reaches 1.4


def _five_point(f, h):
    """``df/dx`` at 0 of ``f(x)`` by a five-point central difference."""
    f1, f_1, f2, f_2 = (np.asarray(f(k * h)) for k in (1, -1, 2, -2))
    return (8.0 * (f1 - f_1) - (f2 - f_2)) / (12.0 * h)


@pytest.fixture(scope="module")
def arm():
    model = sj.models.load("arm26")
    model = model.set(ELBOW, clamped=True, range=np.array([0.0, UPPER]))
    # scaled once with unit factors: the translation functions wrapped for scaling
    system = scaled_system(model.build(), {"r_humerus": 1.0}, muscle_lengths=False)
    t = np.linspace(0.0, 0.2, 5)
    q = np.tile(np.asarray(system.default_state().q), (len(t), 1))
    tree = system.topology.tree
    q[:, tree.coordinates["/jointset/r_shoulder/r_shoulder_elev"].q] = 0.3 + 0.4 * np.sin(6 * t)
    q[:, tree.coordinates[ELBOW].q] = 0.5 + 0.9 * t / 0.2
    x = np.asarray(marker_positions(system, NAMES, q))
    rng = np.random.default_rng(0)
    trials = np.stack([x + rng.normal(0.0, 1.5e-3, x.shape) for _ in range(2)])

    def solve(theta, k, positions):
        """The optimum and its marker error for the elbow frame's y offset ``theta``
        (m) and the humerus's scale factor ``k``."""
        s = eqx.tree_at(
            lambda s: s.model.find(OFFSET).translation,
            system,
            jnp.asarray(system.find(OFFSET).translation).at[1].set(theta),
        )
        s = scaled_system(s, {"r_humerus": k}, muscle_lengths=False)
        q = solve_inverse_kinematics(s, NAMES, positions, WEIGHTS, tol=1e-12)
        error = jnp.sum(WEIGHTS * jnp.sum((marker_positions(s, NAMES, q) - positions) ** 2, axis=-1))
        return (q, error), (q, error)

    # one program for every check: the values and the reverse-mode derivatives with
    # respect to (theta, k), of both trials (vmap)
    program = jax.jit(jax.vmap(jax.jacrev(solve, argnums=(0, 1), has_aux=True), in_axes=(None, None, 0)))
    theta0 = float(np.asarray(system.find(OFFSET).translation)[1])
    return dict(
        system=system, tree=tree, trials=trials, p0=(theta0, 1.0), run=lambda theta, k: program(theta, k, trials)
    )


def test_ik_optimum_has_an_active_bound_and_residuals(arm):
    _, (q, error) = arm["run"](*arm["p0"])
    elbow = np.asarray(q)[..., arm["tree"].coordinates[ELBOW].q]
    assert np.all(elbow <= UPPER + 1e-12) and np.sum(np.isclose(elbow, UPPER, rtol=0, atol=1e-12)) >= 2
    assert np.all(np.asarray(error) > 1e-6)  # the markers are not matched exactly


def test_vmap_over_trials_equals_separate_solves(arm):
    _, (q_batch, _) = arm["run"](*arm["p0"])
    for i, positions in enumerate(arm["trials"]):
        q = solve_inverse_kinematics(arm["system"], NAMES, positions, WEIGHTS, tol=1e-12)
        np.testing.assert_allclose(q_batch[i], q, rtol=0, atol=1e-10)


@pytest.mark.parametrize("argnum, h", [(0, 2e-3), (1, 4e-3)], ids=["joint_offset", "scale_factor"])
def test_ik_gradients_match_finite_differences(arm, argnum, h):
    """``dq*/dp`` and the gradient of the marker error at the optimum, for a joint
    frame's offset and a segment's scale factor, both trials. (The steps ``h`` are
    large: the solver's optimum is resolved to about 1e-9, as its merit's round-off
    allows.)"""
    (dq, derror), _ = arm["run"](*arm["p0"])
    dq, derror = np.asarray(dq[argnum]), np.asarray(derror[argnum])

    def at(h):
        p = list(arm["p0"])
        p[argnum] += h
        _, (q, error) = arm["run"](*p)
        return np.asarray(q), np.asarray(error)

    fd_q = _five_point(lambda dh: at(dh)[0], h)
    fd_error = _five_point(lambda dh: at(dh)[1], h)
    assert np.max(np.abs(dq)) > 1e-2 and np.all(np.abs(derror) > 1e-6)  # not trivially zero
    np.testing.assert_allclose(dq, fd_q, rtol=0, atol=1e-6 * np.max(np.abs(fd_q)))
    np.testing.assert_allclose(derror, fd_error, rtol=1e-6)


def _so_problem():
    """Three frames of 2 equations in 5 controls within [0, 1], feasible, with
    controls at their lower bound at the optimum."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 2, 5))
    b = np.einsum("nmk,nk->nm", A, rng.uniform(0.0, 0.6, (3, 5)))
    return A, b, np.zeros(5), np.ones(5)


@pytest.mark.parametrize("exponent", [2.0, 3.0])
def test_static_optimization_gradients_match_finite_differences(exponent):
    A, b, lower, upper = _so_problem()

    def x_of(A, b):
        return solve_static_optimization(A, b, lower, upper, exponent)[0]

    x, viol = solve_static_optimization(A, b, lower, upper, exponent)
    assert np.max(viol) < 1e-12 * (1.0 + np.max(np.abs(b)))  # (the solve's own stop)
    assert np.any(np.abs(np.asarray(x)) < 1e-9) and np.all(np.asarray(x) > -1e-12)  # active lower bounds
    dA, db = jax.jit(jax.jacrev(x_of, argnums=(0, 1)))(A, b)
    if exponent == 2.0:  # forward mode too
        np.testing.assert_allclose(jax.jit(jax.jacfwd(x_of, argnums=1))(A, b), db, atol=1e-12)
    frames = np.arange(3)
    for j in range(2):
        fd = _five_point(lambda h: np.asarray(x_of(A, b + h * (np.arange(2) == j))), 1e-4)
        np.testing.assert_allclose(db[frames, :, frames, j], fd, atol=1e-7)
    mask = np.zeros(A.shape)
    mask[:, 1, 2] = 1.0
    fd = _five_point(lambda h: np.asarray(x_of(A + h * mask, b)), 1e-4)
    np.testing.assert_allclose(dA[frames, :, frames, 1, 2], fd, atol=1e-7)
    # a control at its bound stays there
    held = np.abs(np.asarray(x)) < 1e-9
    assert np.all(np.abs(np.asarray(db)[frames, :, frames][held]) < 1e-12)


def test_static_optimization_vmaps_over_trials():
    A, b, lower, upper = _so_problem()
    batch = jax.jit(jax.vmap(lambda A, b: solve_static_optimization(A, b, lower, upper)[0]))(
        np.stack([A, 2 * A]), np.stack([b, b])
    )
    for i, k in enumerate((1.0, 2.0)):
        np.testing.assert_allclose(batch[i], solve_static_optimization(k * A, b, lower, upper)[0], atol=1e-12)


def test_scaled_system_matches_scale_model():
    """Every property ``scaled_system`` scales equals ``scale_model``'s (arm26 without
    its muscles, whose lengths ``scale_model`` gets from compiled path geometry), but
    the inertia of a non-uniformly scaled body (see ``scaled_system``)."""
    from simjax.tools.dynamics import exclude_forces
    from simjax.tools.scaling import scale_model

    model = exclude_forces(sj.models.load("arm26"), ["All"])[0]
    factors = {"r_humerus": np.full(3, 1.1), "r_ulna_radius_hand": np.array([0.9, 1.2, 1.05])}
    ours = scaled_system(model.build(), factors).model
    ref = scale_model(model, factors)
    ulna = "/bodyset/r_ulna_radius_hand"
    assert not np.allclose(ours.find(ulna).inertia, ref.find(ulna).inertia)
    ours = eqx.tree_at(lambda m: m.find(ulna).inertia, ours, ref.find(ulna).inertia)
    leaves, ref_leaves = (jax.tree_util.tree_leaves_with_path(m) for m in (ours, ref))
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(ref)
    for (key, a), (_, b) in zip(leaves, ref_leaves):
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-16, err_msg=jax.tree_util.keystr(key)
        )


# -- static optimization as a function of the model -------------------------------------------

MUSCLE = "/forceset/iliopsoas_r"
SHANK = "/bodyset/tibia_r"
# the muscle's max_isometric_force and optimal_fiber_length (in A: its strength), the
# shank's mass (in b: the muscle-free system's inverse dynamics)
PROPERTIES = (
    lambda s: s.model.find(MUSCLE).max_isometric_force,
    lambda s: s.model.find(MUSCLE).optimal_fiber_length,
    lambda s: s.model.find(SHANK).mass,
)


@pytest.fixture(scope="module")
def gait():
    """gait10dof18musc with reserves (1 N m at the legs' joints, strong at the pelvis
    and at the lumbar joint no muscle crosses) and two trials of 3 frames of swinging
    legs, solved by one program: per trial the cost (sum of squared controls), the
    controls, and their derivatives with respect to ``PROPERTIES`` (forward mode)."""
    model = sj.models.load("gait10dof18musc")
    for path in model.build().coordinate_paths:
        name = path.rsplit("/", 1)[-1]
        strength = 1000.0 if name.startswith("pelvis") else 100.0 if name.startswith("lumbar") else 1.0
        model = model.add(sj.CoordinateActuator(f"{name}_reserve", coordinate=path, optimal_force=strength))
    system = model.build()
    tree, s0 = system.topology.tree, system.default_state()
    t = np.linspace(0.0, 0.3, 3)
    trials = []
    for phase in (0.0, 0.7):
        q = np.tile(np.asarray(s0.q), (len(t), 1))
        u, udot = np.zeros((len(t), tree.nu)), np.zeros((len(t), tree.nu))
        for name, mean, amplitude, w in (
            ("hip_flexion_r", 0.3, 0.3, 5.0),
            ("knee_angle_r", -0.6, 0.4, 7.0),
            ("ankle_angle_r", 0.0, 0.2, 6.0),
            ("hip_flexion_l", -0.1, 0.3, 5.0),
            ("knee_angle_l", -0.3, 0.3, 7.0),
            ("ankle_angle_l", 0.1, 0.2, 6.0),
        ):
            c = tree.coordinates[system.coordinate_path(name)]
            q[:, c.q] = mean + amplitude * np.sin(w * t + phase)
            u[:, c.u] = amplitude * w * np.cos(w * t + phase)
            udot[:, c.u] = -amplitude * w**2 * np.sin(w * t + phase)
        trials.append((q, u, udot))
    q, u, udot = (np.stack(x) for x in zip(*trials))

    def with_properties(theta):
        return eqx.tree_at(lambda s: [p(s) for p in PROPERTIES], system, list(theta))

    def solve(theta, q, u, udot):
        states = jax.vmap(lambda t, q, u: s0.replace(t=t, q=q, u=u))(jnp.asarray(t), q, u)
        x, _ = solve_static_optimization(*static_optimization_problem(with_properties(theta), states, udot))
        return jnp.sum(x**2), x

    def derivatives(theta, q, u, udot):
        def push(v):
            return jax.jvp(lambda theta: solve(theta, q, u, udot), (theta,), (v,))

        return jax.vmap(push, out_axes=(None, -1))(jnp.eye(len(theta)))

    program = jax.jit(jax.vmap(derivatives, in_axes=(None, 0, 0, 0)), compiler_options=sj.compiler_options())
    theta0 = np.asarray([float(p(system)) for p in PROPERTIES])
    return dict(
        system=system,
        theta0=theta0,
        with_properties=with_properties,
        run=lambda theta, order=[0, 1]: program(theta, q[order], u[order], udot[order]),
    )


def test_static_optimization_problem_takes_the_systems_leaves(gait):
    """The muscle-free and rigid-tendon systems take every leaf from the system (traced
    ones included), whether made from a concrete system before (kept, and given the
    traced leaves) or from the traced system itself."""
    from simjax.tools import optimization

    system, theta0 = gait["system"], gait["theta0"]
    optimization._DERIVED.clear()
    made = optimization._derived_systems(system, True)  # (kept)
    for derived in made:
        assert np.all(optimization._leaf_sources(derived, system) >= 0)
    derived_at = eqx.filter_jit(lambda theta: optimization._derived_systems(gait["with_properties"](theta), True))
    theta = theta0 * np.array([1.1, 0.9, 1.2])
    kept = derived_at(theta)
    optimization._DERIVED.clear()
    fresh = derived_at(theta)
    expected = (
        optimization._muscle_off_system(gait["with_properties"](theta)),
        optimization._rigid_system(gait["with_properties"](theta)),
    )
    for a, b, c in zip(kept, fresh, expected):
        assert a.topology is b.topology is c.topology
        for x, y, z in zip(*map(jax.tree_util.tree_leaves, (a, b, c))):
            np.testing.assert_array_equal(x, z)
            np.testing.assert_array_equal(y, z)
    assert float(kept[1].model.find(MUSCLE).max_isometric_force) == theta[0]
    assert float(kept[0].model.find(SHANK).mass) == theta[2]
    optimization._derived_systems(system, True)  # kept again, for the program below


def test_static_optimization_problem_vmaps_over_trials(gait):
    """The trials of a batch are solved independently: swapped, the same solutions."""
    (cost, x), (dcost, dx) = gait["run"](gait["theta0"])
    (cost_r, x_r), (dcost_r, dx_r) = gait["run"](gait["theta0"], [1, 0])
    for swapped, value in ((x_r, x), (cost_r, cost), (dx_r, dx), (dcost_r, dcost)):
        np.testing.assert_allclose(swapped, np.asarray(value)[::-1], rtol=1e-12, atol=1e-14)
    assert not np.allclose(x[0], x[1], atol=1e-3)


def test_static_optimization_gradients_wrt_model_properties(gait):
    """The derivatives of the cost and of the muscle's activation (inside its bounds at
    every frame) with respect to ``PROPERTIES`` against five-point central
    differences, both trials."""
    k = gait["system"].actuator_paths.index(MUSCLE)
    theta0 = gait["theta0"]
    (_, x), (dcost, dx) = gait["run"](theta0)
    activation, dactivation = np.asarray(x)[..., k], np.asarray(dx)[..., k, :]
    assert np.all(activation > 0.01 + 1e-3) and np.all(activation < 1.0)  # (min_control 0.01)
    for j in range(len(theta0)):

        def at(h):
            (cost, x), _ = gait["run"](theta0 + h * (np.arange(len(theta0)) == j))
            return np.concatenate([np.asarray(cost)[:, None], np.asarray(x)[..., k]], axis=1)

        fd = _five_point(at, 1e-3 * theta0[j])
        assert np.all(np.abs(fd) > 1e-6)  # not trivially zero
        np.testing.assert_allclose(dcost[:, j], fd[:, 0], rtol=1e-6)
        np.testing.assert_allclose(dactivation[..., j], fd[:, 1:], rtol=0, atol=1e-6 * np.max(np.abs(fd[:, 1:])))
