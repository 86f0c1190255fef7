"""What a model shows: the geometry attached to its frames, its wrap surfaces and
contact geometry, as ``Visual`` items fixed to PhysicalFrames.

The ``.osim`` reader keeps a frame's display content verbatim (``extras``:
``attached_geometry`` and ``FrameGeometry``), so a model's dynamics never depend on
it; this module reads it back: ``Mesh`` (found by ``meshes.find_mesh_file``, read with
VTK), ``Sphere``, ``Cylinder``, ``Ellipsoid``, ``Brick``, ``Cone`` and
``FrameGeometry``, each with its ``scale_factors`` and ``Appearance`` (color,
opacity, visibility). A mesh that cannot be found or read is drawn as a stand-in
sphere, with one ``ViewWarning`` per file naming it.
"""

from __future__ import annotations

import dataclasses
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .. import spatial
from ..component import resolve_path
from . import shapes
from .meshes import MeshReadError, find_mesh_file, read_mesh
from .shapes import TriangleMesh

__all__ = ["Visual", "ViewWarning", "collect_visuals", "STAND_IN_RADIUS", "STAND_IN_COLOR"]

#: radius (m) and color of the sphere drawn where a mesh file is missing
STAND_IN_RADIUS = 0.02
STAND_IN_COLOR = (1.0, 0.0, 1.0)

_BONE = (1.0, 1.0, 1.0)
_WRAP_COLOR, _WRAP_OPACITY = (0.0, 1.0, 1.0), 0.35
_CONTACT_COLOR = (0.0, 1.0, 1.0)


class ViewWarning(UserWarning):
    """Something a scene cannot show as the model asks (a missing mesh file, an
    unsupported geometry); the scene is built anyway."""


@dataclasses.dataclass(frozen=True, eq=False)
class Visual:
    """One drawable item fixed to a PhysicalFrame.

    **Fields:** ``path``: the component it comes from (``/bodyset/femur_r/femur_r_geom_1``);
    ``kind``: its OpenSim class (``"Mesh"``, ``"Sphere"``, ``"WrapCylinder"``, ...);
    ``layer``: ``"bodies"``, ``"frames"``, ``"wrap"`` or ``"contact"``; ``frame``: the
    PhysicalFrame's path; ``mesh``: its triangles in its own frame (scaled, m);
    ``rotation (3, 3)``, ``translation (3,)`` (m): its pose in ``frame``; ``color``
    (r, g, b in [0, 1]); ``opacity`` in [0, 1]; ``source``: the mesh file read (or
    ``None``); ``stand_in``: drawn in place of a missing mesh; ``vertex_colors``:
    per-vertex colors ``(n, 3)`` or ``None``.
    """

    path: str
    kind: str
    layer: str
    frame: str
    mesh: TriangleMesh
    rotation: np.ndarray
    translation: np.ndarray
    color: tuple
    opacity: float = 1.0
    source: str | None = None
    stand_in: bool = False
    vertex_colors: np.ndarray | None = None


def _floats(el, tag: str, default, n: int | None = None):
    child = el.find(tag)
    if child is None or child.text is None or not child.text.strip():
        return default
    vals = [float(x) for x in child.text.split()]
    if n is not None and len(vals) != n:
        return default
    return vals if n is not None else vals[0]


def _appearance(el) -> tuple[bool, tuple, float]:
    app = el.find("Appearance")
    if app is None:
        return True, _BONE, 1.0
    visible = (app.findtext("visible") or "true").strip().lower() != "false"
    color = tuple(_floats(app, "color", list(_BONE), 3))
    return visible, color, float(_floats(app, "opacity", 1.0))


class _Collector:
    """Reads the geometry of one model (one warning per missing mesh file)."""

    def __init__(self, model, search_dirs, where: str):
        self.model = model
        self.search_dirs = tuple(search_dirs)
        self.where = where
        self.visuals: list[Visual] = []
        self.missing: dict[str, list[str]] = {}
        self.unsupported: dict[str, list[str]] = {}

    def geometry(self, el, owner: str, layer: str) -> None:
        kind = el.tag
        gpath = f"{owner}/{el.get('name', kind)}"
        sock = (el.findtext("socket_frame") or "..").strip() or ".."
        try:
            frame = resolve_path(sock, gpath)
        except Exception:
            frame = owner
        visible, color, opacity = _appearance(el)
        if not visible:
            return
        scale = np.asarray(_floats(el, "scale_factors", [1.0, 1.0, 1.0], 3), float)
        source, stand_in, vcolors = None, False, None
        if kind == "Mesh":
            name = (el.findtext("mesh_file") or "").strip()
            source = find_mesh_file(name, self.search_dirs) if name else None
            mesh = None
            if source is not None:
                try:
                    mesh = read_mesh(source).scaled(scale)
                except (MeshReadError, OSError) as e:
                    self.missing.setdefault(f"{name} ({e})", []).append(gpath)
            else:
                self.missing.setdefault(name or "<empty mesh_file>", []).append(gpath)
            if mesh is None:
                mesh, stand_in, color = shapes.sphere(STAND_IN_RADIUS, 12), True, STAND_IN_COLOR
        elif kind == "Sphere":
            mesh = shapes.sphere(_floats(el, "radius", 1.0)).scaled(scale)
        elif kind == "Ellipsoid":
            mesh = shapes.ellipsoid(_floats(el, "radii", [0.5, 1.0, 2.0], 3)).scaled(scale)
        elif kind == "Cylinder":
            mesh = shapes.cylinder(_floats(el, "radius", 1.0), _floats(el, "half_height", 1.0)).scaled(scale)
        elif kind == "Brick":
            mesh = shapes.brick(_floats(el, "half_lengths", [0.1, 0.1, 0.1], 3)).scaled(scale)
        elif kind == "Cone":
            mesh = shapes.cone(
                _floats(el, "base_radius", 1.0),
                _floats(el, "height", 1.0),
                _floats(el, "origin", [0.0, 0.0, 0.0], 3),
                _floats(el, "direction", [0.0, 1.0, 0.0], 3),
            ).scaled(scale)
        elif kind == "FrameGeometry":
            mesh, vcolors = shapes.axes(1.0, _floats(el, "display_radius", 0.004) / max(float(scale.max()), 1e-9))
            mesh = mesh.scaled(scale)
            layer = "frames"
        else:
            self.unsupported.setdefault(kind, []).append(gpath)
            return
        self.visuals.append(
            Visual(
                gpath,
                kind,
                layer,
                frame,
                mesh,
                np.eye(3),
                np.zeros(3),
                tuple(color),
                float(opacity),
                source,
                stand_in,
                vcolors,
            )
        )

    def frame_content(self, path: str, comp) -> None:
        for tag, text in getattr(comp, "extras", ()):
            if tag not in ("attached_geometry", "FrameGeometry"):
                continue
            try:
                root = ET.fromstring(text)
            except ET.ParseError:
                continue
            items = [root] if tag == "FrameGeometry" else list(root)
            for el in items:
                self.geometry(el, path, "bodies")

    def report(self) -> None:
        for name, users in self.missing.items():
            warnings.warn(
                f"{self.where}: mesh file {name!r} not found (searched {', '.join(self.search_dirs)}); "
                f"{', '.join(users)} drawn as a stand-in sphere",
                ViewWarning,
                stacklevel=4,
            )
        for kind, users in self.unsupported.items():
            warnings.warn(
                f"{self.where}: geometry of type {kind!r} ({', '.join(users)}) is not drawn", ViewWarning, stacklevel=4
            )


def _pose(angles, translation) -> tuple[np.ndarray, np.ndarray]:
    R = np.asarray(spatial.xyz_body_rotation(np.asarray(angles, float)), float)
    return R, np.asarray(translation, float).reshape(3)


def _wrap_visual(path: str, comp) -> Visual | None:
    from ..wrapping.objects import WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus, wrap_frame_path

    kind = type(comp).__name__
    if isinstance(comp, WrapCylinder):
        # OpenSim's wrap cylinder lies along its z axis; the shape's is y
        mesh = shapes.cylinder(float(comp.radius), 0.5 * float(comp.length)).transformed(
            np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]), np.zeros(3)
        )
    elif isinstance(comp, WrapSphere):
        mesh = shapes.sphere(float(comp.radius))
    elif isinstance(comp, WrapEllipsoid):
        mesh = shapes.ellipsoid(np.asarray(comp.dimensions, float))
    elif isinstance(comp, WrapTorus):
        mesh = shapes.torus(float(comp.outer_radius), float(comp.inner_radius))
    else:
        return None
    R, p = _pose(comp.xyz_body_rotation, comp.translation)
    return Visual(path, kind, "wrap", wrap_frame_path(path), mesh, R, p, _WRAP_COLOR, _WRAP_OPACITY)


def _contact_visual(path: str, comp, frame: str) -> Visual | None:
    from ..forces.contact import ContactHalfSpace, ContactMesh, ContactSphere

    _, color, opacity = (True, _CONTACT_COLOR, 0.6)
    for tag, text in comp.extras:
        if tag == "Appearance":
            try:
                visible, color, opacity = _appearance(ET.fromstring(f"<g>{text}</g>"))
            except ET.ParseError:
                visible = True
            if not visible:
                return None
    if isinstance(comp, ContactSphere):
        mesh = shapes.sphere(float(comp.radius))
    elif isinstance(comp, ContactHalfSpace):
        mesh = shapes.square(1.0, 0)
        opacity = min(opacity, 0.3)
    elif isinstance(comp, ContactMesh) and comp.vertices is not None and comp.faces:
        mesh = TriangleMesh(np.asarray(comp.vertices, float), np.asarray(comp.faces, np.int32))
    else:
        return None
    R, p = _pose(comp.orientation, comp.location)
    return Visual(path, type(comp).__name__, "contact", frame, mesh, R, p, tuple(color), float(opacity))


def collect_visuals(system, search_dirs, where: str = "model") -> tuple[Visual, ...]:
    """Every drawable item of a built system's model.

    **Arguments:** ``system``; ``search_dirs``: folders searched for mesh files
    (``meshes.mesh_search_dirs``); ``where``: how warnings name the model (its file).

    **Returns:** ``Visual`` items: attached geometry and frame axes of every
    PhysicalFrame, wrap objects, contact geometry.

    **Warns:** ``ViewWarning`` once per mesh file that is missing or unreadable (a
    stand-in sphere is drawn) and per unsupported geometry type.
    """
    from ..forces.contact import ContactGeometry
    from ..mechanics.frames import PhysicalFrame
    from ..wrapping.objects import WrapObject

    model = system.model
    collector = _Collector(model, search_dirs, where)
    frames = system.topology.tree.frames
    extra = []
    for path, comp in model.walk():
        if isinstance(comp, PhysicalFrame):
            collector.frame_content(path, comp)
        elif isinstance(comp, WrapObject) and comp.active:
            v = _wrap_visual(path, comp)
            if v is not None and v.frame in frames:
                extra.append(v)
        elif isinstance(comp, ContactGeometry):
            frame = system.topology.connections.get((path, "frame"))
            v = _contact_visual(path, comp, frame) if frame in frames else None
            if v is not None:
                extra.append(v)
    collector.report()
    visuals = [v for v in collector.visuals if v.frame in frames]
    return tuple(visuals + extra)
