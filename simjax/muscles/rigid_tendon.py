"""RigidTendonMuscle: a muscle with a rigid tendon and no state (OpenSim 4.6, exact).

Activation is the excitation; the fiber length follows the path (minus the tendon
slack length, at constant fiber width); the fiber velocity is the path's
lengthening speed (OpenSim does not project it onto the fiber); the active
force-length, passive force-length and force-velocity curves are Functions (by
default OpenSim's SimmSplines).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..function_bank import bank_eval
from ..functions import Function, SimmSpline
from .muscle import SQRT_EPS, FunctionCurveMuscle
from .path import GeometryPath

__all__ = ["RigidTendonMuscle"]

_FAL_X = (
    -5.30769200,
    -4.30769200,
    -1.92307700,
    -0.88461500,
    -0.26923100,
    0.23076900,
    0.46153800,
    0.52725000,
    0.62875000,
    0.71875000,
    0.86125000,
    1.04500000,
    1.21750000,
    1.43875000,
    1.50000000,
    1.61538500,
    2.00000000,
    2.96153800,
    3.69230800,
    5.46153800,
    9.90190200,
)
_FAL_Y = (
    0.01218800,
    0.02189900,
    0.03646600,
    0.05249300,
    0.07531200,
    0.11415800,
    0.15785900,
    0.22666700,
    0.63666700,
    0.85666700,
    0.95000000,
    0.99333300,
    0.77000000,
    0.24666700,
    0.19382100,
    0.13325200,
    0.07268300,
    0.04441700,
    0.03634100,
    0.02189900,
    0.00733200,
)
_FPE_X = (-5.0, 0.998, 0.999, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.601, 1.602, 5.0)
_FPE_Y = (0.0, 0.0, 0.0, 0.0, 0.035, 0.12, 0.26, 0.55, 1.17, 2.0, 2.0, 2.0, 2.0)
_FV_X = (
    -1.001,
    -1.0,
    -0.95,
    -0.9,
    -0.85,
    -0.8,
    -0.75,
    -0.7,
    -0.65,
    -0.6,
    -0.55,
    -0.5,
    -0.45,
    -0.4,
    -0.35,
    -0.3,
    -0.25,
    -0.2,
    -0.15,
    -0.1,
    -0.05,
    0.0,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.55,
    0.6,
    0.65,
    0.7,
    0.75,
    0.8,
    0.85,
    0.9,
    0.95,
    1.0,
)
_FV_Y = (
    0.0,
    0.0,
    0.010417,
    0.021739,
    0.034091,
    0.047619,
    0.0625,
    0.078947,
    0.097222,
    0.117647,
    0.140625,
    0.166667,
    0.196429,
    0.230769,
    0.270833,
    0.318182,
    0.375,
    0.444444,
    0.53125,
    0.642857,
    0.791667,
    1.0,
    1.482014,
    1.601571,
    1.655791,
    1.686739,
    1.706751,
    1.720753,
    1.731099,
    1.739055,
    1.745365,
    1.75049,
    1.754736,
    1.758312,
    1.761364,
    1.763999,
    1.766298,
    1.768321,
    1.770115,
    1.771717,
    1.773155,
    1.774455,
)


def default_active_force_length_curve() -> SimmSpline:
    """RigidTendonMuscle's default active force-length curve (OpenSim's SimmSpline)."""
    return SimmSpline(np.asarray(_FAL_X), np.asarray(_FAL_Y))


def default_passive_force_length_curve() -> SimmSpline:
    """RigidTendonMuscle's default passive force-length curve."""
    return SimmSpline(np.asarray(_FPE_X), np.asarray(_FPE_Y))


def default_force_velocity_curve() -> SimmSpline:
    """RigidTendonMuscle's default force-velocity curve."""
    return SimmSpline(np.asarray(_FV_X), np.asarray(_FV_Y))


class RigidTendonMuscle(FunctionCurveMuscle):
    """OpenSim's RigidTendonMuscle.

    **Fields:** the Muscle properties and the Functions ``active_force_length_curve``,
    ``passive_force_length_curve`` (clamped into [0, 10]) and
    ``force_velocity_curve`` (of normalized length or velocity).
    """

    active_force_length_curve: Function = eqx.field(default_factory=lambda: default_active_force_length_curve())
    passive_force_length_curve: Function = eqx.field(default_factory=lambda: default_passive_force_length_curve())
    force_velocity_curve: Function = eqx.field(default_factory=lambda: default_force_velocity_curve())

    def __init__(
        self,
        name: str,
        max_isometric_force=1000.0,
        optimal_fiber_length=0.1,
        tendon_slack_length=0.2,
        pennation_angle_at_optimal=0.0,
        *,
        path: GeometryPath | None = None,
        max_contraction_velocity=10.0,
        active_force_length_curve: Function | None = None,
        passive_force_length_curve: Function | None = None,
        force_velocity_curve: Function | None = None,
        ignore_tendon_compliance: bool = False,
        ignore_activation_dynamics: bool = False,
        min_control=0.0,
        max_control=1.0,
        optimal_force=1.0,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self._init_muscle(
            name,
            max_isometric_force,
            optimal_fiber_length,
            tendon_slack_length,
            pennation_angle_at_optimal,
            path,
            max_contraction_velocity,
            ignore_tendon_compliance,
            ignore_activation_dynamics,
            min_control,
            max_control,
            optimal_force,
            applies_force,
            components,
        )
        self.active_force_length_curve = active_force_length_curve or default_active_force_length_curve()
        self.passive_force_length_curve = passive_force_length_curve or default_passive_force_length_curve()
        self.force_velocity_curve = force_velocity_curve or default_force_velocity_curve()

    def _curves(self):
        return (self.active_force_length_curve, self.passive_force_length_curve, self.force_velocity_curve)

    @classmethod
    def group_mechanics(cls, static, p, length, speed, excitation, z, d):
        """RigidTendonMuscle's length, velocity and dynamics info."""
        fiso, ofl, tsl = p["max_isometric_force"], p["optimal_fiber_length"], p["tendon_slack_length"]
        width = ofl * jnp.sin(p["pennation_angle_at_optimal"])
        L, Ldot = length, speed
        lat = jnp.maximum(L - tsl, 0.0)
        wide = width > SQRT_EPS
        lce = jnp.where(wide, jnp.sqrt(lat**2 + width**2), lat)
        cos = jnp.where(wide, lat / jnp.where(lce > 0, lce, 1.0), 1.0)
        lceN = lce / ofl
        vN = Ldot / (ofl * p["max_contraction_velocity"])
        x = jnp.stack([lceN, lceN, vN], -1).reshape(-1)
        (vals,) = bank_eval(static["bank"], p["curves"], x)
        fal, fpe, fv = (vals.reshape(-1, 3)[:, i] for i in range(3))
        fpe = jnp.clip(fpe, 0.0, 10.0)
        a = excitation
        aFm = fiso * a * fal * fv
        pFm = fiso * fpe
        fm = aFm + pFm
        tendon_force = fm * cos
        zero = jnp.zeros_like(L)
        return {
            "actuation": tendon_force,
            "tendon_force": tendon_force,
            "activation": a,
            "fiber_length": lce,
            "normalized_fiber_length": lceN,
            "pennation_angle": jnp.arccos(cos),
            "cos_pennation_angle": cos,
            "fiber_length_along_tendon": lce * cos,
            "tendon_length": tsl + zero,
            "normalized_tendon_length": 1.0 + zero,
            "tendon_strain": zero,
            "passive_force_multiplier": fpe,
            "active_force_length_multiplier": fal,
            "fiber_velocity": Ldot,
            "normalized_fiber_velocity": vN,
            "force_velocity_multiplier": fv,
            "fiber_force": fm,
            "fiber_force_along_tendon": tendon_force,
            "normalized_fiber_force": fm / fiso,
            "active_fiber_force": aFm,
            "passive_fiber_force": pFm,
            "normalized_tendon_force": (a * fal * fv + fpe) * cos,
            "fiber_active_power": -aFm * Ldot,
            "fiber_passive_power": -pFm * Ldot,
            "tendon_power": zero,
            "zdot": jnp.zeros((L.shape[0], 1), L.dtype),
        }
