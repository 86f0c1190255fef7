"""PointOnLineConstraint: a point of one body stays on a line fixed in another.

(OpenSim PointOnLineConstraint, Simbody ``Constraint::PointOnLine``.) With ``z`` the
unit line direction and ``P`` a point of the line, both fixed in the line body B,
and ``S`` the follower point fixed in body F, the two position errors are the
components of ``p_BS - P`` along two unit vectors ``x, y`` perpendicular to ``z``
(Simbody's choice: ``x = z x e_k`` for the coordinate axis ``e_k`` most
perpendicular to ``z``, ``y = z x x``)::

    perr = [x . (p_BS - P), y . (p_BS - P)]
    verr = x_G . (v_S - v_C)                     (C: B's material point at S)
    aerr = x_G . (a_S - a_C - 2 w_B x (v_S - v_C))

exactly the time derivatives of ``perr``, so they hold off the constraint manifold
too. As in OpenSim, ``line_direction_vec``, ``point_on_line`` and
``point_on_follower`` are given in the frames of the *base bodies* of
``line_body`` and ``follower_body`` (OpenSim hands them to Simbody with the
mobilized bodies, ignoring an offset frame's transform).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import ModelError, prop, socket
from .constraints import Constraint, ConstraintRows, point_bias, relative_point_jacobian

__all__ = ["PointOnLineConstraint", "perpendicular_axes"]


def perpendicular_axes(z):
    """Simbody's ``x = z.perp()`` and ``y = z x x`` for unit vectors ``z (..., 3)``.

    **Returns:** ``(x, y)``, each ``(..., 3)``.
    """
    a = jnp.abs(z)
    k = jnp.where(
        a[..., 0] <= a[..., 1], jnp.where(a[..., 0] <= a[..., 2], 0, 2), jnp.where(a[..., 1] <= a[..., 2], 1, 2)
    )
    e = jax.nn.one_hot(k, 3, dtype=z.dtype)
    x = jnp.cross(z, e)
    x = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    y = jnp.cross(z, x)
    return x, y / jnp.linalg.norm(y, axis=-1, keepdims=True)


class PointOnLineConstraint(Constraint):
    """A follower point stays on a line fixed in another body: 2 equations.

    **Fields:** ``line_body``, ``follower_body``: sockets to PhysicalFrames;
    ``line_direction_vec``: the line's direction in the line body (normalized);
    ``point_on_line``: a point of the line in the line body (m);
    ``point_on_follower``: the follower point in the follower body (m).
    """

    line_body: str = socket("PhysicalFrame", doc="The body the line is fixed to.")
    follower_body: str = socket("PhysicalFrame", doc="The body the follower point is fixed to.")
    line_direction_vec: np.ndarray = prop((1.0, 0.0, 0.0), doc="Direction of the line in the line body.", shape=(3,))
    point_on_line: np.ndarray = prop((0.0, 0.0, 0.0), doc="A point of the line, in the line body (m).", shape=(3,))
    point_on_follower: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="The follower point, in the follower body (m).", shape=(3,)
    )
    num_equations: ClassVar[int] = 2

    def __init__(
        self,
        name: str,
        line_body: str = "",
        line_direction_vec=(1.0, 0.0, 0.0),
        point_on_line=(0.0, 0.0, 0.0),
        follower_body: str = "",
        point_on_follower=(0.0, 0.0, 0.0),
        isEnforced: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.line_body = line_body
        self.follower_body = follower_body
        self.line_direction_vec = line_direction_vec
        self.point_on_line = point_on_line
        self.point_on_follower = point_on_follower
        self.isEnforced = isEnforced
        self.components = components

    def validate(self, path: str) -> None:
        """Check the line direction is not zero."""
        super().validate(path)
        d = self.line_direction_vec
        if isinstance(d, np.ndarray) and np.linalg.norm(d) == 0:
            raise ModelError(path, "must not be zero", prop="line_direction_vec", value=d)

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: the enforced members and the mobilizers of each one's line
        body and follower body."""
        enforced = [p for p in paths if build.model.find(p).isEnforced]
        idx = [paths.index(p) for p in enforced]
        return {
            "members": np.asarray(idx, np.int32),
            "mobB": np.asarray([build.frame_mob(build.socket(p, "line_body")) for p in enforced], np.int32),
            "mobF": np.asarray([build.frame_mob(build.socket(p, "follower_body")) for p in enforced], np.int32),
        }

    @classmethod
    def group_rows(cls, group, params, ctx):
        """The group's equations: two rows per enforced constraint, the follower point's
        offset from the line along two axes perpendicular to it (m), with their velocity
        errors, Jacobian and bias."""
        s = group.static
        mB, mF, i = s["mobB"], s["mobF"], s["members"]
        R0, p0 = ctx.pos.R0, ctx.pos.p0
        z = params["line_direction_vec"][i]
        z = z / jnp.linalg.norm(z, axis=-1, keepdims=True)
        x, y = perpendicular_axes(z)
        R_B = R0[mB]
        xy = jnp.stack([x, y], 1)
        xy_G = spatial.mat_vec(R_B[:, None], xy)  # (k, 2, 3)
        r_S = spatial.mat_vec(R0[mF], params["point_on_follower"][i]) + p0[mF]
        p_BS = spatial.mat_tvec(R_B, r_S - p0[mB])
        perr = jnp.sum(xy * (p_BS - params["point_on_line"][i])[:, None], -1)
        V, C = ctx.vel.V, ctx.vel.C
        dJ = relative_point_jacobian(ctx.tree, ctx.pos, mF, mB, r_S)  # (k, 3, nu)
        G = spatial.mat_mul(xy_G, dJ)
        w_B = V[mB, :3]
        dv = (V[mF, 3:] + jnp.cross(V[mF, :3], r_S)) - (V[mB, 3:] + jnp.cross(w_B, r_S))
        bias = jax.vmap(point_bias)(C[mF], V[mF], r_S) - jax.vmap(point_bias)(C[mB], V[mB], r_S)
        b = -jnp.sum(xy_G * (bias - 2.0 * jnp.cross(w_B, dv))[:, None], -1)
        verr = jnp.sum(xy_G * dv[:, None], -1)
        nu = ctx.tree.nu
        return ConstraintRows(perr.reshape(-1), verr.reshape(-1), G.reshape(-1, nu), b.reshape(-1))
