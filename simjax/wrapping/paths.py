"""The path wrapping engine: OpenSim's ``GeometryPath::applyWrapObjects``, vectorized.

A GeometryPath with PathWraps is wrapped as OpenSim wraps it. Its *current path* starts
as its active points; then, for each PathWrap in order, the wrap object's two wrap
points are removed from the current path, every segment of the current path inside the
PathWrap's ``range`` (skipping the surface between two wrap points of one object) is
wrapped over the object (``simjax.wrapping.geometry``), and the first *mandatory* wrap
(the segment crosses the object), else the wrap that lengthens the path least, inserts
the two tangent points into the current path. A path with one PathWrap does this once;
with several, up to 8 passes until the length changes by less than 0.5 mm, swapping
the first two PathWraps after the first pass if the first did not wrap and the second
found an end point inside its object. The length sums straight pieces and the arcs
over the surfaces.

Vectorization. All wrapped paths are padded to a common number of points ``N`` and of
PathWraps ``W`` and evaluated together: the current path is a fixed-length array of
node ids (points ``0..N-1``, then wrap ``w``'s points ``N+2w``, ``N+2w+1``) edited by
masked compaction and insertion; every candidate segment of a PathWrap is wrapped at
once, with one geometry call per wrap-object type, so the program grows with the
number of shapes, never with the number of paths, points or PathWraps. The paths
with several PathWraps go through a ``while_loop`` over passes (a ``fori_loop`` over
their PathWraps within a pass), which ends once they converge or a pass wraps nothing.
The paths with one PathWrap go through its first pass with them when they are few, so
that each shape's geometry is compiled once; when many, their PathWrap is applied
to all paths in one call before the loop, which then carries only the others.

Cost on the CPU. A program there costs about one kernel launch per fused operation,
and every iteration of a loop pays for its body's kernels, so the iterative work is
kept to what OpenSim's answer needs: an ellipsoid (whose wraps are all mandatory) is
solved for a path's first crossing segment only, for the paths that have one, and not
at all when none crosses;
a cylinder's tangent points are computed only for the candidate segments that can wrap
(OpenSim's tests before them rule out the rest), a chunk of them at a time, and its
tangent-point adjustment (paths with several PathWraps) on the segments whose wrap can
be taken, one per path at a time; loops carry few arrays and sum short axes
element-wise (a reduction is a kernel of its own).

OpenSim's cached positions. OpenSim caches a point's location in Ground when it is
first asked for (``Point::getLocationInGround``), and moving a wrap point does not
invalidate it. A wrap point therefore keeps, for straight pieces, the Ground position
it had at the end of the first pass that put it on the path, while later passes
re-wrap from its latest position. simjax reproduces this (``_in_ground``), which is
what makes paths with several PathWraps (``TRIlong`` of ``arm26``) agree to rounding.

Forces and speeds. The tangent points are stations of the wrap object's body while
the tension acts: each straight piece between points of different bodies pulls its
two ends towards each other (OpenSim ``GeometryPath::produceForces``), and the
lengthening speed sums the relative velocities of all consecutive points projected
on their directions (``calcSpeedBetween``). The result is the ``Segments`` record of
``simjax.muscles.path`` for the path's original segments, plus the tangent points
(``TangentPoints``) with their force and speed directions.

Derivatives. The passes run on constants (``stop_gradient``); they return, for each
wrap, the segment ends in the wrap frame with the tangent points and arc computed
there, and ``_rewrap`` places these on the wrap object's body, differentiably in its
pose; their derivatives with respect to the objects' sizes are those of the geometry
re-evaluated at the same ends and the recorded solution (``_recorded``, a
``custom_jvp`` whose rule runs only when the sizes are differentiated; the ellipsoid's
tangent-point iteration is not run again). So the tangent points and arcs move with the wrap
object's body as the coordinates change, and the derivative of the length with
respect to the coordinates is OpenSim's virtual-work moment arm (``computeMomentArm``),
the one consistent with the forces applied. (OpenSim's tangent points are not exactly
tangent, so this differs slightly from the derivative of the length itself: see
``simjax.wrapping.geometry``.) Forward and reverse mode both work; the wrap status is
piecewise constant, so derivatives do not see wrap onset. The passes are the context's
search ``"wrap_passes"`` (``Context.search``): reverse mode through ``simulate``'s
stages gives each stage's VJP the passes the stages' forward rule made.

Smoothing. A PathWrap with ``smoothing > 0`` blends its wrapped segment to the straight
one near OpenSim's wrap/no-wrap boundaries (``_blend``, ``simjax.wrapping.smooth``),
with forces and speeds that are those of the blended length. Only a wrap whose segment
joins two path points is blended (one whose segment ends at another wrap's tangent
point stays exact), and the choice between candidate segments stays OpenSim's.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import ModelError
from . import _wrapmath as wm
from . import geometry as G
from . import smooth as S
from ._ellipsoid import wrap_ellipsoid_status
from .objects import (
    PathWrap,
    WrapCylinder,
    WrapEllipsoid,
    WrapObject,
    WrapSphere,
    WrapTorus,
    parse_method,
    parse_quadrant,
    wrap_frame_path,
)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Segments:
    """Geometry of the candidate segments ``(j, next(j))``, one per point ``j``.

    ``length (P,)``; ``dir_start (P, 3)``: unit direction leaving point ``j``;
    ``dir_end (P, 3)``: unit direction arriving at ``next(j)``; ``applies (P,)``:
    whether a tension produces a force at the start (the first piece joins different
    bodies, as OpenSim requires); ``applies_end (P,)``: the same at the end (``None``:
    as ``applies``); ``tangent``: the wrap points of wrapped paths
    (``TangentPoints``) or ``None``.
    """

    length: Any
    dir_start: Any
    dir_end: Any
    applies: Any
    applies_end: Any = None
    tangent: Any = None


__all__ = [
    "compile_wrapping",
    "wrap_segments",
    "current_paths",
    "Segments",
    "WrapStatic",
    "TangentPoints",
    "SPHERE",
    "CYLINDER",
    "ELLIPSOID",
    "TORUS",
]

SPHERE, CYLINDER, ELLIPSOID, TORUS = 0, 1, 2, 3
_KINDS = ((WrapSphere, SPHERE), (WrapCylinder, CYLINDER), (WrapEllipsoid, ELLIPSOID), (WrapTorus, TORUS))
_MAX_PASSES = 8  # OpenSim's iteration limit for paths with several PathWraps
_CONVERGED = 0.0005  # m: OpenSim's test between passes


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TangentPoints:
    """The wrap points of all wrapped paths, as stations of the wrap objects' bodies.

    ``points (K, 3)`` in Ground; ``mob (K,)`` (static) their bodies; ``row (K,)``
    (static) their paths' rows; ``force_dir (K, 3)``: the force on the point per unit
    tension (the unit directions to its neighbours on other bodies, summed);
    ``speed_dir (K, 3)``: the same over all straight neighbours (lengthening speed
    ``-= v . speed_dir``). Wrap points not in the current path have zero directions.
    """

    points: jax.Array
    force_dir: jax.Array
    speed_dir: jax.Array
    mob: np.ndarray = dataclasses.field(metadata=dict(static=True))
    row: np.ndarray = dataclasses.field(metadata=dict(static=True))


@dataclasses.dataclass(frozen=True, eq=False)
class _Batch:
    """Wrapped paths padded to ``N`` points and ``W`` PathWraps (static numpy).

    ``rows (G,)`` path rows; ``pt (G, N)`` flat point indices (``P`` pads);
    ``pt_ok (G, N)``; ``obj (G, W)`` wrap-object index; ``kind``, ``start``, ``end``,
    ``axis``, ``sign``, ``method (G, W)``; ``on (G, W)``: the PathWrap exists and its
    object is active; ``node_mob``, ``node_obj (G, N + 2W)``: body and wrap object
    (``-1``: none) of every node; ``groups``: ``(kind, paths, method, single)`` for
    each wrap-object type and paths with one or several PathWraps (``method`` None
    where its PathWraps differ); ``single (G,)``:
    the path has one PathWrap; ``slot_kinds (W, 4)``: whether some path may meet each
    wrap-object type in each slot (the first two PathWraps may trade places);
    ``eps (G, W)``: the PathWraps' ``smoothing`` (m, 0: none); ``exists (G, W)``: the
    PathWrap exists; ``kinds``: ``(kind, paths, method)`` for each wrap-object type.
    """

    rows: np.ndarray
    pt: np.ndarray
    pt_ok: np.ndarray
    obj: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    axis: np.ndarray
    sign: np.ndarray
    method: np.ndarray
    on: np.ndarray
    node_mob: np.ndarray
    node_obj: np.ndarray
    groups: tuple
    single: np.ndarray
    slot_kinds: np.ndarray
    eps: np.ndarray
    exists: np.ndarray
    kinds: tuple

    @property
    def n_points(self) -> int:
        return self.pt.shape[1]

    @property
    def n_wraps(self) -> int:
        return self.obj.shape[1]


@dataclasses.dataclass(frozen=True, eq=False)
class WrapStatic:
    """Static data of the wrapping engine for one model (``compile_wrapping``).

    ``objects``: wrap-object component paths; ``frames``: the PhysicalFrames they
    are fixed to; ``obj_frame``, ``obj_mob``, ``obj_kind (O,)``; ``batch``: the
    wrapped paths, the ``n_single`` with one PathWrap first; ``multi``: the others (with
    several PathWraps) as a batch of their own, or None.
    """

    objects: tuple
    frames: tuple
    obj_frame: np.ndarray
    obj_mob: np.ndarray
    obj_kind: np.ndarray
    batch: _Batch
    n_single: int = 0
    multi: _Batch | None = None


def _kind_of(obj, where: str) -> int:
    for cls, code in _KINDS:
        if isinstance(obj, cls):
            return code
    raise ModelError(
        where, f"wrap object type {type(obj).__name__} is not supported", prop="wrap_object", value=type(obj).__name__
    )


def compile_wrapping(build, topology) -> WrapStatic:
    """Static data of the wrapping engine (called once per build by the path subsystem).

    **Arguments:** ``build``: the ``BuildInfo``; ``topology``: the ``PathTopology``.

    **Returns:** a ``WrapStatic``.

    **Raises:** ``ModelError`` naming the PathWrap for a wrap object that is missing,
    not a WrapObject, or not on a PhysicalFrame, and for a ``range`` outside the path.
    """
    model, tree = build.model, build.tree
    objects, obj_index = [], {}
    frames, frame_index = [], {}
    obj_frame, obj_mob, obj_kind = [], [], []
    entries = []  # (row, [(obj, kind, start, end, axis, sign, method, on)])
    for row, gp_path in enumerate(topology.paths):
        gp = model.find(gp_path)
        if not gp.wraps:
            continue
        n = len(gp.points)
        wraps = []
        for pw in gp.wraps:
            pw_path = f"{gp_path}/{pw.name}"
            if not isinstance(pw, PathWrap):
                raise ModelError(pw_path, "is not a PathWrap", prop="PathWrapSet", value=type(pw).__name__)
            target = build.socket(pw_path, "wrap_object") or pw.wrap_object
            wo = model.find(target) if target else None
            if not isinstance(wo, WrapObject):
                raise ModelError(pw_path, "names no wrap object", prop="socket_wrap_object", value=pw.wrap_object)
            fpath = wrap_frame_path(target)
            if fpath not in tree.frames:
                raise ModelError(target, "a wrap object must belong to a PhysicalFrame", prop="frame", value=fpath)
            if target not in obj_index:
                if fpath not in frame_index:
                    frame_index[fpath] = len(frames)
                    frames.append(fpath)
                obj_index[target] = len(objects)
                objects.append(target)
                obj_frame.append(frame_index[fpath])
                obj_mob.append(build.frame_mob(fpath))
                obj_kind.append(_kind_of(wo, target))
            lo, hi = pw.range
            start = lo - 1 if lo >= 1 else 0
            end = hi - 1 if hi >= 1 else n - 1
            if start >= n or end >= n:
                raise ModelError(pw_path, f"range points past the path's {n} points", prop="range", value=pw.range)
            axis, sign = parse_quadrant(wo.quadrant, target)
            wraps.append(
                (
                    obj_index[target],
                    obj_kind[obj_index[target]],
                    start,
                    end,
                    axis,
                    sign,
                    parse_method(pw.method, pw_path),
                    bool(wo.active),
                    float(pw.smoothing),
                )
            )
        entries.append((row, wraps))
    obj_mob = np.asarray(obj_mob, np.int32)
    entries.sort(key=lambda e: len(e[1]) > 1)  # (stable) the paths with one PathWrap first
    batch = _batch(entries, topology, obj_mob)
    n_single = int(batch.single.sum())
    rows = np.arange(len(entries))
    return WrapStatic(
        objects=tuple(objects),
        frames=tuple(frames),
        obj_frame=np.asarray(obj_frame, np.int32),
        obj_mob=obj_mob,
        obj_kind=np.asarray(obj_kind, np.int32),
        batch=batch,
        n_single=n_single,
        multi=_subset(batch, rows[n_single:]) if n_single < len(entries) else None,
    )


def _batch(entries, topology, obj_mob):
    P = topology.n_points
    starts = {}
    for j, r in enumerate(topology.path_id):
        starts.setdefault(int(r), j)
    n_pts = [int(topology.end[starts[r]] - starts[r]) for r, _ in entries]
    Gn, N, W = len(entries), max(n_pts), max(len(w) for _, w in entries)
    pt = np.full((Gn, N), P, np.int32)
    pt_ok = np.zeros((Gn, N), bool)
    cols = {k: np.zeros((Gn, W), np.int32) for k in ("obj", "kind", "start", "end", "axis", "sign", "method")}
    on = np.zeros((Gn, W), bool)
    eps = np.zeros((Gn, W))
    node_mob = np.full((Gn, N + 2 * W), -1, np.int32)
    node_obj = np.full((Gn, N + 2 * W), -1, np.int32)
    for g, ((row, wraps), n) in enumerate(zip(entries, n_pts)):
        pt[g, :n] = np.arange(starts[row], starts[row] + n)
        pt_ok[g, :n] = True
        node_mob[g, :n] = topology.mob[pt[g, :n]]
        for w, (obj, kind, start, end, axis, sign, method, active, smoothing) in enumerate(wraps):
            for k, v in zip(
                ("obj", "kind", "start", "end", "axis", "sign", "method"), (obj, kind, start, end, axis, sign, method)
            ):
                cols[k][g, w] = v
            on[g, w] = active
            eps[g, w] = smoothing
            node_mob[g, N + 2 * w : N + 2 * w + 2] = obj_mob[obj]
            node_obj[g, N + 2 * w : N + 2 * w + 2] = obj
    exists = np.zeros((Gn, W), bool)
    for g, (_, wraps) in enumerate(entries):
        exists[g, : len(wraps)] = True
    return _grouped(
        rows=np.asarray([r for r, _ in entries], np.int32),
        pt=pt,
        pt_ok=pt_ok,
        on=on & exists,
        exists=exists,
        node_mob=node_mob,
        node_obj=node_obj,
        eps=eps,
        **cols,
    )


def _by_kind(mask, kind, method) -> list:
    """``(code, rows, method)`` for each wrap-object type among the PathWraps ``mask
    (G, W)``: the paths that have one, and their method when all share it (else None)."""
    out = []
    for code in (SPHERE, CYLINDER, ELLIPSOID, TORUS):
        m = mask & (kind == code)
        if m.any():
            methods = set(method[m].tolist())
            out.append((code, np.flatnonzero(m.any(1)).astype(np.int32), methods.pop() if len(methods) == 1 else None))
    return out


def _grouped(**arrays) -> _Batch:
    """A ``_Batch`` from its per-path arrays, with the groups worked out."""
    kind, on, exists = arrays["kind"], arrays["on"], arrays["exists"]
    single = exists.sum(1) == 1
    method = arrays["method"]
    # (paths with one PathWrap skip the cylinder's tangent adjustment; ordered by type)
    groups = sorted(
        (
            (code, rows, m, one)
            for one in (True, False)
            for code, rows, m in _by_kind(on & (single[:, None] == one), kind, method)
        ),
        key=lambda g: g[0],
    )
    kinds = _by_kind(on, kind, method)
    W = kind.shape[1]
    slot_kinds = np.zeros((W, 4), bool)
    for s in range(W):
        for t in (t for t in ((0, 1) if s < 2 else (s,)) if t < W):
            m = on[:, t] & ((t == s) | ~single)
            slot_kinds[s, kind[m, t]] = True
    return _Batch(groups=tuple(groups), kinds=tuple(kinds), single=single, slot_kinds=slot_kinds, **arrays)


def _subset(batch: _Batch, rows: np.ndarray) -> _Batch:
    """The paths ``rows`` of a batch, as a batch of their own."""
    names = (
        "rows",
        "pt",
        "pt_ok",
        "obj",
        "kind",
        "start",
        "end",
        "axis",
        "sign",
        "method",
        "on",
        "exists",
        "node_mob",
        "node_obj",
        "eps",
    )
    return _grouped(**{n: getattr(batch, n)[rows] for n in names})


# -- evaluation ------------------------------------------------------------------------------


_NAMES = {SPHERE: "sphere", CYLINDER: "cylinder", ELLIPSOID: "ellipsoid", TORUS: "torus"}


def _shape_args(kind: int, d, ax, sg, m, single: bool) -> tuple:
    """The arguments after ``(p1, p2)`` of ``wrap_<shape>`` (and of
    ``segment_weight``) from the engine's ``dims`` ``d`` (radius / radius, length /
    semi-axes / inner, outer radius), quadrant, method and one-PathWrap flag."""
    if kind == SPHERE:
        return d[0], ax, sg
    if kind == ELLIPSOID:
        return d, ax, sg, m
    return d[0], d[1], ax, sg, single  # cylinder, torus


def _wrap_one(kind: int, method, single):
    """The geometry function of one wrap-object type: ``(p1, p2, dims, axis, sign,
    method) -> WrapResult``. ``method`` is static unless None; ``single``: the paths
    have one PathWrap (a Python bool, or a traced flag for the cylinder's and torus's
    tangent adjustment)."""
    wrap = S.WRAP_FUNCTIONS[_NAMES[kind]]
    return lambda p1, p2, d, ax, sg, m: wrap(
        p1, p2, *_shape_args(kind, d, ax, sg, m if method is None else method, single)
    )


def _weight_one(kind: int, single: bool):
    """The smoothing weight of one wrap-object type: ``(p1, p2, dims, axis, sign, eps)
    -> w`` (``simjax.wrapping.smooth.segment_weight``)."""
    return lambda p1, p2, d, ax, sg, e: S.segment_weight(
        _NAMES[kind], p1, p2, *_shape_args(kind, d, ax, sg, 0, single), eps=e
    )


def wrap_object_params(model, static: WrapStatic) -> dict:
    """Traced parameters of the wrap objects: ``R (O, 3, 3)``, ``p (O, 3)`` (pose in
    their frames) and ``dims (O, 3)`` (the shape's sizes, m)."""
    dtype = jnp.result_type(float)
    Rs, ps, dims = [], [], []
    for path in static.objects:
        wo = model.find(path)
        R, p = wo.transform()
        Rs.append(jnp.asarray(R, dtype))
        ps.append(jnp.asarray(p, dtype))
        if isinstance(wo, WrapSphere):
            d = (wo.radius, 0.0, 0.0)
        elif isinstance(wo, WrapCylinder):
            d = (wo.radius, wo.length, 0.0)
        elif isinstance(wo, WrapTorus):
            d = (wo.inner_radius, wo.outer_radius, 0.0)
        else:
            d = tuple(wo.dimensions[i] for i in range(3))
        dims.append(jnp.stack([jnp.asarray(x, dtype).reshape(()) for x in d]))
    return {"R": jnp.stack(Rs), "p": jnp.stack(ps), "dims": jnp.stack(dims)}


def _norm(v):
    sq = wm.dot(v, v)
    return jnp.sqrt(jnp.where(sq > 0.0, sq, 1.0)) * (sq > 0.0)


def _unit(v):
    n = _norm(v)
    return v / jnp.where(n > 0.0, n, 1.0)[..., None]


def _gather_nodes(nodes, seq):
    """Positions ``(G, L, 3)`` of the nodes of ``seq`` (padding reads node 0)."""
    return jnp.take_along_axis(nodes, jnp.maximum(seq, 0)[..., None], axis=1)


def _remove(seq, ids):
    """``seq`` without the node ids ``ids (G, k)``, compacted (``-1`` pads the end)."""
    keep = (seq >= 0) & ~jnp.any(seq[..., None] == ids[:, None, :], -1)
    pos = jnp.where(keep, jnp.cumsum(keep, -1) - 1, seq.shape[-1])
    out = jnp.full_like(seq, -1)
    return jax.vmap(lambda o, p, s: o.at[p].set(s, mode="drop"))(out, pos, seq)


def _insert_pair(seq, at, a, b, do):
    """Insert nodes ``a``, ``b`` at position ``at`` of each row where ``do``."""
    L = seq.shape[-1]
    k = jnp.arange(L)
    at = at[:, None]
    shifted = jnp.take_along_axis(seq, jnp.maximum(k[None, :] - 2, 0) * jnp.ones_like(seq), axis=1)
    new = jnp.where(k < at, seq, jnp.where(k == at, a[:, None], jnp.where(k == at + 1, b[:, None], shifted)))
    return jnp.where(do[:, None], new, seq)


class _Pass:
    """One batch's data and one pass over its PathWraps (closures over static data)."""

    def __init__(self, batch: _Batch, X_obj, dims, orig):
        self.b = batch
        self.R_obj, self.o_obj = X_obj
        self.dims = dims
        self.orig = orig  # (G, N, 3) the path points in Ground
        N, W = batch.n_points, batch.n_wraps
        self.node_wrap = np.concatenate([np.full(N, -1), np.repeat(np.arange(W), 2)]).astype(np.int32)
        self.node_second = np.concatenate([np.zeros(N, bool), np.tile([False, True], W)])

    def nodes(self, wpos):
        G_ = self.orig.shape[0]
        return jnp.concatenate([self.orig, wpos.reshape(G_, -1, 3)], 1)

    def length(self, seq, wgnd, warc, lever=None):
        """Length of the current paths ``(G,)`` and its pieces.

        **Arguments:** ``seq (G, L)`` the current paths; ``wgnd (G, W, 2, 3)`` the
        wrap points' positions in Ground for straight pieces (``_in_ground``); ``warc
        (G, W)`` the arcs; ``lever``: zero-valued offsets of the wrap points giving
        pieces between different bodies the derivative of the latest wrap points
        (``_lever``), or None.

        **Returns:** ``(length, piece, surface, differ, ok, pts)``: per piece
        ``(G, L-1)`` its length, whether it is an arc, whether its ends are on
        different bodies, whether it exists; ``pts (G, L, 3)`` the nodes.
        """
        pts = _gather_nodes(self.nodes(wgnd), seq)
        a, b = seq[:, :-1], seq[:, 1:]
        ok = (a >= 0) & (b >= 0)
        obj_a = jnp.take_along_axis(jnp.asarray(self.b.node_obj), jnp.maximum(a, 0), 1)
        obj_b = jnp.take_along_axis(jnp.asarray(self.b.node_obj), jnp.maximum(b, 0), 1)
        surface = ok & (obj_a >= 0) & (obj_a == obj_b)
        mob = jnp.take_along_axis(jnp.asarray(self.b.node_mob), jnp.maximum(seq, 0), 1)
        differ = ok & (mob[:, :-1] != mob[:, 1:])
        bw = jnp.asarray(self.node_wrap)[jnp.maximum(b, 0)]
        arc = jnp.where(
            jnp.asarray(self.node_second)[jnp.maximum(b, 0)], jnp.take_along_axis(warc, jnp.maximum(bw, 0), 1), 0.0
        )
        vec = pts[:, 1:] - pts[:, :-1]
        if lever is not None:
            G_ = self.orig.shape[0]
            off = _gather_nodes(jnp.concatenate([jnp.zeros_like(self.orig), lever.reshape(G_, -1, 3)], 1), seq)
            vec = vec + jnp.where(differ[..., None], off[:, 1:] - off[:, :-1], 0.0)
        piece = jnp.where(surface, arc, _norm(vec))
        piece = jnp.where(ok, piece, 0.0)
        return jnp.sum(piece, -1), piece, surface, differ, ok, pts

    def window(self, s, L: int) -> int:
        """How many segments from a PathWrap's first one in range can be candidates in
        slot ``s`` (static): the widest range, and the points of the PathWraps applied
        before it (``s`` of them in the first pass, any other later)."""
        b = self.b
        width = b.end - b.start
        if isinstance(s, int):  # (None: any slot)
            width, others = width[b.on[:, s], s], s
        else:
            width, others = width[b.on], b.n_wraps - 1
        return int(np.clip(max(width, default=1) + 2 * others, 1, L - 1))

    def slot(self, s, carry, active, done=None):
        """Apply the PathWrap in slot ``s`` of every path's order (``s`` traced, or a
        Python int in the first pass, before any PathWraps trade places) to the paths
        not ``done`` (``(G,)``, None: all)."""
        b = self.b
        seq, wpos, warc, order, result, halted, wgnd, cached, wends, wr = carry
        G_, N = self.orig.shape[0], b.n_points
        rows = jnp.arange(G_)
        w = order[:, s]
        ids = jnp.stack([N + 2 * w, N + 2 * w + 1], -1)
        first = isinstance(s, int) and s == 0  # (the first pass's first slot: no wrap points yet)
        # (a path whose earlier PathWrap had no active point in range stops there)
        if not first:
            seq = jnp.where(halted[:, None], seq, _remove(seq, ids))
        on = jnp.asarray(b.on)[rows, w] & ~halted
        if done is not None:
            on = on & ~done
        # the first and last active original points in the PathWrap's range
        start, end = jnp.asarray(b.start)[rows, w], jnp.asarray(b.end)[rows, w]
        j = jnp.arange(N)
        inr = active & (j[None] >= start[:, None]) & (j[None] <= end[:, None])
        any_in = jnp.any(inr, -1)
        halted = halted | (on & ~any_in)
        on = on & any_in
        smp = jnp.argmax(inr, -1)
        emp = N - 1 - jnp.argmax(inr[:, ::-1], -1)
        k_start = jnp.argmax(seq == smp[:, None], -1)
        k_end = jnp.argmax(seq == emp[:, None], -1)
        # candidate segments (seq[k], seq[k+1]) for k_start <= k < k_end, in a window
        # of the K segments from k_start (the geometry is solved on the window only)
        L = seq.shape[-1]
        K = self.window(s, L)
        k = k_start[:, None] + jnp.arange(K + 1)[None]  # (G, K + 1) the window's nodes
        win = jnp.take_along_axis(seq, jnp.minimum(k, L - 1), 1)
        a, c = win[:, :-1], win[:, 1:]
        node_obj = jnp.asarray(b.node_obj)
        oa = jnp.take_along_axis(node_obj, jnp.maximum(a, 0), 1)
        oc = jnp.take_along_axis(node_obj, jnp.maximum(c, 0), 1)
        cand = on[:, None] & (k[:, :-1] < k_end[:, None]) & (c >= 0) & ~((oa >= 0) & (oa == oc))
        obj = jnp.asarray(b.obj)[rows, w]
        R, o = self.R_obj[obj], self.o_obj[obj]
        to_w = lambda p: spatial.mat_tvec(R[:, None], p - o[:, None, :])  # noqa: E731
        pw = to_w(_gather_nodes(self.nodes(wpos), win))
        gw = pw if first else to_w(_gather_nodes(self.nodes(_in_ground(wpos, wgnd, cached)), win))
        p1w, p2w, g1w, g2w = pw[:, :-1], pw[:, 1:], gw[:, :-1], gw[:, 1:]
        kind = jnp.asarray(b.kind)[rows, w]
        kinds = b.kinds
        if isinstance(s, int):  # (a static slot: the first pass, in the paths' own order)
            kinds = _by_kind(b.on[:, s : s + 1], b.kind[:, s : s + 1], b.method[:, s : s + 1])
        whole = len(kinds) == 1 and len(kinds[0][1]) == G_  # (one wrap-object type: no merging)
        if not whole:
            status = jnp.zeros((G_, K), jnp.int32)
            r1 = jnp.zeros((G_, K, 3), p1w.dtype)
            r2, arc = r1, jnp.zeros((G_, K), p1w.dtype)
        for code, idx, method in kinds:
            wi = w[idx]
            args = (
                self.dims[obj[idx]],
                jnp.asarray(b.axis)[idx, wi],
                jnp.asarray(b.sign)[idx, wi],
                jnp.asarray(b.method)[idx, wi],
            )
            single = b.single[idx]
            solve = functools.partial(
                _SOLVERS.get(code, _solve_all),
                code=code,
                method=method,
                single=True if single.all() else jnp.asarray(single),
            )

            def skip(p1w, p2w, cand, args):
                return (
                    jnp.zeros(cand.shape, jnp.int32),
                    jnp.zeros_like(p1w),
                    jnp.zeros_like(p1w),
                    jnp.zeros(cand.shape, p1w.dtype),
                )

            mine = (kind[idx] == code)[:, None]
            # (only this type's segments are candidates: the others' sizes mean nothing to it)
            sub = (p1w, p2w, cand) if whole else (p1w[idx], p2w[idx], cand[idx] & mine)
            if isinstance(s, int):
                st, g1, g2, ga = solve(*sub, args)
            else:  # (the slot index is not batched, so this stays a branch under vmap)
                st, g1, g2, ga = jax.lax.cond(jnp.asarray(b.slot_kinds[:, code])[s], solve, skip, *sub, args)
            if whole:
                status, r1, r2, arc = st, g1, g2, ga
                continue
            status = status.at[idx].set(jnp.where(mine, st, status[idx]))
            r1 = r1.at[idx].set(jnp.where(mine[..., None], g1, r1[idx]))
            r2 = r2.at[idx].set(jnp.where(mine[..., None], g2, r2[idx]))
            arc = arc.at[idx].set(jnp.where(mine, ga, arc[idx]))
        mandatory = cand & (status == G.MANDATORY_WRAP)
        wrapped = cand & (status == G.WRAPPED)
        change = _norm(g1w - r1) + arc + _norm(r2 - g2w) - _norm(g2w - g1w)
        has_mandatory = jnp.any(mandatory, -1)
        best = jnp.where(has_mandatory, jnp.argmax(mandatory, -1), jnp.argmin(jnp.where(wrapped, change, jnp.inf), -1))
        chosen = has_mandatory | jnp.any(wrapped, -1)
        last = K - 1 - jnp.argmax(cand[:, ::-1], -1)
        res_status = jnp.where(
            has_mandatory, G.MANDATORY_WRAP, jnp.where(jnp.any(cand, -1), status[rows, last], G.NO_WRAP)
        )
        W = b.n_wraps
        result = jnp.where(jnp.arange(W) == s, res_status[:, None], result)
        # the tangent points, back in Ground, become wrap points of the current path
        tangent = jnp.stack([r1[rows, best], r2[rows, best]], 1)  # (G, 2, 3)
        hit = (jnp.arange(W)[None] == w[:, None]) & chosen[:, None]  # (G, W)
        put = lambda x, old: jnp.where(_bcast(hit, old), x[:, None], old)  # noqa: E731
        wr = put(tangent, wr)
        wpos = put(spatial.mat_vec(R[:, None], tangent) + o[:, None], wpos)
        warc = jnp.where((jnp.arange(W)[None] == w[:, None]), jnp.where(chosen, arc[rows, best], 0.0)[:, None], warc)
        wends = put(jnp.stack([p1w[rows, best], p2w[rows, best]], 1), wends)
        seq = _insert_pair(seq, k_start + best + 1, ids[:, 0], ids[:, 1], chosen)
        return seq, wpos, warc, order, result, halted, wgnd, cached, wends, wr


# -- the geometry of a slot: (p1w, p2w (g, K, 3), cand (g, K), args) -> (status, r1, r2, arc) per candidate


def _solve_all(p1w, p2w, cand, args, *, code, method, single):
    """Every candidate segment wrapped (spheres, tori)."""
    wrap = S.WRAP_FUNCTIONS[_NAMES[code]]
    static = isinstance(single, bool)

    def fn(p1, p2, d, ax, sg, m, one=single):
        return wrap(p1, p2, *_shape_args(code, d, ax, sg, m if method is None else method, one))

    args = args if static else args + (single,)
    res = jax.vmap(jax.vmap(fn, (0, 0) + (None,) * len(args)))(p1w, p2w, *args)
    return res.status, res.r1, res.r2, res.length


def _over_segments(fn, p1w, p2w, *per_path):
    """``fn(p1, p2, *per_path)`` on every segment of ``p1w``, ``p2w`` ``(g, K, 3)``, with
    ``per_path`` arguments ``(g,)``; returns its outputs with leading ``(g, K)``.

    The segments are laid out component-major (three contiguous ``(g K,)`` blocks), the
    layout in which XLA's CPU kernels take a vector's components cheaply: a cylinder's
    geometry on 400 segments runs in 13 us instead of 21 with the same kernels.
    """
    g, K = p1w.shape[:2]
    flat = lambda a: jnp.broadcast_to(a[:, None], (g, K) + a.shape[1:]).reshape((g * K,) + a.shape[1:])  # noqa: E731
    out = jax.vmap(fn, (1, 1) + (0,) * len(per_path), -1)(
        p1w.reshape(-1, 3).T, p2w.reshape(-1, 3).T, *map(flat, per_path)
    )
    return jax.tree.map(lambda o: jnp.moveaxis(o, -1, 0).reshape((g, K) + o.shape[:-1]), out)


def _solve_cylinder(p1w, p2w, cand, args, *, code, method, single):
    """Cylinders: the tangent points of the candidate segments that can wrap; OpenSim's
    tangent adjustment (paths with several PathWraps) only on the segments whose wrap
    can be taken: a path's first mandatory wrap, else all its optional ones."""
    dims, axis, sign, _ = args
    radius = dims[:, 0]
    st, r1, r2, long_wrap, arc = _cylinders_that_wrap(p1w, p2w, cand, radius, dims[:, 1], axis, sign)
    if not (isinstance(single, bool) and single):
        mandatory = cand & (st == G.MANDATORY_WRAP)
        first = jnp.arange(cand.shape[1])[None] == jnp.argmax(mandatory, -1)[:, None]
        need = ~single[:, None] & jnp.where(jnp.any(mandatory, -1, keepdims=True), first, cand & (st == G.WRAPPED))
        r1, r2 = _adjust_needed(p1w, p2w, r1, r2, radius, long_wrap, need)
        arc = jnp.where(need, G.spiral_length(r1, r2, radius[:, None], long_wrap), arc)
    return st, r1, r2, arc


def _cylinders_that_wrap(p1w, p2w, cand, radius, length, axis, sign):
    """``(status, r1, r2, long_wrap, arc)`` of every segment ``(g, K)``, the tangent
    points and arcs computed, on a CPU, only where a candidate can wrap (elsewhere
    zero).

    The status of a segment that cannot wrap (no wrap, or an end inside) comes from
    OpenSim's tests before the tangent points, which cost a tenth of the rest; the
    others, usually a few in all, are solved ``_CYLINDER_CHUNK`` at a time (at least
    a quarter of the paths) in a ``while_loop``, rather than every segment of every
    path (on a CPU the geometry's cost is proportional to the segments solved; an
    accelerator solves them all at once).
    """
    g, K = cand.shape
    per_path = (radius, length, axis, sign)

    def at_once(p1w, p2w, cand):
        st, r1, r2, long_wrap = _over_segments(G._cylinder, p1w, p2w, *per_path)
        return st.astype(jnp.int32), r1, r2, long_wrap, G.spiral_length(r1, r2, radius[:, None], long_wrap)

    if g * K <= _CYLINDERS_AT_ONCE:
        return at_once(p1w, p2w, cand)
    chunk = max(_CYLINDER_CHUNK, -(-g // 4))
    flat = lambda a: a.reshape((g * K,) + a.shape[2:])  # noqa: E731

    def chunked(p1w, p2w, cand):
        p1f, p2f = flat(p1w), flat(p2w)

        def solve(carry):
            st, r1, r2, long_wrap, arc, left = carry
            idx = jnp.nonzero(left, size=chunk, fill_value=g * K)[0]  # (g K: dropped on the way back)
            at = jnp.minimum(idx, g * K - 1)
            on = at // K  # (their paths)
            s, a, b, lw = _over_segments(G._cylinder, p1f[at][:, None], p2f[at][:, None], *(x[on] for x in per_path))
            s, a, b, lw = s[:, 0], a[:, 0], b[:, 0], lw[:, 0]
            put = lambda x, v: x.at[idx].set(v, mode="drop")  # noqa: E731
            return (
                put(st, s.astype(jnp.int32)),
                put(r1, a),
                put(r2, b),
                put(long_wrap, lw),
                put(arc, G.spiral_length(a, b, radius[on], lw)),
                left.at[idx].set(False, mode="drop"),
            )

        early = _over_segments(functools.partial(G._cylinder, early=True), p1w, p2w, *per_path)
        zeros = jnp.zeros((g * K, 3), p1w.dtype)
        init = (
            flat(early).astype(jnp.int32),
            zeros,
            zeros,
            jnp.zeros(g * K, bool),
            jnp.zeros(g * K, p1w.dtype),
            flat(cand & (early >= G.WRAPPED)),
        )
        st, r1, r2, long_wrap, arc, _ = jax.lax.while_loop(lambda c: jnp.any(c[-1]), solve, init)
        return st.reshape(g, K), r1.reshape(g, K, 3), r2.reshape(g, K, 3), long_wrap.reshape(g, K), arc.reshape(g, K)

    return jax.lax.platform_dependent(p1w, p2w, cand, cpu=chunked, default=at_once)


def _adjust_needed(p1w, p2w, r1, r2, radius, long_wrap, need):
    """``adjust_tangent_points`` on the segments ``need (g, K)``, one per path at a time
    (usually one in all), so the loop runs on ``g`` segments, not ``g K``."""
    rows = jnp.arange(need.shape[0])

    def one(carry):
        r1, r2, need = carry
        k = jnp.argmax(need, -1)
        a1, a2 = G.adjust_tangent_points(
            p1w[rows, k], p2w[rows, k], r1[rows, k], r2[rows, k], radius, long_wrap[rows, k], need[rows, k]
        )
        return r1.at[rows, k].set(a1), r2.at[rows, k].set(a2), need.at[rows, k].set(False)

    r1, r2, _ = jax.lax.while_loop(lambda c: jnp.any(c[2]), one, (r1, r2, need))
    return r1, r2


def _solve_ellipsoid(p1w, p2w, cand, args, *, code, method, single):
    """Ellipsoids: every wrap is mandatory, so only a path's first one is solved, for
    the paths that have one, a chunk of them at a time (at least a quarter of the
    paths, so usually in one iteration), and nothing when no segment crosses."""
    fn = _wrap_one(code, method, True)
    st = jax.vmap(jax.vmap(wrap_ellipsoid_status, (0, 0, None)))(p1w, p2w, args[0])
    mandatory = cand & (st == G.MANDATORY_WRAP)
    first = jnp.argmax(mandatory, -1)
    g = p1w.shape[0]
    chunk = -(-g // 4)

    def solve(carry):
        r1, r2, length, left = carry
        idx = jnp.nonzero(left, size=chunk, fill_value=g)[0]  # (g: dropped on the way back)
        at = jnp.minimum(idx, g - 1)
        one = jax.vmap(fn)(p1w[at, first[at]], p2w[at, first[at]], *(a[at] for a in args))
        put = lambda x, v: x.at[idx].set(v, mode="drop")  # noqa: E731
        return put(r1, one.r1), put(r2, one.r2), put(length, one.length), left.at[idx].set(False, mode="drop")

    zeros = jnp.zeros((g, 3), p1w.dtype)
    init = (zeros, zeros, jnp.zeros(g, p1w.dtype), jnp.any(mandatory, -1))
    r1, r2, length, _ = jax.lax.while_loop(lambda c: jnp.any(c[-1]), solve, init)
    at = jnp.arange(g)
    put = lambda v: jnp.zeros(st.shape + v.shape[1:], v.dtype).at[at, first].set(v)  # noqa: E731
    return st, put(r1), put(r2), put(length)


# _cylinders_that_wrap: segments per iteration of its loop (at least), and up to how many
# it solves all at once, where the loop would cost about what it saves (a cylinder costs
# about 0.12 us a segment on a CPU core)
_CYLINDER_CHUNK = 8
_CYLINDERS_AT_ONCE = 16
# _wrap_batch: up to how many segments (the paths with one PathWrap times the window)
# the passes' loop carries, for compiling each shape's geometry once, rather than
# applying their PathWrap before it (each later iteration pays for them: arm26, 4 x
# 8, runs as fast either way; Rajagopal2016, 38 x 6, a third slower in the loop)
_ONE_LOOP_SEGMENTS = 64
_SOLVERS = {CYLINDER: _solve_cylinder, ELLIPSOID: _solve_ellipsoid}


def _in_ground(wpos, wgnd, cached):
    """The wrap points' positions in Ground as OpenSim uses them for straight pieces.

    OpenSim caches a point's location in Ground the first time it is asked for in a
    realization (``Point::getLocationInGround``), and moving a wrap point
    (``PathWrapPoint::setLocation``) does not invalidate that cache. So a wrap point
    keeps the Ground position ``wgnd`` of the end of the first pass that put it on the
    path (``cached``): later passes re-wrap from its latest position ``wpos``, but
    straight lengths, the length change that chooses a segment, the path length and
    the force directions use the cached one. (Forces still act at the latest
    position: see ``_lever``.)
    """
    return jnp.where(cached[..., None, None], wgnd, wpos)


def _lever(wpos, wgnd, cached):
    """Zero offsets whose derivative moves a cached wrap point from its cached to its
    latest position, both stations of the wrap object's body.

    Added to the ends of pieces between different bodies, they make the derivative of
    the length OpenSim's moment arm, in which the unit tension pulls along the cached
    directions at the latest positions (``GeometryPath::produceForces``); pieces on
    one body keep a zero derivative, as OpenSim applies no force along them.
    """
    sg = jax.lax.stop_gradient
    return jnp.where(cached[..., None, None], (wpos - sg(wpos)) - (wgnd - sg(wgnd)), 0.0)


def _wrap_batch(static: WrapStatic, X_obj, dims, points, active):
    """Run OpenSim's passes on constants: ``(seq, wends, cached, wr, warc)``.

    The paths go pass after pass through a ``while_loop`` (``_passes``), until their
    lengths converge, nothing wraps, or the passes run out; a path with one PathWrap is
    done after the first. When more than ``_ONE_LOOP_SEGMENTS`` segments of such
    paths would ride along, their PathWrap is applied to every path at once before the
    loop, which then carries only the others (``static.multi``).

    **Arguments:** ``X_obj``: the wrap objects' rotations and origins in Ground;
    ``dims (O, 3)``; ``points (P, 3)`` in Ground; ``active (P,)``.

    **Returns:** the final current paths ``seq (G, L)``; for each wrap, of its latest
    wrap and of the wrap whose tangent points OpenSim cached (``_in_ground``): the
    segment ends ``wends (G, W, 2, 2, 3)`` and the tangent points ``wr`` (same
    shape), both in the wrap frame, and the arcs ``warc (G, W, 2)``; ``cached (G,
    W)``: whether the wrap points were cached. Nothing here is differentiated
    (``_rewrap`` gives the wrap points their derivatives).
    """
    batch = static.batch
    sg = jax.lax.stop_gradient
    X_obj, dims, points = sg(X_obj), sg(dims), sg(points)
    orig = _path_points(batch, points)
    act_ext = jnp.concatenate([jnp.asarray(active), jnp.zeros(1, bool)])
    act = act_ext[jnp.asarray(batch.pt)] & jnp.asarray(batch.pt_ok)
    Gn, N, W = batch.pt.shape[0], batch.n_points, batch.n_wraps
    L = N + 2 * W
    # the active points, compacted
    pos = jnp.where(act, jnp.cumsum(act, -1) - 1, L)
    seq = jax.vmap(lambda p, v: jnp.full(L, -1, jnp.int32).at[p].set(v, mode="drop"))(
        pos, jnp.broadcast_to(jnp.arange(N, dtype=jnp.int32), (Gn, N))
    )
    dtype = points.dtype
    zeros_w = jnp.zeros((Gn, W, 2, 3), dtype)
    zeros_a = jnp.zeros((Gn, W), dtype)
    carry = (
        seq,
        zeros_w,
        zeros_a,
        jnp.broadcast_to(jnp.arange(W, dtype=jnp.int32), (Gn, W)),
        jnp.zeros((Gn, W), jnp.int32),
        jnp.zeros(Gn, bool),
        zeros_w,
        jnp.zeros((Gn, W), bool),
        zeros_w,
        zeros_w,
    )
    # (with the ends, tangent points and arcs of the cached wraps, the last lengths, done)
    state = (carry, (zeros_w, zeros_w, zeros_a), jnp.full(Gn, jnp.inf, dtype), jnp.zeros(Gn, bool))
    step = _Pass(batch, X_obj, dims, orig)
    if static.multi is None:  # (every path has one PathWrap: one slot, one pass)
        return _outputs(_end_pass(None, 0, state, step.slot(0, carry, act)))
    ns = static.n_single
    if ns * step.window(None, L) <= _ONE_LOOP_SEGMENTS:
        # all paths in the passes' loop, so that each shape's geometry is compiled once
        return _outputs(_passes(step, act, state, 0))
    # the first PathWrap of every path at once, then the paths with several in the loop
    state = (step.slot(0, carry, act),) + state[1:]
    one = jax.tree.map(lambda x: x[:ns], state)
    one = _end_pass(None, 0, one, one[0])
    several = _passes(_Pass(static.multi, X_obj, dims, orig[ns:]), act[ns:], jax.tree.map(lambda x: x[ns:], state), 1)
    return tuple(jnp.concatenate(x, 0) for x in zip(_outputs(one), _outputs(several)))


def _passes(step, act, state, first: int):
    """OpenSim's passes over the paths of ``step``'s batch, in a ``while_loop``, from
    the first pass's slot ``first`` (1: its first PathWrap was applied); a path is
    left alone once it is done (``_end_pass``). **Returns:** the final state."""
    single = jnp.asarray(step.b.single)
    W = step.b.n_wraps

    def one_pass(st):
        kk, state = st
        start = jnp.where(kk == 0, first, 0)
        carry = jax.lax.fori_loop(start, W, lambda s, c: step.slot(s, c, act, state[3]), state[0])
        return kk + 1, _end_pass(step, kk, state, carry, single)

    return jax.lax.while_loop(lambda st: (st[0] < _MAX_PASSES) & ~jnp.all(st[1][3]), one_pass, (0, state))[1]


def _outputs(state):
    """``_wrap_batch``'s results from the passes' final state."""
    carry, (cached_ends, cached_wr, cached_arc), _, _ = state
    seq, _, warc, _, _, _, _, cached, wends, wr = carry
    return (
        seq,
        jnp.stack([wends, cached_ends], 2),
        cached,
        jnp.stack([wr, cached_wr], 2),
        jnp.stack([warc, cached_arc], 2),
    )


def _end_pass(step, kk, state, new, single=None):
    """OpenSim's bookkeeping after a pass: the wrap points that came on the path are
    cached, and (with ``step``: paths with several PathWraps) the passes are done on
    convergence, when nothing wrapped, or halted; after the first, the first two
    PathWraps may trade places.

    **Arguments:** ``state = (carry, cached_wrap, last, done)`` before the pass;
    ``new``: the carry after it. **Returns:** the new state.
    """
    carry, cached_wrap, last, done = state
    seq, wpos, warc, order, result, halted, wgnd, cached, wends, wr = new
    W = wgnd.shape[1]
    N = seq.shape[1] - 2 * W
    # the end-of-pass length asks every point on the path for its Ground position
    on_path = _on_path(seq, N, W)
    fresh = (on_path & ~cached)[..., None, None]
    wgnd = jnp.where(fresh, wpos, wgnd)
    keep = fresh & ~_bcast(done, fresh)
    cached_wrap = (
        jnp.where(keep, wends, cached_wrap[0]),
        jnp.where(keep, wr, cached_wrap[1]),
        jnp.where(keep[..., 0, 0], warc, cached_wrap[2]),
    )
    cached = cached | on_path
    new = (seq, wpos, warc, order, result, halted, wgnd, cached, wends, wr)
    if step is None:  # (wrapped once)
        return new, cached_wrap, last, done
    length = step.length(seq, _in_ground(wpos, wgnd, cached), warc)[0]
    carry = jax.tree.map(lambda n, o: jnp.where(_bcast(done, n), o, n), new, carry)
    converged = jnp.abs(length - last) < _CONVERGED
    last = jnp.where(done, last, length)
    seq, wpos, warc, order, result, halted, wgnd, cached, wends, wr = carry
    # after the first pass: if the first PathWrap did not wrap and the second found a
    # point inside its object, the two trade places (and the first's points go)
    swap = (kk == 0) & ~done & ~converged & ~single & (result[:, 0] == G.NO_WRAP) & (result[:, 1] == G.INSIDE_RADIUS)
    order = jnp.where(swap[:, None], order.at[:, 0].set(1).at[:, 1].set(0), order)
    seq = jnp.where(
        swap[:, None], _remove(seq, jnp.full((seq.shape[0], 2), N, jnp.int32) + jnp.asarray([0, 1], jnp.int32)), seq
    )
    # after a pass in which nothing wrapped, the next would repeat it
    done = done | converged | halted | single | ~jnp.any(on_path, -1)
    return (seq, wpos, warc, order, result, halted, wgnd, cached, wends, wr), cached_wrap, last, done


# segment ends far from any wrap object, for wraps no segment ever took (their results
# are unused; these keep the geometry and its derivatives finite)
_FAR_ENDS = np.asarray([[1e3, 0.0, 0.0], [1e3, 1.0, 0.0]])


def _rewrap(batch: _Batch, X_obj, dims, wends, chosen, wr, warc, slide=None):
    """The tangent points and arcs of the final wraps, differentiable in the wrap
    objects' poses and sizes and, with ``slide``, in their segments' ends.

    The values are the passes' (``wr``, ``warc``); their derivatives with respect to
    the sizes and ends are those of the geometry at the recorded ends (``_recorded``),
    which is evaluated only when these are differentiated. Without ``slide`` the ends
    are held fixed in the wrap frame: the tangent points move with the wrap object's
    body, and the length's derivative is OpenSim's virtual-work moment arm. With
    ``slide``, the latest wraps' ends (and the cached ones equal to them) take its
    derivative, so the tangent points also slide over the surface as the path's
    neighbouring points move: the derivative of the forces and speeds built on them.

    **Arguments:** ``X_obj``, ``dims`` as for ``_wrap_batch``; ``wends (G, W, 2, 2,
    3)``, ``wr``, ``warc`` from it; ``chosen (G, W, 2)``: which of those were wrapped;
    ``slide (G, W, 2, 3)``: the latest wraps' ends (``_neighbour_ends``) or None.

    **Returns:** ``(tangent (G, W, 2, 2, 3), arc (G, W, 2))``: per wrap, its latest
    and its cached wrap points in Ground and the arcs (with ``slide``, the arcs'
    derivatives are left out: only the tangent points' are wanted).
    """
    R_obj, o_obj = X_obj
    sg = jax.lax.stop_gradient
    ends = sg(wends)
    if slide is not None:
        moved = slide - sg(slide)  # (zero, with the neighbours' derivative)
        same = jnp.all(ends[:, :, 0] == ends[:, :, 1], axis=(-2, -1))
        ends = ends + jnp.stack([moved, jnp.where(same[..., None, None], moved, 0.0)], 2)
    ends = jnp.where(chosen[..., None, None], ends, jnp.asarray(_FAR_ENDS, wends.dtype))
    r, arc = _recorded(batch, slide is None, dims, ends, sg(wr), sg(warc))
    R, o = R_obj[batch.obj], o_obj[batch.obj]  # (G, W, 3, 3), (G, W, 3)
    tangent = spatial.mat_vec(R[:, :, None, None], r) + o[:, :, None, None, :]
    return tangent, arc


def _wrap_neighbours(seq, N: int, W: int):
    """Where each wrap's first point stands in the current paths ``seq (G, L)`` and
    the nodes before and after its pair of points: ``(first, before, after)``, each
    ``(G, W)`` (meaningless for wraps not on the path)."""
    L = seq.shape[1]
    first = jnp.argmax(seq[:, None, :] == jnp.asarray(N + 2 * np.arange(W, dtype=np.int32))[None, :, None], -1)
    before = jnp.take_along_axis(seq, jnp.maximum(first - 1, 0), 1)
    after = jnp.take_along_axis(seq, jnp.minimum(first + 2, L - 1), 1)
    return first, before, after


def _neighbour_ends(batch: _Batch, seq, nodes, X_obj):
    """The latest wraps' segment ends in their wrap frames ``(G, W, 2, 3)``: the nodes
    around each wrap's points in the current paths ``seq``, from ``nodes (G, N + 2W,
    3)`` in Ground (meaningless for wraps not on the path)."""
    _, before, after = _wrap_neighbours(seq, batch.n_points, batch.n_wraps)
    p = jax.vmap(lambda n, i: n[jnp.maximum(i, 0)])(nodes, jnp.stack([before, after], -1))
    R, o = X_obj[0][batch.obj], X_obj[1][batch.obj]  # (G, W, 3, 3), (G, W, 3)
    return spatial.mat_tvec(R[:, :, None], p - o[:, :, None])


def _geometry(batch: _Batch, dims, ends, found, arcs: bool):
    """The tangent points ``(G, W, 2, 2, 3)`` and arcs ``(G, W, 2)`` of every wrap's
    latest and cached segment ``ends`` (wrap frame).

    ``found``: the tangent points the passes found at these ends (the ellipsoids'
    tangent-point iteration is not run again: its polish starts there); ``arcs``
    (static): False leaves the arcs zero (for the tangent points alone).

    Each wrap-object type is one batch of segments: every PathWrap's latest one and,
    on paths with several PathWraps, its cached one (a path with one PathWrap caches
    its latest: ``_end_pass``).
    """
    r = jnp.zeros(ends.shape, ends.dtype)
    arc = jnp.zeros(ends.shape[:3], ends.dtype)
    for code, _, method in batch.kinds:
        g, w = np.nonzero(batch.on & (batch.kind == code))  # its PathWraps
        single, n = batch.single[g], len(g)
        several = np.flatnonzero(~single)
        # the segments solved: each PathWrap's latest, then the cached of those on paths
        # with several; each (g, w, lane) takes the result ``src``
        g_s, w_s = np.concatenate([g, g[several]]), np.concatenate([w, w[several]])
        lane = np.repeat([0, 1], [n, len(several)])
        cached = np.arange(n)
        cached[several] = n + np.arange(len(several))
        dest = (np.tile(g, 2), np.tile(w, 2), np.repeat([0, 1], n))
        src = np.concatenate([np.arange(n), cached])
        if code == ELLIPSOID:

            def one(p1, p2, d, ax, sg, m, one_wrap, f1, f2, method=method):
                return G.wrap_ellipsoid(
                    p1, p2, d, ax, sg, m if method is None else method, found=(f1, f2), surface=arcs
                )
        else:

            def one(p1, p2, d, ax, sg, m, one_wrap, f1, f2, code=code, method=method, static=bool(single.all())):
                return _wrap_one(code, method, True if static else one_wrap)(p1, p2, d, ax, sg, m)

        e, f = ends[g_s, w_s, lane], found[g_s, w_s, lane]
        res = jax.vmap(one)(
            e[:, 0],
            e[:, 1],
            dims[batch.obj[g_s, w_s]],
            jnp.asarray(batch.axis[g_s, w_s]),
            jnp.asarray(batch.sign[g_s, w_s]),
            jnp.asarray(batch.method[g_s, w_s]),
            jnp.asarray(batch.single[g_s]),
            f[:, 0],
            f[:, 1],
        )
        rr = jnp.stack([res.r1, res.r2], -2)
        r = r.at[dest].set(rr[src])
        if arcs:
            arc = arc.at[dest].set(res.length[src])
    return r, arc


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _recorded(batch: _Batch, arcs: bool, dims, ends, r, arc):
    """``(r, arc)``: the geometry of ``ends`` as the passes computed it; its derivative
    with respect to ``dims`` and ``ends`` is ``_geometry``'s (of the tangent points
    alone where ``arcs`` is False: the arcs' is zero). JAX skips the rule, and so the
    geometry, when neither is differentiated."""
    return r, arc


@_recorded.defjvp
def _recorded_jvp(batch, arcs, primals, tangents):
    dims, ends, r, arc = primals
    _, out_tangents = jax.jvp(lambda d, e: _geometry(batch, d, e, r, arcs), (dims, ends), tangents[:2])
    return (r, arc), out_tangents


def _blend(batch: _Batch, X_obj, dims, seq, on_path, orig, seg, ds, de, a_s, a_e):
    """Smoothed PathWraps (``smoothing > 0``): each wrapped segment's length blended to
    its straight length near OpenSim's wrap/no-wrap boundaries, with the forces and
    speed of the blended length.

    A wrap whose segment joins two original points ``a``, ``b`` (not another wrap's
    points) has the length ``S + w (Lw - S)``: ``S = |b - a|``, ``Lw`` the wrapped
    length, ``w`` the weight of ``a``, ``b`` in the wrap frame
    (``simjax.wrapping.smooth``), 1 away from the boundaries. Its variation gives the
    force directions: the straight pull ``(1 - w) u``, the wrapped pulls and the
    tangent points scaled by ``w``, and ``(Lw - S) dw``, which pulls ``a`` and ``b``
    against the wrap object's body at the same places. Pieces within one body apply
    no force (as in OpenSim), and the speed follows the forces.

    **Arguments:** ``X_obj``, ``dims`` as for ``_wrap_batch``; ``seq``; ``on_path
    (G, W)``; ``orig (G, N, 3)``; per original point ``(G, N)``: ``seg`` lengths,
    ``ds``, ``de`` directions and ``a_s``, ``a_e`` flags, as ``wrap_segments`` makes them.

    **Returns:** ``(seg, ds, de, a_s, a_e, blend, w, extra)``: the updated arrays,
    whether each wrap ``(G, W)`` is blended, its weight (1 if not), and ``(points,
    force_dir) (G, W, 2, 3)`` of the stations on the wrap object's body at ``a``, ``b``.
    """
    R_obj, o_obj = X_obj
    Gn, N, W = batch.pt.shape[0], batch.n_points, batch.n_wraps
    rows = np.arange(Gn)[:, None]
    k1, a, b = _wrap_neighbours(seq, N, W)
    blend = on_path & (k1 >= 1) & (a >= 0) & (a < N) & (b >= 0) & (b < N) & jnp.asarray(batch.eps > 0)
    a, b = jnp.clip(a, 0, N - 1), jnp.clip(b, 0, N - 1)
    p1, p2 = orig[rows, a], orig[rows, b]  # (G, W, 3)
    R, o = R_obj[batch.obj], o_obj[batch.obj]
    to_w = lambda p, far: jnp.where(
        blend[..., None],
        spatial.mat_tvec(R, p - o),  # noqa: E731
        jnp.asarray(far, p.dtype),
    )
    p1w, p2w = to_w(p1, _FAR_ENDS[0]), to_w(p2, _FAR_ENDS[1])
    w = jnp.ones((Gn, W), p1.dtype)
    g1 = g2 = jnp.zeros((Gn, W, 3), p1.dtype)
    for code, _, _, single in batch.groups:
        gi, wi = np.nonzero(batch.on & (batch.kind == code) & (batch.single[:, None] == single) & (batch.eps > 0))
        if len(gi):
            fn = jax.vmap(jax.value_and_grad(_weight_one(code, single), argnums=(0, 1)))
            val, (d1, d2) = fn(
                p1w[gi, wi],
                p2w[gi, wi],
                dims[batch.obj[gi, wi]],
                jnp.asarray(batch.axis[gi, wi]),
                jnp.asarray(batch.sign[gi, wi]),
                jnp.asarray(batch.eps[gi, wi], p1.dtype),
            )
            w, g1, g2 = w.at[gi, wi].set(val), g1.at[gi, wi].set(d1), g2.at[gi, wi].set(d2)
    w = jnp.where(blend, w, 1.0)
    mob = jnp.asarray(batch.node_mob)
    mob_a, mob_b, mob_w = mob[rows, a], mob[rows, b], mob[:, N::2]
    straight = _norm(p2 - p1)
    u = _unit(p2 - p1) * (mob_a != mob_b)[..., None]
    gap = seg[rows, a] - straight  # Lw - S
    lever1 = (gap * (mob_a != mob_w))[..., None] * spatial.mat_vec(R, g1)
    lever2 = (gap * (mob_b != mob_w))[..., None] * spatial.mat_vec(R, g2)
    wv = w[..., None]
    at = jnp.where(blend, a, N)  # (the owner of a blended segment is its first point)
    put = lambda x, v: x.at[rows, at].set(v, mode="drop")  # noqa: E731
    seg = put(seg, straight + w * gap)
    ds = put(ds, (1.0 - wv) * u + wv * ds[rows, a] * a_s[rows, a][..., None] - lever1)
    de = put(de, (1.0 - wv) * u + wv * de[rows, a] * a_e[rows, a][..., None] + lever2)
    a_s, a_e = put(a_s, True), put(a_e, True)
    extra = (jnp.stack([p1, p2], 2), jnp.where(blend[..., None, None], jnp.stack([lever1, lever2], 2), 0.0))
    return seg, ds, de, a_s, a_e, blend, w, extra


def _path_points(batch: _Batch, points):
    """The batch's path points ``(G, N, 3)`` (padding repeats the last point)."""
    return jnp.concatenate([points, points[-1:]])[jnp.asarray(batch.pt)]


def _on_path(seq, N: int, W: int):
    """Whether each wrap's points are in the current paths ``seq``: ``(G, W)``."""
    return jnp.any(seq[:, None, :] == jnp.asarray(N + 2 * np.arange(W, dtype=np.int32))[None, :, None], -1)


def _bcast(mask, x):
    return mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))


def wrap_parameters(ctx, static: WrapStatic) -> dict:
    """``wrap_object_params`` through the context's parameters (``Context.parameter``)."""
    return ctx.parameter("wrap_objects", lambda: wrap_object_params(ctx.model, static))


def wrap_segments(ctx, static: WrapStatic, topology, points, active, segments):
    """Replace the segments of wrapped paths by their wrapped geometry.

    **Arguments:** ``ctx``: the ``Context``; ``static``: from ``compile_wrapping``;
    ``topology``: the ``PathTopology``; ``points (P, 3)`` in Ground; ``active (P,)``:
    the active points; ``segments``: the straight ``Segments``.

    **Returns:** ``Segments`` whose entries for the wrapped paths' segments give the
    length with the arcs, the directions leaving and reaching each original point (to
    and from tangent points), whether each end applies force, and the tangent points.
    """
    params = wrap_parameters(ctx, static)
    R_f, p_f = ctx.frames_in_ground(static.frames)
    R_obj, o_obj = spatial.compose((R_f[static.obj_frame], p_f[static.obj_frame]), (params["R"], params["p"]))
    P = topology.n_points
    length, dir_start, dir_end = segments.length, segments.dir_start, segments.dir_end
    applies = segments.applies
    applies_end = segments.applies if segments.applies_end is None else segments.applies_end
    batch = static.batch
    Gn, N, W = batch.pt.shape[0], batch.n_points, batch.n_wraps
    seq, wends, cached, wr, warc = ctx.search(
        "wrap_passes", lambda: _wrap_batch(static, (R_obj, o_obj), params["dims"], points, active)
    )
    on_path = _on_path(seq, N, W)
    X_obj, chosen, orig = (R_obj, o_obj), jnp.stack([on_path, cached], -1), _path_points(batch, points)
    step = _Pass(batch, X_obj, params["dims"], orig)

    def placed(slide=None):
        """The latest wrap points, those the straight pieces use (Ground), and the arcs."""
        tangent, arc = _rewrap(batch, X_obj, params["dims"], wends, chosen, wr, warc, slide)
        wpos = tangent[:, :, 0]
        return wpos, _in_ground(wpos, tangent[:, :, 1], cached), arc[:, :, 0]

    # the lengths with the tangent points fixed in the wrap frame (OpenSim's moment
    # arms); the points and directions, for forces and speeds, with them sliding (the
    # same values, other derivatives)
    wpos, wgnd, arc = placed()
    _, piece, _, differ, ok, _ = step.length(seq, wgnd, arc, _lever(wpos, wgnd, cached))
    wpos, wgnd, _ = placed(_neighbour_ends(batch, seq, step.nodes(wpos), X_obj))
    pts = _gather_nodes(step.nodes(wgnd), seq)
    L = seq.shape[-1]
    k = jnp.arange(L)
    is_orig = (seq >= 0) & (seq < N)
    owner_pos = jax.lax.cummax(jnp.where(is_orig, k[None], -1), axis=1)
    owner = jnp.take_along_axis(seq, jnp.maximum(owner_pos, 0), 1)  # original node owning each piece
    seg_len = jax.vmap(lambda o, p: jnp.zeros(N, p.dtype).at[o].add(p, mode="drop"))(owner[:, :-1], piece)
    d = _unit(pts[:, 1:] - pts[:, :-1])  # (G, L-1, 3) piece directions
    # leaving original node seq[k]: piece k; reaching original node seq[k+1]: piece k
    leave_at = jnp.where(is_orig[:, :-1] & ok, seq[:, :-1], N)
    reach_owner = jnp.where(is_orig[:, 1:] & ok, owner[:, :-1], N)
    put = jax.vmap(lambda idx, v: jnp.zeros((N,) + v.shape[1:], v.dtype).at[idx].set(v, mode="drop"))
    ds, de = put(leave_at, d), put(reach_owner, d)
    a_s, a_e = put(leave_at, differ), put(reach_owner, differ)
    smoothed = bool(np.any(batch.eps > 0))
    if smoothed:
        seg_len, ds, de, a_s, a_e, blend, scale, (x_pts, x_dir) = _blend(
            batch, (R_obj, o_obj), params["dims"], seq, on_path, orig, seg_len, ds, de, a_s, a_e
        )
    flat = jnp.asarray(np.where(batch.pt_ok, batch.pt, P))
    length = length.at[flat].set(seg_len, mode="drop")
    dir_start = dir_start.at[flat].set(ds, mode="drop")
    dir_end = dir_end.at[flat].set(de, mode="drop")
    applies = jnp.asarray(applies).at[flat].set(a_s, mode="drop")
    applies_end = jnp.asarray(applies_end).at[flat].set(a_e, mode="drop")
    # wrap points: directions to their neighbours. The speed sums every pair of
    # neighbours, arcs included (zero unless the cached positions make it not so)
    wrap_pos = jnp.where(seq >= N, seq - N, 2 * W)  # (G, L) slot of each wrap node
    z = jnp.zeros((Gn, L, 3), d.dtype)
    to_next = z.at[:, :-1].set(jnp.where(ok[..., None], d, 0.0))
    to_prev = z.at[:, 1:].set(jnp.where(ok[..., None], -d, 0.0))
    f_next = z.at[:, :-1].set(jnp.where(differ[..., None], d, 0.0))
    f_prev = z.at[:, 1:].set(jnp.where(differ[..., None], -d, 0.0))
    put_w = jax.vmap(lambda idx, v: jnp.zeros((2 * W, 3), v.dtype).at[idx].set(v, mode="drop"))
    force_dir, speed_dir = put_w(wrap_pos, f_next + f_prev), put_w(wrap_pos, to_next + to_prev)
    points, mob = wpos.reshape(Gn, -1, 3), batch.node_mob[:, N:]
    if smoothed:
        blend, scale = jnp.repeat(blend, 2, axis=1)[..., None], jnp.repeat(scale, 2, axis=1)[..., None]
        x_dir = x_dir.reshape(Gn, -1, 3)
        points = jnp.concatenate([points, x_pts.reshape(Gn, -1, 3)], 1)
        speed_dir = jnp.concatenate([scale * jnp.where(blend, force_dir, speed_dir), x_dir], 1)
        force_dir = jnp.concatenate([scale * force_dir, x_dir], 1)
        mob = np.concatenate([mob, mob], 1)
    tangent = TangentPoints(
        points=points.reshape(-1, 3),
        force_dir=force_dir.reshape(-1, 3),
        speed_dir=speed_dir.reshape(-1, 3),
        mob=mob.reshape(-1),
        row=np.repeat(batch.rows, mob.shape[1]),
    )
    return Segments(
        length=length, dir_start=dir_start, dir_end=dir_end, applies=applies, applies_end=applies_end, tangent=tangent
    )


def current_paths(ctx, static: WrapStatic, points, tangent: TangentPoints):
    """The current paths of the wrapped paths (OpenSim ``GeometryPath::getCurrentPath``):
    their active points with the two wrap points of each wrap taken, in path order.

    Call after ``wrap_segments`` has run in ``ctx`` (``simjax.muscles.path.path_geometry``
    does): the order comes from its passes (the context's search ``"wrap_passes"``).

    **Arguments:** ``ctx``: the ``Context``; ``static``: from ``compile_wrapping``;
    ``points (P, 3)``: every path point in Ground (m); ``tangent``: the
    ``TangentPoints`` that ``wrap_segments`` returned.

    **Returns:** ``(rows, nodes, count)``: ``rows (G,)`` (static numpy) the wrapped
    paths' rows in the ``PathTopology``; ``nodes (G, N + 2W, 3)`` each current path's
    points in Ground (m), padded at the end; ``count (G,)`` how many are on the path.
    """
    batch = static.batch
    Gn, W = batch.pt.shape[0], batch.n_wraps
    seq = ctx.searches()["wrap_passes"][0]
    wrap_points = tangent.points.reshape(Gn, -1, 3)[:, : 2 * W]  # (smoothing appends its blend points after these)
    nodes = jnp.concatenate([_path_points(batch, points), wrap_points], 1)
    return batch.rows, _gather_nodes(nodes, seq), jnp.sum(seq >= 0, -1)
