"""Derivatives through the tools: implicit differentiation of their optima, and a
model scaled by traced factors.

- ``implicit_root(residual, solution)``: a solution found without derivatives (an
  iterative solver's output) given the derivatives of the root of ``residual`` with
  respect to everything ``residual`` closes over, by the implicit function theorem
  (one linear solve of ``d residual / d solution``). The inverse kinematics
  (``solve_inverse_kinematics``) and static optimization
  (``solve_static_optimization``) attach their derivatives with it.
- ``scaled_system(system, factors)``: OpenSim's ``Model::scale`` as a pure function
  of the system and traced scale factors, for derivatives with respect to segment
  scale factors (e.g. of the inverse-kinematics marker error).
"""

from __future__ import annotations

from collections.abc import Mapping

import equinox as eqx
import jax.numpy as jnp

from ..compiling import full_precision
from ._roots import implicit_root
from .scaling import _base_frame, _frame_names, _owner_frame, _path_scaled, _prewrap, _scaled_functions

__all__ = ["implicit_root", "scaled_system"]


# -- scaling ----------------------------------------------------------------------------


def _factor(f, dtype):
    return jnp.broadcast_to(jnp.asarray(f, dtype), (3,))


def _scaled_inertia(inertia, f, mass_factor):
    """``Ixx Iyy Izz Ixy Ixz Iyz`` of a mass distribution stretched by ``diag(f)`` and
    its mass multiplied by ``mass_factor``: the second moment ``S = tr(I)/2 - I``
    becomes ``mass_factor F S F``. Uniform factors give OpenSim's ``I f^2 mass_factor``."""
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = inertia
    eye = jnp.eye(3, dtype=inertia.dtype)
    inertia_m = jnp.stack([jnp.stack([Ixx, Ixy, Ixz]), jnp.stack([Ixy, Iyy, Iyz]), jnp.stack([Ixz, Iyz, Izz])])
    S = 0.5 * jnp.trace(inertia_m) * eye - inertia_m
    S = mass_factor * (f[:, None] * S * f[None, :])
    out = jnp.trace(S) * eye - S
    return jnp.stack([out[0, 0], out[1, 1], out[2, 2], out[0, 1], out[0, 2], out[1, 2]])


def scaled_system(system, factors: Mapping, *, preserve_mass_distribution: bool = False, muscle_lengths: bool = True):
    """The system scaled by segment scale factors (OpenSim's ``Model::scale``), as a
    pure function of ``system`` and the factors: ``jax.grad`` with respect to a factor
    goes through every property it scales.

    **Arguments:**

    - ``system``: the built model.
    - ``factors``: ``{body (or frame) name: factor}``, a factor a scalar or ``(sx, sy,
      sz)`` (traced values allowed); a component is scaled by the factors of the body
      its frame is fixed to, as ``simjax.tools.scaling.scale_model``.
    - ``preserve_mass_distribution``: if false, each scaled body's mass is multiplied by
      ``|sx sy sz|``.
    - ``muscle_lengths``: scale muscles' optimal fiber and tendon slack lengths (path
      springs' and ligaments' resting lengths) by the ratio of their path's length
      after and before, at the default pose, as OpenSim. It evaluates every path
      twice: leave it off where only the kinematics matter (inverse kinematics).

    **Returns:** the scaled ``System`` (the same topology: nothing recompiles for new
    factors).

    Scaled, as OpenSim: bodies' mass centers, masses and inertias, offset frames'
    translations (joint frames), stations and markers, path points, moving path
    points' and CustomJoints' translation functions (through a ``MultiplierFunction``),
    wrap objects, and the muscles' lengths (``muscle_lengths``). The inertia of a
    non-uniformly scaled body is that of its mass distribution stretched by
    ``diag(f)`` (OpenSim approximates that body by a cylinder; uniform factors give
    OpenSim's values). Not done: the subject's total mass (``scale_model``'s ``mass``).

    The first scaling of a model wraps the translation functions in
    ``MultiplierFunction``s (a change of structure, so a rebuild): the model must then
    be concrete (not traced), e.g. scale it once with unit factors outside ``jax``
    transformations.
    """
    from ..functions import MultiplierFunction
    from ..mechanics.frames import Body, PhysicalOffsetFrame, Station
    from ..muscles.path import PathPoint
    from ..wrapping.objects import WrapObject

    model = system.model
    unknown = [k for k in factors if k not in _frame_names(model)]
    if unknown:
        raise KeyError(f"scale factors for {unknown}: no such frame in the model")
    wrapped = _scaled_functions(model, factors)
    if any(not isinstance(_function(model.find(p), kind, i), MultiplierFunction) for p, kind, i in wrapped):
        model = _prewrap(model, factors)
        system = model.build()
    dtype = jnp.result_type(float)
    f = {k: _factor(v, dtype) for k, v in factors.items()}

    nodes, values = [], []

    def scale(node_of, value):
        nodes.append(node_of)
        values.append(value)

    for path, comp in model.walk():
        if isinstance(comp, Body) and comp.name in f:
            k = f[comp.name]
            mass_factor = 1.0 if preserve_mass_distribution else jnp.abs(jnp.prod(k))
            scale(lambda m, p=path: m.find(p).mass_center, jnp.asarray(comp.mass_center, dtype) * k)
            if not preserve_mass_distribution:
                scale(lambda m, p=path: m.find(p).mass, jnp.asarray(comp.mass, dtype) * mass_factor)
            scale(
                lambda m, p=path: m.find(p).inertia, _scaled_inertia(jnp.asarray(comp.inertia, dtype), k, mass_factor)
            )
        elif isinstance(comp, PhysicalOffsetFrame):
            k = f.get(_base_frame(model, comp.parent, path))
            if k is not None:
                scale(lambda m, p=path: m.find(p).translation, jnp.asarray(comp.translation, dtype) * k)
        elif isinstance(comp, (Station, PathPoint)):
            k = f.get(_base_frame(model, comp.parent_frame, path))
            if k is not None:
                scale(lambda m, p=path: m.find(p).location, jnp.asarray(comp.location, dtype) * k)
        elif isinstance(comp, WrapObject):
            k = f.get(_owner_frame(model, path))
            if k is not None:
                for name, value in _scaled_wrap_object(comp, k, dtype).items():
                    scale(lambda m, p=path, n=name: getattr(m.find(p), n), value)
    for path, kind, i in wrapped:
        comp = model.find(path)
        if kind == "axis":
            k = f[_base_frame(model, comp.parent_frame, path)]
            axis = jnp.abs(jnp.asarray(comp.spatial_transform.axes[i].axis, dtype))
            factor = jnp.dot(axis, k)
            scale(
                lambda m, p=path, i=i: m.find(p).spatial_transform.axes[i].function.scale,
                jnp.asarray(comp.spatial_transform.axes[i].function.scale, dtype) * factor,
            )
        else:
            k = f[_base_frame(model, comp.parent_frame, path)]
            fn = getattr(comp, f"{'xyz'[i]}_location")
            scale(
                lambda m, p=path, n=f"{'xyz'[i]}_location": getattr(m.find(p), n).scale,
                jnp.asarray(fn.scale, dtype) * k[i],
            )
    if not nodes:
        return system
    scaled = eqx.tree_at(lambda s: [node(s.model) for node in nodes], system, values)
    if not muscle_lengths:
        return scaled

    # muscles and other path forces: by the change of their path's length at the default pose
    before, after = _path_lengths(system), _path_lengths(scaled)
    lengths, scaled_lengths = [], []
    for owner, length in before.items():
        comp = model.find(owner)
        ratio = jnp.where(length > 0.0, after[owner] / jnp.where(length > 0.0, length, 1.0), 1.0)
        for name in _path_scaled(comp):
            lengths.append(lambda m, p=owner, n=name: getattr(m.find(p), n))
            scaled_lengths.append(jnp.asarray(getattr(comp, name), dtype) * ratio)
    if not lengths:
        return scaled
    return eqx.tree_at(lambda s: [node(s.model) for node in lengths], scaled, scaled_lengths)


def _path_lengths(system) -> dict:
    """``{owner path: length}`` (m) of every geometry path at the default state."""
    from ..muscles.path import path_topology_of

    try:
        paths = path_topology_of(system.topology).paths
    except KeyError:
        return {}
    if not paths:
        return {}
    lengths = _default_lengths(system)
    return {p.rpartition("/")[0]: lengths[i] for i, p in enumerate(paths)}


@eqx.filter_jit
@full_precision
def _default_lengths(system):
    from ..forward import Context
    from ..muscles.path import path_geometry

    return path_geometry(Context(system, system.default_state())).length


def _scaled_wrap_object(comp, k, dtype) -> dict:
    """A wrap object's scaled properties (``scaling._scale_other``'s rules, traced)."""
    from .. import spatial
    from ..wrapping.objects import WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus

    R = spatial.xyz_body_rotation(jnp.asarray(comp.xyz_body_rotation, dtype))
    local = jnp.linalg.norm(R * k[None, :], axis=0)  # |R[:, j] * k| per column j
    out = {"translation": jnp.asarray(comp.translation, dtype) * k}
    if isinstance(comp, WrapCylinder):
        out["radius"] = jnp.asarray(comp.radius, dtype) * (local[0] + local[1]) * 0.5
        out["length"] = jnp.asarray(comp.length, dtype) * local[2]
    elif isinstance(comp, WrapEllipsoid):
        out["dimensions"] = jnp.asarray(comp.dimensions, dtype) * local
    elif isinstance(comp, WrapSphere):
        out["radius"] = jnp.asarray(comp.radius, dtype) * jnp.sum(k) / 3.0
    elif isinstance(comp, WrapTorus):
        avg = (local[0] + local[1]) * 0.5
        out["inner_radius"] = jnp.asarray(comp.inner_radius, dtype) * avg
        out["outer_radius"] = jnp.asarray(comp.outer_radius, dtype) * avg
    return out


def _function(comp, kind, i):
    if kind == "axis":
        return comp.spatial_transform.axes[i].function
    return getattr(comp, f"{'xyz'[i]}_location")
