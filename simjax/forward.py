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
from .groups import group_key
from .lapack import cho_solve, cholesky, spd_solve
from .mechanics import dynamics as dyn
from .mechanics.constraints import ConstraintRows, body_jacobians, weld_rows
from .mechanics.linalg import psd_solve
from .mechanics.tree import frame_table_rows, position_kinematics, tree_params, velocity_kinematics
from .state import State

__all__ = ["Context", "Accelerations", "prescribed_motion", "quaternion_errors"]


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
    ``(nu,)`` added to the applied forces; ``parameters``: state-independent
    parameters already computed (``prepared()`` of another context of the same
    system), so that a loop over states computes them once, outside the loop;
    ``searches``: the results of the searches (``search``) of another context at the
    same state and controls, to use rather than search again; ``check_controls``: whether
    given controls outside an actuator's ``[min_control, max_control]`` are an error
    (OpenSim does not check them; its CMC gives an actuator it does not control 0,
    which may be outside).
    """

    def __init__(
        self,
        system,
        state: State,
        controls=None,
        mobility_forces=None,
        parameters=None,
        searches=None,
        check_controls: bool = True,
    ):
        self.system = system
        self.model = system.model
        self.topology = system.topology
        self.tree = system.topology.tree
        self.state = state
        self._controls = controls
        self._check_controls = check_controls
        self._extra_mobility = mobility_forces
        self._parameters: dict[str, Any] = dict(parameters or {})
        self._searches: dict[str, Any] = dict(searches or {})
        self.path = "/"

    def at(self, path: str) -> _At:
        """A view of this context for evaluating outputs of the component at ``path``."""
        return _At(self, path)

    # -- parameters ---------------------------------------------------------------------
    # Everything derived from the model alone (stacked properties, spline coefficients,
    # curve control points) goes through ``parameter``. XLA hoists such work out of a
    # loop's body, but not out of a conditional inside it, which is where reverse mode
    # puts the integrator's step; ``prepared`` computes it all once, before the loop.

    def parameter(self, key: str, compute):
        """The state-independent parameter ``key``: ``compute()`` on first use, or as
        given to this context."""
        if key not in self._parameters:
            self._parameters[key] = compute()
        return self._parameters[key]

    def prepared(self) -> dict:
        """Every state-independent parameter an evaluation of the system uses (tree,
        groups, and what each group class adds through its ``prepare_parameters``),
        as a pytree to give to other contexts of the same system."""
        self.params
        _control_bounds(self)
        if self.topology.prescribed is not None:
            _prescribed_functions(self)
        for groups in self.topology.roles.values():
            for g in groups:
                self.group_params(g)
                hook = getattr(g.cls, "prepare_parameters", None)
                if hook is not None:
                    hook(g, self)
        return dict(self._parameters)

    # -- searches -------------------------------------------------------------------------
    # A search is work whose result derivatives hold fixed: OpenSim's wrap passes (which
    # segments wrap, where their tangent points are). Reverse mode through an integrator
    # step evaluates the right-hand side at each stage again; given the forward run's
    # searches it skips them.

    def search(self, key: str, compute):
        """The result of the search ``key``: ``compute()`` (held constant by derivatives)
        on first use, or as given to this context."""
        if key not in self._searches:
            self._searches[key] = jax.lax.stop_gradient(compute())
        return self._searches[key]

    def searches(self) -> dict:
        """The results of the searches made so far (or given), to give to a context at
        the same state."""
        return dict(self._searches)

    @property
    def params(self):
        """Traced tree parameters (mass properties, joint offsets, axis functions)."""
        return self.parameter("tree", lambda: tree_params(self.model, self.tree))

    def group_params(self, group):
        """Stacked traced parameters of a group (computed once per context)."""
        return self.parameter(group_key(group), lambda: group.cls.group_params(self.model, group))

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
        rows = frame_table_rows(self.tree, frame_paths)
        mobs = self.tree.frame_mob[rows]
        return spatial.compose(
            (self.pos.R0[mobs], self.pos.p0[mobs]), (self.params["frame_R"][rows], self.params["frame_p"][rows])
        )

    def frame_transform(self, path: str):
        """Pose ``(R, p)`` of one PhysicalFrame in Ground."""
        R, p = self.frames_in_ground((path,))
        return R[0], p[0]

    def _frame_mob(self, path: str) -> int:
        return int(self.tree.frame_mob[self.tree.frame_rows[path]])

    def frame_velocity(self, path: str):
        """Spatial velocity ``(w, v_origin)`` of a frame in Ground."""
        V = self.vel.V[self._frame_mob(path)]
        p = self.frame_transform(path)[1]
        return jnp.concatenate([V[:3], V[3:] + spatial.cross(V[:3], p)])

    def frame_jacobian(self, path: str):
        """``(6, nu)``: the frame's angular velocity and its origin's velocity (Ground) per speed."""
        m = self._frame_mob(path)
        J = jnp.asarray(self.tree.anc_dof[m], self.pos.S.dtype)[None, :] * self.pos.S.T
        p = self.frame_transform(path)[1]
        return jnp.concatenate([J[:3], J[3:] - spatial.skew(p) @ J[:3]])

    def station_jacobian(self, frame: str, point):
        """``(3, nu)``: velocity in Ground of ``point`` (fixed in ``frame``) per speed."""
        m = self._frame_mob(frame)
        J = jnp.asarray(self.tree.anc_dof[m], self.pos.S.dtype)[None, :] * self.pos.S.T
        r = spatial.transform_point(self.frame_transform(frame), jnp.asarray(point, self.pos.S.dtype))
        return J[3:] - spatial.skew(r) @ J[:3]

    def body_accelerations(self):
        """Spatial accelerations of all bodies ``(n_mob, 6)`` (Acceleration stage)."""
        return dyn.body_accelerations(self.tree, self.pos, self.vel, self.acc.udot)

    def frame_acceleration(self, path: str):
        """Spatial acceleration ``(dw/dt, a_origin)`` of a frame in Ground."""
        m = self._frame_mob(path)
        A = self.body_accelerations()[m]
        V = self.vel.V[m]
        p = self.frame_transform(path)[1]
        v_o = V[3:] + spatial.cross(V[:3], p)
        return jnp.concatenate([A[:3], A[3:] + spatial.cross(A[:3], p) + spatial.cross(V[:3], v_o)])

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
        return V[3:] + spatial.cross(V[:3], self.station_location(path))

    def station_acceleration(self, path: str):
        """A Station's acceleration in Ground."""
        frame, _ = self._station(path)
        m = self._frame_mob(frame)
        A, V = self.body_accelerations()[m], self.vel.V[m]
        r = self.station_location(path)
        return A[3:] + spatial.cross(A[:3], r) + spatial.cross(V[:3], V[3:] + spatial.cross(V[:3], r))

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
                raise ValueError(
                    f"controls must have shape ({n},) in actuator order {self.system.actuator_names}, got {c.shape}"
                )
            return _check_control_bounds(self, c) if self._check_controls else c
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

    def group_outputs(self, paths, name: str):
        """One per-member value for many components at once: ``(len(paths),)``.

        A gather per group that computes ``name`` (a Python loop over the few groups,
        never over the members), so reading e.g. every muscle's ``tendon_force`` is
        one small program whatever the number of muscles.

        **Raises:** ``KeyError`` naming a path for which no group computes ``name``.
        """
        paths = tuple(paths)
        where = {p: i for i, p in enumerate(paths)}
        parts, order = [], []
        sources = [(g, self.force_results[id(g)].outputs) for g in self.topology.role_groups("forces")]
        sources += [(g, self.zdot_results[id(g)][1]) for g in self.topology.role_groups("zdot")]
        for g, outputs in sources:
            if name not in outputs:
                continue
            members = [(k, where.pop(p)) for k, p in enumerate(g.paths) if p in where]
            if members:
                parts.append(outputs[name][np.asarray([k for k, _ in members])])
                order += [i for _, i in members]
        if where:
            raise KeyError(f"no group computes {name!r} for {next(iter(where))!r}")
        if not parts:
            return jnp.zeros(0)
        return jnp.concatenate(parts)[np.argsort(np.asarray(order))]

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
        """Spatial inertias of the bodies in Ground (``dynamics.Inertias``)."""
        return dyn.spatial_inertias(self.params, self.pos)

    @functools.cached_property
    def generalized_applied(self):
        """Applied forces as generalized forces ``J^T f_body + tau`` ``(nu,)``."""
        body, mob = self.applied
        return dyn.generalized_forces(self.tree, self.pos, body) + mob

    def inverse_dynamics(self, udot, include_applied: bool = True):
        """Generalized forces that produce ``udot (nu,)`` here (RNEA, constraints
        ignored): ``M udot + C - g``, less the applied forces where
        ``include_applied``. **Returns:** ``tau (nu,)``."""
        tau = dyn.inverse_dynamics(self.tree, self.params, self.pos, self.vel, jnp.asarray(udot), None)
        return tau - self.generalized_applied if include_applied else tau

    @functools.cached_property
    def acc(self) -> Accelerations:
        """Acceleration stage: ``udot``, multipliers, ``qdot``, ``zdot``.

        Solves ``M udot + G^T lambda = f``, ``G udot = b`` through the Cholesky factor of
        ``M``: ``lambda = (G M^-1 G^T)^+ (G M^-1 f - b)`` (``linalg.psd_solve``: a
        Cholesky solve, or the pseudo-inverse with relative cutoff 1e-10 when
        ``G M^-1 G^T`` is singular), so redundant constraints (a planar loop closed by
        a 6-equation weld) give the minimum-norm multipliers and the same ``udot``;
        inconsistent acceleration constraints give the least-squares ``udot``, and
        ``udot_err = G udot - b`` reports what is left.
        """
        M = self.mass_matrix
        body, mob = self.applied
        f = (
            dyn.generalized_forces(
                self.tree,
                self.pos,
                body - dyn.inertial_forces(self.tree, self.params, self.pos, self.vel, None, self.inertias),
            )
            + mob
        )
        rows = self.constraints
        if rows.G.shape[0]:
            # one pair of triangular solves for both right-hand sides
            X = cho_solve(cholesky(M), jnp.concatenate([rows.G.T, f[:, None]], 1))
            MinvGt, Minvf = X[:, :-1], X[:, -1]
            lam = psd_solve(rows.G @ MinvGt, rows.G @ Minvf - rows.b)
            udot = Minvf - MinvGt @ lam
            err = rows.G @ udot - rows.b
        else:
            lam = jnp.zeros(0, f.dtype)
            udot = spd_solve(M, f)
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


def _control_bounds(ctx: Context):
    """``(min_control, max_control)`` of every actuator (a context parameter)."""

    def compute():
        dtype = jnp.result_type(float)
        paths = ctx.topology.actuators
        if not paths:
            return jnp.zeros(0, dtype), jnp.zeros(0, dtype)
        lo = jnp.stack([jnp.asarray(ctx.model.find(p).min_control, dtype) for p in paths])
        hi = jnp.stack([jnp.asarray(ctx.model.find(p).max_control, dtype) for p in paths])
        return lo, hi

    return ctx.parameter("control_bounds", compute)


def _check_control_bounds(ctx: Context, controls):
    paths = ctx.topology.actuators
    if not paths:
        return controls
    lo, hi = _control_bounds(ctx)
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
    pm = prescribed_motion(ctx.system, ctx.state.t, ctx)
    if pm is not None:
        qi, ui, f0, f1, f2 = pm
        n = len(qi)
        G = jnp.zeros((n, tree.nu), dtype).at[np.arange(n), ui].set(1.0)
        rows.append(ConstraintRows(q[qi] - f0, u[ui] - f1, G, f2))
    if tree.loop_welds:
        m1, f1, m2, f2 = (np.asarray(c, np.int32) for c in zip(*tree.loop_welds))
        R0, p0, fR, fp = ctx.pos.R0, ctx.pos.p0, ctx.params["frame_R"], ctx.params["frame_p"]
        X1 = spatial.compose((R0[m1], p0[m1]), (fR[f1], fp[f1]))
        X2 = spatial.compose((R0[m2], p0[m2]), (fR[f2], fp[f2]))
        rows.append(weld_rows(ctx, m1, m2, X1, X2))
    return rows


def prescribed_motion(system, t, ctx=None):
    """Prescribed coordinates at time ``t``: ``(q index, u index, value, speed,
    acceleration)`` (static indices, traced values), or ``None`` if there are none.
    ``ctx``: a ``Context`` of the system whose parameters to use, or None."""
    pres = system.topology.prescribed
    if pres is None:
        return None
    tt = jnp.broadcast_to(jnp.asarray(t), (len(pres["paths"]),))
    f0, f1, f2 = bank_eval(pres["bank"], _prescribed_functions(ctx or Context(system, None)), tt, orders=(0, 1, 2))
    return pres["q"], pres["u"], f0, f1, f2


def _prescribed_functions(ctx: Context):
    """The prescribed-motion functions' parameters (a context parameter)."""
    pres = ctx.topology.prescribed
    return ctx.parameter(
        "prescribed", lambda: bank_params(pres["bank"], [ctx.model.find(p).prescribed_function for p in pres["paths"]])
    )


def quaternion_errors(tree, q):
    """``|quaternion| - 1`` for every quaternion in ``q`` (part of qErr)."""
    if not len(tree.quat_q):
        return jnp.zeros(0, q.dtype)
    idx = tree.quat_q[:, None] + np.arange(4)
    return jnp.linalg.norm(q[idx], axis=-1) - 1.0
