"""Passive forces against OpenSim 4.6: PointToPointSpring, SpringGeneralizedForce,
CoordinateLimitForce, BushingForce and ExpressionBasedCoordinateForce.

One test model (a free block carrying a pin link and a slider link) is built
identically with OpenSim's API and simjax's; accelerations, potential energy, force
records and the dissipated-energy derivatives must agree at random states to 1e-9.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.forces import (
    BushingForce,
    CoordinateLimitForce,
    ExpressionBasedCoordinateForce,
    PointToPointSpring,
    SpringGeneralizedForce,
)
from simjax.mechanics.frames import PhysicalOffsetFrame

from _forces_oracle import assert_close, osim_udot, records, set_osim_state, sj_states, sj_udot

osim = pytest.importorskip("opensim")

N_STATES = 100
EXPR = "-3*q^3 + 0.5*sin(qdot) - max(q, 0)*2 + q/4/2"
BLOCK = dict(mass=2.0, com=(0.1, 0.2, 0.0), inertia=(0.3, 0.4, 0.5, 0.01, 0.02, 0.03))
LINK1 = dict(mass=1.0, com=(0.0, 0.25, 0.0), inertia=(0.1, 0.01, 0.1, 0.0, 0.0, 0.0))
LINK2 = dict(mass=0.5, com=(0.02, -0.1, 0.0), inertia=(0.02, 0.01, 0.03, 0.001, 0.0, 0.0))
PIN = dict(loc_p=(0.0, 0.1, 0.0), or_p=(0.1, 0.2, 0.3), loc_c=(0.0, 0.5, 0.0), or_c=(0.0, 0.0, 0.0))
SLIDE = dict(loc_p=(0.0, -0.2, 0.0), or_p=(0.0, 0.0, 0.4), loc_c=(0.0, 0.0, 0.0), or_c=(0.0, 0.3, 0.0))
SPRING = dict(p1=(0.05, 0.1, 0.02), p2=(0.0, 0.1, 0.0), k=50.0, rest=0.3)
FRAME = dict(loc=(0.2, 0.0, 0.1), orient=(0.3, 0.0, 0.0))  # offset frame on the block (spring's body1)
BUSH = dict(
    loc1=(0.0, 1.0, 0.0),
    or1=(0.1, 0.0, 0.2),
    loc2=(0.0, 0.3, 0.0),
    or2=(0.0, 0.1, 0.0),
    krot=(5.0, 6.0, 7.0),
    ktra=(100.0, 200.0, 300.0),
    crot=(0.1, 0.2, 0.3),
    ctra=(1.0, 2.0, 3.0),
)
CLF_PIN = dict(up=30.0, kup=10.0, lo=-45.0, klo=15.0, damp=0.05, trans=5.0)
CLF_SLIDE = dict(up=0.1, kup=1000.0, lo=-0.1, klo=2000.0, damp=2.0, trans=0.05)
SGF = dict(k=20.0, rest=0.1, c=0.5)


def _v(x):
    return osim.Vec3(*x)


def build_osim():
    m = osim.Model()
    m.setGravity(osim.Vec3(0, -9.80665, 0))
    bodies = {}
    for name, p in (("block", BLOCK), ("link1", LINK1), ("link2", LINK2)):
        b = osim.Body(name, p["mass"], _v(p["com"]), osim.Inertia(*p["inertia"]))
        m.addBody(b)
        bodies[name] = b
    m.addJoint(osim.FreeJoint("free", m.getGround(), bodies["block"]))
    m.addJoint(
        osim.PinJoint(
            "pin",
            bodies["block"],
            _v(PIN["loc_p"]),
            _v(PIN["or_p"]),
            bodies["link1"],
            _v(PIN["loc_c"]),
            _v(PIN["or_c"]),
        )
    )
    m.addJoint(
        osim.SliderJoint(
            "slide",
            bodies["link1"],
            _v(SLIDE["loc_p"]),
            _v(SLIDE["or_p"]),
            bodies["link2"],
            _v(SLIDE["loc_c"]),
            _v(SLIDE["or_c"]),
        )
    )
    frame = osim.PhysicalOffsetFrame(
        "block_frame",
        bodies["block"],
        osim.Transform(
            osim.Rotation(
                osim.SpaceRotationSequence,
                FRAME["orient"][0],
                osim.CoordinateAxis(0),
                0.0,
                osim.CoordinateAxis(1),
                0.0,
                osim.CoordinateAxis(2),
            ),
            _v(FRAME["loc"]),
        ),
    )
    m.addComponent(frame)
    spring = osim.PointToPointSpring(
        frame, _v(SPRING["p1"]), bodies["link2"], _v(SPRING["p2"]), SPRING["k"], SPRING["rest"]
    )
    spring.setName("spring")
    m.addForce(spring)
    sgf = osim.SpringGeneralizedForce("slide_coord_0")
    sgf.setName("sgf")
    sgf.setStiffness(SGF["k"])
    sgf.setRestLength(SGF["rest"])
    sgf.setViscosity(SGF["c"])
    m.addForce(sgf)
    for name, coord, c in (("clf_pin", "pin_coord_0", CLF_PIN), ("clf_slide", "slide_coord_0", CLF_SLIDE)):
        f = osim.CoordinateLimitForce(
            coord, c["up"], c["kup"], c["lo"], c["klo"], c["damp"], c["trans"], name == "clf_pin"
        )
        f.setName(name)
        m.addForce(f)

    def tf(loc, ori):
        return osim.Transform(
            osim.Rotation(
                osim.BodyRotationSequence,
                ori[0],
                osim.CoordinateAxis(0),
                ori[1],
                osim.CoordinateAxis(1),
                ori[2],
                osim.CoordinateAxis(2),
            ),
            _v(loc),
        )

    bush = osim.BushingForce(
        "bushing",
        m.getGround(),
        tf(BUSH["loc1"], BUSH["or1"]),
        bodies["link1"],
        tf(BUSH["loc2"], BUSH["or2"]),
        _v(BUSH["ktra"]),
        _v(BUSH["krot"]),
        _v(BUSH["ctra"]),
        _v(BUSH["crot"]),
    )
    m.addForce(bush)
    m.addForce(osim.ExpressionBasedCoordinateForce("pin_coord_0", EXPR))
    m.getForceSet().get(m.getForceSet().getSize() - 1).setName("ebcf")
    s = m.initSystem()
    return m, s


def build_sj():
    m = sj.Model("passive")
    for name, p in (("block", BLOCK), ("link1", LINK1), ("link2", LINK2)):
        m = m.add(sj.Body(name, mass=p["mass"], mass_center=p["com"], inertia=p["inertia"]))
    m = m.add(sj.FreeJoint("free", "/ground", "/bodyset/block"))
    m = m.add(
        sj.PinJoint(
            "pin",
            "/bodyset/block",
            "/bodyset/link1",
            location_in_parent=PIN["loc_p"],
            orientation_in_parent=PIN["or_p"],
            location_in_child=PIN["loc_c"],
            orientation_in_child=PIN["or_c"],
        )
    )
    m = m.add(
        sj.SliderJoint(
            "slide",
            "/bodyset/link1",
            "/bodyset/link2",
            location_in_parent=SLIDE["loc_p"],
            orientation_in_parent=SLIDE["or_p"],
            location_in_child=SLIDE["loc_c"],
            orientation_in_child=SLIDE["or_c"],
        )
    )
    m = m.add(
        PhysicalOffsetFrame("block_frame", "/bodyset/block", translation=FRAME["loc"], orientation=FRAME["orient"])
    )
    m = m.add(
        PointToPointSpring(
            "spring",
            "/block_frame",
            SPRING["p1"],
            "/bodyset/link2",
            SPRING["p2"],
            stiffness=SPRING["k"],
            rest_length=SPRING["rest"],
        )
    )
    m = m.add(
        SpringGeneralizedForce("sgf", "slide_coord_0", stiffness=SGF["k"], rest_length=SGF["rest"], viscosity=SGF["c"])
    )
    for name, coord, c in (("clf_pin", "pin_coord_0", CLF_PIN), ("clf_slide", "slide_coord_0", CLF_SLIDE)):
        m = m.add(
            CoordinateLimitForce(
                name,
                coord,
                upper_limit=c["up"],
                upper_stiffness=c["kup"],
                lower_limit=c["lo"],
                lower_stiffness=c["klo"],
                damping=c["damp"],
                transition=c["trans"],
                compute_dissipation_energy=name == "clf_pin",
            )
        )
    m = m.add(
        BushingForce(
            "bushing",
            "/ground",
            "/bodyset/link1",
            location_in_frame1=BUSH["loc1"],
            orientation_in_frame1=BUSH["or1"],
            location_in_frame2=BUSH["loc2"],
            orientation_in_frame2=BUSH["or2"],
            rotational_stiffness=BUSH["krot"],
            translational_stiffness=BUSH["ktra"],
            rotational_damping=BUSH["crot"],
            translational_damping=BUSH["ctra"],
        )
    )
    m = m.add(ExpressionBasedCoordinateForce("ebcf", "pin_coord_0", EXPR))
    return m.build()


NAMES = [
    "free_coord_0",
    "free_coord_1",
    "free_coord_2",
    "free_coord_3",
    "free_coord_4",
    "free_coord_5",
    "pin_coord_0",
    "slide_coord_0",
]


@pytest.fixture(scope="module")
def models():
    om, s = build_osim()
    system = build_sj()
    rng = np.random.default_rng(42)
    Q = rng.uniform(-1.2, 1.2, (N_STATES, len(NAMES)))
    Q[:, 6] = rng.uniform(np.radians(-60), np.radians(45), N_STATES)  # across both pin limits
    Q[:, 7] = rng.uniform(-0.25, 0.25, N_STATES)  # across both slider limits
    U = rng.uniform(-2.0, 2.0, (N_STATES, len(NAMES)))
    return om, s, system, Q, U


def test_udot_matches_opensim(models):
    om, s, system, Q, U = models
    ref = []
    for q, u in zip(Q, U):
        set_osim_state(om, s, NAMES, q, u)
        ref.append(osim_udot(om, s, NAMES))
    got = sj_udot(system, NAMES, sj_states(system, NAMES, Q, U))
    assert_close(got, np.array(ref), 1e-9, "udot")


def test_potential_energy_and_records(models):
    om, s, system, Q, U = models
    states = sj_states(system, NAMES, Q, U)
    pe = np.asarray(jax.vmap(lambda st: sj.potential_energy(system, st))(states))
    fs = om.getForceSet()
    rec = {n: [] for n in ("clf_pin", "clf_slide", "sgf", "ebcf", "bushing", "spring")}
    pe_ref, zdot_ref = [], []
    for q, u in zip(Q, U):
        set_osim_state(om, s, NAMES, q, u)
        om.realizeAcceleration(s)
        # OpenSim 4.6 counts a BushingForce's energy twice (Simbody's LinearBushing and
        # the ForceAdapter that wraps every OpenSim Force); simjax counts it once
        pe_ref.append(
            om.calcPotentialEnergy(s)
            - osim.OutputDouble.safeDownCast(fs.get("bushing").getOutput("potential_energy")).getValue(s)
        )
        for n in rec:
            v = fs.get(n).getRecordValues(s)
            rec[n].append([v.get(i) for i in range(v.size())])
        zdot_ref.append(
            [
                om.getStateVariableDerivativeValue(s, "/forceset/clf_pin/dissipatedEnergy"),
                om.getStateVariableDerivativeValue(s, "/forceset/bushing/dissipated_energy"),
            ]
        )
    assert_close(pe, pe_ref, 1e-9, "potential energy")
    rec = {n: np.array(v) for n, v in rec.items()}
    out = lambda spec: np.asarray(jax.vmap(lambda st: sj.output(system, st, spec))(states))
    assert_close(out("/forceset/clf_pin|limit_force"), rec["clf_pin"][:, 0], 1e-9, "clf_pin force")
    assert_close(out("/forceset/clf_pin|potential_energy"), rec["clf_pin"][:, 1], 1e-9, "clf_pin pe")
    assert_close(out("/forceset/clf_slide|limit_force"), rec["clf_slide"][:, 0], 1e-9, "clf_slide force")
    assert_close(out("/forceset/clf_slide|potential_energy"), rec["clf_slide"][:, 1], 1e-9, "clf_slide pe")
    assert_close(out("/forceset/sgf|force"), rec["sgf"][:, 0], 1e-9, "sgf")
    assert_close(out("/forceset/ebcf|force_magnitude"), rec["ebcf"][:, 0], 1e-9, "ebcf")
    zdot = np.asarray(jax.vmap(lambda st: sj.accelerations(system, st).zdot)(states))
    zi = [
        system.z_names.index("/forceset/clf_pin/dissipatedEnergy"),
        system.z_names.index("/forceset/bushing/dissipated_energy"),
    ]
    assert_close(zdot[:, zi], zdot_ref, 1e-9, "dissipated power")
    # body forces about body origins, as OpenSim records them (ground's entries aside)
    bush = records(system, states, BushingForce, [system.tree.body_paths.index("/bodyset/link1")])
    assert_close(bush, rec["bushing"][:, 6:12], 1e-9, "bushing records")
    # OpenSim records point1 as if in the offset frame, though it applies it in the base body
    mobs = [system.tree.body_paths.index(b) for b in ("/bodyset/block", "/bodyset/link2")]
    spring = records(system, states, PointToPointSpring, mobs)
    assert_close(spring[:, [0, 1, 2, 6, 7, 8]], rec["spring"][:, [0, 1, 2, 6, 7, 8]], 1e-9, "spring forces")
    p2 = jax.vmap(lambda st: sj.station_location(system, st, "/bodyset/link2", jnp.asarray(SPRING["p2"])))(states)
    assert_close(p2, rec["spring"][:, 9:12], 1e-9, "spring point2")
