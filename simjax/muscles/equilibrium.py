"""Muscle equilibrium: ``equilibrate_muscles`` (OpenSim ``Model::equilibrateMuscles``).

Every muscle class with a tendon state solves, for all its members at once, the
state that balances fiber and tendon forces (``Muscle.group_equilibrium``):

- Millard2012EquilibriumMuscle: the fiber length with zero fiber velocity
  (``computeFiberEquilibrium(s, false)``);
- Thelen2003Muscle: the fiber length, sharing the path's lengthening speed between
  fiber and tendon by their stiffnesses (``initMuscleState``);
- DeGrooteFregly2016Muscle: the normalized tendon force with zero tendon velocity
  (``computeInitialFiberEquilibrium``);
- Schutte1993Muscle_Deprecated: the fiber length where OpenSim's own
  ``computeIsometricForce`` iteration stops (forces balanced within 0.01 N), so
  that the values are OpenSim's; its derivatives are those of the exact balance.

The solves are bracketed Newton iterations (robust when the activation is small, the
tendon slack or the fiber at its minimum length) and the result is differentiable:
derivatives with respect to the state, the controls and every model property come
from the implicit function theorem at the root, not from the iterations.
"""

from __future__ import annotations

import equinox as eqx

from ..compiling import full_precision
from ..forward import Context
from ..state import State

__all__ = ["equilibrate_muscles"]


@eqx.filter_jit
@full_precision
def equilibrate_muscles(system, state: State, controls=None) -> State:
    """A state whose muscles are in equilibrium (OpenSim ``equilibrateMuscles``).

    **Arguments:** ``system``; ``state``; ``controls``: ``(n_actuators,)`` in
    ``system.actuator_names`` order, or ``None`` to use the model's controllers
    (they matter for muscles that ignore activation dynamics).

    **Returns:** ``state`` with the muscles' fiber lengths (or normalized tendon
    forces) replaced by their equilibrium values; muscles that do not apply force
    are left as they are, as in OpenSim.
    """
    ctx = Context(system, state, controls)
    z = state.z
    for group in system.topology.role_groups("forces"):
        solve = getattr(group.cls, "group_equilibrium", None)
        if solve is None:
            continue
        result = solve(group, ctx)
        if result is None:
            continue
        index, values = result
        z = z.at[index].set(values.astype(z.dtype))
    return State(t=state.t, q=state.q, u=state.u, z=z, d=state.d)
