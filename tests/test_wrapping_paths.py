"""Wrapped GeometryPaths (the wrapping engine, issue 7) against OpenSim 4.6.

- ``arm26.osim`` (cylinders and ellipsoids; ``TRIlong`` has three PathWraps, so
  OpenSim's passes, its order swap and its cached wrap-point positions all matter):
  path lengths, lengthening speeds and moment arms of all six muscles, tendon forces
  and accelerations at 200 random states.
- Every single-muscle rig of ``tests/_wrapping_rigs.py`` (sphere, cylinder, ellipsoid,
  torus; quadrants; a second, inactive PathWrap; wrap objects on ground and on the
  moving body), those of one shape loaded together from one ``.osim`` text: lengths
  and moment arms along the sweeps.
- Derivatives with respect to wrap-object sizes equal finite differences; reverse
  mode equals forward mode (two rigs: a cylinder with OpenSim's several-wrap
  tangent adjustment, and an ellipsoid); derivatives of speeds and forces in q
  (the tangent points sliding over the surface) equal finite differences.
- Paths with one PathWrap give the same lengths whether the passes' loop carries them
  or their PathWrap is applied before it.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

opensim = pytest.importorskip("opensim")

import simjax as sj  # noqa: E402
from simjax.forward import Context  # noqa: E402
from simjax.io.osim import OsimWarning, loads_osim  # noqa: E402
from simjax.muscles.path import path_lengths  # noqa: E402
from simjax.wrapping import PathWrap, smooth_paths  # noqa: E402

from _muscle_oracle import assert_close, osim_eval, random_states, sj_eval  # noqa: E402
from _wrapping_rigs import N_Q, RIGS, _opensim, _sweep, _v, _wrap_xml  # noqa: E402

ARM_COORDS = ("r_shoulder_elev", "r_elbow_flex")


@pytest.fixture(scope="module")
def arm26():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model = sj.load_osim(sj.models.path("arm26"))
    om = opensim.Model(str(sj.models.path("arm26")))
    om.initSystem()
    return model, model.build(), om


def test_arm26_matches_opensim_at_200_random_states(arm26):
    _, system, om = arm26
    muscles = om.getMuscles()
    paths = [muscles.get(i).getAbsolutePathString() for i in range(muscles.getSize())]
    st = random_states(om, 200, np.random.default_rng(11))
    ref = osim_eval(om, st, ARM_COORDS)
    got = sj_eval(system, st, paths, ARM_COORDS)
    assert_close("length", ref["length"], got["length"], rtol=0, atol=1e-9)
    assert_close("lengthening_speed", ref["lengthening_speed"], got["lengthening_speed"], rtol=0, atol=1e-9)
    assert_close("moment_arm", ref["moment_arm"], got["moment_arm"], rtol=0, atol=1e-9)
    assert_close("tendon_force", ref["tendon_force"], got["tendon_force"], rtol=1e-8, atol=1e-9)
    assert_close("udot", ref["udot"], got["udot"], rtol=1e-6, atol=1e-9 * np.abs(ref["udot"]).max())
    assert_close("zdot", ref["zdot"], got["zdot"], rtol=1e-6, atol=1e-8)


def test_arm26_written_wraps_load_in_opensim(arm26, tmp_path):
    """The written WrapObjectSets and PathWrapSets give OpenSim the same lengths; a
    simjax ``smoothing`` is kept for simjax and ignored by OpenSim."""
    model, _, om = arm26
    model = smooth_paths(model, 0.002)
    out = tmp_path / "arm26.osim"
    sj.save_osim(model, out)
    back = sj.load_osim(out)
    assert [back.find(p).smoothing for p in back.paths(PathWrap)] == [0.002] * 7
    om2 = opensim.Model(str(out))
    for m in (om, om2):
        m.initSystem()
    st = random_states(om, 20, np.random.default_rng(3))
    np.testing.assert_allclose(osim_eval(om2, st)["length"], osim_eval(om, st)["length"], rtol=0, atol=1e-14)


def test_wrap_parameter_gradients_match_finite_differences(arm26):
    model, system, _ = arm26
    tri, hh = "/bodyset/r_humerus/TRI", "/bodyset/r_humerus/BIClonghh"
    s0 = system.default_state()
    q = s0.q.at[system.topology.tree.coordinates[system.coordinate_path("r_elbow_flex")].q].set(0.2)

    def lengths(radius, dims):
        sysx = model.set(tri, radius=radius).set(hh, dimensions=dims).build()
        return path_lengths(Context(sysx, s0.replace(q=q), jnp.zeros(len(system.actuator_names))))

    r0, d0 = jnp.asarray(model.find(tri).radius), jnp.asarray(model.find(hh).dimensions)
    h = 1e-6
    # one compilation: lengths and their derivatives along (radius, dims) directions, at
    # the base point (derivatives) and at the +-h points (values for differences)
    e = jnp.eye(4)
    steps = jnp.concatenate([jnp.zeros((4, 4)), h * e, -h * e])
    dirs = jnp.concatenate([e, jnp.zeros((8, 4))])
    x0 = jnp.concatenate([r0[None], d0])
    L = lambda y: lengths(y[0], y[1:])  # noqa: E731

    val, der = jax.jit(jax.vmap(lambda x, t: jax.jvp(L, (x,), (t,))))(x0 + steps, dirs)
    ad = der[:4].T  # (paths, 4)
    fd = ((val[4:8] - val[8:]) / (2 * h)).T
    assert np.abs(fd[:, 0]).max() > 0.1 and np.abs(fd[:, 1:]).max() > 0.1  # both objects wrap here
    np.testing.assert_allclose(ad, fd, rtol=0, atol=1e-5)


# -- all the rigs in one model --------------------------------------------------------------------


def _rigs_xml(rigs, smoothing=0.0):
    ground, bodies, joints, forces = [], [], [], []
    for i, r in enumerate(rigs):
        wrap = _wrap_xml(r["kind"], f"W{i}", r["dims"], r["rot"], r["tr"], r["quadrant"])
        wraps = [(f"W{i}", r["method"])]
        dummy = ""
        if r["multi"]:  # a second, inactive PathWrap
            dummy = _wrap_xml("sphere", f"D{i}", (0.01,), (0, 0, 0), (5, 5, 5), "all", active=False)
            wraps.append((f"D{i}", "hybrid"))
        on_ground, on_body = (dummy, wrap) if r["on_body"] else (wrap + dummy, "")
        ground.append(on_ground)
        bodies.append(
            f'<Body name="arm{i}"><mass>1</mass><mass_center>0 0 0</mass_center>'
            f'<inertia>0.1 0.1 0.1 0 0 0</inertia><WrapObjectSet name="wrapobjectset"><objects>'
            f"{on_body}</objects></WrapObjectSet></Body>"
        )
        jtag = "SliderJoint" if r["slide"] else "PinJoint"
        joints.append(
            f'<{jtag} name="j{i}"><socket_parent_frame>/ground</socket_parent_frame>'
            f"<socket_child_frame>/bodyset/arm{i}</socket_child_frame><coordinates>"
            f'<Coordinate name="q{i}"><range>-10 10</range></Coordinate></coordinates></{jtag}>'
        )
        extra = f"<smoothing>{smoothing}</smoothing>" if smoothing else ""
        pws = "".join(
            f'<PathWrap name="pw{k}"><wrap_object>{w}</wrap_object><method>{m}</method>'
            f"<range>-1 -1</range>{extra}</PathWrap>"
            for k, (w, m) in enumerate(wraps)
        )
        forces.append(
            f'<PathActuator name="act{i}"><GeometryPath name="geometrypath"><PathPointSet '
            f'name="pathpointset"><objects><PathPoint name="pa"><socket_parent_frame>/ground'
            f'</socket_parent_frame><location>{_v(r["pa"])}</location></PathPoint><PathPoint name="pb">'
            f"<socket_parent_frame>/bodyset/arm{i}</socket_parent_frame><location>{_v(r['pb'])}"
            f'</location></PathPoint></objects></PathPointSet><PathWrapSet name="pathwrapset"><objects>'
            f"{pws}</objects></PathWrapSet></GeometryPath></PathActuator>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?><OpenSimDocument Version="40000"><Model name="rigs">'
        f'<Ground name="ground"><WrapObjectSet name="wrapobjectset"><objects>{"".join(ground)}</objects>'
        f'</WrapObjectSet></Ground><BodySet name="bodyset"><objects>{"".join(bodies)}</objects></BodySet>'
        f'<JointSet name="jointset"><objects>{"".join(joints)}</objects></JointSet>'
        f'<ForceSet name="forceset"><objects>{"".join(forces)}</objects></ForceSet></Model></OpenSimDocument>'
    )


def _rig_lengths(system, n_rigs: int):
    """The path lengths of a ``_rigs_xml`` system as a function of the rigs'
    coordinates ``q0 .. q{n_rigs - 1}``, the rest at their defaults."""
    tree = system.topology.tree
    qi = np.asarray([tree.coordinates[system.coordinate_path(f"q{i}")].q for i in range(n_rigs)])
    s0 = system.default_state()
    acts = jnp.zeros(len(system.actuator_names))
    return lambda x: path_lengths(Context(system, s0.replace(q=s0.q.at[qi].set(x)), acts))


@pytest.mark.parametrize("kind", ["sphere", "cylinder", "ellipsoid", "torus"])
def test_rigs_in_one_model_match_opensim(kind):
    ALL = RIGS[kind]
    system = loads_osim(_rigs_xml(ALL), strict=True).build()
    sweeps = np.stack([_sweep(r)[:N_Q] for r in ALL], 1)  # (N_Q, rigs)
    lengths = _rig_lengths(system, len(ALL))

    # each path moves with its own coordinate only: a unit tangent on all gives each one's derivative
    val, der = jax.jit(jax.vmap(lambda x: jax.jvp(lengths, (x,), (jnp.ones_like(x),))))(jnp.asarray(sweeps))
    arm = -der
    assert np.all(np.isfinite(val)) and np.all(np.isfinite(der))
    for i, r in enumerate(ALL):
        if r["degenerate"]:
            continue
        ref = _opensim(r)[:, :N_Q]
        ok = np.isfinite(ref[0])  # OpenSim's ellipsoid is NaN at a few samples
        assert ok.mean() > 0.9, i
        where = f"rig {i} ({r['kind']}, quadrant {r['quadrant']})"
        np.testing.assert_allclose(np.asarray(val[:, i])[ok], ref[0][ok], rtol=0, atol=1e-7, err_msg=where)
        np.testing.assert_allclose(np.asarray(arm[:, i])[ok], ref[1][ok], rtol=0, atol=1e-7, err_msg=where)


def test_paths_with_one_pathwrap_wrapped_before_the_passes_agree(monkeypatch):
    """Many paths with one PathWrap have it applied before the passes' loop instead of
    in it (``_ONE_LOOP_SEGMENTS``): the same lengths. (The bookkeeping is the same for
    every shape; cylinders compile fastest.)"""
    from simjax.wrapping import paths as engine

    rigs = RIGS["cylinder"]
    system = loads_osim(_rigs_xml(rigs), strict=True).build()
    assert system.topology.paths and engine._ONE_LOOP_SEGMENTS > 0
    sweeps = jnp.asarray(np.stack([_sweep(r)[:N_Q:4] for r in rigs], 1))
    lengths = _rig_lengths(system, len(rigs))
    in_loop = jax.jit(jax.vmap(lengths))(sweeps)
    monkeypatch.setattr(engine, "_ONE_LOOP_SEGMENTS", -1)
    before = jax.jit(jax.vmap(lengths))(sweeps)
    assert np.all(np.isfinite(in_loop)) and np.ptp(np.asarray(in_loop), 0).max() > 0.01
    np.testing.assert_allclose(before, in_loop, rtol=0, atol=1e-12)


def test_reverse_mode_equals_forward_mode():
    rigs = [RIGS["cylinder"][3], RIGS["ellipsoid"][1]]
    system = loads_osim(_rigs_xml(rigs), strict=True).build()
    s0 = system.default_state()
    acts = jnp.zeros(len(system.actuator_names))

    def lengths(q):
        return path_lengths(Context(system, s0.replace(q=q), acts))

    qs = jnp.asarray(np.stack([_sweep(r)[:N_Q:5] for r in rigs], 1))
    rev = jax.jit(jax.vmap(jax.jacrev(lengths)))(qs)
    fwd = jax.jit(jax.vmap(jax.jacfwd(lengths)))(qs)
    assert np.all(np.isfinite(rev)) and np.abs(rev).max() > 0.01
    np.testing.assert_allclose(rev, fwd, rtol=0, atol=1e-14)


def test_right_hand_side_given_its_searches_runs_no_wrap_passes():
    """A right-hand side given the results of its searches (``Context.search``: here
    the wrap passes), as reverse mode through ``simulate``'s stages gives them, runs no
    passes and gives the same values and VJP as one that makes them."""
    from importlib import import_module

    rhs_searched = import_module("simjax.simulate")._rhs_searched
    system = loads_osim(_rigs_xml([RIGS["cylinder"][3]]), strict=True).build()
    s0 = system.default_state()
    y = s0.y.at[0].set(float(np.mean(_sweep(RIGS["cylinder"][3])[:N_Q])))
    ct = jnp.linspace(-1.0, 1.0, y.shape[0])

    def field(y, searches):
        return rhs_searched(system, s0.t, y, s0.d, jnp.full(1, 30.0), None, searches)

    def evaluate(y, searches):  # the right-hand side, its VJP and its searches
        dy, pull, found = jax.vjp(lambda y: field(y, searches), y, has_aux=True)
        return dy, pull(ct)[0], found

    made = jax.jit(evaluate)(y, None)
    assert set(made[2]) == {"wrap_passes"}
    given = jax.jit(evaluate)(y, made[2])
    loops = lambda searches: str(jax.make_jaxpr(field)(y, searches)).count("while[")  # noqa: E731
    assert loops(made[2]) < loops(None)
    np.testing.assert_array_equal(given[0], made[0])
    assert np.abs(made[1]).max() > 0.1
    np.testing.assert_allclose(given[1], made[1], rtol=0, atol=1e-13)


# OpenSim's length jumps: a cylinder with a quadrant starting to wrap the long way round,
# a sphere with a quadrant at onset
SWITCHES = [("cylinder", 1, (0.96, 1.06)), ("sphere", 1, (-0.64, -0.59))]


def test_smoothed_paths_bridge_opensim_switches():
    """With ``PathWrap.smoothing``, a model's paths across OpenSim's wrap/no-wrap
    switches have the length of ``smooth_segment_length``: OpenSim's outside the band,
    continuous, with a derivative that integrates to its change, and forces and
    speeds consistent with it."""
    from simjax.mechanics import dynamics
    from simjax.muscles.path import path_forces, path_speeds
    from _wrapping_rigs import EPS, _params, _simjax

    rigs = [RIGS[kind][i] for kind, i, _ in SWITCHES]
    system = loads_osim(_rigs_xml(rigs, smoothing=EPS), strict=True).build()
    tree = system.topology.tree
    coords = [tree.coordinates[system.coordinate_path(f"q{i}")] for i in range(len(rigs))]
    qi, ui = np.asarray([c.q for c in coords]), np.asarray([c.u for c in coords])
    s0 = system.default_state()
    rows, tension = np.arange(len(rigs)), 2.5

    def evaluate(x):
        ctx = Context(system, s0.replace(q=s0.q.at[qi].set(x), u=s0.u.at[ui].set(1.0)))
        body, mob = path_forces(ctx, rows, jnp.full(len(rigs), tension))
        force = dynamics.generalized_forces(ctx.tree, ctx.pos, body) + mob
        return path_lengths(ctx), force[ui], path_speeds(ctx)

    # each path moves with its own coordinate only: a unit tangent on all gives each one's derivative
    sweep = jax.jit(
        jax.vmap(lambda x: jax.jvp(evaluate, (x,), (jnp.ones_like(x),))),
        compiler_options={"xla_backend_optimization_level": 0},
    )

    def geometry(j, q):  # exact and smoothed lengths and status of rig j, at the segment level
        val, _, status = _simjax(SWITCHES[j][0])(_params([rigs[j]]), jnp.asarray(q)[None])
        return np.asarray(val)[0, :, 0], np.asarray(val)[0, :, 2], np.asarray(status)[0]

    centre = []
    for j, (_, _, window) in enumerate(SWITCHES):
        q = np.linspace(*window, 401)
        k = np.flatnonzero(np.diff(geometry(j, q)[2] != 0))[0]
        centre.append(0.5 * (q[k] + q[k + 1]))
    xs = np.linspace(-1e-2, 1e-2, 401)[:, None] + np.asarray(centre)
    (length, force, speed), (dlength, _, _) = map(lambda t: [np.asarray(v) for v in t], sweep(jnp.asarray(xs)))
    dq = xs[1] - xs[0]
    for j, (kind, i, _) in enumerate(SWITCHES):
        where = f"{kind} rig {i}"
        exact, smooth, _ = geometry(j, xs[:, j])
        L, dL = length[:, j], dlength[:, j]
        np.testing.assert_allclose(L, smooth, rtol=0, atol=1e-12, err_msg=where)
        assert np.all(np.isfinite(dL))
        changed = np.abs(L - exact) > 1e-12
        assert changed.any() and np.ptp(xs[changed, j]) < 4e-3, where  # only near the switch
        assert np.abs(np.diff(L)).max() < 1.5 * np.abs(dL).max() * dq[j], where
        np.testing.assert_allclose(np.sum(0.5 * (dL[1:] + dL[:-1]) * dq[j]), L[-1] - L[0], rtol=0.02, err_msg=where)
        np.testing.assert_allclose(force[:, j], -tension * dL, rtol=1e-10, atol=1e-12, err_msg=where)
        np.testing.assert_allclose(speed[:, j], dL, rtol=1e-10, atol=1e-12, err_msg=where)


def test_speed_and_force_derivatives_match_finite_differences(arm26):
    """The tangent points slide over the wrap surface as the path's neighbouring
    points move, so derivatives of what is built on them (lengthening speeds, the
    forces of a tension) with respect to q equal finite differences, as a gradient
    through a simulation needs. (The single-cylinder paths TRIlat, TRImed and BRA,
    where OpenSim's geometry is exact.)"""
    from simjax.muscles.path import path_forces, path_speeds, path_topology_of

    _, system, _ = arm26
    paths = path_topology_of(system.topology).paths
    rows = np.asarray([paths.index(f"/forceset/{m}/path") for m in ("TRIlat", "TRImed", "BRA")])
    base = system.default_state()
    controls = jnp.zeros(len(system.actuator_names))
    u = jnp.asarray([0.7, -1.3])

    @jax.jit
    def f(q):
        ctx = Context(system, base.replace(q=q, u=u), controls)
        body, _ = path_forces(ctx, rows, jnp.ones(len(rows)))
        return jnp.concatenate([path_speeds(ctx)[rows], body.reshape(-1)])

    jac = jax.jit(jax.jacfwd(f))
    h = 1e-6
    for q in ([0.3, 1.2], [-0.2, 0.6], [0.8, 1.9]):
        q = jnp.asarray(q)
        fd = np.stack([(f(q.at[i].add(h)) - f(q.at[i].add(-h))) / (2 * h) for i in range(2)], 1)
        assert_close("d/dq (speeds, forces)", fd, np.asarray(jac(q)), rtol=1e-6, atol=1e-7)
