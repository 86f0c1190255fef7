"""Direct collocation: a ``Problem`` transcribed into a staged NLP and solved.

The mesh has ``N`` intervals at normalized times ``tau_0 = 0 < ... < tau_N = 1``;
``t = t0 + tau (tf - t0)``, with ``t0`` and ``tf`` border variables of the NLP. Stage
``k`` holds mesh point ``k``'s states ``y`` and controls ``c``; with Hermite–Simpson
also the interval's midpoint states and controls. The dynamics ``f = dy/dt`` are
``simjax``'s: explicit (forward dynamics) or, in Moco's implicit mode, with the
accelerations as variables and the equations of motion as a residual. As Moco's CasOC:

- trapezoidal: ``y_{k+1} - y_k - h/2 (f_k + f_{k+1}) = 0``; integrals by the
  trapezoidal rule;
- Hermite–Simpson (separated): ``y_m - (y_k + y_{k+1})/2 - h/8 (f_k - f_{k+1}) = 0``,
  ``y_{k+1} - y_k - h/6 (f_k + 4 f_m + f_{k+1}) = 0``, the midpoint controls the mean
  of their neighbours' (Moco's ``interpolate_control_mesh_interior_points``);
  integrals by Simpson's rule;
- multiple shooting (not Moco's): ``y_{k+1} - Phi_k(y_k) = 0``, ``Phi_k`` the state
  reached over the interval by ``shooting_steps`` classical Runge-Kutta steps (as
  ``simulate``'s ``"rk4"``) of the explicit dynamics, the controls linear from ``c_k``
  to ``c_{k+1}`` (as a ``ControlTable`` of the mesh points); integrals by the
  trapezoidal rule.

The NLP is solved by ``ipm`` (the KKT matrix block tridiagonal over the mesh).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from . import ipm, progress
from .nlp import StagedNLP
from .sparsity import detect_sparsity
from .problem import Ends, Problem

__all__ = ["solve", "solve_batch", "transcribe", "OptimalTrajectory", "SCHEMES"]

SCHEMES = ("trapezoidal", "hermite-simpson", "multiple-shooting")


class OptimalTrajectory(eqx.Module):
    """The solution of a ``Problem``.

    **Fields:** ``time (n,)`` (s): mesh points (and, with Hermite–Simpson, the
    midpoints between them: ``n = 2 N + 1``); ``states (n, ny)``, ``controls (n, nc)``
    in ``state_names``/``control_names`` order; ``parameters (n_parameters,)`` in
    ``parameter_names`` order (the problem's ``Parameter``s); ``objective``; ``status`` (see
    ``ipm.STATUS``); ``iterations``; ``nlp``: the solver's ``Solution``; the other
    variables at every grid point, as Moco's ``MocoTrajectory`` groups them:
    ``derivatives (n, nd)`` (implicit mode's accelerations, m/s² or rad/s²; implicit
    tendons' normalized force derivatives, 1/s), ``multipliers (n, nl)`` (the
    kinematic constraints' Lagrange multipliers) and ``slacks (n, nl)`` (their velocity
    corrections), named by ``derivative_names``, ``multiplier_names`` and
    ``slack_names`` (see ``variable_names``); ``projection_states (N, nq + nu)``:
    with Bordalba et al.'s method, the coordinates and speeds each interval ends at
    before the projection (else ``None``); ``penalty_weights``: the solve's
    ``(accelerations_weight, auxiliary_derivatives_weight, multipliers_weight,
    state_projection_weight)`` (``None``: not minimized).
    """

    time: jax.Array
    states: jax.Array
    controls: jax.Array
    parameters: jax.Array
    objective: jax.Array
    status: jax.Array
    iterations: jax.Array
    nlp: ipm.Solution
    state_names: tuple = eqx.field(static=True)
    control_names: tuple = eqx.field(static=True)
    parameter_names: tuple = eqx.field(static=True, default=())
    derivatives: jax.Array | None = None
    multipliers: jax.Array | None = None
    slacks: jax.Array | None = None
    derivative_names: tuple = eqx.field(static=True, default=())
    multiplier_names: tuple = eqx.field(static=True, default=())
    slack_names: tuple = eqx.field(static=True, default=())
    projection_states: jax.Array | None = None
    penalty_weights: tuple = eqx.field(static=True, default=(None, None, None, None))

    def state(self, name: str):
        """The column of state ``name``."""
        return self.states[..., self.state_names.index(name)]

    def control(self, name: str):
        """The column of control ``name`` (actuator path)."""
        return self.controls[..., self.control_names.index(name)]

    def parameter(self, name: str):
        """The optimal value of parameter ``name``."""
        return self.parameters[..., self.parameter_names.index(name)]


def _mesh(intervals) -> np.ndarray:
    if np.ndim(intervals) == 0:
        return np.linspace(0.0, 1.0, int(intervals) + 1)
    tau = np.asarray(intervals, float)
    tau = (tau - tau[0]) / (tau[-1] - tau[0])
    if tau.ndim != 1 or len(tau) < 2 or np.any(np.diff(tau) <= 0):
        raise ValueError(f"mesh: need increasing times, got {intervals!r}")
    return tau


def _middle(a, b):
    """A point within bounds: their middle, the finite one, or zero."""
    # (inf + -inf where both bounds are infinite: not taken)
    return np.where(
        np.isfinite(a) & np.isfinite(b), 0.5 * (a + b), np.where(np.isfinite(a), a, np.where(np.isfinite(b), b, 0.0))
    )


#: the discrete variable and the output of implicit tendon dynamics (DeGrooteFregly2016Muscle)
_TENDON_DERIVATIVE = "implicitderiv_normalized_tendon_force"
_TENDON_RESIDUAL = "implicitresidual_normalized_tendon_force"


def implicit_tendons(system) -> tuple[np.ndarray, tuple[str, ...]]:
    """The muscles whose tendon dynamics are implicit (``tendon_compliance_dynamics_mode
    = "implicit"``): the index of each one's ``implicitderiv_normalized_tendon_force``
    in the state's discrete variables, and its path.

    **Returns:** ``(indices (n,), paths)``.
    """
    suffix = "/" + _TENDON_DERIVATIVE
    idx = [i for i, n in enumerate(system.d_names) if n.endswith(suffix)]
    return np.asarray(idx, int), tuple(system.d_names[i][: -len(suffix)] for i in idx)


def multiplier_names(system) -> tuple[str, ...]:
    """Moco's names of the kinematic constraints' multipliers, one per constraint
    equation in ``Context.constraints``' row order: ``lambda_cid{c}_p{i}``, ``c`` the
    constraint's index among Simbody's (each coordinate's lock, then its prescribed
    motion where it has one, in mobility order; then the ConstraintSet's members in
    the model's order; then the welds that close loops), ``i`` its equation.

    The velocity corrections of Posa et al.'s method are named with ``gamma_`` for
    ``lambda_`` (Moco's slacks)."""
    from ..forward import prescribed_motion
    from ..mechanics.constraints import Constraint

    model, topology = system.model, system.topology
    nq = topology.tree.nq
    prescribed = prescribed_motion(system, 0.0)
    prescribed_q = sorted(int(i) for i in (prescribed[0] if prescribed is not None else ()))
    # Simbody's index of each coordinate's lock; a prescribed coordinate's motion follows its lock
    lock = np.arange(nq) + np.searchsorted(np.asarray(prescribed_q, int), np.arange(nq))
    members = model.paths(Constraint)
    first = nq + len(prescribed_q)
    cid = {path: first + k for k, path in enumerate(members)}
    names = []
    for group in topology.role_groups("constraints"):
        for path in group.paths:
            names += [f"lambda_cid{cid[path]}_p{i}" for i in range(group.cls.num_equations)]
    if len(topology.locked_u):  # (refused by transcribe; named for completeness)
        names += [f"lambda_cid{lock[i]}_p0" for i in topology.locked_u]
    names += [f"lambda_cid{lock[i] + 1}_p0" for i in (prescribed[0] if prescribed is not None else ())]
    for k in range(len(topology.tree.loop_welds)):
        names += [f"lambda_cid{first + len(members) + k}_p{i}" for i in range(6)]
    return tuple(names)


def variable_names(
    problem: Problem, dynamics_mode: str = "explicit", kinematic_constraint_method: str = "Posa2016"
) -> dict[str, tuple[str, ...]]:
    """Moco's names of a transcription's variables beside the states and controls, by
    kind, as ``transcribe``'s ``unpack`` returns them: ``"derivatives"`` (in implicit
    mode the accelerations, ``.../accel``; then the implicit tendons' derivatives,
    ``.../implicitderiv_normalized_tendon_force``), ``"multipliers"``
    (``multiplier_names``) and ``"slacks"`` (Posa et al.'s velocity corrections,
    ``gamma_...``, or Bordalba et al.'s projection slacks, ``mu_...`` and
    ``mu_..._dot`` for each multiplier in turn; none where the kinematics are
    prescribed)."""
    system = problem.system
    implicit = dynamics_mode == "implicit" and problem.kinematics is None
    accelerations = [n[: -len("speed")] + "accel" for n in system.y_names if n.endswith("/speed")] if implicit else []
    tendons = [system.d_names[i] for i in implicit_tendons(system)[0]]
    lam = multiplier_names(system) if constraint_equations(system) else ()
    if problem.kinematics is not None:
        slacks = ()
    elif kinematic_constraint_method == "Bordalba2023":
        slacks = tuple(f"mu_{n[len('lambda_') :]}{dot}" for n in lam for dot in ("", "_dot"))
    else:
        slacks = tuple("gamma_" + n[len("lambda_") :] for n in lam)
    return {"derivatives": tuple(accelerations + tendons), "multipliers": lam, "slacks": slacks}


def _check_constraints(system) -> None:
    """Refuse what trajectory optimisation does not support, as Moco refuses it:
    quaternion joints and locked coordinates.

    **Raises:** ``ValueError`` naming them."""
    topology = system.topology
    if len(topology.tree.quat_q):
        raise ValueError(
            "the model has joints with quaternion rotations (ball or free joints), which trajectory "
            "optimisation does not support (nor does Moco): use joints of Euler angles"
        )
    if len(topology.locked_u):
        names = [p for p, info in topology.tree.coordinates.items() if info.u in set(topology.locked_u.tolist())]
        raise ValueError(
            f"coordinates {', '.join(names)} are locked, which trajectory optimisation does not support "
            "(nor does Moco): unlock them, or weld their joints"
        )


def constraint_equations(system) -> int:
    """The number of the model's kinematic constraint equations (its constraints',
    closed loops' and prescribed coordinates'), each with a Lagrange multiplier."""
    from ..forward import Context

    return int(jax.eval_shape(lambda s: Context(s, s.default_state()).constraints.G, system).shape[0])


def _point_dynamics(problem: Problem, implicit: bool, constrained: bool):
    """The dynamics at one grid point, jitted (traced once, then its jaxpr is reused by
    every evaluation the solver traces), ``f(system, t, y, c, extra, w, lam, gamma)
    -> (dy/dt, residual, kinematic errors, G)``:

    - explicit (``extra`` ``None``): forward dynamics;
    - ``implicit``, Moco's implicit mode (``extra``: the generalized accelerations
      ``udot``, variables): ``dy/dt`` with ``udot`` in it, and in the residual the
      generalized forces the equations of motion lack at ``udot`` (zero where they hold);
    - with prescribed kinematics (``extra = (q, u, udot)``): ``y`` the auxiliary
      states, ``dy/dt`` theirs, the same residual.

    ``w``: the derivatives of the normalized tendon forces of the muscles with implicit
    tendon dynamics (``implicit_tendons``; variables, as Moco's auxiliary derivatives):
    their states' derivatives, and their equilibrium residuals close the residual.

    With kinematic constraints (``constrained``), as Moco's Posa et al. (2016) method:
    ``lam``, the multipliers (variables), apply the constraint forces ``-G^T lam`` (the
    forward dynamics solve ``M udot = f - G^T lam``, with the constraints disabled);
    ``gamma``, the velocity correction (variables, zero at the mesh points; empty with
    Bordalba et al.'s method), adds ``G^T gamma`` to ``dq/dt``; the kinematic errors
    are the constraints' position, velocity and acceleration errors (empty without
    constraints or where the kinematics are prescribed); ``G (nl, nu)``: the
    constraints' velocity Jacobian (Bordalba et al.'s projection needs it)."""
    from ..forward import Context
    from ..lapack import spd_solve
    from ..state import State

    system = problem.system
    d0 = system.default_state().d
    tree = system.topology.tree
    nq, nu = tree.nq, tree.nu
    tendon_index, tendons = implicit_tendons(system)
    none = jnp.zeros(0, d0.dtype)

    def discrete(w):
        return d0.at[tendon_index].set(w) if len(tendons) else d0

    def tendon_residuals(ctx):
        return ctx.group_outputs(tendons, _TENDON_RESIDUAL) if len(tendons) else none

    def constraint_forces(ctx, lam):
        return ctx.constraints.G.T @ lam if constrained else jnp.zeros(nu, d0.dtype)

    def kinematic_errors(ctx, udot):
        if not constrained:
            return none
        rows = ctx.constraints
        return jnp.concatenate([rows.perr, rows.verr, rows.G @ udot - rows.b])

    def qdot(ctx, gamma):
        return ctx.vel.qdot + ctx.constraints.G.T @ gamma if constrained and gamma.shape[0] else ctx.vel.qdot

    def jacobian(ctx):
        return ctx.constraints.G if constrained else jnp.zeros((0, nu), d0.dtype)

    def context(system, t, y, c, w):
        return Context(system, State(t=t, q=y[:nq], u=y[nq : nq + nu], z=y[nq + nu :], d=discrete(w)), c)

    if problem.kinematics is None and implicit:

        @jax.jit
        def accelerations_as_variables(system, t, y, c, udot, w, lam, gamma):
            ctx = context(system, t, y, c, w)
            return (
                jnp.concatenate([qdot(ctx, gamma), udot, ctx.zdot]),
                jnp.concatenate([ctx.inverse_dynamics(udot) + constraint_forces(ctx, lam), tendon_residuals(ctx)]),
                kinematic_errors(ctx, udot),
                jacobian(ctx),
            )

        return accelerations_as_variables
    if problem.kinematics is None:

        @jax.jit
        def explicit(system, t, y, c, kin, w, lam, gamma):
            # (one Context for the derivative and the tendon residuals: rhs would build its own)
            ctx = context(system, t, y, c, w)
            if constrained:  # (the constraints disabled, their forces applied by the multipliers)
                udot = spd_solve(
                    ctx.mass_matrix, -ctx.inverse_dynamics(jnp.zeros(nu, d0.dtype)) - constraint_forces(ctx, lam)
                )
            else:
                udot = ctx.acc.udot
            return (
                jnp.concatenate([qdot(ctx, gamma), udot, ctx.zdot]),
                tendon_residuals(ctx),
                kinematic_errors(ctx, udot),
                jacobian(ctx),
            )

        return explicit

    @jax.jit
    def implicit(system, t, z, c, kin, w, lam, gamma):
        q, u, udot = kin
        ctx = Context(system, State(t=t, q=q, u=u, z=z, d=discrete(w)), c)
        return (
            ctx.zdot,
            jnp.concatenate([ctx.inverse_dynamics(udot) + constraint_forces(ctx, lam), tendon_residuals(ctx)]),
            none,
            jnp.zeros((0, nu), d0.dtype),
        )

    return implicit


def _prescribed(problem: Problem, tau, hs: bool):
    """The prescribed kinematics at the grid: ``{"mesh": (q, u, udot), "mid": ...}``,
    each ``(K, n)`` (the midpoints' last row a copy)."""
    (t0lo, t0hi), (tflo, tfhi) = problem.time_bounds()
    if t0lo != t0hi or tflo != tfhi:
        raise ValueError(
            "prescribed kinematics need fixed initial and final times, got "
            f"initial_time={problem.initial_time!r}, final_time={problem.final_time!r}"
        )
    kin = problem.kinematics
    if t0lo < kin.times[0] - 1e-12 or tflo > kin.times[-1] + 1e-12:
        raise ValueError(
            f"prescribed kinematics cover {kin.times[0]}..{kin.times[-1]} s, not the problem's {t0lo}..{tflo} s"
        )
    tau = np.asarray(tau)
    t = t0lo + tau * (tflo - t0lo)
    mid = np.concatenate([0.5 * (t[:-1] + t[1:]), t[-1:]])
    out = {"mesh": kin.at(problem.system, t)}
    if hs:
        out["mid"] = kin.at(problem.system, mid)
    return {k: tuple(jnp.asarray(x) for x in v) for k, v in out.items()}


def _stacked(points):
    """Tuples of per-point values (``None`` kept) -> a tuple of stacked values."""
    return tuple(
        None if parts[0] is None else jax.tree_util.tree_map(lambda *x: jnp.stack(x), *parts) for parts in zip(*points)
    )


#: Moco's default bounds on the accelerations in implicit mode (rad/s^2 or m/s^2)
ACCELERATION_BOUNDS = (-1000.0, 1000.0)
#: Moco's default bounds on the auxiliary derivatives of implicit tendon dynamics (1/s)
TENDON_DERIVATIVE_BOUNDS = (-1000.0, 1000.0)
#: Moco's default bounds on the kinematic constraints' multipliers (``multiplier_bounds``)
MULTIPLIER_BOUNDS = (-1000.0, 1000.0)
#: Moco's default bounds on the velocity corrections at the midpoints
#: (``velocity_correction_bounds``)
VELOCITY_CORRECTION_BOUNDS = (-0.1, 0.1)
DYNAMICS_MODES = ("explicit", "implicit")
#: Moco's methods of enforcing kinematic constraints (``kinematic_constraint_method``)
KINEMATIC_CONSTRAINT_METHODS = ("Posa2016", "Bordalba2023")
#: Moco's default bounds on the slacks of Bordalba et al.'s projection
#: (``projection_slack_variable_bounds``)
PROJECTION_SLACK_BOUNDS = (-1e-3, 1e-3)
#: Moco's default weight of the projection distance (``state_projection_distance_weight``)
STATE_PROJECTION_WEIGHT = 1e-6


def transcribe(
    problem: Problem,
    mesh=50,
    scheme: str = "hermite-simpson",
    interpolate_controls: bool = True,
    dynamics_mode: str = "explicit",
    accelerations_weight: float | None = None,
    auxiliary_derivatives_weight: float | None = None,
    multipliers_weight: float | None = None,
    shooting_steps: int = 4,
    sparse_derivatives: bool = False,
    kinematic_constraint_method: str = "Posa2016",
    state_projection_weight: float | None = STATE_PROJECTION_WEIGHT,
):
    """The staged NLP of a problem and a starting point.

    **Arguments:** ``problem``; ``mesh``: the number of uniform intervals, or the
    mesh's times (any increasing sequence, normalized to ``[0, 1]``); ``scheme``:
    ``"trapezoidal"``, ``"hermite-simpson"`` or ``"multiple-shooting"`` (explicit
    dynamics without kinematic constraints or implicit tendons; ``shooting_steps``
    classical Runge-Kutta steps an interval); ``interpolate_controls``: with
    Hermite–Simpson, the midpoint controls the mean of their neighbours' (Moco's
    ``interpolate_control_mesh_interior_points``), else free; ``dynamics_mode``:
    Moco's ``multibody_dynamics_mode``, ``"explicit"`` (forward dynamics in the
    defects) or ``"implicit"`` (the generalized accelerations are variables at every
    grid point, bounded by ``ACCELERATION_BOUNDS`` as Moco's, and the equations of
    motion a residual there: the stage's own rows). Where the problem prescribes the
    kinematics, the auxiliary states' dynamics are in the defects and the equations of
    motion a residual at every grid point, in either mode. ``accelerations_weight``:
    in implicit mode, add ``weight * integral of |udot|^2 dt`` to the objective
    (Moco's ``minimize_implicit_multibody_accelerations`` with
    ``implicit_multibody_accelerations_weight``); ``auxiliary_derivatives_weight``:
    add ``weight * integral of |w|^2 dt``, ``w`` the implicit tendons' normalized
    tendon force derivatives (1/s; Moco's ``minimize_implicit_auxiliary_derivatives``
    with ``implicit_auxiliary_derivatives_weight``); ``multipliers_weight``: add
    ``weight * integral of |lambda|^2 dt``, ``lambda`` the kinematic constraints'
    multipliers (Moco's ``minimize_lagrange_multipliers`` with
    ``lagrange_multiplier_weight``: for redundant constraints, whose multipliers the
    dynamics do not determine); ``None``: not minimized (Moco's default). All three
    are integrated by the scheme's quadrature, as the goals. ``sparse_derivatives``:
    detect the pattern of the stages' derivatives at random points and have the solver
    push one tangent per color of it rather than one per variable
    (``sparsity.detect_sparsity``; Moco's ``optim_sparsity_detection = "random"``):
    cheaper iterations for muscle-driven problems, whose stages are sparse, after a
    detection that compiles the dense derivatives once. Inside ``jax.grad`` or another
    transformation (the problem's data traced) the derivatives stay dense.

    A model's kinematic constraints are enforced by one of Moco's two methods
    (``kinematic_constraint_method``). In both, a multiplier per constraint equation
    at every grid point applies the constraint forces (multipliers bounded by
    ``MULTIPLIER_BOUNDS``), and the constraints' position and velocity errors are zero
    at the mesh points.

    - ``"Posa2016"`` (Moco's default; Hermite–Simpson only): the acceleration errors
      are zero at the mesh points, and a velocity correction ``G^T gamma`` at each
      midpoint (``gamma`` within ``VELOCITY_CORRECTION_BOUNDS``) keeps the
      coordinates' defects consistent with the constraints.
    - ``"Bordalba2023"`` (Bordalba et al. 2023; either scheme): each interval's
      defects end at projection states ``x'`` of the coordinates and speeds, which
      the interval's end point ``x`` (on the constraint manifold) projects from:
      ``x = x' + [G^T mu_p; G^T mu_v]``, the slacks ``mu`` within
      ``PROJECTION_SLACK_BOUNDS`` (Moco's convention: the first ``nl`` slacks
      project the coordinates, the next ``nl`` the speeds); the dynamics at an
      interval's end are evaluated at ``x'``; the acceleration errors are zero at
      every grid point; ``state_projection_weight`` (``None``: not minimized) adds
      ``weight * sum |x' - x|^2`` over the intervals' ends to the objective (Moco's
      ``minimize_state_projection_distance`` with
      ``state_projection_distance_weight``). ``G`` is the constraints' velocity
      Jacobian, Simbody's ``P_q`` where the coordinates' derivatives are their
      speeds.

    Where the kinematics are prescribed, the multipliers' forces enter the residual
    alone.

    Each grid point's variables are ``[y, c, udot, w, lam, gamma]``: the states,
    controls, accelerations (implicit mode), implicit tendon derivatives, multipliers
    and velocity corrections (each empty where not used); a stage holds its mesh
    point's, then (Hermite–Simpson) its interval's midpoint's, then (Bordalba et al.'s
    method) its mesh point's projection states and slacks (fixed at the first stage,
    which no interval ends at).

    **Returns:** ``(nlp, z0, g0, unpack)``: ``unpack(solution) -> (time, states,
    controls, others)`` at every grid point, ``others`` the other variables by
    Moco's kind: ``{"derivatives": [udot, w], "multipliers": lam, "slacks": gamma or
    mu, "projection_states": x' (N, nq + nu) or None}`` (named by
    ``variable_names``; Bordalba et al.'s slacks, one set per interval, spread over
    the grid as Moco writes them: placed at ``N`` equally spaced times from the
    first to the last and interpolated linearly).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r}: choose one of {SCHEMES}")
    if not isinstance(shooting_steps, int) or isinstance(shooting_steps, bool) or shooting_steps < 1:
        raise ValueError(f"shooting_steps must be a positive integer, got {shooting_steps!r}")
    if dynamics_mode not in DYNAMICS_MODES:
        raise ValueError(f"dynamics_mode {dynamics_mode!r}: choose one of {DYNAMICS_MODES}")
    if kinematic_constraint_method not in KINEMATIC_CONSTRAINT_METHODS:
        raise ValueError(
            f"kinematic_constraint_method {kinematic_constraint_method!r}: choose one of {KINEMATIC_CONSTRAINT_METHODS}"
        )
    for name, value in (
        ("accelerations_weight", accelerations_weight),
        ("auxiliary_derivatives_weight", auxiliary_derivatives_weight),
        ("multipliers_weight", multipliers_weight),
        ("state_projection_weight", state_projection_weight),
    ):
        if value is not None and not float(value) >= 0:
            raise ValueError(f"{name} must be non-negative (or None: not minimized), got {value!r}")
    system = problem.system
    _check_constraints(system)
    tau = jnp.asarray(_mesh(mesh))
    K = tau.shape[0]
    ny, nc = len(problem.state_names), len(problem.control_names)
    hs = scheme == "hermite-simpson"
    shooting = scheme == "multiple-shooting"
    implicit = dynamics_mode == "implicit" and problem.kinematics is None
    n_udot = system.topology.tree.nu if implicit else 0  # accelerations per grid point
    nw = len(implicit_tendons(system)[1])  # implicit tendon derivatives per grid point
    # kinematic constraints: multipliers at every grid point; with the coordinates as
    # states, velocity corrections (free at the midpoints, zero at the mesh points) and
    # the constraints' errors at the mesh points (Moco's Posa et al. 2016 method)
    nl = constraint_equations(system)
    if shooting and (dynamics_mode != "explicit" or problem.kinematics is not None or nw or nl):
        raise ValueError(
            "the 'multiple-shooting' scheme integrates the explicit dynamics of the states alone: it takes "
            f"neither dynamics_mode={dynamics_mode!r} (use 'explicit'), nor prescribed kinematics, nor "
            f"implicit tendon dynamics ({nw} muscles), nor kinematic constraints ({nl} equations); use "
            "'hermite-simpson' for these"
        )
    # Bordalba et al.'s method: projection states and slacks at each interval's end
    bordalba = kinematic_constraint_method == "Bordalba2023" and nl > 0 and problem.kinematics is None
    ng = nl if problem.kinematics is None and not bordalba else 0  # velocity corrections
    if ng and not hs:
        raise ValueError(
            f"the model's kinematic constraints ({nl} equations) are enforced by Posa et al. (2016)'s "
            f"method, which needs the 'hermite-simpson' scheme, not {scheme!r} (as Moco); "
            "kinematic_constraint_method='Bordalba2023' takes either scheme"
        )
    na = n_udot + nw + nl + ng
    P = ny + nc + na  # one grid point's variables
    nq, nu = system.topology.tree.nq, system.topology.tree.nu
    nmb = nq + nu if bordalba else 0  # projection states (coordinates and speeds)
    n_mu = 2 * nl if bordalba else 0  # their slacks
    S = P * (2 if hs else 1)  # where a stage's projection states start
    dtype = jnp.result_type(float)
    integrands = [g for g in problem.goals if g.integrand(problem, 0.0, jnp.zeros(ny), jnp.zeros(nc)) is not None]
    endpoints = [g for g in problem.goals if g.endpoint(problem, 0.0, 1.0) is not None]
    initial_rows = [g for g in problem.goals if hasattr(g, "initial_rows")]
    at_ends = [g for g in problem.goals if hasattr(g, "endpoint_values")]
    ends_constrained = [g for g in at_ends if g.mode == "endpoint_constraint"]
    ends_costs = [g for g in at_ends if g.mode != "endpoint_constraint"]
    npar = len(problem.parameters)
    # the border: [t0, tf, parameters, then, where a goal needs the phase's ends, copies
    # of the first and the last mesh point's states and controls] (a goal on both ends
    # would otherwise couple the first stage with the last: the copies keep the KKT
    # matrix block tridiagonal, with the coupling in its dense border)
    ne = ny + nc if at_ends else 0
    # the data the solution may be differentiated with respect to: the system (every
    # model property), the goals' weights, and the prescribed kinematics
    theta = {"system": system, "weights": jnp.asarray([g.weight for g in problem.goals], dtype)}
    if problem.kinematics is not None:
        theta["kinematics"] = _prescribed(problem, tau, hs)
    index = {id(g): i for i, g in enumerate(problem.goals)}
    dynamics = _point_dynamics(problem, implicit, nl > 0)
    projection_weight = float(state_projection_weight) if bordalba and state_projection_weight is not None else 0.0
    # the penalties on the derivative variables (accelerations, then tendon derivatives)
    penalty = np.concatenate(
        [
            np.full(n_udot, accelerations_weight or 0.0),
            np.full(nw, auxiliary_derivatives_weight or 0.0),
            np.full(nl, multipliers_weight or 0.0),
            np.zeros(ng),
        ]
    )
    penalized = bool(np.any(penalty > 0))
    # residual rows per grid point
    nr = (system.topology.tree.nu if implicit or problem.kinematics is not None else 0) + nw
    # kinematic errors (position, velocity, acceleration) per mesh point
    n_kc = 3 * nl if problem.kinematics is None else 0
    # Bordalba: the rows at a mesh point that the projection states' replace after the
    # first stage (the multibody residual, implicit mode; the acceleration errors)
    n_mb_res = nu if bordalba and implicit else 0
    projected_residuals = np.arange(nr) < n_mb_res
    projected_errors = (np.arange(n_kc) >= 2 * nl) & bordalba
    path_bounds = [c.bounds(problem) for c in problem.path_constraints]

    def model(theta, g):
        """The system, with the problem's parameters set from the border."""
        return problem.with_parameters(theta["system"], g[2 : 2 + npar]) if npar else theta["system"]

    def ends(g):
        e0, ef = g[2 + npar : 2 + npar + ne], g[2 + npar + ne : 2 + npar + 2 * ne]
        return Ends(g[0], e0[:ny], e0[ny:], g[1], ef[:ny], ef[ny:])

    def running(theta, system, t, y, c):
        w = theta["weights"]
        return sum((w[index[id(g)]] * g.integrand(problem, t, y, c, system) for g in integrands), jnp.zeros((), dtype))

    def point(p):
        return p[:ny], p[ny : ny + nc], p[ny + nc : P]

    def split(z):
        """``(y, c, udot, y_mid, c_mid, udot_mid)`` of a stage (``udot`` empty unless
        implicit; the midpoint's ``None`` for trapezoidal)."""
        return point(z[:P]) + (point(z[P:]) if hs else (None, None, None))

    def times(k, g):
        t0, tf = g[0], g[1]
        tk, tn = t0 + tau[k] * (tf - t0), t0 + tau[jnp.minimum(k + 1, K - 1)] * (tf - t0)
        return tk, tn, tn - tk

    def extra(theta, k, where, a):
        """What the dynamics need beside ``(t, y, c)``: the prescribed kinematics, the
        accelerations (implicit) or nothing; then the tendon derivatives, multipliers
        and velocity corrections."""
        kin = theta.get("kinematics")
        if kin is not None:
            first = tuple(x[k] for x in kin[where])
        else:
            first = a[:n_udot] if implicit else None
        w, lam, gamma = a[n_udot : n_udot + nw], a[n_udot + nw : n_udot + nw + nl], a[n_udot + nw + nl :]
        return first, w, lam, gamma

    def cost(k, z, zn, g, theta):
        (y, c, a, ym, cm, am), (yn, cn, an, *_) = split(z), split(zn)
        tk, tn, h = times(k, g)
        total = jnp.zeros((), dtype)
        if projection_weight:  # (Moco's sum over the intervals' ends, not an integral)
            total = jnp.where(k > 0, projection_weight * jnp.sum((z[S : S + nmb] - y[:nmb]) ** 2), 0.0)
        if not integrands and not penalized:
            return total
        system = model(theta, g)
        ts, ys, cs, As = _stacked([(tk, y, c, a), (tn, yn, cn, an)] + ([(0.5 * (tk + tn), ym, cm, am)] if hs else []))
        values = jax.vmap(lambda t, y, c: running(theta, system, t, y, c))(ts, ys, cs)
        if penalized:
            values = values + As * As @ jnp.asarray(penalty, dtype)
        value = h / 6 * (values[0] + values[1] + 4 * values[2]) if hs else h / 2 * (values[0] + values[1])
        return total + jnp.where(k < K - 1, value, 0.0)

    def shoot(system, tk, h, y, c, cn):
        """The state reached from ``y`` at ``tk`` after ``h`` (s): ``shooting_steps``
        classical Runge-Kutta steps, the controls linear from ``c`` to ``cn``."""
        dt = h / shooting_steps
        span = jnp.where(h > 0, h, 1.0)  # (the last stage's empty interval: no 0 / 0)
        none = jnp.zeros(0, dtype)

        def f(t, y):
            return dynamics(system, t, y, c + (t - tk) / span * (cn - c), None, none, none, none)[0]

        # (unrolled: a lax.scan's carry would come out batched under the solver's
        # jacfwd of a gradient, whose values it must leave unbatched)
        for i in range(shooting_steps):
            t = tk + i * dt
            k1 = f(t, y)
            k2 = f(t + dt / 2, y + dt / 2 * k1)
            k3 = f(t + dt / 2, y + dt / 2 * k2)
            k4 = f(t + dt, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return y

    def constraints(k, z, zn, g, theta):
        """The linking rows (defects, interpolated controls), then the stage's own
        (residuals at the mesh point and midpoint, path constraints, the copies of the
        ends, initial conditions)."""
        (y, c, a, ym, cm, am), (yn, cn, an, *_) = split(z), split(zn)
        tk, tn, h = times(k, g)
        system = model(theta, g)
        kn = jnp.minimum(k + 1, K - 1)
        if shooting:
            links, own = [yn - shoot(system, tk, h, y, c, cn)], []
        else:
            # (the points in one vmapped evaluation: one copy of the model in the program,
            # not one a point, and as many fewer for XLA to compile)
            points = [(tk, y, c) + extra(theta, k, "mesh", a), (tn, yn, cn) + extra(theta, kn, "mesh", an)]
            if hs:
                points.append((0.5 * (tk + tn), ym, cm) + extra(theta, k, "mid", am))
            if bordalba:  # (the interval's end at the next stage's projection states)
                xp_n, mu_n = zn[S : S + nmb], zn[S + nmb : S + nmb + n_mu]
                y_projected = jnp.concatenate([xp_n, yn[nmb:]])
                points.append((tn, y_projected, cn) + extra(theta, kn, "mesh", an))
            F, R, E, G = jax.vmap(lambda *point: dynamics(system, *point))(*_stacked(points))
            f, fn, res = F[0], F[1], R[0]
            # (Bordalba: the multibody part of the end point and its derivative projected)
            y_end, f_end = (yn, fn) if not bordalba else (y_projected, fn.at[:nmb].set(F[-1][:nmb]))
            own = [res, E[0]]  # (the kinematic errors at the mesh point only)
            if hs:
                fm, res_m = F[2], R[2]
                links = [ym - 0.5 * (y + y_end) - h / 8 * (f - f_end), y_end - y - h / 6 * (f + 4 * fm + f_end)]
                if interpolate_controls:
                    links.append(cm - 0.5 * (c + cn))
                own.append(jnp.where(k < K - 1, res_m, 0.0))
                if bordalba:  # (the acceleration errors at the midpoint too)
                    own.append(jnp.where(k < K - 1, E[2][2 * nl :], 0.0))
            else:
                links = [y_end - y - h / 2 * (f + f_end)]
            if bordalba:
                # x = x' + [G^T mu_p; G^T mu_v] at the next mesh point, and there the
                # multibody residual (implicit) and the acceleration errors of x'
                Gn = G[1]
                links += [
                    yn[:nmb] - xp_n - jnp.concatenate([Gn.T @ mu_n[:nl], Gn.T @ mu_n[nl:]]),
                    R[-1][:n_mb_res],
                    E[-1][2 * nl :],
                ]
                # (at this mesh point, x's stand for them at the first stage only)
                own[0] = jnp.where((k == 0) | ~projected_residuals, res, 0.0)
                own[1] = jnp.where((k == 0) | ~projected_errors, E[0], 0.0)
        links = jnp.where(k < K - 1, jnp.concatenate(links), 0.0)
        own += [jnp.asarray(pc.values(problem, system, tk, y, c), dtype) for pc in problem.path_constraints]
        if ne:
            e = ends(g)
            own.append(
                jnp.concatenate([y, c])
                - jnp.where(k == 0, jnp.concatenate([e.y0, e.c0]), jnp.concatenate([e.yf, e.cf]))
            )
        own += [jnp.where(k == 0, g_.initial_rows(problem, y, c), 0.0) for g_ in initial_rows]
        return jnp.concatenate([links] + own)

    def border_cost(g, theta):
        w = theta["weights"]
        total = sum((w[index[id(gl)]] * gl.endpoint(problem, g[0], g[1]) for gl in endpoints), jnp.zeros((), dtype))
        if ends_costs:
            system, e = model(theta, g), ends(g)
            total += sum(w[index[id(gl)]] * jnp.sum(gl.endpoint_values(problem, e, system) ** 2) for gl in ends_costs)
        return total

    def border_constraints(g, theta):
        rows = [(g[1] - g[0])[None]]
        if ends_constrained:
            system, e = model(theta, g), ends(g)
            rows += [jnp.asarray(gl.endpoint_values(problem, e, system), dtype) for gl in ends_constrained]
        return jnp.concatenate(rows)

    # -- bounds ---------------------------------------------------------------------------
    ylo, yhi, clo, chi = problem.path_bounds()
    alo = np.concatenate(
        [
            np.full(n_udot, ACCELERATION_BOUNDS[0]),
            np.full(nw, TENDON_DERIVATIVE_BOUNDS[0]),
            np.full(nl, MULTIPLIER_BOUNDS[0]),
        ]
    )
    ahi = np.concatenate(
        [
            np.full(n_udot, ACCELERATION_BOUNDS[1]),
            np.full(nw, TENDON_DERIVATIVE_BOUNDS[1]),
            np.full(nl, MULTIPLIER_BOUNDS[1]),
        ]
    )
    # (the velocity corrections: zero at the mesh points, bounded at the midpoints)
    mesh_lo, mesh_hi = [ylo, clo, alo, np.zeros(ng)], [yhi, chi, ahi, np.zeros(ng)]
    mid_lo = [ylo, clo, alo, np.full(ng, VELOCITY_CORRECTION_BOUNDS[0])]
    mid_hi = [yhi, chi, ahi, np.full(ng, VELOCITY_CORRECTION_BOUNDS[1])]
    # (Bordalba: the projection states within the states' bounds, the slacks within theirs)
    proj_lo = [ylo[:nmb], np.full(n_mu, PROJECTION_SLACK_BOUNDS[0])]
    proj_hi = [yhi[:nmb], np.full(n_mu, PROJECTION_SLACK_BOUNDS[1])]
    lo = np.tile(np.concatenate(mesh_lo + (mid_lo if hs else []) + proj_lo), (K, 1))
    hi = np.tile(np.concatenate(mesh_hi + (mid_hi if hs else []) + proj_hi), (K, 1))
    (lo[0, :ny], hi[0, :ny]), (lo[-1, :ny], hi[-1, :ny]) = problem.end_bounds("initial"), problem.end_bounds("final")
    lo[-1, S : S + nmb], hi[-1, S : S + nmb] = lo[-1, :nmb], hi[-1, :nmb]  # (the final bounds)
    with np.errstate(invalid="ignore"):
        if hs:  # the last stage has no interval: its midpoint variables are fixed (inside their bounds)
            lo[-1, P:S] = hi[-1, P:S] = _middle(lo[-1, P:S], hi[-1, P:S])
        # (no interval ends at the first stage: its projection variables are fixed)
        lo[0, S:] = hi[0, S:] = _middle(lo[0, S:], hi[0, S:])
    n_links = (2 * ny + (nc if interpolate_controls else 0)) if hs else ny
    n_links += nmb + n_mb_res + (nl if bordalba else 0)  # (Bordalba's rows at the next mesh point)
    n_init = sum(len(g_.initial_rows(problem, jnp.zeros(ny), jnp.zeros(nc))) for g_ in initial_rows)
    # each row block's bounds per stage, (K, rows) each: links, residuals, path
    # constraints, the ends' copies (first and last stage), initial conditions (first)
    inactive = np.full(K, -np.inf)[:, None]
    mesh_only = np.where(np.arange(K) < K - 1, 0.0, -np.inf)[:, None]  # (rows of an interval)
    first = np.arange(K) == 0
    # (Bordalba: the mesh point's residual and acceleration errors kept at the first stage)
    replaced = ~first[:, None] & np.concatenate([projected_residuals, projected_errors])[None]
    blocks_lo = [np.tile(mesh_only, n_links), np.where(replaced, -np.inf, 0.0)]
    blocks_lo += [np.tile(mesh_only, nr)] if hs else []
    blocks_lo += [np.tile(mesh_only, nl)] if hs and bordalba else []  # (the midpoints' acceleration errors)
    blocks_hi = [-b for b in blocks_lo]
    for lo_, hi_ in path_bounds:
        blocks_lo.append(np.tile(lo_, (K, 1)))
        blocks_hi.append(np.tile(hi_, (K, 1)))
    # the ends' copies: a row at the first and the last stage for each variable free
    # there; a variable fixed at an end fixes its copy instead (a row without a free
    # variable of its stage would leave the stage's pivot block singular)
    fixed_first, fixed_last = lo[0, :ne] == hi[0, :ne], lo[-1, :ne] == hi[-1, :ne]
    copies = np.zeros((K, ne), bool)
    copies[0], copies[-1] = ~fixed_first, ~fixed_last
    blocks_lo.append(np.where(copies, 0.0, -np.inf))
    blocks_hi.append(-blocks_lo[-1])
    blocks_lo.append(np.where(first[:, None], 0.0, np.tile(inactive, n_init)))
    blocks_hi.append(-blocks_lo[-1])
    clo_rows, chi_rows = np.concatenate(blocks_lo, axis=1), np.concatenate(blocks_hi, axis=1)
    n_own = clo_rows.shape[1] - n_links
    (t0lo, t0hi), (tflo, tfhi) = problem.time_bounds()
    plo = np.asarray([p.bounds[0] for p in problem.parameters], float)
    phi = np.asarray([p.bounds[1] for p in problem.parameters], float)

    def n_values(goal):
        e = Ends(jnp.zeros(()), jnp.zeros(ny), jnp.zeros(nc), jnp.ones(()), jnp.zeros(ny), jnp.zeros(nc))
        return int(np.prod(jax.eval_shape(lambda: goal.endpoint_values(problem, e, system)).shape))

    n_end_rows = sum(n_values(gl) for gl in ends_constrained)
    fixed_ends = np.concatenate([fixed_first, fixed_last])
    copies_lo = np.where(fixed_ends, np.concatenate([lo[0, :ne], lo[-1, :ne]]), -np.inf)
    copies_hi = np.where(fixed_ends, copies_lo, np.inf)
    with np.errstate(invalid="ignore"):
        z0 = _middle(lo, hi)
        g0 = np.concatenate(
            [_middle(np.asarray([t0lo, tflo]), np.asarray([t0hi, tfhi])), _middle(plo, phi), z0[0, :ne], z0[-1, :ne]]
        )
    nlp = StagedNLP(
        cost=cost,
        constraints=constraints,
        border_cost=border_cost,
        border_constraints=border_constraints,
        z_lower=jnp.asarray(lo, dtype),
        z_upper=jnp.asarray(hi, dtype),
        c_lower=jnp.asarray(clo_rows, dtype),
        c_upper=jnp.asarray(chi_rows, dtype),
        border_lower=jnp.asarray(np.concatenate([[t0lo, tflo], plo, copies_lo]), dtype),
        border_upper=jnp.asarray(np.concatenate([[t0hi, tfhi], phi, copies_hi]), dtype),
        g_lower=jnp.zeros(1 + n_end_rows, dtype),
        g_upper=jnp.asarray(np.concatenate([[np.inf], np.zeros(n_end_rows)]), dtype),
        theta=theta,
        local_rows=n_own,
    )

    def unpack(sol):
        t0, tf = sol.g[..., 0:1], sol.g[..., 1:2]
        Z = sol.z

        def grid(lo, hi):
            """Columns ``lo:hi`` of every grid point's variables, in time order."""
            if not hs:
                return Z[..., lo:hi]
            pairs = jnp.stack([Z[..., :-1, lo:hi], Z[..., :-1, P + lo : P + hi]], -2)
            return jnp.concatenate([pairs.reshape(Z.shape[:-2] + (2 * (K - 1), hi - lo)), Z[..., -1:, lo:hi]], -2)

        if hs:
            tmid = 0.5 * (tau[:-1] + tau[1:])
            frac = jnp.concatenate([jnp.stack([tau[:-1], tmid], 1).reshape(-1), tau[-1:]])
        else:
            frac = tau
        a = grid(ny + nc, P)
        others = {
            "derivatives": a[..., : n_udot + nw],
            "multipliers": a[..., n_udot + nw : n_udot + nw + nl],
            "slacks": a[..., n_udot + nw + nl :],
            "projection_states": Z[..., 1:, S : S + nmb] if bordalba else None,
        }
        if bordalba:  # (one set per interval, spread over the grid as Moco writes them)
            where = jnp.linspace(0.0, 1.0, K - 1)
            spread = jnp.vectorize(lambda v: jnp.interp(frac, where, v), signature="(n)->(m)")
            others["slacks"] = jnp.swapaxes(spread(jnp.swapaxes(Z[..., 1:, S + nmb :], -1, -2)), -1, -2)
        return t0 + frac * (tf - t0), grid(0, ny), grid(ny, ny + nc), others

    z0, g0 = jnp.asarray(z0, dtype), jnp.asarray(g0, dtype)
    traced = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(theta))
    if sparse_derivatives and not traced:
        nlp = dataclasses.replace(nlp, sparsity=detect_sparsity(nlp, z0, g0))
    return nlp, z0, g0, unpack


def solve(
    problem: Problem,
    mesh=50,
    scheme: str = "hermite-simpson",
    options: ipm.Options | None = None,
    guess: OptimalTrajectory | None = None,
    interpolate_controls: bool = True,
    dynamics_mode: str = "explicit",
    accelerations_weight: float | None = None,
    auxiliary_derivatives_weight: float | None = None,
    multipliers_weight: float | None = None,
    shooting_steps: int = 4,
    sparse_derivatives: bool = False,
    kinematic_constraint_method: str = "Posa2016",
    state_projection_weight: float | None = STATE_PROJECTION_WEIGHT,
) -> OptimalTrajectory:
    """Solve a problem by direct collocation.

    **Arguments:** ``problem``; ``mesh``, ``scheme``, ``interpolate_controls``,
    ``dynamics_mode``, ``accelerations_weight``, ``auxiliary_derivatives_weight``,
    ``multipliers_weight``, ``shooting_steps``, ``sparse_derivatives``,
    ``kinematic_constraint_method``, ``state_projection_weight``: as
    ``transcribe``; ``options``: the solver's (``ipm.Options``; default tolerances
    1e-8); ``guess``: a solution of the same problem and mesh to start from (a warm
    start).

    Inside ``jax.grad`` or another transformation the solution carries the
    derivatives of the optimum with respect to the system's properties and the goals'
    weights (the implicit function theorem on the KKT conditions).

    The same problem (the same object) solved again, with other options or a guess,
    reuses the transcription and its compiled solver.

    **Returns:** an ``OptimalTrajectory``.
    """
    from ..compiling import _at_top_level

    nlp, z0, g0, unpack = _transcribed(
        problem,
        mesh,
        scheme,
        interpolate_controls,
        dynamics_mode,
        accelerations_weight,
        auxiliary_derivatives_weight,
        multipliers_weight,
        shooting_steps,
        sparse_derivatives,
        kinematic_constraint_method,
        state_projection_weight,
    )
    options = _as_arrays(options)
    multipliers = None
    if guess is not None:
        if np.shape(guess.nlp.z) != np.shape(z0):
            raise ValueError(
                f"guess: its variables have shape {np.shape(guess.nlp.z)}, this problem's on this mesh "
                f"and dynamics_mode={dynamics_mode!r} {np.shape(z0)}: a guess must come from the same "
                "transcription"
            )
        z0, g0 = guess.nlp.z, guess.nlp.g
        if guess.nlp.multipliers is not None:
            multipliers = (guess.nlp.multipliers, guess.nlp.border_multipliers)
    # (at top level nothing can ask for derivatives)
    sol = _solve(nlp, z0, g0, options, multipliers, not _at_top_level())
    weights = (accelerations_weight, auxiliary_derivatives_weight, multipliers_weight, state_projection_weight)
    return _trajectory(problem, unpack, sol, dynamics_mode, weights, kinematic_constraint_method)


def solve_batch(
    problem: Problem,
    values,
    edit=None,
    weights=None,
    mesh=50,
    scheme: str = "hermite-simpson",
    options: ipm.Options | None = None,
    interpolate_controls: bool = True,
    dynamics_mode: str = "explicit",
    accelerations_weight: float | None = None,
    auxiliary_derivatives_weight: float | None = None,
    multipliers_weight: float | None = None,
    shooting_steps: int = 4,
    sparse_derivatives: bool = False,
    devices=None,
    kinematic_constraint_method: str = "Posa2016",
    state_projection_weight: float | None = STATE_PROJECTION_WEIGHT,
) -> OptimalTrajectory:
    """Solve a batch of variants of one problem at once: one compiled solver,
    ``vmap``-ed over the variants (on a GPU, side by side). Each variant ends with its
    own status; one that fails leaves the others' solutions intact.

    **Arguments:** ``problem``; ``values``: a pytree whose leaves have a leading batch
    axis ``B``; ``edit(system, value) -> system``: the system of one variant, from
    ``problem.system`` and that variant's slice of ``values`` (e.g. ``eqx.tree_at`` of a
    property); ``None``: the system is not varied; ``weights (B, n_goals)``: the goals'
    weights per variant, in ``problem.goals`` order (default: the problem's);
    ``mesh``, ``scheme``, ``interpolate_controls``, ``dynamics_mode``,
    ``accelerations_weight``, ``auxiliary_derivatives_weight``, ``multipliers_weight``,
    ``shooting_steps``, ``sparse_derivatives``, ``kinematic_constraint_method``,
    ``state_projection_weight``: as ``transcribe``; ``options``: as ``solve``;
    ``devices``: a list of devices or a ``jax.sharding.Mesh`` to shard the variants
    over (as ``simjax.map_batch``'s; default: all local devices when there are
    several, else one; not inside ``jit``, ``vmap`` or ``grad``). Sharded, each device solves its variants with the same
    compiled solver (a batch that does not divide evenly padded with copies of the last
    variant, dropped after); solutions and statuses equal the unsharded batch's.

    **Returns:** an ``OptimalTrajectory`` whose arrays have a leading axis ``B`` (sharded
    over the devices when sharded).
    """
    from ..batching import gather, map_chunks, mesh_for

    nlp, z0, g0, unpack = _transcribed(
        problem,
        mesh,
        scheme,
        interpolate_controls,
        dynamics_mode,
        accelerations_weight,
        auxiliary_derivatives_weight,
        multipliers_weight,
        shooting_steps,
        sparse_derivatives,
        kinematic_constraint_method,
        state_projection_weight,
    )
    options = _as_arrays(options)
    sizes = {np.shape(leaf)[0] for leaf in jax.tree_util.tree_leaves(values)}
    if weights is not None:
        weights = jnp.asarray(weights, nlp.theta["weights"].dtype)
        if weights.ndim != 2 or weights.shape[1] != len(problem.goals):
            raise ValueError(
                f"solve_batch: weights must be (batch, {len(problem.goals)}) for the problem's goals, "
                f"got shape {weights.shape}"
            )
        sizes.add(weights.shape[0])
    if len(sizes) != 1:
        raise ValueError(f"solve_batch: the batch axes of values and weights differ or are missing: {sorted(sizes)}")
    shown = bool(options.progress)
    if shown:
        options = dataclasses.replace(options, progress="batch")
    mesh = mesh_for(devices, values, weights)
    if mesh is None:
        sol = _solve_batch(nlp, z0, g0, options, values, weights, edit)
    else:
        # (a Partial of a module-level function: the compiled program cached per problem)
        call = jax.tree_util.Partial(_solve_variants, nlp, z0, g0, options, edit)
        batch = (values,) if weights is None else (values, weights)
        sol = map_chunks(call, *batch, chunk_size=None, workers=None, cpu_chunk=1, devices=mesh)
    if shown:
        progress.finish_batch(gather(sol.status), ipm.STATUS)
    weights = (accelerations_weight, auxiliary_derivatives_weight, multipliers_weight, state_projection_weight)
    return _trajectory(problem, unpack, sol, dynamics_mode, weights, kinematic_constraint_method)


def _as_arrays(options):
    """The solver's options (default ``ipm.Options()``) with the tolerances as arrays:
    other values, the same compiled solver."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.result_type(float)), options or ipm.Options())


def _trajectory(
    problem,
    unpack,
    sol,
    dynamics_mode="explicit",
    penalty_weights=(None, None, None, None),
    kinematic_constraint_method="Posa2016",
) -> OptimalTrajectory:
    """The ``OptimalTrajectory`` of a solver's ``Solution`` (one, or a batch)."""
    t, y, c, others = unpack(sol)
    bordalba = others["projection_states"] is not None
    # (once per problem, as its transcription: the names need a trace of the constraints)
    names = _recent(
        _NAMES,
        (problem,),
        (dynamics_mode, kinematic_constraint_method),
        lambda: variable_names(problem, dynamics_mode, kinematic_constraint_method),
    )
    npar = len(problem.parameters)
    return OptimalTrajectory(
        time=t,
        states=y,
        controls=c,
        parameters=sol.g[..., 2 : 2 + npar],
        objective=sol.objective,
        status=sol.status,
        iterations=sol.iterations,
        nlp=sol,
        state_names=problem.state_names,
        control_names=problem.control_names,
        parameter_names=problem.parameter_names,
        derivatives=others["derivatives"],
        multipliers=others["multipliers"],
        slacks=others["slacks"],
        derivative_names=names["derivatives"],
        multiplier_names=names["multipliers"],
        slack_names=names["slacks"],
        projection_states=others["projection_states"],
        penalty_weights=tuple(
            None if w is None or (i == 3 and not bordalba) else float(w) for i, w in enumerate(penalty_weights)
        ),
    )


@jit
def _solve_batch(nlp, z0, g0, options, values, weights, edit):
    def one(value, w):
        theta = dict(nlp.theta)
        if edit is not None:
            theta["system"] = edit(theta["system"], value)
        if w is not None:
            theta["weights"] = w
        return ipm.solve(eqx.tree_at(lambda n: n.theta, nlp, theta), z0, g0, options)

    return jax.vmap(one)(values, weights)


def _solve_variants(nlp, z0, g0, options, edit, values, weights=None):
    """``_solve_batch`` of one device's variants (``solve_batch`` sharded)."""
    return _solve_batch(nlp, z0, g0, options, values, weights, edit)


def _recent(cache: list, objects: tuple, key, build, size: int = 4):
    """``build()``, or the value ``cache`` holds for the same ``objects`` (compared by
    identity) and ``key`` (by equality): a value built again from the same inputs is a
    new object, and a new object means a new compilation. ``cache`` is a list, the
    latest first, kept to ``size`` entries."""
    for i, (objs, k, value) in enumerate(cache):
        if len(objs) == len(objects) and all(a is b for a, b in zip(objs, objects)) and k == key:
            cache.insert(0, cache.pop(i))
            return value
    value = build()
    cache.insert(0, (objects, key, value))
    del cache[size:]
    return value


_TRANSCRIBED: list = []
_NAMES: list = []


def _transcribed(
    problem,
    mesh,
    scheme,
    interpolate_controls,
    dynamics_mode,
    accelerations_weight=None,
    auxiliary_derivatives_weight=None,
    multipliers_weight=None,
    shooting_steps=4,
    sparse_derivatives=False,
    kinematic_constraint_method="Posa2016",
    state_projection_weight=STATE_PROJECTION_WEIGHT,
):
    """``transcribe``'s result, the same objects for the same problem (the same object)
    and settings: solving it again (other tolerances, a warm start) reuses the compiled
    solver."""
    key = (
        tuple(np.ravel(np.asarray(mesh, float))),
        scheme,
        bool(interpolate_controls),
        dynamics_mode,
        accelerations_weight,
        auxiliary_derivatives_weight,
        multipliers_weight,
        shooting_steps,
        bool(sparse_derivatives),
        kinematic_constraint_method,
        state_projection_weight,
    )
    return _recent(
        _TRANSCRIBED,
        (problem,),
        key,
        lambda: transcribe(
            problem,
            mesh,
            scheme,
            interpolate_controls,
            dynamics_mode,
            accelerations_weight,
            auxiliary_derivatives_weight,
            multipliers_weight,
            shooting_steps,
            sparse_derivatives,
            kinematic_constraint_method,
            state_projection_weight,
        ),
    )


# (XLA's older CPU emitters, as simjax's other entry points: the solver is hundreds of
# small fusions, and compiles in about half the time)
@jit
def _solve(nlp, z0, g0, options, multipliers, derivatives):
    return ipm.solve(nlp, z0, g0, options, multipliers, derivatives)
