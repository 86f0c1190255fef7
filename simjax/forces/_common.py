"""Helpers shared by the force modules: name lookups at build time, body-point
kinematics and force bookkeeping at evaluation time.

OpenSim refers to coordinates and bodies from several Force classes by *name*
(string properties, not sockets): ``CoordinateLimitForce.coordinate``,
``ExternalForce.applied_to_body``, ``HuntCrossleyForce`` geometry names. The
``resolve_*`` functions turn such a name (or a path) into a path once, at build
time, the way OpenSim looks it up, and raise ``ModelError`` naming the component,
the property and the value when nothing matches.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..component import ModelError
from ..component import resolve_path

__all__ = [
    "resolve_coordinate",
    "coordinate_indices",
    "resolve_frame",
    "point_velocities",
    "about_body_origins",
    "masked_mobility",
]


def resolve_coordinate(build, path: str, name: str, prop: str = "coordinate") -> str:
    """The path of the Coordinate a force names (OpenSim looks it up in the model's
    coordinate set by name; a path is accepted too).

    **Arguments:** ``build``: the ``BuildInfo``; ``path``: the force's path; ``name``:
    the coordinate's name or path; ``prop``: the property, for the message.

    **Returns:** the coordinate's path.

    **Raises:** ``ModelError`` if no coordinate, or more than one, matches.
    """
    coords = build.tree.coordinates
    if "/" in name:
        full = resolve_path(name, path)
        if full in coords:
            return full
        raise ModelError(path, f"there is no coordinate at {full!r}", prop=prop, value=name)
    hits = [p for p in coords if p.rsplit("/", 1)[-1] == name]
    if len(hits) != 1:
        msg = "no coordinate has this name" if not hits else f"the name is ambiguous: {hits}"
        raise ModelError(path, msg, prop=prop, value=name)
    return hits[0]


def coordinate_indices(build, paths, prop: str = "coordinate") -> dict:
    """Static ``q``/``u`` indices and motion types of the coordinates named by the
    ``prop`` string property of each force in ``paths``.

    **Raises:** ``ModelError`` for unknown names and for rotations of quaternion
    joints (their value is not a coordinate of the state).
    """
    qs, us, rot = [], [], []
    for p in paths:
        name = getattr(build.find(p), prop)
        cpath = resolve_coordinate(build, p, name, prop)
        info = build.coordinate(cpath)
        if info.q < 0:
            raise ModelError(
                p, f"coordinate {cpath!r} is a rotation of a quaternion joint and has no value", prop=prop, value=name
            )
        qs.append(info.q)
        us.append(info.u)
        rot.append(info.motion_type == "Rotational")
    return {"q": np.asarray(qs, np.int32), "u": np.asarray(us, np.int32), "rotational": np.asarray(rot, bool)}


def resolve_frame(build, path: str, name: str, prop: str) -> str:
    """The path of a PhysicalFrame named by a string property.

    As OpenSim's ExternalForce does: ``name`` relative to the model root
    (``"ground"``, ``"/bodyset/pelvis"``), else ``/bodyset/<name>``.

    **Raises:** ``ModelError`` if neither names a PhysicalFrame.
    """
    frames = build.tree.frames
    for cand in (resolve_path(name, "/") if name else None, "/bodyset/" + name if name else None):
        if cand is not None and cand in frames:
            return cand
    raise ModelError(
        path, "no PhysicalFrame has this name (looked in the model root and /bodyset)", prop=prop, value=name
    )


def point_velocities(ctx, mobs, points):
    """Velocities in Ground of the material points of bodies ``mobs (k,)`` that are at
    Ground locations ``points (k, 3)``."""
    V = ctx.vel.V[mobs]
    return V[:, 3:] + jnp.cross(V[:, :3], points)


def about_body_origins(ctx, mobs, F):
    """Spatial forces ``F (k, 6)`` about Ground's origin re-taken about the origins of
    bodies ``mobs`` (Simbody's body-force convention, used in OpenSim's records)."""
    return jnp.concatenate([F[:, :3] - jnp.cross(ctx.pos.p0[mobs], F[:, 3:]), F[:, 3:]], -1)


def masked_mobility(nu: int, uidx: np.ndarray, values, on: np.ndarray):
    """Generalized forces ``(nu,)`` of scalar ``values`` along speeds ``uidx``; members
    with ``on`` false (``applies_force`` off) contribute nothing."""
    return jnp.zeros(nu, values.dtype).at[uidx].add(jnp.where(on, values, 0.0))
