"""A scene and its motion as an animated GIF or an MP4, drawn with matplotlib.

Each frame is projected with the same perspective camera as the HTML player's
starting view (optionally following a body) and drawn by depth-sorted, shaded
triangles (the painter's algorithm) on a ``PolyCollection``, the muscles as lines
coloured by activation or tension, the markers as dots. Meshes are decimated first
(``max_faces``) so a frame takes milliseconds. GIFs are written with Pillow, MP4s
with ffmpeg (which must be installed).
"""

from __future__ import annotations

import os

import numpy as np

from .html import _camera, shown_layers_and_tracks
from .meshes import decimate
from .scene import Scene, SceneFrames, activation_colors

__all__ = ["write_animation", "render_frame"]

_BACKGROUND = (0.16, 0.17, 0.2)


def _view(camera: dict, target):
    """World-to-camera rotation (rows: right, up, back) and the eye position."""
    yaw, pitch, dist = camera["yaw"], camera["pitch"], camera["dist"]
    back = np.array([np.cos(pitch) * np.sin(yaw), np.sin(pitch), np.cos(pitch) * np.cos(yaw)])
    eye = np.asarray(target, float) + dist * back
    right = np.cross([0.0, 1.0, 0.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    return np.stack([right, up, back]), eye


def _project(points, rot, eye, focal: float):
    """Perspective projection: image coordinates (units of the half-height) and depth."""
    c = (np.asarray(points) - eye) @ rot.T
    depth = np.maximum(-c[..., 2], 1e-6)
    return focal * c[..., :2] / depth[..., None], depth


class _Prepared:
    """Decimated meshes of the drawn visuals, concatenated (built once per animation)."""

    def __init__(self, scene: Scene, layers: dict, max_faces: int):
        keep = [i for i, v in enumerate(scene.visuals) if layers.get(v.layer, False)]
        total = sum(scene.visuals[i].mesh.n_faces for i in keep) or 1
        verts, faces, owner_v, colors, alphas, offset = [], [], [], [], [], 0
        for i in keep:
            vis = scene.visuals[i]
            budget = max(int(max_faces * vis.mesh.n_faces / total), 12)
            mesh = decimate(vis.mesh, budget) if vis.vertex_colors is None else vis.mesh
            verts.append(mesh.vertices)
            faces.append(mesh.faces + offset)
            owner_v.append(np.full(mesh.n_vertices, i))
            if vis.vertex_colors is not None:
                colors.append(vis.vertex_colors[mesh.faces[:, 0]])
            else:
                colors.append(np.tile(vis.color, (mesh.n_faces, 1)))
            alphas.append(np.full(mesh.n_faces, vis.opacity))
            offset += mesh.n_vertices
        self.vertices = np.concatenate(verts) if verts else np.zeros((0, 3))
        self.faces = np.concatenate(faces) if faces else np.zeros((0, 3), int)
        self.owner = np.concatenate(owner_v) if owner_v else np.zeros(0, int)
        self.colors = np.concatenate(colors) if colors else np.zeros((0, 3))
        self.alphas = np.concatenate(alphas) if alphas else np.zeros(0)


def render_frame(
    ax,
    scene: Scene,
    tracks,
    k: int,
    prepared: _Prepared,
    camera: dict,
    layers: dict,
    follow_index: int | None,
    follow_offset,
):
    """Draw frame ``k`` of the tracks on a matplotlib Axes (cleared first).

    **Arguments:** ``ax``; ``scene``; ``tracks``: ``SceneFrames`` aligned in time;
    ``k``: the frame; ``prepared``: the meshes (``_Prepared``); ``camera``: as
    ``html._camera``; ``layers``: ``{layer: shown}``; ``follow_index``: a row of
    ``scene.frame_paths`` the camera follows, or ``None``; ``follow_offset (3,)``: the
    target's offset from it (m).

    **Returns:** nothing (the Axes holds the drawing).
    """
    from matplotlib.collections import LineCollection, PolyCollection

    ax.cla()
    ax.set_facecolor(_BACKGROUND)
    ax.set_xlim(-1.33, 1.33)
    ax.set_ylim(-1.0, 1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    first = tracks[0]
    target = camera["target"] if follow_index is None else first.frame_p[k, follow_index] + follow_offset
    rot, eye = _view(camera, target)
    focal = 1.0 / np.tan(0.4)
    light = rot[2] + 0.3 * rot[0] + 0.5 * rot[1]
    light /= np.linalg.norm(light)
    if layers.get("floor"):
        center = np.round(np.asarray(target, float)[[0, 2]] * 2) / 2
        ticks = np.linspace(-2.0, 2.0, 17)
        ends = [((center[0] + c, 0.0, center[1] - 2.0), (center[0] + c, 0.0, center[1] + 2.0)) for c in ticks]
        ends += [((center[0] - 2.0, 0.0, center[1] + c), (center[0] + 2.0, 0.0, center[1] + c)) for c in ticks]
        xy, depth = _project(np.asarray(ends), rot, eye, focal)
        ok = np.all(depth > 0.05 * camera["dist"], axis=1)
        ax.add_collection(LineCollection(xy[ok], colors=(0.45, 0.47, 0.5), linewidths=0.6, zorder=0))
    polys, fcolors, depths = [], [], []
    for j, t in enumerate(tracks):
        if len(prepared.faces):
            R, p = t.visual_R[k][prepared.owner], t.visual_p[k][prepared.owner]
            world = np.einsum("vij,vj->vi", R, prepared.vertices) + p
            tri = world[prepared.faces]
            normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
            shade = 0.3 + 0.7 * np.abs(normal @ light)
            xy, depth = _project(tri, rot, eye, focal)
            color = prepared.colors * shade[:, None]
            alpha = prepared.alphas * (0.4 if j else 1.0)
            if j:
                color = 0.5 * color + 0.5 * np.array([0.3, 0.7, 1.0]) * shade[:, None]
            polys.append(xy)
            fcolors.append(np.concatenate([np.clip(color, 0, 1), alpha[:, None]], 1))
            depths.append(depth.mean(1))
    if polys:
        xy, fc, depth = np.concatenate(polys), np.concatenate(fcolors), np.concatenate(depths)
        order = np.argsort(-depth)
        ax.add_collection(PolyCollection(xy[order], facecolors=fc[order], edgecolors="none", antialiased=False))
    for j, t in enumerate(tracks):
        if layers.get("skeleton") and len(scene.sticks):
            ends = t.frame_p[k][scene.sticks]
            color = (0.85, 0.8, 0.7, 0.4 if j else 1.0)
            ax.add_collection(LineCollection(_project(ends, rot, eye, focal)[0], colors=color, linewidths=3, zorder=2))
        if layers.get("muscles") and t.path_points.shape[1]:
            rgb = activation_colors(t.path_value[k : k + 1], scene.path_colors, t.value_name)[0]
            segs, cols = [], []
            for i in range(t.path_points.shape[1]):
                n = int(t.path_count[k, i])
                if n >= 2:
                    segs.append(_project(t.path_points[k, i, :n], rot, eye, focal)[0])
                    cols.append(np.append(rgb[i], 0.4 if j else 1.0))
            ax.add_collection(LineCollection(segs, colors=cols, linewidths=1.5))
        if layers.get("markers") and t.markers.shape[1]:
            xy = _project(t.markers[k], rot, eye, focal)[0]
            ax.scatter(xy[:, 0], xy[:, 1], s=8, color=(1.0, 0.4, 0.7), zorder=3)
        if layers.get("experimental_markers") and t.experimental is not None and t.experimental.shape[1]:
            xy = _project(t.experimental[k], rot, eye, focal)[0]
            ax.scatter(xy[:, 0], xy[:, 1], s=8, color=(0.2, 0.6, 1.0), zorder=3)
    ax.text(-1.3, -0.95, f"t = {first.times[k]:.3f} s", color="w", fontsize=8)


def write_animation(
    path: str | os.PathLike,
    scene: Scene,
    *tracks: SceneFrames,
    fps: float = 20.0,
    stride: int = 1,
    size=(480, 360),
    max_faces: int = 4000,
    layers: dict | None = None,
    follow: str | None = None,
) -> int:
    """Write an animated GIF (``.gif``, Pillow) or video (``.mp4``, ffmpeg) of a scene.

    **Arguments:** ``path``; ``scene``; ``tracks``: the main motion first, then
    overlays; ``fps``: frames per second of the file; ``stride``: use every
    ``stride``-th frame; ``size``: ``(width, height)`` in pixels; ``max_faces``: the
    triangles of all meshes together after decimation; ``layers``: ``{layer: shown}``
    overriding ``scene.layers``; ``follow``: a frame path for the camera to follow.

    **Returns:** the number of frames written.

    **Raises:** ``ValueError`` for another extension, no track, an unknown layer or
    ``follow``.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib import animation

    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in (".gif", ".mp4"):
        raise ValueError(f"{path}: write_animation writes .gif or .mp4 files, not {ext!r}")
    shown, tracks = shown_layers_and_tracks(scene, tracks, layers, "write_animation")
    first = tracks[0]
    camera = _camera(scene, first)
    follow_index, offset = None, None
    if follow is not None:
        if follow not in scene.frame_paths:
            raise ValueError(
                f"cannot follow {follow!r}: not a frame of the scene; the frames are {', '.join(scene.frame_paths)}"
            )
        follow_index = scene.frame_paths.index(follow)
        offset = np.asarray(camera["target"]) - first.frame_p[0, follow_index]
    prepared = _Prepared(scene, shown, max_faces)
    frames = list(range(0, len(first.times), max(int(stride), 1)))
    dpi = 100
    fig = plt.figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    fig.patch.set_facecolor(_BACKGROUND)
    ax = fig.add_axes((0, 0, 1, 1))

    def draw(i):
        render_frame(ax, scene, tracks, frames[i], prepared, camera, shown, follow_index, offset)
        return []

    anim = animation.FuncAnimation(fig, draw, frames=len(frames), blit=False)
    writer = animation.PillowWriter(fps=fps) if ext == ".gif" else animation.FFMpegWriter(fps=fps)
    try:
        anim.save(os.fspath(path), writer=writer, dpi=dpi)
    finally:
        plt.close(fig)
    return len(frames)
