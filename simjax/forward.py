"""The realization pipeline: Position -> Velocity -> Dynamics -> Acceleration.

A ``Context`` holds one state of one system while a function is traced. Each stage
is a cached property computed on first use from the one before (MJX's ``forward.py``
chain, with XLA as the cache): ``pos``, ``vel``, ``controls``, ``forces``,
``constraints``, ``acc``. Output functions, forces, controllers and constraints all
read what they need from it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .component import ModelError
from .function_bank import bank_eval, bank_params
from .groups import Forces
from .mechanics import dynamics as dyn
from .mechanics.constraints import ConstraintRows, body_jacobians, weld_rows
from .mechanics.tree import position_kinematics, qdot_from_u, tree_params, velocity_kinematics, _offset_transform
from .state import State

__all__ = ["Context", "Accelerations"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Accelerations:
    """Acceleration-stage results: ``udot``, ``qdot``, ``zdot``, the Lagrange
    multipliers ``multipliers`` (one per constraint equation) and ``udot_err``."""

    udot: Any
    qdot: Any
    zdot: Any
    multipliers: Any
    udot_err: Any


class Context:
    """One system at one state, realized lazily stage by stage (trace-time object).

    **Arguments:** ``system``; ``state``; ``controls``: ``(n_actuators,)`` or ``None``
    to take them from the controllers; ``mobility_forces``: extra generalized forces
    ``(nu,)`` added to the applied forces.
    """

    def __init__(self, system, state: State, controls=None, mobility_forces=None):
        self.system = system
        self.model = system.model
        self.topology = system.topology
        self.tree = system.topology.tree
        self.state = state
        self._controls = controls
        self._extra_mobility = mobility_forces
        self._group_params: dict[str, Any] = {}
        self.path = "/"

    def at(self, path: str) -> _At:
        """A view of this context for evaluating outputs of the component at ``path``."""
        return _At(self, path)

    # -- parameters ---------------------------------------------------------------------

    @functools.cached_property
    def params(self):
        """Traced tree parameters (mass properties, joint offsets, axis functions)."""
        return tree_params(self.model, self.tree)

    def group_params(self, group):
        """Stacked traced parameters of a group (computed once per context)."""
        key = id(group)
        if key not in self._group_params:
            self._group_params[key] = group.cls.group_params(self.model, group)
        return self._group_params[key]

    # -- position and velocity stages --------------------------------------------------------

    @functools.cached_property
    def pos(self):
        """Position-stage kinematics (``mechanics.tree.Positions``)."""
        return position_kinematics(self.tree, self.params, self.state.q)

    @functools.cached_property
    def vel(self):
        """Velocity-stage kinematics (``mechanics.tree.Velocities``)."""
        return velocity_kinematics(self.tree, self.params, self.pos, self.state.u)

    @functools.cached_property
    def jacobians(self):
        """Body Jacobians ``(n_mob, 6, nu)``."""
        return body_jacobians(self.tree, self.pos)

    def frames_in_ground(self, frame_paths):
        """Poses in Ground of PhysicalFrames (static paths): ``(R (k,3,3), p (k,3))``."""
        mobs = np.asarray([self.tree.body_paths.index(self.tree.frames[f][0]) for f in frame_paths], np.int32)
        offs = [_offset_transform(self.model, self.tree.frames[f][1]) for f in frame_paths]
        R_off = jnp.stack([o[0] for o in offs])
        p_off = jnp.stack([o[1] for o in offs])
        return spatial.compose((self.pos.R0[mobs], self.pos.p0[mobs]), (R_off, p_off))

    def frame_transform(self, path: str):
        """Pose ``(R, p)`` of one PhysicalFrame in Ground."""
        R, p = self.frames_in_ground((path,))
        return R[0], p[0]

    def _frame_mob(self, path: str) -> int:
        return self.tree.body_paths.index(self.tree.frames[path][0])

    def frame_velocity(self, path: str):
        """Spatial velocity ``(w, v_origin)`` of a frame in Ground."""
        V = self.vel.V[self._frame_mob(path)]
        p = self.frame_transform(path)[1]
        return jnp.concatenate([V[:3], V[3:] + jnp.cross(V[:3], p)])

    def body_accelerations(self):
        """Spatial accelerations of all bodies ``(n_mob, 6)`` (Acceleration stage)."""
        a_rel = jnp.zeros((self.tree.n_mob, 6), self.pos.S.dtype).at[self.tree.dof_mob].add(
            self.pos.S * self.acc.udot[:, None])
        return jnp.asarray(self.tree.anc, a_rel.dtype) @ a_rel + self.vel.C

    def frame_acceleration(self, path: str):
        """Spatial acceleration ``(dw/dt, a_origin)`` of a frame in Ground."""
        m = self._frame_mob(path)
        A = self.body_accelerations()[m]
        V = self.vel.V[m]
        p = self.frame_transform(path)[1]
        v_o = V[3:] + jnp.cross(V[:3], p)
        return jnp.concatenate([A[:3], A[3:] + jnp.cross(A[:3], p) + jnp.cross(V[:3], v_o)])

    def _station(self, path: str):
        st = self.model.find(path)
        frame = self.topology.connections[(path, "parent_frame")]
        return frame, st.location

    def station_location(self, path: str):
        """A Station's location in Ground."""
        frame, loc = self._station(path)
        return spatial.transform_point(self.frame_transform(frame), loc)

    def station_velocity(self, path: str):
        """A Station's velocity in Ground."""
        frame, _ = self._station(path)
        V = self.vel.V[self._frame_mob(frame)]
        return V[3:] + jnp.cross(V[:3], self.station_location(path))

    def station_acceleration(self, path: str):
        """A Station's acceleration in Ground."""
        frame, _ = self._station(path)
        m = self._frame_mob(frame)
        A, V = self.body_accelerations()[m], self.vel.V[m]
        r = self.station_location(path)
        return A[3:] + jnp.cross(A[:3], r) + jnp.cross(V[:3], V[3:] + jnp.cross(V[:3], r))

    def _coord(self, path: str):
        return self.tree.coordinates[path]

    def coordinate_value(self, path: str):
        """A coordinate's value (not available for quaternion rotations)."""
        info = self._coord(path)
        if info.q < 0:
            raise ModelError(path, "the value of a quaternion joint's rotational coordinate is not defined")
        return self.state.q[info.q]

    def coordinate_speed(self, path: str):
        """A coordinate's speed."""
        return self.state.u[self._coord(path).u]

    def coordinate_acceleration(self, path: str):
        """A coordinate's acceleration."""
        return self.acc.udot[self._coord(path).u]

    # -- dynamics stage -------------------------------------------------------------------

    @functools.cached_property
    def controls(self):
        """Actuator controls: given, or the sum of the controllers' (Dynamics stage)."""
        n = len(self.topology.actuators)
        dtype = self.state.t.dtype
        if self._controls is not None:
            c = jnp.asarray(self._controls, dtype)
            if c.shape != (n,):
                raise ValueError(f"controls must have shape ({n},) in actuator order {self.system.actuator_names}, "
                                 f"got {c.shape}")
            return _check_control_bounds(self, c)
        total = jnp.zeros(n, dtype)
        for g in self.topology.role_groups("controls"):
            total = total + g.cls.group_controls(g, self.group_params(g), self)
        return total

    def control_of(self, path: str):
        """The control of the actuator at ``path``."""
        return self.controls[self.topology.actuators.index(path)]

    @functools.cached_property
    def force_results(self) -> dict:
        """Each force group's ``Forces``, by group."""
        return {id(g): g.cls.group_forces(g, self.group_params(g), self) for g in self.topology.role_groups("forces")}

    @functools.cached_property
    def applied(self):
        """Total applied ``(body forces (n_mob, 6), mobility forces (nu,))``."""
        dtype = self.pos.S.dtype
        body = jnp.zeros((self.tree.n_mob, 6), dtype)
        mob = jnp.zeros(self.tree.nu, dtype)
        for f in self.force_results.values():
            if f.body is not None:
                body = body + f.body
            if f.mobility is not None:
                mob = mob + f.mobility
        if self._extra_mobility is not None:
            mob = mob + self._extra_mobility
        return body, mob

    def group_output(self, path: str, name: str):
        """A per-member value a group computed (e.g. a muscle's ``fiber_force``)."""
        for g in self.topology.role_groups("forces"):
            if path in g.paths and name in self.force_results[id(g)].outputs:
                return self.force_results[id(g)].outputs[name][g.paths.index(path)]
        for g in self.topology.role_groups("zdot"):
            if path in g.paths and name in self.zdot_results[id(g)][1]:
                return self.zdot_results[id(g)][1][name][g.paths.index(path)]
        raise KeyError(f"no group computes {name!r} for {path!r}")

    # -- constraints and accelerations ----------------------------------------------------

    @functools.cached_property
    def constraints(self) -> ConstraintRows:
        """All constraint equations stacked (Position/Velocity/Acceleration levels)."""
        rows = [g.cls.group_rows(g, self.group_params(g), self) for g in self.topology.role_groups("constraints")]
        rows += _builtin_constraint_rows(self)
        dtype = self.pos.S.dtype
        if not rows:
            z = jnp.zeros(0, dtype)
            return ConstraintRows(z, z, jnp.zeros((0, self.tree.nu), dtype), z)
        return ConstraintRows(*(jnp.concatenate([getattr(r, f) for r in rows]) for f in ("perr", "verr", "G", "b")))

    @functools.cached_property
    def mass_matrix(self):
        """The mass matrix ``(nu, nu)``."""
        return dyn.mass_matrix(self.tree, self.params, self.pos, self.inertias)

    @functools.cached_property
    def inertias(self):
        """Spatial inertias of the bodies in Ground ``(n_mob, 6, 6)``."""
        return dyn.spatial_inertias(self.params, self.pos)

    @functools.cached_property
    def generalized_applied(self):
        """Applied forces as generalized forces ``J^T f_body + tau`` ``(nu,)``."""
        body, mob = self.applied
        return dyn.generalized_forces(self.tree, self.pos, body) + mob

    @functools.cached_property
    def acc(self) -> Accelerations:
        """Acceleration stage: ``udot``, multipliers, ``qdot``, ``zdot``."""
        M = self.mass_matrix
        f = self.generalized_applied - dyn.bias_forces(self.tree, self.params, self.pos, self.vel, self.inertias)
        cho = jax.scipy.linalg.cho_factor(M)
        rows = self.constraints
        if rows.G.shape[0]:
            MinvGt = jax.scipy.linalg.cho_solve(cho, rows.G.T)
            A = rows.G @ MinvGt
            Minvf = jax.scipy.linalg.cho_solve(cho, f)
            lam = jnp.linalg.pinv(A, rtol=1e-10, hermitian=True) @ (rows.G @ Minvf - rows.b)
            udot = Minvf - MinvGt @ lam
            err = rows.G @ udot - rows.b
        else:
            lam = jnp.zeros(0, f.dtype)
            udot = jax.scipy.linalg.cho_solve(cho, f)
            err = lam
        return Accelerations(udot=udot, qdot=self.vel.qdot, zdot=self.zdot, multipliers=lam, udot_err=err)

    @functools.cached_property
    def zdot_results(self) -> dict:
        """Each z-owning group's ``(zdot (k, nz_each), outputs)``, by group."""
        return {id(g): g.cls.group_zdot(g, self.group_params(g), self) for g in self.topology.role_groups("zdot")}

    @functools.cached_property
    def zdot(self):
        """Derivatives of all auxiliary state variables ``(nz,)``."""
        z = jnp.zeros(self.topology.nz, self.state.t.dtype)
        for g in self.topology.role_groups("zdot"):
            vals, _ = self.zdot_results[id(g)]
            z = z.at[g.static["z_index"]].set(vals.reshape(-1))
        return z


class _At:
    """A Context seen from one component: ``ctx.path`` is that component's path."""

    def __init__(self, ctx: Context, path: str):
        self._ctx = ctx
        self.path = path

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _check_control_bounds(ctx: Context, controls):
    paths = ctx.topology.actuators
    if not paths:
        return controls
    lo = jnp.stack([jnp.asarray(ctx.model.find(p).min_control, controls.dtype) for p in paths])
    hi = jnp.stack([jnp.asarray(ctx.model.find(p).max_control, controls.dtype) for p in paths])
    bad = (controls < lo) | (controls > hi)
    msgs = [f"control of {p} is outside [min_control, max_control]" for p in paths]
    return eqx.branched_error_if(controls, jnp.any(bad), jnp.argmax(bad), msgs)


def _builtin_constraint_rows(ctx: Context) -> list[ConstraintRows]:
    """Locked and prescribed coordinates, slave welds, quaternion norms."""
    topo, tree, dtype = ctx.topology, ctx.tree, ctx.pos.S.dtype
    rows = []
    u, q = ctx.state.u, ctx.state.q
    locked = topo.locked_u
    if len(locked):
        G = jnp.zeros((len(locked), tree.nu), dtype).at[np.arange(len(locked)), locked].set(1.0)
        rows.append(ConstraintRows(jnp.zeros(len(locked), dtype), u[locked], G, jnp.zeros(len(locked), dtype)))
    pres = topo.prescribed
    if pres is not None:
        fns = [ctx.model.find(p).prescribed_function for p in pres["paths"]]
        t = jnp.broadcast_to(ctx.state.t, (len(fns),))
        f0, f1, f2 = bank_eval(pres["bank"], bank_params(pres["bank"], fns), t, orders=(0, 1, 2))
        n = len(fns)
        G = jnp.zeros((n, tree.nu), dtype).at[np.arange(n), pres["u"]].set(1.0)
        rows.append(ConstraintRows(q[pres["q"]] - f0, u[pres["u"]] - f1, G, f2))
    if tree.slave_welds:
        master = np.asarray([m for m, _ in tree.slave_welds], np.int32)
        slave = np.asarray([s for _, s in tree.slave_welds], np.int32)
        R0, p0 = ctx.pos.R0, ctx.pos.p0
        rows.append(weld_rows(ctx, master, slave, (R0[master], p0[master]), (R0[slave], p0[slave])))
    return rows


def quaternion_errors(tree, q):
    """``|quaternion| - 1`` for every quaternion in ``q`` (part of qErr)."""
    if not len(tree.quat_q):
        return jnp.zeros(0, q.dtype)
    idx = tree.quat_q[:, None] + np.arange(4)
    return jnp.linalg.norm(q[idx], axis=-1) - 1.0
