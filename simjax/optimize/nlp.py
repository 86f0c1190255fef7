"""Staged nonlinear programs: the form the collocation transcription produces.

A staged NLP has ``K`` stages of variables ``z_k`` (one mesh point each) and a few
border variables ``g`` that every stage may see (a free final time, parameters)::

    minimize    sum_k cost(k, z_k, z_{k+1}, g) + border_cost(g)
    subject to  c_lower[k] <= constraints(k, z_k, z_{k+1}, g) <= c_upper[k]   (each k)
                g_lower <= border_constraints(g) <= g_upper
                z_lower <= z <= z_upper,  border_lower <= g <= border_upper

A stage sees only its successor (for the last stage ``z_K`` is a copy of ``z_{K-1}``),
so the KKT matrix is block tridiagonal with a dense border (``kkt``). The last
``local_rows`` rows of each stage are the stage's own (path constraints, a multibody
residual: rows of ``z_k`` alone, or mostly): the solver groups their multipliers with
``z_k`` rather than with ``z_{k+1}`` as it does the linking rows (the defects). Rows with
``lower == upper`` are equalities; a variable with ``lower == upper`` is fixed; a row
with infinite bounds on both sides is inactive (nothing is asked of it).

``dense_nlp`` wraps an ordinary NLP (one stage) in this form.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["StagedNLP", "dense_nlp"]


class StagedNLP(eqx.Module):
    """A staged NLP (see the module).

    **Fields:**

    - ``cost(k, z, z_next, g, theta) -> ()``; ``constraints(k, z, z_next, g, theta) ->
      (m,)``: per stage, ``k`` a traced index ``0..K-1``;
    - ``border_cost(g, theta) -> ()``; ``border_constraints(g, theta) -> (mg,)``;
    - ``z_lower``, ``z_upper (K, nz)``; ``c_lower``, ``c_upper (K, m)``;
      ``border_lower``, ``border_upper (ng,)``; ``g_lower``, ``g_upper (mg,)``;
    - ``theta``: problem data the functions close over as an argument (a pytree:
      what the solution may be differentiated with respect to);
    - ``local_rows``: how many of each stage's rows, the last ones, are its own (see
      the module);
    - ``sparsity``: the pattern of the stages' derivatives and its coloring
      (``sparsity.detect_sparsity``), or ``None``: the solver then differentiates
      each stage densely.
    """

    cost: Callable = eqx.field(static=True)
    constraints: Callable = eqx.field(static=True)
    border_cost: Callable = eqx.field(static=True)
    border_constraints: Callable = eqx.field(static=True)
    z_lower: jax.Array
    z_upper: jax.Array
    c_lower: jax.Array
    c_upper: jax.Array
    border_lower: jax.Array
    border_upper: jax.Array
    g_lower: jax.Array
    g_upper: jax.Array
    theta: object = None
    local_rows: int = eqx.field(static=True, default=0)
    sparsity: object = eqx.field(static=True, default=None)

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """``(K, nz, m, ng, mg)``."""
        K, nz = self.z_lower.shape
        return K, nz, self.c_lower.shape[1], self.border_lower.shape[0], self.g_lower.shape[0]


def _none_constraints(*args):
    return jnp.zeros(0)


def dense_nlp(
    objective, constraints, constraint_lower, constraint_upper, lower, upper, local: bool = False
) -> StagedNLP:
    """An ordinary NLP ``min f(x)`` s.t. ``cl <= c(x) <= cu``, ``l <= x <= u`` as one
    stage of a ``StagedNLP`` (for small problems and tests).

    **Arguments:** ``objective(x) -> ()``; ``constraints(x) -> (m,)`` or ``None``;
    ``constraint_lower``, ``constraint_upper (m,)``; ``lower``, ``upper (n,)``.

    ``local``: the rows as the stage's own (``StagedNLP.local_rows``) rather than
    linking rows (the solver factors the same matrix with another pivot order).

    **Returns:** a ``StagedNLP`` with ``K = 1``, no border.
    """
    dtype = jnp.result_type(float)
    n = np.asarray(lower).shape[0]
    m = 0 if constraints is None else np.asarray(constraint_lower).shape[0]
    con = (
        (lambda k, z, zn, g, th: constraints(z))
        if constraints is not None
        else (lambda k, z, zn, g, th: jnp.zeros(0, dtype))
    )
    return StagedNLP(
        cost=lambda k, z, zn, g, th: objective(z),
        constraints=con,
        border_cost=lambda g, th: jnp.zeros((), dtype),
        border_constraints=lambda g, th: jnp.zeros(0, dtype),
        z_lower=jnp.asarray(lower, dtype).reshape(1, n),
        z_upper=jnp.asarray(upper, dtype).reshape(1, n),
        c_lower=jnp.asarray(constraint_lower if m else np.zeros(0), dtype).reshape(1, m),
        c_upper=jnp.asarray(constraint_upper if m else np.zeros(0), dtype).reshape(1, m),
        border_lower=jnp.zeros(0, dtype),
        border_upper=jnp.zeros(0, dtype),
        g_lower=jnp.zeros(0, dtype),
        g_upper=jnp.zeros(0, dtype),
        local_rows=m if local else 0,
    )
