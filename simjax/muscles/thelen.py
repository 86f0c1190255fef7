"""Thelen2003Muscle: Thelen's (2003) Hill-type muscle with an elastic tendon
(OpenSim 4.6, exact).

State variables: ``activation`` and ``fiber_length`` (OpenSim's
ActivationFiberLengthMuscle; ignoring tendon compliance or activation dynamics is
not implemented there either). Fiber velocity comes from inverting Thelen's
force-velocity relation (with OpenSim's linear extrapolation beyond
``fv_linear_extrap_threshold``); activation follows first-order dynamics with
activation clamped into ``[minimum_activation, 1]``; the fiber state is clamped at
the pennation model's minimum fiber length while shortening.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from ..component import ModelError, prop
from . import curves as C
from . import fiber_tendon as FT
from .muscle import SIGNIFICANT_REAL, FixedWidthPennation, Muscle
from .path import GeometryPath

__all__ = ["Thelen2003Muscle"]


class Thelen2003Muscle(Muscle):
    """OpenSim's Thelen2003Muscle.

    ``Thelen2003Muscle(name, max_isometric_force, optimal_fiber_length,
    tendon_slack_length, pennation_angle_at_optimal)``.

    **Fields:** the Muscle properties and ``FmaxTendonStrain`` (0.04),
    ``FmaxMuscleStrain`` (0.6), ``KshapeActive`` (0.45), ``KshapePassive`` (5),
    ``Af`` (0.25), ``Flen`` (1.4), ``fv_linear_extrap_threshold`` (0.95),
    ``maximum_pennation_angle`` (acos(0.1)), ``activation_time_constant`` (0.015 s),
    ``deactivation_time_constant`` (0.05 s), ``minimum_activation`` (0.01),
    ``default_activation`` (0.05), ``default_fiber_length`` (0.1 m).
    ``min_control`` defaults to ``minimum_activation``.
    """

    min_control: np.ndarray = prop(0.01, doc="Minimum excitation (at least minimum_activation).")
    FmaxTendonStrain: np.ndarray = prop(0.04, doc="Tendon strain at maximum isometric muscle force.")
    FmaxMuscleStrain: np.ndarray = prop(0.6, doc="Passive muscle strain at maximum isometric muscle force.")
    KshapeActive: np.ndarray = prop(0.45, doc="Shape factor for Gaussian active muscle force-length relationship.")
    KshapePassive: np.ndarray = prop(5.0, doc="Exponential shape factor for passive force-length relationship.")
    Af: np.ndarray = prop(0.25, doc="Force-velocity shape factor.")
    Flen: np.ndarray = prop(1.4, doc="Maximum normalized lengthening force.")
    fv_linear_extrap_threshold: np.ndarray = prop(0.95, doc="fv threshold where linear extrapolation is used.")
    maximum_pennation_angle: np.ndarray = prop(float(np.arccos(0.1)), doc="Maximum pennation angle (rad).")
    activation_time_constant: np.ndarray = prop(0.015, doc="Time constant for ramping up muscle activation (s).")
    deactivation_time_constant: np.ndarray = prop(0.050, doc="Time constant for ramping down muscle activation (s).")
    minimum_activation: np.ndarray = prop(0.01, doc="Lower bound on activation.")
    default_activation: np.ndarray = prop(0.05, doc="Assumed initial activation level if none is assigned.")
    default_fiber_length: np.ndarray = prop(0.1, doc="Assumed initial fiber length if none is assigned (m).")

    state_names: ClassVar[tuple[str, ...]] = ("activation", "fiber_length")

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
        FmaxTendonStrain=0.04,
        FmaxMuscleStrain=0.6,
        KshapeActive=0.45,
        KshapePassive=5.0,
        Af=0.25,
        Flen=1.4,
        fv_linear_extrap_threshold=0.95,
        maximum_pennation_angle=float(np.arccos(0.1)),
        activation_time_constant=0.015,
        deactivation_time_constant=0.050,
        minimum_activation=0.01,
        default_activation=0.05,
        default_fiber_length=0.1,
        ignore_tendon_compliance: bool = False,
        ignore_activation_dynamics: bool = False,
        min_control=None,
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
            minimum_activation if min_control is None else min_control,
            max_control,
            optimal_force,
            applies_force,
            components,
        )
        self.FmaxTendonStrain = FmaxTendonStrain
        self.FmaxMuscleStrain = FmaxMuscleStrain
        self.KshapeActive = KshapeActive
        self.KshapePassive = KshapePassive
        self.Af = Af
        self.Flen = Flen
        self.fv_linear_extrap_threshold = fv_linear_extrap_threshold
        self.maximum_pennation_angle = maximum_pennation_angle
        self.activation_time_constant = activation_time_constant
        self.deactivation_time_constant = deactivation_time_constant
        self.minimum_activation = minimum_activation
        self.default_activation = default_activation
        self.default_fiber_length = default_fiber_length

    def z_variables(self) -> tuple[str, ...]:
        """``activation`` and ``fiber_length``."""
        return ("activation", "fiber_length")

    def default_z(self):
        """``default_activation`` and ``default_fiber_length``, stored as given."""
        return jnp.stack([jnp.asarray(self.default_activation), jnp.asarray(self.default_fiber_length)])

    def with_defaults_from_state(self, z, d):
        """Set ``default_activation`` and ``default_fiber_length`` from state values."""
        return self.replace(default_activation=z[0], default_fiber_length=z[1])

    def validate(self, path: str) -> None:
        """OpenSim's finalize-time checks of Thelen2003Muscle."""
        super().validate(path)
        if self.ignore_tendon_compliance or self.ignore_activation_dynamics:
            flag_name = "ignore_tendon_compliance" if self.ignore_tendon_compliance else "ignore_activation_dynamics"
            raise ModelError(
                path, "is not implemented for Thelen2003Muscle (as in OpenSim)", prop=flag_name, value=True
            )
        for name in ("FmaxTendonStrain", "FmaxMuscleStrain", "KshapeActive", "KshapePassive", "Af"):
            self._check(path, name, lambda v: v > 0, "must be greater than zero")
        self._check(path, "Flen", lambda v: v > 1.0, "must be greater than 1")
        if isinstance(self.Flen, np.ndarray):
            self._check(
                path, "fv_linear_extrap_threshold", lambda v: v > 1.0 / float(self.Flen), "must be greater than 1/Flen"
            )
        self._check(path, "maximum_pennation_angle", lambda v: 0 <= v <= np.pi / 2, "must be in the range [0, pi/2]")
        self._check(path, "activation_time_constant", lambda v: v >= SIGNIFICANT_REAL, "must be greater than zero")
        self._check(path, "deactivation_time_constant", lambda v: v >= SIGNIFICANT_REAL, "must be greater than zero")
        self._check(
            path, "minimum_activation", lambda v: 0.01 <= v <= 1.0 - SIGNIFICANT_REAL, "must be in the range [0.01, 1)"
        )
        if isinstance(self.min_control, np.ndarray) and isinstance(self.minimum_activation, np.ndarray):
            if float(self.min_control) < float(self.minimum_activation):
                raise ModelError(
                    path,
                    f"minimum control cannot be less than minimum activation ({float(self.minimum_activation)})",
                    prop="min_control",
                    value=self.min_control,
                )

    @classmethod
    def group_mechanics(cls, static, p, length, speed, excitation, z, d):
        """Thelen2003Muscle's ``calcMuscleLengthInfo``, ``calcFiberVelocityInfo``,
        ``calcMuscleDynamicsInfo`` and state derivatives."""
        fiso, ofl, tsl, vmax = (
            p["max_isometric_force"],
            p["optimal_fiber_length"],
            p["tendon_slack_length"],
            p["max_contraction_velocity"],
        )
        L, Ldot = length, speed
        a = jnp.clip(z[:, 0], p["minimum_activation"], 1.0)
        pen = FixedWidthPennation(ofl, p["pennation_angle_at_optimal"], p["maximum_pennation_angle"])
        lce_state = z[:, 1]
        lce = jnp.maximum(pen.min_fiber_length, lce_state)
        lceN, phi, cos, sin, tl, tlN = FT.length_info(pen, ofl, tsl, L, lce)
        fpe = C.thelen_passive_force_length(lceN, p["FmaxMuscleStrain"], p["KshapePassive"])
        fal = C.thelen_active_force_length(lceN, p["KshapeActive"])
        fse = C.thelen_tendon_force_length(tlN, p["FmaxTendonStrain"])

        afalfv = fse / cos - fpe
        fv = afalfv / (a * fal)
        dlceN = C.thelen_norm_fiber_velocity(a, fal, afalfv, p["Af"], p["Flen"], p["fv_linear_extrap_threshold"])
        dlce, dlceN, dlceAT, dphi, dtl, clamped = FT.velocity_info(
            pen, lce, phi, cos, sin, dlceN, Ldot, vmax, ofl, lce_state <= pen.min_fiber_length
        )
        fv = jnp.where(clamped, 1.0, fv)

        aFm = a * fal * fv * fiso
        Fm = (a * fal * fv + fpe) * fiso
        dFm = _dfm_dlce(p, lceN, a, fv)
        dFmAT_dlce = dFm * cos + Fm * _dcosphi_dlce(pen.height, lce)
        dFmAT_dlceAT = dFmAT_dlce * cos
        dFt_dtl = C.thelen_tendon_force_length_derivative(tlN, p["FmaxTendonStrain"]) * fiso / tsl
        aFm, Fm, dFm, dFmAT_dlceAT, dFt_dtl = (
            jnp.where(clamped, 0.0, x) for x in (aFm, Fm, dFm, dFmAT_dlceAT, dFt_dtl)
        )
        zdot = FT.activation_fiber_length_zdot(
            static["on"],
            a,
            excitation,
            p["activation_time_constant"],
            p["deactivation_time_constant"],
            p["minimum_activation"],
            dlce,
        )
        return FT.outputs(
            fiso,
            tsl,
            activation=a,
            fiber_length=lce,
            normalized_fiber_length=lceN,
            pennation_angle=phi,
            cos_pennation_angle=cos,
            tendon_length=tl,
            normalized_tendon_length=tlN,
            fiber_velocity=dlce,
            normalized_fiber_velocity=dlceN,
            fiber_velocity_along_tendon=dlceAT,
            pennation_angular_velocity=dphi,
            tendon_velocity=dtl,
            passive_force_multiplier=fpe,
            active_force_length_multiplier=fal,
            force_velocity_multiplier=fv,
            fiber_force=Fm,
            active_fiber_force=aFm,
            passive_fiber_force=fpe * fiso,
            normalized_tendon_force=fse,
            fiber_stiffness=dFm,
            fiber_stiffness_along_tendon=dFmAT_dlceAT,
            tendon_stiffness=dFt_dtl,
            rigid=False,
            fiber_active_power=-aFm * dlce,
            fiber_passive_power=-fpe * fiso * dlce,
            zdot=zdot,
        )

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """``d(activation)/dt`` and ``d(fiber_length)/dt`` (zero when the muscle does
        not apply force)."""
        return cls._zdot(group, params, ctx)

    @classmethod
    def group_equilibrium(cls, group, ctx):
        """Fiber lengths balancing fiber and tendon forces, the path's lengthening speed
        shared between fiber and tendon by their stiffnesses (OpenSim
        ``initMuscleState``)."""
        from .path import path_lengths, path_speeds

        s = group.static
        if not s["on"].any():
            return None
        p = cls.params(group, ctx)
        L = path_lengths(ctx)[s["rows"]]
        Ldot = path_speeds(ctx)[s["rows"]]
        z = jnp.concatenate([ctx.state.z, jnp.zeros(1, ctx.state.q.dtype)])[s["z"]]
        a = jnp.clip(z[:, 0], p["minimum_activation"], 1.0)
        pen = FixedWidthPennation(
            p["optimal_fiber_length"], p["pennation_angle_at_optimal"], p["maximum_pennation_angle"]
        )
        lmin = jnp.maximum(pen.min_fiber_length, 1e-6 * p["optimal_fiber_length"])
        lce = FT.equilibrium_fiber_length(
            _equilibrium_residual, (L, Ldot, a, p), pen, L, p["tendon_slack_length"], lmin
        )
        keep = s["on"]
        return s["z"][keep, 1], lce[keep]


def _dfm_dlce(p, lceN, a, fv):
    dfal = C.thelen_active_force_length_derivative(lceN, p["KshapeActive"])
    dfpe = C.thelen_passive_force_length_derivative(lceN, p["FmaxMuscleStrain"], p["KshapePassive"])
    return ((a * fv) * dfal + dfpe) * p["max_isometric_force"] / p["optimal_fiber_length"]


def _dcosphi_dlce(h, lce):
    """Thelen's ``d cos(phi) / d lce`` for a fixed-width pennation model."""
    ok = (h > 0) & (lce > h)
    lce = jnp.where(ok, lce, 1.0)
    h2, l2 = jnp.where(ok, h * h, 0.0), lce * lce
    return jnp.where(ok, h2 / (l2 * lce * jnp.sqrt(1.0 - h2 / l2)), 0.0)


def _equilibrium_residual(lce, L, Ldot, a, p):
    """``(fiber force along tendon - tendon force) / fiso`` at fiber length ``lce``,
    with OpenSim's stiffness-weighted split of the path's lengthening speed.

    The force-velocity multiplier enters the stiffnesses that split the speed; as in
    OpenSim's iteration (where it lags one step behind), it is found by two
    fixed-point passes from ``fv = 1``.
    """
    fiso, ofl, tsl = p["max_isometric_force"], p["optimal_fiber_length"], p["tendon_slack_length"]
    pen = FixedWidthPennation(ofl, p["pennation_angle_at_optimal"], p["maximum_pennation_angle"])
    lceN, _, cos, _, tl, tlN = FT.length_info(pen, ofl, tsl, L, lce)
    fse = C.thelen_tendon_force_length(tlN, p["FmaxTendonStrain"])
    fal = C.thelen_active_force_length(lceN, p["KshapeActive"])
    fpe = C.thelen_passive_force_length(lceN, p["FmaxMuscleStrain"], p["KshapePassive"])
    dFt_dtl = C.thelen_tendon_force_length_derivative(tlN, p["FmaxTendonStrain"]) * fiso / tsl
    fv = jnp.ones_like(lce)
    for _ in range(2):
        Fm = (a * fal * fv + fpe) * fiso
        dFmAT_dlceAT = (_dfm_dlce(p, lceN, a, fv) * cos + Fm * _dcosphi_dlce(pen.height, lce)) * cos
        tot = dFmAT_dlceAT + dFt_dtl
        share = (jnp.abs(tot) > SIGNIFICANT_REAL) & (tl > tsl)
        dtl = jnp.where(share, dFmAT_dlceAT / jnp.where(share, tot, 1.0) * Ldot, Ldot)
        dlceN = (Ldot - dtl) * cos / (p["max_contraction_velocity"] * ofl)
        fv = C.thelen_force_velocity_multiplier(a, fal, dlceN, p["Af"], p["Flen"], p["fv_linear_extrap_threshold"])
    return (a * fal * fv + fpe) * cos - fse
