"""OpenSim's ScaleTool: a generic model scaled to a subject.

- ``scale_factors(model, markers, ...)``: OpenSim's ``ModelScaler`` scale factors,
  one ``(sx, sy, sz)`` per physical frame: from marker-pair distances measured in a
  static trial (``Measurement``) and from manual factors (``ScaleSet``), applied in
  the ``scaling_order``.
- ``scale_model(model, factors, preserve_mass_distribution, mass)``: OpenSim's
  ``Model::scale``: bodies (mass center, mass, inertia), offset frames (joint
  frames), markers, path points, moving path points and CustomJoint translation
  functions (as ``MultiplierFunction``), wrap objects, and muscles' optimal fiber
  and tendon slack lengths (and path springs' and ligaments' resting lengths),
  scaled by the ratio of their path length after and before scaling, at the default
  pose.
- ``scale(model, markers, ...)``: both, as ``ModelScaler::processModel`` does.
- the ``ScaleTool`` setup runner (``simjax run SETUP.xml``): ``GenericModelMaker``
  (``model_file``, ``marker_set_file``) and ``ModelScaler``; writes
  ``output_model_file`` and ``output_scale_file``.

- ``place_markers(model, markers, ...)``: OpenSim's ``MarkerPlacer``: inverse
  kinematics on the static pose (``simjax.tools.kinematics``), then the
  non-fixed markers moved onto the experimental ones; writes the placed model, its
  marker set and the static pose (states file). As OpenSim 4.6, the coordinates'
  default values are not changed.

Not done: the MarkerPlacer's ``coordinate_file`` (``from_file`` coordinate tasks),
the scaling of attached geometry
(simjax keeps no display geometry), ``EllipsoidJoint`` radii and translational
``CoordinateCouplerConstraint`` functions.

Scale factors and model properties are plain numbers (NumPy): scaling edits a
model's properties once, before ``build``; it is not a traced computation.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import numpy as np

from ..component import ModelError
from ..compiling import full_precision
from ..functions import LinearFunction, MultiplierFunction
from ..io.osim._xml import parse
from ..io.tables import TimeSeriesTable, read_table
from ..mechanics.frames import Body, Marker, PhysicalFrame, PhysicalOffsetFrame, Station
from ..mechanics.joints import CustomJoint
from ..model import Model, resolve_path
from . import setup as _setup
from ..io.outputs import open_output

__all__ = [
    "Measurement",
    "PlacedMarkers",
    "place_markers",
    "scale",
    "scale_factors",
    "scale_model",
    "move_markers",
    "read_marker_set",
    "update_marker_set",
    "write_marker_set",
    "write_scale_set",
]

#: SimTK::Eps and SimTK::SignificantReal (double)
_EPS = float(np.finfo(float).eps)
_SIGNIFICANT = _EPS**0.875

_UNITS = {"m": 1.0, "meters": 1.0, "mm": 1e-3, "millimeters": 1e-3, "cm": 1e-2, "centimeters": 1e-2}


@dataclasses.dataclass
class Measurement:
    """One of OpenSim's ``ModelScaler`` measurements.

    **Fields:** ``name``; ``marker_pairs``: ``[(marker1, marker2), ...]``;
    ``body_scales``: ``{body name: axes}`` with axes a string such as ``"X Y Z"``;
    ``apply``.
    """

    name: str
    marker_pairs: Sequence[tuple[str, str]]
    body_scales: Mapping[str, str]
    apply: bool = True


# --------------------------------------------------------------------------------
# model helpers
# --------------------------------------------------------------------------------


def _model_of(model_or_system) -> Model:
    return model_or_system if isinstance(model_or_system, Model) else model_or_system.model


def _base_frame_path(model: Model, ref: str, relative_to: str = "/") -> str:
    """The path of the Body (or Ground) a frame reference ends on (OpenSim's
    ``findBaseFrame``)."""
    path = resolve_path(ref, relative_to)
    comp = model.find(path)
    while isinstance(comp, PhysicalOffsetFrame):
        path = resolve_path(comp.parent, path)
        comp = model.find(path)
    return path


def _base_frame(model: Model, ref: str, relative_to: str) -> str:
    """The name of the Body (or Ground) a frame reference ends on."""
    return model.find(_base_frame_path(model, ref, relative_to)).name


def _owner_frame(model: Model, path: str) -> str:
    """The name of the base frame of the nearest PhysicalFrame owning ``path``."""
    parts = path.rstrip("/").split("/")
    for k in range(len(parts) - 1, 0, -1):
        owner = "/".join(parts[:k]) or "/"
        if owner != "/" and isinstance(model.find(owner), PhysicalFrame):
            return _base_frame(model, owner, "/")
    raise ModelError(path, "has no PhysicalFrame owner")


def _model_markers(model: Model) -> dict[str, tuple[str, Marker]]:
    return {c.name: (p, c) for p, c in model.walk() if isinstance(c, Marker)}


def _frame_names(model: Model) -> list[str]:
    """The names of the model's physical frames, in tree order (OpenSim's
    ``getComponentList<PhysicalFrame>``)."""
    out = []
    for _, c in model.walk():
        if isinstance(c, PhysicalFrame) and c.name not in out:
            out.append(c.name)
    return out


def _geometry(system, state, frames: tuple):
    from ..forward import Context
    from ..muscles.path import path_geometry, path_topology_of

    ctx = Context(system, state)
    poses = [ctx.frame_transform(f) for f in frames]
    lengths = path_geometry(ctx).length if path_topology_of(system.topology).paths else None
    return poses, lengths


_geometry_jit = jax.jit(full_precision(_geometry), static_argnums=2)


def _default_geometry(model: Model, q=None):
    """At the model's default state (with ``q`` if given): poses in Ground
    ``{frame path: (R, p)}`` of every physical frame and ``{owner path: length}`` of
    every geometry path (m). One compiled program, reused for models of the same
    structure."""
    from ..muscles.path import path_topology_of

    system = model.build()
    state = system.default_state()
    if q is not None:
        state = eqx.tree_at(lambda st: st.q, state, jax.numpy.asarray(q, state.q.dtype))
    frames = tuple(p for p, c in model.walk() if isinstance(c, PhysicalFrame))
    poses, lengths = _geometry_jit(system, state, frames)
    paths = path_topology_of(system.topology).paths
    out_poses = {f: (np.asarray(R), np.asarray(p)) for f, (R, p) in zip(frames, poses)}
    out_lengths = {p.rpartition("/")[0]: float(v) for p, v in zip(paths, np.asarray(lengths))} if paths else {}
    return out_poses, out_lengths


# --------------------------------------------------------------------------------
# scale factors (ModelScaler)
# --------------------------------------------------------------------------------


def _marker_data(markers, units: str | None = None):
    """``(times, {name: (n, 3) in m})`` from a Vec3 TimeSeriesTable (with ``Units``
    metadata) or ``(times, {name: array})``."""
    if isinstance(markers, TimeSeriesTable):
        unit = (units or markers.metadata.get("Units", "m")).strip()
        factor = _UNITS.get(unit, _UNITS.get(unit.lower()))
        if factor is None:
            raise ValueError(f"marker data in unknown units {unit!r} (expected one of {sorted(_UNITS)})")
        values = markers.values
        if values.ndim == 2:
            values = values.reshape(values.shape[0], -1, 3)
            labels = markers.labels[::3]
        else:
            labels = markers.labels
        data = {name: values[:, i, :] * factor for i, name in enumerate(labels)}
        return np.asarray(markers.times), data
    times, data = markers
    return np.asarray(times, float), {k: np.asarray(v, float) for k, v in data.items()}


def _frame_range(times: np.ndarray, t0: float, t1: float) -> tuple[int, int]:
    """OpenSim's ``MarkerData::findFrameRange``: the last frame at or before ``t0``
    and the first one at or after ``t1`` from there (inclusive indices)."""
    if t0 > t1:
        raise ValueError(f"time_range start {t0} is past its end {t1}")
    n = len(times)
    start, end = 0, n - 1
    for i in range(n - 1, -1, -1):
        if times[i] <= t0:
            start = i
            break
    for i in range(start, n):
        if times[i] >= t1:
            end = i
            break
    return start, end


def scale_factors(
    model_or_system,
    markers=None,
    measurements: Sequence[Measurement] = (),
    scale_set: Mapping[str, Sequence[float]] | None = None,
    scaling_order: Sequence[str] = ("measurements",),
    time_range=(-np.inf, np.inf),
    warn=None,
) -> dict[str, np.ndarray]:
    """OpenSim's ``ModelScaler`` scale factors.

    **Arguments:**

    - ``model_or_system``: the generic ``Model`` (or a ``System`` of it), with its
      markers.
    - ``markers``: the static trial: a Vec3 ``TimeSeriesTable`` (its ``Units``
      metadata honoured: mm, cm or m) or ``(times (n,), {marker: (n, 3) m})``.
    - ``measurements``: ``Measurement``s; each one's factor is the mean over its
      marker pairs of (experimental distance averaged over ``time_range``) / (model
      distance at the default pose), set on the named axes of its bodies. A
      measurement naming a marker absent from the model or the data is not used
      (a warning, as OpenSim).
    - ``scale_set``: manual factors ``{body: (sx, sy, sz)}``.
    - ``scaling_order``: ``"measurements"`` and ``"manualScale"``, in order.
    - ``time_range``: ``(t0, t1)`` (s), frames chosen as OpenSim's
      ``MarkerData::findFrameRange``.
    - ``warn``: ``fn(message)`` for warnings (default ``warnings.warn``).

    **Returns:** ``{frame name: (3,) factors}`` for every physical frame (1 where
    nothing applies).
    """
    import warnings

    warn = warn or (lambda msg: warnings.warn(_setup.SetupWarning(msg), stacklevel=3))
    model = _model_of(model_or_system)
    factors = {name: np.ones(3) for name in _frame_names(model)}
    for step in scaling_order:
        if step == "measurements":
            used = [m for m in measurements if m.apply]
            if not used:
                continue
            if markers is None:
                raise ValueError("measurements are used but no marker data (marker_file) is given")
            times, data = _marker_data(markers)
            start, end = _frame_range(times, float(time_range[0]), float(time_range[1]))
            model_markers = _model_markers(model)
            poses = _default_geometry(model)[0]
            for m in used:
                value = _measurement_factor(m, model_markers, poses, data, start, end, warn)
                if np.isnan(value):
                    warn(f"'{m.name}' measurement not used to scale {model.name}")
                    continue
                for body, axes in m.body_scales.items():
                    if body not in factors:
                        continue
                    for ax in axes.split():
                        k = "xyz".find(ax.lower())
                        if k >= 0 and len(ax) == 1:
                            factors[body][k] = value
        elif step == "manualScale":
            for body, f in (scale_set or {}).items():
                if body in factors:
                    factors[body] = np.asarray(f, float).copy()
        else:
            raise ValueError(f"unrecognized scaling_order entry {step!r} (expecting 'measurements' or 'manualScale')")
    return factors


def _abs(ref: str, relative_to: str) -> str:
    return resolve_path(ref, relative_to)


def _measurement_factor(m: Measurement, model_markers, poses, data, start, end, warn) -> float:
    if not m.marker_pairs:
        return np.nan
    total = 0.0
    for a, b in m.marker_pairs:
        missing_model = [n for n in (a, b) if n not in model_markers]
        if missing_model:
            warn(f"Marker {missing_model[0]} in {m.name} measurement not found in the model.")
            return np.nan
        missing_data = [n for n in (a, b) if n not in data]
        if missing_data:
            for n in missing_data:
                warn(f"Marker {n} in {m.name} measurement not found in the marker data.")
            return np.nan
        (pa, ma), (pb, mb) = model_markers[a], model_markers[b]
        Ra, ta = poses[_abs(ma.parent_frame, pa)]
        Rb, tb = poses[_abs(mb.parent_frame, pb)]
        # b's location in a's frame (OpenSim's findLocationInFrame)
        pb_in_a = Ra.T @ (Rb @ np.asarray(mb.location, float) + tb - ta)
        model_length = float(np.linalg.norm(np.asarray(ma.location, float) - pb_in_a))
        d = data[b][start : end + 1] - data[a][start : end + 1]
        exp_length = float(np.sum(np.linalg.norm(d, axis=1)) / (end - start + 1))
        if np.isnan(model_length) or np.isnan(exp_length):
            return np.nan
        total += exp_length / model_length
    return total / len(m.marker_pairs)


# --------------------------------------------------------------------------------
# Model::scale
# --------------------------------------------------------------------------------


def _numerically_equal(a: float, b: float) -> bool:
    scale = max(abs(a), abs(b))
    return abs(a - b) <= (_SIGNIFICANT if scale < 1 else scale * _SIGNIFICANT)


def _scale_inertia(mass0: float, mass: float, inertia6: np.ndarray, f: np.ndarray, scale_mass: bool) -> np.ndarray:
    """OpenSim's ``Body::scaleInertialProperties`` on ``Ixx Iyy Izz Ixy Ixz Iyz``
    (``mass0`` before and ``mass`` after the mass was scaled)."""
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = (float(v) for v in inertia6)
    I = np.array([[Ixx, Ixy, Ixz], [Ixy, Iyy, Iyz], [Ixz, Iyz, Izz]])
    mass_factor = abs(f[0] * f[1] * f[2])
    if mass <= _EPS:
        I = I * 0.0
    elif _numerically_equal(f[0], f[1]) and _numerically_equal(f[1], f[2]):
        if scale_mass:
            I = I * mass_factor
        I = I * (f[0] * f[0])
    else:
        d = np.diag(I)
        if d[0] <= d[1]:
            axis = 0 if d[0] <= d[2] else 2
        elif d[1] <= d[2]:
            axis = 1
        else:
            axis = 2
        term = 2.0 * I[axis, axis] / mass0
        radius = np.sqrt(term) if term >= 0.0 else 0.0
        oa = 1 if axis == 0 else 0
        term = 12.0 * (I[oa, oa] - 0.25 * mass0 * radius * radius) / mass0
        length = np.sqrt(term) if term >= 0.0 else 0.0
        length *= f[axis]
        others = [k for k in range(3) if k != axis]
        rad_sqr = radius * f[others[0]] * radius * f[others[1]]
        side = mass * ((length * length / 12.0) + 0.25 * rad_sqr)
        for k in range(3):
            I[k, k] = 0.5 * mass * rad_sqr if k == axis else side
        for i in range(3):
            for j in range(3):
                if i != j:
                    I[i, j] *= f[i] * f[j]
                    if scale_mass:
                        I[i, j] *= mass_factor
    return np.array([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]])


def _scaled_functions(model: Model, factors) -> list[tuple[str, str, int]]:
    """``(path, kind, index)`` of the functions ``scale_model`` multiplies: CustomJoint
    translation functions (``kind="axis"``, index 3..5; not identity
    ``LinearFunction``s, which are degrees of freedom) and the coordinate-driven
    functions of MovingPathPoints (``kind="point"``, index 0..2); ``factors=None``:
    all of them."""
    from ..muscles.path import MovingPathPoint

    out = []
    for path, comp in model.walk():
        if isinstance(comp, CustomJoint):
            if factors is not None and _base_frame(model, comp.parent_frame, path) not in factors:
                continue
            for i in range(3, 6):
                fn = comp.spatial_transform.axes[i].function
                if fn is None or (
                    isinstance(fn, LinearFunction)
                    and float(fn.coefficients[0]) == 1.0
                    and float(fn.coefficients[1]) == 0.0
                ):
                    continue
                out.append((path, "axis", i))
        elif isinstance(comp, MovingPathPoint):
            if factors is not None and _base_frame(model, comp.parent_frame, path) not in factors:
                continue
            for k, axis in enumerate("xyz"):
                if getattr(comp, f"{axis}_coordinate") and getattr(comp, f"{axis}_location") is not None:
                    out.append((path, "point", k))
    return out


def _prewrap(model: Model, factors=None) -> Model:
    """The functions ``scale_model`` will multiply wrapped in
    ``MultiplierFunction(scale=1)`` (as OpenSim does when it scales them): the model
    computes the same, and keeps its structure when scaled (so the default-pose
    geometry compiles once)."""
    for path, kind, i in _scaled_functions(model, factors):
        comp = model.find(path)
        if kind == "axis":
            ax = comp.spatial_transform.axes[i]
            if isinstance(ax.function, MultiplierFunction):
                continue
            axes = list(comp.spatial_transform.axes)
            axes[i] = eqx.tree_at(lambda a: a.function, ax, MultiplierFunction(function=ax.function, scale=1.0))
            st = eqx.tree_at(lambda s: s.axes, comp.spatial_transform, tuple(axes))
            model = model.update(path, lambda c, st=st: c.replace(spatial_transform=st))
        else:
            name = f"{'xyz'[i]}_location"
            fn = getattr(comp, name)
            if not isinstance(fn, MultiplierFunction):
                model = model.update(
                    path, lambda c, n=name, fn=fn: c.replace(**{n: MultiplierFunction(function=fn, scale=1.0)})
                )
    return model


def _multiplied(function, factor: float):
    if isinstance(function, MultiplierFunction):
        return function.__class__(function=function.function, scale=float(function.scale) * factor)
    return MultiplierFunction(function=function, scale=factor)


def _path_scaled(comp) -> tuple[str, ...]:
    from ..forces.path_forces import Ligament, PathSpring
    from ..muscles import Muscle, RigidTendonMuscle

    if isinstance(comp, (PathSpring, Ligament)):
        return ("resting_length",)
    if isinstance(comp, Muscle) and not isinstance(comp, RigidTendonMuscle):
        return ("optimal_fiber_length", "tendon_slack_length")
    return ()


def scale_model(
    model_or_system,
    factors: Mapping[str, Sequence[float]],
    preserve_mass_distribution: bool = False,
    mass: float = -1.0,
) -> Model:
    """OpenSim's ``Model::scale``: a new model scaled by ``factors``.

    **Arguments:**

    - ``model_or_system``: the ``Model`` (or a ``System`` of it).
    - ``factors``: ``{body or frame name: (sx, sy, sz)}``; a component is scaled by
      the factors of the body its frame is fixed to (none if absent).
    - ``preserve_mass_distribution``: if false, each body's mass is first scaled by
      ``|sx sy sz|``; its inertia is scaled as OpenSim does (uniform factors: by
      the square; otherwise as a cylinder about its smallest moment).
    - ``mass``: the subject's total mass (kg); when positive, every body's mass and
      inertia are then scaled by one factor so the model's mass equals it.

    **Returns:** the scaled ``Model``. Muscles' ``optimal_fiber_length`` and
    ``tendon_slack_length`` (and path springs' and ligaments' ``resting_length``)
    are scaled by their path's length after / before scaling at the default pose.
    """
    model = _model_of(model_or_system)
    factors = {k: np.asarray(v, float) for k, v in factors.items()}
    model = _prewrap(model, factors)
    has_paths = any(_path_scaled(c) for _, c in model.walk())
    before = _default_geometry(model)[1] if has_paths else {}

    edits = []
    for path, comp in model.walk():
        changes = {}
        if isinstance(comp, Body):
            f = factors.get(comp.name)
            if f is not None:
                changes["mass_center"] = np.asarray(comp.mass_center, float) * f
        elif isinstance(comp, PhysicalOffsetFrame):
            f = factors.get(_base_frame(model, comp.parent, path))
            if f is not None:
                changes["translation"] = np.asarray(comp.translation, float) * f
        elif isinstance(comp, Station):
            f = factors.get(_base_frame(model, comp.parent_frame, path))
            if f is not None:
                changes["location"] = np.asarray(comp.location, float) * f
        elif isinstance(comp, CustomJoint):
            f = factors.get(_base_frame(model, comp.parent_frame, path))
            if f is not None:
                axes = list(comp.spatial_transform.axes)
                for i in range(3, 6):
                    ax = axes[i]
                    fn = ax.function
                    if fn is None:
                        continue
                    if (
                        isinstance(fn, LinearFunction)
                        and float(fn.coefficients[0]) == 1.0
                        and float(fn.coefficients[1]) == 0.0
                    ):
                        continue
                    k = float(np.abs(np.asarray(ax.axis, float)) @ f)
                    axes[i] = eqx.tree_at(lambda a: a.function, ax, _multiplied(fn, k))
                changes["spatial_transform"] = eqx.tree_at(lambda s: s.axes, comp.spatial_transform, tuple(axes))
        else:
            changes = _scale_other(model, path, comp, factors)
        if changes:
            edits.append((path, changes))
    for path, changes in edits:
        model = model.update(path, lambda c, ch=changes: c.replace(**ch))

    # inertial properties, then the subject's mass
    bodies = [(p, c) for p, c in model.walk() if isinstance(c, Body)]
    for path, body in bodies:
        f = factors.get(body.name)
        if f is None:
            continue
        m0 = float(body.mass)
        m = m0 * abs(f[0] * f[1] * f[2]) if not preserve_mass_distribution else m0
        inertia = _scale_inertia(m0, m, np.asarray(body.inertia, float), f, not preserve_mass_distribution)
        model = model.update(path, lambda c, m=m, i=inertia: c.replace(mass=m, inertia=i))
    if mass is not None and mass > 0.0:
        total = sum(float(c.mass) for _, c in model.walk() if isinstance(c, Body))
        if total > 0.0:
            k = mass / total
            for path, body in [(p, c) for p, c in model.walk() if isinstance(c, Body)]:
                model = model.update(
                    path, lambda c, k=k: c.replace(mass=float(c.mass) * k, inertia=np.asarray(c.inertia, float) * k)
                )

    # muscles and other path forces: by the change of their path length
    after = _default_geometry(model)[1] if before else {}
    for owner, l0 in before.items():
        comp = model.find(owner)
        names = _path_scaled(comp)
        if names and l0 > 0.0:
            k = after[owner] / l0
            model = model.update(
                owner, lambda c, k=k, names=names: c.replace(**{n: float(getattr(c, n)) * k for n in names})
            )
    return model


def _scale_other(model: Model, path: str, comp, factors) -> dict:
    """Path points, moving path points and wrap objects."""
    from ..muscles.path import MovingPathPoint, PathPoint
    from ..wrapping.objects import WrapCylinder, WrapEllipsoid, WrapObject, WrapSphere, WrapTorus
    from .. import spatial

    if isinstance(comp, PathPoint):
        f = factors.get(_base_frame(model, comp.parent_frame, path))
        return {} if f is None else {"location": np.asarray(comp.location, float) * f}
    if isinstance(comp, MovingPathPoint):
        f = factors.get(_base_frame(model, comp.parent_frame, path))
        if f is None:
            return {}
        out = {}
        for k, axis in enumerate("xyz"):
            fn = getattr(comp, f"{axis}_location")
            if getattr(comp, f"{axis}_coordinate") and fn is not None:
                out[f"{axis}_location"] = _multiplied(fn, float(f[k]))
        return out
    if isinstance(comp, WrapObject):
        f = factors.get(_owner_frame(model, path))
        if f is None:
            return {}
        out = {"translation": np.asarray(comp.translation, float) * f}
        R = np.asarray(spatial.xyz_body_rotation(np.asarray(comp.xyz_body_rotation, float)))
        local = [np.linalg.norm(R[:, k] * f) for k in range(3)]
        if isinstance(comp, WrapCylinder):
            out["radius"] = float(comp.radius) * (local[0] + local[1]) * 0.5
            out["length"] = float(comp.length) * local[2]
        elif isinstance(comp, WrapEllipsoid):
            out["dimensions"] = np.asarray(comp.dimensions, float) * np.asarray(local)
        elif isinstance(comp, WrapSphere):
            out["radius"] = float(comp.radius) * (f.sum() / 3.0)
        elif isinstance(comp, WrapTorus):
            avg = (local[0] + local[1]) * 0.5
            out["inner_radius"] = float(comp.inner_radius) * avg
            out["outer_radius"] = float(comp.outer_radius) * avg
        return out
    return {}


def scale(
    model_or_system,
    markers=None,
    *,
    measurements: Sequence[Measurement] = (),
    scale_set: Mapping[str, Sequence[float]] | None = None,
    scaling_order: Sequence[str] = ("measurements",),
    time_range=(-np.inf, np.inf),
    preserve_mass_distribution: bool = False,
    mass: float = -1.0,
    return_factors: bool = False,
    warn=None,
):
    """OpenSim's ``ModelScaler``: scale factors from a static trial and manual
    factors, then the model scaled by them.

    **Arguments:** as ``scale_factors`` (``model_or_system``, ``markers``,
    ``measurements``, ``scale_set``, ``scaling_order``, ``time_range``) and
    ``scale_model`` (``preserve_mass_distribution``, ``mass`` in kg: the subject's
    mass, ignored unless positive); ``return_factors``: also return the factors.

    **Returns:** the scaled ``Model`` (and ``{frame name: (3,) factors}`` if
    ``return_factors``).
    """
    model = _prewrap(_model_of(model_or_system))
    factors = scale_factors(model, markers, measurements, scale_set, scaling_order, time_range, warn)
    model = scale_model(model, factors, preserve_mass_distribution, mass)
    return (model, factors) if return_factors else model


# --------------------------------------------------------------------------------
# MarkerPlacer
# --------------------------------------------------------------------------------


@dataclasses.dataclass
class PlacedMarkers:
    """What ``place_markers`` returns.

    **Fields:** ``model`` (markers moved; coordinates' default values unchanged, as
    OpenSim 4.6 writes them); ``q`` (the static pose, ``(nq,)``); ``time`` (s, the
    start of the time range); ``ik`` (the ``IKResult`` of the one-frame solve).
    """

    model: Model
    q: np.ndarray
    time: float
    ik: object


def place_markers(
    model_or_system,
    markers: TimeSeriesTable,
    *,
    marker_weights: Mapping[str, float] | None = None,
    coordinate_tasks: Mapping | None = None,
    time_range=(-np.inf, np.inf),
    move_model_markers: bool = True,
    warn=None,
) -> PlacedMarkers:
    """OpenSim's ``MarkerPlacer``: inverse kinematics on the static pose, then the
    model's markers moved onto the experimental ones.

    **Arguments:**

    - ``model_or_system``: the (scaled) ``Model`` or a ``System`` of it.
    - ``markers``: the static trial (Vec3 ``TimeSeriesTable``; ``Units`` honoured).
    - ``marker_weights``, ``coordinate_tasks``: the IK tasks, as
      ``simjax.tools.kinematics.inverse_kinematics`` takes them.
    - ``time_range``: ``(t0, t1)`` s, clamped to the data; the IK tracks the mean of
      the rows inside it, and markers are moved to the mean over the frames
      ``MarkerData::findFrameRange`` picks (missing values left out), as OpenSim.
    - ``move_model_markers``: move the non-fixed markers (OpenSim's default).
    - ``warn``: ``fn(message)`` for warnings.

    **Returns:** a ``PlacedMarkers``. Model markers absent from the data are deleted
    (OpenSim's ``deleteUnusedMarkers``).

    Uses ``simjax.tools.kinematics`` for the one-frame solve.
    """
    import warnings

    from .kinematics import inverse_kinematics

    warn = warn or (lambda msg: warnings.warn(_setup.SetupWarning(msg), stacklevel=3))
    model = _model_of(model_or_system)
    if not markers.is_vec3:
        markers = markers.pack(3)
    times, data = _marker_data(markers)
    t0 = max(float(time_range[0]), float(times[0]))
    t1 = min(float(time_range[1]), float(times[-1]))
    inside = (times >= t0) & (times <= t1)
    avg_row = {k: v[inside].sum(0) / inside.sum() for k, v in data.items()}
    start, end = _frame_range(times, t0, t1)
    pose = {}
    for k, v in data.items():
        rows = v[start : end + 1]
        ok = ~np.isnan(rows).any(axis=1)
        pose[k] = rows[ok].sum(0) / ok.sum() if ok.any() else np.full(3, np.nan)

    # deleteUnusedMarkers
    for name, (path, _) in _model_markers(model).items():
        if name not in data:
            model = model.remove(path)

    labels = list(data)
    table = TimeSeriesTable([t0], np.stack([avg_row[k] for k in labels])[None], labels, {"Units": "m"})
    system = model.build()
    ik = inverse_kinematics(
        system,
        table,
        marker_weights=None if marker_weights is None else dict(marker_weights),
        coordinate_tasks=dict(coordinate_tasks or {}),
    )
    q = np.asarray(ik.q[0])
    if move_model_markers:
        model = move_markers(model, q, pose, warn)
    return PlacedMarkers(model, q, t0, ik)


def move_markers(model: Model, q, locations: Mapping[str, np.ndarray], warn=None) -> Model:
    """OpenSim's ``MarkerPlacer::moveModelMarkersToPose``: each non-fixed marker
    with a location in ``locations`` (``{name: (3,)}`` in Ground, m) moved there,
    with the model at the pose ``q`` (the other state values default).

    **Returns:** the new ``Model``. A NaN location leaves its marker (a warning).
    """
    import warnings

    warn = warn or (lambda msg: warnings.warn(_setup.SetupWarning(msg), stacklevel=3))
    poses = _default_geometry(model, q)[0]
    for name, (path, mk) in _model_markers(model).items():
        if mk.fixed or name not in locations:
            continue
        x = np.asarray(locations[name], float)
        if np.isnan(x).any():
            warn(
                f"Marker {name} does not have valid coordinates in the marker data. It will not be moved "
                f"to match location in marker file."
            )
            continue
        R, p = poses[_abs(mk.parent_frame, path)]
        model = model.update(path, lambda c, loc=R.T @ (x - p): c.replace(location=loc))
    return model


def write_marker_set(model: Model, path: str | os.PathLike) -> None:
    """Write the model's markers as an OpenSim ``MarkerSet`` file."""
    from ..io.osim.registry import format_numbers

    lines = [
        '<?xml version="1.0" encoding="UTF-8" ?>',
        '<OpenSimDocument Version="40600">',
        '\t<MarkerSet name="markerset">',
        "\t\t<objects>",
    ]
    for name, (_, mk) in _model_markers(model).items():
        lines += [
            f'\t\t\t<Marker name="{name}">',
            f"\t\t\t\t<socket_parent_frame>{mk.parent_frame}</socket_parent_frame>",
            f"\t\t\t\t<location>{format_numbers(np.asarray(mk.location, float))}</location>",
            f"\t\t\t\t<fixed>{'true' if mk.fixed else 'false'}</fixed>",
            "\t\t\t</Marker>",
        ]
    lines += ["\t\t</objects>", "\t\t<groups />", "\t</MarkerSet>", "</OpenSimDocument>", ""]
    with open_output(path, "w") as fh:
        fh.write("\n".join(lines))


def _ik_tasks(mp: _setup.Setup):
    """``(marker weights or None, coordinate tasks)`` of a MarkerPlacer's IKTaskSet."""
    weights, coords = {}, {}
    for task in _objects(mp.element("IKTaskSet"), "IKMarkerTask") + _objects(
        mp.element("IKTaskSet"), "IKCoordinateTask"
    ):
        apply = task.find("apply")
        if apply is not None and apply.text.strip().lower() == "false":
            continue
        w = task.find("weight")
        weight = float(w.text) if w is not None and w.text.strip() else 1.0
        name = task.attrib.get("name", "")
        if task.tag == "IKMarkerTask":
            weights[name] = weight
        else:
            kind = task.find("value_type")
            kind = kind.text.strip() if kind is not None and kind.text.strip() else "default_value"
            value = task.find("value")
            if kind == "manual_value":
                coords[name] = (weight, float(value.text) if value is not None else 0.0)
            elif kind == "default_value":
                coords[name] = (weight, None)
            else:
                mp.warn(
                    f"IKCoordinateTask {name!r}: value_type {kind!r} is not supported by simjax's "
                    f"MarkerPlacer; task ignored"
                )
    return (weights or None), coords


# --------------------------------------------------------------------------------
# marker sets and scale sets (files)
# --------------------------------------------------------------------------------


def read_marker_set(path: str | os.PathLike) -> list[Marker]:
    """The markers of an OpenSim ``MarkerSet`` file.

    **Returns:** ``Marker``s (``parent_frame`` as the file gives it).
    """
    with open(path, "rb") as fh:
        root = parse(fh.read())
    out = []

    def rec(node):
        if node.tag == "Marker":
            frame = node.find("socket_parent_frame")
            if frame is None:
                frame = node.find("body")
            loc = node.find("location")
            fixed = node.find("fixed")
            ref = frame.text.strip() if frame is not None else "/ground"
            if ref and not ref.startswith("/") and "/" not in ref:
                ref = "/ground" if ref == "ground" else f"/bodyset/{ref}"
            out.append(
                Marker(
                    node.attrib["name"],
                    ref,
                    [float(w) for w in loc.text.split()] if loc is not None else (0.0, 0.0, 0.0),
                    fixed=fixed is not None and fixed.text.strip().lower() == "true",
                )
            )
            return
        for c in node.children:
            rec(c)

    rec(root)
    return out


def update_marker_set(model: Model, markers: Sequence[Marker]) -> Model:
    """OpenSim's ``Model::updateMarkerSet``: markers of the same name replaced, the
    others added."""
    existing = _model_markers(model)
    for mk in markers:
        if mk.name in existing:
            path = existing[mk.name][0]
            model = model.update(
                path, lambda c, mk=mk: c.replace(parent_frame=mk.parent_frame, location=mk.location, fixed=mk.fixed)
            )
        else:
            model = model.add(mk)
    return model


def write_scale_set(factors: Mapping[str, Sequence[float]], path: str | os.PathLike) -> None:
    """Write ``{segment: factors}`` as an OpenSim ``ScaleSet`` file."""
    from ..io.osim.registry import format_numbers

    lines = [
        '<?xml version="1.0" encoding="UTF-8" ?>',
        '<OpenSimDocument Version="40600">',
        "\t<ScaleSet>",
        "\t\t<objects>",
    ]
    for name, f in factors.items():
        lines += [
            "\t\t\t<Scale>",
            f"\t\t\t\t<scales> {format_numbers(np.asarray(f, float))}</scales>",
            f"\t\t\t\t<segment>{name}</segment>",
            "\t\t\t\t<apply>true</apply>",
            "\t\t\t</Scale>",
        ]
    lines += ["\t\t</objects>", "\t\t<groups />", "\t</ScaleSet>", "</OpenSimDocument>", ""]
    with open_output(path, "w") as fh:
        fh.write("\n".join(lines))


# --------------------------------------------------------------------------------
# the setup runner
# --------------------------------------------------------------------------------


def _sub(setup: _setup.Setup, tag: str) -> _setup.Setup | None:
    node = setup.element(tag)
    return None if node is None else _setup.Setup(setup.file, tag, node.attrib.get("name", ""), node)


def _measurements(node) -> list[Measurement]:
    out = []
    if node is None:
        return out

    def rec(n):
        if n.tag == "Measurement":
            apply = n.find("apply")
            pairs, bodies = [], {}
            mps = n.find("MarkerPairSet")
            for mp in _objects(mps, "MarkerPair"):
                names = mp.find("markers").text.split()
                if len(names) == 2:
                    pairs.append((names[0], names[1]))
            for bs in _objects(n.find("BodyScaleSet"), "BodyScale"):
                axes = bs.find("axes")
                bodies[bs.attrib.get("name", "")] = axes.text if axes is not None else ""
            out.append(
                Measurement(
                    n.attrib.get("name", ""), pairs, bodies, apply is None or apply.text.strip().lower() != "false"
                )
            )
            return
        for c in n.children:
            rec(c)

    rec(node)
    return out


def _objects(node, tag):
    if node is None:
        return []
    found = []

    def rec(n):
        for c in n.children:
            if c.tag == tag:
                found.append(c)
            else:
                rec(c)

    rec(node)
    return found


def _scale_set(node) -> dict[str, np.ndarray]:
    out = {}
    for sc in _objects(node, "Scale"):
        apply = sc.find("apply")
        if apply is not None and apply.text.strip().lower() == "false":
            continue
        out[sc.find("segment").text.strip()] = np.asarray([float(w) for w in sc.find("scales").text.split()])
    return out


def _run(setup: _setup.Setup) -> dict:
    """Run a ``ScaleTool`` setup: ``GenericModelMaker`` then ``ModelScaler``.

    **Returns:** ``{"model": path, "scale_set": path}`` of the files written.
    """
    from ..io.osim import load_osim, save_osim

    written = {}
    mass = setup.number("mass", -1.0)
    for p in ("height", "age", "notes"):
        setup.element(p)
    gmm = _sub(setup, "GenericModelMaker")
    if gmm is None or not gmm.text("model_file"):
        raise setup.error("GenericModelMaker", "", "no model_file given")
    model_path = gmm.path("model_file", must_exist=True)
    model = load_osim(model_path)
    marker_set = gmm.path("marker_set_file", must_exist=True)
    if marker_set:
        model = update_marker_set(model, read_marker_set(marker_set))
    gmm.report_unused()

    ms = _sub(setup, "ModelScaler")
    if ms is not None and ms.flag("apply", True):
        order = ms.words("scaling_order") or ["measurements"]
        measurements = _measurements(ms.element("MeasurementSet"))
        manual = _scale_set(ms.element("ScaleSet"))
        marker_file = ms.path("marker_file", must_exist=any(m.apply for m in measurements) and "measurements" in order)
        markers = read_table(marker_file) if marker_file else None
        rng = ms.numbers("time_range")
        if rng is None or rng.size < 2:
            if "measurements" in order and any(m.apply for m in measurements):
                raise ms.error("time_range", ms.text("time_range"), "time_range is unspecified")
            rng = np.array([-np.inf, np.inf])
        try:
            model, factors = scale(
                model,
                markers,
                measurements=measurements,
                scale_set=manual,
                scaling_order=order,
                time_range=rng[:2],
                preserve_mass_distribution=ms.flag("preserve_mass_distribution", False),
                mass=mass,
                return_factors=True,
                warn=ms.warn,
            )
        except ValueError as e:
            raise ms.error("scaling_order", " ".join(order), str(e)) from None
        out_model = ms.path("output_model_file")
        if out_model:
            save_osim(model, out_model)
            written["model"] = out_model
        out_scale = ms.path("output_scale_file")
        if out_scale:
            write_scale_set(factors, out_scale)
            written["scale_set"] = out_scale
        ms.report_unused()
    else:
        setup.warn("Scaling parameters disabled (apply is false) or not set. Model is not scaled.")
    mp = _sub(setup, "MarkerPlacer")
    if mp is not None and mp.flag("apply", False):
        written.update(_place(mp, model))
    elif mp is not None:
        for p in mp.node.children:
            mp.used.add(p.tag)
    setup.report_unused()
    return written


def _place(mp: _setup.Setup, model: Model) -> dict:
    """The MarkerPlacer step of a ScaleTool setup."""
    from ..io.osim import save_osim
    from ..io.states import write_states

    written = {}
    marker_file = mp.path("marker_file", must_exist=True)
    if marker_file is None:
        raise mp.error("marker_file", "", "no static pose marker file given")
    rng = mp.numbers("time_range")
    if rng is None or rng.size < 2:
        raise mp.error("time_range", mp.text("time_range"), "time_range is unspecified")
    if mp.text("coordinate_file"):
        mp.warn("<coordinate_file> is not supported by simjax's MarkerPlacer (ignored)")
    weights, coords = _ik_tasks(mp)
    mp.element("max_marker_movement")  # only OpenSim's log uses it
    placed = place_markers(
        model,
        read_table(marker_file),
        marker_weights=weights,
        coordinate_tasks=coords,
        time_range=rng[:2],
        move_model_markers=mp.flag("move_model_markers", True),
        warn=mp.warn,
    )
    out = mp.path("output_model_file")
    if out:
        save_osim(placed.model, out)
        written["placed_model"] = out
    out = mp.path("output_marker_file")
    if out:
        write_marker_set(placed.model, out)
        written["marker_set"] = out
    out = mp.path("output_motion_file")
    if out:
        system = placed.model.build()
        state = system.default_state()
        state = eqx.tree_at(
            lambda st: (st.t, st.q),
            state,
            (jax.numpy.asarray(placed.time, state.t.dtype), jax.numpy.asarray(placed.q, state.q.dtype)),
        )
        write_states(system, state, out, name="static pose")
        written["motion"] = out
    mp.report_unused()
    return written


_setup.register_tool("ScaleTool", _run)
