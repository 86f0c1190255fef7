"""Constraints: ``M udot + G^T lambda = f``, ``G udot = b`` (Simbody State seed, eqs. 4-9).

Each holonomic constraint has a position error ``perr(q, t)``, a velocity error
``G u`` (``- rate`` for prescribed motion) and an acceleration equation
``G udot = b``. Sources:

- constraint components: WeldConstraint, PointConstraint,
  CoordinateCouplerConstraint (grouped and vectorized);
- locked and prescribed coordinates;
- the welds that re-join slave bodies created by the graph maker to cut loops.

Rows are built from body Jacobians in Ground (``J_m = sum of ancestor S``), so ``G``
and ``b`` are exact. The multipliers are solved with a pseudo-inverse of
``G M^-1 G^T`` (redundant constraints, as in a planar four-bar, are allowed).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import Component, ModelError, flag, prop, socket
from ..functions import Function
from ..groups import stack_properties

__all__ = [
    "Constraint",
    "WeldConstraint",
    "PointConstraint",
    "CoordinateCouplerConstraint",
    "ConstraintRows",
    "body_jacobians",
    "point_jacobian",
    "relative_point_jacobian",
    "point_bias",
]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ConstraintRows:
    """Constraint equations of a group: ``perr (m,)``, ``verr (m,)``, ``G (m, nu)``,
    ``b (m,)`` with ``G udot = b``."""

    perr: Any
    verr: Any
    G: Any
    b: Any


def body_jacobians(tree, pos):
    """``J (n_mob, 6, nu)``: spatial velocity of each body (Ground, about its origin) per speed."""
    mask = jnp.asarray(tree.anc[:, tree.dof_mob], pos.S.dtype)
    return mask[:, None, :] * pos.S.T[None, :, :]


def point_jacobian(J_m, r):
    """Velocity Jacobian ``(3, nu)`` of the body point at Ground location ``r``."""
    return J_m[3:] - jnp.cross(r[:, None], J_m[:3], axis=0)


def relative_point_jacobian(tree, pos, follower, base, r):
    """Velocity Jacobians ``(k, 3, nu)`` of points at Ground locations ``r (k, 3)`` fixed
    on the bodies ``follower (k,)``, relative to the same points fixed on ``base (k,)``
    (static mobilizer indices): speed ``d`` moves a point ``r`` of a body it carries
    at ``v_d + w_d x r``."""
    S = pos.S
    moved = jnp.asarray(tree.anc[follower][:, tree.dof_mob].astype(float) - tree.anc[base][:, tree.dof_mob], S.dtype)
    v = S[:, 3:] + jnp.cross(S[:, :3], r[:, None, :])  # (k, nu, 3)
    return jnp.swapaxes(moved[:, :, None] * v, -1, -2)


def point_bias(C_m, V_m, r):
    """Acceleration of a body point at ``r`` when ``udot = 0`` (Ground, ``(3,)``)."""
    w = V_m[:3]
    v_point = V_m[3:] + jnp.cross(w, r)
    return C_m[3:] + jnp.cross(C_m[:3], r) + jnp.cross(w, v_point)


class Constraint(Component):
    """A kinematic constraint (abstract). ``isEnforced``: whether it is applied."""

    set_name: ClassVar[str | None] = "constraintset"

    isEnforced: bool = flag(True, doc="Whether the constraint is enforced.")
    num_equations: ClassVar[int] = 0

    @classmethod
    def compile_group(cls, build, paths) -> dict:
        """Static data of a group (see ``simjax.groups``)."""
        return {}

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: stacked properties."""
        return stack_properties([model.find(p) for p in group.paths])

    @classmethod
    def group_rows(cls, group, params, ctx) -> ConstraintRows:
        """The group's equations (``k * num_equations`` rows)."""
        raise NotImplementedError


def _frames_static(build, paths, sockets):
    out = {}
    for s in sockets:
        frames = tuple(build.socket(p, s) for p in paths)
        out[s] = frames
        out[s + "_mob"] = np.asarray([build.frame_mob(f) for f in frames], np.int32)
    return out


class WeldConstraint(Constraint):
    """Fix ``frame2`` to ``frame1``: 6 equations (OpenSim WeldConstraint).

    **Fields:** ``frame1``, ``frame2``: sockets to PhysicalFrames; ``frames``: offset
    frames owned by the constraint.
    """

    frame1: str = socket("PhysicalFrame", doc="The first frame.")
    frame2: str = socket("PhysicalFrame", doc="The second frame, welded to the first.")
    frames: tuple = ()
    num_equations: ClassVar[int] = 6

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: each weld's two frames and their mobilizers."""
        return _frames_static(build, paths, ("frame1", "frame2"))

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: none (the frames carry the offsets)."""
        return {}

    @classmethod
    def group_rows(cls, group, params, ctx):
        """The group's equations: six rows per weld (orientation error in rad, position
        error in m), see ``weld_rows``."""
        s = group.static
        R1, p1 = ctx.frames_in_ground(s["frame1"])
        R2, p2 = ctx.frames_in_ground(s["frame2"])
        return weld_rows(ctx, s["frame1_mob"], s["frame2_mob"], (R1, p1), (R2, p2))


def weld_rows(ctx, mob1, mob2, X1, X2) -> ConstraintRows:
    """Rows of welds between frames ``X1`` on bodies ``mob1`` and ``X2`` on ``mob2``."""
    R1, p1 = X1
    R2, p2 = X2
    Rrel = jnp.swapaxes(R1, -1, -2) @ R2
    rot_err = spatial.mat_vec(R1, spatial.unskew(Rrel))
    perr = jnp.concatenate([rot_err, p2 - p1], -1)
    J = ctx.jacobians
    G = J[mob2] - J[mob1]
    # translational rows: velocity of frame2's origin relative to the point of body 1 there
    Gt = relative_point_jacobian(ctx.tree, ctx.pos, mob2, mob1, p2)
    G = jnp.concatenate([G[:, :3], Gt], 1)
    V, C = ctx.vel.V, ctx.vel.C
    bt = jax.vmap(point_bias)(C[mob2], V[mob2], p2) - jax.vmap(point_bias)(C[mob1], V[mob1], p2)
    b = -jnp.concatenate([C[mob2, :3] - C[mob1, :3], bt], -1)
    verr = jnp.einsum("kij,j->ki", G, ctx.vel.u)
    return ConstraintRows(perr.reshape(-1), verr.reshape(-1), G.reshape(-1, G.shape[-1]), b.reshape(-1))


class PointConstraint(Constraint):
    """A point on ``body_1`` coincides with a point on ``body_2``: 3 equations.

    **Fields:** ``body_1``, ``body_2`` (sockets), ``location_body_1``,
    ``location_body_2`` (in each body's frame, m).
    """

    body_1: str = socket("PhysicalFrame", doc="The first body.")
    body_2: str = socket("PhysicalFrame", doc="The second body.")
    location_body_1: np.ndarray = prop((0.0, 0.0, 0.0), doc="Point in body_1 (m).", shape=(3,))
    location_body_2: np.ndarray = prop((0.0, 0.0, 0.0), doc="Point in body_2 (m).", shape=(3,))
    num_equations: ClassVar[int] = 3

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: each constraint's two bodies and their mobilizers."""
        return _frames_static(build, paths, ("body_1", "body_2"))

    @classmethod
    def group_rows(cls, group, params, ctx):
        """The group's equations: three rows per constraint, the position of the point on body
        2 minus that on body 1 (m, in Ground), with their velocity errors, Jacobian and bias."""
        s = group.static
        X1 = ctx.frames_in_ground(s["body_1"])
        X2 = ctx.frames_in_ground(s["body_2"])
        r1 = spatial.transform_point(X1, params["location_body_1"])
        r2 = spatial.transform_point(X2, params["location_body_2"])
        m1, m2 = s["body_1_mob"], s["body_2_mob"]
        J, V, C = ctx.jacobians, ctx.vel.V, ctx.vel.C
        G = jax.vmap(point_jacobian)(J[m2], r2) - jax.vmap(point_jacobian)(J[m1], r1)
        b = -(jax.vmap(point_bias)(C[m2], V[m2], r2) - jax.vmap(point_bias)(C[m1], V[m1], r1))
        verr = jnp.einsum("kij,j->ki", G, ctx.vel.u)
        return ConstraintRows((r2 - r1).reshape(-1), verr.reshape(-1), G.reshape(-1, G.shape[-1]), b.reshape(-1))


class CoordinateCouplerConstraint(Constraint):
    """``dependent = scale_factor * f(independent)`` (OpenSim CoordinateCouplerConstraint).

    **Fields:** ``independent_coordinate`` and ``dependent_coordinate`` (sockets to
    Coordinates of joints with ``qdot = u``); ``coupled_coordinates_function``;
    ``scale_factor``.
    """

    independent_coordinate: str = socket("Coordinate", doc="The independent coordinate.")
    dependent_coordinate: str = socket("Coordinate", doc="The dependent coordinate.")
    coupled_coordinates_function: Function | None = None
    scale_factor: np.ndarray = prop(1.0, doc="Scale applied to the function's value.")
    num_equations: ClassVar[int] = 1

    def validate(self, path: str) -> None:
        """Check the function is set."""
        super().validate(path)
        if self.coupled_coordinates_function is None:
            raise ModelError(
                path, "coupled_coordinates_function is not set", prop="coupled_coordinates_function", value=None
            )

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: the ``q``/``u`` indices of each independent and dependent
        coordinate, and a ``FunctionBank`` of the coupling functions.

        Raises ``ModelError`` when a coupled coordinate belongs to a quaternion joint."""
        from ..function_bank import FunctionBank

        ind = [build.coordinate(build.socket(p, "independent_coordinate")) for p in paths]
        dep = [build.coordinate(build.socket(p, "dependent_coordinate")) for p in paths]
        for p, i, d in zip(paths, ind, dep):
            if i.q < 0 or d.q < 0:
                raise ModelError(p, "coupled coordinates must not belong to quaternion joints")
        fns = [build.model.find(p).coupled_coordinates_function for p in paths]
        return {
            "iq": np.asarray([i.q for i in ind]),
            "iu": np.asarray([i.u for i in ind]),
            "dq": np.asarray([d.q for d in dep]),
            "du": np.asarray([d.u for d in dep]),
            "bank": FunctionBank.of(fns),
        }

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: the scale factors and the coupling functions'
        parameters."""
        from ..function_bank import bank_params

        comps = [model.find(p) for p in group.paths]
        return {
            "scale": jnp.stack([jnp.asarray(c.scale_factor, jnp.result_type(float)) for c in comps]),
            "f": bank_params(group.static["bank"], [c.coupled_coordinates_function for c in comps]),
        }

    @classmethod
    def group_rows(cls, group, params, ctx):
        """The group's equations: one row per constraint, ``scale * f(q_ind) - q_dep`` (OpenSim's
        sign, so that the multipliers are Simbody's), with its velocity error, Jacobian and
        bias."""
        from ..function_bank import bank_eval

        s = group.static
        q, u = ctx.state.q, ctx.vel.u
        f0, f1, f2 = bank_eval(s["bank"], params["f"], q[s["iq"]], orders=(0, 1, 2))
        k = params["scale"]
        nu = ctx.tree.nu
        G = jnp.zeros((len(s["iq"]), nu), q.dtype)
        rows = jnp.arange(len(s["iq"]))
        G = G.at[rows, s["du"]].add(-1.0).at[rows, s["iu"]].add(k * f1)
        b = -k * f2 * u[s["iu"]] ** 2
        perr = k * f0 - q[s["dq"]]
        return ConstraintRows(perr, G @ u, G, b)
