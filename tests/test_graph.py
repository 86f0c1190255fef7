"""Tests of the multibody graph maker: each rule, random-graph invariants, and OpenSim."""

import importlib.util
import math
import os
import tempfile

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from simjax.graph import GraphError, MultibodyGraphMaker


def make(bodies, joints, types=(("pin", 1),), **kw):
    """A graph maker with Ground plus ``bodies`` ((name, mass) or (name, mass, must_be_base))
    and ``joints`` ((name, type, parent, child) or with must_be_loop_joint appended)."""
    g = MultibodyGraphMaker(**kw)
    for t in types:
        g.add_joint_type(*t)
    g.add_body("ground", 0)
    for b in bodies:
        g.add_body(*b)
    for j in joints:
        g.add_joint(*j)
    return g


def mob_of(g, body_name):
    return g.mobilizers[g.bodies[g.get_body_num(body_name)].mobilizer]


def four_bar():
    # Simbody's own loop test: pin4 closes ground-body1-body2-body3-ground.
    return make(
        [("body1", 1.8), ("body2", 1.8), ("body3", 1.8)],
        [
            ("pin1", "pin", "ground", "body1"),
            ("pin2", "pin", "body1", "body2"),
            ("pin3", "pin", "body2", "body3"),
            ("pin4", "pin", "body3", "ground"),
        ],
    )


# -- input and joint types -----------------------------------------------------------------


def test_joint_types_and_numbering():
    g = make([("b1", 1.0)], [("j", "pin", "ground", "b1")], types=[("pin", 1), ("ball", 3, True)])
    assert [t.name for t in g.joint_types] == ["weld", "free", "pin", "ball"]
    assert [t.num_mobilities for t in g.joint_types] == [0, 6, 1, 3]
    assert [t.have_good_loop_joint_available for t in g.joint_types] == [True, True, False, True]
    assert g.get_joint_type_num("pin") == 2 and g.get_joint_type_num("nope") is None
    assert g.ground_name == "ground"
    assert g.get_body_num("b1") == 1 and g.get_body_num("nope") is None
    assert g.get_joint_num("j") == 0 and g.get_joint_num("nope") is None
    assert g.bodies[0].is_ground and math.isinf(g.bodies[0].mass) and g.bodies[0].level == 0


def test_renamed_weld_and_free_types():
    g = make(
        [("b1", 1.0), ("b2", 1.0)],
        [("w", "WeldJoint", "ground", "b1")],
        types=[],
        weld_type_name="WeldJoint",
        free_type_name="FreeJoint",
    )
    assert g.weld_type_name == "WeldJoint" and g.free_type_name == "FreeJoint"
    g.generate_graph()
    added = g.joints[-1]
    assert added.name == "#ground_b2" and added.type_name == "FreeJoint"
    with pytest.raises(GraphError, match="reserved"):
        g.add_joint_type("WeldJoint", 0)
    with pytest.raises(GraphError, match="weld"):
        g.add_joint("x", "weld", "b1", "b2")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda g: g.add_joint_type("pin", 1), "duplicate joint type 'pin'"),
        (lambda g: g.add_joint_type("bad", 7), "from 0 to 6"),
        (lambda g: g.add_joint_type("free", 6), "reserved"),
        (lambda g: g.add_body("b1", 2.0), "duplicate body name 'b1'"),
        (lambda g: g.add_body("neg", -1.0), "body 'neg': mass must be >= 0"),
        (lambda g: g.add_body("nan", float("nan")), "mass must be >= 0"),
        (lambda g: g.add_joint("j1", "pin", "b1", "b2"), "duplicate joint name 'j1'"),
        (lambda g: g.add_joint("j9", "hinge", "b1", "b2"), "'j9' has unknown joint type 'hinge'"),
        (lambda g: g.add_joint("j9", "pin", "nobody", "b2"), "'j9' has unknown parent body 'nobody'"),
        (lambda g: g.add_joint("j9", "pin", "b1", "nobody"), "'j9' has unknown child body 'nobody'"),
        (lambda g: g.add_joint("j9", "pin", "b2", "b2"), "joint 'j9' connects body 'b2' to itself"),
        (lambda g: g.delete_body("ground"), "'ground' is Ground and cannot be deleted"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, match):
    g = make([("b1", 1.0), ("b2", 1.0)], [("j1", "pin", "ground", "b1")])
    with pytest.raises(GraphError, match=match):
        call(g)
    assert issubclass(GraphError, ValueError)


def test_no_ground_yet():
    g = MultibodyGraphMaker()
    with pytest.raises(GraphError, match="Ground"):
        g.generate_graph()
    with pytest.raises(GraphError, match="Ground"):
        g.ground_name


def test_delete_joint_and_body_renumber():
    g = make(
        [("a", 1.0), ("b", 1.0), ("c", 1.0)],
        [("ja", "pin", "ground", "a"), ("jb", "pin", "a", "b"), ("jc", "pin", "b", "c"), ("jx", "pin", "ground", "c")],
    )
    assert g.delete_joint("nope") is False and g.delete_body("nope") is False
    assert g.delete_joint("jb") is True
    assert [j.name for j in g.joints] == ["ja", "jc", "jx"]
    assert g.get_joint_num("jx") == 2
    assert g.bodies[0].joints_as_parent == [0, 2] and g.bodies[3].joints_as_child == [1, 2]
    assert g.delete_body("b") is True  # takes joint jc with it
    assert [b.name for b in g.bodies] == ["ground", "a", "c"]
    assert [j.name for j in g.joints] == ["ja", "jx"]
    assert (g.joints[1].parent_body, g.joints[1].child_body) == (0, 2)
    assert g.get_body_num("c") == 2 and g.bodies[2].joints_as_child == [1]
    g.generate_graph()
    assert [m.outboard_body for m in g.mobilizers] == [0, 1, 2]


def test_changing_input_discards_the_graph():
    g = four_bar()
    g.generate_graph()
    assert len(g.bodies) == 5 and len(g.mobilizers) == 5
    g.add_body("body4", 1.0)  # no slave left, no mobilizers
    assert len(g.bodies) == 5 and g.mobilizers == () and g.loop_constraints == ()
    g.generate_graph()
    assert g.joints[-1].is_added_base_joint and len(g.joints) == 5
    g.delete_joint("pin2")  # the added free joint goes too
    assert len(g.joints) == 3 and not any(j.is_added_base_joint for j in g.joints)


# -- the tree ------------------------------------------------------------------------------


def test_serial_chain():
    g = make(
        [(f"body{i}", 1.8) for i in range(1, 6)],
        [(f"pin{i}", "pin", "ground" if i == 1 else f"body{i - 1}", f"body{i}") for i in range(1, 6)],
    )
    g.generate_graph()
    ground, *mobs = g.mobilizers
    assert ground.is_ground and ground.joint is None and ground.level == 0
    assert ground.outboard_body == 0 and g.bodies[0].mobilizer == 0
    assert len(mobs) == 5 and g.loop_constraints == ()
    for i, m in enumerate(mobs, start=1):
        assert (m.index, m.level, m.joint) == (i, i, i - 1)
        assert (m.inboard_body, m.outboard_body) == (i - 1, i)
        assert not (m.is_reversed or m.is_added_base_mobilizer or m.is_slave_mobilizer)
        assert m.joint_type_name == "pin" and m.num_mobilities == 1 and m.num_fragments == 1
        assert g.bodies[i].level == i and g.joints[i - 1].mobilizer == i


def test_loop_is_cut_by_a_slave_and_a_weld():
    g = four_bar()
    g.generate_graph()
    # Breadth first: pin1, pin4 (reversed), pin2, then pin3 to body3's slave.
    names = [g.joints[m.joint].name for m in g.mobilizers[1:]]
    assert names == ["pin1", "pin4", "pin2", "pin3"]
    assert [m.level for m in g.mobilizers] == [0, 1, 1, 2, 3]
    assert [m.is_reversed for m in g.mobilizers] == [False, False, True, False, False]
    assert [m.is_slave_mobilizer for m in g.mobilizers] == [False] * 4 + [True]
    assert [m.num_fragments for m in g.mobilizers] == [1, 1, 2, 1, 2]
    slave = g.bodies[4]
    assert len(g.bodies) == 5 and slave.name == "#body3_slave_1"
    assert slave.is_slave and slave.master == 3 and math.isnan(slave.mass)
    assert g.bodies[3].slaves == [4] and g.bodies[3].is_master
    assert g.get_body_num("#body3_slave_1") is None  # slaves have no name lookup
    m = g.mobilizers[4]
    assert (m.inboard_body, m.outboard_body, m.outboard_master_body) == (2, 4, 3)
    (weld,) = g.loop_constraints
    assert weld.is_slave_weld and weld.type_name == "weld"
    assert (weld.parent_body, weld.child_body, weld.joint) == (3, 4, 2)
    assert g.joints[2].mobilizer == 4 and g.joints[2].loop_constraint is None


def test_two_slaves_of_one_master_are_numbered():
    g = make(
        [("a", 1.0), ("b", 1.0)],
        [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "pin", "ground", "b"), ("j3", "pin", "a", "b")],
    )
    g.generate_graph()
    assert [b.name for b in g.bodies[3:]] == ["#b_slave_1", "#b_slave_2"]
    assert g.bodies[2].slaves == [3, 4] and g.mobilizers[3].num_fragments == 3
    assert [(c.parent_body, c.child_body, c.joint) for c in g.loop_constraints] == [(2, 3, 1), (2, 4, 3)]


def test_good_loop_joints_become_constraints():
    g = make(
        [("a", 1.0), ("b", 1.0)],
        [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "weld", "b", "a")],
        types=[("pin", 1), ("ball", 3, True)],
    )
    g.generate_graph()
    assert len(g.bodies) == 3 and len(g.mobilizers) == 3
    (c,) = g.loop_constraints
    assert (c.type_name, c.joint, c.parent_body, c.child_body, c.is_slave_weld) == ("weld", 2, 2, 1, False)
    assert g.joints[2].loop_constraint == 0 and g.joints[2].mobilizer is None

    g.delete_joint("j2")
    g.add_joint("j2", "ball", "a", "b", must_be_loop_joint=True)
    g.generate_graph()
    (c,) = g.loop_constraints
    assert (c.type_name, c.parent_body, c.child_body) == ("ball", 1, 2)
    assert not any(b.is_slave for b in g.bodies)
    # Without the flag on the type, the same joint needs a slave body.
    g = make(
        [("a", 1.0), ("b", 1.0)],
        [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "ball", "a", "b", True)],
        types=[("pin", 1), ("ball", 3)],
    )
    g.generate_graph()
    (c,) = g.loop_constraints
    assert c.is_slave_weld and g.bodies[3].name == "#b_slave_1"


def test_loop_closing_free_joint_imposes_nothing():
    g = make(
        [("a", 1.0), ("b", 1.0)], [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "free", "b", "a")]
    )
    g.generate_graph()
    assert sum(m.num_mobilities for m in g.mobilizers) == 2
    assert not any(b.is_slave for b in g.bodies) and len(g.mobilizers) == 3
    (c,) = g.loop_constraints
    assert c.type_name == g.free_type_name and not c.is_slave_weld
    assert (c.joint, c.parent_body, c.child_body) == (2, 2, 1)
    assert g.joints[2].loop_constraint == 0 and g.joints[2].mobilizer is None


def test_must_be_loop_joint_is_the_one_cut():
    joints = [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "pin", "ground", "b")]
    g = make([("a", 1.0), ("b", 1.0)], joints)
    g.generate_graph()
    assert g.bodies[3].name == "#b_slave_1" and g.mobilizers[3].joint == 1
    g = make([("a", 1.0), ("b", 1.0)], joints[:2] + [joints[2] + (True,)])
    g.generate_graph()
    assert g.joints[2].must_be_loop_joint
    assert [m.joint for m in g.mobilizers[1:]] == [0, 1, 2]
    slave_mob = g.mobilizers[3]
    assert slave_mob.is_slave_mobilizer and slave_mob.inboard_body == 0 and slave_mob.level == 1
    assert g.bodies[2].level == 2


def test_reversed_mobilizer():
    g = make([("a", 1.0), ("b", 1.0)], [("j0", "pin", "a", "ground"), ("j1", "pin", "b", "a")])
    g.generate_graph()
    for name, inboard, level in (("a", 0, 1), ("b", 1, 2)):
        m = mob_of(g, name)
        assert m.is_reversed and m.inboard_body == inboard and m.level == level
        j = g.joints[m.joint]
        assert (j.parent_body, j.child_body) == (m.outboard_body, m.inboard_body)


def test_levels():
    g = make(
        [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)],
        [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "pin", "b", "c"), ("j3", "pin", "ground", "d")],
    )
    g.generate_graph()
    assert [b.level for b in g.bodies] == [0, 1, 2, 3, 1]
    assert [m.level for m in g.mobilizers] == [0, 1, 1, 2, 3]
    for m in g.mobilizers[1:]:
        assert m.level == g.bodies[m.inboard_body].level + 1 == g.bodies[m.outboard_body].level


# -- bodies without a path to Ground -------------------------------------------------------


def test_lonely_bodies_get_free_joints_to_ground():
    g = make([("a", 1.0), ("b", 2.0)], [("j0", "pin", "ground", "a")])
    g.generate_graph()
    added = g.joints[1]
    assert added.name == "#ground_b" and added.type_name == "free" and added.is_added_base_joint
    assert (added.parent_body, added.child_body) == (0, 2)
    m = mob_of(g, "b")
    assert m.is_added_base_mobilizer and m.inboard_body == 0 and m.level == 1
    assert m.num_mobilities == 6 and m.joint_ref is None
    assert g.get_joint_num("j0") == 0
    g.clear_graph()
    assert len(g.joints) == 1 and g.mobilizers == ()


def test_must_be_base_body():
    g = make(
        [("a", 1.0), ("b", 1.0, True), ("c", 1.0, True)],
        [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "b"), ("j2", "pin", "c", "ground")],
    )
    g.generate_graph()
    # b is attached to Ground first; c already has a direct joint to Ground.
    assert [j.name for j in g.joints] == ["j0", "j1", "j2", "#ground_b"]
    assert mob_of(g, "b").is_added_base_mobilizer and mob_of(g, "b").level == 1
    # a-b then closes a loop: b's slave is mobilized by j1.
    assert g.mobilizers[g.joints[1].mobilizer].is_slave_mobilizer
    assert mob_of(g, "c").joint == 2 and mob_of(g, "c").is_reversed


@pytest.mark.parametrize(
    "joints, base",
    [
        # Parent-only bodies a (1 child) and b (2 children): b.
        ([("a", "c"), ("b", "c"), ("b", "d")], "b"),
        # Tie between parent-only a and b: the first.
        ([("a", "c"), ("b", "c")], "a"),
        # Parent-only d beats a, which has more children but is also a child.
        ([("a", "b"), ("a", "c"), ("d", "a")], "d"),
        # No parent-only body: most children, ties to the first.
        ([("a", "b"), ("b", "c"), ("c", "a")], "a"),
        ([("a", "b"), ("b", "c"), ("c", "a"), ("b", "d")], "b"),
    ],
)
def test_base_body_heuristic(joints, base):
    names = sorted({n for pair in joints for n in pair})
    g = make([(n, 1.0) for n in names], [(f"j{i}", "pin", p, c) for i, (p, c) in enumerate(joints)])
    g.generate_graph()
    added = [j for j in g.joints if j.is_added_base_joint]
    assert [j.name for j in added] == [f"#ground_{base}"]
    assert g.mobilizers[1].outboard_body == g.get_body_num(base)


def test_base_body_heuristic_after_an_edit():
    g = make(
        [(n, 1.0) for n in "abcdef"],
        [
            ("j0", "pin", "c", "d"),
            ("j1", "pin", "c", "e"),
            ("j2", "pin", "c", "f"),
            ("j3", "pin", "b", "c"),
            ("j4", "pin", "a", "b"),
            ("j5", "pin", "f", "a"),
        ],
    )
    g.generate_graph()
    # Every body is some joint's child: c, with the most children, is chosen.
    assert [j.name for j in g.joints if j.is_added_base_joint] == ["#ground_c"]
    # Now a is a parent only, and beats c.
    g.delete_joint("j5")
    g.generate_graph()
    assert [j.name for j in g.joints if j.is_added_base_joint] == ["#ground_a"]


def test_one_free_joint_per_island():
    g = make([(n, 1.0) for n in "abcd"], [("j0", "pin", "a", "b"), ("j1", "pin", "c", "d")])
    g.generate_graph()
    assert [j.name for j in g.joints[2:]] == ["#ground_a", "#ground_c"]
    # The second island is found after the first has been grown: a, b, then c, d.
    assert [g.bodies[m.outboard_body].name for m in g.mobilizers] == ["ground", "a", "b", "c", "d"]
    assert [m.level for m in g.mobilizers] == [0, 1, 2, 1, 2]


# -- massless bodies -----------------------------------------------------------------------


def test_terminal_massless_body_is_rejected_unless_welded():
    g = make([("body1", 0.0)], [("pin1", "pin", "ground", "body1")])
    with pytest.raises(GraphError, match=r"'body1' is massless .*'pin1'"):
        g.generate_graph()
    assert g.mobilizers == ()
    g.delete_joint("pin1")
    g.add_joint("pin1", "weld", "ground", "body1")
    g.generate_graph()
    assert mob_of(g, "body1").num_mobilities == 0


def test_massless_body_without_joints_is_rejected():
    g = make([("a", 1.0), ("m", 0.0)], [("j0", "pin", "ground", "a")])
    with pytest.raises(GraphError, match="'m' is massless and has no joint"):
        g.generate_graph()
    assert len(g.joints) == 1  # no free joint left behind


def test_intermediate_massless_body_keeps_the_chain():
    g = make(
        [("body1", 1.8), ("body2", 0.0), ("body3", 1.8)],
        [("pin1", "pin", "ground", "body1"), ("pin2", "pin", "body1", "body2"), ("pin3", "pin", "body2", "body3")],
    )
    g.generate_graph()
    assert [m.level for m in g.mobilizers] == [0, 1, 2, 3]


def test_massless_body_pulls_in_its_heaviest_outboard_neighbour_first():
    g = make(
        [("m", 0.0), ("x", 1.0), ("light", 1.0), ("heavy", 5.0), ("big", 10.0)],
        [
            ("j0", "pin", "ground", "m"),
            ("j1", "pin", "ground", "x"),
            ("j2", "pin", "m", "light"),
            ("j3", "pin", "m", "heavy"),
            ("j4", "pin", "big", "m"),
        ],
    )
    g.generate_graph()
    # Forward joints are preferred to the reversed one to a heavier body; the extension is
    # placed right after m, one level out, ahead of x at level 1.
    order = [g.bodies[m.outboard_body].name for m in g.mobilizers]
    assert order == ["ground", "m", "heavy", "x", "light", "big"]
    assert [m.level for m in g.mobilizers] == [0, 1, 2, 1, 2, 2]
    assert g.mobilizers[5].is_reversed


def test_massless_body_extends_through_a_reversed_joint():
    g = make([("m", 0.0), ("big", 3.0)], [("j0", "pin", "ground", "m"), ("j1", "pin", "big", "m")])
    g.generate_graph()
    assert mob_of(g, "big").is_reversed and mob_of(g, "big").level == 2


def test_growth_goes_on_past_a_massless_extension():
    # h is pulled in at level 2 while level 1 is grown; the level-2 sweep adds nothing else
    # but must still count h, or c would wrongly get its own free joint to Ground.
    g = make(
        [("m", 0.0), ("h", 1.0), ("c", 1.0)],
        [("j0", "pin", "ground", "m"), ("j1", "pin", "m", "h"), ("j2", "pin", "h", "c")],
    )
    g.generate_graph()
    assert not any(j.is_added_base_joint for j in g.joints)
    assert [m.level for m in g.mobilizers] == [0, 1, 2, 3]


def test_two_mobile_massless_bodies_in_a_row_are_rejected():
    # As in Simbody: the extension only looks for massful neighbours.
    g = make(
        [("a", 1.0), ("m1", 0.0), ("m2", 0.0), ("c", 1.0)],
        [("j0", "pin", "ground", "a"), ("j1", "pin", "a", "m1"), ("j2", "pin", "m1", "m2"), ("j3", "pin", "m2", "c")],
    )
    with pytest.raises(GraphError, match="massless body 'm1'.*joint 'j1'"):
        g.generate_graph()
    assert g.mobilizers == () and len(g.joints) == 4


# -- references, regeneration and the dump -------------------------------------------------


def test_user_refs_travel_with_the_graph():
    g = MultibodyGraphMaker()
    g.add_joint_type("pin", 1, user_ref="PIN")
    g.add_body("ground", 0, user_ref="G")
    g.add_body("a", 1.0, user_ref="A")
    g.add_body("b", 1.0, user_ref="B")
    g.add_joint("j0", "pin", "ground", "a", user_ref="J0")
    g.add_joint("j1", "pin", "a", "b", user_ref="J1")
    g.add_joint("j2", "pin", "b", "ground", user_ref="J2")
    g.generate_graph()
    m = g.mobilizers[-1]
    assert m.is_slave_mobilizer and m.joint_ref == "J1" and m.joint_type_ref == "PIN"
    assert (m.inboard_body_ref, m.outboard_body_ref, m.outboard_master_body_ref) == ("A", None, "B")
    (c,) = g.loop_constraints
    assert (c.joint_ref, c.parent_body_ref, c.child_body_ref) == ("J1", "B", None)
    assert g.mobilizers[0].outboard_body_ref == "G"


def test_generate_is_repeatable():
    g = make([(n, 1.0) for n in "abc"], [("j0", "pin", "a", "b"), ("j1", "pin", "b", "a")])
    g.generate_graph()
    first = g.dump_graph()
    g.generate_graph()
    assert g.dump_graph() == first
    g.clear_graph()
    assert len(g.bodies) == 4 and len(g.joints) == 2
    g.generate_graph()
    assert g.dump_graph() == first


def test_dump_graph():
    g = four_bar()
    g.generate_graph()
    text = g.dump_graph()
    lines = text.splitlines()
    assert lines[:5] == ["", "MULTIBODY GRAPH", "---------------", "", "5 BODIES:"]
    assert " 0  0: ground mass=inf mob=0 master=-1 " in lines
    assert " 4  3: #body3_slave_1 mass=nan mob=4 master=3 " in lines
    assert "  jointsAsParent=[ 3]\t  jointsAsChild=[ 2]\t  slaves=[ 4]" in lines
    assert "4 JOINTS:" in lines and "5 MOBILIZERS:" in lines and "1 LOOP CONSTRAINTS:" in lines
    assert (
        "%2d %2d: %20s %20s->%-20s %10s loopc=%2d %s %s" % (3, 2, "pin4", "body3", "ground", "pin", -1, "", "") in lines
    )
    assert "%2d %2d: %20s %20s->%-20s %10s %2d %3s" % (2, 1, "pin4", "ground", "body3", "pin", 3, "REV") in lines
    assert "%2d %2d: %20s %20s->%-20s %10s %2d %3s" % (4, 3, "pin3", "body2", "#body3_slave_1", "pin", 2, "") in lines
    assert "0: weld parent=body3 child=#body3_slave_1 jointNum=2 SLAVE WELD" in lines
    assert text.endswith("----- END OF MULTIBODY GRAPH.\n\n")

    g = make([("a", 1.0, True)], [])
    g.generate_graph()
    text = g.dump_graph()
    assert " 1  1: a mass=1 mob=1 master=-1 MUST BE BASE BODY" in text
    assert "ADDED BASE JOINT" in text


# -- random graphs -------------------------------------------------------------------------

TYPES = [("pin", 1, False), ("slider", 1, False), ("universal", 2, False), ("ball", 3, True)]
TYPE_NAMES = ["weld", "free"] + [t[0] for t in TYPES]


@st.composite
def random_graphs(draw):
    n = draw(st.integers(0, 7))
    bodies = [
        (
            f"b{i}",
            draw(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 5.0, 5.0, 3.0, 4.0])),
            draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()),
        )
        for i in range(n)
    ]
    names = ["ground"] + [b[0] for b in bodies]
    joints = []
    if n:
        for k in range(draw(st.integers(0, 2 * n + 2))):
            parent, child = draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True))
            joints.append((f"j{k}", draw(st.sampled_from(TYPE_NAMES)), parent, child, draw(st.integers(0, 7)) == 0))
    return bodies, joints


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graph_invariants(graph):
    bodies, joints = graph
    g = make(bodies, joints, types=TYPES)
    try:
        g.generate_graph()
    except GraphError as e:
        event("rejected: massless")
        assert "massless" in str(e)
        assert g.mobilizers == () and len(g.bodies) == len(bodies) + 1
        assert len(g.joints) == len(joints)
        assert 0.0 in [b[1] for b in bodies]
        return

    B, J, M, C = g.bodies, g.joints, g.mobilizers, g.loop_constraints
    n_in = len(bodies) + 1
    for what, seen in (
        ("slave", len(B) > n_in),
        ("added free joint", len(J) > len(joints)),
        ("loop-joint constraint", any(not c.is_slave_weld for c in C)),
        ("reversed", any(m.is_reversed for m in M)),
    ):
        if seen:
            event(what)
    # Inputs are kept in order; slaves and added joints come after them.
    assert [b.name for b in B[:n_in]] == ["ground"] + [b[0] for b in bodies]
    assert all(b.is_slave for b in B[n_in:]) and not any(b.is_slave for b in B[:n_in])
    assert [j.name for j in J[: len(joints)]] == [j[0] for j in joints]
    for j in J[len(joints) :]:
        assert j.is_added_base_joint and j.type_name == "free" and j.parent_body == 0
        assert j.name == f"#ground_{B[j.child_body].name}"

    # Every body, slaves included, is mobilized exactly once; Ground by the placeholder.
    assert len(M) == len(B) and M[0].is_ground and M[0].outboard_body == 0
    assert sorted(m.outboard_body for m in M) == list(range(len(B)))
    for i, m in enumerate(M):
        assert m.index == i and B[m.outboard_body].mobilizer == i
        assert m.level == B[m.outboard_body].level
        if i == 0:
            continue
        # Inboard bodies come first; levels step by one.
        assert B[m.inboard_body].mobilizer < i
        assert m.level == B[m.inboard_body].level + 1
        joint = J[m.joint]
        assert joint.mobilizer == i
        master = B[m.outboard_body].master if m.is_slave_mobilizer else m.outboard_body
        assert m.outboard_master_body == master
        ends = (m.inboard_body, master)
        if m.is_reversed:
            assert not m.is_slave_mobilizer
            assert (joint.child_body, joint.parent_body) == ends
        else:
            assert (joint.parent_body, joint.child_body) == ends
        if joint.must_be_loop_joint:
            assert m.is_slave_mobilizer
        # No branch ends in a mobile massless body.
        if B[m.outboard_body].mass == 0 and m.num_mobilities > 0:
            assert any(o.inboard_body == m.outboard_body for o in M[1:])

    # Every joint is exactly one of: a tree joint, or a loop constraint (a free one is
    # a constraint that imposes nothing).
    for jn, joint in enumerate(J):
        assert joint.has_mobilizer != joint.has_loop_constraint
        if joint.has_loop_constraint:
            c = C[joint.loop_constraint]
            assert c.joint == jn and not c.is_slave_weld and c.type_name == joint.type_name
            assert g.joint_types[joint.type_num].have_good_loop_joint_available
            assert (c.parent_body, c.child_body) == (joint.parent_body, joint.child_body)

    # One weld per slave, listed before the loop-joint constraints.
    welds = [c for c in C if c.is_slave_weld]
    assert C[: len(welds)] == tuple(welds)
    assert sorted(c.child_body for c in welds) == list(range(n_in, len(B)))
    for c in welds:
        assert c.type_name == "weld" and B[c.child_body].master == c.parent_body
        assert J[c.joint].mobilizer == B[c.child_body].mobilizer
    for b in B[:n_in]:
        assert all(B[s].master == B.index(b) for s in b.slaves)

    # Determinism, and clear_graph gives the input back.
    text = g.dump_graph()
    g.clear_graph()
    assert len(g.bodies) == n_in and len(g.joints) == len(joints) and g.mobilizers == ()
    g.generate_graph()
    assert g.dump_graph() == text


# -- against OpenSim -----------------------------------------------------------------------


def opensim_graph_maker(osim, type_names, body_masses, joints):
    """Our graph maker set up as OpenSim's Model::createMultibodyTree does: weld and free
    types named after the joint classes, every other joint type without a good loop joint,
    bodies and joints named by their absolute paths."""
    g = MultibodyGraphMaker("WeldJoint", "FreeJoint")
    for t in type_names:
        if t not in ("WeldJoint", "FreeJoint"):
            g.add_joint_type(t, getattr(osim, t)().numCoordinates(), False)
    g.add_body("/ground", 0)
    for name, mass in body_masses:
        g.add_body(f"/bodyset/{name}", mass)
    path = lambda n: "/ground" if n == "ground" else f"/bodyset/{n}"  # noqa: E731
    for name, t, p, c in joints:
        g.add_joint(f"/jointset/{name}", t, path(p), path(c))
    g.generate_graph()
    return g


def our_mobilized_body_indices(g):
    """Mobilized-body index per body path, with slaves named as OpenSim names them
    (``<master path>/<master>_slave_<k>``, k from 0)."""
    out = {}
    for b in g.bodies:
        if b.is_slave:
            master = g.bodies[b.master].name
            k = int(b.name.rsplit("_", 1)[1]) - 1
            out[f"{master}/{master.rsplit('/', 1)[1]}_slave_{k}"] = b.mobilizer
        else:
            out[b.name] = b.mobilizer
    return out


def opensim_summary(osim, model):
    state = model.initSystem()
    mbi = {"/ground": 0}
    n_weld_constraints = 0
    for comp in model.getComponentsList():
        body = osim.Body.safeDownCast(comp)
        if body is not None:
            mbi[body.getAbsolutePathString()] = int(body.getMobilizedBodyIndex())
        if comp.getConcreteClassName() == "WeldConstraint":
            n_weld_constraints += 1
    return mbi, state.getNU(), state.getNMultipliers(), n_weld_constraints


def test_ring_of_pin_joints_matches_opensim():
    osim = pytest.importorskip("opensim")
    model = osim.Model()
    names = ["b1", "b2", "b3", "b4"]
    bodies = {"ground": model.getGround()}
    for n in names:
        bodies[n] = osim.Body(n, 1.0, osim.Vec3(0), osim.Inertia(0.1))
        model.addBody(bodies[n])
    joints = [("j0", "PinJoint", "ground", "b1")] + [
        (f"j{i + 1}", "PinJoint", names[i], names[(i + 1) % 4]) for i in range(4)
    ]
    for name, t, p, c in joints:
        model.addJoint(
            osim.PinJoint(name, bodies[p], osim.Vec3(0.1, 0, 0), osim.Vec3(0), bodies[c], osim.Vec3(0), osim.Vec3(0))
        )
    mbi, nu, n_mult, n_welds = opensim_summary(osim, model)

    g = opensim_graph_maker(osim, ["PinJoint"], [(n, 1.0) for n in names], joints)
    assert our_mobilized_body_indices(g) == mbi
    assert len(g.mobilizers) == len(mbi) == 6  # Ground, four bodies, one slave
    assert sum(m.num_mobilities for m in g.mobilizers) == nu == 5
    assert len(g.loop_constraints) == n_welds == 1 and n_mult == 6
    assert g.bodies[-1].name == "#/bodyset/b4_slave_1"


needs_opensim = pytest.mark.skipif(importlib.util.find_spec("opensim") is None, reason="opensim is not installed")
OSIM_TYPES = ["PinJoint", "SliderJoint", "UniversalJoint", "BallJoint", "WeldJoint", "FreeJoint"]


def model_xml(masses, joints):
    """An .osim document; OpenSim builds the graph only when it is loaded and initialized.

    (Building such a model through the Python API and calling initSystem fails in OpenSim
    4.6 when it has to add a free joint, so files are used for random models.)
    """
    bodies = "".join(
        f'<Body name="b{i}"><mass>{m!r}</mass><mass_center>0 0 0</mass_center>'
        f"<inertia>{0.1 * m!r} {0.1 * m!r} {0.1 * m!r} 0 0 0</inertia></Body>"
        for i, m in enumerate(masses)
    )
    path = lambda n: "/ground" if n == "ground" else f"/bodyset/{n}"  # noqa: E731
    frame = (
        '<PhysicalOffsetFrame name="{0}_offset"><socket_parent>{1}</socket_parent>'
        "<translation>{2}</translation><orientation>0 0 0</orientation>"
        "</PhysicalOffsetFrame>"
    )
    js = "".join(
        f'<{t} name="{name}"><socket_parent_frame>{p}_offset</socket_parent_frame>'
        f"<socket_child_frame>{c}_offset</socket_child_frame><frames>"
        + frame.format(p, path(p), "0.1 0 0")
        + frame.format(c, path(c), "0 0.1 0")
        + f"</frames></{t}>"
        for name, t, p, c in joints
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?><OpenSimDocument Version="40600">'
        f'<Model name="m"><BodySet name="bodyset"><objects>{bodies}</objects></BodySet>'
        f'<JointSet name="jointset"><objects>{js}</objects></JointSet></Model>'
        "</OpenSimDocument>"
    )


@st.composite
def connected_osim_models(draw):
    # Every body has a path to Ground: OpenSim 4.6 mishandles the free joints it adds.
    n = draw(st.integers(1, 6))
    masses = [draw(st.sampled_from([0.0, 1.0, 2.0, 5.0])) for _ in range(n)]
    names = ["ground"] + [f"b{i}" for i in range(n)]
    pairs = []
    for i in range(1, n + 1):
        other = draw(st.sampled_from(names[:i]))
        pairs.append((other, names[i]) if draw(st.booleans()) else (names[i], other))
    for _ in range(draw(st.integers(0, 3))):
        pairs.insert(
            draw(st.integers(0, len(pairs))),
            tuple(draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True))),
        )
    joints = [(f"j{k}", draw(st.sampled_from(OSIM_TYPES)), p, c) for k, (p, c) in enumerate(pairs)]
    return masses, joints


@needs_opensim
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(connected_osim_models())
def test_random_models_match_opensim(model):
    """Same mobilized-body index for every body and slave, same mobilities, same welds, and
    the same verdict on massless bodies, as OpenSim on random models."""
    import opensim as osim

    masses, joints = model
    try:
        g = opensim_graph_maker(osim, OSIM_TYPES, [(f"b{i}", m) for i, m in enumerate(masses)], joints)
    except GraphError:
        g = None
    if g is not None:
        # OpenSim cannot take Ground as a slave's master or a loop constraint's body
        # (opensim-core #3299), and it still adds a mobilizer for a weld or free joint
        # that closes a loop; those cases cannot be compared.
        assume(not any(b.is_slave and b.master == 0 for b in g.bodies))
        assume(not any(not c.is_slave_weld for c in g.loop_constraints))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.osim")
        with open(path, "w") as f:
            f.write(model_xml(masses, joints))
        try:
            result = opensim_summary(osim, osim.Model(path))
        except RuntimeError as e:
            assert g is None, f"OpenSim failed where we did not: {e}"
            assert "massless" in str(e)
            return
    assert g is not None, "we failed where OpenSim did not"
    mbi, nu, n_mult, n_welds = result
    assert our_mobilized_body_indices(g) == mbi
    assert sum(m.num_mobilities for m in g.mobilizers) == nu
    assert len(g.loop_constraints) == n_welds and n_mult == 6 * n_welds


def test_two_massless_bodies_in_a_row_fail_in_opensim_too():
    osim = pytest.importorskip("opensim")
    masses = [1.0, 0.0, 0.0, 1.0]
    joints = [
        ("j0", "PinJoint", "ground", "b0"),
        ("j1", "PinJoint", "b0", "b1"),
        ("j2", "PinJoint", "b1", "b2"),
        ("j3", "PinJoint", "b2", "b3"),
    ]
    with pytest.raises(GraphError, match="massless body '/bodyset/b1'"):
        opensim_graph_maker(osim, ["PinJoint"], [(f"b{i}", m) for i, m in enumerate(masses)], joints)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.osim")
        with open(path, "w") as f:
            f.write(model_xml(masses, joints))
        with pytest.raises(RuntimeError, match=r"terminal massless body \(/bodyset/b1\)"):
            osim.Model(path).initSystem()
