"""Helpers for comparing simjax forces with OpenSim 4.6 (the oracle) at random states.

Both models are built with the same coordinates; states are set coordinate by
coordinate (value and speed), so the two engines' internal orderings never matter.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import simjax as sj
from simjax.forward import Context


def coordinate_names(osim_model):
    """Names of an OpenSim model's coordinates, in its coordinate-set order."""
    cs = osim_model.getCoordinateSet()
    return [cs.get(i).getName() for i in range(cs.getSize())]


def set_osim_state(osim_model, s, names, q, u, t=0.0):
    """Set coordinate values and speeds (no projection) and the time."""
    cs = osim_model.getCoordinateSet()
    s.setTime(float(t))
    for n, qi, ui in zip(names, q, u):
        c = cs.get(n)
        c.setValue(s, float(qi), False)
        c.setSpeedValue(s, float(ui))


def osim_udot(osim_model, s, names):
    """Coordinate accelerations after ``realizeAcceleration``."""
    osim_model.realizeAcceleration(s)
    cs = osim_model.getCoordinateSet()
    return np.array([cs.get(n).getAccelerationValue(s) for n in names])


def sj_states(system, names, Q, U, t=None):
    """A batched simjax State from coordinate values ``Q (n, k)`` and speeds ``U``."""
    tree = system.topology.tree
    paths = [system.coordinate_path(n) for n in names]
    qi = np.asarray([tree.coordinates[p].q for p in paths])
    ui = np.asarray([tree.coordinates[p].u for p in paths])
    base = system.default_state()
    n = Q.shape[0]
    q = jnp.broadcast_to(base.q, (n, tree.nq)).at[:, qi].set(Q)
    u = jnp.broadcast_to(base.u, (n, tree.nu)).at[:, ui].set(U)
    z = jnp.broadcast_to(base.z, (n,) + base.z.shape)
    d = jnp.broadcast_to(base.d, (n,) + base.d.shape)
    tt = jnp.zeros(n) if t is None else jnp.asarray(t, float)
    return sj.State(t=tt, q=q, u=u, z=z, d=d)


def sj_udot(system, names, states):
    """Coordinate accelerations of a batch of states, in ``names`` order."""
    tree = system.topology.tree
    ui = np.asarray([tree.coordinates[system.coordinate_path(n)].u for n in names])
    udot = jax.vmap(lambda st: sj.forward_dynamics(system, st))(states)
    return np.asarray(udot)[:, ui]


def group_body_forces(system, states, cls):
    """Body forces ``(n, n_mob, 6)`` of the group of ``cls`` and body origins
    ``(n, n_mob, 3)`` for a batch of states (jitted, vmapped)."""

    @eqx.filter_jit
    def run(system, states):
        def one(st):
            ctx = Context(system, st)
            (g,) = [g for g in ctx.topology.role_groups("forces") if g.cls is cls]
            return ctx.force_results[id(g)].body, ctx.pos.p0

        return jax.vmap(one)(states)

    F, p0 = run(system, states)
    return np.asarray(F), np.asarray(p0)


def records(system, states, cls, mobs):
    """OpenSim-style records of a force group: per body in ``mobs``, the force then the
    torque about the body origin, in Ground."""
    F, p0 = group_body_forces(system, states, cls)
    cols = []
    for m in mobs:
        cols += [F[:, m, 3:], F[:, m, :3] - np.cross(p0[:, m], F[:, m, 3:])]
    return np.concatenate(cols, 1)


def group_result(system, state, cls):
    """The ``Forces`` of the group of ``cls`` at one state (un-jitted)."""
    ctx = Context(system, state)
    (g,) = [g for g in ctx.topology.role_groups("forces") if g.cls is cls]
    return ctx.force_results[id(g)], ctx, g


def assert_close(a, b, rtol, what=""):
    """``|a - b| <= rtol * max(|b|, 1)`` elementwise, scaled by the largest entry."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(np.abs(b).max(initial=0.0), 1e-300)
    err = np.abs(a - b).max(initial=0.0) / scale
    assert err <= rtol, f"{what}: max relative error {err:.3e} > {rtol:.1e}"
    return err
