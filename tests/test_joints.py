"""Joints and the compiled tree: kinematic consistency, bad input, program size."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax import spatial
from simjax.component import ModelError
from simjax.forward import Context
from simjax.mechanics import tree as tr

I6 = (0.02, 0.03, 0.025, 0.001, -0.002, 0.003)


def zoo(quaternions=False):
    """One model with every joint type, offsets, and reversed mobilizers."""
    rng = np.random.default_rng(7)
    model = sj.Model("zoo", use_quaternions=quaternions)
    for i in range(1, 14):
        model = model.add(sj.Body(f"b{i}", mass=1.0 + 0.1 * i, mass_center=tuple(rng.normal(size=3) * 0.1), inertia=I6))

    def kw():
        return dict(
            location_in_parent=rng.normal(size=3) * 0.3,
            orientation_in_parent=rng.uniform(-1, 1, 3),
            location_in_child=rng.normal(size=3) * 0.3,
            orientation_in_child=rng.uniform(-1, 1, 3),
        )

    st = sj.SpatialTransform(
        axes=(
            sj.TransformAxis(coordinates=("k",), axis=np.array([0.0, 0.0, 1.0])),
            sj.TransformAxis(
                coordinates=("k2",),
                axis=np.array([0.3, -0.5, 0.8]),
                function=sj.LinearFunction(coefficients=(0.7, 0.1)),
            ),
            sj.TransformAxis(axis=np.array([1.0, 0.0, 0.0])),
            sj.TransformAxis(
                coordinates=("k",),
                axis=np.array([1.0, 0.0, 0.0]),
                function=sj.SimmSpline(
                    x=np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), y=np.array([0.01, -0.02, 0.0, 0.03, 0.01])
                ),
            ),
            sj.TransformAxis(
                coordinates=("k",),
                axis=np.array([0.0, 1.0, 0.0]),
                function=sj.PolynomialFunction(coefficients=(0.01, -0.02, 0.3)),
            ),
            sj.TransformAxis(
                coordinates=("k2",),
                axis=np.array([0.0, 0.0, 1.0]),
                function=sj.LinearFunction(coefficients=(0.05, 0.0)),
            ),
        )
    )
    joints = [
        sj.PinJoint("pin", "/ground", "/bodyset/b1", **kw()),
        sj.BallJoint("ball", "/bodyset/b1", "/bodyset/b2", **kw()),
        sj.FreeJoint("free", "/bodyset/b2", "/bodyset/b3", **kw()),
        sj.UniversalJoint("univ", "/ground", "/bodyset/b4", **kw()),
        sj.GimbalJoint("gimbal", "/bodyset/b4", "/bodyset/b5", **kw()),
        sj.PlanarJoint("planar", "/bodyset/b5", "/bodyset/b6", **kw()),
        sj.SliderJoint("slider", "/bodyset/b6", "/bodyset/b7", **kw()),
        sj.EllipsoidJoint("ellipsoid", "/bodyset/b7", "/bodyset/b8", radii_x_y_z=(0.3, 0.2, 0.4), **kw()),
        sj.CustomJoint("custom", "/bodyset/b8", "/bodyset/b9", spatial_transform=st, **kw()),
        sj.WeldJoint("weld", "/bodyset/b9", "/bodyset/b10", **kw()),
        # reversed: b11 hangs from b1, b12 from Ground (the joint's child), b13 from b12
        sj.PinJoint("rev1", "/bodyset/b11", "/bodyset/b1", **kw()),
        sj.BallJoint("rev2", "/bodyset/b12", "/ground", **kw()),
        sj.EllipsoidJoint("rev3", "/bodyset/b13", "/bodyset/b12", radii_x_y_z=(0.2, 0.5, 0.1), **kw()),
    ]
    for j in joints:
        model = model.add(j)
    return model


def _random_state(system, rng):
    tree = system.topology.tree
    q = rng.uniform(-1.0, 1.0, tree.nq)
    for k in tree.quat_q:
        qq = rng.normal(size=4)
        q[k : k + 4] = qq / np.linalg.norm(qq) * 1.3  # unnormalized on purpose
    return system.default_state().replace(q=jnp.asarray(q), u=jnp.asarray(rng.normal(size=tree.nu)))


@eqx.filter_jit
def _consistency(system, state):
    """Poses, velocities and bias accelerations, with their time derivatives along
    ``q' = N(q) u`` (and ``u' = 0``) by forward-mode autodiff."""
    tree = system.topology.tree
    params = tr.tree_params(system.model, tree)

    def kin(q, u):
        pos = tr.position_kinematics(tree, params, q)
        vel = tr.velocity_kinematics(tree, params, pos, u)
        return (pos.R0, pos.p0, vel.V), vel

    q, u = state.q, state.u
    qdot = tr.qdot_from_u(tree, q, u)
    (R0, p0, V), (dR, dp, dV) = jax.jvp(lambda qq: kin(qq, u)[0], (q,), (qdot,))
    vel = kin(q, u)[1]
    return R0, p0, V, dR, dp, dV, vel.C


@pytest.mark.parametrize("quaternions", [False, True])
def test_velocities_and_bias_accelerations_are_time_derivatives(quaternions):
    system = zoo(quaternions).build()
    rng = np.random.default_rng(1)
    for _ in range(2):
        state = _random_state(system, rng)
        R0, p0, V, dR, dp, dV, C = _consistency(system, state)
        w, v = V[:, :3], V[:, 3:]
        # dR/dt = [w]x R; the body origin moves with v + w x p
        np.testing.assert_allclose(dR, spatial.skew(w) @ R0, atol=1e-12)
        np.testing.assert_allclose(dp, v + jnp.cross(w, p0), atol=1e-12)
        # with udot = 0 the spatial acceleration is the bias C
        np.testing.assert_allclose(dV, C, atol=1e-11)


def test_reversed_mobilizers_and_names():
    system = zoo().build()
    tree = system.topology.tree
    rev = {tree.joint_paths[m] for m in np.flatnonzero(tree.reversed)}
    assert rev == {"/jointset/rev1", "/jointset/rev2", "/jointset/rev3"}
    assert not tree.slave_welds and not tree.loop_welds
    assert system.q_names[tree.coordinates["/jointset/rev2/rev2_coord_0"].q] == "/jointset/rev2/rev2_coord_0/value"
    # Ball, Free and Ellipsoid take OpenSim's body-fixed XYZ angles by default
    assert tree.nq == tree.nu


def test_ellipsoid_places_child_on_the_surface():
    model = sj.Model("ell")
    model = model.add(sj.Body("b", mass=1.0, inertia=I6))
    model = model.add(sj.EllipsoidJoint("e", "/ground", "/bodyset/b", radii_x_y_z=(0.3, 0.2, 0.4)))
    system = model.build()
    for angles in ([0.0, 0.0, 0.0], [0.4, -0.3, 1.2], [-1.0, 0.7, 0.2]):
        state = system.set_coordinates(
            system.default_state(), dict(zip(("e_coord_0", "e_coord_1", "e_coord_2"), angles))
        )
        R, p = sj.frame_transform(system, state, "/bodyset/b")
        radii = np.array([0.3, 0.2, 0.4])
        # Simbody's placement: p = radii * Mz elementwise, a point of the ellipsoid
        np.testing.assert_allclose(p, radii * np.asarray(R)[:, 2], atol=1e-15)
        assert np.sum((np.asarray(p) / radii) ** 2) == pytest.approx(1.0, abs=1e-12)


# -- bad input ---------------------------------------------------------------------------


def _pendulum():
    model = sj.Model("m")
    model = model.add(sj.Body("a", mass=1.0, mass_center=(0, -0.5, 0), inertia=I6))
    return model.add(sj.PinJoint("j", "/ground", "/bodyset/a"))


def test_joint_between_a_frame_and_itself_is_rejected():
    model = _pendulum().add(sj.PinJoint("self", "/bodyset/a", "/bodyset/a"))
    with pytest.raises(ModelError, match=r"/jointset/self.*socket_child_frame.*same frame"):
        model.build()
    model = _pendulum().add(sj.PinJoint("self", "/bodyset/a", "/bodyset/a", location_in_child=(1.0, 0, 0)))
    with pytest.raises(ModelError, match=r"/jointset/self.*on the same body '/bodyset/a'"):
        model.build()


def test_body_without_joint_gets_a_free_joint_named_like_opensim(tmp_path):
    model = _pendulum().add(sj.Body("loose", mass=2.0, mass_center=(0.1, 0, 0), inertia=I6))
    system = model.build()
    names = [f"/jointset/free_loose/free_loose_coord_{i}" for i in range(6)]
    assert system.q_names[-6:] == tuple(f"{n}/value" for n in names)
    assert system.u_names[-6:] == tuple(f"{n}/speed" for n in names)
    # not coupled to the pendulum
    M = sj.mass_matrix(system, system.default_state())
    assert np.all(np.asarray(M)[0, 1:] == 0.0)
    osim = pytest.importorskip("opensim")
    xml = (
        '<?xml version="1.0" encoding="UTF-8" ?><OpenSimDocument Version="40000"><Model name="m">'
        '<BodySet name="bodyset"><objects><Body name="a"><mass>1</mass></Body><Body name="loose"><mass>2</mass>'
        '</Body></objects></BodySet><JointSet name="jointset"><objects><PinJoint name="j">'
        "<socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/a</socket_child_frame>"
        "</PinJoint></objects></JointSet></Model></OpenSimDocument>"
    )
    path = tmp_path / "loose.osim"
    path.write_text(xml)
    m = osim.Model(str(path))
    m.initSystem()
    sv = m.getStateVariableNames()
    osim_names = {sv.get(i) for i in range(sv.getSize())}
    assert set(system.q_names[-6:]) | set(system.u_names[-6:]) <= osim_names


def test_massless_terminal_body_is_rejected():
    model = _pendulum().add(sj.Body("tip", mass=0.0))
    model = model.add(sj.PinJoint("jt", "/bodyset/a", "/bodyset/tip"))
    with pytest.raises(ModelError, match="tip"):
        model.build()
    # welded to a massful body it is fine
    model = _pendulum().add(sj.Body("tip", mass=0.0)).add(sj.WeldJoint("jt", "/bodyset/a", "/bodyset/tip"))
    assert model.build().topology.nu == 1


def test_inertia_violating_the_triangle_inequality_warns_and_a_negative_one_is_rejected():
    """OpenSim loads and simulates the first (feet and toes of its collection), so simjax
    warns; a negative principal moment leaves the dynamics undefined."""
    model = _pendulum().add(sj.Body("bad", mass=1.0, inertia=(1.0, 0.1, 0.1, 0, 0, 0)))
    model = model.add(sj.PinJoint("jb", "/bodyset/a", "/bodyset/bad"))
    with pytest.warns(sj.ModelWarning, match=r"/bodyset/bad.*inertia.*triangle"):
        model.build()
    with pytest.raises(ModelError, match=r"/bodyset/bad.*inertia.*negative principal moment"):
        model.set("/bodyset/bad", inertia=(1.0, -0.1, 0.1, 0, 0, 0)).build()


# -- program size --------------------------------------------------------------------------


def _chain(n, width=1):
    """``width`` pin chains of ``n // width`` links hanging from Ground."""
    model = sj.Model("chain")
    per = n // width
    for c in range(width):
        for i in range(per):
            name = f"c{c}l{i}"
            parent = "/ground" if i == 0 else f"/bodyset/c{c}l{i - 1}"
            model = model.add(sj.Body(name, mass=1.0, mass_center=(0, -0.1, 0), inertia=I6))
            model = model.add(sj.PinJoint(f"j{name}", parent, f"/bodyset/{name}", location_in_parent=(0, -0.2, 0)))
    return model


def _hlo_ops(model):
    system = model.build()
    state = system.default_state()
    text = eqx.filter_jit(lambda s, x: Context(s, x).acc.udot).lower(system, state).as_text()
    body = text[text.index("func.func public @main") :]
    ops = re.findall(r"^\s+%\S+ = \"?(stablehlo\.\w+)", body, re.M)
    # gathering every body's property leaves into stacked arrays costs a reshape or a
    # broadcast per leaf (and constants for static numbers); everything else is counted
    return sum(op not in _COLLECT for op in ops)


_COLLECT = {
    "stablehlo.constant",
    "stablehlo.broadcast_in_dim",
    "stablehlo.reshape",
    "stablehlo.concatenate",
    "stablehlo.convert",
}


def test_program_size_does_not_grow_with_bodies():
    """Forward dynamics lower to the same program for 5, 20 or 40 bodies at equal depth.
    Shallow trees compose their poses by pointer jumping (ceil(log2(depth)) steps);
    from depth 7 on by a scan over the levels, whose program does not grow with depth."""
    wide = [_hlo_ops(_chain(n, width=n // 5)) for n in (5, 20, 40)]
    assert wide[0] == wide[1] == wide[2]
    deep = [_hlo_ops(_chain(n)) for n in (4, 5, 7, 20, 40)]
    assert deep[1] - deep[0] < 40  # one more jump: one compose of the (R, p) arrays
    assert deep[2] == deep[3] == deep[4]
    assert deep[2] - deep[1] < 100
