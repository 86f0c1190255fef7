"""Read OpenSim 4 ``.osim`` files into a simjax ``Model``.

The reader works in two passes, as ArtiSynth's scan/post-scan (seed §3.2): the
first builds every component from its element through the registry
(``simjax.io.osim.registry``), recording references (socket paths, and the names
some OpenSim properties hold instead of paths) with their lines; the second, once
the whole document is known, resolves names into paths, checks every reference and
validates every component's properties. Paths, state-variable and output names are
OpenSim's own (``/jointset/r_elbow/r_elbow_flex``).

Content simjax does not model yet is collected and reported once, as a list of every
unsupported element with its class, path and line: an ``UnsupportedContentError``
by default; with ``strict=False`` it is skipped with an ``OsimWarning`` listing the
same (components referring to skipped ones are dropped or pruned and listed too).
Content the skeleton depends on (an unknown joint type, a function of several
coordinates) is never skipped.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

from ...component import Component, ModelError, ModelWarning, Set, check_name, component_class, validate_once
from ...forces.base import Actuator
from ...mechanics.frames import Body, Marker, PhysicalFrame
from ...mechanics.joints import Coordinate, Joint
from ...model import Model, resolve_path
from ...wrapping.objects import WrapObject, wrap_frame_path
from ._xml import Node, XMLSyntaxError, parse, serialize
from .errors import OsimError, UnsupportedContentError, warn
from .registry import ReadContext

__all__ = [
    "load_osim",
    "loads_osim",
    "read_osim",
    "LoadReport",
    "MIN_VERSION",
    "SET_TAGS",
    "MODEL_ORDER",
    "ORIGINAL_NAME",
]

#: The oldest document version read (OpenSim 4.0).
MIN_VERSION = 40000

#: OpenSim set element tag -> simjax Model field (and path element)
SET_TAGS = {
    "BodySet": "bodyset",
    "JointSet": "jointset",
    "ControllerSet": "controllerset",
    "ConstraintSet": "constraintset",
    "ForceSet": "forceset",
    "MarkerSet": "markerset",
    "ContactGeometrySet": "contactgeometryset",
    "ProbeSet": "probeset",
}

#: OpenSim's order of the Model's properties
MODEL_ORDER = (
    "defaults",
    "components",
    "assembly_accuracy",
    "Ground",
    "gravity",
    "credits",
    "publications",
    "length_units",
    "force_units",
    "BodySet",
    "JointSet",
    "ControllerSet",
    "ConstraintSet",
    "ForceSet",
    "MarkerSet",
    "ContactGeometrySet",
    "ProbeSet",
    "ComponentSet",
    "ModelVisualPreferences",
)

#: pseudo-extra holding a Model name simjax's name rules reject (written back as is)
ORIGINAL_NAME = "@name"

_MODEL_KEEP = {"length_units", "force_units", "assembly_accuracy", "ModelVisualPreferences"}
_SET_BASES = {"bodyset": Body, "jointset": Joint, "markerset": Marker}


@dataclasses.dataclass(frozen=True)
class LoadReport:
    """What ``read_osim`` skipped: ``unsupported`` (every ``Unsupported`` item) and
    ``skipped`` (paths of dropped components, with their OpenSim class or the
    reason)."""

    unsupported: tuple
    skipped: dict


def load_osim(path: str | os.PathLike, strict: bool = True) -> Model:
    """Read an OpenSim 4 model file (document version 40000 and later).

    **Arguments:**

    - ``path``: the ``.osim`` file.
    - ``strict``: with ``True`` (default) content simjax does not model yet is an
      error listing all of it; with ``False`` it is skipped with an ``OsimWarning``
      listing the same.

    **Returns:** a ``Model`` whose component paths are OpenSim's.

    **Raises:** ``OsimError`` (file, line, component path) for malformed XML, a
    version older than 4.0, a missing required property, a bad value or a dangling
    reference; ``UnsupportedContentError`` for unsupported content;
    ``OSError`` if the file cannot be read.
    """
    return read_osim(path, strict)[0]


def read_osim(path: str | os.PathLike, strict: bool = True) -> tuple[Model, LoadReport]:
    """``load_osim`` that also returns a ``LoadReport`` of what was skipped."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        data = fh.read()
    return _load(data, strict, path, os.path.dirname(os.path.abspath(path)))


def loads_osim(
    text: str | bytes | Node, strict: bool = True, source: str = "<string>", base_dir: str | None = None
) -> Model:
    """Read a model from ``.osim`` text (see ``load_osim``).

    **Arguments:** ``text``: the document, or its root ``Node`` as parsed (``_xml.parse``;
    messages then give its nodes' lines); ``strict``: as ``load_osim``; ``source``:
    the name used in messages; ``base_dir``: where mesh files are looked for
    (``None``: not checked).

    **Returns:** the ``Model``.
    """
    return _load(text, strict, source, base_dir)[0]


def _load(text, strict, source, base_dir) -> tuple[Model, LoadReport]:
    try:
        root = text if isinstance(text, Node) else parse(text)
    except XMLSyntaxError as e:
        raise OsimError(source, e.line, "", str(e)) from None
    rc = ReadContext(source, base_dir, strict=strict)
    model = _read_document(root, rc)
    model = _post_scan(model, rc)
    return model, LoadReport(tuple(rc.unsupported), dict(rc.skipped))


# -- pass 1: the document ------------------------------------------------------------------


def _read_document(root: Node, rc: ReadContext) -> Model:
    if root.tag != "OpenSimDocument":
        raise rc.error(root, "", f"expected an <OpenSimDocument> root element, got <{root.tag}>")
    version = root.attrib.get("Version")
    if version is None or not version.strip().isdigit():
        raise rc.error(root, "", f"<OpenSimDocument> needs a numeric Version attribute, got {version!r}")
    rc.version = int(version)
    if rc.version < MIN_VERSION:
        raise rc.error(
            root,
            "",
            f"document version {rc.version} is older than OpenSim 4.0 ({MIN_VERSION}); "
            "upgrade the file by opening and saving it with OpenSim 4 (GUI, or "
            "opensim.Model(path).printToXML(new_path))",
        )
    models = [c for c in root.children if c.tag == "Model"]
    for c in root.children:
        if c.tag == "defaults" and not c.children:
            continue
        if c.tag != "Model":
            raise rc.error(c, "", f"unexpected <{c.tag}> in <OpenSimDocument> (expected one <Model>)")
    if len(models) != 1:
        raise rc.error(root, "", f"expected one <Model> in the document, found {len(models)}")
    return _read_model(models[0], rc)


def _read_model(node: Node, rc: ReadContext) -> Model:
    name = node.attrib.get("name") or "model"
    if "file" in node.attrib:
        raise rc.error(node, "/", "models stored in separate files (file=...) are not supported")
    extras: list[tuple[str, str]] = []
    try:
        check_name(name)
    except ModelError:
        # the root's name is in no path, and OpenSim allows e.g. dots in it: keep it for writing
        extras.append((ORIGINAL_NAME, name))
        name = _sanitize(name)
    model = Model(name)
    changes: dict = {}
    for child in node.children:
        if child.tag == "defaults":  # read first, as OpenSim: it sets the defaults of what follows
            rc.defaults = {c.tag: c for c in child.children}
            if child.children:
                extras.append(("defaults", serialize(child)))
    others: list[Component] = []
    seen: dict[str, int] = {}
    for child in node.children:
        tag = child.tag
        if tag in seen:
            raise rc.error(child, "/", f"<{tag}> given twice in <Model> (first at line {seen[tag]})")
        seen[tag] = child.line
        if tag == "defaults":
            continue
        if tag == "Ground":
            ground = rc.read_component(child, "/", skippable=False)
            if ground is not None and ground.name != "ground":
                raise rc.error(child, "/", f"Ground must be named 'ground', got {ground.name!r}")
            if ground is not None:
                changes["ground"] = ground
        elif tag == "gravity":
            changes["gravity"] = rc.numbers(child, "/", 3, prop="gravity")
        elif tag in ("credits", "publications"):
            changes[tag] = child.text
        elif tag in SET_TAGS:
            changes[SET_TAGS[tag]] = _read_set(child, SET_TAGS[tag], rc)
        elif tag == "ComponentSet":
            cset = _read_set(child, "componentset", rc)
            if cset.objects or cset.extras:
                others.append(cset)
            else:
                extras.append((tag, serialize(child)))
        elif tag == "components":
            for c in child.children:
                comp = rc.read_component(c, "/")
                if comp is not None:
                    others.append(comp)
        elif tag in _MODEL_KEEP:
            extras.append((tag, serialize(child)))
        else:
            rc.unsupported_content(child, f"<{tag}>", "/", "unknown property of Model")
    if others:
        _check_unique(others, "/", rc)
        changes["components"] = tuple(others)
    if extras:
        changes["extras"] = tuple(extras)
    try:
        return model.replace(**changes)
    except ModelError as e:
        raise rc.error(node, "/", str(e)) from None


def _sanitize(name: str) -> str:
    out = "".join("_" if ch in "\\/*+ \t\n" else ch for ch in name)
    if out in ("", ".", ".."):
        out = "model_" + out
    return out


def _read_set(node: Node, set_name: str, rc: ReadContext) -> Set:
    path = "/" + set_name
    rc.lines[path] = node.line
    base = _SET_BASES.get(set_name)
    structural = set_name in ("bodyset", "jointset")
    objects: list[Component] = []
    extras: list[tuple[str, str]] = []
    for child in node.children:
        if child.tag == "objects":
            for c in child.children:
                comp = rc.read_component(c, path, skippable=not structural)
                if comp is None:
                    continue
                cls_set = getattr(type(comp), "set_name", None)
                wrong = (
                    (not isinstance(comp, base))
                    if base is not None
                    else (set_name != "componentset" and cls_set is not None and cls_set != set_name)
                )
                if wrong:
                    raise rc.error(c, path, f"a {c.tag} does not belong in <{node.tag}>")
                objects.append(comp)
        elif child.tag == "groups":
            if child.children:
                extras.append(("groups", serialize(child)))
        else:
            rc.unsupported_content(child, f"<{child.tag}>", path, f"unknown property of {node.tag}")
    _check_unique(objects, path, rc)
    return Set(set_name, objects=tuple(objects), extras=tuple(extras))


def _check_unique(comps, path: str, rc: ReadContext) -> None:
    seen = set()
    for c in comps:
        if c.name in seen:
            child = ("" if path == "/" else path) + "/" + c.name
            raise rc.error(rc.lines.get(child, 0), path, f"two components named {c.name!r}")
        seen.add(c.name)


# -- pass 2: references, skipped content, validation ---------------------------------------------


def _within(path: str, roots) -> str | None:
    for r in roots:
        if path == r or path.startswith(r + "/"):
            return r
    return None


def _post_scan(model: Model, rc: ReadContext) -> Model:
    _report_unsupported(rc)
    model = _resolve_names(model, rc)
    model = _check_references(model, rc)
    reported = []
    for path, comp in [("/", model)] + list(model.walk()):
        try:
            caught = validate_once(comp, path)
        except ModelError as e:
            raise rc.error(rc.lines.get(path, 0), "", str(e)) from None
        for w in caught:
            if not issubclass(w.category, ModelWarning):
                warnings.warn(w.message, w.category, stacklevel=2)
            elif str(w.message) not in reported:
                reported.append(str(w.message))
                warn(f"{rc.file}:{rc.lines.get(path, 0)}: {w.message}")
    if reported:
        model = model.replace(reported_warnings=tuple(reported))
    if rc.missing_meshes:
        names = sorted(set(rc.missing_meshes))
        warn(f"{rc.file}: {len(names)} mesh file(s) not found (display only, ignored): {', '.join(names)}")
    return model


def _report_unsupported(rc: ReadContext) -> None:
    items = rc.unsupported
    if not items:
        return
    fixed = [u for u in items if not u.skippable]
    if rc.strict:
        raise UnsupportedContentError(
            rc.file,
            items,
            hint=" (simjax does not model these yet; load_osim(..., strict=False) skips what can be skipped)",
        )
    if fixed:
        raise UnsupportedContentError(rc.file, fixed, hint=" that cannot be skipped: the skeleton depends on them")
    listing = "\n".join(f"  {u}" for u in items)
    warn(f"{rc.file}: skipped {len(items)} unsupported element(s):\n{listing}")


def _name_index(model: Model, index: dict):
    """Paths of coordinates, actuators (and their order) and wrap objects by name;
    ``index`` is ``model.index()``."""
    coords: dict[str, list[str]] = {}
    acts: dict[str, list[str]] = {}
    act_order: list[str] = []
    wraps: dict[str, list[str]] = {}
    for p, c in model.walk():
        if isinstance(c, WrapObject) and isinstance(index[wrap_frame_path(p)], PhysicalFrame):
            wraps.setdefault(c.name, []).append(p)
        if isinstance(c, Coordinate):
            coords.setdefault(c.name, []).append(p)
        if isinstance(c, Actuator):
            acts.setdefault(c.name, []).append(p)
            act_order.append(p)
    return coords, acts, act_order, wraps


def _resolve_names(model: Model, rc: ReadContext) -> Model:
    if not rc.deferred:
        return model
    index = model.index()  # one path -> component table for every lookup below
    coords, acts, act_order, wraps = _name_index(model, index)
    skipped_by_name: dict[str, str] = {}
    for p in rc.skipped:
        skipped_by_name.setdefault(p.rsplit("/", 1)[-1], p)
    updates: dict[str, dict] = {}
    for d in rc.deferred:
        if _within(d.path, rc.skipped):
            continue
        resolved = []
        for name in d.names:
            if d.kind == "coordinate":
                hits = coords.get(name, [])
            elif d.kind == "body":
                hits = [f"/bodyset/{name}"] if f"/bodyset/{name}" in index else []
            elif d.kind == "frame":
                as_path = resolve_path(name, "/") if not name.startswith("..") else ""
                hits = (
                    [as_path]
                    if as_path and as_path in index
                    else ([f"/bodyset/{name}"] if f"/bodyset/{name}" in index else [])
                )
            elif d.kind == "wrap_object":
                hits = wraps.get(name, [])
            elif d.kind == "actuator":
                if name.upper() == "ALL":
                    resolved.extend(act_order)
                    continue
                hits = acts.get(name, [])
            else:  # pragma: no cover - a registration bug
                raise rc.error(d.line, d.path, f"unknown reference kind {d.kind!r}")
            if len(hits) > 1:
                raise rc.error(
                    d.line,
                    d.path,
                    f"the {d.kind} name {name!r} is ambiguous: {', '.join(hits)}",
                    prop=d.field,
                    value=name,
                )
            if not hits and name in skipped_by_name:
                hits = [skipped_by_name[name]]
            if not hits:
                raise rc.error(
                    d.line,
                    d.path,
                    f"refers to {d.kind} {name!r}, but the model has no {d.kind} of that name",
                    prop=d.field,
                    value=name,
                )
            resolved.append(hits[0])
        updates.setdefault(d.path, {})[d.field] = tuple(resolved) if d.many else resolved[0]
    for path, changes in updates.items():
        model = model.update(path, lambda c, ch=changes: c.replace(**ch))
    return model


def _check_references(model: Model, rc: ReadContext) -> Model:
    drop: dict[str, str] = {}
    prune: list[tuple[str, str, str]] = []
    index = model.index()  # one path -> component table for every lookup below
    for path, comp in model.walk():
        for name, f in comp.socket_fields().items():
            value = getattr(comp, name)
            refs = value if f.metadata["many"] else (value,)
            expected = component_class(f.metadata["socket"])
            line = rc.socket_lines.get((path, name), rc.lines.get(path, 0))
            for ref in refs:
                if not ref:
                    continue
                try:
                    target = resolve_path(ref, path)
                except ModelError:
                    raise rc.error(
                        line,
                        path,
                        f"socket '{name}' path {ref!r} climbs above the model root",
                        prop=f"socket_{name}",
                        value=ref,
                    ) from None
                skipped = _within(target, rc.skipped)
                if skipped is not None:
                    if f.metadata["hard"]:
                        drop[path] = skipped
                    else:
                        prune.append((path, name, ref))
                    continue
                try:
                    conn = index[target]
                except KeyError:
                    raise rc.error(
                        line,
                        path,
                        f"socket '{name}' refers to {ref!r}, but there is no component at {target!r}",
                        prop=f"socket_{name}",
                        value=ref,
                    ) from None
                if not isinstance(conn, expected):
                    raise rc.error(
                        line,
                        path,
                        f"socket '{name}' expects a {expected.__name__}, but {target!r} is a {type(conn).__name__}",
                        prop=f"socket_{name}",
                        value=ref,
                    )
    if not drop and not prune:
        return model
    lines = []
    for path, name, ref in prune:
        model = model.update(path, lambda c, n=name, r=ref: c.prune_reference(n, r))
        lines.append(f"  pruned {ref} from {path} socket '{name}' (skipped)")
    for path, skipped in sorted(drop.items(), key=lambda kv: -kv[0].count("/")):
        if model.has(path):
            model = model.remove(path)
            rc.skipped[path] = "dependent"
        lines.append(f"  dropped {path}: it depends on skipped {skipped}")
    warn(f"{rc.file}: references to skipped content:\n" + "\n".join(lines))
    return model
