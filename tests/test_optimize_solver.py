"""The interior-point solver (simjax.optimize.ipm) and its block-tridiagonal KKT solve
(simjax.optimize.kkt): small NLPs with known optima (Hock–Schittkowski), the KKT solve
against a dense solve, statuses for infeasible, iteration-limited and non-finite problems, and a batch in
which one problem fails."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _nlp_problems import PROBLEMS, by_name
from simjax.optimize import ipm, kkt
from simjax.optimize.nlp import dense_nlp

SOLVE = jax.jit(ipm.solve, static_argnames=())


def _nlp(p, local=False):
    return dense_nlp(p.objective, p.constraints, p.constraint_lower, p.constraint_upper, p.lower, p.upper, local)


def test_block_tridiagonal_solve_and_inertia_match_a_dense_matrix():
    rng = np.random.default_rng(0)
    K, b, nb = 7, 5, 3
    D = rng.normal(size=(K, b, b))
    M = kkt.Banded(
        jnp.asarray(D + np.swapaxes(D, 1, 2)),
        jnp.asarray(rng.normal(size=(K, b, b))),
        jnp.asarray(rng.normal(size=(K, b, nb))),
        jnp.asarray(np.diag([1.0, -2.0, 3.0])),
    )
    dense = np.asarray(kkt.dense(M))
    r, s = rng.normal(size=(K, b)), rng.normal(size=nb)
    x, y = jax.jit(kkt.solve)(jax.jit(kkt.factor)(M), jnp.asarray(r), jnp.asarray(s))
    ref = np.linalg.solve(dense, np.concatenate([r.ravel(), s]))
    assert np.abs(np.concatenate([np.asarray(x).ravel(), np.asarray(y)]) - ref).max() < 1e-10 * np.abs(ref).max()
    ev = np.linalg.eigvalsh(dense)
    assert list(np.asarray(kkt.factor(M).inertia)) == [(ev > 0).sum(), (ev < 0).sum(), 0]


SOLVED = [p.name for p in PROBLEMS if not p.infeasible]


@pytest.mark.parametrize(
    "name,local", [(n, False) for n in SOLVED] + [("HS71", True), ("HS100", True), ("HS35MOD", True), ("HS15", True)]
)
def test_known_optima(name, local):
    # (local: the rows as the stage's own, another pivot order of the same KKT matrix)
    p = by_name(name)
    sol = SOLVE(_nlp(p, local), jnp.asarray(p.x0)[None])
    assert int(sol.status) == 0, ipm.STATUS[int(sol.status)]
    assert abs(float(sol.objective) - p.f_star) <= 1e-6 * max(1.0, abs(p.f_star))
    assert float(sol.constraint_violation) <= 1e-8
    assert np.allclose(np.asarray(sol.z[0]), p.x_star, atol=1e-4)


def test_objective_scale_lets_a_tiny_objective_reach_its_bound():
    # min 1e-6 |x - (-2, 4)|^2, x2 - x1 = 3, 0 <= x <= 10: the optimum (0, 3) has the bound
    # multiplier 2e-6, below the barrier weight the solve ends with at tol 1e-6, which then
    # holds x1 away from its bound; scaled by 1e6 the objective outweighs the barrier
    c = jnp.array([-2.0, 4.0])
    nlp = dense_nlp(
        lambda x: 1e-6 * jnp.sum((x - c) ** 2),
        lambda x: x[1:] - x[:1],
        jnp.full(1, 3.0),
        jnp.full(1, 3.0),
        jnp.zeros(2),
        jnp.full(2, 10.0),
    )

    def solve(scale):
        options = ipm.Options(tol=1e-6, constraint_tol=1e-6, objective_scale=scale)
        return jax.jit(ipm.solve)(nlp, jnp.ones((1, 2)), options=options)

    plain, scaled = solve(1.0), solve(1e6)
    assert int(plain.status) == 0 and int(scaled.status) == 0
    assert float(plain.z[0, 0]) > 0.05  # stopped short of the bound
    assert np.allclose(np.asarray(scaled.z[0]), [0.0, 3.0], atol=1e-6)
    # reported unscaled: the objective 1e-6 (2^2 + 1^2) and the constraint's multiplier
    # 2e-6 (of the Lagrangian f + y c, with df/dx2 = -2e-6)
    assert abs(float(scaled.objective) - 5e-6) <= 1e-11
    assert abs(float(scaled.multipliers[0, 0]) - 2e-6) <= 1e-10
    with pytest.raises(ValueError, match="objective_scale must be positive and finite, got 0.0"):
        ipm.Options(objective_scale=0.0)


def test_unscaled_dual_infeasibility_and_complementarity_are_tested_as_ipopt_tests_them():
    # the problem above, its objective scaled down by 1e6 (as the gradient-based scaling
    # scales down a large one): the scaled error is within tol long before the original
    # problem's complementarity at the bound (2 x1) is. IPOPT goes on (Moco sets
    # dual_inf_tol = compl_inf_tol = tol), its barrier weight's floor lowered with the
    # objective's scale: min(tol, compl_inf_tol x scale) / 11
    c = jnp.array([-2.0, 4.0])
    nlp = dense_nlp(
        lambda x: jnp.sum((x - c) ** 2),
        lambda x: x[1:] - x[:1],
        jnp.full(1, 3.0),
        jnp.full(1, 3.0),
        jnp.zeros(2),
        jnp.full(2, 10.0),
    )
    solve = jax.jit(lambda options: ipm.solve(nlp, jnp.ones((1, 2)), options=options))
    moco = solve(ipm.moco_options(1e-6, 1e-6, objective_scale=1e-6))
    loose = solve(ipm.Options(tol=1e-6, constraint_tol=1e-6, objective_scale=1e-6, dual_inf_tol=1e9, compl_inf_tol=1e9))
    assert int(moco.status) == 0 and int(loose.status) == 0
    assert 2.0 * float(moco.z[0, 0]) <= 1e-6 and np.allclose(np.asarray(moco.z[0]), [0.0, 3.0], atol=1e-6)
    assert abs(float(moco.multipliers[0, 0]) - 2.0) <= 1e-5
    assert float(loose.z[0, 0]) > 0.05 and int(loose.iterations) < int(moco.iterations)
    options = ipm.moco_options(1e-3, -1, max_iter=7)
    assert (options.tol, options.dual_inf_tol, options.compl_inf_tol, options.constraint_tol) == (
        1e-3,
        1e-3,
        1e-3,
        1e-4,
    )
    assert options.max_iter == 7 and ipm.moco_options().tol == 1e-8


def test_infeasible_problem_reports_infeasible():
    p = by_name("INFEASIBLE")
    sol = SOLVE(_nlp(p), jnp.asarray(p.x0)[None])
    assert ipm.STATUS[int(sol.status)] == "locally infeasible"
    assert int(sol.iterations) < 100


def test_iteration_limit_returns_the_last_iterate(capsys):
    p = by_name("HS71")
    options = ipm.Options(max_iter=3, progress=True)
    sol = jax.jit(lambda n, x: ipm.solve(n, x, options=options))(_nlp(p), jnp.asarray(p.x0)[None])
    assert ipm.STATUS[int(sol.status)] == "iteration limit" and int(sol.iterations) == 3
    # the progress line, rewritten at each of the 3 iterations
    shown = [line.strip() for line in capsys.readouterr().err.split("\r") if line.strip()]
    assert [line.split()[1] for line in shown] == ["0/3", "1/3", "2/3", "2/3"]
    assert all("objective" in line and "inf_pr" in line for line in shown)
    assert shown[-1].endswith("iteration limit after 3 iterations")
    assert np.all(np.isfinite(np.asarray(sol.z))) and not np.allclose(sol.z[0], p.x0)
    assert np.isfinite(np.asarray(sol.log)[:3, 0]).all() and np.isnan(np.asarray(sol.log)[3:, 0]).all()


def test_a_batch_reports_a_nan_by_stage_and_keeps_the_other_solutions(capsys):
    # min sum |z_k - theta_k|^2 with |z_{k+1,0} - z_{k,0}| <= 1; a cost that is NaN at
    # stage 2 of the second problem
    import equinox as eqx
    from simjax.optimize.nlp import StagedNLP

    K = 4

    def cost(k, z, zn, g, th):
        return jnp.sum((z - th[k]) ** 2) + jnp.where(th[k, 0] < 0, jnp.log(th[k, 0]), 0.0)

    nlp = StagedNLP(
        cost=cost,
        constraints=lambda k, z, zn, g, th: (zn - z)[:1] * (k < K - 1),
        border_cost=lambda g, th: jnp.zeros(()),
        border_constraints=lambda g, th: jnp.zeros(0),
        z_lower=jnp.full((K, 2), -10.0),
        z_upper=jnp.full((K, 2), 10.0),
        c_lower=jnp.full((K, 1), -1.0),
        c_upper=jnp.full((K, 1), 1.0),
        border_lower=jnp.zeros(0),
        border_upper=jnp.zeros(0),
        g_lower=jnp.zeros(0),
        g_upper=jnp.zeros(0),
        theta=jnp.zeros((K, 2)),
    )
    good = jnp.asarray(np.arange(2 * K, dtype=float).reshape(K, 2) * 0.3 + 1.0)
    thetas = jnp.stack([good, good.at[2, 0].set(-1.0), 2 * good])
    options = ipm.Options(max_iter=50, progress="batch")  # (as solve_batch shows its progress)
    sols = jax.jit(
        jax.vmap(lambda th: ipm.solve(eqx.tree_at(lambda n: n.theta, nlp, th), jnp.zeros((K, 2)), options=options))
    )(thetas)
    assert [ipm.STATUS[int(s)] for s in sols.status] == ["solved", "non-finite value", "solved"]
    # the progress line follows the furthest problem and ends with the statuses
    from simjax.optimize import progress

    progress.finish_batch(np.asarray(sols.status), ipm.STATUS)
    line = capsys.readouterr().err.split("\r")[-1]
    assert line.startswith(
        f"3 problems after {int(np.max(sols.iterations)) + 1} iterations: 2 solved, 1 non-finite value"
    ) and line.endswith("\n")
    # the log of each problem, or of one
    ipm.print_log(sols)
    out = capsys.readouterr().out
    assert "problem 1 of 3:" in out and out.count("status: solved after") == 2
    ipm.print_log(sols, problem=1)
    assert capsys.readouterr().out.splitlines()[-1].startswith("status: non-finite value after")
    with pytest.raises(IndexError, match="problem 3 is outside the batch of 3"):
        ipm.print_log(sols, problem=3)
    assert [int(b) for b in sols.bad_stage] == [-1, 2, -1]
    for i in (0, 2):  # each its own optimum: the second column tracked exactly, the first within the links
        z, th = np.asarray(sols.z[i]), np.asarray(thetas[i])
        assert np.allclose(z[:, 1], th[:, 1], atol=1e-7)
        assert np.abs(np.diff(z[:, 0])).max() <= 1 + 1e-8
    # the first column's optimum: the links bind where the targets are 2 * 0.6 = 1.2 apart
    assert np.abs(np.diff(np.asarray(sols.z[2])[:, 0])).max() > 1 - 1e-6


def test_derivatives_of_the_optimum_match_finite_differences_of_re_solves():
    # min sum |z_k - theta_k|^2 + 0.1 |z_k|^4 with the links |z_{k+1,0} - z_{k,0}| <= 0.5,
    # each stage's own row z_k0 + z_k1 <= 2.6 and z <= 1.5: a link and an own row active at
    # the optimum, held by the implicit derivative
    import equinox as eqx
    from simjax.optimize.nlp import StagedNLP

    K = 4

    def rows(k, z, zn, g, th):
        return jnp.concatenate([(zn - z)[:1] * (k < K - 1), (z[0] + z[1])[None]])

    nlp = StagedNLP(
        cost=lambda k, z, zn, g, th: jnp.sum((z - th[k]) ** 2) + 0.1 * jnp.sum(z**4),
        constraints=rows,
        local_rows=1,
        border_cost=lambda g, th: jnp.zeros(()),
        border_constraints=lambda g, th: jnp.zeros(0),
        z_lower=jnp.full((K, 2), -10.0),
        z_upper=jnp.full((K, 2), 1.5),
        c_lower=jnp.tile(jnp.asarray([-0.5, -jnp.inf]), (K, 1)),
        c_upper=jnp.tile(jnp.asarray([0.5, 2.6]), (K, 1)),
        border_lower=jnp.zeros(0),
        border_upper=jnp.zeros(0),
        g_lower=jnp.zeros(0),
        g_upper=jnp.zeros(0),
        theta=jnp.zeros((K, 2)),
    )
    theta = jnp.asarray(np.arange(2 * K, dtype=float).reshape(K, 2) * 0.3)
    weights = jnp.arange(2 * K, dtype=float).reshape(K, 2)

    def value(th, derivatives):
        sol = ipm.solve(
            eqx.tree_at(lambda n: n.theta, nlp, th),
            jnp.zeros((K, 2)),
            derivatives=derivatives,
            options=ipm.Options(tol=1e-12, constraint_tol=1e-12),
        )
        return jnp.sum(sol.z * weights) + sol.objective

    gradient = np.asarray(jax.jit(jax.grad(lambda th: value(th, True)))(theta))
    f = jax.jit(lambda th: value(th, False))
    h = 1e-5
    fd = np.asarray(
        [[(f(theta.at[i, j].add(h)) - f(theta.at[i, j].add(-h))) / (2 * h) for j in range(2)] for i in range(K)]
    )
    assert np.abs(gradient - fd).max() < 1e-7 * np.abs(fd).max(), (gradient, fd)
    z = np.asarray(jax.jit(lambda th: ipm.solve(eqx.tree_at(lambda n: n.theta, nlp, th), jnp.zeros((K, 2))).z)(theta))
    assert np.isclose(z.sum(1), 2.6, atol=1e-6).sum() >= 1 and np.isclose(np.diff(z[:, 0]), 0.5, atol=1e-6).any()
