"""Moco's ``MocoContactTrackingGoal``: ground reaction forces tracked by a model's
smooth contact forces.

Each ``ContactGroup`` pairs some ``SmoothSphereHalfSpaceForce`` components (e.g. the
spheres under one foot) with an ``ExternalForce`` of an ``ExternalLoads`` file (that
foot's measured ground reaction). The goal integrates the squared difference between
the group's summed contact force and the measured force, both in Ground, over the
phase, divided by the model's weight (total mass times the magnitude of gravity), as
Moco 4.6 (``MocoContactTrackingGoal.cpp``):

- the model force of a contact is the force it applies to the body the external force
  is ``applied_to_body`` (the sphere's, or the half-space's base frame; else the first
  of the group's ``alternative_frames`` that is one of them);
- the measured force is the data's columns ``<force_identifier>x``, ``y``, ``z``, each
  fitted by a quintic ``GCVSpline`` with error variance 0 (Moco's ``GCVSplineSet``),
  re-expressed in Ground from ``force_expressed_in_body``;
- ``normalize_tracking_error`` divides each direction's error by the data's peak
  magnitude in that direction; ``projection`` ``"vector"`` keeps the error's
  component along ``projection_vector``, ``"plane"`` removes it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .goals import _cached
from .problem import Goal

__all__ = ["ContactGroup", "ContactTracking"]

PROJECTIONS = ("none", "vector", "plane")


@dataclasses.dataclass(frozen=True)
class ContactGroup:
    """Moco's ``MocoContactTrackingGoalGroup``.

    **Fields:** ``contact_forces``: paths of ``SmoothSphereHalfSpaceForce``
    components; ``external_force``: the name of an ``ExternalForce`` in the goal's
    ``ExternalLoads`` file; ``alternative_frames``: frame paths (base frames of the
    contacts' sphere or half-space) to take the force on when neither is the external
    force's ``applied_to_body``.
    """

    contact_forces: tuple
    external_force: str
    alternative_frames: tuple = ()


@dataclasses.dataclass(frozen=True)
class ContactTracking(Goal):
    """Moco's ``MocoContactTrackingGoal``: ``weight * integral of sum over groups of
    |P (f_model - f_ref(t)) / n| ** 2 dt / (m g)``, forces in N in Ground, ``m`` the
    model's mass (kg), ``g`` the magnitude of its gravity (m/s^2), ``n`` the
    normalization (1 unless ``normalize_tracking_error``), ``P`` the projection.

    **Fields:** ``groups``: ``ContactGroup``s; ``external_loads``: the
    ``ExternalLoads`` ``.xml`` file (its data file found from its own folder, as
    OpenSim does); ``weight``; ``projection``: ``"none"``, ``"vector"`` or
    ``"plane"``; ``projection_vector``: 3 numbers (normalized), needed with a
    projection; ``normalize_tracking_error``.

    Moco's ``MocoScaleFactor``s on the reference are not supported.
    """

    groups: tuple
    external_loads: Any
    weight: float = 1.0
    projection: str = "none"
    projection_vector: Any = None
    normalize_tracking_error: bool = False
    _cache: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def _prepare(self, problem):
        from ..forces.contact import SmoothSphereHalfSpaceForce
        from ..functions import GCVSpline, stack_pp
        from ..mechanics.frames import Body
        from ..forces._common import resolve_frame
        from ..tools.external_loads import read_external_force_specs
        from ..tools.scaling import _base_frame_path

        where = "ContactTracking"
        if problem.kinematics is not None:
            raise ValueError(
                f"{where}: the contact forces need the coordinates as states; this problem prescribes them"
            )
        if self.projection not in PROJECTIONS:
            raise ValueError(f"{where}: expected 'projection' to be one of {PROJECTIONS}, got {self.projection!r}")
        direction = None
        if self.projection != "none":
            if self.projection_vector is None or np.shape(self.projection_vector) != (3,):
                raise ValueError(
                    f"{where}: projection {self.projection!r} needs a projection_vector of 3 numbers, "
                    f"got {self.projection_vector!r}"
                )
            direction = np.asarray(self.projection_vector, float)
            direction = direction / np.linalg.norm(direction)
        if not self.groups:
            raise ValueError(f"{where}: no contact groups")
        system = problem.system
        model = system.model
        gravity = float(np.linalg.norm(np.asarray(model.gravity, float)))
        mass = float(sum(float(np.asarray(b.mass)) for _, b in model.walk() if isinstance(b, Body)))
        denominator = mass * gravity if gravity > 1e-14 else mass
        loads_file = os.fspath(self.external_loads)
        data, source, specs = read_external_force_specs(loads_file)
        by_name = {s["name"]: s for s in specs}
        times = np.asarray(data.times, float)
        labels = list(data.labels)
        paths, offsets, members, pps, frames, norms = [], [], [], [], [], []
        for g, group in enumerate(self.groups):
            spec = by_name.get(group.external_force)
            if spec is None:
                raise ValueError(
                    f"{where}: external force {group.external_force!r} not found in {loads_file!r} (it "
                    f"has: {', '.join(by_name) or 'none'})"
                )
            body = spec["applied_to_body"]
            for path in group.contact_forces:
                frames_of = _contact_frames(system, path)
                if (
                    not model.has(path)
                    or not isinstance(model.find(path), SmoothSphereHalfSpaceForce)
                    or frames_of is None
                ):
                    raise ValueError(
                        f"{where}: group {group.external_force!r}: {path!r} is not a "
                        "SmoothSphereHalfSpaceForce of the model"
                    )
                sphere, half_space = (_base_frame_path(model, f) for f in frames_of)
                offset = None
                if sphere.rsplit("/", 1)[-1] == body:
                    offset = "sphere_force"
                elif half_space.rsplit("/", 1)[-1] == body:
                    offset = "half_space_force"
                else:
                    for alt in group.alternative_frames:
                        if alt in (sphere, half_space):
                            offset = "sphere_force" if alt == sphere else "half_space_force"
                            break
                if offset is None:
                    raise ValueError(
                        f"{where}: contact force {path!r} has sphere base frame {sphere!r} and half space base frame "
                        f"{half_space!r}; one of them should be the applied_to_body ({body!r}) of external force "
                        f"{group.external_force!r}, or one of the group's alternative_frames"
                    )
                paths.append(path)
                offsets.append(offset == "sphere_force")
                members.append(g)
            ident = spec["force_identifier"]
            for axis in "xyz":
                if ident + axis not in labels:
                    raise ValueError(
                        f"{where}: external force {group.external_force!r}: no column "
                        f"{ident + axis!r} in its data {source!r}"
                    )
            columns = np.stack([np.asarray(data.column(ident + axis), float) for axis in "xyz"], 1)
            pps += [GCVSpline.from_degree(5, times, columns[:, d], name=f"{ident}{'xyz'[d]}").to_pp() for d in range(3)]
            frames.append(
                resolve_frame(system.topology, loads_file, spec["force_expressed_in_body"], "force_expressed_in_body")
            )
            if self.normalize_tracking_error:
                peak = np.max(np.abs(columns), axis=0)
                if np.any(peak < 1e-14):
                    raise ValueError(
                        f"{where}: normalize_tracking_error is set, but the peak magnitude of the data "
                        f"of {group.external_force!r} in the {'xyz'[int(np.argmin(peak))]}-direction is "
                        "close to zero"
                    )
                norms.append(peak)
            else:
                norms.append(np.ones(3))
        sums = np.zeros((len(self.groups), len(paths)))
        sums[members, np.arange(len(paths))] = 1.0
        pp = jax.tree.map(lambda a: np.asarray(a) if isinstance(a, jax.Array) else a, stack_pp(pps))
        return dict(
            paths=tuple(paths),
            on_sphere=np.asarray(offsets),
            sums=sums,
            pp=pp,
            frames=tuple(frames),
            rotate=any(f != "/ground" for f in frames),
            norms=np.stack(norms),
            direction=direction,
            denominator=denominator,
        )

    def integrand(self, problem, t, y, controls, system=None):
        """The squared force errors (N^2) over the model's weight (N) at one grid point; see ``Goal.integrand``."""
        from ..forward import Context
        from ..state import State

        prep = _cached(self, problem, self._prepare)
        system = problem.system if system is None else system
        tree = system.topology.tree
        nq, nu = tree.nq, tree.nu
        base = system.default_state()
        dtype = jnp.result_type(y)
        state = State(t=jnp.asarray(t, dtype), q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=base.d)
        ctx = Context(system, state, controls)
        on_sphere = jnp.asarray(prep["on_sphere"])[:, None]
        loads = jnp.where(
            on_sphere,
            ctx.group_outputs(prep["paths"], "sphere_force"),
            ctx.group_outputs(prep["paths"], "half_space_force"),
        )
        model_force = jnp.asarray(prep["sums"], dtype) @ loads[:, 3:]
        reference = jax.vmap(lambda pp: pp(t))(prep["pp"]).reshape(-1, 3)
        if prep["rotate"]:  # (data expressed in a body: to Ground, every group's frame in one gather)
            reference = jnp.einsum("gij,gj->gi", ctx.frames_in_ground(prep["frames"])[0], reference)
        error = (model_force - reference) / jnp.asarray(prep["norms"], dtype)
        if prep["direction"] is not None:
            d = jnp.asarray(prep["direction"], dtype)
            along = (error @ d)[:, None] * d
            error = along if self.projection == "vector" else error - along
        return jnp.sum(error * error) / prep["denominator"]


def _contact_frames(system, path: str):
    """The frames (paths) of a contact force's sphere and half-space, as the model's
    build resolved them; ``None`` if no contact group holds ``path``."""
    for group in system.topology.role_groups("forces"):
        if path in group.paths and "sphere_frame" in group.static:
            k = group.paths.index(path)
            return group.static["sphere_frame"][k], group.static["half_space_frame"][k]
    return None
