"""A 3D scene of a built system, and its frames along a motion.

``build_scene(system)`` gathers what the model shows (``geometry.collect_visuals``:
meshes, analytic shapes, frame axes, wrap surfaces, contact geometry), its markers,
its GeometryPaths (muscles, ligaments, path actuators) and its external forces.
``Scene.frames(motion)`` then computes, for every frame of a motion in **one**
jit-compiled call vmapped over the frames, the pose in Ground of every frame that
carries something, every visual, every marker, the current path of every
GeometryPath (its wrap points included, ``simjax.muscles.path.path_polylines``),
the activation or tension that colours it, and the external forces: a
``SceneFrames``. The outputs (``html``, ``video``, ``live``) draw a ``Scene`` with
one or more ``SceneFrames`` (a motion, and overlays such as a reference motion).

Layers, each switchable in every output: ``bodies`` (attached geometry), ``skeleton``
(sticks from each body's origin to its joints' frames; on by default only for models
without attached geometry), ``frames`` (frame axes, off by default), ``markers``, ``experimental_markers``, ``muscles``,
``wrap``, ``contact``, ``forces``, ``floor``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..forward import Context
from .geometry import Visual, collect_visuals
from .meshes import mesh_search_dirs
from .motion import marker_trajectories, motion_states, resample_states

__all__ = ["Scene", "SceneFrames", "build_scene", "LAYERS", "activation_colors"]

#: the layers and whether each is shown by default
LAYERS = {
    "bodies": True,
    "skeleton": False,
    "frames": False,
    "markers": True,
    "experimental_markers": True,
    "muscles": True,
    "wrap": True,
    "contact": True,
    "forces": True,
    "floor": True,
}

_MARKER_COLOR = (1.0, 0.4, 0.7)
_INACTIVE, _ACTIVE = np.array([0.15, 0.25, 0.85]), np.array([0.9, 0.1, 0.1])


@dataclasses.dataclass(frozen=True, eq=False)
class _Layout:
    """Static index data of a scene's batched kinematics (hashed by identity)."""

    frame_paths: tuple
    visual_frame: np.ndarray
    marker_frame: np.ndarray
    n_paths: int
    path_owners: tuple
    activation_z: np.ndarray
    force_paths: tuple


@dataclasses.dataclass(frozen=True)
class SceneFrames:
    """A scene's state at every frame of a motion (numpy arrays, leading axis: frames).

    **Fields:**

    - ``name``: what the motion is (shown in the outputs' legends); ``times (n,)`` (s).
    - ``frame_R (n, F, 3, 3)``, ``frame_p (n, F, 3)`` (m): poses in Ground of
      ``Scene.frame_paths``.
    - ``visual_R (n, V, 3, 3)``, ``visual_p (n, V, 3)``: poses of ``Scene.visuals``.
    - ``markers (n, M, 3)``: the model's markers (``Scene.markers``) in Ground.
    - ``path_points (n, P, L, 3)``, ``path_count (n, P)``: the current path of each
      ``Scene.paths`` (padded by repeating its last point).
    - ``path_value (n, P)``: what colours the paths (``value_name``: ``"activation"``,
      ``"tension"`` in N, or ``"none"``; NaN where a path has none).
    - ``force_points``, ``force_vectors (n, E, 3)``: each external force's point of
      application (m) and force (N) in Ground.
    - ``experimental_names``, ``experimental (n, K, 3)``: experimental markers (m) or
      ``None``.
    """

    name: str
    times: np.ndarray
    frame_R: np.ndarray
    frame_p: np.ndarray
    visual_R: np.ndarray
    visual_p: np.ndarray
    markers: np.ndarray
    path_points: np.ndarray
    path_count: np.ndarray
    path_value: np.ndarray
    value_name: str
    force_points: np.ndarray
    force_vectors: np.ndarray
    experimental_names: tuple = ()
    experimental: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.times)


def activation_colors(values, base_colors, value_name: str) -> np.ndarray:
    """Colours of paths from their activations or tensions: blue (0) to red (1, or
    the largest tension of the path over the motion); a path's own colour where its
    value is NaN.

    **Arguments:** ``values (n, P)``; ``base_colors (P, 3)``; ``value_name``.

    **Returns:** ``(n, P, 3)`` RGB in [0, 1].
    """
    values = np.asarray(values, float)
    if value_name == "tension":
        top = np.nanmax(np.abs(values), axis=0, initial=0.0) if values.size else np.zeros(values.shape[1:])
        values = np.abs(values) / np.where(top > 0, top, 1.0)
    w = np.clip(values, 0.0, 1.0)[..., None]
    mixed = (1.0 - w) * _INACTIVE + w * _ACTIVE
    base = np.broadcast_to(np.asarray(base_colors, float), mixed.shape)
    return np.where(np.isnan(values)[..., None], base, mixed)


def _tensions(ctx: Context, owners: tuple):
    """Tensions of the paths' owners (NaN where no group computes one)."""
    keep = list(owners)
    while keep:
        try:
            vals = ctx.group_outputs(tuple(keep), "tension")
            break
        except KeyError as e:  # (only on failure: drop the owner named, try again)
            bad = str(e).split("for ")[-1].strip("'\" ")
            keep = [o for o in keep if o != bad]
    out = jnp.full(len(owners), jnp.nan, ctx.state.q.dtype)
    if keep:
        out = out.at[np.asarray([owners.index(o) for o in keep])].set(vals)
    return out


@jit
def _scene_poses(system, layout: _Layout, states, visual_R, visual_p, marker_local, color_by: str):
    from ..muscles.path import path_polylines

    def one(state):
        ctx = Context(system, state)
        R, p = ctx.frames_in_ground(layout.frame_paths)
        vf, mf = layout.visual_frame, layout.marker_frame
        out = {
            "frame_R": R,
            "frame_p": p,
            "visual_R": jnp.einsum("vij,vjk->vik", R[vf], visual_R),
            "visual_p": jnp.einsum("vij,vj->vi", R[vf], visual_p) + p[vf],
            "markers": jnp.einsum("mij,mj->mi", R[mf], marker_local) + p[mf],
        }
        if layout.n_paths:
            out["path_points"], out["path_count"] = path_polylines(ctx)
            if color_by == "activation":
                az = layout.activation_z
                value = jnp.where(az >= 0, state.z[np.maximum(az, 0)] if state.z.shape[0] else jnp.nan, jnp.nan)
            elif color_by == "tension":
                value = _tensions(ctx, layout.path_owners)
            else:
                value = jnp.full(layout.n_paths, jnp.nan, R.dtype)
            out["path_value"] = value
        if layout.force_paths:
            out["force_vectors"] = ctx.group_outputs(layout.force_paths, "force")
            out["force_points"] = ctx.group_outputs(layout.force_paths, "point")
        return out

    return jax.vmap(one)(states)


@dataclasses.dataclass(frozen=True, eq=False)
class Scene:
    """What a built system shows (see the module docstring); ``build_scene`` makes one.

    **Fields:** ``system``; ``visuals``: ``Visual`` items; ``frame_paths``: the
    mobilized bodies (Ground first, ``sj.body_poses`` order), then the other frames
    carrying visuals or markers; ``markers``: ``(path, frame, location (3,))`` of
    the model's markers; ``paths``: GeometryPath paths (``PathTopology`` order);
    ``path_colors (P, 3)``: their own colours; ``forces``: external force paths;
    ``model_file``: the ``.osim`` file (or ``None``); ``title``; ``sticks (k, 2)``:
    rows of ``frame_paths`` joined by the skeleton's sticks; ``layers``: the layers
    shown by default (``LAYERS``, the skeleton on where nothing is attached).
    """

    system: Any
    visuals: tuple
    frame_paths: tuple
    markers: tuple
    paths: tuple
    path_colors: np.ndarray
    forces: tuple
    model_file: str | None
    title: str
    layout: _Layout
    sticks: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 2), int))
    layers: dict = dataclasses.field(default_factory=lambda: dict(LAYERS))

    @property
    def body_paths(self) -> tuple:
        """The paths of the model's mobilized bodies, Ground first (``sj.body_poses`` order)."""
        return tuple(self.system.topology.tree.body_paths)

    def stand_ins(self) -> tuple:
        """The visuals drawn in place of a missing mesh."""
        return tuple(v for v in self.visuals if v.stand_in)

    def frames(
        self,
        motion=None,
        *,
        name: str | None = None,
        rate: float | None = None,
        times=None,
        color_by: str = "activation",
        markers=None,
    ) -> SceneFrames:
        """The scene at every frame of a motion, computed in one batched, jitted call.

        **Arguments:**

        - ``motion``: a ``Trajectory``, a batched ``State``, a states or coordinates
          file (``.sto``, ``.mot``) or table (``motion.motion_states``); ``None``: the
          default state.
        - ``name``: its label (default: the file name, or ``"motion"``).
        - ``rate``: resample to this many frames per second (Hz) first (default: the
          motion's own frames); ``times (k,)`` (s): resample at these times instead
          (linear interpolation; for an overlay at another motion's times).
        - ``color_by``: ``"activation"`` (muscles' activation states), ``"tension"``
          (N) or ``"none"``.
        - ``markers``: experimental markers (a ``.trc`` file or a ``Vec3`` table),
          sampled at the frames' times.

        **Returns:** a ``SceneFrames``.

        **Raises:** ``MotionError`` for a motion that names no coordinate of the model;
        ``ValueError`` for an unknown ``color_by``.
        """
        if color_by not in ("activation", "tension", "none"):
            raise ValueError(f"color_by must be 'activation', 'tension' or 'none', got {color_by!r}")
        system = self.system
        states = motion_states(system, system.default_state() if motion is None else motion)
        if times is not None:
            states = resample_states(system, states, times)
        elif rate is not None:
            t = np.asarray(states.t, float)
            n = max(int(np.floor((t[-1] - t[0]) * rate + 1e-9)) + 1, 1)
            states = resample_states(system, states, t[0] + np.arange(n) / rate)
        if name is None:
            name = os.path.basename(os.fspath(motion)) if isinstance(motion, (str, os.PathLike)) else "motion"
        return self._frames(states, name, color_by, markers)

    def _frames(self, states, name, color_by, markers) -> SceneFrames:
        dtype = jnp.asarray(states.q).dtype
        visual_R = jnp.asarray(
            np.stack([v.rotation for v in self.visuals]) if self.visuals else np.zeros((0, 3, 3)), dtype
        )
        visual_p = jnp.asarray(
            np.stack([v.translation for v in self.visuals]) if self.visuals else np.zeros((0, 3)), dtype
        )
        marker_local = jnp.asarray(np.stack([m[2] for m in self.markers]) if self.markers else np.zeros((0, 3)), dtype)
        out = {
            k: np.asarray(v)
            for k, v in _scene_poses(
                self.system, self.layout, states, visual_R, visual_p, marker_local, color_by
            ).items()
        }
        n = len(np.asarray(states.t))
        times = np.asarray(states.t, float).reshape(n)
        ex_names, ex = (), None
        if markers is not None:
            ex_names, ex = marker_trajectories(markers, times)
        zeros3 = np.zeros((n, 0, 3))
        return SceneFrames(
            name=name,
            times=times,
            frame_R=out["frame_R"],
            frame_p=out["frame_p"],
            visual_R=out["visual_R"],
            visual_p=out["visual_p"],
            markers=out["markers"],
            path_points=out.get("path_points", np.zeros((n, 0, 1, 3))),
            path_count=out.get("path_count", np.zeros((n, 0), int)),
            path_value=out.get("path_value", np.zeros((n, 0))),
            value_name=color_by,
            force_points=out.get("force_points", zeros3),
            force_vectors=out.get("force_vectors", zeros3),
            experimental_names=ex_names,
            experimental=ex,
        )


def _path_color(gp) -> tuple:
    import xml.etree.ElementTree as ET

    for tag, text in gp.extras:
        if tag == "Appearance":
            try:
                color = ET.fromstring(text).findtext("color")
                return tuple(float(x) for x in color.split())
            except (ET.ParseError, AttributeError, ValueError):
                pass
    return tuple(getattr(gp, "default_color", (0.8, 0.1, 0.1)))


def build_scene(
    system, model_file: str | os.PathLike | None = None, geometry_path=(), title: str | None = None
) -> Scene:
    """The scene of a built system.

    **Arguments:**

    - ``system``: a ``System`` (``model.build()``).
    - ``model_file``: the ``.osim`` file the model was read from: meshes are looked for
      beside it and in ``Geometry/`` beside it (OpenSim's search), before
      ``geometry_path`` and the meshes shipped with simjax.
    - ``geometry_path``: more folders to search for meshes (a path or a sequence).
    - ``title``: a title for the outputs (default: the model's name).

    **Returns:** a ``Scene``.

    **Warns:** ``geometry.ViewWarning`` once per missing mesh file (a stand-in sphere is
    drawn for it).
    """
    from ..mechanics.frames import Marker
    from ..muscles.path import path_topology_of

    model = system.model
    dirs = mesh_search_dirs(model_file, geometry_path)
    where = os.fspath(model_file) if model_file is not None else f"model {model.name!r}"
    visuals: tuple[Visual, ...] = collect_visuals(system, dirs, where)
    connections = system.topology.connections
    markers = tuple(
        (p, connections[(p, "parent_frame")], np.asarray(c.location, float))
        for p, c in model.walk()
        if isinstance(c, Marker) and (p, "parent_frame") in connections
    )
    bodies = list(system.topology.tree.body_paths)
    joints = [
        (p, connections[(p, "parent_frame")], connections[(p, "child_frame")])
        for p in system.topology.tree.joint_paths
        if p and (p, "parent_frame") in connections
    ]
    joint_frames = [f for _, a, b in joints for f in (a, b)]
    frames = list(dict.fromkeys(bodies + [v.frame for v in visuals] + [m[1] for m in markers] + joint_frames))
    tree_frames = system.topology.tree.frames
    index = {f: i for i, f in enumerate(frames)}
    sticks = [(index[tree_frames[f][0]], index[f]) for f in joint_frames if tree_frames[f][0] in index]
    sticks = np.asarray([s for s in sticks if s[0] != s[1]], int).reshape(-1, 2)
    layers = dict(LAYERS)
    if not any(v.layer == "bodies" for v in visuals):
        layers["skeleton"] = True
    try:
        topo = path_topology_of(system.topology)
        paths = topo.paths
    except KeyError:
        paths = ()
    owners = tuple(p.rsplit("/", 1)[0] for p in paths)
    z_index = {n: i for i, n in enumerate(system.z_names)}
    activation_z = np.asarray([z_index.get(f"{o}/activation", -1) for o in owners], np.int32)
    path_colors = np.asarray([_path_color(model.find(p)) for p in paths], float).reshape(-1, 3)
    groups = system.topology.groups
    forces = tuple(p for cls in ("ExternalForce", "PrescribedForce") for p in groups.get(cls, ()))
    layout = _Layout(
        frame_paths=tuple(frames),
        visual_frame=np.asarray([index[v.frame] for v in visuals], np.int32),
        marker_frame=np.asarray([index[m[1]] for m in markers], np.int32),
        n_paths=len(paths),
        path_owners=owners,
        activation_z=activation_z,
        force_paths=forces,
    )
    return Scene(
        system=system,
        visuals=visuals,
        frame_paths=tuple(frames),
        markers=markers,
        paths=tuple(paths),
        path_colors=path_colors,
        forces=forces,
        model_file=None if model_file is None else os.path.abspath(os.fspath(model_file)),
        title=title or model.name,
        layout=layout,
        sticks=sticks,
        layers=layers,
    )
