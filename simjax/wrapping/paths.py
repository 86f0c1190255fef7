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
once (for an ellipsoid, whose wraps are all mandatory, only a path's first crossing
segment is solved). The passes are a ``while_loop`` (paths with one PathWrap are done
after the first); within a pass the PathWraps are taken slot by slot in a
``fori_loop``, with one geometry call per wrap-object type, so the program grows
with the number of shapes, never with the number of paths, points or PathWraps.

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
wrap, the segment ends in the wrap frame, from which ``_rewrap`` evaluates the
geometry once more, differentiably in the wrap objects' poses and sizes but with the
ends held fixed in the wrap frame. So the tangent points and arcs move with the wrap
object's body as the coordinates change, and the derivative of the length with
respect to the coordinates is OpenSim's virtual-work moment arm (``computeMomentArm``),
the one consistent with the forces applied. (OpenSim's tangent points are not exactly
tangent, so this differs slightly from the derivative of the length itself: see
``simjax.wrapping.geometry``.) Forward and reverse mode both work; the wrap status is
piecewise constant, so derivatives do not see wrap onset.

Smoothing. A PathWrap with ``smoothing > 0`` blends its wrapped segment to the straight
one near OpenSim's wrap/no-wrap boundaries (``_blend``, ``simjax.wrapping.smooth``),
with forces and speeds that are those of the blended length. Only a wrap whose segment
joins two path points is blended (one whose segment ends at another wrap's tangent
point stays exact), and the choice between candidate segments stays OpenSim's.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import ModelError
from . import geometry as G
from . import smooth as S
from ._ellipsoid import wrap_ellipsoid_status
from .objects import PathWrap, WrapCylinder, WrapEllipsoid, WrapObject, WrapSphere, WrapTorus, parse_method, \
    parse_quadrant, wrap_frame_path

__all__ = ["compile_wrapping", "wrap_segments", "WrapStatic", "TangentPoints", "SPHERE", "CYLINDER", "ELLIPSOID",
           "TORUS"]

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
    ``eps (G, W)``: the PathWraps' ``smoothing`` (m, 0: none).
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
    wrapped paths.
    """

    objects: tuple
    frames: tuple
    obj_frame: np.ndarray
    obj_mob: np.ndarray
    obj_kind: np.ndarray
    batch: _Batch


def _kind_of(obj, where: str) -> int:
    for cls, code in _KINDS:
        if isinstance(obj, cls):
            return code
    raise ModelError(where, f"wrap object type {type(obj).__name__} is not supported", prop="wrap_object",
                     value=type(obj).__name__)


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
            wraps.append((obj_index[target], obj_kind[obj_index[target]], start, end, axis, sign,
                          parse_method(pw.method, pw_path), bool(wo.active), float(pw.smoothing)))
        entries.append((row, wraps))
    obj_mob = np.asarray(obj_mob, np.int32)
    return WrapStatic(objects=tuple(objects), frames=tuple(frames), obj_frame=np.asarray(obj_frame, np.int32),
                      obj_mob=obj_mob, obj_kind=np.asarray(obj_kind, np.int32),
                      batch=_batch(entries, topology, obj_mob))


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
            for k, v in zip(("obj", "kind", "start", "end", "axis", "sign", "method"),
                            (obj, kind, start, end, axis, sign, method)):
                cols[k][g, w] = v
            on[g, w] = active
            eps[g, w] = smoothing
            node_mob[g, N + 2 * w:N + 2 * w + 2] = obj_mob[obj]
            node_obj[g, N + 2 * w:N + 2 * w + 2] = obj
    exists = np.zeros((Gn, W), bool)
    for g, (_, wraps) in enumerate(entries):
        exists[g, :len(wraps)] = True
    single = exists.sum(1) == 1
    groups = []
    for kind in (SPHERE, CYLINDER, ELLIPSOID, TORUS):
        for one in (True, False):  # (paths with one PathWrap skip the cylinder's tangent adjustment)
            m = exists & on & (cols["kind"] == kind) & (single[:, None] == one)
            if m.any():
                methods = set(cols["method"][m].tolist())
                method = methods.pop() if len(methods) == 1 else None
                groups.append((kind, np.flatnonzero(m.any(1)).astype(np.int32), method, one))
    live = exists & on
    slot_kinds = np.zeros((W, 4), bool)
    for s in range(W):
        for t in (t for t in ((0, 1) if s < 2 else (s,)) if t < W):
            m = live[:, t] & ((t == s) | ~single)
            slot_kinds[s, cols["kind"][m, t]] = True
    return _Batch(rows=np.asarray([r for r, _ in entries], np.int32), pt=pt, pt_ok=pt_ok, on=on & exists,
                  node_mob=node_mob, node_obj=node_obj, groups=tuple(groups), single=single, slot_kinds=slot_kinds,
                  eps=eps, **cols)


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


def _wrap_one(kind: int, method, single: bool):
    """The geometry function of one wrap-object type: ``(p1, p2, dims, axis, sign,
    method) -> WrapResult``. ``method`` is static unless None; ``single``: the paths
    have one PathWrap (static)."""
    wrap = S.WRAP_FUNCTIONS[_NAMES[kind]]
    return lambda p1, p2, d, ax, sg, m: wrap(p1, p2, *_shape_args(kind, d, ax, sg, m if method is None else method,
                                                                  single))


def _weight_one(kind: int, single: bool):
    """The smoothing weight of one wrap-object type: ``(p1, p2, dims, axis, sign, eps)
    -> w`` (``simjax.wrapping.smooth.segment_weight``)."""
    return lambda p1, p2, d, ax, sg, e: S.segment_weight(_NAMES[kind], p1, p2, *_shape_args(kind, d, ax, sg, 0, single),
                                                          eps=e)


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
    sq = jnp.sum(v * v, -1)
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
        arc = jnp.where(jnp.asarray(self.node_second)[jnp.maximum(b, 0)],
                        jnp.take_along_axis(warc, jnp.maximum(bw, 0), 1), 0.0)
        vec = pts[:, 1:] - pts[:, :-1]
        if lever is not None:
            G_ = self.orig.shape[0]
            off = _gather_nodes(jnp.concatenate([jnp.zeros_like(self.orig), lever.reshape(G_, -1, 3)], 1), seq)
            vec = vec + jnp.where(differ[..., None], off[:, 1:] - off[:, :-1], 0.0)
        piece = jnp.where(surface, arc, _norm(vec))
        piece = jnp.where(ok, piece, 0.0)
        return jnp.sum(piece, -1), piece, surface, differ, ok, pts

    def slot(self, s, carry, active):
        """Apply the PathWrap in slot ``s`` (traced) of every path's order."""
        b = self.b
        seq, wpos, warc, order, result, halted, wgnd, cached, wends = carry
        G_, N = self.orig.shape[0], b.n_points
        rows = jnp.arange(G_)
        w = order[:, s]
        ids = jnp.stack([N + 2 * w, N + 2 * w + 1], -1)
        # (a path whose earlier PathWrap had no active point in range stops there)
        seq = jnp.where(halted[:, None], seq, _remove(seq, ids))
        on = jnp.asarray(b.on)[rows, w] & ~halted
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
        # candidate segments (seq[k], seq[k+1]) for k_start <= k < k_end
        L = seq.shape[-1]
        k = jnp.arange(L - 1)
        a, c = seq[:, :-1], seq[:, 1:]
        node_obj = jnp.asarray(b.node_obj)
        oa = jnp.take_along_axis(node_obj, jnp.maximum(a, 0), 1)
        oc = jnp.take_along_axis(node_obj, jnp.maximum(c, 0), 1)
        cand = on[:, None] & (k[None] >= k_start[:, None]) & (k[None] < k_end[:, None]) & (c >= 0) \
            & ~((oa >= 0) & (oa == oc))
        pts = _gather_nodes(self.nodes(wpos), seq)
        pts_g = _gather_nodes(self.nodes(_in_ground(wpos, wgnd, cached)), seq)
        obj = jnp.asarray(b.obj)[rows, w]
        R, o = self.R_obj[obj], self.o_obj[obj]
        to_w = lambda p: jnp.einsum("gji,gkj->gki", R, p - o[:, None, :])  # noqa: E731
        p1w, p2w = to_w(pts[:, :-1]), to_w(pts[:, 1:])
        g1w, g2w = to_w(pts_g[:, :-1]), to_w(pts_g[:, 1:])
        status = jnp.zeros((G_, L - 1), jnp.int32)
        r1 = jnp.zeros((G_, L - 1, 3), p1w.dtype)
        r2, arc = r1, jnp.zeros((G_, L - 1), p1w.dtype)
        kind = jnp.asarray(b.kind)[rows, w]
        for code, idx, method, single in b.groups:
            wi = w[idx]
            args = (self.dims[obj[idx]], jnp.asarray(b.axis)[idx, wi], jnp.asarray(b.sign)[idx, wi],
                    jnp.asarray(b.method)[idx, wi])
            fn = _wrap_one(code, method, single)

            def solve(p1w, p2w, cand, args, fn=fn, code=code):
                if code != ELLIPSOID:
                    res = jax.vmap(jax.vmap(fn, (0, 0) + (None,) * 4))(p1w, p2w, *args)
                    return res.status, res.r1, res.r2, res.length
                # every ellipsoid wrap is mandatory: only a path's first one is solved
                st = jax.vmap(jax.vmap(wrap_ellipsoid_status, (0, 0, None)))(p1w, p2w, args[0])
                first = jnp.argmax(cand & (st == G.MANDATORY_WRAP), -1)
                at = jnp.arange(p1w.shape[0])
                one = jax.vmap(fn)(p1w[at, first], p2w[at, first], *args)
                put = lambda v: jnp.zeros(st.shape + v.shape[1:], v.dtype).at[at, first].set(v)  # noqa: E731
                return st, put(one.r1), put(one.r2), put(one.length)

            def skip(p1w, p2w, cand, args):
                return (jnp.zeros(cand.shape, jnp.int32), jnp.zeros_like(p1w), jnp.zeros_like(p1w),
                        jnp.zeros(cand.shape, p1w.dtype))

            # (the slot index is not batched, so this stays a branch under vmap)
            st, g1, g2, ga = jax.lax.cond(jnp.asarray(b.slot_kinds[:, code])[s], solve, skip,
                                          p1w[idx], p2w[idx], cand[idx], args)
            mine = (kind[idx] == code)[:, None]
            status = status.at[idx].set(jnp.where(mine, st, status[idx]))
            r1 = r1.at[idx].set(jnp.where(mine[..., None], g1, r1[idx]))
            r2 = r2.at[idx].set(jnp.where(mine[..., None], g2, r2[idx]))
            arc = arc.at[idx].set(jnp.where(mine, ga, arc[idx]))
        mandatory = cand & (status == G.MANDATORY_WRAP)
        wrapped = cand & (status == G.WRAPPED)
        change = _norm(g1w - r1) + arc + _norm(r2 - g2w) - _norm(g2w - g1w)
        has_mandatory = jnp.any(mandatory, -1)
        best = jnp.where(has_mandatory, jnp.argmax(mandatory, -1),
                         jnp.argmin(jnp.where(wrapped, change, jnp.inf), -1))
        chosen = has_mandatory | jnp.any(wrapped, -1)
        last = L - 2 - jnp.argmax(cand[:, ::-1], -1)
        res_status = jnp.where(has_mandatory, G.MANDATORY_WRAP,
                               jnp.where(jnp.any(cand, -1), status[rows, last], G.NO_WRAP))
        result = result.at[:, s].set(res_status)
        # the tangent points, back in Ground, become wrap points of the current path
        to_g = lambda r: jnp.einsum("gij,gj->gi", R, r) + o  # noqa: E731
        new = jnp.stack([to_g(r1[rows, best]), to_g(r2[rows, best])], 1)
        wpos = wpos.at[rows, w].set(jnp.where(chosen[:, None, None], new, wpos[rows, w]))
        warc = warc.at[rows, w].set(jnp.where(chosen, arc[rows, best], 0.0))
        ends = jnp.stack([p1w[rows, best], p2w[rows, best]], 1)
        wends = wends.at[rows, w].set(jnp.where(chosen[:, None, None], ends, wends[rows, w]))
        seq = _insert_pair(seq, best + 1, ids[:, 0], ids[:, 1], chosen)
        return seq, wpos, warc, order, result, halted, wgnd, cached, wends

    def run(self, carry, active):
        """One pass: every path's PathWraps in its order."""
        return jax.lax.fori_loop(0, self.b.n_wraps, lambda s, c: self.slot(s, c, active), carry)


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


def _wrap_batch(batch: _Batch, X_obj, dims, points, active):
    """Run OpenSim's passes on constants: ``(seq, wends, cached)``.

    **Arguments:** ``X_obj``: the wrap objects' rotations and origins in Ground;
    ``dims (O, 3)``; ``points (P, 3)`` in Ground; ``active (P,)``.

    **Returns:** the final current paths ``seq (G, L)``; ``wends (G, W, 2, 2, 3)``:
    for each wrap, the segment ends (wrap frame) of its latest wrap and of the wrap
    whose tangent points OpenSim cached (``_in_ground``); ``cached (G, W)``: whether
    the wrap points were cached. Nothing here is differentiated (``_rewrap``
    re-derives the tangent points from these ends), so the passes run as a
    ``while_loop``.
    """
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
        pos, jnp.broadcast_to(jnp.arange(N, dtype=jnp.int32), (Gn, N)))
    dtype = points.dtype
    zeros_w = jnp.zeros((Gn, W, 2, 3), dtype)
    carry = (seq, zeros_w, jnp.zeros((Gn, W), dtype), jnp.broadcast_to(jnp.arange(W, dtype=jnp.int32), (Gn, W)),
             jnp.zeros((Gn, W), jnp.int32), jnp.zeros(Gn, bool), zeros_w, jnp.zeros((Gn, W), bool), zeros_w)
    step = _Pass(batch, X_obj, dims, orig)
    single = jnp.asarray(batch.single)

    def one_pass(state):
        kk, carry, cached_ends, last, done = state
        seq, wpos, warc, order, result, halted, wgnd, cached, wends = step.run(carry, act)
        # the end-of-pass length asks every point on the path for its Ground position
        on_path = _on_path(seq, N, W)
        fresh = (on_path & ~cached)[..., None, None]
        wgnd = jnp.where(fresh, wpos, wgnd)
        cached_ends = jnp.where(fresh & ~_bcast(done, fresh), wends, cached_ends)
        cached = cached | on_path
        new = (seq, wpos, warc, order, result, halted, wgnd, cached, wends)
        length = step.length(seq, _in_ground(wpos, wgnd, cached), warc)[0]
        carry = jax.tree.map(lambda n, o: jnp.where(_bcast(done, n), o, n), new, carry)
        converged = jnp.abs(length - last) < _CONVERGED
        last = jnp.where(done, last, length)
        seq, wpos, warc, order, result, halted, wgnd, cached, wends = carry
        if W > 1:
            # after the first pass: if the first PathWrap did not wrap and the second found
            # a point inside its object, the two trade places (and the first's points go)
            swap = (kk == 0) & ~done & ~converged & ~single & (result[:, 0] == G.NO_WRAP) \
                & (result[:, 1] == G.INSIDE_RADIUS)
            order = jnp.where(swap[:, None], order.at[:, 0].set(1).at[:, 1].set(0), order)
            seq = jnp.where(swap[:, None], _remove(seq, jnp.full((Gn, 2), N, jnp.int32)
                                                   + jnp.asarray([0, 1], jnp.int32)), seq)
        # a path with one PathWrap is wrapped once
        done = done | converged | halted | single
        return kk + 1, (seq, wpos, warc, order, result, halted, wgnd, cached, wends), cached_ends, last, done

    state = (0, carry, zeros_w, jnp.full(Gn, jnp.inf, dtype), jnp.zeros(Gn, bool))
    _, carry, cached_ends, _, _ = jax.lax.while_loop(lambda st: (st[0] < _MAX_PASSES) & ~jnp.all(st[4]),
                                                     one_pass, state)
    seq, _, _, _, _, _, _, cached, wends = carry
    return seq, jnp.stack([wends, cached_ends], 2), cached


# segment ends far from any wrap object, for wraps no segment ever took (their results
# are unused; these keep the geometry and its derivatives finite)
_FAR_ENDS = np.asarray([[1e3, 0.0, 0.0], [1e3, 1.0, 0.0]])


def _rewrap(batch: _Batch, X_obj, dims, wends, chosen):
    """The tangent points and arcs of the final wraps, differentiable in the wrap
    objects' poses and sizes (the segment ends in the wrap frame held fixed).

    **Arguments:** ``X_obj``, ``dims`` as for ``_wrap_batch``; ``wends (G, W, 2, 2,
    3)`` from it; ``chosen (G, W, 2)``: which of those ends were wrapped.

    **Returns:** ``(tangent (G, W, 2, 2, 3), arc (G, W, 2))``: per wrap, its latest
    and its cached wrap points in Ground and the arcs.
    """
    R_obj, o_obj = X_obj
    ends = jnp.where(chosen[..., None, None], jax.lax.stop_gradient(wends), jnp.asarray(_FAR_ENDS, wends.dtype))
    r = jnp.zeros(wends.shape, wends.dtype)
    arc = jnp.zeros(wends.shape[:3], wends.dtype)
    for code, _, method, single in batch.groups:
        g, w = np.nonzero(batch.on & (batch.kind == code) & (batch.single[:, None] == single))  # its PathWraps
        fn = jax.vmap(jax.vmap(_wrap_one(code, method, single), (0, 0) + (None,) * 4))  # (latest, cached) per wrap
        res = fn(ends[g, w, :, 0], ends[g, w, :, 1], dims[batch.obj[g, w]], jnp.asarray(batch.axis[g, w]),
                 jnp.asarray(batch.sign[g, w]), jnp.asarray(batch.method[g, w]))
        r = r.at[g, w].set(jnp.stack([res.r1, res.r2], -2))
        arc = arc.at[g, w].set(res.length)
    R, o = R_obj[batch.obj], o_obj[batch.obj]  # (G, W, 3, 3), (G, W, 3)
    tangent = jnp.einsum("gwij,gwvej->gwvei", R, r) + o[:, :, None, None, :]
    return tangent, arc


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
    L = seq.shape[-1]
    rows = np.arange(Gn)[:, None]
    k1 = jnp.argmax(seq[:, None, :] == jnp.asarray(N + 2 * np.arange(W, dtype=np.int32))[None, :, None], -1)
    a = jnp.take_along_axis(seq, jnp.maximum(k1 - 1, 0), 1)
    b = jnp.take_along_axis(seq, jnp.minimum(k1 + 2, L - 1), 1)
    blend = on_path & (k1 >= 1) & (a >= 0) & (a < N) & (b >= 0) & (b < N) & jnp.asarray(batch.eps > 0)
    a, b = jnp.clip(a, 0, N - 1), jnp.clip(b, 0, N - 1)
    p1, p2 = orig[rows, a], orig[rows, b]  # (G, W, 3)
    R, o = R_obj[batch.obj], o_obj[batch.obj]
    to_w = lambda p, far: jnp.where(blend[..., None], jnp.einsum("gwji,gwj->gwi", R, p - o),  # noqa: E731
                                    jnp.asarray(far, p.dtype))
    p1w, p2w = to_w(p1, _FAR_ENDS[0]), to_w(p2, _FAR_ENDS[1])
    w = jnp.ones((Gn, W), p1.dtype)
    g1 = g2 = jnp.zeros((Gn, W, 3), p1.dtype)
    for code, _, _, single in batch.groups:
        gi, wi = np.nonzero(batch.on & (batch.kind == code) & (batch.single[:, None] == single) & (batch.eps > 0))
        if len(gi):
            fn = jax.vmap(jax.value_and_grad(_weight_one(code, single), argnums=(0, 1)))
            val, (d1, d2) = fn(p1w[gi, wi], p2w[gi, wi], dims[batch.obj[gi, wi]], jnp.asarray(batch.axis[gi, wi]),
                               jnp.asarray(batch.sign[gi, wi]), jnp.asarray(batch.eps[gi, wi], p1.dtype))
            w, g1, g2 = w.at[gi, wi].set(val), g1.at[gi, wi].set(d1), g2.at[gi, wi].set(d2)
    w = jnp.where(blend, w, 1.0)
    mob = jnp.asarray(batch.node_mob)
    mob_a, mob_b, mob_w = mob[rows, a], mob[rows, b], mob[:, N::2]
    straight = _norm(p2 - p1)
    u = _unit(p2 - p1) * (mob_a != mob_b)[..., None]
    gap = seg[rows, a] - straight  # Lw - S
    lever1 = (gap * (mob_a != mob_w))[..., None] * jnp.einsum("gwij,gwj->gwi", R, g1)
    lever2 = (gap * (mob_b != mob_w))[..., None] * jnp.einsum("gwij,gwj->gwi", R, g2)
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


def wrap_segments(ctx, static: WrapStatic, topology, points, active, segments):
    """Replace the segments of wrapped paths by their wrapped geometry.

    **Arguments:** ``ctx``: the ``Context``; ``static``: from ``compile_wrapping``;
    ``topology``: the ``PathTopology``; ``points (P, 3)`` in Ground; ``active (P,)``:
    the active points; ``segments``: the straight ``Segments``.

    **Returns:** ``Segments`` whose entries for the wrapped paths' segments give the
    length with the arcs, the directions leaving and reaching each original point (to
    and from tangent points), whether each end applies force, and the tangent points.
    """
    from ..muscles.path import Segments, _cache

    cache = _cache(ctx)
    params = cache.get("wrap_params")
    if params is None:
        params = cache["wrap_params"] = wrap_object_params(ctx.model, static)
    R_f, p_f = ctx.frames_in_ground(static.frames)
    R_obj, o_obj = spatial.compose((R_f[static.obj_frame], p_f[static.obj_frame]), (params["R"], params["p"]))
    P = topology.n_points
    length, dir_start, dir_end = segments.length, segments.dir_start, segments.dir_end
    applies = segments.applies
    applies_end = segments.applies if segments.applies_end is None else segments.applies_end
    batch = static.batch
    Gn, N, W = batch.pt.shape[0], batch.n_points, batch.n_wraps
    seq, wends, cached = _wrap_batch(batch, (R_obj, o_obj), params["dims"], points, active)
    on_path = _on_path(seq, N, W)
    tangent, arc = _rewrap(batch, (R_obj, o_obj), params["dims"], wends, jnp.stack([on_path, cached], -1))
    wpos, warc = tangent[:, :, 0], arc[:, :, 0]
    wgnd = _in_ground(wpos, tangent[:, :, 1], cached)
    lever = _lever(wpos, wgnd, cached)
    orig = _path_points(batch, points)
    _, piece, surface, differ, ok, pts = _Pass(batch, (R_obj, o_obj), params["dims"], orig).length(
        seq, wgnd, warc, lever)
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
            batch, (R_obj, o_obj), params["dims"], seq, on_path, orig, seg_len, ds, de, a_s, a_e)
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
    tangent = TangentPoints(points=points.reshape(-1, 3), force_dir=force_dir.reshape(-1, 3),
                            speed_dir=speed_dir.reshape(-1, 3), mob=mob.reshape(-1),
                            row=np.repeat(batch.rows, mob.shape[1]))
    return Segments(length=length, dir_start=dir_start, dir_end=dir_end, applies=applies, applies_end=applies_end,
                    tangent=tangent)
