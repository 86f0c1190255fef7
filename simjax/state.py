"""The State: time and the values of every state variable (Simbody State semantics).

An immutable pytree: ``t`` (s), generalized coordinates ``q``, generalized speeds
``u``, auxiliary continuous variables ``z`` (muscle activations, fiber lengths, ...)
and discrete variables ``d``. The ODE state is ``y = (q, u, z)``. Which component
owns which slice, and the OpenSim name of every entry, is kept by the ``System``.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["State"]


class State(eqx.Module):
    """Time and state variables.

    **Fields:** ``t`` (scalar, s), ``q (nq,)``, ``u (nu,)``, ``z (nz,)``, ``d (nd,)``.
    """

    t: Float[Array, ""]
    q: Float[Array, " nq"]
    u: Float[Array, " nu"]
    z: Float[Array, " nz"]
    d: Float[Array, " nd"]

    @property
    def y(self) -> Float[Array, " ny"]:
        """The continuous state ``concatenate([q, u, z])``."""
        return jnp.concatenate([self.q, self.u, self.z])

    def with_y(self, y, t=None) -> State:
        """A state with ``(q, u, z)`` taken from ``y`` (and optionally a new time)."""
        nq, nu = self.q.shape[-1], self.u.shape[-1]
        return State(
            t=self.t if t is None else jnp.asarray(t, self.t.dtype),
            q=y[..., :nq],
            u=y[..., nq : nq + nu],
            z=y[..., nq + nu :],
            d=self.d,
        )

    def replace(self, **changes) -> State:
        """A copy with some fields replaced: ``state.replace(t=1.0)``."""
        fields = {k: getattr(self, k) for k in ("t", "q", "u", "z", "d")}
        for k, v in changes.items():
            if k not in fields:
                raise TypeError(f"State has no field {k!r}")
            fields[k] = jnp.asarray(v, dtype=fields[k].dtype)
        return State(**fields)
