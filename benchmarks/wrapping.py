"""Wrapping benchmark (issue 7): all path lengths of arm26.osim (six muscles over
cylinders and ellipsoids; TRIlong over three), next to OpenSim 4.6 computing the same
lengths in the same run.

- OpenSim: per state, set the coordinates, ``realizePosition`` and ask every muscle's
  GeometryPath for its length (the wrapping is done there).
- simjax: the jitted lengths at one state, and vmapped over a batch of states (time
  per state); compile times apart. A straight-line arm26 (its PathWraps removed) shows
  what wrapping costs.

Run: ``python -m benchmarks.wrapping [--batch 4096]``.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.suite import best, jit, load, timed

from simjax.forward import Context
from simjax.muscles.path import GeometryPath, path_lengths
from simjax.wrapping import smooth_paths


def random_q(om, n, seed=0):
    """``(names, q (n, n_coords))`` uniform in the coordinates' ranges."""
    cs = om.getCoordinateSet()
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    lo = np.array([cs.get(i).getRangeMin() for i in range(cs.getSize())])
    hi = np.array([cs.get(i).getRangeMax() for i in range(cs.getSize())])
    return names, lo + (hi - lo) * np.random.default_rng(seed).uniform(size=(n, len(names)))


def opensim_lengths(om, names, q):
    """OpenSim's path lengths at each row of ``q``: ``(lengths, seconds per state)``."""
    s = om.initSystem()
    cs = om.getCoordinateSet()
    coords = [cs.get(c) for c in names]
    muscles = om.getMuscles()
    paths = [muscles.get(i).getGeometryPath() for i in range(muscles.getSize())]
    out = np.zeros((len(q), len(paths)))
    t = time.perf_counter()
    for i, row in enumerate(q):
        for c, x in zip(coords, row):
            c.setValue(s, float(x), False)
        om.realizePosition(s)
        out[i] = [p.getLength(s) for p in paths]
    return out, (time.perf_counter() - t) / len(q)


def simjax_lengths(system, names, q):
    """simjax's lengths ``(n, n_paths)`` at the rows of ``q`` and the timings (s):
    ``compile_single``, ``single`` (one state), ``compile_batch``, ``per_state`` (vmapped)."""
    tree = system.topology.tree
    qi = np.asarray([tree.coordinates[system.coordinate_path(c)].q for c in names])
    s0 = system.default_state()
    acts = jnp.zeros(len(system.actuator_names))

    def lengths(x):
        return path_lengths(Context(system, s0.replace(q=s0.q.at[qi].set(x)), acts))

    Q = jnp.asarray(q)
    single = jit(lengths)
    _, c1 = timed(lambda: single(Q[0]))
    t1 = best(lambda: jax.block_until_ready(single(Q[0])), 10)
    batch = jit(jax.vmap(lengths))
    out, c2 = timed(lambda: batch(Q))
    t2 = best(lambda: jax.block_until_ready(batch(Q)), 3)
    return np.asarray(out), {"compile_single": c1, "single": t1, "compile_batch": c2, "per_state": t2 / len(q)}


def straight(system):
    """The same system with every PathWrap removed (straight-line paths)."""
    model = system.model
    for path in system.topology.paths:
        comp = system.model.find(path)
        if isinstance(comp, GeometryPath) and comp.wraps:
            model = model.set(path, wraps=())
    return model.build()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--smoothing", type=float, default=1e-3, help="PathWrap smoothing band (m) of the smoothed run")
    args = ap.parse_args(argv)
    system, om = load("arm26")
    names, q = random_q(om, args.batch)
    ref, t_os = opensim_lengths(om, names, q)
    got, t = simjax_lengths(system, names, q)
    _, t_straight = simjax_lengths(straight(system), names, q)
    smoothed, t_smooth = simjax_lengths(smooth_paths(system.model, args.smoothing).build(), names, q)
    moved = np.abs(smoothed - ref) > 1e-9
    print(f"arm26 path lengths (6 muscles), {args.batch} random states")
    print(f"  agreement with OpenSim: max |dL| = {np.abs(got - ref).max():.2e} m")
    print(f"  OpenSim                 {1e6 * t_os:10.1f} us/state")
    print(
        f"  simjax single state     {1e6 * t['single']:10.1f} us  ({t['single'] / t_os:.2f}x OpenSim), "
        f"compile {t['compile_single']:.1f} s"
    )
    print(
        f"  simjax vmapped          {1e6 * t['per_state']:10.1f} us/state ({t['per_state'] / t_os:.3f}x OpenSim), "
        f"compile {t['compile_batch']:.1f} s"
    )
    print(
        f"  straight paths, vmapped {1e6 * t_straight['per_state']:10.1f} us/state "
        f"(wrapping costs {t['per_state'] / t_straight['per_state']:.0f}x)"
    )
    print(
        f"  smoothed ({1e3 * args.smoothing:g} mm), vmapped {1e6 * t_smooth['per_state']:6.1f} us/state "
        f"({t_smooth['per_state'] / t['per_state']:.2f}x exact), compile {t_smooth['compile_batch']:.1f} s; "
        f"{100 * moved.mean():.1f}% of lengths moved from OpenSim's, by at most {np.abs(smoothed - ref).max():.2e} m"
    )


if __name__ == "__main__":
    main()
