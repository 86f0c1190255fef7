"""Probes: components that compute a vector of model quantities, optionally integrated.

(OpenSim ``Probe``.) A probe computes its *inputs*, a vector of model quantities
(each subclass says which: ``probe_output_labels`` and ``group_probe_inputs``),
applies its ``probe_operation`` and scales the result by ``gain``; the result is the
output ``probe_outputs`` (a ``Vector``, Report stage):

- ``'value'``: ``probe_outputs = gain * inputs``;
- ``'integrate'``: the probe owns one continuous state variable per input, whose
  derivative is the input (the gain is not applied to it) and whose default is 0;
  ``probe_outputs = gain * (z + initial_conditions_for_integration)``. OpenSim
  keeps these integrals in anonymous SimTK measures (they are in the state's Z
  after the named variables, but in no list of state-variable names); simjax names
  them by the probe's output labels, ``/probeset/metabolics/metabolics_TOTAL``. As
  in OpenSim, initial conditions whose number differs from the number of inputs are
  replaced by zeros (with a logged error).
- ``'differentiate'``, ``'minimum'``, ``'minabs'``, ``'maximum'``, ``'maxabs'``:
  accepted in files (a model using them loads, builds and saves) but evaluating the
  probe's output raises ``ModelError``: OpenSim computes them from the history of
  the simulation (the previous step's value, a running extreme updated when a step
  is accepted), which a pure function of one state cannot reproduce.

A disabled probe (``enabled=False``) has no state variables, and asking for its
output raises ``ModelError``, as OpenSim's ``getProbeOutputs`` throws.

Probes of one class are evaluated together (DESIGN.md rule 3): all probes' inputs
are one flat vector, computed once per evaluation context by the class's
``group_probe_inputs``; member ``j``'s inputs are ``inputs[offsets[j]:offsets[j+1]]``.
The integrals' derivatives reach the integrator through the group's ``group_zdot``
(the same role muscles' and limit forces' state variables use).
"""

from __future__ import annotations

import logging
from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from ..component import Component, ModelError, Stage, flag, output, prop

__all__ = ["Probe", "PROBE_OPERATIONS", "probe_group", "probe_inputs"]

log = logging.getLogger("simjax")

#: every operation OpenSim 4.6's Probe accepts; simjax evaluates the first two
PROBE_OPERATIONS = ("value", "integrate", "differentiate", "minimum", "minabs", "maximum", "maxabs")
_EVALUATED = ("value", "integrate")


class Probe(Component):
    """A model quantity (a vector) with an operation and a gain applied (OpenSim Probe;
    abstract).

    **Fields:**

    - ``enabled``: whether the probe is evaluated (a disabled probe has no state
      variables and no output);
    - ``probe_operation``: ``'value'`` (default) or ``'integrate'`` (see the module
      docstring for the others);
    - ``initial_conditions_for_integration``: one value per input, added to the
      integral (``'integrate'`` only; in the unit of the inputs times seconds);
    - ``gain``: the factor the output is scaled by (dimensionless).

    **Output:** ``probe_outputs`` (``Vector``, Report stage).

    Subclasses implement ``probe_output_labels`` and the classmethod
    ``group_probe_inputs``, and may extend ``compile_group``/``group_params``.
    """

    set_name: ClassVar[str | None] = "probeset"

    enabled: bool = flag(True, doc="Whether the probe is enabled.")
    probe_operation: str = flag(
        "value",
        doc="The operation applied to the probe's inputs: 'value' or "
        "'integrate' ('differentiate', 'minimum', 'minabs', 'maximum', 'maxabs' are "
        "read and written but not evaluated).",
    )
    initial_conditions_for_integration: np.ndarray = prop(
        (), doc="Initial conditions of the integrals, one per input ('integrate' only).", shape=None
    )
    gain: np.ndarray = prop(1.0, doc="Constant gain the probe's output is scaled by.")

    # -- what a subclass provides -------------------------------------------------------

    def probe_output_labels(self) -> tuple[str, ...]:
        """Labels of the probe's values (OpenSim ``getProbeOutputLabels``), one per input."""
        raise NotImplementedError

    def num_probe_inputs(self) -> int:
        """The number of values the probe computes (OpenSim ``getNumProbeInputs``)."""
        return len(self.probe_output_labels())

    @classmethod
    def group_probe_inputs(cls, group, params, ctx):
        """The inputs of every member of a group, concatenated in member order
        ``(sum of num_probe_inputs,)`` (implemented by each class)."""
        raise NotImplementedError

    # -- checks and state variables ------------------------------------------------------

    def validate(self, path: str) -> None:
        """Check the operation's name (``ModelError``, as OpenSim throws); log OpenSim's
        error when the initial conditions of an integral do not match the number of
        inputs (zeros are used)."""
        super().validate(path)
        if self.probe_operation not in PROBE_OPERATIONS:
            raise ModelError(
                path,
                f"invalid probe operation; OpenSim supports {', '.join(PROBE_OPERATIONS)}",
                prop="probe_operation",
                value=self.probe_operation,
            )
        ic = self.initial_conditions_for_integration
        if (
            self.enabled
            and self.probe_operation == "integrate"
            and isinstance(ic, np.ndarray)
            and ic.size != self.num_probe_inputs()
        ):
            log.error(
                "%s: %d initial condition(s) for integrating %d probe input(s); assuming zeros (as OpenSim)",
                path,
                ic.size,
                self.num_probe_inputs(),
            )

    def integrates(self) -> bool:
        """Whether the probe owns state variables (enabled and ``'integrate'``)."""
        return bool(self.enabled) and self.probe_operation == "integrate"

    def z_variables(self) -> tuple[str, ...]:
        """One integral per input when integrating, named by the output labels."""
        return self.probe_output_labels() if self.integrates() else ()

    def default_z(self):
        """The integrals start at 0 (OpenSim's ``Measure::Integrate`` initial value)."""
        return np.zeros(len(self.z_variables()))

    def initial_conditions(self):
        """The initial conditions used: the property, or zeros when its size does not
        match the number of inputs (OpenSim's fallback) ``(num_probe_inputs,)``."""
        ic = jnp.reshape(jnp.asarray(self.initial_conditions_for_integration), (-1,))
        n = self.num_probe_inputs()
        return ic if ic.shape[0] == n else jnp.zeros(n, ic.dtype)

    def with_defaults_from_state(self, z, d) -> Probe:
        """The probe with the integrals folded into its initial conditions (so that a
        rebuilt model's default state, whose integrals are 0, has the same output)."""
        if not self.integrates():
            return self
        return self.replace(initial_conditions_for_integration=self.initial_conditions() + jnp.asarray(z))

    # -- group evaluation ----------------------------------------------------------------

    @classmethod
    def compile_group(cls, build, paths) -> dict:
        """Static data: ``offsets`` of each member's inputs in the group's flat input
        vector, and ``integrate_rows``, the rows whose derivatives are state
        variables (members that integrate, in member order)."""
        comps = [build.find(p) for p in paths]
        sizes = [c.num_probe_inputs() if c.enabled else 0 for c in comps]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = [np.arange(offsets[j], offsets[j + 1]) for j, c in enumerate(comps) if c.integrates()]
        return {"offsets": offsets, "integrate_rows": np.concatenate([np.zeros(0, np.int64)] + rows)}

    @classmethod
    def group_params(cls, model, group) -> dict:
        """Traced parameters of the group (none in the base class)."""
        return {}

    @classmethod
    def group_zdot(cls, group, params, ctx):
        """Derivatives of the members' integrals: their inputs (no gain)."""
        rows = group.static["integrate_rows"]
        if not len(rows):
            return jnp.zeros(0, ctx.state.t.dtype), {}
        return probe_inputs(group, ctx)[rows], {}

    # -- outputs ---------------------------------------------------------------------------

    @output(Stage.REPORT, "Vector")
    def probe_outputs(self, ctx):
        """The probe's values after its operation, scaled by ``gain``
        ``(num_probe_inputs,)`` (OpenSim ``getProbeOutputs``)."""
        if not self.enabled:
            raise ModelError(ctx.path, "cannot get the output of a disabled probe", prop="enabled", value=False)
        if self.probe_operation not in _EVALUATED:
            raise ModelError(
                ctx.path,
                "simjax evaluates the probe operations 'value' and 'integrate' only",
                prop="probe_operation",
                value=self.probe_operation,
            )
        group = probe_group(ctx, ctx.path)
        j = group.paths.index(ctx.path)
        a, b = (int(x) for x in group.static["offsets"][j : j + 2])
        if self.probe_operation == "integrate":
            za, zb = ctx.topology.z_slices[ctx.path]
            value = ctx.state.z[za:zb] + self.initial_conditions()
        else:
            value = probe_inputs(group, ctx)[a:b]
        return self.gain * value


def probe_group(ctx, path: str):
    """The group that evaluates the probe at ``path`` (probes take part in the
    ``zdot`` role: their integrals are state variables).

    **Arguments:** ``ctx``: an evaluation context (``forward.Context``) of the system;
    ``path``: the probe's path.

    **Returns:** the ``Group``. **Raises:** ``KeyError`` if no probe group has ``path``.
    """
    for g in ctx.topology.role_groups("zdot"):
        if path in g.paths and issubclass(g.cls, Probe):
            return g
    raise KeyError(f"no probe group evaluates {path!r}")


def probe_inputs(group, ctx):
    """The inputs of all members of a probe group at the context's state, computed
    once per context.

    **Arguments:** ``group``: a probe group (``probe_group``); ``ctx``: the context.

    **Returns:** ``(n,)``, member ``j``'s inputs at ``group.static["offsets"][j:j+2]``
    (in the unit of the probe's quantity: W for metabolic power).
    """
    base = ctx.__dict__.get("_ctx", ctx)  # a Context seen from a component (forward._At)
    cache = base.__dict__.setdefault("_simjax_probes", {})
    if id(group) not in cache:
        cache[id(group)] = group.cls.group_probe_inputs(group, ctx.group_params(group), base)
    return cache[id(group)]
