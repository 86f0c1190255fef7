"""A primal-dual interior-point method for staged NLPs, after IPOPT (Wächter and
Biegler, Math. Program. 106, 2006), in JAX.

Inequalities become equalities with bounded slacks (``c(x) - s = 0``); the bounds
enter a logarithmic barrier whose weight ``mu`` falls monotonically (Fiacco–McCormick).
Each iteration solves the primal-dual Newton system with exact second derivatives
(per-stage Hessians of the Lagrangian, ``vmap``-ed over the stages) by ``kkt``'s
block-tridiagonal factorization, linear in the number of stages; its inertia is
corrected by a multiple of the identity, as IPOPT does. Steps keep a fraction of the
distance to the bounds and are accepted by a filter line search; where none is, a
feasibility-restoration step (a regularized Gauss–Newton step on the constraints) is
taken, and a point where that stalls is reported as locally infeasible.

The problem's objective and constraint rows are scaled at the starting point as IPOPT's
``gradient-based`` scaling does. Everything is one ``lax.while_loop``: ``jit``-able,
``vmap``-able over problems of the same shape (each ends with its own status) and
runnable on any backend.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from . import kkt, progress
from .nlp import StagedNLP

__all__ = ["Options", "moco_options", "Solution", "solve", "STATUS", "print_log"]

#: status codes and their meaning
STATUS = {
    0: "solved",
    1: "iteration limit",
    2: "locally infeasible",
    3: "non-finite value",
    4: "search direction failed",
}


class Options(eqx.Module):
    """Solver settings (IPOPT's names and defaults where they exist).

    **Fields:** ``tol``: the scaled KKT error to stop at; ``constraint_tol``: the largest
    unscaled constraint violation accepted; ``dual_inf_tol``, ``compl_inf_tol``: the
    largest unscaled dual infeasibility and complementarity accepted (IPOPT's; Moco sets
    both to its convergence tolerance: ``moco_options``); ``max_iter``; ``mu_init``: the
    first barrier weight (small, e.g. ``1e-4``, for a warm start); ``bound_push``: how far
    inside its bounds a variable starts; ``scale``: gradient-based scaling;
    ``max_gradient``: the scaling's target largest gradient entry; ``objective_scale``: a
    factor on the objective the solver sees, after the gradient-based scaling (IPOPT's
    ``obj_scaling_factor``; the solution reports the objective and multipliers
    unscaled). Raise it for an objective whose gradients are far below one, such as
    MocoTrack's (about 1e-4 in all): the barrier's pull, ``mu`` over a variable's
    distance to its bound, then no longer outweighs the objective's near its bounds,
    and the solve stops at a nearer optimum (``tol`` applies to the scaled problem);
    ``verbose``: print each iteration;
    ``progress``: show a progress line on standard error (``progress.report``;
    ``solve_batch`` sets ``"batch"``). Both call the host from the compiled solver,
    which keeps it out of JAX's persistent compilation cache.
    """

    tol: float = 1e-8
    constraint_tol: float = 1e-8
    dual_inf_tol: float = 1.0
    compl_inf_tol: float = 1e-4
    max_iter: int = eqx.field(static=True, default=1000)
    mu_init: float = 0.1
    bound_push: float = 1e-2
    scale: bool = eqx.field(static=True, default=True)
    max_gradient: float = 100.0
    objective_scale: float = 1.0
    verbose: bool = eqx.field(static=True, default=False)
    progress: bool | str = eqx.field(static=True, default=False)

    def __check_init__(self):
        scale = self.objective_scale
        if isinstance(scale, (int, float)) and not (0.0 < scale < float("inf")):
            raise ValueError(f"Options: objective_scale must be positive and finite, got {scale!r}")


def moco_options(convergence_tolerance: float = -1, constraint_tolerance: float = -1, **fields) -> Options:
    """``Options`` with the tolerances Moco's ``MocoCasADiSolver`` gives IPOPT.

    **Arguments:** ``convergence_tolerance`` (``optim_convergence_tolerance``): ``tol``,
    ``dual_inf_tol`` and ``compl_inf_tol``; ``constraint_tolerance``
    (``optim_constraint_tolerance``): ``constraint_tol``; ``-1``: IPOPT's defaults
    (``tol`` 1e-8, ``constraint_tol`` 1e-4); ``fields``: other ``Options`` fields.

    **Returns:** the ``Options``.
    """
    if convergence_tolerance != -1:
        fields.update(
            tol=convergence_tolerance, dual_inf_tol=convergence_tolerance, compl_inf_tol=convergence_tolerance
        )
    fields.setdefault("constraint_tol", 1e-4 if constraint_tolerance == -1 else constraint_tolerance)
    return Options(**fields)


class Solution(eqx.Module):
    """``solve``'s result.

    **Fields:** ``z (K, nz)``, ``g (ng,)``: the variables; ``multipliers (K, m)``,
    ``border_multipliers (mg,)``: of the constraints (``d objective / d bound``: the
    Lagrangian is ``f + y . c``); ``objective``; ``status`` (``STATUS``);
    ``iterations``; ``bad_stage``: the stage of a non-finite value (``-1`` the border
    or none); ``constraint_violation``: the largest; ``log``: per iteration
    ``(objective, primal infeasibility, dual infeasibility, log10 mu, step, log10
    regularization, restoration)``, ``(max_iter, 7)``, rows past ``iterations`` NaN.
    """

    z: jax.Array
    g: jax.Array
    multipliers: jax.Array
    border_multipliers: jax.Array
    objective: jax.Array
    status: jax.Array
    iterations: jax.Array
    bad_stage: jax.Array
    constraint_violation: jax.Array
    log: jax.Array


# -- IPOPT's constants ----------------------------------------------------------------------
_KAPPA_EPS, _KAPPA_MU, _THETA_MU = 10.0, 0.2, 1.5
_GAMMA_THETA, _GAMMA_PHI, _DELTA, _S_THETA, _S_PHI, _ETA = 1e-5, 1e-8, 1.0, 1.1, 2.3, 1e-4
_GAMMA_ALPHA, _KAPPA_SIGMA, _S_MAX = 0.05, 1e10, 100.0
_DW0, _DW_MIN, _DW_MAX, _KW_MINUS, _KW_PLUS, _KW_PLUS_FIRST, _DC = 1e-4, 1e-20, 1e40, 1 / 3, 8.0, 100.0, 1e-8
_FILTER = 64  # filter entries kept (the oldest dropped first)


def _map(f, *trees):
    return jax.tree_util.tree_map(f, *trees)


def _sum(tree):
    return sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(tree))


def _max_abs(tree):
    return jnp.max(jnp.stack([jnp.max(jnp.abs(x), initial=0.0) for x in jax.tree_util.tree_leaves(tree)]))


def _sigma(ZL, ZU, dl, du, has_lo, has_hi):
    """The barrier's ``Sigma = z / distance`` of every bounded variable (summed over its
    two sides), a ``V``-shaped tree."""
    return _map(
        lambda zl, zu, a, b, h1, h2: jnp.where(h1, zl / a, 0.0) + jnp.where(h2, zu / b, 0.0),
        ZL,
        ZU,
        dl,
        du,
        has_lo,
        has_hi,
    )


def _with_previous(own, following):
    """Per stage ``k``: ``own[k] + following[k - 1]`` (stage ``k - 1``'s terms in its
    successor's variables belong to stage ``k``; nothing precedes stage 0)."""
    return own + jnp.concatenate([jnp.zeros_like(following[:1]), following[:-1]])


class _Problem:
    """The scaled problem's functions on the variables ``V = (Z, S, G, SG)`` and the
    multipliers ``Y = (Y, YG)``."""

    def __init__(self, nlp: StagedNLP, f_scale, row_scale, border_scale):
        self.nlp, self.fs, self.rs, self.bs = nlp, f_scale, row_scale, border_scale
        self.K, self.nz, self.m, self.ng, self.mg = nlp.shape
        self.ml = self.m - nlp.local_rows
        self.ks = jnp.arange(self.K)
        # rows with bounds on neither side ask nothing: their slacks are idle, their
        # multipliers zero, and the KKT blocks hold placeholders for them
        self.active = ~(jnp.isinf(nlp.c_lower) & jnp.isinf(nlp.c_upper) & (nlp.c_lower < nlp.c_upper))

    def _widths(self):
        """``(ml, nz, mo)``: a block's parts (the stages' slacks are condensed out of the
        KKT blocks, see ``condensed``)."""
        return self.ml, self.nz, self.m - self.ml

    def condensed(self, sigma_s, free_s, dw):
        """How the stages' slacks leave the KKT matrix: ``(inverse, decoupled)``, each
        ``(K, m)``. A free slack's row ``J dx - ds - dc dy = -r`` and its own ``(Sigma +
        dw) ds - dy = -g_s`` give ``ds = (dy - g_s) / (Sigma + dw)`` and the row ``J dx -
        (dc + inverse) dy = -r - inverse g_s``, ``inverse = 1 / (Sigma + dw)``. (Held in
        the matrix, the pair's small eigenvalue near an active bound, ``-1 / Sigma``, is
        below the rounding of the block's eigendecomposition, whose largest is
        ``Sigma``.) A free slack without barrier or regularization (``Sigma + dw = 0``)
        leaves its row ``decoupled``: ``dy = g_s``."""
        free_s = free_s & self.active
        total = sigma_s + dw
        inverse = jnp.where(free_s & (total > 0), 1.0 / jnp.where(total > 0, total, 1.0), 0.0)
        return inverse, free_s & (total <= 0)

    def to_stages(self, V, Y, placeholder=0):
        """Variables and multipliers in ``_assemble``'s blocks: ``((K + 1, b),
        (nb,))``; ``placeholder``: the placeholders' value (``None``: the multipliers'
        ``Y`` extended over them, the variables' ``V``, for a fill pattern)."""
        ml = self.ml
        Z, _, G, SG = V
        Yr = Y[0]

        def pad(x, before):
            edge = x[:1] if placeholder is None else jnp.full_like(x[:1], placeholder)
            return jnp.concatenate([edge, x] if before else [x, edge])

        blocks = jnp.concatenate([pad(Yr[:, :ml], True), pad(Z, False), pad(Yr[:, ml:], False)], axis=1)
        return blocks, jnp.concatenate([G, SG, Y[1]])

    def from_stages(self, xs, xb):
        """``to_stages``' inverse: ``(V, Y)``, the stages' slacks zero (``condensed``)."""
        ng, mg = self.ng, self.mg
        ml, nz, mo = self._widths()
        o = ml + nz
        Y = jnp.concatenate([xs[1:, :ml], xs[:-1, o : o + mo]], axis=1)
        return (xs[:-1, ml:o], jnp.zeros_like(Y), xb[:ng], xb[ng : ng + mg]), (Y, xb[ng + mg :])

    def _next(self, Z):
        # (the last stage's successor: a copy of itself, values a model accepts; no
        # derivative with respect to it is used)
        return jnp.concatenate([Z[1:], jax.lax.stop_gradient(Z[-1:])])

    def _inputs(self, V):
        """Each stage's ``(z_k, z_{k+1}, g)`` as one vector, ``(K, 2 nz + ng)``."""
        Z, G = V[0], V[2]
        return jnp.concatenate([Z, self._next(Z), jnp.broadcast_to(G, (self.K, self.ng))], axis=1)

    def primal(self, V):
        """``(scaled objective, residuals (c - s, cb - sb), stage costs)`` at ``V``."""
        Z, S, G, SG = V
        th = self.nlp.theta
        costs = jax.vmap(self.nlp.cost, (0, 0, 0, None, None))(self.ks, Z, self._next(Z), G, th)
        c = jax.vmap(self.nlp.constraints, (0, 0, 0, None, None))(self.ks, Z, self._next(Z), G, th)
        f = self.fs * (jnp.sum(costs) + self.nlp.border_cost(G, th))
        return f, (self._residual(self.rs * c, S), self.bs * self.nlp.border_constraints(G, th) - SG), costs

    def _residual(self, c, S):
        """The stages' ``c - s`` (``c`` scaled; zero for the rows that ask nothing)."""
        return jnp.where(self.active, c - S, 0.0)

    def evaluate(self, V, Y):
        """Everything an iteration needs at ``V`` with multipliers ``Y``, each model
        function traced once: ``(H, J, HB, JB, gL, f, r, costs)``: per-stage Hessians
        of the Lagrangian and Jacobians of the rows over ``(z_k, z_{k+1}, g)``, the
        border's, the Lagrangian's gradient (a ``V``-shaped tree), the scaled
        objective, the residuals and the stage costs."""
        S, G, SG = V[1:]
        th, nz = self.nlp.theta, self.nz

        def stage(v, k, y):
            def lagrangian(v):
                cost = self.nlp.cost(k, v[:nz], v[nz : 2 * nz], v[2 * nz :], th)
                c = self.rs[k] * self.nlp.constraints(k, v[:nz], v[nz : 2 * nz], v[2 * nz :], th)
                return self.fs * cost + y @ c, (cost, c)

            grad, (cost, c) = jax.grad(lagrangian, has_aux=True)(v)
            return (grad, c), (grad, cost, c)

        (H, J), (g, costs, c) = jax.vmap(self._second_order(stage))(self._inputs(V), self.ks, Y[0])

        def border(gv):
            def lagrangian(gv):
                cost = self.nlp.border_cost(gv, th)
                cb = self.bs * self.nlp.border_constraints(gv, th)
                return self.fs * cost + Y[1] @ cb, (cost, cb)

            grad, (cost, cb) = jax.grad(lagrangian, has_aux=True)(gv)
            return (grad, cb), (grad, cost, cb)

        (HB, JB), (gb, cost_b, cb) = jax.jacfwd(border, has_aux=True)(G)
        gL = (_with_previous(g[:, :nz], g[:, nz : 2 * nz]), -Y[0], jnp.sum(g[:, 2 * nz :], axis=0) + gb, -Y[1])
        f = self.fs * (jnp.sum(costs) + cost_b)
        return H, J, HB, JB, gL, f, (self._residual(c, S), cb - SG), costs

    def _second_order(self, stage):
        """``jacfwd(stage, has_aux=True)``, or the same by one tangent per color of
        ``nlp.sparsity`` (the Hessian and Jacobian read back from the tangents)."""
        sp = self.nlp.sparsity
        if sp is None:
            return jax.jacfwd(stage, has_aux=True)

        def colored(v, k, y):
            def push(seed):
                _, (dg, dc), aux = jax.jvp(lambda v: stage(v, k, y), (v,), (seed,), has_aux=True)
                return (dg, dc), aux

            (dg, dc), aux = jax.vmap(push, out_axes=((0, 0), None))(sp.seeds(v.dtype))
            return (sp.hessian_from(dg), sp.jacobian_from(dc)), aux

        return colored

    def first_order(self, V):
        """``(J, JB, gf, r)``: the rows' Jacobians (as ``evaluate``'s), the scaled
        objective's gradient (a ``V``-shaped tree) and the residuals at ``V``, by
        forward differentiation alone (a smaller program than ``evaluate``'s, which
        differentiates a reverse-mode gradient)."""
        S, G, SG = V[1:]
        th, nz = self.nlp.theta, self.nz

        def stage(v, k):
            cost = self.fs * self.nlp.cost(k, v[:nz], v[nz : 2 * nz], v[2 * nz :], th)
            c = self.rs[k] * self.nlp.constraints(k, v[:nz], v[nz : 2 * nz], v[2 * nz :], th)
            return (cost, c), c

        (g, J), c = jax.vmap(jax.jacfwd(stage, has_aux=True))(self._inputs(V), self.ks)

        def border(gv):
            cost = self.fs * self.nlp.border_cost(gv, th)
            cb = self.bs * self.nlp.border_constraints(gv, th)
            return (cost, cb), cb

        (gb, JB), cb = jax.jacfwd(border, has_aux=True)(G)
        gf = (
            _with_previous(g[:, :nz], g[:, nz : 2 * nz]),
            jnp.zeros_like(S),
            jnp.sum(g[:, 2 * nz :], axis=0) + gb,
            jnp.zeros_like(SG),
        )
        return J, JB, gf, (self._residual(c, S), cb - SG)

    def transposed(self, J, JB, Y):
        """``J^T Y`` as a ``V``-shaped tree."""
        nz = self.nz
        t = jnp.einsum("kmv,km->kv", J, Y[0])
        return (
            _with_previous(t[:, :nz], t[:, nz : 2 * nz]),
            -Y[0],
            jnp.sum(t[:, 2 * nz :], axis=0) + JB.T @ Y[1],
            -Y[1],
        )

    def rows_transposed(self, V, Y):
        """``transposed``'s ``J^T Y`` by reverse differentiation of the rows themselves:
        exact, whatever the Jacobian's pattern."""
        Z, G = V[0], V[2]
        th = self.nlp.theta

        def rows(Z, G):
            c = jax.vmap(self.nlp.constraints, (0, 0, 0, None, None))(self.ks, Z, self._next(Z), G, th)
            return self.rs * c, self.bs * self.nlp.border_constraints(G, th)

        _, pullback = jax.vjp(rows, Z, G)
        tZ, tG = pullback(Y)
        return tZ, -Y[0], tG, -Y[1]


def _bounds(nlp: StagedNLP, rs, bs):
    lo = (nlp.z_lower, rs * nlp.c_lower, nlp.border_lower, bs * nlp.g_lower)
    hi = (nlp.z_upper, rs * nlp.c_upper, nlp.border_upper, bs * nlp.g_upper)
    return lo, hi


def _assemble(P: _Problem, H, J, HB, JB, sigma, free, dw, dc) -> kkt.Banded:
    """The primal-dual matrix in ``K + 1`` blocks ``[yl_{j-1}, z_j, yo_j]``: stage
    ``j - 1``'s linking rows' multipliers, stage ``j``'s variables, then stage ``j``'s
    own rows' (``StagedNLP.local_rows``); border ``[g, sg, yg]``. The stages' slacks are
    condensed into their rows (``_Problem.condensed``). (A linking row grouped with the
    *next* stage's variables keeps the pivot blocks nonsingular where a stage's own
    variables are fixed, e.g. the initial states: the rows' Jacobian in the next stage
    holds an identity; an own row, whose Jacobian is in its stage's variables, keeps
    the pivot nonsingular beside them.) Block 0's linking rows and block ``K``'s
    variables and own rows are placeholders, as are the rows that ask nothing and the
    decoupled ones (``-1`` for multipliers and ``+1`` on the diagonal otherwise)."""
    K, nz, m, ng, mg = P.K, P.nz, P.m, P.ng, P.mg
    ml, _, mo = P._widths()
    dtype = H.dtype
    b, nb = ml + nz + mo, ng + 2 * mg
    yl, z_, yo = slice(0, ml), slice(ml, ml + nz), slice(ml + nz, b)
    Jz, Jn, Jg = J[:, :, :nz], J[:, :, nz : 2 * nz], J[:, :, 2 * nz :]
    Wzz = _with_previous(H[:, :nz, :nz], H[:, nz : 2 * nz, nz : 2 * nz])
    T = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
    inverse, decoupled = P.condensed(sigma[1], free[1], dw)
    row_diag = -(dc + inverse)  # (K, m)
    D = jnp.zeros((K + 1, b, b), dtype)
    D = D.at[:, yl, yl].set(-dc * jnp.eye(ml, dtype=dtype)).at[:, yo, yo].set(-dc * jnp.eye(mo, dtype=dtype))
    D = D.at[1:, yl, yl].set(jax.vmap(jnp.diag)(row_diag[:, :ml]))
    D = D.at[:K, yo, yo].set(jax.vmap(jnp.diag)(row_diag[:, ml:]))
    D = D.at[1:, yl, z_].set(Jn[:, :ml]).at[1:, z_, yl].set(T(Jn[:, :ml]))
    D = D.at[:K, yo, z_].set(Jz[:, ml:]).at[:K, z_, yo].set(T(Jz[:, ml:]))
    D = D.at[:K, z_, z_].set(Wzz + jax.vmap(jnp.diag)(sigma[0] + dw))
    L = jnp.zeros((K + 1, b, b), dtype)
    L = L.at[1:, yl, z_].set(Jz[:, :ml])
    L = L.at[1:K, z_, z_].set(H[:-1, nz : 2 * nz, :nz])
    L = L.at[1:K, z_, yo].set(T(Jn[:-1, ml:]))
    Bo = jnp.zeros((K + 1, b, nb), dtype)
    Bo = Bo.at[1:, yl, :ng].set(Jg[:, :ml]).at[:K, yo, :ng].set(Jg[:, ml:])
    Bo = Bo.at[:K, z_, :ng].set(_with_previous(H[:, :nz, 2 * nz :], H[:, nz : 2 * nz, 2 * nz :]))
    C = jnp.zeros((nb, nb), dtype)
    C = C.at[:ng, :ng].set(jnp.sum(H[:, 2 * nz :, 2 * nz :], axis=0) + HB + jnp.diag(sigma[2] + dw))
    C = C.at[ng : ng + mg, ng : ng + mg].set(jnp.diag(sigma[3] + dw))
    C = C.at[ng + mg :, :ng].set(JB).at[:ng, ng + mg :].set(JB.T)
    eye_g = jnp.eye(mg, dtype=dtype)
    C = C.at[ng + mg :, ng : ng + mg].set(-eye_g).at[ng : ng + mg, ng + mg :].set(-eye_g)
    C = C.at[ng + mg :, ng + mg :].set(-dc * eye_g)
    # fixed variables and placeholders: rows and columns replaced by the identity's (+1
    # for variables, -1 for multipliers)
    rows = P.active & ~decoupled
    keep, _ = P.to_stages((free[0], free[1], free[2], free[3]), (rows, jnp.ones(mg, bool)))
    keep = keep.astype(dtype)
    fill, _ = P.to_stages(
        (jnp.ones((K, nz)), jnp.ones((K, m)), jnp.ones(ng), jnp.ones(mg)),
        (-jnp.ones((K, m)), jnp.ones(mg)),
        placeholder=None,
    )
    fill = fill.astype(dtype)
    fb = jnp.concatenate([free[2], free[3], jnp.ones(mg, bool)]).astype(dtype)
    D = D * keep[:, :, None] * keep[:, None, :] + jax.vmap(jnp.diag)((1.0 - keep) * fill)
    L = L * keep[:, :, None] * jnp.concatenate([jnp.zeros_like(keep[:1]), keep[:-1]])[:, None, :]
    Bo = Bo * keep[:, :, None] * fb[None, None, :]
    C = C * fb[:, None] * fb[None, :] + jnp.diag(1.0 - fb)
    return kkt.Banded(D, L, Bo, C)


def solve(
    nlp: StagedNLP, z0, g0=None, options: Options = Options(), multipliers=None, derivatives: bool = False
) -> Solution:
    """Solve a staged NLP from a starting point.

    **Arguments:** ``nlp``; ``z0 (K, nz)``, ``g0 (ng,)``: the starting point (moved
    inside the bounds); ``options``; ``multipliers``: ``(Y (K, m), YG (mg,))`` to
    start from (a warm start), else zeros; ``derivatives``: give the solution the
    derivatives of the optimum with respect to ``nlp.theta`` (the implicit function
    theorem on the KKT conditions, the active bounds held: one more gradient of the
    Lagrangian and one more solve with the last factorization).

    **Returns:** a ``Solution``; ``status`` 0 where it converged (``STATUS``).
    """
    K, nz, m, ng, mg = nlp.shape
    dtype = nlp.z_lower.dtype
    g0 = jnp.zeros(ng, dtype) if g0 is None else jnp.asarray(g0, dtype)
    z0 = jnp.asarray(z0, dtype)
    live = nlp
    nlp = eqx.tree_at(lambda n: n.theta, nlp, jax.lax.stop_gradient(nlp.theta), is_leaf=lambda x: x is None)

    # -- scaling at the starting point ------------------------------------------------------
    raw = _Problem(nlp, jnp.ones((), dtype), jnp.ones((K, m), dtype), jnp.ones(mg, dtype))
    V0 = (z0, jnp.zeros((K, m), dtype), g0, jnp.zeros(mg, dtype))
    if options.scale:
        # (one forward-mode evaluation for the Jacobians, the objective's gradient and the
        # residuals: one copy of the model's functions in the program where three would be)
        J0, JB0, gf, r0 = raw.first_order(V0)
        big = options.max_gradient
        fs = jnp.minimum(1.0, big / jnp.maximum(_max_abs((gf[0], gf[2])), 1e-300))
        rs = jnp.minimum(1.0, big / jnp.maximum(jnp.max(jnp.abs(J0), axis=2, initial=0.0), 1e-300))
        bs = jnp.minimum(1.0, big / jnp.maximum(jnp.max(jnp.abs(JB0), axis=1, initial=0.0), 1e-300))
        ok = jnp.isfinite(fs) & jnp.all(jnp.isfinite(rs)) & jnp.all(jnp.isfinite(bs))
        fs, rs, bs = (jnp.where(ok, a, 1.0) for a in (fs, rs, bs))
    else:
        fs, rs, bs = raw.fs, raw.rs, raw.bs
        r0 = raw.primal(V0)[1]
    fs = fs * options.objective_scale
    P = _Problem(nlp, fs, rs, bs)
    lo, hi = _bounds(nlp, rs, bs)
    fixed = _map(lambda a, b: a == b, lo, hi)
    free = _map(jnp.logical_not, fixed)
    has_lo = _map(lambda a, f: jnp.isfinite(a) & f, lo, free)
    has_hi = _map(lambda a, f: jnp.isfinite(a) & f, hi, free)
    # (with _assemble's placeholders: block K's variables, block 0's multipliers)
    expected = jnp.asarray([(K + 1) * nz + ng + mg, (K + 1) * m + mg, 0])

    def push(x, l, u, hl, hu, fx):
        """IPOPT's bound push: strictly inside the bounds."""
        pl = jnp.minimum(options.bound_push * jnp.maximum(1.0, jnp.abs(l)), 0.5 * jnp.where(hu, u - l, jnp.inf))
        pu = jnp.minimum(options.bound_push * jnp.maximum(1.0, jnp.abs(u)), 0.5 * jnp.where(hl, u - l, jnp.inf))
        x = jnp.where(hl, jnp.maximum(x, l + pl), x)
        x = jnp.where(hu, jnp.minimum(x, u - pu), x)
        return jnp.where(fx, l, x)

    S0 = r0[0] * rs  # (the slacks at their constraints' values)
    SG0 = r0[1] * bs
    V0 = _map(push, (z0, S0, g0, SG0), lo, hi, has_lo, has_hi, fixed)
    Y0 = (
        (jnp.zeros((K, m), dtype), jnp.zeros(mg, dtype))
        if multipliers is None
        else (
            jnp.where(P.active, jnp.asarray(multipliers[0], dtype) / rs * fs, 0.0),
            jnp.asarray(multipliers[1], dtype) / bs * fs,
        )
    )
    ZL0 = _map(lambda h: jnp.where(h, 1.0, 0.0).astype(dtype), has_lo)
    ZU0 = _map(lambda h: jnp.where(h, 1.0, 0.0).astype(dtype), has_hi)

    def dists(V):
        dl = _map(lambda x, l, h: jnp.where(h, x - l, 1.0), V, lo, has_lo)
        du = _map(lambda x, u, h: jnp.where(h, u - x, 1.0), V, hi, has_hi)
        return dl, du

    def barrier(V, f, mu):
        """The barrier objective, from the scaled objective ``f`` at ``V``."""
        dl, du = dists(V)
        return f - mu * (
            _sum(_map(lambda d, h: jnp.where(h, jnp.log(d), 0.0), dl, has_lo))
            + _sum(_map(lambda d, h: jnp.where(h, jnp.log(d), 0.0), du, has_hi))
        )

    def infeasibility(r):
        return _sum(_map(jnp.abs, r))

    def violation(r):
        """The largest unscaled constraint violation, from the residuals."""
        return jnp.maximum(jnp.max(jnp.abs(r[0] / rs), initial=0.0), jnp.max(jnp.abs(r[1] / bs), initial=0.0))

    theta0 = infeasibility(r0)
    theta_max = 1e4 * jnp.maximum(1.0, theta0)
    theta_min = 1e-4 * jnp.maximum(1.0, theta0)

    def errors(V, Y, ZL, ZU, gL, r, mu):
        """IPOPT's optimality error (scaled) at barrier weight ``mu``, with its parts of
        the scaled problem (not divided by ``s_d``, ``s_c``): ``(error, primal
        infeasibility, dual infeasibility, complementarity)``."""
        dl, du = dists(V)
        dual = _map(lambda g, zl, zu, f: jnp.where(f, g - zl + zu, 0.0), gL, ZL, ZU, free)
        inf_du = _max_abs(dual)
        inf_pr = _max_abs(r)
        comp = jnp.maximum(
            _max_abs(_map(lambda d, z, h: jnp.where(h, d * z - mu, 0.0), dl, ZL, has_lo)),
            _max_abs(_map(lambda d, z, h: jnp.where(h, d * z - mu, 0.0), du, ZU, has_hi)),
        )
        n_mult = K * m + mg
        n_bound = _sum(_map(lambda h: h.astype(dtype), has_lo)) + _sum(_map(lambda h: h.astype(dtype), has_hi))
        zsum = _sum(_map(jnp.abs, ZL)) + _sum(_map(jnp.abs, ZU))
        sd = jnp.maximum(_S_MAX, (_sum(_map(jnp.abs, Y)) + zsum) / jnp.maximum(n_mult + n_bound, 1)) / _S_MAX
        sc = jnp.maximum(_S_MAX, zsum / jnp.maximum(n_bound, 1)) / _S_MAX
        return jnp.maximum(jnp.maximum(inf_du / sd, inf_pr), comp / sc), inf_pr, inf_du, comp

    to_stages, from_stages = P.to_stages, P.from_stages

    def factor_corrected(H, J, HB, JB, sigma, mu, dw_last, gauss_newton, active=True):
        """Factor with the smallest regularization that gives the right inertia (only
        while ``active``: under ``vmap`` a ``lax.cond``'s untaken branch runs too, and
        its loops should stop at once). ``gauss_newton`` (a traced flag): the
        constraints' least squares instead (Levenberg-Marquardt: with dc = 1 the step
        minimizes |r + J dx|^2 / 2 plus the barrier, where r + J dx = 0 has no solution
        within the bounds)."""
        H, HB = jnp.where(gauss_newton, 0.0, H), jnp.where(gauss_newton, 0.0, HB)
        dc0 = jnp.where(gauss_newton, 1.0, 0.0).astype(dtype)
        first = jnp.where(dw_last == 0.0, _DW0, jnp.maximum(_DW_MIN, _KW_MINUS * dw_last))

        def factored(dw, dc):
            return kkt.factor(_assemble(P, H, J, HB, JB, sigma, free, dw, dc))

        def cond(c):
            F, dw, _, tries = c
            wrong = ~jnp.all(F.inertia == expected) & (dw <= _DW_MAX) & (tries < 60) & active
            return (tries < 0) | wrong

        def body(c):
            # (try -1 is the matrix as it is; the loop holds the program's one copy of
            # the factorization)
            F, dw, dc, tries = c
            dw = jnp.where(
                tries < 0, 0.0, jnp.where(tries == 0, first, dw * jnp.where(dw_last == 0.0, _KW_PLUS_FIRST, _KW_PLUS))
            )
            # zero eigenvalues that remain are the constraints' (rank deficiency at the
            # matrix's scale): their regularization grows too
            scale = jnp.maximum(jnp.max(jnp.abs(F.values), initial=0.0), jnp.max(jnp.abs(F.border_values), initial=0.0))
            dc = jnp.where(
                tries < 0,
                dc0,
                jnp.where(
                    tries == 0,
                    jnp.where(F.inertia[2] > 0, jnp.maximum(_DC * mu**0.25, dc0), dc0),
                    jnp.where(F.inertia[2] > 0, jnp.maximum(10.0 * dc, 1e-12 * scale), dc),
                ),
            )
            return factored(dw, dc), dw, dc, tries + 1

        shape = jax.eval_shape(factored, jnp.zeros((), dtype), dc0)
        blank = _map(lambda a: jnp.zeros(a.shape, a.dtype), shape)
        init = (blank, jnp.zeros((), dtype), dc0, -jnp.ones((), jnp.int32))
        F, dw, _, _ = jax.lax.while_loop(cond, body, init)
        return F, dw, jnp.all(F.inertia == expected), P.condensed(sigma[1], free[1], dw)[0]

    def direction(V, ZL, ZU, gL, r, mu, F, gauss_newton, inverse):
        """The Newton step from ``factor_corrected``'s ``F`` and the slacks' ``inverse``."""
        dl, du = dists(V)
        grad_b = _map(
            lambda g, d1, d2, h1, h2, y: g - jnp.where(h1, mu / d1, 0.0) + jnp.where(h2, mu / d2, 0.0),
            gL,
            dl,
            du,
            has_lo,
            has_hi,
            V,
        )
        # (gauss_newton: the feasibility problem |r|^2 / 2 alone; Sigma keeps the step inside)
        grad_b = _map(lambda g, f: jnp.where(f & ~gauss_newton, g, 0.0), grad_b, free)
        gs = grad_b[1]
        rs_, rb_ = to_stages(grad_b, (r[0] + inverse * gs, r[1]))
        dxs, dxb = kkt.solve(F, -rs_, -rb_)
        dV, dY = from_stages(dxs, dxb)
        dV = (dV[0], inverse * (dY[0] - gs), dV[2], dV[3])
        dV = _map(lambda d, f: jnp.where(f, d, 0.0), dV, free)
        dZL = _map(lambda z, d, dx, h: jnp.where(h, mu / d - z - z / d * dx, 0.0), ZL, dl, dV, has_lo)
        dZU = _map(lambda z, d, dx, h: jnp.where(h, mu / d - z + z / d * dx, 0.0), ZU, du, dV, has_hi)
        slope = _sum(_map(lambda g, d: g * d, grad_b, dV))
        return dV, dY, dZL, dZU, slope, grad_b

    def max_step(x, dx, d, h, tau):
        # the largest alpha in (0, 1] with d + alpha * dx >= (1 - tau) d (d: the distance)
        ratio = jnp.where(h & (dx < 0), -tau * d / jnp.where(dx < 0, dx, -1.0), jnp.inf)
        return jnp.min(ratio, initial=jnp.inf)

    def fraction_to_boundary(V, dV, ZL, ZU, dZL, dZU, tau):
        dl, du = dists(V)
        leaves = lambda t: jax.tree_util.tree_leaves(t)  # noqa: E731
        ap = jnp.inf
        for x, dx, d, h in zip(leaves(V), leaves(dV), leaves(dl), leaves(has_lo)):
            ap = jnp.minimum(ap, max_step(x, dx, d, h, tau))
        for x, dx, d, h in zip(leaves(V), leaves(dV), leaves(du), leaves(has_hi)):
            ap = jnp.minimum(ap, max_step(x, -dx, d, h, tau))
        az = jnp.inf
        for z, dz, h in zip(leaves(ZL) + leaves(ZU), leaves(dZL) + leaves(dZU), leaves(has_lo) + leaves(has_hi)):
            az = jnp.minimum(az, max_step(z, dz, z, h, tau))
        return jnp.minimum(1.0, ap), jnp.minimum(1.0, az)

    def step_to(V, dV, a):
        return _map(lambda x, d: x + a * d, V, dV)

    def acceptable(theta_t, phi_t, filt):
        ok = (theta_t <= (1 - _GAMMA_THETA) * filt[:, 0]) | (phi_t <= filt[:, 1])
        return jnp.all(ok | ~jnp.isfinite(filt[:, 0])) & (theta_t <= theta_max)

    def search(V, dV, amax, mu, theta, phi, slope, filt, squares, gauss_newton, active, f, r):
        """The backtracking search along ``dV``: ``(alpha, accepted, phi_type, (f, r))``
        (searching only while ``active``), with the scaled objective and residuals at
        the last trial (``f``, ``r`` where there was none). A Newton step's is the
        filter line search; a restoration step's (``gauss_newton``, a traced flag) asks
        for a decrease of the residuals' sum of ``squares``."""
        switching_ok = slope < 0
        amin = jnp.where(
            switching_ok,
            _GAMMA_ALPHA
            * jnp.minimum(
                jnp.minimum(_GAMMA_THETA, _GAMMA_PHI * theta / -slope), _DELTA * theta**_S_THETA / (-slope) ** _S_PHI
            ),
            _GAMMA_ALPHA * _GAMMA_THETA,
        )
        # (at a feasible point IPOPT's bound is zero: a floor keeps the search finite
        # where no step is acceptable, e.g. a non-finite objective)
        amin = jnp.maximum(jnp.where(theta <= theta_min, amin, _GAMMA_ALPHA * _GAMMA_THETA), 1e-14)
        amin = jnp.where(gauss_newton, 1e-12, amin)

        def trial(a):
            Vt = step_to(V, dV, a)
            f_t, r_t, _ = P.primal(Vt)
            theta_t, phi_t = infeasibility(r_t), barrier(Vt, f_t, mu)
            finite = jnp.isfinite(theta_t) & jnp.isfinite(phi_t)
            switching = switching_ok & (a * (-slope) ** _S_PHI > _DELTA * theta**_S_THETA) & (theta <= theta_min)
            armijo = phi_t <= phi + _ETA * a * slope
            sufficient = (theta_t <= (1 - _GAMMA_THETA) * theta) | (phi_t <= phi - _GAMMA_PHI * theta)
            ok = finite & acceptable(theta_t, phi_t, filt) & jnp.where(switching, armijo, sufficient)
            t = _sum(_map(jnp.square, r_t))
            restored = jnp.isfinite(t) & (t <= (1 - 1e-4 * a) * squares)
            return jnp.where(gauss_newton, restored, ok), ~gauss_newton & switching & armijo, (f_t, r_t)

        def cond(c):
            a, ok, _, _ = c
            return ~ok & (0.5 * a >= amin) & active

        def body(c):
            a = c[0] * 0.5
            return a, *trial(a)

        # (the first trial, the full step, is the loop's: one trace of the model)
        false = jnp.zeros((), bool)
        return jax.lax.while_loop(cond, body, (2.0 * amax, false, false, (f, r)))

    def stationary_infeasibility(V, r, J, JB):
        """Whether the rows' violation of their bounds, ``v = c - clip(c, lower,
        upper)``, is stationary: ``|J^T v|`` (each variable's entry scaled by its room
        to move downhill, at most 1) below ``1e-6 |v|``."""
        c = _map(lambda a, b: a + b, r, (V[1], V[3]))
        v = _map(lambda c, l, u: c - jnp.clip(c, l, u), c, (lo[1], lo[3]), (hi[1], hi[3]))
        t = P.transposed(J, JB, v)
        dl, du = dists(V)
        room = _map(
            lambda g, a, b, h1, h2: jnp.where(
                g > 0, jnp.where(h1, jnp.minimum(1.0, a), 1.0), jnp.where(h2, jnp.minimum(1.0, b), 1.0)
            ),
            t,
            dl,
            du,
            has_lo,
            has_hi,
        )
        p = jnp.maximum(
            _max_abs(_map(lambda g, w, f: jnp.where(f, g * w, 0.0), t[0], room[0], free[0])),
            _max_abs(_map(lambda g, w, f: jnp.where(f, g * w, 0.0), t[2], room[2], free[2])),
        )
        return p <= 1e-6 * _max_abs(v)

    def least_squares_multipliers(J, JB, gf, ZL, ZU):
        """The multipliers that best satisfy stationarity, given the rows' Jacobians
        and the objective's gradient (IPOPT's estimate at the start and after
        restoration), zero where that estimate exceeds 1e3."""
        zero = _map(jnp.zeros_like, gf)
        H0 = jnp.zeros((K, 2 * nz + ng, 2 * nz + ng), dtype)
        F = kkt.factor(_assemble(P, H0, J, jnp.zeros((ng, ng), dtype), JB, zero, free, 1.0, _DC))
        rhs = _map(lambda g, zl, zu, f: jnp.where(f, -(g - zl + zu), 0.0), gf, ZL, ZU, free)
        inverse, _ = P.condensed(zero[1], free[1], 1.0)
        rs_, rb_ = to_stages(rhs, (inverse * rhs[1], jnp.zeros(mg, dtype)))
        _, Y = from_stages(*kkt.solve(F, rs_, rb_))
        ok = (_max_abs(Y) <= 1e3) & jnp.all(jnp.isfinite(Y[0])) & jnp.all(jnp.isfinite(Y[1]))
        return _map(lambda y: jnp.where(ok, y, 0.0), Y)

    log0 = jnp.full((options.max_iter, 7), jnp.nan, dtype)
    filt0 = jnp.full((_FILTER, 2), jnp.inf, dtype)
    # (without a warm start the first iteration estimates the multipliers)
    init = dict(
        V=V0,
        Y=Y0,
        ZL=ZL0,
        ZU=ZU0,
        mu=jnp.asarray(options.mu_init, dtype),
        filt=filt0,
        n_filt=0,
        it=0,
        status=-1,
        dw=jnp.zeros((), dtype),
        stall=0,
        bad=-1,
        log=log0,
        reset=multipliers is None,
        far=0,
        fr=(jnp.zeros((), dtype), (jnp.zeros((K, m), dtype), jnp.zeros(mg, dtype))),
        last=(
            jnp.zeros((K, 2 * nz + ng, 2 * nz + ng), dtype),
            jnp.zeros((K, m, 2 * nz + ng), dtype),
            jnp.zeros((ng, ng), dtype),
            jnp.zeros((mg, ng), dtype),
        ),
    )

    def body(s):
        V, Y, ZL, ZU, mu = s["V"], s["Y"], s["ZL"], s["ZU"], s["mu"]
        H, J, HB, JB, gL, f, r, costs = P.evaluate(V, Y)
        ok_k = jnp.isfinite(costs) & jnp.all(jnp.isfinite(r[0]), axis=1)
        finite = (
            jnp.all(ok_k)
            & jnp.isfinite(f)
            & jnp.all(
                jnp.stack([jnp.all(jnp.isfinite(x)) for x in (H, J, HB, JB, *jax.tree_util.tree_leaves((gL, r)))])
            )
        )
        bad = jnp.where(jnp.all(ok_k), -1, jnp.argmin(ok_k))
        # multipliers estimated afresh (at the start, after restoration): the Hessian
        # this iteration is the one of the multipliers it was evaluated with
        gf = _map(lambda a, b: a - b, gL, P.transposed(J, JB, Y))
        reset = s["reset"] & finite
        Y_was = Y
        Y = jax.lax.cond(reset, lambda _: least_squares_multipliers(J, JB, gf, ZL, ZU), lambda _: Y, None)
        if nlp.sparsity is None:
            gL = _map(lambda a, b: a + b, gf, P.transposed(J, JB, Y))
        else:
            # (a Jacobian read back from colors lacks any entry the detection never saw
            # nonzero: the gradient for the new multipliers is taken by reverse mode)
            dY = _map(lambda a, b: a - b, Y, Y_was)
            gL = jax.lax.cond(reset, lambda _: _map(jnp.add, gL, P.rows_transposed(V, dY)), lambda _: gL, None)
        e0, inf_pr, inf_du, comp = errors(V, Y, ZL, ZU, gL, r, 0.0)
        # (IPOPT's test: the scaled error, and the original problem's violation, dual
        # infeasibility and complementarity, the latter two the scaled ones over the
        # objective's scale: the variables are not scaled)
        converged = (
            (e0 <= options.tol)
            & (violation(r) <= options.constraint_tol)
            & (inf_du <= options.dual_inf_tol * P.fs)
            & (comp <= options.compl_inf_tol * P.fs)
        )
        # the barrier weight falls once the barrier problem is solved well enough, down to
        # IPOPT's floor, min(tol, compl_inf_tol in the scaled problem) / (kappa_eps + 1)
        e_mu = errors(V, Y, ZL, ZU, gL, r, mu)[0]
        lower_mu = e_mu <= _KAPPA_EPS * mu
        mu_min = jnp.minimum(options.tol, options.compl_inf_tol * P.fs) / (_KAPPA_EPS + 1.0)
        mu = jnp.where(lower_mu, jnp.maximum(mu_min, jnp.minimum(_KAPPA_MU * mu, mu**_THETA_MU)), mu)
        filt = jnp.where(lower_mu, filt0, s["filt"])
        n_filt = jnp.where(lower_mu, 0, s["n_filt"])
        dl, du = dists(V)
        sigma = _sigma(ZL, ZU, dl, du, has_lo, has_hi)
        H = jnp.where(finite, H, 0.0)
        J = jnp.where(finite, J, 0.0)
        HB, JB = jnp.where(finite, HB, 0.0), jnp.where(finite, JB, 0.0)
        # (in a batch, a problem that has finished waits for the others: no loops for it)
        running = s["status"] < 0
        tau = jnp.maximum(0.99, 1.0 - mu)
        theta, phi, squares = infeasibility(r), barrier(V, f, mu), _sum(_map(jnp.square, r))

        def needs_restoration(step):
            accepted, inertia_ok = step[6], step[8]
            return ~(accepted & inertia_ok) & running

        def attempt(c):
            """Pass 0: the Newton step and its filter line search; pass 1, where that
            found no acceptable step: a Gauss-Newton step on the constraints alone (the
            restoration phase). One pass's code serves both, so that the compiled
            program holds one copy of the factorization, the solve and the search.
            A pass's result: ``(dV, dY, dZL, dZU, az, a, accepted, phi_type,
            inertia_ok, dw, (f, r) at the last trial)``."""
            k, steps = c
            restoring = k == 1
            active = jnp.where(restoring, needs_restoration(steps[0]), running)
            dw_last = jnp.where(restoring, 0.0, s["dw"])
            F, dw, inertia_ok, inverse = factor_corrected(H, J, HB, JB, sigma, mu, dw_last, restoring, active)
            dV, dY, dZL, dZU, slope, _ = direction(V, ZL, ZU, gL, r, mu, F, restoring, inverse)
            amax, az = fraction_to_boundary(V, dV, ZL, ZU, dZL, dZU, tau)
            searched = search(V, dV, amax, mu, theta, phi, slope, filt, squares, restoring, active, f, r)
            step = (dV, dY, dZL, dZU, az, *searched[:3], inertia_ok, dw, searched[3])
            steps = tuple(_map(lambda new, old: jnp.where(k == i, new, old), step, steps[i]) for i in range(2))
            return k + 1, steps

        def another(c):
            k, steps = c
            return (k == 0) | ((k == 1) & needs_restoration(steps[0]))

        zero, false = jnp.zeros((), dtype), jnp.zeros((), bool)
        blank = (
            *_map(jnp.zeros_like, (V, Y, ZL, ZU)),
            zero,
            zero,
            false,
            false,
            false,
            zero,
            _map(jnp.zeros_like, (f, r)),
        )
        _, (newton, gn) = jax.lax.while_loop(another, attempt, (jnp.zeros((), jnp.int32), (blank, blank)))
        dV, dY, dZL, dZU, az, a, accepted, phi_type, inertia_ok, dw, fr = newton
        accepted = accepted & inertia_ok
        restoring = ~accepted & running
        dVr, _, dZLr, dZUr, az_r, ar, restored = gn[:7]
        a_used = jnp.where(restoring, jnp.where(restored, ar, 0.0), a)
        # (the objective and residuals at the next iterate: its search's last trial, or
        # this iterate's where it stays)
        fr = _map(
            lambda new, restored_, here: jnp.where(restoring, jnp.where(restored, restored_, here), new),
            fr,
            gn[10],
            (f, r),
        )
        dV_used = jax.tree_util.tree_map(lambda x, y: jnp.where(restoring, y, x), dV, dVr)
        Vn = step_to(V, dV_used, a_used)
        Yn = _map(lambda y, d: y + a * d, Y, dY)
        az_used = jnp.where(restoring, az_r, az)
        dZL_used = _map(lambda x, y: jnp.where(restoring, y, x), dZL, dZLr)
        dZU_used = _map(lambda x, y: jnp.where(restoring, y, x), dZU, dZUr)
        ZLn = _map(lambda z, d: z + az_used * d, ZL, dZL_used)
        ZUn = _map(lambda z, d: z + az_used * d, ZU, dZU_used)
        # the bound multipliers kept near mu / distance (IPOPT's kappa_sigma safeguard)
        dln, dun = dists(Vn)
        ZLn = _map(
            lambda z, d, h: jnp.where(h, jnp.clip(z, mu / (_KAPPA_SIGMA * d), _KAPPA_SIGMA * mu / d), 0.0),
            ZLn,
            dln,
            has_lo,
        )
        ZUn = _map(
            lambda z, d, h: jnp.where(h, jnp.clip(z, mu / (_KAPPA_SIGMA * d), _KAPPA_SIGMA * mu / d), 0.0),
            ZUn,
            dun,
            has_hi,
        )
        # after a restoration step the constraints' multipliers start again from their
        # least-squares estimate (next iteration)
        Yn = _map(lambda y: jnp.where(restoring, 0.0, y), Yn)
        # the filter grows with every step that is not of the objective's kind (and on restoration)
        grow = (accepted & ~phi_type) | restoring
        entry = jnp.stack([(1 - _GAMMA_THETA) * theta, phi - _GAMMA_PHI * theta])
        filt = jnp.where(grow, filt.at[n_filt % _FILTER].set(entry), filt)
        n_filt = jnp.where(grow, n_filt + 1, n_filt)
        # (a restoration step that was accepted reduced the infeasibility by 1e-4 alpha:
        # a stall is many in a row of small steps or none)
        stall = jnp.where(restoring & (~restored | (ar < 1e-3)), s["stall"] + 1, 0)
        # local infeasibility: where the filter rejects every step, the constraints'
        # violation v (of their bounds) is stationary, J^T v ~ 0 projected on the
        # variables' bounds, for a few restoration steps
        far = jnp.where(
            restoring & stationary_infeasibility(V, r, J, JB) & (violation(r) > options.constraint_tol),
            s["far"] + 1,
            jnp.where(restoring, s["far"], 0),
        )
        status = jnp.where(converged, 0, -1)
        status = jnp.where(~finite, 3, status)
        status = jnp.where((status < 0) & ~inertia_ok & restoring & ~restored, 4, status)
        status = jnp.where(
            (status < 0) & (((stall >= 8) & (violation(r) > options.constraint_tol)) | (far >= 5)), 2, status
        )
        done = status >= 0
        f_un = f / P.fs
        row = jnp.stack(
            [
                f_un,
                inf_pr,
                inf_du,
                jnp.log10(mu),
                jnp.where(done, 0.0, a_used),
                jnp.log10(jnp.maximum(dw, 1e-99)),
                restoring.astype(dtype),
            ]
        )
        if options.verbose:
            jax.debug.print(
                "{it:4d} {f: .8e} {pr:.2e} {du:.2e} {mu:5.1f} {a:.2e} {r}",
                it=s["it"],
                f=f_un,
                pr=inf_pr,
                du=inf_du,
                mu=jnp.log10(mu),
                a=a_used,
                r=restoring,
            )
        if options.progress:
            jax.debug.callback(
                functools.partial(progress.report, max_iter=options.max_iter), s["it"], done, f_un, inf_pr, inf_du
            )
        keep = lambda new, old: _map(lambda n, o: jnp.where(done, o, n), new, old)  # noqa: E731
        return dict(
            V=keep(Vn, V),
            Y=keep(Yn, Y),
            ZL=keep(ZLn, ZL),
            ZU=keep(ZUn, ZU),
            mu=mu,
            filt=filt,
            n_filt=n_filt,
            it=s["it"] + jnp.where(done, 0, 1),
            status=status,
            dw=jnp.where(inertia_ok, dw, s["dw"]),
            stall=stall,
            bad=jnp.where(~finite, bad, s["bad"]),
            log=s["log"].at[s["it"]].set(row),
            reset=restoring & ~done,
            last=(H, J, HB, JB),
            far=far,
            fr=keep(fr, (f, r)),
        )

    def cond(s):
        return (s["status"] < 0) & (s["it"] < options.max_iter)

    s = jax.lax.while_loop(cond, body, init)
    status = jnp.where(s["status"] < 0, 1, s["status"])
    if options.progress and options.progress != "batch":
        jax.debug.callback(functools.partial(progress.finish, names=STATUS), status, s["it"])
    V, Y = s["V"], s["Y"]
    if derivatives:
        V, Y = _implicit(
            P,
            _Problem(live, *jax.lax.stop_gradient((fs, rs, bs))),
            V,
            Y,
            s["ZL"],
            s["ZU"],
            s["last"],
            dists(V),
            free,
            has_lo,
            has_hi,
            to_stages,
            from_stages,
            expected,
        )
    if derivatives:
        f, r, _ = _Problem(live, fs, rs, bs).primal(V)
    elif options.max_iter > 0:
        f, r = s["fr"]  # (the last iteration's: no copy of the model's functions for it)
    else:
        f, r, _ = P.primal(V)
    return Solution(
        z=V[0],
        g=V[2],
        multipliers=Y[0] * rs / fs,
        border_multipliers=Y[1] * bs / fs,
        objective=f / fs,
        status=status,
        iterations=s["it"],
        bad_stage=s["bad"],
        constraint_violation=violation(r),
        log=s["log"],
    )


def _implicit(P, live, V, Y, ZL, ZU, last, distances, free, has_lo, has_hi, to_stages, from_stages, expected):
    """``(V, Y)`` with the optimum's derivatives with respect to ``theta``: one Newton
    step on the KKT conditions ``F = (grad L, residuals)`` from the optimum, with the
    matrix ``K`` of the last iteration held constant: ``x - K^{-1} (F(x, theta) - F(x,
    theta))``, whose value is ``x`` and whose derivative is ``-K^{-1} dF/dtheta``.

    In ``K`` the active bounds (a multiplier above its distance) hold their variables
    and the others are left out. Where that ``K`` is singular (its inertia says so: the
    active bounds and the equalities over-determine the variables, e.g. a bang-bang
    control, or a direction nothing determines), ``K`` is the barrier problem's instead,
    as sIPOPT's (every bound through ``Sigma = z / distance``), solved without the
    directions whose eigenvalues are below 1e-10 of their block's largest (an inactive
    bound's ``Sigma`` is that small, and would blow up a direction nothing else
    determines)."""
    V, Y = jax.lax.stop_gradient((V, Y))
    H, J, HB, JB = jax.lax.stop_gradient(last)
    dl, du = distances
    active = _map(lambda zl, zu, a, b, h1, h2: (h1 & (zl > a)) | (h2 & (zu > b)), ZL, ZU, dl, du, has_lo, has_hi)
    kept = _map(lambda f, a: f & ~a, free, active)
    zero = _map(jnp.zeros_like, V)
    barrier = _sigma(ZL, ZU, dl, du, has_lo, has_hi)

    def kkt_residual(V, Y):
        (_, (f_r)), g = jax.value_and_grad(lambda V: _lagrangian_and_residuals(live, V, Y), has_aux=True)(V)
        return g, f_r

    g, r = kkt_residual(V, Y)
    g = _map(lambda a: a - jax.lax.stop_gradient(a), g)
    r = _map(lambda a: a - jax.lax.stop_gradient(a), r)

    def step(sigma, variables, truncate):
        """``(dV, dY, nonsingular)`` of the Newton step with ``K`` from these bounds'
        ``sigma`` and these free ``variables``."""
        F = jax.lax.stop_gradient(kkt.factor(_assemble(P, H, J, HB, JB, sigma, variables, 0.0, 0.0), truncate=truncate))
        inverse, decoupled = P.condensed(sigma[1], variables[1], 0.0)
        gv = _map(lambda a, k: jnp.where(k, a, 0.0), g, variables)
        # (an inactive inequality's row is decoupled: its multiplier stays zero)
        rhs_s, rhs_b = to_stages(gv, (jnp.where(decoupled, 0.0, r[0] + inverse * gv[1]), r[1]))
        dV, dY = from_stages(*kkt.solve(F, rhs_s, rhs_b))
        return _map(lambda d, k: jnp.where(k, d, 0.0), dV, variables), dY, jnp.all(F.inertia == expected)

    dV_held, dY_held, held_ok = step(zero, kept, 0.0)
    dV_barrier, dY_barrier, _ = step(jax.lax.stop_gradient(barrier), free, 1e-10)
    dV = _map(lambda a, b: jnp.where(held_ok, a, b), dV_held, dV_barrier)
    dY = _map(lambda a, b: jnp.where(held_ok, a, b), dY_held, dY_barrier)
    return _map(lambda x, d: x - d, V, dV), _map(lambda y, d: y - d, Y, dY)


def _lagrangian_and_residuals(P: _Problem, V, Y):
    f, r, _ = P.primal(V)
    return f + jnp.sum(Y[0] * r[0]) + jnp.sum(Y[1] * r[1]), r


def print_log(solution: Solution, file=None, problem: int | None = None) -> None:
    """Print an IPOPT-like iteration log.

    **Arguments:** ``solution``: a ``Solution`` or an ``OptimalTrajectory`` (``solve``'s,
    or a batch's from ``solve_batch``: arrays with a leading batch axis); ``file``: where
    to print (default standard output); ``problem``: of a batch, the index of the one to
    print (default: each in turn).
    """
    import numpy as np

    solution = getattr(solution, "nlp", solution)

    log, iterations, status = np.asarray(solution.log), np.asarray(solution.iterations), np.asarray(solution.status)
    if log.ndim == 3:
        if problem is not None and not -len(log) <= problem < len(log):
            raise IndexError(f"print_log: problem {problem} is outside the batch of {len(log)}")
        for i in range(len(log)) if problem is None else [problem]:
            print(f"problem {i % len(log)} of {len(log)}:", file=file)
            _print_one(log[i], int(iterations[i]), int(status[i]), file)
        return
    _print_one(log, int(iterations), int(status), file)


def _print_one(log, iterations: int, status: int, file) -> None:
    import numpy as np

    print(" iter    objective      inf_pr    inf_du  lg(mu)  alpha   lg(rg) R", file=file)
    for k in range(iterations + 1):
        if k >= len(log) or not np.isfinite(log[k, 0]):
            break
        f, pr, du, mu, a, rg, r = log[k]
        reg = "   -  " if rg < -90 else f"{rg:6.1f}"
        print(f"{k:5d} {f: .8e} {pr:8.2e} {du:8.2e} {mu:6.1f} {a:8.2e} {reg} {'r' if r else ' '}", file=file)
    print(f"status: {STATUS[status]} after {iterations} iterations", file=file)
