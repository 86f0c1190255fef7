"""Forward simulation: one jitted Diffrax solve over ``y = (q, u, z)``.

``simulate(system, state, t_final)`` integrates the model's equations of motion
from ``state`` and returns a ``Trajectory``. It is a pure function of its array
arguments: ``jax.grad`` flows to the initial state, the controls and every model
property, and ``jax.vmap`` batches it over worlds.

Controls are ``None`` (the model's controllers), a constant array in
``system.actuator_names`` order, a ``ControlTable`` (piecewise-linear in time), or
any callable ``controls(t, state) -> array`` — an Equinox module (an MLP policy) is
differentiated like everything else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .batching import cache_chunk, map_chunks
from .compiling import jit
from .forward import Context
from .mechanics.tree import qdot_from_u
from .solvers import RK4, ExplicitRungeKutta, Projected, RungeKuttaMerson, SemiImplicitEuler, SimbodyController
from .state import State

__all__ = ["simulate", "Trajectory", "NONFINITE_STATE", "ControlTable", "Event", "rhs", "SOLVERS", "simulate_batch"]

#: solver name -> (Diffrax solver class, adaptive?)
SOLVERS = {
    "rkm": (RungeKuttaMerson, True),
    "tsit5": (diffrax.Tsit5, True),
    "dopri5": (diffrax.Dopri5, True),
    "dopri8": (diffrax.Dopri8, True),
    "kvaerno5": (diffrax.Kvaerno5, True),
    "rk4": (RK4, False),
    "semi_implicit_euler": (SemiImplicitEuler, False),
}


class ControlTable(eqx.Module):
    """Controls given at times, linearly interpolated (held constant outside).

    **Fields:** ``times (n,)`` (s, increasing); ``values (n, n_actuators)``.
    """

    times: jax.Array
    values: jax.Array

    def __call__(self, t, state=None):
        """The controls at time ``t`` (s), linear between the knots and held beyond
        them: ``(n_actuators,)``; ``state`` is unused (a controller's signature)."""
        return jax.vmap(lambda v: jnp.interp(t, self.times, v), in_axes=1)(self.values)


def _controls_at(controls, t, state):
    if controls is None:
        return None
    if callable(controls):
        return controls(t, state)
    return controls


def rhs(system, t, y, d, controls=None, parameters=None):
    """The ODE right-hand side ``dy/dt = (qdot, udot, zdot)``.

    **Arguments:** ``system``; time ``t``; ``y = (q, u, z)``; discrete variables
    ``d``; ``controls`` as for ``simulate``; ``parameters``: the system's
    ``Context.prepared()``, when computed once outside a loop over states.
    """
    return _rhs_searched(system, t, y, d, controls, parameters)[0]


def _rhs_searched(system, t, y, d, controls=None, parameters=None, searches=None):
    """``rhs`` and the searches its evaluation made (``Context.search``): ``(dy/dt,
    searches)``. Given ``searches`` (an evaluation's at the same ``t``, ``y``) are
    used rather than made again."""
    tree = system.topology.tree
    nq, nu = tree.nq, tree.nu
    state = State(t=t, q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=d)
    ctx = Context(system, state, _controls_at(controls, t, state), parameters=parameters, searches=searches)
    acc = ctx.acc
    return jnp.concatenate([acc.qdot, acc.udot, acc.zdot]), ctx.searches()


class _Packed(eqx.Module):
    """Diffrax ``args``: the array leaves of (system, controls, the system's prepared
    parameters) as a flat tuple.

    Diffrax handles ``args`` with ``tree_at`` and ``stop_gradient``, which trip over the
    empty tuples a Model is full of; flat leaves avoid that. The structure is static.
    The parameters (``Context.prepared``) are computed once per solve, outside the
    integrator's loop: reverse mode would otherwise recompute them in every step.
    """

    leaves: tuple
    d: jax.Array
    treedef: Any = eqx.field(static=True)

    @staticmethod
    def of(system, controls, d, parameters=None) -> _Packed:
        leaves, treedef = jax.tree.flatten((system, controls, parameters))
        return _Packed(tuple(leaves), d, treedef)

    def unpack(self):
        """``(system, controls, d, parameters)``."""
        system, controls, parameters = jax.tree.unflatten(self.treedef, self.leaves)
        return system, controls, self.d, parameters


# (jitted so that Diffrax's several traces of the field, for its term check, its loop
# body's shape and the loop body, share one trace: a wrapping model's field takes
# seconds to trace; the program holds one copy of it either way)
@eqx.filter_jit
def _vector_field(t, y, args):
    system, controls, d, parameters = args.unpack()
    return rhs(system, t, y, d, controls, parameters)


@eqx.filter_jit
def _searched_field(t, y, args, searches):
    """``_vector_field`` with its searches (the solvers' ``searched``)."""
    system, controls, d, parameters = args.unpack()
    return _rhs_searched(system, t, y, d, controls, parameters, searches)


def _kinematics(t, q, u, args):
    system = args.unpack()[0]
    return qdot_from_u(system.topology.tree, q, u)


def _has_constraints(system) -> bool:
    topo = system.topology
    return bool(
        topo.role_groups("constraints")
        or len(topo.locked_u)
        or topo.prescribed is not None
        or topo.tree.slave_welds
        or len(topo.tree.quat_q)
    )


def _projector(tol):
    from .mechanics import assembly

    def project(t, y, args):
        sys_, _, d, parameters = args.unpack()
        return assembly.project_y(sys_, t, y, d, tol=tol, parameters=parameters)

    return project


@dataclasses.dataclass(frozen=True)
class Event:
    """A witness function whose zero crossing stops the simulation or triggers a handler.

    **Fields:** ``fn(system, state) -> scalar`` (the witness); ``handler``:
    ``fn(system, state) -> state`` applied at the crossing (then the simulation goes
    on), or ``None`` for a terminating event; ``direction``: ``+1`` only rising,
    ``-1`` only falling, ``0`` both.
    """

    fn: Callable
    handler: Callable | None = None
    direction: int = 0


#: ``Trajectory.result`` of a solve whose state became non-finite (NaN or inf)
NONFINITE_STATE = 100
_NONFINITE_MESSAGE = (
    "simulate: the state became non-finite (NaN or inf). A step too large for the model's fastest "
    "dynamics does this with a fixed-step solver (the fiber lengths of muscles with elastic tendons are "
    "stiff): use a smaller dt or an adaptive solver (solver='rkm'). With throw=False the trajectory comes "
    "back with result = simjax.NONFINITE_STATE (100)."
)


class Trajectory(eqx.Module):
    """The result of ``simulate``.

    **Fields:** ``t (n,)``, ``q (n, nq)``, ``u (n, nu)``, ``z (n, nz)``, ``d (nd,)``
    (discrete variables at the end), ``system``, ``controls`` (as given),
    ``result`` (0 = success; else Diffrax's result code, or ``NONFINITE_STATE`` where
    the state became NaN or inf), ``num_steps``, and
    ``event_times`` (times at which events fired; ``inf`` padding), and ``t_end``,
    ``y_end``: the time and state where integration stopped (``t_final``, or a
    terminating event's zero crossing).
    Samples past a terminating event are ``inf``; ``valid`` masks them.
    """

    t: jax.Array
    q: jax.Array
    u: jax.Array
    z: jax.Array
    d: jax.Array
    system: Any
    controls: Any
    result: jax.Array
    num_steps: jax.Array
    event_times: jax.Array
    t_end: jax.Array | None = None
    y_end: jax.Array | None = None

    @property
    def y(self):
        """``(n, nq + nu + nz)``."""
        return jnp.concatenate([self.q, self.u, self.z], -1)

    @property
    def valid(self):
        """Which samples were reached (``t`` finite)."""
        return jnp.isfinite(self.t)

    def __len__(self) -> int:
        return self.t.shape[-1]

    def state(self, i: int) -> State:
        """The state at sample ``i``."""
        return State(t=self.t[i], q=self.q[i], u=self.u[i], z=self.z[i], d=self.d)

    @property
    def final_state(self) -> State:
        """The state where integration stopped (at a terminating event, its zero crossing)."""
        if self.t_end is None:
            i = jnp.sum(self.valid) - 1
            return State(t=self.t[i], q=self.q[i], u=self.u[i], z=self.z[i], d=self.d)
        nq, nu = self.q.shape[-1], self.u.shape[-1]
        y = self.y_end
        return State(t=self.t_end, q=y[..., :nq], u=y[..., nq : nq + nu], z=y[..., nq + nu :], d=self.d)

    def output(self, spec: str):
        """An output evaluated at every sample: ``traj.output("/forceset/biceps|fiber_force")``."""
        path, _, name = spec.rpartition("|")
        comp = self.system.model.find(path)
        if name not in comp.output_specs():
            raise KeyError(
                f"{type(comp).__name__} {path!r} has no output {name!r}; it has {sorted(comp.output_specs())}"
            )
        return _trajectory_output(self.system, self.t, self.q, self.u, self.z, self.d, self.controls, path, name)

    def to_table(self, outputs=()):
        """A ``TimeSeriesTable`` of the state variables (OpenSim names) and outputs."""
        from .io.tables import TimeSeriesTable

        sys_ = self.system
        keep = np.asarray(self.valid)
        cols = [np.asarray(self.q)[keep], np.asarray(self.u)[keep], np.asarray(self.z)[keep]]
        labels = list(sys_.q_names) + list(sys_.u_names) + list(sys_.z_names)
        for spec in outputs:
            v = np.asarray(self.output(spec))[keep]
            cols.append(v.reshape(v.shape[0], -1))
            labels.extend([spec] if cols[-1].shape[1] == 1 else [f"{spec}_{i}" for i in range(cols[-1].shape[1])])
        values = np.concatenate(cols, axis=1) if cols else np.zeros((keep.sum(), 0))
        return TimeSeriesTable(np.asarray(self.t)[keep], values, labels, {"inDegrees": "no"})

    def to_dataframe(self, outputs=()):
        """A pandas DataFrame (index: time) of the state variables and outputs."""
        return self.to_table(outputs).to_pandas()

    def write_states(self, path: str) -> None:
        """Write an OpenSim states ``.sto`` (columns named by state-variable paths)."""
        from .io.tables import write_table

        table = self.to_table()
        table.metadata["header"] = table.metadata.get("header", self.system.model.name + "_states")
        write_table(table, path)


@jit
def _trajectory_output(system, t, q, u, z, d, controls, path, name):
    comp = system.model.find(path)
    fn = comp.output_specs()[name].fn

    def one(ti, qi, ui, zi):
        state = State(t=ti, q=qi, u=ui, z=zi, d=d)
        ctx = Context(system, state, _controls_at(controls, ti, state))
        return fn(comp, ctx.at(path))

    ok = jnp.isfinite(t)
    safe = lambda a: jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - 1)), a, 0.0)  # noqa: E731
    return jax.vmap(one)(jnp.where(ok, t, 0.0), safe(q), safe(u), safe(z))


def _adjoint(name: str):
    if name in ("checkpoint", "recursive_checkpoint"):
        return diffrax.RecursiveCheckpointAdjoint()
    if name == "direct":
        return diffrax.DirectAdjoint()
    if name == "backsolve":
        return diffrax.BacksolveAdjoint()
    raise ValueError(f"unknown adjoint {name!r}: use 'checkpoint', 'direct' or 'backsolve'")


def simulate(
    system,
    state: State,
    t_final,
    controls=None,
    *,
    solver: str = "rkm",
    rtol: float | None = None,
    atol: float | None = None,
    accuracy: float = 1e-5,
    dt: float | None = None,
    ts=None,
    n_outputs: int = 101,
    save_steps: bool = False,
    max_steps: int = 100_000,
    project: bool = True,
    events=(),
    max_events: int = 100,
    progress: bool = False,
    throw: bool = True,
    adjoint: str = "checkpoint",
    max_step_size: float | None = None,
    constraint_tolerance: float | None = None,
) -> Trajectory:
    """Integrate the model from ``state`` to ``t_final``.

    **Arguments:**

    - ``system``, ``state``: the built model and the initial state.
    - ``t_final``: end time (s).
    - ``controls``: ``None`` (controllers), an array ``(n_actuators,)``, a
      ``ControlTable``, or a callable ``(t, state) -> controls``.
    - ``solver``: ``"rkm"`` (Runge–Kutta–Merson, OpenSim's default), ``"tsit5"``,
      ``"dopri5"``, ``"dopri8"``, ``"kvaerno5"`` (implicit, for stiff muscles), or the
      fixed-step ``"rk4"`` and ``"semi_implicit_euler"`` (need ``dt``).
    - ``accuracy``: OpenSim's integrator accuracy. ``"rkm"`` controls its error as
      Simbody does (``solvers.SimbodyController``: RMS errors of q, u and z, the
      latter two relative to ``max(|value|, 1)``, at most ``accuracy``), so its steps
      follow OpenSim's; the other adaptive solvers use Diffrax's PID control with
      ``rtol`` and ``atol``.
    - ``rtol``, ``atol``: tolerances of the adaptive solvers; both default to
      ``accuracy`` (``"rkm"`` uses the smaller as its accuracy).
    - ``dt``: the fixed step (fixed-step solvers) or the initial step.
    - ``ts``: output times (default ``n_outputs`` evenly spaced times including both
      ends); ``save_steps``: instead output every step (padded to ``max_steps`` with
      ``inf``).
    - ``max_steps``: step budget; exceeding it is an error (``throw``) or a result code.
    - ``project``: project each step onto the position and velocity constraints and
      normalize quaternions (Simbody-style), when the model has any.
    - ``constraint_tolerance``: as Simbody's: a step's positions (speeds) are projected
      when the RMS of its position (velocity) constraint errors exceeds a tenth of it;
      default ``min(rtol, atol) / 10`` (Simbody's default, accuracy / 10).
    - ``events``: ``Event``s. A terminating one stops the simulation at its zero
      crossing (located to tolerance); one with a handler updates the state there and
      continues (handlers run between jitted segments, so such simulations are not
      vmappable).
    - ``progress``: print progress of a long run.
    - ``throw``: raise on failure; else return the result code in ``result``
      (``jax.vmap`` batches report per world).
    - ``adjoint``: how reverse-mode gradients are computed: ``"checkpoint"``
      (recursive checkpointing, default), ``"direct"`` or ``"backsolve"``.
    - ``max_step_size``: largest step of the adaptive solvers.

    **Returns:** a ``Trajectory``.
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose one of {sorted(SOLVERS)}")
    _, adaptive = SOLVERS[solver]
    if not adaptive and dt is None:
        raise ValueError(f"the fixed-step solver {solver!r} needs dt")
    if adjoint == "backsolve" and solver == "rkm":
        # (the backward solve integrates the state and its adjoints together; the rkm
        # step control is Simbody's error norm, defined on the state alone)
        raise ValueError(
            "adjoint='backsolve' cannot use solver='rkm' (Simbody's step control is defined on the "
            "state alone, not on the adjoint system): use another adaptive solver (e.g. 'tsit5') or "
            "adjoint='checkpoint'"
        )
    dtype = state.q.dtype if state.q.size else jnp.result_type(float)
    t0 = state.t
    t_final = jnp.asarray(t_final, dtype)
    if ts is None and not save_steps:
        ts = jnp.linspace(0.0, 1.0, n_outputs, dtype=dtype) * (t_final - t0) + t0
    options = dict(
        solver=solver,
        rtol=accuracy if rtol is None else rtol,
        atol=accuracy if atol is None else atol,
        dt=dt,
        save_steps=save_steps,
        max_steps=max_steps,
        project=project,
        progress=progress,
        throw=throw,
        adjoint=adjoint,
        max_step_size=max_step_size,
        constraint_tolerance=constraint_tolerance,
    )
    terminal = [e for e in events if e.handler is None]
    handled = [e for e in events if e.handler is not None]
    if not handled:
        return _solve(system, state, t_final, controls, ts, tuple(terminal), options)
    return _solve_with_handlers(
        system, state, t_final, controls, ts, tuple(terminal), tuple(handled), max_events, options
    )


def _solve_with_handlers(system, state, t_final, controls, ts, terminal, handled, max_events, options):
    """Segments between handled events: solve to the next event, apply its handler, go on."""
    if options["save_steps"]:
        raise ValueError("save_steps is not supported together with event handlers; give ts")
    pieces = []
    event_times = []
    for _ in range(max_events + 1):
        seg = _solve(system, state, t_final, controls, ts, terminal + handled, options)
        pieces.append(seg)
        fired = int(seg.event_index)
        if fired < len(terminal) or fired < 0:
            break
        state = seg.final_state
        event_times.append(float(state.t))
        state = handled[fired - len(terminal)].handler(system, state)
        if float(state.t) >= float(t_final):
            break
    else:
        raise RuntimeError(f"more than max_events={max_events} events fired before t_final")
    # merge: each output time comes from the segment that covers it
    t = np.asarray(ts)
    q, u, z = (np.full((len(t), getattr(pieces[0], f).shape[-1]), np.inf) for f in ("q", "u", "z"))
    done = np.zeros(len(t), bool)
    for seg in pieces:
        ok = np.isfinite(np.asarray(seg.t)) & ~done
        q[ok], u[ok], z[ok] = np.asarray(seg.q)[ok], np.asarray(seg.u)[ok], np.asarray(seg.z)[ok]
        done |= ok
    last = pieces[-1]
    t_out = np.where(done, t, np.inf)
    ev = np.full(max(1, len(event_times)), np.inf)
    ev[: len(event_times)] = event_times
    return Trajectory(
        t=jnp.asarray(t_out),
        q=jnp.asarray(q),
        u=jnp.asarray(u),
        z=jnp.asarray(z),
        d=state.d,
        system=system,
        controls=controls,
        result=last.result,
        num_steps=sum(int(p.num_steps) for p in pieces),
        event_times=jnp.asarray(ev),
        t_end=last.t_end,
        y_end=last.y_end,
    )


class _Segment(Trajectory):
    event_index: jax.Array = None


def _solve(system, state, t_final, controls, ts, events, options) -> _Segment:
    # the system and controls are attached outside the compiled solve: returning them
    # from it would copy every leaf and rebuild the model's pytree on each call
    return _Segment(
        **_solve_arrays(system, state, t_final, controls, ts, events, options),
        d=state.d,
        system=system,
        controls=controls,
    )


@jit
def _solve_arrays(system, state, t_final, controls, ts, events, options) -> dict:
    tree = system.topology.tree
    nq, nu = tree.nq, tree.nu
    cls, adaptive = SOLVERS[options["solver"]]
    if cls is SemiImplicitEuler:
        solver = SemiImplicitEuler(nq, nu, _kinematics)
    elif issubclass(cls, ExplicitRungeKutta):
        # the stage loop differentiable as the adjoint needs (Diffrax does this for its
        # own Runge-Kutta solvers)
        solver = cls(
            scan_kind={"direct": "bounded", "backsolve": "lax"}.get(options["adjoint"]), searched=_searched_field
        )
    else:
        solver = cls()
    if options["project"] and _has_constraints(system):
        tol = options["constraint_tolerance"]
        solver = Projected(solver, _projector(0.1 * min(options["rtol"], options["atol"]) if tol is None else tol))
    if cls is RungeKuttaMerson:
        controller = SimbodyController(min(options["rtol"], options["atol"]), nq, nu, ts, options["max_step_size"])
    elif adaptive:
        controller = diffrax.PIDController(rtol=options["rtol"], atol=options["atol"], dtmax=options["max_step_size"])
    else:
        controller = diffrax.ConstantStepSize()
    if ts is not None:  # a segment after a handled event starts inside the output times
        ts = jnp.clip(ts, state.t, t_final)
    saveat = diffrax.SaveAt(steps=True, t1=True) if options["save_steps"] else diffrax.SaveAt(ts=ts, t1=True)
    event = None
    if events:

        def make(e):
            def cond(t, y, args, **kwargs):
                sys_, _, d, _ = args.unpack()
                st = State(t=t, q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=d)
                return e.fn(sys_, st)

            return cond

        dirs = tuple({0: None, 1: True, -1: False}[e.direction] for e in events)
        event = diffrax.Event(
            tuple(make(e) for e in events) if len(events) > 1 else make(events[0]),
            root_finder=_root_finder(options),
            direction=dirs if len(events) > 1 else dirs[0],
        )
    y0 = state.y
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_vector_field),
        solver,
        t0=state.t,
        t1=t_final,
        dt0=options["dt"],
        y0=y0,
        args=_Packed.of(system, controls, state.d, Context(system, state).prepared()),
        saveat=saveat,
        stepsize_controller=controller,
        max_steps=options["max_steps"],
        adjoint=_adjoint(options["adjoint"]),
        event=event,
        throw=options["throw"],
        progress_meter=diffrax.TextProgressMeter() if options["progress"] else diffrax.NoProgressMeter(),
    )
    # The last saved sample is the end of the solve. With output times, Diffrax writes it
    # as an extra t1 sample right after them (before the inf padding when an event
    # stopped the solve early), taken out of the outputs here; saving every step, it is
    # the last step's own sample and stays.
    n_saved = jnp.sum(jnp.isfinite(sol.ts))
    t_end, y_end = sol.ts[n_saved - 1], sol.ys[n_saved - 1]
    extra = 0 if options["save_steps"] else 1
    n_out = sol.ts.shape[0] - extra
    keep = jnp.arange(n_out) < n_saved - extra
    t = jnp.where(keep, sol.ts[:n_out], jnp.inf)
    ys = jnp.where(keep[:, None], sol.ys[:n_out], jnp.inf)
    ev_index = jnp.asarray(-1)
    if events:
        mask = sol.event_mask
        masks = mask if isinstance(mask, tuple) else (mask,)
        ev_index = jnp.argmax(jnp.stack([jnp.asarray(m) for m in masks]))
        ev_index = jnp.where(jnp.any(jnp.stack([jnp.asarray(m) for m in masks])), ev_index, -1)
    result = jnp.asarray(sol.result._value if hasattr(sol.result, "_value") else 0)
    result, y_end = _finite_or_fail(result, ys, keep, y_end, options["throw"])
    return dict(
        t=t,
        q=ys[:, :nq],
        u=ys[:, nq : nq + nu],
        z=ys[:, nq + nu :],
        result=result,
        num_steps=sol.stats["num_steps"],
        event_times=jnp.full(1, jnp.inf),
        event_index=ev_index,
        t_end=t_end,
        y_end=y_end,
    )


def _finite_or_fail(result, ys, keep, y_end, throw: bool):
    """``(result, y_end)``: ``NONFINITE_STATE`` as the result where a saved or the final
    state holds a NaN or inf (a fixed-step solver goes on stepping through them), and
    with ``throw`` a runtime error saying so."""
    saved = jnp.where(keep[:, None], ys, 0.0)
    bad = ~(jnp.all(jnp.isfinite(saved)) & jnp.all(jnp.isfinite(y_end)))
    if throw:
        y_end = eqx.error_if(y_end, bad, _NONFINITE_MESSAGE)
    return jnp.where(bad, NONFINITE_STATE, result), y_end


def _root_finder(options):
    import optimistix as optx

    tol = min(options["rtol"], options["atol"]) * 1e-2
    return optx.Newton(rtol=tol, atol=tol)


def simulate_batch(
    system,
    states: State,
    t_final,
    controls=None,
    *,
    chunk_size: int | None = None,
    workers: int | None = None,
    properties: dict | None = None,
    devices=None,
    **kwargs,
):
    """``simulate`` over a batch of initial states (and controls, and model
    properties), in vmapped chunks solved side by side on the machine's cores, or
    sharded over its devices (``batching.map_batch``).

    **Arguments:** ``states``: a ``State`` with a leading batch axis; ``controls``:
    ``None``, or with the same leading axis; ``properties``: ``None``, or
    ``{"component path|property": values}`` (``"/forceset/TRIlong|max_isometric_force"``;
    ``"/bodyset/r_humerus|mass_center[1]"`` for an element of a vector property), each
    ``values`` an array with the same leading axis, in the property's units: world
    ``i`` is simulated with the property set to ``values[i]`` (the property leaves are
    batched, the model is not rebuilt); ``chunk_size``: worlds per vmapped solve
    (default: on a CPU the batch split evenly over the workers, in chunks of about
    2048 state variables, 16 to 512 worlds, whose buffers stay in cache; on an
    accelerator the whole batch, at most 8192; sharded: worlds per device and call,
    default the whole batch at once); ``workers``: chunks solved at once (default: on
    a CPU the cores this process may use, else 1); ``devices``: a list of devices or
    a ``jax.sharding.Mesh`` to shard the batch over (default: all local devices when
    there are several; ``batching.batch_mesh``); other keywords as ``simulate``
    (``throw=False`` to get each world's result code instead of an error).

    **Returns:** a ``Trajectory`` with a leading batch axis (its ``system`` is the
    unbatched ``system``).

    **Raises:** ``ValueError`` naming the key for a property that is not a numeric
    property of a component of the model (``property_target``).
    """
    dyn, static = eqx.partition(kwargs, eqx.is_array)
    targets = tuple(property_target(system, key) for key in (properties or {}))
    values = tuple(jnp.asarray(v) for v in (properties or {}).values())
    solve = jax.tree_util.Partial(_solve_chunk, system, t_final, dyn, static, targets)
    merged = map_chunks(
        solve,
        states,
        controls,
        values,
        chunk_size=chunk_size,
        workers=workers,
        cpu_chunk=_cpu_chunk(states),
        devices=devices,
    )
    return dataclasses.replace(merged, system=system, controls=controls)


@jit
def _solve_chunk(system, t_final, dyn, static, targets, states, controls, values):
    kwargs = eqx.combine(dyn, static)

    def run(st, ctrl, vals):
        # the model and controls are attached after the merge, not copied per world
        traj = simulate(with_properties(system, targets, vals), st, t_final, ctrl, **kwargs)
        return dataclasses.replace(traj, system=None, controls=None)

    return jax.vmap(run, in_axes=(0, None if controls is None else 0, 0))(states, controls, values)


def property_target(system, key: str) -> tuple[str, str, int | None]:
    """Parse and check a property key ``"component path|property"`` (or
    ``"path|property[i]"``, element ``i`` of a vector property): the one check of a
    model property named by path and name, shared by the batches, the sweeps and
    ``optimize.Parameter``.

    **Returns:** ``(path, property, element or None)``.

    **Raises:** ``ValueError`` naming the key and the path or property at fault: no
    ``|``, a path that names no component, a name that is not a numeric property of
    that component, a missing or out-of-range element of a vector property.
    """
    path, sep, name = str(key).rpartition("|")
    if not sep or not path or not name:
        raise ValueError(
            f"property {key!r}: expected 'component path|property', e.g. '/forceset/TRIlong|max_isometric_force'"
        )
    element = None
    if name.endswith("]") and "[" in name:
        name, _, index = name[:-1].partition("[")
        try:
            element = int(index)
        except ValueError:
            raise ValueError(f"property {key!r}: element {index!r} is not an integer") from None
    try:
        comp = system.find(path)
    except Exception as exc:  # (the model's own error says what is missing)
        raise ValueError(f"property {key!r}: {path!r} names no component of the model ({exc})") from None
    fields = comp.property_fields()
    if name not in fields:
        raise ValueError(
            f"property {key!r}: {type(comp).__name__} {path!r} has no numeric property {name!r}; "
            f"it has {sorted(fields)}"
        )
    shape = np.shape(getattr(comp, name))
    if shape == () and element is not None:
        raise ValueError(f"property {key!r}: {name!r} of {path!r} is a scalar; drop the [{element}]")
    if len(shape) == 1 and (element is None or not 0 <= element < shape[0]):
        raise ValueError(
            f"property {key!r}: {name!r} of {path!r} has {shape[0]} elements: choose element i in "
            f"0..{shape[0] - 1} ('{path}|{name}[i]')"
        )
    if len(shape) > 1:
        raise ValueError(
            f"property {key!r}: {name!r} of {path!r} has shape {shape}; only scalar and vector "
            "properties can be set this way"
        )
    return (path, name, element)


def with_properties(system, targets, values):
    """``system`` with properties set (traceable; no rebuild).

    **Arguments:** ``targets``: ``property_target`` results; ``values``: one value a
    target (a scalar, in the property's units).

    **Returns:** the changed ``System``.
    """
    dtype = jnp.result_type(float)
    for (path, name, element), value in zip(targets, values):  # (one a property, not a world)
        where = lambda s, path=path, name=name: getattr(s.find(path), name)
        leaf = jnp.asarray(where(system), dtype)
        new = jnp.asarray(value, dtype) if element is None else leaf.at[element].set(value)
        system = eqx.tree_at(where, system, new)
    return system


def _cpu_chunk(states: State) -> int:
    return cache_chunk(states.q.shape[-1] + states.u.shape[-1] + states.z.shape[-1])
