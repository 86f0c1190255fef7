"""ArtiSynth-style stepping: probes, controllers, monitors, adaptive steps and WayPoints.

(ArtiSynth reference manual §2.2–2.5.) A ``Simulation`` owns a system, its current
state and a list of *agents*; ``advance(t0, t1)`` runs, for each sub-step
``[ta, tb]`` no longer than ``max_step_size``:

    save state
    input probes (applied at tb)  ->  controllers(ta, tb)  ->  model advance(ta, tb)
    monitors(ta, tb)  ->  output probes (at their update times)

If the model's advance (the jitted integrator failing or hitting its step budget) or a
controller asks for a smaller step (a ``StepAdjustment`` with scaling ``s < 1``), the
state is restored and the step retried with ``(tb - ta) * s`` (``s = 0``: halve), down
to ``min_step_size``, below which it aborts with the reason. ``s >= 1`` is success
(recommended increases are treated as ``s = 1``, as in ArtiSynth).

WayPoints save the complete state (model state, agent states, model properties set by
probes) at given times; ``reset(t)`` returns to one. Agents with state implement
``get_state()`` / ``set_state(s)``.

The model advance is one jitted function of ``(system, state, ta, tb)``: it compiles
once and is reused by every step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..state import State
from ..system import System

__all__ = ["StepAdjustment", "Agent", "NumericInputProbe", "NumericOutputProbe", "Simulation", "StepError"]


class StepError(RuntimeError):
    """The step size fell below ``min_step_size``."""


@dataclasses.dataclass(frozen=True)
class StepAdjustment:
    """A recommendation about the step just attempted.

    ``scaling``: 0 (failed, no hint), 0 < s < 1 (failed, retry with s times the
    step), 1 (success), > 1 (success; an increase is suggested); ``message``: why.
    """

    scaling: float = 1.0
    message: str = ""


class Agent:
    """A probe, controller or monitor (ArtiSynth ModelAgent).

    **Fields:** ``active``; ``start_time`` / ``stop_time`` (the window in which it is
    applied); ``update_interval`` (output probes; ``None``: every step).
    Override ``apply(sim, t0, t1)``; agents with state override ``get_state`` and
    ``set_state``.
    """

    def __init__(
        self,
        start_time: float = 0.0,
        stop_time: float = np.inf,
        active: bool = True,
        update_interval: float | None = None,
    ):
        self.start_time = start_time
        self.stop_time = stop_time
        self.active = active
        self.update_interval = update_interval

    def apply(self, sim: Simulation, t0: float, t1: float) -> StepAdjustment | None:
        """Do the agent's work for the step ``[t0, t1]``."""
        return None

    def get_state(self) -> Any:
        """The agent's state (None if stateless)."""
        return None

    def set_state(self, state: Any) -> None:
        """Restore a state returned by ``get_state``."""

    def in_window(self, t: float) -> bool:
        """Whether ``t`` is inside the agent's time window."""
        return self.start_time - 1e-12 <= t <= self.stop_time + 1e-12


class NumericInputProbe(Agent):
    """Sets a model property from data over its time window (applied at step ends).

    **Arguments:** ``path``, ``prop``: the component property it drives; ``times``,
    ``values``: the data, linearly interpolated; ``start_time`` / ``stop_time``
    (default: the data's span).

    Resetting to a WayPoint before the window restores the property's earlier value
    (ArtiSynth §2.2.4): WayPoints save the model's properties with the state.
    """

    def __init__(self, path: str, prop: str, times, values, start_time=None, stop_time=None, active=True):
        times = np.asarray(times, float)
        super().__init__(
            times[0] if start_time is None else start_time, times[-1] if stop_time is None else stop_time, active
        )
        self.path, self.prop = path, prop
        self.times, self.values = times, np.asarray(values, float)

    def apply(self, sim, t0, t1):
        """Set the property to the table's value at ``t1`` (s), linearly interpolated.

        **Arguments:** ``sim``: the stepping simulation; ``t0``, ``t1``: the step's ends (s).

        **Returns:** ``None`` (the step is not cut short)."""
        sim.set_property(self.path, self.prop, np.interp(t1, self.times, self.values))
        return None


class NumericOutputProbe(Agent):
    """Records outputs at its update times (every ``update_interval``, else every step).

    ``data``: list of ``(t, {spec: value})``.
    """

    def __init__(self, specs, update_interval=None, start_time=0.0, stop_time=np.inf, active=True):
        super().__init__(start_time, stop_time, active, update_interval)
        self.specs = list(specs)
        self.data: list[tuple[float, dict]] = []

    def apply(self, sim, t0, t1):
        """Record the outputs at the end of the step.

        **Arguments:** ``sim``: the stepping simulation; ``t0``, ``t1``: the step's ends (s).

        **Returns:** ``None``; appends ``(t1, {spec: value})`` to ``data``."""
        from ..api import output

        self.data.append((t1, {s: np.asarray(output(sim.system, sim.state, s, sim.controls)) for s in self.specs}))
        return None

    def get_state(self):
        """The recorded samples, ``[(t, {spec: value}), ...]``, as a new list (for
        checkpointing the agent)."""
        return list(self.data)

    def set_state(self, state):
        """Restore the recorded samples from ``get_state``'s list."""
        self.data = list(state)


@jit
def _advance(system, state, ta, tb, controls, rtol, atol, max_steps, solver):
    from ..simulate import _solve

    options = dict(
        solver=solver,
        rtol=rtol,
        atol=atol,
        dt=None,
        save_steps=False,
        max_steps=max_steps,
        project=True,
        progress=False,
        throw=False,
        adjoint="checkpoint",
        max_step_size=None,
        constraint_tolerance=None,
    )
    seg = _solve(system, state.replace(t=ta), tb, controls, jnp.stack([tb]), (), options)
    new = State(t=tb, q=seg.q[-1], u=seg.u[-1], z=seg.z[-1], d=state.d)
    return new, seg.result


class Simulation:
    """Advance a system through time with agents (see the module docstring).

    **Arguments:** ``system``, ``state``; ``max_step_size`` (s, default 0.01);
    ``min_step_size`` (s); ``adaptive_stepping``; ``controls`` as for ``simulate``
    (``None``: the model's controllers); ``solver``, ``accuracy`` and
    ``max_steps`` of the model advance.
    """

    def __init__(
        self,
        system: System,
        state: State,
        *,
        max_step_size: float = 0.01,
        min_step_size: float = 1e-7,
        adaptive_stepping: bool = True,
        controls=None,
        solver: str = "rkm",
        accuracy: float = 1e-6,
        max_steps: int = 4096,
    ):
        self.system = system
        self.state = state
        self.max_step_size = max_step_size
        self.min_step_size = min_step_size
        self.adaptive_stepping = adaptive_stepping
        self.controls = controls
        self.solver, self.accuracy, self.max_steps = solver, accuracy, max_steps
        self.input_probes: list[Agent] = []
        self.controllers: list[Agent] = []
        self.monitors: list[Agent] = []
        self.output_probes: list[Agent] = []
        self.waypoints: dict[float, Any] = {}
        self._waypoint_times: list[float] = []
        self._effective_step = max_step_size
        self.steps_taken = 0
        self.steps_rejected = 0

    @property
    def time(self) -> float:
        """The current time."""
        return float(self.state.t)

    # -- agents -------------------------------------------------------------------------

    def add_input_probe(self, probe: Agent) -> None:
        """Add an input probe (applied at the end of each step, before controllers)."""
        self.input_probes.append(probe)

    def add_controller(self, controller: Agent) -> None:
        """Add a controller (applied before the model advance)."""
        self.controllers.append(controller)

    def add_monitor(self, monitor: Agent) -> None:
        """Add a monitor (applied after the model advance)."""
        self.monitors.append(monitor)

    def add_output_probe(self, probe: Agent) -> None:
        """Add an output probe (applied at its update times)."""
        self.output_probes.append(probe)

    def _agents(self):
        return self.input_probes + self.controllers + self.monitors + self.output_probes

    def set_property(self, path: str, prop: str, value) -> None:
        """Change a numeric property of the model (same topology: nothing recompiles)."""
        model = self.system.model.set(path, **{prop: np.asarray(value, float)})
        self.system = System(model, self.system.topology)

    # -- WayPoints --------------------------------------------------------------------------

    def add_waypoint(self, t: float) -> None:
        """Save the complete state when the simulation reaches time ``t``."""
        self._waypoint_times.append(float(t))
        if abs(t - self.time) < 1e-12:
            self._save_waypoint(t)

    def _snapshot(self):
        return (self.state, self.system, [a.get_state() for a in self._agents()])

    def _save_waypoint(self, t: float) -> None:
        self.waypoints[round(float(t), 12)] = self._snapshot()

    def reset(self, t: float) -> None:
        """Return to the WayPoint saved at time ``t`` (state, properties, agents).

        **Raises:** ``KeyError`` if no WayPoint was saved at ``t``.
        """
        key = round(float(t), 12)
        if key not in self.waypoints:
            raise KeyError(f"no WayPoint saved at t={t}; saved: {sorted(self.waypoints)}")
        state, system, agent_states = self.waypoints[key]
        self.state, self.system = state, system
        for a, s in zip(self._agents(), agent_states):
            a.set_state(s)

    # -- advancing -------------------------------------------------------------------------

    def _next_time(self, ta: float, t1: float) -> float:
        tb = min(t1, ta + self._effective_step)
        for w in self._waypoint_times:
            if ta + 1e-12 < w < tb:
                tb = w
        for p in self.output_probes:
            if p.active and p.update_interval:
                k = np.floor((ta - p.start_time) / p.update_interval + 1e-9) + 1
                nxt = p.start_time + k * p.update_interval
                if ta + 1e-12 < nxt < tb:
                    tb = nxt
        return tb

    def _apply(self, agents, ta, tb, at_end_only=False) -> StepAdjustment:
        """Apply the agents; return the most restrictive of their adjustments."""
        worst = StepAdjustment(1.0)
        for a in agents:
            if not a.active or not a.in_window(tb if at_end_only else ta):
                continue
            adj = a.apply(self, ta, tb)
            if adj is not None and adj.scaling < worst.scaling:
                worst = adj
        return worst

    def _model_advance(self, ta, tb) -> StepAdjustment:
        new, result = _advance(
            self.system,
            self.state,
            jnp.asarray(ta, self.state.t.dtype),
            jnp.asarray(tb, self.state.t.dtype),
            self.controls,
            self.accuracy,
            self.accuracy,
            self.max_steps,
            self.solver,
        )
        if int(result) != 0 or not bool(jnp.all(jnp.isfinite(new.y))):
            return StepAdjustment(0.0, f"integrator failed between t={ta} and t={tb} (result code {int(result)})")
        self.state = new
        return StepAdjustment(1.0)

    def advance(self, t0: float, t1: float) -> None:
        """Advance from ``t0`` (the current time) to ``t1`` (ArtiSynth's advance loop).

        **Raises:** ``StepError`` if adaptive stepping needs a step below
        ``min_step_size``.
        """
        if abs(t0 - self.time) > 1e-9:
            raise ValueError(f"advance from t0={t0}, but the simulation is at t={self.time}")
        ta = t0
        while ta < t1 - 1e-12:
            tb = self._next_time(ta, t1)
            saved = (self.state, self.system)
            while True:
                self._apply(self.input_probes, ta, tb, at_end_only=True)
                adj = self._apply(self.controllers, ta, tb)
                if adj.scaling >= 1:
                    adj = self._model_advance(ta, tb)
                s = adj.scaling
                if s >= 1:
                    break
                self.steps_rejected += 1
                if not self.adaptive_stepping:
                    raise StepError(f"step [{ta}, {tb}] failed and adaptive stepping is off: {adj.message}")
                new_dt = (tb - ta) * (s if 0 < s < 1 else 0.5)
                if new_dt < self.min_step_size:
                    raise StepError(
                        f"step size {new_dt:.3g} s at t={ta} fell below min_step_size "
                        f"{self.min_step_size:.3g} s: {adj.message or 'a step was rejected'}"
                    )
                self.state, self.system = saved
                self._effective_step = new_dt
                tb = ta + new_dt
            self.steps_taken += 1
            self._apply(self.monitors, ta, tb)
            for p in self.output_probes:
                if p.active and p.in_window(tb) and self._is_update_time(p, tb):
                    p.apply(self, ta, tb)
            ta = tb
            # grow the effective step back toward its nominal value after a success
            self._effective_step = min(self.max_step_size, self._effective_step * 2)
            for w in self._waypoint_times:
                if abs(w - ta) < 1e-12:
                    self._save_waypoint(w)

    def _is_update_time(self, probe: Agent, t: float) -> bool:
        if not probe.update_interval:
            return True
        k = (t - probe.start_time) / probe.update_interval
        return abs(k - round(k)) < 1e-9 or abs(t - probe.stop_time) < 1e-12

    def run_to(self, t1: float) -> None:
        """Advance from the current time to ``t1``."""
        self.advance(self.time, t1)
