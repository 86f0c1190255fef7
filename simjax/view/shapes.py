"""Triangle meshes: the container, and OpenSim's analytic shapes tessellated.

``TriangleMesh`` holds vertices ``(n, 3)`` (m) and triangles ``(m, 3)``; every shape
below returns one, in the shape's own frame, with Simbody's conventions for its
axes (a ``Cylinder`` along ``y``, a ``Cone`` from ``origin`` along ``direction``, a
wrap cylinder or torus along ``z``). They are built once in numpy when a scene is
built; nothing here is traced.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = [
    "TriangleMesh",
    "sphere",
    "ellipsoid",
    "cylinder",
    "cone",
    "brick",
    "torus",
    "arrow",
    "axes",
    "square",
    "merge",
]


@dataclasses.dataclass(frozen=True, eq=False)
class TriangleMesh:
    """A triangle mesh.

    **Fields:** ``vertices (n, 3)`` float64 (m); ``faces (m, 3)`` int32 vertex indices,
    counter-clockwise seen from outside.
    """

    vertices: np.ndarray
    faces: np.ndarray

    @property
    def n_vertices(self) -> int:
        """Number of vertices."""
        return int(self.vertices.shape[0])

    @property
    def n_faces(self) -> int:
        """Number of triangles."""
        return int(self.faces.shape[0])

    def scaled(self, factors) -> TriangleMesh:
        """The mesh with its vertices scaled along x, y, z by ``factors (3,)``."""
        return TriangleMesh(self.vertices * np.asarray(factors, float)[None, :], self.faces)

    def transformed(self, R, p) -> TriangleMesh:
        """The mesh moved by the rotation ``R (3, 3)`` and translation ``p (3,)`` (m)."""
        return TriangleMesh(self.vertices @ np.asarray(R, float).T + np.asarray(p, float), self.faces)

    def normals(self) -> np.ndarray:
        """Unit vertex normals ``(n, 3)``: the area-weighted sum of the normals of the
        triangles around each vertex (zero for an isolated vertex)."""
        v, f = self.vertices, self.faces
        n = np.zeros_like(v)
        if len(f):
            face_n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
            for k in range(3):
                np.add.at(n, f[:, k], face_n)
        norm = np.linalg.norm(n, axis=1, keepdims=True)
        return n / np.where(norm > 0, norm, 1.0)


def merge(meshes) -> TriangleMesh:
    """One mesh made of several. **Arguments:** ``meshes``: ``TriangleMesh`` items.
    **Returns:** their union (vertices concatenated, faces re-indexed)."""
    verts, faces, offset = [], [], 0
    for m in meshes:
        verts.append(m.vertices)
        faces.append(m.faces + offset)
        offset += m.n_vertices
    if not verts:
        return TriangleMesh(np.zeros((0, 3)), np.zeros((0, 3), np.int32))
    return TriangleMesh(np.concatenate(verts), np.concatenate(faces).astype(np.int32))


def _grid_faces(rows: int, cols: int, wrap_cols: bool) -> np.ndarray:
    """Two triangles per cell of a ``rows x cols`` vertex grid (row-major)."""
    faces = []
    last = cols if wrap_cols else cols - 1
    for i in range(rows - 1):
        for j in range(last):
            a, b = i * cols + j, i * cols + (j + 1) % cols
            c, d = a + cols, b + cols
            faces += [(a, c, b), (b, c, d)]
    return np.asarray(faces, np.int32).reshape(-1, 3)


def ellipsoid(radii, segments: int = 24) -> TriangleMesh:
    """An ellipsoid centred at the origin with semi-axes ``radii (3,)`` (m) along x, y, z.

    **Arguments:** ``radii``; ``segments``: divisions around the ``y`` axis (half as
    many from pole to pole). **Returns:** a ``TriangleMesh``.
    """
    rings = max(segments // 2, 3)
    theta = np.linspace(0.0, np.pi, rings + 1)  # from +y to -y
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    th, ph = np.meshgrid(theta, phi, indexing="ij")
    unit = np.stack([np.sin(th) * np.sin(ph), np.cos(th), np.sin(th) * np.cos(ph)], -1).reshape(-1, 3)
    return TriangleMesh(unit * np.asarray(radii, float), _grid_faces(rings + 1, segments, True))


def sphere(radius: float, segments: int = 24) -> TriangleMesh:
    """A sphere of ``radius`` (m) centred at the origin (see ``ellipsoid``)."""
    return ellipsoid((radius, radius, radius), segments)


def _circle(radius: float, segments: int, y: float) -> np.ndarray:
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    return np.stack([radius * np.sin(phi), np.full(segments, y), radius * np.cos(phi)], -1)


def _capped_tube(radii, ys, segments: int) -> TriangleMesh:
    """Rings of ``radii`` at heights ``ys`` along y, side faces, and the two end caps."""
    rings = np.concatenate([_circle(r, segments, y) for r, y in zip(radii, ys)])
    faces = [_grid_faces(len(ys), segments, True)]
    n = len(rings)
    centers = np.asarray([[0.0, ys[0], 0.0], [0.0, ys[-1], 0.0]])
    j = np.arange(segments)
    bottom = np.stack([np.full(segments, n), (j + 1) % segments, j], -1)
    top_ring = (len(ys) - 1) * segments
    top = np.stack([np.full(segments, n + 1), top_ring + j, top_ring + (j + 1) % segments], -1)
    return TriangleMesh(np.concatenate([rings, centers]), np.concatenate(faces + [bottom, top]).astype(np.int32))


def cylinder(radius: float, half_height: float, segments: int = 24) -> TriangleMesh:
    """A closed cylinder of ``radius`` (m) along ``y`` from ``-half_height`` to
    ``half_height`` (m) (Simbody ``DecorativeCylinder``). **Returns:** a ``TriangleMesh``."""
    return _capped_tube((radius, radius), (-half_height, half_height), segments)


def cone(
    base_radius: float, height: float, origin=(0.0, 0.0, 0.0), direction=(0.0, 1.0, 0.0), segments: int = 24
) -> TriangleMesh:
    """A cone with its base of ``base_radius`` (m) centred at ``origin`` and its tip at
    ``height`` (m) along ``direction`` (OpenSim ``Cone``). **Returns:** a ``TriangleMesh``."""
    mesh = _capped_tube((base_radius, 1e-9 * max(base_radius, 1e-9)), (0.0, height), segments)
    return mesh.transformed(_rotation_from_y(direction), origin)


def brick(half_lengths) -> TriangleMesh:
    """A box centred at the origin with ``half_lengths (3,)`` (m) along x, y, z.
    **Returns:** a ``TriangleMesh`` (each face its own four vertices, for flat shading)."""
    h = np.asarray(half_lengths, float)
    verts, faces = [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            u, v = (axis + 1) % 3, (axis + 2) % 3
            corners = []
            for a, b in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                c = np.zeros(3)
                c[axis], c[u], c[v] = sign, a, b
                corners.append(c * h)
            k = len(verts)
            verts += corners
            faces += [(k, k + 1, k + 2), (k, k + 2, k + 3)] if sign > 0 else [(k, k + 2, k + 1), (k, k + 3, k + 2)]
    return TriangleMesh(np.asarray(verts), np.asarray(faces, np.int32))


def torus(ring_radius: float, tube_radius: float, segments: int = 32, tube_segments: int = 12) -> TriangleMesh:
    """A torus around ``z``: its tube's centre circle of ``ring_radius`` (m) in the
    x-y plane, the tube of ``tube_radius`` (m) (OpenSim ``WrapTorus``).
    **Returns:** a ``TriangleMesh``."""
    u = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    v = np.linspace(0.0, 2 * np.pi, tube_segments, endpoint=False)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    r = ring_radius + tube_radius * np.cos(vv)
    verts = np.stack([r * np.cos(uu), r * np.sin(uu), tube_radius * np.sin(vv)], -1).reshape(-1, 3)
    faces = _grid_faces(segments, tube_segments, True)
    # close the ring: the last row of vertices joins the first
    j = np.arange(tube_segments)
    a, b = (segments - 1) * tube_segments + j, (segments - 1) * tube_segments + (j + 1) % tube_segments
    c, d = j, (j + 1) % tube_segments
    closing = np.concatenate([np.stack([a, c, b], -1), np.stack([b, c, d], -1)])
    return TriangleMesh(verts, np.concatenate([faces, closing]).astype(np.int32))


def _rotation_from_y(direction) -> np.ndarray:
    """A rotation taking ``+y`` onto the unit vector along ``direction``."""
    d = np.asarray(direction, float)
    n = np.linalg.norm(d)
    d = np.array([0.0, 1.0, 0.0]) if n == 0 else d / n
    y = np.array([0.0, 1.0, 0.0])
    c = float(y @ d)
    if c < -1.0 + 1e-12:
        return np.diag([1.0, -1.0, -1.0])
    k = np.cross(y, d)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + K + K @ K / (1.0 + c)


def arrow(
    length: float = 1.0,
    shaft_radius: float = 0.02,
    head_radius: float = 0.05,
    head_length: float = 0.15,
    direction=(0.0, 1.0, 0.0),
    segments: int = 12,
) -> TriangleMesh:
    """An arrow from the origin along ``direction``, ``length`` (m) long with a conical head.
    **Returns:** a ``TriangleMesh``."""
    head_length = min(head_length, 0.5 * length)
    shaft = _capped_tube((shaft_radius, shaft_radius), (0.0, length - head_length), segments)
    head = _capped_tube((head_radius, 1e-9), (length - head_length, length), segments)
    return merge([shaft, head]).transformed(_rotation_from_y(direction), np.zeros(3))


def axes(length: float = 1.0, radius: float = 0.004) -> tuple[TriangleMesh, np.ndarray]:
    """Three arrows along x, y, z (OpenSim ``FrameGeometry``).

    **Arguments:** ``length`` (m); ``radius``: the shafts' radius (m).

    **Returns:** ``(mesh, colors (n_vertices, 3))``: red, green and blue arrows.
    """
    parts, colors = [], []
    for k, rgb in enumerate(((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))):
        d = np.zeros(3)
        d[k] = 1.0
        a = arrow(length, radius, 2.5 * radius, 0.15 * length, d, 8)
        parts.append(a)
        colors.append(np.tile(rgb, (a.n_vertices, 1)))
    return merge(parts), np.concatenate(colors)


def square(half_size: float, normal_axis: int = 0) -> TriangleMesh:
    """A square of ``half_size`` (m) centred at the origin, normal to ``normal_axis``
    (0: x, as OpenSim's ``ContactHalfSpace`` whose boundary is the plane x = 0), both
    sides facing out. **Returns:** a ``TriangleMesh``."""
    u, v = (normal_axis + 1) % 3, (normal_axis + 2) % 3
    verts = np.zeros((4, 3))
    for k, (a, b) in enumerate(((-1, -1), (1, -1), (1, 1), (-1, 1))):
        verts[k, u], verts[k, v] = a * half_size, b * half_size
    faces = np.asarray([(0, 1, 2), (0, 2, 3), (0, 2, 1), (0, 3, 2)], np.int32)
    return TriangleMesh(verts, faces)
