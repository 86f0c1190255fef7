"""simjax's jit boundaries and the XLA options they compile with (simjax.compiling)."""

from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simjax as sj
from simjax import compiling

from _platforms import assert_loop_only_on_cpu


def test_compiler_options_by_backend():
    assert sj.compiler_options("cpu") == {"xla_cpu_use_fusion_emitters": False}
    assert sj.compiler_options("gpu") == {}
    assert sj.compiler_options() == sj.compiler_options(jax.default_backend())
    sj.compiler_options("cpu")["xla_cpu_use_fusion_emitters"] = True  # a copy: the options stay as they are
    assert sj.compiler_options("cpu") == {"xla_cpu_use_fusion_emitters": False}


def test_jit_hands_its_options_to_xla(monkeypatch):
    # an option XLA does not know fails the compilation, so the options reach XLA
    monkeypatch.setitem(compiling._OPTIONS, jax.default_backend(), {"xla_no_such_option_for_simjax": True})
    f = compiling.jit(lambda x: 2.0 * x)
    with pytest.raises(Exception, match="xla_no_such_option_for_simjax"):
        f(jnp.ones(3))


def test_jit_compiles_once_for_threads_calling_at_once():
    traces = []

    @compiling.jit
    def f(x):
        traces.append(1)
        return jnp.sin(x) + 1.0

    x = jnp.linspace(0.0, 1.0, 5)
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: np.asarray(f(x)), range(8)))
    assert len(traces) == 1
    for out in outs:
        np.testing.assert_allclose(out, np.sin(np.linspace(0.0, 1.0, 5)) + 1.0, rtol=1e-15)


def test_simulate_with_simjax_options_equals_default_compilation():
    # simulate compiles its solve with simjax's options; inside a plain jax.jit it is
    # compiled with XLA's defaults: the two agree to round-off (the suite's conftest turns
    # the older emitters on for every program, so the plain jit asks for the default back)
    system = sj.load_osim(sj.models.path("double_pendulum")).build()
    state = system.set_coordinates(system.default_state(), {"q1": 0.4, "q2": -0.3})
    ours = sj.simulate(system, state, 0.5, n_outputs=6)
    defaults = {"xla_cpu_use_fusion_emitters": True} if sj.compiler_options() else {}
    plain = jax.jit(lambda st: sj.simulate(system, st, 0.5, n_outputs=6).q, compiler_options=defaults)(state)
    assert ours.q.shape == (6, 2)
    np.testing.assert_allclose(np.asarray(ours.q), np.asarray(plain), rtol=0, atol=1e-11)
    assert float(jnp.abs(ours.q[-1] - ours.q[0]).max()) > 0.1  # it moved


def test_jit_inside_transformations_takes_no_options():
    # JAX refuses compiler options on a nested jit: inside jit, grad and vmap the
    # function is a plain filter_jit, with the same values
    f = compiling.jit(lambda x, k: jnp.sin(k * x))
    x = jnp.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(jax.jit(f)(x, 2.0), np.sin(2.0 * np.asarray(x)), rtol=1e-15)
    np.testing.assert_allclose(jax.jit(lambda: f(x, 2.0))(), np.sin(2.0 * np.asarray(x)), rtol=1e-15)
    np.testing.assert_allclose(
        jax.grad(lambda k: f(x, k).sum())(2.0), np.sum(np.asarray(x) * np.cos(2.0 * x)), rtol=1e-14
    )
    np.testing.assert_allclose(jax.vmap(f, (None, 0))(x, x), np.sin(np.asarray(x)[:, None] * np.asarray(x)), rtol=1e-15)


def test_float32_products_are_full_precision_on_a_gpu():
    # a GPU's default float32 product is TensorFloat-32; simjax's jit asks for "highest"
    from jax import export

    product = compiling.jit(lambda a, b: a @ b)
    a = jnp.ones((4, 4), jnp.float32)
    module = export.export(jax.jit(lambda a, b: product(a, b)), platforms=["cuda"])(a, a).mlir_module()
    dots = [line for line in module.splitlines() if "stablehlo.dot_general" in line]
    assert dots and all("precision = [HIGHEST, HIGHEST]" in line for line in dots)
    np.testing.assert_array_equal(product(a, a), 4 * a)


def test_unrolled_off_cpu_is_a_loop_only_on_the_cpu():
    loop = lambda unroll, x: jax.lax.fori_loop(0, 5, lambda i, c: 0.5 * c + i, x, unroll=unroll)  # noqa: E731
    f = jax.jit(lambda x: compiling.unrolled_off_cpu(loop, x))
    x = jnp.arange(3.0)
    expected = x
    for i in range(5):
        expected = 0.5 * expected + i
    np.testing.assert_allclose(f(x), expected, rtol=1e-15)
    assert_loop_only_on_cpu(f, x)
