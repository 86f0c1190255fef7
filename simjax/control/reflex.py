"""A stretch-reflex controller (OpenSim ``ToyReflexController``).

OpenSim's example controller excites each of its muscles in proportion to how fast
the muscle is being stretched: with ``v`` the muscle's lengthening speed (the speed
of its path, m/s), ``l_opt`` its optimal fiber length (m) and ``v_max`` its maximum
contraction velocity (optimal fiber lengths per second), it adds

    control = gain * max(v, 0) / (l_opt * v_max)

(OpenSim writes ``0.5 * gain * (|v| + v) / (l_opt * v_max)``, the same number) to
whatever the other controllers give the muscle. A shortening muscle gets nothing.

The lengthening speed is a Velocity-stage quantity (``muscles.path.path_speeds``),
so the controls stay a function of the state alone: computing them never needs the
forces they drive.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..component import ModelError, prop
from ..muscles.muscle import Muscle
from ..muscles.path import path_speeds, path_topology
from .controllers import Controller

__all__ = ["ToyReflexController"]


class ToyReflexController(Controller):
    """Excites muscles in response to their lengthening: a toy stretch reflex
    (OpenSim ``ToyReflexController``).

    **Fields:** ``actuators``: the muscles it drives (paths; every one must be a
    ``Muscle``, as OpenSim requires); ``gain``: the factor by which the stretch
    reflex is scaled (dimensionless); ``enabled``.

    Each muscle's control gains ``gain * max(v, 0) / (optimal_fiber_length *
    max_contraction_velocity)``, ``v`` the lengthening speed of its path (m/s).

    ``ToyReflexController("Reflexes", ("/forceset/biceps",), gain=0.85)``
    """

    gain: np.ndarray = prop(1.0, doc="Factor by which the stretch reflex is scaled (dimensionless).")

    def __init__(self, name: str, actuators: tuple = (), gain=1.0, enabled: bool = True, components: tuple = ()):
        """**Arguments:** ``name``; ``actuators``: muscle paths
        (``"/forceset/biceps"``); ``gain``; ``enabled``; ``components``."""
        self.name = name
        self.actuators = tuple(actuators)
        self.gain = gain
        self.enabled = enabled
        self.components = components

    @classmethod
    def compile_group(cls, build, paths):
        """Static data: for every (enabled controller, muscle) pair, the muscle's
        control index and path row, and the pair's controller and muscle paths.

        **Raises:** ``ModelError`` naming the controller if one of its actuators is
        not a ``Muscle`` (OpenSim's rule).
        """
        ctrl, muscles, owners = [], [], []
        for p in paths:
            c = build.find(p)
            if not c.enabled:
                continue
            for a in build.socket(p, "actuators"):
                if not isinstance(build.find(a), Muscle):
                    raise ModelError(
                        p,
                        "expected only muscle actuators assigned to this controller's 'actuators' "
                        f"socket, but the non-muscle actuator {a!r} was found",
                        prop="actuators",
                        value=a,
                    )
                ctrl.append(build.control_index(a))
                muscles.append(a)
                owners.append(p)
        rows = []
        if muscles:
            topo = path_topology(build)
            rows = [topo.index[f"{m}/{build.find(m).path.name}"] for m in muscles]
        return {
            "control": np.asarray(ctrl, np.int32),
            "rows": np.asarray(rows, np.int32),
            "muscles": tuple(muscles),
            "owners": tuple(owners),
            "n": len(muscles),
        }

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters per (controller, muscle) pair: the controller's
        ``gain`` and the muscle's ``optimal_fiber_length`` (m) and
        ``max_contraction_velocity`` (optimal fiber lengths/s), each ``(n,)``."""
        s = group.static
        dtype = jnp.result_type(float)
        if s["n"] == 0:
            z = jnp.zeros(0, dtype)
            return {"gain": z, "optimal_fiber_length": z, "max_contraction_velocity": z}

        def stack(paths, name):
            return jnp.stack([jnp.asarray(getattr(model.find(p), name), dtype) for p in paths])

        return {
            "gain": stack(s["owners"], "gain"),
            "optimal_fiber_length": stack(s["muscles"], "optimal_fiber_length"),
            "max_contraction_velocity": stack(s["muscles"], "max_contraction_velocity"),
        }

    @classmethod
    def group_controls(cls, group, params, ctx):
        """The reflex controls of the group's muscles.

        **Arguments:** ``group``; ``params`` (``group_params``); ``ctx``: the
        evaluation ``Context`` (its Velocity stage is used).

        **Returns:** ``(n_actuators,)`` controls, zero for actuators not driven.
        """
        s = group.static
        out = jnp.zeros(len(ctx.topology.actuators), ctx.state.t.dtype)
        if s["n"] == 0:
            return out
        speed = path_speeds(ctx)[s["rows"]]
        max_speed = params["optimal_fiber_length"] * params["max_contraction_velocity"]
        control = 0.5 * params["gain"] * (jnp.abs(speed) + speed) / max_speed
        return out.at[s["control"]].add(control)
