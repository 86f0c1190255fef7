"""Contact against OpenSim 4.6: bouncing_block.osim, a sphere on a plane and a
planar walker with Hunt-Crossley and smooth contact, and an elastic-foundation
mesh; plus gradients of a landing loss.

Random states are chosen so that about two thirds of the spheres penetrate, and
speeds are large enough that some contacts pull apart (Simbody's early return in
the Hunt-Crossley loop is exercised).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.forces import (
    ContactHalfSpace,
    ContactMesh,
    ContactSphere,
    CoordinateLimitForce,
    ElasticFoundationForce,
    HuntCrossleyForce,
    SmoothSphereHalfSpaceForce,
)

from _contact_models import BB_COORDS, BOUNCING_BLOCK, bouncing_block
from _forces_oracle import assert_close, coordinate_names, osim_udot, records, set_osim_state, sj_states, sj_udot

osim = pytest.importorskip("opensim")

N_STATES = 100
RTOL = 1e-8


def _v(x):
    return osim.Vec3(*[float(a) for a in x])


def _lowest_sphere_bottom(system, states, spheres):
    """Minimum over ``spheres`` ((frame, location, radius)) of the sphere bottoms' y."""
    ys = []
    for frame, loc, r in spheres:
        p = jax.vmap(lambda st: sj.station_location(system, st, frame, jnp.asarray(loc)))(states)
        ys.append(np.asarray(p[:, 1]) - r)
    return np.min(ys, 0)


def _place(system, names, Q, U, spheres, height_coord, rng, depth=(-0.01, 0.02)):
    """Shift the vertical coordinate so the lowest sphere penetrates by a random depth."""
    j = names.index(height_coord)
    Q = Q.copy()
    Q[:, j] = 0.0
    low = _lowest_sphere_bottom(system, sj_states(system, names, Q, U), spheres)
    Q[:, j] = -low - rng.uniform(*depth, len(Q))
    return Q


def _osim_refs(om, s, names, Q, U, record_forces=()):
    fs = om.getForceSet()
    udot, recs = [], {n: [] for n in record_forces}
    for q, u in zip(Q, U):
        set_osim_state(om, s, names, q, u)
        udot.append(osim_udot(om, s, names))
        for n in record_forces:
            v = fs.get(n).getRecordValues(s)
            recs[n].append([v.get(i) for i in range(v.size())])
    return np.array(udot), {n: np.array(v) for n, v in recs.items()}


# -- bouncing_block.osim -------------------------------------------------------------------


@pytest.fixture(scope="module")
def block():
    om = osim.Model(BOUNCING_BLOCK)
    s = om.initSystem()
    system = bouncing_block().build()
    rng = np.random.default_rng(3)
    Q = rng.uniform(-0.6, 0.6, (N_STATES, 8))
    U = rng.uniform(-2.5, 2.5, (N_STATES, 8))
    Q = _place(system, BB_COORDS, Q, U, [("/bodyset/link2", (0, 0, 0), 0.05)], "yTranslation", rng)
    return om, s, system, Q, U


def test_bouncing_block_builds_like_opensim(block):
    om, s, system, _, _ = block
    names = [om.getStateVariableNames().get(i) for i in range(om.getNumStateVariables())]
    assert set(system.state_variable_names) == set(names)
    assert system.z_names == ("/forceset/hip_bushing/dissipated_energy",)


def test_bouncing_block_udot_and_contact_force(block):
    om, s, system, Q, U = block
    ref, recs = _osim_refs(om, s, BB_COORDS, Q, U, ["foot_contact_force"])
    states = sj_states(system, BB_COORDS, Q, U)
    got = sj_udot(system, BB_COORDS, states)
    assert_close(got, ref, RTOL, "udot")
    rec = recs["foot_contact_force"]
    assert (np.abs(rec).max(1) > 0).sum() > N_STATES // 4  # many states push (others separate fast)
    # records: platform (Ground) then heel (link2)
    mobs = [0, system.tree.body_paths.index("/bodyset/link2")]
    assert_close(records(system, states, HuntCrossleyForce, mobs), rec, RTOL, "contact force")


@pytest.mark.parametrize("accuracy, q_tol, u_tol", [(1e-5, 1e-4, 1e-3), (1e-8, 1e-7, 1e-6)])
def test_bouncing_block_simulation_matches_opensim(accuracy, q_tol, u_tol):
    """1 s from the file's default state with both engines' Runge-Kutta-Merson at the
    same accuracy: the final coordinates and speeds agree to the integration error
    (measured: 2.6e-5 / 1.4e-4 at accuracy 1e-5, where each engine is ~6e-5 / 1e-3 from
    a 1e-11 reference; 2.6e-8 / 2.7e-7 at 1e-8)."""
    om = osim.Model(BOUNCING_BLOCK)
    s = om.initSystem()
    man = osim.Manager(om)
    man.setIntegratorMethod(osim.Manager.IntegratorMethod_RungeKuttaMerson)
    man.setIntegratorAccuracy(accuracy)
    man.initialize(s)
    s = man.integrate(1.0)
    cs = om.getCoordinateSet()
    q_os = np.array([cs.get(n).getValue(s) for n in BB_COORDS])
    u_os = np.array([cs.get(n).getSpeedValue(s) for n in BB_COORDS])
    system = sj.load_osim(BOUNCING_BLOCK).build()
    traj = sj.simulate(system, system.default_state(), 1.0, accuracy=accuracy, n_outputs=2)
    coords = [system.topology.tree.coordinates[system.coordinate_path(n)] for n in BB_COORDS]
    q_sj = np.asarray(traj.q[-1])[[c.q for c in coords]]
    u_sj = np.asarray(traj.u[-1])[[c.u for c in coords]]
    assert np.abs(u_os).max() > 0.1  # still moving: the comparison is not of two rests
    np.testing.assert_allclose(q_sj, q_os, rtol=0, atol=q_tol)
    np.testing.assert_allclose(u_sj, u_os, rtol=0, atol=u_tol)


def test_bouncing_block_potential_energy(block):
    om, s, system, Q, U = block
    fs = om.getForceSet()
    ref = []
    for q, u in zip(Q[:20], U[:20]):
        set_osim_state(om, s, BB_COORDS, q, u)
        om.realizeDynamics(s)
        # OpenSim counts a BushingForce's energy twice; simjax once
        ref.append(
            om.calcPotentialEnergy(s)
            - osim.OutputDouble.safeDownCast(fs.get("hip_bushing").getOutput("potential_energy")).getValue(s)
        )
    states = sj_states(system, BB_COORDS, Q[:20], U[:20])
    got = jax.vmap(lambda st: sj.potential_energy(system, st))(states)
    assert_close(got, ref, RTOL, "potential energy")


# -- sphere on a plane ----------------------------------------------------------------------

BALL = dict(mass=3.0, com=(0.01, -0.02, 0.03), inertia=(0.02, 0.03, 0.025, 0.001, -0.002, 0.0005))
PLANE = dict(loc=(0.3, -0.1, 0.2), orient=(0.05, -0.1, -np.pi / 2 + 0.1))
SPH = dict(loc=(0.02, -0.1, 0.01), r=0.08)
HC = dict(k=2e6, c=0.7, us=0.8, ud=0.5, uv=0.3, vt=0.2)
SMOOTH = dict(k=2e6, c=0.7, us=0.8, ud=0.5, uv=0.3, vt=0.2, cf=1e-5, bd=300.0, bv=50.0)
FREE6 = ["free_coord_%d" % i for i in range(6)]


def sphere_on_plane_osim(kind):
    m = osim.Model()
    ball = osim.Body("ball", BALL["mass"], _v(BALL["com"]), osim.Inertia(*BALL["inertia"]))
    m.addBody(ball)
    m.addJoint(osim.FreeJoint("free", m.getGround(), ball))
    plane = osim.ContactHalfSpace(_v(PLANE["loc"]), _v(PLANE["orient"]), m.getGround(), "plane")
    sphere = osim.ContactSphere(SPH["r"], _v(SPH["loc"]), ball, "sphere")
    m.addContactGeometry(plane)
    m.addContactGeometry(sphere)
    if kind == "hc":
        f = osim.HuntCrossleyForce()
        f.setName("contact")
        f.setStiffness(HC["k"])
        f.setDissipation(HC["c"])
        f.setStaticFriction(HC["us"])
        f.setDynamicFriction(HC["ud"])
        f.setViscousFriction(HC["uv"])
        f.setTransitionVelocity(HC["vt"])
        f.addGeometry("sphere")
        f.addGeometry("plane")
    else:
        f = osim.SmoothSphereHalfSpaceForce("contact", sphere, plane)
        p = SMOOTH
        f.set_stiffness(p["k"])
        f.set_dissipation(p["c"])
        f.set_static_friction(p["us"])
        f.set_dynamic_friction(p["ud"])
        f.set_viscous_friction(p["uv"])
        f.set_transition_velocity(p["vt"])
        f.set_constant_contact_force(p["cf"])
        f.set_hertz_smoothing(p["bd"])
        f.set_hunt_crossley_smoothing(p["bv"])
    m.addForce(f)
    return m, m.initSystem()


def sphere_on_plane_sj(kind):
    m = sj.Model("ball")
    m = m.add(sj.Body("ball", mass=BALL["mass"], mass_center=BALL["com"], inertia=BALL["inertia"]))
    m = m.add(sj.FreeJoint("free", "/ground", "/bodyset/ball"))
    m = m.add(ContactHalfSpace("plane", "/ground", location=PLANE["loc"], orientation=PLANE["orient"]))
    m = m.add(ContactSphere("sphere", "/bodyset/ball", radius=SPH["r"], location=SPH["loc"]))
    if kind == "hc":
        m = m.add(
            HuntCrossleyForce(
                "contact",
                ("sphere", "plane"),
                stiffness=HC["k"],
                dissipation=HC["c"],
                static_friction=HC["us"],
                dynamic_friction=HC["ud"],
                viscous_friction=HC["uv"],
                transition_velocity=HC["vt"],
            )
        )
    else:
        p = SMOOTH
        m = m.add(
            SmoothSphereHalfSpaceForce(
                "contact",
                "/contactgeometryset/sphere",
                "/contactgeometryset/plane",
                stiffness=p["k"],
                dissipation=p["c"],
                static_friction=p["us"],
                dynamic_friction=p["ud"],
                viscous_friction=p["uv"],
                transition_velocity=p["vt"],
                constant_contact_force=p["cf"],
                hertz_smoothing=p["bd"],
                hunt_crossley_smoothing=p["bv"],
            )
        )
    return m


def _plane_frame_states(system, rng):
    """Random ball states near the tilted plane (penetration in [-0.01, 0.02] m)."""
    Q = rng.uniform(-1, 1, (N_STATES, 6))
    U = rng.uniform(-2.5, 2.5, (N_STATES, 6))
    states = sj_states(system, FREE6, Q, U)
    centre = jax.vmap(lambda st: sj.station_location(system, st, "/bodyset/ball", jnp.asarray(SPH["loc"])))(states)
    R = np.asarray(sj.spatial.xyz_body_rotation(jnp.asarray(PLANE["orient"])))
    n_in = R[:, 0]  # into the half-space
    signed = (np.asarray(centre) - np.asarray(PLANE["loc"])) @ n_in + SPH["r"]  # penetration now
    want = rng.uniform(-0.01, 0.02, N_STATES)
    Q[:, 3:] += (want - signed)[:, None] * n_in[None, :]  # the translations are in Ground
    return Q, U


@pytest.mark.parametrize("kind", ["hc", "smooth"])
def test_sphere_on_plane(kind):
    om, s = sphere_on_plane_osim(kind)
    system = sphere_on_plane_sj(kind).build()
    rng = np.random.default_rng(11)
    Q, U = _plane_frame_states(system, rng)
    ref, recs = _osim_refs(om, s, FREE6, Q, U, ["contact"])
    states = sj_states(system, FREE6, Q, U)
    assert_close(sj_udot(system, FREE6, states), ref, RTOL, "udot")
    rec = recs["contact"]
    ball = system.tree.body_paths.index("/bodyset/ball")
    if kind == "hc":  # sphere (ball) then plane (ground)
        got = records(system, states, HuntCrossleyForce, [ball, 0])
    else:
        got = np.concatenate(
            [
                np.asarray(jax.vmap(lambda st: sj.output(system, st, f"/forceset/contact|{o}"))(states))
                for o in ("sphere_force", "half_space_force")
            ],
            1,
        )
        got = got[:, [3, 4, 5, 0, 1, 2, 9, 10, 11, 6, 7, 8]]  # (torque, force) -> OpenSim's (force, torque)
    assert_close(got, rec, RTOL, "contact record")


# -- a planar walker -------------------------------------------------------------------------

SEG = {
    "pelvis": (10.0, (0, 0, 0), (0.1, 0.1, 0.1, 0, 0, 0)),
    "thigh_r": (3.0, (0, -0.2, 0), (0.03, 0.005, 0.03, 0, 0, 0)),
    "thigh_l": (3.0, (0, -0.2, 0), (0.03, 0.005, 0.03, 0, 0, 0)),
    "shank_r": (2.0, (0, -0.2, 0), (0.02, 0.003, 0.02, 0, 0, 0)),
    "shank_l": (2.0, (0, -0.2, 0), (0.02, 0.003, 0.02, 0, 0, 0)),
}
JOINTS = [
    ("hip_r", "pelvis", "thigh_r", (0, -0.05, 0.1)),
    ("hip_l", "pelvis", "thigh_l", (0, -0.05, -0.1)),
    ("knee_r", "thigh_r", "shank_r", (0, -0.4, 0)),
    ("knee_l", "thigh_l", "shank_l", (0, -0.4, 0)),
]
FEET = [
    ("heel_r", "shank_r", (-0.05, -0.42, 0.0), 0.03),
    ("toe_r", "shank_r", (0.1, -0.45, 0.0), 0.02),
    ("heel_l", "shank_l", (-0.05, -0.42, 0.0), 0.03),
    ("toe_l", "shank_l", (0.1, -0.45, 0.0), 0.02),
]
KNEES = [("kneecap_r", "thigh_r", (0.03, -0.4, 0.05), 0.06), ("kneecap_l", "thigh_l", (0.03, -0.4, -0.05), 0.06)]
WALKER = [
    "pelvis_coord_0",
    "pelvis_coord_1",
    "pelvis_coord_2",
    "hip_r_coord_0",
    "hip_l_coord_0",
    "knee_r_coord_0",
    "knee_l_coord_0",
]
FLOOR_ORIENT = (0.0, 0.0, -np.pi / 2)
HC_FLOOR = dict(k=1e7, c=0.5, us=0.9, ud=0.8, uv=0.1)
HC_KNEE = dict(k=5e5, c=1.0, us=0.2, ud=0.2, uv=0.0)


def walker_osim(kind):
    m = osim.Model()
    bodies = {}
    for name, (mass, com, inertia) in SEG.items():
        bodies[name] = osim.Body(name, mass, _v(com), osim.Inertia(*inertia))
        m.addBody(bodies[name])
    m.addJoint(osim.PlanarJoint("pelvis", m.getGround(), bodies["pelvis"]))
    for name, parent, child, loc in JOINTS:
        m.addJoint(
            osim.PinJoint(name, bodies[parent], _v(loc), _v((0, 0, 0)), bodies[child], _v((0, 0, 0)), _v((0, 0, 0)))
        )
    floor = osim.ContactHalfSpace(_v((0, 0, 0)), _v(FLOOR_ORIENT), m.getGround(), "floor")
    m.addContactGeometry(floor)
    spheres = {}
    for name, body, loc, r in FEET + KNEES:
        spheres[name] = osim.ContactSphere(r, _v(loc), bodies[body], name)
        m.addContactGeometry(spheres[name])
    if kind == "hc":
        for fname, geoms, p in (
            ("floor_contact", ["floor"] + [f[0] for f in FEET], HC_FLOOR),
            ("knee_contact", [k[0] for k in KNEES], HC_KNEE),
        ):
            f = osim.HuntCrossleyForce()
            f.setName(fname)
            f.setStiffness(p["k"])
            f.setDissipation(p["c"])
            f.setStaticFriction(p["us"])
            f.setDynamicFriction(p["ud"])
            f.setViscousFriction(p["uv"])
            f.setTransitionVelocity(0.05)
            for g in geoms:
                f.addGeometry(g)
            m.addForce(f)
    else:
        for name, *_ in FEET:
            f = osim.SmoothSphereHalfSpaceForce("c_" + name, spheres[name], floor)
            f.set_stiffness(HC_FLOOR["k"])
            f.set_dissipation(HC_FLOOR["c"])
            f.set_static_friction(HC_FLOOR["us"])
            f.set_dynamic_friction(HC_FLOOR["ud"])
            f.set_viscous_friction(HC_FLOOR["uv"])
            f.set_transition_velocity(0.05)
            m.addForce(f)
    for knee in ("knee_r_coord_0", "knee_l_coord_0"):
        clf = osim.CoordinateLimitForce(knee, 0.0, 50.0, -120.0, 50.0, 0.5, 5.0)
        clf.setName(knee + "_limit")
        m.addForce(clf)
    return m, m.initSystem()


def walker_sj(kind):
    m = sj.Model("walker")
    for name, (mass, com, inertia) in SEG.items():
        m = m.add(sj.Body(name, mass=mass, mass_center=com, inertia=inertia))
    m = m.add(sj.PlanarJoint("pelvis", "/ground", "/bodyset/pelvis"))
    for name, parent, child, loc in JOINTS:
        m = m.add(
            sj.PinJoint(
                name, f"/bodyset/{parent}", f"/bodyset/{child}", location_in_parent=loc, location_in_child=(0, 0, 0)
            )
        )
    m = m.add(ContactHalfSpace("floor", "/ground", orientation=FLOOR_ORIENT))
    for name, body, loc, r in FEET + KNEES:
        m = m.add(ContactSphere(name, f"/bodyset/{body}", radius=r, location=loc))
    if kind == "hc":
        for fname, geoms, p in (
            ("floor_contact", ["floor"] + [f[0] for f in FEET], HC_FLOOR),
            ("knee_contact", [k[0] for k in KNEES], HC_KNEE),
        ):
            m = m.add(
                HuntCrossleyForce(
                    fname,
                    tuple(geoms),
                    stiffness=p["k"],
                    dissipation=p["c"],
                    static_friction=p["us"],
                    dynamic_friction=p["ud"],
                    viscous_friction=p["uv"],
                    transition_velocity=0.05,
                )
            )
    else:
        for name, *_ in FEET:
            m = m.add(
                SmoothSphereHalfSpaceForce(
                    "c_" + name,
                    f"/contactgeometryset/{name}",
                    "/contactgeometryset/floor",
                    stiffness=HC_FLOOR["k"],
                    dissipation=HC_FLOOR["c"],
                    static_friction=HC_FLOOR["us"],
                    dynamic_friction=HC_FLOOR["ud"],
                    viscous_friction=HC_FLOOR["uv"],
                    transition_velocity=0.05,
                )
            )
    for knee in ("knee_r_coord_0", "knee_l_coord_0"):
        m = m.add(
            CoordinateLimitForce(
                knee + "_limit",
                knee,
                upper_limit=0.0,
                upper_stiffness=50.0,
                lower_limit=-120.0,
                lower_stiffness=50.0,
                damping=0.5,
                transition=5.0,
            )
        )
    return m


def _walker_states(system, rng):
    n = N_STATES
    Q = np.zeros((n, 7))
    Q[:, 0] = rng.uniform(-0.3, 0.3, n)
    Q[:, 1] = rng.uniform(-1, 1, n)
    Q[:, 3:5] = rng.uniform(-0.6, 0.6, (n, 2))
    Q[:, 5:7] = rng.uniform(-1.5, 0.1, (n, 2))
    U = rng.uniform(-3, 3, (n, 7))
    spheres = [(f"/bodyset/{b}", loc, r) for _, b, loc, r in FEET]
    Q = _place(system, WALKER, Q, U, spheres, "pelvis_coord_2", rng, depth=(-0.005, 0.015))
    # bring the kneecaps together in a third of the states
    k = n // 3
    Q[:k, 4] = Q[:k, 3]
    Q[:k, 6] = Q[:k, 5]
    return Q, U


@pytest.mark.parametrize("kind", ["hc", "smooth"])
def test_walker(kind):
    om, s = walker_osim(kind)
    assert coordinate_names(om) == WALKER
    system = walker_sj(kind).build()
    rng = np.random.default_rng(5)
    Q, U = _walker_states(system, rng)
    ref, _ = _osim_refs(om, s, WALKER, Q, U)
    states = sj_states(system, WALKER, Q, U)
    assert_close(sj_udot(system, WALKER, states), ref, RTOL, "udot")
    if kind == "hc":
        n = np.asarray(jax.vmap(lambda st: sj.output(system, st, "/forceset/floor_contact|num_contacts"))(states))
        assert n.max() >= 2 and (n == 0).any()


def test_hunt_crossley_early_return_is_reproduced():
    """A sphere leaving the floor fast stops Simbody's loop: later contacts apply nothing."""
    om, s = walker_osim("hc")
    system = walker_sj("hc").build()
    rng = np.random.default_rng(8)
    Q, U = _walker_states(system, rng)
    states = sj_states(system, WALKER, Q, U)
    n_applied = np.asarray(jax.vmap(lambda st: sj.output(system, st, "/forceset/floor_contact|num_contacts"))(states))
    # count contacts that penetrate (depth > 0), to find states where some were skipped
    low = np.stack([_lowest_sphere_bottom(system, states, [(f"/bodyset/{b}", loc, r)]) for _, b, loc, r in FEET], 1)
    skipped = np.flatnonzero((low < 0).sum(1) > n_applied)
    assert len(skipped) > 0
    ref, _ = _osim_refs(om, s, WALKER, Q[skipped], U[skipped])
    assert_close(sj_udot(system, WALKER, sj_states(system, WALKER, Q[skipped], U[skipped])), ref, RTOL, "udot")


# -- elastic foundation --------------------------------------------------------------------


def _box_obj(path, half=(0.1, 0.05, 0.08), n=2):
    """A closed box of quads (n x n per face), written as .obj."""
    verts, index, faces = [], {}, []

    def vid(p):
        key = tuple(np.round(p, 12))
        if key not in index:
            index[key] = len(verts)
            verts.append(p)
        return index[key]

    h = np.asarray(half)
    for axis in range(3):
        for sign in (-1, 1):
            u, v = [a for a in range(3) if a != axis]
            for i in range(n):
                for j in range(n):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = np.zeros(3)
                        p[axis] = sign * h[axis]
                        p[u] = (-1 + 2 * (i + di) / n) * h[u]
                        p[v] = (-1 + 2 * (j + dj) / n) * h[v]
                        quad.append(vid(p))
                    if (sign > 0) != (axis == 1):
                        quad = quad[::-1]
                    faces.append(quad)
    with open(path, "w") as fh:
        for p in verts:
            fh.write("v %.17g %.17g %.17g\n" % tuple(p))
        for f in faces:
            fh.write("f " + " ".join(str(i + 1) for i in f) + "\n")


def test_elastic_foundation_mesh(tmp_path):
    mesh = str(tmp_path / "box.obj")
    _box_obj(mesh)
    ef = dict(k=5e7, c=0.4, us=0.7, ud=0.5, uv=0.2, vt=0.1)
    om = osim.Model()
    box = osim.Body("box", *(BALL["mass"], _v(BALL["com"]), osim.Inertia(*BALL["inertia"])))
    om.addBody(box)
    om.addJoint(osim.FreeJoint("free", om.getGround(), box))
    om.addContactGeometry(osim.ContactHalfSpace(_v((0, 0, 0)), _v((0, 0, -np.pi / 2)), om.getGround(), "floor"))
    om.addContactGeometry(osim.ContactSphere(0.05, _v((0.05, 0.0, 0.0)), om.getGround(), "bump"))
    om.addContactGeometry(osim.ContactMesh(mesh, _v((0.01, 0.0, 0.0)), _v((0.1, 0.2, 0.0)), box, "box_mesh"))
    f = osim.ElasticFoundationForce()
    f.setName("ef")
    f.setStiffness(ef["k"])
    f.setDissipation(ef["c"])
    f.setStaticFriction(ef["us"])
    f.setDynamicFriction(ef["ud"])
    f.setViscousFriction(ef["uv"])
    f.setTransitionVelocity(ef["vt"])
    for g in ("floor", "bump", "box_mesh"):
        f.addGeometry(g)
    om.addForce(f)
    s = om.initSystem()
    m = sj.Model("ef")
    m = m.add(sj.Body("box", mass=BALL["mass"], mass_center=BALL["com"], inertia=BALL["inertia"]))
    m = m.add(sj.FreeJoint("free", "/ground", "/bodyset/box"))
    m = m.add(ContactHalfSpace("floor", "/ground", orientation=(0, 0, -np.pi / 2)))
    m = m.add(ContactSphere("bump", "/ground", radius=0.05, location=(0.05, 0, 0)))
    m = m.add(ContactMesh("box_mesh", "/bodyset/box", mesh, location=(0.01, 0, 0), orientation=(0.1, 0.2, 0)))
    m = m.add(
        ElasticFoundationForce(
            "ef",
            ("floor", "bump", "box_mesh"),
            stiffness=ef["k"],
            dissipation=ef["c"],
            static_friction=ef["us"],
            dynamic_friction=ef["ud"],
            viscous_friction=ef["uv"],
            transition_velocity=ef["vt"],
        )
    )
    system = m.build()
    rng = np.random.default_rng(2)
    n = 40
    Q = np.column_stack(
        [rng.uniform(-0.5, 0.5, (n, 3)), rng.uniform(-0.05, 0.05, n), np.zeros(n), rng.uniform(-0.05, 0.05, n)]
    )
    U = rng.uniform(-1, 1, (n, 6))
    states = sj_states(system, FREE6, Q, U)
    R = np.asarray(jax.vmap(lambda st: sj.frame_transform(system, st, "/bodyset/box")[0])(states))
    # lowest box corner at a random depth below the floor (the bump pokes in at the origin)
    corners = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.05, 0.05) for z in (-0.08, 0.08)])
    Rm = np.asarray(sj.spatial.xyz_body_rotation(jnp.asarray((0.1, 0.2, 0.0))))
    low = np.min(np.einsum("kij,cj->kci", R, corners @ Rm.T + [0.01, 0, 0])[:, :, 1], 1)
    Q[:, 4] = -low - rng.uniform(0.0, 0.03, n)
    ref, _ = _osim_refs(om, s, FREE6, Q, U)
    assert_close(sj_udot(system, FREE6, sj_states(system, FREE6, Q, U)), ref, RTOL, "udot")


def test_mesh_errors(tmp_path):
    m = sj.Model("m").add(sj.Body("b", mass=1.0, inertia=(1, 1, 1, 0, 0, 0)))
    m = m.add(sj.FreeJoint("free", "/ground", "/bodyset/b"))
    with pytest.raises(sj.ModelError, match="filename"):
        m.add(ContactMesh("mesh", "/bodyset/b", "missing.obj")).build()
    open_box = ContactMesh(
        "mesh",
        "/bodyset/b",
        vertices=[[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]],
        faces=[[0, 2, 1], [0, 1, 3], [0, 3, 2]],
    )
    with pytest.raises(sj.ModelError, match="not closed"):
        m.add(open_box).build()
    with pytest.raises(sj.ModelError, match="geometry"):
        m.add(HuntCrossleyForce("hc", ("nothing",), stiffness=1.0)).build()


# -- gradients of a landing -------------------------------------------------------------------


def _drop_model(kind, mass=1.0, stiffness=1e6):
    m = sj.Model("drop")
    m = m.add(sj.Body("ball", mass=mass, inertia=(0.004, 0.004, 0.004, 0, 0, 0)))
    m = m.add(
        sj.PlanarJoint(
            "planar",
            "/ground",
            "/bodyset/ball",
            coordinates=(
                sj.Coordinate("rz"),
                sj.Coordinate("tx", default_speed_value=0.5),
                sj.Coordinate("ty", default_value=0.16),
            ),
        )
    )
    m = m.add(ContactHalfSpace("floor", "/ground", orientation=(0, 0, -np.pi / 2)))
    m = m.add(ContactSphere("sphere", "/bodyset/ball", radius=0.05))
    if kind == "smooth":
        m = m.add(
            SmoothSphereHalfSpaceForce(
                "contact",
                "/contactgeometryset/sphere",
                "/contactgeometryset/floor",
                stiffness=stiffness,
                dissipation=0.5,
                static_friction=0.8,
                dynamic_friction=0.6,
                viscous_friction=0.1,
                transition_velocity=0.1,
            )
        )
    else:
        m = m.add(
            HuntCrossleyForce(
                "contact",
                ("floor", "sphere"),
                stiffness=stiffness,
                dissipation=0.5,
                static_friction=0.8,
                dynamic_friction=0.6,
                viscous_friction=0.1,
                transition_velocity=0.1,
            )
        )
    return m


def _landing_loss(system, dt=1e-3, steps=250):
    """Peak vertical contact force over a fixed-step RK4 drop of 0.25 s.

    The four RK4 stages run in an inner ``lax.scan`` so that the dynamics appear
    once in the traced program (short compile times).
    """
    state0 = system.default_state()
    mass = system.model.find("/bodyset/ball").mass
    a = jnp.array([0.0, 0.5, 0.5, 1.0])
    w = jnp.array([1.0, 2.0, 2.0, 1.0]) / 6.0

    def deriv(q, u):
        acc = sj.accelerations(system, state0.replace(q=q, u=u))
        return acc.qdot, acc.udot

    def step(y, _):
        q, u = y

        def stage(carry, aw):
            kq, ku, sq, su, _ = carry
            ai, wi = aw
            kq, ku = deriv(q + ai * dt * kq, u + ai * dt * ku)
            return (kq, ku, sq + wi * kq, su + wi * ku, ku[2]), ku[2]

        zq, zu = jnp.zeros_like(q), jnp.zeros_like(u)
        (_, _, sq, su, _), ay = jax.lax.scan(stage, (zq, zu, zq, zu, 0.0), (a, w))
        # vertical force of the floor on the ball at the step's start: m (a_y + g)
        return (q + dt * sq, u + dt * su), mass * (ay[0] + 9.80665)

    _, fy = jax.lax.scan(step, (state0.q, state0.u), None, length=steps)
    return jnp.max(fy)


def _loss_of(kind, system):
    def loss(params):
        mass, stiffness = params
        model = (
            system.model.set("/bodyset/ball", mass=mass).set("/forceset/contact", stiffness=stiffness)
            if kind == "smooth"
            else system.model.set("/bodyset/ball", mass=mass)
        )
        if kind != "smooth":
            cp = model.find("/forceset/contact").contact_parameters[0]
            model = model.set("/forceset/contact", contact_parameters=(eqx_replace(cp, stiffness),))
        return _landing_loss(sj.System(model, system.topology))

    return loss


def eqx_replace(cp, stiffness):
    import equinox as eqx

    return eqx.tree_at(lambda c: c.stiffness, cp, stiffness)


def test_landing_gradient_matches_finite_differences():
    system = _drop_model("smooth").build()
    loss = jax.jit(_loss_of("smooth", system))
    p = jnp.array([1.0, 1e6])
    g = jax.grad(loss)(p)
    peak = float(loss(p))
    assert 50 < peak < 1000
    for i, h in enumerate((1e-5, 1e1)):
        e = jnp.zeros(2).at[i].set(h)
        fd = (loss(p + e) - loss(p - e)) / (2 * h)
        np.testing.assert_allclose(g[i], fd, rtol=1e-5)
    assert g[0] > 0 and g[1] > 0  # heavier and stiffer: larger peak force


def test_hunt_crossley_landing_gradient_is_finite():
    system = _drop_model("hc").build()
    loss = jax.jit(_loss_of("hc", system))
    p = jnp.array([1.0, 1e6])
    g = jax.grad(loss)(p)
    assert np.all(np.isfinite(np.asarray(g))) and float(loss(p)) > 50


@pytest.mark.parametrize("kind", ["hc", "smooth"])
def test_touchdown_event_stops_at_contact_onset(kind):
    """Penetration outputs are witnesses: a terminating event on one stops a drop at
    touchdown (sphere of radius 0.05 m released with its centre at 0.16 m)."""
    system = _drop_model(kind).build()
    witness = "/forceset/contact|" + ("max_penetration" if kind == "hc" else "indentation")
    touch = sj.Event(lambda sys_, st: sj.output(sys_, st, witness), direction=1)
    traj = sj.simulate(system, system.default_state(), 1.0, events=[touch], accuracy=1e-10, n_outputs=11)
    end = traj.final_state
    t_touch = np.sqrt(2 * (0.16 - 0.05) / 9.80665)
    # the smooth model pushes slightly before touching (its force is smoothed across
    # zero indentation), so its ball arrives a little later than free fall says
    assert float(end.t) == pytest.approx(t_touch, abs=1e-7 if kind == "hc" else 2e-4)
    assert float(end.q[2]) == pytest.approx(0.05, abs=1e-7)
