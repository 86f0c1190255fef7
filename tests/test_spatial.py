"""Spatial algebra: rotations, quaternions, transforms, spatial vectors and inertia."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simjax import spatial
from simjax.mechanics.dynamics import Inertias

RNG = np.random.default_rng(0)
N = 64


def _rotations(n=N):
    return np.asarray(spatial.xyz_body_rotation(RNG.uniform(-np.pi, np.pi, (n, 3))))


def test_mat_helpers_match_numpy():
    a, b, v = RNG.normal(size=(N, 3, 3)), RNG.normal(size=(N, 3, 3)), RNG.normal(size=(N, 3))
    np.testing.assert_allclose(spatial.mat_mul(a, b), a @ b, atol=1e-14)
    np.testing.assert_allclose(spatial.mat_vec(a, v), np.einsum("nij,nj->ni", a, v), atol=1e-14)


@pytest.mark.parametrize(
    "name, shapes, want",
    [
        ("mat_mul", ((4, 3, 6), (1, 6, 2)), lambda a, b: a @ b),
        ("mat_vec", ((4, 6, 3), (4, 3)), lambda a, v: jnp.einsum("...ij,...j->...i", a, v)),
        ("mat_tvec", ((1, 3, 6), (4, 3)), lambda a, v: jnp.einsum("...ji,...j->...i", a, v)),
    ],
)
def test_mat_helpers_derivatives(name, shapes, want):
    """The small-matrix products' written-out derivatives, forward, reverse and second
    order, equal those of the plain products (operands broadcast over a leading axis)."""
    fn = getattr(spatial, name)
    x, y = (jnp.asarray(RNG.normal(size=s)) for s in shapes)
    np.testing.assert_allclose(fn(x, y), want(x, y), atol=1e-14)
    for jac in (jax.jacfwd, jax.jacrev):
        for g, w in zip(jac(fn, argnums=(0, 1))(x, y), jac(want, argnums=(0, 1))(x, y)):
            np.testing.assert_allclose(g, w, atol=1e-14)
    square = lambda f: lambda x, y: jnp.sum(f(x, y) ** 3)  # noqa: E731
    for g, w in zip(jax.hessian(square(fn), argnums=(0, 1))(x, y), jax.hessian(square(want), argnums=(0, 1))(x, y)):
        for gi, wi in zip(g, w):
            np.testing.assert_allclose(gi, wi, atol=1e-11)
    # a constant operand (a symbolic zero tangent) is fine
    np.testing.assert_allclose(jax.jacrev(fn)(x, y), jax.jacrev(want)(x, y), atol=1e-14)


def test_skew_unskew():
    v, u = RNG.normal(size=(N, 3)), RNG.normal(size=(N, 3))
    np.testing.assert_allclose(spatial.mat_vec(spatial.skew(v), u), np.cross(v, u), atol=1e-14)
    np.testing.assert_allclose(spatial.unskew(spatial.skew(v)), v, atol=1e-15)


def test_cross_and_its_derivatives():
    """``spatial.cross`` (broadcasting) equals numpy's, and its written-out derivative,
    forward and reverse, equals that of ``jnp.cross``."""
    a, b = RNG.normal(size=(N, 1, 3)), RNG.normal(size=(1, 4, 3))
    np.testing.assert_allclose(spatial.cross(a, b), np.cross(a, b), atol=1e-14)
    x, y = jnp.asarray(RNG.normal(size=(5, 3))), jnp.asarray(RNG.normal(size=(5, 3)))
    for jac in (jax.jacfwd, jax.jacrev):
        got = jac(spatial.cross, argnums=(0, 1))(x, y)
        want = jac(jnp.cross, argnums=(0, 1))(x, y)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-15)
    # second derivative (the derivative of the written-out derivative)
    hess = jax.hessian(lambda v: jnp.sum(spatial.cross(v[:3], v[3:]) ** 2))(jnp.concatenate([x[0], y[0]]))
    want = jax.hessian(lambda v: jnp.sum(jnp.cross(v[:3], v[3:]) ** 2))(jnp.concatenate([x[0], y[0]]))
    np.testing.assert_allclose(hess, want, atol=1e-13)


def test_xyz_body_rotation_is_the_body_fixed_sequence():
    a = RNG.uniform(-np.pi, np.pi, (N, 3))
    R = np.asarray(spatial.xyz_body_rotation(a))
    ref = np.stack([np.asarray(spatial.rotation_x(x) @ spatial.rotation_y(y) @ spatial.rotation_z(z)) for x, y, z in a])
    np.testing.assert_allclose(R, ref, atol=1e-15)
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
    # angles back (middle angle within +-pi/2)
    b = a.copy()
    b[:, 1] = RNG.uniform(-1.5, 1.5, N)
    np.testing.assert_allclose(spatial.xyz_body_angles(spatial.xyz_body_rotation(b)), b, atol=1e-12)


def test_rotation_about_axis():
    axis = RNG.normal(size=(N, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    th = RNG.uniform(-3, 3, N)
    R = np.asarray(spatial.rotation_about_axis(axis, th))
    np.testing.assert_allclose(np.einsum("nij,nj->ni", R, axis), axis, atol=1e-14)  # the axis is fixed
    np.testing.assert_allclose(np.trace(R, axis1=1, axis2=2), 1 + 2 * np.cos(th), atol=1e-14)
    np.testing.assert_allclose(
        spatial.rotation_about_axis(np.array([0.0, 0, 1]), 0.3), spatial.rotation_z(0.3), atol=1e-16
    )


def test_quaternions():
    R = _rotations()
    q = np.asarray(spatial.rotation_to_quat(R))
    assert np.all(q[:, 0] >= 0)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(spatial.quat_to_rotation(q), R, atol=1e-14)
    # scale does not matter (normalized inside), the product composes rotations
    np.testing.assert_allclose(spatial.quat_to_rotation(3.0 * q), R, atol=1e-14)
    R2 = _rotations()
    q2 = np.asarray(spatial.rotation_to_quat(R2))
    np.testing.assert_allclose(spatial.quat_to_rotation(spatial.quat_multiply(q, q2)), R @ R2, atol=1e-13)
    np.testing.assert_allclose(spatial.quat_normalize(2 * q), q, atol=1e-15)


def test_quaternion_rate_matches_angular_velocity():
    """qdot = N(q) w with w in the parent frame: dR/dt = [w]x R."""
    q = np.asarray(spatial.rotation_to_quat(_rotations()))
    w = RNG.normal(size=(N, 3))
    qdot = spatial.mat_vec(spatial.quat_derivative_matrix(q), w)
    _, dR = jax.jvp(spatial.quat_to_rotation, (jnp.asarray(q),), (qdot,))
    np.testing.assert_allclose(dR, spatial.skew(w) @ spatial.quat_to_rotation(q), atol=1e-13)


def test_transforms():
    X1 = (_rotations(), RNG.normal(size=(N, 3)))
    X2 = (_rotations(), RNG.normal(size=(N, 3)))
    p = RNG.normal(size=(N, 3))
    X12 = spatial.compose(X1, X2)
    np.testing.assert_allclose(
        spatial.transform_point(X12, p), spatial.transform_point(X1, spatial.transform_point(X2, p)), atol=1e-13
    )
    Xi = spatial.compose(X1, spatial.inverse(X1))
    np.testing.assert_allclose(Xi[0], np.broadcast_to(np.eye(3), (N, 3, 3)), atol=1e-14)
    np.testing.assert_allclose(Xi[1], 0.0, atol=1e-14)
    np.testing.assert_allclose(spatial.transform_vector(X1, p), np.einsum("nij,nj->ni", X1[0], p), atol=1e-14)
    R, t = spatial.identity_transform()
    np.testing.assert_array_equal(R, np.eye(3))
    np.testing.assert_array_equal(t, np.zeros(3))


def test_spatial_vectors():
    X = (_rotations(), RNG.normal(size=(N, 3)))
    m, f, v = RNG.normal(size=(N, 6)), RNG.normal(size=(N, 6)), RNG.normal(size=(N, 6))
    Xm = np.asarray(spatial.motion_transform(X))
    Xf = np.asarray(spatial.force_transform(X))
    # power is frame independent: (Xf f) . (Xm m) = f . m
    np.testing.assert_allclose(
        np.einsum("ni,ni->n", np.einsum("nij,nj->ni", Xf, f), np.einsum("nij,nj->ni", Xm, m)),
        np.einsum("ni,ni->n", f, m),
        atol=1e-12,
    )
    # the cross products are adjoint: (v x m) . f = -m . (v x* f)
    np.testing.assert_allclose(
        np.einsum("ni,ni->n", spatial.motion_cross(v, m), f),
        -np.einsum("ni,ni->n", m, spatial.force_cross(v, f)),
        atol=1e-12,
    )
    # moving the reference point of a motion vector
    r = RNG.normal(size=(N, 3))
    shifted = np.asarray(spatial.shift_motion(m, r))
    np.testing.assert_allclose(shifted[:, 3:], m[:, 3:] + np.cross(m[:, :3], r), atol=1e-14)


def test_spatial_inertia_forms_agree():
    mass = RNG.uniform(0.5, 2, N)
    com = RNG.normal(size=(N, 3))
    i6 = np.concatenate([RNG.uniform(1, 2, (N, 3)), RNG.normal(size=(N, 3)) * 0.1], 1)
    Ic = np.asarray(spatial.inertia_matrix(i6))
    np.testing.assert_allclose(Ic, np.swapaxes(Ic, -1, -2))
    I6x6 = np.asarray(spatial.spatial_inertia(mass, com, Ic))
    c = com
    J = Ic + mass[:, None, None] * (np.einsum("ni,ni->n", c, c)[:, None, None] * np.eye(3) - c[:, :, None] * c[:, None])
    inert = Inertias(jnp.asarray(mass), jnp.asarray(mass[:, None] * c), jnp.asarray(J))
    np.testing.assert_allclose(inert.matrix(), I6x6, atol=1e-13)
    V = RNG.normal(size=(N, 6))
    np.testing.assert_allclose(inert.apply(V), np.einsum("nij,nj->ni", I6x6, V), atol=1e-13)
    np.testing.assert_allclose(Inertias.unstack(inert.stacked()).J, J, atol=0)


@pytest.mark.parametrize("fn", [spatial.xyz_body_rotation, spatial.quat_to_rotation])
def test_shape_polymorphic_and_vmappable(fn):
    x = RNG.normal(size=(2, 5, 4 if fn is spatial.quat_to_rotation else 3))
    direct = fn(x)
    assert direct.shape == (2, 5, 3, 3)
    np.testing.assert_allclose(jax.vmap(jax.vmap(fn))(x), direct, atol=1e-15)
