"""OpenSim's StaticOptimization analysis: actuator controls that reproduce a motion's
accelerations at least cost, frame by frame, all frames solved together.

At each frame OpenSim's ``StaticOptimizationTarget`` minimizes
``sum_i |x_i| ** activation_exponent`` over the controls ``x`` of every actuator
(a muscle's activation, another actuator's control), within their
``min_control``/``max_control``, subject to the model's accelerations equal to the
target accelerations. Each actuator's force is overridden by ``x_i * F_i``:

- a muscle with ``use_muscle_physiology``: ``F_i`` is the muscle's
  ``calcInextensibleTendonActiveFiberForce(s, 1)``, from the path's length and
  lengthening speed at the frame, each class its own (``_STRENGTHS``):

  - Millard2012EquilibriumMuscle: ``max_isometric_force * fal * fv * cos(phi)`` at
    the fiber length and velocity of a rigid tendon, ``phi`` -- as OpenSim 4.6
    computes it -- the pennation angle at the *normalized* fiber length;
  - DeGrooteFregly2016Muscle: its rigid-tendon active fiber force,
    ``max_isometric_force * fal * fv`` (not along the tendon);
  - Thelen2003Muscle: ``max_isometric_force * fal * fv * cos(phi)`` at a rigid
    tendon, ``fv`` Thelen's force-velocity relation inverted (``calcfvInv``);
  - Schutte1993Muscle_Deprecated: the tendon force at full activation with the
    elastic tendon in isometric equilibrium (``computeIsometricForce``, OpenSim's
    iteration to 0.01 N), times the deprecated base's force-velocity factor
    ``1.8 - 1.8 / (1 + exp((0.04 - v) / 0.18))`` at
    ``v = -cos(pennation_angle_at_optimal) * lengthening speed / (vmax * optimal_fiber_length)``;
  - RigidTendonMuscle: OpenSim's base ``Muscle`` method,
    ``max_isometric_force * fal * fv * cos(phi)`` of the muscle's own (rigid-tendon)
    length and velocity info.

  None reads the muscle's state: OpenSim's working state holds, at each frame, the
  ``default_fiber_length`` and the previous frame's activations
  (``initStateWithoutRecreatingSystem``, the first frame's ``equilibrateMuscles``
  undone), and these methods use neither. A muscle of any other class is an
  error. Without ``use_muscle_physiology``, ``max_isometric_force``. The muscle's
  passive force is not applied (the override replaces the whole force).
- any other actuator: its ``optimal_force``.

The constraint is linear in ``x``; with the mass matrix invertible, matching the
accelerations is matching the generalized forces: ``A x = tau`` where ``tau`` is the
inverse dynamics of the target accelerations with every other force applied
(gravity, external loads, the model's non-actuator forces) and column ``i`` of ``A``
the generalized force of actuator ``i`` per unit control (``moment arms * F_i`` for a
muscle). The targets, as OpenSim: the speeds of the AnalyzeTool's states storage
fitted again with quintic ``GCVSpline``s and differentiated.

The batch of problems (one per frame) is solved by one ``vmap``-ed Newton method on
the problem's dual (``_dual_newton``: the cost is separable, so the controls are an
explicit function of the multipliers of ``A x = b``), a fixed number of steps in a
``lax.scan``: one compiled program for all frames. Wherever its controls meet the
constraints they are the optimum, to machine precision (tighter than OpenSim's IPOPT
at its ``optimizer_convergence_criterion``, so the two agree to about that
criterion); where they do not, the violation is reported.

``solve_static_optimization(A, b, lower, upper, exponent)`` is that solver on arrays,
a pure JAX function: ``vmap``-able over trials, and differentiable with respect to
``A``, ``b`` and the bounds by the implicit function theorem on the optimum's KKT
conditions (``simjax.tools.gradients``), not through the iterations.
``static_optimization_problem(system, states, udot)`` makes those arrays, a pure
function of the ``System`` (its muscle-free and rigid-tendon variants built once, then
given the system's own, possibly traced, leaves): with the solver, the path along
which the optimum's derivatives with respect to the model's properties (a muscle's
``max_isometric_force`` or ``optimal_fiber_length``, a body's mass, ...) flow;
``static_optimization`` uses it too.
"""

from __future__ import annotations

from collections import OrderedDict

import jax
import jax.numpy as jnp
import numpy as np

from ..api import inverse_dynamics as _rnea
from ..analysis.moment_arms import moment_arms, path_rows
from ..compiling import jit
from ..component import Component, ModelError
from ..forces.external import ExternalForce
from ..forward import Context
from ..io.tables import TimeSeriesTable
from ..muscles import curves
from ..muscles.degroote import DeGrooteFregly2016Muscle
from ..muscles.millard import Millard2012EquilibriumMuscle
from ..muscles.muscle import FixedWidthPennation, Muscle
from ..muscles.path import path_geometry, path_lengths, path_speeds
from ..muscles.rigid_tendon import RigidTendonMuscle
from ..muscles.schutte import Schutte1993Muscle_Deprecated
from ..muscles.thelen import Thelen2003Muscle
from . import motion
from ._roots import implicit_root
from ._analyses import AnalysisJob, Frames, _text, analysis_frames
from .setup import SetupError

__all__ = ["static_optimization", "static_optimization_problem", "solve_static_optimization"]


# -- the batched solver -----------------------------------------------------------------------


def _dual_controls(g, lb, ub, p):
    """The controls that minimize ``|x| ** p - g x`` (``_dual_newton``), without and with
    their bounds: ``(sign(g) (|g| / p) ** (1 / (p - 1)), that clipped to [lb, ub])``."""
    unbounded = jnp.sign(g) * (jnp.abs(g) / p) ** (1.0 / (p - 1.0))
    return unbounded, jnp.clip(unbounded, lb, ub)


def _ascent_length(A, b, lb, ub, p, g, dg, dy):
    """The length ``t > 0`` along ``dy`` where the dual's slope ``dy . (b - A x(y + t
    dy))`` (``_dual_newton``; ``g = A^T y``, ``dg = A^T dy``) falls to 0, by linear
    interpolation between the lengths where a control meets a bound (exact for exponent
    2, where the slope is linear between them); the last of them doubled where it
    still rises there."""

    # a control meets its bound where g reaches the bound's own g, p sign(x) |x|^(p-1)
    # (infinite for an infinite bound, which no control meets)
    def g_at(v):
        return p * jnp.sign(v) * jnp.abs(v) ** (p - 1.0)

    safe = jnp.where(dg == 0.0, 1.0, dg)
    meets = jnp.concatenate([(g_at(lb) - g) / safe, (g_at(ub) - g) / safe])
    meets = jnp.where((meets > 0.0) & jnp.isfinite(meets) & (jnp.concatenate([dg, dg]) != 0.0), meets, jnp.inf)
    far = 2.0 * jnp.max(jnp.where(jnp.isfinite(meets), meets, 0.0), initial=0.0) + 2.0
    ts = jnp.sort(jnp.concatenate([jnp.zeros(1, g.dtype), jnp.ones(1, g.dtype), meets, far[None]]))
    ts = jnp.where(jnp.isfinite(ts), ts, far)
    _, x = _dual_controls(g[None, :] + ts[:, None] * dg[None, :], lb, ub, p)
    slope = (b[None, :] - x @ A.T) @ dy
    k = jnp.argmax(slope <= 0.0)  # (the first length where psi stops rising; 0 if none)
    t0, t1 = ts[jnp.maximum(k - 1, 0)], ts[k]
    s0, s1 = slope[jnp.maximum(k - 1, 0)], slope[k]
    inside = t0 + s0 * (t1 - t0) / jnp.where(s0 - s1 > 0.0, s0 - s1, 1.0)
    return jnp.where(jnp.any(slope <= 0.0), jnp.where(k > 0, inside, t1), ts[-1])


def _dual_newton(A, b, lb, ub, p, iterations):
    """``min sum |x| ** p`` s.t. ``A x = b``, ``lb <= x <= ub`` (infinite bounds
    allowed), by Newton's method on the dual, at most ``iterations`` steps.

    The cost is separable: given the multipliers ``y`` of ``A x = b``, each control
    minimizes ``|x| ** p - g x`` (``g = A^T y``) within its bounds, at
    ``x(y) = clip(sign(g) (|g| / p) ** (1 / (p - 1)), lb, ub)``. The dual function
    ``psi(y) = sum(|x| ** p - g x) + b . y`` is concave with gradient ``b - A x(y)``;
    each step is Newton's (Hessian ``-A diag(dx/dg) A^T``, regularized), as long as
    ``psi`` rises along it (``_ascent_length``: exact for exponent 2, where ``psi`` is
    piecewise quadratic), else the longest of the halved lengths that raises ``psi``
    enough (Armijo). Where
    ``A x(y) = b``, ``x(y)`` is the optimum: a residual left is a violation to report,
    never a suboptimal answer, and a frame stops once ``A x(y) = b`` to 1e-12 of ``1 +
    max |b|``. On random problems of 6 equations in 20 bounded controls, exponent 2
    converges in 5 steps, 3 in 10; a CMC window of the walking example in which many
    muscles' bounds change along the way in 20 (about 250 with halving alone).

    **Returns:** ``(x, y, zl, zu)``: the solution, the multipliers of ``A x = b`` and of
    the lower and upper bounds."""
    dtype = A.dtype
    eye = jnp.eye(A.shape[0], dtype=dtype)

    def primal(y):
        g = A.T @ y
        return g, *_dual_controls(g, lb, ub, p)

    def psi(y):
        g, _, x = primal(y)
        return jnp.sum(jnp.abs(x) ** p - g * x) + b @ y

    n_lengths = 40
    lengths = 0.5 ** jnp.arange(n_lengths, dtype=dtype)
    # the Hessian with every control free at a magnitude of 1 sets the regularization's
    # scale and the first multipliers (exact for exponent 2 and no bound active)
    H1 = (A @ A.T) / (p * (p - 1.0))
    floor = 1e-10 * jnp.max(jnp.diag(H1), initial=0.0) + jnp.finfo(dtype).tiny

    # A x(y) = b makes x(y) the optimum: a frame stops there, to round-off
    tol = 1e-12 * (1.0 + jnp.max(jnp.abs(b), initial=0.0))

    def unsolved(carry):
        i, y = carry
        _, _, x = primal(y)
        return (i < iterations) & (jnp.max(jnp.abs(b - A @ x), initial=0.0) > tol)

    def step(carry):
        i, y = carry
        g, unbounded, x = primal(y)
        r = b - A @ x
        free = (unbounded >= lb) & (unbounded <= ub)
        curvature = p * (p - 1.0) * jnp.maximum(jnp.abs(x), 1e-10) ** (p - 2.0)
        H = (A * jnp.where(free, 1.0 / curvature, 0.0)) @ A.T
        dy = jnp.linalg.solve(H + jnp.maximum(1e-13 * jnp.max(jnp.diag(H), initial=0.0), floor) * eye, r)
        f0 = psi(y)
        slope = r @ dy

        def rises(t):  # (a rise within round-off of psi counts: near the optimum psi is flat)
            return psi(y + t * dy) >= f0 + 1e-4 * t * slope - 1e-14 * (jnp.abs(f0) + 1.0)

        # the step's length: where psi stops rising along dy, found among the lengths at
        # which a control meets a bound (psi' is monotone, and linear between them for
        # exponent 2); else, where that point does not rise enough (exponents other than
        # 2), the longest of the halved lengths that does (none of them: no step)
        t = _ascent_length(A, b, lb, ub, p, g, A.T @ dy, dy)
        exact = (t > 0.0) & rises(t)
        k = jax.lax.while_loop(
            lambda k: (k < n_lengths) & ~rises(lengths[jnp.minimum(k, n_lengths - 1)]),
            lambda k: k + 1,
            jnp.where(exact, n_lengths, 0),
        )
        halved = jnp.where(k < n_lengths, lengths[jnp.minimum(k, n_lengths - 1)], 0.0)
        new = y + jnp.where(exact, t, halved) * dy
        return i + 1, jnp.where(jnp.all(jnp.isfinite(new)), new, y)

    _, y = jax.lax.while_loop(unsolved, step, (0, jnp.linalg.solve(H1 + floor * eye, b)))
    g, _, x = primal(y)
    slope = p * jnp.sign(x) * jnp.abs(x) ** (p - 1.0)
    zl = jnp.where(jnp.isfinite(lb) & (x <= lb), jnp.maximum(slope - g, 0.0), 0.0)
    zu = jnp.where(jnp.isfinite(ub) & (x >= ub), jnp.maximum(g - slope, 0.0), 0.0)
    return x, y, zl, zu


def _with_derivatives(A, b, lb, ub, p, x, y, zl, zu):
    """``x`` (the solution, multipliers ``y``, ``zl``, ``zu``) with the
    derivatives of the optimum with respect to ``A``, ``b`` and the bounds: the
    implicit function theorem on the KKT conditions with the active bounds held,
    ``g(x) - A^T y = 0`` over the free controls, ``x = bound`` over the active ones,
    ``A x = b``. A bound is active where its multiplier exceeds its slack."""
    k = x.shape[0]
    hl, hu = jnp.isfinite(lb), jnp.isfinite(ub)
    lbf, ubf = jnp.where(hl, lb, 0.0), jnp.where(hu, ub, 0.0)
    at_lo = hl & (zl > x - lbf)
    at_hi = hu & (zu > ubf - x) & ~at_lo

    def kkt(v):
        xx, yy = v[:k], v[k:]
        # the cost's gradient p x |x|^(p-2), written so that its derivative at x = 0 is
        # finite (2 for p = 2)
        g = p * xx * jnp.maximum(jnp.abs(xx), 1e-12) ** (p - 2.0)
        stationary = jnp.where(at_lo, xx - lbf, jnp.where(at_hi, xx - ubf, g - A.T @ yy))
        return jnp.concatenate([stationary, A @ xx - b])

    return implicit_root(kkt, jnp.concatenate([x, y]))[:k]


def solve_static_optimization(A, b, lower, upper, exponent=2.0, iterations: int | None = None, devices=None):
    """Static optimization's problem at a batch of frames: ``min sum |x| ** exponent``
    subject to ``A x = b`` and ``lower <= x <= upper``.

    **Arguments:** ``A (n, m, k)``: generalized force per unit control of each actuator
    (N m or N); ``b (n, m)``: the generalized forces to supply; ``lower``, ``upper``
    ``(k,)``: bounds (``±inf`` allowed); ``exponent``: ``>= 2``; ``iterations``:
    the most Newton steps (default: 40 for the exponent 2, 200 for others; a frame
    stops when ``A x = b`` to round-off); ``devices``: a list
    of devices or a ``jax.sharding.Mesh`` to shard the frames over (as
    ``map_batch``'s; default: all local devices when there are several, else one; not
    inside ``jit``, ``vmap`` or ``grad``). Sharded, each device solves its frames (an
    uneven batch padded with copies of the last frame, dropped after): the same
    result.

    **Returns:** ``(x (n, k), violation (n,))``: the controls and ``max |A x - b|``.

    A pure JAX function: ``jit``- and ``vmap``-able (e.g. over trials of equal length),
    and differentiable with respect to ``A``, ``b`` and the bounds (so the model
    properties that make them) by the implicit function theorem on the optimum's KKT
    conditions, the bounds active at the solution held (one linear solve per frame; the
    iterations are not differentiated). ``A`` must have full row rank over the
    controls not at a bound.
    """
    from ..batching import map_chunks, mesh_for
    from ..compiling import _at_top_level

    if iterations is None:
        iterations = _default_iterations(exponent)
    mesh = mesh_for(devices, A, b, lower, upper)
    if mesh is not None:  # (at top level: no derivatives)
        call = jax.tree_util.Partial(
            _solve_frames, jnp.asarray(lower), jnp.asarray(upper), float(exponent), int(iterations)
        )
        return map_chunks(
            call, jnp.asarray(A), jnp.asarray(b), chunk_size=None, workers=None, cpu_chunk=1, devices=mesh
        )
    # (at top level nothing can ask for derivatives)
    return _solve(
        jnp.asarray(A),
        jnp.asarray(b),
        jnp.asarray(lower),
        jnp.asarray(upper),
        float(exponent),
        int(iterations),
        not _at_top_level(),
    )


def _default_iterations(exponent: float) -> int:
    # the exponent 2 needs about 20 steps, 3 about 150 (the cost's curvature varies)
    return 40 if float(exponent) == 2.0 else 200


@jit
def _solve(A, b, lower, upper, exponent, iterations, derivatives):
    def one(A, b):
        x, y, zl, zu = _dual_newton(*jax.lax.stop_gradient((A, b, lower, upper)), exponent, iterations)
        if derivatives:
            x = _with_derivatives(A, b, lower, upper, exponent, x, y, zl, zu)
        return x, jnp.max(jnp.abs(A @ x - b))

    return jax.vmap(one)(A, b)


def _solve_frames(lower, upper, exponent, iterations, A, b):
    """``_solve`` of one device's frames (``solve_static_optimization`` sharded)."""
    return _solve(A, b, lower, upper, exponent, iterations, False)


# -- the problem ------------------------------------------------------------------------------


def _muscle_off_system(system):
    """The system without its muscles (removed where nothing references them, else
    not applied): the same coordinates, the other actuators in the same order."""
    from .dynamics import exclude_forces

    return exclude_forces(system.model, ["Muscles"])[0].build()


def _rigid_system(system):
    """The system with its Millard and DeGroote muscles' tendons rigid (the other
    classes compute their rigid-tendon strengths from the path themselves)."""
    model = system.model
    paths = [p for p in model.paths(Muscle) if isinstance(model.find(p), _RIGID_COPY)]
    for p in paths:
        model = model.set(p, ignore_tendon_compliance=True)
    return model.build() if paths else system


def _leaf_names(tree) -> list:
    """A name for each leaf of ``tree``: its key path, with a component in a tuple named
    by its name rather than its position (removing a component renumbers the others)."""
    names = []
    for keys, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        node, name = tree, []
        for k in keys:
            if isinstance(k, jax.tree_util.GetAttrKey):
                node = getattr(node, k.name, None)
            elif isinstance(k, jax.tree_util.SequenceKey) and isinstance(node, (tuple, list)):
                node = node[k.idx]
            else:  # (a dict's entry, a custom node's child: not a component in a tuple)
                node = None
            in_tuple = isinstance(k, jax.tree_util.SequenceKey) and isinstance(node, Component)
            name.append(node.name if in_tuple else str(k))
        names.append(tuple(name))
    return names


def _leaf_sources(derived, system) -> np.ndarray:
    """For each leaf of ``derived``, a system built from an edit of ``system``'s model:
    the index of the leaf of ``system`` it is (the same name and the same object: an
    edit keeps what it does not change), or -1."""
    index = {
        name: (i, leaf) for i, (name, leaf) in enumerate(zip(_leaf_names(system), jax.tree_util.tree_leaves(system)))
    }
    sources = []
    for name, leaf in zip(_leaf_names(derived), jax.tree_util.tree_leaves(derived)):
        i, source = index.get(name, (-1, None))
        sources.append(i if source is leaf else -1)
    return np.asarray(sources, int)


# {(a system's tree structure, use_muscle_physiology): ((derived system, its leaf sources), ...)}
_DERIVED: OrderedDict = OrderedDict()


def _derived_systems(system, physiology: bool):
    """``(off, rigid)``: the muscle-free system (``_muscle_off_system``) and the
    rigid-tendon one (``_rigid_system``; ``system`` itself without ``physiology``), their
    leaves ``system``'s own, traced where those are: derivatives with respect to
    ``system`` go through both.

    Both are model edits and rebuilds, made once per structure of ``system`` from a
    concrete system and kept; each of their leaves is then the leaf of ``system`` it
    came from (``_leaf_sources``; a leaf the edit made, if any, stays constant). A
    traced system met first is edited and built as it is (``Model.build`` keeps traced
    properties, but takes a body of traced mass as massive)."""
    key = (jax.tree_util.tree_structure(system), bool(physiology))
    derived = _DERIVED.get(key)
    if derived is None:
        made = (_muscle_off_system(system), _rigid_system(system) if physiology else system)
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(system)):
            return made
        derived = _DERIVED[key] = tuple((d, _leaf_sources(d, system)) for d in made)
        if len(_DERIVED) > 16:
            _DERIVED.popitem(last=False)
    leaves = jax.tree_util.tree_leaves(system)

    def with_leaves(d, sources):
        own, treedef = jax.tree_util.tree_flatten(d)
        return jax.tree_util.tree_unflatten(treedef, [leaves[i] if i >= 0 else x for i, x in zip(sources, own)])

    return tuple(with_leaves(d, sources) for d, sources in derived)


def static_optimization_problem(system, states, udot, *, use_muscle_physiology: bool = True):
    """Static optimization's constraints at a batch of frames, a pure function of the
    system: its derivatives with respect to any property of ``system`` (a muscle's
    ``max_isometric_force``, ``optimal_fiber_length``, ``tendon_slack_length``, a path
    point's location, a body's mass, a reserve's ``optimal_force``, the controls'
    bounds) and to the states and accelerations go through ``A``, ``b`` and the bounds,
    and on to ``solve_static_optimization``'s solution::

        x, violation = solve_static_optimization(*static_optimization_problem(system, states, udot))

    **Arguments:**

    - ``system``: the built model with its actuators (traced leaves allowed, e.g. under
      ``jax.grad`` or ``jax.vmap``).
    - ``states``: a batched ``State`` of ``n`` frames: ``t`` (s), ``q``, ``u`` (rad or m,
      rad/s or m/s; the other variables play no part).
    - ``udot (n, nu)``: the target accelerations (rad/s^2 or m/s^2), in ``u`` order.
    - ``use_muscle_physiology``: muscle strengths from their force-length-velocity curves
      at a rigid tendon (see the module), else their maximum isometric forces.

    **Returns:** ``(A (n, nu, k), b (n, nu), lower (k,), upper (k,))``: per frame the
    generalized force (N m or N, ``u`` order) per unit control of each of the ``k``
    actuators (``system.actuator_names`` order), the generalized forces the actuators
    must supply (inverse dynamics with every other force applied), and the controls'
    ``min_control``, ``max_control``.

    The muscle-free and rigid-tendon systems it needs are model edits and rebuilds, done
    once per structure of ``system`` (from its concrete values where it is concrete);
    ``jit`` the caller to evaluate it often.
    """
    A, b, _, lower, upper = _problem_of(system, states, udot, use_muscle_physiology)
    return A, b, lower, upper


def _problem_of(system, states, udot, physiology, devices=None):
    """``static_optimization_problem``'s ``(A, b, lower, upper)`` with the actuators'
    strengths ``F (n, k)`` after ``b`` (muscles: ``F_i``; others: 1, their optimal force
    is in ``A``); the frames sharded over ``devices`` (as ``map_batch``'s)."""
    from ..batching import map_chunks, mesh_for

    model = system.model
    paths = system.actuator_paths
    mus_cols = np.asarray([i for i, p in enumerate(paths) if isinstance(model.find(p), Muscle)], int)
    muscles = tuple(paths[i] for i in mus_cols)
    kinds = _muscle_kinds(model, muscles) if physiology else ()
    off, rigid = _derived_systems(system, physiology and bool(muscles))
    off_paths = off.actuator_paths
    kept = [i for i, p in enumerate(paths) if p in off_paths]
    off_cols = (np.asarray(kept, int), np.asarray([off_paths.index(paths[i]) for i in kept], int))
    udot = jnp.asarray(udot)
    mesh = mesh_for(devices, system, states, udot)
    if mesh is not None:
        call = jax.tree_util.Partial(
            _problem_frames, system, off, rigid, bool(physiology), muscles, kinds, mus_cols, off_cols
        )
        A, b, F, lower, upper = map_chunks(call, states, udot, chunk_size=None, workers=None, cpu_chunk=1, devices=mesh)
        return A, b, F, lower[0], upper[0]
    return _problem(system, off, rigid, states, udot, bool(physiology), muscles, kinds, mus_cols, off_cols)


def _problem_frames(system, off, rigid, physiology, muscles, kinds, mus_cols, off_cols, states, udot):
    """``_problem`` of one device's frames, the bounds repeated per frame (``_problem_of``
    sharded)."""
    A, b, F, lower, upper = _problem(system, off, rigid, states, udot, physiology, muscles, kinds, mus_cols, off_cols)
    n = b.shape[0]
    return A, b, F, jnp.broadcast_to(lower, (n,) + lower.shape), jnp.broadcast_to(upper, (n,) + upper.shape)


def _muscle_kinds(model, muscles) -> tuple:
    """``((kind, indices into muscles), ...)``: the muscles grouped by how their
    strength is computed (``_STRENGTHS``).

    **Raises:** ``ModelError`` naming a muscle of a class without one."""
    kinds = {}
    for i, p in enumerate(muscles):
        comp = model.find(p)
        kind = next((k for k, cls in _KINDS if isinstance(comp, cls)), None)
        if kind is None:
            raise ModelError(
                p,
                f"static optimization with use_muscle_physiology needs OpenSim's "
                f"calcInextensibleTendonActiveFiberForce of a {type(comp).__name__}, which is not "
                f"implemented (set use_muscle_physiology false to use max_isometric_force)",
            )
        kinds.setdefault(kind, []).append(i)
    return tuple((k, tuple(v)) for k, v in kinds.items())


def _props(model, paths, *names):
    """The properties ``names`` of the components ``paths``, each stacked ``(k,)``."""
    dtype = jnp.result_type(float)
    return [jnp.stack([jnp.asarray(getattr(model.find(p), n), dtype) for p in paths]) for n in names]


def _millard_strength(ctx, paths):
    # calcActiveFiberForceAlongTendon takes the pennation angle at the normalized fiber
    # length (OpenSim 4.6)
    fiso, ofl, penn, max_penn = _props(
        ctx.system.model,
        paths,
        "max_isometric_force",
        "optimal_fiber_length",
        "pennation_angle_at_optimal",
        "maximum_pennation_angle",
    )
    lceN = ctx.group_outputs(paths, "normalized_fiber_length")
    cos = jnp.cos(FixedWidthPennation(ofl, penn, max_penn).angle(lceN))
    return fiso * (
        ctx.group_outputs(paths, "active_force_length_multiplier")
        * ctx.group_outputs(paths, "force_velocity_multiplier")
        * cos
    )


def _degroote_strength(ctx, paths):
    (fiso,) = _props(ctx.system.model, paths, "max_isometric_force")
    return (
        fiso
        * ctx.group_outputs(paths, "active_force_length_multiplier")
        * ctx.group_outputs(paths, "force_velocity_multiplier")
    )


def _rigid_tendon_strength(ctx, paths):
    (fiso,) = _props(ctx.system.model, paths, "max_isometric_force")
    return fiso * (
        ctx.group_outputs(paths, "active_force_length_multiplier")
        * ctx.group_outputs(paths, "force_velocity_multiplier")
        * ctx.group_outputs(paths, "cos_pennation_angle")
    )


def _thelen_strength(ctx, paths):
    fiso, ofl, tsl, vmax, penn, max_penn, kshape, af, flen, threshold = _props(
        ctx.system.model,
        paths,
        "max_isometric_force",
        "optimal_fiber_length",
        "tendon_slack_length",
        "max_contraction_velocity",
        "pennation_angle_at_optimal",
        "maximum_pennation_angle",
        "KshapeActive",
        "Af",
        "Flen",
        "fv_linear_extrap_threshold",
    )
    rows = path_rows(ctx.system, paths)
    pen = FixedWidthPennation(ofl, penn, max_penn)
    lce = pen.fiber_length(path_lengths(ctx)[rows], tsl)
    cos = jnp.cos(pen.angle(lce))
    vN = path_speeds(ctx)[rows] * cos / (ofl * vmax)
    fal = curves.thelen_active_force_length(lce / ofl, kshape)
    fv = curves.thelen_force_velocity_multiplier(jnp.ones_like(fal), fal, vN, af, flen, threshold)
    return jnp.where(lce > pen.min_fiber_length, fiso * fal * fv * cos, 0.0)


def _schutte_strength(ctx, paths):
    # the tendon force with the fibers in isometric equilibrium at full activation
    # (OpenSim's computeIsometricForce: the fiber length Schutte's equilibrium finds; where
    # that iteration stops at its 100 steps unconverged, OpenSim's force is the last but
    # one step's)
    system, state = ctx.system, ctx.state
    z = state.z.at[np.asarray([system.z_names.index(f"{p}/activation") for p in paths], int)].set(1.0)
    full = Context(system, state.replace(z=z))
    for group in system.topology.role_groups("forces"):  # (Schutte's group)
        if issubclass(group.cls, Schutte1993Muscle_Deprecated):
            found = group.cls.group_equilibrium(group, full)  # (None: none applies force)
            if found is not None:
                z = z.at[found[0]].set(found[1].astype(z.dtype))
    tendon = Context(system, state.replace(z=z)).group_outputs(paths, "tendon_force")
    ofl, vmax, penn = _props(
        system.model, paths, "optimal_fiber_length", "max_contraction_velocity", "pennation_angle_at_optimal"
    )
    # the deprecated base's force-velocity curve at the normalized shortening speed
    v = -jnp.cos(penn) * path_speeds(ctx)[path_rows(system, paths)] / (vmax * ofl)
    return tendon * (1.8 - 1.8 / (1.0 + jnp.exp((0.04 - v) / 0.18)))


def _moment_arms(ctx, paths):
    """``simjax.moment_arms(ctx.system, ctx.state, paths)``, the paths' wrap searches
    those of ``ctx`` (made once, where the strengths need the geometry too).

    **Returns:** ``(len(paths), n_coordinates)`` (m), coordinates in ``u`` order."""
    path_geometry(ctx)  # (the search, at the state)
    return moment_arms(ctx.system, ctx.state, paths, searches=ctx.searches())


#: OpenSim's calcInextensibleTendonActiveFiberForce per muscle class
_STRENGTHS = {
    "millard": _millard_strength,
    "degroote": _degroote_strength,
    "thelen": _thelen_strength,
    "schutte": _schutte_strength,
    "rigid_tendon": _rigid_tendon_strength,
}
_KINDS = (
    ("millard", Millard2012EquilibriumMuscle),
    ("degroote", DeGrooteFregly2016Muscle),
    ("thelen", Thelen2003Muscle),
    ("schutte", Schutte1993Muscle_Deprecated),
    ("rigid_tendon", RigidTendonMuscle),
)
#: the classes whose strength reads a rigid-tendon copy of the muscle
_RIGID_COPY = (Millard2012EquilibriumMuscle, DeGrooteFregly2016Muscle)


def _muscle_strengths(ctx, muscles, kinds, base):
    """``base (len(muscles),)`` with each muscle's strength set: OpenSim's
    ``calcInextensibleTendonActiveFiberForce`` at full activation, by its class
    (``_STRENGTHS``), at ``ctx`` (the rigid-tendon system); ``kinds``: ``_muscle_kinds``."""
    for kind, index in kinds:  # (a few muscle classes)
        base = base.at[np.asarray(index, int)].set(_STRENGTHS[kind](ctx, tuple(muscles[i] for i in index)))
    return base


@jit
def _problem(system, off, rigid, states, udot, physiology, muscles, kinds, mus_cols, off_cols):
    model = system.model
    dtype = jnp.result_type(float)
    n_act = len(system.actuator_names)
    tree = system.topology.tree
    order = np.asarray([tree.coordinates[c].u for c in system.coordinate_paths], int)

    def stacked(paths, name, default=None):
        return jnp.stack([jnp.asarray(getattr(model.find(p), name, default), dtype) for p in paths])

    lower, upper = stacked(system.actuator_paths, "min_control"), stacked(system.actuator_paths, "max_control")
    fiso = stacked(muscles, "max_isometric_force") if muscles else jnp.zeros(0, dtype)
    # controls within the muscle-free system's bounds (a control outside is an error; a
    # muscle it keeps, not applied, included): its forces are linear in them, rnea(c) =
    # base - J c whatever c
    n_off = len(off.actuator_names)
    c0 = jax.lax.stop_gradient(
        jnp.clip(
            jnp.zeros(n_off, dtype),
            jnp.zeros(n_off, dtype).at[off_cols[1]].set(lower[off_cols[0]]),
            jnp.zeros(n_off, dtype).at[off_cols[1]].set(upper[off_cols[0]]),
        )
    )
    off_state, rigid_state = off.default_state(), rigid.default_state()

    def one(state, udot):
        s_off = off_state.replace(t=state.t, q=state.q, u=state.u)
        Jo = jax.jacfwd(lambda c: -_rnea(off, s_off, udot, c))(c0)  # (nu, n_off)
        b = _rnea(off, s_off, udot, c0) + Jo @ c0
        J = jnp.zeros((state.u.shape[0], n_act), dtype).at[:, off_cols[0]].set(Jo[:, off_cols[1]])
        F = jnp.ones(n_act, dtype)
        if muscles:
            ctx = Context(rigid, rigid_state.replace(t=state.t, q=state.q, u=state.u))
            Fm = _muscle_strengths(ctx, muscles, kinds, fiso) if physiology else fiso
            R = _moment_arms(ctx, muscles)  # (k, n_coords) in coordinate order
            Ru = jnp.zeros((len(muscles), state.u.shape[0]), dtype).at[:, order].set(R)
            J = J.at[:, mus_cols].set(Ru.T * Fm[None, :])
            F = F.at[mus_cols].set(Fm)
        return J, b, F

    A, b, F = jax.vmap(one)(states, udot)
    return A, b, F, lower, upper


def static_optimization(
    system,
    coordinates_table: TimeSeriesTable | None = None,
    *,
    frames: Frames | None = None,
    external_loads=None,
    lowpass_cutoff: float | None = None,
    time_range=None,
    activation_exponent: float = 2.0,
    use_muscle_physiology: bool = True,
    iterations: int | None = None,
    devices=None,
):
    """OpenSim's StaticOptimization (as run by the AnalyzeTool) on a coordinates table.

    **Arguments:**

    - ``system``: the built model with its actuators (reserves and residuals
      included: ``analyze.load_model_with_force_sets``).
    - ``coordinates_table``: coordinates by name (as read), prepared as the AnalyzeTool
      does (``analyze.analysis_frames``); or ``frames``: those frames already made.
    - ``external_loads``: ``ExternalForce`` components or an ExternalLoads ``.xml``
      path, added to the model (``None``: the system's own forces only).
    - ``lowpass_cutoff`` (Hz), ``time_range`` ``(start, end)`` s: as the AnalyzeTool.
    - ``activation_exponent``: the cost's exponent (``>= 2``).
    - ``use_muscle_physiology``: muscle strengths from their force-length-velocity
      curves (see the module), else their maximum isometric forces.
    - ``iterations``: the most Newton steps (default: 40 for the exponent 2, 200 for
      others); a frame stops when its constraints are met to round-off.
    - ``devices``: a list of devices or a ``jax.sharding.Mesh`` to shard the frames over
      (as ``map_batch``'s; default: all local devices when there are several, else
      one). Each device makes and solves its frames' problems (an uneven batch padded
      with copies of the last frame, dropped after): the same result.

    **Returns:** ``(activations, forces, violation)``: ``TimeSeriesTable`` of the
    controls (labels ``system.actuator_names``), of the actuators' forces (N or N m),
    and ``(n,)`` the largest generalized-force residual per frame (N m or N).
    """
    if activation_exponent < 2:
        raise ValueError(f"activation_exponent {activation_exponent} < 2 is not supported")
    if external_loads is not None:
        from .external_loads import read_external_loads

        model = system.model
        if not isinstance(external_loads, (list, tuple)):
            t = np.asarray(coordinates_table.times)
            external_loads = read_external_loads(external_loads, time_window=(t[0] - 1.0, t[-1] + 1.0))
        for f in external_loads:
            model = model.add(f)
        system = model.build()
    if frames is None:
        frames = analysis_frames(system, coordinates_table, lowpass_cutoff, time_range)
    names = list(system.actuator_names)
    comps = [system.model.find(p) for p in system.actuator_paths]
    muscle = np.asarray([isinstance(c, Muscle) for c in comps], bool)
    optimal = np.asarray([1.0 if m else float(c.optimal_force) for c, m in zip(comps, muscle)])

    # target accelerations: the storage's speeds fitted again and differentiated (OpenSim)
    tree = system.topology.tree
    T = frames.store_times
    at = frames.times
    U = np.asarray(frames.store_u)
    u_cols = [tree.coordinates[p].u for p in system.coordinate_paths]
    (ud,) = motion._evaluate_splines(T, U[:, u_cols], at, 5, (1,))
    udot = jnp.zeros((len(at), U.shape[1])).at[:, np.asarray(u_cols, int)].set(jnp.asarray(ud))

    from ..batching import gather

    A, b, F, lower, upper = _problem_of(system, frames.states, udot, use_muscle_physiology, devices)
    x, viol = solve_static_optimization(A, b, lower, upper, activation_exponent, iterations, devices)
    x, F, viol = gather((x, F, viol))
    forces = x * np.where(muscle[None, :], F, optimal[None, :])
    acts = TimeSeriesTable(at, np.asarray(x), names, {"header": "Static Optimization", "inDegrees": "no"})
    ftab = TimeSeriesTable(at, forces, names, {"header": "ModelForces", "inDegrees": "no"})
    return acts, ftab, np.asarray(viol)


@jit
def _external_records(system, states, paths, bodies):
    """OpenSim's ``ExternalForce::getRecordValues`` per frame: force (Ground), point
    (in the body it is applied to), torque (Ground)."""
    state0 = system.default_state()

    def one(state):
        ctx = Context(system, state0.replace(t=state.t, q=state.q, u=state.u))
        R, p0 = ctx.frames_in_ground(bodies)
        out = []
        for k, p in enumerate(paths):  # the external forces (a few)
            comp = system.model.find(p)
            spec = comp.output_specs()
            out.append(spec["force_in_ground"].fn(comp, ctx.at(p)))
            out.append(R[k].T @ (spec["point_in_ground"].fn(comp, ctx.at(p)) - p0[k]))
            out.append(spec["torque_in_ground"].fn(comp, ctx.at(p)))
        return jnp.concatenate(out) if out else jnp.zeros(0)

    return jax.vmap(one)(states)


def _analysis(job: AnalysisJob, node) -> dict:
    exponent = float(_text(node, "activation_exponent", "2"))
    physiology = _text(node, "use_muscle_physiology", "true").lower() == "true"
    if _text(node, "use_model_force_set", "true").lower() != "true":
        raise SetupError(f"StaticOptimization {node.name!r}: use_model_force_set false is not supported")
    # (optimizer_convergence_criterion, optimizer_max_iterations: the solver converges to
    # machine precision, tighter than OpenSim's IPOPT)
    acts, forces, viol = static_optimization(
        job.system, frames=job.frames, activation_exponent=exponent, use_muscle_physiology=physiology
    )
    bad = np.nonzero(viol > 1e-6 * max(1.0, float(np.max(np.abs(np.asarray(forces.values))))))[0]
    if bad.size and job.setup is not None:
        job.setup.warn(
            f"StaticOptimization: the optimizer could not meet the constraints at time(s) "
            f"{', '.join(f'{t:g}' for t in forces.times[bad])}"
        )
    # OpenSim's ForceReporter also records the model's other forces (external loads)
    system = job.system
    ext = [p for p in system.model.paths(ExternalForce)]
    if ext:
        light = _muscle_off_system(system)
        model = light.model
        bodies = []
        for p in ext:
            body = model.find(p).applied_to_body
            bodies.append(body if body.startswith("/") else model.path_of_name(body.rsplit("/", 1)[-1]))
        rec = np.asarray(_external_records(light, job.frames.states, tuple(ext), tuple(bodies)))
        labels = []
        for p in ext:
            comp = system.model.find(p)
            body = comp.applied_to_body.rsplit("/", 1)[-1]
            nm = p.rsplit("/", 1)[-1]
            labels += [f"{body}_{nm}_{s}" for s in ("Fx", "Fy", "Fz", "px", "py", "pz", "Tx", "Ty", "Tz")]
        forces = TimeSeriesTable(
            forces.times,
            np.concatenate([np.asarray(forces.values), rec], 1),
            list(forces.labels) + labels,
            dict(forces.metadata),
        )
    return {"activation": acts, "force": forces}
