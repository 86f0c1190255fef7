"""Safe evaluation of OpenSim (Lepton) expressions, and ExpressionBasedCoordinateForce.

OpenSim parses force expressions with Lepton. This module reimplements Lepton's
grammar with a small recursive-descent parser (no ``eval``) and compiles the tree
once, at build time, into a closure of ``jax.numpy`` operations, so the force is
jit-able, vmappable and differentiable in ``q`` and ``qdot``.

Grammar (Lepton's): numbers (``1``, ``.5``, ``2.5e-3``); variables; ``+ - * /``
(left-associative) and ``^`` (right-associative, binding tighter than unary minus:
``-q^2 = -(q^2)``); parentheses; functions ``sqrt exp log sin cos sec csc tan cot
asin acos atan sinh cosh tanh erf erfc step delta square cube recip min max abs``
(``step(x)`` is 1 for ``x >= 0``; ``delta(x)`` is 1 at 0); and trailing
subexpression definitions ``expr; name = subexpr`` as Lepton allows. Constant
subexpressions are folded at compile time, as Lepton's ``optimize`` does; powers
with a constant integer exponent are exact repeated products (so negative bases
work). Results agree with OpenSim to rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np

from ..component import ModelError, Stage, flag, output
from ..groups import Forces
from ._common import coordinate_indices, masked_mobility
from .base import Force

__all__ = ["ExpressionError", "parse_expression", "compile_expression", "ExpressionBasedCoordinateForce"]


class ExpressionError(ValueError):
    """A malformed expression: the message quotes the expression and the problem."""


_OPERATORS = "+-*/^"
_PRECEDENCE = {"+": 0, "-": 0, "*": 1, "/": 1, "^": 3}
_LEFT_ASSOC = {"+": True, "-": True, "*": True, "/": True, "^": False}

_FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "sqrt": (1, jnp.sqrt),
    "exp": (1, jnp.exp),
    "log": (1, jnp.log),
    "sin": (1, jnp.sin),
    "cos": (1, jnp.cos),
    "tan": (1, jnp.tan),
    "sec": (1, lambda x: 1.0 / jnp.cos(x)),
    "csc": (1, lambda x: 1.0 / jnp.sin(x)),
    "cot": (1, lambda x: 1.0 / jnp.tan(x)),
    "asin": (1, jnp.arcsin),
    "acos": (1, jnp.arccos),
    "atan": (1, jnp.arctan),
    "sinh": (1, jnp.sinh),
    "cosh": (1, jnp.cosh),
    "tanh": (1, jnp.tanh),
    "erf": (1, jsp.erf),
    "erfc": (1, jsp.erfc),
    "step": (1, lambda x: jnp.where(x >= 0.0, 1.0, 0.0)),
    "delta": (1, lambda x: jnp.where(x == 0.0, 1.0, 0.0)),
    "square": (1, lambda x: x * x),
    "cube": (1, lambda x: x * x * x),
    "recip": (1, lambda x: 1.0 / x),
    "min": (2, jnp.minimum),
    "max": (2, jnp.maximum),
    "abs": (1, jnp.abs),
}


def _tokenize(text: str) -> list[tuple[str, str]]:
    """Lepton's tokens: ``(kind, text)`` with kind number, op, var, func, (, ), comma."""
    tokens, pos, n = [], 0, len(text)
    while pos < n:
        c = text[pos]
        if c.isspace():
            pos += 1
        elif c in "(),":
            tokens.append(({"(": "(", ")": ")", ",": "comma"}[c], c))
            pos += 1
        elif c in _OPERATORS:
            tokens.append(("op", c))
            pos += 1
        elif c == "." or c.isdigit():
            start, seen_dot, seen_exp = pos, c == ".", False
            pos += 1
            while pos < n:
                c = text[pos]
                if c.isdigit():
                    pos += 1
                elif c == "." and not seen_dot:
                    seen_dot = True
                    pos += 1
                elif c in "eE" and not seen_exp:
                    seen_exp = True
                    pos += 2 if pos + 1 < n and text[pos + 1] in "+-" else 1
                else:
                    break
            tokens.append(("number", text[start:pos]))
        else:
            start = pos
            while pos < n and text[pos] not in _OPERATORS + ",)(" and not text[pos].isspace():
                pos += 1
            if pos < n and text[pos] == "(":
                tokens.append(("func", text[start:pos]))
                pos += 1
            else:
                tokens.append(("var", text[start:pos]))
    return tokens


class _Parser:
    def __init__(self, tokens, source: str, subexpressions: dict):
        self.tokens = tokens
        self.pos = 0
        self.source = source
        self.subs = subexpressions

    def error(self, msg: str):
        return ExpressionError(f"expression {self.source!r}: {msg}")

    def parse(self, precedence: int = 0):
        if self.pos >= len(self.tokens):
            raise self.error("unexpected end of expression")
        kind, text = self.tokens[self.pos]
        if kind == "number":
            try:
                node = ("const", float(text))
            except ValueError:
                raise self.error(f"malformed number {text!r}") from None
            self.pos += 1
        elif kind == "var":
            node = self.subs.get(text, ("var", text))
            self.pos += 1
        elif kind == "(":
            self.pos += 1
            node = self.parse(0)
            self.expect(")")
        elif kind == "func":
            self.pos += 1
            args = [self.parse(0)]
            while self.pos < len(self.tokens) and self.tokens[self.pos][0] == "comma":
                self.pos += 1
                args.append(self.parse(0))
            self.expect(")")
            if text not in _FUNCTIONS:
                raise self.error(f"unknown function {text!r}")
            if len(args) != _FUNCTIONS[text][0]:
                raise self.error(f"function {text!r} takes {_FUNCTIONS[text][0]} argument(s), got {len(args)}")
            node = ("fn", text, tuple(args))
        elif kind == "op" and text == "-":
            self.pos += 1
            node = ("neg", self.parse(2))
        else:
            raise self.error(f"unexpected token {text!r}")
        while self.pos < len(self.tokens) and self.tokens[self.pos][0] == "op":
            op = self.tokens[self.pos][1]
            prec = _PRECEDENCE[op]
            if prec < precedence:
                return node
            self.pos += 1
            rhs = self.parse(prec + 1 if _LEFT_ASSOC[op] else prec)
            node = ("bin", op, node, rhs)
        return node

    def expect(self, kind: str):
        if self.pos >= len(self.tokens) or self.tokens[self.pos][0] != kind:
            raise self.error("unbalanced parentheses")
        self.pos += 1


def parse_expression(text: str):
    """Parse a Lepton expression into a tree of tuples (hashable, static).

    Nodes: ``("const", value)``, ``("var", name)``, ``("neg", a)``,
    ``("bin", op, a, b)``, ``("fn", name, (args...))``.

    **Raises:** ``ExpressionError`` for malformed input.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expression must be a string, got {type(text).__name__}")
    parts = text.split(";")
    subs: dict = {}
    for part in reversed(parts[1:]):  # Lepton parses definitions from the last one
        if not part.strip():
            continue
        name, eq, body = part.partition("=")
        if not eq or not name.strip():
            raise ExpressionError(f"expression {text!r}: subexpression {part.strip()!r} does not specify a name")
        subs[name.strip()] = _parse_all(body, text, subs)
    return _fold(_parse_all(parts[0], text, subs))


def _parse_all(text: str, source: str, subs: dict):
    p = _Parser(_tokenize(text), source, dict(subs))
    node = p.parse(0)
    if p.pos != len(p.tokens):
        raise p.error(f"unexpected text at end of expression: {p.tokens[p.pos][1]!r}")
    return node


def _is_const(node) -> bool:
    return node[0] == "const"


def _fold(node):
    """Precompute constant arithmetic (Lepton's ``optimize``; function calls of
    constants are left to run under jit)."""
    kind = node[0]
    if kind == "neg":
        a = _fold(node[1])
        return ("const", -a[1]) if _is_const(a) else ("neg", a)
    if kind == "bin":
        a, b = _fold(node[2]), _fold(node[3])
        if _is_const(a) and _is_const(b):
            return ("const", float(_apply_bin(node[1], np.float64(a[1]), np.float64(b[1]), np)))
        return ("bin", node[1], a, b)
    if kind == "fn":
        return ("fn", node[1], tuple(_fold(a) for a in node[2]))
    return node


def _apply_bin(op, a, b, xp):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    return xp.power(a, b)


def _variables(node, out: set) -> set:
    if node[0] == "var":
        out.add(node[1])
    elif node[0] == "neg":
        _variables(node[1], out)
    elif node[0] == "bin":
        _variables(node[2], out)
        _variables(node[3], out)
    elif node[0] == "fn":
        for a in node[2]:
            _variables(a, out)
    return out


def compile_expression(text: str, variables: tuple[str, ...] = ("q", "qdot")) -> Callable:
    """Compile a Lepton expression into ``f(*arrays)`` built from ``jax.numpy`` ops.

    **Arguments:** ``text``: the expression; ``variables``: the names of the
    positional arguments of the returned function, in order.

    **Returns:** a function of ``len(variables)`` arrays (broadcast together)
    returning an array of their broadcast shape.

    **Raises:** ``ExpressionError`` for malformed expressions and for variables not
    in ``variables``.
    """
    tree = parse_expression(text)
    unknown = sorted(_variables(tree, set()) - set(variables))
    if unknown:
        raise ExpressionError(f"expression {text!r}: unknown variable(s) {unknown}; allowed: {list(variables)}")
    index = {v: i for i, v in enumerate(variables)}

    def build(node) -> Callable:
        kind = node[0]
        if kind == "const":
            value = node[1]
            return lambda args: value
        if kind == "var":
            i = index[node[1]]
            return lambda args: args[i]
        if kind == "neg":
            a = build(node[1])
            return lambda args: -a(args)
        if kind == "bin":
            op, a = node[1], build(node[2])
            if op == "^" and _is_const(node[3]) and float(node[3][1]).is_integer() and abs(node[3][1]) < 2**31:
                k = int(node[3][1])
                return lambda args: _integer_power(a(args), k)
            b = build(node[3])
            return lambda args: _apply_bin(op, a(args), b(args), jnp)
        fn = _FUNCTIONS[node[1]][1]
        parts = [build(a) for a in node[2]]
        return lambda args: fn(*[p(args) for p in parts])

    body = build(tree)

    def evaluate(*arrays):
        if len(arrays) != len(variables):
            raise TypeError(f"expected {len(variables)} arguments {variables}, got {len(arrays)}")
        arrays = [jnp.asarray(a) for a in arrays]
        shape = jnp.broadcast_shapes(*[a.shape for a in arrays]) if arrays else ()
        dtype = jnp.result_type(*arrays) if arrays else jnp.result_type(float)
        return jnp.broadcast_to(jnp.asarray(body(arrays), dtype), shape)

    evaluate.tree = tree
    return evaluate


def _integer_power(x, k: int):
    x = jnp.asarray(x)
    if k == 0:
        return jnp.ones_like(x)
    y = x ** abs(k)
    return 1.0 / y if k < 0 else y


class ExpressionBasedCoordinateForce(Force):
    """A generalized force given by an expression of ``q`` and ``qdot`` (OpenSim
    ExpressionBasedCoordinateForce).

    **Fields:** ``coordinate``: the coordinate's name (or path); ``expression``: a
    Lepton expression of ``q`` (the coordinate's value) and ``qdot`` (its speed),
    e.g. ``"-10*q - 0.5*qdot"``. Checked and compiled when the model is built.
    """

    coordinate: str = flag("", doc="Name of the coordinate to apply the force to.")
    expression: str = flag("0.0", doc="Force magnitude as a function of q and qdot.")

    def __init__(
        self,
        name: str,
        coordinate: str = "",
        expression: str = "0.0",
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.coordinate = coordinate
        self.expression = expression
        self.applies_force = applies_force
        self.components = components

    def validate(self, path: str) -> None:
        """Check the expression parses and uses only ``q`` and ``qdot``."""
        super().validate(path)
        try:
            compile_expression(self.expression)
        except ExpressionError as e:
            raise ModelError(path, str(e), prop="expression", value=self.expression) from None

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: coordinate indices, whether each force applies, and one
        compiled function per distinct expression with the members that use it."""
        comps = [build.find(p) for p in paths]
        # one compiled function per distinct expression, evaluated on all its members
        exprs = sorted({c.expression for c in comps})
        members = tuple(np.asarray([i for i, c in enumerate(comps) if c.expression == e], np.int32) for e in exprs)
        return {
            **coordinate_indices(build, paths),
            "on": np.asarray([c.applies_force for c in comps], bool),
            "functions": tuple(compile_expression(e) for e in exprs),
            "members": members,
        }

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: none (the expressions are static)."""
        return {}

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Generalized forces of the group: each expression evaluated at its coordinate's
        ``q`` and ``qdot`` (N or N·m, on that coordinate's ``u``).

        **Returns:** ``Forces`` with ``mobility`` ``(nu,)`` and output ``force_magnitude`` ``(k,)``."""
        s = group.static
        q, qdot = ctx.state.q[s["q"]], ctx.state.u[s["u"]]
        f = jnp.zeros_like(q)
        for fn, idx in zip(s["functions"], s["members"]):
            f = f.at[idx].set(fn(q[idx], qdot[idx]))
        return Forces(mobility=masked_mobility(ctx.tree.nu, s["u"], f, s["on"]), outputs={"force_magnitude": f})

    @output(Stage.DYNAMICS)
    def force_magnitude(self, ctx):
        """The generalized force applied (N or N m)."""
        return ctx.group_output(ctx.path, "force_magnitude")
