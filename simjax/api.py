"""User-facing dynamics functions: one jit boundary each (DESIGN.md rule 4).

Every function takes a ``System`` and a ``State`` and is jit-compiled, vmappable and
differentiable in the state, the controls and every property of the model.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from . import spatial
from .forward import Accelerations, Context, quaternion_errors
from .mechanics import dynamics as dyn
from .state import State

__all__ = ["forward_dynamics", "accelerations", "mass_matrix", "inverse_dynamics", "output", "outputs",
           "constraint_errors", "frame_transform", "station_location", "kinetic_energy", "potential_energy",
           "momentum", "mass_center", "body_poses", "controls"]


@eqx.filter_jit
def accelerations(system, state: State, controls=None, mobility_forces=None) -> Accelerations:
    """All time derivatives at a state (Acceleration stage).

    **Arguments:** ``system``; ``state``; ``controls``: ``(n_actuators,)`` in
    ``system.actuator_names`` order, or ``None`` to use the model's controllers;
    ``mobility_forces``: optional extra generalized forces ``(nu,)``.

    **Returns:** ``Accelerations(udot, qdot, zdot, multipliers, udot_err)``.
    """
    return Context(system, state, controls, mobility_forces).acc


def forward_dynamics(system, state: State, controls=None, mobility_forces=None):
    """Generalized accelerations ``udot (nu,)`` (with constraints enforced).

    **Arguments:** as ``accelerations``. **Returns:** ``udot``.
    """
    return accelerations(system, state, controls, mobility_forces).udot


@eqx.filter_jit
def mass_matrix(system, state: State):
    """The mass matrix ``M(q)`` ``(nu, nu)`` (kg, kg m, kg m^2)."""
    return Context(system, state).mass_matrix


@eqx.filter_jit
def inverse_dynamics(system, state: State, udot, controls=None, include_applied: bool = True):
    """Generalized forces that produce ``udot`` (RNEA), constraints ignored.

    ``tau = M udot + C(q, u) - g(q) - (applied forces)``: adding ``tau`` as
    ``mobility_forces`` to an unconstrained system's forward dynamics gives ``udot``
    back.

    **Arguments:** ``udot (nu,)``; ``controls`` as in ``accelerations``;
    ``include_applied``: subtract the model's applied forces (springs, muscles,
    actuators); if false, gravity and inertia only.

    **Returns:** ``tau (nu,)``.
    """
    ctx = Context(system, state, controls)
    body = None
    tau = dyn.inverse_dynamics(ctx.tree, ctx.params, ctx.pos, ctx.vel, jnp.asarray(udot), body)
    if include_applied:
        tau = tau - ctx.generalized_applied
    return tau


@eqx.filter_jit
def controls(system, state: State):
    """The controls the model's controllers produce at ``state``."""
    return Context(system, state).controls


@eqx.filter_jit
def _output(system, state, path, name, controls):
    ctx = Context(system, state, controls)
    comp = system.model.find(path)
    return comp.output_specs()[name].fn(comp, ctx.at(path))


def output(system, state: State, spec: str, controls=None):
    """The value of an output, ``"/forceset/biceps|fiber_force"``.

    **Arguments:** ``spec``: ``"path|output"``; ``controls`` as in ``accelerations``.

    **Raises:** ``KeyError`` for an unknown component or output.
    """
    path, _, name = spec.partition("|")
    comp = system.model.find(path)
    if name not in comp.output_specs():
        raise KeyError(f"{type(comp).__name__} {path!r} has no output {name!r}; it has "
                       f"{sorted(comp.output_specs())}")
    return _output(system, state, path, name, controls)


def outputs(system, state: State, specs, controls=None) -> dict:
    """Several outputs at once: ``{spec: value}``."""
    return {s: output(system, state, s, controls) for s in specs}


@eqx.filter_jit
def constraint_errors(system, state: State) -> dict:
    """Constraint errors: ``qerr`` (position errors and quaternion norms), ``uerr``
    (velocity errors) and ``udoterr`` (acceleration errors of the solved ``udot``)."""
    ctx = Context(system, state)
    rows = ctx.constraints
    qerr = jnp.concatenate([rows.perr, quaternion_errors(ctx.tree, state.q)])
    return {"qerr": qerr, "uerr": rows.verr, "udoterr": ctx.acc.udot_err}


@eqx.filter_jit
def body_poses(system, state: State):
    """Poses in Ground of all mobilized bodies (``R (n,3,3)``, ``p (n,3)``), tree order."""
    ctx = Context(system, state)
    return ctx.pos.R0, ctx.pos.p0


def frame_transform(system, state: State, path: str):
    """Pose ``(R, p)`` in Ground of the PhysicalFrame at ``path``."""
    return output(system, state, f"{path}|transform_in_ground")


def station_location(system, state: State, frame: str, point):
    """Location in Ground of ``point`` (given in ``frame``)."""
    R, p = frame_transform(system, state, frame)
    return spatial.transform_point((R, p), jnp.asarray(point))


@eqx.filter_jit
def kinetic_energy(system, state: State):
    """Kinetic energy of the multibody system (J)."""
    ctx = Context(system, state)
    return dyn.kinetic_energy(ctx.params, ctx.pos, ctx.vel)


@eqx.filter_jit
def potential_energy(system, state: State):
    """Gravitational potential energy (J), plus the potential energy of forces that
    define one (springs)."""
    ctx = Context(system, state)
    pe = dyn.gravity_potential_energy(ctx.params, ctx.pos)
    for g in ctx.topology.role_groups("forces"):
        pe_fn = getattr(g.cls, "group_potential_energy", None)
        if pe_fn is not None:
            pe = pe + pe_fn(g, ctx.group_params(g), ctx)
    return pe


@eqx.filter_jit
def momentum(system, state: State):
    """Spatial momentum of the system about Ground's origin ``(angular(3), linear(3))``."""
    ctx = Context(system, state)
    return dyn.momentum(ctx.params, ctx.pos, ctx.vel)


@eqx.filter_jit
def mass_center(system, state: State):
    """``(total mass, mass center in Ground)``."""
    ctx = Context(system, state)
    return dyn.mass_center(ctx.params, ctx.pos)
