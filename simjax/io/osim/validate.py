"""Compare simjax with OpenSim 4.6 on the same ``.osim`` file at random valid states.

``validate(path)`` loads the file in both engines, draws random states (coordinate
values within their ranges, random speeds; models with constraints, locked or
prescribed coordinates are assembled by OpenSim), copies each state into simjax by
coordinate name, and evaluates every applicable *check*: a named quantity computed
by both engines. Content simjax skipped on loading (``strict=False``) is switched
off in OpenSim too (forces stop applying, constraints stop being enforced), so the
comparison is of the same physics.

Checks are a registry, extended as simjax models more: ``register_check(Check(
"muscle forces", simjax=..., opensim=..., applies=...))``. Today: ``mass matrix``,
``accelerations``, for models with muscles ``path lengths``, ``lengthening
speeds``, ``tendon forces`` and ``moment arms``, and for models with auxiliary
states (activations, fiber lengths, ...) their ``state derivatives`` (those states
at their defaults in both engines).

Needs the ``opensim`` Python package (imported on first use).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...state import State
from .errors import OsimWarning
from .reader import read_osim

__all__ = ["Check", "CheckResult", "Oracle", "CHECKS", "register_check", "validate", "format_results"]


@dataclasses.dataclass(frozen=True)
class Check:
    """A quantity both engines compute.

    **Fields:**

    - ``name``: shown in reports (``"mass matrix"``).
    - ``simjax``: ``fn(system, states, oracle) -> array (n_states, ...)``, with
      ``states`` a batched ``State``; quantities indexed by coordinate use
      ``oracle.coordinates`` order (``oracle.u_index(system)`` maps them).
    - ``opensim``: ``fn(oracle) -> array (...)`` at the oracle's current state.
    - ``rtol``: the tolerance on the relative error (``max |a - b| / max |b|``).
    - ``applies``: ``fn(system, oracle) -> bool`` (default: always).
    """

    name: str
    simjax: Callable[..., Any]
    opensim: Callable[..., Any]
    rtol: float = 1e-10
    applies: Callable[..., bool] = lambda system, oracle: True


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Outcome of one check over all states: worst absolute and relative errors."""

    name: str
    n_states: int
    max_abs: float
    max_rel: float
    rtol: float

    @property
    def passed(self) -> bool:
        """Whether the worst relative error is within ``rtol``."""
        return bool(self.max_rel <= self.rtol)


#: the registered checks, in report order
CHECKS: dict[str, Check] = {}


def register_check(check: Check) -> Check:
    """Add (or replace) a check by name. **Returns:** the check."""
    CHECKS[check.name] = check
    return check


class Oracle:
    """OpenSim's model of the same file, and the map between the two engines' states.

    **Arguments:** ``path``: the ``.osim`` file; ``disabled``: component paths to
    switch off (forces: ``appliesForce`` false; constraints: not enforced;
    controllers: disabled).

    **Attributes:** ``model``, ``state`` (OpenSim objects), ``coordinates`` (paths in
    OpenSim's coordinate-set order), ``osim`` (the module).
    """

    def __init__(self, path: str, disabled=()):
        import opensim

        self.osim = opensim
        self.model = opensim.Model(str(path))
        self.disabled = []
        for p in disabled:
            try:
                comp = self.model.updComponent(p)
            except Exception:  # not a component OpenSim knows by that path (e.g. a wrap object)
                continue
            force = opensim.Force.safeDownCast(comp)
            if force is not None:
                force.set_appliesForce(False)
                self.disabled.append(p)
                continue
            con = opensim.Constraint.safeDownCast(comp)
            if con is not None:
                con.set_isEnforced(False)
                self.disabled.append(p)
                continue
            ctrl = opensim.Controller.safeDownCast(comp)
            if ctrl is not None:
                ctrl.set_enabled(False)
                self.disabled.append(p)
        self.state = self.model.initSystem()
        cs = self.model.getCoordinateSet()
        self._coords = [cs.get(i) for i in range(cs.getSize())]
        self.coordinates = [c.getAbsolutePathString() for c in self._coords]
        self._uidx = self._speed_indices()
        self.needs_assembly = self.model.getConstraintSet().getSize() > 0 or any(
            c.get_locked() or c.get_prescribed() for c in self._coords
        )

    def _speed_indices(self) -> np.ndarray:
        s = self.state
        out = []
        for c in self._coords:
            s.updU().setToZero()
            c.setSpeedValue(s, 1.0)
            u = np.array([s.getU().get(i) for i in range(s.getNU())])
            out.append(int(np.argmax(u)))
        s.updU().setToZero()
        return np.asarray(out)

    def set(self, t: float, q, u) -> None:
        """Set time, coordinate values and speeds (``coordinates`` order), no projection."""
        s = self.state
        s.setTime(float(t))
        for c, qi, ui in zip(self._coords, q, u):
            c.setValue(s, float(qi), False)
            c.setSpeedValue(s, float(ui))

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """Coordinate values and speeds of the current state."""
        s = self.state
        return (np.array([c.getValue(s) for c in self._coords]), np.array([c.getSpeedValue(s) for c in self._coords]))

    def mass_matrix(self) -> np.ndarray:
        """OpenSim's mass matrix in ``coordinates`` order."""
        M = self.osim.Matrix()
        self.model.realizePosition(self.state)
        self.model.getMatterSubsystem().calcM(self.state, M)
        full = np.array([[M.get(i, j) for j in range(M.ncol())] for i in range(M.nrow())])
        return full[np.ix_(self._uidx, self._uidx)]

    def accelerations(self) -> np.ndarray:
        """Coordinate accelerations (``realizeAcceleration``) in ``coordinates`` order."""
        self.model.realizeAcceleration(self.state)
        return np.array([c.getAccelerationValue(self.state) for c in self._coords])

    def sample(self, system, rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray]:
        """A random valid state: ``(t, q, u)`` in ``coordinates`` order.

        Values are uniform within each coordinate's range (clipped to ±pi rad or
        ±1 m), speeds uniform in [-1, 1]; locked coordinates keep their default value
        and zero speed, prescribed ones follow their function; OpenSim then assembles
        models with constraints.
        """
        t = float(rng.uniform(0.0, 1.0))
        q = np.empty(len(self._coords))
        u = rng.uniform(-1.0, 1.0, len(self._coords))
        for i, (c, p) in enumerate(zip(self._coords, self.coordinates)):
            lim = math.pi if c.getMotionType() == 1 else 1.0  # 1: Coordinate::Rotational
            lo, hi = max(c.getRangeMin(), -lim), min(c.getRangeMax(), lim)
            q[i] = rng.uniform(lo, hi) if lo < hi else c.getRangeMin()
            comp = system.model.find(p)
            if comp.locked:
                q[i], u[i] = float(comp.default_value), 0.0
            elif comp.prescribed and comp.prescribed_function is not None:
                f = comp.prescribed_function
                q[i], u[i] = float(f(t)), float(f.derivative(t, 1))
        self.set(t, q, u)
        if self.needs_assembly:
            self.model.assemble(self.state)
            self._project_speeds()
        q, u = self.values()
        return t, q, u

    def _project_speeds(self) -> None:
        """Make the speeds satisfy the velocity constraints (least change in u).

        Constraint accelerations of the two engines agree only at valid states: with
        inconsistent speeds the acceleration equations depend on how each engine
        writes its velocity errors.
        """
        s, matter, osim = self.state, self.model.getMatterSubsystem(), self.osim
        for _ in range(3):
            self.model.realizeVelocity(s)
            uerr = np.array([s.getUErr().get(i) for i in range(s.getNUErr())])
            if uerr.size == 0 or np.abs(uerr).max() < 1e-13:
                return
            G = osim.Matrix()
            matter.calcG(s, G)
            Gm = np.array([[G.get(i, j) for j in range(G.ncol())] for i in range(G.nrow())])
            u = np.array([s.getU().get(i) for i in range(s.getNU())])
            u = u - np.linalg.pinv(Gm) @ uerr
            v = osim.Vector(len(u), 0.0)
            for i, x in enumerate(u):
                v.set(i, float(x))
            s.setU(v)

    def u_index(self, system) -> np.ndarray:
        """simjax ``u`` index of each coordinate, in ``coordinates`` order."""
        coords = system.topology.tree.coordinates
        return np.asarray([coords[p].u for p in self.coordinates])


def _states(system, oracle: Oracle, samples) -> State:
    tree = system.topology.tree
    info = [tree.coordinates[p] for p in oracle.coordinates]
    if any(i.q < 0 for i in info):
        raise ValueError("validation needs angle coordinates for Ball and Free joints (use_quaternions=False)")
    qi = np.asarray([i.q for i in info])
    ui = np.asarray([i.u for i in info])
    base = system.default_state()
    n = len(samples)
    t = jnp.asarray([s[0] for s in samples])
    q = jnp.broadcast_to(base.q, (n, tree.nq)).at[:, qi].set(np.stack([s[1] for s in samples]))
    u = jnp.broadcast_to(base.u, (n, tree.nu)).at[:, ui].set(np.stack([s[2] for s in samples]))
    return State(
        t=t, q=q, u=u, z=jnp.broadcast_to(base.z, (n,) + base.z.shape), d=jnp.broadcast_to(base.d, (n,) + base.d.shape)
    )


@jax.jit
def _batched_mass_matrix(system, states):
    from ...api import mass_matrix

    return jax.vmap(mass_matrix, in_axes=(None, 0))(system, states)


@functools.partial(jax.jit, static_argnames=("paths", "coordinates"))
def _batched_evaluation(system, states, paths, coordinates):
    from ...analysis.moment_arms import moment_arms
    from ...forward import Context

    def one(st):
        ctx = Context(system, st)  # (one pass of the stages for every quantity)
        out = {"udot": ctx.acc.udot, "zdot": ctx.acc.zdot}
        if paths:
            for name in _MUSCLE_OUTPUTS:
                out[name] = ctx.group_outputs(paths, name)
            out["moment_arms"] = moment_arms(system, st, paths, coordinates, searches=ctx.searches())
        return out

    return jax.vmap(one)(states)


def _evaluation(system, states, oracle) -> dict:
    """The state-dependent quantities of the checks below, computed in one program
    (each would otherwise compile the model's forces, muscles and wrapping again),
    once per batch of states (kept on the oracle)."""
    key = (id(system), id(states))
    if getattr(oracle, "_evaluated", (None,))[0] != key:
        paths = tuple(m.getAbsolutePathString() for m in _osim_muscles(oracle))
        out = _batched_evaluation(system, states, paths, tuple(oracle.coordinates))
        oracle._evaluated = (key, {k: np.asarray(v) for k, v in out.items()})
    return oracle._evaluated[1]


def _sj_mass_matrix(system, states, oracle):
    idx = oracle.u_index(system)
    return np.asarray(_batched_mass_matrix(system, states))[:, idx][:, :, idx]


def _sj_accelerations(system, states, oracle):
    return _evaluation(system, states, oracle)["udot"][:, oracle.u_index(system)]


register_check(Check("mass matrix", _sj_mass_matrix, Oracle.mass_matrix))
register_check(Check("accelerations", _sj_accelerations, Oracle.accelerations))


# -- muscles --------------------------------------------------------------------------------


def _osim_muscles(oracle):
    muscles = oracle.model.getMuscles()
    return [muscles.get(i) for i in range(muscles.getSize())]


def _has_muscles(system, oracle) -> bool:
    return len(_osim_muscles(oracle)) > 0


#: the muscle outputs checked (``_muscle_check``), all computed by ``_evaluation``
_MUSCLE_OUTPUTS = ("length", "lengthening_speed", "tendon_force")


def _muscle_check(name, getter, rtol):
    def mine(system, states, oracle):
        return _evaluation(system, states, oracle)[name]

    def theirs(oracle):
        oracle.model.realizeDynamics(oracle.state)
        return np.array([getattr(m, getter)(oracle.state) for m in _osim_muscles(oracle)])

    return Check(
        name.replace("_", " ") + "s" if name != "length" else "path lengths",
        mine,
        theirs,
        rtol=rtol,
        applies=_has_muscles,
    )


def _sj_moment_arms(system, states, oracle):
    return _evaluation(system, states, oracle)["moment_arms"]


def _osim_moment_arms(oracle):
    oracle.model.realizePosition(oracle.state)
    return np.array([[m.computeMomentArm(oracle.state, c) for c in oracle._coords] for m in _osim_muscles(oracle)])


register_check(_muscle_check("length", "getLength", 1e-9))
register_check(_muscle_check("lengthening_speed", "getLengtheningSpeed", 1e-9))
register_check(_muscle_check("tendon_force", "getTendonForce", 1e-6))
register_check(Check("moment arms", _sj_moment_arms, _osim_moment_arms, rtol=1e-8, applies=_has_muscles))


# -- auxiliary states (activations, fiber lengths, ...) ----------------------------------------


def _osim_z_names(oracle, system) -> list[str]:
    """OpenSim's state variables that are not coordinates' and that simjax has too."""
    m = oracle.model
    cvars = {f"{p}/{v}" for p in oracle.coordinates for v in ("value", "speed")}
    names = [m.getStateVariableNames().get(i) for i in range(m.getNumStateVariables())]
    return [n for n in names if n not in cvars and n in system.z_names]


def _sj_zdot(system, states, oracle):
    index = np.asarray([system.z_names.index(n) for n in _osim_z_names(oracle, system)], np.int64)
    return _evaluation(system, states, oracle)["zdot"][:, index]


def _osim_zdot(oracle):
    oracle.model.realizeAcceleration(oracle.state)
    return np.array([oracle.model.getStateVariableDerivativeValue(oracle.state, n) for n in oracle.z_names])


def _has_z(system, oracle) -> bool:
    oracle.z_names = _osim_z_names(oracle, system)
    return bool(oracle.z_names)


register_check(Check("state derivatives", _sj_zdot, _osim_zdot, rtol=1e-6, applies=_has_z))


def validate(path, n_states: int = 50, seed: int = 0, checks=None) -> list[CheckResult]:
    """Compare simjax with OpenSim on ``path`` at ``n_states`` random valid states.

    **Arguments:**

    - ``path``: the ``.osim`` file.
    - ``n_states``: number of random states; ``seed``: their seed.
    - ``checks``: names of the checks to run (default: every applicable one).

    simjax reads the file with ``strict=False``; what it skips is disabled in OpenSim.

    **Returns:** a ``CheckResult`` per check, in ``CHECKS`` order.
    """
    if not jax.config.jax_enable_x64:
        raise ValueError(
            "validate compares the engines in float64: call jax.config.update('jax_enable_x64', True) first"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model, report = read_osim(path, strict=False)
    skipped = list(report.skipped)
    system = model.build()
    oracle = Oracle(path, disabled=skipped)
    rng = np.random.default_rng(seed)
    samples = [oracle.sample(system, rng) for _ in range(n_states)]
    states = _states(system, oracle, samples)
    results = []
    for name, check in CHECKS.items():
        if checks is not None and name not in checks:
            continue
        if not check.applies(system, oracle):
            continue
        mine = np.asarray(check.simjax(system, states, oracle), float)
        theirs = []
        for t, q, u in samples:
            oracle.set(t, q, u)
            theirs.append(np.asarray(check.opensim(oracle), float))
        theirs = np.stack(theirs)
        # NaN where both engines give NaN (undefined dynamics, e.g. massless bodies) agrees
        both = np.isnan(mine) & np.isnan(theirs)
        mine, theirs = np.where(both, 0.0, mine), np.where(both, 0.0, theirs)
        diff = np.abs(mine - theirs).reshape(n_states, -1).max(axis=1, initial=0.0)
        scale = np.abs(theirs).reshape(n_states, -1).max(axis=1, initial=0.0)
        rel = diff / np.maximum(scale, 1e-300)
        results.append(
            CheckResult(name, n_states, float(diff.max(initial=0.0)), float(rel.max(initial=0.0)), check.rtol)
        )
    return results


def format_results(results: list[CheckResult]) -> str:
    """A plain-text table of the worst errors per quantity."""
    head = f"{'quantity':<24} {'states':>6} {'max abs err':>12} {'max rel err':>12} {'tolerance':>10}  result"
    rows = [head, "-" * len(head)]
    for r in results:
        rows.append(
            f"{r.name:<24} {r.n_states:>6} {r.max_abs:>12.3e} {r.max_rel:>12.3e} {r.rtol:>10.1e}  "
            f"{'ok' if r.passed else 'FAIL'}"
        )
    return "\n".join(rows)
