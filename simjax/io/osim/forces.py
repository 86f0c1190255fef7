"""``.osim`` registrations of the passive forces, contact, external loads and
PointOnLineConstraint (see ``simjax.io.osim.registry`` for the mapping rules).

Importing this module registers: PointToPointSpring, SpringGeneralizedForce,
CoordinateLimitForce, BushingForce, ExpressionBasedCoordinateForce,
ContactHalfSpace, ContactSphere, ContactMesh, HuntCrossleyForce,
ElasticFoundationForce, SmoothSphereHalfSpaceForce, PrescribedForce, ExternalForce
and PointOnLineConstraint. Names of coordinates (``coordinate``) and of contact
geometry stay names, as in OpenSim; the contact forces' nested
``<HuntCrossleyForce::ContactParametersSet>`` is read and written by hooks; a
ContactMesh's file is read relative to the model file's folder. An ExternalForce
read from a model file has no data (OpenSim takes it from an ExternalLoads data
file): give it one with ``ExternalForce(..., data=table)`` before building.
"""

from __future__ import annotations

from ...forces.bushing import BushingForce
from ...forces.contact import (
    ContactHalfSpace,
    ContactMesh,
    ContactParameters,
    ContactSphere,
    ElasticFoundationForce,
    HuntCrossleyForce,
    SmoothSphereHalfSpaceForce,
    read_mesh,
)
from ...forces.expression import ExpressionBasedCoordinateForce
from ...forces.external import ExternalForce, PrescribedForce
from ...forces.limits import CoordinateLimitForce
from ...forces.springs import PointToPointSpring, SpringGeneralizedForce
from ...mechanics.point_on_line import PointOnLineConstraint
from ._xml import Node
from .registry import format_numbers, register

__all__ = []

_FORCE = ("components", "appliesForce")

register(
    "PointToPointSpring",
    PointToPointSpring,
    order=_FORCE + ("socket_body1", "socket_body2", "point1", "point2", "stiffness", "rest_length"),
)
register(
    "SpringGeneralizedForce",
    SpringGeneralizedForce,
    order=_FORCE + ("coordinate", "stiffness", "rest_length", "viscosity"),
)
register(
    "CoordinateLimitForce",
    CoordinateLimitForce,
    order=_FORCE
    + (
        "coordinate",
        "upper_stiffness",
        "upper_limit",
        "lower_stiffness",
        "lower_limit",
        "damping",
        "transition",
        "compute_dissipation_energy",
    ),
)
register(
    "BushingForce",
    BushingForce,
    order=_FORCE
    + (
        "socket_frame1",
        "socket_frame2",
        "frames",
        "rotational_stiffness",
        "translational_stiffness",
        "rotational_damping",
        "translational_damping",
    ),
)
register("ExpressionBasedCoordinateForce", ExpressionBasedCoordinateForce, order=_FORCE + ("coordinate", "expression"))
register(
    "PointOnLineConstraint",
    PointOnLineConstraint,
    order=(
        "components",
        "isEnforced",
        "socket_line_body",
        "socket_follower_body",
        "line_direction_vec",
        "point_on_line",
        "point_on_follower",
    ),
)

# -- contact geometry ------------------------------------------------------------------------

_GEOMETRY = ("components", "socket_frame", "location", "orientation", "Appearance", "display_preference", "color")
_GEOMETRY_KEEP = {"Appearance": True, "display_preference": True, "color": True}
register("ContactHalfSpace", ContactHalfSpace, order=_GEOMETRY, keep=_GEOMETRY_KEEP)
register("ContactSphere", ContactSphere, order=_GEOMETRY + ("radius",), keep=_GEOMETRY_KEEP)


def _read_mesh_file(io, node, rc, path):
    import os

    name = node.text.strip()
    out = {"filename": name}
    if rc.base_dir is not None and name:
        full = name if os.path.isabs(name) else os.path.join(rc.base_dir, name)
        if os.path.isfile(full):
            try:
                vertices, faces = read_mesh(full)
            except (OSError, ValueError) as e:
                raise rc.error(node, path, f"cannot read the mesh: {e}", prop="filename", value=name) from None
            out.update(vertices=vertices, faces=tuple(map(tuple, faces.tolist())))
    return out


register(
    "ContactMesh",
    ContactMesh,
    order=_GEOMETRY + ("filename",),
    keep=_GEOMETRY_KEEP,
    read_hooks={"filename": _read_mesh_file},
    skip_fields=("vertices", "faces"),
)

# -- compliant contact forces ------------------------------------------------------------------

_MATERIAL = ("stiffness", "dissipation", "static_friction", "dynamic_friction", "viscous_friction")


def _contact_parameter_hooks(osim_class: str):
    set_tag = f"{osim_class}::ContactParametersSet"
    item_tag = f"{osim_class}::ContactParameters"

    def read(io, node, rc, path):
        objects = node.find("objects")
        params = []
        for item in objects.children if objects is not None else []:
            if item.tag != item_tag:
                raise rc.error(item, path, f"expected <{item_tag}>, got <{item.tag}>", prop="contact_parameters")
            values = {}
            for child in item.children:
                if child.tag == "geometry":
                    values["geometry"] = tuple(child.text.split())
                elif child.tag in _MATERIAL:
                    values[child.tag] = rc.number(child, path, prop=child.tag)
                else:
                    rc.unsupported_content(child, f"<{child.tag}>", path, f"unknown property of {item_tag}")
            params.append(ContactParameters(**values))
        return {"contact_parameters": tuple(params)}

    def write(io, comp, wc, path):
        node = Node(set_tag, {"name": "contact_parameters"})
        objects = Node("objects")
        node.children.append(objects)
        for cp in comp.contact_parameters:
            item = Node(item_tag)
            item.children.append(Node("geometry", text=" ".join(cp.geometry)))
            for m in _MATERIAL:
                item.children.append(Node(m, text=format_numbers(getattr(cp, m))))
            objects.children.append(item)
        node.children.append(Node("groups"))
        return [node]

    return set_tag, read, write


for _cls in (HuntCrossleyForce, ElasticFoundationForce):
    _tag, _read, _write = _contact_parameter_hooks(_cls.__name__)
    register(
        _cls.__name__,
        _cls,
        order=_FORCE + (_tag, "transition_velocity"),
        read_hooks={_tag: _read},
        write_hooks={_tag: _write},
        skip_fields=("contact_parameters",),
    )

register(
    "SmoothSphereHalfSpaceForce",
    SmoothSphereHalfSpaceForce,
    order=_FORCE
    + (
        "socket_sphere",
        "socket_half_space",
        "stiffness",
        "dissipation",
        "static_friction",
        "dynamic_friction",
        "viscous_friction",
        "transition_velocity",
        "constant_contact_force",
        "hertz_smoothing",
        "hunt_crossley_smoothing",
        "force_visualization_radius",
        "force_visualization_scale_factor",
    ),
    keep={"force_visualization_scale_factor": True},
)

# -- prescribed and external loads ---------------------------------------------------------------

_FUNCTION_SETS = ("forceFunctions", "pointFunctions", "torqueFunctions")


def _read_function_set(io, node, rc, path):
    # <FunctionSet name="forceFunctions"><objects>...</objects></FunctionSet>
    name = node.attrib.get("name", "")
    if name not in _FUNCTION_SETS:
        raise rc.error(node, path, f"unexpected FunctionSet {name!r} (expected one of {_FUNCTION_SETS})")
    objects = node.find("objects")
    fns = []
    for c in objects.children if objects is not None else []:
        fns.append(rc.read_function(c, f"{path}/{name}/{len(fns)}"))
    return {name: tuple(fns)}


def _read_function_set_wrapper(io, node, rc, path):
    # the long form <forceFunctions><FunctionSet>...</FunctionSet></forceFunctions>
    inner = node.find("FunctionSet")
    if inner is None:
        return {node.tag: ()}
    inner.attrib.setdefault("name", node.tag)
    if inner.attrib["name"] != node.tag:
        inner.attrib["name"] = node.tag
    return _read_function_set(io, inner, rc, path)


def _function_set_writer(field):
    def write(io, comp, wc, path):
        node = Node("FunctionSet", {"name": field})
        objects = Node("objects")
        node.children.append(objects)
        for f in getattr(comp, field):
            objects.children.append(wc.write_function(f, f.name or None))
        node.children.append(Node("groups"))
        return [node]

    return write


register(
    "PrescribedForce",
    PrescribedForce,
    order=_FORCE + ("socket_frame", "pointIsGlobal", "forceIsGlobal") + _FUNCTION_SETS,
    read_hooks={"FunctionSet": _read_function_set, **{f: _read_function_set_wrapper for f in _FUNCTION_SETS}},
    write_hooks={f: _function_set_writer(f) for f in _FUNCTION_SETS},
    skip_fields=_FUNCTION_SETS,
)
register(
    "ExternalForce",
    ExternalForce,
    order=_FORCE
    + (
        "applied_to_body",
        "force_expressed_in_body",
        "point_expressed_in_body",
        "force_identifier",
        "point_identifier",
        "torque_identifier",
        "data_source_name",
    ),
    skip_fields=("force_functions", "point_functions", "torque_functions"),
)
