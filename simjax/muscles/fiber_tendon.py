"""Fiber–tendon mechanics shared by the muscles whose state is the fiber length
(``Thelen2003Muscle``, ``Millard2012EquilibriumMuscle``; OpenSim's
``ActivationFiberLengthMuscle`` family).

Each model supplies its own curves and its own way to find the fiber velocity; what
is the same in both lives here once:

- ``length_info``: the fixed-width pennation geometry of a fiber and its tendon
  (OpenSim's ``calcMuscleLengthInfo`` less the curves);
- ``velocity_info``: the fiber, pennation and tendon velocities from the normalized
  fiber velocity, with the fiber state held at the minimum fiber length while it
  would shorten (``calcFiberVelocityInfo`` less the force-velocity inversion);
- ``activation_fiber_length_zdot``: the state derivatives ``(activation,
  fiber_length)``;
- ``outputs``: the Muscle outputs under OpenSim's names;
- ``equilibrium_fiber_length``: the bracketed Newton search for the fiber length
  balancing fiber and tendon forces, started where OpenSim starts.

All arrays are per member of a group, shape ``(k,)``; lengths in m, velocities in
m/s, angles in rad, forces in N, stiffnesses in N/m, powers in W.
"""

from __future__ import annotations

import jax.numpy as jnp

from .muscle import first_order_activation_derivative, newton_ift, series_stiffness
from .solvers import bracketed_newton

__all__ = ["length_info", "velocity_info", "activation_fiber_length_zdot", "outputs", "equilibrium_fiber_length"]


def length_info(pen, optimal_fiber_length, tendon_slack_length, length, fiber_length):
    """Pennation and tendon geometry at a fiber length.

    **Arguments:** ``pen``: the members' ``FixedWidthPennation``;
    ``optimal_fiber_length``, ``tendon_slack_length`` (m); ``length``: the path's
    length (m); ``fiber_length``: the fiber length in use (m).

    **Returns:** ``(lceN, phi, cos, sin, tl, tlN)``: the normalized fiber length, the
    pennation angle (rad), its cosine and sine, the tendon length (m) and the
    normalized tendon length.
    """
    lce = fiber_length
    lceN = lce / optimal_fiber_length
    phi = pen.angle(lce)
    cos, sin = jnp.cos(phi), jnp.sin(phi)
    tl = length - lce * cos
    tlN = tl / tendon_slack_length
    return lceN, phi, cos, sin, tl, tlN


def velocity_info(
    pen,
    fiber_length,
    phi,
    cos,
    sin,
    norm_fiber_velocity,
    speed,
    max_contraction_velocity,
    optimal_fiber_length,
    at_min_length,
    rigid=None,
):
    """Fiber, pennation and tendon velocities from the normalized fiber velocity.

    A fiber at its minimum length (``at_min_length``) that would shorten is held
    there: its velocities are zero and the tendon takes the path's whole speed, as
    in OpenSim.

    **Arguments:** ``pen``: the members' ``FixedWidthPennation``; ``fiber_length`` (m);
    ``phi``, ``cos``, ``sin``: the pennation angle (rad) and its cosine and sine;
    ``norm_fiber_velocity``: fiber velocity in optimal fiber lengths per
    ``max_contraction_velocity``; ``speed``: the path's lengthening speed (m/s);
    ``max_contraction_velocity`` (optimal fiber lengths/s); ``optimal_fiber_length``
    (m); ``at_min_length``: bool mask; ``rigid``: ``None``, or a bool mask of
    rigid-tendon members, whose tendon velocity is zero.

    **Returns:** ``(dlce, dlceN, dlceAT, dphi, dtl, clamped)``: the fiber velocity (m/s),
    the normalized fiber velocity, the fiber velocity along the tendon (m/s), the
    pennation angular velocity (rad/s), the tendon velocity (m/s), and the mask of
    members held at their minimum length.
    """
    lce, dlceN = fiber_length, norm_fiber_velocity
    dlce = dlceN * max_contraction_velocity * optimal_fiber_length
    dphi = pen.angular_velocity(jnp.tan(phi), lce, dlce)
    dlceAT = dlce * cos - lce * sin * dphi
    dtl = speed - dlce * cos + lce * sin * dphi
    if rigid is not None:
        dtl = jnp.where(rigid, 0.0, dtl)
    clamped = at_min_length & (dlceN <= 0.0)
    dlce, dlceN, dlceAT, dphi = (jnp.where(clamped, 0.0, x) for x in (dlce, dlceN, dlceAT, dphi))
    dtl = jnp.where(clamped, speed, dtl)
    return dlce, dlceN, dlceAT, dphi, dtl, clamped


def activation_fiber_length_zdot(
    on, activation, excitation, activation_time_constant, deactivation_time_constant, minimum_activation, fiber_velocity
):
    """The state derivatives ``(d activation/dt (1/s), d fiber_length/dt (m/s))``,
    shape ``(k, 2)``, zero for members that do not apply force (``on`` false).

    Activation follows OpenSim's first-order dynamics with time constants in s.
    """
    adot = first_order_activation_derivative(
        activation, excitation, activation_time_constant, deactivation_time_constant, minimum_activation
    )
    return jnp.stack([jnp.where(on, adot, 0.0), jnp.where(on, fiber_velocity, 0.0)], -1)


def outputs(
    max_isometric_force,
    tendon_slack_length,
    *,
    activation,
    fiber_length,
    normalized_fiber_length,
    pennation_angle,
    cos_pennation_angle,
    tendon_length,
    normalized_tendon_length,
    fiber_velocity,
    normalized_fiber_velocity,
    fiber_velocity_along_tendon,
    pennation_angular_velocity,
    tendon_velocity,
    passive_force_multiplier,
    active_force_length_multiplier,
    force_velocity_multiplier,
    fiber_force,
    active_fiber_force,
    passive_fiber_force,
    normalized_tendon_force,
    fiber_stiffness,
    fiber_stiffness_along_tendon,
    tendon_stiffness,
    rigid,
    fiber_active_power,
    fiber_passive_power,
    zdot,
    **extra,
):
    """The Muscle outputs of a group under OpenSim's names (``Muscle.results``).

    The keyword arguments are the outputs of those names (units as in the module's
    docstring; multipliers and normalized values dimensionless); from them come the
    tendon force (N, also the ``actuation``), the fiber length and force along the
    tendon, the tendon strain, the normalized tendon velocity (1/s) and fiber force,
    the muscle stiffness (fiber and tendon in series, N/m; ``rigid``: a bool mask or
    ``False``) and the tendon power (W). ``extra``: further outputs, passed on.

    **Returns:** a dict of ``(k,)`` arrays, and ``zdot`` ``(k, 2)``.
    """
    fiso, tsl = max_isometric_force, tendon_slack_length
    lce, cos, fm = fiber_length, cos_pennation_angle, fiber_force
    tendon_force = normalized_tendon_force * fiso
    return {
        "actuation": tendon_force,
        "tendon_force": tendon_force,
        "activation": activation,
        "fiber_length": lce,
        "normalized_fiber_length": normalized_fiber_length,
        "pennation_angle": pennation_angle,
        "cos_pennation_angle": cos,
        "fiber_length_along_tendon": lce * cos,
        "tendon_length": tendon_length,
        "normalized_tendon_length": normalized_tendon_length,
        "tendon_strain": normalized_tendon_length - 1.0,
        "passive_force_multiplier": passive_force_multiplier,
        "active_force_length_multiplier": active_force_length_multiplier,
        "fiber_velocity": fiber_velocity,
        "normalized_fiber_velocity": normalized_fiber_velocity,
        "fiber_velocity_along_tendon": fiber_velocity_along_tendon,
        "pennation_angular_velocity": pennation_angular_velocity,
        "tendon_velocity": tendon_velocity,
        "normalized_tendon_velocity": tendon_velocity / tsl,
        "force_velocity_multiplier": force_velocity_multiplier,
        "fiber_force": fm,
        "fiber_force_along_tendon": fm * cos,
        "normalized_fiber_force": fm / fiso,
        "active_fiber_force": active_fiber_force,
        "passive_fiber_force": passive_fiber_force,
        "normalized_tendon_force": normalized_tendon_force,
        "fiber_stiffness": fiber_stiffness,
        "fiber_stiffness_along_tendon": fiber_stiffness_along_tendon,
        "tendon_stiffness": tendon_stiffness,
        "muscle_stiffness": series_stiffness(fiber_stiffness_along_tendon, tendon_stiffness, rigid),
        "fiber_active_power": fiber_active_power,
        "fiber_passive_power": fiber_passive_power,
        "tendon_power": -tendon_force * tendon_velocity,
        "zdot": zdot,
        **extra,
    }


def equilibrium_fiber_length(residual, args, pen, length, tendon_slack_length, min_fiber_length):
    """The fiber length at which ``residual(lce, *args)`` is zero (fiber force along the
    tendon balancing the tendon force).

    Bracketed Newton on ``[min_fiber_length, fiber length at tendon slack]``, started
    where OpenSim starts (the tendon at 1.01 slack lengths), to 1e-15; the converged
    root is differentiated by the implicit-function theorem (``newton_ift``). A fiber
    too short for any balance (``residual >= 0`` at the minimum) ends at
    ``min_fiber_length``, as in OpenSim.

    **Arguments:** ``residual``: ``fn(lce, *args) -> (k,)``;
    ``pen``: the members' ``FixedWidthPennation``; ``length``: path lengths (m);
    ``tendon_slack_length``, ``min_fiber_length`` (m).

    **Returns:** the fiber lengths (m), ``(k,)``.
    """
    lmin = min_fiber_length
    hi = jnp.maximum(pen.fiber_length(length, tendon_slack_length), lmin)
    x0 = jnp.maximum(pen.fiber_length(length, 1.01 * tendon_slack_length), lmin)
    lce, _, _ = bracketed_newton(residual, x0, lmin, hi, args, tol=1e-15)
    at_min = residual(lmin, *args) >= 0
    return jnp.where(at_min, lmin, newton_ift(lce, residual, *args))
