"""Every model of OpenSim's collection against OpenSim 4.6, loading the same file.

``check_model(file)`` loads the file strictly in simjax, builds it and equilibrates
its muscles; draws random states (``_muscle_oracle.random_states``) and compares
``udot``, every state derivative ``zdot``, the muscles' tendon forces and path
lengths with OpenSim's at those states; then runs a short ``simulate``.
"""

from __future__ import annotations

import functools
import json
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import simjax as sj
from simjax.forward import Context
from simjax.io.osim import OsimWarning

from _muscle_oracle import assert_close, set_opensim_state, simjax_states

COLLECTION = os.path.join(os.path.dirname(__file__), "data", "collection")
N_STATES = 3
SIM_TIME = 0.1


def files() -> list[str]:
    """The collection's ``.osim`` files, sorted."""
    return sorted(f for f in os.listdir(COLLECTION) if f.endswith(".osim"))


def forget_opensim_defaults(path: str) -> None:
    """OpenSim registers a file's ``<defaults>`` as the process-wide default objects
    of their classes, so they would leak into every file read after it: register
    them afresh from the classes' constructors."""
    import opensim

    from simjax.io.osim._xml import parse

    with open(path, "rb") as fh:
        model_node = parse(fh.read()).find("Model")
    defaults = model_node.find("defaults") if model_node is not None else None
    for node in defaults.children if defaults is not None else ():
        if hasattr(opensim, node.tag):
            opensim.OpenSimObject.registerType(getattr(opensim, node.tag)())


def opensim_oracle(path: str):
    """OpenSim's model of the file ``path`` (a ``validate.Oracle``, initialized),
    its ``<defaults>`` forgotten once read."""
    from simjax.io.osim.validate import Oracle

    oracle = Oracle(path)
    forget_opensim_defaults(path)
    return oracle


def random_coordinates(oracle, system, n, rng):
    """Valid random coordinates and speeds (``validate.Oracle.sample``: in their
    ranges, locked and prescribed ones as they must be, assembled by OpenSim where
    the model has constraints) and controls in ``[0.02, 1]``: the keys ``t``,
    ``coords`` (names), ``q``, ``u``, ``actuators``, ``controls``."""
    samples = [oracle.sample(system, rng) for _ in range(n)]
    acts = oracle.model.getActuators()
    return {
        "t": np.array([t for t, _, _ in samples]),
        "coords": [c.getName() for c in oracle._coords],
        "q": np.stack([q for _, q, _ in samples]),
        "u": np.stack([u for _, _, u in samples]),
        "actuators": [acts.get(i).getName() for i in range(acts.getSize())],
        "controls": rng.uniform(0.02, 1.0, (n, acts.getSize())),
    }


def random_z(om, n, rng):
    """Random values of the state variables of ``om``'s forces and other components
    (not its coordinates): muscles' by ``_muscle_oracle.random_states``' rules,
    any other in [0, 1]."""
    names = [om.getStateVariableNames().get(i) for i in range(om.getNumStateVariables())]
    coords = om.getCoordinateSet()
    cvars = {
        f"{coords.get(i).getAbsolutePathString()}/{v}" for i in range(coords.getSize()) for v in ("value", "speed")
    }
    znames = [s for s in names if s not in cvars]
    muscles = om.getMuscles()
    z = np.empty((n, len(znames)))
    for j, zn in enumerate(znames):
        owner, var = zn.rsplit("/", 1)
        muscle = owner.split("/")[-1] if muscles.contains(owner.split("/")[-1]) else None
        if muscle is not None and var == "fiber_length":
            z[:, j] = muscles.get(muscle).getOptimalFiberLength() * rng.uniform(0.7, 1.3, n)
        elif muscle is not None and var in ("activation", "normalized_tendon_force"):
            z[:, j] = rng.uniform(0.05, 1.0, n)
        else:
            z[:, j] = rng.uniform(0.0, 1.0, n)
    return znames, z


def osim_at(om, st):
    """OpenSim's udot, zdot, tendon forces and path lengths at the states ``st``."""
    import opensim

    s = om.initSystem()
    cs = om.getCoordinateSet()
    muscles = om.getMuscles()
    mus = [muscles.get(i) for i in range(muscles.getSize())]
    out = {k: [] for k in ("udot", "zdot", "tendon_force", "length")}
    for i in range(len(st["q"])):
        set_opensim_state(om, s, st, i)
        om.realizeVelocity(s)
        om.setControls(s, opensim.Vector(st["controls"][i].tolist()))
        om.realizeAcceleration(s)
        out["udot"].append([cs.get(c).getAccelerationValue(s) for c in st["coords"]])
        out["zdot"].append([om.getStateVariableDerivativeValue(s, zn) for zn in st["znames"]])
        out["tendon_force"].append([m.getTendonForce(s) for m in mus])
        out["length"].append([m.getLength(s) for m in mus])
    return {k: np.asarray(v, float).reshape(len(st["q"]), -1) for k, v in out.items()}


def sj_at(system, st, muscle_paths):
    """simjax at the same states, and each state's equilibrium fiber states: one
    compiled, vmapped program (shared by models of the same structure)."""
    states, controls, ui, zi = simjax_states(system, st)
    base = system.default_state()
    n = len(st["q"])
    # and the default state last, for its equilibrium
    states = jax.tree.map(lambda a, b: jnp.concatenate([a, jnp.asarray(b, a.dtype)[None]]), states, base)
    controls = jnp.concatenate([controls, controls[:1]])
    out = _evaluate(system, states, controls, muscle_paths)
    out = {k: np.asarray(v).reshape(n + 1, -1) for k, v in out.items()}
    out["default_equilibrium"] = out.pop("z_equilibrium")[n]
    out = {k: v[:n] if k != "default_equilibrium" else v for k, v in out.items()}
    out["udot"], out["zdot"] = out["udot"][:, ui], out["zdot"][:, zi]
    out["q"], out["u"] = np.asarray(states.q), np.asarray(states.u)
    return out


@functools.partial(jax.jit, static_argnums=3)
def _evaluate(system, states, controls, muscle_paths):
    def one(state, c):
        ctx = Context(system, state, c)
        out = {"udot": ctx.acc.udot, "zdot": ctx.acc.zdot}
        for k in ("tendon_force", "length"):
            out[k] = ctx.group_outputs(muscle_paths, k) if muscle_paths else jnp.zeros(0)
        z = state.z  # equilibrate_muscles, on the same context (its path geometry is shared)
        for group in system.topology.role_groups("forces"):
            result = getattr(group.cls, "group_equilibrium", lambda g, c: None)(group, ctx)
            if result is not None:
                z = z.at[result[0]].set(result[1].astype(z.dtype))
        out["z_equilibrium"] = z
        return out

    return jax.vmap(one)(states, controls)


def wrapped(model, paths) -> np.ndarray:
    """Which of the muscles at ``paths`` have a wrap object on their path."""
    return np.array([bool(model.find(p).path.wraps) for p in paths], bool)


def worst(ref, got):
    """The largest difference relative to the largest value (``validate``'s measure),
    NaNs where both are NaN ignored."""
    ref, got = np.asarray(ref, float), np.asarray(got, float)
    if not ref.size or np.isnan(ref).all():
        return 0.0
    return float(np.nanmax(np.abs(got - ref)) / max(np.nanmax(np.abs(ref)), 1e-300))


def _record(file, system, muscles, errors) -> None:
    """With ``SIMJAX_COLLECTION_REPORT`` set, append this model's figures to that file
    (a JSON line each; ``docs/collection.md`` is made from them)."""
    out = os.environ.get("SIMJAX_COLLECTION_REPORT")
    if out:
        row = {
            "file": file,
            "coordinates": len(system.coordinate_names),
            "muscles": len(muscles),
            "states": len(system.z_names),
            **errors,
        }
        with open(out, "a") as fh:
            fh.write(json.dumps(row) + "\n")


def simulated(file: str) -> bool:
    """Whether ``check_model`` simulates ``file``: the first file of each of the
    collection's folders (``Folder__name.osim``); the other files of a folder are
    variants of its model (probes, springs, scalings), compared with OpenSim at random
    states but not simulated again, to keep the suite's time (each simulation compiles
    a program of its own)."""
    folder = file.split("__", 1)[0]
    return file == min(f for f in files() if f.split("__", 1)[0] == folder)


def check_model(file: str, seed: int = 0, simulate: bool = True) -> dict:
    """Load ``file`` strictly, compare it with OpenSim at random states, and (``simulate``)
    simulate it.

    **Returns:** the worst relative errors by quantity (``errors``) and the
    simulation's result code and final coordinates (``result``, ``q_end``; ``None``
    where OpenSim's accelerations are undefined, NaN, at every state: a model of
    massless bodies; or where not simulated).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model = sj.load_osim(os.path.join(COLLECTION, file))  # strict
    system = model.build()
    oracle = opensim_oracle(os.path.join(COLLECTION, file))
    om = oracle.model
    rng = np.random.default_rng(seed)
    st = random_coordinates(oracle, system, N_STATES, rng)
    st["znames"], st["z"] = random_z(om, N_STATES, rng)
    muscles = om.getMuscles()
    paths = tuple(muscles.get(i).getAbsolutePathString() for i in range(muscles.getSize()))
    ref = osim_at(om, st)
    got = sj_at(system, st, paths)
    scale = lambda a: max(1.0, float(np.abs(a).max())) if a.size else 1.0  # noqa: E731
    assert_close("udot", ref["udot"], got["udot"], rtol=1e-6, atol=1e-6 * scale(ref["udot"]))
    assert_close("zdot", ref["zdot"], got["zdot"], rtol=1e-6, atol=1e-8 * scale(ref["zdot"]))
    assert_close(
        "tendon_force", ref["tendon_force"], got["tendon_force"], rtol=1e-6, atol=1e-9 * scale(ref["tendon_force"])
    )
    wraps = wrapped(model, paths)
    assert_close("length (no wrap objects)", ref["length"][:, ~wraps], got["length"][:, ~wraps], rtol=0, atol=1e-9)
    assert_close("length (through wrap objects)", ref["length"][:, wraps], got["length"][:, wraps], rtol=0, atol=1e-7)
    errors = {k: worst(ref[k], got[k]) for k in ("udot", "zdot", "tendon_force")}
    errors["length"] = float(np.abs(ref["length"] - got["length"]).max()) if paths else 0.0
    _record(file, system, paths, errors)
    if not simulate or np.isnan(ref["udot"]).all():
        # OpenSim's dynamics are undefined too (a kinematic model: its bodies have no
        # mass, as the wrist model's): there is nothing to simulate
        return {"result": None, "q_end": None, "errors": errors}
    # the default state, its muscles equilibrated, simulated for SIM_TIME
    state = system.default_state()
    state = state.replace(z=jnp.asarray(got["default_equilibrium"], state.z.dtype))
    traj = sj.simulate(system, state, SIM_TIME, n_outputs=2, throw=False)
    return {"result": int(traj.result), "q_end": np.asarray(traj.q[-1]), "errors": errors}
