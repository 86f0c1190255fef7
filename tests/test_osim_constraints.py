"""A random model with constraints, actuators and a controller, written by OpenSim.

Weld and point constraints (a planar four-bar), a locked and a prescribed
coordinate, the Coordinate, Point and Torque actuators driven by a
PrescribedController: built with simjax, written by ``save_osim``, rewritten by
OpenSim 4.6, and compared with OpenSim at random valid states (assembled by
OpenSim, speeds projected onto the velocity constraints).
"""

import numpy as np
import pytest

import simjax as sj

pytest.importorskip("opensim")
from test_osim_random import check_against_opensim, random_inertia  # noqa: E402


def constrained_model(seed):
    rng = np.random.default_rng(seed)
    m = sj.Model(f"constrained{seed}", gravity=tuple(rng.uniform(-10, 10, 3)))
    for n in "ABCDEFG":
        m = m.add(
            sj.Body(n, mass=rng.uniform(0.5, 3), mass_center=rng.uniform(-0.2, 0.2, 3), inertia=random_inertia(rng))
        )

    def off():
        return dict(location_in_parent=rng.uniform(-0.5, 0.5, 3), location_in_child=rng.uniform(-0.5, 0.5, 3))

    def pin(name, parent, child, q, q0):
        return sj.PinJoint(
            name,
            parent,
            child,
            location_in_parent=(0.5 if parent != "/ground" else 0.0, 0, 0),
            location_in_child=(-0.5, 0, 0),
            coordinates=(sj.Coordinate(q, range=(-1, 1), default_value=q0),),
        )

    # a planar four-bar closed by a point constraint
    m = m.add(pin("jA", "/ground", "/bodyset/A", "qA", 0.3))
    m = m.add(pin("jB", "/bodyset/A", "/bodyset/B", "qB", -0.6))
    m = m.add(pin("jC", "/bodyset/B", "/bodyset/C", "qC", 0.3))
    m = m.add(
        sj.PointConstraint(
            name="close",
            body_1="/bodyset/C",
            body_2="/ground",
            location_body_1=(0.5, 0, 0),
            location_body_2=(2.5, 0.0, 0),
        )
    )
    m = m.add(
        sj.SliderJoint(
            "jD",
            "/ground",
            "/bodyset/D",
            **off(),
            coordinates=(
                sj.Coordinate("qD", range=(-1, 1), prescribed=True, prescribed_function=sj.Sine(0.3, 2.0, 0.1, 0.05)),
            ),
        )
    )
    m = m.add(
        sj.PinJoint(
            "jE",
            "/ground",
            "/bodyset/E",
            **off(),
            coordinates=(sj.Coordinate("qE", range=(-1, 1), locked=True, default_value=0.4),),
        )
    )
    for j, parent, child in (("jF", "/bodyset/E", "/bodyset/F"), ("jG", "/ground", "/bodyset/G")):
        m = m.add(
            sj.FreeJoint(
                j,
                parent,
                child,
                **off(),
                coordinates=tuple(sj.Coordinate(f"q{child[-1]}{i}", range=(-1, 1)) for i in range(6)),
            )
        )
    m = m.add(sj.WeldConstraint(name="weld", frame1="/bodyset/F", frame2="/bodyset/G"))
    m = m.add(sj.CoordinateActuator("tauA", "/jointset/jA/qA", optimal_force=2.0))
    m = m.add(sj.PointActuator("push", "/bodyset/F", point=(0.1, 0.2, 0.0), direction=(0, 1, 1), optimal_force=3.0))
    m = m.add(sj.TorqueActuator("twist", "/bodyset/E", "/bodyset/F", axis=(1, 0, 0), torque_is_global=False))
    ctrl = sj.PrescribedController("ctrl").prescribe("/forceset/tauA", sj.LinearFunction((1.5, -0.5)))
    ctrl = ctrl.prescribe("/forceset/push", sj.Constant(0.7))
    ctrl = ctrl.prescribe("/forceset/twist", sj.StepFunction(0.2, 0.6, -1.0, 2.0))
    return m.add(ctrl)


def test_constrained_model_matches_opensim(tmp_path):
    check_against_opensim(constrained_model(1), 1, tmp_path)
