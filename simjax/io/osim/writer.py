"""Write a simjax ``Model`` as an OpenSim 4 ``.osim`` file.

The document is what OpenSim 4.6 writes (version 40600, tab indentation, each
class's properties in OpenSim's order), without OpenSim's comments. Numbers are
written with the shortest text that reads back as the same float64, so a model
read from a file written here and written again gives identical text. Content
kept verbatim on reading (display geometry, units, ...) is written back in place.
"""

from __future__ import annotations

import os

from ...component import Set
from ...model import Model
from ..outputs import open_output
from ._xml import Node, parse, serialize
from .reader import MODEL_ORDER, ORIGINAL_NAME, SET_TAGS
from .errors import warn
from .registry import WriteContext, format_numbers, write_component

__all__ = ["save_osim", "dumps_osim", "DOCUMENT_VERSION"]

#: The document version written (OpenSim 4.6).
DOCUMENT_VERSION = 40600

_SET_ELEMENT = {v: k for k, v in SET_TAGS.items()}


def _write_set(s: Set, tag: str, wc: WriteContext) -> Node:
    node = Node(tag, {"name": s.name})
    objects = node.append(Node("objects"))
    for c in s.objects:
        n = write_component(c, wc, f"/{s.name}/{c.name}")
        if n is not None:
            objects.append(n)
    groups = dict(s.extras).get("groups")
    node.append(parse(groups) if groups else Node("groups"))
    return node


def model_node(model: Model, file: str = "<model>", strict: bool = True) -> Node:
    """The ``<OpenSimDocument>`` element of ``model``.

    **Arguments:** ``model``; ``file``: the name used in messages; ``strict``: see
    ``save_osim``.

    **Raises:** ``OsimError`` naming the component path for anything that cannot be
    written (a class with no OpenSim counterpart, a dangling reference by name).
    """
    if not isinstance(model, Model):
        raise TypeError(f"save_osim needs a Model, got {type(model).__name__}")
    wc = WriteContext(model, file, strict)
    items: list[tuple[str, Node]] = []
    plain = [c for c in model.components if not (isinstance(c, Set) and c.name == "componentset")]
    comps = Node("components")
    for c in plain:
        n = write_component(c, wc, "/" + c.name)
        if n is not None:
            comps.append(n)
    if comps.children:
        items.append(("components", comps))
    for c in model.components:
        if isinstance(c, Set) and c.name == "componentset":
            items.append(("ComponentSet", _write_set(c, "ComponentSet", wc)))
    items.append(("Ground", write_component(model.ground, wc, "/ground")))
    items.append(("gravity", Node("gravity", text=format_numbers(model.gravity))))
    items.append(("credits", Node("credits", text=model.credits)))
    items.append(("publications", Node("publications", text=model.publications)))
    for name, tag in _SET_ELEMENT.items():
        s = getattr(model, name)
        if s is not None:
            items.append((tag, _write_set(s, tag, wc)))
    name = model.name
    for tag, text in model.extras:
        if tag == ORIGINAL_NAME:
            name = text
        else:
            items.append((tag, parse(text)))
    rank = {t: i for i, t in enumerate(MODEL_ORDER)}
    items.sort(key=lambda it: rank.get(it[0], len(rank)))
    root = Node("OpenSimDocument", {"Version": str(DOCUMENT_VERSION)})
    root.append(Node("Model", {"name": name}, children=[n for _, n in items]))
    if wc.left_out:
        warn(f"{file}: left out {len(wc.left_out)} component(s) OpenSim has no class for: {', '.join(wc.left_out)}")
    return root


def dumps_osim(model: Model, strict: bool = True) -> str:
    """The ``.osim`` text of ``model`` (see ``save_osim``)."""
    return '<?xml version="1.0" encoding="UTF-8" ?>\n' + serialize(model_node(model, strict=strict)) + "\n"


def save_osim(model: Model, path: str | os.PathLike, strict: bool = True) -> None:
    """Write ``model`` as an OpenSim 4 model file that OpenSim 4.6 loads.

    **Arguments:** ``model``: the Model; ``path``: the file to write; ``strict``:
    with ``False``, components with no OpenSim class (simjax-only ones) are left out
    with an ``OsimWarning`` instead of being an error.

    ``Model.use_quaternions`` has no OpenSim counterpart and is not written (OpenSim
    always uses its angle coordinates for Ball and Free joints).

    **Raises:** ``OsimError`` for components that cannot be written.
    """
    text = dumps_osim(model, strict)
    with open_output(os.fspath(path), "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
