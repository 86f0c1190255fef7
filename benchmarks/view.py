"""Viewer benchmark (issue 41): the scene of gait10dof18musc and the frames of a 10 s gait
motion at 100 frames/s, next to OpenSim 4.6 computing the same poses in the same run.

- scene: reading the model and building its scene (every mesh read with VTK), cold and
  with the meshes cached;
- frames: ``Scene.frames`` for the 1001 frames, one jitted call vmapped over them
  (body and visual poses, muscle paths through their path points, activations), the
  first call (compilation included) and the best of three after it;
- OpenSim: per frame, set the coordinates, ``realizePosition``, every body's
  ``getTransformInGround`` and every muscle's ``getCurrentPath`` locations;
- outputs: the self-contained HTML page (time, size) and a 100-frame GIF.

The motion is the Gait10dof18musc pipeline's inverse-kinematics result when given
(``--motion``, e.g. OpenSim's ``OutputReference/IK/subject01_walk_IK.mot``), resampled at
100 frames/s and repeated, stride after stride, to 10 s; otherwise a synthetic walk
(each coordinate a 1 Hz sinusoid within its range, the pelvis moving forward at 1.2 m/s).

Run: ``python -m benchmarks.view [--motion FILE] [--seconds 10] [--rate 100]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np

from benchmarks.suite import best

import simjax as sj
from simjax import view
from simjax.io.states import coordinates_from_table
from simjax.state import State


def gait_motion(system, seconds: float, rate: float, motion: str | None = None) -> State:
    """``seconds`` of walking at ``rate`` frames/s as batched states (see the module docstring)."""
    times = np.arange(int(round(seconds * rate)) + 1) / rate
    coords = system.topology.tree.coordinates
    base = system.default_state()
    q = np.tile(np.asarray(base.q, float), (len(times), 1))
    if motion is not None:
        t, values, _ = coordinates_from_table(system, motion)
        span = t[-1] - t[0]
        for path, v in values.items():
            phase = (times % span) + t[0]
            q[:, coords[path].q] = np.interp(phase, t, v)
            if path.endswith("pelvis_tx"):  # each repeat starts where the last ended
                q[:, coords[path].q] += np.floor(times / span) * (v[-1] - v[0])
    else:
        for k, path in enumerate(system.coordinate_paths):
            lo, hi = np.asarray(system.find(path).range, float)
            mid, amp = 0.5 * (lo + hi), 0.25 * min(hi - lo, 2.0)
            q[:, coords[path].q] = mid + amp * np.sin(2 * np.pi * times + k)
        q[:, coords[system.coordinate_path("pelvis_tx")].q] = 1.2 * times
        q[:, coords[system.coordinate_path("pelvis_ty")].q] = 0.95
    n = len(times)
    return State(
        t=jax.numpy.asarray(times),
        q=jax.numpy.asarray(q),
        u=jax.numpy.zeros((n, len(base.u))),
        z=jax.numpy.tile(base.z, (n, 1)),
        d=jax.numpy.tile(base.d, (n, 1)),
    )


def opensim_frames(path: str, system, states: State) -> float:
    """OpenSim's seconds per frame for the same poses (bodies and current muscle paths)."""
    import opensim

    om = opensim.Model(path)
    s = om.initSystem()
    cs = om.getCoordinateSet()
    coords = [
        (cs.get(n), system.topology.tree.coordinates[p].q)
        for n, p in zip(system.coordinate_names, system.coordinate_paths)
    ]
    bodies = [om.getBodySet().get(i) for i in range(om.getBodySet().getSize())]
    muscles = om.getMuscles()
    paths = [muscles.get(i).getGeometryPath() for i in range(muscles.getSize())]
    q = np.asarray(states.q)
    t = time.perf_counter()
    for row in q:
        for c, i in coords:
            c.setValue(s, float(row[i]), False)
        om.realizePosition(s)
        for b in bodies:
            b.getTransformInGround(s).p()
        for gp in paths:
            cp = gp.getCurrentPath(s)
            for j in range(cp.getSize()):
                cp.get(j).getLocationInGround(s)
    return (time.perf_counter() - t) / len(q)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--motion", help="an inverse-kinematics .mot of gait10dof18musc (default: a synthetic walk)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--no-opensim", action="store_true", help="skip OpenSim's timing")
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    path = sj.models.path("gait10dof18musc")
    t = time.perf_counter()
    system = sj.models.load("gait10dof18musc").build()
    scene = view.build_scene(system, path)
    t_cold = time.perf_counter() - t
    t_warm = best(lambda: view.build_scene(system, path), 3)
    states = gait_motion(system, args.seconds, args.rate, args.motion)
    n = len(np.asarray(states.t))
    t = time.perf_counter()
    frames = scene.frames(states)
    t_first = time.perf_counter() - t
    t_frames = best(lambda: scene.frames(states), 3)
    faces = sum(v.mesh.n_faces for v in scene.visuals)
    print(
        f"gait10dof18musc scene: {len(scene.visuals)} visuals ({faces} triangles), {len(scene.frame_paths)} frames, "
        f"{len(scene.paths)} muscle paths; motion: {args.seconds:g} s at {args.rate:g} frames/s = {n} frames "
        f"({'from ' + args.motion if args.motion else 'synthetic walk'})"
    )
    print(f"  build the scene (model read + meshes)   {t_cold:8.3f} s cold, {t_warm:.3f} s with meshes cached")
    print(f"  frames, first call (compile + run)      {t_first:8.3f} s")
    print(
        f"  frames, after compilation               {t_frames:8.3f} s  ({1e6 * t_frames / n:.1f} us/frame, "
        f"{n / t_frames:.0f} frames/s)"
    )
    if not args.no_opensim:
        t_os = opensim_frames(path, system, states)
        print(
            f"  OpenSim, same poses                     {t_os * n:8.3f} s  ({1e6 * t_os:.1f} us/frame); "
            f"simjax / OpenSim = {t_frames / (t_os * n):.3f}"
        )
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "walk.html")
        t = time.perf_counter()
        view.write_html(out, scene, frames, follow="/bodyset/pelvis")
        t_html = time.perf_counter() - t
        size = os.path.getsize(out) / 1e6
        gif = os.path.join(d, "walk.gif")
        stride = max(n // 100, 1)
        t = time.perf_counter()
        k = view.write_animation(gif, scene, frames, stride=stride, follow="/bodyset/pelvis")
        t_gif = time.perf_counter() - t
    print(f"  self-contained HTML                     {t_html:8.3f} s  ({size:.1f} MB, {n} frames)")
    print(f"  GIF                                     {t_gif:8.3f} s  ({k} frames, {1e3 * t_gif / k:.0f} ms/frame)")


if __name__ == "__main__":
    main()
