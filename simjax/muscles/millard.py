"""Millard2012EquilibriumMuscle: Hill-type muscle with an elastic tendon, fiber damping,
optional rigid tendon and Millard's smooth curve set (OpenSim 4.6, exact).

State variables (OpenSim's names): ``activation`` (unless
``ignore_activation_dynamics``) and ``fiber_length`` (unless
``ignore_tendon_compliance``). Three formulations, chosen per muscle as OpenSim
chooses them:

- *damped* elastic tendon (``fiber_damping >= 0.001``, the default 0.1): the fiber
  velocity solves ``a fal fv(v) + fpe + beta v = fse / cos(phi)`` (Newton, then
  implicit-function-theorem derivatives);
- *undamped* elastic tendon: ``v = fv^-1((fse / cos(phi) - fpe) / (a fal))``;
- *rigid* tendon: the fiber length follows the path.

At finalize time OpenSim adjusts the curves to the formulation (damped or rigid:
active-force-length minimum 0, force-velocity slopes at vmax at most 0, minimum
activation clamped into [0, 1]; undamped: minimum 0.1 and slopes at vmax at least
half those near vmax); simjax applies the same adjustments when it builds the
curves, and the same guards at run time (activation clamped into
``[minimum_activation, 1]``, fiber length at least the minimum fiber length, the
fiber state clamped while shortening at that minimum).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..component import ModelError, prop
from ..groups import stack_properties
from . import curves as C
from . import fiber_tendon as FT
from .muscle import SIGNIFICANT_REAL, SQRT_EPS, DampedFiberMuscle, FixedWidthPennation
from .path import GeometryPath
from .stacked_curves import concat_curves, curve_eval, solve_in_curve, stack_curve

__all__ = ["Millard2012EquilibriumMuscle"]

_MIN_DAMPING = 0.001  # MIN_NONZERO_DAMPING_COEFFICIENT


class Millard2012EquilibriumMuscle(DampedFiberMuscle):
    """OpenSim's Millard2012EquilibriumMuscle.

    ``Millard2012EquilibriumMuscle("biceps", 200, 0.6, 0.55, 0)`` takes, like
    OpenSim's constructor, the name, max isometric force (N), optimal fiber length
    (m), tendon slack length (m) and pennation angle at optimal (rad).

    **Fields:** the Muscle properties and ``fiber_damping`` (0.1),
    ``default_activation`` (0.05), ``default_fiber_length`` (0.1),
    ``activation_time_constant`` (0.01 s), ``deactivation_time_constant`` (0.04 s),
    ``minimum_activation`` (0.01), ``maximum_pennation_angle`` (acos(0.1)), and the
    curves ``ActiveForceLengthCurve``, ``ForceVelocityCurve``,
    ``FiberForceLengthCurve``, ``TendonForceLengthCurve``
    (``simjax.muscles.curves``). ``min_control`` defaults to ``minimum_activation``.
    """

    min_control: np.ndarray = prop(0.01, doc="Minimum excitation (at least minimum_activation).")
    fiber_damping: np.ndarray = prop(0.1, doc="The linear damping of the fiber.", bounds=(0.0, None))
    default_activation: np.ndarray = prop(0.05, doc="Assumed initial activation level if none is assigned.")
    default_fiber_length: np.ndarray = prop(0.1, doc="Assumed initial fiber length if none is assigned (m).")
    activation_time_constant: np.ndarray = prop(0.010, doc="Activation time constant (s).")
    deactivation_time_constant: np.ndarray = prop(0.040, doc="Deactivation time constant (s).")
    minimum_activation: np.ndarray = prop(0.01, doc="Activation lower bound.")
    maximum_pennation_angle: np.ndarray = prop(float(np.arccos(0.1)), doc="Maximum pennation angle (rad).")
    ActiveForceLengthCurve: C.ActiveForceLengthCurve = eqx.field(default_factory=C.ActiveForceLengthCurve)
    ForceVelocityCurve: C.ForceVelocityCurve = eqx.field(default_factory=C.ForceVelocityCurve)
    FiberForceLengthCurve: C.FiberForceLengthCurve = eqx.field(default_factory=C.FiberForceLengthCurve)
    TendonForceLengthCurve: C.TendonForceLengthCurve = eqx.field(default_factory=C.TendonForceLengthCurve)

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
        ignore_tendon_compliance: bool = False,
        ignore_activation_dynamics: bool = False,
        fiber_damping=0.1,
        default_activation=0.05,
        default_fiber_length=0.1,
        activation_time_constant=0.010,
        deactivation_time_constant=0.040,
        minimum_activation=0.01,
        maximum_pennation_angle=float(np.arccos(0.1)),
        ActiveForceLengthCurve=None,
        ForceVelocityCurve=None,
        FiberForceLengthCurve=None,
        TendonForceLengthCurve=None,
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
        self.fiber_damping = fiber_damping
        self.default_activation = default_activation
        self.default_fiber_length = default_fiber_length
        self.activation_time_constant = activation_time_constant
        self.deactivation_time_constant = deactivation_time_constant
        self.minimum_activation = minimum_activation
        self.maximum_pennation_angle = maximum_pennation_angle
        self.ActiveForceLengthCurve = ActiveForceLengthCurve or C.ActiveForceLengthCurve()
        self.ForceVelocityCurve = ForceVelocityCurve or C.ForceVelocityCurve()
        self.FiberForceLengthCurve = FiberForceLengthCurve or C.FiberForceLengthCurve()
        self.TendonForceLengthCurve = TendonForceLengthCurve or C.TendonForceLengthCurve()

    # -- state ------------------------------------------------------------------------

    def z_variables(self) -> tuple[str, ...]:
        """``activation`` and ``fiber_length``, less those the flags drop."""
        out = []
        if not self.ignore_activation_dynamics:
            out.append("activation")
        if not self.ignore_tendon_compliance:
            out.append("fiber_length")
        return tuple(out)

    def default_z(self):
        """``default_activation`` (clamped into [minimum_activation, 1]) and
        ``default_fiber_length`` (at least the minimum fiber length), as OpenSim's
        ``setActivation``/``setFiberLength`` store them."""
        out, cls = [], type(self)  # (methods through the class: see the component module)
        if not self.ignore_activation_dynamics:
            out.append(jnp.clip(jnp.asarray(self.default_activation), cls._min_activation_in_use(self), 1.0))
        if not self.ignore_tendon_compliance:
            out.append(jnp.maximum(jnp.asarray(self.default_fiber_length), cls.minimum_fiber_length(self)))
        return jnp.stack(out) if out else jnp.zeros(0)

    def with_defaults_from_state(self, z, d):
        """Set ``default_activation``/``default_fiber_length`` from state values."""
        changes, i = {}, 0
        if not self.ignore_activation_dynamics:
            changes["default_activation"] = z[i]
            i += 1
        if not self.ignore_tendon_compliance:
            changes["default_fiber_length"] = z[i]
        return self.replace(**changes)

    # -- properties in use ------------------------------------------------------------

    def _uses_damped_model(self):
        return self.ignore_tendon_compliance | (jnp.asarray(self.fiber_damping) >= _MIN_DAMPING)

    def _min_activation_in_use(self):
        m = jnp.asarray(self.minimum_activation)
        return jnp.where(type(self)._uses_damped_model(self), jnp.clip(m, 0.0, 1.0), m)

    def minimum_fiber_length(self):
        """The smallest fiber length the model allows (m): the larger of the active
        force-length curve's minimum and the pennation model's (OpenSim
        ``getMinimumFiberLength``)."""
        pen = FixedWidthPennation(
            jnp.asarray(self.optimal_fiber_length),
            jnp.asarray(self.pennation_angle_at_optimal),
            jnp.asarray(self.maximum_pennation_angle),
        )
        fal_min = jnp.asarray(self.ActiveForceLengthCurve.min_norm_active_fiber_length) * self.optimal_fiber_length
        return jnp.maximum(SIGNIFICANT_REAL, jnp.maximum(fal_min, pen.min_fiber_length))

    def validate(self, path: str) -> None:
        """OpenSim's finalize-time checks (``extendFinalizeFromProperties`` of the
        muscle, its pennation and activation models)."""
        super().validate(path)
        check = type(self)._check  # (through the class: Equinox wraps an instance's methods in new Modules)
        check(self, path, "maximum_pennation_angle", lambda v: 0 <= v <= np.pi / 2, "must be in the range [0, pi/2]")
        check(self, path, "activation_time_constant", lambda v: v >= SIGNIFICANT_REAL, "must be greater than zero")
        check(self, path, "deactivation_time_constant", lambda v: v >= SIGNIFICANT_REAL, "must be greater than zero")
        fv = self.ForceVelocityCurve
        for name in ("concentric_slope_near_vmax", "eccentric_slope_near_vmax"):
            v = getattr(fv, name)
            if isinstance(v, np.ndarray) and float(v) < SQRT_EPS:
                raise ModelError(
                    path, "must not be less than SimTK::SqrtEps (1.49e-8)", prop=f"ForceVelocityCurve/{name}", value=v
                )
        concrete = all(
            isinstance(getattr(self, n), np.ndarray) for n in ("fiber_damping", "minimum_activation", "min_control")
        )
        if not concrete:
            return
        damped = self.ignore_tendon_compliance or float(self.fiber_damping) >= _MIN_DAMPING
        m = float(self.minimum_activation)
        if not damped and m < 0.01:
            raise ModelError(
                path,
                "minimum activation cannot be less than 0.01 with the classic (undamped) Hill "
                "model and an elastic tendon (singular state derivative at zero activation)",
                prop="minimum_activation",
                value=self.minimum_activation,
            )
        if damped and m < 0.0:
            raise ModelError(
                path,
                "minimum activation cannot be less than zero",
                prop="minimum_activation",
                value=self.minimum_activation,
            )
        m_use = min(max(m, 0.0), 1.0) if damped else m
        if m_use > 1.0 - SIGNIFICANT_REAL:
            raise ModelError(
                path,
                "minimum activation must be in the range [0, 1)",
                prop="minimum_activation",
                value=self.minimum_activation,
            )
        if float(self.min_control) < m_use:
            raise ModelError(
                path,
                f"minimum control cannot be less than minimum activation ({m_use})",
                prop="min_control",
                value=self.min_control,
            )

    # -- group evaluation -------------------------------------------------------------

    @classmethod
    def group_params(cls, model, group):
        """Stacked properties and the curves, built for all members at once with
        OpenSim's formulation-dependent adjustments."""
        comps = [model.find(p) for p in group.paths]
        p = stack_properties(comps)
        dtype = jnp.result_type(float)

        def stack(getter):
            return jnp.stack([jnp.asarray(getter(c), dtype) for c in comps])

        rigid = jnp.asarray(group.static["rigid"])
        damped = p["fiber_damping"] >= _MIN_DAMPING
        alt = rigid | damped  # OpenSim's "damped model" adjustments
        p["beta"] = jnp.where(damped, p["fiber_damping"], 0.0)
        p["damped"] = damped
        p["min_act"] = jnp.where(alt, jnp.clip(p["minimum_activation"], 0.0, 1.0), p["minimum_activation"])
        fal = [
            stack(lambda c, n=n: getattr(c.ActiveForceLengthCurve, n))
            for n in (
                "min_norm_active_fiber_length",
                "transition_norm_fiber_length",
                "max_norm_active_fiber_length",
                "shallow_ascending_slope",
                "minimum_value",
            )
        ]
        fal[4] = jnp.where(alt, 0.0, jnp.maximum(fal[4], 0.1))
        p["fal_min_norm_length"] = fal[0]
        fv = [
            stack(lambda c, n=n: getattr(c.ForceVelocityCurve, n))
            for n in (
                "concentric_slope_at_vmax",
                "concentric_slope_near_vmax",
                "isometric_slope",
                "eccentric_slope_at_vmax",
                "eccentric_slope_near_vmax",
                "max_eccentric_velocity_force_multiplier",
                "concentric_curviness",
                "eccentric_curviness",
            )
        ]
        fv_inv = list(fv)
        fv_inv[0], fv_inv[3] = 0.5 * fv[1], 0.5 * fv[4]
        fv[0] = jnp.where(alt, jnp.minimum(fv[0], 0.0), jnp.maximum(fv[0], 0.5 * fv[1]))
        fv[3] = jnp.where(alt, jnp.minimum(fv[3], 0.0), jnp.maximum(fv[3], 0.5 * fv[4]))
        fpe = [
            stack(lambda c: c.FiberForceLengthCurve.strain_at_zero_force),
            stack(lambda c: c.FiberForceLengthCurve.strain_at_one_norm_force),
            stack(lambda c: c.FiberForceLengthCurve.stiffness_at_low_force_in_use),
            stack(lambda c: c.FiberForceLengthCurve.stiffness_at_one_norm_force_in_use),
            stack(lambda c: c.FiberForceLengthCurve.curviness_in_use),
        ]
        fse = [
            stack(lambda c: c.TendonForceLengthCurve.strain_at_one_norm_force),
            stack(lambda c: c.TendonForceLengthCurve.stiffness_at_one_norm_force_in_use),
            stack(lambda c: c.TendonForceLengthCurve.norm_force_at_toe_end_in_use),
            stack(lambda c: c.TendonForceLengthCurve.curviness_in_use),
        ]
        p["curve_args"] = {"fal": fal, "fpe": fpe, "fse": fse, "fv": fv, "fv_inv": fv_inv}
        return p

    @classmethod
    def derived_params(cls, static, p):
        """The curves, built once per evaluation context (see ``Muscle.params``)."""
        p = dict(p)
        a = p.pop("curve_args")
        # fal, fpe and fse are evaluated together (one solve): stacked as 3k members
        p["lengths"] = concat_curves(
            [
                _build(C._build_active_force_length, a["fal"]),
                _build(C._build_fiber_force_length, a["fpe"]),
                _build(C._build_tendon_force_length, a["fse"]),
            ]
        )
        # the damped fiber velocity (fv), the undamped one (fv_inv) and, with rigid
        # tendons, fv at the path's velocity are found by one stacked solve
        fv_curve = _build(C._build_force_velocity, a["fv"])
        blocks = [fv_curve, _build(C._build_force_velocity_inverse, a["fv_inv"])]
        if static["rigid"].any():
            blocks.append(fv_curve)
        p["velocity"] = concat_curves(blocks)
        return p

    @classmethod
    def group_mechanics(cls, static, p, length, speed, excitation, z, d):
        """Millard2012EquilibriumMuscle's ``calcMuscleLengthInfo``,
        ``calcFiberVelocityInfo``, ``calcMuscleDynamicsInfo`` and state derivatives."""
        rigid, no_act = static["rigid"], static["no_act"]
        fiso, ofl, tsl = p["max_isometric_force"], p["optimal_fiber_length"], p["tendon_slack_length"]
        vmax, beta, damped = p["max_contraction_velocity"], p["beta"], p["damped"]
        L, Ldot = length, speed
        a = jnp.clip(jnp.where(no_act, excitation, z[:, 0]), p["min_act"], 1.0)
        pen = FixedWidthPennation(ofl, p["pennation_angle_at_optimal"], p["maximum_pennation_angle"])
        lmin = _min_fiber_length(p, pen)

        # length info
        lce = jnp.maximum(jnp.where(rigid, pen.fiber_length(L, tsl), z[:, 1]), lmin)
        lceN, phi, cos, sin, tl, tlN = FT.length_info(pen, ofl, tsl, L, lce)
        (fal, dfal), (fpe, dfpe), (fse, dfse) = _length_curves(p, lceN, tlN)

        # velocity info
        kt = jnp.where(rigid, jnp.inf, dfse * fiso / tsl)
        den = a * fal
        fv_u = (fse / cos - fpe) / jnp.where(den > 0, den, 1.0)
        k = L.shape[0]
        one, zero = jnp.ones_like(L), jnp.zeros_like(L)
        alpha = [a * fal, zero]  # damped: a fal fv(v) + beta v = fse/cos - fpe
        beta_ = [jnp.where(damped, beta, 1.0), one]  # undamped: v = fv_inv(fv_u)
        rhs = [fse / cos - fpe, fv_u]
        if rigid.any():  # rigid: fv at the path's velocity
            slack = tl < tsl - SIGNIFICANT_REAL
            dlceN_r = jnp.where(slack, 0.0, Ldot * cos) / (ofl * vmax)
            alpha, beta_, rhs = alpha + [zero], beta_ + [one], rhs + [dlceN_r]
        v, y, _ = solve_in_curve(p["velocity"], jnp.concatenate(alpha), jnp.concatenate(beta_), jnp.concatenate(rhs))
        dlceN = jnp.where(damped, v[:k], y[k : 2 * k])
        fv = jnp.where(damped, y[:k], fv_u)
        if rigid.any():
            dlceN = jnp.where(rigid, dlceN_r, dlceN)
            fv = jnp.where(rigid, jnp.where(slack, 1.0, y[2 * k :]), fv)
        dlce, dlceN, dlceAT, dphi, dtl, clamped = FT.velocity_info(
            pen, lce, phi, cos, sin, dlceN, Ldot, vmax, ofl, lce <= lmin, rigid=rigid
        )
        fv = jnp.where(clamped, 1.0, fv)

        # dynamics info
        aFm = fiso * a * fal * fv
        p1 = fiso * fpe
        p2 = fiso * beta * dlceN
        fm = aFm + p1 + p2
        neg = rigid & (fm < 0)
        fm = jnp.where(neg, 0.0, fm)
        p2 = jnp.where(neg, -aFm - p1, p2)
        dFm = fiso * (a * dfal / ofl * fv + dfpe / ofl)
        dphi_dlce = pen.dphi_dlce(lce)
        dFmAT_dlce = dFm * cos - fm * sin * dphi_dlce
        dFmAT_dlceAT = dFmAT_dlce / (cos - lce * sin * dphi_dlce)
        zero = jnp.zeros_like(fm)
        aFm, p1, p2, fm, dFm, dFmAT_dlceAT, kt_eff = (
            jnp.where(clamped, zero, x) for x in (aFm, p1, p2, fm, dFm, dFmAT_dlceAT, kt)
        )
        nft = jnp.where(rigid, fm * cos / fiso, fse)
        zdot = FT.activation_fiber_length_zdot(
            static["on"],
            a,
            excitation,
            p["activation_time_constant"],
            p["deactivation_time_constant"],
            p["min_act"],
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
            fiber_force=fm,
            active_fiber_force=aFm,
            passive_fiber_force=p1 + p2,
            normalized_tendon_force=nft,
            fiber_stiffness=dFm,
            fiber_stiffness_along_tendon=dFmAT_dlceAT,
            tendon_stiffness=kt_eff,
            rigid=rigid,
            fiber_active_power=-(aFm + p2) * dlce,
            fiber_passive_power=-(p1 * dlce),
            zdot=zdot,
            passive_fiber_elastic_force=p1,
            passive_fiber_damping_force=p2,
        )

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """``d(activation)/dt`` and ``d(fiber_length)/dt`` (zero when the muscle does
        not apply force, as OpenSim)."""
        return cls._zdot(group, params, ctx)

    @classmethod
    def group_equilibrium(cls, group, ctx):
        """Fiber lengths at which tendon and fiber forces balance with zero fiber
        velocity (OpenSim ``computeFiberEquilibrium(s, false)``); rigid-tendon members
        are left as they are."""
        from .path import path_lengths

        s = group.static
        if not (~s["rigid"] & s["on"]).any():
            return None
        p = cls.params(group, ctx)
        L = path_lengths(ctx)[s["rows"]]
        z = jnp.concatenate([ctx.state.z, jnp.zeros(1, ctx.state.q.dtype)])[s["z"]]
        exc = ctx.controls[s["control"]]
        a = jnp.clip(jnp.where(s["no_act"], exc, z[:, 0]), p["min_act"], 1.0)
        lce = static_equilibrium(p, L, a)
        keep = ~s["rigid"] & s["on"]
        return s["z"][keep, 1], lce[keep]


# -- helpers ----------------------------------------------------------------------------------


def _build(builder, args):
    """Build one curve per member (vmapped over the stacked args), in stacked form."""
    return stack_curve(jax.vmap(lambda *a: builder(jnp, C._Checker(builder.__name__, False), *a))(*args))


def _eval(curve, x, orders=(0, 1)):
    """Values (and slopes) of stacked curves, member ``i`` at ``x[i]``."""
    y, dy = curve_eval(curve, x)
    return tuple({0: y, 1: dy}[o] for o in orders)


def _length_curves(p, lceN, tlN):
    """``(fal, dfal)``, ``(fpe, dfpe)``, ``(fse, dfse)``: the three length curves,
    evaluated by one stacked call."""
    y, dy = curve_eval(p["lengths"], jnp.concatenate([lceN, lceN, tlN]))
    k = lceN.shape[0]
    return tuple((y[i * k : (i + 1) * k], dy[i * k : (i + 1) * k]) for i in range(3))


def _min_fiber_length(p, pen):
    return jnp.maximum(
        SIGNIFICANT_REAL, jnp.maximum(p["fal_min_norm_length"] * p["optimal_fiber_length"], pen.min_fiber_length)
    )


def _static_residual(lce, L, a, p):
    """``(fiber force along tendon - tendon force) / fiso`` at fiber length ``lce``
    with zero fiber velocity (OpenSim's static equilibrium)."""
    pen = FixedWidthPennation(p["optimal_fiber_length"], p["pennation_angle_at_optimal"], p["maximum_pennation_angle"])
    lceN, _, cos, _, _, tlN = FT.length_info(pen, p["optimal_fiber_length"], p["tendon_slack_length"], L, lce)
    (fal, _), (fpe, _), (fse, _) = _length_curves(p, lceN, tlN)
    return (a * fal + fpe) * cos - fse


def static_equilibrium(p, L, a):
    """Equilibrium fiber lengths at path lengths ``L`` and activations ``a`` (clamped).

    Bracketed Newton on ``[minimum fiber length, length at tendon slack]`` started
    where OpenSim starts (tendon at 1.01 slack lengths); a fiber too short for any
    balance ends at the minimum fiber length, as in OpenSim.
    """
    pen = FixedWidthPennation(p["optimal_fiber_length"], p["pennation_angle_at_optimal"], p["maximum_pennation_angle"])
    keys = (
        "optimal_fiber_length",
        "pennation_angle_at_optimal",
        "maximum_pennation_angle",
        "tendon_slack_length",
        "lengths",
    )
    args = (L, a, {k: p[k] for k in keys})
    return FT.equilibrium_fiber_length(
        _static_residual, args, pen, L, p["tendon_slack_length"], _min_fiber_length(p, pen)
    )
