"""Single-muscle OpenSim rigs for the wrapping tests (helpers, not tests).

Each rig is an OpenSim model written as XML: a body ``arm`` on a pin (about z) or a
slider (along x) joint, a PathActuator from a point on ground to a point on the arm,
and one wrap object on ground or on the arm. OpenSim gives the path length and
``computeMomentArm`` along a sweep of the coordinate; simjax computes the same
segment with ``simjax.wrapping`` from the rig's kinematics (written here), one jit
per wrap type for all its rigs and coordinates.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import opensim

from simjax import spatial
from simjax.wrapping import parse_method, parse_quadrant, smooth_segment_length
from simjax.wrapping._wrapmath import norm  # zero (not NaN) gradient at zero: coincident points


TAGS = {"sphere": "WrapSphere", "cylinder": "WrapCylinder", "ellipsoid": "WrapEllipsoid", "torus": "WrapTorus"}
N_Q = 51
H = 1e-6
EPS = 1e-4


def _v(p):
    return " ".join(repr(float(x)) for x in p)


def _wrap_xml(kind, name, dims, rot, tr, quadrant, active=True):
    d = [repr(float(x)) for x in tuple(dims) + (0.0, 0.0)]
    body = {
        "cylinder": f"<radius>{d[0]}</radius><length>{d[1]}</length>",
        "sphere": f"<radius>{d[0]}</radius>",
        "ellipsoid": f"<dimensions>{d[0]} {d[1]} {d[2]}</dimensions>",
        "torus": f"<inner_radius>{d[0]}</inner_radius><outer_radius>{d[1]}</outer_radius>",
    }[kind]
    return (
        f'<{TAGS[kind]} name="{name}"><active>{str(active).lower()}</active>'
        f"<xyz_body_rotation>{_v(rot)}</xyz_body_rotation><translation>{_v(tr)}</translation>"
        f"<quadrant>{quadrant}</quadrant>{body}</{TAGS[kind]}>"
    )


def _rig_xml(r):
    wrap = _wrap_xml(r["kind"], "W", r["dims"], r["rot"], r["tr"], r["quadrant"])
    wraps = [("W", r["method"])]
    dummy = ""
    if r["multi"]:  # a second, inactive PathWrap: OpenSim's "several wraps" code path
        dummy = _wrap_xml("sphere", "D", (0.01,), (0, 0, 0), (5, 5, 5), "all", active=False)
        wraps.append(("D", "hybrid"))
    ground, body = (dummy, wrap) if r["on_body"] else (wrap + dummy, "")
    jtag = "SliderJoint" if r["slide"] else "PinJoint"
    pws = "".join(
        f'<PathWrap name="pw{i}"><wrap_object>{w}</wrap_object><method>{m}</method><range>-1 -1</range></PathWrap>'
        for i, (w, m) in enumerate(wraps)
    )
    return f"""<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="40000"><Model name="rig">
<Ground name="ground"><WrapObjectSet name="wrapobjectset"><objects>{ground}</objects></WrapObjectSet></Ground>
<BodySet name="bodyset"><objects><Body name="arm"><mass>1</mass><mass_center>0 0 0</mass_center>
<inertia>0.1 0.1 0.1 0 0 0</inertia>
<WrapObjectSet name="wrapobjectset"><objects>{body}</objects></WrapObjectSet></Body></objects></BodySet>
<JointSet name="jointset"><objects><{jtag} name="j"><socket_parent_frame>/ground</socket_parent_frame>
<socket_child_frame>/bodyset/arm</socket_child_frame>
<coordinates><Coordinate name="q"><range>-10 10</range></Coordinate></coordinates></{jtag}></objects></JointSet>
<ForceSet name="forceset"><objects><PathActuator name="act"><GeometryPath name="geometrypath">
<PathPointSet name="pathpointset"><objects>
<PathPoint name="pa"><socket_parent_frame>/ground</socket_parent_frame><location>{_v(r["pa"])}</location></PathPoint>
<PathPoint name="pb"><socket_parent_frame>/bodyset/arm</socket_parent_frame>
<location>{_v(r["pb"])}</location></PathPoint>
</objects></PathPointSet><PathWrapSet name="pathwrapset"><objects>{pws}</objects></PathWrapSet>
</GeometryPath></PathActuator></objects></ForceSet></Model></OpenSimDocument>"""


def rig(
    kind,
    pa,
    pb,
    dims,
    quadrant="all",
    rot=(0.3, -0.2, 0.5),
    tr=(0.01, -0.005, 0.002),
    method="hybrid",
    slide=False,
    on_body=False,
    multi=False,
    q=(-1.5, 1.5),
    degenerate=False,
):
    return dict(
        kind=kind,
        pa=pa,
        pb=pb,
        dims=tuple(dims) + (0.0,) * (3 - len(dims)),
        quadrant=quadrant,
        rot=rot,
        tr=tr,
        method=method,
        slide=slide,
        on_body=on_body,
        multi=multi,
        q=q,
        degenerate=degenerate,
    )


def degenerate_rigs(kind, dims, quadrant, centre=(0.0, 0.0, 0.0)):
    """Rigs for gradient finiteness only (not compared with OpenSim): at q = 0 the
    segment passes through the object's center (or axis); an end point at the
    center (inside); end points that coincide at q = 0."""
    c = np.asarray(centre)
    common = dict(rot=(0.0, 0.0, 0.0), tr=(0.0, 0.0, 0.0), q=(-1.0, 1.0), degenerate=True, multi=True)
    return [
        rig(kind, tuple(c + (-0.2, 0, 0)), tuple(c + (0.2, 0, 0)), dims, quadrant, **common),
        rig(kind, tuple(c), (0.2, 0.0, 0.0), dims, quadrant, **common),
        rig(kind, (0.1, 0.0, 0.0), (0.1, 0.0, 0.0), dims, quadrant, **common),
    ]


PA, PB = (-0.2, 0.02, -0.03), (0.2, 0.0, 0.05)
TORUS = dict(
    pa=(0.02, -0.25, 0.01),
    pb=(0.03, 0.25, -0.02),
    rot=(np.pi / 2 + 0.1, 0.05, 0.2),
    tr=(0.005, 0.01, -0.004),
    q=(-1.0, 1.0),
)
RIGS = {
    "sphere": [
        rig("sphere", (-0.2, 0.02, 0.0), (0.2, 0.0, 0.01), (0.05,), q=(-1.2, 1.2)),
        rig("sphere", (-0.2, 0.02, 0.0), (0.2, 0.0, 0.01), (0.05,), "+y", q=(-1.2, 1.2)),
        rig("sphere", (-0.2, 0.02, 0.0), (0.2, 0.0, 0.01), (0.05,), "-y", q=(-1.2, 1.2)),
        rig(
            "sphere",
            (-0.2, -0.05, 0.01),
            (0.2, 0.0, 0.0),
            (0.02,),
            "-x",
            rot=(0.1, 0.2, 0.3),
            tr=(0.0, -0.01, 0.0),
            slide=True,
            on_body=True,
            q=(-0.15, 0.3),
        ),
    ],
    "cylinder": [
        rig("cylinder", PA, PB, (0.04, 0.3)),
        rig("cylinder", PA, PB, (0.04, 0.3), "+x"),
        rig("cylinder", PA, PB, (0.04, 0.3), "-y"),
        rig("cylinder", PA, PB, (0.04, 0.3), "+x", multi=True),
        rig("cylinder", PA, PB, (0.04, 0.3), "all", multi=True),
        rig("cylinder", PA, PB, (0.015, 0.04), "all", rot=(0.2, 0.6, 0.1)),  # short: the end caps matter
        rig(
            "cylinder",
            (-0.2, -0.05, 0.01),
            (0.2, 0.0, 0.0),
            (0.02, 0.1),
            "-x",
            rot=(0.1, 0.2, 0.3),
            tr=(0.0, -0.01, 0.0),
            slide=True,
            on_body=True,
            q=(-0.15, 0.3),
        ),
    ],
    "ellipsoid": [
        rig("ellipsoid", PA, PB, (0.06, 0.04, 0.05)),
        rig("ellipsoid", PA, PB, (0.06, 0.04, 0.05), "-y"),
        rig("ellipsoid", PA, PB, (0.06, 0.04, 0.05), "+x"),
        rig("ellipsoid", PA, PB, (0.06, 0.04, 0.05), "z", method="midpoint"),
        rig("ellipsoid", PA, PB, (0.06, 0.04, 0.05), "-z", method="axial"),
        rig("ellipsoid", PA, PB, (0.09, 0.03, 0.04), "all", rot=(1.0, 0.3, -0.4)),
        rig(
            "ellipsoid",
            (-0.2, -0.05, 0.01),
            (0.2, 0.0, 0.0),
            (0.03, 0.02, 0.025),
            "all",
            rot=(0.1, 0.2, 0.3),
            tr=(0.0, -0.01, 0.0),
            slide=True,
            on_body=True,
            q=(-0.15, 0.3),
        ),
    ],
    "torus": [
        rig("torus", dims=(0.02, 0.08), **TORUS),
        rig("torus", dims=(0.02, 0.08), quadrant="+x", **TORUS),
        rig("torus", dims=(0.02, 0.08), quadrant="+z", **TORUS),
        rig("torus", dims=(0.02, 0.08), multi=True, **TORUS),
    ],
}
RIGS["sphere"] += degenerate_rigs("sphere", (0.05,), "-y")
RIGS["cylinder"] += degenerate_rigs("cylinder", (0.05, 0.2), "+x")
RIGS["ellipsoid"] += degenerate_rigs("ellipsoid", (0.05, 0.04, 0.03), "+z")
RIGS["torus"] += degenerate_rigs("torus", (0.02, 0.08), "all", centre=(0.08, 0.0, 0.0))


def _sweep(r):
    q = np.linspace(*r["q"], N_Q)
    return np.concatenate([q, q - H, q + H])


def _opensim(r):
    """OpenSim's path length and moment arm along the rig's sweep."""
    if r["degenerate"]:
        return np.full((2, 3 * N_Q), np.nan)
    fd, fn = tempfile.mkstemp(suffix=".osim")
    os.write(fd, _rig_xml(r).encode())
    os.close(fd)
    try:
        m = opensim.Model(fn)
    finally:
        os.remove(fn)
    s = m.initSystem()
    path = opensim.PathActuator.safeDownCast(m.getForceSet().get("act")).getGeometryPath()
    coord = m.getCoordinateSet().get("q")
    out = []
    for q in _sweep(r):
        coord.setValue(s, float(q))
        m.realizePosition(s)
        out.append((path.getLength(s), path.computeMomentArm(s, coord)))
    return np.asarray(out).T


def _params(rigs):
    """The rigs' numbers, stacked for one vmap."""

    def col(f):
        return jnp.asarray(np.asarray([f(r) for r in rigs], dtype=float))

    return dict(
        pa=col(lambda r: r["pa"]),
        pb=col(lambda r: r["pb"]),
        rot=col(lambda r: r["rot"]),
        tr=col(lambda r: r["tr"]),
        dims=col(lambda r: r["dims"]),
        slide=col(lambda r: r["slide"]),
        on_body=col(lambda r: r["on_body"]),
        axis=jnp.asarray([parse_quadrant(r["quadrant"])[0] for r in rigs]),
        sign=jnp.asarray([parse_quadrant(r["quadrant"])[1] for r in rigs]),
        method=jnp.asarray([parse_method(r["method"]) for r in rigs]),
        single=jnp.asarray([not r["multi"] for r in rigs]),
    )


def _wrap_args(kind, p):
    d = p["dims"]
    return {
        "sphere": (d[0], p["axis"], p["sign"]),
        "cylinder": (d[0], d[1], p["axis"], p["sign"], p["single"]),
        "ellipsoid": (d, p["axis"], p["sign"], p["method"]),
        "torus": (d[0], d[1], p["axis"], p["sign"], p["single"]),
    }[kind]


@lru_cache(maxsize=None)
def _simjax(kind):
    """Jitted ``(params, q) -> (lengths, d/dq, status)`` for all rigs of one wrap type.

    lengths: exact (OpenSim's), with tangent points frozen (for the virtual-work
    moment arm), smoothed; one forward-mode pass gives all three derivatives.
    """

    def lengths(p, q):
        Rb = jnp.where(p["slide"] > 0, jnp.eye(3), spatial.rotation_z(q))
        ob = jnp.where(p["slide"] > 0, jnp.stack([q, 0.0 * q, 0.0 * q]), jnp.zeros(3))
        pb = Rb @ p["pb"] + ob
        Rw = spatial.xyz_body_rotation(p["rot"])
        R_gw = jnp.where(p["on_body"] > 0, Rb @ Rw, Rw)
        p_gw = jnp.where(p["on_body"] > 0, Rb @ p["tr"] + ob, p["tr"])
        a = R_gw.T @ (p["pa"] - p_gw)
        b = R_gw.T @ (pb - p_gw)
        smooth, _, res = smooth_segment_length(kind, a, b, *_wrap_args(kind, p), eps=EPS)
        exact = norm(a - res.r1) + res.length + norm(res.r2 - b)
        r1, r2, arc = jax.lax.stop_gradient((res.r1, res.r2, res.length))
        frozen = norm(a - r1) + arc + norm(r2 - b)
        return jnp.stack([exact, frozen, smooth]), res.status

    def one(p, q):
        val, der, status = jax.jvp(lambda q: lengths(p, q), (q,), (jnp.ones_like(q),), has_aux=True)
        return val, der, status

    # XLA's backend optimizations only cost compile time here
    return jax.jit(
        jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, 0)),
        compiler_options={"xla_backend_optimization_level": 0},
    )


@lru_cache(maxsize=None)
def _compare(kind):
    rigs = RIGS[kind]
    ref = np.stack([_opensim(r) for r in rigs])  # (rigs, 2, 3 N)
    qs = jnp.asarray(np.stack([_sweep(r) for r in rigs]))
    val, der, status = _simjax(kind)(_params(rigs), qs)
    real = np.asarray([not r["degenerate"] for r in rigs])
    return ref, np.asarray(val), np.asarray(der), np.asarray(status), real


def fd_mask(status, n):
    """Samples whose status is the same at q - H, q and q + H (no switch in between)."""
    s0, sm, sp = status[:, :n], status[:, n : 2 * n], status[:, 2 * n :]
    return (s0 == sm) & (s0 == sp)
