"""Turn a set of bodies and joints into a spanning tree plus loop constraints.

This is the Python counterpart of Simbody's ``MultibodyGraphMaker`` (seed:
simbody-multibodygraphmaker-reference), the step OpenSim runs when a model is
connected: it decides which joints become *mobilizers* (tree joints), in which order
the mobilized bodies are created, which joints are reversed, which bodies get an extra
free joint to Ground, and how topological loops are cut. It is pure Python and runs
once, when a model is built; nothing here is traced.

The rules, in the order they are applied by :meth:`MultibodyGraphMaker.generate_graph`:

1. The first body added is Ground. A body with no joint at all, or one marked
   ``must_be_base_body`` that has no direct joint to Ground, gets a free joint to
   Ground named ``"#<ground>_<body>"``. A massless body (mass 0) with no joint, or with a
   single joint that has mobilities, is rejected.
2. The tree is grown breadth-first from Ground: at level ``k`` every eligible joint
   (in joint order) whose body on one side sits at level ``k-1`` and whose other body
   is not yet in the tree becomes a mobilizer. The joint's parent is the inboard body
   when possible; if only the child is in the tree the mobilizer is *reversed*. A mobile
   mobilizer whose outboard body is massless is immediately extended by one more
   mobilizer to the heaviest massful neighbour (forward joints first), so no branch ends
   in a mobile massless body; if there is no massful neighbour the graph is rejected.
3. When growth stops and bodies are left over, one of them becomes a new base body
   (the heuristic: the first body that is a parent in some joint and never a child,
   preferring the most children; failing that, the first body with most children) and
   gets a free joint to Ground; then growth resumes.
4. Every joint left over closes a loop. If its type has a good loop-joint constraint
   (always true for the weld and free types) it becomes a loop constraint; a free loop
   constraint imposes nothing and builders simply skip it. Otherwise the child body is
   split: a *slave* body ``"#<child>_slave_<n>"`` is mobilized by the joint (as a
   forward mobilizer one level outboard of the parent) and welded back to its *master*.

Numbering follows Simbody: bodies are the input bodies (Ground first), then the slaves;
joints are the input joints, then the added free joints. Mobilizer 0 is a placeholder
for Ground; mobilizer ``i`` is then the ``MobilizedBodyIndex`` a builder gets when it adds
the mobilized bodies in this order, as OpenSim does.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

__all__ = [
    "GraphError",
    "JointType",
    "Body",
    "Joint",
    "Mobilizer",
    "LoopConstraint",
    "MultibodyGraphMaker",
]


class GraphError(ValueError):
    """Bad input to, or failure of, the multibody graph maker.

    The message names the offending body, joint or joint type.
    """


@dataclasses.dataclass
class JointType:
    """A known joint type.

    **Arguments:**

    - ``name``: the unique type name, e.g. ``"PinJoint"``.
    - ``num_mobilities``: its number of degrees of freedom, 0 to 6.
    - ``have_good_loop_joint_available``: whether a constraint exists that is as good as
      the joint when it closes a loop (then no slave body is needed).
    - ``user_ref``: anything the caller wants to keep with the type.
    """

    name: str
    num_mobilities: int
    have_good_loop_joint_available: bool = False
    user_ref: Any = None


@dataclasses.dataclass(eq=False)
class Body:
    """A body: an input body (the first one is Ground) or a slave created to cut a loop.

    The first four fields are inputs; the rest describe the body's place in the graph and
    are reset by :meth:`MultibodyGraphMaker.clear_graph`. Indices refer to
    ``MultibodyGraphMaker.joints``, ``.mobilizers`` and ``.bodies``.

    **Arguments:**

    - ``name``: the body's unique name.
    - ``mass``: the mass used as a hint (``inf`` for Ground, ``nan`` for slaves).
    - ``must_be_base_body``: whether the body must get a free joint to Ground.
    - ``user_ref``: anything the caller wants to keep with the body (``None`` for slaves).
    - ``is_ground``: whether this is Ground (body 0).
    - ``joints_as_parent``, ``joints_as_child``: the joints naming this body as parent
      or as child.
    - ``level``: distance from Ground in the tree (Ground 0, base bodies 1), or ``None``
      while the body is not in the tree.
    - ``mobilizer``: the mobilizer whose outboard body this is, or ``None``.
    - ``master``: for a slave, the body it was split from; else ``None``.
    - ``slaves``: for a master, the slave bodies split from it.
    """

    name: str
    mass: float
    must_be_base_body: bool = False
    user_ref: Any = None
    is_ground: bool = False
    joints_as_parent: list[int] = dataclasses.field(default_factory=list)
    joints_as_child: list[int] = dataclasses.field(default_factory=list)
    level: int | None = None
    mobilizer: int | None = None
    master: int | None = None
    slaves: list[int] = dataclasses.field(default_factory=list)

    @property
    def is_slave(self) -> bool:
        """Whether this body was split off another one to cut a loop."""
        return self.master is not None

    @property
    def is_master(self) -> bool:
        """Whether slave bodies were split off this one."""
        return bool(self.slaves)

    @property
    def is_in_tree(self) -> bool:
        """Whether the body has been placed in the spanning tree."""
        return self.level is not None

    @property
    def num_joints(self) -> int:
        """The number of joints that name this body, as parent or child."""
        return len(self.joints_as_parent) + len(self.joints_as_child)

    @property
    def num_fragments(self) -> int:
        """One for the body itself plus one per slave; split the mass this many ways."""
        return 1 + len(self.slaves)


@dataclasses.dataclass(eq=False)
class Joint:
    """A joint: an input joint or a free joint added to connect a body to Ground.

    **Arguments:**

    - ``name``: the joint's unique name.
    - ``type_name``, ``type_num``: its joint type, by name and by number.
    - ``parent_body``, ``child_body``: body numbers of the parent and the child.
    - ``must_be_loop_joint``: whether the joint must not be used as a tree joint.
    - ``user_ref``: anything the caller wants to keep with the joint.
    - ``is_added_base_joint``: whether the graph maker added this free joint to Ground.
    - ``mobilizer``: the mobilizer that implements the joint, or ``None``.
    - ``loop_constraint``: the loop constraint that implements the joint, or ``None``.
      (A joint cut by a slave body has a mobilizer; the slave's weld names the joint
      but is not recorded here.)
    """

    name: str
    type_name: str
    type_num: int
    parent_body: int
    child_body: int
    must_be_loop_joint: bool = False
    user_ref: Any = None
    is_added_base_joint: bool = False
    mobilizer: int | None = None
    loop_constraint: int | None = None

    @property
    def has_mobilizer(self) -> bool:
        """Whether the joint is a tree joint."""
        return self.mobilizer is not None

    @property
    def has_loop_constraint(self) -> bool:
        """Whether the joint is implemented by a loop constraint."""
        return self.loop_constraint is not None


@dataclasses.dataclass(frozen=True)
class Mobilizer:
    """One mobilizer (tree joint) of the generated tree; a snapshot, rebuilt by each graph.

    Mobilizer 0 is a placeholder for Ground (``joint is None``, level 0). For the others,
    the inboard body is mobilized by an earlier mobilizer.

    **Arguments:**

    - ``index``: its number; also the mobilized-body index when bodies are created in order.
    - ``joint``: the joint it implements, or ``None`` for Ground's placeholder.
    - ``level``: the level of its outboard body.
    - ``inboard_body``: body number of the inboard body (``None`` for the placeholder).
    - ``outboard_body``: body number of the body it mobilizes (possibly a slave).
    - ``outboard_master_body``: the outboard body, or its master if it is a slave.
    - ``is_reversed``: whether inboard/outboard are the joint's child/parent.
    - ``is_added_base_mobilizer``: whether the joint is a free joint added to Ground.
    - ``is_slave_mobilizer``: whether the outboard body is a slave.
    - ``num_fragments``: into how many bodies the outboard master body was split.
    - ``joint_type_name``: the joint's type (``None`` for the placeholder).
    - ``num_mobilities``: the joint type's degrees of freedom (0 for the placeholder).
    - ``joint_ref``, ``joint_type_ref``, ``inboard_body_ref``, ``outboard_body_ref``,
      ``outboard_master_body_ref``: the user references of those objects.
    """

    index: int
    joint: int | None
    level: int
    inboard_body: int | None
    outboard_body: int
    outboard_master_body: int
    is_reversed: bool
    is_added_base_mobilizer: bool
    is_slave_mobilizer: bool
    num_fragments: int
    joint_type_name: str | None
    num_mobilities: int
    joint_ref: Any = None
    joint_type_ref: Any = None
    inboard_body_ref: Any = None
    outboard_body_ref: Any = None
    outboard_master_body_ref: Any = None

    @property
    def is_ground(self) -> bool:
        """Whether this is Ground's placeholder (mobilizer 0)."""
        return self.joint is None


@dataclasses.dataclass(frozen=True)
class LoopConstraint:
    """One constraint that closes a loop cut to form the tree.

    Two kinds: a *slave weld* (``type_name`` is the weld type, parent the master body,
    child the slave, ``joint`` the cut joint, now a mobilizer of the slave) and a
    *loop-joint constraint* (``type_name`` is the joint's type, parent and child the
    joint's). A loop-joint constraint of the free type imposes nothing; skip it.

    **Arguments:**

    - ``index``: its number in ``MultibodyGraphMaker.loop_constraints``.
    - ``type_name``: the constraint type, named like the joint type it replaces.
    - ``joint``: the joint the constraint belongs to.
    - ``parent_body``, ``child_body``: the two constrained bodies.
    - ``is_slave_weld``: whether this welds a slave to its master.
    - ``joint_ref``, ``parent_body_ref``, ``child_body_ref``: the user references
      (``child_body_ref`` is ``None`` for a slave weld).
    """

    index: int
    type_name: str
    joint: int
    parent_body: int
    child_body: int
    is_slave_weld: bool
    joint_ref: Any = None
    parent_body_ref: Any = None
    child_body_ref: Any = None


@dataclasses.dataclass
class _Mob:
    """A mobilizer while the graph is being built (bodies are still changing)."""

    joint: int | None
    level: int
    inboard: int | None
    outboard: int
    reversed: bool


class MultibodyGraphMaker:
    """Builds a spanning tree plus loop constraints from bodies and joints.

    Register joint types (weld and free are predefined), add bodies (the first is Ground)
    and joints, then call :meth:`generate_graph` and read :attr:`mobilizers` and
    :attr:`loop_constraints`. Changing the input bodies or joints discards a generated
    graph.

    **Arguments:**

    - ``weld_type_name``: the name of the 0-dof weld type, also the slave-weld
      constraint type (OpenSim uses ``"WeldJoint"``).
    - ``free_type_name``: the name of the 6-dof free type used for added base joints
      (OpenSim uses ``"FreeJoint"``).
    """

    def __init__(self, weld_type_name: str = "weld", free_type_name: str = "free"):
        if weld_type_name == free_type_name:
            raise GraphError(f"the weld and free joint types need distinct names, both are {weld_type_name!r}")
        self._weld_type_name = weld_type_name
        self._free_type_name = free_type_name
        self._joint_types: list[JointType] = [
            JointType(weld_type_name, 0, True),
            JointType(free_type_name, 6, True),
        ]
        self._type_num = {weld_type_name: 0, free_type_name: 1}
        self._bodies: list[Body] = []
        self._body_num: dict[str, int] = {}
        self._joints: list[Joint] = []
        self._joint_num: dict[str, int] = {}
        self._mobs: list[_Mob] = []
        self._mobilizers: tuple[Mobilizer, ...] = ()
        self._loop_constraints: tuple[LoopConstraint, ...] = ()
        self._generated = False

    # -- read access ---------------------------------------------------------------------

    @property
    def weld_type_name(self) -> str:
        """The name of the weld joint type and of the slave-weld constraint type."""
        return self._weld_type_name

    @property
    def free_type_name(self) -> str:
        """The name of the free joint type, used for joints added to Ground."""
        return self._free_type_name

    @property
    def ground_name(self) -> str:
        """The name of Ground: the first body added."""
        if not self._bodies:
            raise GraphError("there is no Ground yet: the first body added is Ground")
        return self._bodies[0].name

    @property
    def joint_types(self) -> tuple[JointType, ...]:
        """The registered joint types; weld is number 0 and free number 1."""
        return tuple(self._joint_types)

    @property
    def bodies(self) -> tuple[Body, ...]:
        """Ground, the other input bodies in the order added, then any slave bodies."""
        return tuple(self._bodies)

    @property
    def joints(self) -> tuple[Joint, ...]:
        """The input joints in the order added, then any free joints added to Ground."""
        return tuple(self._joints)

    @property
    def mobilizers(self) -> tuple[Mobilizer, ...]:
        """The tree's mobilizers, Ground's placeholder first; empty until generated.

        Each mobilizer comes after the one that mobilizes its inboard body. Levels rise
        within one sweep of tree growth, but the mobilizers of a base body found later,
        and those of slave bodies, come after everything grown before them, as in Simbody.
        """
        return self._mobilizers

    @property
    def loop_constraints(self) -> tuple[LoopConstraint, ...]:
        """The slave welds (in slave order), then the loop-joint constraints (in joint order).

        This is the order in which OpenSim adds the corresponding constraints.
        """
        return self._loop_constraints

    def get_body_num(self, name: str) -> int | None:
        """Look up an input body.

        **Arguments:** ``name``: the body's name.

        **Returns:** its body number, or ``None`` if there is no such input body (slaves
        have no name lookup).
        """
        return self._body_num.get(name)

    def get_joint_num(self, name: str) -> int | None:
        """Look up a joint.

        **Arguments:** ``name``: the joint's name.

        **Returns:** its joint number, or ``None`` if there is no such joint.
        """
        return self._joint_num.get(name)

    def get_joint_type_num(self, name: str) -> int | None:
        """Look up a joint type.

        **Arguments:** ``name``: the type's name.

        **Returns:** its type number, or ``None`` if the type is unknown.
        """
        return self._type_num.get(name)

    # -- input ---------------------------------------------------------------------------

    def add_joint_type(
        self, name: str, num_mobilities: int, have_good_loop_joint_available: bool = False, user_ref: Any = None
    ) -> int:
        """Register a joint type.

        **Arguments:**

        - ``name``: a unique type name; the weld and free names are reserved.
        - ``num_mobilities``: its degrees of freedom, 0 to 6.
        - ``have_good_loop_joint_available``: whether a constraint can replace the joint
          when it closes a loop, instead of a mobilizer plus a slave body and a weld.
        - ``user_ref``: anything to keep with the type.

        **Returns:** the new type's number.
        """
        if isinstance(num_mobilities, bool) or not isinstance(num_mobilities, int) or not 0 <= num_mobilities <= 6:
            raise GraphError(
                f"joint type {name!r}: the number of mobilities must be an integer from 0 to 6, got {num_mobilities!r}"
            )
        if name in (self._weld_type_name, self._free_type_name):
            raise GraphError(
                f"joint type {name!r} is reserved for the predefined "
                f"{'weld' if name == self._weld_type_name else 'free'} type"
            )
        if name in self._type_num:
            raise GraphError(f"duplicate joint type {name!r}")
        self._type_num[name] = len(self._joint_types)
        self._joint_types.append(JointType(name, num_mobilities, bool(have_good_loop_joint_available), user_ref))
        return self._type_num[name]

    def add_body(self, name: str, mass: float, must_be_base_body: bool = False, user_ref: Any = None) -> None:
        """Add an input body; the first body added is Ground.

        **Arguments:**

        - ``name``: a unique body name. Joints refer to Ground by the first body's name.
        - ``mass``: a hint, at least 0. Give 0 for a massless body so that no branch of
          the tree ends in it. Ignored for Ground.
        - ``must_be_base_body``: connect the body to Ground by a free joint unless a
          joint already connects the two directly.
        - ``user_ref``: anything to keep with the body.
        """
        if name in self._body_num:
            raise GraphError(f"duplicate body name {name!r}")
        try:
            mass = float(mass)
        except (TypeError, ValueError):
            raise GraphError(f"body {name!r}: mass must be a number, got {mass!r}") from None
        if not mass >= 0.0:  # also catches nan
            raise GraphError(f"body {name!r}: mass must be >= 0, got {mass!r}")
        self._invalidate()
        self._body_num[name] = len(self._bodies)
        if not self._bodies:
            self._bodies.append(Body(name, math.inf, False, user_ref, is_ground=True, level=0))
        else:
            self._bodies.append(Body(name, mass, bool(must_be_base_body), user_ref))

    def delete_body(self, name: str) -> bool:
        """Delete an input body and every joint that names it; later bodies move down.

        **Arguments:** ``name``: the body's name. Ground cannot be deleted.

        **Returns:** ``True`` if the body was deleted, ``False`` if there was none.
        """
        num = self._body_num.get(name)
        if num is None:
            return False
        if num == 0:
            raise GraphError(f"body {name!r} is Ground and cannot be deleted")
        self._invalidate()
        body = self._bodies[num]
        for jnum in sorted(set(body.joints_as_parent + body.joints_as_child), reverse=True):
            self._remove_joint(jnum)
        del self._bodies[num]
        for joint in self._joints:
            if joint.parent_body > num:
                joint.parent_body -= 1
            if joint.child_body > num:
                joint.child_body -= 1
        self._body_num = {b.name: i for i, b in enumerate(self._bodies)}
        return True

    def add_joint(
        self,
        name: str,
        type: str,
        parent_body_name: str,
        child_body_name: str,
        must_be_loop_joint: bool = False,
        user_ref: Any = None,
    ) -> None:
        """Add an input joint.

        **Arguments:**

        - ``name``: a unique joint name.
        - ``type``: the name of a registered joint type (or the weld or free type).
        - ``parent_body_name``: an existing body; the inboard body if possible.
        - ``child_body_name``: another existing body; the outboard body if possible.
        - ``must_be_loop_joint``: never use this joint as a tree joint; it closes a loop.
        - ``user_ref``: anything to keep with the joint.
        """
        self._check_new_joint(name, type, parent_body_name, child_body_name)
        self._invalidate()
        self._append_joint(name, type, parent_body_name, child_body_name, bool(must_be_loop_joint), user_ref)

    def delete_joint(self, name: str) -> bool:
        """Delete a joint; later joints move down.

        **Arguments:** ``name``: the joint's name.

        **Returns:** ``True`` if the joint was deleted, ``False`` if there was none.
        """
        if name not in self._joint_num:
            return False
        self._invalidate()
        # Discarding the graph may itself have removed an added joint of this name.
        if name in self._joint_num:
            self._remove_joint(self._joint_num[name])
        return True

    # -- the graph -----------------------------------------------------------------------

    def generate_graph(self) -> None:
        """Build the tree and loop constraints from the current input (see the module doc).

        A previous graph is discarded first; on failure no graph is left.

        **Raises:** ``GraphError`` if there is no Ground, or a massless body would end a
        branch of the tree with a mobile joint (the message names the body).
        """
        if not self._bodies:
            raise GraphError("no bodies: add Ground (the first body) before generating")
        self.clear_graph()
        self._generated = True
        try:
            self._check_massless_and_add_base_joints()
            while True:
                self._grow_tree()
                base = self._choose_new_base_body()
                if base is None:
                    break
                self._connect_to_ground(base)
            welds, joint_constraints = self._break_loops()
        except GraphError:
            self.clear_graph()
            raise
        self._publish(welds, joint_constraints)

    def clear_graph(self) -> None:
        """Discard the generated graph: slaves, added joints, mobilizers and constraints."""
        self._generated = False
        self._bodies = [b for b in self._bodies if not b.is_slave]
        for body in self._bodies:
            body.level = 0 if body.is_ground else None
            body.mobilizer = None
            body.slaves = []
        for jnum in range(len(self._joints) - 1, -1, -1):
            if self._joints[jnum].is_added_base_joint:
                self._remove_joint(jnum)
        for joint in self._joints:
            joint.mobilizer = None
            joint.loop_constraint = None
        self._mobs = []
        self._mobilizers = ()
        self._loop_constraints = ()

    def dump_graph(self) -> str:
        """Describe the bodies, joints, mobilizers and loop constraints, Simbody-style.

        Missing numbers print as -1. Beyond Simbody's dump there is a line for Ground's
        placeholder mobilizer, and slave welds are listed with the loop constraints,
        marked ``SLAVE WELD``.

        **Returns:** the text.
        """

        def n(x):
            return -1 if x is None else x

        out = ["", "MULTIBODY GRAPH", "---------------", "", f"{len(self._bodies)} BODIES:"]
        for i, b in enumerate(self._bodies):
            out.append(
                "%2d %2d: %s mass=%g mob=%d master=%d %s"
                % (
                    i,
                    n(b.level),
                    b.name,
                    b.mass,
                    n(b.mobilizer),
                    n(b.master),
                    "MUST BE BASE BODY" if b.must_be_base_body else "",
                )
            )
            out.append(
                "  jointsAsParent=[%s]\t  jointsAsChild=[%s]\t  slaves=[%s]"
                % (
                    "".join(f" {j}" for j in b.joints_as_parent),
                    "".join(f" {j}" for j in b.joints_as_child),
                    "".join(f" {s}" for s in b.slaves),
                )
            )
        out += ["", f"{len(self._joints)} JOINTS:"]
        for i, j in enumerate(self._joints):
            out.append(
                "%2d %2d: %20s %20s->%-20s %10s loopc=%2d %s %s"
                % (
                    i,
                    n(j.mobilizer),
                    j.name,
                    self._bodies[j.parent_body].name,
                    self._bodies[j.child_body].name,
                    j.type_name,
                    n(j.loop_constraint),
                    "MUST BE LOOP" if j.must_be_loop_joint else "",
                    "ADDED BASE JOINT" if j.is_added_base_joint else "",
                )
            )
        out += ["", f"{len(self._mobilizers)} MOBILIZERS:"]
        for m in self._mobilizers:
            if m.is_ground:
                out.append(
                    "%2d %2d: %20s %20s->%-20s %10s %2d %3s"
                    % (m.index, m.level, "", "", self._bodies[m.outboard_body].name, "", -1, "")
                )
                continue
            out.append(
                "%2d %2d: %20s %20s->%-20s %10s %2d %3s"
                % (
                    m.index,
                    m.level,
                    self._joints[m.joint].name,
                    self._bodies[m.inboard_body].name,
                    self._bodies[m.outboard_body].name,
                    m.joint_type_name,
                    m.joint,
                    "REV" if m.is_reversed else "",
                )
            )
        out += ["", f"{len(self._loop_constraints)} LOOP CONSTRAINTS:"]
        for c in self._loop_constraints:
            out.append(
                "%d: %s parent=%s child=%s jointNum=%d%s"
                % (
                    c.index,
                    c.type_name,
                    self._bodies[c.parent_body].name,
                    self._bodies[c.child_body].name,
                    c.joint,
                    " SLAVE WELD" if c.is_slave_weld else "",
                )
            )
        out += ["", "----- END OF MULTIBODY GRAPH.", "", ""]
        return "\n".join(out)

    # -- input helpers -------------------------------------------------------------------

    def _invalidate(self) -> None:
        if self._generated:
            self.clear_graph()

    def _check_new_joint(self, name, type, parent, child) -> None:
        if name in self._joint_num:
            raise GraphError(f"duplicate joint name {name!r}")
        if type not in self._type_num:
            raise GraphError(
                f"joint {name!r} has unknown joint type {type!r}; known types: "
                f"{', '.join(repr(t.name) for t in self._joint_types)}"
            )
        for role, body in (("parent", parent), ("child", child)):
            if body not in self._body_num:
                raise GraphError(f"joint {name!r} has unknown {role} body {body!r}")
        if parent == child:
            raise GraphError(f"joint {name!r} connects body {parent!r} to itself")

    def _append_joint(self, name, type, parent, child, must_be_loop_joint, user_ref) -> Joint:
        num = len(self._joints)
        p, c = self._body_num[parent], self._body_num[child]
        joint = Joint(name, type, self._type_num[type], p, c, must_be_loop_joint, user_ref)
        self._joints.append(joint)
        self._joint_num[name] = num
        self._bodies[p].joints_as_parent.append(num)
        self._bodies[c].joints_as_child.append(num)
        return joint

    def _remove_joint(self, num: int) -> None:
        joint = self._joints.pop(num)
        self._bodies[joint.parent_body].joints_as_parent.remove(num)
        self._bodies[joint.child_body].joints_as_child.remove(num)
        for body in self._bodies:
            body.joints_as_parent = [j - (j > num) for j in body.joints_as_parent]
            body.joints_as_child = [j - (j > num) for j in body.joints_as_child]
        self._joint_num = {j.name: i for i, j in enumerate(self._joints)}

    # -- the algorithm -------------------------------------------------------------------

    def _check_massless_and_add_base_joints(self) -> None:
        for num in range(1, len(self._bodies)):
            body = self._bodies[num]
            if body.mass == 0:
                if body.num_joints == 0:
                    raise GraphError(
                        f"body {body.name!r} is massless and has no joint: a massless body "
                        f"must be internal to the tree or welded to a massful body"
                    )
                if body.num_joints == 1:
                    only = self._joints[(body.joints_as_child or body.joints_as_parent)[0]]
                    if self._joint_types[only.type_num].num_mobilities > 0:
                        raise GraphError(
                            f"body {body.name!r} is massless and its only joint {only.name!r} "
                            f"(type {only.type_name!r}) has mobilities, so it would end a "
                            f"branch of the tree; weld it or give it mass"
                        )
            if body.num_joints == 0 or (body.must_be_base_body and not self._connected_to_ground(num)):
                self._connect_to_ground(num)

    def _connected_to_ground(self, num: int) -> bool:
        body = self._bodies[num]
        return any(self._joints[j].child_body == 0 for j in body.joints_as_parent) or any(
            self._joints[j].parent_body == 0 for j in body.joints_as_child
        )

    def _connect_to_ground(self, num: int) -> None:
        name = f"#{self.ground_name}_{self._bodies[num].name}"
        if name in self._joint_num:
            raise GraphError(
                f"cannot add free joint {name!r} connecting body "
                f"{self._bodies[num].name!r} to Ground: a joint has that name"
            )
        joint = self._append_joint(name, self._free_type_name, self.ground_name, self._bodies[num].name, False, None)
        joint.is_added_base_joint = True

    def _add_mobilizer(self, jnum: int) -> int:
        """Make a joint with exactly one body in the tree a mobilizer; return the outboard."""
        joint = self._joints[jnum]
        parent = self._bodies[joint.parent_body]
        reversed_ = not parent.is_in_tree
        inb, outb = (joint.child_body, joint.parent_body) if reversed_ else (joint.parent_body, joint.child_body)
        outboard = self._bodies[outb]
        outboard.level = self._bodies[inb].level + 1
        outboard.mobilizer = joint.mobilizer = len(self._mobs)
        self._mobs.append(_Mob(jnum, outboard.level, inb, outb, reversed_))
        return outb

    def _heaviest_new_neighbour(self, num: int, forward: bool) -> int | None:
        """The tree-eligible joint from body ``num`` to the heaviest massful body outside
        the tree, over joints where ``num`` is the parent (``forward``) or the child."""
        body = self._bodies[num]
        best, best_mass = None, 0.0
        for jnum in body.joints_as_parent if forward else body.joints_as_child:
            joint = self._joints[jnum]
            if joint.has_mobilizer or joint.must_be_loop_joint:
                continue
            other = self._bodies[joint.child_body if forward else joint.parent_body]
            if not other.is_in_tree and other.mass > best_mass:  # ties: first joint
                best, best_mass = jnum, other.mass
        return best

    def _grow_tree(self) -> None:
        # Joints made mobilizers in this call. A massless body pulls in its outboard
        # neighbour one level early; that mobilizer still counts for its own level, so
        # growth does not stop there.
        added: set[int] = set()
        level = 1
        while True:
            grew = False
            for jnum, joint in enumerate(self._joints):
                if joint.has_mobilizer:
                    if jnum in added and self._mobs[joint.mobilizer].level == level:
                        grew = True
                    continue
                if joint.must_be_loop_joint:
                    continue
                parent, child = self._bodies[joint.parent_body], self._bodies[joint.child_body]
                if parent.is_in_tree == child.is_in_tree:
                    continue
                inboard = parent if parent.is_in_tree else child
                if inboard.level != level - 1:
                    continue
                outb = self._add_mobilizer(jnum)
                added.add(jnum)
                grew = True
                if self._joint_types[joint.type_num].num_mobilities == 0 or self._bodies[outb].mass > 0:
                    continue
                # A mobile massless body must not end a branch: extend to the heaviest
                # massful neighbour. Like Simbody, only massful neighbours are considered,
                # so two mobile massless bodies in a row are rejected.
                nxt = self._heaviest_new_neighbour(outb, forward=True)
                if nxt is None:
                    nxt = self._heaviest_new_neighbour(outb, forward=False)
                if nxt is None:
                    raise GraphError(
                        f"the tree would end in massless body {self._bodies[outb].name!r} "
                        f"(mobilized by joint {joint.name!r}, type {joint.type_name!r}) with "
                        f"no massful body outboard of it. Give the body mass, weld it, or "
                        f"change which joints close loops (must_be_loop_joint) or the "
                        f"parent/child order"
                    )
                self._add_mobilizer(nxt)
                added.add(nxt)
            if not grew:
                return
            level += 1

    def _choose_new_base_body(self) -> int | None:
        best, best_children, parent_only_seen = None, -1, False
        for num in range(1, len(self._bodies)):
            body = self._bodies[num]
            if body.is_in_tree:
                continue
            parent_only = not body.joints_as_child
            if parent_only_seen and not parent_only:
                continue
            n_children = len(body.joints_as_parent)
            if parent_only and not parent_only_seen:
                # The first parent-only body beats every body seen so far.
                parent_only_seen = True
                best, best_children = num, n_children
            elif n_children > best_children:
                best, best_children = num, n_children
        return best

    def _break_loops(self) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        """Close every loop; return (joint, master, slave) welds and (joint, parent, child)
        loop-joint constraints, in the order made."""
        welds, joint_constraints = [], []
        for jnum, joint in enumerate(self._joints):
            if joint.has_mobilizer:
                continue
            if self._joint_types[joint.type_num].have_good_loop_joint_available:
                joint_constraints.append((jnum, joint.parent_body, joint.child_body))
                continue
            master = self._bodies[joint.child_body]
            slave_num = len(self._bodies)
            master.slaves.append(slave_num)
            slave = Body(f"#{master.name}_slave_{len(master.slaves)}", math.nan, master=joint.child_body)
            self._bodies.append(slave)  # no name lookup for slaves
            slave.level = self._bodies[joint.parent_body].level + 1
            slave.mobilizer = joint.mobilizer = len(self._mobs)
            slave.joints_as_child.append(jnum)
            self._mobs.append(_Mob(jnum, slave.level, joint.parent_body, slave_num, False))
            welds.append((jnum, joint.child_body, slave_num))
        return welds, joint_constraints

    def _publish(self, welds, joint_constraints) -> None:
        """Freeze the built mobilizers and constraints into their public snapshots."""
        B, J = self._bodies, self._joints
        ground = B[0]
        ground.mobilizer = 0
        mobs = [
            Mobilizer(
                index=0,
                joint=None,
                level=0,
                inboard_body=None,
                outboard_body=0,
                outboard_master_body=0,
                is_reversed=False,
                is_added_base_mobilizer=False,
                is_slave_mobilizer=False,
                num_fragments=ground.num_fragments,
                joint_type_name=None,
                num_mobilities=0,
                outboard_body_ref=ground.user_ref,
                outboard_master_body_ref=ground.user_ref,
            )
        ]
        for m in self._mobs:
            joint, out = J[m.joint], B[m.outboard]
            jtype = self._joint_types[joint.type_num]
            master = out.master if out.is_slave else m.outboard
            mobs.append(
                Mobilizer(
                    index=len(mobs),
                    joint=m.joint,
                    level=m.level,
                    inboard_body=m.inboard,
                    outboard_body=m.outboard,
                    outboard_master_body=master,
                    is_reversed=m.reversed,
                    is_added_base_mobilizer=joint.is_added_base_joint,
                    is_slave_mobilizer=out.is_slave,
                    num_fragments=B[master].num_fragments,
                    joint_type_name=jtype.name,
                    num_mobilities=jtype.num_mobilities,
                    joint_ref=joint.user_ref,
                    joint_type_ref=jtype.user_ref,
                    inboard_body_ref=B[m.inboard].user_ref,
                    outboard_body_ref=out.user_ref,
                    outboard_master_body_ref=B[master].user_ref,
                )
            )
        # Mobilizer numbers so far were built without Ground's placeholder.
        for obj in (*B[1:], *J):
            if obj.mobilizer is not None:
                obj.mobilizer += 1
        constraints = []
        for jnum, master, slave in welds:
            constraints.append(
                LoopConstraint(
                    len(constraints),
                    self._weld_type_name,
                    jnum,
                    master,
                    slave,
                    True,
                    J[jnum].user_ref,
                    B[master].user_ref,
                    None,
                )
            )
        for jnum, parent, child in joint_constraints:
            J[jnum].loop_constraint = len(constraints)
            constraints.append(
                LoopConstraint(
                    len(constraints),
                    J[jnum].type_name,
                    jnum,
                    parent,
                    child,
                    False,
                    J[jnum].user_ref,
                    B[parent].user_ref,
                    B[child].user_ref,
                )
            )
        self._mobilizers = tuple(mobs)
        self._loop_constraints = tuple(constraints)
