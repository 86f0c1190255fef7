"""Coordinate trajectories for the tools: read a ``.mot``/``.sto``, filter it as
OpenSim does, and fit it with OpenSim's splines.

OpenSim's dynamics tools (InverseDynamicsTool, AnalyzeTool, RRA, CMC, ...) prepare a
coordinates file the same way, which this module reproduces step by step:

1. ``Storage::pad(n // 2)`` (``pad``): every column, time included, is extended at
   both ends by ``n // 2`` points reflected about the end point and negated
   (``Signal::Pad``), so the filter starts and ends on a continuation of the data.
2. ``Storage::lowpassIIR(fc)`` (``lowpass_iir``): when the sampling is not uniform
   (mean step minus smallest step above machine epsilon) the storage is first
   resampled at the smallest step (``resample``: a quintic ``GCVSpline`` per column,
   evaluated from the first time in increments accumulated as OpenSim does); then
   each column is filtered forward and backward by OpenSim's third-order Butterworth
   recursion (``Signal::LowpassIIR``), whose first three outputs copy the input.
3. Degrees to radians for rotational coordinates (after the filter, as OpenSim).
4. ``GCVSplineSet(5, storage)``: one quintic ``GCVSpline`` per column, evaluated with
   its first and second derivatives at the frames (``spline_kinematics``).

Only step 4 is traced JAX (one vectorized evaluation of all splines at all frames);
steps 1-3 are a few numpy operations on the file's data, done once.
"""

from __future__ import annotations

import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from ..functions import GCVSpline, _natural_spline_pp
from ..io.tables import TimeSeriesTable, read_table
from ..mechanics.joints import ROTATIONAL

__all__ = [
    "read_coordinates",
    "in_degrees",
    "pad",
    "lowpass_iir",
    "filter_lowpass",
    "resample",
    "filter_coordinates",
    "spline_kinematics",
    "frame_indices",
    "rotational_mask",
    "motion_types",
    "coordinate_columns",
]

#: ``SimTK::Eps`` (double machine epsilon)
_EPS = float(np.finfo(float).eps)
_SIGNIFICANT = _EPS**0.875  # SimTK::SignificantReal


def read_coordinates(path: str | os.PathLike) -> TimeSeriesTable:
    """Read a coordinates file (``.mot``/``.sto``) as it is (degrees if its header says
    ``inDegrees=yes``; see ``in_degrees``).

    **Raises:** ``FileNotFoundError`` naming the path.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"coordinates file {path!r} does not exist")
    return read_table(path)


def in_degrees(table: TimeSeriesTable) -> bool:
    """Whether the table's header says its rotational values are in degrees."""
    return str(table.metadata.get("inDegrees", "no")).strip().lower() == "yes"


def pad(times, values, n: int):
    """OpenSim's ``Storage::pad(n)`` (``Signal::Pad`` on every column and on time).

    **Arguments:** ``times (N,)`` (s); ``values (N, k)``; ``n``: points added at each
    end (``0 <= n <= N - 1``).

    **Returns:** ``(times (N + 2n,), values (N + 2n, k))``: the data reflected about
    each end point and negated, ``2 x[0] - x[n - i]`` before and ``2 x[-1] - x[-2 - i]``
    after.
    """
    t = np.asarray(times, float)
    v = np.asarray(values, float).reshape(len(t), -1)
    if n <= 0:
        return t.copy(), v.copy()
    if n >= len(t):
        raise ValueError(f"pad: {n} points requested but the data has only {len(t)} rows")

    def one(x):
        before = 2.0 * x[0] - x[n:0:-1]
        after = 2.0 * x[-1] - x[-2 : -2 - n : -1]
        return np.concatenate([before, x, after])

    return one(t), np.stack([one(v[:, j]) for j in range(v.shape[1])], axis=1) if v.shape[1] else np.zeros(
        (len(t) + 2 * n, 0)
    )


def _butterworth(T: float, fc: float):
    fs = 1.0 / T
    if fc >= 0.5 * fs:
        fc = 0.49 * fs
    wc = 2 * math.pi * fc
    wa = math.tan(wc * T / 2.0)
    wa2 = wa * wa
    wa3 = wa * wa * wa
    denom = (wa + 1) * (wa * wa + wa + 1.0)
    a = (wa3 / denom, 3 * wa3 / denom, 3 * wa3 / denom, wa3 / denom)
    b = (
        1.0,
        (3 * wa3 + 2 * wa2 - 2 * wa - 3) / denom,
        (3 * wa3 - 2 * wa2 - 2 * wa + 3) / denom,
        (wa - 1) * (wa2 - wa + 1) / denom,
    )
    return a, b


def _iir_pass(a, b, sig):
    """One pass of ``Signal::LowpassIIR``'s recursion along axis 0: ``out[i] = sum_j
    a[j] sig[i-j] - sum_j b[j] out[i-j]`` (``j`` = 1..3 for ``b``) from row 3 on, the first
    three rows copied (scipy's ``lfilter``, started from the state those rows give)."""
    from scipy.signal import lfilter  # (here: importing scipy.signal takes half a second)

    out = np.array(sig, float)
    rows = out.reshape(len(out), -1)  # (a view: writing it writes ``out``)
    if len(rows) > 3:
        num, den = np.asarray(a, float), np.asarray(b, float)
        past = rows[2::-1]  # rows 2, 1, 0: the inputs and outputs before row 3 (equal)
        zi = np.stack([num[m + 1 :] @ past[: 3 - m] - den[m + 1 :] @ past[: 3 - m] for m in range(3)])
        rows[3:] = lfilter(num, den, rows[3:], axis=0, zi=zi)[0]
    return out


def _forward_backward(a, b, sig):
    """``Signal::LowpassIIR``'s zero-phase filtering: ``_iir_pass`` forward, then
    backward."""
    return _iir_pass(a, b, _iir_pass(a, b, sig)[::-1].copy())[::-1]


def resample(times, values, dt: float, degree: int = 5):
    """OpenSim's ``Storage::resample``: a ``GCVSpline`` of ``degree`` per column,
    evaluated at ``t0, t0 + dt, ...`` (increments accumulated) up to the last time.

    **Returns:** ``(times (M,), values (M, k))``.
    """
    t = np.asarray(times, float)
    v = np.asarray(values, float).reshape(len(t), -1)
    new_t = []
    x = float(t[0])
    while x <= t[-1]:
        new_t.append(x)
        x += dt
    new_t = np.asarray(new_t)
    return new_t, np.asarray(_evaluate_splines(t, v, new_t, degree, (0,))[0])


def lowpass_iir(times, values, cutoff: float):
    """OpenSim's ``Storage::lowpassIIR(cutoff)``: resample at the smallest time step if
    the sampling is not uniform, then filter every column forward and backward with
    ``Signal::LowpassIIR`` (third-order Butterworth, zero phase).

    **Arguments:** ``times (N,)`` (s); ``values (N, k)``; ``cutoff`` (Hz).

    **Returns:** ``(times, values)`` filtered (resampled when OpenSim resamples).
    """
    t = np.asarray(times, float)
    v = np.asarray(values, float).reshape(len(t), -1)
    n = len(t)
    dtmin = float(np.min(np.diff(t)))
    avg = (t[-1] - t[0]) / (n - 1)
    if dtmin < _EPS:
        raise ValueError("lowpassIIR: the times cannot be resampled (repeated times)")
    if avg - dtmin > _EPS:
        t, v = resample(t, v, dtmin, 5)
    if len(t) < 4:
        raise ValueError("lowpassIIR: too few data points to filter")
    a, b = _butterworth(dtmin, cutoff)
    # vectorized over columns: the same arithmetic, in the same order, as OpenSim's loop
    f = _forward_backward(a, b, v)
    return t, np.ascontiguousarray(f)


def _is_uniform(t) -> tuple[bool, float]:
    """OpenSim's ``isUniform(times)``: ``(uniform, step)``, ``step`` the mean step where
    uniform (to 4 eps of the largest time), else the smallest positive one."""
    big = max(abs(t[0]), abs(t[-1]))
    tol = 4 * np.finfo(float).eps * big
    mean = (t[-1] - t[0]) / (len(t) - 1)
    if abs(mean) < tol:
        tol = np.finfo(float).eps * big if abs(mean) < np.finfo(float).eps * big else abs(mean)
    d = np.diff(t)
    if np.all(np.abs(d - mean) <= tol) or len(t) == 2:
        return True, float(mean)
    positive = d[d > 0]
    return False, float(positive.min()) if positive.size else float("nan")


def filter_lowpass(table: TimeSeriesTable, cutoff: float) -> TimeSeriesTable:
    """OpenSim's ``TabOpLowPassFilter(cutoff)`` (``TableUtilities::filterLowpass`` with
    padding): resampled at the smallest step (quintic ``GCVSpline``s) where the times
    are not uniform, padded by half its rows, filtered forward and backward (third-order
    Butterworth), then cut back to the original time range.

    **Arguments:** ``table``; ``cutoff`` (Hz, ``>= 0``).

    **Returns:** the filtered ``TimeSeriesTable`` (units and metadata unchanged).

    **Raises:** ``ValueError`` for a negative cutoff, repeated times or fewer than 4 rows.
    """
    if cutoff < 0:
        raise ValueError(f"filter_lowpass: cutoff must be non-negative, got {cutoff}")
    t = np.asarray(table.times, float)
    v = np.asarray(table.values, float).reshape(len(t), -1)
    uniform, step = _is_uniform(t)
    if not step >= _EPS:
        raise ValueError("filter_lowpass: the times cannot be resampled (repeated times)")
    if not uniform:
        t, v = resample(t, v, step, min(len(t) - 1, 5))
    first, last = t[0], t[-1]
    t, v = pad(t, v, len(t) // 2)
    if len(t) < 4:
        raise ValueError(f"filter_lowpass: at least 4 rows are needed, got {len(t)}")
    a, b = _butterworth(step, cutoff)
    f = _forward_backward(a, b, v)
    keep = (t >= first - _SIGNIFICANT) & (t <= last + _SIGNIFICANT)
    return TimeSeriesTable(t[keep], np.ascontiguousarray(f[keep]), list(table.labels), dict(table.metadata))


def coordinate_columns(system, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a table's coordinate columns go in a state: for each coordinate of the
    system named in ``labels`` (by its name), its ``q`` index, its ``u`` index and
    its column.

    **Returns:** ``(q_index, u_index, columns)``, integer arrays in the system's
    coordinate order.
    """
    labels = list(labels)
    tree = system.topology.tree
    q_idx, u_idx, cols = [], [], []
    for p in system.coordinate_paths:
        info = tree.coordinates[p]
        name = p.rsplit("/", 1)[-1]
        if name in labels and info.q >= 0:
            q_idx.append(info.q)
            u_idx.append(info.u)
            cols.append(labels.index(name))
    return np.asarray(q_idx, int), np.asarray(u_idx, int), np.asarray(cols, int)


def motion_types(system) -> dict[str, str]:
    """Each coordinate's motion type (OpenSim's rule: ``Joint.motion_types``),
    ``{name: type}``."""
    return {p.rsplit("/", 1)[-1]: info.motion_type for p, info in system.topology.tree.coordinates.items()}


def rotational_mask(system, labels) -> np.ndarray:
    """Which of ``labels`` name Rotational coordinates of the system (OpenSim's rule,
    ``motion_types``): the columns OpenSim converts between degrees and
    radians."""
    types = motion_types(system)
    return np.asarray([types.get(lab) == ROTATIONAL for lab in labels], bool)


def filter_coordinates(system, table: TimeSeriesTable, cutoff: float | None = None) -> TimeSeriesTable:
    """A coordinates table prepared as OpenSim's dynamics tools do: padded by half its
    length and low-pass filtered at ``cutoff`` Hz (when ``cutoff`` is not ``None`` and
    ``>= 0``), then rotational columns converted to radians if the table is in degrees.

    **Arguments:** ``system``: the built system (for the coordinates' motion types);
    ``table``: as read; ``cutoff``: Hz, or ``None``/negative for no filtering.

    **Returns:** a ``TimeSeriesTable`` in radians (``inDegrees=no``), with the padded
    (and perhaps resampled) times when filtered.
    """
    t = np.asarray(table.times, float)
    v = np.asarray(table.values, float)
    if cutoff is not None and cutoff >= 0:
        t, v = pad(t, v, len(t) // 2)
        t, v = lowpass_iir(t, v, cutoff)
    if in_degrees(table):
        mask = rotational_mask(system, table.labels)
        v = np.where(mask[None, :], v * (math.pi / 180.0), v)
    meta = dict(table.metadata)
    meta["inDegrees"] = "no"
    return TimeSeriesTable(t, v, list(table.labels), meta)


@functools.partial(jax.jit, static_argnames=("half_order", "orders"))
def _spline_values(x, Y, at, half_order: int, orders: tuple):
    """Fit one ``GCVSpline`` per column of ``Y (n, k)`` over ``x (n,)`` and evaluate the
    requested derivative orders at ``at (m,)``: one compiled program for all columns."""

    def column(y):
        pp = _natural_spline_pp(x, y, half_order)
        return tuple(jax.vmap(pp)(at) if k == 0 else jax.vmap(lambda s: pp.derivative(s, k))(at) for k in orders)

    return tuple(v.T for v in jax.vmap(column, in_axes=1)(Y))


def _evaluate_splines(times, values, at, degree, orders):
    half = min(max((int(degree) + 1) // 2, 1), 4)
    GCVSpline.from_degree(degree, times, values[:, 0])  # OpenSim's checks on the sites, once
    return _spline_values(
        jnp.asarray(times, float), jnp.asarray(values, float), jnp.asarray(at, float), half, tuple(orders)
    )


def spline_kinematics(table: TimeSeriesTable, at, degree: int = 5):
    """OpenSim's ``GCVSplineSet(degree, storage)`` evaluated at times ``at``.

    **Arguments:** ``table``: coordinates (radians); ``at (n,)``: times (s);
    ``degree``: the splines' degree (OpenSim's dynamics tools use 5).

    **Returns:** ``(q, qdot, qddot)``, each ``(n, k)`` in the table's column order.
    """
    return _evaluate_splines(np.asarray(table.times), np.asarray(table.values), at, degree, (0, 1, 2))


def frame_indices(times, time_range=None) -> tuple[int, int]:
    """OpenSim's choice of frames (``InverseDynamicsTool::run``): from the last time at
    or before ``max(first time, start)`` to the last at or before ``min(last time, end)``
    (``Storage::findIndex``).

    **Returns:** ``(first, stop)`` indices into ``times``.
    """
    t = np.asarray(times, float)
    lo, hi = (-np.inf, np.inf) if time_range is None else (float(time_range[0]), float(time_range[1]))
    start = t[0] if t[0] > lo else lo
    final = t[-1] if t[-1] < hi else hi

    def find(x):
        i = int(np.searchsorted(t, x, side="right")) - 1
        return max(i, 0)

    return find(start), find(final) + 1
