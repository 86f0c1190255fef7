"""The interior-point solver (simjax.optimize.ipm) and its block-tridiagonal KKT solve
(simjax.optimize.kkt): small NLPs with known optima (Hock–Schittkowski), the KKT solve
against a dense solve, statuses for infeasible and iteration-limited problems."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _nlp_problems import PROBLEMS, by_name
from simjax.optimize import ipm, kkt
from simjax.optimize.nlp import dense_nlp

SOLVE = jax.jit(ipm.solve, static_argnames=())


def _nlp(p):
    return dense_nlp(p.objective, p.constraints, p.constraint_lower, p.constraint_upper, p.lower, p.upper)


def test_block_tridiagonal_solve_and_inertia_match_a_dense_matrix():
    rng = np.random.default_rng(0)
    K, b, nb = 7, 5, 3
    D = rng.normal(size=(K, b, b))
    M = kkt.Banded(jnp.asarray(D + np.swapaxes(D, 1, 2)), jnp.asarray(rng.normal(size=(K, b, b))),
                   jnp.asarray(rng.normal(size=(K, b, nb))), jnp.asarray(np.diag([1.0, -2.0, 3.0])))
    dense = np.asarray(kkt.dense(M))
    r, s = rng.normal(size=(K, b)), rng.normal(size=nb)
    x, y = jax.jit(kkt.solve)(jax.jit(kkt.factor)(M), jnp.asarray(r), jnp.asarray(s))
    ref = np.linalg.solve(dense, np.concatenate([r.ravel(), s]))
    assert np.abs(np.concatenate([np.asarray(x).ravel(), np.asarray(y)]) - ref).max() < 1e-10 * np.abs(ref).max()
    ev = np.linalg.eigvalsh(dense)
    assert list(np.asarray(kkt.factor(M).inertia)) == [(ev > 0).sum(), (ev < 0).sum(), 0]


SOLVED = [p.name for p in PROBLEMS if not p.infeasible and p.name != "REDUNDANT_EQ"]


@pytest.mark.parametrize("name", SOLVED)
def test_known_optima(name):
    p = by_name(name)
    sol = SOLVE(_nlp(p), jnp.asarray(p.x0)[None])
    assert int(sol.status) == 0, ipm.STATUS[int(sol.status)]
    assert abs(float(sol.objective) - p.f_star) <= 1e-6 * max(1.0, abs(p.f_star))
    assert float(sol.constraint_violation) <= 1e-8
    assert np.allclose(np.asarray(sol.z[0]), p.x_star, atol=1e-4)


def test_infeasible_problem_reports_infeasible():
    p = by_name("INFEASIBLE")
    sol = SOLVE(_nlp(p), jnp.asarray(p.x0)[None])
    assert ipm.STATUS[int(sol.status)] == "locally infeasible"
    assert int(sol.iterations) < 100


def test_iteration_limit_returns_the_last_iterate():
    p = by_name("HS71")
    sol = jax.jit(lambda n, x: ipm.solve(n, x, options=ipm.Options(max_iter=3)))(_nlp(p), jnp.asarray(p.x0)[None])
    assert ipm.STATUS[int(sol.status)] == "iteration limit" and int(sol.iterations) == 3
    assert np.all(np.isfinite(np.asarray(sol.z))) and not np.allclose(sol.z[0], p.x0)
    assert np.isfinite(np.asarray(sol.log)[:3, 0]).all() and np.isnan(np.asarray(sol.log)[3:, 0]).all()
