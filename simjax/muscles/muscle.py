"""The Muscle base class, the fixed-width pennation model and first-order activation.

(OpenSim ``Muscle``, ``MuscleFixedWidthPennationModel``,
``MuscleFirstOrderActivationDynamicModel``.) A Muscle is a ``PathActuator`` whose
control is its *excitation* and whose tension is its tendon force. Muscles of one
class are evaluated together: ``Muscle.group_mechanics`` (implemented by each model)
maps the stacked path lengths, lengthening speeds, excitations and state variables
of all members to every quantity OpenSim reports (``MuscleLengthInfo``,
``FiberVelocityInfo``, ``MuscleDynamicsInfo``), once per evaluation context; the
force role (tendon force along the path) and the state-derivative role
(activation, fiber length, ...) share that one evaluation.

Outputs carry OpenSim's names: ``activation``, ``excitation``, ``fiber_length``,
``normalized_fiber_length``, ``fiber_velocity``, ``pennation_angle``,
``tendon_length``, ``tendon_force``, ``fiber_force``, ``active_fiber_force``,
``passive_fiber_force``, ``length``, ``lengthening_speed``, ...
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ..component import ModelError, Stage, flag, output, prop
from ..function_bank import FunctionBank, bank_params
from ..groups import Forces, group_key, stack_properties
from .path import GeometryPath, PathActuator, _cache, path_forces, path_lengths, path_speeds

__all__ = [
    "Muscle",
    "DampedFiberMuscle",
    "FixedWidthPennation",
    "first_order_activation_derivative",
    "SIGNIFICANT_REAL",
    "EPS",
]

#: SimTK::Eps, SimTK::SignificantReal, SimTK::SqrtEps
EPS = float(np.finfo(np.float64).eps)
SIGNIFICANT_REAL = EPS**0.875
SQRT_EPS = EPS**0.5


class FixedWidthPennation:
    """OpenSim's ``MuscleFixedWidthPennationModel`` for stacked muscles: the fiber's
    height ``h = optimal_fiber_length * sin(pennation_angle_at_optimal)`` is constant.

    **Arguments:** ``optimal_fiber_length``, ``pennation_angle_at_optimal``,
    ``maximum_pennation_angle``: arrays ``(k,)``.

    **Attributes:** ``height``, ``max_sin``, ``min_fiber_length`` (``h / sin(max)``,
    or ``0.01 * optimal_fiber_length`` when the maximum angle is ~0) and
    ``min_fiber_length_along_tendon``.
    """

    def __init__(self, optimal_fiber_length, pennation_angle_at_optimal, maximum_pennation_angle):
        self.ofl = optimal_fiber_length
        self.penn = pennation_angle_at_optimal
        self.max_penn = maximum_pennation_angle
        self.height = optimal_fiber_length * jnp.sin(pennation_angle_at_optimal)
        self.max_sin = jnp.sin(maximum_pennation_angle)
        big = maximum_pennation_angle > SIGNIFICANT_REAL
        self.min_fiber_length = jnp.where(
            big, self.height / jnp.where(big, self.max_sin, 1.0), 0.01 * optimal_fiber_length
        )
        self.min_fiber_length_along_tendon = self.min_fiber_length * jnp.cos(maximum_pennation_angle)

    def angle(self, lce):
        """Pennation angle at fiber length ``lce`` (``calcPennationAngle``)."""
        s = self.height / jnp.where(lce > 0, lce, 1.0)
        ok = (lce > self.min_fiber_length) & (s < self.max_sin)
        phi = jnp.where(ok, jnp.arcsin(jnp.where(ok, s, 0.0)), self.max_penn)
        return jnp.where(self.penn > EPS, phi, 0.0)

    def fiber_length(self, muscle_length, tendon_length):
        """Fiber length for given muscle-tendon and tendon lengths (``calcFiberLength``)."""
        lat = muscle_length - tendon_length
        ok = lat >= self.min_fiber_length_along_tendon
        return jnp.where(ok, jnp.sqrt(self.height**2 + jnp.where(ok, lat, 0.0) ** 2), self.min_fiber_length)

    def angular_velocity(self, tan_phi, lce, dlce):
        """Pennation angular velocity (``calcPennationAngularVelocity``)."""
        return jnp.where(self.penn > EPS, -(dlce / lce) * tan_phi, 0.0)

    def dphi_dlce(self, lce):
        """``d phi / d lce`` (``calc_DPennationAngle_DfiberLength``)."""
        ok = (self.height > 0) & (lce > self.height)
        lce = jnp.where(ok, lce, 1.0)
        hl = jnp.where(ok, self.height, 0.0) / lce
        return jnp.where(ok, (-hl / lce) / jnp.sqrt(1.0 - hl * hl), 0.0)


def first_order_activation_derivative(activation, excitation, tau_act, tau_deact, minimum_activation):
    """OpenSim ``MuscleFirstOrderActivationDynamicModel::calcDerivative``.

    **Arguments:** arrays ``(k,)``; ``activation`` is clamped into
    ``[minimum_activation, 1]`` first.

    **Returns:** ``da/dt``.
    """
    a = jnp.clip(activation, minimum_activation, 1.0)
    s = 0.5 + 1.5 * a
    tau = jnp.where(excitation > a, tau_act * s, tau_deact / s)
    return (excitation - a) / tau


def _muscle_prop(default, doc, bounds=None):
    return prop(default, doc=doc, bounds=bounds)


class Muscle(PathActuator):
    """A muscle: a PathActuator driven by excitation whose tension is its tendon force
    (OpenSim Muscle; abstract).

    **Fields:** ``max_isometric_force`` (N), ``optimal_fiber_length`` (m),
    ``tendon_slack_length`` (m), ``pennation_angle_at_optimal`` (rad),
    ``max_contraction_velocity`` (optimal fiber lengths per second),
    ``ignore_tendon_compliance``, ``ignore_activation_dynamics``; ``path``;
    ``min_control`` (0), ``max_control`` (1); ``optimal_force`` (unused by muscles).

    Subclasses implement ``group_mechanics`` and declare ``state_names`` (every state
    variable the class can own, in OpenSim's order).
    """

    min_control: np.ndarray = prop(0.0, doc="Minimum excitation.")
    max_control: np.ndarray = prop(1.0, doc="Maximum excitation.")
    max_isometric_force: np.ndarray = _muscle_prop(
        1000.0, "Maximum isometric force that the fibers can generate (N).", (0.0, None)
    )
    optimal_fiber_length: np.ndarray = _muscle_prop(0.1, "Optimal length of the muscle fibers (m).")
    tendon_slack_length: np.ndarray = _muscle_prop(0.2, "Resting length of the tendon (m).", (0.0, None))
    pennation_angle_at_optimal: np.ndarray = _muscle_prop(
        0.0, "Angle between tendon and fibers at optimal fiber length (rad)."
    )
    max_contraction_velocity: np.ndarray = _muscle_prop(
        10.0, "Maximum contraction velocity of the fibers, in optimal fiber lengths per second."
    )
    ignore_tendon_compliance: bool = flag(
        False, doc="Compute muscle dynamics ignoring tendon compliance (a rigid tendon)."
    )
    ignore_activation_dynamics: bool = flag(
        False, doc="Compute muscle dynamics ignoring activation dynamics (activation = excitation)."
    )

    #: every state variable the class can own, in OpenSim's order
    state_names: ClassVar[tuple[str, ...]] = ()
    #: every discrete variable the class can own
    discrete_names: ClassVar[tuple[str, ...]] = ()

    def _init_muscle(
        self,
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
    ):
        self.name = name
        self.path = GeometryPath() if path is None else path
        self.max_isometric_force = max_isometric_force
        self.optimal_fiber_length = optimal_fiber_length
        self.tendon_slack_length = tendon_slack_length
        self.pennation_angle_at_optimal = pennation_angle_at_optimal
        self.max_contraction_velocity = max_contraction_velocity
        self.ignore_tendon_compliance = ignore_tendon_compliance
        self.ignore_activation_dynamics = ignore_activation_dynamics
        self.min_control = min_control
        self.max_control = max_control
        self.optimal_force = optimal_force
        self.applies_force = applies_force
        self.components = components

    def validate(self, path: str) -> None:
        """Check OpenSim's bounds: ``optimal_fiber_length > 0``,
        ``0 <= pennation_angle_at_optimal < pi/2``, ``tendon_slack_length > 0``,
        ``max_contraction_velocity > 0``."""
        super().validate(path)
        checks = (
            ("optimal_fiber_length", lambda v: v > 0, "must be greater than zero"),
            ("tendon_slack_length", lambda v: v > 0, "must be greater than zero"),
            ("max_contraction_velocity", lambda v: v > 0, "must be greater than zero"),
            (
                "pennation_angle_at_optimal",
                lambda v: 0 <= v <= np.pi / 2 - SIGNIFICANT_REAL,
                "must be in the range [0, pi/2)",
            ),
        )
        for name, ok, msg in checks:
            v = getattr(self, name)
            if isinstance(v, np.ndarray) and not ok(float(v)):
                raise ModelError(path, msg, prop=name, value=v)

    def _check(self, path, name, ok, msg):
        v = getattr(self, name)
        if isinstance(v, np.ndarray) and not ok(float(v)):
            raise ModelError(path, msg, prop=name, value=v)

    # -- group evaluation -------------------------------------------------------------

    @classmethod
    def compile_group(cls, build, paths):
        """Static data: path rows, control indices, and where each member's state
        variables are in ``z`` (``z (k, n_states)``, -1 where absent)."""
        s = super().compile_group(build, paths)
        comps = [build.find(p) for p in paths]
        names = cls.state_names
        zi = np.full((len(paths), max(1, len(names))), -1, np.int64)
        pick = []
        for i, (p, c) in enumerate(zip(paths, comps)):
            own = c.z_variables()
            if own:
                start = build.z_index(p)
                for j, v in enumerate(own):
                    zi[i, names.index(v)] = start + j
                    pick.append(i * zi.shape[1] + names.index(v))
        s["z"] = zi
        s["zdot_pick"] = np.asarray(pick, np.int64)
        di = np.full((len(paths), max(1, len(cls.discrete_names))), -1, np.int64)
        for i, (p, c) in enumerate(zip(paths, comps)):
            for j, v in enumerate(c.discrete_variables()):
                di[i, cls.discrete_names.index(v)] = build.d_slices[p][0] + j
        s["d"] = di
        s["rigid"] = np.asarray([c.ignore_tendon_compliance for c in comps], bool)
        s["no_act"] = np.asarray([c.ignore_activation_dynamics for c in comps], bool)
        return s

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters: every numeric property stacked ``(k, ...)``."""
        return stack_properties([model.find(p) for p in group.paths])

    @classmethod
    def group_mechanics(cls, static, params, length, speed, excitation, z, d):
        """The muscle model of a group (implemented by each class).

        **Arguments:** ``static``: the group's static data; ``params``: its traced
        parameters; ``length``, ``speed``: path lengths and lengthening speeds
        ``(k,)``; ``excitation`` ``(k,)``; ``z (k, n_states)``: state variables in
        ``state_names`` order (0 where a member does not own one); ``d (k,
        n_discrete)``: discrete variables in ``discrete_names`` order.

        **Returns:** a dict of ``(k,)`` arrays named as OpenSim's outputs, with
        ``"actuation"`` (the tension applied along the path) and ``"zdot"``
        ``(k, n_states)``.
        """
        raise NotImplementedError

    @classmethod
    def derived_params(cls, static, params):
        """Parameters derived from ``group_params`` that are costly to compute (e.g.
        curves); computed once per context by ``params``. Default: none."""
        return params

    @classmethod
    def params(cls, group, ctx):
        """``derived_params(group_params)`` of a group, once per context (the force and
        state-derivative roles share them)."""
        return ctx.parameter(
            "derived:" + group_key(group), lambda: cls.derived_params(group.static, ctx.group_params(group))
        )

    @classmethod
    def prepare_parameters(cls, group, ctx) -> None:
        """The paths' parameters and the derived ones (``Context.prepared``)."""
        super().prepare_parameters(group, ctx)
        cls.params(group, ctx)

    @classmethod
    def results(cls, group, ctx) -> dict:
        """All mechanics of a group at the context's state (computed once per context)."""
        cache = _cache(ctx)
        key = ("muscles", cls)
        if key not in cache:
            s = group.static
            params = cls.params(group, ctx)
            dtype = ctx.state.q.dtype
            z = jnp.concatenate([ctx.state.z, jnp.zeros(1, dtype)])[s["z"]]
            d = jnp.concatenate([jnp.asarray(ctx.state.d, dtype), jnp.zeros(1, dtype)])[s["d"]]
            length = path_lengths(ctx)[s["rows"]]
            speed = path_speeds(ctx)[s["rows"]]
            exc = ctx.controls[s["control"]]
            out = dict(cls.group_mechanics(s, params, length, speed, exc, z, d))
            out.setdefault("excitation", exc)
            out.setdefault("length", length)
            out.setdefault("lengthening_speed", speed)
            out.setdefault("speed", speed)
            out.setdefault("tension", out["actuation"])
            out.setdefault("power", -out["actuation"] * speed)
            out.setdefault("muscle_power", -speed * out["tendon_force"])
            out.setdefault("stress", out["actuation"] / params["max_isometric_force"])
            cache[key] = out
        return cache[key]

    @classmethod
    def group_forces(cls, group, params, ctx) -> Forces:
        """Tendon forces applied along the members' paths."""
        s = group.static
        res = cls.results(group, ctx)
        body, mob = path_forces(ctx, s["rows"], jnp.where(s["on"], res["actuation"], 0.0))
        return Forces(body=body, mobility=mob, outputs=res)

    @classmethod
    def _zdot(cls, group, params, ctx):
        res = cls.results(group, ctx)
        return res["zdot"].reshape(-1)[group.static["zdot_pick"]], res

    @classmethod
    def group_equilibrium(cls, group, ctx):
        """Equilibrium values of the members' state variables (OpenSim
        ``computeInitialFiberEquilibrium``): ``(z indices, values)``; classes with
        nothing to equilibrate return ``None``."""
        return None

    # -- outputs ------------------------------------------------------------------------

    def _out(self, ctx, name):
        return ctx.group_output(ctx.path, name)

    @output(Stage.DYNAMICS)
    def excitation(self, ctx):
        """The muscle's excitation (its control)."""
        return self._out(ctx, "excitation")

    @output(Stage.DYNAMICS)
    def activation(self, ctx):
        """Activation, in [0, 1] (as the model uses it)."""
        return self._out(ctx, "activation")

    @output(Stage.POSITION)
    def fiber_length(self, ctx):
        """Fiber length (m)."""
        return self._out(ctx, "fiber_length")

    @output(Stage.POSITION)
    def pennation_angle(self, ctx):
        """Pennation angle (rad)."""
        return self._out(ctx, "pennation_angle")

    @output(Stage.POSITION)
    def cos_pennation_angle(self, ctx):
        """Cosine of the pennation angle."""
        return self._out(ctx, "cos_pennation_angle")

    @output(Stage.POSITION)
    def tendon_length(self, ctx):
        """Tendon length (m)."""
        return self._out(ctx, "tendon_length")

    @output(Stage.POSITION)
    def normalized_fiber_length(self, ctx):
        """Fiber length / optimal fiber length."""
        return self._out(ctx, "normalized_fiber_length")

    @output(Stage.POSITION)
    def fiber_length_along_tendon(self, ctx):
        """Fiber length projected on the tendon (m)."""
        return self._out(ctx, "fiber_length_along_tendon")

    @output(Stage.POSITION)
    def tendon_strain(self, ctx):
        """Tendon strain (tendon length / slack length - 1)."""
        return self._out(ctx, "tendon_strain")

    @output(Stage.POSITION)
    def passive_force_multiplier(self, ctx):
        """Passive fiber force-length multiplier."""
        return self._out(ctx, "passive_force_multiplier")

    @output(Stage.POSITION)
    def active_force_length_multiplier(self, ctx):
        """Active fiber force-length multiplier."""
        return self._out(ctx, "active_force_length_multiplier")

    @output(Stage.VELOCITY)
    def fiber_velocity(self, ctx):
        """Fiber velocity (m/s, lengthening positive)."""
        return self._out(ctx, "fiber_velocity")

    @output(Stage.VELOCITY)
    def normalized_fiber_velocity(self, ctx):
        """Fiber velocity / (optimal fiber length * max contraction velocity)."""
        return self._out(ctx, "normalized_fiber_velocity")

    @output(Stage.VELOCITY)
    def fiber_velocity_along_tendon(self, ctx):
        """Fiber velocity projected on the tendon (m/s)."""
        return self._out(ctx, "fiber_velocity_along_tendon")

    @output(Stage.VELOCITY)
    def tendon_velocity(self, ctx):
        """Tendon velocity (m/s)."""
        return self._out(ctx, "tendon_velocity")

    @output(Stage.VELOCITY)
    def force_velocity_multiplier(self, ctx):
        """Force-velocity multiplier."""
        return self._out(ctx, "force_velocity_multiplier")

    @output(Stage.VELOCITY)
    def pennation_angular_velocity(self, ctx):
        """Pennation angular velocity (rad/s)."""
        return self._out(ctx, "pennation_angular_velocity")

    @output(Stage.DYNAMICS)
    def fiber_force(self, ctx):
        """Fiber force (N)."""
        return self._out(ctx, "fiber_force")

    @output(Stage.DYNAMICS)
    def fiber_force_along_tendon(self, ctx):
        """Fiber force along the tendon (N)."""
        return self._out(ctx, "fiber_force_along_tendon")

    @output(Stage.DYNAMICS)
    def active_fiber_force(self, ctx):
        """Active fiber force (N)."""
        return self._out(ctx, "active_fiber_force")

    @output(Stage.DYNAMICS)
    def passive_fiber_force(self, ctx):
        """Passive fiber force (N)."""
        return self._out(ctx, "passive_fiber_force")

    @output(Stage.DYNAMICS)
    def active_fiber_force_along_tendon(self, ctx):
        """Active fiber force along the tendon (N)."""
        return self._out(ctx, "active_fiber_force") * self._out(ctx, "cos_pennation_angle")

    @output(Stage.DYNAMICS)
    def passive_fiber_force_along_tendon(self, ctx):
        """Passive fiber force along the tendon (N)."""
        return self._out(ctx, "passive_fiber_force") * self._out(ctx, "cos_pennation_angle")

    @output(Stage.DYNAMICS)
    def tendon_force(self, ctx):
        """Tendon force (N): the tension applied to the bones."""
        return self._out(ctx, "tendon_force")

    @output(Stage.DYNAMICS)
    def fiber_stiffness(self, ctx):
        """d(fiber force)/d(fiber length) (N/m)."""
        return self._out(ctx, "fiber_stiffness")

    @output(Stage.DYNAMICS)
    def fiber_stiffness_along_tendon(self, ctx):
        """d(fiber force along tendon)/d(fiber length along tendon) (N/m)."""
        return self._out(ctx, "fiber_stiffness_along_tendon")

    @output(Stage.DYNAMICS)
    def tendon_stiffness(self, ctx):
        """d(tendon force)/d(tendon length) (N/m)."""
        return self._out(ctx, "tendon_stiffness")

    @output(Stage.DYNAMICS)
    def muscle_stiffness(self, ctx):
        """Stiffness of fiber and tendon in series (N/m)."""
        return self._out(ctx, "muscle_stiffness")

    @output(Stage.DYNAMICS)
    def fiber_active_power(self, ctx):
        """Power of the active fiber (W)."""
        return self._out(ctx, "fiber_active_power")

    @output(Stage.DYNAMICS)
    def fiber_passive_power(self, ctx):
        """Power of the passive fiber (W)."""
        return self._out(ctx, "fiber_passive_power")

    @output(Stage.DYNAMICS)
    def tendon_power(self, ctx):
        """Power of the tendon (W)."""
        return self._out(ctx, "tendon_power")

    @output(Stage.DYNAMICS)
    def muscle_power(self, ctx):
        """Power of the muscle, ``-lengthening_speed * tendon_force`` (W)."""
        return self._out(ctx, "muscle_power")

    @output(Stage.DYNAMICS)
    def tension(self, ctx):
        """The tension along the path (N): the tendon force for most muscles."""
        return self._out(ctx, "actuation")

    @output(Stage.DYNAMICS)
    def power(self, ctx):
        """Power delivered to the system, ``-actuation * speed`` (W)."""
        return self._out(ctx, "power")


class DampedFiberMuscle(Muscle):
    """A muscle whose passive fiber force has an elastic and a damping part (abstract:
    Millard2012EquilibriumMuscle, DeGrooteFregly2016Muscle): their outputs. Its group
    computation provides ``passive_fiber_elastic_force`` and
    ``passive_fiber_damping_force``."""

    @output(Stage.DYNAMICS)
    def passive_fiber_elastic_force(self, ctx):
        """Conservative passive fiber force (N)."""
        return self._out(ctx, "passive_fiber_elastic_force")

    @output(Stage.DYNAMICS)
    def passive_fiber_elastic_force_along_tendon(self, ctx):
        """Conservative passive fiber force along the tendon (N)."""
        return self._out(ctx, "passive_fiber_elastic_force") * self._out(ctx, "cos_pennation_angle")

    @output(Stage.DYNAMICS)
    def passive_fiber_damping_force(self, ctx):
        """Fiber damping force (N)."""
        return self._out(ctx, "passive_fiber_damping_force")

    @output(Stage.DYNAMICS)
    def passive_fiber_damping_force_along_tendon(self, ctx):
        """Fiber damping force along the tendon (N)."""
        return self._out(ctx, "passive_fiber_damping_force") * self._out(ctx, "cos_pennation_angle")


class FunctionCurveMuscle(Muscle):
    """A muscle whose curves are OpenSim Functions (abstract: RigidTendonMuscle,
    Schutte1993Muscle_Deprecated). Each member lists its curves in ``_curves()`` (the
    same number for every member of a class); a group's curves are one
    ``FunctionBank`` (static ``"bank"``, parameters ``"curves"``, member ``i``'s curve
    ``j`` at row ``i * n_curves + j``), evaluated together with ``bank_eval``."""

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a Muscle group, and a FunctionBank of the members' curves."""
        s = super().compile_group(build, paths)
        s["bank"] = FunctionBank.of([f for p in paths for f in build.find(p)._curves()])
        return s

    @classmethod
    def group_params(cls, model, group):
        """Stacked properties and the curves' parameters (``"curves"``)."""
        comps = [model.find(p) for p in group.paths]
        p = super().group_params(model, group)
        p["curves"] = bank_params(group.static["bank"], [f for c in comps for f in c._curves()])
        return p


def series_stiffness(fiber_stiffness_along_tendon, tendon_stiffness, rigid):
    """OpenSim ``Muscle::calcMuscleStiffness``: fiber and tendon in series."""
    kf, kt = fiber_stiffness_along_tendon, jnp.where(rigid, 1.0, tendon_stiffness)
    prod, tot = kf * kt, kf + kt
    ok = (jnp.abs(prod) > 0.0) & (jnp.abs(tot) > SIGNIFICANT_REAL)
    elastic = jnp.where(ok, prod / jnp.where(ok, tot, 1.0), 0.0)
    return jnp.where(rigid, kf, elastic)


def newton_ift(x_converged, residual, *args):
    """Attach implicit-function-theorem derivatives to a converged root.

    **Arguments:** ``x_converged``: the root found by any iteration (its derivatives
    are discarded); ``residual(x, *args)``: the elementwise residual; ``args``.

    **Returns:** ``x`` with the value of ``x_converged`` (plus one Newton correction)
    and the derivatives ``dx = -(dr/dargs) / (dr/dx)``.
    """
    x0 = jax.lax.stop_gradient(x_converged)
    r, dr = jax.jvp(lambda x: residual(x, *args), (x0,), (jnp.ones_like(x0),))
    dr = jax.lax.stop_gradient(dr)
    ok = jnp.abs(dr) > 0
    return x0 - jnp.where(ok, r / jnp.where(ok, dr, 1.0), 0.0)
