"""Geometry paths: path points, the GeometryPath, PathActuator, and the path subsystem.

(OpenSim ``PathPoint``, ``ConditionalPathPoint``, ``MovingPathPoint``, ``GeometryPath``,
``PathActuator``.) A ``GeometryPath`` is an ordered list of path points, each fixed
in (or, for a ``MovingPathPoint``, moving with coordinates in) a PhysicalFrame. Its
*current path* is the subsequence of active points (a ``ConditionalPathPoint`` is
active only while its coordinate is in ``range``, with OpenSim's 1e-5 tolerance);
its length is the sum of the straight segments between consecutive active points.

**The path subsystem.** Every GeometryPath of a model is evaluated in one vectorized
pass, whatever its owner (muscle, path actuator, ...). At build time
``path_topology(build)`` flattens the points of all paths into one array of ``P``
points (path id, frame, kind, coordinate indices: all static numpy). At run time

1. every point is placed in Ground (one gather of frame poses; moving points add
   their Function values, evaluated with one ``FunctionBank`` call);
2. the *next active point* of every point is found with one reverse cumulative
   minimum over the flat array (no loop over paths or points), which turns the
   points into at most ``P`` candidate segments ``(j, next(j))``;
3. segment lengths are summed per path with ``segment_sum``.

Lengthening speeds are the relative velocities of the segment ends projected on the
segments (OpenSim's ``calcSpeedBetween``); a tension is applied, as OpenSim does,
as a pair of point forces on the two bodies of every segment that joins different
bodies, plus, at a ``MovingPathPoint``, the generalized force
``(R dp/dq) . F`` on its coordinate (OpenSim's correction for the point's motion in
its frame). This body-force form is exact, costs one scatter, and reproduces
OpenSim's generalized forces bit for bit; ``-T dL/dq`` (one VJP through the
kinematics) would cost a reverse pass through the tree and differs from OpenSim
where a moving point's neighbour is on the same body (OpenSim then applies no
correction). Moment arms (``simjax.analysis.moment_arms``) are exact derivatives
``-dL/dq`` by forward-mode autodiff.

**Wrapping.** Segment geometry is computed by ``straight_segments``, which returns a
``Segments`` record (length, unit direction leaving the start point, unit direction
arriving at the end point, whether each end applies force). For paths with PathWraps,
``simjax.wrapping.paths.wrap_segments`` replaces the records of their segments by the
wrapped geometry (the arcs over the surfaces included, directions to and from the
tangent points) and adds the tangent points (``TangentPoints``: stations of the wrap
objects' bodies with their force and speed directions). Lengths, speeds and forces
are all written in terms of ``Segments``.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import Component, ModelError, Stage, flag, output, prop, socket
from ..forces.base import Actuator
from ..function_bank import FunctionBank, bank_eval, bank_params
from ..functions import Constant, Function
from ..groups import Forces, point_force_on_bodies
from ..wrapping import paths as wrapping
from ..wrapping.paths import Segments

__all__ = [
    "AbstractPathPoint",
    "PathPoint",
    "ConditionalPathPoint",
    "MovingPathPoint",
    "GeometryPath",
    "PathActuator",
    "PathTopology",
    "Segments",
    "path_topology",
    "path_topology_of",
    "path_geometry",
    "path_lengths",
    "path_speeds",
    "path_forces",
    "path_polylines",
    "straight_segments",
]


# SimTK::SignificantReal and SimTK::Eps
_SIGNIFICANT_REAL = float(np.finfo(np.float64).eps) ** 0.875
_EPS = float(np.finfo(np.float64).eps)
# ConditionalPathPoint::isActive's tolerance on the range
_RANGE_TOL = 1e-5


# -- components -------------------------------------------------------------------------


class AbstractPathPoint(Component):
    """A point of a GeometryPath, attached to a PhysicalFrame (abstract).

    **Fields:** ``parent_frame``: socket to the frame the point is defined in.
    """

    parent_frame: str = socket("PhysicalFrame", doc="The frame in which this path point is defined.")


class PathPoint(AbstractPathPoint):
    """A path point fixed in its frame (OpenSim PathPoint).

    **Fields:** ``parent_frame``; ``location``: the point in that frame (m).
    """

    location: np.ndarray = prop(
        (0.0, 0.0, 0.0), doc="The fixed location of the path point in its parent frame (m).", shape=(3,)
    )

    def __init__(self, name: str, parent_frame: str = "", location=(0.0, 0.0, 0.0), components: tuple = ()):
        self.name = name
        self.parent_frame = parent_frame
        self.location = location
        self.components = components

    @output(Stage.POSITION, "Vec3")
    def location_in_ground(self, ctx):
        """The point's location in Ground (m)."""
        return _point_output(ctx, "points")


class ConditionalPathPoint(PathPoint):
    """A path point that is part of the path only while a coordinate is within
    ``range`` (OpenSim ConditionalPathPoint; inclusive, with a 1e-5 tolerance).

    **Fields:** ``parent_frame``, ``location``; ``coordinate``: socket to the
    Coordinate (a soft reference: without it the point is never active);
    ``range``: ``(min, max)`` in the coordinate's units.
    """

    coordinate: str = socket(
        "Coordinate", hard=False, doc="The coordinate whose value determines when the path point is active."
    )
    range: np.ndarray = prop((0.0, 0.0), doc="Coordinate range (min, max) in which the point is active.", shape=(2,))

    def __init__(
        self,
        name: str,
        parent_frame: str = "",
        location=(0.0, 0.0, 0.0),
        coordinate: str = "",
        range=(0.0, 0.0),
        components: tuple = (),
    ):
        super().__init__(name, parent_frame, location, components)
        self.coordinate = coordinate
        self.range = range


class MovingPathPoint(AbstractPathPoint):
    """A path point whose location in its frame is a Function of coordinates
    (OpenSim MovingPathPoint).

    Each of ``x_location``, ``y_location``, ``z_location`` is a Function of the value
    of ``x_coordinate`` (resp. y, z), clamped into that coordinate's range, as OpenSim
    does; an axis without a coordinate takes its function's value at 0 (a Constant by
    default). OpenSim requires the three coordinates to be the same; simjax also
    accepts different ones.

    **Fields:** ``parent_frame``; ``x_location``, ``y_location``, ``z_location``
    (Functions, ``None`` meaning ``Constant(0)``); ``x_coordinate``, ``y_coordinate``,
    ``z_coordinate`` (soft sockets to Coordinates).
    """

    x_location: Function | None = None
    y_location: Function | None = None
    z_location: Function | None = None
    x_coordinate: str = socket("Coordinate", hard=False, doc="The coordinate x_location is a function of.")
    y_coordinate: str = socket("Coordinate", hard=False, doc="The coordinate y_location is a function of.")
    z_coordinate: str = socket("Coordinate", hard=False, doc="The coordinate z_location is a function of.")

    def __init__(
        self,
        name: str,
        parent_frame: str = "",
        x_location: Function | None = None,
        y_location: Function | None = None,
        z_location: Function | None = None,
        x_coordinate: str = "",
        y_coordinate: str = "",
        z_coordinate: str = "",
        components: tuple = (),
    ):
        self.name = name
        self.parent_frame = parent_frame
        self.x_location = x_location
        self.y_location = y_location
        self.z_location = z_location
        self.x_coordinate = x_coordinate
        self.y_coordinate = y_coordinate
        self.z_coordinate = z_coordinate
        self.components = components

    def functions(self) -> tuple:
        """The three location Functions (``Constant(0)`` where unset)."""
        return tuple(Constant(0.0) if f is None else f for f in (self.x_location, self.y_location, self.z_location))

    @output(Stage.POSITION, "Vec3")
    def location_in_ground(self, ctx):
        """The point's location in Ground (m)."""
        return _point_output(ctx, "points")


class GeometryPath(Component):
    """A path of points between bodies (OpenSim GeometryPath).

    **Fields:** ``points``: the path points, in order (OpenSim's ``PathPointSet``;
    at least two); ``wraps``: PathWrap components (OpenSim's ``PathWrapSet``, applied
    by the wrapping engine, issue 7); ``default_color``: display color.

    Outputs ``length`` (m) and ``lengthening_speed`` (m/s).
    """

    points: tuple = ()
    wraps: tuple = ()
    default_color: tuple = flag((0.8, 0.1, 0.1), doc="Display color (r, g, b).")

    def __init__(
        self,
        name: str = "path",
        points: tuple = (),
        wraps: tuple = (),
        default_color=(0.8, 0.1, 0.1),
        components: tuple = (),
    ):
        self.name = name
        self.points = tuple(points)
        self.wraps = tuple(wraps)
        self.default_color = tuple(float(c) for c in default_color)
        self.components = components

    def __check_init__(self):
        super().__check_init__()
        if not isinstance(self.points, tuple) or not all(isinstance(p, AbstractPathPoint) for p in self.points):
            raise ModelError(
                self.name, "'points' must be a tuple of path points (PathPoint, ConditionalPathPoint, MovingPathPoint)"
            )

    def validate(self, path: str) -> None:
        """Check the path has at least two points (OpenSim's rule)."""
        super().validate(path)
        if len(self.points) < 2:
            raise ModelError(
                path, "a valid path must have at least two path points", prop="PathPointSet", value=len(self.points)
            )

    def append_point(self, point: AbstractPathPoint) -> GeometryPath:
        """A copy with ``point`` appended.

        **Raises:** ``ModelError`` if a point of that name exists already.
        """
        if any(p.name == point.name for p in self.points):
            raise ModelError(self.name, f"already has a path point named {point.name!r}")
        return self.replace(points=self.points + (point,))

    @output(Stage.POSITION)
    def length(self, ctx):
        """The path's length (m)."""
        geo = path_geometry(ctx)
        return geo.length[geo.topology.index[ctx.path]]

    @output(Stage.VELOCITY)
    def lengthening_speed(self, ctx):
        """The rate of change of the path's length (m/s)."""
        topo = path_topology_of(ctx.topology)
        return path_speeds(ctx)[topo.index[ctx.path]]


class PathActuator(Actuator):
    """An actuator that pulls along a GeometryPath with tension
    ``control * optimal_force`` (OpenSim PathActuator).

    **Fields:** ``path``: the GeometryPath (a subcomponent named ``path``, as in
    OpenSim 4.6: ``/forceset/biceps/path``); ``optimal_force``; ``min_control``,
    ``max_control``; ``applies_force``.
    """

    path: GeometryPath = eqx.field(default_factory=GeometryPath)

    def __init__(
        self,
        name: str,
        path: GeometryPath | None = None,
        optimal_force=1.0,
        min_control=-np.inf,
        max_control=np.inf,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.path = GeometryPath() if path is None else path
        self.optimal_force = optimal_force
        self.min_control = min_control
        self.max_control = max_control
        self.applies_force = applies_force
        self.components = components

    def __check_init__(self):
        super().__check_init__()
        if not isinstance(self.path, GeometryPath):
            raise ModelError(self.name, "'path' must be a GeometryPath")

    def add_new_path_point(self, name: str, frame: str, location) -> PathActuator:
        """A copy with a ``PathPoint`` appended to its path (OpenSim
        ``addNewPathPoint``).

        **Arguments:** ``name``: the point's name; ``frame``: the path of its
        PhysicalFrame (``"/bodyset/humerus"``); ``location``: in that frame (m).
        """
        return self.replace(path=self.path.append_point(PathPoint(name, frame, location)))

    def add_path_point(self, point: AbstractPathPoint) -> PathActuator:
        """A copy with any path point appended to its path."""
        return self.replace(path=self.path.append_point(point))

    # -- group evaluation -------------------------------------------------------------

    @classmethod
    def compile_group(cls, build, paths):
        """Static data: path rows in the model's path subsystem, control indices."""
        topo = path_topology(build)
        comps = [build.find(p) for p in paths]
        return {
            "topology": topo,
            "rows": np.asarray([topo.index[f"{p}/{c.path.name}"] for p, c in zip(paths, comps)], np.int32),
            "control": np.asarray([build.control_index(p) for p in paths], np.int32),
            "on": np.asarray([c.applies_force for c in comps], bool),
        }

    @classmethod
    def prepare_parameters(cls, group, ctx) -> None:
        """The paths' parameters (``Context.prepared``)."""
        prepare_path_parameters(group, ctx)

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters: ``optimal_force`` of every member."""
        dtype = jnp.result_type(float)
        return {"optimal_force": jnp.stack([jnp.asarray(model.find(p).optimal_force, dtype) for p in group.paths])}

    @classmethod
    def group_forces(cls, group, params, ctx) -> Forces:
        """Tension ``control * optimal_force`` applied along each path."""
        s = group.static
        tension = ctx.controls[s["control"]] * params["optimal_force"]
        speed = path_speeds(ctx)[s["rows"]]
        body, mob = path_forces(ctx, s["rows"], jnp.where(s["on"], tension, 0.0))
        return Forces(
            body=body,
            mobility=mob,
            outputs={
                "actuation": tension,
                "tension": tension,
                "speed": speed,
                "power": -tension * speed,
                "length": path_geometry(ctx).length[s["rows"]],
                "lengthening_speed": speed,
            },
        )

    @output(Stage.DYNAMICS)
    def tension(self, ctx):
        """The tension along the path (N): ``control * optimal_force``."""
        return ctx.group_output(ctx.path, "tension")

    @output(Stage.VELOCITY)
    def speed(self, ctx):
        """The path's lengthening speed (m/s) (OpenSim ``getSpeed``)."""
        return _owned_path_value(ctx, self, "speed")

    @output(Stage.DYNAMICS)
    def power(self, ctx):
        """Power delivered to the system, ``-actuation * speed`` (W)."""
        return ctx.group_output(ctx.path, "power")

    @output(Stage.POSITION)
    def length(self, ctx):
        """The length of the actuator's path (m)."""
        return _owned_path_value(ctx, self, "length")

    @output(Stage.VELOCITY)
    def lengthening_speed(self, ctx):
        """The lengthening speed of the actuator's path (m/s)."""
        return _owned_path_value(ctx, self, "speed")


def _owned_path_value(ctx, comp, what: str):
    topo = path_topology_of(ctx.topology)
    row = topo.index[f"{ctx.path}/{comp.path.name}"]
    return path_geometry(ctx).length[row] if what == "length" else path_speeds(ctx)[row]


def _point_output(ctx, what: str):
    topo = path_topology_of(ctx.topology)
    return path_geometry(ctx).points[topo.point_paths.index(ctx.path)]


# -- the path subsystem: static topology --------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class PathTopology:
    """All GeometryPaths of a model, flattened (static; built once per model structure).

    **Fields:**

    - ``paths``: GeometryPath component paths (tree order); ``index``: path -> row.
    - ``point_paths``: every point's component path, paths' points consecutively.
    - ``path_id (P,)``, ``end (P,)``: the row of each point's path, and the flat index
      one past that path's last point.
    - ``frames``: the distinct PhysicalFrames the points are on; ``frame (P,)``: each
      point's frame; ``mob (P,)``: each point's mobilized body.
    - ``cond (P,)``: conditional points; ``cond_has (P,)``: with a coordinate;
      ``cond_q (P,)``: its q index.
    - ``moving (M,)``: flat indices of the moving points; ``mov_q``, ``mov_u``
      ``(M, 3)``: per axis, the q/u index of its coordinate (``nq``/``nu``: none);
      ``mov_coord``: the coordinate paths (``""``: none); ``bank``: a FunctionBank of
      the ``3M`` location functions.
    - ``wrap``: static data of the wrapping engine, or ``None``.
    """

    paths: tuple
    index: dict
    point_paths: tuple
    path_id: np.ndarray
    end: np.ndarray
    frames: tuple
    frame: np.ndarray
    mob: np.ndarray
    cond: np.ndarray
    cond_has: np.ndarray
    cond_q: np.ndarray
    moving: np.ndarray
    mov_q: np.ndarray
    mov_u: np.ndarray
    mov_coord: tuple
    bank: FunctionBank
    wrap: Any = None

    @property
    def n_paths(self) -> int:
        """Number of paths."""
        return len(self.paths)

    @property
    def n_points(self) -> int:
        """Number of points of all paths."""
        return len(self.point_paths)


_TOPOLOGIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BY_SYSTEM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def path_topology(build) -> PathTopology:
    """The path subsystem of the model being built (computed once per build).

    **Arguments:** ``build``: the ``BuildInfo`` passed to ``compile_group``.

    **Returns:** a ``PathTopology`` over every GeometryPath of the model.

    **Raises:** ``ModelError`` naming the point for a coordinate of a quaternion joint.
    """
    topo = _TOPOLOGIES.get(build)
    if topo is None:
        topo = _compile_paths(build)
        _TOPOLOGIES[build] = topo
    return topo


def path_topology_of(topology) -> PathTopology:
    """The ``PathTopology`` of a built system's ``Topology``.

    **Raises:** ``KeyError`` if the model has no path owned by a force.
    """
    topo = _BY_SYSTEM.get(topology)
    if topo is None:
        for g in topology.role_groups("forces"):
            topo = g.static.get("topology")
            if isinstance(topo, PathTopology):
                break
        else:
            raise KeyError("this model has no GeometryPath owned by a force")
        _BY_SYSTEM[topology] = topo
    return topo


def _compile_paths(build) -> PathTopology:
    model, tree = build.model, build.tree
    paths = [(p, c) for p, c in model.walk() if isinstance(c, GeometryPath)]
    point_paths, path_id, end, frames, frame, cond, cond_has, cond_q = [], [], [], [], [], [], [], []
    moving, mov_q, mov_u, mov_coord, functions = [], [], [], [], []
    frame_index: dict[str, int] = {}

    def coord_info(point_path: str, sock: str):
        target = build.socket(point_path, sock)
        if not target:
            return None, ""
        info = tree.coordinates[target]
        if info.q < 0:
            raise ModelError(
                point_path,
                f"coordinate {target!r} is a rotation of a quaternion joint and has no value",
                prop=f"socket_{sock}",
                value=target,
            )
        return info, target

    for row, (gp_path, gp) in enumerate(paths):
        start = len(point_paths)
        for pt in gp.points:
            pp = f"{gp_path}/{pt.name}"
            fpath = build.socket(pp, "parent_frame")
            if fpath not in frame_index:
                frame_index[fpath] = len(frames)
                frames.append(fpath)
            frame.append(frame_index[fpath])
            point_paths.append(pp)
            path_id.append(row)
            is_cond = isinstance(pt, ConditionalPathPoint)
            cond.append(is_cond)
            info, _ = coord_info(pp, "coordinate") if is_cond else (None, "")
            cond_has.append(info is not None)
            cond_q.append(info.q if info is not None else 0)
            if isinstance(pt, MovingPathPoint):
                moving.append(len(point_paths) - 1)
                qs, us, cs = [], [], []
                for axis in "xyz":
                    info, target = coord_info(pp, f"{axis}_coordinate")
                    qs.append(info.q if info is not None else tree.nq)
                    us.append(info.u if info is not None else tree.nu)
                    cs.append(target)
                mov_q.append(qs)
                mov_u.append(us)
                mov_coord.append(tuple(cs))
                functions.extend(pt.functions())
        end.extend([len(point_paths)] * (len(point_paths) - start))
    mob = np.asarray([build.frame_mob(f) for f in frames], np.int32)
    frame = np.asarray(frame, np.int32)
    topo = PathTopology(
        paths=tuple(p for p, _ in paths),
        index={p: i for i, (p, _) in enumerate(paths)},
        point_paths=tuple(point_paths),
        path_id=np.asarray(path_id, np.int32),
        end=np.asarray(end, np.int32),
        frames=tuple(frames),
        frame=frame,
        mob=mob[frame] if len(frame) else np.zeros(0, np.int32),
        cond=np.asarray(cond, bool),
        cond_has=np.asarray(cond_has, bool),
        cond_q=np.asarray(cond_q, np.int32),
        moving=np.asarray(moving, np.int32),
        mov_q=np.asarray(mov_q, np.int32).reshape(-1, 3),
        mov_u=np.asarray(mov_u, np.int32).reshape(-1, 3),
        mov_coord=tuple(mov_coord),
        bank=FunctionBank.of(functions),
    )
    if any(c.wraps for _, c in paths):
        topo = dataclasses.replace(topo, wrap=wrapping.compile_wrapping(build, topo))
    return topo


# -- the path subsystem: evaluation -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PathGeometry:
    """Position-stage results of the path subsystem.

    ``points (P, 3)``: every point in Ground; ``local (P, 3)``: in its frame;
    ``R (P, 3, 3)``: its frame's orientation; ``active (P,)``; ``nxt (P,)``: index
    of the next active point of the same path (``P``: none); ``valid (P,)``: the
    segment ``(j, nxt[j])`` exists; ``segments``; ``length (n_paths,)``;
    ``dlocal (M, 3)``: derivative of each moving point's local coordinates with
    respect to its axis coordinates (OpenSim ``getdPointdQ``).
    """

    topology: PathTopology
    points: Any
    local: Any
    R: Any
    active: Any
    nxt: Any
    valid: Any
    segments: Segments
    length: Any
    dlocal: Any


def _cache(ctx) -> dict:
    base = ctx.__dict__.get("_ctx", ctx)  # a Context seen from a component (forward._At)
    cache = base.__dict__.get("_simjax_paths")
    if cache is None:
        cache = base.__dict__["_simjax_paths"] = {}
    return cache


def path_params(model, topo: PathTopology) -> dict:
    """Traced parameters of all paths: fixed locations ``loc (P, 3)``, conditional
    ranges ``range (P, 2)``, moving-point functions and coordinate ranges."""
    dtype = jnp.result_type(float)
    locs, ranges = [], []
    zero3, zero2 = jnp.zeros(3, dtype), jnp.zeros(2, dtype)
    for pp in topo.point_paths:
        pt = model.find(pp)
        locs.append(jnp.asarray(pt.location, dtype) if isinstance(pt, PathPoint) else zero3)
        ranges.append(jnp.asarray(pt.range, dtype) if isinstance(pt, ConditionalPathPoint) else zero2)
    out = {
        "loc": jnp.stack(locs) if locs else jnp.zeros((0, 3), dtype),
        "range": jnp.stack(ranges) if ranges else jnp.zeros((0, 2), dtype),
    }
    if len(topo.moving):
        fns, cranges = [], []
        for i, cs in zip(topo.moving, topo.mov_coord):
            fns.extend(model.find(topo.point_paths[i]).functions())
            cranges.append(jnp.stack([jnp.asarray(model.find(c).range, dtype) if c else zero2 for c in cs]))
        out["functions"] = bank_params(topo.bank, fns)
        out["coord_range"] = jnp.stack(cranges)
    return out


def straight_segments(start, end, mob_start, mob_end) -> Segments:
    """Straight segments between points (the geometry without wrapping).

    **Arguments:** ``start``, ``end`` ``(P, 3)`` in Ground; ``mob_start``,
    ``mob_end`` ``(P,)``: the bodies they are on.

    **Returns:** ``Segments``. Coincident ends give length 0 and a zero direction
    (OpenSim gives NaN directions there).
    """
    d = end - start
    sq = jnp.sum(d * d, -1)
    tiny = sq < _SIGNIFICANT_REAL**2
    length = jnp.sqrt(jnp.where(tiny, 1.0, sq))
    u = jnp.where(tiny[:, None], 0.0, d / length[:, None])
    return Segments(length=jnp.where(tiny, 0.0, length), dir_start=u, dir_end=u, applies=mob_start != mob_end)


def _moving_values(fparams, x, bank):
    (vals,) = bank_eval(bank, fparams, x.reshape(-1))
    return vals.reshape(x.shape)


def _moving_slopes(fparams, x, bank):
    (vals,) = bank_eval(bank, fparams, x.reshape(-1), orders=(1,))
    return vals.reshape(x.shape)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _moving_local(bank, fparams, q_axes, lo, hi):
    """Moving-point local coordinates ``f(clamp(q, lo, hi))`` (see the custom JVP)."""
    return _moving_values(fparams, jnp.clip(q_axes, lo, hi), bank)


@_moving_local.defjvp
def _moving_local_jvp(bank, primals, tangents):
    # OpenSim differentiates the location functions at the unclamped coordinate value
    # (MovingPathPoint::getdPointdQ, getVelocity): the derivative in q follows it.
    fparams, q_axes, lo, hi = primals
    dfp, dq, dlo, dhi = tangents
    val, dval = jax.jvp(
        lambda p, a, b: _moving_values(p, jnp.clip(q_axes, a, b), bank), (fparams, lo, hi), (dfp, dlo, dhi)
    )
    return val, dval + _moving_slopes(fparams, q_axes, bank) * dq


def path_parameters(ctx, topo: PathTopology) -> dict:
    """``path_params`` through the context's parameters (``Context.parameter``)."""
    return ctx.parameter("paths", lambda: path_params(ctx.model, topo))


def prepare_path_parameters(group, ctx) -> None:
    """``prepare_parameters`` of the classes that pull along paths: the paths' and
    their wrap objects' parameters."""
    topo = group.static["topology"]
    path_parameters(ctx, topo)
    if topo.wrap is not None:
        wrapping.wrap_parameters(ctx, topo.wrap)


def _geometry(ctx, topo: PathTopology) -> PathGeometry:
    dtype = ctx.pos.p0.dtype
    params = path_parameters(ctx, topo)
    P = topo.n_points
    R_f, p_f = ctx.frames_in_ground(topo.frames)
    R, p0 = R_f[topo.frame], p_f[topo.frame]
    local = params["loc"]
    dlocal = jnp.zeros((0, 3), dtype)
    q = ctx.state.q
    if len(topo.moving):
        q_ext = jnp.concatenate([q, jnp.zeros(1, dtype)])
        q_axes = q_ext[topo.mov_q]
        cr = params["coord_range"]
        vals = _moving_local(topo.bank, params["functions"], q_axes, cr[..., 0], cr[..., 1])
        local = local.at[topo.moving].set(vals)
        dlocal = _moving_slopes(params["functions"], q_axes, topo.bank)
    points = jnp.einsum("pij,pj->pi", R, local) + p0
    active = np.ones(P, bool) if not topo.cond.any() else None
    if active is None:
        x = q[topo.cond_q]
        rng = params["range"]
        inside = (x >= rng[:, 0] - _RANGE_TOL) & (x <= rng[:, 1] + _RANGE_TOL)
        active = jnp.where(topo.cond, topo.cond_has & inside, True)
        cand = jnp.where(active, jnp.arange(P), P)
        after = jnp.concatenate([jax.lax.cummin(cand, reverse=True)[1:], jnp.full(1, P, cand.dtype)])
        nxt = after
        valid = active & (nxt < topo.end)
    else:
        nxt = np.minimum(np.arange(P) + 1, P)
        valid = nxt < topo.end
        active = jnp.asarray(active)
    pts_ext = jnp.concatenate([points, points[-1:]])
    mob_ext = np.concatenate([topo.mob, [-1]])
    seg = straight_segments(points, pts_ext[nxt], topo.mob, jnp.asarray(mob_ext)[nxt])
    if topo.wrap is not None:
        seg = wrapping.wrap_segments(ctx, topo.wrap, topo, points, active, seg)
    length = jax.ops.segment_sum(jnp.where(valid, seg.length, 0.0), topo.path_id, num_segments=topo.n_paths)
    return PathGeometry(
        topology=topo,
        points=points,
        local=local,
        R=R,
        active=active,
        nxt=nxt,
        valid=valid,
        segments=seg,
        length=length,
        dlocal=dlocal,
    )


def path_geometry(ctx) -> PathGeometry:
    """Position-stage geometry of every path of the context's system (cached per
    context).

    **Arguments:** ``ctx``: a ``simjax.forward.Context``.

    **Returns:** a ``PathGeometry`` (``.length (n_paths,)`` in ``PathTopology.paths``
    order).
    """
    cache = _cache(ctx)
    if "geometry" not in cache:
        cache["geometry"] = _geometry(ctx, path_topology_of(ctx.topology))
    return cache["geometry"]


def path_polylines(ctx):
    """The current path of every GeometryPath as a polyline (OpenSim
    ``GeometryPath::getCurrentPath``): its active points in order and, on wrapped paths,
    the wrap points of the wraps taken, all in Ground.

    One gather over all paths (and one over the wrapped ones): no loop over paths or
    points, so it vmaps over the frames of a motion.

    **Arguments:** ``ctx``: a ``simjax.forward.Context``.

    **Returns:** ``(points, count)``: ``points (n_paths, L, 3)`` (m), rows in
    ``PathTopology.paths`` order, each padded after its last point by repeating it (so
    the padding draws as zero-length segments); ``count (n_paths,)``: the number of
    points on each path.
    """
    geo = path_geometry(ctx)
    topo = geo.topology
    P = topo.n_points
    starts = np.searchsorted(topo.path_id, np.arange(topo.n_paths))  # (a path's points are consecutive)
    sizes = np.diff(np.append(starts, P))
    width = int(sizes.max(initial=1))
    wrapped = None
    if geo.segments.tangent is not None:
        wrapped = wrapping.current_paths(ctx, topo.wrap, geo.points, geo.segments.tangent)
        width = max(width, wrapped[1].shape[1])
    k = np.arange(width)
    idx = np.where(k[None] < sizes[:, None], starts[:, None] + k[None], P)
    pts_ext = jnp.concatenate([geo.points, jnp.zeros((1, 3), geo.points.dtype)])
    keep = jnp.concatenate([jnp.asarray(geo.active, bool), jnp.zeros(1, bool)])[idx]
    order = jnp.argsort(~keep, axis=-1, stable=True)  # active points first, in path order
    points = jnp.take_along_axis(pts_ext[idx], order[..., None], 1)
    count = jnp.sum(keep, -1)
    if wrapped is not None:
        rows, nodes, n_nodes = wrapped
        nodes = jnp.concatenate([nodes, jnp.repeat(nodes[:, -1:], width - nodes.shape[1], 1)], 1)
        points = points.at[rows].set(nodes)
        count = count.at[rows].set(n_nodes)
    last = jnp.minimum(k[None, :], jnp.maximum(count, 1)[:, None] - 1)
    return jnp.take_along_axis(points, last[..., None], 1), count


def path_lengths(ctx):
    """Lengths of all paths ``(n_paths,)`` (m)."""
    return path_geometry(ctx).length


def _point_velocities(ctx, geo: PathGeometry):
    topo = geo.topology
    V = ctx.vel.V[topo.mob]
    v = V[:, 3:] + spatial.cross(V[:, :3], geo.points)
    if len(topo.moving):
        u_ext = jnp.concatenate([ctx.state.u, jnp.zeros(1, v.dtype)])
        v_local = geo.dlocal * u_ext[topo.mov_u]
        v = v.at[topo.moving].add(jnp.einsum("mij,mj->mi", geo.R[topo.moving], v_local))
    return v


def path_speeds(ctx):
    """Lengthening speeds of all paths ``(n_paths,)`` (m/s), cached per context.

    Each segment contributes the relative velocity of its ends projected on it
    (OpenSim ``Point::calcSpeedBetween``; coincident ends contribute the norm of the
    relative velocity, as there). A moving point's velocity includes its motion in
    its frame.
    """
    cache = _cache(ctx)
    if "speed" not in cache:
        geo = path_geometry(ctx)
        topo, seg = geo.topology, geo.segments
        v = _point_velocities(ctx, geo)
        v_ext = jnp.concatenate([v, v[-1:]])
        v_end = v_ext[geo.nxt]
        rate = jnp.sum(v_end * seg.dir_end, -1) - jnp.sum(v * seg.dir_start, -1)
        dv = v_end - v
        dv2 = jnp.sum(dv * dv, -1)
        coincident = seg.length < _EPS
        rate = jnp.where(coincident, jnp.sqrt(jnp.where(dv2 > 0, dv2, 1.0)) * (dv2 > 0), rate)
        speed = jax.ops.segment_sum(jnp.where(geo.valid, rate, 0.0), topo.path_id, num_segments=topo.n_paths)
        if seg.tangent is not None:
            tp = seg.tangent
            V = ctx.vel.V[tp.mob]
            v_tp = V[:, 3:] + spatial.cross(V[:, :3], tp.points)
            speed = speed - jax.ops.segment_sum(jnp.sum(v_tp * tp.speed_dir, -1), tp.row, num_segments=topo.n_paths)
        cache["speed"] = speed
    return cache["speed"]


def path_forces(ctx, rows, tension):
    """Forces of tensions along some paths, applied as OpenSim applies them.

    **Arguments:** ``ctx``; ``rows (k,)``: path rows (static); ``tension (k,)`` (N).

    **Returns:** ``(body (n_mob, 6), mobility (nu,))``: spatial forces in Ground about
    its origin, and the generalized forces of moving path points.
    """
    geo = path_geometry(ctx)
    topo, seg = geo.topology, geo.segments
    dtype = geo.points.dtype
    T_path = jnp.zeros(topo.n_paths, dtype).at[rows].set(tension)
    T = T_path[topo.path_id]
    applies_end = seg.applies if seg.applies_end is None else seg.applies_end
    f_start = jnp.where(geo.valid & seg.applies, T, 0.0)[:, None] * seg.dir_start
    f_end = jnp.where(geo.valid & applies_end, T, 0.0)[:, None] * seg.dir_end
    P = topo.n_points
    F = f_start - jnp.zeros((P + 1, 3), dtype).at[geo.nxt].add(f_end)[:P]
    body = point_force_on_bodies(ctx.tree.n_mob, topo.mob, geo.points, F, dtype)
    if seg.tangent is not None:
        tp = seg.tangent
        body = body + point_force_on_bodies(
            ctx.tree.n_mob, tp.mob, tp.points, T_path[tp.row][:, None] * tp.force_dir, dtype
        )
    mobility = jnp.zeros(ctx.tree.nu, dtype)
    if len(topo.moving):
        Fm = jnp.einsum("mij,mi->mj", geo.R[topo.moving], F[topo.moving])  # force in the point's frame
        gen = Fm * geo.dlocal
        mobility = jnp.zeros(ctx.tree.nu + 1, dtype).at[topo.mov_u.reshape(-1)].add(gen.reshape(-1))[:-1]
    return body, mobility
