"""DeGrooteFregly2016Muscle: the smooth muscle of De Groote et al. (2016), preferred
for optimization (OpenSim 4.6, exact).

State variables: ``activation`` (unless ``ignore_activation_dynamics``) and
``normalized_tendon_force`` (unless ``ignore_tendon_compliance``). Tendon dynamics
are *explicit* (the fiber velocity follows from inverting the force-velocity curve,
the state derivative from the tendon velocity) or *implicit*
(``tendon_compliance_dynamics_mode = "implicit"``: the derivative of normalized
tendon force is the discrete variable ``implicitderiv_normalized_tendon_force``
and the output ``implicitresidual_normalized_tendon_force`` is the equilibrium
residual, for direct collocation). Activation dynamics blend activation and
deactivation time constants with a tanh; activation is not clamped. Fiber damping
adds ``fiber_damping * normalized fiber velocity`` to the normalized fiber force.

OpenSim 4.6 reads the three activation-dynamics properties into function-level
statics (the first muscle evaluated sets them for all); simjax uses each muscle's
own values.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from ..component import ModelError, Stage, flag, output, prop
from . import curves as C
from .muscle import DampedFiberMuscle, newton_ift
from .path import GeometryPath
from .solvers import bracketed_newton

__all__ = ["DeGrooteFregly2016Muscle"]

_MAX_NORM_TENDON_FORCE = 5.0


class DeGrooteFregly2016Muscle(DampedFiberMuscle):
    """OpenSim's DeGrooteFregly2016Muscle.

    **Fields:** the Muscle properties and ``activation_time_constant`` (0.015 s),
    ``deactivation_time_constant`` (0.060 s), ``default_activation`` (0.5),
    ``default_normalized_tendon_force`` (0.5), ``active_force_width_scale`` (1),
    ``fiber_damping`` (0), ``passive_fiber_strain_at_one_norm_force`` (0.6),
    ``tendon_strain_at_one_norm_force`` (0.049), ``ignore_passive_fiber_force``
    (False), ``tendon_compliance_dynamics_mode`` (``"explicit"`` or ``"implicit"``),
    ``activation_dynamics_smoothing`` (0.1).
    """

    activation_time_constant: np.ndarray = prop(
        0.015, doc="Smaller value means activation can increase more rapidly (s)."
    )
    deactivation_time_constant: np.ndarray = prop(
        0.060, doc="Smaller value means activation can decrease more rapidly (s)."
    )
    default_activation: np.ndarray = prop(0.5, doc="Value of activation in the default state.")
    default_normalized_tendon_force: np.ndarray = prop(
        0.5, doc="Value of normalized tendon force in the default state.", bounds=(0.0, _MAX_NORM_TENDON_FORCE)
    )
    active_force_width_scale: np.ndarray = prop(
        1.0, doc="Scale factor for the width of the active force-length curve.", bounds=(1.0, None)
    )
    fiber_damping: np.ndarray = prop(
        0.0,
        doc="Linear damping of the fiber (times normalized fiber velocity and max isometric force).",
        bounds=(0.0, None),
    )
    passive_fiber_strain_at_one_norm_force: np.ndarray = prop(
        0.6, doc="Fiber strain when the passive fiber force is 1 normalized force."
    )
    tendon_strain_at_one_norm_force: np.ndarray = prop(0.049, doc="Tendon strain at a tension of 1 normalized force.")
    ignore_passive_fiber_force: bool = flag(False, doc="Make the passive fiber force 0.")
    tendon_compliance_dynamics_mode: str = flag("explicit", doc="'explicit' or 'implicit' tendon compliance dynamics.")
    activation_dynamics_smoothing: np.ndarray = prop(
        0.1, doc="Smoothness of the tanh switch between activation and deactivation."
    )

    state_names: ClassVar[tuple[str, ...]] = ("activation", "normalized_tendon_force")
    discrete_names: ClassVar[tuple[str, ...]] = ("implicitderiv_normalized_tendon_force",)

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
        activation_time_constant=0.015,
        deactivation_time_constant=0.060,
        default_activation=0.5,
        default_normalized_tendon_force=0.5,
        active_force_width_scale=1.0,
        fiber_damping=0.0,
        passive_fiber_strain_at_one_norm_force=0.6,
        tendon_strain_at_one_norm_force=0.049,
        ignore_passive_fiber_force: bool = False,
        tendon_compliance_dynamics_mode: str = "explicit",
        activation_dynamics_smoothing=0.1,
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
        self.activation_time_constant = activation_time_constant
        self.deactivation_time_constant = deactivation_time_constant
        self.default_activation = default_activation
        self.default_normalized_tendon_force = default_normalized_tendon_force
        self.active_force_width_scale = active_force_width_scale
        self.fiber_damping = fiber_damping
        self.passive_fiber_strain_at_one_norm_force = passive_fiber_strain_at_one_norm_force
        self.tendon_strain_at_one_norm_force = tendon_strain_at_one_norm_force
        self.ignore_passive_fiber_force = ignore_passive_fiber_force
        self.tendon_compliance_dynamics_mode = tendon_compliance_dynamics_mode
        self.activation_dynamics_smoothing = activation_dynamics_smoothing

    @property
    def implicit(self) -> bool:
        """Whether tendon dynamics are implicit (and the tendon compliant)."""
        return self.tendon_compliance_dynamics_mode == "implicit" and not self.ignore_tendon_compliance

    def z_variables(self) -> tuple[str, ...]:
        """``activation`` and ``normalized_tendon_force``, less those the flags drop."""
        out = []
        if not self.ignore_activation_dynamics:
            out.append("activation")
        if not self.ignore_tendon_compliance:
            out.append("normalized_tendon_force")
        return tuple(out)

    def default_z(self):
        """``default_activation`` and ``default_normalized_tendon_force``."""
        out = []
        if not self.ignore_activation_dynamics:
            out.append(jnp.asarray(self.default_activation))
        if not self.ignore_tendon_compliance:
            out.append(jnp.asarray(self.default_normalized_tendon_force))
        return jnp.stack(out) if out else jnp.zeros(0)

    def discrete_variables(self) -> tuple[str, ...]:
        """``implicitderiv_normalized_tendon_force`` in implicit mode."""
        return ("implicitderiv_normalized_tendon_force",) if self.implicit else ()

    def with_defaults_from_state(self, z, d):
        """Set the default activation and normalized tendon force from state values."""
        changes, i = {}, 0
        if not self.ignore_activation_dynamics:
            changes["default_activation"] = z[i]
            i += 1
        if not self.ignore_tendon_compliance:
            changes["default_normalized_tendon_force"] = z[i]
        return self.replace(**changes)

    def validate(self, path: str) -> None:
        """OpenSim's finalize-time checks of DeGrooteFregly2016Muscle."""
        super().validate(path)
        if isinstance(self.optimal_force, np.ndarray) and float(self.optimal_force) != 1.0:
            raise ModelError(
                path,
                "the optimal_force property is ignored for this Force; use max_isometric_force instead",
                prop="optimal_force",
                value=self.optimal_force,
            )
        for name in (
            "activation_time_constant",
            "deactivation_time_constant",
            "default_activation",
            "passive_fiber_strain_at_one_norm_force",
            "tendon_strain_at_one_norm_force",
            "activation_dynamics_smoothing",
        ):
            self._check(path, name, lambda v: v > 0, "must be greater than zero")
        if self.tendon_compliance_dynamics_mode not in ("explicit", "implicit"):
            raise ModelError(
                path,
                "must be 'explicit' or 'implicit'",
                prop="tendon_compliance_dynamics_mode",
                value=self.tendon_compliance_dynamics_mode,
            )

    @classmethod
    def compile_group(cls, build, paths):
        """Static data, plus which members use implicit tendon dynamics and ignore
        passive fiber force."""
        s = super().compile_group(build, paths)
        comps = [build.find(p) for p in paths]
        s["implicit"] = np.asarray([c.implicit for c in comps], bool)
        s["no_passive"] = np.asarray([c.ignore_passive_fiber_force for c in comps], bool)
        return s

    @classmethod
    def group_mechanics(cls, static, p, length, speed, excitation, z, d):
        """DeGrooteFregly2016Muscle's length, velocity and dynamics info and state
        derivatives (``calc*InfoHelper``, ``computeStateVariableDerivatives``)."""
        rigid, implicit = static["rigid"], static["implicit"]
        fiso, ofl, tsl = p["max_isometric_force"], p["optimal_fiber_length"], p["tendon_slack_length"]
        vmax = p["max_contraction_velocity"] * ofl
        e_t = p["tendon_strain_at_one_norm_force"]
        L, Ldot = length, speed
        a = jnp.where(static["no_act"], excitation, z[:, 0])
        ntf_state = z[:, 1]
        geo = _length_info(p, static, L, jnp.where(rigid, 0.5, ntf_state))
        tlN, lce, lceN, lat, cos, sin, fpe, fal = geo
        dfse = C.degroote_tendon_force_length_derivative(tlN, e_t)
        w = ofl * jnp.sin(p["pennation_angle_at_optimal"])

        # explicit: fiber velocity from the inverse force-velocity curve
        den = a * fal
        fv_e = (ntf_state / cos - fpe) / jnp.where(den != 0, den, 1.0)
        vN_e = C.degroote_force_velocity_inverse(fv_e)
        tv_e = Ldot - vN_e * vmax / cos
        # rigid or implicit: tendon velocity given, fiber velocity follows
        ntv_i = jnp.where(rigid, 0.0, d[:, 0] / dfse)
        tv_i = tsl * ntv_i
        vN_i = (Ldot - tv_i) * cos / vmax
        explicit = ~rigid & ~implicit
        vN = jnp.where(explicit, vN_e, vN_i)
        fv = jnp.where(explicit, fv_e, C.degroote_force_velocity(vN_i))
        tv = jnp.where(explicit, tv_e, tv_i)
        v = vN * vmax
        dphi = -v / lce * (w / lat)

        aFm = fiso * a * fal * fv
        pc = fiso * fpe
        pn = fiso * p["fiber_damping"] * vN
        fm = aFm + pc + pn
        fmAT = fm * cos
        ntf = jnp.where(rigid, fm / fiso * cos, ntf_state)
        tendon_force = jnp.where(rigid, fmAT, fiso * ntf_state)
        dfal = C.degroote_active_force_length_derivative(lceN, p["active_force_width_scale"])
        dfpe = jnp.where(
            static["no_passive"],
            0.0,
            C.degroote_passive_force_length_derivative(lceN, p["passive_fiber_strain_at_one_norm_force"]),
        )
        kf = fiso * (a * dfal / ofl * fv + dfpe / ofl)
        dphi_dlce = (-w / lce**2) / jnp.sqrt(1.0 - (w / lce) ** 2)
        dFmAT_dlce = kf * cos - fm * sin * dphi_dlce
        kf_at = dFmAT_dlce / (cos - lce * sin * dphi_dlce)
        kt = jnp.where(rigid, jnp.inf, fiso / tsl * dfse)
        kt_s = jnp.where(rigid, 1.0, kt)
        k_mt = jnp.where(rigid, kf_at, kf_at * kt_s / (kf_at + kt_s))
        adot = C.degroote_activation_derivative(
            a,
            excitation,
            p["activation_time_constant"],
            p["deactivation_time_constant"],
            p["activation_dynamics_smoothing"],
        )
        ntf_dot = jnp.where(implicit, d[:, 0], tv / tsl * dfse)
        residual = jnp.where(rigid, 0.0, jnp.where(implicit, ntf_state - fmAT / fiso, jnp.nan))
        return {
            "actuation": tendon_force,
            "tendon_force": tendon_force,
            "activation": a,
            "fiber_length": lce,
            "normalized_fiber_length": lceN,
            "pennation_angle": jnp.arcsin(sin),
            "cos_pennation_angle": cos,
            "fiber_length_along_tendon": lat,
            "tendon_length": tsl * tlN,
            "normalized_tendon_length": tlN,
            "tendon_strain": tlN - 1.0,
            "passive_force_multiplier": fpe,
            "active_force_length_multiplier": fal,
            "fiber_velocity": v,
            "normalized_fiber_velocity": vN,
            "fiber_velocity_along_tendon": Ldot - tv,
            "pennation_angular_velocity": dphi,
            "tendon_velocity": tv,
            "normalized_tendon_velocity": tv / tsl,
            "force_velocity_multiplier": fv,
            "fiber_force": fm,
            "fiber_force_along_tendon": fmAT,
            "normalized_fiber_force": fm / fiso,
            "active_fiber_force": aFm,
            "passive_fiber_force": pc + pn,
            "passive_fiber_elastic_force": pc,
            "passive_fiber_damping_force": pn,
            "normalized_tendon_force": ntf,
            "fiber_stiffness": kf,
            "fiber_stiffness_along_tendon": kf_at,
            "tendon_stiffness": kt,
            "muscle_stiffness": k_mt,
            "fiber_active_power": -(aFm + pn) * v,
            "fiber_passive_power": -pc * v,
            "tendon_power": -tendon_force * tv,
            "implicitresidual_normalized_tendon_force": residual,
            "zdot": jnp.stack([adot, ntf_dot], -1),
        }

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """``d(activation)/dt`` and ``d(normalized_tendon_force)/dt``."""
        return cls._zdot(group, params, ctx)

    @classmethod
    def group_equilibrium(cls, group, ctx):
        """Normalized tendon forces balancing fiber and tendon with zero tendon
        velocity (OpenSim ``computeInitialFiberEquilibrium``; bracket [0, 5])."""
        from .path import path_lengths, path_speeds

        s = group.static
        keep = ~s["rigid"] & s["on"]
        if not keep.any():
            return None
        p = cls.params(group, ctx)
        L = path_lengths(ctx)[s["rows"]]
        Ldot = path_speeds(ctx)[s["rows"]]
        z = jnp.concatenate([ctx.state.z, jnp.zeros(1, ctx.state.q.dtype)])[s["z"]]
        a = jnp.where(s["no_act"], ctx.controls[s["control"]], z[:, 0])
        args = (L, Ldot, a, p, s["no_passive"])
        zero = jnp.zeros_like(L)
        ntf, _, _ = bracketed_newton(
            _equilibrium_residual, zero + 0.5, zero, zero + _MAX_NORM_TENDON_FORCE, args, tol=1e-15
        )
        ntf = newton_ift(ntf, _equilibrium_residual, *args)
        return s["z"][keep, 1], ntf[keep]

    @output(Stage.DYNAMICS)
    def implicitresidual_normalized_tendon_force(self, ctx):
        """Equilibrium residual of implicit tendon dynamics (NaN in explicit mode)."""
        return self._out(ctx, "implicitresidual_normalized_tendon_force")

    @output(Stage.DYNAMICS)
    def normalized_tendon_force(self, ctx):
        """Tendon force / max isometric force."""
        return self._out(ctx, "normalized_tendon_force")


def _length_info(p, static, L, ntf):
    """``calcMuscleLengthInfoHelper`` for stacked muscles: the tendon length from the
    normalized tendon force (slack length for a rigid tendon), the fiber from the
    rest of the path with a constant width."""
    ofl, tsl = p["optimal_fiber_length"], p["tendon_slack_length"]
    tlN = jnp.where(
        static["rigid"], 1.0, C.degroote_tendon_force_length_inverse(ntf, p["tendon_strain_at_one_norm_force"])
    )
    w = ofl * jnp.sin(p["pennation_angle_at_optimal"])
    lat = L - tsl * tlN
    lce = jnp.sqrt(lat**2 + w**2)
    lceN = lce / ofl
    fpe = jnp.where(
        static["no_passive"], 0.0, C.degroote_passive_force_length(lceN, p["passive_fiber_strain_at_one_norm_force"])
    )
    fal = C.degroote_active_force_length(lceN, p["active_force_width_scale"])
    return tlN, lce, lceN, lat, lat / lce, w / lce, fpe, fal


def _equilibrium_residual(ntf, L, Ldot, a, p, no_passive):
    """``calcEquilibriumResidual`` with zero tendon-force derivative."""
    static = {"rigid": jnp.zeros(ntf.shape, bool), "no_passive": no_passive}
    tlN, lce, lceN, lat, cos, sin, fpe, fal = _length_info(p, static, L, ntf)
    vN = Ldot * cos / (p["max_contraction_velocity"] * p["optimal_fiber_length"])
    fm = a * fal * C.degroote_force_velocity(vN) + fpe + p["fiber_damping"] * vN
    return ntf - fm * cos
