"""Moment arms of geometry paths, exact by automatic differentiation.

OpenSim's definition (``MomentArmSolver``): the moment arm of a path about a
coordinate is the generalized force a unit tension along the path produces in the
direction in which that coordinate moves, the others following the model's
constraints:

    r = -dL/dq . N(q) c,

where ``c`` is the *coupling vector*: the generalized speeds obtained by setting the
coordinate's speed to 1 (it is unlocked, as OpenSim unlocks it), the others to 0,
projecting onto the velocity constraints (least squares, unit weights; Simbody's
``projectU``) and dividing by the coordinate's resulting speed; ``N(q)`` maps
speeds to coordinate rates. For a free coordinate ``c`` is a unit vector and
``r = -dL/dq``; for a coordinate coupled to others (a CoordinateCouplerConstraint)
the others' motion is included. ``dL/dq`` comes from forward-mode autodiff of the
path lengths, one tangent per coordinate, for all paths at once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..forward import Context
from ..mechanics.linalg import min_norm_correction
from ..mechanics.tree import qdot_from_u
from ..muscles.path import GeometryPath, path_geometry, path_topology_of
from ..state import State

__all__ = ["moment_arm", "moment_arms", "coupling_vectors", "path_rows"]


def path_rows(system, paths) -> np.ndarray:
    """Rows of the path subsystem for component paths: GeometryPaths, or components
    owning one (a muscle: ``"/forceset/biceps"``).

    **Raises:** ``KeyError`` naming a path with no GeometryPath.
    """
    topo = path_topology_of(system.topology)
    rows = []
    for p in paths:
        if p in topo.index:
            rows.append(topo.index[p])
            continue
        comp = system.model.find(p)
        gp = getattr(comp, "path", None)
        key = f"{p}/{gp.name}" if isinstance(gp, GeometryPath) else None
        if key not in topo.index:
            raise KeyError(f"{p!r} is neither a GeometryPath nor a component owning one")
        rows.append(topo.index[key])
    return np.asarray(rows, np.int32)


def coupling_vectors(system, state: State, coordinates) -> jax.Array:
    """OpenSim's coupling vectors (``MomentArmSolver::computeCouplingVector``).

    **Arguments:** ``system``; ``state`` (its coordinates matter); ``coordinates``:
    names or paths.

    **Returns:** ``(n_coordinates, nu)``: row ``k`` is the generalized speed when
    coordinate ``k`` moves at unit speed and every constraint but that coordinate's
    lock holds.
    """
    tree = system.topology.tree
    uk = np.asarray([tree.coordinates[system.coordinate_path(c)].u for c in coordinates], np.int32)
    G = Context(system, state).constraints.G
    eye = jnp.eye(tree.nu, dtype=state.q.dtype)
    if G.shape[0] == 0:
        return eye[uk]
    locked = np.zeros(tree.nu, bool)
    locked[np.asarray(system.topology.locked_u, np.int64)] = True
    locked = jnp.asarray(locked)

    def one(k):
        # drop the lock of this coordinate (a row that is exactly e_k)
        lock_row = locked[k] & (jnp.abs(G[:, k]) == 1.0) & (jnp.sum(jnp.abs(G), 1) == 1.0)
        Gk = jnp.where(lock_row[:, None], 0.0, G)
        u0 = eye[k]
        u = u0 - min_norm_correction(Gk, Gk @ u0)
        return u / u[k]

    return jax.vmap(one)(jnp.asarray(uk))


def _lengths(system, state, rows, searches=None):
    def L(q):
        st = State(t=state.t, q=q, u=state.u, z=state.z, d=state.d)
        return path_geometry(Context(system, st, searches=searches)).length[rows]

    return L


@jit
def moment_arms(system, state: State, paths=None, coordinates=None, searches=None) -> jax.Array:
    """Moment arms of many paths about many coordinates at once.

    **Arguments:** ``system``; ``state``; ``paths``: component paths of
    GeometryPaths or of their owners (default: every path of the model, in
    ``PathTopology.paths`` order); ``coordinates``: names or paths (default:
    ``system.coordinate_paths``); ``searches``: those of a ``Context`` at the same
    state that evaluated the paths (``ctx.searches()``), so that OpenSim's wrap
    passes are not run (and compiled) again; None: run here.

    **Returns:** ``(n_paths, n_coordinates)`` (m, or dimensionless for a
    translational coordinate), positive where tension turns the coordinate in its
    positive direction.
    """
    topo = path_topology_of(system.topology)
    rows = path_rows(system, topo.paths if paths is None else paths)
    coords = system.coordinate_paths if coordinates is None else tuple(coordinates)
    C = coupling_vectors(system, state, coords)
    tree = system.topology.tree
    qdots = jax.vmap(lambda c: qdot_from_u(tree, state.q, c))(C)
    L = _lengths(system, state, rows, searches)
    dL = jax.vmap(lambda dq: jax.jvp(L, (state.q,), (dq,))[1])(qdots)  # (n_coords, n_paths)
    return -dL.T


def moment_arm(system, state: State, path: str, coordinate: str):
    """The moment arm of one path about one coordinate (OpenSim
    ``Muscle::computeMomentArm``).

    **Arguments:** ``path``: a GeometryPath or its owner (``"/forceset/biceps"``);
    ``coordinate``: a name or path.

    **Returns:** a scalar (m).
    """
    return moment_arms(system, state, (path,), (coordinate,))[0, 0]
