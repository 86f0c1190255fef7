"""OpenSim's ``ExternalLoads`` files: a set of ``ExternalForce`` and the data file
that supplies them (ground reaction forces, for the dynamics tools).

``read_external_loads(path)`` reads the ``.xml``, reads its ``datafile`` (resolved
against the ExternalLoads file's own folder, as OpenSim does) and returns simjax
``ExternalForce`` components (``simjax.forces.external``), each fitted to its columns
with OpenSim's rule (cubic ``GCVSpline`` per column). ``add_external_loads`` adds them
to a model. The dynamics tools apply the loads unfiltered, as OpenSim 4.6's
InverseDynamicsTool does (it has no ``external_loads_model_kinematics_file`` nor a
cut-off for the loads).
"""

from __future__ import annotations

import os

from ..forces.external import ExternalForce
import numpy as np

from ..io.tables import TimeSeriesTable, read_table
from .setup import SetupError, read_element

__all__ = ["read_external_loads", "read_external_force_specs", "add_external_loads"]

_UNASSIGNED = ("", "Unassigned", "unassigned", "null", "NULL")


def _text(node, tag, default=""):
    child = node.find(tag)
    value = child.text.strip() if child is not None else ""
    return default if value in _UNASSIGNED else value


#: rows kept on each side of a ``time_window``: the end conditions of an interpolating
#: cubic spline reach into the data by a factor 2 - sqrt(3) ~ 0.27 per knot, so 50
#: knots away from the cut the fit equals the fit to all the data to ~1e-28
WINDOW_MARGIN = 50


def read_external_force_specs(path: str | os.PathLike, data=None):
    """Read an OpenSim ``ExternalLoads`` file's settings and data, fitting nothing.

    **Arguments:** ``path``: the ``.xml``; ``data``: a ``TimeSeriesTable`` to use
    instead of the file's ``datafile``.

    **Returns:** ``(data, source, specs)``: the data table; where it came from (the
    data file as resolved against the ExternalLoads file's folder, as OpenSim does,
    or ``"the data given"``); one dict per ``ExternalForce`` of the file, in file
    order, with ``name``, ``applied_to_body``, ``force_expressed_in_body``,
    ``point_expressed_in_body`` (``"ground"`` if not given), ``force_identifier``,
    ``point_identifier``, ``torque_identifier`` (``""`` if not given),
    ``data_source_name`` and ``enabled``.

    **Raises:** ``FileNotFoundError`` naming the file (or the data file as resolved);
    ``SetupError`` for malformed XML or a missing ``<datafile>``.
    """
    path = os.fspath(path)
    node = read_element(path, "ExternalLoads", "external loads")
    source = "the data given"
    if data is None:
        datafile = _text(node, "datafile")
        if not datafile:
            raise SetupError(f"{path}: <ExternalLoads> has no <datafile>")
        source = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), datafile))
        if not os.path.exists(source):
            raise FileNotFoundError(
                f"{path}: <datafile> names {datafile!r}, resolved from the file's folder to "
                f"{source!r}, which does not exist"
            )
        data = read_table(source)
    objects = node.find("objects")
    specs = []
    for f in objects.children if objects is not None else []:
        if f.tag != "ExternalForce":
            continue
        disabled = (
            _text(f, "isDisabled", "false").lower() == "true" or _text(f, "appliesForce", "true").lower() == "false"
        )
        specs.append(
            dict(
                name=f.name or "ExternalForce",
                applied_to_body=_text(f, "applied_to_body"),
                force_expressed_in_body=_text(f, "force_expressed_in_body", "ground"),
                point_expressed_in_body=_text(f, "point_expressed_in_body", "ground"),
                force_identifier=_text(f, "force_identifier"),
                point_identifier=_text(f, "point_identifier"),
                torque_identifier=_text(f, "torque_identifier"),
                data_source_name=_text(f, "data_source_name"),
                enabled=not disabled,
            )
        )
    return data, source, specs


def read_external_loads(path: str | os.PathLike, data=None, time_window=None) -> list[ExternalForce]:
    """Read an OpenSim ``ExternalLoads`` file.

    **Arguments:** ``path``: the ``.xml``; ``data``: a ``TimeSeriesTable`` to use
    instead of the file's ``datafile``; ``time_window``: ``(start, end)`` s: fit only
    the rows within it and ``WINDOW_MARGIN`` rows either side (the same curves inside
    the window to rounding, at a fraction of the cost for long trials: the fit is a
    dense solve over the rows); ``None``: all rows, as OpenSim.

    **Returns:** one ``ExternalForce`` per enabled force of the file, named as in the
    file, its force/point/torque fitted to the data columns (force and torque in N
    and N m, expressed in ``force_expressed_in_body``; the point in m, expressed in
    ``point_expressed_in_body``).

    **Raises:** ``FileNotFoundError`` naming the file (or the data file as resolved);
    ``SetupError`` for malformed XML, or an identifier with no (or not three) columns
    in the data, naming the force, the identifier and the data file.
    """
    path = os.fspath(path)
    data, source, specs = read_external_force_specs(path, data)
    if time_window is not None and len(data.times) > 2 * WINDOW_MARGIN:
        t = np.asarray(data.times)
        first = max(int(np.searchsorted(t, time_window[0], side="right")) - 1 - WINDOW_MARGIN, 0)
        stop = min(int(np.searchsorted(t, time_window[1], side="left")) + 1 + WINDOW_MARGIN, len(t))
        if stop - first < len(t):
            data = TimeSeriesTable(
                t[first:stop], np.asarray(data.values)[first:stop], list(data.labels), dict(data.metadata)
            )
    labels = list(data.labels)
    forces = []
    for spec in specs:
        name = spec["name"]
        ids = {}
        for prop in ("force_identifier", "point_identifier", "torque_identifier"):
            ident = spec[prop]
            if ident:
                hits = [lab for lab in labels if lab.startswith(ident)]
                if len(hits) != 3:
                    raise SetupError(
                        f"{path}: ExternalForce {name!r}: <{prop}> {ident!r} has "
                        f"{len(hits) or 'no'} column(s) {hits if hits else ''} in the data file "
                        f"{source!r} (3 columns starting with it are needed)"
                    )
            ids[prop] = ident
        forces.append(
            ExternalForce(
                name,
                spec["applied_to_body"],
                data=data,
                force_expressed_in_body=spec["force_expressed_in_body"],
                point_expressed_in_body=spec["point_expressed_in_body"],
                data_source_name=spec["data_source_name"],
                applies_force=spec["enabled"],
                **ids,
            )
        )
    return forces


def add_external_loads(model, forces):
    """The model with ``forces`` (e.g. from ``read_external_loads``) added to its
    force set (a model already holding a component of the same name gets an error)."""
    for f in forces:
        model = model.add(f)
    return model
