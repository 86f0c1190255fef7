"""Force and actuator base classes, and the simple actuators.

(OpenSim Force, Actuator/ScalarActuator, CoordinateActuator, PointActuator,
TorqueActuator.) A Force contributes spatial forces on bodies and mobility forces;
an actuator's force is its control times ``optimal_force``. Controls are given in
``system.actuator_names`` order.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import Component, ModelError, Stage, flag, output, prop, socket
from ..groups import Forces, point_force_on_bodies, stack_properties, torque_on_bodies

__all__ = ["Force", "Actuator", "CoordinateActuator", "PointActuator", "TorqueActuator"]


class Force(Component):
    """Anything that applies forces to the multibody system (abstract).

    ``applies_force``: when false the force is computed (outputs) but not applied.
    """

    set_name: ClassVar[str | None] = "forceset"

    applies_force: bool = flag(True, doc="Whether the force is applied to the system.")

    @classmethod
    def compile_group(cls, build, paths) -> dict:
        """Static data of a group of this class (see ``simjax.groups``)."""
        return {}

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: its numeric properties stacked."""
        return stack_properties([model.find(p) for p in group.paths])

    @classmethod
    def group_forces(cls, group, params, ctx) -> Forces:
        """The group's forces. Subclasses implement this."""
        raise NotImplementedError(f"{cls.__name__} does not implement group_forces")


class Actuator(Force):
    """A force driven by one control signal (OpenSim ScalarActuator; abstract).

    **Fields:** ``min_control``, ``max_control``: bounds of the control;
    ``optimal_force``: force (N or N m) per unit control.
    """

    min_control: np.ndarray = prop(-np.inf, doc="Minimum control.")
    max_control: np.ndarray = prop(np.inf, doc="Maximum control.")
    optimal_force: np.ndarray = prop(1.0, doc="Force per unit control (N or N m).", bounds=(0.0, None))

    num_controls: ClassVar[int] = 1

    def validate(self, path: str) -> None:
        """Check ``min_control <= max_control``."""
        super().validate(path)
        lo, hi = self.min_control, self.max_control
        if isinstance(lo, np.ndarray) and isinstance(hi, np.ndarray) and lo > hi:
            raise ModelError(
                path, f"min_control {float(lo)} exceeds max_control {float(hi)}", prop="min_control", value=lo
            )

    @output(Stage.DYNAMICS)
    def actuation(self, ctx):
        """The actuator's force or torque (N or N m)."""
        return ctx.group_output(ctx.path, "actuation")

    @output(Stage.DYNAMICS)
    def control(self, ctx):
        """The actuator's control value."""
        return ctx.control_of(ctx.path)


def _control_indices(build, paths):
    return np.asarray([build.control_index(p) for p in paths], dtype=np.int32)


class CoordinateActuator(Actuator):
    """A generalized force along one coordinate: ``control * optimal_force``.

    **Fields:** ``coordinate``: socket to the Coordinate.
    """

    coordinate: str = socket("Coordinate", doc="The coordinate the actuator acts along.")

    def __init__(
        self,
        name: str,
        coordinate: str = "",
        optimal_force=1.0,
        min_control=-np.inf,
        max_control=np.inf,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.coordinate = coordinate
        self.optimal_force = optimal_force
        self.min_control = min_control
        self.max_control = max_control
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: each actuator's ``u`` index, control index and whether it
        applies force."""
        uidx = [build.coordinate(build.socket(p, "coordinate")).u for p in paths]
        on = [build.find(p).applies_force for p in paths]
        return {"u": np.asarray(uidx, np.int32), "control": _control_indices(build, paths), "on": np.asarray(on, bool)}

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Generalized forces of the group: ``control * optimal_force`` (N or N·m) on each
        coordinate's ``u``.

        **Returns:** ``Forces`` with ``mobility`` ``(nu,)`` and outputs ``actuation`` and
        ``speed`` ``(k,)``."""
        s = group.static
        act = ctx.controls[s["control"]] * params["optimal_force"]
        mob = jnp.zeros(ctx.tree.nu, act.dtype).at[s["u"]].add(jnp.where(s["on"], act, 0.0))
        return Forces(mobility=mob, outputs={"actuation": act, "speed": ctx.state.u[s["u"]]})

    @output(Stage.VELOCITY)
    def speed(self, ctx):
        """The actuator's speed (m/s or rad/s), as OpenSim's ``getSpeed``: the
        coordinate's speed."""
        return ctx.group_output(ctx.path, "speed")


class PointActuator(Actuator):
    """A force applied at a point on a body along a direction.

    **Fields:** ``body`` (socket), ``point`` (in the body, or Ground if
    ``point_is_global``), ``direction`` (in the body, or Ground if
    ``force_is_global``; normalized).
    """

    body: str = socket("PhysicalFrame", doc="The body the force acts on.")
    point: np.ndarray = prop((0.0, 0.0, 0.0), doc="Point of application (m).", shape=(3,))
    point_is_global: bool = flag(False, doc="Whether point is expressed in Ground.")
    direction: np.ndarray = prop((1.0, 0.0, 0.0), doc="Force direction.", shape=(3,))
    force_is_global: bool = flag(False, doc="Whether direction is expressed in Ground.")

    def __init__(
        self,
        name: str,
        body: str = "",
        point=(0.0, 0.0, 0.0),
        direction=(1.0, 0.0, 0.0),
        point_is_global: bool = False,
        force_is_global: bool = False,
        optimal_force=1.0,
        min_control=-np.inf,
        max_control=np.inf,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.body = body
        self.point = point
        self.direction = direction
        self.point_is_global = point_is_global
        self.force_is_global = force_is_global
        self.optimal_force = optimal_force
        self.min_control = min_control
        self.max_control = max_control
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: each actuator's body frame and mobilizer, control index,
        whether point and direction are given in Ground, and whether it applies force."""
        comps = [build.find(p) for p in paths]
        frames = [build.socket(p, "body") for p in paths]
        return {
            "frames": tuple(frames),
            "mob": np.asarray([build.frame_mob(f) for f in frames], np.int32),
            "control": _control_indices(build, paths),
            "pglobal": np.asarray([c.point_is_global for c in comps]),
            "fglobal": np.asarray([c.force_is_global for c in comps]),
            "on": np.asarray([c.applies_force for c in comps], bool),
        }

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: ``control * optimal_force`` (N) along the unit direction,
        applied at the point (m), both in Ground or the body's frame as set.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``actuation`` and
        ``speed`` ``(k,)``."""
        s = group.static
        R, p = ctx.frames_in_ground(s["frames"])
        in_body = spatial.transform_point((R, p), params["point"])
        pt = jnp.where(s["pglobal"][:, None], params["point"], in_body)
        d = params["direction"] / jnp.linalg.norm(params["direction"], axis=-1, keepdims=True)
        d = jnp.where(s["fglobal"][:, None], d, spatial.mat_vec(R, d))
        act = ctx.controls[s["control"]] * params["optimal_force"]
        F = d * jnp.where(s["on"], act, 0.0)[:, None]
        # (OpenSim's speed: the magnitude of the velocity of the point taken in the body,
        # whether or not it is given in Ground)
        V = ctx.vel.V[s["mob"]]
        speed = jnp.linalg.norm(V[:, 3:] + spatial.cross(V[:, :3], in_body), axis=-1)
        return Forces(
            body=point_force_on_bodies(ctx.tree.n_mob, s["mob"], pt, F, act.dtype),
            outputs={"actuation": act, "speed": speed},
        )

    @output(Stage.VELOCITY)
    def speed(self, ctx):
        """The actuator's speed (m/s), as OpenSim's ``getSpeed``: the magnitude of the
        point's velocity in Ground."""
        return ctx.group_output(ctx.path, "speed")


class TorqueActuator(Actuator):
    """Equal and opposite torques on two bodies about an axis.

    **Fields:** ``bodyA`` receives ``+torque``, ``bodyB`` ``-torque``; ``axis`` in
    bodyA (or Ground if ``torque_is_global``; normalized).
    """

    bodyA: str = socket("PhysicalFrame", doc="The body receiving +torque.")
    bodyB: str = socket("PhysicalFrame", doc="The body receiving -torque.")
    axis: np.ndarray = prop((0.0, 0.0, 1.0), doc="Torque axis.", shape=(3,))
    torque_is_global: bool = flag(True, doc="Whether axis is expressed in Ground.")

    def __init__(
        self,
        name: str,
        bodyA: str = "",
        bodyB: str = "",
        axis=(0.0, 0.0, 1.0),
        torque_is_global: bool = True,
        optimal_force=1.0,
        min_control=-np.inf,
        max_control=np.inf,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.bodyA = bodyA
        self.bodyB = bodyB
        self.axis = axis
        self.torque_is_global = torque_is_global
        self.optimal_force = optimal_force
        self.min_control = min_control
        self.max_control = max_control
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: bodies A and B (frames and mobilizers), control index,
        whether the axis is in Ground, and whether it applies force."""
        comps = [build.find(p) for p in paths]
        fa = [build.socket(p, "bodyA") for p in paths]
        fb = [build.socket(p, "bodyB") for p in paths]
        return {
            "fa": tuple(fa),
            "mobA": np.asarray([build.frame_mob(f) for f in fa], np.int32),
            "mobB": np.asarray([build.frame_mob(f) for f in fb], np.int32),
            "control": _control_indices(build, paths),
            "glob": np.asarray([c.torque_is_global for c in comps]),
            "on": np.asarray([c.applies_force for c in comps], bool),
        }

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body torques of the group: ``control * optimal_force`` (N·m) about the unit axis,
        on body A and its opposite on body B.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``actuation`` and
        ``speed`` ``(k,)``."""
        s = group.static
        R, _ = ctx.frames_in_ground(s["fa"])
        unit = params["axis"] / jnp.linalg.norm(params["axis"], axis=-1, keepdims=True)
        ax = jnp.where(s["glob"][:, None], unit, spatial.mat_vec(R, unit))
        act = ctx.controls[s["control"]] * params["optimal_force"]
        T = ax * jnp.where(s["on"], act, 0.0)[:, None]
        n = ctx.tree.n_mob
        body = torque_on_bodies(n, s["mobA"], T, act.dtype) + torque_on_bodies(n, s["mobB"], -T, act.dtype)
        # (OpenSim's speed: the bodies' relative angular velocity in Ground along the axis
        # as given, whether or not it is given in Ground)
        V = ctx.vel.V
        speed = jnp.sum((V[s["mobA"], :3] - V[s["mobB"], :3]) * unit, axis=-1)
        return Forces(body=body, outputs={"actuation": act, "speed": speed})

    @output(Stage.VELOCITY)
    def speed(self, ctx):
        """The actuator's speed (rad/s), as OpenSim's ``getSpeed``: the bodies' relative
        angular velocity along the axis."""
        return ctx.group_output(ctx.path, "speed")
