"""Linear springs: PointToPointSpring and SpringGeneralizedForce (OpenSim Force family).

- ``PointToPointSpring`` (Simbody ``Force::TwoPointLinearSpring``): a force
  ``k (d - rest_length)`` along the line between a point on ``body1`` and a point
  on ``body2``, pulling them together when stretched. Potential energy
  ``k (d - rest_length)^2 / 2``.
- ``SpringGeneralizedForce``: a generalized force
  ``-stiffness (q - rest_length) - viscosity qdot`` along one coordinate.

Like OpenSim, ``PointToPointSpring`` gives ``point1``/``point2`` in the frame of the
*base body* of ``body1``/``body2`` (OpenSim passes them straight to Simbody with the
mobilized body, ignoring an offset frame's transform). Two coincident points give a
zero force here (Simbody divides by zero).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import Stage, flag, output, prop, socket
from ..groups import Forces, point_force_on_bodies
from ._common import coordinate_indices, masked_mobility
from .base import Force

__all__ = ["PointToPointSpring", "SpringGeneralizedForce"]


class PointToPointSpring(Force):
    """A linear spring between two body points (OpenSim PointToPointSpring).

    **Fields:** ``body1``, ``body2``: sockets to PhysicalFrames; ``point1``,
    ``point2``: the attachment points in the base bodies of those frames (m);
    ``stiffness`` (N/m); ``rest_length`` (m).
    """

    body1: str = socket("PhysicalFrame", doc="A frame on the first body that this spring connects to.")
    body2: str = socket("PhysicalFrame", doc="A frame on the second body that this spring connects to.")
    point1: np.ndarray = prop((0.0, 0.0, 0.0), doc="Spring attachment point on body1 (m).", shape=(3,))
    point2: np.ndarray = prop((0.0, 0.0, 0.0), doc="Spring attachment point on body2 (m).", shape=(3,))
    stiffness: np.ndarray = prop(1.0, doc="Spring stiffness (N/m).")
    rest_length: np.ndarray = prop(0.0, doc="Spring resting length (m).")

    def __init__(
        self,
        name: str,
        body1: str = "",
        point1=(0.0, 0.0, 0.0),
        body2: str = "",
        point2=(0.0, 0.0, 0.0),
        stiffness=1.0,
        rest_length=0.0,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.body1 = body1
        self.body2 = body2
        self.point1 = point1
        self.point2 = point2
        self.stiffness = stiffness
        self.rest_length = rest_length
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: the mobilizers of each spring's two bodies and whether it
        applies force."""
        mob1 = [build.frame_mob(build.socket(p, "body1")) for p in paths]
        mob2 = [build.frame_mob(build.socket(p, "body2")) for p in paths]
        return {
            "mob1": np.asarray(mob1, np.int32),
            "mob2": np.asarray(mob2, np.int32),
            "on": np.asarray([build.find(p).applies_force for p in paths], bool),
        }

    @staticmethod
    def _geometry(group, params, ctx):
        s = group.static
        R0, p0 = ctx.pos.R0, ctx.pos.p0
        r1 = spatial.transform_point((R0[s["mob1"]], p0[s["mob1"]]), params["point1"])
        r2 = spatial.transform_point((R0[s["mob2"]], p0[s["mob2"]]), params["point2"])
        d_vec = r2 - r1
        d = jnp.linalg.norm(jnp.where(jnp.all(d_vec == 0, -1, keepdims=True), 1.0, d_vec), axis=-1)
        d = jnp.where(jnp.all(d_vec == 0, -1), 0.0, d)
        return r1, r2, d_vec, d

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: tension ``stiffness * (length - rest_length)`` (N) along
        the line between the two points, pulling them together when stretched.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``tension`` (N),
        ``length`` (m) and ``potential_energy`` (J)."""
        s = group.static
        r1, r2, d_vec, d = cls._geometry(group, params, ctx)
        stretch = d - params["rest_length"]
        tension = params["stiffness"] * stretch
        unit = d_vec / jnp.where(d > 0, d, 1.0)[:, None]
        f1 = jnp.where((s["on"] & (d > 0))[:, None], tension[:, None] * unit, 0.0)
        n = ctx.tree.n_mob
        body = point_force_on_bodies(n, s["mob1"], r1, f1, f1.dtype) + point_force_on_bodies(
            n, s["mob2"], r2, -f1, f1.dtype
        )
        pe = 0.5 * params["stiffness"] * stretch**2
        return Forces(body=body, outputs={"tension": tension, "length": d, "potential_energy": pe})

    @classmethod
    def group_potential_energy(cls, group, params, ctx):
        """Elastic energy stored in the group's springs, ``0.5 k (d - d0)^2`` summed (J)."""
        _, _, _, d = cls._geometry(group, params, ctx)
        return jnp.sum(0.5 * params["stiffness"] * (d - params["rest_length"]) ** 2)

    @output(Stage.POSITION)
    def length(self, ctx):
        """Distance between the two attachment points (m)."""
        return ctx.group_output(ctx.path, "length")

    @output(Stage.POSITION)
    def tension(self, ctx):
        """Spring force ``stiffness (length - rest_length)`` (N); positive pulls the
        points together."""
        return ctx.group_output(ctx.path, "tension")

    @output(Stage.POSITION)
    def potential_energy(self, ctx):
        """Elastic energy stored in the spring (J). (OpenSim's output of this name
        reports 0 for this class, though its system energy includes the spring.)"""
        return ctx.group_output(ctx.path, "potential_energy")


class SpringGeneralizedForce(Force):
    """A linear spring-damper along a coordinate (OpenSim SpringGeneralizedForce).

    The generalized force is ``-stiffness (q - rest_length) - viscosity qdot``.
    As in OpenSim it reports no potential energy.

    **Fields:** ``coordinate``: the coordinate's name (or path); ``stiffness``
    (N/m or N m/rad); ``rest_length`` (m or rad); ``viscosity`` (N s/m or
    N m s/rad).
    """

    coordinate: str = flag("", doc="Name of the coordinate the force acts along.")
    stiffness: np.ndarray = prop(0.0, doc="Spring stiffness.")
    rest_length: np.ndarray = prop(0.0, doc="Coordinate value at which the spring force is zero.")
    viscosity: np.ndarray = prop(0.0, doc="Damping coefficient.")

    def __init__(
        self,
        name: str,
        coordinate: str = "",
        stiffness=0.0,
        rest_length=0.0,
        viscosity=0.0,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.coordinate = coordinate
        self.stiffness = stiffness
        self.rest_length = rest_length
        self.viscosity = viscosity
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: coordinate indices and whether each spring applies force."""
        return {
            **coordinate_indices(build, paths),
            "on": np.asarray([build.find(p).applies_force for p in paths], bool),
        }

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Generalized forces of the group: ``-stiffness (q - rest_length) - viscosity u``
        (N·m or N) on each coordinate.

        **Returns:** ``Forces`` with ``mobility`` ``(nu,)`` and output ``force`` ``(k,)``."""
        s = group.static
        q, u = ctx.state.q[s["q"]], ctx.state.u[s["u"]]
        f = -params["stiffness"] * (q - params["rest_length"]) - params["viscosity"] * u
        return Forces(mobility=masked_mobility(ctx.tree.nu, s["u"], f, s["on"]), outputs={"force": f})

    @output(Stage.DYNAMICS)
    def force(self, ctx):
        """The generalized force applied (N or N m)."""
        return ctx.group_output(ctx.path, "force")
