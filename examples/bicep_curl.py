"""The seed's bicep curl, written with simjax.

OpenSim API guide, "A Simple Example": two 1 kg links joined to Ground and to each
other by pin joints, a Millard2012EquilibriumMuscle ``biceps`` from the humerus to
the radius, a PrescribedController whose excitation steps from 0.3 to 1 between
0.5 s and 3 s, the shoulder locked, the elbow starting at 90 degrees, the muscles
equilibrated, and 10 s of forward simulation. Prints the fiber force and the elbow
angle every second (the guide's ConsoleReporter table).

Run: ``python examples/bicep_curl.py``.
"""

from __future__ import annotations

import math

import numpy as np

import simjax as sj


def build_model() -> sj.Model:
    """The bicep-curl model of the OpenSim API guide.

    **Returns:** an ``sj.Model`` named ``bicep_curl``.
    """
    model = sj.Model("bicep_curl")
    # two links, 1 kg each, mass center at the body origin, zero inertia
    model = model.add(sj.Body("humerus", 1.0, (0, 0, 0), (0, 0, 0)))
    model = model.add(sj.Body("radius", 1.0, (0, 0, 0), (0, 0, 0)))
    # pin joints; each body is 1 m long
    model = model.add(
        sj.PinJoint(
            "shoulder", "/ground", "/bodyset/humerus", location_in_parent=(0, 0, 0), location_in_child=(0, 1, 0)
        )
    )
    model = model.add(
        sj.PinJoint(
            "elbow", "/bodyset/humerus", "/bodyset/radius", location_in_parent=(0, 0, 0), location_in_child=(0, 1, 0)
        )
    )
    # a muscle that flexes the elbow
    biceps = sj.Millard2012EquilibriumMuscle("biceps", 200, 0.6, 0.55, 0)
    biceps = biceps.add_new_path_point("origin", "/bodyset/humerus", (0, 0.8, 0))
    biceps = biceps.add_new_path_point("insertion", "/bodyset/radius", (0, 0.7, 0))
    model = model.add(biceps)
    # excitation 0.3 for the first 0.5 s, then rising to 1 by 3 s
    brain = sj.PrescribedController("brain").prescribe("/forceset/biceps", sj.StepFunction(0.5, 3, 0.3, 1))
    model = model.add(brain)
    # the shoulder is fixed at its default angle
    return model.set("/jointset/shoulder/shoulder_coord_0", locked=True)


def initial_state(system):
    """The guide's initial state: elbow at 0.5 pi, muscles equilibrated."""
    state = system.set_coordinates(system.default_state(), {"elbow_coord_0": 0.5 * math.pi})
    return sj.equilibrate_muscles(system, state)


REPORT = ("/forceset/biceps|fiber_force", "/jointset/elbow/elbow_coord_0|value")


def simulate(t_final: float = 10.0, n_outputs: int = 11, model: sj.Model | None = None, **kwargs):
    """Build, equilibrate and simulate the bicep curl.

    **Arguments:** ``t_final`` (s); ``n_outputs``: evenly spaced report times;
    ``model``: a variant of ``build_model()``; other keywords go to ``sj.simulate``.

    **Returns:** the ``Trajectory``.
    """
    system = (model or build_model()).build()
    return sj.simulate(system, initial_state(system), t_final, n_outputs=n_outputs, **kwargs)


def main() -> None:
    traj = simulate()
    fiber_force = np.asarray(traj.output(REPORT[0]))
    elbow = np.asarray(traj.output(REPORT[1]))
    print("[reporter]")
    print(f"{'time':>14}| {'/forceset/biceps|fiber_force':>28}| {'elbow_angle':>14}|")
    for t, f, e in zip(np.asarray(traj.t), fiber_force, elbow):
        print(f"{t:14.8e}| {f:28.8e}| {e:14.8e}|")


if __name__ == "__main__":
    main()
