"""Registrations of the OpenSim classes simjax models today.

Frames (Ground, Body, PhysicalOffsetFrame), Station and Marker; Coordinate and every
joint type (Weld, Pin, Slider, Universal, Gimbal, Planar, Ball, Free, Custom with
its SpatialTransform); Weld, Point and CoordinateCoupler constraints; the
Coordinate, Point and Torque actuators; PrescribedController, ToyReflexController; the Function
family.

Property orders are those OpenSim 4.6 writes. Display content (frame geometry,
attached meshes) is kept verbatim in ``extras``. A frame's ``<WrapObjectSet>`` holds
wrap objects (``simjax.io.osim.wrapping`` registers their classes), which simjax keeps
as subcomponents of the frame (``/bodyset/r_humerus/TRI``, OpenSim's path too).
"""

from __future__ import annotations

import os

import numpy as np

from ...control.controllers import PrescribedController
from ...control.reflex import ToyReflexController
from ...forces.base import CoordinateActuator, PointActuator, TorqueActuator
from ...functions import (
    Constant,
    GCVSpline,
    LinearFunction,
    MultiplierFunction,
    NaturalCubicSpline,
    PiecewiseConstantFunction,
    PiecewiseLinearFunction,
    PolynomialFunction,
    SimmSpline,
    Sine,
    StepFunction,
)
from ...mechanics.constraints import CoordinateCouplerConstraint, PointConstraint, WeldConstraint
from ...mechanics.frames import Body, Ground, Marker, PhysicalFrame, PhysicalOffsetFrame, Station
from ...mechanics.joints import (
    BallJoint,
    Coordinate,
    CustomJoint,
    FreeJoint,
    GimbalJoint,
    PinJoint,
    PlanarJoint,
    SliderJoint,
    SpatialTransform,
    TransformAxis,
    UniversalJoint,
    WeldJoint,
)
from ._xml import Node
from .registry import ComponentIO, ReadContext, SkipComponent, WriteContext, format_numbers, register, register_function

__all__ = ["FRAME_KEEP", "name_reference", "JointIO"]

_AXES = ("rotation1", "rotation2", "rotation3", "translation1", "translation2", "translation3")
_DEFAULT_AXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)) * 2


# -- display content ---------------------------------------------------------------------


#: the meshes shipped with simjax (OpenSim's search ends in its installation's geometry folder)
_SHIPPED_GEOMETRY = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "Geometry"
)


def _mesh_found(rc: ReadContext, name: str) -> bool:
    if rc.base_dir is None:
        return True
    for d in (rc.base_dir, os.path.join(rc.base_dir, "Geometry"), _SHIPPED_GEOMETRY):
        if os.path.isfile(os.path.join(d, name)):
            return True
    return False


def keep_geometry(node: Node, rc: ReadContext, path: str) -> bool:
    """Keep ``attached_geometry``; note mesh files that cannot be found (a warning)."""
    for n in node.iter():
        if n.tag == "mesh_file" and n.text and not _mesh_found(rc, n.text):
            rc.missing_meshes.append(n.text)
    return True


#: display content of every PhysicalFrame
FRAME_KEEP = {"FrameGeometry": True, "attached_geometry": keep_geometry}
_FRAME_ORDER = ("components", "FrameGeometry", "attached_geometry", "WrapObjectSet")
_WRAPS = "__wrap_objects__"


def _is_wrap_object(comp) -> bool:
    from ...wrapping.objects import WrapObject  # noqa: PLC0415

    return isinstance(comp, WrapObject)


def _read_wrap_set(io, node, rc, path):
    return {_WRAPS: rc.read_set(node, path)}


def _write_wrap_set(io, comp, wc, path):
    node = Node("WrapObjectSet", {"name": "wrapobjectset"})
    objects = node.append(Node("objects"))
    for c in comp.components:
        if _is_wrap_object(c):
            objects.append(io.write_child(c, wc, path))
    node.append(Node("groups"))
    return [node]


class FrameIO(ComponentIO):
    """PhysicalFrames: their ``<WrapObjectSet>`` objects are subcomponents in simjax,
    written back into the set."""

    def __init__(self, osim_class: str, cls: type, skippable: bool = False, **options):
        super().__init__(
            osim_class,
            cls,
            keep=FRAME_KEEP,
            skippable=skippable,
            read_hooks={"WrapObjectSet": _read_wrap_set},
            write_hooks={"WrapObjectSet": _write_wrap_set},
            skip_fields=("components",),
            **options,
        )

    def build(self, node, rc, path, values):
        """Append the wrap objects to the frame's subcomponents."""
        wraps = values.pop(_WRAPS, ())
        if wraps:
            values["components"] = tuple(values.get("components", ())) + wraps
        return super().build(node, rc, path, values)

    def write(self, comp, wc, path):
        """The frame, its wrap objects inside ``<WrapObjectSet>``."""
        node = super().write(comp, wc, path)
        others = tuple(c for c in comp.components if not _is_wrap_object(c))
        if others:
            listed = self.write_field(comp.replace(components=others), "components", wc, path)
            node.children = listed + node.children
        return node

    def write_child(self, child, wc, path):
        from .registry import write_component  # noqa: PLC0415

        return write_component(child, wc, ("" if path == "/" else path) + "/" + child.name)


# -- references by name ------------------------------------------------------------------


def _name_for(wc: WriteContext, path: str, ref: str, field: str, kind: str, tag: str) -> str:
    if not ref:
        return ""
    full, comp = wc.target(path, ref, field)
    if kind == "wrap_object":
        if not _is_wrap_object(comp):
            raise wc.error(
                path, f"<{tag}> must name a wrap object, but {full!r} is a {type(comp).__name__}", prop=field, value=ref
            )
        return comp.name
    if kind == "coordinate":
        if not isinstance(comp, Coordinate):
            raise wc.error(
                path, f"<{tag}> must name a Coordinate, but {full!r} is a {type(comp).__name__}", prop=field, value=ref
            )
        return comp.name
    if not isinstance(comp, PhysicalFrame):
        raise wc.error(
            path, f"<{tag}> must name a body, but {full!r} is a {type(comp).__name__}", prop=field, value=ref
        )
    if full.startswith("/bodyset/") and full.count("/") == 2:
        return comp.name
    if kind == "body":
        raise wc.error(
            path, f"OpenSim's <{tag}> can only name a body of the BodySet, not {full!r}", prop=field, value=ref
        )
    return full


def name_reference(tag: str, field: str, kind: str):
    """Read and write hooks for a property holding a *name* that simjax keeps as a
    socket path.

    **Arguments:** ``tag``: the XML property; ``field``: the simjax socket; ``kind``:
    ``"coordinate"`` (a coordinate name), ``"body"`` (a BodySet name), ``"frame"``
    (a BodySet name or a path from the model root) or ``"wrap_object"`` (the name of
    a wrap object on any frame).

    **Returns:** ``(read_hook, write_hook)`` for ``register(read_hooks=...,
    write_hooks=...)``.
    """

    def read(io, node, rc, path):
        rc.socket_lines[(path, field)] = node.line
        names = node.text.split()
        if len(names) > 1:
            raise rc.error(node, path, "expected one name", prop=tag, value=node.text)
        if names:
            rc.defer(path, field, kind, names[0], node)
        return {}

    def write(io, comp, wc, path):
        return [Node(tag, text=_name_for(wc, path, getattr(comp, field), field, kind, tag))]

    return read, write


def _hooks(*refs):
    read, write = {}, {}
    for tag, field, kind in refs:
        read[tag], write[tag] = name_reference(tag, field, kind)
    return read, write


# -- frames and points --------------------------------------------------------------------------

register(FrameIO("Ground", Ground, order=_FRAME_ORDER))
register(FrameIO("Body", Body, order=_FRAME_ORDER + ("mass", "mass_center", "inertia"), required=("mass",)))
register(
    FrameIO(
        "PhysicalOffsetFrame",
        PhysicalOffsetFrame,
        order=_FRAME_ORDER + ("socket_parent", "translation", "orientation"),
        skippable=True,
    )
)
register("Station", Station, order=("components", "socket_parent_frame", "location"))
register("Marker", Marker, order=("components", "socket_parent_frame", "location", "fixed"))


# -- coordinates and joints ---------------------------------------------------------------------

register(
    "Coordinate",
    Coordinate,
    order=(
        "components",
        "default_value",
        "default_speed_value",
        "range",
        "clamped",
        "locked",
        "prescribed_function",
        "prescribed",
        "is_free_to_satisfy_constraints",
    ),
    skippable=False,
)

_JOINT_ORDER = ("components", "socket_parent_frame", "socket_child_frame", "coordinates", "frames")


class JointIO(ComponentIO):
    """Joints: every coordinate must be readable, and the coordinate list is
    required for joint types that have coordinates."""

    def read(self, node, rc, path):
        """Read a joint element (see ``ComponentIO.read``).

        Raises the reader's error when a non-custom joint with coordinates lacks
        ``<coordinates>``; raises ``SkipComponent`` when the listed coordinates do not
        match the joint's count, so the reader drops it with a warning, as OpenSim does."""
        coords = node.find("coordinates")
        if coords is None and self.cls.kind != "custom" and self.cls.num_coordinates_default() > 0:
            raise rc.error(node, path, f"{self.osim_class} is missing the required property <coordinates>")
        comp = super().read(node, rc, path)
        if coords is not None and len(comp.coordinates) != len(coords.children):
            raise SkipComponent(path)
        return comp


def _read_transform_axis(node: Node, rc: ReadContext, path: str, default_axis) -> TransformAxis:
    coords, axis, fns = (), np.asarray(default_axis, float), []
    for child in node.children:
        if child.tag == "coordinates":
            coords = tuple(child.text.split())
            if len(coords) > 1:
                rc.unsupported_content(
                    child,
                    "TransformAxis",
                    path,
                    f"a function of {len(coords)} coordinates ({' '.join(coords)})",
                    skippable=False,
                )
                raise SkipComponent(path)
        elif child.tag == "axis":
            axis = rc.numbers(child, path, 3, prop="axis")
        else:
            fns.append(child)
    if len(fns) > 1:
        raise rc.error(fns[1], path, f"a TransformAxis holds one function, got <{fns[0].tag}> and <{fns[1].tag}>")
    fn = rc.function_property(node, "function", path, skippable=False, node=fns[0]) if fns else None
    if fn is None:  # OpenSim's default value of the property
        fn = Constant(0.0, name="function")
    return TransformAxis(coordinates=coords, axis=axis, function=fn)


def _read_spatial_transform(io, node, rc, path):
    axes = {}
    for child in node.children:
        if child.tag != "TransformAxis" or child.attrib.get("name") not in _AXES:
            raise rc.error(
                child,
                path + "/SpatialTransform",
                f'expected <TransformAxis name="rotation1"> ... <TransformAxis name="translation3">, got <{child.tag}>',
            )
        name = child.attrib["name"]
        if name in axes:
            raise rc.error(child, path, f"TransformAxis {name!r} given twice")
        i = _AXES.index(name)
        axes[name] = _read_transform_axis(child, rc, f"{path}/SpatialTransform/{name}", _DEFAULT_AXES[i])
    out = []
    for i, name in enumerate(_AXES):
        out.append(
            axes.get(name)
            or TransformAxis(coordinates=(), axis=np.asarray(_DEFAULT_AXES[i]), function=Constant(0.0, name="function"))
        )
    return {"spatial_transform": SpatialTransform(axes=tuple(out))}


def _write_spatial_transform(io, comp, wc, path):
    st = Node("SpatialTransform")
    for name, ax in zip(_AXES, comp.spatial_transform.axes):
        a = st.append(Node("TransformAxis", {"name": name}))
        a.append(Node("coordinates", text=" ".join(ax.coordinates)))
        a.append(Node("axis", text=format_numbers(ax.axis)))
        fn = ax.function
        if fn is None:
            fn = LinearFunction((1.0, 0.0)) if ax.coordinates else Constant(0.0)
        a.append(wc.write_function(fn, "function"))
    return [st]


for _cls in (WeldJoint, PinJoint, SliderJoint, UniversalJoint, GimbalJoint, PlanarJoint, BallJoint, FreeJoint):
    register(JointIO(_cls.__name__, _cls, order=_JOINT_ORDER, skippable=False))
try:  # an EllipsoidJoint is part of simjax where mechanics.joints defines it
    from ...mechanics.joints import EllipsoidJoint
except ImportError:  # pragma: no cover
    EllipsoidJoint = None
if EllipsoidJoint is not None:
    register(JointIO("EllipsoidJoint", EllipsoidJoint, order=_JOINT_ORDER + ("radii_x_y_z",), skippable=False))
register(
    JointIO(
        "CustomJoint",
        CustomJoint,
        order=_JOINT_ORDER + ("SpatialTransform",),
        skippable=False,
        required=("SpatialTransform",),
        skip_fields=("spatial_transform",),
        read_hooks={"SpatialTransform": _read_spatial_transform},
        write_hooks={"SpatialTransform": _write_spatial_transform},
    )
)


# -- constraints ----------------------------------------------------------------------------------

register(
    "WeldConstraint", WeldConstraint, order=("components", "isEnforced", "socket_frame1", "socket_frame2", "frames")
)
register(
    "PointConstraint",
    PointConstraint,
    order=("components", "isEnforced", "socket_body_1", "socket_body_2", "location_body_1", "location_body_2"),
)


def _read_independent(io, node, rc, path):
    names = node.text.split()
    rc.socket_lines[(path, "independent_coordinate")] = node.line
    if len(names) > 1:
        rc.unsupported_content(
            node, "CoordinateCouplerConstraint", path, f"{len(names)} independent coordinates (only one is supported)"
        )
        raise SkipComponent(path)
    if names:
        rc.defer(path, "independent_coordinate", "coordinate", names[0], node)
    return {}


_read_dep, _write_dep = name_reference("dependent_coordinate_name", "dependent_coordinate", "coordinate")
_, _write_ind = name_reference("independent_coordinate_names", "independent_coordinate", "coordinate")
register(
    "CoordinateCouplerConstraint",
    CoordinateCouplerConstraint,
    order=(
        "components",
        "isEnforced",
        "coupled_coordinates_function",
        "independent_coordinate_names",
        "dependent_coordinate_name",
        "scale_factor",
    ),
    read_hooks={"independent_coordinate_names": _read_independent, "dependent_coordinate_name": _read_dep},
    write_hooks={"independent_coordinate_names": _write_ind, "dependent_coordinate_name": _write_dep},
    skip_fields=("independent_coordinate", "dependent_coordinate"),
)


# -- actuators ------------------------------------------------------------------------------------

_ACT = ("components", "appliesForce", "min_control", "max_control")
_r, _w = _hooks(("coordinate", "coordinate", "coordinate"))
register(
    "CoordinateActuator",
    CoordinateActuator,
    order=_ACT + ("coordinate", "optimal_force"),
    read_hooks=_r,
    write_hooks=_w,
    skip_fields=("coordinate",),
)
_r, _w = _hooks(("body", "body", "body"))
register(
    "PointActuator",
    PointActuator,
    order=_ACT + ("body", "point", "point_is_global", "direction", "force_is_global", "optimal_force"),
    read_hooks=_r,
    write_hooks=_w,
    skip_fields=("body",),
)
_r, _w = _hooks(("bodyA", "bodyA", "frame"), ("bodyB", "bodyB", "frame"))
register(
    "TorqueActuator",
    TorqueActuator,
    order=_ACT + ("bodyA", "bodyB", "torque_is_global", "axis", "optimal_force"),
    read_hooks=_r,
    write_hooks=_w,
    skip_fields=("bodyA", "bodyB"),
)


# -- controllers ------------------------------------------------------------------------------------


def _read_actuator_list(io, node, rc, path):
    rc.socket_lines[(path, "actuators")] = node.line
    rc.defer(path, "actuators", "actuator", node.text.split(), node, many=True)
    return {}


def _read_control_functions(io, node, rc, path):
    # <FunctionSet name="ControlFunctions">: the element is tagged by its class
    if node.attrib.get("name", "ControlFunctions") != "ControlFunctions":
        raise rc.error(node, path, f"unexpected FunctionSet {node.attrib['name']!r} (expected ControlFunctions)")
    fns = []
    objects = node.find("objects")
    for c in objects.children if objects is not None else []:
        fns.append(rc.read_function(c, f"{path}/ControlFunctions/{c.attrib.get('name') or len(fns)}"))
    return {"control_functions": tuple(fns)}


def _write_control_functions(io, comp, wc, path):
    fs = Node("FunctionSet", {"name": "ControlFunctions"})
    objects = fs.append(Node("objects"))
    for f in comp.control_functions:
        objects.append(wc.write_function(f, f.name or None))
    fs.append(Node("groups"))
    return [fs]


def _keep_without_controls_file(node, rc, path):
    if node.text:
        rc.unsupported_content(
            node,
            "<controls_file>",
            path,
            "controls read from a file are not supported; use simjax.io.states or a ControlTable",
        )
        raise SkipComponent(path)
    return True


register(
    "PrescribedController",
    PrescribedController,
    order=("components", "socket_actuators", "enabled", "ControlFunctions", "controls_file", "interpolation_method"),
    read_hooks={"FunctionSet": _read_control_functions, "actuator_list": _read_actuator_list},
    write_hooks={"ControlFunctions": _write_control_functions},
    skip_fields=("control_functions",),
    keep={"controls_file": _keep_without_controls_file, "interpolation_method": True},
)
register(
    "ToyReflexController",
    ToyReflexController,
    order=("components", "socket_actuators", "enabled", "gain"),
    read_hooks={"actuator_list": _read_actuator_list},
)


# -- functions --------------------------------------------------------------------------------------

for _f in (
    Constant,
    LinearFunction,
    PolynomialFunction,
    PiecewiseLinearFunction,
    PiecewiseConstantFunction,
    SimmSpline,
    NaturalCubicSpline,
    MultiplierFunction,
    StepFunction,
    Sine,
):
    register_function(_f.__name__, _f)
register_function(
    "GCVSpline", GCVSpline, order=("half_order", "error_variance", "x", "y", "weights"), ignore=("coefficients",)
)

del _cls, _f, _r, _w
