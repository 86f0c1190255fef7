"""A sweep's spec: read it, load its model and case table, and check every name and
column before any case runs.

A spec is a JSON file (or TOML, on Python 3.11+), or the same as a ``dict``::

    {
      "model": "arm26",                      # a shipped model, or an .osim path
      "cases": "cases.csv",                  # a CSV or Parquet table, one row a case
      "t_final": 0.2,                        # s
      "outputs": ["/jointset/r_elbow/r_elbow_flex/value", "/forceset/TRIlong|fiber_force"],
      "coordinates": {"r_elbow_flex": 0.5},  # optional: initial values for every case
      "controls": 0.1,                       # optional: a constant control (or a list)
      "equilibrate": true,                   # optional: each case's muscles in equilibrium at the start
      "trajectories": 51,                    # optional: keep each case's states at 51 times
      "chunk_size": 500,                     # optional: cases a Parquet file
      "simulate": {"accuracy": 1e-4}         # optional: keywords of ``simulate``
    }

Relative paths are relative to the spec file (to the working folder for a ``dict``).
Each column of the case table is one of:

- a model property, ``"component path|property"`` (``/forceset/TRIlong|max_isometric_force``;
  ``path|property[i]`` for element ``i`` of a vector property), in its units;
- an initial state variable by its OpenSim name (``/jointset/r_elbow/r_elbow_flex/value``,
  ``.../speed``, ``/forceset/TRIlong/activation``), overriding the spec's ``coordinates``;
- an actuator's path (``/forceset/TRIlong``): the case's constant control of that
  actuator, overriding the spec's ``controls`` (whose other actuators keep theirs, or 0
  without ``controls``);
- ``case``: the case's id (an integer; default the row number).

An output is a state variable's name or a component output ``"path|output"``; each is
kept at the end of the simulation (its value at ``t_final``).

``equilibrate``: each case starts from its muscles' equilibrium (OpenSim's
``equilibrateMuscles``), found with its own properties, initial coordinates and
controls; the fiber states of the table are then starting guesses only.
``trajectories``: every state variable of each case at this many evenly spaced times
from the start to ``t_final`` is written too, beside the rows
(``simjax.sweep.read_trajectories``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from typing import Any

import numpy as np

__all__ = ["SpecError", "SweepSpec", "read_spec"]


class SpecError(ValueError):
    """A sweep spec or case table that cannot run: the message names the key, column,
    path or output at fault."""


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A checked sweep: the built model and the case table's columns as arrays.

    **Fields:** ``model_path`` (the ``.osim`` file); ``system`` (the built model);
    ``t_final`` (s); ``outputs`` (names, as given); ``properties``
    (``{column: (n_cases,) float64}``, in the properties' units); ``states``
    (``{state variable name: (n_cases,) float64}``); ``case`` (``(n_cases,)`` int64
    ids); ``coordinates`` (``{coordinate: value}`` for every case); ``controls``
    (``None`` or a constant, in actuator order); ``case_controls`` (``{actuator path:
    (n_cases,) float64}``, the table's control columns); ``equilibrate`` (bool);
    ``trajectories`` (samples a case, or ``None``); ``chunk_size`` (cases a file);
    ``simulate`` (keywords of ``simulate``); ``fingerprint`` (a hash of the spec and
    the cases, that a restart must match).
    """

    model_path: str
    system: Any
    t_final: float
    outputs: tuple
    properties: dict
    states: dict
    case: np.ndarray
    coordinates: dict
    controls: Any
    chunk_size: int
    simulate: dict
    fingerprint: str
    case_controls: dict = dataclasses.field(default_factory=dict)
    equilibrate: bool = False
    trajectories: int | None = None

    @property
    def n_cases(self) -> int:
        """The number of cases (rows of the table)."""
        return len(self.case)


_KEYS = {
    "model",
    "cases",
    "t_final",
    "outputs",
    "coordinates",
    "controls",
    "equilibrate",
    "trajectories",
    "chunk_size",
    "simulate",
    "strict",
}
#: keywords of ``simulate`` a sweep fixes itself
_FIXED = {"ts", "n_outputs", "save_steps", "events", "throw", "progress"}


def read_spec(spec, *, cases=None) -> SweepSpec:
    """Read and check a sweep spec, before any case runs.

    **Arguments:** ``spec``: a path to a ``.json`` (or ``.toml``) file, a ``dict`` of
    the same keys (see the module's doc), or a ``SweepSpec`` (returned as is);
    ``cases``: the case table instead of the spec's ``"cases"`` (a path, a
    ``pyarrow.Table`` or a pandas ``DataFrame``).

    **Returns:** a ``SweepSpec``.

    **Raises:** ``SpecError`` naming what is wrong: a missing or unknown key, a model
    or table that cannot be read, an unknown component path, property or state
    variable (a column), a column that is not numeric or has missing values, a value
    outside a property's bounds, an unknown output.
    """
    if isinstance(spec, SweepSpec):
        return spec
    base = os.getcwd()
    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        base = os.path.dirname(os.path.abspath(path))
        spec = _read_file(path)
    if not isinstance(spec, dict):
        raise SpecError(f"a sweep spec is a dict or a .json/.toml file, got {type(spec).__name__}")
    unknown = set(spec) - _KEYS
    if unknown:
        raise SpecError(f"unknown key(s) {sorted(unknown)} in the sweep spec; the keys are {sorted(_KEYS)}")
    for key in ("model", "t_final", "outputs"):
        if key not in spec:
            raise SpecError(f"the sweep spec has no {key!r}")
    if cases is None:
        if "cases" not in spec:
            raise SpecError("the sweep spec has no 'cases' (a CSV or Parquet table)")
        cases = spec["cases"]
    table = _read_table(cases, base)
    system, model_path = _load_model(spec["model"], base, bool(spec.get("strict", True)))
    try:
        t_final = float(spec["t_final"])
    except (TypeError, ValueError):
        raise SpecError(f"'t_final' must be a number (s), got {spec['t_final']!r}") from None
    chunk_size = spec.get("chunk_size", 1000)
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise SpecError(f"'chunk_size' must be a positive integer, got {chunk_size!r}")
    sim = dict(spec.get("simulate", {}))
    fixed = _FIXED.intersection(sim)
    if fixed:
        raise SpecError(f"'simulate' must not set {sorted(fixed)}: the sweep sets them")
    outputs = spec["outputs"]
    if isinstance(outputs, str) or not all(isinstance(o, str) for o in outputs):
        raise SpecError(f"'outputs' must be a list of names, got {outputs!r}")
    outputs = tuple(outputs)
    for name in outputs:
        _check_output(system, name)
    coordinates = dict(spec.get("coordinates", {}))
    for name, value in coordinates.items():
        try:
            system.coordinate_path(name)
        except KeyError as e:
            raise SpecError(f"'coordinates': {e.args[0]}") from None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SpecError(f"'coordinates': the value of {name!r} must be a number, got {value!r}")
    controls = spec.get("controls")
    if controls is not None:
        controls = _controls(system, controls)
    equilibrate = spec.get("equilibrate", False)
    if not isinstance(equilibrate, bool):
        raise SpecError(f"'equilibrate' must be true or false, got {equilibrate!r}")
    trajectories = spec.get("trajectories")
    if trajectories is not None and (
        not isinstance(trajectories, int) or isinstance(trajectories, bool) or trajectories < 2
    ):
        raise SpecError(f"'trajectories' must be an integer of at least 2 (samples a case), got {trajectories!r}")
    properties, states, case_controls, case = _columns(system, table)
    fingerprint = _fingerprint(
        dict(
            model=os.path.abspath(model_path),
            t_final=t_final,
            outputs=outputs,
            coordinates=coordinates,
            controls=None if controls is None else controls.tolist(),
            chunk_size=chunk_size,
            simulate=sim,
            # (only where set: the fingerprints of sweeps without them are unchanged)
            **({"equilibrate": True} if equilibrate else {}),
            **({"trajectories": trajectories} if trajectories else {}),
        ),
        properties,
        states,
        case,
        case_controls,
    )
    return SweepSpec(
        model_path=model_path,
        system=system,
        t_final=t_final,
        outputs=outputs,
        properties=properties,
        states=states,
        case=case,
        coordinates=coordinates,
        controls=controls,
        chunk_size=chunk_size,
        simulate=sim,
        fingerprint=fingerprint,
        case_controls=case_controls,
        equilibrate=equilibrate,
        trajectories=trajectories,
    )


def _read_file(path: str) -> dict:
    if not os.path.exists(path):
        raise SpecError(f"no sweep spec at {path!r}")
    try:
        if path.endswith(".toml"):
            import tomllib  # (Python 3.11+)

            with open(path, "rb") as f:
                return tomllib.load(f)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, ImportError) as e:
        raise SpecError(f"cannot read the sweep spec {path!r}: {e}") from None


def _read_table(cases, base: str):
    import pyarrow as pa

    if isinstance(cases, pa.Table):
        return cases
    if hasattr(cases, "to_numpy") and hasattr(cases, "columns"):  # a pandas DataFrame
        return pa.Table.from_pandas(cases, preserve_index=False)
    if not isinstance(cases, (str, os.PathLike)):
        raise SpecError(f"'cases' must be a CSV or Parquet file, got {type(cases).__name__}")
    path = os.path.join(base, os.fspath(cases))
    if not os.path.exists(path):
        raise SpecError(f"'cases': no table at {path!r}")
    try:
        if path.endswith(".parquet") or os.path.isdir(path):
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.csv as pcsv

        return pcsv.read_csv(path)
    except pa.ArrowException as e:
        raise SpecError(f"'cases': cannot read {path!r}: {e}") from None


def _load_model(model: str, base: str, strict: bool):
    from .. import models
    from ..io.osim import OsimWarning, load_osim

    if not isinstance(model, str):
        raise SpecError(f"'model' must be a shipped model's name or an .osim path, got {model!r}")
    local = os.path.join(base, model)
    try:
        path = local if os.path.exists(local) else models.resolve(model)
    except (FileNotFoundError, KeyError, ValueError) as e:
        raise SpecError(f"'model': {e}") from None
    if not os.path.exists(path):
        raise SpecError(f"'model': no model {model!r} (neither a file nor a shipped model)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        return load_osim(path, strict=strict).build(), path


def _check_output(system, name: str) -> None:
    if name in system.y_names:
        return
    path, sep, output = name.rpartition("|")
    if not sep:
        raise SpecError(
            f"output {name!r}: not a state variable of the model, nor a component output ('component path|output')"
        )
    try:
        comp = system.find(path)
    except Exception:
        raise SpecError(f"output {name!r}: {path!r} names no component of the model") from None
    if output not in comp.output_specs():
        raise SpecError(
            f"output {name!r}: {type(comp).__name__} {path!r} has no output {output!r}; it has "
            f"{sorted(comp.output_specs())}"
        )


def _controls(system, controls) -> np.ndarray:
    n = len(system.actuator_names)
    try:
        value = np.broadcast_to(np.asarray(controls, float), (n,)).copy()
    except (TypeError, ValueError):
        raise SpecError(
            f"'controls' must be a number or {n} numbers (one an actuator, "
            f"{list(system.actuator_names)}), got {controls!r}"
        ) from None
    return value


def _columns(system, table):
    import pyarrow as pa

    from ..simulate import property_target

    properties, states, controls, case = {}, {}, {}, None
    n = table.num_rows
    if n == 0:
        raise SpecError("'cases': the table has no rows")
    for name in table.column_names:
        column = table.column(name)
        if name == "case":
            if not pa.types.is_integer(column.type) or column.null_count:
                raise SpecError(f"column 'case': the case ids must be integers without gaps, got {column.type}")
            case = column.to_numpy().astype(np.int64)
            if len(np.unique(case)) != n:
                raise SpecError("column 'case': the case ids must be unique")
            continue
        if "|" in name:
            try:
                target = property_target(system, name)
            except ValueError as e:
                raise SpecError(f"column {name!r}: {e}") from None
        elif name in system.y_names or name in system.actuator_paths:
            target = None
        else:
            actuators = f", nor an actuator's path (e.g. {system.actuator_paths[0]!r})" if system.actuator_paths else ""
            raise SpecError(
                f"column {name!r}: neither a model property ('component path|property') nor a state "
                f"variable of the model (e.g. {system.y_names[0]!r}){actuators}"
            )
        if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            raise SpecError(f"column {name!r}: must be numeric, but its type is {column.type}")
        if column.null_count:
            raise SpecError(f"column {name!r}: {column.null_count} missing value(s)")
        values = column.to_numpy().astype(np.float64)
        if target is None:
            (controls if name in system.actuator_paths else states)[name] = values
            continue
        path, prop, _ = target
        bounds = system.find(path).property_fields()[prop].metadata.get("bounds")
        lo, hi = bounds or (None, None)
        bad = np.flatnonzero((values < lo if lo is not None else False) | (values > hi if hi is not None else False))
        if bad.size:
            raise SpecError(
                f"column {name!r}: row {int(bad[0])} has {values[bad[0]]!r}, outside the property's bounds [{lo}, {hi}]"
            )
        properties[name] = values
    if case is None:
        case = np.arange(n, dtype=np.int64)
    return properties, states, controls, case


def _fingerprint(settings: dict, properties: dict, states: dict, case: np.ndarray, controls: dict) -> str:
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for group in (properties, states) + ((controls,) if controls else ()):
        for name in sorted(group):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(group[name]).tobytes())
    digest.update(np.ascontiguousarray(case).tobytes())
    return digest.hexdigest()
