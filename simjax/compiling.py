"""How simjax's jit boundaries are compiled: ``jit``, and the XLA options it uses.

On the CPU, XLA can generate a fused kernel's code in two ways: its MLIR "fusion
emitters" (the default since 2025) or its older LLVM elemental emitters. simjax's
programs are hundreds of small fusions run one after another, and for them the older
emitters compile in two thirds of the time and run 2-10% faster (gait10dof18musc:
compile 11.0 -> 7.0 s, 1 s simulation 65 -> 64 ms; arm26: 33 -> 22 s, 280 -> 255
ms), with results equal to round-off. ``jit`` asks for them on the CPU and leaves
other backends as they are.

The options apply to the program that the boundary compiles. Called inside a
``jax.jit`` of your own, a simjax function is inlined into your program, which XLA
compiles with your options: pass ``compiler_options=simjax.compiler_options()`` to
that ``jax.jit`` to get the same code.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax

__all__ = ["compiler_options", "jit", "unrolled_off_cpu"]

# (jaxlib 0.11 dropped the option, and with it the choice: there it is not passed)
_OPTIONS = {"cpu": {"xla_cpu_use_fusion_emitters": False}} if jax.__version_info__ < (0, 11) else {}


def compiler_options(backend: str | None = None) -> dict:
    """The XLA compiler options simjax compiles with.

    **Arguments:** ``backend``: ``"cpu"``, ``"gpu"``, ...; ``None``: JAX's default backend.

    **Returns:** a dict for ``jax.jit(..., compiler_options=...)`` (empty where simjax
    changes nothing).
    """
    return dict(_OPTIONS.get(backend or jax.default_backend(), {}))


def full_precision(fun):
    """``fun`` traced with full-precision float32 matrix products
    (``jax.default_matmul_precision("highest")``): a GPU's float32 products default to
    TensorFloat-32 (10-bit mantissas), too coarse for dynamics; "highest" changes nothing
    in float64 or on a CPU. Every jitted entry point of simjax traces its function so.

    **Arguments:** ``fun``: the function. **Returns:** the wrapped function.
    """

    @functools.wraps(fun)
    def exact(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fun(*args, **kwargs)

    return exact


def jit(fun):
    """``equinox.filter_jit`` that compiles with ``compiler_options()`` for the backend in
    use when called at top level (one compiled function per backend). Called inside
    an enclosing trace (``jax.jit``, ``jax.grad``, ``jax.vmap``, ...), where JAX takes
    no compiler options, it is a plain ``equinox.filter_jit``. Either way ``fun`` is
    traced with full-precision float32 matrix products (``jax.default_matmul_precision``
    ``"highest"``).

    **Arguments:** ``fun``: the function. **Returns:** the jitted function.
    """
    exact = full_precision(fun)
    plain = eqx.filter_jit(exact)
    by_backend = {}

    @functools.wraps(fun)
    def call(*args, **kwargs):
        if not _at_top_level():
            return plain(*args, **kwargs)
        backend = jax.default_backend()
        jitted = by_backend.get(backend)
        if jitted is None:  # (setdefault: threads calling at once share one, so it compiles once)
            jitted = by_backend.setdefault(backend, eqx.filter_jit(exact, compiler_options=compiler_options(backend)))
        return jitted(*args, **kwargs)

    return call


def _at_top_level() -> bool:
    """Whether no JAX transformation is tracing in this thread (JAX has no public test)."""
    from jax._src import core

    return core.trace_state_clean()


def unrolled_off_cpu(loop, *operands):
    """``loop(unroll, *operands)`` (a ``lax.fori_loop`` or ``lax.scan`` given its
    ``unroll``) as a loop on a CPU and fully unrolled on other platforms.

    A GPU runs each iteration of a loop as kernels of its own, rereading and rewriting
    the loop's carry in memory, and waits on the host for the loop's condition;
    unrolled, a short elementwise loop fuses into one kernel. On a CPU, where a kernel
    costs its launch, the unrolled body is slower (the stacked muscle curves' Newton
    steps: gait10dof18musc's right-hand side 26 -> 45 us).

    **Returns:** ``loop``'s result.
    """
    return jax.lax.platform_dependent(*operands, cpu=functools.partial(loop, 1), default=functools.partial(loop, True))
