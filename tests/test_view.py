"""simjax.view: scenes, motions and their outputs (HTML, GIF, live viewer, command line).

The scene's frames are one batched, jitted call; these tests compare them with
``sj.body_poses`` (to 1e-12) and with OpenSim's body transforms and current paths
(``getTransformInGround``, ``GeometryPath::getCurrentPath``, wrap points included), check
every mesh the shipped models name, the missing-mesh stand-in, motions (degrees, bad
columns), and that each output holds the frames. Models are small (double_pendulum, a
one-cylinder wrapping rig) except gait10dof18musc, compiled once for the module.
"""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import warnings
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax import cli, view
from simjax.io.states import write_states
from simjax.view.meshes import GEOMETRY_DIR

pytest.importorskip("vtkmodules")
opensim = pytest.importorskip("opensim")

sys.path.insert(0, os.path.dirname(__file__))


def _states(system, rows: dict, times) -> sj.State:
    """Batched states of a system with the coordinates ``rows[name] (n,)`` set."""
    base = system.default_state()

    def one(values, t):
        return system.set_coordinates(base, dict(zip(rows, values))).replace(t=t)

    return jax.vmap(one)(jnp.stack([jnp.asarray(v, float) for v in rows.values()], -1), jnp.asarray(times, float))


@pytest.fixture(scope="module")
def gait():
    """gait10dof18musc at 4 random poses (coordinates within their ranges)."""
    system = sj.models.load("gait10dof18musc").build()
    scene = view.build_scene(system, sj.models.path("gait10dof18musc"))
    rng = np.random.default_rng(7)
    rows = {}
    for name, path in zip(system.coordinate_names, system.coordinate_paths):
        lo, hi = np.asarray(system.find(path).range, float)
        rows[name] = rng.uniform(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo), 4)
    states = _states(system, rows, np.arange(4) * 0.1)
    return system, scene, states, scene.frames(states, name="random poses")


@pytest.fixture(scope="module")
def pendulum():
    """double_pendulum swinging through 5 frames."""
    system = sj.models.load("double_pendulum").build()
    scene = view.build_scene(system, sj.models.path("double_pendulum"))
    a = np.linspace(0.0, 1.0, 5)
    states = _states(system, {"q1": a, "q2": -0.5 * a}, np.linspace(0.0, 0.4, 5))
    return system, scene, states, scene.frames(states)


def _opensim_state(model, state_q, system):
    s = model.initSystem()
    coords = model.getCoordinateSet()
    for name, path in zip(system.coordinate_names, system.coordinate_paths):
        info = system.topology.tree.coordinates[path]
        coords.get(name).setValue(s, float(state_q[info.q]), False)
    model.realizePosition(s)
    return s


def test_scene_transforms_equal_body_poses_and_opensim(gait):
    system, scene, states, frames = gait
    R, p = jax.vmap(lambda st: sj.body_poses(system, st))(states)
    nb = len(scene.body_paths)
    assert scene.frame_paths[:nb] == scene.body_paths
    np.testing.assert_allclose(frames.frame_R[:, :nb], np.asarray(R), rtol=0, atol=1e-12)
    np.testing.assert_allclose(frames.frame_p[:, :nb], np.asarray(p), rtol=0, atol=1e-12)
    # every visual sits on its frame with its offset
    vf = np.asarray([scene.frame_paths.index(v.frame) for v in scene.visuals])
    np.testing.assert_allclose(frames.visual_p, frames.frame_p[:, vf], atol=1e-12)
    # OpenSim's body transforms at the same coordinates
    model = opensim.Model(sj.models.path("gait10dof18musc"))
    for k in (0, 3):
        s = _opensim_state(model, np.asarray(states.q[k]), system)
        for i, body in enumerate(scene.body_paths[1:], start=1):
            X = model.getBodySet().get(body.rsplit("/", 1)[-1]).getTransformInGround(s)
            R_os = np.array([[X.R().get(r, c) for c in range(3)] for r in range(3)])
            p_os = np.array([X.p()[j] for j in range(3)])
            np.testing.assert_allclose(frames.frame_R[k, i], R_os, atol=1e-10, err_msg=body)
            np.testing.assert_allclose(frames.frame_p[k, i], p_os, atol=1e-10, err_msg=body)


def _current_path(model, s, path):
    cp = opensim.GeometryPath.safeDownCast(model.getComponent(path)).getCurrentPath(s)
    return np.array([[cp.get(j).getLocationInGround(s)[c] for c in range(3)] for j in range(cp.getSize())])


def test_muscle_polylines_equal_opensim_current_paths(gait):
    system, scene, states, frames = gait
    model = opensim.Model(sj.models.path("gait10dof18musc"))
    for k in range(len(frames)):
        s = _opensim_state(model, np.asarray(states.q[k]), system)
        for i, path in enumerate(scene.paths):
            ref = _current_path(model, s, path)
            n = int(frames.path_count[k, i])
            assert n == len(ref), (k, path)
            np.testing.assert_allclose(frames.path_points[k, i, :n], ref, atol=1e-10, err_msg=path)
            padding = frames.path_points[k, i, n:]  # repeats the last point
            np.testing.assert_array_equal(padding, np.broadcast_to(frames.path_points[k, i, n - 1], padding.shape))
    # coloured by the activation states
    z = {n: i for i, n in enumerate(system.z_names)}
    cols = [z[p.rsplit("/", 1)[0] + "/activation"] for p in scene.paths]
    np.testing.assert_array_equal(frames.path_value, np.asarray(states.z)[:, cols])


def test_wrapped_polylines_equal_opensim_current_paths(tmp_path):
    from _wrapping_rigs import _rig_xml, rig

    file = tmp_path / "rig.osim"
    file.write_text(_rig_xml(rig("cylinder", (-0.1, 0.05, 0.0), (0.1, 0.05, 0.0), (0.03, 0.2))))
    system = sj.load_osim(file).build()
    scene = view.build_scene(system, file)
    assert [v.kind for v in scene.visuals if v.layer == "wrap"] == ["WrapCylinder"]
    q = np.linspace(-1.2, 1.2, 5)
    frames = scene.frames(_states(system, {"q": q}, np.arange(5.0)))
    model = opensim.Model(str(file))
    s = model.initSystem()
    counts = []
    for k, value in enumerate(q):
        model.getCoordinateSet().get("q").setValue(s, float(value))
        model.realizePosition(s)
        ref = _current_path(model, s, scene.paths[0])
        n = int(frames.path_count[k, 0])
        counts.append(n)
        assert n == len(ref)
        np.testing.assert_allclose(frames.path_points[k, 0, :n], ref, atol=1e-10)
    assert 4 in counts and 2 in counts  # wrapped (two tangent points) and straight frames


def _vtp_counts(path):
    piece = ET.parse(path).getroot().find("PolyData/Piece")
    return int(piece.get("NumberOfPoints")), int(piece.get("NumberOfPolys"))


def test_shipped_models_meshes_all_load_without_stand_ins():
    named = set()
    for name in sj.models.names():
        system = sj.models.load(name, strict=False).build()
        with warnings.catch_warnings():
            warnings.simplefilter("error", view.ViewWarning)
            scene = view.build_scene(system, sj.models.path(name))
        assert scene.stand_ins() == ()
        meshes = [v for v in scene.visuals if v.kind == "Mesh"]
        assert meshes, name
        for v in meshes:
            assert os.path.dirname(v.source) == os.path.normpath(GEOMETRY_DIR)
            named.add(os.path.basename(v.source))
    shipped = {f for f in os.listdir(GEOMETRY_DIR) if f.endswith(".vtp")}
    assert named <= shipped
    for f in sorted(named):
        mesh = view.read_mesh(os.path.join(GEOMETRY_DIR, f))
        n_points, n_polys = _vtp_counts(os.path.join(GEOMETRY_DIR, f))
        assert mesh.n_vertices == n_points, f
        assert mesh.n_faces >= n_polys, f  # polygons split into triangles


def test_missing_mesh_gives_one_warning_and_a_stand_in(tmp_path):
    text = open(sj.models.path("double_pendulum")).read().replace("sphere.vtp", "no_such_bone.vtp")
    (tmp_path / "pendulum.osim").write_text(text)
    from simjax.io.osim import load_osim

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = load_osim(tmp_path / "pendulum.osim").build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene = view.build_scene(system, tmp_path / "pendulum.osim")
    named = [w for w in caught if issubclass(w.category, view.ViewWarning) and "no_such_bone.vtp" in str(w.message)]
    assert len(named) == 1  # two geometries name it: one warning
    assert "/bodyset/rod1/rod1_geom_2" in str(named[0].message)
    stand_ins = scene.stand_ins()
    assert [v.path for v in stand_ins] == ["/bodyset/rod1/rod1_geom_2", "/bodyset/rod2/rod2_geom_2"]
    assert all(v.color == view.STAND_IN_COLOR for v in stand_ins)
    # found in Geometry/ beside the model, then on a user path
    (tmp_path / "Geometry").mkdir()
    shutil.copy(os.path.join(GEOMETRY_DIR, "sphere.vtp"), tmp_path / "Geometry" / "no_such_bone.vtp")
    scene = view.build_scene(system, tmp_path / "pendulum.osim")
    assert scene.stand_ins() == ()
    other = tmp_path / "meshes"
    shutil.move(tmp_path / "Geometry", other)
    scene = view.build_scene(system, None, geometry_path=other)
    assert {v.source for v in scene.visuals if v.kind == "Mesh"} >= {str(other / "no_such_bone.vtp")}


def test_motion_files_degrees_states_and_bad_columns(pendulum, tmp_path):
    system, scene, states, frames = pendulum
    deg = np.rad2deg(np.asarray(states.q))
    rows = "\n".join(f"{t:.6f}\t{float(a)!r}\t{float(b)!r}" for t, (a, b) in zip(np.asarray(states.t), deg))
    mot = tmp_path / "swing.mot"
    mot.write_text(f"swing\nversion=1\nnRows=5\nnColumns=3\ninDegrees=yes\nendheader\ntime\tq1\tq2\n{rows}\n")
    from_mot = scene.frames(mot)
    np.testing.assert_allclose(from_mot.frame_p, frames.frame_p, atol=1e-12)
    assert from_mot.name == "swing.mot"
    sto = tmp_path / "swing.sto"
    write_states(system, states, sto)
    np.testing.assert_allclose(scene.frames(sto).frame_R, frames.frame_R, atol=1e-12)
    bad = tmp_path / "bad.mot"
    bad.write_text("bad\nversion=1\nnRows=1\nnColumns=2\ninDegrees=no\nendheader\ntime\tknee\n0\t1\n")
    with pytest.raises(view.MotionError, match=r"bad\.mot: no column names a coordinate.*coordinates: q1, q2"):
        scene.frames(bad)
    # resampled at 20 frames/s: 9 frames over 0.4 s
    assert len(scene.frames(states, rate=20.0)) == 9


def _payload(path):
    text = open(path, encoding="utf-8").read()
    block = re.search(r'<script type="application/json" id="simjax-scene">(.*?)</script>', text, re.S).group(1)
    return text, json.loads(block)


def _decode(s, dtype):
    return np.frombuffer(base64.b64decode(s), dtype=dtype)


def test_html_is_self_contained_and_holds_the_frames(pendulum, tmp_path):
    system, scene, states, frames = pendulum
    overlay = scene.frames(states, name="reference", times=frames.times)
    out = tmp_path / "pendulum.html"
    view.write_html(out, scene, frames, overlay, follow="/bodyset/rod2")
    text, data = _payload(out)
    assert " src=" not in text and "http://" not in text and "https://" not in text and "@import" not in text
    assert data["times"] == pytest.approx(list(frames.times))
    assert [t["name"] for t in data["tracks"]] == ["motion", "reference"]
    poses = _decode(data["tracks"][0]["poses"], "<f4").reshape(len(frames), len(scene.visuals), 12)
    np.testing.assert_allclose(poses[..., :9].reshape(frames.visual_R.shape), frames.visual_R, atol=1e-6)
    np.testing.assert_allclose(poses[..., 9:], frames.visual_p, atol=1e-6)
    assert data["follow"][data["follow_default"]] == "/bodyset/rod2"
    assert len(data["meshes"]) == len(scene.visuals) + 3
    assert data["layers"]["bodies"] and not data["layers"]["skeleton"]  # meshes attached: no skeleton by default
    assert data["sticks"] == [[0, 5], [1, 6], [2, 7]]  # each body origin to its joints' offset frames
    with pytest.raises(ValueError, match="cannot follow '/bodyset/nope'"):
        view.html_document(scene, frames, follow="/bodyset/nope")


def test_gif_has_one_frame_per_stride(pendulum, tmp_path):
    from PIL import Image

    _, scene, _, frames = pendulum
    out = tmp_path / "pendulum.gif"
    assert view.write_animation(out, scene, frames, stride=2, size=(160, 120), follow="/bodyset/rod1") == 3
    with Image.open(out) as im:
        assert im.n_frames == 3 and im.size == (160, 120)


def test_command_line_writes_html(pendulum, tmp_path, capsys):
    system, _, states, _ = pendulum
    sto = tmp_path / "swing.sto"
    write_states(system, states, sto)
    out = tmp_path / "cli.html"
    assert cli.main(["view", "double_pendulum", "--motion", str(sto), "--html", str(out), "--follow", "rod2"]) == 0
    assert f"HTML: {out} (5 frames)" in capsys.readouterr().out
    _, data = _payload(out)
    assert len(data["times"]) == 5 and data["follow"][data["follow_default"]] == "/bodyset/rod2"
    bad = tmp_path / "bad.mot"
    bad.write_text("bad\nversion=1\nnRows=1\nnColumns=2\ninDegrees=no\nendheader\ntime\tknee\n0\t1\n")
    assert cli.main(["view", "double_pendulum", "--motion", str(bad), "--html", str(out)]) == 1
    assert "The model's coordinates: q1, q2" in capsys.readouterr().err


def test_live_viewer_starts_moves_and_stops(pendulum):
    pytest.importorskip("viser")
    _, scene, _, frames = pendulum
    before = set(threading.enumerate())
    with view.Viewer(scene, frames, follow="/bodyset/rod2") as viewer:
        port = viewer.port
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        viewer.set_frame(3)
        moving = [i for i, v in enumerate(scene.visuals) if v.frame.startswith("/bodyset/rod2")]
        for i in moving:
            handle = viewer.nodes[0]["visuals"][i][0]
            np.testing.assert_allclose(handle.position, frames.visual_p[3, i], atol=1e-6)
        assert int(viewer.time_slider.value) == 3
        viewer.set_layer("bodies", False)
        assert not any(h.visible for h, layer in viewer.nodes[0]["visuals"] if layer == "bodies")
        with pytest.raises(IndexError):
            viewer.set_frame(len(frames))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive() and "simjax" in t.name]


def test_live_viewer_starts_and_stops_in_a_notebook_cell(tmp_path):
    pytest.importorskip("viser")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("""import socket, threading
import jax
jax.config.update("jax_enable_x64", True)
import simjax as sj
scene = sj.view.load_scene("double_pendulum")
viewer = sj.view.Viewer(scene, scene.frames())
socket.create_connection(("127.0.0.1", viewer.port), timeout=5).close()
frame = viewer.notebook(height=300)
viewer.close()
try:
    socket.create_connection(("127.0.0.1", viewer.port), timeout=1).close()
    stopped = False
except OSError:
    stopped = True
print("stopped", stopped, [t.name for t in threading.enumerate() if "simjax" in t.name])""")
    ]
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.get("name") == "stdout")
    assert "stopped True []" in text


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _pixel_of(camera, point, width, height):
    """Where the player's starting camera projects ``point`` (pixels, origin top left)."""
    yaw, pitch, dist = camera["yaw"], camera["pitch"], camera["dist"]
    target = np.asarray(camera["target"])
    back = np.array([np.cos(pitch) * np.sin(yaw), np.sin(pitch), np.cos(pitch) * np.cos(yaw)])
    eye = target + dist * back
    right = np.cross([0.0, 1.0, 0.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    c = np.stack([right, up, back]) @ (np.asarray(point) - eye)
    f = 1.0 / np.tan(0.4)
    x, y = f * c[0] / -c[2] / (width / height), f * c[1] / -c[2]
    return int(round((x + 1) / 2 * width)), int(round((1 - y) / 2 * height))


@pytest.mark.skipif(_chromium() is None, reason="needs a headless Chromium (Debian's chromium package)")
def test_html_draws_the_model_in_a_real_browser(gait, tmp_path):
    from PIL import Image

    _, scene, _, frames = gait
    page = tmp_path / "gait10dof18musc.html"
    view.write_html(page, scene, frames)
    _, data = _payload(page)
    artifacts = os.environ.get("SIMJAX_TEST_ARTIFACTS", str(tmp_path))
    os.makedirs(artifacts, exist_ok=True)
    width, height = 640, 544  # the canvas is the window less the 64-pixel control bar
    shots = []
    for k in (0, 3):
        shot = os.path.join(artifacts, f"view_gait10dof18musc_frame{k}.png")
        subprocess.run(
            [
                _chromium(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu-sandbox",
                "--use-angle=swiftshader",
                "--enable-unsafe-swiftshader",
                "--hide-scrollbars",
                f"--window-size={width},{height + 64}",
                "--virtual-time-budget=3000",
                f"--screenshot={shot}",
                f"{page.as_uri()}#frame={k}&paused",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        shots.append(np.asarray(Image.open(shot).convert("RGB"), int)[:height])
    background = np.round(255 * np.asarray(data["background"])).astype(int)
    pelvis = scene.frame_paths.index("/bodyset/pelvis")
    for k, img in zip((0, 3), shots):
        drawn = np.abs(img - background).sum(-1) > 30
        assert drawn.mean() > 0.01  # the model (and the floor) are drawn
        x, y = _pixel_of(data["camera"], frames.frame_p[k, pelvis], width, height)
        assert drawn[max(y - 15, 0) : y + 15, max(x - 15, 0) : x + 15].any(), (k, x, y)  # bones where the pelvis is
    assert (np.abs(shots[0] - shots[1]).sum(-1) > 30).mean() > 0.002  # the two frames differ
