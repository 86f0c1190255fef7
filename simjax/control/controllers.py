"""Controllers: components that compute actuator controls from time and state.

(OpenSim Controller, PrescribedController.) Controls of all enabled controllers are
added together, as in OpenSim, in ``system.actuator_names`` order; an actuator no
controller drives gets 0. Passing ``controls=`` to ``forward_dynamics``/``simulate``
bypasses the controllers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax.numpy as jnp
import numpy as np

from ..component import Component, ModelError, flag, socket
from ..function_bank import FunctionBank, bank_eval, bank_params

__all__ = ["Controller", "PrescribedController", "PolicyController"]


class Controller(Component):
    """Computes controls for a list of actuators (abstract).

    **Fields:** ``actuators``: list socket of the actuators it controls (soft: an
    actuator removed from the model is dropped from the list); ``enabled``.
    """

    set_name: ClassVar[str | None] = "controllerset"

    actuators: tuple = socket("Actuator", many=True, hard=False, doc="The actuators this controller drives.")
    enabled: bool = flag(True, doc="Whether the controller contributes controls.")

    @classmethod
    def compile_group(cls, build, paths) -> dict:
        """Static data of a group (see ``simjax.groups``)."""
        return {}

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group."""
        return {}

    @classmethod
    def group_controls(cls, group, params, ctx):
        """Controls this group adds, ``(n_controls,)``."""
        raise NotImplementedError


class PrescribedController(Controller):
    """Each actuator's control is a Function of time (OpenSim PrescribedController).

    **Fields:** ``actuators`` and ``control_functions`` (one Function per actuator,
    same order).

    ``PrescribedController("brain").prescribe("/forceset/biceps", StepFunction(...))``
    """

    control_functions: tuple = ()

    def __init__(
        self,
        name: str,
        actuators: tuple = (),
        control_functions: tuple = (),
        enabled: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.actuators = tuple(actuators)
        self.control_functions = tuple(control_functions)
        self.enabled = enabled
        self.components = components

    def prescribe(self, actuator: str, function) -> PrescribedController:
        """A copy that drives ``actuator`` (a path) with ``function`` of time."""
        acts = list(self.actuators)
        fns = list(self.control_functions)
        if actuator in acts:
            fns[acts.index(actuator)] = function
        else:
            acts.append(actuator)
            fns.append(function)
        return self.replace(actuators=tuple(acts), control_functions=tuple(fns))

    def prune_reference(self, name: str, ref: str) -> PrescribedController:
        """Drop an actuator and its control function together."""
        if name != "actuators" or ref not in self.actuators:
            return super().prune_reference(name, ref)
        keep = [i for i, a in enumerate(self.actuators) if a != ref]
        return self.replace(
            actuators=tuple(self.actuators[i] for i in keep),
            control_functions=tuple(self.control_functions[i] for i in keep),
        )

    def validate(self, path: str) -> None:
        """Check there is one function per actuator."""
        super().validate(path)
        if len(self.actuators) != len(self.control_functions):
            raise ModelError(
                path,
                f"{len(self.actuators)} actuators but {len(self.control_functions)} control functions",
                prop="control_functions",
                value=len(self.control_functions),
            )

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: every enabled controller's functions in one ``FunctionBank``,
        and the control index each one drives."""
        fns, ctrl = [], []
        for p in paths:
            c = build.find(p)
            if not c.enabled:
                continue
            for a, f in zip(build.socket(p, "actuators"), c.control_functions):
                ctrl.append(build.control_index(a))
                fns.append(f)
        return {"control": np.asarray(ctrl, np.int32), "bank": FunctionBank.of(fns), "n": len(fns)}

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: the enabled controllers' functions, stacked as the
        bank's parameters."""
        fns = []
        for p in group.paths:
            c = model.find(p)
            if c.enabled:
                fns.extend(c.control_functions)
        return bank_params(group.static["bank"], fns)

    @classmethod
    def group_controls(cls, group, params, ctx):
        """Controls the group adds: each function evaluated at ``t`` (s), added into its
        actuator's slot of an ``(n_actuators,)`` array (zeros elsewhere)."""
        s = group.static
        out = jnp.zeros(len(ctx.topology.actuators), ctx.state.t.dtype)
        if s["n"] == 0:
            return out
        (vals,) = bank_eval(s["bank"], params, jnp.broadcast_to(ctx.state.t, (s["n"],)))
        return out.at[s["control"]].add(vals)


class PolicyController(Controller):
    """Controls from any callable pytree ``policy(t, state) -> (n_actuators,)``, e.g. an
    Equinox MLP: its arrays are leaves of the model, so gradients reach them.

    **Fields:** ``actuators`` (the policy's outputs, in order) and ``policy``.

    Policies of different controllers have different structures, so a model's
    policies are evaluated one after the other (a model has a handful of
    controllers, not thousands).
    """

    policy: Any = None

    def __init__(self, name: str, policy, actuators: tuple = (), enabled: bool = True, components: tuple = ()):
        self.name = name
        self.policy = policy
        self.actuators = tuple(actuators)
        self.enabled = enabled
        self.components = components

    def validate(self, path: str) -> None:
        """Check the policy is callable."""
        super().validate(path)
        if not callable(self.policy):
            raise ModelError(
                path, "the policy must be callable as policy(t, state)", prop="policy", value=type(self.policy).__name__
            )

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: for every enabled controller, its index in the group and
        the control indices of its actuators."""
        members = [
            (i, np.asarray([build.control_index(a) for a in build.socket(p, "actuators")], np.int32))
            for i, p in enumerate(paths)
            if build.find(p).enabled
        ]
        return {"members": members}

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: the enabled controllers' policies (pytrees)."""
        return {"policies": [model.find(group.paths[i]).policy for i, _ in group.static["members"]]}

    @classmethod
    def group_controls(cls, group, params, ctx):
        """Controls the group adds: each ``policy(t, state)`` added into its actuators' slots
        of an ``(n_actuators,)`` array.

        Raises ``ModelError`` (at trace time) when a policy returns a shape other than
        ``(n_actuators_of_that_controller,)``."""
        out = jnp.zeros(len(ctx.topology.actuators), ctx.state.t.dtype)
        for (i, control), policy in zip(group.static["members"], params["policies"]):
            vals = jnp.asarray(policy(ctx.state.t, ctx.state), out.dtype)
            if vals.shape != (len(control),):
                raise ModelError(
                    group.paths[i],
                    f"the policy returned shape {vals.shape}; expected ({len(control)},), one control per actuator",
                    prop="policy",
                )
            out = out.at[control].add(vals)
        return out
