"""What every analysis of the AnalyzeTool shares: the frames it visits
(``analysis_frames``), the job an analysis gets (``AnalysisJob``), setup-file helpers
(``analysis_error``) and the lookups the analyses make (``zero_controls``,
``find_frame``).

Below ``analyze`` (the AnalyzeTool, which registers every analysis) and the modules
whose analyses it runs (``optimization``, ``reactions``); ``analyze`` re-exports these
names.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ..component import resolve_path
from ..io.tables import TimeSeriesTable
from . import motion
from .setup import Setup, SetupError

__all__ = ["Frames", "analysis_frames", "AnalysisJob", "analysis_error", "zero_controls", "find_frame"]


# -- frames ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Frames:
    """The states an AnalyzeTool visits.

    **Fields:** ``store_times (N,)`` (s): every row of OpenSim's states storage (the
    padded data when filtered); ``store_q (N, nq)``, ``store_u (N, nu)``: the
    system's ``q`` and ``u`` at those rows (rad, m; rad/s, m/s); ``first``, ``stop``:
    the rows analysed; ``states``: a batched ``State`` of those rows (leading axis
    ``n = stop - first``; ``z`` at its default).
    """

    store_times: np.ndarray
    store_q: jax.Array
    store_u: jax.Array
    first: int
    stop: int
    states: object

    @property
    def times(self) -> np.ndarray:
        """The analysed frames' times (s)."""
        return self.store_times[self.first : self.stop]


def _batch(state0, n):
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x)), state0)


def analysis_frames(
    system, coordinates_table: TimeSeriesTable, lowpass_cutoff: float | None = None, time_range=None
) -> Frames:
    """The states OpenSim's AnalyzeTool visits for a coordinates file (see the module).

    **Arguments:** ``system``; ``coordinates_table``: coordinates by name, as read
    (degrees if its header says so); ``lowpass_cutoff``: Hz (``None`` or negative:
    no filter); ``time_range``: ``(initial_time, final_time)`` s, ``None`` for all.

    **Returns:** ``Frames``.

    **Raises:** ``ValueError`` when ``time_range`` misses the data.
    """
    times = np.asarray(coordinates_table.times, float)
    if time_range is not None and (time_range[1] < times[0] or time_range[0] > times[-1]):
        raise ValueError(
            f"time range ({time_range[0]:g}, {time_range[1]:g}) s is outside the coordinates data "
            f"({times[0]:g} to {times[-1]:g} s)"
        )
    table = motion.filter_coordinates(system, coordinates_table, lowpass_cutoff)
    T = np.asarray(table.times, float)
    V = np.asarray(table.values, float)
    state0 = system.default_state()
    dtype = jnp.asarray(state0.q).dtype
    q_idx, u_idx, cols = motion.coordinate_columns(system, table.labels)
    (qd,) = motion._evaluate_splines(T, V[:, cols], T, 5, (1,))
    n = len(T)
    Q = (
        jnp.broadcast_to(jnp.asarray(state0.q), (n, len(state0.q)))
        .at[:, np.asarray(q_idx, int)]
        .set(jnp.asarray(V[:, cols], dtype))
    )
    U = jnp.zeros((n, len(state0.u)), dtype).at[:, np.asarray(u_idx, int)].set(jnp.asarray(qd, dtype))
    first, stop = motion.frame_indices(T, time_range)
    states = _batch(state0, stop - first).replace(t=jnp.asarray(T[first:stop], dtype), q=Q[first:stop], u=U[first:stop])
    return Frames(T, Q, U, first, stop, states)


# -- the job an analysis gets ---------------------------------------------------------------


@dataclasses.dataclass
class AnalysisJob:
    """What an analysis gets: ``system`` (the model with the force sets and external
    loads), ``frames`` (``Frames``), ``setup`` (the tool's ``Setup``, for messages),
    ``shared``: what analyses of one run share, by key (systems derived from
    ``system``, so that their compiled programs are reused)."""

    system: object
    frames: Frames
    setup: Setup | None = None
    shared: dict = dataclasses.field(default_factory=dict)


def _text(node, tag, default=""):
    child = node.find(tag)
    value = child.text.strip() if child is not None else ""
    return default if value in ("", "Unassigned", "unassigned", "null", "NULL") else value


def analysis_error(job: AnalysisJob, node, prop: str, value, message: str) -> SetupError:
    """A ``SetupError`` naming the setup file, the analysis, its property and value."""
    where = f"{job.setup.file}: " if job.setup is not None else ""
    return SetupError(f"{where}<{node.tag} name={node.name!r}> property <{prop}> = {value!r}: {message}")


def zero_controls(system):
    """The controls of an AnalyzeTool run without a controls file: every control zero,
    clipped to its actuator's bounds ``(n_actuators,)``."""
    model = system.model
    acts = [model.find(p) for p in system.actuator_paths]
    return jnp.asarray(np.clip(0.0, [float(a.min_control) for a in acts], [float(a.max_control) for a in acts]))


def find_frame(system, name: str) -> str | None:
    """The PhysicalFrame an analysis names, looked up as OpenSim does: a path relative
    to the model (``ground``, ``/bodyset/pelvis``, ``jointset/knee_r/tibia_r_offset``),
    else a body's name (``/bodyset/<name>``). ``None`` when nothing matches."""
    frames = system.topology.tree.frames
    for cand in (resolve_path(name, "/"), "/bodyset/" + name):
        if cand in frames:
            return cand
    return None
