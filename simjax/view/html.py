"""A scene and its motions as one self-contained HTML file.

The page holds everything: the scene's meshes and every frame's poses as base64
arrays in a JSON block (``<script type="application/json" id="simjax-scene">``) and a
small WebGL player (``player.js``, inlined) with a time slider, play/pause, speed,
a body for the camera to follow, a switch per layer and per motion. It loads no
script, style or data from anywhere, so it opens offline in any browser and can be
sent as it is. Mouse: drag to turn, shift-drag (or right-drag) to pan, wheel to zoom.
The URL's fragment can set the starting time and pause it (``page.html#t=0.5&paused``).
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import os

import numpy as np

from . import shapes
from .scene import Scene, SceneFrames, activation_colors

__all__ = ["scene_payload", "html_document", "write_html", "notebook_html", "align_frames", "TRACK_COLORS"]

#: tint of each motion after the first (overlays), RGB in [0, 1]
TRACK_COLORS = ((1.0, 1.0, 1.0), (0.3, 0.7, 1.0), (1.0, 0.6, 0.2), (0.5, 1.0, 0.4))
_BACKGROUND = (0.16, 0.17, 0.2)
_PLAYER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "player.js")


def _b64(array, dtype) -> str:
    return base64.b64encode(np.ascontiguousarray(np.asarray(array), dtype=dtype).tobytes()).decode("ascii")


def _mesh_entry(mesh: shapes.TriangleMesh, colors=None) -> dict:
    entry = {"v": _b64(mesh.vertices, "<f4"), "n": _b64(mesh.normals(), "<f4"), "i": _b64(mesh.faces, "<u4")}
    if colors is not None:
        entry["c"] = _b64(colors, "<f4")
    return entry


def align_frames(frames: SceneFrames, times) -> SceneFrames:
    """A motion's frames at other times: the nearest frame for each time (for an
    overlay whose frames differ from the first motion's; to interpolate instead,
    compute it with ``Scene.frames(motion, times=...)``).

    **Arguments:** ``frames``; ``times (n,)`` (s). **Returns:** a ``SceneFrames``.
    """
    times = np.asarray(times, float)
    if len(frames.times) == len(times) and np.allclose(frames.times, times):
        return frames
    src = np.asarray(frames.times, float)
    pos = np.clip(np.searchsorted(src, times), 1, max(len(src) - 1, 1))
    left = np.clip(pos - 1, 0, len(src) - 1)
    right = np.clip(pos, 0, len(src) - 1)
    pick = np.where(np.abs(src[left] - times) <= np.abs(src[right] - times), left, right)
    fields = {}
    for f in (
        "frame_R",
        "frame_p",
        "visual_R",
        "visual_p",
        "markers",
        "path_points",
        "path_count",
        "path_value",
        "force_points",
        "force_vectors",
    ):
        fields[f] = getattr(frames, f)[pick]
    ex = frames.experimental[pick] if frames.experimental is not None else None
    return SceneFrames(
        name=frames.name,
        times=times,
        value_name=frames.value_name,
        experimental_names=frames.experimental_names,
        experimental=ex,
        **fields,
    )


def _camera(scene: Scene, frames: SceneFrames) -> dict:
    pts = [frames.frame_p.reshape(-1, 3)]
    for v, vis in enumerate(scene.visuals):
        if vis.layer == "bodies" and vis.mesh.n_vertices:
            lo, hi = vis.mesh.vertices.min(0), vis.mesh.vertices.max(0)
            corners = np.array([[a, b, c] for a in (lo[0], hi[0]) for b in (lo[1], hi[1]) for c in (lo[2], hi[2])])
            pts.append(
                np.einsum("nij,kj->nki", frames.visual_R[:, v], corners).reshape(-1, 3)
                + np.repeat(frames.visual_p[:, v], 8, axis=0)
            )
    pts = np.concatenate(pts)
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if not len(pts):
        pts = np.zeros((1, 3))
    lo, hi = np.percentile(pts, 1, axis=0), np.percentile(pts, 99, axis=0)
    center = 0.5 * (lo + hi)
    radius = max(0.5 * float(np.linalg.norm(hi - lo)), 0.25)
    return {"target": center.tolist(), "dist": 2.6 * radius, "yaw": 0.6, "pitch": 0.25}


def shown_layers_and_tracks(scene, tracks, layers, caller: str):
    """``(shown, tracks)``: the scene's layers with ``layers`` (``{name: bool}``)
    applied, and the tracks, the overlays resampled at the first one's times.

    **Raises:** ``ValueError`` naming ``caller`` without a track, or for an unknown
    layer.
    """
    if not tracks:
        raise ValueError(f"{caller} needs at least one SceneFrames (scene.frames(motion))")
    shown = dict(scene.layers)
    for k, v in (layers or {}).items():
        if k not in shown:
            raise ValueError(f"unknown layer {k!r}; the layers are {', '.join(shown)}")
        shown[k] = bool(v)
    first = tracks[0]
    return shown, (first,) + tuple(align_frames(t, first.times) for t in tracks[1:])


def scene_payload(
    scene: Scene,
    *tracks: SceneFrames,
    layers: dict | None = None,
    follow: str | None = None,
    force_scale: float = 0.001,
    title: str | None = None,
) -> dict:
    """The data the HTML player draws (JSON-ready; arrays as base64).

    **Arguments:** ``scene``; ``tracks``: one or more ``SceneFrames``, the first the
    main motion, the others overlays (shown tinted and translucent, at the first's
    times: ``align_frames``); ``layers``: ``{layer: shown}`` overriding ``scene.layers``;
    ``follow``: a frame path the camera follows (one of ``scene.frame_paths``);
    ``force_scale``: arrow length per newton (m/N); ``title``.

    **Returns:** a dict (see ``player.js`` for its fields).

    **Raises:** ``ValueError`` without a track, or for an unknown layer or ``follow``.
    """
    shown, tracks = shown_layers_and_tracks(scene, tracks, layers, "scene_payload")
    first = tracks[0]
    follow_paths = [p for p in scene.frame_paths if p != "/ground"]
    follow_default = -1
    if follow is not None:
        if follow not in follow_paths:
            raise ValueError(
                f"cannot follow {follow!r}: not a frame of the scene; the frames are {', '.join(follow_paths)}"
            )
        follow_default = follow_paths.index(follow)
    follow_index = np.asarray([scene.frame_paths.index(p) for p in follow_paths], int)
    meshes, visuals = [], []
    for vis in scene.visuals:
        visuals.append(
            {
                "path": vis.path,
                "layer": vis.layer,
                "mesh": len(meshes),
                "color": list(vis.color),
                "opacity": vis.opacity,
                "stand_in": vis.stand_in,
            }
        )
        meshes.append(_mesh_entry(vis.mesh, vis.vertex_colors))
    unit = {"sphere": len(meshes), "cylinder": len(meshes) + 1, "arrow": len(meshes) + 2}
    meshes += [
        _mesh_entry(shapes.sphere(1.0, 12)),
        _mesh_entry(shapes._capped_tube((1.0, 1.0), (0.0, 1.0), 12)),
        _mesh_entry(shapes.arrow(1.0, 0.008, 0.02, 0.2)),
    ]
    n = len(first.times)
    L = first.path_points.shape[2]
    out_tracks = []
    for k, t in enumerate(tracks):
        poses = np.concatenate([t.visual_R.reshape(n, -1, 9), t.visual_p.reshape(n, -1, 3)], -1)
        rgb = activation_colors(t.path_value, scene.path_colors, t.value_name)
        ex = t.experimental if t.experimental is not None else np.zeros((n, 0, 3))
        out_tracks.append(
            {
                "name": t.name,
                "ghost": k > 0,
                "color": list(TRACK_COLORS[k % len(TRACK_COLORS)]),
                "poses": _b64(poses, "<f4"),
                "markers": _b64(t.markers, "<f4"),
                "paths": _b64(t.path_points, "<f4"),
                "path_count": _b64(t.path_count, "<u2"),
                "path_rgb": _b64(np.round(255 * rgb), "u1"),
                "force_points": _b64(t.force_points, "<f4"),
                "force_vectors": _b64(t.force_vectors, "<f4"),
                "experimental": _b64(ex, "<f4"),
                "follow": _b64(t.frame_p[:, follow_index], "<f4"),
                "frame_p": _b64(t.frame_p, "<f4"),
            }
        )
    camera = _camera(scene, first)
    floor_y = 0.0
    return {
        "title": title or scene.title,
        "times": [float(x) for x in first.times],
        "background": list(_BACKGROUND),
        "camera": camera,
        "layers": shown,
        "meshes": meshes,
        "visuals": visuals,
        "unit": unit,
        "n_markers": int(first.markers.shape[1]),
        "marker_names": [m[0] for m in scene.markers],
        "n_paths": int(first.path_points.shape[1]),
        "path_width": int(L),
        "path_names": list(scene.paths),
        "value_name": first.value_name,
        "n_forces": int(first.force_points.shape[1]),
        "force_names": list(scene.forces),
        "n_experimental": int(first.experimental.shape[1]) if first.experimental is not None else 0,
        "experimental_names": list(first.experimental_names),
        "follow": follow_paths,
        "follow_default": follow_default,
        "tracks": out_tracks,
        "n_frame_paths": len(scene.frame_paths),
        "sticks": scene.sticks.tolist(),
        "stick_radius": 0.01,
        "marker_radius": 0.01,
        "path_radius": 0.004,
        "force_scale": float(force_scale),
        "marker_color": [1.0, 0.4, 0.7],
        "experimental_color": [0.2, 0.6, 1.0],
        "force_color": [1.0, 0.85, 0.1],
        "floor": {"y": floor_y, "size": float(max(4.0, 2 * camera["dist"])), "lines": 20, "width": 0.002},
    }


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="simjax.view">
<title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; background: #292b33; color: #e8e8e8; font: 13px sans-serif; }}
#simjax-view {{ position: absolute; top: 0; left: 0; width: 100%; height: calc(100% - 64px); display: block; }}
#simjax-bar {{ position: absolute; bottom: 0; left: 0; right: 0; height: 64px; padding: 4px 8px; box-sizing: border-box;
  background: #1d1e23; }}
#simjax-bar .row {{ display: flex; align-items: center; gap: 8px; height: 28px; white-space: nowrap;
  overflow-x: auto; }}
#simjax-time {{ flex: 1; }}
#simjax-bar label {{ margin-right: 6px; }}
.swatch {{ display: inline-block; width: 10px; height: 10px; margin: 0 3px; border: 1px solid #888; }}
#simjax-status {{ position: absolute; top: 8px; left: 8px; }}
</style>
</head>
<body>
<canvas id="simjax-view"></canvas>
<div id="simjax-status">loading...</div>
<div id="simjax-bar">
<div class="row"><button id="simjax-play">play</button><input id="simjax-time" type="range" min="0" max="0" value="0">
<span id="simjax-label"></span>
<label>speed <select id="simjax-speed"><option>0.1</option><option>0.25</option><option>0.5</option>
<option selected>1</option><option>2</option><option>4</option></select></label>
<label>follow <select id="simjax-follow"></select></label></div>
<div class="row"><span id="simjax-layers"></span><span id="simjax-tracks"></span></div>
</div>
<script type="application/json" id="simjax-scene">{data}</script>
<script>
{player}
</script>
</body>
</html>
"""


def html_document(scene: Scene, *tracks: SceneFrames, **options) -> str:
    """The self-contained HTML page of a scene and its motions.

    **Arguments:** as ``scene_payload`` (``tracks``: the main motion first, then
    overlays; ``layers``, ``follow``, ``force_scale``, ``title``).

    **Returns:** the page's text.
    """
    payload = scene_payload(scene, *tracks, **options)
    data = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    with open(_PLAYER, encoding="utf-8") as fh:
        player = fh.read()
    return _PAGE.format(title=html_lib.escape(payload["title"]), data=data, player=player)


def write_html(path: str | os.PathLike, scene: Scene, *tracks: SceneFrames, **options) -> str:
    """Write the self-contained HTML page of a scene and its motions (``html_document``).

    **Arguments:** ``path``: the ``.html`` file; the rest as ``html_document``.

    **Returns:** the path written.
    """
    text = html_document(scene, *tracks, **options)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return os.fspath(path)


def notebook_html(scene: Scene, *tracks: SceneFrames, height: int = 480, **options):
    """The page inline in a notebook cell (an ``<iframe srcdoc=...>``; no server, no file).

    **Arguments:** ``height``: of the frame (px); the rest as ``html_document``.

    **Returns:** an ``IPython.display.HTML`` object (display it, or end a cell with it).
    """
    from IPython.display import HTML

    page = html_lib.escape(html_document(scene, *tracks, **options), quote=True)
    return HTML(
        f'<iframe srcdoc="{page}" style="width:100%;height:{int(height)}px;border:1px solid #444" '
        f'sandbox="allow-scripts"></iframe>'
    )
