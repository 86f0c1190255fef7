"""The Model: the root component, with functional editing, lookup and ``build``.

A Model owns OpenSim's sets (``bodyset``, ``jointset``, ``forceset``, ...) and Ground.
Every edit returns a new Model: ``model = model.add(body)``. Paths are OpenSim's:
``/ground``, ``/bodyset/humerus``, ``/jointset/elbow/elbow_coord_0``,
``/forceset/biceps``; a component added with no set of its own becomes a direct child
(``/reporter``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

import equinox as eqx
import numpy as np

from .component import Component, ModelError, Set, check_name, flag, join_path, prop, resolve_path, split_path, walk
from .mechanics.frames import Ground
from .system import build_system

__all__ = ["Model", "RemovalReport", "resolve_path"]

log = logging.getLogger("simjax")

_SET_NAMES = (
    "bodyset",
    "jointset",
    "controllerset",
    "constraintset",
    "forceset",
    "markerset",
    "contactgeometryset",
    "probeset",
)


@dataclasses.dataclass(frozen=True)
class RemovalReport:
    """What ``Model.remove`` did.

    ``removed``: paths removed (the requested one, and components that held hard
    references to anything removed); ``pruned``: ``(path, socket or input, reference)``
    soft references dropped.
    """

    removed: tuple[str, ...]
    pruned: tuple[tuple[str, str, str], ...]

    def __str__(self) -> str:
        lines = [f"removed {p}" for p in self.removed]
        lines += [f"pruned {p}.{s} -> {r}" for p, s, r in self.pruned]
        return "\n".join(lines)


def _ref_targets(comp: Component, path: str) -> Iterator[tuple[str, str, str, bool]]:
    """``(socket/input name, reference string, resolved target path, hard)`` of a component."""
    for name, f in comp.socket_fields().items():
        value = getattr(comp, name)
        for ref in value if f.metadata["many"] else (value,):
            if ref:
                yield name, ref, resolve_path(ref, path), f.metadata["hard"]
    for name in comp.input_fields():
        for conn in getattr(comp, name):
            yield name, conn, resolve_path(conn.rpartition("|")[0], path), False


def _within(path: str, roots: set[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or below one (its ancestors looked up)."""
    while path:
        if path in roots:
            return True
        path = path[: path.rfind("/")]
    return False


class Model(Component):
    """The root of a component tree (OpenSim Model).

    **Fields:** ``gravity`` (m/s^2, in Ground); ``ground``; the sets ``bodyset``,
    ``jointset``, ``controllerset``, ``constraintset``, ``forceset``, ``markerset``,
    ``contactgeometryset``, ``probeset``; ``components`` (other direct children);
    ``credits`` and ``publications`` (text kept for files); ``use_quaternions``;
    ``reported_warnings`` (``ModelWarning`` texts already reported, e.g. by
    ``load_osim`` with their file and line: ``build`` does not repeat them).
    """

    gravity: np.ndarray = prop((0.0, -9.80665, 0.0), doc="Acceleration of gravity in Ground (m/s^2).", shape=(3,))
    ground: Ground = None
    bodyset: Set = None
    jointset: Set = None
    controllerset: Set = None
    constraintset: Set = None
    forceset: Set = None
    markerset: Set = None
    contactgeometryset: Set = None
    probeset: Set = None
    credits: str = eqx.field(static=True, default="")
    publications: str = eqx.field(static=True, default="")
    use_quaternions: bool = flag(
        False, doc="Parametrize Ball and Free joints by quaternions instead of OpenSim's body-fixed XYZ angles."
    )
    reported_warnings: tuple = eqx.field(static=True, default=())

    _requires_children: ClassVar[bool] = False

    # Plain Python attribute access: a Model's methods (find, add, set, ...) are
    # structural queries and edits, never functions to trace. Equinox's own
    # ``__getattribute__`` wraps every method it returns in a ``BoundMethod`` pytree,
    # which flattens the whole model: each ``model.find(path)`` would then cost time
    # proportional to the model's size, and building a model (hundreds of lookups)
    # time quadratic in it.
    __getattribute__ = object.__getattribute__

    def __init__(
        self,
        name: str = "model",
        gravity=(0.0, -9.80665, 0.0),
        *,
        credits: str = "",
        publications: str = "",
        use_quaternions: bool = False,
    ):
        self.name = name
        self.gravity = gravity
        self.ground = Ground()
        for s in _SET_NAMES:
            setattr(self, s, Set(s))
        self.components = ()
        self.credits = credits
        self.publications = publications
        self.use_quaternions = use_quaternions

    # -- lookup -----------------------------------------------------------------------

    def walk(self) -> Iterator[tuple[str, Component]]:
        """Yield ``(path, component)`` for every component, in deterministic pre-order."""
        return walk(self, "/")

    def find(self, path: str, relative_to: str = "/") -> Component:
        """The component at ``path`` (absolute, or relative to ``relative_to``; ``..`` ok).

        To look up many paths, build ``index()`` once instead.

        **Raises:** ``KeyError`` naming the path if nothing is there.
        """
        full = resolve_path(path, relative_to)
        comp: Component = self
        for part in split_path(full):
            nxt = type(comp).child(comp, part)
            if nxt is None:
                raise KeyError(f"no component at {full!r} (no {part!r} under {comp.name!r})")
            comp = nxt
        return comp

    def index(self) -> dict[str, Component]:
        """``{path: component}`` for every absolute path ``find`` resolves, the root
        (``"/"``) included, made in one walk of the tree.

        Code that looks up many paths (build, file readers) makes it once and uses
        it instead of calling ``find`` for each path. Like ``find``, it takes the first
        of two siblings with the same name (which ``build`` rejects).
        """
        out: dict[str, Component] = {"/": self}

        def rec(comp: Component, path: str) -> None:
            for c in type(comp).children(comp):
                p = join_path(path, c.name)
                if p not in out:
                    out[p] = c
                    rec(c, p)

        rec(self, "/")
        return out

    def has(self, path: str) -> bool:
        """Whether a component exists at the absolute ``path``."""
        try:
            self.find(path)
            return True
        except KeyError:
            return False

    def components_of(self, cls: type | None = None) -> list[Component]:
        """All components that are instances of ``cls`` (all if ``None``), in tree order."""
        return [c for _, c in self.walk() if cls is None or isinstance(c, cls)]

    def paths(self, cls: type | None = None) -> list[str]:
        """Paths of all components that are instances of ``cls``, in tree order."""
        return [p for p, c in self.walk() if cls is None or isinstance(c, cls)]

    def path_of_name(self, name: str, cls: type | None = None) -> str:
        """The path of the unique component called ``name`` (optionally of class ``cls``).

        **Raises:** ``KeyError`` if there is none or more than one.
        """
        hits = [p for p, c in self.walk() if c.name == name and (cls is None or isinstance(c, cls))]
        if len(hits) != 1:
            what = "no component" if not hits else f"{len(hits)} components ({', '.join(hits)})"
            raise KeyError(f"{what} named {name!r}" + (f" of type {cls.__name__}" if cls else ""))
        return hits[0]

    # -- functional edits -------------------------------------------------------------

    def _edit(self, path: str, fn) -> Model:
        """Rebuild the chain of owners from the root to ``path`` with ``fn(component)``.

        ``fn`` returns the replacement, or ``None`` to remove the component.
        """
        parts = split_path(resolve_path(path))
        if not parts:
            raise ModelError("/", "the model root cannot be replaced or removed this way")

        def rec(comp: Component, depth: int, where: str) -> Component:
            cls = type(comp)  # methods through the class: see the component module
            name = parts[depth]
            child = cls.child(comp, name)
            if child is None:
                raise KeyError(f"no component at {join_path(where, name)!r}")
            new = fn(child) if depth == len(parts) - 1 else rec(child, depth + 1, join_path(where, name))
            field, idx = cls._child_slot(comp, name)
            if idx is None:
                if new is None:
                    raise ModelError(join_path(where, name), "a required component cannot be removed")
                return cls.replace(comp, **{field: new})
            items = list(getattr(comp, field))
            if new is None:
                del items[idx]
            else:
                items[idx] = new
            return cls.replace(comp, **{field: tuple(items)})

        return rec(self, 0, "/")

    def add(self, component: Component, to: str | None = None) -> Model:
        """A new model with ``component`` added.

        **Arguments:**

        - ``component``: the component to add.
        - ``to``: the path of the owner. By default the set named by the component
          class's ``set_name`` (bodies to ``/bodyset``, joints to ``/jointset``, forces
          to ``/forceset``, ...), else the model itself.

        **Raises:** ``ModelError`` if the owner already has a child of that name.
        """
        if not isinstance(component, Component):
            raise TypeError(f"can only add Components, got {type(component).__name__}")
        if to is None:
            set_name = getattr(type(component), "set_name", None)
            to = "/" + set_name if set_name else "/"
        owner_path = resolve_path(to)
        owner = self.find(owner_path)
        check_name(component.name, owner_path)
        if type(owner).child(owner, component.name) is not None:
            raise ModelError(owner_path, f"already has a component named {component.name!r}")
        field = "objects" if isinstance(owner, Set) else "components"

        def append(comp: Component) -> Component:
            return type(comp).replace(comp, **{field: tuple(getattr(comp, field)) + (component,)})

        return append(self) if owner_path == "/" else self._edit(owner_path, append)

    def replace_component(self, path: str, component: Component) -> Model:
        """A new model with the component at ``path`` replaced by ``component``.

        The replacement must keep the name (rename with ``rename``).
        """

        def swap(old: Component) -> Component:
            if component.name != old.name:
                raise ModelError(path, f"replacement is named {component.name!r}; use rename() to rename")
            return component

        return self._edit(path, swap)

    def update(self, path: str, fn) -> Model:
        """A new model with the component at ``path`` replaced by ``fn(component)``."""
        return self._edit(path, fn)

    def set(self, path: str, **properties: Any) -> Model:
        """A new model with properties of the component at ``path`` changed.

        ``model.set("/bodyset/humerus", mass=2.0)``. Equivalent to ``eqx.tree_at`` on
        the property leaf; a numeric change keeps the compiled topology.
        """
        if resolve_path(path) == "/":
            return self.replace(**properties)
        return self._edit(path, lambda c: c.replace(**properties))

    def rename(self, path: str, new_name: str) -> Model:
        """A new model with the component at ``path`` renamed (references not updated)."""
        parent = resolve_path(path + "/..")
        check_name(new_name, parent)
        owner = self.find(parent)
        if type(owner).child(owner, new_name) is not None:
            raise ModelError(parent, f"already has a component named {new_name!r}")
        return self._edit(path, lambda c: c.replace(name=new_name))

    def connect(self, path: str, socket_or_input: str, target: str, alias: str | None = None) -> Model:
        """A new model with a socket or input of the component at ``path`` connected.

        **Arguments:**

        - ``path``: the component that owns the socket or input.
        - ``socket_or_input``: its name (``"parent_frame"``, ``"inputs"``, ...).
        - ``target``: a component path for a socket; ``"path|output[:channel]"`` for an
          input.
        - ``alias``: an annotation for an input connection (OpenSim's ``(alias)``).

        List sockets and list inputs append; single ones replace.
        """
        comp = self.find(path)
        sockets, inputs = comp.socket_fields(), comp.input_fields()
        if socket_or_input in sockets:
            f = sockets[socket_or_input]
            value = (tuple(getattr(comp, f.name)) + (target,)) if f.metadata["many"] else target
        elif socket_or_input in inputs:
            f = inputs[socket_or_input]
            if "|" not in target:
                raise ModelError(path, f"input connection {target!r} must look like 'path|output'")
            conn = target + (f"({alias})" if alias else "")
            value = (tuple(getattr(comp, f.name)) + (conn,)) if f.metadata["many"] else (conn,)
        else:
            raise ModelError(path, f"{type(comp).__name__} has no socket or input named {socket_or_input!r}")
        return self._edit(path, lambda c: c.replace(**{socket_or_input: value}))

    def removal_report(self, path) -> RemovalReport:
        """What ``remove(path)`` would remove and prune (ArtiSynth §1.2 semantics);
        ``path`` may be several paths, removed together."""
        targets = [resolve_path(p) for p in ([path] if isinstance(path, str) else path)]
        for target in targets:
            self.find(target)
        removed = set(targets)
        entries = list(self.walk())
        changed = True
        while changed:
            changed = False
            for p, c in entries:
                if _within(p, removed):
                    continue
                if any(hard and _within(t, removed) for _, _, t, hard in _ref_targets(c, p)):
                    removed.add(p)
                    changed = True
            # owners that cannot lose a child go with it
            for p, c in entries:
                if not _within(p, removed) and getattr(type(c), "_requires_children", False):
                    if any(_within(join_path(p, k.name), removed) for k in type(c).children(c)):
                        removed.add(p)
                        changed = True
        pruned = []
        for p, c in entries:
            if _within(p, removed):
                continue
            for name, ref, t, hard in _ref_targets(c, p):
                if not hard and _within(t, removed):
                    pruned.append((p, name, ref))
        top = sorted(r for r in removed if not _within(r, removed - {r}))
        return RemovalReport(tuple(top), tuple(pruned))

    def remove(self, path, return_report: bool = False):
        """A new model without the component at ``path`` (or the components at several
        paths, removed together).

        Components holding hard references (sockets) to anything removed are removed
        too; soft references (inputs, soft sockets) to it are pruned. The removal is
        logged to the ``simjax`` logger.

        **Returns:** the new Model, or ``(Model, RemovalReport)`` if ``return_report``.
        """
        report = self.removal_report(path)
        model = self.apply_removal(report)
        return (model, report) if return_report else model

    def apply_removal(self, report: RemovalReport):
        """A new model with the removals and prunings of ``report`` (``removal_report``
        of this model) done, logged to the ``simjax`` logger.

        **Returns:** the new Model.
        """
        model = self
        for p in sorted(report.removed, key=lambda s: -len(split_path(s))):
            model = model._edit(p, lambda c: None)
        for p, name, ref in report.pruned:
            model = model._edit(p, lambda c, name=name, ref=ref: c.prune_reference(name, ref))
        log.info("model %s: %s", self.name, str(report).replace("\n", "; "))
        return model

    # -- build --------------------------------------------------------------------------

    def build(self):
        """Finalize, connect and compile the model into a ``System`` (OpenSim initSystem).

        Checks every property (naming component path, property and value), resolves
        every socket and input, runs the multibody graph maker and lays out the state.
        The topology is cached: building again from a model of the same structure
        (only numeric properties changed) returns a System with the same topology, so
        jitted functions do not recompile.
        """
        return build_system(self)
