"""``.osim`` registrations of geometry paths, path actuators and muscles (see
``simjax.io.osim.registry`` for the mapping rules).

Importing this module registers: PathPoint, ConditionalPathPoint, MovingPathPoint,
GeometryPath, PathActuator, PathSpring, Ligament, Millard2012EquilibriumMuscle, Thelen2003Muscle,
DeGrooteFregly2016Muscle, RigidTendonMuscle and Schutte1993Muscle_Deprecated.

Mapping details:

- a GeometryPath's ``<PathPointSet><objects>`` are its ``points`` and its
  ``<PathWrapSet><objects>`` its ``wraps`` (PathWrap components, read when the
  wrapping engine registers them); ``<Appearance>`` and ``<default_color>`` are kept
  verbatim;
- the path of an actuator is the element ``<GeometryPath name="...">``; whatever
  its name attribute (files say ``geometrypath``), OpenSim 4.6 calls the component
  ``path`` and so does simjax (``/forceset/biceps/path``);
- Millard's curves are the elements ``<ActiveForceLengthCurve>``,
  ``<ForceVelocityCurve>``, ``<FiberForceLengthCurve>`` and
  ``<TendonForceLengthCurve>`` (their ``name`` attributes are OpenSim's generated
  ``<muscle>_<Curve>`` and are regenerated on writing).
"""

from __future__ import annotations

import dataclasses

from ...forces.path_forces import Ligament, PathSpring
from ...muscles import curves as C
from ...muscles.degroote import DeGrooteFregly2016Muscle
from ...muscles.millard import Millard2012EquilibriumMuscle
from ...muscles.path import ConditionalPathPoint, GeometryPath, MovingPathPoint, PathActuator, PathPoint
from ...muscles.rigid_tendon import RigidTendonMuscle
from ...muscles.schutte import Schutte1993Muscle_Deprecated
from ...muscles.thelen import Thelen2003Muscle
from ._xml import Node
from .registry import format_numbers, register, write_component

__all__ = []

# -- path points and paths ------------------------------------------------------------------

register("PathPoint", PathPoint, order=("components", "socket_parent_frame", "location"))
register(
    "ConditionalPathPoint",
    ConditionalPathPoint,
    order=("components", "socket_parent_frame", "location", "socket_coordinate", "range"),
)
register(
    "MovingPathPoint",
    MovingPathPoint,
    order=(
        "components",
        "socket_parent_frame",
        "socket_x_coordinate",
        "socket_y_coordinate",
        "socket_z_coordinate",
        "x_location",
        "y_location",
        "z_location",
    ),
)


def _set_reader(field: str, tag: str, skippable: bool):
    def read(io, node, rc, path):
        return {field: rc.read_set(node, path, skippable)}

    return read


def _set_writer(field: str, tag: str):
    def write(io, comp, wc, path):
        node = Node(tag)
        objects = node.append(Node("objects"))
        for c in getattr(comp, field):
            n = write_component(c, wc, f"{path}/{c.name}")
            if n is not None:
                objects.append(n)
        node.append(Node("groups"))
        return [node]

    return write


def _read_default_color(io, node, rc, path):
    return {"default_color": tuple(float(v) for v in rc.numbers(node, path, 3))}


def _write_default_color(io, comp, wc, path):
    return []  # OpenSim 4 writes the color inside <Appearance>, kept in extras


register(
    "GeometryPath",
    GeometryPath,
    order=("components", "PathPointSet", "PathWrapSet", "Appearance", "default_color"),
    read_hooks={
        "PathPointSet": _set_reader("points", "PathPointSet", False),
        # a path without its wraps is still a path: strict=False may drop them
        "PathWrapSet": _set_reader("wraps", "PathWrapSet", True),
        "default_color": _read_default_color,
    },
    write_hooks={
        "PathPointSet": _set_writer("points", "PathPointSet"),
        "PathWrapSet": _set_writer("wraps", "PathWrapSet"),
    },
    keep={"Appearance": True},
    skip_fields=("points", "wraps", "default_color"),
    skippable=False,
)


def _read_path(io, node, rc, path):
    renamed = Node(node.tag, {**node.attrib, "name": "path"}, node.text, node.children, node.line)
    comp = rc.read_component(renamed, path, io.skippable)
    return {"path": comp} if comp is not None else {}


def _write_path(io, comp, wc, path):
    n = write_component(comp.path, wc, f"{path}/{comp.path.name}")
    return [] if n is None else [n]


_PATH_HOOKS = {"read_hooks": {"GeometryPath": _read_path}, "write_hooks": {"GeometryPath": _write_path}}
_ACT = ("components", "appliesForce", "min_control", "max_control", "GeometryPath", "optimal_force")

register("PathActuator", PathActuator, order=_ACT, skip_fields=("path",), skippable=False, **_PATH_HOOKS)

# -- muscles -------------------------------------------------------------------------------------

_MUSCLE = _ACT + (
    "max_isometric_force",
    "optimal_fiber_length",
    "tendon_slack_length",
    "pennation_angle_at_optimal",
    "max_contraction_velocity",
    "ignore_tendon_compliance",
    "ignore_activation_dynamics",
)
_CURVES = {
    "ActiveForceLengthCurve": C.ActiveForceLengthCurve,
    "ForceVelocityCurve": C.ForceVelocityCurve,
    "FiberForceLengthCurve": C.FiberForceLengthCurve,
    "TendonForceLengthCurve": C.TendonForceLengthCurve,
}


def _curve_reader(tag: str, cls: type):
    names = {f.name for f in dataclasses.fields(cls)}

    def read(io, node, rc, path):
        values = {}
        for c in node.children:
            if c.tag not in names:
                rc.unsupported_content(c, f"<{c.tag}>", f"{path}/{tag}", f"unknown property of {tag}")
                continue
            if c.text.strip():  # an empty optional property means 'not set'
                values[c.tag] = rc.number(c, f"{path}/{tag}", prop=c.tag)
        try:
            return {tag: cls(**values)}
        except ValueError as e:
            raise rc.error(node, path, str(e), prop=tag) from None

    return read


def _curve_writer(tag: str):
    def write(io, comp, wc, path):
        curve = getattr(comp, tag)
        node = Node(tag, {"name": f"{comp.name}_{tag}"})
        for f in dataclasses.fields(curve):
            value = getattr(curve, f.name)
            if value is not None:
                node.append(Node(f.name, text=format_numbers(value)))
        return [node]

    return write


_MILLARD_HOOKS = {
    "read_hooks": {"GeometryPath": _read_path, **{t: _curve_reader(t, c) for t, c in _CURVES.items()}},
    "write_hooks": {"GeometryPath": _write_path, **{t: _curve_writer(t) for t in _CURVES}},
}
register(
    "Millard2012EquilibriumMuscle",
    Millard2012EquilibriumMuscle,
    order=_MUSCLE
    + (
        "fiber_damping",
        "default_activation",
        "default_fiber_length",
        "activation_time_constant",
        "deactivation_time_constant",
        "minimum_activation",
        "maximum_pennation_angle",
    )
    + tuple(_CURVES),
    skip_fields=("path",) + tuple(_CURVES),
    skippable=False,
    **_MILLARD_HOOKS,
)
register(
    "Thelen2003Muscle",
    Thelen2003Muscle,
    order=_MUSCLE
    + (
        "default_activation",
        "default_fiber_length",
        "FmaxTendonStrain",
        "FmaxMuscleStrain",
        "KshapeActive",
        "KshapePassive",
        "Af",
        "Flen",
        "fv_linear_extrap_threshold",
        "maximum_pennation_angle",
        "activation_time_constant",
        "deactivation_time_constant",
        "minimum_activation",
    ),
    skip_fields=("path",),
    skippable=False,
    **_PATH_HOOKS,
)
register(
    "DeGrooteFregly2016Muscle",
    DeGrooteFregly2016Muscle,
    order=_MUSCLE
    + (
        "activation_time_constant",
        "deactivation_time_constant",
        "default_activation",
        "default_normalized_tendon_force",
        "active_force_width_scale",
        "fiber_damping",
        "passive_fiber_strain_at_one_norm_force",
        "tendon_strain_at_one_norm_force",
        "ignore_passive_fiber_force",
        "tendon_compliance_dynamics_mode",
        "activation_dynamics_smoothing",
    ),
    skip_fields=("path",),
    skippable=False,
    **_PATH_HOOKS,
)
register(
    "RigidTendonMuscle",
    RigidTendonMuscle,
    order=_MUSCLE + ("active_force_length_curve", "passive_force_length_curve", "force_velocity_curve"),
    skip_fields=("path",),
    skippable=False,
    **_PATH_HOOKS,
)

# -- passive path forces -------------------------------------------------------------------------

register(
    "PathSpring",
    PathSpring,
    order=("components", "appliesForce", "GeometryPath", "resting_length", "stiffness", "dissipation"),
    skip_fields=("path",),
    skippable=False,
    **_PATH_HOOKS,
)
register(
    "Ligament",
    Ligament,
    order=("components", "appliesForce", "GeometryPath", "resting_length", "pcsa_force", "force_length_curve"),
    skip_fields=("path",),
    skippable=False,
    **_PATH_HOOKS,
)

# -- Schutte1993Muscle_Deprecated ----------------------------------------------------------------
# Its curves are one-object Function properties, written as OpenSim writes them:
# <SimmSpline name="tendon_force_length_curve">. A passive curve left at OpenSim's
# default (None: the exponential) is not written, as OpenSim does not write it either.

_SCHUTTE_CURVES = ("tendon_force_length_curve", "active_force_length_curve", "passive_force_length_curve")


def _named_function_writer(field: str):
    def write(io, comp, wc, path):
        fn = getattr(comp, field)
        return [] if fn is None else [wc.write_function(fn, field)]

    return write


register(
    "Schutte1993Muscle_Deprecated",
    Schutte1993Muscle_Deprecated,
    order=_MUSCLE + ("time_scale", "activation1", "activation2", "damping") + _SCHUTTE_CURVES,
    skip_fields=("path", "default_activation", "default_fiber_length") + _SCHUTTE_CURVES,
    skippable=False,
    read_hooks={"GeometryPath": _read_path},
    write_hooks={"GeometryPath": _write_path, **{f: _named_function_writer(f) for f in _SCHUTTE_CURVES}},
)
