"""Time-series data tables and OpenSim-compatible file adapters.

This is the numpy counterpart of OpenSim's data-handling classes (OpenSim API
guide, "Data Handling Classes"):

- ``TimeSeriesTable`` holds one independent, strictly increasing time column and
  a set of labelled dependent columns, either scalar (OpenSim's
  ``TimeSeriesTable``, values of shape ``(n_rows, n_columns)``) or vector valued
  (``TimeSeriesTableVec3`` and friends, values of shape
  ``(n_rows, n_columns, k)``), plus table and per-column metadata.
- ``STOFileAdapter``, ``CSVFileAdapter`` and ``TRCFileAdapter`` read and write
  the text formats OpenSim 4.6 uses; ``read_table``/``write_table`` pick one by
  file extension through the ``ADAPTERS`` registry, like ``FileAdapter::read``
  and ``FileAdapter::write``.

Numbers are written with the shortest representation that round-trips a
float64 exactly (``repr``), so a table written and read back here is
bit-for-bit identical (NaN payloads aside). Files written by OpenSim itself
carry 16 significant digits; reading those gives exactly what OpenSim's own
readers give.

Malformed files raise ``TableFileError`` (a ``ValueError``) naming the file,
the line and the problem. Reading never loops on the header counts in a file,
so corrupt counts cannot make it hang or allocate huge buffers.

Known differences from OpenSim, all deliberate:

- A header line ``key=value`` is split at the first ``=`` (OpenSim splits at the
  last); keys and values are stripped of surrounding whitespace.
- Data values must be numbers (``nan``/``inf`` included); OpenSim silently
  reads anything unparsable as NaN. Empty fields are NaN only in ``.trc``.
- Blank lines may end the data block, but data after a blank line is an error
  (OpenSim silently ignores it). ``nRows`` (old Storage files) and
  ``NumFrames`` (``.trc``) must match the number of data rows.
- ``.csv`` files without a header block (just a ``time,...`` label line) are
  accepted.
- ``inf`` values are written as ``inf``; OpenSim reads those (and overflowing
  numbers such as ``1e999``) as NaN, where this module reads ``inf``.
- The ``header`` metadata (free-text header lines) is only set when there is
  some; OpenSim always sets it, possibly to ``""``.
- In old Storage files, labels are split at tabs when the label line has any
  (so labels may contain spaces); OpenSim's ``Storage`` class also splits them
  at spaces.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .outputs import open_output

__all__ = [
    "TableFileError",
    "TimeSeriesTable",
    "convert_degrees",
    "FileAdapter",
    "STOFileAdapter",
    "CSVFileAdapter",
    "TRCFileAdapter",
    "ADAPTERS",
    "register_adapter",
    "adapter_for",
    "read_table",
    "write_table",
    "format_float",
    "WRITER_VERSION",
]

#: Value written on the ``OpenSimVersion=`` header line of ``.sto``/``.csv``
#: files. OpenSim discards this line when reading.
WRITER_VERSION = "4.6-simjax"

# Component counts of the OpenSim element types an STO file may declare.
_DATA_TYPES: dict[str, int | None] = {
    "double": None,
    "UnitVec3": 3,
    "Quaternion": 4,
    "SpatialVec": 6,
    **{f"Vec{k}": k for k in range(2, 13)},
}


class TableFileError(ValueError):
    """A data file is malformed.

    The message reads ``"<path>, line <n>: <reason>"`` (the line part is left
    out when no single line is to blame).

    **Arguments:**

    - ``path``: the file (or ``"<string>"`` for text parsed from memory).
    - ``line``: 1-based line number, or ``None``.
    - ``reason``: what is wrong.
    """

    def __init__(self, path: str | os.PathLike, line: int | None, reason: str):
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.line, self.reason))


# --------------------------------------------------------------------------- #
# The table
# --------------------------------------------------------------------------- #


def _default_suffixes(k: int) -> tuple[str, ...]:
    if k == 3:
        return ("_x", "_y", "_z")
    return tuple(f"_{i + 1}" for i in range(k))


def _nan_equal(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise equality where NaN equals NaN (exact when tolerances are 0)."""
    if rtol == 0.0 and atol == 0.0:
        return (a == b) | (np.isnan(a) & np.isnan(b))
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


class TimeSeriesTable:
    """A table of time-stamped rows with labelled columns and metadata.

    The numpy counterpart of OpenSim's ``TimeSeriesTable`` (scalar columns) and
    ``TimeSeriesTableVec3`` (or any ``VecK``, ``2 <= K <= 12``): one
    independent time column (float64, finite, strictly increasing) and dependent
    columns stored together in ``values`` of shape ``(n_rows, n_columns)`` or
    ``(n_rows, n_columns, k)``.

    ``metadata`` is an ordered ``dict`` of ``str -> str`` (for example
    ``inDegrees``, ``DataRate``, ``Units``, and ``header``, the free text of a
    file's header such as the table's name). ``column_metadata`` maps a column
    label to a ``dict`` of that column's metadata. Both are plain mutable dicts.

    ``times`` and ``values`` are read-only views; methods other than
    ``append_row`` and ``append_column`` return new tables.

    **Arguments:**

    - ``times``: the independent column, shape ``(n_rows,)``.
    - ``values``: shape ``(n_rows, n_columns)`` or ``(n_rows, n_columns, k)``;
      may be omitted for a table without rows (see ``vec_size``).
    - ``labels``: one unique, non-empty string per column; defaults to
      ``"col0"``, ``"col1"``, ... when omitted.
    - ``metadata``: table metadata; values are converted with ``str``.
    - ``column_metadata``: per-column metadata, ``label -> dict``.
    - ``vec_size``: components per element (``None`` for scalars) when
      ``values`` is omitted.

    **Raises:** ``ValueError`` for inconsistent shapes, non-finite or
    non-increasing times, or bad labels.
    """

    __hash__ = None  # mutable, and __eq__ compares contents

    def __init__(
        self,
        times: Iterable[float] | np.ndarray = (),
        values: np.ndarray | Sequence | None = None,
        labels: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        column_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        vec_size: int | None = None,
    ):
        t = np.array(times, dtype=np.float64, copy=True)
        if t.ndim != 1:
            raise ValueError(f"times must be one-dimensional, got shape {t.shape}")
        n = t.shape[0]
        if values is None:
            if labels is None:
                labels = ()
            if n and len(labels):
                raise ValueError("values are required when the table has rows and columns")
            shape = (n, len(labels)) if vec_size is None else (n, len(labels), int(vec_size))
            v = np.zeros(shape)
        else:
            v = np.array(values, dtype=np.float64, copy=True)
            if v.ndim == 1 and n == 0 and v.size == 0:
                v = v.reshape(0, 0)
            if v.ndim not in (2, 3):
                raise ValueError(
                    f"values must have shape (n_rows, n_columns) or (n_rows, n_columns, k), got shape {v.shape}"
                )
            if vec_size is not None and (v.ndim != 3 or v.shape[2] != vec_size):
                raise ValueError(f"values of shape {v.shape} do not match vec_size={vec_size}")
        if v.ndim == 3 and not 2 <= v.shape[2] <= 12:
            raise ValueError(f"vector elements must have 2 to 12 components, got {v.shape[2]}")
        if v.shape[0] != n:
            raise ValueError(f"{n} times but {v.shape[0]} rows of values")
        if labels is None:
            labels = [f"col{i}" for i in range(v.shape[1])]
        labels = list(labels)
        if len(labels) != v.shape[1]:
            raise ValueError(f"{len(labels)} labels for {v.shape[1]} columns")
        self._check_labels(labels)
        self._check_times(t)

        self._t = t
        self._v = v
        self._n = n
        self._labels = labels
        self._index = {lab: i for i, lab in enumerate(labels)}
        self._metadata: dict[str, str] = {str(k): str(x) for k, x in (metadata or {}).items()}
        self._column_metadata: dict[str, dict] = {
            lab: dict(column_metadata[lab]) for lab in labels if column_metadata and lab in column_metadata
        }

    # -- validation --------------------------------------------------------- #

    @staticmethod
    def _check_labels(labels: Sequence[str]) -> None:
        seen = set()
        for lab in labels:
            if not isinstance(lab, str) or not lab:
                raise ValueError(f"column labels must be non-empty strings, got {lab!r}")
            if lab in seen:
                raise ValueError(f"duplicate column label {lab!r}")
            seen.add(lab)

    @staticmethod
    def _check_times(t: np.ndarray) -> None:
        if t.size == 0:
            return
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise ValueError(f"time at row {bad[0]} is not finite ({float(t[bad[0]])!r})")
        bad = np.flatnonzero(np.diff(t) <= 0)
        if bad.size:
            i = bad[0] + 1
            raise ValueError(
                f"times must be strictly increasing: row {i} has time {float(t[i])!r} "
                f"after {float(t[i - 1])!r} at row {i - 1}"
            )

    # -- shape and contents ------------------------------------------------- #

    @property
    def n_rows(self) -> int:
        """Number of rows (time samples)."""
        return self._n

    @property
    def n_columns(self) -> int:
        """Number of dependent columns (the time column is not counted)."""
        return len(self._labels)

    @property
    def vec_size(self) -> int | None:
        """Components per element: ``None`` for a scalar table, ``k`` for ``VecK``."""
        return None if self._v.ndim == 2 else int(self._v.shape[2])

    @property
    def is_vec3(self) -> bool:
        """Whether this is a ``Vec3`` table (OpenSim ``TimeSeriesTableVec3``)."""
        return self.vec_size == 3

    @property
    def data_type(self) -> str:
        """OpenSim's name of the element type: ``"double"`` or ``"Vec<k>"``."""
        k = self.vec_size
        return "double" if k is None else f"Vec{k}"

    @property
    def labels(self) -> tuple[str, ...]:
        """The column labels, in column order."""
        return tuple(self._labels)

    @property
    def times(self) -> np.ndarray:
        """The independent column, shape ``(n_rows,)`` (read-only view)."""
        view = self._t[: self._n]
        view.flags.writeable = False
        return view

    @property
    def values(self) -> np.ndarray:
        """The dependent data, ``(n_rows, n_columns[, k])`` (read-only view)."""
        view = self._v[: self._n]
        view.flags.writeable = False
        return view

    @property
    def metadata(self) -> dict[str, str]:
        """Table metadata, an ordered ``dict`` (mutable; values should be ``str``)."""
        return self._metadata

    @property
    def column_metadata(self) -> dict[str, dict]:
        """Per-column metadata, ``label -> dict`` (mutable)."""
        return self._column_metadata

    @property
    def in_degrees(self) -> bool:
        """Whether metadata says angles are in degrees (``inDegrees=yes``).

        Setting it writes ``inDegrees`` as ``"yes"``/``"no"``; values are not
        converted (see ``convert_degrees``).
        """
        return str(self._metadata.get("inDegrees", "no")).strip().lower() in ("yes", "y", "true", "1")

    @in_degrees.setter
    def in_degrees(self, flag: bool) -> None:
        self._metadata["inDegrees"] = "yes" if flag else "no"

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        shown = ", ".join(repr(lab) for lab in self._labels[:6])
        more = ", ..." if len(self._labels) > 6 else ""
        span = f", t=[{float(self._t[0])!r}, {float(self._t[self._n - 1])!r}]" if self._n else ""
        return (
            f"TimeSeriesTable(n_rows={self._n}, n_columns={self.n_columns}, "
            f"data_type={self.data_type!r}{span}, labels=[{shown}{more}])"
        )

    def column_index(self, label: str) -> int:
        """Index of a column.

        **Arguments:**

        - ``label``: the column label.

        **Returns:** its 0-based position. **Raises:** ``KeyError`` if absent.
        """
        try:
            return self._index[label]
        except KeyError:
            raise KeyError(f"no column labelled {label!r}") from None

    def has_column(self, label: str) -> bool:
        """Whether a column exists.

        **Arguments:**

        - ``label``: the column label.

        **Returns:** ``True`` if the table has a column with that label.
        """
        return label in self._index

    def column(self, label: str) -> np.ndarray:
        """One dependent column.

        **Arguments:**

        - ``label``: the column label.

        **Returns:** a copy, shape ``(n_rows,)`` or ``(n_rows, k)``.
        **Raises:** ``KeyError`` if absent.
        """
        return self._v[: self._n, self.column_index(label)].copy()

    def __getitem__(self, label: str) -> np.ndarray:
        return self.column(label)

    def row(self, i: int) -> np.ndarray:
        """The dependent values of one row (OpenSim ``getRowAtIndex``).

        **Arguments:**

        - ``i``: row index; negative values count from the end.

        **Returns:** a copy, shape ``(n_columns,)`` or ``(n_columns, k)``; the
        row's time is ``times[i]``. **Raises:** ``IndexError`` if out of range.
        """
        if not -self._n <= i < self._n:
            raise IndexError(f"row {i} out of range for a table with {self._n} rows")
        return self._v[i % self._n].copy()

    # -- in-place growth ---------------------------------------------------- #

    def append_row(self, time: float, values: Sequence | np.ndarray) -> None:
        """Append one row in place (OpenSim ``appendRow``).

        **Arguments:**

        - ``time``: must be finite and greater than the last time.
        - ``values``: shape ``(n_columns,)`` or ``(n_columns, k)``.

        **Raises:** ``ValueError`` for a bad time or shape.
        """
        time = float(time)
        if not math.isfinite(time):
            raise ValueError(f"time must be finite, got {time!r}")
        if self._n and time <= self._t[self._n - 1]:
            raise ValueError(
                f"times must be strictly increasing: {time!r} is not greater than "
                f"the last time {float(self._t[self._n - 1])!r}"
            )
        row = np.asarray(values, dtype=np.float64)
        if row.shape != self._v.shape[1:]:
            raise ValueError(f"row has shape {row.shape}, expected {self._v.shape[1:]}")
        if self._n == self._t.shape[0]:
            cap = max(8, 2 * self._n)
            t = np.empty(cap)
            t[: self._n] = self._t[: self._n]
            v = np.empty((cap,) + self._v.shape[1:])
            v[: self._n] = self._v[: self._n]
            self._t, self._v = t, v
        self._t[self._n] = time
        self._v[self._n] = row
        self._n += 1

    def append_column(self, label: str, values: Sequence | np.ndarray, metadata: Mapping | None = None) -> None:
        """Append one dependent column in place (OpenSim ``appendColumn``).

        **Arguments:**

        - ``label``: a new, unique, non-empty label.
        - ``values``: shape ``(n_rows,)`` or ``(n_rows, k)`` matching the table.
        - ``metadata``: optional metadata for the new column.

        **Raises:** ``ValueError`` for a bad label or shape.
        """
        self._check_labels(self._labels + [label])
        col = np.asarray(values, dtype=np.float64)
        expected = (self._n,) + self._v.shape[2:]
        if col.shape != expected:
            raise ValueError(f"column has shape {col.shape}, expected {expected}")
        self._v = np.concatenate([self._v[: self._n], col[:, None]], axis=1)
        self._t = self._t[: self._n].copy()
        self._labels.append(label)
        self._index[label] = len(self._labels) - 1
        if metadata is not None:
            self._column_metadata[label] = dict(metadata)

    # -- derived tables ----------------------------------------------------- #

    def _derive(self, times, values, labels, metadata=None, column_metadata=None) -> TimeSeriesTable:
        return TimeSeriesTable(
            times,
            values,
            labels,
            self._metadata if metadata is None else metadata,
            self._column_metadata if column_metadata is None else column_metadata,
            vec_size=self.vec_size if np.ndim(values) == 3 else None,
        )

    def copy(self) -> TimeSeriesTable:
        """A deep copy.

        **Returns:** a new table with copied data and metadata.
        """
        return self._derive(self.times, self.values, self._labels)

    def select_columns(self, labels: Sequence[str]) -> TimeSeriesTable:
        """A table with only some columns, in the given order.

        **Arguments:**

        - ``labels``: the columns to keep.

        **Returns:** a new table (metadata copied). **Raises:** ``KeyError`` for
        an unknown label, ``ValueError`` for a repeated one.
        """
        idx = [self.column_index(lab) for lab in labels]
        return self._derive(self.times, self.values[:, idx], list(labels))

    def drop_columns(self, labels: Sequence[str]) -> TimeSeriesTable:
        """A table without some columns (OpenSim ``removeColumn``, not in place).

        **Arguments:**

        - ``labels``: the columns to remove.

        **Returns:** a new table. **Raises:** ``KeyError`` for an unknown label.
        """
        drop = {self._labels[self.column_index(lab)] for lab in labels}
        return self.select_columns([lab for lab in self._labels if lab not in drop])

    def slice_time(self, t0: float | None = None, t1: float | None = None) -> TimeSeriesTable:
        """Rows with ``t0 <= time <= t1`` (OpenSim ``trim``, not in place).

        **Arguments:**

        - ``t0``: start time, inclusive; ``None`` for the first row.
        - ``t1``: end time, inclusive; ``None`` for the last row.

        **Returns:** a new table, possibly without rows. **Raises:**
        ``ValueError`` if ``t0 > t1``.
        """
        t = self.times
        lo = -math.inf if t0 is None else float(t0)
        hi = math.inf if t1 is None else float(t1)
        if lo > hi:
            raise ValueError(f"t0={t0!r} is after t1={t1!r}")
        i0 = int(np.searchsorted(t, lo, side="left"))
        i1 = int(np.searchsorted(t, hi, side="right"))
        return self._derive(t[i0:i1], self.values[i0:i1], self._labels)

    def interpolate(self, t: float | Sequence[float] | np.ndarray) -> np.ndarray:
        """Linearly interpolate every column at the given time(s).

        At a sample time the stored value is returned exactly. A NaN sample
        makes the intervals next to it NaN.

        **Arguments:**

        - ``t``: a time or an array of times within ``[times[0], times[-1]]``.

        **Returns:** shape ``values.shape[1:]`` for a scalar ``t``, otherwise
        ``np.shape(t) + values.shape[1:]``. **Raises:** ``ValueError`` for an
        empty table or a time outside the sampled range.
        """
        tq = np.asarray(t, dtype=np.float64)
        times, vals = self.times, self.values
        if self._n == 0:
            raise ValueError("cannot interpolate a table without rows")
        flat = tq.reshape(-1)
        outside = ~((flat >= times[0]) & (flat <= times[-1]))
        if outside.any():
            raise ValueError(
                f"time {float(flat[outside][0])!r} is outside the table's range "
                f"[{float(times[0])!r}, {float(times[-1])!r}]"
            )
        if self._n == 1:
            out = np.broadcast_to(vals[0], flat.shape + vals.shape[1:]).copy()
        else:
            i = np.clip(np.searchsorted(times, flat, side="right") - 1, 0, self._n - 2)
            t0, t1 = times[i], times[i + 1]
            w = ((flat - t0) / (t1 - t0)).reshape((-1,) + (1,) * (vals.ndim - 1))
            v0, v1 = vals[i], vals[i + 1]
            with np.errstate(invalid="ignore"):  # inf/NaN samples give NaN in between
                out = v0 + w * (v1 - v0)
            # Return samples exactly, even next to an inf/NaN neighbour.
            out = np.where(w == 0.0, v0, np.where(w == 1.0, v1, out))
        return out.reshape(tq.shape + vals.shape[1:])

    def resample(self, times: Sequence[float] | np.ndarray) -> TimeSeriesTable:
        """A table sampled at new times by linear interpolation.

        **Arguments:**

        - ``times``: strictly increasing times within the sampled range.

        **Returns:** a new table with the same labels and metadata.
        """
        times = np.asarray(times, dtype=np.float64).reshape(-1)
        return self._derive(times, self.interpolate(times), self._labels)

    def flatten(self, suffixes: Sequence[str] | None = None) -> TimeSeriesTable:
        """Split vector columns into scalar columns (OpenSim ``flatten``).

        Column ``m`` of a ``Vec3`` table becomes ``m_x``, ``m_y``, ``m_z``;
        per-column metadata is copied to each component column.

        **Arguments:**

        - ``suffixes``: one per component; defaults to ``("_x", "_y", "_z")``
          for ``Vec3`` and ``("_1", "_2", ...)`` otherwise (OpenSim's default).

        **Returns:** a scalar table (a copy if this one is already scalar).
        """
        k = self.vec_size
        if k is None:
            return self.copy()
        suffixes = _default_suffixes(k) if suffixes is None else tuple(suffixes)
        if len(suffixes) != k:
            raise ValueError(f"need {k} suffixes, got {len(suffixes)}")
        labels = [lab + s for lab in self._labels for s in suffixes]
        colmeta = {
            lab + s: dict(self._column_metadata[lab])
            for lab in self._labels
            if lab in self._column_metadata
            for s in suffixes
        }
        vals = self.values.reshape(self._n, self.n_columns * k)
        return TimeSeriesTable(self.times, vals, labels, self._metadata, colmeta)

    def pack(self, vec_size: int = 3, suffixes: Sequence[str] | None = None) -> TimeSeriesTable:
        """Group consecutive scalar columns into vector columns (OpenSim ``pack``).

        The inverse of ``flatten``: columns ``m_x, m_y, m_z`` become column
        ``m`` of a ``Vec3`` table. Per-column metadata is taken from the first
        column of each group.

        **Arguments:**

        - ``vec_size``: components per element (2 to 12).
        - ``suffixes``: as in ``flatten``; same defaults.

        **Returns:** a vector table. **Raises:** ``ValueError`` if this table is
        not scalar, its column count is not a multiple of ``vec_size``, or the
        labels do not carry the suffixes.
        """
        if self.vec_size is not None:
            raise ValueError("only a scalar table can be packed")
        k = int(vec_size)
        suffixes = _default_suffixes(k) if suffixes is None else tuple(suffixes)
        if len(suffixes) != k:
            raise ValueError(f"need {k} suffixes, got {len(suffixes)}")
        if self.n_columns % k:
            raise ValueError(f"{self.n_columns} columns cannot be packed in groups of {k}")
        labels, colmeta = [], {}
        for g in range(self.n_columns // k):
            group = self._labels[g * k : (g + 1) * k]
            bases = {lab[: len(lab) - len(s)] for lab, s in zip(group, suffixes) if lab.endswith(s)}
            if len(bases) != 1 or not all(lab.endswith(s) for lab, s in zip(group, suffixes)):
                raise ValueError(f"columns {group} do not share a base label with suffixes {suffixes}")
            base = bases.pop()
            labels.append(base)
            if group[0] in self._column_metadata:
                colmeta[base] = dict(self._column_metadata[group[0]])
        vals = self.values.reshape(self._n, self.n_columns // k, k)
        return TimeSeriesTable(self.times, vals, labels, self._metadata, colmeta, vec_size=k)

    # -- conversions -------------------------------------------------------- #

    def to_numpy(self, include_time: bool = False) -> np.ndarray:
        """The data as a new array.

        **Arguments:**

        - ``include_time``: prepend the time column (scalar tables only; use
          ``flatten()`` first for vector tables).

        **Returns:** a copy of ``values``, or an ``(n_rows, 1 + n_columns)``
        array with time first.
        """
        if not include_time:
            return self.values.copy()
        if self.vec_size is not None:
            raise ValueError("include_time needs a scalar table; call flatten() first")
        return np.column_stack([self.times, self.values]) if self.n_columns else self.times[:, None].copy()

    def to_dict(self) -> dict[str, np.ndarray]:
        """The data as ``{"time": times, label: column, ...}`` (copies).

        **Returns:** a dict, time first, then columns in order.
        """
        out = {"time": self.times.copy()}
        for lab in self._labels:
            out[lab] = self.column(lab)
        return out

    @classmethod
    def from_dict(
        cls,
        columns: Mapping[str, Any],
        times: Sequence[float] | np.ndarray | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> TimeSeriesTable:
        """Build a table from a mapping of columns.

        **Arguments:**

        - ``columns``: ``label -> array``; each of shape ``(n_rows,)`` (scalar
          table) or all of shape ``(n_rows, k)`` (vector table). A ``"time"``
          entry is used as the time column when ``times`` is not given.
        - ``times``: the time column.
        - ``metadata``: table metadata.

        **Returns:** a new table.
        """
        columns = dict(columns)
        if times is None:
            if "time" not in columns:
                raise ValueError("give times= or a 'time' entry in columns")
            times = columns.pop("time")
        times = np.asarray(times, dtype=np.float64)
        labels = list(columns)
        arrays = [np.asarray(columns[lab], dtype=np.float64) for lab in labels]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"columns have different shapes: {sorted(shapes)}")
        if not arrays:
            return cls(times, np.zeros((times.shape[0], 0)), [], metadata)
        vals = np.stack(arrays, axis=1)
        return cls(times, vals, labels, metadata)

    def to_pandas(self, suffixes: Sequence[str] | None = None):
        """The table as a ``pandas.DataFrame`` indexed by time.

        Vector tables are flattened first (see ``flatten``). The metadata go to
        ``DataFrame.attrs["metadata"]`` and ``attrs["column_metadata"]``.

        **Arguments:**

        - ``suffixes``: component suffixes for vector tables.

        **Returns:** a DataFrame with index named ``"time"``. **Raises:**
        ``ImportError`` if pandas is not installed.
        """
        pd = _require_pandas()
        flat = self.flatten(suffixes) if self.vec_size is not None else self
        df = pd.DataFrame(
            flat.values.copy(),
            index=pd.Index(flat.times.copy(), name="time"),
            columns=list(flat.labels),
        )
        df.attrs["metadata"] = dict(flat.metadata)
        df.attrs["column_metadata"] = {k: dict(v) for k, v in flat.column_metadata.items()}
        return df

    @classmethod
    def from_pandas(cls, df, time_column: str | None = None, metadata: Mapping[str, Any] | None = None):
        """Build a scalar table from a ``pandas.DataFrame``.

        **Arguments:**

        - ``df``: the frame. Time comes from ``time_column``, else from a
          column named ``"time"``, else from the index.
        - ``time_column``: name of the time column.
        - ``metadata``: table metadata; defaults to ``df.attrs["metadata"]``.

        **Returns:** a new scalar table (``column_metadata`` from
        ``df.attrs["column_metadata"]`` when present). **Raises:**
        ``ImportError`` if pandas is not installed.
        """
        _require_pandas()
        if time_column is None and "time" in df.columns:
            time_column = "time"
        if time_column is not None:
            times = df[time_column].to_numpy(dtype=np.float64)
            data = df.drop(columns=[time_column])
        else:
            times = df.index.to_numpy(dtype=np.float64)
            data = df
        labels = [str(c) for c in data.columns]
        if metadata is None:
            metadata = df.attrs.get("metadata")
        return cls(
            times,
            data.to_numpy(dtype=np.float64).reshape(len(times), len(labels)),
            labels,
            metadata,
            df.attrs.get("column_metadata"),
        )

    # -- comparison --------------------------------------------------------- #

    def assert_equal(
        self, other: TimeSeriesTable, *, rtol: float = 0.0, atol: float = 0.0, check_metadata: bool = True
    ) -> None:
        """Assert that two tables hold the same data (NaN equals NaN).

        **Arguments:**

        - ``other``: the table to compare with.
        - ``rtol``, ``atol``: tolerances for times and values (exact by default).
        - ``check_metadata``: also compare table and per-column metadata.

        **Raises:** ``AssertionError`` describing the first difference.
        """
        if not isinstance(other, TimeSeriesTable):
            raise AssertionError(f"not a TimeSeriesTable: {type(other).__name__}")
        if self.labels != other.labels:
            raise AssertionError(f"labels differ: {self.labels} != {other.labels}")
        if self.values.shape != other.values.shape:
            raise AssertionError(f"shapes differ: {self.values.shape} != {other.values.shape}")
        ok = _nan_equal(self.times, other.times, rtol, atol)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise AssertionError(f"time at row {i} differs: {float(self.times[i])!r} != {float(other.times[i])!r}")
        ok = _nan_equal(self.values, other.values, rtol, atol)
        if not ok.all():
            idx = tuple(int(j) for j in np.argwhere(~ok)[0])
            raise AssertionError(
                f"value at row {idx[0]}, column {self._labels[idx[1]]!r}"
                f"{'' if len(idx) == 2 else f', component {idx[2]}'} differs: "
                f"{float(self.values[idx])!r} != {float(other.values[idx])!r}"
            )
        if check_metadata:
            if self._metadata != other._metadata:
                raise AssertionError(f"metadata differ: {self._metadata} != {other._metadata}")
            if self._column_metadata != other._column_metadata:
                raise AssertionError(f"column metadata differ: {self._column_metadata} != {other._column_metadata}")

    def equals(self, other: object, *, rtol: float = 0.0, atol: float = 0.0, check_metadata: bool = True) -> bool:
        """Whether two tables hold the same data (NaN equals NaN).

        **Arguments:** as ``assert_equal``.

        **Returns:** ``True`` if ``assert_equal`` would pass.
        """
        try:
            self.assert_equal(other, rtol=rtol, atol=atol, check_metadata=check_metadata)
        except AssertionError:
            return False
        return True

    def __eq__(self, other: object):
        if not isinstance(other, TimeSeriesTable):
            return NotImplemented
        return self.equals(other)


def _require_pandas():
    try:
        import pandas
    except ImportError as exc:  # pragma: no cover - pandas is optional
        raise ImportError("pandas is required for this TimeSeriesTable method (pip install pandas)") from exc
    return pandas


def convert_degrees(table: TimeSeriesTable, to_radians: bool, columns: Iterable[str] | None = None) -> TimeSeriesTable:
    """Convert angle columns between degrees and radians.

    Files keep angles in whatever unit ``inDegrees`` says; readers never
    convert. This converts the chosen columns and sets ``inDegrees``.

    **Arguments:**

    - ``table``: the table.
    - ``to_radians``: ``True`` to convert degrees to radians, ``False`` for the
      reverse.
    - ``columns``: labels of the angle columns; ``None`` converts every column.

    **Returns:** a new table with ``inDegrees`` set to ``"no"`` (radians) or
    ``"yes"``. **Raises:** ``ValueError`` if ``inDegrees`` already says the
    target unit; ``KeyError`` for an unknown column.
    """
    if "inDegrees" in table.metadata and table.in_degrees != bool(to_radians):
        unit = "radians" if to_radians else "degrees"
        raise ValueError(f"table is already in {unit} (inDegrees={table.metadata['inDegrees']})")
    labels = table.labels if columns is None else list(columns)
    idx = sorted({table.column_index(lab) for lab in labels})
    vals = table.to_numpy()
    factor = math.pi / 180.0 if to_radians else 180.0 / math.pi
    vals[:, idx] *= factor
    out = TimeSeriesTable(
        table.times, vals, table.labels, table.metadata, table.column_metadata, vec_size=table.vec_size
    )
    out.in_degrees = not to_radians
    return out


# --------------------------------------------------------------------------- #
# Text helpers
# --------------------------------------------------------------------------- #

_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)", re.ASCII | re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?\d{1,18}", re.ASCII)


def format_float(x: float) -> str:
    """The shortest text that reads back as exactly the same float64.

    **Arguments:**

    - ``x``: the number.

    **Returns:** ``repr(float(x))`` with a trailing ``".0"`` dropped (``"2"``,
    ``"0.1"``, ``"1e-300"``, ``"nan"``, ``"-inf"``).
    """
    s = repr(float(x))
    return s[:-2] if s.endswith(".0") else s


def _fmt_list(xs: Iterable[float]) -> list[str]:
    return [s[:-2] if s[-2:] == ".0" else s for s in map(repr, xs)]


def _parse_floats(tokens: Sequence[str], src: str, lineno: int, what: str = "value") -> list[float]:
    """Parse tokens as floats, raising TableFileError at the first bad one."""
    if all(map(_NUMBER.fullmatch, tokens)):
        return list(map(float, tokens))
    bad = next(tok for tok in tokens if not _NUMBER.fullmatch(tok))
    shown = bad if len(bad) <= 40 else bad[:37] + "..."
    if not bad:
        raise TableFileError(src, lineno, f"empty {what}")
    raise TableFileError(src, lineno, f"non-numeric {what} {shown!r}")


#: the characters of the numbers ``_NUMBER`` accepts
_NUMBER_CHARS = frozenset("0123456789+-.eEnNaAiIfFtTyY")


def _float_block(rows: list[list[str]]) -> np.ndarray | None:
    """Every token of ``rows`` (of equal length) as one float array ``(len(rows), k)``,
    or ``None`` when some token is not a number ``_NUMBER`` accepts (the caller then
    parses row by row to name it)."""
    flat = [tok for row in rows for tok in row]
    # with only these characters, what ``float`` accepts is what ``_NUMBER`` accepts
    if not (flat and all(flat) and set("".join(flat)) <= _NUMBER_CHARS):
        return None
    try:
        return np.array(list(map(float, flat)), np.float64).reshape(len(rows), -1)
    except ValueError:
        return None


def _parse_rows(rows: list[list[str]], row_lines: list[int], src: str) -> tuple[list[float], list[list[float]]]:
    """Times and values of scalar data rows (tokens, time first), as ``_parse_floats``
    parses them, row by row only to name a bad token's line."""
    block = _float_block(rows)
    if block is not None:
        return block[:, 0].tolist(), block[:, 1:]
    times, out = [], []
    for row, lineno in zip(rows, row_lines):
        times.append(_parse_floats(row[:1], src, lineno, "time")[0])
        out.append(_parse_floats(row[1:], src, lineno))
    return times, out


def _parse_int(text: str, src: str, lineno: int | None, what: str) -> int:
    text = text.strip()
    if not _INTEGER.fullmatch(text):
        raise TableFileError(src, lineno, f"{what} must be an integer, got {text[:40]!r}")
    return int(text)


def _split_lines(text: str) -> list[str]:
    """Split on newlines only (not the other separators str.splitlines knows)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def _tokenize(line: str, delim: str) -> list[str]:
    """Split like OpenSim's FileAdapter::tokenize: a trailing delimiter adds
    no empty token, inner empty fields are kept, tokens are stripped."""
    parts = line.split(delim)
    if parts[-1] == "":
        parts.pop()
    return [p.strip() for p in parts]


def _read_text(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Old files sometimes carry Latin-1 marker names; every byte decodes.
        return data.decode("latin-1")


def _write_text(path: str | os.PathLike, lines: list[str]) -> None:
    with open_output(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines))
        f.write("\n")


def _check_writable_labels(table: TimeSeriesTable, forbidden: str) -> None:
    for lab in table.labels:
        if lab != lab.strip() or any(c in lab for c in forbidden + "\n\r"):
            raise ValueError(
                f"column label {lab!r} cannot be written: it has surrounding whitespace "
                f"or one of {forbidden + chr(10)!r}"
            )


def _make_table(src: str, times, values, labels, metadata, lines: list[int], vec_size=None) -> TimeSeriesTable:
    """Validate times (with line numbers) and build the table."""
    t = np.asarray(times, dtype=np.float64)
    if t.size:
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise TableFileError(src, lines[bad[0]], f"time {float(t[bad[0]])!r} is not finite")
        # a row repeating the row before it (its time, its values to the printed digits:
        # 1e-8 relative) holds no data of its own: OpenSim ends some results with one
        # (RRA's kinematics) and reads them; it is dropped, with a warning
        v = np.asarray(values, dtype=np.float64).reshape(len(t), -1)
        same = np.abs(v[1:] - v[:-1]) <= 1e-8 * np.maximum(1.0, np.abs(v[1:]))
        same |= np.isnan(v[1:]) & np.isnan(v[:-1])
        repeat = np.flatnonzero((np.diff(t) == 0) & np.all(same, axis=1)) + 1
        if repeat.size:
            warnings.warn(
                f"{src}: line {lines[repeat[0]]} repeats the row before it (time {float(t[repeat[0]])!r}); "
                f"{repeat.size} such row(s) dropped",
                stacklevel=4,
            )
            keep = np.setdiff1d(np.arange(len(t)), repeat)
            t, lines = t[keep], [lines[k] for k in keep]
            values = np.asarray(values)[keep]
        bad = np.flatnonzero(np.diff(t) <= 0)
        if bad.size:
            i = bad[0] + 1
            raise TableFileError(
                src,
                lines[i],
                f"time {float(t[i])!r} is not greater than the previous time {float(t[i - 1])!r} "
                f"(line {lines[i - 1]}); times must be strictly increasing",
            )
    try:
        return TimeSeriesTable(t, values, labels, metadata, vec_size=vec_size)
    except ValueError as exc:  # defensive: checks above should catch everything
        raise TableFileError(src, None, str(exc)) from exc


# --------------------------------------------------------------------------- #
# Adapters
# --------------------------------------------------------------------------- #


class FileAdapter:
    """Base class of the file adapters (OpenSim ``FileAdapter``).

    Subclasses implement ``parse`` (text to table) and ``format`` (table to
    lines of text); ``read`` and ``write`` add the file handling.
    """

    #: Extensions (lower case, with the dot) this adapter is registered for.
    extensions: tuple[str, ...] = ()

    def read(self, path: str | os.PathLike) -> TimeSeriesTable:
        """Read a table from a file.

        **Arguments:**

        - ``path``: the file.

        **Returns:** the table. **Raises:** ``TableFileError`` if the file is
        malformed, ``OSError`` if it cannot be read.
        """
        text = _read_text(path)
        return self.parse(text, os.fspath(path))

    def write(self, table: TimeSeriesTable, path: str | os.PathLike) -> None:
        """Write a table to a file.

        **Arguments:**

        - ``table``: the table.
        - ``path``: the file (overwritten).

        **Raises:** ``ValueError`` if the table cannot be represented in this
        format (nothing is written then).
        """
        lines = self.format(table, os.fspath(path))
        _write_text(path, lines)

    def parse(self, text: str, source: str = "<string>") -> TimeSeriesTable:
        """Parse file contents.

        **Arguments:**

        - ``text``: the whole file as a string.
        - ``source``: name used in error messages (and to recognise ``.mot``).

        **Returns:** the table. **Raises:** ``TableFileError``.
        """
        raise NotImplementedError

    def format(self, table: TimeSeriesTable, path: str = "") -> list[str]:
        """Render a table as lines of text (without newline characters).

        **Arguments:**

        - ``table``: the table.
        - ``path``: the destination (some formats record its name).

        **Returns:** the lines. **Raises:** ``ValueError`` if the table cannot
        be represented.
        """
        raise NotImplementedError

    def dumps(self, table: TimeSeriesTable, path: str = "") -> str:
        """Render a table as the text of a file.

        **Arguments:** as ``format``.

        **Returns:** the file contents, ending with a newline.
        """
        return "\n".join(self.format(table, path)) + "\n"


class _DelimFileAdapter(FileAdapter):
    """Shared reader/writer of OpenSim's delimited formats (DelimFileAdapter)."""

    delimiter = "\t"
    name = "STO"
    header_optional = False
    allow_vectors = True

    # -- reading ------------------------------------------------------------ #

    def parse(self, text: str, source: str = "<string>") -> TimeSeriesTable:
        """Parse file contents; see ``FileAdapter.parse``."""
        src = source
        lines = _split_lines(text)
        if not any(ln.strip() for ln in lines):
            raise TableFileError(src, None, "file is empty")

        metadata: dict[str, str] = {}
        meta_line: dict[str, int] = {}
        header = ""
        data_type, version, data_type_line = None, None, None
        i = 0
        has_endheader = any(ln.strip(" \t") == "endheader" for ln in lines)
        if has_endheader or not self.header_optional:
            while True:
                if i >= len(lines):
                    raise TableFileError(
                        src, len(lines), "no 'endheader' line: reached the end of the file while reading the header"
                    )
                line = lines[i]
                i += 1
                if line.strip(" \t") == "endheader":
                    break
                key, eq, value = line.partition("=")
                key, value = key.strip(), value.strip()
                if eq and key and value:
                    if key == "DataType":
                        if value not in _DATA_TYPES:
                            raise TableFileError(src, i, f"unsupported DataType {value[:40]!r}")
                        data_type, data_type_line = value, i
                    elif key == "version":
                        version = _parse_int(value, src, i, "version")
                    elif key != "OpenSimVersion":
                        metadata[key] = value
                        meta_line[key] = i
                    continue
                header = line if not header else header + "\n" + line

        # Old Storage files (OpenSim 3, Storage::print): no DataType, version <= 1.
        legacy = data_type is None and (version is None or version <= 1) and self.delimiter == "\t"
        vec_size = _DATA_TYPES[data_type or "double"]
        if vec_size is not None and not self.allow_vectors:
            raise TableFileError(
                src, data_type_line, f"{self.name} files hold scalar columns only, not DataType={data_type}"
            )

        # Column labels: the first non-blank line after the header.
        while i < len(lines) and not any(_tokenize(lines[i], self.delimiter)):
            i += 1
        if i >= len(lines):
            raise TableFileError(src, len(lines), "no column-label line after the header")
        label_line = lines[i]
        i += 1
        if legacy and "\t" not in label_line:
            labels = label_line.split()
        else:
            labels = [tok for tok in _tokenize(label_line, self.delimiter) if tok]
        if labels[0].lower() != "time":
            raise TableFileError(src, i, f"the first column label must be 'time', got {labels[0][:40]!r}")
        labels = labels[1:]
        seen = set()
        for lab in labels:
            if lab in seen:
                raise TableFileError(src, i, f"duplicate column label {lab[:40]!r}")
            seen.add(lab)

        ncol = len(labels)
        times: list[float] = []
        rows: list[list[float]] = []
        row_lines: list[int] = []
        blank = None
        for lineno in range(i + 1, len(lines) + 1):
            line = lines[lineno - 1]
            if not line.strip():
                blank = blank or lineno
                continue
            if blank:
                raise TableFileError(src, lineno, f"data after the blank line {blank}; blank lines may only end a file")
            tokens = line.split() if legacy else _tokenize(line, self.delimiter)
            if len(tokens) != ncol + 1:
                raise TableFileError(
                    src, lineno, f"expected {ncol + 1} fields (time and {ncol} columns), found {len(tokens)}"
                )
            if vec_size is None:
                rows.append(tokens)  # parsed below, all at once
            else:
                times.append(_parse_floats(tokens[:1], src, lineno, "time")[0])
                row = []
                for tok in tokens[1:]:
                    comps = [c.strip() for c in tok.split(",")]
                    if len(comps) != vec_size:
                        raise TableFileError(
                            src,
                            lineno,
                            f"expected {vec_size} comma-separated components, found {len(comps)} in {tok[:40]!r}",
                        )
                    row.extend(_parse_floats(comps, src, lineno))
                rows.append(row)
            row_lines.append(lineno)

        if vec_size is None:
            times, rows = _parse_rows(rows, row_lines, src)
        n = len(times)
        shape = (n, ncol) if vec_size is None else (n, ncol, vec_size)
        values = np.array(rows, dtype=np.float64).reshape(shape)

        if legacy:
            if "nRows" in metadata:
                nr = _parse_int(metadata["nRows"], src, meta_line["nRows"], "nRows")
                if nr != n:
                    raise TableFileError(src, meta_line["nRows"], f"nRows={nr} but the file has {n} data rows")
            if "nColumns" in metadata:
                nc = _parse_int(metadata["nColumns"], src, meta_line["nColumns"], "nColumns")
                # Storage counts the time column; some writers do not.
                if nc not in (ncol + 1, ncol):
                    raise TableFileError(
                        src, meta_line["nColumns"], f"nColumns={nc} but the file has {ncol + 1} columns including time"
                    )
            # SIMM-era motion files (version 0) are in degrees unless they say otherwise.
            if (version or 0) < 1 and "inDegrees" not in metadata:
                if "Angles are in degrees." in header.split("\n") or src.lower().endswith(".mot"):
                    metadata["inDegrees"] = "yes"
                elif "Angles are in radians." in header.split("\n"):
                    metadata["inDegrees"] = "no"

        full_meta = {"header": header, **metadata} if header else metadata
        return _make_table(src, times, values, labels, full_meta, row_lines, vec_size)

    # -- writing ------------------------------------------------------------ #

    def format(self, table: TimeSeriesTable, path: str = "") -> list[str]:
        """Render a table as lines; see ``FileAdapter.format``."""
        d = self.delimiter
        if table.vec_size is not None and not self.allow_vectors:
            raise ValueError(f"{self.name} files hold scalar columns only; call table.flatten() first")
        _check_writable_labels(table, d)
        out: list[str] = []
        header = table.metadata.get("header", "")
        if header:
            for line in str(header).split("\n"):
                key, eq, value = line.partition("=")
                if line.strip(" \t") == "endheader" or (eq and key.strip() and value.strip()):
                    raise ValueError(f"header line {line!r} would be read back as 'endheader' or a key=value pair")
                out.append(line)
        for key, value in table.metadata.items():
            if key in ("header", "DataType", "version", "OpenSimVersion"):
                continue
            key, value = str(key), str(value)
            if key == "nRows":
                value = str(table.n_rows)
            elif key == "nColumns":
                value = str(table.n_columns + 1)
            if not key.strip() or key != key.strip() or "=" in key or "\n" in key or "\r" in key:
                raise ValueError(f"metadata key {key!r} cannot be written as 'key=value'")
            if not value.strip() or value != value.strip() or "\n" in value or "\r" in value:
                raise ValueError(f"metadata {key!r} has value {value!r} that cannot be written as 'key=value'")
            out.append(f"{key}={value}")
        out.append(f"DataType={table.data_type}")
        out.append("version=3")
        out.append(f"OpenSimVersion={WRITER_VERSION}")
        out.append("endheader")
        out.append(d.join(["time", *table.labels]))
        times = _fmt_list(table.times.tolist())
        if table.vec_size is None:
            for t, row in zip(times, table.values.tolist()):
                out.append(d.join([t, *_fmt_list(row)]))
        else:
            for t, row in zip(times, table.values.tolist()):
                out.append(d.join([t, *(",".join(_fmt_list(el)) for el in row)]))
        return out


class STOFileAdapter(_DelimFileAdapter):
    """Reads and writes ``.sto`` and ``.mot`` files (OpenSim ``STOFileAdapter``).

    Writes what OpenSim 4.6 writes: the ``header`` metadata (e.g. the table
    name) as free text, other metadata as ``key=value`` lines,
    ``DataType=double|VecK``, ``version=3``, ``OpenSimVersion=...``,
    ``endheader``, a tab-separated label line starting with ``time``, then rows
    (vector elements as comma-separated components). ``nRows``/``nColumns``
    metadata, if present, are updated to the table's size.

    Reads that format and the older Storage format (OpenSim 3 and
    ``Storage::print``: name line, ``version=1``, ``nRows``, ``nColumns``
    counting time or not, ``inDegrees``, description lines, ``endheader``,
    whitespace-separated data). ``inDegrees`` is kept as metadata; values are
    never converted. Free-text header lines are joined with newlines into the
    ``header`` metadata; ``DataType``, ``version`` and ``OpenSimVersion`` are
    consumed, as in OpenSim. ``UnitVec3``/``Quaternion``/``SpatialVec`` columns
    are read as ``Vec3``/``Vec4``/``Vec6``.
    """

    extensions = (".sto", ".mot")


class CSVFileAdapter(_DelimFileAdapter):
    """Reads and writes ``.csv`` files (OpenSim ``CSVFileAdapter``).

    Same layout as ``.sto`` with commas: OpenSim 4.6 writes the metadata block
    (``key=value`` lines, ``DataType=double``, ``version=3``,
    ``OpenSimVersion=...``, ``endheader``) before the ``time,...`` label line,
    and so does this adapter. Reading also accepts plain CSV without a header
    block. Scalar tables only.
    """

    extensions = (".csv",)
    delimiter = ","
    name = "CSV"
    header_optional = True
    allow_vectors = False


class TRCFileAdapter(FileAdapter):
    """Reads and writes ``.trc`` marker files (OpenSim ``TRCFileAdapter``).

    Layout: ``PathFileType\\t4\\t(X/Y/Z)\\t<file>``; the keys ``DataRate
    CameraRate NumFrames NumMarkers Units OrigDataRate OrigDataStartFrame
    OrigNumFrames`` and a line of their values; ``Frame#\\tTime\\t<marker>\\t\\t\\t
    ...``; ``\\t\\tX1\\tY1\\tZ1\\tX2...``; an optional blank line; then rows of
    frame number, time and three coordinates per marker, tab-separated.

    Reading gives a ``Vec3`` table whose metadata are ``header`` (the first
    line) and the eight keys, as strings. A marker with an empty coordinate is
    NaN (all three components, as in OpenSim). Frame numbers are checked to be
    numbers and otherwise dropped.

    Writing needs a ``Vec3`` table with ``Units`` metadata; ``DataRate``
    defaults to the mean sampling rate, ``CameraRate`` and ``OrigDataRate`` to
    ``DataRate``, ``OrigDataStartFrame`` to 0, ``OrigNumFrames`` to the row
    count; ``NumFrames``/``NumMarkers`` always come from the table. Other
    metadata are not stored. Frames are numbered from 1.
    """

    extensions = (".trc",)
    KEYS = (
        "DataRate",
        "CameraRate",
        "NumFrames",
        "NumMarkers",
        "Units",
        "OrigDataRate",
        "OrigDataStartFrame",
        "OrigNumFrames",
    )

    def parse(self, text: str, source: str = "<string>") -> TimeSeriesTable:
        """Parse file contents; see ``FileAdapter.parse``."""
        src = source
        lines = _split_lines(text)
        if not any(ln.strip() for ln in lines):
            raise TableFileError(src, None, "file is empty")

        def need(k: int, what: str) -> str:
            if k > len(lines):
                raise TableFileError(src, k, f"the file ends before the {what} line")
            return lines[k - 1]

        first = need(1, "PathFileType")
        if first.replace("\t", " ").split()[:1] != ["PathFileType"]:
            raise TableFileError(src, 1, "a TRC file must start with 'PathFileType'")
        metadata = {"header": first}

        keys = [tok for tok in _tokenize(need(2, "metadata-key"), "\t") if tok]
        if tuple(keys) != self.KEYS:
            raise TableFileError(src, 2, f"expected the keys {' '.join(self.KEYS)}, got {' '.join(keys)[:200]!r}")
        values = [tok for tok in _tokenize(need(3, "metadata-value"), "\t") if tok]
        if len(values) != len(keys):
            raise TableFileError(src, 3, f"expected {len(keys)} metadata values, found {len(values)}")
        metadata.update(zip(keys, values))
        n_markers = _parse_int(metadata["NumMarkers"], src, 3, "NumMarkers")
        n_frames = _parse_int(metadata["NumFrames"], src, 3, "NumFrames")
        if n_markers < 0 or n_frames < 0:
            raise TableFileError(src, 3, "NumMarkers and NumFrames must not be negative")

        names = [tok for tok in _tokenize(need(4, "marker-name"), "\t") if tok]
        if len(names) != n_markers + 2:
            raise TableFileError(
                src, 4, f"expected 'Frame#', 'Time' and {n_markers} marker names, found {len(names)} names"
            )
        if names[0] != "Frame#" or names[1] != "Time":
            raise TableFileError(src, 4, f"the marker-name line must start with 'Frame#' and 'Time', got {names[:2]}")
        labels = names[2:]
        seen = set()
        for lab in labels:
            if lab in seen:
                raise TableFileError(src, 4, f"duplicate marker name {lab[:40]!r}")
            seen.add(lab)

        xyz = [tok for tok in _tokenize(need(5, "X1 Y1 Z1"), "\t") if tok]
        if len(xyz) < 3 * n_markers:
            raise TableFileError(src, 5, f"expected {3 * n_markers} coordinate labels (X1 Y1 Z1 ...), found {len(xyz)}")
        for m in range(n_markers):
            for j, axis in enumerate("XYZ"):
                if xyz[3 * m + j] != f"{axis}{m + 1}":
                    raise TableFileError(
                        src, 5, f"expected coordinate label '{axis}{m + 1}', got {xyz[3 * m + j][:40]!r}"
                    )

        expected = 3 * n_markers + 2
        token_rows, row_lines = [], []
        started, blank = False, None
        for lineno in range(6, len(lines) + 1):
            line = lines[lineno - 1]
            if not line.strip():
                if started:
                    blank = blank or lineno
                continue
            if blank:
                raise TableFileError(src, lineno, f"data after the blank line {blank}; blank lines may only end a file")
            started = True
            tokens = _tokenize(line, "\t")
            if len(tokens) != expected:
                raise TableFileError(
                    src,
                    lineno,
                    f"expected {expected} fields (Frame#, Time, 3 x {n_markers} markers), found {len(tokens)}",
                )
            token_rows.append(tokens)
            row_lines.append(lineno)

        if len(token_rows) != n_frames:
            raise TableFileError(src, 3, f"NumFrames={n_frames} but the file has {len(token_rows)} data rows")
        block = _float_block(token_rows)  # (None with a missing marker, or a bad token)
        if block is not None:
            times, rows = block[:, 1].tolist(), block[:, 2:]
        else:
            times, rows = self._parse_marker_rows(token_rows, row_lines, src)
        vals = np.array(rows, dtype=np.float64).reshape(len(times), n_markers, 3)
        return _make_table(src, times, vals, labels, metadata, row_lines, 3)

    @staticmethod
    def _parse_marker_rows(token_rows, row_lines, src):
        """Times and marker coordinates of data rows, row by row: a marker with a
        blank coordinate is NaN (as OpenSim makes it); a bad token is named with its
        line."""
        times, rows = [], []
        nan3 = [math.nan] * 3
        for tokens, lineno in zip(token_rows, row_lines):
            _parse_floats(tokens[:1], src, lineno, "frame number")
            times.append(_parse_floats(tokens[1:2], src, lineno, "time")[0])
            row: list[float] = []
            for c in range(2, len(tokens), 3):
                comps = tokens[c : c + 3]
                if "" in comps:
                    # OpenSim makes the whole marker NaN when any coordinate is missing.
                    _parse_floats([c for c in comps if c], src, lineno)
                    row.extend(nan3)
                else:
                    row.extend(_parse_floats(comps, src, lineno))
            rows.append(row)
        return times, rows

    def format(self, table: TimeSeriesTable, path: str = "") -> list[str]:
        """Render a table as lines; see ``FileAdapter.format``."""
        if not table.is_vec3:
            raise ValueError(f"TRC files hold Vec3 tables (markers), not {table.data_type}")
        _check_writable_labels(table, "\t")
        meta = {k: str(v) for k, v in table.metadata.items()}
        n, m = table.n_rows, table.n_columns
        if "DataRate" not in meta:
            if n < 2:
                raise ValueError("writing a TRC file needs DataRate metadata (or at least two rows to infer it)")
            meta["DataRate"] = format_float((n - 1) / (table.times[-1] - table.times[0]))
        if "Units" not in meta:
            raise ValueError("writing a TRC file needs Units metadata (e.g. 'mm' or 'm')")
        rate = meta["DataRate"]
        vals = [
            rate,
            meta.get("CameraRate", rate),
            str(n),
            str(m),
            meta["Units"],
            meta.get("OrigDataRate", rate),
            meta.get("OrigDataStartFrame", "0"),
            meta.get("OrigNumFrames", str(n)),
        ]
        for key, v in zip(self.KEYS, vals):
            if not v.strip() or any(c in v for c in "\t\n\r"):
                raise ValueError(f"metadata {key}={v!r} cannot be written to a TRC file")
        header = meta.get("header", "")
        if not header.startswith("PathFileType") or "\n" in header or "\r" in header:
            header = f"PathFileType\t4\t(X/Y/Z)\t{os.path.basename(path) or 'markers.trc'}"
        out = [header, "\t".join(self.KEYS), "\t".join(vals)]
        out.append("\t".join(["Frame#", "Time"] + [f"{lab}\t\t" for lab in table.labels]) + "\t")
        out.append("\t\t" + "".join(f"X{i}\tY{i}\tZ{i}\t" for i in range(1, m + 1)))
        out.append("")
        flat = table.values.reshape(n, 3 * m).tolist()
        for i, (t, row) in enumerate(zip(_fmt_list(table.times.tolist()), flat)):
            out.append("\t".join([str(i + 1), t, *_fmt_list(row)]) + "\t")
        return out


#: Extension (lower case, with the dot) -> adapter used by ``read_table`` and
#: ``write_table``.
ADAPTERS: dict[str, FileAdapter] = {}


def register_adapter(extension: str, adapter: FileAdapter) -> None:
    """Register (or replace) the adapter for a file extension.

    **Arguments:**

    - ``extension``: e.g. ``".sto"`` or ``"sto"``; case-insensitive.
    - ``adapter``: an object with ``read(path)`` and ``write(table, path)``.
    """
    ext = extension.lower()
    ADAPTERS[ext if ext.startswith(".") else "." + ext] = adapter


for _adapter in (STOFileAdapter(), CSVFileAdapter(), TRCFileAdapter()):
    for _ext in _adapter.extensions:
        register_adapter(_ext, _adapter)


def adapter_for(path: str | os.PathLike, fmt: str | None = None) -> FileAdapter:
    """The registered adapter for a file name (or an explicit format).

    **Arguments:**

    - ``path``: the file name; its extension picks the adapter.
    - ``fmt``: an extension such as ``"sto"`` to use instead.

    **Returns:** the adapter. **Raises:** ``TableFileError`` for an unknown
    extension.
    """
    ext = (fmt if fmt is not None else os.path.splitext(os.fspath(path))[1]).lower()
    if ext and not ext.startswith("."):
        ext = "." + ext
    try:
        return ADAPTERS[ext]
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        what = f"extension {ext!r}" if ext else "no file extension"
        raise TableFileError(path, None, f"unsupported {what}; known extensions: {known}") from None


def read_table(path: str | os.PathLike, fmt: str | None = None) -> TimeSeriesTable:
    """Read a table, choosing the adapter by extension (OpenSim ``FileAdapter::read``).

    **Arguments:**

    - ``path``: a ``.sto``, ``.mot``, ``.trc`` or ``.csv`` file (any case).
    - ``fmt``: extension to use instead of the file's.

    **Returns:** the table (``Vec3`` for ``.trc``). **Raises:**
    ``TableFileError`` for a malformed file or unknown extension, ``OSError``
    if it cannot be read.
    """
    return adapter_for(path, fmt).read(path)


def write_table(table: TimeSeriesTable, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write a table, choosing the adapter by extension (OpenSim ``FileAdapter::write``).

    **Arguments:**

    - ``table``: the table.
    - ``path``: a ``.sto``, ``.mot``, ``.trc`` or ``.csv`` file (any case).
    - ``fmt``: extension to use instead of the file's.

    **Raises:** ``TableFileError`` for an unknown extension, ``ValueError`` if
    the table cannot be represented in that format.
    """
    adapter_for(path, fmt).write(table, path)
