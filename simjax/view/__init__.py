"""3D views of models, simulations and data: a scene built from a ``System``, played
back from a ``Trajectory``, a states or a motion file; shown live (viser), as a
self-contained HTML page, or as an animated GIF/MP4.

::

    from simjax import view
    scene = view.load_scene("gait10dof18musc")                  # a shipped model, an .osim path, a Model or System
    frames = scene.frames("subject01_walk_IK.mot", markers="subject01_walk.trc")
    view.write_html("walk.html", scene, frames, follow="/bodyset/pelvis")
    view.write_animation("walk.gif", scene, frames, stride=4)
    with view.Viewer(scene, frames) as viewer:                  # a live viewer at viewer.url
        ...

Modules: ``shapes`` (triangle meshes, analytic shapes), ``meshes`` (finding and
reading mesh files), ``geometry`` (what a model shows), ``motion`` (motions as
batched states), ``scene`` (the scene and its frames, one jitted call), ``html``,
``video`` and ``live`` (the outputs). Needs ``pip install "simjax[view]"`` (VTK for
mesh files, viser for the live viewer; matplotlib for videos); ``import simjax``
does not.
"""

from __future__ import annotations

import os

from .geometry import STAND_IN_COLOR, STAND_IN_RADIUS, ViewWarning, Visual, collect_visuals
from .html import align_frames, html_document, notebook_html, scene_payload, write_html
from .meshes import GEOMETRY_DIR, MeshReadError, decimate, find_mesh_file, mesh_search_dirs, read_mesh
from .motion import MotionError, marker_trajectories, motion_states, resample_states
from .scene import LAYERS, Scene, SceneFrames, activation_colors, build_scene
from .shapes import TriangleMesh
from .video import write_animation

__all__ = [
    "STAND_IN_COLOR",
    "STAND_IN_RADIUS",
    "ViewWarning",
    "Visual",
    "collect_visuals",
    "align_frames",
    "html_document",
    "notebook_html",
    "scene_payload",
    "write_html",
    "GEOMETRY_DIR",
    "MeshReadError",
    "decimate",
    "find_mesh_file",
    "mesh_search_dirs",
    "read_mesh",
    "MotionError",
    "marker_trajectories",
    "motion_states",
    "resample_states",
    "LAYERS",
    "Scene",
    "SceneFrames",
    "activation_colors",
    "build_scene",
    "TriangleMesh",
    "write_animation",
    "Viewer",
    "load_scene",
]


def __getattr__(name: str):
    if name == "Viewer":  # (imports viser only when asked for)
        from .live import Viewer

        return Viewer
    raise AttributeError(f"module 'simjax.view' has no attribute {name!r}")


def load_scene(model, geometry_path=(), strict: bool = False, title: str | None = None) -> Scene:
    """The scene of a model given by name, file, ``Model`` or ``System``.

    **Arguments:** ``model``: a shipped model's name (``"arm26"``), an ``.osim`` path,
    a ``Model`` or a built ``System``; ``geometry_path``: more folders to search for
    meshes; ``strict``: as ``load_osim`` (default: skip content simjax does not model,
    with a warning); ``title``.

    **Returns:** a ``Scene`` (see ``build_scene``); meshes are looked for beside the
    file, then in ``geometry_path``, then among simjax's shipped meshes.

    **Raises:** ``FileNotFoundError`` naming both possibilities for an unknown name.
    """
    from ..model import Model
    from ..system import System

    if isinstance(model, System):
        return build_scene(model, None, geometry_path, title)
    if isinstance(model, Model):
        return build_scene(model.build(), None, geometry_path, title)
    from ..models import resolve as resolve_model_path
    from ..io.osim import load_osim

    path = resolve_model_path(os.fspath(model))
    return build_scene(load_osim(path, strict=strict).build(), path, geometry_path, title)
