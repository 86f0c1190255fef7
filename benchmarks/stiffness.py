"""Whether a model's step sizes are set by accuracy or by stability.

An explicit method's step ``h`` is stable for a decaying mode of rate ``lambda`` (an
eigenvalue of the right-hand side's Jacobian) while ``h lambda`` stays inside its
stability region; for Runge–Kutta–Merson that region meets the negative real axis at
``-3.55``. When the steps of a run sit at that bound whatever the accuracy, the
stiffest state, not the error estimate, sets them: the run takes more steps than its
accuracy needs, and its error is well below the accuracy. OpenSim's runs are bound the
same way, so their error against a tight reference is small too.

Run: ``python -m benchmarks.stiffness MODEL [--samples N] [--accuracy A]``. Prints,
at accepted steps spread over a 1 s run, the step size, the most negative real part
of the Jacobian's eigenvalues and the state variable whose diagonal entry is the most
negative, and their product against the stability bound.
"""

from __future__ import annotations

import argparse
import importlib

import jax
import numpy as np

import simjax as sj

from . import suite  # (float64, as every benchmark)

simulation = importlib.import_module("simjax.simulate")  # the module, which the function shadows
solvers = importlib.import_module("simjax.solvers")


def stability_bound(method=solvers.RungeKuttaMerson) -> float:
    """Where an explicit Runge–Kutta ``method``'s stability region meets the negative
    real axis: the largest ``x < 0`` with ``|R(x)| = 1``, ``R`` its stability function
    (for Runge–Kutta–Merson ``1 + x + x^2/2 + x^3/6 + x^4/24 + x^5/144``).

    **Returns:** the bound (dimensionless; a step ``h`` is stable for a real rate
    ``lambda < 0`` (1/s) while ``h lambda`` is above it).
    """
    a, b = np.asarray(method.a, float), np.asarray(method.b, float)
    n = len(b)

    def growth(x):
        return abs(1.0 + x * b @ np.linalg.solve(np.eye(n) - x * a, np.ones(n)))

    # walk left from 0 to the first unstable point, then bisect that last interval
    hi, lo = 0.0, -0.01
    while growth(lo) <= 1.0:
        hi, lo = lo, lo - 0.01
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if growth(mid) > 1.0 else (lo, mid)
    return 0.5 * (lo + hi)


def measure(name: str, samples: int = 12, accuracy: float = 1e-5, t_final: float = 1.0) -> dict:
    """Step sizes against the stiffest rate along a run of model ``name`` (``suite``'s
    models) from its default, equilibrated state with ``simulate``'s Runge–Kutta–Merson.

    **Returns:** ``{"steps": accepted steps, "bound": stability_bound(), "rows": [{"t": s,
    "h": s, "rate": most negative real part of the eigenvalues (1/s), "h_rate": h * rate,
    "stiffest": the state whose diagonal entry is most negative}, ...]}`` at ``samples``
    accepted steps spread over the run (not the last, which ends the run wherever it
    reaches ``t_final``).
    """
    system = suite.load_simjax(name)
    state = suite.initial_state(system)
    traj = sj.simulate(system, state, t_final, accuracy=accuracy, save_steps=True, max_steps=20_000)
    t = np.asarray(traj.t)
    t = t[np.isfinite(t)]
    args = suite.solve_args(system, state)
    jacobian = jax.jit(jax.jacfwd(lambda y, t: simulation._vector_field(t, y, args)))
    names = list(system.q_names) + list(system.u_names) + list(system.z_names)
    rows = []
    # the step after the state at t[k], sampled up to the second last: the last is cut short to end at t_final
    for k in np.unique(np.linspace(0, len(t) - 3, samples).astype(int)):
        step_start = traj.state(k)
        j = np.asarray(jacobian(step_start.y, step_start.t))
        rate = float(np.linalg.eigvals(j).real.min())
        h = float(t[k + 1] - t[k])
        rows.append(
            {"t": float(t[k]), "h": h, "rate": rate, "h_rate": h * rate, "stiffest": names[int(np.argmin(np.diag(j)))]}
        )
    return {"steps": len(t), "bound": stability_bound(), "rows": rows}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="arm26")
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--accuracy", type=float, default=1e-5)
    options = parser.parse_args(argv)
    got = measure(options.model, options.samples, options.accuracy)
    print(
        f"{options.model}: {got['steps']} accepted steps over 1 s at accuracy {options.accuracy:g};"
        f" Runge-Kutta-Merson is stable for h * rate > {got['bound']:.3f}"
    )
    print(f"{'t (s)':>7} {'h (ms)':>7} {'rate (1/s)':>11} {'h * rate':>9}  stiffest state")
    for r in got["rows"]:
        print(f"{r['t']:7.3f} {r['h'] * 1e3:7.2f} {r['rate']:11.0f} {r['h_rate']:9.2f}  {r['stiffest']}")
    ratios = np.array([r["h_rate"] / got["bound"] for r in got["rows"]])
    print(f"median h * rate / bound: {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
