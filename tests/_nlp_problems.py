"""Small nonlinear programs with known optima, the test set for the interior-point NLP solver.

Every problem has the form

    minimize f(x)  subject to  constraint_lower <= c(x) <= constraint_upper,  lower <= x <= upper,

with equality constraints where ``constraint_lower == constraint_upper`` and a fixed
variable where ``lower == upper``. ``f`` and ``c`` are pure ``jax.numpy`` (differentiable
and jit-able). They need float64: ``tests/conftest.py`` sets ``jax_enable_x64`` (importing
simjax does not); this module leaves JAX's configuration alone.

Sources:

* W. Hock and K. Schittkowski, *Test Examples for Nonlinear Programming Codes*,
  Lecture Notes in Economics and Mathematical Systems 187, Springer, 1981:
  HS6, HS7, HS14, HS15, HS21, HS40, HS43 (Rosen-Suzuki), HS71, HS76, HS100, with their
  standard starting points and optima (also distributed as CUTEst SIF files).
* HS35MOD: CUTEst's variant of HS35 with ``x2`` fixed at 0.5 (SIF input A.R. Conn, 1990).
  Its optimum, f* = 1/4 at x* = (3/2, 1/2, 1/2), is derived in its comment (the SIF file's
  "solution" comment repeats HS35's 1/9, which is for the unfixed problem).
* ROSENBROCK: H.H. Rosenbrock, *Comput. J.* 3 (1960) 175, standard start (-1.2, 1).
* REDUNDANT_EQ and INFEASIBLE are constructed here; their optimum / infeasibility is
  proved in their comments.

Where the literature gives x* to only 7 significant digits (HS71, HS100), ``x_star`` holds
the KKT point polished by Newton's method to ~1e-14 (within 3.4e-7 of the printed x*),
and ``f_star`` is the objective there, which agrees with the printed f* to all its digits
(17.0140173 and 680.6300573).

Every entry was checked numerically: scipy's SLSQP and/or trust-constr from ``x0`` reach
``f_star`` to 1e-6 (REDUNDANT_EQ: trust-constr only; SLSQP stops on the singular
Jacobian), and ``x_star`` satisfies bounds and constraints to 1e-13 and attains ``f_star``.

Coverage: variable bounds (HS15, HS21, HS35MOD, HS71, HS76); nonlinear equalities (HS6,
HS7, HS40, HS71, REDUNDANT_EQ; HS14's is linear); inequalities (HS14, HS15, HS21, HS35MOD,
HS43, HS71, HS76, HS100); ``x0`` violating the constraints (HS6, HS7, HS14, HS15, HS21,
HS40, HS71, REDUNDANT_EQ, INFEASIBLE); a fixed variable (HS35MOD); a rank-deficient
constraint Jacobian (REDUNDANT_EQ); a degenerate active constraint with zero multiplier
(HS35MOD); an infeasible problem (INFEASIBLE, ``infeasible=True``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax.numpy as jnp
import numpy as np

inf = np.inf


@dataclass(frozen=True)
class NLP:
    name: str
    objective: Callable  # f(x) -> scalar, jax.numpy, x: (n,) float64
    constraints: Callable | None  # c(x) -> (m,) jax array, or None when m == 0
    constraint_lower: np.ndarray  # (m,) -inf allowed; equality where lower == upper
    constraint_upper: np.ndarray  # (m,) +inf allowed
    lower: np.ndarray  # (n,) variable bounds, -inf/+inf allowed
    upper: np.ndarray
    x0: np.ndarray  # the standard starting point
    f_star: float | None  # known optimal objective (None for the infeasible one)
    x_star: np.ndarray | None
    infeasible: bool = False

    @property
    def n(self) -> int:
        return self.x0.shape[0]

    @property
    def m(self) -> int:
        return self.constraint_lower.shape[0]


def _a(*values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def _free(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, -inf), np.full(n, inf)


_NONE = np.zeros(0)


# --- Rosenbrock (unconstrained) ------------------------------------------------------------


def _rosenbrock_f(x):
    return 100.0 * (x[1] - x[0] ** 2) ** 2 + (1.0 - x[0]) ** 2


ROSENBROCK = NLP(
    name="ROSENBROCK",
    objective=_rosenbrock_f,
    constraints=None,
    constraint_lower=_NONE,
    constraint_upper=_NONE,
    lower=_free(2)[0],
    upper=_free(2)[1],
    x0=_a(-1.2, 1.0),
    f_star=0.0,
    x_star=_a(1.0, 1.0),
)


# --- HS6: one nonlinear equality; x0 infeasible --------------------------------------------


def _hs6_f(x):
    return (1.0 - x[0]) ** 2


def _hs6_c(x):
    return jnp.stack([10.0 * (x[1] - x[0] ** 2)])


HS6 = NLP(
    name="HS6",
    objective=_hs6_f,
    constraints=_hs6_c,
    constraint_lower=_a(0.0),
    constraint_upper=_a(0.0),
    lower=_free(2)[0],
    upper=_free(2)[1],
    x0=_a(-1.2, 1.0),
    f_star=0.0,
    x_star=_a(1.0, 1.0),
)


# --- HS7: one nonlinear equality -----------------------------------------------------------


def _hs7_f(x):
    return jnp.log(1.0 + x[0] ** 2) - x[1]


def _hs7_c(x):
    return jnp.stack([(1.0 + x[0] ** 2) ** 2 + x[1] ** 2 - 4.0])


HS7 = NLP(
    name="HS7",
    objective=_hs7_f,
    constraints=_hs7_c,
    constraint_lower=_a(0.0),
    constraint_upper=_a(0.0),
    lower=_free(2)[0],
    upper=_free(2)[1],
    x0=_a(2.0, 2.0),
    f_star=-np.sqrt(3.0),
    x_star=_a(0.0, np.sqrt(3.0)),
)


# --- HS14: linear equality + nonlinear inequality; x0 infeasible ---------------------------


def _hs14_f(x):
    return (x[0] - 2.0) ** 2 + (x[1] - 1.0) ** 2


def _hs14_c(x):
    return jnp.stack([x[0] - 2.0 * x[1] + 1.0, -0.25 * x[0] ** 2 - x[1] ** 2 + 1.0])


_S7 = np.sqrt(7.0)
HS14 = NLP(
    name="HS14",
    objective=_hs14_f,
    constraints=_hs14_c,
    constraint_lower=_a(0.0, 0.0),
    constraint_upper=_a(0.0, inf),
    lower=_free(2)[0],
    upper=_free(2)[1],
    x0=_a(2.0, 2.0),
    f_star=9.0 - 2.875 * _S7,
    x_star=_a(0.5 * (_S7 - 1.0), 0.25 * (_S7 + 1.0)),
)


# --- HS15: two nonlinear inequalities, an upper bound; x0 infeasible -----------------------


def _hs15_f(x):
    return 100.0 * (x[1] - x[0] ** 2) ** 2 + (1.0 - x[0]) ** 2


def _hs15_c(x):
    return jnp.stack([x[0] * x[1] - 1.0, x[0] + x[1] ** 2])


HS15 = NLP(
    name="HS15",
    objective=_hs15_f,
    constraints=_hs15_c,
    constraint_lower=_a(0.0, 0.0),
    constraint_upper=_a(inf, inf),
    lower=_a(-inf, -inf),
    upper=_a(0.5, inf),
    x0=_a(-2.0, 1.0),
    f_star=306.5,
    x_star=_a(0.5, 2.0),
)


# --- HS21: linear inequality, bounds; x0 violates the bounds and the constraint ------------


def _hs21_f(x):
    return 0.01 * x[0] ** 2 + x[1] ** 2 - 100.0


def _hs21_c(x):
    return jnp.stack([10.0 * x[0] - x[1] - 10.0])


HS21 = NLP(
    name="HS21",
    objective=_hs21_f,
    constraints=_hs21_c,
    constraint_lower=_a(0.0),
    constraint_upper=_a(inf),
    lower=_a(2.0, -50.0),
    upper=_a(50.0, 50.0),
    x0=_a(-1.0, -1.0),
    f_star=-99.96,
    x_star=_a(2.0, 0.0),
)


# --- HS35MOD: HS35 with x2 fixed (lower == upper == 0.5) -----------------------------------
# With x2 = 1/2 the objective is convex with unconstrained minimiser (3/2, 1/2) in (x1, x3),
# which lies exactly on 3 - x1 - x2 - 2 x3 >= 0 (active with a zero multiplier: strict
# complementarity fails) and inside x >= 0, so x* = (3/2, 1/2, 1/2), f* = 1/4.


def _hs35_f(x):
    return (
        9.0
        - 8.0 * x[0]
        - 6.0 * x[1]
        - 4.0 * x[2]
        + 2.0 * x[0] ** 2
        + 2.0 * x[1] ** 2
        + x[2] ** 2
        + 2.0 * x[0] * x[1]
        + 2.0 * x[0] * x[2]
    )


def _hs35_c(x):
    return jnp.stack([3.0 - x[0] - x[1] - 2.0 * x[2]])


HS35MOD = NLP(
    name="HS35MOD",
    objective=_hs35_f,
    constraints=_hs35_c,
    constraint_lower=_a(0.0),
    constraint_upper=_a(inf),
    lower=_a(0.0, 0.5, 0.0),
    upper=_a(inf, 0.5, inf),
    x0=_a(0.5, 0.5, 0.5),
    f_star=0.25,
    x_star=_a(1.5, 0.5, 0.5),
)


# --- HS40: three nonlinear equalities ------------------------------------------------------
# (x3, x4) -> (-x3, -x4) is a symmetry; the literature's (positive) solution is given.


def _hs40_f(x):
    return -x[0] * x[1] * x[2] * x[3]


def _hs40_c(x):
    return jnp.stack([x[0] ** 3 + x[1] ** 2 - 1.0, x[0] ** 2 * x[3] - x[2], x[3] ** 2 - x[1]])


HS40 = NLP(
    name="HS40",
    objective=_hs40_f,
    constraints=_hs40_c,
    constraint_lower=_a(0.0, 0.0, 0.0),
    constraint_upper=_a(0.0, 0.0, 0.0),
    lower=_free(4)[0],
    upper=_free(4)[1],
    x0=_a(0.8, 0.8, 0.8, 0.8),
    f_star=-0.25,
    x_star=_a(2.0 ** (-1.0 / 3.0), 2.0 ** (-0.5), 2.0 ** (-11.0 / 12.0), 2.0 ** (-0.25)),
)


# --- HS43 (Rosen-Suzuki): three nonlinear inequalities -------------------------------------


def _hs43_f(x):
    return x[0] ** 2 + x[1] ** 2 + 2.0 * x[2] ** 2 + x[3] ** 2 - 5.0 * x[0] - 5.0 * x[1] - 21.0 * x[2] + 7.0 * x[3]


def _hs43_c(x):
    x1, x2, x3, x4 = x[0], x[1], x[2], x[3]
    return jnp.stack(
        [
            8.0 - x1**2 - x2**2 - x3**2 - x4**2 - x1 + x2 - x3 + x4,
            10.0 - x1**2 - 2.0 * x2**2 - x3**2 - 2.0 * x4**2 + x1 + x4,
            5.0 - 2.0 * x1**2 - x2**2 - x3**2 - 2.0 * x1 + x2 + x4,
        ]
    )


HS43 = NLP(
    name="HS43",
    objective=_hs43_f,
    constraints=_hs43_c,
    constraint_lower=_a(0.0, 0.0, 0.0),
    constraint_upper=_a(inf, inf, inf),
    lower=_free(4)[0],
    upper=_free(4)[1],
    x0=_a(0.0, 0.0, 0.0, 0.0),
    f_star=-44.0,
    x_star=_a(0.0, 1.0, 2.0, -1.0),
)


# --- HS71: nonlinear inequality + nonlinear equality, bounds 1 <= x <= 5 -------------------
# Literature: x* = (1, 4.7429994, 3.8211503, 1.3794082), f* = 17.0140173. The KKT point
# below (Newton-polished; active: x1 = 1, x1 x2 x3 x4 = 25, the equality) differs from the
# printed x* by <= 3.4e-7, and the printed point violates the equality by 2e-8.


def _hs71_f(x):
    return x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2]


def _hs71_c(x):
    return jnp.stack([x[0] * x[1] * x[2] * x[3], jnp.sum(x**2)])


HS71 = NLP(
    name="HS71",
    objective=_hs71_f,
    constraints=_hs71_c,
    constraint_lower=_a(25.0, 40.0),
    constraint_upper=_a(inf, 40.0),
    lower=np.full(4, 1.0),
    upper=np.full(4, 5.0),
    x0=_a(1.0, 5.0, 5.0, 1.0),
    f_star=17.014017289156303,
    x_star=_a(1.0, 4.742999637264417, 3.821149984184874, 1.3794082931726723),
)


# --- HS76: three linear inequalities, x >= 0 (quadratic objective) -------------------------
# Exact solution x* = (3/11, 23/11, 0, 6/11), f* = -103/22 (literature: -4.681818181).


def _hs76_f(x):
    x1, x2, x3, x4 = x[0], x[1], x[2], x[3]
    return x1**2 + 0.5 * x2**2 + x3**2 + 0.5 * x4**2 - x1 * x3 + x3 * x4 - x1 - 3.0 * x2 + x3 - x4


def _hs76_c(x):
    x1, x2, x3, x4 = x[0], x[1], x[2], x[3]
    return jnp.stack(
        [
            5.0 - x1 - 2.0 * x2 - x3 - x4,
            4.0 - 3.0 * x1 - x2 - 2.0 * x3 + x4,
            x2 + 4.0 * x3 - 1.5,
        ]
    )


HS76 = NLP(
    name="HS76",
    objective=_hs76_f,
    constraints=_hs76_c,
    constraint_lower=_a(0.0, 0.0, 0.0),
    constraint_upper=_a(inf, inf, inf),
    lower=np.zeros(4),
    upper=np.full(4, inf),
    x0=_a(0.5, 0.5, 0.5, 0.5),
    f_star=-103.0 / 22.0,
    x_star=_a(3.0 / 11.0, 23.0 / 11.0, 0.0, 6.0 / 11.0),
)


# --- HS100: four nonlinear inequalities, n = 7 ---------------------------------------------
# Literature: x* = (2.330499, 1.951372, -0.4775414, 4.365726, -0.6244870, 1.038131, 1.594227),
# f* = 680.6300573. Below: the KKT point Newton-polished (active: constraints 1 and 4),
# which rounds to the printed digits.


def _hs100_f(x):
    x1, x2, x3, x4, x5, x6, x7 = (x[i] for i in range(7))
    return (
        (x1 - 10.0) ** 2
        + 5.0 * (x2 - 12.0) ** 2
        + x3**4
        + 3.0 * (x4 - 11.0) ** 2
        + 10.0 * x5**6
        + 7.0 * x6**2
        + x7**4
        - 4.0 * x6 * x7
        - 10.0 * x6
        - 8.0 * x7
    )


def _hs100_c(x):
    x1, x2, x3, x4, x5, x6, x7 = (x[i] for i in range(7))
    return jnp.stack(
        [
            127.0 - 2.0 * x1**2 - 3.0 * x2**4 - x3 - 4.0 * x4**2 - 5.0 * x5,
            282.0 - 7.0 * x1 - 3.0 * x2 - 10.0 * x3**2 - x4 + x5,
            196.0 - 23.0 * x1 - x2**2 - 6.0 * x6**2 + 8.0 * x7,
            -4.0 * x1**2 - x2**2 + 3.0 * x1 * x2 - 2.0 * x3**2 - 5.0 * x6 + 11.0 * x7,
        ]
    )


HS100 = NLP(
    name="HS100",
    objective=_hs100_f,
    constraints=_hs100_c,
    constraint_lower=np.zeros(4),
    constraint_upper=np.full(4, inf),
    lower=_free(7)[0],
    upper=_free(7)[1],
    x0=_a(1.0, 2.0, 0.0, 4.0, 0.0, 1.0, 1.0),
    f_star=680.630057374402,
    x_star=_a(
        2.33049937287957,
        1.9513723728968888,
        -0.4775413923888716,
        4.365726233655811,
        -0.6244869705268175,
        1.0381310186079584,
        1.5942267116118685,
    ),
)


# --- REDUNDANT_EQ: rank-deficient equality Jacobian ----------------------------------------
# c1 = x1 + x2 + x3 = 3 and c2 = (x1 + x2 + x3)^2 = 9: on c1's plane c2 holds too, and
# grad c2 = 2 (x1 + x2 + x3) grad c1, so the 2x3 Jacobian has rank 1 everywhere (LICQ
# fails; the multipliers are not unique). The minimiser is the projection of (1, 2, 3)
# on the plane: x* = (0, 1, 2), f* = 3.


def _redundant_f(x):
    return (x[0] - 1.0) ** 2 + (x[1] - 2.0) ** 2 + (x[2] - 3.0) ** 2


def _redundant_c(x):
    s = jnp.sum(x)
    return jnp.stack([s, s**2])


REDUNDANT_EQ = NLP(
    name="REDUNDANT_EQ",
    objective=_redundant_f,
    constraints=_redundant_c,
    constraint_lower=_a(3.0, 9.0),
    constraint_upper=_a(3.0, 9.0),
    lower=_free(3)[0],
    upper=_free(3)[1],
    x0=_a(0.5, 0.5, 0.5),
    f_star=3.0,
    x_star=_a(0.0, 1.0, 2.0),
)


# --- INFEASIBLE: x1^2 + x2^2 <= 1 and x1 + x2 >= 3 -----------------------------------------
# On the unit disc x1 + x2 <= sqrt(2) < 3, so no point is feasible. A solver should report
# infeasibility (the least-infeasible point is (1, 1)/sqrt(2)).


def _infeasible_f(x):
    return (x[0] - 2.0) ** 2 + (x[1] - 1.0) ** 2


def _infeasible_c(x):
    return jnp.stack([x[0] ** 2 + x[1] ** 2, x[0] + x[1]])


INFEASIBLE = NLP(
    name="INFEASIBLE",
    objective=_infeasible_f,
    constraints=_infeasible_c,
    constraint_lower=_a(-inf, 3.0),
    constraint_upper=_a(1.0, inf),
    lower=_free(2)[0],
    upper=_free(2)[1],
    x0=_a(0.5, 0.5),
    f_star=None,
    x_star=None,
    infeasible=True,
)


PROBLEMS: tuple[NLP, ...] = (
    ROSENBROCK,
    HS6,
    HS7,
    HS14,
    HS15,
    HS21,
    HS35MOD,
    HS40,
    HS43,
    HS71,
    HS76,
    HS100,
    REDUNDANT_EQ,
    INFEASIBLE,
)


def by_name(name: str) -> NLP:
    """The problem called ``name`` (case-insensitive)."""
    for p in PROBLEMS:
        if p.name.lower() == name.lower():
            return p
    raise KeyError(f"no NLP problem named {name!r}; have {[p.name for p in PROBLEMS]}")
