"""Groups: same-class components evaluated together, vectorized.

Rule 3 of the house: no Python loop over bodies, muscles or path points in traced
code. Every component class that computes something (forces, actuators, controllers,
constraints, state-variable derivatives) is *grouped*: at build time all its instances
become one ``Group`` with static index arrays (``compile_group``); at evaluation time
their properties are stacked into arrays (``group_params``) and one function of the
whole group runs.

A participating class overrides some of these classmethods:

- ``compile_group(build, paths) -> dict`` of static numpy arrays (resolved sockets
  turned into indices: mobilized bodies, speeds, controls);
- ``group_params(model, group) -> pytree`` of traced arrays (default: every numeric
  property stacked along a leading axis);
- ``group_forces(group, params, ctx) -> Forces``  (``Force`` subclasses);
- ``group_controls(group, params, ctx) -> controls`` (``Controller`` subclasses);
- ``group_zdot(group, params, ctx) -> (k, nz_each)`` (components owning z);
- ``prepare_parameters(group, ctx)``: compute, through ``ctx.parameter``, the
  state-independent parameters its evaluation uses beyond ``group_params`` (path and
  wrap-object parameters, curves), so that ``Context.prepared`` finds them all.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Group", "BuildInfo", "group_key", "stack_properties", "Forces"]


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """All instances of one class: their paths (tree order) and static data."""

    cls: type
    paths: tuple
    static: dict

    @property
    def size(self) -> int:
        """The number of components in the group."""
        return len(self.paths)


def group_key(group: Group) -> str:
    """The key of a group's parameters among a context's (``Context.parameter``)."""
    return f"group:{group.cls.__module__}.{group.cls.__qualname__}:{','.join(group.paths)}"


@dataclasses.dataclass(frozen=True, eq=False)
class BuildInfo:
    """What ``compile_group`` may use: the model, resolved connections, the tree, the
    actuator order, the z/d layout and ``index``, the model's ``{path: component}``
    table (``Model.index()``, made once per build)."""

    model: Any
    connections: dict
    tree: Any
    actuators: tuple
    z_slices: dict
    d_slices: dict
    index: dict = dataclasses.field(default_factory=dict)

    def find(self, path: str):
        """The component at ``path``: ``model.find(path)``, by a lookup in ``index``
        for an absolute path (compile functions call it for every member)."""
        comp = self.index.get(path)
        return comp if comp is not None else self.model.find(path)

    def frame_mob(self, frame_path: str) -> int:
        """The mobilized body a PhysicalFrame is fixed to."""
        body, _ = self.tree.frames[frame_path]
        return self.tree.body_paths.index(body)

    def socket(self, path: str, name: str):
        """The resolved target path of a socket."""
        return self.connections.get((path, name), "")

    def coordinate(self, coord_path: str):
        """The ``CoordinateInfo`` of a coordinate."""
        return self.tree.coordinates[coord_path]

    def control_index(self, path: str) -> int:
        """The index of an actuator's (first) control."""
        return self.actuators.index(path)

    def z_index(self, path: str) -> int:
        """Start of a component's slice of ``z``."""
        return self.z_slices[path][0]


def stack_properties(components) -> dict:
    """Stack every numeric property of same-class components: ``{name: (k, ...)}``.

    Optional properties that are ``None`` on every instance are left out.
    """
    cls = type(components[0])
    out = {}
    for name in cls.property_fields():
        values = [getattr(c, name) for c in components]
        if all(v is None for v in values):
            continue
        out[name] = jnp.stack([jnp.asarray(v, dtype=jnp.result_type(float)) for v in values])
    return out


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Forces:
    """What a force group applies: spatial forces on bodies ``(n_mob, 6)`` in Ground
    about its origin, mobility forces ``(nu,)``, and per-member output values."""

    body: Any = None
    mobility: Any = None
    outputs: dict = dataclasses.field(default_factory=dict)


def point_force_on_bodies(n_mob: int, mobs: np.ndarray, points, forces, dtype):
    """Spatial forces ``(n_mob, 6)`` of point forces applied at points on bodies.

    **Arguments:** ``mobs (k,)`` body indices; ``points (k, 3)`` application points in
    Ground; ``forces (k, 3)`` in Ground.
    """
    f6 = jnp.concatenate([jnp.cross(points, forces), forces], -1)
    return jnp.zeros((n_mob, 6), dtype).at[mobs].add(f6)


def torque_on_bodies(n_mob: int, mobs: np.ndarray, torques, dtype):
    """Spatial forces ``(n_mob, 6)`` of pure torques (Ground) on bodies."""
    f6 = jnp.concatenate([torques, jnp.zeros_like(torques)], -1)
    return jnp.zeros((n_mob, 6), dtype).at[mobs].add(f6)
