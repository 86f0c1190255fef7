"""CoordinateLimitForce: a smooth, damped spring that holds a coordinate in its range.

OpenSim's model (``OpenSim::CoordinateLimitForce``): past ``upper_limit`` the
stiffness ramps from 0 to ``upper_stiffness`` over ``transition`` with Simbody's
quintic step ``10t^3 - 15t^4 + 6t^5`` (``SimTK::Function::Step``), and likewise
below ``lower_limit``; damping acts only inside the limits, weighted by the same
ramps::

    f = -K_up(q) (q - q_up) + K_low(q) (q_low - q) - damping (s_up + s_low) qdot

with ``s`` the ramps (0..1) and ``K = stiffness * s``. For a rotational coordinate
the limits and the transition are in degrees and the stiffnesses and damping per
degree, as in OpenSim. ``potential_energy`` is OpenSim's closed form;
``compute_dissipation_energy`` adds the state variable ``dissipatedEnergy`` whose
derivative is the power dissipated by damping.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..component import ModelError, Stage, flag, output, prop
from ..groups import Forces
from ._common import coordinate_indices, masked_mobility
from .base import Force

__all__ = ["CoordinateLimitForce", "step_up"]


def step_up(t):
    """Simbody's smooth step ``10t^3 - 15t^4 + 6t^5`` on ``[0, 1]`` (0 below, 1 above).

    **Arguments:** ``t``: array. **Returns:** array of ``t``'s shape.
    """
    t = jnp.clip(t, 0.0, 1.0)
    return t * t * t * (10.0 + t * (6.0 * t - 15.0))


class CoordinateLimitForce(Force):
    """Passive limit spring-damper on one coordinate (OpenSim CoordinateLimitForce).

    **Fields:**

    - ``coordinate``: the coordinate's name (or path).
    - ``upper_stiffness``, ``lower_stiffness``: stiffness past each limit (N/m, or
      N m/degree for rotations).
    - ``upper_limit``, ``lower_limit``: the range (m, or degrees for rotations).
    - ``damping``: damping past the limits (N s/m, or N m s/degree).
    - ``transition``: width over which stiffness and damping ramp up (m or degrees).
    - ``compute_dissipation_energy``: add the ``dissipatedEnergy`` state variable.
    """

    coordinate: str = flag("", doc="Name of the coordinate to be limited.")
    upper_stiffness: np.ndarray = prop(1.0, doc="Stiffness past the upper limit (N/m or N m/degree).")
    upper_limit: np.ndarray = prop(0.0, doc="Upper limit (m or degrees).")
    lower_stiffness: np.ndarray = prop(1.0, doc="Stiffness past the lower limit (N/m or N m/degree).")
    lower_limit: np.ndarray = prop(0.0, doc="Lower limit (m or degrees).")
    damping: np.ndarray = prop(0.001, doc="Damping past the limits (N s/m or N m s/degree).")
    transition: np.ndarray = prop(0.1, doc="Width of the stiffness ramp (m or degrees).", bounds=(0.0, None))
    compute_dissipation_energy: bool = flag(False, doc="Whether to integrate the dissipated energy.")

    def __init__(
        self,
        name: str,
        coordinate: str = "",
        upper_limit=0.0,
        upper_stiffness=1.0,
        lower_limit=0.0,
        lower_stiffness=1.0,
        damping=0.001,
        transition=0.1,
        compute_dissipation_energy: bool = False,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.coordinate = coordinate
        self.upper_limit = upper_limit
        self.upper_stiffness = upper_stiffness
        self.lower_limit = lower_limit
        self.lower_stiffness = lower_stiffness
        self.damping = damping
        self.transition = transition
        self.compute_dissipation_energy = compute_dissipation_energy
        self.applies_force = applies_force
        self.components = components

    def validate(self, path: str) -> None:
        """Check ``transition > 0`` (Simbody's step needs a non-empty interval)."""
        super().validate(path)
        if isinstance(self.transition, np.ndarray) and not self.transition > 0:
            raise ModelError(path, "must be > 0", prop="transition", value=self.transition)

    def z_variables(self) -> tuple[str, ...]:
        """``("dissipatedEnergy",)`` when ``compute_dissipation_energy`` is set."""
        return ("dissipatedEnergy",) if self.compute_dissipation_energy else ()

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: coordinate indices, whether each force applies, and the
        members that integrate their dissipated energy."""
        comps = [build.find(p) for p in paths]
        return {
            **coordinate_indices(build, paths),
            "on": np.asarray([c.applies_force for c in comps], bool),
            "z_members": np.asarray([i for i, c in enumerate(comps) if c.compute_dissipation_energy], np.int32),
        }

    @staticmethod
    def _evaluate(group, params, ctx):
        s = group.static
        q, qdot = ctx.state.q[s["q"]], ctx.state.u[s["u"]]
        w = jnp.where(s["rotational"], np.pi / 180.0, 1.0)
        q_up, q_low = w * params["upper_limit"], w * params["lower_limit"]
        k_up, k_low = params["upper_stiffness"] / w, params["lower_stiffness"] / w
        damp = params["damping"] / w
        width = w * params["transition"]
        s_up = step_up((q - q_up) / width)
        s_low = 1.0 - step_up((q - (q_low - width)) / width)
        f_damp = -damp * (s_up + s_low) * qdot
        f = -k_up * s_up * (q - q_up) + k_low * s_low * (q_low - q) + f_damp
        # OpenSim's closed-form potential energy
        above, below = q > q_up, q < q_low
        K = jnp.where(above, k_up, jnp.where(below, k_low, 0.0))
        delta = jnp.where(above, q - q_up, jnp.where(below, q_low - q, 0.0))
        x = delta / width
        pe = K * jnp.where(
            delta >= width,
            (-2.0 / 14.0) * width * width + 0.5 * delta * delta,
            x * x * x * (2.0 - 2.5 * x + (6.0 / 7.0) * x * x) * delta * delta,
        )
        return f, -qdot * f_damp, pe

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Generalized forces of the group: the limit spring and damping force on each
        coordinate (N·m or N).

        **Returns:** ``Forces`` with ``mobility`` ``(nu,)`` and outputs ``limit_force``,
        ``power_dissipation`` (W) and ``potential_energy`` (J)."""
        s = group.static
        f, power, pe = cls._evaluate(group, params, ctx)
        return Forces(
            mobility=masked_mobility(ctx.tree.nu, s["u"], f, s["on"]),
            outputs={"limit_force": f, "power_dissipation": power, "potential_energy": pe},
        )

    @classmethod
    def group_potential_energy(cls, group, params, ctx):
        """Elastic energy stored in the group's limit springs (J)."""
        return jnp.sum(cls._evaluate(group, params, ctx)[2])

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """Rates of the group's state variables: the damping power dissipated (W), ``(m, 1)``
        for the members that integrate it; and the ``power_dissipation`` output."""
        s = group.static
        _, power, _ = cls._evaluate(group, params, ctx)
        zdot = jnp.where(s["on"], power, 0.0)[s["z_members"]][:, None]
        return zdot, {"power_dissipation": power}

    @output(Stage.DYNAMICS)
    def limit_force(self, ctx):
        """The generalized limit force (N or N m)."""
        return ctx.group_output(ctx.path, "limit_force")

    @output(Stage.DYNAMICS)
    def power_dissipation(self, ctx):
        """Power dissipated by the damping (W)."""
        return ctx.group_output(ctx.path, "power_dissipation")

    @output(Stage.POSITION)
    def potential_energy(self, ctx):
        """OpenSim's potential energy of the limit spring (J)."""
        return ctx.group_output(ctx.path, "potential_energy")
