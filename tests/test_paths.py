"""Geometry paths against OpenSim 4.6: PathPoint, ConditionalPathPoint and
MovingPathPoint; lengths, lengthening speeds, moment arms and the generalized forces
of tensions (through udot) at random states; paths of different point counts
evaluated together; bad paths."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from _muscle_oracle import ELBOW, HUMERUS, RADIUS, assert_close
from simjax.forward import Context
from simjax.muscles.path import path_forces, path_geometry, path_speeds, path_topology_of

opensim = pytest.importorskip("opensim")

SX = (-0.5, 0.0, 0.6, 1.2, 1.8, 2.6)  # spline sites of the moving point (elbow angle)
MOVING = {
    "x": (0.02, 0.025, 0.03, 0.028, 0.022, 0.015),
    "y": (-0.05, -0.045, -0.04, -0.038, -0.036, -0.035),
    "z": (0.004, 0.004, 0.005, 0.006, 0.006, 0.007),
}
# (actuator, points); a point is (name, body, location) or ("cond", body, location, range)
# or ("moving", body)
ACTUATORS = (
    ("two", (("a", "ground", (0.03, 0.05, 0.0)), ("b", "radius", (0.02, -0.08, 0.01)))),
    (
        "conditional",
        (
            ("a", "ground", (0.02, 0.06, 0.01)),
            ("b", "humerus", (0.035, -0.12, 0.015)),
            ("c", "humerus", (0.04, -0.25, 0.01), (0.5, 1.5)),
            ("d", "radius", (0.025, -0.06, 0.005)),
        ),
    ),
    ("moving", (("a", "humerus", (0.03, -0.05, 0.0)), ("b", "radius", None), ("c", "ground", (0.05, 0.02, 0.0)))),
    ("end_moving", (("a", "ground", (-0.03, 0.04, 0.0)), ("b", "humerus", (-0.02, -0.2, 0.0)), ("c", "radius", None))),
)


def _osim_model():
    m = opensim.Model()
    h = opensim.Body("humerus", HUMERUS["mass"], opensim.Vec3(*HUMERUS["com"]), opensim.Inertia(*HUMERUS["inertia"]))
    r = opensim.Body("radius", RADIUS["mass"], opensim.Vec3(*RADIUS["com"]), opensim.Inertia(*RADIUS["inertia"]))
    m.addBody(h)
    m.addBody(r)
    sh = opensim.PinJoint(
        "shoulder", m.getGround(), opensim.Vec3(0), opensim.Vec3(0), h, opensim.Vec3(0), opensim.Vec3(0)
    )
    el = opensim.PinJoint("elbow", h, opensim.Vec3(*ELBOW), opensim.Vec3(0), r, opensim.Vec3(0), opensim.Vec3(0))
    m.addJoint(sh)
    m.addJoint(el)
    elbow = el.upd_coordinates(0)
    elbow.setRangeMin(0.0)
    elbow.setRangeMax(2.0)
    sh.upd_coordinates(0).setRangeMin(-1.0)
    sh.upd_coordinates(0).setRangeMax(1.0)
    frames = {"ground": m.getGround(), "humerus": h, "radius": r}
    for name, points in ACTUATORS:
        pa = opensim.PathActuator()
        pa.setName(name)
        pa.setOptimalForce(50.0)
        pps = pa.updGeometryPath().updPathPointSet()
        for p in points:
            if p[2] is None:
                mp = opensim.MovingPathPoint()
                mp.setName(p[0])
                mp.setParentFrame(frames[p[1]])
                for axis in "xyz":
                    spline = opensim.SimmSpline()
                    for x, y in zip(SX, MOVING[axis]):
                        spline.addPoint(x, y)
                    getattr(mp, f"set_{axis}_location")(spline)
                    getattr(mp, f"set{axis.upper()}Coordinate")(elbow)
                pps.adoptAndAppend(mp)
            elif len(p) == 4:
                cp = opensim.ConditionalPathPoint()
                cp.setName(p[0])
                cp.setParentFrame(frames[p[1]])
                cp.set_location(opensim.Vec3(*p[2]))
                cp.setCoordinate(elbow)
                cp.setRangeMin(p[3][0])
                cp.setRangeMax(p[3][1])
                pps.adoptAndAppend(cp)
            else:
                pa.addNewPathPoint(p[0], frames[p[1]], opensim.Vec3(*p[2]))
        m.addForce(pa)
    m.finalizeConnections()
    m.initSystem()
    return m


def _sj_model():
    model = sj.Model("paths")
    model = model.add(sj.Body("humerus", HUMERUS["mass"], HUMERUS["com"], HUMERUS["inertia"]))
    model = model.add(sj.Body("radius", RADIUS["mass"], RADIUS["com"], RADIUS["inertia"]))
    model = model.add(sj.PinJoint("shoulder", "/ground", "/bodyset/humerus"))
    model = model.add(sj.PinJoint("elbow", "/bodyset/humerus", "/bodyset/radius", location_in_parent=ELBOW))
    model = model.set("/jointset/elbow/elbow_coord_0", range=(0.0, 2.0))
    model = model.set("/jointset/shoulder/shoulder_coord_0", range=(-1.0, 1.0))
    frames = {"ground": "/ground", "humerus": "/bodyset/humerus", "radius": "/bodyset/radius"}
    elbow = "/jointset/elbow/elbow_coord_0"
    for name, points in ACTUATORS:
        pa = sj.PathActuator(name, optimal_force=50.0)
        for p in points:
            if p[2] is None:
                fns = {f"{a}_location": sj.SimmSpline(np.asarray(SX), np.asarray(MOVING[a])) for a in "xyz"}
                pt = sj.MovingPathPoint(
                    p[0], frames[p[1]], **fns, x_coordinate=elbow, y_coordinate=elbow, z_coordinate=elbow
                )
            elif len(p) == 4:
                pt = sj.ConditionalPathPoint(p[0], frames[p[1]], p[2], coordinate=elbow, range=p[3])
            else:
                pt = sj.PathPoint(p[0], frames[p[1]], p[2])
            pa = pa.add_path_point(pt)
        model = model.add(pa)
    return model


COORDS = ("shoulder_coord_0", "elbow_coord_0")


def test_paths_match_opensim_at_random_states():
    m = _osim_model()
    s = m.initSystem()
    cs = m.getCoordinateSet()
    acts = [m.getForceSet().get(name) for name, _ in ACTUATORS]
    acts = [opensim.PathActuator.safeDownCast(a) for a in acts]
    rng = np.random.default_rng(21)
    n = 60
    q = np.c_[rng.uniform(-1, 1, n), rng.uniform(0.0, 2.0, n)]
    q[:6, 1] = (0.5 - 1e-6, 0.5 + 1e-6, 1.5, 1.5 + 2e-5, 0.0, 2.0)  # at the conditional point's range ends
    u = rng.uniform(-3, 3, (n, 2))
    controls = rng.uniform(-1, 1, (n, len(ACTUATORS)))
    ref = {k: [] for k in ("length", "speed", "moment_arm", "udot")}
    for i in range(n):
        for j, c in enumerate(COORDS):
            cs.get(c).setValue(s, float(q[i, j]), False)
            cs.get(c).setSpeedValue(s, float(u[i, j]))
        m.realizeVelocity(s)
        m.setControls(s, opensim.Vector(controls[i].tolist()))
        m.realizeAcceleration(s)
        ref["length"].append([a.getLength(s) for a in acts])
        ref["speed"].append([a.getLengtheningSpeed(s) for a in acts])
        ref["moment_arm"].append([[a.computeMomentArm(s, cs.get(c)) for c in COORDS] for a in acts])
        ref["udot"].append([cs.get(c).getAccelerationValue(s) for c in COORDS])
    system = _sj_model().build()
    paths = tuple(f"/forceset/{name}" for name, _ in ACTUATORS)

    @jax.jit
    @jax.vmap
    def evaluate(qi, ui, ci):
        state = system.default_state().replace(q=qi, u=ui)
        ctx = Context(system, state, ci)
        return {
            "length": jnp.stack([ctx.group_output(p, "length") for p in paths]),
            "speed": jnp.stack([ctx.group_output(p, "speed") for p in paths]),
            "moment_arm": sj.moment_arms(system, state, paths, COORDS),
            "udot": ctx.acc.udot,
        }

    got = evaluate(jnp.asarray(q), jnp.asarray(u), jnp.asarray(controls))
    assert_close("length", ref["length"], got["length"], 0, 1e-9)
    assert_close("lengthening_speed", ref["speed"], got["speed"], 0, 1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], 0, 1e-9)
    assert_close("udot", ref["udot"], got["udot"], 1e-6, 1e-9)


def test_path_forces_are_minus_tension_times_length_gradient():
    """Point forces plus the moving-point correction equal -T dL/dq (no moving point
    here has a neighbour on its own body), and speeds equal dL/dq qdot."""
    system = _sj_model().build()
    topo = path_topology_of(system.topology)
    rows = np.arange(topo.n_paths)
    tension = jnp.asarray([3.0, -2.0, 5.0, 1.5])

    def lengths(q):
        return path_geometry(Context(system, system.default_state().replace(q=q))).length

    def generalized(q, u):
        ctx = Context(system, system.default_state().replace(q=q, u=u))
        body, mob = path_forces(ctx, rows, tension)
        from simjax.mechanics import dynamics

        return dynamics.generalized_forces(ctx.tree, ctx.pos, body) + mob, path_speeds(ctx)

    for q, u in (((0.3, 1.1), (0.7, -1.2)), ((-0.8, 0.2), (-2.0, 0.4)), ((0.1, 1.7), (1.0, 1.0))):
        q, u = jnp.asarray(q), jnp.asarray(u)
        J = jax.jacfwd(lengths)(q)
        f, speed = generalized(q, u)
        np.testing.assert_allclose(f, -tension @ J, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(speed, J @ u, rtol=1e-12, atol=1e-12)


def test_topology_flattens_paths_of_different_lengths():
    system = _sj_model().build()
    topo = path_topology_of(system.topology)
    assert topo.paths == tuple(f"/forceset/{name}/path" for name, _ in ACTUATORS)
    assert list(np.bincount(topo.path_id)) == [len(p) for _, p in ACTUATORS]
    assert topo.point_paths[2] == "/forceset/conditional/path/a"
    assert len(topo.moving) == 2 and topo.cond.sum() == 1


def test_bad_paths_name_the_component():
    base = _sj_model()
    one = sj.PathActuator("lonely").add_new_path_point("a", "/ground", (0, 0, 0))
    with pytest.raises(sj.ModelError, match=r"/forceset/lonely/path.*at least two path points"):
        base.add(one).build()
    bad = sj.PathActuator("lost").add_new_path_point("a", "/ground", (0, 0, 0))
    bad = bad.add_new_path_point("b", "/bodyset/ulna", (0, 0, 0))
    with pytest.raises(sj.ModelError, match=r"/forceset/lost/path/b.*parent_frame.*ulna"):
        base.add(bad).build()
    with pytest.raises(sj.ModelError, match=r"already has a path point named 'a'"):
        one.add_new_path_point("a", "/ground", (1, 0, 0))
