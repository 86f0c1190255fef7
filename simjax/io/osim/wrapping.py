"""``.osim`` registrations of wrap objects and path wraps.

Importing this module registers WrapSphere, WrapCylinder, WrapEllipsoid, WrapTorus
(elements of a frame's ``<WrapObjectSet>``, see ``simjax.io.osim.builtin.FrameIO``)
and PathWrap (elements of a GeometryPath's ``<PathWrapSet>``). A PathWrap's
``<wrap_object>`` holds the wrap object's bare name, which the reader resolves to its
path on whichever frame owns it (an error names the PathWrap if none or several do)
and the writer writes back as a name; ``<range>`` holds two integers. simjax's
``smoothing`` (not an OpenSim property) is written only where it is non-zero, as a
``<smoothing>`` element OpenSim ignores.
"""

from __future__ import annotations

from ...wrapping.objects import PathWrap, WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus
from ._xml import Node
from .builtin import name_reference
from .registry import format_number, register

__all__ = []

_WRAP = ("components", "active", "xyz_body_rotation", "translation", "quadrant")
_DISPLAY = {"Appearance": True, "display_preference": True, "VisibleObject": True}

register("WrapSphere", WrapSphere, order=_WRAP + ("radius",), keep=_DISPLAY)
register("WrapCylinder", WrapCylinder, order=_WRAP + ("radius", "length"), keep=_DISPLAY)
register("WrapEllipsoid", WrapEllipsoid, order=_WRAP + ("dimensions",), keep=_DISPLAY)
register("WrapTorus", WrapTorus, order=_WRAP + ("inner_radius", "outer_radius"), keep=_DISPLAY)


def _read_range(io, node, rc, path):
    values = node.text.split()
    if len(values) != 2:
        raise rc.error(node, path, f"expected 2 integers, got {len(values)}", prop="range", value=node.text)
    return {"range": tuple(rc.integer(Node("range", text=v, line=node.line), path, "range") for v in values)}


def _write_range(io, comp, wc, path):
    return [Node("range", text=" ".join(str(int(i)) for i in comp.range))]


def _read_smoothing(io, node, rc, path):
    arr = rc.numbers(node, path, None, prop="smoothing")
    if arr.size != 1:
        raise rc.error(node, path, f"expected 1 number, got {arr.size}", prop="smoothing", value=node.text)
    return {"smoothing": float(arr[0])}


def _write_smoothing(io, comp, wc, path):
    return [Node("smoothing", text=format_number(comp.smoothing))] if comp.smoothing else []


_read_wrap_object, _write_wrap_object = name_reference("wrap_object", "wrap_object", "wrap_object")

register(
    "PathWrap",
    PathWrap,
    order=("components", "wrap_object", "method", "range", "smoothing"),
    read_hooks={"wrap_object": _read_wrap_object, "range": _read_range, "smoothing": _read_smoothing},
    write_hooks={"wrap_object": _write_wrap_object, "range": _write_range, "smoothing": _write_smoothing},
    skip_fields=("wrap_object", "range", "smoothing"),
)
