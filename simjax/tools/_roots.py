"""The derivatives of a root found without them: ``implicit_root``, the implicit
function theorem as one Newton step.

Below every tool that differentiates an optimum (the inverse kinematics in
``kinematics``, static optimization in ``optimization``); re-exported by
``gradients``, which documents the tools' derivatives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["implicit_root"]


def implicit_root(residual, solution):
    """``solution``, a root of ``residual`` found without derivatives (an iterative
    solver's output), with the derivatives of that root by the implicit function
    theorem: ``d solution = -K^+ (d residual / d theta) d theta`` for every traced value
    ``theta`` that ``residual`` closes over, ``K = d residual / d solution`` (a dense
    Jacobian; its pseudo-inverse leaves a multiplier that nothing determines at zero
    without spoiling the others).

    It is written as one Newton step from the root with ``K`` held constant,
    ``x - K^+ (residual(x) - residual(x))``, whose value is exactly ``x`` and whose
    derivative is the theorem's: no custom rule, so forward and reverse mode,
    ``vmap`` and ``jit`` all compose (first derivatives; higher ones are not those of
    the root). (``jax.lax.custom_root``, the natural rule, fails in JAX 0.10 under
    ``jacfwd`` of a ``jit`` of a ``vmap`` where the solution is batched differently
    from the parameters: a custom JVP's primal and tangent batch dimensions disagree.)

    **Arguments:** ``residual``: ``x (n,) -> (n,)``; ``solution``: ``(n,)`` (its own
    derivatives are discarded).

    **Returns:** ``solution`` (the same values), with the root's derivatives.
    """
    x = jax.lax.stop_gradient(solution)
    K = jax.lax.stop_gradient(jax.jacfwd(residual)(x))
    r = residual(x)
    return x - jnp.linalg.pinv(K) @ (r - jax.lax.stop_gradient(r))
