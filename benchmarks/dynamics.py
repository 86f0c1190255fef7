"""Forward-dynamics speed and compile time of simjax next to Pinocchio's ``aba``.

Run ``python -m benchmarks.dynamics`` (float64, CPU). For each model, built
identically in both engines (same tree, joint types, offsets and mass properties):

- ``pin aba``: one ``pinocchio.aba`` call from Python (the reference);
- ``sj api``: one call of the public ``sj.forward_dynamics(system, state)`` (Python
  dispatch of the whole model pytree included);
- ``sj core``: one call of the jitted core (kinematics, CRBA and Cholesky) on
  precomputed tree parameters, and the same evaluated ``N`` times inside one jitted
  loop (``in-jit``: the cost inside a simulation, without Python dispatch);
- ``vmap crba`` / ``vmap aba``: time per state of the core vmapped over 4096 states,
  with CRBA + Cholesky and with the articulated-body algorithm, in one vmapped call
  and (``chunked``) as a ``lax.map`` over vmapped chunks in one program, whose buffers
  stay in cache (``batching.cache_chunk``: 256 states of the 2-link arm, 16 of the
  40-link chain; ``sj.map_batch`` runs its chunks so);
- ``compile``: lowering plus compilation of ``sj.forward_dynamics``.

Goals (issue 3): vmapped time per state <= Pinocchio's single call; compile time of
the 40-body tree <= 2x that of the 2-link arm. Timings are medians of repeats; the
machine's load affects both engines alike.
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import simjax as sj  # noqa: E402
from benchmarks.suite import jit  # noqa: E402
from simjax.batching import cache_chunk  # noqa: E402
from simjax import spatial  # noqa: E402
from simjax.mechanics import dynamics as dyn  # noqa: E402
from simjax.mechanics import tree as tr  # noqa: E402


def _box_inertia(mass, size):
    x, y, z = size
    return (mass / 12 * (y * y + z * z), mass / 12 * (x * x + z * z), mass / 12 * (x * x + y * y))


# (name, parent, joint kind, location in parent, mass, box size)
def _arm():
    return [
        ("upper", None, "pin", (0, 0, 0), 2.0, (0.05, 0.3, 0.05)),
        ("lower", "upper", "pin", (0, -0.3, 0), 1.5, (0.04, 0.25, 0.04)),
    ]


def _chain(n):
    return [
        (
            f"link{i}",
            None if i == 0 else f"link{i - 1}",
            "pin",
            (0, 0, 0) if i == 0 else (0, -0.2, 0),
            1.0,
            (0.03, 0.2, 0.03),
        )
        for i in range(n)
    ]


def _humanoid():
    spec = [
        ("pelvis", None, "free", (0, 1.0, 0), 10.0, (0.3, 0.15, 0.2)),
        ("torso", "pelvis", "universal", (0, 0.1, 0), 25.0, (0.35, 0.5, 0.2)),
        ("head", "torso", "pin", (0, 0.3, 0), 5.0, (0.2, 0.2, 0.2)),
    ]
    for side, s in (("r", 1.0), ("l", -1.0)):
        spec += [
            (f"thigh_{side}", "pelvis", "ball", (0, -0.05, 0.1 * s), 8.0, (0.1, 0.4, 0.1)),
            (f"shank_{side}", f"thigh_{side}", "pin", (0, -0.4, 0), 4.0, (0.08, 0.4, 0.08)),
            (f"foot_{side}", f"shank_{side}", "pin", (0, -0.4, 0), 1.0, (0.2, 0.05, 0.1)),
            (f"upperarm_{side}", "torso", "ball", (0, 0.25, 0.22 * s), 2.0, (0.06, 0.3, 0.06)),
            (f"forearm_{side}", f"upperarm_{side}", "pin", (0, -0.3, 0), 1.5, (0.05, 0.25, 0.05)),
        ]
    return spec


def _gravity():
    return np.array([0.0, -9.80665, 0.0])


def _orientation(i):
    """Body ``i``'s joint orientation in its parent (x-y-z body angles, rad)."""
    return (0.1 * i, -0.05 * i, 0.02 * i)


def simjax_model(spec, name="bench"):
    """The model ``spec`` in simjax (an ``sj.Model``; needs no Pinocchio)."""
    model = sj.Model(name, gravity=_gravity())
    for i, (body, parent, kind, loc, mass, size) in enumerate(spec):
        com = np.array([0.0, -size[1] / 2, 0.0])
        model = model.add(sj.Body(body, mass=mass, mass_center=com, inertia=_box_inertia(mass, size)))
        ppath = "/ground" if parent is None else f"/bodyset/{parent}"
        cls = {"pin": sj.PinJoint, "ball": sj.BallJoint, "free": sj.FreeJoint, "universal": sj.UniversalJoint}[kind]
        model = model.add(
            cls(f"j_{body}", ppath, f"/bodyset/{body}", location_in_parent=loc, orientation_in_parent=_orientation(i))
        )
    return model


def build(spec, name="bench"):
    """The model ``spec`` in simjax and in Pinocchio: ``(sj.Model, pinocchio.Model)``."""
    import pinocchio as pin

    pm = pin.Model()
    pm.gravity = pin.Motion(_gravity(), np.zeros(3))
    ids = {}
    for i, (body, parent, kind, loc, mass, size) in enumerate(spec):
        jm = {"pin": pin.JointModelRZ, "ball": pin.JointModelSpherical, "free": pin.JointModelFreeFlyer}.get(kind)
        jm = jm() if jm else pin.JointModelUniversal(np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
        R = np.asarray(spatial.xyz_body_rotation(np.asarray(_orientation(i))))
        jid = pm.addJoint(0 if parent is None else ids[parent], jm, pin.SE3(R, np.asarray(loc, float)), f"j_{body}")
        com = np.array([0.0, -size[1] / 2, 0.0])
        pm.appendBodyToJoint(jid, pin.Inertia(mass, com, np.diag(_box_inertia(mass, size))), pin.SE3.Identity())
        ids[body] = jid
    return simjax_model(spec, name), pm


MODELS = (
    ("2-link arm", _arm),
    ("10-link chain", lambda: _chain(10)),
    ("humanoid", _humanoid),
    ("40-link chain", lambda: _chain(40)),
)


def core_functions(model):
    """``(system, params, crba, aba)``: the built system, its tree parameters, and the
    forward-dynamics cores ``fn(params, q, u, tau) -> udot`` by CRBA + Cholesky and by
    the articulated-body algorithm."""
    system = model.build()
    tree = system.topology.tree
    params = tr.tree_params(model, tree)

    def crba(params, q, u, tau):
        pos = tr.position_kinematics(tree, params, q)
        vel = tr.velocity_kinematics(tree, params, pos, u)
        return dyn.forward_dynamics_unconstrained(tree, params, pos, vel, tau)

    def aba(params, q, u, tau):
        pos = tr.position_kinematics(tree, params, q)
        vel = tr.velocity_kinematics(tree, params, pos, u)
        return dyn.aba(tree, params, pos, vel, tau)

    return system, params, crba, aba


def random_states(tree, n, seed=0):
    """``n`` random ``(q, u, tau)`` for ``tree`` (``n=None``: one state, unbatched)."""
    rng = np.random.default_rng(seed)
    shape = () if n is None else (n,)
    return (
        jnp.asarray(rng.uniform(-0.5, 0.5, shape + (tree.nq,))),
        jnp.asarray(rng.normal(size=shape + (tree.nu,))),
        jnp.asarray(rng.normal(size=shape + (tree.nu,))),
    )


def _median_time(fn, repeat, number):
    """Median over ``repeat`` runs of the CPU time (of this process, all its threads)
    per call: robust to other processes sharing the machine."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(number):
            out = fn()
        jax.block_until_ready(out)
        times.append((time.process_time() - t) / number)
    return float(np.median(times))


def bench(label, spec, batch=4096, loop=1000, repeat=5):
    """Time one model; returns a dict of seconds."""
    import pinocchio as pin

    model, pm = build(spec, "bench")
    res = {"label": label}
    system, params, core, core_aba = core_functions(model)
    state = system.default_state()
    tree = system.topology.tree
    res["nb"], res["nu"] = tree.n_mob - 1, tree.nu
    t0 = time.perf_counter()
    sj.forward_dynamics(system, state).block_until_ready()
    res["compile"] = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    q, u, tau = random_states(tree, None)
    state = state.replace(q=q, u=u)
    res["api"] = _median_time(lambda: sj.forward_dynamics(system, state), repeat, 200)

    f = jit(core)
    f(params, q, u, tau).block_until_ready()
    res["core"] = _median_time(lambda: f(params, q, u, tau), repeat, 200)

    def looped(params, q, u, tau):
        def body(i, acc):
            return acc + core(params, q + 1e-9 * acc[0], u, tau)

        return jax.lax.fori_loop(0, loop, body, jnp.zeros_like(tau))

    fl = jit(looped)
    fl(params, q, u, tau).block_until_ready()
    res["in_jit"] = _median_time(lambda: fl(params, q, u, tau), repeat, 1) / loop

    qb, ub, tb = random_states(tree, batch, seed=1)
    for key, fn in (("vmap_crba", core), ("vmap_aba", core_aba)):
        fv = jit(jax.vmap(fn, in_axes=(None, 0, 0, 0)))
        fv(params, qb, ub, tb).block_until_ready()
        res[key] = _median_time(lambda: fv(params, qb, ub, tb), repeat, 1) / batch
        # the same batch as a loop over vmapped chunks, in one program: the chunk's
        # buffers stay in cache (a 4096-state batch's do not); sized as map_batch sizes them
        chunk = cache_chunk(tree.nq + 2 * tree.nu)
        fc = jit(lambda p, q, u, t, fn=fn: jax.lax.map(lambda x: fn(p, *x), (q, u, t), batch_size=chunk))
        fc(params, qb, ub, tb).block_until_ready()
        res[key + "_chunked"] = _median_time(lambda: fc(params, qb, ub, tb), repeat, 1) / batch

    data = pm.createData()
    qp = pin.neutral(pm)
    qp = pin.integrate(pm, qp, rng.normal(size=pm.nv) * 0.3)
    vp, tp = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    res["pin"] = _median_time(lambda: pin.aba(pm, data, qp, vp, tp), repeat, 2000)
    return res


def main(argv=None):
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rows = [bench(label, spec(), batch=args.batch, repeat=args.repeat) for label, spec in MODELS]
    us = 1e6
    print(
        f"{'model':15s} {'bodies':>6s} {'nu':>4s} {'pin aba':>9s} {'sj api':>9s} {'sj core':>9s} {'in-jit':>9s} "
        f"{'vmap crba':>10s} {'vmap aba':>9s} {'chunked crba':>13s} {'chunked aba':>12s} {'vmap/pin':>8s} "
        f"{'compile':>8s}"
    )
    for r in rows:
        best = min(r[k] for k in ("vmap_crba", "vmap_aba", "vmap_crba_chunked", "vmap_aba_chunked"))
        print(
            f"{r['label']:15s} {r['nb']:6d} {r['nu']:4d} {r['pin'] * us:8.2f}u {r['api'] * us:8.1f}u "
            f"{r['core'] * us:8.1f}u {r['in_jit'] * us:8.2f}u {r['vmap_crba'] * us:9.2f}u "
            f"{r['vmap_aba'] * us:8.2f}u {r['vmap_crba_chunked'] * us:12.2f}u {r['vmap_aba_chunked'] * us:11.2f}u "
            f"{best / r['pin']:8.2f} {r['compile']:7.2f}s"
        )
    print(f"compile ratio 40-link chain / 2-link arm: {rows[-1]['compile'] / rows[0]['compile']:.2f} (goal <= 2)")
    print("(u = microseconds; vmap columns are per state over", args.batch, "states; vmap/pin uses the fastest)")


if __name__ == "__main__":
    main()
