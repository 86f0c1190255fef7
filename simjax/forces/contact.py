"""Contact geometry and compliant contact forces.

Geometry (OpenSim ContactGeometry family) lives in the model's
``contactgeometryset``, fixed to a PhysicalFrame by ``location`` and body-fixed XYZ
``orientation``:

- ``ContactHalfSpace``: the solid region ``x > 0`` of its frame (outward normal
  ``-x``); the floor of a gait model is a half-space rotated by -90 deg about z.
- ``ContactSphere``: a sphere of ``radius`` centred at the frame origin.
- ``ContactMesh``: a closed triangle mesh read from ``filename`` (.obj, .stl, .vtp
  with ASCII data) or given as arrays; used by ``ElasticFoundationForce``.

Forces, each evaluating all its contact pairs together, vectorized, with Simbody's
formulas (``HuntCrossleyForce.cpp``, ``ElasticFoundationForce.cpp``,
``SmoothSphereHalfSpaceForce.cpp``, ``CollisionDetectionAlgorithm.cpp``):

- ``HuntCrossleyForce``: Hertz force ``4/3 k d sqrt(R k d)`` with Hunt-Crossley
  dissipation ``(1 + 3/2 c v_n)`` and Simbody's static/dynamic/viscous friction
  between every sphere/half-space and sphere/sphere pair of its geometry.
- ``SmoothSphereHalfSpaceForce``: the everywhere-differentiable sphere/half-space
  model of OpenSim Moco (Serrancoli et al. 2019).
- ``ElasticFoundationForce``: a bed of springs, one per mesh face, for meshes
  against half-spaces and spheres (OpenSim applies no force to pairs without a
  mesh, and neither does simjax).

**Simbody quirk kept for fidelity.** Simbody's Hunt-Crossley loop *returns* at the
first contact whose normal force is not positive (a sphere leaving the surface
faster than ``2 / (3 c)``): later contacts of the same force, in the order of its
broad-phase sweep, apply nothing. simjax reproduces the sweep order and the early
return, so it matches OpenSim state for state.

All parameters (stiffness, dissipation, friction, radii, locations, masses) are
differentiable; forces are finite for every state and their gradients too (the
Hertz and friction terms are written so that no ``sqrt`` or division is evaluated
at zero).
"""

from __future__ import annotations

import os
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import Component, ModelError, Stage, _as_property, flag, output, prop, socket
from ..component import resolve_path
from ..groups import Forces, point_force_on_bodies
from ._common import about_body_origins, point_velocities
from .base import Force

__all__ = [
    "ContactGeometry",
    "ContactHalfSpace",
    "ContactSphere",
    "ContactMesh",
    "ContactParameters",
    "HuntCrossleyForce",
    "ElasticFoundationForce",
    "SmoothSphereHalfSpaceForce",
    "read_mesh",
]

HALFSPACE, SPHERE, MESH = 0, 1, 2


# -- geometry ------------------------------------------------------------------------


class ContactGeometry(Component):
    """A contact surface fixed to a PhysicalFrame (abstract; OpenSim ContactGeometry).

    **Fields:** ``frame``: socket to the PhysicalFrame; ``location``: the
    geometry's origin in that frame (m); ``orientation``: its body-fixed XYZ angles
    in that frame (rad).
    """

    set_name: ClassVar[str | None] = "contactgeometryset"
    kind: ClassVar[int] = -1

    frame: str = socket("PhysicalFrame", doc="The frame to which this contact geometry is attached.")
    location: np.ndarray = prop((0.0, 0.0, 0.0), doc="Location of the geometry's origin in the frame (m).", shape=(3,))
    orientation: np.ndarray = prop((0.0, 0.0, 0.0), doc="Body-fixed XYZ orientation in the frame (rad).", shape=(3,))

    def pose_in_frame(self):
        """``(R, p)``: the geometry's pose in its frame."""
        return spatial.xyz_body_rotation(jnp.asarray(self.orientation)), jnp.asarray(self.location)


def resolve_geometry(build, path: str, name: str, prop: str = "geometry") -> str:
    """The path of a ContactGeometry named by a contact force: ``name`` relative to the
    model root, else ``/contactgeometryset/<name>`` (OpenSim's lookup).

    **Raises:** ``ModelError`` if neither is a ContactGeometry.
    """
    for cand in (resolve_path(name, "/"), "/contactgeometryset/" + name):
        if build.model.has(cand) and isinstance(build.model.find(cand), ContactGeometry):
            return cand
    raise ModelError(
        path,
        "no ContactGeometry has this name (looked in the model root and /contactgeometryset)",
        prop=prop,
        value=name,
    )


class ContactHalfSpace(ContactGeometry):
    """The half-space ``x > 0`` of the geometry frame (outward normal ``-x``)."""

    kind: ClassVar[int] = HALFSPACE

    def __init__(
        self, name: str, frame: str = "", location=(0.0, 0.0, 0.0), orientation=(0.0, 0.0, 0.0), components: tuple = ()
    ):
        self.name = name
        self.frame = frame
        self.location = location
        self.orientation = orientation
        self.components = components


class ContactSphere(ContactGeometry):
    """A sphere centred at the geometry origin. ``radius`` (m)."""

    kind: ClassVar[int] = SPHERE
    radius: np.ndarray = prop(0.0, doc="Radius of the sphere (m).", bounds=(0.0, None))

    def __init__(
        self,
        name: str,
        frame: str = "",
        radius=0.0,
        location=(0.0, 0.0, 0.0),
        orientation=(0.0, 0.0, 0.0),
        components: tuple = (),
    ):
        self.name = name
        self.frame = frame
        self.radius = radius
        self.location = location
        self.orientation = orientation
        self.components = components


def _as_vertices(v):
    return None if v is None else np.asarray(v, np.float64).reshape(-1, 3)


class ContactMesh(ContactGeometry):
    """A closed triangle mesh (OpenSim ContactMesh).

    **Fields:** ``filename``: the mesh file (.obj, .stl, or .vtp with ASCII data),
    read when the component is created (relative to ``directory`` if given);
    ``vertices (n, 3)`` (m, differentiable) and ``faces`` (triangles as vertex
    index triples, static) may be given instead. Polygons are split as Simbody
    splits them (quads into two triangles, larger polygons about their centroid).
    Meshes are supported by ``ElasticFoundationForce`` against half-spaces and
    spheres; ``HuntCrossleyForce`` ignores them (as Simbody does).
    """

    kind: ClassVar[int] = MESH
    filename: str = flag("", doc="Path to the mesh file (.obj, .stl, .vtp).")
    vertices: np.ndarray | None = eqx.field(default=None, converter=_as_vertices)
    faces: tuple = eqx.field(static=True, default=())

    def __init__(
        self,
        name: str,
        frame: str = "",
        filename: str = "",
        location=(0.0, 0.0, 0.0),
        orientation=(0.0, 0.0, 0.0),
        *,
        vertices=None,
        faces=None,
        directory: str | None = None,
        components: tuple = (),
    ):
        self.name = name
        self.frame = frame
        self.filename = filename
        self.location = location
        self.orientation = orientation
        self.components = components
        if vertices is None and filename:
            path = filename if directory is None else os.path.join(directory, filename)
            if os.path.exists(path):
                vertices, faces = read_mesh(path)
        self.vertices = vertices
        self.faces = tuple(tuple(int(i) for i in f) for f in (faces if faces is not None else ()))

    def validate(self, path: str) -> None:
        """Check the mesh was read and is a closed manifold of non-degenerate triangles
        (Simbody's requirements)."""
        super().validate(path)
        if self.vertices is None or not self.faces:
            raise ModelError(
                path,
                "the mesh file could not be read (give its directory, or vertices and faces)",
                prop="filename",
                value=self.filename,
            )
        if isinstance(self.vertices, np.ndarray):
            _check_mesh(path, self.vertices, np.asarray(self.faces))


def read_mesh(path: str):
    """Read a polygon mesh and triangulate it as Simbody does.

    **Arguments:** ``path``: a .obj, .stl (ASCII or binary) or .vtp (ASCII) file.

    **Returns:** ``(vertices (n, 3), faces (m, 3) int)``.

    **Raises:** ``ValueError`` for unsupported or malformed files.
    """
    ext = os.path.splitext(path)[1].lower()
    if ext == ".obj":
        verts, polys = _read_obj(path)
    elif ext == ".stl":
        verts, polys = _read_stl(path)
    elif ext == ".vtp":
        verts, polys = _read_vtp(path)
    else:
        raise ValueError(f"{path}: unsupported mesh format {ext!r} (use .obj, .stl or .vtp)")
    return _triangulate(np.asarray(verts, np.float64).reshape(-1, 3), polys)


def _triangulate(verts, polys):
    verts = [tuple(v) for v in verts]
    tris = []
    for poly in polys:
        n = len(poly)
        if n < 3:
            continue
        if n == 3:
            tris.append(tuple(poly))
        elif n == 4:
            tris += [(poly[0], poly[1], poly[2]), (poly[2], poly[3], poly[0])]
        else:
            c = tuple(np.mean([verts[i] for i in poly], axis=0))
            verts.append(c)
            k = len(verts) - 1
            tris += [(poly[j], poly[j + 1], k) for j in range(n - 1)] + [(poly[-1], poly[0], k)]
    return np.asarray(verts, np.float64), np.asarray(tris, np.int64)


def _read_obj(path):
    verts, polys = [], []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "v":
                verts.append([float(x) for x in parts[1:4]])
            elif parts[0] == "f":
                idx = [int(p.split("/")[0]) for p in parts[1:]]
                polys.append([i - 1 if i > 0 else len(verts) + i for i in idx])
    return verts, polys


def _read_stl(path):
    with open(path, "rb") as fh:
        data = fh.read()
    tris = []
    if data[:5].lower() == b"solid" and b"facet" in data[:1000]:
        pts = [
            [float(x) for x in ln.split()[1:4]]
            for ln in data.decode(errors="replace").splitlines()
            if ln.strip().startswith("vertex")
        ]
        tris = np.asarray(pts, np.float64).reshape(-1, 3, 3)
    else:
        n = int(np.frombuffer(data[80:84], "<u4")[0])
        rec = np.frombuffer(
            data[84 : 84 + 50 * n], dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
        )
        tris = rec["v"].astype(np.float64)
    # merge coincident vertices (an STL file is a triangle soup)
    flat = tris.reshape(-1, 3)
    uniq, inv = np.unique(flat, axis=0, return_inverse=True)
    return uniq, inv.reshape(-1, 3).tolist()


def _read_vtp(path):
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    piece = root.find(".//Piece")
    if piece is None:
        raise ValueError(f"{path}: no PolyData Piece")

    def array(node, name):
        da = node.find(".//DataArray")
        if da is None or da.get("format", "ascii") != "ascii":
            raise ValueError(f"{path}: only ASCII {name} data arrays are supported")
        return np.asarray(da.text.split(), float)

    pts = array(piece.find("Points"), "Points").reshape(-1, 3)
    polys = piece.find("Polys")
    arrays = {da.get("Name"): da for da in polys.findall("DataArray")}
    if any(a.get("format", "ascii") != "ascii" for a in arrays.values()):
        raise ValueError(f"{path}: only ASCII Polys data arrays are supported")
    conn = np.asarray(arrays["connectivity"].text.split(), int)
    offs = np.asarray(arrays["offsets"].text.split(), int)
    starts = np.concatenate([[0], offs[:-1]])
    return pts, [conn[a:b].tolist() for a, b in zip(starts, offs)]


def _check_mesh(path, verts, faces):
    if faces.ndim != 2 or faces.shape[1] != 3 or faces.min() < 0 or faces.max() >= len(verts):
        raise ModelError(path, "faces must be vertex index triples within range", prop="faces", value=faces.shape)
    v = verts[faces]
    area2 = np.linalg.norm(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), axis=-1)
    if np.any(area2 <= 0):
        raise ModelError(path, f"face {int(np.argmin(area2))} is degenerate", prop="faces")
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    fwd = edges[edges[:, 0] < edges[:, 1]]
    bwd = edges[edges[:, 0] > edges[:, 1]][:, ::-1]
    if (
        len(np.unique(fwd, axis=0)) != len(fwd)
        or len(np.unique(bwd, axis=0)) != len(bwd)
        or len(fwd) != len(bwd)
        or not np.array_equal(np.unique(fwd, axis=0), np.unique(bwd, axis=0))
    ):
        raise ModelError(
            path,
            "the mesh is not closed: each edge must be shared by exactly two faces (Simbody's requirement)",
            prop="faces",
        )


# -- contact parameters ----------------------------------------------------------------


class ContactParameters(eqx.Module):
    """Material parameters of a set of contact geometries (OpenSim
    ``HuntCrossleyForce::ContactParameters`` / ``ElasticFoundationForce::ContactParameters``).

    **Fields:** ``geometry``: names (or paths) of ContactGeometry components;
    ``stiffness`` (plane-strain modulus, Pa, for Hunt-Crossley; N/m^3 for the elastic
    foundation); ``dissipation`` (s/m); ``static_friction``, ``dynamic_friction``,
    ``viscous_friction`` (s/m).
    """

    geometry: tuple = eqx.field(static=True, default=())
    stiffness: np.ndarray = eqx.field(default=0.0, converter=_as_property)
    dissipation: np.ndarray = eqx.field(default=0.0, converter=_as_property)
    static_friction: np.ndarray = eqx.field(default=0.0, converter=_as_property)
    dynamic_friction: np.ndarray = eqx.field(default=0.0, converter=_as_property)
    viscous_friction: np.ndarray = eqx.field(default=0.0, converter=_as_property)


_MATERIAL = ("stiffness", "dissipation", "static_friction", "dynamic_friction", "viscous_friction")


class _CompliantContactForce(Force):
    """Shared structure of HuntCrossleyForce and ElasticFoundationForce: a list of
    ContactParameters and a transition velocity (abstract)."""

    contact_parameters: tuple = ()
    transition_velocity: np.ndarray = prop(
        0.01, doc="Slip speed at which peak static friction occurs (m/s).", bounds=(0.0, None)
    )

    def __init__(
        self,
        name: str,
        geometry=(),
        stiffness=0.0,
        dissipation=0.0,
        static_friction=0.0,
        dynamic_friction=0.0,
        viscous_friction=0.0,
        transition_velocity=0.01,
        *,
        contact_parameters: tuple | None = None,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        if contact_parameters is None:
            contact_parameters = (
                ContactParameters(
                    tuple(geometry), stiffness, dissipation, static_friction, dynamic_friction, viscous_friction
                ),
            )
        self.contact_parameters = tuple(contact_parameters)
        self.transition_velocity = transition_velocity
        self.applies_force = applies_force
        self.components = components

    def validate(self, path: str) -> None:
        """Check the transition velocity is positive and parameters are ContactParameters."""
        super().validate(path)
        if isinstance(self.transition_velocity, np.ndarray) and not self.transition_velocity > 0:
            raise ModelError(path, "must be > 0", prop="transition_velocity", value=self.transition_velocity)
        for cp in self.contact_parameters:
            if not isinstance(cp, ContactParameters):
                raise ModelError(
                    path, "entries must be ContactParameters", prop="contact_parameters", value=type(cp).__name__
                )

    @staticmethod
    def _surfaces(build, path):
        """Surfaces of one force, in the order OpenSim adds them to its contact set."""
        comp = build.find(path)
        out = []
        for ci, cp in enumerate(comp.contact_parameters):
            for name in cp.geometry:
                gpath = resolve_geometry(build, path, name)
                geom = build.find(gpath)
                frame = build.socket(gpath, "frame")
                out.append((gpath, geom, frame, ci))
        return out

    @staticmethod
    def _surface_params(model, group, kind_filter=None):
        s = group.static
        dtype = jnp.result_type(float)
        comps = [model.find(p) for p in group.paths]
        mat = {m: [] for m in _MATERIAL}
        loc, ori, rad = [], [], []
        for (force_i, ci), gpath in zip(s["surface_param"], s["surface_paths"]):
            cp = comps[force_i].contact_parameters[ci]
            for m in _MATERIAL:
                mat[m].append(jnp.asarray(getattr(cp, m), dtype))
            g = model.find(gpath)
            loc.append(jnp.asarray(g.location, dtype))
            ori.append(jnp.asarray(g.orientation, dtype))
            rad.append(jnp.asarray(getattr(g, "radius", 0.0), dtype))
        out = {m: jnp.stack(v) for m, v in mat.items()} if loc else {}
        if loc:
            out.update(location=jnp.stack(loc), orientation=jnp.stack(ori), radius=jnp.stack(rad))
        out["transition_velocity"] = jnp.stack([jnp.asarray(c.transition_velocity, dtype) for c in comps])
        return out


def _geometry_poses(ctx, frames, location, orientation):
    """Poses in Ground of geometries on ``frames`` with the given offsets."""
    X_GF = ctx.frames_in_ground(frames)
    return spatial.compose(X_GF, (spatial.xyz_body_rotation(orientation), location))


def _friction_over_slip(f, vt2, vtrans, us, ud, uv):
    """``ffriction / vslip`` of Simbody's friction law, smooth and finite at zero slip.

    ``ffriction = f (min(vrel, 1) (ud + 2 (us - ud) / (1 + vrel^2)) + uv vslip)`` with
    ``vrel = vslip / vtrans``; divided by ``vslip`` it has a finite limit at 0.
    """
    vrel2 = vt2 / (vtrans * vtrans)
    slow = vrel2 < 1.0
    vslip = jnp.sqrt(jnp.where(slow, 1.0, vt2))
    min_over_slip = jnp.where(slow, 1.0 / vtrans, 1.0 / vslip)
    return f * (min_over_slip * (ud + 2.0 * (us - ud) / (1.0 + vrel2)) + uv)


def _harmonic(a, b):
    """``2ab/(a+b)``, 0 when both are 0 (Simbody's combination of friction coefficients)."""
    both_zero = (a == 0) & (b == 0)
    return jnp.where(both_zero, 0.0, 2.0 * a * b / jnp.where(both_zero, 1.0, a + b))


# -- Hunt-Crossley ------------------------------------------------------------------------


class HuntCrossleyForce(_CompliantContactForce):
    """Hertz contact with Hunt-Crossley dissipation and friction (OpenSim
    HuntCrossleyForce, Simbody ``HuntCrossleyForce``).

    Every pair of its geometries with a Simbody collision algorithm (sphere and
    half-space, two spheres) is checked at every state. For surfaces 1 and 2 with
    ``k_i = stiffness_i^(2/3)``: ``s = k2 / (k1 + k2)``, ``k = k1 s``,
    ``c = c1 s + c2 (1 - s)``, and with penetration ``d``, effective radius ``R``
    and approach speed ``v_n``::

        f_n = 4/3 k d sqrt(R k d) (1 + 3/2 c v_n)

    applied at the contact point shifted by ``d (1/2 - s)`` along the normal.
    Friction ``f_n (min(v/v_t, 1) (ud + 2 (us - ud) / (1 + (v/v_t)^2)) + uv v)``
    opposes the slip speed ``v``, with harmonic means of the two surfaces'
    coefficients.

    **Fields:** ``contact_parameters``: ContactParameters (material and geometry
    names); ``transition_velocity`` (m/s). The constructor's convenience arguments
    make one ContactParameters: ``HuntCrossleyForce("contact", ("floor", "heel"),
    stiffness=1e7, dissipation=0.5, static_friction=0.9, ...)``.
    """

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: every contact surface of every force (geometry path, frame,
        mobilizer, kind), and the surface pairs that can touch, with the force each belongs to."""
        surf_paths, surf_param, frames, mobs, kinds, set_of, pairs, pair_set = [], [], [], [], [], [], [], []
        n_max = 1
        for fi, p in enumerate(paths):
            surfs = cls._surfaces(build, p)
            n_max = max(n_max, len(surfs))
            base = len(surf_paths)
            for gpath, geom, frame, ci in surfs:
                surf_paths.append(gpath)
                surf_param.append((fi, ci))
                frames.append(frame)
                mobs.append(build.frame_mob(frame))
                kinds.append(geom.kind)
                set_of.append(fi)
            for a in range(len(surfs)):
                for b in range(a + 1, len(surfs)):
                    ka, kb = kinds[base + a], kinds[base + b]
                    if {ka, kb} == {HALFSPACE, SPHERE} or (ka == kb == SPHERE):
                        pairs.append((base + a, base + b))
                        pair_set.append(fi)
        kinds = np.asarray(kinds, np.int32)
        pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
        hs = np.asarray([i for i, (a, b) in enumerate(pairs) if HALFSPACE in (kinds[a], kinds[b])], np.int32)
        ss = np.asarray([i for i, (a, b) in enumerate(pairs) if kinds[a] == kinds[b] == SPHERE], np.int32)
        # (halfspace, sphere) order for the half-space pairs
        hs_pairs = np.asarray([(a, b) if kinds[a] == HALFSPACE else (b, a) for a, b in pairs[hs]], np.int32).reshape(
            -1, 2
        )
        # padded per-force surface table for the broad-phase sweep order
        slots = np.full((len(paths), n_max), -1, np.int32)
        for fi in range(len(paths)):
            members = [i for i, f in enumerate(set_of) if f == fi]
            slots[fi, : len(members)] = members
        local = np.zeros(len(surf_paths), np.int32)
        for fi in range(len(paths)):
            for j, i in enumerate(slots[fi][slots[fi] >= 0]):
                local[i] = j
        pair_set = np.asarray(pair_set, np.int32)
        return {
            "surface_paths": tuple(surf_paths),
            "surface_param": tuple(surf_param),
            "frames": tuple(frames),
            "mob": np.asarray(mobs, np.int32),
            "kind": kinds,
            "pairs": pairs,
            "pair_set": pair_set,
            "hs": hs,
            "hs_pairs": hs_pairs,
            "ss": ss,
            "slots": slots,
            "local": local,
            "same_set": pair_set[:, None] == pair_set[None, :],
            "many_pairs": bool(len(pair_set)) and int(np.bincount(pair_set).max()) > 1,
            "on": np.asarray([build.find(p).applies_force for p in paths], bool),
        }

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: each surface's contact parameters (stiffness,
        dissipation, friction), stacked."""
        return cls._surface_params(model, group)

    @classmethod
    def _contacts(cls, group, params, ctx):
        """Per pair: penetration, normal (from surface 1 into 2), contact location,
        effective radius and the surfaces 1 and 2 (Simbody's order); and the
        geometry origins in Ground."""
        s = group.static
        dtype = ctx.pos.S.dtype
        n_pairs = len(s["pairs"])
        R, p = _geometry_poses(ctx, s["frames"], params["location"], params["orientation"])
        r = params["radius"]
        depth = jnp.zeros(n_pairs, dtype)
        normal = jnp.zeros((n_pairs, 3), dtype)
        loc = jnp.zeros((n_pairs, 3), dtype)
        radius = jnp.ones(n_pairs, dtype)
        s1 = np.zeros(n_pairs, np.int32)
        s2 = np.zeros(n_pairs, np.int32)
        if len(s["hs"]):
            h, b = s["hs_pairs"][:, 0], s["hs_pairs"][:, 1]
            c = spatial.mat_tvec(R[h], p[b] - p[h])  # sphere centre in the half-space frame
            d = r[b] + c[:, 0]
            depth = depth.at[s["hs"]].set(d)
            normal = normal.at[s["hs"]].set(-R[h][:, :, 0])
            local = jnp.stack([d / 2, c[:, 1], c[:, 2]], -1)
            loc = loc.at[s["hs"]].set(spatial.mat_vec(R[h], local) + p[h])
            radius = radius.at[s["hs"]].set(r[b])
            s1[s["hs"]], s2[s["hs"]] = h, b
        if len(s["ss"]):
            a, b = s["pairs"][s["ss"], 0], s["pairs"][s["ss"], 1]
            delta = p[b] - p[a]
            dist2 = jnp.sum(delta * delta, -1)
            nonzero = dist2 > 0
            dist = jnp.sqrt(jnp.where(nonzero, dist2, 1.0))
            d = jnp.where(nonzero, r[a] + r[b] - dist, -1.0)
            n = delta / dist[:, None]
            depth = depth.at[s["ss"]].set(d)
            normal = normal.at[s["ss"]].set(n)
            loc = loc.at[s["ss"]].set(p[a] + (r[a] - d / 2)[:, None] * n)
            radius = radius.at[s["ss"]].set(r[a] * r[b] / (r[a] + r[b]))
            s1[s["ss"]], s2[s["ss"]] = a, b
        return depth, normal, loc, radius, s1, s2, p

    @classmethod
    def _sweep_keys(cls, group, params, centers):
        """Simbody's processing order of each pair within its force (broad-phase sweep):
        surfaces sorted by the start of their bounding interval along the axis of
        largest spread; pairs in (earlier, later) lexicographic order."""
        s = group.static
        slots = s["slots"]
        valid = slots >= 0
        c = jnp.where(valid[..., None], centers[jnp.maximum(slots, 0)], 0.0)  # (F, n, 3)
        count = valid.sum(1)[:, None]
        avg = c.sum(1) / count
        var = jnp.where(valid[..., None], jnp.abs(c - avg[:, None]), 0.0).sum(1)
        axis = jnp.where(var[:, 0] > var[:, 1], 0, 1)
        axis = jnp.where(var[:, 2] > jnp.take_along_axis(var, axis[:, None], 1)[:, 0], 2, axis)
        kind = s["kind"][np.maximum(slots, 0)]
        rad = jnp.where(kind == HALFSPACE, jnp.inf, params["radius"][jnp.maximum(slots, 0)])
        start = jnp.take_along_axis(c, axis[:, None, None], 2)[..., 0] - rad
        start = jnp.where(valid, start, jnp.inf)
        order = jnp.argsort(start, axis=1, stable=True)
        rank = jnp.argsort(order, axis=1)  # (F, n) rank of each local slot
        pa, pb = s["pairs"][:, 0], s["pairs"][:, 1]
        ra = rank[s["pair_set"], s["local"][pa]]
        rb = rank[s["pair_set"], s["local"][pb]]
        n = slots.shape[1]
        return jnp.minimum(ra, rb) * n + jnp.maximum(ra, rb)

    @classmethod
    def _evaluate(cls, group, params, ctx):
        s = group.static
        depth, normal, loc, radius, s1, s2, centers = cls._contacts(group, params, ctx)
        active = depth > 0
        k1 = params["stiffness"][s1] ** (2.0 / 3.0)
        k2 = params["stiffness"][s2] ** (2.0 / 3.0)
        frac1 = k2 / (k1 + k2)
        frac2 = 1.0 - frac1
        location = loc + (depth * (0.5 - frac1))[:, None] * normal
        k = k1 * frac1
        c = params["dissipation"][s1] * frac1 + params["dissipation"][s2] * frac2
        d = jnp.where(active, depth, 0.0)
        fH = (4.0 / 3.0) * k * d * jnp.sqrt(radius * k * jnp.where(active, d, 1.0))
        pe = 0.4 * fH * d
        m1, m2 = s["mob"][s1], s["mob"][s2]
        v = point_velocities(ctx, m1, location) - point_velocities(ctx, m2, location)
        vn = jnp.sum(v * normal, -1)
        vt = v - vn[:, None] * normal
        f = fH * (1.0 + 1.5 * c * vn)
        # Simbody returns at the first contact (in sweep order) with f <= 0; with one
        # pair per force the order is moot
        if s["many_pairs"]:
            key = cls._sweep_keys(group, params, centers)
            stops = active & (f <= 0)
            blocked = jnp.any(s["same_set"] & stops[None, :] & (key[None, :] < key[:, None]), axis=1)
            processed = active & ~blocked
        else:
            processed = active
        applied = processed & (f > 0)
        us = _harmonic(params["static_friction"][s1], params["static_friction"][s2])
        ud = _harmonic(params["dynamic_friction"][s1], params["dynamic_friction"][s2])
        uv = _harmonic(params["viscous_friction"][s1], params["viscous_friction"][s2])
        vtrans = params["transition_velocity"][s["pair_set"]]
        ff = _friction_over_slip(f, jnp.sum(vt * vt, -1), vtrans, us, ud, uv)
        force = jnp.where(applied[:, None], f[:, None] * normal + ff[:, None] * vt, 0.0)
        pe = jnp.where(processed, pe, 0.0)
        return force, location, m1, m2, pe, applied, depth

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: Hunt-Crossley normal force with friction at each touching
        pair's contact point, equal and opposite on the two bodies.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and, per force, outputs
        ``potential_energy`` (J), ``num_contacts`` and ``max_penetration`` (m)."""
        s = group.static
        nf = len(group.paths)
        dtype = ctx.pos.S.dtype
        if not len(s["pairs"]):
            zero = jnp.zeros(nf, dtype)
            return Forces(outputs={"potential_energy": zero, "num_contacts": zero, "max_penetration": zero - jnp.inf})
        force, location, m1, m2, pe, applied, depth = cls._evaluate(group, params, ctx)
        force = jnp.where(s["on"][s["pair_set"]][:, None], force, 0.0)
        n = ctx.tree.n_mob
        body = point_force_on_bodies(n, m1, location, -force, dtype) + point_force_on_bodies(
            n, m2, location, force, dtype
        )
        seg = lambda x: jax.ops.segment_sum(x, s["pair_set"], nf)
        deepest = jax.ops.segment_max(depth, s["pair_set"], nf)
        return Forces(
            body=body,
            outputs={
                "potential_energy": seg(pe),
                "num_contacts": seg(applied.astype(dtype)),
                "max_penetration": deepest,
            },
        )

    @classmethod
    def group_potential_energy(cls, group, params, ctx):
        """Elastic energy stored in the group's contacts (J), summed over pairs."""
        if not len(group.static["pairs"]):
            return 0.0
        return jnp.sum(cls._evaluate(group, params, ctx)[4])

    @output(Stage.DYNAMICS)
    def potential_energy(self, ctx):
        """Elastic energy of the Hertz contacts, ``2/5 f_H d`` summed (J), as Simbody
        counts it in the system's energy (OpenSim's output of this name reports 0)."""
        return ctx.group_output(ctx.path, "potential_energy")

    @output(Stage.DYNAMICS)
    def num_contacts(self, ctx):
        """How many contacts apply a force now (as a float)."""
        return ctx.group_output(ctx.path, "num_contacts")

    @output(Stage.POSITION)
    def max_penetration(self, ctx):
        """The largest penetration depth over this force's pairs (m): negative while
        nothing touches, crossing zero at touchdown -- a continuous witness for
        contact-onset events (``-inf`` without pairs)."""
        return ctx.group_output(ctx.path, "max_penetration")


# -- elastic foundation ---------------------------------------------------------------------


class ElasticFoundationForce(_CompliantContactForce):
    """A bed of springs over mesh faces (OpenSim ElasticFoundationForce, Simbody
    ``ElasticFoundationForce``).

    For each face of a ContactMesh whose centroid lies inside the other geometry (a
    half-space or a sphere), a spring from the centroid to the nearest surface point
    pushes with ``stiffness * area * distance * (1 + dissipation * v_n)`` (when
    positive) plus Simbody's friction. Only meshes carry parameters, so pairs
    without a mesh apply no force, exactly as in OpenSim. Mesh-mesh pairs are not
    supported (a build error).

    **Fields:** as ``HuntCrossleyForce``.
    """

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: every contact surface (geometry path, frame, mobilizer,
        kind), the mesh/other-surface pairs, and the mesh faces of each pair."""
        surf_paths, surf_param, frames, mobs, kinds = [], [], [], [], []
        mesh_of, other_of, pair_set, face_pair, face_idx = [], [], [], [], []
        for fi, p in enumerate(paths):
            surfs = cls._surfaces(build, p)
            base = len(surf_paths)
            for gpath, geom, frame, ci in surfs:
                surf_paths.append(gpath)
                surf_param.append((fi, ci))
                frames.append(frame)
                mobs.append(build.frame_mob(frame))
                kinds.append(geom.kind)
            for a in range(len(surfs)):
                for b in range(a + 1, len(surfs)):
                    ka, kb = kinds[base + a], kinds[base + b]
                    if ka == kb == MESH:
                        raise ModelError(
                            p,
                            f"mesh-mesh contact ({surf_paths[base + a]}, {surf_paths[base + b]}) is not supported",
                            prop="contact_parameters",
                        )
                    if MESH not in (ka, kb):
                        continue  # no parameters on either surface: OpenSim applies nothing
                    m, o = (base + a, base + b) if ka == MESH else (base + b, base + a)
                    n_faces = len(build.find(surf_paths[m]).faces)
                    pi = len(mesh_of)
                    mesh_of.append(m)
                    other_of.append(o)
                    pair_set.append(fi)
                    face_pair += [pi] * n_faces
                    face_idx += list(range(n_faces))
        return {
            "surface_paths": tuple(surf_paths),
            "surface_param": tuple(surf_param),
            "frames": tuple(frames),
            "mob": np.asarray(mobs, np.int32),
            "kind": np.asarray(kinds, np.int32),
            "mesh": np.asarray(mesh_of, np.int32),
            "other": np.asarray(other_of, np.int32),
            "pair_set": np.asarray(pair_set, np.int32),
            "face_pair": np.asarray(face_pair, np.int32),
            "face_index": np.asarray(face_idx, np.int32),
            "on": np.asarray([build.find(p).applies_force for p in paths], bool),
        }

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: each surface's contact parameters, plus each mesh
        face's centroid (m, in its body's frame) and area (m^2)."""
        s = group.static
        out = cls._surface_params(model, group)
        dtype = jnp.result_type(float)
        cents, areas = [], []
        for m in s["mesh"]:
            mesh = model.find(s["surface_paths"][m])
            v = jnp.asarray(mesh.vertices, dtype)[np.asarray(mesh.faces)]
            cents.append(v.mean(1))
            areas.append(0.5 * jnp.linalg.norm(jnp.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), axis=-1))
        if cents:
            out["centroid"] = jnp.concatenate(cents)
            out["area"] = jnp.concatenate(areas)
        return out

    @classmethod
    def _evaluate(cls, group, params, ctx):
        s = group.static
        R, p = _geometry_poses(ctx, s["frames"], params["location"], params["orientation"])
        fp = s["face_pair"]
        ms, os_ = s["mesh"][fp], s["other"][fp]
        spring = spatial.mat_vec(R[ms], params["centroid"]) + p[ms]  # face centroids in Ground
        local = spatial.mat_tvec(R[os_], spring - p[os_])  # ... in the other geometry's frame
        is_hs = s["kind"][os_] == HALFSPACE
        r = params["radius"][os_]
        n2 = jnp.sum(local * local, -1)
        inside = jnp.where(is_hs, local[:, 0] >= 0, n2 <= r * r)
        safe_n = jnp.sqrt(jnp.where(n2 > 0, n2, 1.0))
        near_local = jnp.where(is_hs[:, None], local.at[:, 0].set(0.0), local * (r / safe_n)[:, None])
        near = spatial.mat_vec(R[os_], near_local) + p[os_]
        disp = near - spring
        dist2 = jnp.sum(disp * disp, -1)
        live = inside & (dist2 > 0)
        dist = jnp.sqrt(jnp.where(live, dist2, 1.0))
        direction = disp / dist[:, None]
        m1, m2 = s["mob"][ms], s["mob"][os_]
        v = point_velocities(ctx, m2, near) - point_velocities(ctx, m1, near)
        vn = jnp.sum(v * direction, -1)
        vt = v - vn[:, None] * direction
        k = params["stiffness"][ms]
        area = params["area"]
        f = k * area * jnp.where(live, dist, 0.0) * (1.0 + params["dissipation"][ms] * vn)
        push = live & (f > 0)
        vtrans = params["transition_velocity"][s["pair_set"][fp]]
        ff = _friction_over_slip(
            f,
            jnp.sum(vt * vt, -1),
            vtrans,
            params["static_friction"][ms],
            params["dynamic_friction"][ms],
            params["viscous_friction"][ms],
        )
        force = jnp.where(push[:, None], f[:, None] * direction + ff[:, None] * vt, 0.0)
        pe = jnp.where(live, 0.5 * k * area * dist2, 0.0)
        return force, near, m1, m2, pe

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: the elastic-foundation force of every mesh face in
        contact, applied at the face's nearest point, equal and opposite on the two bodies.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and output ``potential_energy``
        (J) per force."""
        s = group.static
        nf = len(group.paths)
        dtype = ctx.pos.S.dtype
        if not len(s["face_pair"]):
            return Forces(outputs={"potential_energy": jnp.zeros(nf, dtype)})
        force, near, m1, m2, pe = cls._evaluate(group, params, ctx)
        force = jnp.where(s["on"][s["pair_set"][s["face_pair"]]][:, None], force, 0.0)
        n = ctx.tree.n_mob
        body = point_force_on_bodies(n, m1, near, force, dtype) + point_force_on_bodies(n, m2, near, -force, dtype)
        pe_f = jax.ops.segment_sum(pe, s["pair_set"][s["face_pair"]], nf)
        return Forces(body=body, outputs={"potential_energy": pe_f})

    @classmethod
    def group_potential_energy(cls, group, params, ctx):
        """Elastic energy stored in the group's contacts (J), summed over faces."""
        if not len(group.static["face_pair"]):
            return 0.0
        return jnp.sum(cls._evaluate(group, params, ctx)[4])

    @output(Stage.DYNAMICS)
    def potential_energy(self, ctx):
        """Elastic energy of the compressed springs (J), as Simbody counts it in the
        system's energy (OpenSim's output of this name reports 0)."""
        return ctx.group_output(ctx.path, "potential_energy")


# -- smooth sphere / half-space --------------------------------------------------------------


class SmoothSphereHalfSpaceForce(Force):
    """Smooth Hunt-Crossley contact between a sphere and a half-space (OpenSim
    SmoothSphereHalfSpaceForce, used by Moco).

    With indentation ``d``, approach speed ``v_n`` and tangential slip ``v_t``::

        k   = 1/2 stiffness^(2/3)
        f_H = 4/3 k sqrt(r k) (sqrt(d^2 + cf))^(3/2) (1/2 + 1/2 tanh(bd d))
        f   = f_H (1 + 3/2 c v_n) (1/2 + 1/2 tanh(bv (v_n + 2/(3c))))
        f_t = f (min(s/v_tr, 1) (ud + 2 (us - ud)/(1 + (s/v_tr)^2)) + uv s),
              s = sqrt(|v_t|^2 + cf)

    The normal force acts along the half-space's +x axis (into the half-space)
    at the sphere's deepest point shifted back by ``d/2``.

    **Fields:** ``sphere`` (ContactSphere), ``half_space`` (ContactHalfSpace)
    sockets; ``stiffness`` (Pa), ``dissipation`` (s/m), ``static_friction``,
    ``dynamic_friction``, ``viscous_friction`` (s/m), ``transition_velocity``
    (m/s), ``constant_contact_force`` (N), ``hertz_smoothing``,
    ``hunt_crossley_smoothing``.
    """

    sphere: str = socket("ContactSphere", doc="The sphere participating in this contact.")
    half_space: str = socket("ContactHalfSpace", doc="The half-space participating in this contact.")
    stiffness: np.ndarray = prop(1.0, doc="Plane-strain modulus (Pa).", bounds=(0.0, None))
    dissipation: np.ndarray = prop(0.0, doc="Dissipation coefficient (s/m).")
    static_friction: np.ndarray = prop(0.0, doc="Static friction coefficient.")
    dynamic_friction: np.ndarray = prop(0.0, doc="Dynamic friction coefficient.")
    viscous_friction: np.ndarray = prop(0.0, doc="Viscous friction coefficient (s/m).")
    transition_velocity: np.ndarray = prop(0.01, doc="Transition velocity (m/s).")
    constant_contact_force: np.ndarray = prop(1e-5, doc="Constant keeping derivatives non-null (N).")
    hertz_smoothing: np.ndarray = prop(300.0, doc="Smoothness of the Hertz force's onset.")
    hunt_crossley_smoothing: np.ndarray = prop(50.0, doc="Smoothness of the Hunt-Crossley force's onset.")
    force_visualization_radius: np.ndarray = prop(0.01, doc="Radius of the force arrow (display only).")

    def __init__(
        self,
        name: str,
        sphere: str = "",
        half_space: str = "",
        *,
        stiffness=1.0,
        dissipation=0.0,
        static_friction=0.0,
        dynamic_friction=0.0,
        viscous_friction=0.0,
        transition_velocity=0.01,
        constant_contact_force=1e-5,
        hertz_smoothing=300.0,
        hunt_crossley_smoothing=50.0,
        force_visualization_radius=0.01,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.sphere = sphere
        self.half_space = half_space
        self.stiffness = stiffness
        self.dissipation = dissipation
        self.static_friction = static_friction
        self.dynamic_friction = dynamic_friction
        self.viscous_friction = viscous_friction
        self.transition_velocity = transition_velocity
        self.constant_contact_force = constant_contact_force
        self.hertz_smoothing = hertz_smoothing
        self.hunt_crossley_smoothing = hunt_crossley_smoothing
        self.force_visualization_radius = force_visualization_radius
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: each force's sphere and half-space (paths, frames,
        mobilizers) and whether it applies force."""
        sph = tuple(build.socket(p, "sphere") for p in paths)
        hs = tuple(build.socket(p, "half_space") for p in paths)
        sf = tuple(build.socket(g, "frame") for g in sph)
        hf = tuple(build.socket(g, "frame") for g in hs)
        return {
            "sphere": sph,
            "half_space": hs,
            "sphere_frame": sf,
            "half_space_frame": hf,
            "mob_s": np.asarray([build.frame_mob(f) for f in sf], np.int32),
            "mob_h": np.asarray([build.frame_mob(f) for f in hf], np.int32),
            "on": np.asarray([build.find(p).applies_force for p in paths], bool),
        }

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: the contact parameters, plus each sphere's location
        (m) and radius (m) and each half-space's location (m) and orientation (rad)."""
        out = dict(super().group_params(model, group))
        dtype = jnp.result_type(float)
        s = group.static
        geo = lambda paths, f: jnp.stack([jnp.asarray(getattr(model.find(g), f), dtype) for g in paths])
        out.update(
            sphere_location=geo(s["sphere"], "location"),
            radius=geo(s["sphere"], "radius"),
            half_space_location=geo(s["half_space"], "location"),
            half_space_orientation=geo(s["half_space"], "orientation"),
        )
        return out

    @classmethod
    def _evaluate(cls, group, params, ctx):
        s = group.static
        centre = spatial.transform_point(ctx.frames_in_ground(s["sphere_frame"]), params["sphere_location"])
        R_h, p_h = _geometry_poses(
            ctx, s["half_space_frame"], params["half_space_location"], params["half_space_orientation"]
        )
        normal = R_h[:, :, 0]
        r = params["radius"]
        d = jnp.sum((centre - p_h) * normal, -1) + r
        point = centre + (r - 0.5 * d)[:, None] * normal
        v = point_velocities(ctx, s["mob_s"], point) - point_velocities(ctx, s["mob_h"], point)
        vn = jnp.sum(v * normal, -1)
        vt = v - vn[:, None] * normal
        cf, bd, bv = params["constant_contact_force"], params["hertz_smoothing"], params["hunt_crossley_smoothing"]
        k = 0.5 * params["stiffness"] ** (2.0 / 3.0)
        fh = (4.0 / 3.0) * k * jnp.sqrt(r * k) * jnp.sqrt(d * d + cf) ** 1.5 * (0.5 + 0.5 * jnp.tanh(bd * d))
        c = params["dissipation"]
        f = fh * (1.0 + 1.5 * c * vn) * (0.5 + 0.5 * jnp.tanh(bv * (vn + 2.0 / (3.0 * c))))
        vslip = jnp.sqrt(jnp.sum(vt * vt, -1) + cf)
        vrel = vslip / params["transition_velocity"]
        us, ud, uv = params["static_friction"], params["dynamic_friction"], params["viscous_friction"]
        ff = f * (jnp.minimum(vrel, 1.0) * (ud + 2.0 * (us - ud) / (1.0 + vrel * vrel)) + uv * vslip)
        force = f[:, None] * normal + (ff / vslip)[:, None] * vt
        return force, point, 0.4 * fh * d, d

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: the smooth contact force at the contact point, on the
        sphere's body and its opposite on the half-space's.

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``sphere_force``,
        ``half_space_force`` (spatial, N·m and N, about each body's origin, in Ground),
        ``potential_energy`` (J) and ``indentation`` (m)."""
        s = group.static
        force, point, pe, d = cls._evaluate(group, params, ctx)
        applied = jnp.where(s["on"][:, None], force, 0.0)
        n, dtype = ctx.tree.n_mob, force.dtype
        on_sphere = jnp.concatenate([jnp.cross(point, -force), -force], -1)  # about Ground's origin
        body = point_force_on_bodies(n, s["mob_s"], point, -applied, dtype) + point_force_on_bodies(
            n, s["mob_h"], point, applied, dtype
        )
        return Forces(
            body=body,
            outputs={
                "sphere_force": about_body_origins(ctx, s["mob_s"], on_sphere),
                "half_space_force": about_body_origins(ctx, s["mob_h"], -on_sphere),
                "potential_energy": pe,
                "indentation": d,
            },
        )

    @classmethod
    def group_potential_energy(cls, group, params, ctx):
        """Elastic energy stored in the group's contacts (J)."""
        return jnp.sum(cls._evaluate(group, params, ctx)[2])

    @output(Stage.DYNAMICS, "SpatialVec")
    def sphere_force(self, ctx):
        """Load on the sphere's body ``(torque, force)`` in Ground, about the body origin."""
        return ctx.group_output(ctx.path, "sphere_force")

    @output(Stage.DYNAMICS, "SpatialVec")
    def half_space_force(self, ctx):
        """Load on the half-space's body ``(torque, force)`` in Ground, about the body origin."""
        return ctx.group_output(ctx.path, "half_space_force")

    @output(Stage.DYNAMICS)
    def potential_energy(self, ctx):
        """Simbody's approximate contact energy ``2/5 f_H d`` (J), counted in the
        system's energy (OpenSim's output of this name reports 0)."""
        return ctx.group_output(ctx.path, "potential_energy")

    @output(Stage.POSITION)
    def indentation(self, ctx):
        """Penetration of the sphere into the half-space (m; negative when apart): a
        continuous witness for contact-onset events."""
        return ctx.group_output(ctx.path, "indentation")
