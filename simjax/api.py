"""User-facing dynamics functions: one jit boundary each (DESIGN.md rule 4).

Every function takes a ``System`` and a ``State`` and is jit-compiled, vmappable and
differentiable in the state, the controls and every property of the model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import spatial
from .compiling import jit
from .forward import Accelerations, Context, quaternion_errors
from .mechanics import dynamics as dyn
from .state import State

__all__ = [
    "forward_dynamics",
    "accelerations",
    "mass_matrix",
    "inverse_dynamics",
    "output",
    "outputs",
    "constraint_errors",
    "frame_transform",
    "station_location",
    "kinetic_energy",
    "potential_energy",
    "momentum",
    "mass_center",
    "body_poses",
    "controls",
    "assemble",
    "project",
    "frame_velocity",
    "frame_acceleration",
    "frame_jacobian",
    "station_velocity",
    "station_acceleration",
    "station_jacobian",
    "component_outputs",
]


@jit
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


@jit
def mass_matrix(system, state: State):
    """The mass matrix ``M(q)`` ``(nu, nu)`` (kg, kg m, kg m^2)."""
    return Context(system, state).mass_matrix


@jit
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
    return Context(system, state, controls).inverse_dynamics(udot, include_applied)


@jit
def controls(system, state: State):
    """The controls the model's controllers produce at ``state``."""
    return Context(system, state).controls


@jit
def _output(system, state, path, name, controls):
    ctx = Context(system, state, controls)
    comp = system.model.find(path)
    return comp.output_specs()[name].fn(comp, ctx.at(path))


def output(system, state: State, spec: str, controls=None):
    """The value of an output, ``"/forceset/biceps|fiber_force"``.

    **Arguments:** ``spec``: ``"path|output"``; ``controls`` as in ``accelerations``.

    **Raises:** ``KeyError`` for an unknown component or output.
    """
    path, _, name = spec.rpartition("|")
    comp = system.model.find(path)
    if name not in comp.output_specs():
        raise KeyError(f"{type(comp).__name__} {path!r} has no output {name!r}; it has {sorted(comp.output_specs())}")
    return _output(system, state, path, name, controls)


def outputs(system, state: State, specs, controls=None) -> dict:
    """Several outputs at once: ``{spec: value}``."""
    return {s: output(system, state, s, controls) for s in specs}


@jit
def _component_outputs(system, state, paths, name, controls):
    def one(state, controls):
        return Context(system, state, controls).group_outputs(paths, name)

    if state.q.ndim == 1:
        return one(state, controls)
    return jax.vmap(one, in_axes=(0, None if controls is None or jnp.ndim(controls) == 1 else 0))(state, controls)


def component_outputs(system, state: State, paths, name: str, controls=None):
    """One output of many components, read in one compiled program (one gather per
    group of same-type components, whatever their number), at a state or along a
    batch of states (a trajectory).

    **Arguments:** ``system``; ``state``: one ``State``, or a ``State`` whose leaves
    carry a leading batch axis (``q (n, nq)``, ``t (n,)``, ...: every frame of a
    trajectory); ``paths``: component paths (e.g. every muscle,
    ``system.model.paths(Muscle)``); ``name``: the output (``"tendon_force"``,
    ``"fiber_length"``, ``"length"``, ... in the output's own units);
    ``controls``: as in ``accelerations`` (``(n_actuators,)``, or ``(n, n_actuators)``
    for a batch; ``None``: the model's controllers).

    **Returns:** ``(len(paths),)``, or ``(n, len(paths))`` for a batch of states, in
    the order of ``paths``.

    **Raises:** ``KeyError`` naming a path for which no group computes ``name``.
    """
    return _component_outputs(system, state, tuple(paths), name, controls)


@jit
def constraint_errors(system, state: State) -> dict:
    """Constraint errors: ``qerr`` (position errors and quaternion norms), ``uerr``
    (velocity errors) and ``udoterr`` (acceleration errors of the solved ``udot``)."""
    ctx = Context(system, state)
    rows = ctx.constraints
    qerr = jnp.concatenate([rows.perr, quaternion_errors(ctx.tree, state.q)])
    return {"qerr": qerr, "uerr": rows.verr, "udoterr": ctx.acc.udot_err}


@jit
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


@jit
def kinetic_energy(system, state: State):
    """Kinetic energy of the multibody system (J)."""
    ctx = Context(system, state)
    return dyn.kinetic_energy(ctx.params, ctx.pos, ctx.vel)


@jit
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


@jit
def momentum(system, state: State):
    """Spatial momentum of the system about Ground's origin ``(angular(3), linear(3))``."""
    ctx = Context(system, state)
    return dyn.momentum(ctx.params, ctx.pos, ctx.vel)


@jit
def mass_center(system, state: State):
    """``(total mass, mass center in Ground)``."""
    ctx = Context(system, state)
    return dyn.mass_center(ctx.params, ctx.pos)


def assemble(
    system,
    state: State,
    weights=None,
    tol: float = 1e-10,
    max_steps: int = 100,
    throw: bool = True,
    return_info: bool = False,
):
    """Satisfy all position and velocity constraints, keeping coordinates near ``state``'s.

    Minimizes ``sum_i w_i (q_i - state.q_i)^2`` over the coordinates that are neither
    locked nor prescribed, subject to every position constraint (constraint
    components, locked/prescribed coordinates, loop closures, quaternion norms), then
    projects ``u`` onto the velocity constraints. Differentiable (implicit function
    theorem), jit-able and vmap-able.

    **Arguments:** ``weights``: ``{coordinate: weight}`` or an array ``(nq,)``;
    ``tol``: largest position error accepted; ``max_steps``; ``throw``: raise when
    assembly fails (else check the info); ``return_info``: also return an
    ``AssemblyInfo(success, max_qerr, max_uerr, steps)``.

    **Returns:** the assembled ``State`` (or ``(state, info)``).
    """
    return _assemble(system, state, weights, tol, max_steps, throw, return_info)


@jit
def _assemble(system, state, weights, tol, max_steps, throw, return_info):
    from .mechanics import assembly

    return assembly.assemble(
        system, state, weights=weights, tol=tol, max_steps=max_steps, throw=throw, return_info=return_info
    )


@jit
def project(system, state: State, iterations: int = 2):
    """Project ``q`` then ``u`` onto the constraint manifold from a nearby state
    (Simbody ``project``: what the integrator does after each step).

    **Arguments:** ``iterations``: Gauss-Newton steps for ``q``.

    **Returns:** the projected ``State``.
    """
    from .mechanics import assembly

    return assembly.project(system, state, iterations)


@jit
def _frame_kinematics(system, state, path, controls):
    ctx = Context(system, state, controls)
    return ctx.frame_transform(path), ctx.frame_velocity(path), ctx.frame_acceleration(path)


def frame_velocity(system, state: State, path: str):
    """Spatial velocity ``(w, v)`` in Ground of the PhysicalFrame at ``path``: its angular
    velocity and the velocity of its origin (OpenSim ``Frame::getVelocityInGround``)."""
    return _frame_velocity(system, state, path)


@jit
def _frame_velocity(system, state, path):
    return Context(system, state).frame_velocity(path)


def frame_acceleration(system, state: State, path: str, controls=None):
    """Spatial acceleration ``(dw/dt, a)`` in Ground of the frame at ``path`` (its
    origin's acceleration), from the forward dynamics (OpenSim
    ``Frame::getAccelerationInGround``)."""
    return _frame_kinematics(system, state, path, controls)[2]


@jit
def _station_kinematics(system, state, frame, point, controls, order):
    ctx = Context(system, state, controls)
    m = ctx._frame_mob(frame)
    r = spatial.transform_point(ctx.frame_transform(frame), jnp.asarray(point, state.q.dtype))
    if order == 1:
        V = ctx.vel.V[m]
        return V[3:] + jnp.cross(V[:3], r)
    A, V = ctx.body_accelerations()[m], ctx.vel.V[m]
    return A[3:] + jnp.cross(A[:3], r) + jnp.cross(V[:3], V[3:] + jnp.cross(V[:3], r))


def station_velocity(system, state: State, frame: str, point):
    """Velocity in Ground of ``point`` fixed in ``frame`` (m/s)."""
    return _station_kinematics(system, state, frame, point, None, 1)


def station_acceleration(system, state: State, frame: str, point, controls=None):
    """Acceleration in Ground of ``point`` fixed in ``frame`` (m/s^2), from the forward
    dynamics."""
    return _station_kinematics(system, state, frame, point, controls, 2)


@jit
def frame_jacobian(system, state: State, path: str):
    """``J (6, nu)`` of the frame at ``path``: ``(w, v_origin) = J u`` in Ground."""
    return Context(system, state).frame_jacobian(path)


@jit
def station_jacobian(system, state: State, frame: str, point):
    """``J (3, nu)``: the velocity in Ground of ``point`` (fixed in ``frame``) is ``J u``."""
    return Context(system, state).station_jacobian(frame, point)
