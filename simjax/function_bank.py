"""Evaluate many different OpenSim Functions at once.

A model holds dozens of Functions of different classes (CustomJoint axes, prescribed
controls, moving path points). A bank sorts them once, statically, into

- *affine* ones (``None``, Constant, LinearFunction): ``a x + b``, one vector op;
- *piecewise polynomials* (splines, piecewise linear, step, polynomial, multiplier):
  stacked with ``stack_pp`` and evaluated with one ``vmap``;
- the rare rest (Sine): evaluated one by one.

``None`` stands for the identity when the entry has an argument and for zero when
it has none (a TransformAxis without a coordinate).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .functions import Constant, Function, LinearFunction, MultiplierFunction, Sine, stack_pp

__all__ = ["FunctionBank", "bank_params", "bank_eval"]


@dataclasses.dataclass(frozen=True, eq=False)
class FunctionBank:
    """Static sorting of a list of functions: indices of each kind."""

    n: int
    affine: np.ndarray
    pp: np.ndarray
    other: np.ndarray

    @staticmethod
    def of(functions, has_argument=None) -> FunctionBank:
        """Sort ``functions`` (Function or None) by kind.

        **Arguments:** ``functions``: a sequence; ``has_argument``: per entry, whether
        ``None`` means identity (default True for all).
        """
        kinds = np.asarray([_kind(f) for f in functions], dtype=np.int8)
        return FunctionBank(
            len(kinds), np.flatnonzero(kinds == 0), np.flatnonzero(kinds == 1), np.flatnonzero(kinds == 2)
        )


def _kind(f) -> int:
    if f is None or isinstance(f, (Constant, LinearFunction)):
        return 0
    return 1 if _has_pp(f) else 2


def _has_pp(f) -> bool:
    """Whether ``f`` has an exact piecewise-polynomial form (decided without building it)."""
    if isinstance(f, Sine):
        return False
    if isinstance(f, MultiplierFunction):
        return _has_pp(f.function)
    return True


def _affine(f, has_arg: bool):
    if f is None:
        return (1.0, 0.0) if has_arg else (0.0, 0.0)
    if isinstance(f, Constant):
        return 0.0, f.value
    return f.coefficients[0], f.coefficients[1]


def bank_params(bank: FunctionBank, functions, has_argument=None) -> dict:
    """Traced parameters of the functions in a bank (stacked by kind)."""
    dtype = jnp.result_type(float)
    has = [True] * bank.n if has_argument is None else list(has_argument)
    out = {}
    if len(bank.affine):
        ab = [_affine(functions[i], has[i]) for i in bank.affine]
        out["a"] = jnp.stack([jnp.asarray(a, dtype) for a, _ in ab])
        out["b"] = jnp.stack([jnp.asarray(b, dtype) for _, b in ab])
    if len(bank.pp):
        out["pp"] = stack_pp([functions[i].to_pp() for i in bank.pp])
    if len(bank.other):
        out["other"] = tuple(functions[i] for i in bank.other)
    return out


def bank_eval(bank: FunctionBank, params: dict, x, orders=(0,)):
    """Values and derivatives of every function of the bank.

    **Arguments:** ``x (n,)``: the argument of each function; ``orders``: which
    derivatives (0 = value).

    **Returns:** a tuple with one ``(n,)`` array per requested order.
    """
    if bank.n == 0:
        return tuple(jnp.zeros(0, x.dtype) for _ in orders)
    # each kind evaluated at once, then put in place by one static gather (a scatter
    # per kind is slow on CPU, above all under vmap)
    parts = [[] for _ in orders]
    if len(bank.affine):
        i = bank.affine
        a, b = params["a"], params["b"]
        for k, order in enumerate(orders):
            parts[k].append(a * x[i] + b if order == 0 else (a if order == 1 else jnp.zeros_like(a)))
    if len(bank.pp):
        i = bank.pp
        for k, order in enumerate(orders):
            parts[k].append(jax.vmap(lambda f, s, o=order: f.derivative(s, o))(params["pp"], x[i]))
    if len(bank.other):
        for k, order in enumerate(orders):
            parts[k].append(
                jnp.stack([_scalar_derivative(fn, x[j], order) for j, fn in zip(bank.other, params["other"])]).astype(
                    x.dtype
                )
            )
    perm = np.argsort(np.concatenate([bank.affine, bank.pp, bank.other]))
    return tuple(jnp.concatenate(p)[perm] for p in parts)


def _scalar_derivative(fn: Function, x, order: int):
    return fn(x) if order == 0 else fn.derivative(x, order)
