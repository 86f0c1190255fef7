"""BushingForce: a linear 6-DoF spring-damper between two frames (OpenSim BushingForce,
Simbody ``Force::LinearBushing``).

The deflection of ``frame2`` (M) from ``frame1`` (F) is six generalized
coordinates ``q``: the body-fixed X-Y-Z angles of ``R_FM`` and the position of M's
origin in F. With ``qdot`` their rates, the generalized forces on M are
``f = -(K q + C qdot)`` (``K``, ``C`` diagonal: rotational then translational
stiffness and damping). The rotational part maps to a moment with ``N^T``, where
``qdot_rot = N w_FM`` (angular velocity in M); the translational part is a force at
M's origin expressed in F. Frame 1 receives the equal and opposite load. Potential
energy is ``q^T K q / 2`` and the power dissipated ``qdot^T C qdot`` integrates into
the state variable ``dissipated_energy``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import Stage, output, prop, socket
from ..groups import Forces
from ..mechanics.frames import PhysicalOffsetFrame
from .base import Force

__all__ = ["BushingForce", "body_xyz_angles", "body_xyz_n_matrix"]


def body_xyz_angles(R):
    """Body-fixed X-Y-Z angles of rotations ``R (..., 3, 3)``, as Simbody's
    ``Rotation::convertRotationToBodyFixedXYZ`` computes them (middle angle by
    ``atan2``, and its split of the first and third angle at gimbal lock).

    **Returns:** ``(..., 3)`` angles (rad).
    """
    rsum = jnp.sqrt((R[..., 0, 0] ** 2 + R[..., 0, 1] ** 2 + R[..., 1, 2] ** 2 + R[..., 2, 2] ** 2) / 2)
    t2 = jnp.arctan2(R[..., 0, 2], rsum)
    regular = rsum > 4 * jnp.finfo(R.dtype).eps
    t1_pos = jnp.arctan2(R[..., 1, 0] + R[..., 2, 1], R[..., 1, 1] - R[..., 2, 0])
    t1_neg = jnp.arctan2(R[..., 2, 1] - R[..., 1, 0], R[..., 1, 1] + R[..., 2, 0])
    t1 = jnp.where(regular, jnp.arctan2(-R[..., 1, 2], R[..., 2, 2]), jnp.where(R[..., 0, 2] > 0, t1_pos, t1_neg))
    t3 = jnp.where(regular, jnp.arctan2(-R[..., 0, 1], R[..., 0, 0]), 0.0)
    return jnp.stack([t1, t2, t3], -1)


def body_xyz_n_matrix(angles):
    """``N (..., 3, 3)`` with ``d(angles)/dt = N w`` for body-fixed X-Y-Z angles and
    the angular velocity ``w`` expressed in the rotated (body) frame (Simbody's
    ``calcNForBodyXYZInBodyFrame``); singular where ``cos(angles[1]) = 0``."""
    s1, c1 = jnp.sin(angles[..., 1]), jnp.cos(angles[..., 1])
    s2, c2 = jnp.sin(angles[..., 2]), jnp.cos(angles[..., 2])
    zero, one = jnp.zeros_like(s1), jnp.ones_like(s1)
    rows = [[c2 / c1, -s2 / c1, zero], [s2, c2, zero], [-s1 * c2 / c1, s1 * s2 / c1, one]]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


class BushingForce(Force):
    """A linear bushing between ``frame1`` and ``frame2`` (OpenSim BushingForce).

    **Fields:**

    - ``frame1``, ``frame2``: sockets to PhysicalFrames (often offset frames owned by
      the bushing, listed in ``frames``).
    - ``rotational_stiffness``, ``translational_stiffness`` (N m/rad, N/m);
      ``rotational_damping``, ``translational_damping`` (N m s/rad, N s/m): one value
      per axis of frame1 (x, y, z).
    - ``frames``: PhysicalOffsetFrames owned by the bushing.

    ``BushingForce("hip", "/bodyset/pelvis", "/bodyset/femur",
    location_in_frame2=(0, 0.4, 0), rotational_stiffness=(10, 10, 10))`` creates the
    offset frames like a Joint does.
    """

    frame1: str = socket("PhysicalFrame", doc="The first frame participating in this linker.")
    frame2: str = socket("PhysicalFrame", doc="The second frame participating in this linker.")
    rotational_stiffness: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="Rotational stiffness (N m/rad).", shape=(3,), bounds=(0.0, None)
    )
    translational_stiffness: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="Translational stiffness (N/m).", shape=(3,), bounds=(0.0, None)
    )
    rotational_damping: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="Rotational damping (N m s/rad).", shape=(3,), bounds=(0.0, None)
    )
    translational_damping: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="Translational damping (N s/m).", shape=(3,), bounds=(0.0, None)
    )
    frames: tuple = ()

    def __init__(
        self,
        name: str,
        frame1: str = "",
        frame2: str = "",
        *,
        rotational_stiffness=(0.0, 0.0, 0.0),
        translational_stiffness=(0.0, 0.0, 0.0),
        rotational_damping=(0.0, 0.0, 0.0),
        translational_damping=(0.0, 0.0, 0.0),
        location_in_frame1=None,
        orientation_in_frame1=None,
        location_in_frame2=None,
        orientation_in_frame2=None,
        frames: tuple = (),
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        frames = tuple(frames)
        if location_in_frame1 is not None or orientation_in_frame1 is not None:
            frame1, frames = _offset(frame1, location_in_frame1, orientation_in_frame1, frames)
        if location_in_frame2 is not None or orientation_in_frame2 is not None:
            frame2, frames = _offset(frame2, location_in_frame2, orientation_in_frame2, frames)
        self.frame1 = frame1
        self.frame2 = frame2
        self.frames = frames
        self.rotational_stiffness = rotational_stiffness
        self.translational_stiffness = translational_stiffness
        self.rotational_damping = rotational_damping
        self.translational_damping = translational_damping
        self.applies_force = applies_force
        self.components = components

    def z_variables(self) -> tuple[str, ...]:
        """``("dissipated_energy",)``: the energy dissipated by the damping (J)."""
        return ("dissipated_energy",)

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: the two frames of each bushing, their mobilizers, and
        whether it applies force."""
        f1 = tuple(build.socket(p, "frame1") for p in paths)
        f2 = tuple(build.socket(p, "frame2") for p in paths)
        return {
            "frame1": f1,
            "frame2": f2,
            "mob1": np.asarray([build.frame_mob(f) for f in f1], np.int32),
            "mob2": np.asarray([build.frame_mob(f) for f in f2], np.int32),
            "on": np.asarray([build.find(p).applies_force for p in paths], bool),
        }

    @staticmethod
    def _deflection(group, ctx):
        s = group.static
        R_GF, p_GF = ctx.frames_in_ground(s["frame1"])
        R_GM, p_GM = ctx.frames_in_ground(s["frame2"])
        R_FG = jnp.swapaxes(R_GF, -1, -2)
        R_FM = spatial.mat_mul(R_FG, R_GM)
        p_FM_G = p_GM - p_GF
        angles = body_xyz_angles(R_FM)
        q = jnp.concatenate([angles, spatial.mat_vec(R_FG, p_FM_G)], -1)
        return q, (R_GF, p_GF, R_GM, p_GM, R_FM, p_FM_G)

    @classmethod
    def _evaluate(cls, group, params, ctx):
        s = group.static
        q, (R_GF, p_GF, R_GM, p_GM, R_FM, p_FM_G) = cls._deflection(group, ctx)
        V1, V2 = ctx.vel.V[s["mob1"]], ctx.vel.V[s["mob2"]]
        w1, w2 = V1[:, :3], V2[:, :3]
        vF = V1[:, 3:] + jnp.cross(w1, p_GF)
        vM = V2[:, 3:] + jnp.cross(w2, p_GM)
        R_FG = jnp.swapaxes(R_GF, -1, -2)
        w_FM = spatial.mat_vec(R_FG, w2 - w1)
        v_FM = spatial.mat_vec(R_FG, vM - vF - jnp.cross(w1, p_FM_G))
        N = body_xyz_n_matrix(q[:, :3])
        w_FM_M = spatial.mat_tvec(R_FM, w_FM)
        qdot = jnp.concatenate([spatial.mat_vec(N, w_FM_M), v_FM], -1)
        K = jnp.concatenate([params["rotational_stiffness"], params["translational_stiffness"]], -1)
        C = jnp.concatenate([params["rotational_damping"], params["translational_damping"]], -1)
        fv = C * qdot
        f = -(K * q + fv)
        moment_G = spatial.mat_vec(R_GM, spatial.mat_tvec(N, f[:, :3]))
        force_G = spatial.mat_vec(R_GF, f[:, 3:])
        # load on frame 2's body about Ground's origin; frame 1's body gets its negative
        F2 = jnp.concatenate([moment_G + jnp.cross(p_GM, force_G), force_G], -1)
        pe = 0.5 * jnp.sum(K * q * q, -1)
        power = jnp.sum(fv * qdot, -1)
        return F2, q, qdot, pe, power

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: the bushing's spatial force on frame 2 and its opposite
        on frame 1.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``deflection``,
        ``deflection_rate`` (rad, m and their rates), ``potential_energy`` (J) and
        ``power_dissipation`` (W), each per bushing."""
        s = group.static
        F2, q, qdot, pe, power = cls._evaluate(group, params, ctx)
        F2 = jnp.where(s["on"][:, None], F2, 0.0)
        body = jnp.zeros((ctx.tree.n_mob, 6), F2.dtype).at[s["mob2"]].add(F2).at[s["mob1"]].add(-F2)
        return Forces(
            body=body,
            outputs={"deflection": q, "deflection_rate": qdot, "potential_energy": pe, "power_dissipation": power},
        )

    @classmethod
    def group_potential_energy(cls, group, params, ctx):
        """Elastic energy stored in the group's bushings, ``0.5 * sum(K q^2)`` (J)."""
        q, _ = cls._deflection(group, ctx)
        K = jnp.concatenate([params["rotational_stiffness"], params["translational_stiffness"]], -1)
        return 0.5 * jnp.sum(K * q * q)

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """Rates of the group's state variables: the damping power dissipated (W), one per
        bushing, ``(k, 1)``; and the ``power_dissipation`` output."""
        _, _, _, _, power = cls._evaluate(group, params, ctx)
        return power[:, None], {"power_dissipation": power}

    @output(Stage.POSITION, "Vec6")
    def deflection(self, ctx):
        """Body-fixed XYZ angles of frame2 in frame1, then frame2's origin in frame1."""
        return ctx.group_output(ctx.path, "deflection")

    @output(Stage.VELOCITY, "Vec6")
    def deflection_rate(self, ctx):
        """Time derivative of ``deflection``."""
        return ctx.group_output(ctx.path, "deflection_rate")

    @output(Stage.POSITION)
    def potential_energy(self, ctx):
        """Elastic energy stored in the bushing (J)."""
        return ctx.group_output(ctx.path, "potential_energy")

    @output(Stage.VELOCITY)
    def power_dissipation(self, ctx):
        """Power dissipated by the damping (W)."""
        return ctx.group_output(ctx.path, "power_dissipation")


def _offset(target: str, location, orientation, frames):
    base = target.rstrip("/").split("/")[-1] or "ground"
    frame = PhysicalOffsetFrame(
        f"{base}_offset",
        parent=target,
        translation=(0.0, 0.0, 0.0) if location is None else location,
        orientation=(0.0, 0.0, 0.0) if orientation is None else orientation,
    )
    return frame.name, frames + (frame,)
