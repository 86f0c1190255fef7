"""The registry mapping OpenSim classes onto simjax classes, with the default mapping.

Each OpenSim class the reader and writer know has one ``ComponentIO`` (components)
or ``FunctionIO`` (``OpenSim::Function`` subclasses) entry, keyed by the OpenSim
class name. Adding a component type to the ``.osim`` reader and writer is one call::

    from simjax.io.osim import register
    register("HuntCrossleyForce", HuntCrossleyForce, order=(...))

**The default mapping** (``ComponentIO``) needs no code when simjax field names are
OpenSim's property names:

- ``<NAME>`` elements of numeric ``prop`` fields hold numbers (``Inf``/``NaN``
  allowed); of static ``flag`` fields a bool (``true``/``false``), int or string;
- ``<socket_NAME>`` holds a path (list sockets: space-separated paths), stored as
  written (absolute, or relative to the component) and checked after the whole
  document is read;
- ``<input_NAME>`` holds connection strings ``path|output[:channel][(alias)]``;
- a tuple field of components (``components``, ``coordinates``, ``frames``,
  ``objects``) is an element of that name holding one element per component;
- a ``Function`` field is ``<NAME><Class>...</Class></NAME>`` or ``<Class name="NAME">``;
- a single-component field (default ``None``) is OpenSim's one-object property
  ``<Class name="NAME">`` (``<GeometryPath name="path">``), written in that form.

**Options** of ``register``/``ComponentIO``:

- ``order``: OpenSim's property order (the writer sorts elements by it);
- ``aliases``: ``{xml tag: field}`` where the names differ (``appliesForce``);
- ``keep``: tags of display-only content kept verbatim in the component's ``extras``
  (``{tag: True}``, or ``{tag: predicate(node, rc, path) -> bool}``; a predicate
  returning False drops the element and must have recorded why);
- ``required``: tags that must be present;
- ``read_hooks``: ``{tag: fn(io, node, rc, path) -> dict of field values}`` for
  elements the default cannot map (a name reference, a nested structure); hooks may
  call ``rc.defer`` to resolve names once the whole document has been read;
- ``write_hooks``: ``{tag: fn(io, comp, wc, path) -> list of Node}``, the inverse;
- ``skip_fields``: simjax fields the default writer must leave alone (written by
  hooks, or not OpenSim properties);
- ``skippable``: whether ``strict=False`` may drop an unsupported part of it.

Subclass ``ComponentIO`` (override ``read``/``write``) for anything else.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from ...component import Component, ModelError
from ...functions import Function
from ..tables import format_float
from ._xml import Node, parse, serialize
from .errors import OsimError, Unsupported

__all__ = [
    "ComponentIO",
    "FunctionIO",
    "ReadContext",
    "WriteContext",
    "SkipComponent",
    "register",
    "register_function",
    "component_io",
    "function_io",
    "io_for_class",
    "io_for_function",
    "registered_classes",
    "construct",
    "format_number",
    "format_numbers",
]

_COMPONENTS: dict[str, ComponentIO] = {}
_FUNCTIONS: dict[str, FunctionIO] = {}

_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)
_TRUE, _FALSE = {"true", "1"}, {"false", "0"}


class SkipComponent(Exception):
    """Raised inside a reader to drop the component being read (the reason has
    already been recorded with ``ReadContext.unsupported``)."""


# -- numbers --------------------------------------------------------------------------


def format_number(x: Any) -> str:
    """A float as OpenSim writes it: shortest round-trip text, ``Inf``/``-Inf``/``NaN``."""
    x = float(x)
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Inf" if x > 0 else "-Inf"
    return format_float(x)


def format_numbers(values: Any) -> str:
    """Space-separated numbers (a scalar gives one)."""
    return " ".join(format_number(v) for v in np.ravel(np.asarray(values, dtype=float)))


# -- contexts -------------------------------------------------------------------------


@dataclasses.dataclass
class Deferred:
    """A reference by name, resolved once the whole document has been read."""

    path: str
    field: str
    kind: str
    names: tuple
    line: int
    many: bool


def with_defaults(node: Node, default: Node) -> Node:
    """``node`` with the properties it omits taken from ``default``, the element of
    its class in the model's ``<defaults>``.

    OpenSim registers each object of ``<defaults>`` as the default instance of its
    class, so a component of exactly that class read afterwards starts from it: a
    property the component's element omits has the default object's value. A
    property the element gives replaces the default's whole (an object-valued one
    too).

    **Returns:** a new ``Node`` (``node`` itself when nothing is omitted).
    """
    # a property is <property>, or <Class name="property"> or <Class> for an object-valued one
    tags = {c.tag for c in node.children}
    names = {c.name for c in node.children if c.name}
    missing = [d for d in default.children if d.tag not in tags and not (d.name and d.name in names)]
    if not missing:
        return node
    return Node(node.tag, node.attrib, node.text, node.children + missing, node.line)


class ReadContext:
    """State of one ``load_osim``: the file, its version, collected problems.

    **Attributes:** ``file`` (for messages), ``base_dir`` (for mesh files),
    ``version`` (the document version), ``strict``, ``unsupported`` (list of
    ``Unsupported``), ``deferred`` (name references), ``lines`` (component path →
    line), ``socket_lines`` ((path, socket) → line), ``skipped`` (paths dropped),
    ``missing_meshes``, ``defaults`` (OpenSim class → its element in the model's
    ``<defaults>``).
    """

    def __init__(self, file: str, base_dir=None, version: int = 40600, strict: bool = True):
        self.file = file
        self.base_dir = base_dir
        self.version = version
        self.strict = strict
        self.unsupported: list[Unsupported] = []
        self.deferred: list[Deferred] = []
        self.lines: dict[str, int] = {}
        self.socket_lines: dict[tuple[str, str], int] = {}
        self.skipped: dict[str, str] = {}
        self.missing_meshes: list[str] = []
        self.defaults: dict[str, Node] = {}

    def error(
        self, node: Node | int | None, path: str, message: str, prop: str | None = None, value: Any = None
    ) -> OsimError:
        """An ``OsimError`` at ``node`` (or a line number) for the component ``path``."""
        line = node.line if isinstance(node, Node) else (node or 0)
        return OsimError(self.file, line, path, message, prop=prop, value=value)

    def unsupported_content(self, node: Node, what: str, path: str, reason: str = "", skippable: bool = True) -> None:
        """Record content simjax does not model (reported all at once at the end)."""
        self.unsupported.append(Unsupported(what, path, node.line, reason, skippable))

    def defer(self, path: str, field: str, kind: str, names, node: Node, many: bool = False) -> None:
        """Resolve ``names`` (of a ``kind`` the reader knows: ``"coordinate"``,
        ``"body"``, ``"frame"``, ``"actuator"``) into the socket ``field`` of the
        component at ``path`` after the whole document is read."""
        names = tuple(names) if many else (names,)
        self.deferred.append(Deferred(path, field, kind, names, node.line, many))

    # -- value parsing ------------------------------------------------------------------

    def numbers(self, node: Node, path: str, count: int | None = None, prop: str | None = None) -> np.ndarray:
        """The numbers in ``node``'s text; ``count`` checks how many."""
        prop = prop or node.tag
        tokens = node.text.split()
        out = []
        for tok in tokens:
            if not _NUMBER.fullmatch(tok):
                raise self.error(node, path, f"{tok!r} is not a number", prop=prop, value=node.text)
            out.append(float(tok))
        if count is not None and len(out) != count:
            raise self.error(node, path, f"expected {count} number(s), got {len(out)}", prop=prop, value=node.text)
        return np.asarray(out, dtype=np.float64)

    def number(self, node: Node, path: str, prop: str | None = None) -> float:
        """The single number in ``node``'s text."""
        return float(self.numbers(node, path, 1, prop)[0])

    def boolean(self, node: Node, path: str, prop: str | None = None) -> bool:
        """``true``/``false`` (or ``1``/``0``, any case) in ``node``'s text."""
        t = node.text.strip().lower()
        if t in _TRUE:
            return True
        if t in _FALSE:
            return False
        raise self.error(node, path, "expected true or false", prop=prop or node.tag, value=node.text)

    def integer(self, node: Node, path: str, prop: str | None = None) -> int:
        """An integer in ``node``'s text."""
        t = node.text.strip()
        if not re.fullmatch(r"[+-]?\d{1,18}", t):
            raise self.error(node, path, "expected an integer", prop=prop or node.tag, value=node.text)
        return int(t)

    # -- nested reading -------------------------------------------------------------------

    def read_component(self, node: Node, parent_path: str, skippable: bool = True) -> Component | None:
        """Read the component element ``node`` owned by ``parent_path``.

        **Returns:** the component, or ``None`` when it is unsupported (recorded) or
        was dropped (``SkipComponent``).
        """
        name = node.attrib.get("name")
        entry = _COMPONENTS.get(node.tag)
        if "file" in node.attrib:
            raise self.error(
                node,
                parent_path,
                f"<{node.tag}> is stored in a separate file ({node.attrib['file']!r}); such files are not supported",
            )
        if not name:
            if entry is None:
                self.unsupported_content(
                    node, node.tag, parent_path + "/<unnamed>", "not a known OpenSim component", skippable
                )
                return None
            raise self.error(node, parent_path, f"<{node.tag}> has no name attribute")
        path = ("" if parent_path == "/" else parent_path) + "/" + name
        if entry is None:
            self.unsupported_content(node, node.tag, path, "", skippable)
            self.skipped[path] = node.tag
            return None
        self.lines[path] = node.line
        if node.tag in self.defaults:
            node = with_defaults(node, self.defaults[node.tag])
        try:
            return entry.read(node, self, path)
        except SkipComponent:
            self.skipped[path] = node.tag
            return None

    def read_set(self, node: Node, parent_path: str, skippable: bool = True) -> tuple:
        """The components in the ``<objects>`` of the set element ``node`` (an OpenSim
        ``Set``), read as owned by ``parent_path``; unsupported ones are left out
        (recorded)."""
        objects = node.find("objects")
        children = objects.children if objects is not None else []
        items = (self.read_component(c, parent_path, skippable) for c in children)
        return tuple(c for c in items if c is not None)

    def read_function(self, node: Node, path: str, skippable: bool = True) -> Function:
        """Read a Function element (``path`` names the property holding it).

        **Raises:** ``SkipComponent`` for an unknown Function class (recorded).
        """
        entry = _FUNCTIONS.get(node.tag)
        if entry is None:
            self.unsupported_content(node, node.tag, path, "not a supported Function", skippable)
            raise SkipComponent(path)
        return entry.read(node, self, path)

    def function_property(
        self, owner: Node, prop: str, path: str, skippable: bool = True, node: Node | None = None
    ) -> Function | None:
        """The Function held by the property ``prop`` of the element ``owner``.

        Accepts OpenSim's forms: ``<prop><Class>...</Class></prop>`` (empty: ``None``),
        ``<Class name="prop">...</Class>`` and, failing both, the first unnamed
        ``<Class>`` child. Pass ``node`` when the element has already been found.

        **Raises:** ``SkipComponent`` for an unknown Function class (recorded).
        """
        if node is None:
            node = owner.find(prop)
        if node is None:
            node = next((c for c in owner.children if c.attrib.get("name") == prop and c.tag in _FUNCTIONS), None)
        if node is None:
            node = next((c for c in owner.children if not c.attrib.get("name") and c.tag in _FUNCTIONS), None)
        if node is None:
            return None
        if node.tag != prop:
            return self.read_function(node, path + "/" + prop, skippable)
        if not node.children:
            return None
        if len(node.children) > 1:
            raise self.error(
                node.children[1], path, f"property '{prop}' holds {len(node.children)} functions; expected one"
            )
        return self.read_function(node.children[0], path + "/" + prop, skippable)


class WriteContext:
    """State of one ``save_osim``: the model (to resolve socket targets); with
    ``strict=False`` components that have no OpenSim class are left out and listed
    in ``left_out``."""

    def __init__(self, model, file: str = "<model>", strict: bool = True):
        self.model = model
        self.file = file
        self.strict = strict
        self.left_out: list[str] = []

    def error(self, path: str, message: str, prop: str | None = None, value: Any = None) -> OsimError:
        """An ``OsimError`` for the component at ``path`` (no line: a model in memory)."""
        return OsimError(self.file, 0, path, message, prop=prop, value=value)

    def target(self, path: str, ref: str, prop: str) -> tuple[str, Component]:
        """The absolute path and component a socket value ``ref`` of ``path`` points at."""
        from ...model import resolve_path

        try:
            full = resolve_path(ref, path)
            return full, self.model.find(full)
        except (KeyError, ModelError):
            raise self.error(path, f"refers to {ref!r}, but there is no such component", prop=prop, value=ref) from None

    def write_function(self, fn: Function, name: str | None = None) -> Node:
        """A Function as an element (``name``: the ``name`` attribute to write)."""
        entry = io_for_function(type(fn))
        if entry is None:
            raise self.error("", f"no .osim writer for function class {type(fn).__name__}")
        return entry.write(fn, self, name)


# -- construction ---------------------------------------------------------------------------


def construct(cls: type, values: dict) -> Component:
    """Build ``cls`` from field values without calling its ``__init__`` (whose
    signature differs per class): missing fields take their declared defaults,
    properties go through their converters, and every ``__check_init__`` runs."""
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.name in values:
            v = values[f.name]
        elif f.default is not dataclasses.MISSING:
            v = f.default
        elif f.default_factory is not dataclasses.MISSING:  # pragma: no cover - none declared today
            v = f.default_factory()
        else:
            v = None
        conv = f.metadata.get("converter")
        if conv is not None:
            v = conv(v)
        object.__setattr__(obj, f.name, v)
    for klass in reversed(cls.__mro__):
        check = vars(klass).get("__check_init__")
        if check is not None:
            check(obj)
    return obj


def _is_component_list(f: dataclasses.Field) -> bool:
    return not f.metadata.get("static") and "property" not in f.metadata and f.default == () and f.name != "extras"


def _is_function_field(f: dataclasses.Field) -> bool:
    return "Function" in str(f.type) and not f.metadata.get("static")


def _is_component_field(f: dataclasses.Field) -> bool:
    return (
        not f.metadata.get("static")
        and "property" not in f.metadata
        and f.default is None
        and not _is_function_field(f)
    )


# -- components -------------------------------------------------------------------------------


class ComponentIO:
    """How one OpenSim component class maps onto a simjax Component class.

    See the module docstring for the default mapping and the options.
    """

    def __init__(
        self,
        osim_class: str,
        cls: type,
        *,
        order: tuple = (),
        aliases: dict | None = None,
        keep: dict | None = None,
        required: tuple = (),
        read_hooks: dict | None = None,
        write_hooks: dict | None = None,
        skip_fields: tuple = (),
        ignore: tuple = (),
        skippable: bool = True,
    ):
        self.osim_class = osim_class
        self.cls = cls
        self.order = tuple(order)
        self.aliases = {"appliesForce": "applies_force", **(aliases or {})}
        self.tags = {v: k for k, v in self.aliases.items()}
        self.keep = dict(keep or {})
        self.required = tuple(required)
        self.read_hooks = dict(read_hooks or {})
        self.write_hooks = dict(write_hooks or {})
        self.skip_fields = set(skip_fields) | {"name", "extras"}
        self.ignore = set(ignore)
        self.skippable = skippable
        fields = dataclasses.fields(cls)
        self.props = {f.name: f for f in fields if "property" in f.metadata}
        self.flags = {f.name: f for f in fields if "flag" in f.metadata}
        self.sockets = {f.name: f for f in fields if "socket" in f.metadata}
        self.inputs = {f.name: f for f in fields if "input" in f.metadata}
        self.lists = {f.name: f for f in fields if _is_component_list(f)}
        self.functions = {f.name: f for f in fields if _is_function_field(f)}
        self.objects = {f.name: f for f in fields if _is_component_field(f)}
        self.fields = fields

    def __repr__(self) -> str:
        return f"ComponentIO({self.osim_class!r} -> {self.cls.__name__})"

    # -- reading --------------------------------------------------------------------------

    def read(self, node: Node, rc: ReadContext, path: str) -> Component:
        """Build the component from its element (see the module docstring)."""
        values: dict[str, Any] = {"name": node.attrib["name"]}
        extras: list[tuple[str, str]] = []
        seen: dict[str, int] = {}
        for child in node.children:
            # one-object properties are tagged by class and told apart by their name
            key = child.tag + (f"[{child.attrib['name']}]" if "name" in child.attrib else "")
            if key in seen and child.tag not in self.keep:
                raise rc.error(child, path, f"property <{child.tag}> given twice (first at line {seen[key]})")
            seen[key] = child.line
            self.read_element(child, rc, path, values, extras)
        tags = {c.tag for c in node.children}
        for tag in self.required:
            if tag not in tags:
                raise rc.error(node, path, f"{self.osim_class} is missing the required property <{tag}>")
        if extras:
            values["extras"] = tuple(extras)
        return self.build(node, rc, path, values)

    def read_element(self, child: Node, rc: ReadContext, path: str, values: dict, extras: list) -> None:
        """Map one child element of the component's element into ``values``."""
        tag = child.tag
        if tag in self.read_hooks:
            values.update(self.read_hooks[tag](self, child, rc, path))
            return
        if tag.startswith("socket_") and tag[7:] in self.sockets:
            name = tag[7:]
            rc.socket_lines[(path, name)] = child.line
            refs = child.text.split()
            if self.sockets[name].metadata["many"]:
                values[name] = tuple(refs)
            elif len(refs) > 1:
                raise rc.error(
                    child, path, "a single-value socket holds more than one path", prop=tag, value=child.text
                )
            else:
                values[name] = refs[0] if refs else ""
            return
        if tag.startswith("input_") and tag[6:] in self.inputs:
            values[tag[6:]] = tuple(child.text.split())
            return
        field = self.aliases.get(tag, tag)
        if field in self.props:
            shape = self.props[field].metadata.get("shape") or ()
            count = int(np.prod(shape)) if shape else 1
            arr = rc.numbers(child, path, None, prop=tag)
            if shape == () and arr.size != 1:
                raise rc.error(child, path, f"expected 1 number, got {arr.size}", prop=tag, value=child.text)
            if shape and arr.size != count:
                raise rc.error(child, path, f"expected {count} numbers, got {arr.size}", prop=tag, value=child.text)
            values[field] = arr.reshape(shape) if shape else arr[0]
        elif field in self.flags:
            default = self.flags[field].default
            if isinstance(default, bool):
                values[field] = rc.boolean(child, path, tag)
            elif isinstance(default, int):
                values[field] = rc.integer(child, path, tag)
            else:
                values[field] = child.text
        elif field in self.lists:
            items = []
            for c in child.children:
                comp = rc.read_component(c, path, self.skippable)
                if comp is not None:
                    items.append(comp)
            values[field] = tuple(items)
        elif field in self.functions:
            values[field] = rc.function_property(child, field, path, self.skippable, node=child)
        elif child.attrib.get("name") in self.functions and child.tag in _FUNCTIONS:
            values[child.attrib["name"]] = rc.read_function(child, path + "/" + child.attrib["name"], self.skippable)
        elif child.attrib.get("name") in self.objects and tag[:1].isupper():
            # a one-object property: <GeometryPath name="path">
            values[child.attrib["name"]] = rc.read_component(child, path, self.skippable)
        elif field in self.objects and len(child.children) <= 1:
            # the same in its long form: <path><GeometryPath name="path"/></path>
            comps = [rc.read_component(c, path, self.skippable) for c in child.children]
            values[field] = comps[0] if comps else None
        elif tag in self.keep:
            # a predicate returning False has recorded why the element is dropped
            if self.keep[tag] is True or self.keep[tag](child, rc, path):
                extras.append((tag, serialize(child)))
        elif tag in self.ignore:
            pass
        else:
            # ignoring a property never removes structure, so it is always skippable
            rc.unsupported_content(child, f"<{tag}>", path, f"unknown property of {self.osim_class}")

    def build(self, node: Node, rc: ReadContext, path: str, values: dict) -> Component:
        """Construct the component, turning construction errors into ``OsimError``."""
        try:
            return construct(self.cls, values)
        except OsimError:
            raise
        except ModelError as e:
            raise rc.error(node, path, str(e)) from None
        except (ValueError, TypeError, NotImplementedError) as e:
            raise rc.error(node, path, f"cannot build {self.osim_class}: {e}") from None

    # -- writing ---------------------------------------------------------------------------

    def write(self, comp: Component, wc: WriteContext, path: str) -> Node:
        """The component as an element, properties in OpenSim's order, extras included."""
        node = Node(self.osim_class, {"name": comp.name})
        items: list[tuple[str, Node]] = []
        for f in self.fields:
            if f.name in self.skip_fields:
                continue
            items.extend((n.tag, n) for n in self.write_field(comp, f.name, wc, path))
        for tag, hook in self.write_hooks.items():
            items.extend((tag, n) for n in hook(self, comp, wc, path))
        for tag, text in comp.extras:
            items.append((tag, parse(text)))
        rank = {t: i for i, t in enumerate(self.order)}
        items.sort(key=lambda item: rank.get(item[0], len(rank)))
        node.children = [n for _, n in items]
        return node

    def write_field(self, comp: Component, field: str, wc: WriteContext, path: str) -> list[Node]:
        """Elements for one field by the default mapping."""
        value = getattr(comp, field)
        if field in self.sockets:
            text = " ".join(value) if self.sockets[field].metadata["many"] else value
            return [Node("socket_" + field, text=text)]
        if field in self.inputs:
            return [Node("input_" + field, text=" ".join(value))]
        tag = self.tags.get(field, field)
        if field in self.props:
            if value is None:
                return []
            return [Node(tag, text=format_numbers(value))]
        if field in self.flags:
            if isinstance(value, bool):
                return [Node(tag, text="true" if value else "false")]
            return [Node(tag, text=str(value))]
        if field in self.lists:
            if field == "components" and not value:
                return []
            parent = Node(tag)
            for c in value:
                n = write_component(c, wc, ("" if path == "/" else path) + "/" + c.name)
                if n is not None:
                    parent.append(n)
            return [parent]
        if field in self.functions:
            parent = Node(tag)
            if value is not None:
                parent.append(wc.write_function(value, value.name or None))
            return [parent]
        if field in self.objects:
            n = None if value is None else write_component(value, wc, ("" if path == "/" else path) + "/" + value.name)
            return [] if n is None else [n]
        raise wc.error(path, f"no .osim mapping for field '{field}' of {type(comp).__name__}")


def write_component(comp: Component, wc: WriteContext, path: str) -> Node | None:
    """Write any registered component (looked up by its exact class).

    **Returns:** its element, or ``None`` when it has no OpenSim class and
    ``wc.strict`` is false (it is then listed in ``wc.left_out``).
    """
    entry = io_for_class(type(comp))
    if entry is None:
        if not wc.strict:
            wc.left_out.append(f"{path} [{type(comp).__name__}]")
            return None
        raise wc.error(
            path,
            f"{type(comp).__name__} cannot be written to .osim (no registered OpenSim class; "
            "save_osim(..., strict=False) leaves such components out)",
        )
    return entry.write(comp, wc, path)


# -- functions ----------------------------------------------------------------------------------


class FunctionIO:
    """How one OpenSim Function class maps onto a ``simjax.functions`` class.

    Field names are OpenSim's property names; numeric fields hold numbers, static
    int/float fields one number, Function fields a nested function. ``ignore``: tags
    read and dropped (derived data such as GCVSpline's ``coefficients``).
    """

    def __init__(self, osim_class: str, cls: type, *, order: tuple | None = None, ignore: tuple = ()):
        self.osim_class = osim_class
        self.cls = cls
        self.fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "name"}
        self.order = tuple(order) if order is not None else tuple(self.fields)
        self.ignore = set(ignore)

    def read(self, node: Node, rc: ReadContext, path: str) -> Function:
        """Build the function from its element."""
        kwargs: dict[str, Any] = {}
        if node.attrib.get("name"):
            kwargs["name"] = node.attrib["name"]
        seen: dict[str, int] = {}
        for child in node.children:
            tag = child.tag
            if tag in seen:
                raise rc.error(child, path, f"property <{tag}> given twice (first at line {seen[tag]})")
            seen[tag] = child.line
            f = self.fields.get(tag)
            if f is None and child.attrib.get("name") in self.fields and child.tag in _FUNCTIONS:
                f = self.fields[child.attrib["name"]]
                kwargs[f.name] = rc.read_function(child, path + "/" + f.name)
                continue
            if f is None:
                if tag in self.ignore:
                    continue
                rc.unsupported_content(child, f"<{tag}>", path, f"unknown property of {self.osim_class}")
                continue
            if _is_function_field(f):
                kwargs[f.name] = rc.function_property(node, f.name, path, node=child)
            elif f.metadata.get("static"):
                kwargs[f.name] = rc.integer(child, path) if "int" in str(f.type) else rc.number(child, path)
            elif isinstance(f.default, float):
                kwargs[f.name] = rc.number(child, path)
            else:
                kwargs[f.name] = rc.numbers(child, path)
        try:
            return self.cls(**kwargs)
        except (ValueError, TypeError, NotImplementedError) as e:
            msg = str(e).split("\n")[0]
            if isinstance(e, TypeError) and "missing" in msg:
                msg = f"missing a required property ({msg.split('missing', 1)[1].strip()})"
            raise rc.error(node, path, f"cannot build {self.osim_class}: {msg}") from None

    def write(self, fn: Function, wc: WriteContext, name: str | None) -> Node:
        """The function as an element."""
        node = Node(self.osim_class, {"name": name} if name else {})
        for field in self.order:
            value = getattr(fn, field)
            if value is None:
                continue
            if isinstance(value, Function):  # OpenSim 4's form: <field><Class>...</Class></field>
                node.append(Node(field, children=[wc.write_function(value)]))
            else:
                node.append(Node(field, text=format_numbers(value) if not isinstance(value, int) else str(value)))
        return node


# -- registration ----------------------------------------------------------------------------------


def register(osim_class: str | ComponentIO, cls: type | None = None, **options) -> ComponentIO:
    """Register a component class with the ``.osim`` reader and writer.

    **Arguments:**

    - ``osim_class``: the OpenSim class name (the XML tag), or a ready ``ComponentIO``.
    - ``cls``: the simjax Component class.
    - ``options``: ``ComponentIO`` options (see the module docstring).

    **Returns:** the registered ``ComponentIO``. A later registration of the same
    OpenSim class replaces the earlier one; the writer uses the first OpenSim class
    registered for a simjax class unless ``options`` or the entry says otherwise.
    """
    entry = osim_class if isinstance(osim_class, ComponentIO) else ComponentIO(osim_class, cls, **options)
    _COMPONENTS[entry.osim_class] = entry
    return entry


def register_function(osim_class: str | FunctionIO, cls: type | None = None, **options) -> FunctionIO:
    """Register a Function class (``register`` for ``OpenSim::Function`` subclasses)."""
    entry = osim_class if isinstance(osim_class, FunctionIO) else FunctionIO(osim_class, cls, **options)
    _FUNCTIONS[entry.osim_class] = entry
    return entry


def component_io(osim_class: str) -> ComponentIO | None:
    """The entry registered for an OpenSim class name, or ``None``."""
    return _COMPONENTS.get(osim_class)


def function_io(osim_class: str) -> FunctionIO | None:
    """The Function entry registered for an OpenSim class name, or ``None``."""
    return _FUNCTIONS.get(osim_class)


def _entry_for_class(table: dict, cls: type):
    """The entry of ``table`` (OpenSim class name -> entry) whose ``cls`` is exactly
    ``cls``, looked up under its own name first; ``None`` if there is none."""
    entry = table.get(cls.__name__)
    if entry is not None and entry.cls is cls:
        return entry
    for e in table.values():
        if e.cls is cls:
            return e
    return None


def io_for_class(cls: type) -> ComponentIO | None:
    """The entry that writes instances of exactly ``cls`` (its own name first)."""
    return _entry_for_class(_COMPONENTS, cls)


def io_for_function(cls: type) -> FunctionIO | None:
    """The entry that writes Functions of exactly ``cls`` (its own name first)."""
    return _entry_for_class(_FUNCTIONS, cls)


def registered_classes() -> dict[str, type]:
    """``{OpenSim class name: simjax class}`` for every registered component class."""
    return {k: v.cls for k, v in _COMPONENTS.items()}
