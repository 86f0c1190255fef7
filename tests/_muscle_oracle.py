"""Helpers comparing simjax muscles and paths with OpenSim 4.6 (the oracle).

- ``osim_arm`` / ``sj_arm`` build the same two-link arm in both engines (shoulder
  and elbow pins, gravity), each muscle's path running from Ground over the humerus
  to the radius;
- ``random_states`` draws random valid states of an OpenSim model (coordinates in
  their ranges, speeds, activations, fiber lengths or normalized tendon forces,
  excitations);
- ``set_opensim_state`` sets an OpenSim state to one of them;
- ``osim_eval`` / ``sj_eval`` evaluate both engines at those states (simjax
  vmapped, one compilation) and return the compared quantities by name;
- ``assert_close`` compares with a message naming the worst entry.

States are set by OpenSim state-variable *names*, so neither engine's internal
ordering matters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import simjax as sj
from simjax.forward import Context

HUMERUS = dict(mass=1.2, com=(0.0, -0.15, 0.01), inertia=(0.02, 0.004, 0.021, 0.0005, -0.0003, 0.0002))
RADIUS = dict(mass=0.9, com=(0.005, -0.12, 0.0), inertia=(0.012, 0.002, 0.013, 0.0, 0.0004, -0.0001))
ELBOW = (0.0, -0.3, 0.0)
RANGES = {"shoulder_coord_0": (-1.0, 1.0), "elbow_coord_0": (0.0, 2.0)}


def arm_points(i: int):
    """Path points of the ``i``-th muscle of the arm: (name, body, location)."""
    d = 0.004 * i
    return (
        ("origin", "ground", (0.02 + d, 0.06, 0.01 - d)),
        ("via", "humerus", (0.035, -0.12 - d, 0.015)),
        ("insertion", "radius", (0.025 + d, -0.06, 0.005)),
    )


def osim_arm(muscles):
    """The arm in OpenSim with ``muscles`` (OpenSim PathActuators without points)."""
    import opensim as osim

    m = osim.Model()
    m.setName("arm")
    h = osim.Body("humerus", HUMERUS["mass"], osim.Vec3(*HUMERUS["com"]), osim.Inertia(*HUMERUS["inertia"]))
    r = osim.Body("radius", RADIUS["mass"], osim.Vec3(*RADIUS["com"]), osim.Inertia(*RADIUS["inertia"]))
    m.addBody(h)
    m.addBody(r)
    sh = osim.PinJoint("shoulder", m.getGround(), osim.Vec3(0), osim.Vec3(0), h, osim.Vec3(0), osim.Vec3(0))
    el = osim.PinJoint("elbow", h, osim.Vec3(*ELBOW), osim.Vec3(0), r, osim.Vec3(0), osim.Vec3(0))
    m.addJoint(sh)
    m.addJoint(el)
    for joint in (sh, el):
        c = joint.upd_coordinates(0)
        c.setRangeMin(RANGES[c.getName()][0])
        c.setRangeMax(RANGES[c.getName()][1])
    frames = {"ground": m.getGround(), "humerus": h, "radius": r}
    for i, mus in enumerate(muscles):
        for name, frame, loc in arm_points(i):
            mus.addNewPathPoint(name, frames[frame], osim.Vec3(*loc))
        m.addForce(mus)
    m.finalizeConnections()
    m.initSystem()
    return m


def sj_arm(muscles):
    """The same arm in simjax with ``muscles`` (simjax PathActuators without points)."""
    model = sj.Model("arm")
    model = model.add(sj.Body("humerus", HUMERUS["mass"], HUMERUS["com"], HUMERUS["inertia"]))
    model = model.add(sj.Body("radius", RADIUS["mass"], RADIUS["com"], RADIUS["inertia"]))
    model = model.add(sj.PinJoint("shoulder", "/ground", "/bodyset/humerus"))
    model = model.add(sj.PinJoint("elbow", "/bodyset/humerus", "/bodyset/radius", location_in_parent=ELBOW))
    for c, rng in RANGES.items():
        joint = c.split("_")[0]
        model = model.set(f"/jointset/{joint}/{c}", range=rng)
    frames = {"ground": "/ground", "humerus": "/bodyset/humerus", "radius": "/bodyset/radius"}
    for i, mus in enumerate(muscles):
        for name, frame, loc in arm_points(i):
            mus = mus.add_new_path_point(name, frames[frame], loc)
        model = model.add(mus)
    return model


def random_states(osim_model, n, rng, speed=2.0, samplers=None):
    """Random valid states of an OpenSim model.

    Coordinates are uniform in their ranges, speeds in ``[-speed, speed]``,
    excitations in ``[0.02, 1]``; state variables by the suffix of their name:
    ``activation`` in ``[0.02, 1]``, ``fiber_length`` in ``[0.7, 1.3]`` optimal fiber
    lengths, ``normalized_tendon_force`` in ``[0.05, 1]`` (``samplers``:
    ``{suffix: fn(muscle, n, rng)}`` overrides).

    **Returns:** a dict: ``coords``, ``q``, ``u`` (``(n, n_coords)``), ``znames``,
    ``z``, ``actuators``, ``controls`` (add ``dnames`` and ``d`` for discrete
        variables).
    """
    cs = osim_model.getCoordinateSet()
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    lo = np.array([cs.get(i).getRangeMin() for i in range(cs.getSize())])
    hi = np.array([cs.get(i).getRangeMax() for i in range(cs.getSize())])
    default = {
        "activation": lambda mus, k, r: r.uniform(0.02, 1.0, k),
        "fiber_length": lambda mus, k, r: mus.getOptimalFiberLength() * r.uniform(0.7, 1.3, k),
        "normalized_tendon_force": lambda mus, k, r: r.uniform(0.05, 1.0, k),
    }
    default.update(samplers or {})
    all_names = [osim_model.getStateVariableNames().get(i) for i in range(osim_model.getNumStateVariables())]
    znames = [s for s in all_names if s.startswith("/forceset/")]
    muscles = osim_model.getMuscles()
    z = np.zeros((n, len(znames)))
    for j, zn in enumerate(znames):
        z[:, j] = default[zn.rsplit("/", 1)[1]](muscles.get(zn.split("/")[2]), n, rng)
    acts = osim_model.getActuators()
    return {
        "coords": names,
        "q": lo + (hi - lo) * rng.uniform(size=(n, len(names))),
        "u": rng.uniform(-speed, speed, (n, len(names))),
        "znames": znames,
        "z": z,
        "actuators": [acts.get(i).getName() for i in range(acts.getSize())],
        "controls": rng.uniform(0.02, 1.0, (n, acts.getSize())),
    }


MUSCLE_OUTPUTS = (
    "length",
    "lengthening_speed",
    "tendon_force",
    "fiber_force",
    "fiber_velocity",
    "normalized_fiber_velocity",
    "activation",
)
_OSIM_GETTERS = {
    "length": "getLength",
    "lengthening_speed": "getLengtheningSpeed",
    "tendon_force": "getTendonForce",
    "fiber_force": "getFiberForce",
    "fiber_velocity": "getFiberVelocity",
    "normalized_fiber_velocity": "getNormalizedFiberVelocity",
    "activation": "getActivation",
}


def set_opensim_state(model, s, st, i) -> None:
    """Set the OpenSim state ``s`` of ``model`` to the ``i``-th state of ``st`` (from
    ``random_states``): its time if ``st`` has ``t``, coordinate values (unprojected)
    and speeds, state variables by name and discrete variables (``dnames``, ``d``)."""
    if "t" in st:
        s.setTime(float(st["t"][i]))
    cs = model.getCoordinateSet()
    for j, c in enumerate(st["coords"]):
        cs.get(c).setValue(s, float(st["q"][i, j]), False)
        cs.get(c).setSpeedValue(s, float(st["u"][i, j]))
    for j, zn in enumerate(st["znames"]):
        model.setStateVariableValue(s, zn, float(st["z"][i, j]))
    for j, dn in enumerate(st.get("dnames", ())):
        owner, var = dn.rsplit("/", 1)
        model.getComponent(owner).setDiscreteVariableValue(s, var, float(st["d"][i, j]))


def osim_eval(m, st, arm_coords=()):
    """OpenSim at each state of ``st`` (from ``random_states``).

    **Returns:** ``udot (n, n_coords)``, ``zdot (n, nz)``, each of
    ``MUSCLE_OUTPUTS`` ``(n, n_muscles)`` and ``moment_arm (n, n_muscles,
    len(arm_coords))``.
    """
    import opensim as osim

    s = m.initSystem()
    cs = m.getCoordinateSet()
    muscles = m.getMuscles()
    mus = [muscles.get(i) for i in range(muscles.getSize())]
    out = {k: [] for k in ("udot", "zdot", "moment_arm") + MUSCLE_OUTPUTS}
    for i in range(len(st["q"])):
        set_opensim_state(m, s, st, i)
        m.realizeVelocity(s)
        m.setControls(s, osim.Vector(st["controls"][i].tolist()))
        m.realizeAcceleration(s)
        out["udot"].append([cs.get(c).getAccelerationValue(s) for c in st["coords"]])
        out["zdot"].append([m.getStateVariableDerivativeValue(s, zn) for zn in st["znames"]])
        for k in MUSCLE_OUTPUTS:
            out[k].append([getattr(mu, _OSIM_GETTERS[k])(s) for mu in mus])
        out["moment_arm"].append([[mu.computeMomentArm(s, cs.get(c)) for c in arm_coords] for mu in mus])
    return {k: np.asarray(v) for k, v in out.items()}


def simjax_states(system, st):
    """The states of ``st`` (from ``random_states``) as a batched simjax ``State`` and
    controls, by OpenSim name (time from ``t`` where ``st`` has it, else 0).

    **Returns:** ``(states, controls, ui, zi)``: ``ui``/``zi`` are the simjax ``u`` and
    ``z`` indices of ``st``'s coordinates and state variables.
    """
    tree = system.topology.tree
    cpaths = [system.coordinate_path(c) for c in st["coords"]]
    qi = np.asarray([tree.coordinates[p].q for p in cpaths], np.int64)
    ui = np.asarray([tree.coordinates[p].u for p in cpaths], np.int64)
    zi = np.asarray([system.z_names.index(zn) for zn in st["znames"]], np.int64)
    ci = np.asarray([system.actuator_names.index(a) for a in st["actuators"]], np.int64)
    base = system.default_state()
    n = len(st["q"])
    states = sj.State(
        t=jnp.asarray(st["t"]) if "t" in st else jnp.zeros(n),
        q=jnp.broadcast_to(base.q, (n, tree.nq)).at[:, qi].set(st["q"]),
        u=jnp.broadcast_to(base.u, (n, tree.nu)).at[:, ui].set(st["u"]),
        z=jnp.broadcast_to(base.z, (n, len(system.z_names))).at[:, zi].set(st["z"]),
        d=jnp.broadcast_to(base.d, (n,) + base.d.shape),
    )
    if st.get("dnames"):
        di = np.asarray([system.d_names.index(dn) for dn in st["dnames"]], np.int64)
        states = states.replace(d=states.d.at[:, di].set(st["d"]))
    controls = jnp.zeros((n, len(system.actuator_names))).at[:, ci].set(st["controls"])
    return states, controls, ui, zi


def sj_eval(system, st, muscle_paths, arm_coords=()):
    """simjax at the same states (vmapped, one compilation): the dict of
    ``osim_eval``."""
    states, controls, ui, zi = simjax_states(system, st)
    arm_coords = tuple(system.coordinate_path(c) for c in arm_coords)
    muscle_paths = tuple(muscle_paths)

    @jax.jit
    def one(state, c):
        ctx = Context(system, state, c)
        acc = ctx.acc
        out = {"udot": acc.udot[ui], "zdot": acc.zdot[zi]}
        for k in MUSCLE_OUTPUTS:
            out[k] = ctx.group_outputs(muscle_paths, k)
        out["moment_arm"] = (
            sj.moment_arms(system, state, muscle_paths, arm_coords, searches=ctx.searches())
            if arm_coords
            else jnp.zeros((len(muscle_paths), 0))
        )
        return out

    return {k: np.asarray(v) for k, v in jax.vmap(one)(states, controls).items()}


def assert_close(name, ref, got, rtol, atol):
    """``|got - ref| <= rtol |ref| + atol`` everywhere (NaNs must match), with a
    message naming the worst entry."""
    ref, got = np.asarray(ref, float), np.asarray(got, float)
    assert ref.shape == got.shape, f"{name}: shapes {ref.shape} (OpenSim) and {got.shape} (simjax)"
    assert np.array_equal(np.isnan(ref), np.isnan(got)), f"{name}: NaNs differ"
    if not ref.size:
        return
    err = np.where(np.isnan(ref), 0.0, np.abs(got - ref) - (rtol * np.abs(ref) + atol))
    i = np.unravel_index(np.argmax(err), err.shape)
    assert err[i] <= 0, f"{name}: worst at {i}: OpenSim {ref[i]!r}, simjax {got[i]!r} (rtol {rtol}, atol {atol})"


def select(st, rows):
    """The states of ``st`` at ``rows``."""
    return {k: (v[rows] if isinstance(v, np.ndarray) else v) for k, v in st.items()}


COORDS_ARM = ("shoulder_coord_0", "elbow_coord_0")
