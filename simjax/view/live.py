"""A live 3D viewer in the browser (and in notebooks), on viser.

``Viewer(scene, frames)`` starts a viser server (``pip install viser``, part of
``simjax[view]``) that holds the scene as viser nodes: a mesh per visual, the
markers as point clouds, the muscles as line segments coloured by activation or
tension, external forces as arrows, a floor grid; and a control panel with a time
slider, play/pause, speed, the body the camera follows, and a switch per layer and
per motion. Open ``viewer.url`` in a browser, or show ``viewer.notebook()`` in a
cell. ``viewer.set_frame(k)`` moves everything to frame ``k``, as the slider and the
playback thread do; ``viewer.close()`` (or a ``with`` block) stops the server.

viser was chosen because it is a maintained Python scene graph with a browser client
and notebook embedding made for this (robotics and vision visualisation), with GUI
controls driven from Python.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np

from .html import TRACK_COLORS, _camera, align_frames
from .scene import Scene, SceneFrames, activation_colors

__all__ = ["Viewer", "free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the OS picks it). **Arguments:** ``host``.
    **Returns:** the port number."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _wxyz(R) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` (w, x, y, z) of rotation matrices ``(..., 3, 3)``."""
    from viser import transforms

    R = np.asarray(R, float)
    flat = R.reshape(-1, 3, 3)
    q = np.stack([transforms.SO3.from_matrix(m).wxyz for m in flat]) if len(flat) else np.zeros((0, 4))
    return q.reshape(R.shape[:-2] + (4,))


def _rgb255(c) -> np.ndarray:
    return np.clip(np.round(255 * np.asarray(c, float)), 0, 255).astype(np.uint8)


class Viewer:
    """A live viewer of a scene and its motions (a viser server; see the module docstring).

    **Arguments:** ``scene``; ``tracks``: ``SceneFrames``, the main motion first, then
    overlays (tinted, translucent, at the first's times); ``host``, ``port``: where to
    serve (``port=None``: a free one); ``layers``: ``{layer: shown}`` overriding
    ``scene.layers``; ``follow``: a frame path for the camera to follow;
    ``force_scale``: arrow length per newton (m/N); ``play``: start playing.

    **Raises:** ``ImportError`` without viser; ``ValueError`` without a track, or for
    an unknown layer or ``follow``.
    """

    def __init__(
        self,
        scene: Scene,
        *tracks: SceneFrames,
        host: str = "127.0.0.1",
        port: int | None = None,
        layers: dict | None = None,
        follow: str | None = None,
        force_scale: float = 0.001,
        play: bool = False,
    ):
        try:
            import viser
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("the live viewer needs viser: pip install 'simjax[view]' (or pip install viser)") from e
        if not tracks:
            raise ValueError("Viewer needs at least one SceneFrames (scene.frames(motion))")
        self.layers = dict(scene.layers)
        for k, v in (layers or {}).items():
            if k not in self.layers:
                raise ValueError(f"unknown layer {k!r}; the layers are {', '.join(self.layers)}")
            self.layers[k] = bool(v)
        if follow is not None and follow not in scene.frame_paths:
            raise ValueError(
                f"cannot follow {follow!r}: not a frame of the scene; the frames are {', '.join(scene.frame_paths)}"
            )
        first = tracks[0]
        self.scene = scene
        self.tracks = (first,) + tuple(align_frames(t, first.times) for t in tracks[1:])
        self.force_scale = float(force_scale)
        self.frame = 0
        self.follow = follow
        self.playing = bool(play)
        self.speed = 1.0
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self.port = free_port(host) if port is None else int(port)
        self.host = host
        self.server = viser.ViserServer(host=host, port=self.port, verbose=False)
        self._camera = _camera(scene, first)
        self._wxyz = [_wxyz(t.visual_R) for t in self.tracks]  # (n, V, 4) per track
        self._build()
        self._thread = threading.Thread(target=self._run, name="simjax-viewer-playback", daemon=True)
        self._thread.start()

    # -- scene nodes ------------------------------------------------------------------------------

    def _build(self) -> None:
        s = self.server.scene
        s.set_up_direction("+y")
        self.floor = s.add_grid(
            "/floor", width=6.0, height=6.0, plane="xz", cell_size=0.25, section_size=1.0, visible=self.layers["floor"]
        )
        self.nodes: list[dict] = []
        for k, t in enumerate(self.tracks):
            ghost = k > 0
            tint = np.asarray(TRACK_COLORS[k % len(TRACK_COLORS)])
            nodes = {
                "visuals": [],
                "markers": None,
                "experimental": None,
                "muscles": None,
                "forces": None,
                "skeleton": None,
            }
            if len(self.scene.sticks):
                nodes["skeleton"] = s.add_line_segments(
                    f"/track{k}/skeleton",
                    self._sticks(k, 0),
                    (217, 204, 178),
                    thickness=0.02,
                    visible=self.layers["skeleton"],
                )
            for v, vis in enumerate(self.scene.visuals):
                color = 0.5 * np.asarray(vis.color) + 0.5 * tint if ghost else np.asarray(vis.color)
                opacity = vis.opacity * (0.4 if ghost else 1.0)
                h = s.add_mesh_simple(
                    f"/track{k}/{vis.layer}/{v}",
                    vis.mesh.vertices.astype(np.float32),
                    vis.mesh.faces.astype(np.uint32),
                    color=tuple(_rgb255(color).tolist()),
                    opacity=None if opacity >= 0.999 else float(opacity),
                    side="double",
                    wxyz=self._wxyz[k][0, v],
                    position=t.visual_p[0, v],
                    visible=self.layers[vis.layer],
                )
                nodes["visuals"].append((h, vis.layer))
            if t.markers.shape[1]:
                nodes["markers"] = s.add_point_cloud(
                    f"/track{k}/markers",
                    t.markers[0].astype(np.float32),
                    colors=(255, 102, 178),
                    point_size=0.02,
                    point_shape="circle",
                    visible=self.layers["markers"],
                )
            if t.experimental is not None and t.experimental.shape[1]:
                nodes["experimental"] = s.add_point_cloud(
                    f"/track{k}/experimental_markers",
                    np.nan_to_num(t.experimental[0]).astype(np.float32),
                    colors=(51, 153, 255),
                    point_size=0.02,
                    point_shape="circle",
                    visible=self.layers["experimental_markers"],
                )
            if t.path_points.shape[1]:
                seg, col = self._segments(k, 0)
                nodes["muscles"] = s.add_line_segments(
                    f"/track{k}/muscles", seg, col, thickness=0.006, visible=self.layers["muscles"]
                )
            if t.force_points.shape[1]:
                nodes["forces"] = s.add_arrows(
                    f"/track{k}/forces",
                    self._arrows(k, 0),
                    (255, 217, 25),
                    shaft_radius=0.008,
                    head_radius=0.02,
                    head_length=0.05,
                    visible=self.layers["forces"],
                )
            self.nodes.append(nodes)
        self._gui()

    def _segments(self, k: int, i: int):
        t = self.tracks[k]
        pts = t.path_points[i]  # (P, L, 3), padded by repeating the last point
        seg = np.stack([pts[:, :-1], pts[:, 1:]], 2).reshape(-1, 2, 3).astype(np.float32)
        rgb = activation_colors(t.path_value[i : i + 1], self.scene.path_colors, t.value_name)[0]
        if k:
            rgb = 0.5 * rgb + 0.5 * np.asarray(TRACK_COLORS[k % len(TRACK_COLORS)])
        col = np.repeat(_rgb255(rgb)[:, None, None, :], pts.shape[1] - 1, 1)
        col = np.broadcast_to(col, (pts.shape[0], pts.shape[1] - 1, 2, 3)).reshape(-1, 2, 3)
        if seg.shape[0] == 0:
            seg, col = np.zeros((1, 2, 3), np.float32), np.zeros((1, 2, 3), np.uint8)
        return seg, np.ascontiguousarray(col)

    def _sticks(self, k: int, i: int) -> np.ndarray:
        return self.tracks[k].frame_p[i][self.scene.sticks].astype(np.float32)

    def _arrows(self, k: int, i: int) -> np.ndarray:
        t = self.tracks[k]
        a = t.force_points[i]
        return np.stack([a, a + self.force_scale * t.force_vectors[i]], 1).astype(np.float32)

    def _gui(self) -> None:
        g = self.server.gui
        n = len(self.tracks[0].times)
        self.play_button = g.add_checkbox("play", initial_value=self.playing)
        self.time_slider = g.add_slider("frame", min=0, max=max(n - 1, 1), step=1, initial_value=0, disabled=n < 2)
        self.time_label = g.add_text("time (s)", initial_value=f"{self.tracks[0].times[0]:.3f}", disabled=True)
        self.speed_menu = g.add_dropdown("speed", ("0.1", "0.25", "0.5", "1", "2", "4"), initial_value="1")
        follow_options = ("(none)",) + tuple(p for p in self.scene.frame_paths if p != "/ground")
        self.follow_menu = g.add_dropdown("follow", follow_options, initial_value=self.follow or "(none)")
        self.layer_boxes = {}
        with g.add_folder("layers"):
            for name, shown in self.layers.items():
                self.layer_boxes[name] = g.add_checkbox(name, initial_value=shown)
        self.track_boxes = []
        with g.add_folder("motions"):
            for t in self.tracks:
                self.track_boxes.append(g.add_checkbox(t.name, initial_value=True))

        @self.play_button.on_update
        def _(_event) -> None:
            self.playing = bool(self.play_button.value)

        @self.time_slider.on_update
        def _(_event) -> None:
            if int(self.time_slider.value) != self.frame:
                self.set_frame(int(self.time_slider.value))

        @self.speed_menu.on_update
        def _(_event) -> None:
            self.speed = float(self.speed_menu.value)

        @self.follow_menu.on_update
        def _(_event) -> None:
            self.follow = None if self.follow_menu.value == "(none)" else str(self.follow_menu.value)

        for name, box in self.layer_boxes.items():
            box.on_update(lambda _event, name=name, box=box: self.set_layer(name, bool(box.value)))
        for k, box in enumerate(self.track_boxes):
            box.on_update(lambda _event, k=k, box=box: self._show_track(k, bool(box.value)))

    # -- state ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The address to open in a browser."""
        host = "localhost" if self.host in ("0.0.0.0", "127.0.0.1") else self.host
        return f"http://{host}:{self.port}"

    def __len__(self) -> int:
        return len(self.tracks[0].times)

    def set_layer(self, name: str, shown: bool) -> None:
        """Show or hide a layer (``scene.layers``). **Raises:** ``KeyError`` for an unknown one."""
        if name not in self.layers:
            raise KeyError(f"unknown layer {name!r}; the layers are {', '.join(self.layers)}")
        with self._lock:
            self.layers[name] = shown
            if name == "floor":
                self.floor.visible = shown
            for k, nodes in enumerate(self.nodes):
                self._apply_visibility(k, nodes)

    def _show_track(self, k: int, shown: bool) -> None:
        with self._lock:
            self.nodes[k]["shown"] = shown
            self._apply_visibility(k, self.nodes[k])

    def _apply_visibility(self, k: int, nodes: dict) -> None:
        on = nodes.get("shown", True)
        for h, layer in nodes["visuals"]:
            h.visible = on and self.layers[layer]
        for key, layer in (
            ("markers", "markers"),
            ("experimental", "experimental_markers"),
            ("muscles", "muscles"),
            ("forces", "forces"),
            ("skeleton", "skeleton"),
        ):
            if nodes[key] is not None:
                nodes[key].visible = on and self.layers[layer]

    def set_frame(self, i: int) -> None:
        """Move the scene to frame ``i`` of the motions (and the slider with it).

        **Raises:** ``IndexError`` outside ``0 <= i < len(viewer)``.
        """
        n = len(self)
        if not 0 <= i < n:
            raise IndexError(f"frame {i} is outside 0..{n - 1}")
        with self._lock, self.server.atomic():
            self.frame = i
            for k, (t, nodes) in enumerate(zip(self.tracks, self.nodes)):
                for v, (h, _) in enumerate(nodes["visuals"]):
                    h.wxyz = self._wxyz[k][i, v]
                    h.position = t.visual_p[i, v]
                if nodes["markers"] is not None:
                    nodes["markers"].points = t.markers[i].astype(np.float32)
                if nodes["experimental"] is not None:
                    nodes["experimental"].points = np.nan_to_num(t.experimental[i]).astype(np.float32)
                if nodes["muscles"] is not None:
                    seg, col = self._segments(k, i)
                    nodes["muscles"].points = seg
                    nodes["muscles"].colors = col
                if nodes["forces"] is not None:
                    nodes["forces"].points = self._arrows(k, i)
                if nodes["skeleton"] is not None:
                    nodes["skeleton"].points = self._sticks(k, i)
            if int(self.time_slider.value) != i:
                self.time_slider.value = i
            self.time_label.value = f"{self.tracks[0].times[i]:.3f}"
            if self.follow is not None:
                p = self.tracks[0].frame_p[i, self.scene.frame_paths.index(self.follow)]
                for client in self.server.get_clients().values():
                    client.camera.look_at = p

    def _run(self) -> None:
        last = time.perf_counter()
        t = float(self.tracks[0].times[0])
        times = self.tracks[0].times
        while not self._stop.wait(1 / 30):
            now = time.perf_counter()
            if self.playing and len(times) > 1:
                t = float(times[self.frame]) if abs(t - float(times[self.frame])) > 1.0 else t
                t += (now - last) * self.speed
                if t > times[-1]:
                    t = float(times[0]) + (t - float(times[0])) % max(float(times[-1] - times[0]), 1e-9)
                i = int(np.searchsorted(times, t + 1e-12, side="right") - 1)
                if i != self.frame:
                    try:
                        self.set_frame(max(i, 0))
                    except Exception:  # (a server stopping under us)
                        return
            else:
                t = float(times[self.frame])
            last = now

    def notebook(self, height: int = 480):
        """The viewer in a notebook cell (an ``IFrame`` of ``url``). **Arguments:**
        ``height`` (px). **Returns:** an ``IPython.display.IFrame``."""
        from IPython.display import IFrame

        return IFrame(self.url, width="100%", height=int(height))

    def close(self) -> None:
        """Stop the playback thread and the server (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def serve_forever(self) -> None:
        """Block until interrupted (Ctrl-C), then close (for scripts and the command line)."""
        try:
            while not self._stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.close()
