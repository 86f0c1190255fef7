"""Path constraints as Moco poses them: bounds at every mesh point on model outputs
(``OutputBound``), controls (``ControlBound``), states (``StateBound``) and the
distances between frames (``FrameDistance``).

A bound may be a number or a function of time. As in Moco, a bound that is a function
of time enters the constrained value itself, so the row's own bounds stay constant:
``v - lower(t)`` in ``[0, inf)`` (``[0, 0]`` with ``equality_with_lower``) and
``v - upper(t)`` in ``(-inf, 0]``, the lower row before the upper one for each value.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import jax.numpy as jnp
import numpy as np

from .goals import OutputIntegral, _index
from .problem import PathConstraint

__all__ = ["OutputBound", "ControlBound", "StateBound", "FrameDistance"]


def _at(bound, t):
    """A bound's value at time ``t``: a number, or a function of time (an OpenSim
    ``Function`` from ``simjax.functions``, or any traceable callable)."""
    return bound(t) if callable(bound) else bound


class _TimeBounds:
    """Rows ``v - lower(t)`` and ``v - upper(t)`` for a vector of values ``v``
    (the fields ``lower``, ``upper``, ``equality_with_lower`` are the subclass's)."""

    def _sides(self):
        if self.lower is None and self.upper is None:
            raise ValueError(f"{self._label()}: give a lower or an upper bound")
        if self.equality_with_lower and (self.lower is None or self.upper is not None):
            raise ValueError(f"{self._label()}: equality_with_lower needs a lower bound and no upper")
        return [b for b in (self.lower, self.upper) if b is not None]

    def _rows(self, v, t):
        """``(n * sides,)``: per value, its lower row then its upper row."""
        return jnp.stack([v - _at(b, t) for b in self._sides()], axis=1).reshape(-1)

    def _row_bounds(self, n: int):
        lo, hi = [], []
        if self.lower is not None:
            lo.append(0.0)
            hi.append(0.0 if self.equality_with_lower else np.inf)
        if self.upper is not None:
            lo.append(-np.inf)
            hi.append(0.0)
        self._sides()
        return np.tile(np.asarray(lo, float), n), np.tile(np.asarray(hi, float), n)


@dataclasses.dataclass(frozen=True)
class OutputBound(_TimeBounds, PathConstraint):
    """Moco's ``MocoOutputBoundConstraint``: ``lower(t) <= v(t) ** exponent <=
    upper(t)`` at every mesh point, ``v`` a model output's value as
    ``OutputIntegral`` takes it (a scalar, a vector's norm or one component).

    **Fields:** ``output``: ``"component path|output name"``; ``lower``, ``upper``: a
    number, a function of time ``t`` (s; traceable), or ``None`` (no bound on that
    side); ``exponent``, ``index``: as ``OutputIntegral``; ``equality_with_lower``:
    ``v ** exponent = lower(t)`` (``upper`` must be ``None``).

    Moco's composite outputs (``second_output_path``, ``operation``) are not supported.
    """

    output: str
    lower: Any = None
    upper: Any = None
    exponent: int = 1
    index: int = -1
    equality_with_lower: bool = False

    def _label(self):
        return f"OutputBound {self.output!r}"

    @functools.cached_property
    def _integral(self):
        # (one goal for every evaluation: its checks of the output run once)
        return OutputIntegral(self.output, exponent=self.exponent, index=self.index)

    def values(self, problem, system, t, y, controls):
        """The output's value at one mesh point, as ``PathConstraint.values``."""
        return self._rows(jnp.reshape(self._integral.integrand(problem, t, y, controls, system), (1,)), t)

    def bounds(self, problem):
        """``(lower, upper)`` on the output, as ``PathConstraint.bounds``."""
        return self._row_bounds(1)


class _VariableBounds(_TimeBounds):
    """Bounds on named variables of one kind (``_kind``: ``"control"`` or ``"state"``,
    the names in the field of that kind's plural)."""

    _kind: ClassVar[str]

    def _names(self) -> tuple:
        return getattr(self, self._kind + "s")

    def _label(self):
        return f"{type(self).__name__} {list(self._names())}"

    def _indices(self, problem):
        return np.asarray([_index(problem, name, self._kind) for name in self._names()], int)

    def values(self, problem, system, t, y, controls):
        return self._rows((controls if self._kind == "control" else y)[self._indices(problem)], t)

    def bounds(self, problem):
        self._indices(problem)
        return self._row_bounds(len(self._names()))


@dataclasses.dataclass(frozen=True)
class ControlBound(_VariableBounds, PathConstraint):
    """Moco's ``MocoControlBoundConstraint``: ``lower(t) <= control <= upper(t)`` for
    each named control, at every mesh point.

    **Fields:** ``controls``: actuator paths or names; ``lower``, ``upper``: a number,
    a function of time ``t`` (s), or ``None``; ``equality_with_lower``: ``control =
    lower(t)``.

    **Raises** (on ``transcribe``): ``KeyError`` naming a control the problem does not have.
    """

    _kind: ClassVar[str] = "control"
    controls: tuple = ()
    lower: Any = None
    upper: Any = None
    equality_with_lower: bool = False


@dataclasses.dataclass(frozen=True)
class StateBound(_VariableBounds, PathConstraint):
    """Moco's ``MocoStateBoundConstraint``: ``lower(t) <= state <= upper(t)`` for each
    named state, at every mesh point.

    **Fields:** ``states``: state paths (``/jointset/j/q/value``, ``.../activation``);
    ``lower``, ``upper``, ``equality_with_lower``: as ``ControlBound``'s.

    **Raises** (on ``transcribe``): ``KeyError`` naming a state the problem does not
    have (a prescribed coordinate is not a state of the problem).
    """

    _kind: ClassVar[str] = "state"
    states: tuple = ()
    lower: Any = None
    upper: Any = None
    equality_with_lower: bool = False


@dataclasses.dataclass(frozen=True)
class FrameDistance(PathConstraint):
    """Moco's ``MocoFrameDistanceConstraint``: for each pair of frames, the squared
    distance between their origins within ``[minimum ** 2, maximum ** 2]`` at every
    mesh point.

    **Fields:** ``pairs``: ``(frame1 path, frame2 path, minimum, maximum)`` each (m;
    ``maximum`` may be ``inf``); ``projection``: ``"none"``, ``"vector"`` (the distance
    along ``projection_vector``) or ``"plane"`` (in the plane normal to it);
    ``projection_vector``: 3 numbers (normalized here).

    **Raises:** ``ValueError`` for a negative or inverted distance, an unknown
    projection or a projection without its vector; (on ``transcribe``) a frame the
    model does not have, or prescribed kinematics (the coordinates must be states).
    """

    pairs: tuple = ()
    projection: str = "none"
    projection_vector: Any = None

    def _checked(self, problem):
        if problem.kinematics is not None:
            raise ValueError(
                "FrameDistance: the frames' positions need the coordinates as states; this problem prescribes them"
            )
        rows = problem.system.topology.tree.frame_rows
        for f1, f2, lo, hi in self.pairs:
            for path in (f1, f2):
                if path not in rows:
                    raise KeyError(f"FrameDistance: the model has no frame {path!r}")
            if lo < 0 or hi < 0 or lo > hi:
                raise ValueError(
                    f"FrameDistance {f1!r}-{f2!r}: the distances must satisfy 0 <= minimum <= maximum, "
                    f"got {lo!r} and {hi!r}"
                )
        if self.projection not in ("none", "vector", "plane"):
            raise ValueError(f"FrameDistance: projection {self.projection!r}: choose 'none', 'vector' or 'plane'")
        if self.projection != "none":
            v = None if self.projection_vector is None else np.asarray(self.projection_vector, float)
            if v is None or v.shape != (3,) or not np.linalg.norm(v) > 0:
                raise ValueError(
                    f"FrameDistance: projection {self.projection!r} needs a non-zero 3-vector "
                    f"projection_vector, got {self.projection_vector!r}"
                )
            return v / np.linalg.norm(v)
        return None

    def values(self, problem, system, t, y, controls):
        """The frames' distances (m) at one mesh point, as ``PathConstraint.values``."""
        from ..forward import Context
        from ..state import State

        axis = self._checked(problem)
        tree = system.topology.tree
        nq, nu = tree.nq, tree.nu
        state = State(
            t=jnp.asarray(t, jnp.result_type(y)),
            q=y[:nq],
            u=y[nq : nq + nu],
            z=y[nq + nu :],
            d=system.default_state().d,
        )
        frames = tuple(p for f1, f2, *_ in self.pairs for p in (f1, f2))
        _, p = Context(system, state).frames_in_ground(frames)
        r = p[1::2] - p[0::2]
        if axis is not None:
            along = (r @ axis)[:, None] * axis
            r = along if self.projection == "vector" else r - along
        return jnp.sum(r * r, axis=1)

    def bounds(self, problem):
        """``(lower, upper)`` on the distance (m), as ``PathConstraint.bounds``."""
        self._checked(problem)
        lo = np.asarray([a for _, _, a, _ in self.pairs], float)
        hi = np.asarray([b for *_, b in self.pairs], float)
        return lo**2, hi**2
