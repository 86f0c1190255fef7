"""Sparse stage derivatives (``simjax.optimize.sparsity``): Hessians and Jacobians read
back from colored tangents equal the dense ones, and a solve with them the dense
solve. (MocoInverse, where they are on by default, is checked against Moco in
test_optimize_inverse.py.)"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax.optimize import collocation, ipm
from simjax.optimize.sparsity import Sparsity, coloring

_moco = pytest.importorskip("_moco")


def test_an_arrowhead_hessian_takes_three_tangents():
    """A diagonal Hessian with one dense row and column (a free final time) and a
    Jacobian whose rows each meet two columns: the dense row is filled from its
    column, so the other columns share two colors."""
    n = 12
    rng = np.random.default_rng(0)
    hp = np.eye(n, dtype=bool)
    hp[-1, :] = hp[:, -1] = True
    jp = np.zeros((5, n), bool)
    for r in range(5):
        jp[r, 2 * r : 2 * r + 2] = True
    color, dense = coloring(hp, jp)
    sp = Sparsity(hp, jp, color, dense)
    assert sp.n_colors == 3 and np.flatnonzero(dense).tolist() == [n - 1]
    A = np.where(hp, rng.standard_normal((n, n)), 0.0)
    H = A + A.T
    J = np.where(jp, rng.standard_normal(jp.shape), 0.0)
    seeds = np.asarray(sp.seeds(jnp.float64))
    np.testing.assert_array_equal(sp.hessian_from(jnp.asarray(seeds @ H.T)), H)
    np.testing.assert_array_equal(sp.jacobian_from(jnp.asarray(seeds @ J.T)), J)
    # hashable and compared by value, as a static field must be
    assert Sparsity(hp.copy(), jp.copy(), color.copy(), dense.copy()) == sp and hash(sp) == hash(
        Sparsity(hp.copy(), jp.copy(), color.copy(), dense.copy())
    )


def test_sliding_mass_derivatives_equal_the_dense_ones(tmp_path):
    """At a random point with random multipliers, the colored Hessians and Jacobians of
    every stage equal ``jacfwd``'s (a solve with them: MocoInverse's, against Moco)."""
    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    problem = _moco.simjax_problem(_moco.SLIDING_MASS_PROBLEM, system)
    nlp, z0, g0, _ = collocation.transcribe(problem, 20, "trapezoidal", sparse_derivatives=True)
    sp = nlp.sparsity
    # (x, v, F at two mesh points and the two times: the force meets only the speed)
    assert sp.n_colors < sp.color.size == 8
    K, nz, m, ng, mg = nlp.shape
    rng = np.random.default_rng(1)
    span = np.where(np.isfinite(nlp.z_upper - nlp.z_lower), nlp.z_upper - nlp.z_lower, 1.0)
    V = (z0 + 0.1 * span * rng.standard_normal(z0.shape), jnp.zeros((K, m)), g0 + 0.1, jnp.zeros(mg))
    Y = (jnp.asarray(rng.standard_normal((K, m))), jnp.zeros(mg))
    ones = (jnp.ones(()), jnp.ones((K, m)), jnp.ones(mg))
    dense = ipm._Problem(dataclasses.replace(nlp, sparsity=None), *ones)
    sparse = ipm._Problem(nlp, *ones)
    expected = jax.jit(dense.evaluate)(V, Y)
    for a, b in zip(expected[:2], jax.jit(sparse.evaluate)(V, Y)[:2]):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-13, atol=1e-13 * np.abs(a).max())
    # the rows' transposed Jacobian by reverse mode, as the solver takes it after a
    # multiplier reset, equals the dense Jacobian's
    J = expected[1]
    exact = jax.jit(sparse.rows_transposed)(V, Y)
    np.testing.assert_allclose(
        np.asarray(exact[0]), np.asarray(dense.transposed(J, jnp.zeros((mg, ng)), Y)[0]), atol=1e-12
    )
