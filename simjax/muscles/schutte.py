"""Schutte1993Muscle_Deprecated: Schutte's (1993) Hill-type muscle of SIMM with an
elastic tendon and fiber damping (OpenSim 4.6, exact).

State variables: ``activation`` and ``fiber_length`` (OpenSim's
ActivationFiberLengthMuscle_Deprecated; ignoring tendon compliance or activation
dynamics is not implemented there either). The model works in normalized units:
lengths in optimal fiber lengths, forces in maximum isometric forces and time in
``time_scale`` seconds.

- activation: ``da/dt = (u - a) (activation1 u + activation2) / time_scale`` while
  the excitation ``u >= a``, ``(u - a) activation2 / time_scale`` otherwise (the
  activation is *not* clamped);
- tendon force: ``tendon_force_length_curve`` of the tendon strain (0 below slack
  length);
- passive fiber force: OpenSim's exponential ``exp(8 (l - 1)) / exp(4)`` while
  ``passive_force_length_curve`` is not set (``None``, OpenSim's default value),
  otherwise that curve; active: ``active_force_length_curve``, clamped at 0;
- fiber velocity: the inverse of Schutte's force-velocity relation with damping
  (``kv = 0.15``, ``slope_k = 0.13``, ``fmax = 1.4``) for the velocity-dependent
  force ``tendon_force / cos(pennation) - passive`` (clamped at 0); with the fibers
  at 90 degrees pennation it follows the path (OpenSim's formula is kept as is,
  including its mix of normalized and absolute lengths).

Outputs are those OpenSim reports for this class: the fiber force, the stiffnesses,
the powers, the force-velocity multiplier and the fiber and tendon velocities along
the tendon are never computed by OpenSim's ``ActivationFiberLengthMuscle_Deprecated``
and read NaN there, and so they do here (``muscle_stiffness`` reads 0); the tendon
force, passive and active fiber forces, lengths, strains, multipliers, fiber
velocity and activation are OpenSim's values.

``equilibrate_muscles`` runs OpenSim's ``computeIsometricForce`` iteration (the one
``computeInitialFiberEquilibrium`` calls: stiffness-scaled steps and regula-falsi
after a sign change, stopping when fiber and tendon forces agree within 0.01 N), so
it gives OpenSim's fiber lengths to round-off; its derivatives are those of the
exact equilibrium (implicit function theorem) at that point.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..component import ModelError, prop
from ..function_bank import bank_eval
from ..functions import Constant, Function, SimmSpline
from .muscle import EPS, FunctionCurveMuscle
from .path import GeometryPath, path_lengths

__all__ = [
    "Schutte1993Muscle_Deprecated",
    "default_tendon_force_length_curve",
    "default_active_force_length_curve",
    "default_passive_force_length_curve",
]

#: SimmMacros.h ROUNDOFF_ERROR
ROUNDOFF_ERROR = 2e-13
#: Schutte's force-velocity constants (calcFiberVelocity)
_KV, _SLOPE_K, _FMAX = 0.15, 0.13, 1.4
#: computeIsometricForce's iteration limits and tendon constants
_MAX_ITERATIONS = 100
_ERROR_LIMIT = 0.01
_TENDON_ELASTIC_MODULUS = 1200.0
_TENDON_MAX_STRESS = 32.0

_TFL_X = (
    -10.0,
    -0.002,
    -0.001,
    0.0,
    0.00131,
    0.00281,
    0.00431,
    0.00581,
    0.00731,
    0.00881,
    0.0103,
    0.0118,
    0.0123,
    9.2,
    9.201,
    9.202,
    20.0,
)
_TFL_Y = (
    0.0,
    0.0,
    0.0,
    0.0,
    0.0108,
    0.0257,
    0.0435,
    0.0652,
    0.0915,
    0.123,
    0.161,
    0.208,
    0.227,
    345.0,
    345.0,
    345.0,
    345.0,
)
_AFL_X = (
    -5.307692,
    -4.307692,
    -1.923077,
    -0.884615,
    -0.269231,
    0.230769,
    0.461538,
    0.52725,
    0.62875,
    0.71875,
    0.86125,
    1.045,
    1.2175,
    1.43875,
    1.5,
    1.615385,
    2.0,
    2.961538,
    3.692308,
    5.461538,
    9.901902,
)
_AFL_Y = (
    0.012188,
    0.021899,
    0.036466,
    0.052493,
    0.075312,
    0.114158,
    0.157859,
    0.226667,
    0.636667,
    0.856667,
    0.95,
    0.993333,
    0.77,
    0.246667,
    0.193821,
    0.133252,
    0.072683,
    0.044417,
    0.036341,
    0.021899,
    0.007332,
)
_PFL_X = (-5.0, 0.998, 0.999, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.601, 1.602, 5.0)
_PFL_Y = (0.0, 0.0, 0.0, 0.0, 0.035, 0.12, 0.26, 0.55, 1.17, 2.0, 2.0, 2.0, 2.0)


def default_tendon_force_length_curve() -> SimmSpline:
    """Schutte1993Muscle_Deprecated's default tendon force-length curve.

    **Returns:** OpenSim's SimmSpline of the normalized tendon force (in maximum
    isometric forces) against the tendon strain.
    """
    return SimmSpline(np.asarray(_TFL_X), np.asarray(_TFL_Y), name="tendon_force_length_curve")


def default_active_force_length_curve() -> SimmSpline:
    """Schutte1993Muscle_Deprecated's default active force-length curve.

    **Returns:** OpenSim's SimmSpline of the normalized active force against the
    normalized fiber length.
    """
    return SimmSpline(np.asarray(_AFL_X), np.asarray(_AFL_Y), name="active_force_length_curve")


def default_passive_force_length_curve() -> SimmSpline:
    """The SimmSpline OpenSim stores as the default passive force-length curve.

    OpenSim does not evaluate it: while the property keeps its default value the
    passive force is the exponential ``exp(8 (l - 1)) / exp(4)``. Pass this curve
    explicitly to use the spline (as OpenSim does once the property is set).

    **Returns:** a SimmSpline of the normalized passive force against the normalized
    fiber length.
    """
    return SimmSpline(np.asarray(_PFL_X), np.asarray(_PFL_Y), name="passive_force_length_curve")


def _pennation(fiber_length, optimal_fiber_length, pennation_angle_at_optimal):
    """OpenSim ``ActivationFiberLengthMuscle_Deprecated::calcPennation``.

    **Arguments:** ``fiber_length``, ``optimal_fiber_length`` (same unit, m or
    normalized), ``pennation_angle_at_optimal`` (rad); arrays ``(k,)`` or scalars.

    **Returns:** ``asin(optimal sin(angle at optimal) / fiber length)`` (rad); 0 for a
    fiber length below ``Eps`` or a ratio <= 0 (or NaN), pi/2 for a ratio >= 1.
    """
    short = fiber_length < EPS
    value = optimal_fiber_length * jnp.sin(pennation_angle_at_optimal) / jnp.where(short, 1.0, fiber_length)
    inside = (value > 0.0) & (value < 1.0)
    angle = jnp.where(inside, jnp.arcsin(jnp.where(inside, value, 0.0)), jnp.where(value >= 1.0, jnp.pi / 2, 0.0))
    return jnp.where(short | jnp.isnan(value), 0.0, angle)


def _fiber_velocity(activation, active_force, velocity_dependent_force, damping):
    """OpenSim ``calcFiberVelocity``: the inverse of Schutte's force-velocity
    relation with damping.

    **Arguments:** ``activation``; ``active_force`` (the active force-length
    multiplier, clamped at 0) and ``velocity_dependent_force``, in maximum isometric
    forces; ``damping`` (normalized); arrays ``(k,)``.

    **Returns:** the normalized fiber velocity, in optimal fiber lengths per
    ``time_scale``.
    """
    d, v, aaf = damping, velocity_dependent_force, activation * active_force
    low = v < -d
    shortening = v < aaf
    c2 = _KV * (v - aaf) / d
    b2 = -_KV * (v / _KV + aaf + d) / d
    c3 = -(_SLOPE_K * _KV / (d * (_KV + 1.0))) * (v - aaf)
    b3 = -(v / d - _FMAX * aaf / d - _SLOPE_K * _KV / (_KV + 1.0))
    disc2, disc3 = b2 * b2 - 4.0 * c2, b3 * b3 - 4.0 * c3
    # the discriminants are positive on their own branch (c <= 0 there); guard the other
    root2 = jnp.sqrt(jnp.where(shortening & ~low, disc2, 1.0))
    root3 = jnp.sqrt(jnp.where(~shortening, disc3, 1.0))
    return jnp.where(low, v / d, jnp.where(shortening, 0.5 * (-b2 - root2), 0.5 * (-b3 + root3)))


class Schutte1993Muscle_Deprecated(FunctionCurveMuscle):
    """OpenSim's Schutte1993Muscle_Deprecated.

    ``Schutte1993Muscle_Deprecated(name, max_isometric_force, optimal_fiber_length,
    tendon_slack_length, pennation_angle_at_optimal)``.

    **Fields:** the Muscle properties and ``time_scale`` (0.1 s: the unit of time of
    the normalized dynamics), ``activation1`` (7.667) and ``activation2``
    (1.459854) (activation rate parameters, per ``time_scale``), ``damping`` (0.1:
    normalized fiber damping), the Functions ``tendon_force_length_curve``
    (normalized force of tendon strain), ``active_force_length_curve`` (normalized
    force of normalized fiber length) and ``passive_force_length_curve`` (``None``:
    OpenSim's default, the exponential ``exp(8 (l - 1)) / exp(4)``), and
    ``default_activation`` (0) and ``default_fiber_length`` (0 m), the state OpenSim
    starts from (not OpenSim properties: they are not written to ``.osim`` files).
    """

    time_scale: np.ndarray = prop(0.1, doc="Scale factor for normalizing time (s).")
    activation1: np.ndarray = prop(7.667, doc="Parameter used in time constant of ramping up of muscle force.")
    activation2: np.ndarray = prop(
        1.459854, doc="Parameter used in time constant of ramping up and ramping down of muscle force."
    )
    damping: np.ndarray = prop(0.1, doc="Damping factor related to maximum contraction velocity (normalized).")
    default_activation: np.ndarray = prop(0.0, doc="Initial activation (OpenSim's unserialized default: 0).")
    default_fiber_length: np.ndarray = prop(0.0, doc="Initial fiber length (m; OpenSim's unserialized default: 0).")
    tendon_force_length_curve: Function = eqx.field(default_factory=lambda: default_tendon_force_length_curve())
    active_force_length_curve: Function = eqx.field(default_factory=lambda: default_active_force_length_curve())
    passive_force_length_curve: Function | None = None

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
        time_scale=0.1,
        activation1=7.667,
        activation2=1.459854,
        damping=0.1,
        tendon_force_length_curve: Function | None = None,
        active_force_length_curve: Function | None = None,
        passive_force_length_curve: Function | None = None,
        default_activation=0.0,
        default_fiber_length=0.0,
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
        self.time_scale = time_scale
        self.activation1 = activation1
        self.activation2 = activation2
        self.damping = damping
        self.default_activation = default_activation
        self.default_fiber_length = default_fiber_length
        self.tendon_force_length_curve = tendon_force_length_curve or default_tendon_force_length_curve()
        self.active_force_length_curve = active_force_length_curve or default_active_force_length_curve()
        self.passive_force_length_curve = passive_force_length_curve

    def z_variables(self) -> tuple[str, ...]:
        """``activation`` and ``fiber_length``."""
        return ("activation", "fiber_length")

    def default_z(self):
        """``default_activation`` and ``default_fiber_length`` (0 and 0 unless set)."""
        return jnp.stack([jnp.asarray(self.default_activation), jnp.asarray(self.default_fiber_length)])

    def with_defaults_from_state(self, z, d):
        """Set ``default_activation`` and ``default_fiber_length`` from state values."""
        return self.replace(default_activation=z[0], default_fiber_length=z[1])

    def validate(self, path: str) -> None:
        """OpenSim's checks: the Muscle bounds; ignoring tendon compliance or activation
        dynamics is not implemented for this class."""
        super().validate(path)
        if self.ignore_tendon_compliance or self.ignore_activation_dynamics:
            flag_name = "ignore_tendon_compliance" if self.ignore_tendon_compliance else "ignore_activation_dynamics"
            raise ModelError(
                path, "is not implemented for Schutte1993Muscle_Deprecated (as in OpenSim)", prop=flag_name, value=True
            )

    def _curves(self):
        passive = self.passive_force_length_curve
        return (
            self.tendon_force_length_curve,
            self.active_force_length_curve,
            Constant(0.0) if passive is None else passive,
        )

    # -- group evaluation --------------------------------------------------------------

    @classmethod
    def compile_group(cls, build, paths):
        """Static data, a FunctionBank of the members' three curves, and which members
        use OpenSim's default (exponential) passive force."""
        s = super().compile_group(build, paths)
        s["exp_passive"] = np.asarray([build.find(p).passive_force_length_curve is None for p in paths], bool)
        return s

    @classmethod
    def _curve_values(cls, static, p, strain, norm_fiber_length):
        """The three curves of every member.

        **Arguments:** ``static``, ``p``: the group's static data and parameters;
        ``strain``: tendon strains; ``norm_fiber_length``: normalized fiber lengths;
        arrays ``(k,)``.

        **Returns:** the tendon curve at ``strain``, the active curve and
        ``calcNonzeroPassiveForce`` (at zero velocity) at ``norm_fiber_length``, all
        in maximum isometric forces and unclamped.
        """
        x = jnp.stack([strain, norm_fiber_length, norm_fiber_length], -1).reshape(-1)
        (vals,) = bank_eval(static["bank"], p["curves"], x)
        vals = vals.reshape(-1, 3)
        exp = jnp.exp(8.0 * (norm_fiber_length - 1.0)) / jnp.exp(4.0)
        return vals[:, 0], vals[:, 1], jnp.where(static["exp_passive"], exp, vals[:, 2])

    @classmethod
    def group_mechanics(cls, static, p, length, speed, excitation, z, d):
        """``computeActuation`` (normalized dynamics), ``calcMuscleLengthInfo``,
        ``calcFiberVelocityInfo``, ``calcMuscleDynamicsInfo`` and the state
        derivatives."""
        fiso, ofl, tsl, penn = (
            p["max_isometric_force"],
            p["optimal_fiber_length"],
            p["tendon_slack_length"],
            p["pennation_angle_at_optimal"],
        )
        ts, damping = p["time_scale"], p["damping"]
        L, Ldot, u = length, speed, excitation
        a, lce = z[:, 0], z[:, 1]
        lceN = lce / ofl

        # computeActuation, in normalized units
        adotN = jnp.where(u >= a, (u - a) * (p["activation1"] * u + p["activation2"]), (u - a) * p["activation2"])
        ca = jnp.cos(_pennation(lceN, 1.0, penn))
        LN = L / ofl
        tlN = LN - lceN * ca
        restN = tsl / ofl
        strain_n = (tlN - restN) / restN
        ft, fal, fpe = cls._curve_values(static, p, strain_n, lceN)
        tendon = jnp.where(strain_n < 0.0, 0.0, ft)
        active = jnp.maximum(fal, 0.0)
        vertical = jnp.abs(ca) <= ROUNDOFF_ERROR
        # fibers at 90 degrees: the stiff-tendon approximation (OpenSim subtracts the
        # tendon slack length in meters from a normalized length; kept)
        h = LN - tsl
        w = ofl * jnp.sin(penn)
        new_ca = jnp.cos(_pennation(jnp.sqrt(h * h + w * w) / ofl, 1.0, penn))
        dlN_vertical = jnp.where(jnp.abs(tendon) <= ROUNDOFF_ERROR, 0.0, Ldot * ts / ofl * new_ca)
        vdf = jnp.maximum(tendon / jnp.where(vertical, 1.0, ca) - fpe, 0.0)
        dlN = jnp.where(vertical, dlN_vertical, _fiber_velocity(a, active, vdf, damping))
        adot = adotN / ts
        dlce = dlN * ofl / ts
        tendon_force = tendon * fiso

        # MuscleLengthInfo, FiberVelocityInfo, MuscleDynamicsInfo
        phi = _pennation(lce, ofl, penn)
        cos = jnp.cos(phi)
        tl = L - lce * cos
        passive_force = fpe * fiso
        nan = jnp.full_like(L, jnp.nan)
        on = static["on"]
        zdot = jnp.stack([jnp.where(on, adot, 0.0), jnp.where(on, dlce, 0.0)], -1)
        return {
            "actuation": tendon_force,
            "tendon_force": tendon_force,
            "activation": a,
            "fiber_length": lce,
            "normalized_fiber_length": lceN,
            "pennation_angle": phi,
            "cos_pennation_angle": cos,
            "fiber_length_along_tendon": lce * cos,
            "tendon_length": tl,
            "normalized_tendon_length": LN - lceN * cos,
            "tendon_strain": tl / tsl - 1.0,
            "passive_force_multiplier": fpe,
            "active_force_length_multiplier": fal,
            "fiber_velocity": dlce,
            "normalized_fiber_velocity": dlce / (ofl * p["max_contraction_velocity"]),
            "fiber_velocity_along_tendon": nan,
            "pennation_angular_velocity": nan,
            "tendon_velocity": nan,
            "normalized_tendon_velocity": nan,
            "force_velocity_multiplier": nan,
            "fiber_force": nan,
            "fiber_force_along_tendon": nan,
            "normalized_fiber_force": nan,
            "active_fiber_force": tendon_force / cos - passive_force,
            "passive_fiber_force": passive_force,
            "normalized_tendon_force": tendon_force / fiso,
            "fiber_stiffness": nan,
            "fiber_stiffness_along_tendon": nan,
            "tendon_stiffness": nan,
            "muscle_stiffness": jnp.zeros_like(L),
            "fiber_active_power": nan,
            "fiber_passive_power": nan,
            "tendon_power": nan,
            "muscle_power": nan,
            "zdot": zdot,
        }

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """``d(activation)/dt`` and ``d(fiber_length)/dt`` (zero when the muscle does
        not apply force)."""
        return cls._zdot(group, params, ctx)

    @classmethod
    def group_equilibrium(cls, group, ctx):
        """Fiber lengths from OpenSim's ``computeIsometricForce`` at the state's
        activation (``computeInitialFiberEquilibrium``), for the members that apply
        force."""
        s = group.static
        if not s["on"].any():
            return None
        p = cls.params(group, ctx)
        L = path_lengths(ctx)[s["rows"]]
        z = jnp.concatenate([ctx.state.z, jnp.zeros(1, ctx.state.q.dtype)])[s["z"]]
        a = z[:, 0]
        fixed = jax.lax.stop_gradient((p, L, a))
        lce = jax.lax.stop_gradient(_isometric_fiber_length(cls, s, *fixed))
        # the value is OpenSim's; its derivatives are those of the exact equilibrium there
        _, dr = jax.jvp(lambda x: _isometric_residual(cls, s, *fixed, x), (lce,), (jnp.ones_like(lce),))
        r = _isometric_residual(cls, s, p, L, a, lce)
        ok = jnp.abs(dr) > 0
        lce = lce - jnp.where(ok, (r - jax.lax.stop_gradient(r)) / jnp.where(ok, dr, 1.0), 0.0)
        keep = s["on"]
        return s["z"][keep, 1], lce[keep]


def _isometric_residual(cls, static, p, L, a, lce):
    """``computeIsometricForce``'s error force (without its slack-tendon reset).

    **Arguments:** ``static``, ``p``: the group's static data and parameters; ``L``:
    path lengths (m); ``a``: activations; ``lce``: fiber lengths (m); arrays ``(k,)``.

    **Returns:** tendon force minus fiber force along the tendon (N), ``(k,)``.
    """
    fiso, ofl, tsl = p["max_isometric_force"], p["optimal_fiber_length"], p["tendon_slack_length"]
    cos = jnp.cos(_pennation(lce, ofl, p["pennation_angle_at_optimal"]))
    strain = (L - lce * cos) / tsl - 1.0
    ft, fal, fpe = cls._curve_values(static, p, strain, lce / ofl)
    fiber = (jnp.maximum(fal * a, 0.0) + jnp.maximum(fpe, 0.0)) * fiso * cos
    return jnp.where(strain < 0.0, 0.0, ft * fiso) - fiber


def _isometric_fiber_length(cls, static, p, L, a):
    """OpenSim ``Schutte1993Muscle_Deprecated::computeIsometricForce`` for all
    members at once: each stops when its force error is within 0.01 N, or after 100
    iterations. Not differentiable (a ``while_loop``).

    **Arguments:** ``static``, ``p``: the group's static data and parameters; ``L``:
    path lengths (m); ``a``: activations; arrays ``(k,)``.

    **Returns:** the fiber lengths (m) OpenSim's iteration ends at, ``(k,)``.
    """
    fiso, ofl, tsl, penn = (
        p["max_isometric_force"],
        p["optimal_fiber_length"],
        p["tendon_slack_length"],
        p["pennation_angle_at_optimal"],
    )
    width = ofl * jnp.sin(penn)

    def slack(length):
        """Tendon at its slack length: fiber length and cosine (no width clamp)."""
        cos = jnp.cos(jnp.arctan(width / (length - tsl)))
        return (length - tsl) / cos, cos

    # first guess: the optimal fiber length, or the tendon at slack length
    fl = ofl
    cos = jnp.cos(_pennation(fl, ofl, penn))
    tl = L - fl * cos
    short = tl < tsl
    fl_s, cos_s = slack(L)
    fl = jnp.where(short, jnp.maximum(fl_s, width), fl)
    cos = jnp.where(short, cos_s, cos)
    tl = jnp.where(short, tsl, tl)

    def body(carry):
        i, fl, cos, tl, old_fl, err, done = carry
        strain = tl / tsl - 1.0
        ft, fal, fpe = cls._curve_values(static, p, strain, fl / ofl)
        active = jnp.maximum(fal * a, 0.0)
        passive = jnp.maximum(fpe, 0.0)
        fiber_force = (active + passive) * fiso * cos
        tendon_force = jnp.where(strain < 0.0, 0.0, ft * fiso)
        old_err = jnp.where(i == 0, tendon_force - fiber_force, err)
        err = tendon_force - fiber_force
        converged = jnp.abs(err) <= _ERROR_LIMIT
        flipped = (err >= 0.0) != (old_err >= 0.0)
        # after a sign change: regula falsi between the last two fiber lengths
        percent = jnp.abs(err) / (jnp.abs(err) + jnp.abs(old_err))
        fl_flip = fl + percent * (old_fl - fl)
        # otherwise a step by the estimated stiffnesses, at most half an optimal length
        tendon_stiffness = jnp.maximum(
            ft * fiso / tsl, (active + passive) * _TENDON_ELASTIC_MODULUS * fiso / (_TENDON_MAX_STRESS * tsl)
        )
        fiber_stiffness = fiso / ofl * (fal + fpe)
        change = jnp.abs(err / (fiber_stiffness / cos + tendon_stiffness))
        change = jnp.where(jnp.abs(change / ofl) > 0.5, 0.5 * ofl, change)
        fl_step = jnp.where(err > 0.0, fl + change, fl - change)
        new_fl = jnp.where(flipped, fl_flip, fl_step)
        new_cos = jnp.cos(_pennation(new_fl, ofl, penn))
        new_tl = L - new_fl * new_cos
        short = new_tl < tsl
        fl_s, cos_s = slack(L)
        new_fl = jnp.where(short, fl_s, new_fl)
        new_cos = jnp.where(short, cos_s, new_cos)
        new_tl = jnp.where(short, tsl, new_tl)
        move = ~done & ~converged
        pick = lambda new, old: jnp.where(move, new, old)  # noqa: E731
        return (
            i + 1,
            pick(new_fl, fl),
            pick(new_cos, cos),
            pick(new_tl, tl),
            pick(fl, old_fl),
            jnp.where(done, carry[5], err),
            done | converged,
        )

    iterate = (L >= tsl) & (tsl >= ROUNDOFF_ERROR) & (ofl >= ROUNDOFF_ERROR)
    carry = (jnp.asarray(0), fl, cos, tl, jnp.full_like(L, jnp.nan), jnp.zeros_like(L), ~iterate)
    carry = jax.lax.while_loop(lambda c: (c[0] < _MAX_ITERATIONS) & ~jnp.all(c[6]), body, carry)
    fl = carry[1]
    # the cases OpenSim settles without iterating
    rigid_cos = jnp.cos(jnp.arctan(width / L))
    fl = jnp.where(L < tsl, width, fl)
    fl = jnp.where(tsl < ROUNDOFF_ERROR, L / rigid_cos, fl)
    return jnp.where(ofl < ROUNDOFF_ERROR, 0.0, fl)
