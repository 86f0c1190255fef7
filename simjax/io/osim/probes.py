"""``.osim`` registrations of the probes (see ``simjax.io.osim.registry`` for the
mapping rules).

Importing this module registers ``Umberger2010MuscleMetabolicsProbe``. Mapping
details:

- ``<initial_conditions_for_integration>`` is a list of numbers (possibly empty);
- the probe's ``<Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameterSet>``
  (``<objects>`` of ``<Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter
  name="muscle">``) is the probe's ``muscle_parameters``; an entry's
  ``provided_muscle_mass`` is written only when it is set (not NaN).
"""

from __future__ import annotations

import math

from ...control.metabolics import (
    Umberger2010MuscleMetabolicsProbe,
    Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter,
)
from ._xml import Node
from .registry import format_numbers, register

__all__ = []

_PROBE = ("components", "enabled", "probe_operation", "initial_conditions_for_integration", "gain")

_UMBERGER = "Umberger2010MuscleMetabolicsProbe"
_SET = f"{_UMBERGER}_MetabolicMuscleParameterSet"
_ITEM = f"{_UMBERGER}_MetabolicMuscleParameter"
_ITEM_NUMBERS = ("specific_tension", "density", "ratio_slow_twitch_fibers", "provided_muscle_mass")
_ITEM_ORDER = (
    "specific_tension",
    "density",
    "ratio_slow_twitch_fibers",
    "use_provided_muscle_mass",
    "provided_muscle_mass",
)


def _read_initial_conditions(io, node, rc, path):
    return {"initial_conditions_for_integration": rc.numbers(node, path, prop=node.tag)}


def _read_parameter_set(io, node, rc, path):
    items = []
    for child in node.children:
        if child.tag == "groups":
            if child.children:
                rc.unsupported_content(child, "<groups>", path, f"groups of a {_SET}")
            continue
        if child.tag != "objects":
            rc.unsupported_content(child, f"<{child.tag}>", path, f"unknown property of {_SET}")
            continue
        for item in child.children:
            if item.tag != _ITEM:
                raise rc.error(item, path, f"expected <{_ITEM}>, got <{item.tag}>", prop="muscle_parameters")
            name = item.attrib.get("name")
            if not name:
                raise rc.error(item, path, f"<{_ITEM}> has no name attribute (the name of a muscle)")
            values: dict = {}
            for c in item.children:
                if c.tag in _ITEM_NUMBERS:
                    values[c.tag] = rc.number(c, path, prop=c.tag)
                elif c.tag == "use_provided_muscle_mass":
                    values[c.tag] = rc.boolean(c, path, prop=c.tag)
                else:
                    rc.unsupported_content(c, f"<{c.tag}>", path, f"unknown property of {_ITEM}")
            items.append(Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter(name, **values))
    return {"muscle_parameters": tuple(items)}


def _write_parameter_set(io, comp, wc, path):
    node = Node(_SET)
    objects = node.append(Node("objects"))
    for p in comp.muscle_parameters:
        item = objects.append(Node(_ITEM, {"name": p.name}))
        for field in _ITEM_ORDER:
            value = getattr(p, field)
            if field == "use_provided_muscle_mass":
                item.append(Node(field, text="true" if value else "false"))
            elif field != "provided_muscle_mass" or not math.isnan(float(value)):
                item.append(Node(field, text=format_numbers(value)))
    node.append(Node("groups"))
    return [node]


register(
    _UMBERGER,
    Umberger2010MuscleMetabolicsProbe,
    order=_PROBE
    + (
        "activation_maintenance_rate_on",
        "shortening_rate_on",
        "basal_rate_on",
        "mechanical_work_rate_on",
        "enforce_minimum_heat_rate_per_muscle",
        "aerobic_factor",
        "basal_coefficient",
        "basal_exponent",
        "muscle_effort_scaling_factor",
        "use_Bhargava_recruitment_model",
        "include_negative_mechanical_work",
        "forbid_negative_total_power",
        "report_total_metabolics_only",
        _SET,
    ),
    read_hooks={"initial_conditions_for_integration": _read_initial_conditions, _SET: _read_parameter_set},
    write_hooks={_SET: _write_parameter_set},
    skip_fields=("muscle_parameters",),
)
