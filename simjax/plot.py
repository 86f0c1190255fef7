"""Plots of trajectories, outputs and moment arms, and a stick-figure animation.

Needs matplotlib (``pip install "simjax[plot]"``), imported on first use. Every
function draws into a given ``matplotlib`` Axes (or a new figure) and returns what it
drew on, so notebooks can compose them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_trajectory", "plot_outputs", "plot_moment_arms", "animate"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("simjax.plot needs matplotlib: pip install 'simjax[plot]'") from e
    return plt


def _axes(ax):
    if ax is None:
        _, ax = _pyplot().subplots()
    return ax


def plot_trajectory(traj, coordinates=None, ax=None, speeds: bool = False):
    """Coordinate values (or speeds) of a ``Trajectory`` over time.

    **Arguments:** ``traj``; ``coordinates``: names (default all); ``ax``: a matplotlib
    Axes (default a new figure); ``speeds``: plot speeds instead of values.

    **Returns:** the Axes.
    """
    ax = _axes(ax)
    system = traj.system
    names = list(system.coordinate_names if coordinates is None else coordinates)
    keep = np.asarray(traj.valid)
    t = np.asarray(traj.t)[keep]
    tree = system.topology.tree
    for name in names:
        info = tree.coordinates[system.coordinate_path(name)]
        col = np.asarray(traj.u if speeds else traj.q)[keep][:, info.u if speeds else info.q]
        ax.plot(t, col, label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("speed" if speeds else "value")
    ax.legend()
    return ax


def plot_outputs(traj, specs, ax=None):
    """Outputs (``"/path|name"``) evaluated over a trajectory.

    **Arguments:** ``traj``; ``specs``: output specs; ``ax`` as in ``plot_trajectory``.

    **Returns:** the Axes.
    """
    ax = _axes(ax)
    keep = np.asarray(traj.valid)
    t = np.asarray(traj.t)[keep]
    for spec in specs:
        ax.plot(t, np.asarray(traj.output(spec))[keep], label=spec)
    ax.set_xlabel("time (s)")
    ax.legend()
    return ax


def plot_moment_arms(angles, arms, labels, reference=None, ax=None, xlabel: str = "coordinate (rad)"):
    """Moment-arm curves over a coordinate sweep, optionally next to reference curves.

    **Arguments:** ``angles (n,)``; ``arms (n, k)`` (m); ``labels``: k names;
    ``reference``: ``(n, k)`` drawn dashed (e.g. OpenSim's); ``ax``; ``xlabel``.

    **Returns:** the Axes.
    """
    ax = _axes(ax)
    arms = np.asarray(arms)
    for j, label in enumerate(labels):
        (line,) = ax.plot(angles, arms[:, j], label=label)
        if reference is not None:
            ax.plot(angles, np.asarray(reference)[:, j], "--", color=line.get_color())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("moment arm (m)")
    ax.legend(fontsize="small")
    return ax


def _frame_origins(system, states):
    """Ground positions ``(n_samples, n_bodies, 3)`` of the body frames."""
    import jax

    from .api import body_poses

    return np.asarray(jax.vmap(lambda st: body_poses(system, st)[1])(states))


def animate(traj, plane: str = "xy", stride: int = 1, interval_ms: int = 40):
    """A stick figure of the body frames (each joined to its parent) over a trajectory,
    projected on a plane.

    **Arguments:** ``traj``; ``plane``: two of ``x``, ``y``, ``z``; ``stride``: use every
    ``stride``-th sample; ``interval_ms``: time between frames.

    **Returns:** a ``matplotlib.animation.FuncAnimation`` (``.to_jshtml()`` for a
    notebook, ``.save("a.gif", writer="pillow")`` for a file).
    """
    plt = _pyplot()
    from matplotlib import animation

    from .state import State

    keep = np.flatnonzero(np.asarray(traj.valid))[::stride]
    states = State(
        t=traj.t[keep],
        q=traj.q[keep],
        u=traj.u[keep],
        z=traj.z[keep],
        d=np.broadcast_to(np.asarray(traj.d), (len(keep),) + np.shape(traj.d)),
    )
    P = _frame_origins(traj.system, states)
    axes = ["xyz".index(c) for c in plane]
    parent = np.asarray(traj.system.topology.tree.parent)
    fig, ax = plt.subplots()
    span = P[..., axes]
    lo, hi = span.min(axis=(0, 1)), span.max(axis=(0, 1))
    pad = 0.1 * max(float((hi - lo).max()), 1e-3)
    ax.set_xlim(lo[0] - pad, hi[0] + pad)
    ax.set_ylim(lo[1] - pad, hi[1] + pad)
    ax.set_aspect("equal")
    ax.set_xlabel(plane[0])
    ax.set_ylabel(plane[1])
    lines = [ax.plot([], [], "o-", color="C0")[0] for _ in range(1, len(parent))]
    title = ax.set_title("")

    def draw(k):
        for i, line in enumerate(lines, start=1):
            a, b = P[k, parent[i]][axes], P[k, i][axes]
            line.set_data([a[0], b[0]], [a[1], b[1]])
        title.set_text(f"t = {float(np.asarray(traj.t)[keep][k]):.2f} s")
        return lines + [title]

    anim = animation.FuncAnimation(fig, draw, frames=len(keep), interval=interval_ms, blit=False)
    plt.close(fig)
    return anim
