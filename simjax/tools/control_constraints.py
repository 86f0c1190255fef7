"""Control constraints for RRA and CMC: the ``constraints_file`` of their setups.

The file is an OpenSim ``ControlSet`` whose ``ControlLinear`` objects bound the
controls over time. As ``CMCTool::initializeControlSetUsingConstraints`` does, an
actuator ``A`` takes the constraint named ``A.excitation`` (or, from old files,
``A.excitation.excitation``) in place of the control CMC would give it, with:

- its lower bound at time ``t``: ``default_min`` without ``min_nodes``, else the
  ``min_nodes`` interpolated (``ControlLinear::getControlValueMin``);
- its upper bound: ``default_max`` without ``min_nodes`` (OpenSim's
  ``getControlValueMax`` tests the *minimum*'s nodes), else the ``max_nodes``
  interpolated;
- ``use_steps``: whether the computed control is held over each window (steps) or
  linear between the windows' ends.

The nodes are interpolated as ``ControlLinear::getControlValue`` does (linear, or steps
with ``use_steps``; linear extrapolation with ``extrapolate``). A constraint that names
no actuator of the model is reported (OpenSim ignores it silently), as are ``max_nodes``
that OpenSim ignores.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import NamedTuple

import numpy as np

from .forward import _ControlFunction, _flag, _number, _control_nodes
from .setup import SetupError, SetupWarning, read_element

__all__ = ["ControlConstraint", "MatchedConstraints", "read_control_constraints", "match_control_constraints"]

_SUFFIX = ".excitation"


@dataclasses.dataclass(frozen=True, eq=False)
class ControlConstraint:
    """One ``ControlLinear`` of a constraints file.

    **Fields:** ``name``; ``default_min``, ``default_max``; ``min_nodes``,
    ``max_nodes``: ``(times (s), values)`` arrays, empty when absent; ``use_steps``;
    ``extrapolate``.
    """

    name: str
    default_min: float
    default_max: float
    min_nodes: tuple
    max_nodes: tuple
    use_steps: bool = False
    extrapolate: bool = True

    def _nodes(self, nodes, times, default):
        t, v = nodes
        if len(t) == 0:
            return np.full(len(times), default)
        fn = _ControlFunction.of(t, v, self.use_steps, self.extrapolate)
        return np.asarray(fn(np.asarray(times, float)), float)

    def bounds(self, times) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` bounds at ``times`` (s), each ``(len(times),)``, as
        OpenSim's ``getControlValueMin``/``getControlValueMax`` give them."""
        times = np.atleast_1d(np.asarray(times, float))
        if len(self.min_nodes[0]) == 0:
            return np.full(len(times), self.default_min), np.full(len(times), self.default_max)
        return self._nodes(self.min_nodes, times, self.default_min), self._nodes(
            self.max_nodes, times, self.default_max
        )


def read_control_constraints(path) -> list[ControlConstraint]:
    """Read a control constraints file (an OpenSim ``ControlSet`` ``.xml``).

    **Arguments:** ``path``: the file.

    **Returns:** its ``ControlLinear`` objects as ``ControlConstraint``, in file order.

    **Raises:** ``FileNotFoundError``; ``SetupError`` naming the file and control for
    malformed XML, a control of another type, a non-numeric value, node times that do
    not increase, or ``min_nodes`` without ``max_nodes`` (OpenSim's upper bound would be
    NaN).
    """
    path = os.fspath(path)
    node = read_element(path, "ControlSet", "control constraints")
    objects = node.find("objects")
    out = []
    for c in objects.children if objects is not None else []:
        name = c.name or ""
        if c.tag != "ControlLinear":
            raise SetupError(f"{path}: <{c.tag} name={name!r}> is not a control constraint (a ControlLinear)")
        lo_nodes, hi_nodes = _control_nodes(c, "min_nodes", path), _control_nodes(c, "max_nodes", path)
        if len(lo_nodes[0]) and not len(hi_nodes[0]):
            raise SetupError(
                f"{path}: <ControlLinear name={name!r}> has <min_nodes> but no <max_nodes> (OpenSim's upper bound "
                "would be NaN)"
            )
        if len(hi_nodes[0]) and not len(lo_nodes[0]):
            warnings.warn(
                f"{path}: <ControlLinear name={name!r}>: its <max_nodes> are ignored without <min_nodes> (OpenSim's "
                "ControlLinear::getControlValueMax then gives <default_max>)",
                SetupWarning,
                stacklevel=2,
            )
        out.append(
            ControlConstraint(
                name,
                _number(c, "default_min", path, 0.0),
                _number(c, "default_max", path, 1.0),
                lo_nodes,
                hi_nodes,
                _flag(c, "use_steps", False, path),
                _flag(c, "extrapolate", True, path),
            )
        )
    return out


class MatchedConstraints(NamedTuple):
    """The constraints of a file matched to a model's actuators: ``by_actuator``:
    ``{actuator index: ControlConstraint}``."""

    by_actuator: dict

    def bounds(self, times, lo, hi) -> tuple[np.ndarray, np.ndarray]:
        """The control bounds at ``times`` (s, ``(K,)``): ``(lo (K, n), hi (K, n))``, the
        defaults ``lo``, ``hi`` ``(n,)`` where no constraint applies.

        **Raises:** ``SetupError`` naming the actuator and time where a constraint's
        lower bound is above its upper bound."""
        times = np.atleast_1d(np.asarray(times, float))
        lo_t = np.tile(np.asarray(lo, float), (len(times), 1))
        hi_t = np.tile(np.asarray(hi, float), (len(times), 1))
        for i, c in self.by_actuator.items():
            lo_t[:, i], hi_t[:, i] = c.bounds(times)
            bad = np.flatnonzero(lo_t[:, i] > hi_t[:, i])
            if len(bad):
                k = int(bad[0])
                raise SetupError(
                    f"control constraint {c.name!r}: its lower bound is above its upper bound at t = {times[k]:g} s "
                    f"({lo_t[k, i]:g} > {hi_t[k, i]:g})"
                )
        return lo_t, hi_t

    def steps(self, default) -> np.ndarray:
        """Per actuator, whether its control is held over each window (``use_steps``):
        the constraint's, else ``default`` ``(n,)``."""
        out = np.asarray(default, bool).copy()
        for i, c in self.by_actuator.items():
            out[i] = c.use_steps
        return out


def match_control_constraints(path, actuator_names) -> MatchedConstraints:
    """The constraints of ``path`` matched to the actuators, as OpenSim matches them
    (``A.excitation``, then ``A.excitation.excitation``; the first of a name).

    **Arguments:** ``path``: the constraints file, or ``None`` (no constraints);
    ``actuator_names``: the actuators' names, in the controls' order.

    **Returns:** ``MatchedConstraints``.

    **Raises:** ``SetupError`` as ``read_control_constraints``; a ``SetupWarning`` names
    each constraint that names no actuator (OpenSim ignores it silently).
    """
    if path is None:
        return MatchedConstraints({})
    constraints = read_control_constraints(path)
    by_name = {}
    for c in constraints:
        by_name.setdefault(c.name, c)
    matched, used = {}, set()
    for i, actuator in enumerate(actuator_names):
        for name in (actuator + _SUFFIX, actuator + _SUFFIX + _SUFFIX):
            if name in by_name:
                matched[i] = by_name[name]
                used.add(name)
                break
    for c in constraints:
        if c.name in used:
            continue
        hint = f"; OpenSim names its control {c.name + _SUFFIX!r}" if c.name in actuator_names else ""
        warnings.warn(
            f"{os.fspath(path)}: the control constraint {c.name!r} names no actuator of the model; it is ignored{hint}",
            SetupWarning,
            stacklevel=2,
        )
    return MatchedConstraints(matched)
