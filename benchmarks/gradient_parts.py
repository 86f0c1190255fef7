"""Where a reverse-mode gradient's time goes: the right-hand side and one
Runge–Kutta–Merson step, forward and reverse, each timed in a jitted loop.

A gradient of ``simulate`` (the default checkpointed adjoint) runs the solve forward,
then, for each step from the last, recomputes the step from its checkpoint and takes
its VJP; the step's VJP is one right-hand-side VJP per stage (``solvers._stages``),
each given the searches (the wrap passes) the step's forward rule made. So
``gradient ~ 2 x forward + accepted steps x (step VJP - step forward)``, and the ratio
of a right-hand side's VJP to its forward evaluation bounds what the gradient can cost.

Run (pinned, as the suite's timings are): ``taskset -c 0 python -m
benchmarks.gradient_parts MODEL [--loops N]``. Prints microseconds per evaluation.
"""

from __future__ import annotations

import argparse
import importlib

import diffrax
import jax
import jax.numpy as jnp

from . import suite

simulation = importlib.import_module("simjax.simulate")
solvers = importlib.import_module("simjax.solvers")


def _per_call(body, y, args, loops: int, repeat: int = 5) -> float:
    """Seconds per call of ``body(y, args)`` (a vector of ``y``'s shape), called
    ``loops`` times in one jitted loop, each call on a slightly different ``y`` so XLA
    cannot hoist it; best of ``repeat`` runs."""

    def run(y, args):
        step = lambda i, c: c + 1e-12 * body(y + 1e-9 * c, args)  # noqa: E731
        return jax.lax.fori_loop(0, loops, step, jnp.zeros_like(y))

    run = suite.jit(run)
    jax.block_until_ready(run(y, args))
    return suite.best(lambda: jax.block_until_ready(run(y, args)), repeat) / loops


def measure(name: str, loops: int = 200, h: float = 2e-3) -> dict:
    """The four costs for model ``name`` at its default, equilibrated state, as
    ``simulate`` evaluates them (prepared parameters outside the loop; a step of ``h``
    seconds).

    **Returns:** ``{"rhs", "rhs_vjp", "rhs_vjp_given", "step", "step_vjp"}`` in seconds
    per call (``rhs_vjp_given``: the VJP given the searches made at the state, as the
    stages' reverse mode takes it).
    """
    system = suite.load_simjax(name)
    state = suite.initial_state(system)
    args = suite.solve_args(system, state)
    term = diffrax.ODETerm(simulation._vector_field)
    rkm = solvers.RungeKuttaMerson(searched=simulation._searched_field)
    t0, t1 = jnp.asarray(state.t), jnp.asarray(state.t + h)
    found = jax.jit(lambda y, a: simulation._searched_field(t0, y, a, None)[1])(state.y, args)

    def rhs(y, a):
        return simulation._vector_field(t0, y, a)

    def rhs_given(y, a):
        return simulation._searched_field(t0, y, a, found)[0]

    def step(y, a):
        return sum(solvers._stages((t0, t1, y, a), rkm, term))

    def vjp_of(f):
        def g(y, a):
            out, pull = jax.vjp(lambda y: f(y, a), y)
            return pull(out)[0]

        return g

    return {
        key: _per_call(f, state.y, args, loops)
        for key, f in (
            ("rhs", rhs),
            ("rhs_vjp", vjp_of(rhs)),
            ("rhs_vjp_given", vjp_of(rhs_given)),
            ("step", step),
            ("step_vjp", vjp_of(step)),
        )
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="gait10dof18musc")
    parser.add_argument("--loops", type=int, default=200)
    options = parser.parse_args(argv)
    t = measure(options.model, options.loops)
    print(f"{options.model}, us per evaluation (float64):")
    print(
        f"  right-hand side {t['rhs'] * 1e6:9.1f}   its VJP {t['rhs_vjp'] * 1e6:9.1f}"
        f"   ratio {t['rhs_vjp'] / t['rhs']:.2f}"
    )
    print(f"  its VJP given its searches {t['rhs_vjp_given'] * 1e6:9.1f}   ratio {t['rhs_vjp_given'] / t['rhs']:.2f}")
    print(
        f"  RKM step        {t['step'] * 1e6:9.1f}   its VJP {t['step_vjp'] * 1e6:9.1f}"
        f"   ratio {t['step_vjp'] / t['step']:.2f}"
    )


if __name__ == "__main__":
    main()
