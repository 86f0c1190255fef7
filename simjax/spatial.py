"""Spatial algebra: rotations, quaternions, rigid transforms, spatial vectors, inertia.

Pure functions on arrays, shape-polymorphic over leading batch axes and vmap-friendly.
Knows nothing of components.

Conventions (Simbody's and Featherstone's):

- A rotation ``R_AB`` is a 3x3 matrix whose columns are B's axes expressed in A, so
  ``v_A = R_AB @ v_B``.
- A rigid transform ``X_AB = (R_AB, p_AB)`` is the pose of frame B in frame A:
  ``p_A = R_AB @ p_B + p_AB``. Transforms are pairs of arrays ``(R, p)``.
- Spatial vectors stack (angular; linear): a motion vector is ``(w, v)``, a force
  vector is ``(torque, force)``, both of shape ``(..., 6)``.
- Quaternions are ``(w, x, y, z)`` with the scalar first, as in Simbody.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

__all__ = [
    "mat_mul",
    "mat_vec",
    "mat_tvec",
    "skew",
    "cross",
    "unskew",
    "rotation_about_axis",
    "rotation_x",
    "rotation_y",
    "rotation_z",
    "xyz_body_rotation",
    "xyz_body_angles",
    "quat_to_rotation",
    "rotation_to_quat",
    "quat_multiply",
    "quat_normalize",
    "quat_derivative_matrix",
    "compose",
    "inverse",
    "transform_point",
    "transform_vector",
    "identity_transform",
    "motion_cross",
    "force_cross",
    "motion_transform",
    "force_transform",
    "spatial_inertia",
    "inertia_matrix",
    "shift_motion",
]


def _bilinear(summed):
    """Decorator: a small-matrix product (written as a sum of broadcast products, which
    XLA fuses with its neighbours) whose derivative is ``summed(da, b) + summed(a, db)``,
    ``summed`` being the same product as one broadcast product summed over the inner
    axis. Reverse mode transposes each term into one fused product, where the
    unrolled sum's terms transpose to a padded copy of a column or row each."""

    def decorate(product):
        product = jax.custom_jvp(product)

        def jvp(primals, tangents):
            (a, b), (da, db) = primals, tangents
            out = product(a, b)
            terms = []
            if not isinstance(da, SymbolicZero):
                terms.append(summed(da, b))
            if not isinstance(db, SymbolicZero):
                terms.append(summed(a, db))
            return out, functools.reduce(jnp.add, terms) if terms else jnp.zeros_like(out)

        product.defjvp(jvp, symbolic_zeros=True)
        return product

    return decorate


@_bilinear(lambda a, b: (a[..., :, :, None] * b[..., None, :, :]).sum(-2))
def mat_mul(a, b):
    """Batched product of small matrices, ``a @ b`` over leading axes.

    Written as a sum of broadcast products over the (small, static) inner dimension,
    elementwise only, so that XLA fuses it with its neighbours: for 3x3 and 6x6 blocks
    this is much cheaper on CPU than a ``dot_general`` or a reduction per product. Its
    derivative is written out (``_bilinear``) so that reverse mode stays fused too.
    """
    out = a[..., :, 0, None] * b[..., None, 0, :]
    for k in range(1, a.shape[-1]):
        out = out + a[..., :, k, None] * b[..., None, k, :]
    return out


@_bilinear(lambda a, v: (a * v[..., None, :]).sum(-1))
def mat_vec(a, v):
    """Batched matrix-vector product ``a @ v`` of small blocks (see ``mat_mul``)."""
    out = a[..., :, 0] * v[..., None, 0]
    for k in range(1, a.shape[-1]):
        out = out + a[..., :, k] * v[..., None, k]
    return out


@_bilinear(lambda a, v: (a * v[..., :, None]).sum(-2))
def mat_tvec(a, v):
    """Batched product ``a^T @ v`` of small blocks (see ``mat_mul``)."""
    out = a[..., 0, :] * v[..., 0, None]
    for k in range(1, a.shape[-2]):
        out = out + a[..., k, :] * v[..., k, None]
    return out


def skew(v):
    """The cross-product matrix ``[v]x`` such that ``skew(v) @ u == cross(v, u)``.

    **Arguments:** ``v``: array ``(..., 3)``.

    **Returns:** array ``(..., 3, 3)``.
    """
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    zero = jnp.zeros_like(x)
    return jnp.stack([jnp.stack([zero, -z, y], -1), jnp.stack([z, zero, -x], -1), jnp.stack([-y, x, zero], -1)], -2)


@jax.custom_jvp
def cross(a, b):
    """``a x b`` over the last axis (broadcasting as ``jnp.cross``).

    Its derivative is written as products with the primal's cross-product matrices:
    linear maps whose transposes (reverse mode) are products too, where those of
    ``jnp.cross``'s component slices are padded copies, one kernel each.
    """
    return jnp.cross(a, b)


@cross.defjvp
def _cross_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    return cross(a, b), (skew(a) * db[..., None, :]).sum(-1) - (skew(b) * da[..., None, :]).sum(-1)


def unskew(m):
    """The vector of a (skew-symmetric part of a) 3x3 matrix: inverse of ``skew``."""
    return 0.5 * jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1)


def rotation_about_axis(axis, angle):
    """Rotation by ``angle`` (rad) about a unit ``axis`` (Rodrigues' formula).

    **Arguments:** ``axis``: ``(..., 3)`` unit vector; ``angle``: ``(...)``.

    **Returns:** ``(..., 3, 3)`` rotation matrix.
    """
    angle = jnp.asarray(angle)
    axis = jnp.asarray(axis)
    s = jnp.sin(angle)[..., None, None]
    c = jnp.cos(angle)[..., None, None]
    eye = jnp.eye(3, dtype=axis.dtype)
    return c * eye + s * skew(axis) + (1.0 - c) * (axis[..., :, None] * axis[..., None, :])


def _axis_rotation(angle, i):
    angle = jnp.asarray(angle)
    c, s = jnp.cos(angle), jnp.sin(angle)
    one, zero = jnp.ones_like(c), jnp.zeros_like(c)
    if i == 0:
        rows = [[one, zero, zero], [zero, c, -s], [zero, s, c]]
    elif i == 1:
        rows = [[c, zero, s], [zero, one, zero], [-s, zero, c]]
    else:
        rows = [[c, -s, zero], [s, c, zero], [zero, zero, one]]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def rotation_x(angle):
    """Rotation about the x axis by ``angle`` (rad): ``(...,) -> (..., 3, 3)``."""
    return _axis_rotation(angle, 0)


def rotation_y(angle):
    """Rotation about the y axis by ``angle`` (rad): ``(...,) -> (..., 3, 3)``."""
    return _axis_rotation(angle, 1)


def rotation_z(angle):
    """Rotation about the z axis by ``angle`` (rad): ``(...,) -> (..., 3, 3)``."""
    return _axis_rotation(angle, 2)


def xyz_body_rotation(angles):
    """Body-fixed X-Y-Z rotation sequence (Simbody ``BodyRotationSequence`` XYZ).

    This is how OpenSim interprets ``orientation`` and ``xyz_body_rotation`` properties.

    **Arguments:** ``angles``: ``(..., 3)`` angles about x, then the new y, then the
    new z (rad).

    **Returns:** ``(..., 3, 3)`` rotation ``R = Rx(a0) @ Ry(a1) @ Rz(a2)``.
    """
    angles = jnp.asarray(angles)
    c, s = jnp.cos(angles), jnp.sin(angles)
    c1, c2, c3 = c[..., 0], c[..., 1], c[..., 2]
    s1, s2, s3 = s[..., 0], s[..., 1], s[..., 2]
    rows = [
        [c2 * c3, -c2 * s3, s2],
        [s1 * s2 * c3 + c1 * s3, -s1 * s2 * s3 + c1 * c3, -s1 * c2],
        [-c1 * s2 * c3 + s1 * s3, c1 * s2 * s3 + s1 * c3, c1 * c2],
    ]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def xyz_body_angles(R):
    """Inverse of ``xyz_body_rotation`` (angles in (-pi, pi], middle in [-pi/2, pi/2]).

    **Arguments:** ``R``: ``(..., 3, 3)``. **Returns:** ``(..., 3)`` angles (rad).
    """
    a1 = jnp.arcsin(jnp.clip(R[..., 0, 2], -1.0, 1.0))
    a0 = jnp.arctan2(-R[..., 1, 2], R[..., 2, 2])
    a2 = jnp.arctan2(-R[..., 0, 1], R[..., 0, 0])
    return jnp.stack([a0, a1, a2], -1)


def quat_to_rotation(q):
    """Rotation matrix of a quaternion ``(w, x, y, z)`` (normalized inside).

    **Arguments:** ``q``: ``(..., 4)``. **Returns:** ``(..., 3, 3)``.
    """
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def rotation_to_quat(R):
    """Quaternion ``(w, x, y, z)`` with ``w >= 0`` of a rotation matrix.

    Uses the numerically safe branch for each input (Shepperd's method), written with
    ``where`` so it vectorizes.

    **Arguments:** ``R``: ``(..., 3, 3)``. **Returns:** ``(..., 4)``.
    """
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    tr = m00 + m11 + m22
    cands = jnp.stack([tr, m00, m11, m22], -1)
    k = jnp.argmax(cands, axis=-1)

    def safe_sqrt(x):
        return jnp.sqrt(jnp.maximum(x, 1e-300))

    s0 = 2 * safe_sqrt(1 + tr)
    q0 = jnp.stack(
        [
            0.25 * s0,
            (R[..., 2, 1] - R[..., 1, 2]) / s0,
            (R[..., 0, 2] - R[..., 2, 0]) / s0,
            (R[..., 1, 0] - R[..., 0, 1]) / s0,
        ],
        -1,
    )
    s1 = 2 * safe_sqrt(1 + m00 - m11 - m22)
    q1 = jnp.stack(
        [
            (R[..., 2, 1] - R[..., 1, 2]) / s1,
            0.25 * s1,
            (R[..., 0, 1] + R[..., 1, 0]) / s1,
            (R[..., 0, 2] + R[..., 2, 0]) / s1,
        ],
        -1,
    )
    s2 = 2 * safe_sqrt(1 + m11 - m00 - m22)
    q2 = jnp.stack(
        [
            (R[..., 0, 2] - R[..., 2, 0]) / s2,
            (R[..., 0, 1] + R[..., 1, 0]) / s2,
            0.25 * s2,
            (R[..., 1, 2] + R[..., 2, 1]) / s2,
        ],
        -1,
    )
    s3 = 2 * safe_sqrt(1 + m22 - m00 - m11)
    q3 = jnp.stack(
        [
            (R[..., 1, 0] - R[..., 0, 1]) / s3,
            (R[..., 0, 2] + R[..., 2, 0]) / s3,
            (R[..., 1, 2] + R[..., 2, 1]) / s3,
            0.25 * s3,
        ],
        -1,
    )
    q = jnp.choose(k[..., None], [q0, q1, q2, q3], mode="clip")
    return q * jnp.where(q[..., :1] < 0, -1.0, 1.0)


def quat_multiply(a, b):
    """Hamilton product ``a * b`` of quaternions ``(..., 4)``."""
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jnp.sum(av * bv, -1, keepdims=True)
    v = aw * bv + bw * av + cross(av, bv)
    return jnp.concatenate([w, v], -1)


def quat_normalize(q):
    """Unit quaternion in the direction of ``q`` (``(..., 4)``)."""
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def quat_derivative_matrix(q):
    """The 4x3 matrix ``N`` with ``qdot = N @ w`` for angular velocity ``w`` in the parent.

    For a quaternion ``q`` giving ``R_FM``, and ``w`` the angular velocity of M in F
    expressed in F: ``qdot = 0.5 * (0, w) * q``.

    **Arguments:** ``q``: ``(..., 4)``. **Returns:** ``(..., 4, 3)``.
    """
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [[-x, -y, -z], [w, z, -y], [-z, w, x], [y, -x, w]]
    return 0.5 * jnp.stack([jnp.stack(r, -1) for r in rows], -2)


# -- rigid transforms ---------------------------------------------------------------------


def identity_transform(dtype=float):
    """The identity transform ``(I, 0)``."""
    return jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype=dtype)


def compose(X_AB, X_BC):
    """Compose transforms: ``X_AC = X_AB * X_BC``.

    **Arguments:** two ``(R, p)`` pairs with batch-compatible shapes.

    **Returns:** ``(R_AC, p_AC)``.
    """
    R_AB, p_AB = X_AB
    R_BC, p_BC = X_BC
    return mat_mul(R_AB, R_BC), mat_vec(R_AB, p_BC) + p_AB


def inverse(X_AB):
    """Inverse transform ``X_BA`` of ``X_AB``."""
    R, p = X_AB
    Rt = jnp.swapaxes(R, -1, -2)
    return Rt, -mat_vec(Rt, p)


def transform_point(X_AB, p_B):
    """A point given in B, measured in A: ``R_AB p_B + p_AB``."""
    R, p = X_AB
    return mat_vec(R, p_B) + p


def transform_vector(X_AB, v_B):
    """A free vector given in B, re-expressed in A: ``R_AB v_B``."""
    return mat_vec(X_AB[0], v_B)


# -- spatial vectors ----------------------------------------------------------------------


def motion_cross(v, m):
    """Spatial motion cross product ``v x m`` (Featherstone's ``crm(v) @ m``).

    **Arguments:** ``v``, ``m``: motion vectors ``(..., 6)``.

    **Returns:** ``(..., 6)``: ``(w x mw, w x mv + v x mw)``.
    """
    w, vl = v[..., :3], v[..., 3:]
    mw, mv = m[..., :3], m[..., 3:]
    return jnp.concatenate([cross(w, mw), cross(w, mv) + cross(vl, mw)], -1)


def force_cross(v, f):
    """Spatial force cross product ``v x* f`` (Featherstone's ``crf(v) @ f``).

    **Arguments:** ``v``: motion vector ``(..., 6)``; ``f``: force vector ``(..., 6)``.

    **Returns:** ``(..., 6)``: ``(w x n + v x f, w x f)``.
    """
    w, vl = v[..., :3], v[..., 3:]
    n, fl = f[..., :3], f[..., 3:]
    return jnp.concatenate([cross(w, n) + cross(vl, fl), cross(w, fl)], -1)


def motion_transform(X_AB):
    """The 6x6 matrix mapping motion vectors given in B (about B's origin) to A.

    **Arguments:** ``X_AB = (R, p)``. **Returns:** ``(..., 6, 6)`` ``[[R, 0], [p x R, R]]``.
    """
    R, p = X_AB
    z = jnp.zeros_like(R)
    top = jnp.concatenate([R, z], -1)
    bot = jnp.concatenate([skew(p) @ R, R], -1)
    return jnp.concatenate([top, bot], -2)


def force_transform(X_AB):
    """The 6x6 matrix mapping force vectors given in B (about B's origin) to A.

    **Arguments:** ``X_AB = (R, p)``. **Returns:** ``(..., 6, 6)`` ``[[R, p x R], [0, R]]``.
    """
    R, p = X_AB
    z = jnp.zeros_like(R)
    top = jnp.concatenate([R, skew(p) @ R], -1)
    bot = jnp.concatenate([z, R], -1)
    return jnp.concatenate([top, bot], -2)


def shift_motion(m, r):
    """Re-express the point a motion vector is taken about: from O to O + r.

    ``(w, v_O) -> (w, v_O + w x r)``.
    """
    w, v = m[..., :3], m[..., 3:]
    return jnp.concatenate([w, v + cross(w, r)], -1)


def inertia_matrix(moments_products):
    """Symmetric 3x3 inertia from OpenSim's 6-vector ``(Ixx, Iyy, Izz, Ixy, Ixz, Iyz)``."""
    i = jnp.asarray(moments_products)
    rows = [[i[..., 0], i[..., 3], i[..., 4]], [i[..., 3], i[..., 1], i[..., 5]], [i[..., 4], i[..., 5], i[..., 2]]]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def spatial_inertia(mass, com, inertia_com):
    """Spatial inertia (6x6) about a frame's origin, in that frame.

    **Arguments:**

    - ``mass``: ``(...)`` kg.
    - ``com``: ``(..., 3)`` mass center in the frame (m).
    - ``inertia_com``: ``(..., 3, 3)`` rotational inertia about the mass center,
      expressed in the frame (kg m^2).

    **Returns:** ``(..., 6, 6)`` ``[[Ic + m cx cx^T, m cx], [m cx^T, m 1]]``.
    """
    mass = jnp.asarray(mass)
    m = mass[..., None, None]
    cx = skew(com)
    top = jnp.concatenate([inertia_com + m * (cx @ jnp.swapaxes(cx, -1, -2)), m * cx], -1)
    bot = jnp.concatenate([m * jnp.swapaxes(cx, -1, -2), m * jnp.eye(3, dtype=cx.dtype) * jnp.ones_like(m)], -1)
    return jnp.concatenate([top, bot], -2)
