"""Random models written by OpenSim 4.6 load in simjax with OpenSim's dynamics.

The model is built with simjax's API, written with ``save_osim``, loaded and
written again by OpenSim (``printToXML``), and that OpenSim-written file is what
both engines load. It has every joint type (pin, slider, universal, gimbal, planar,
weld, ball, free, ellipsoid, custom with spline and linear functions) and a
coordinate coupler; ``test_osim_constraints`` does the same for constraints,
locked and prescribed coordinates, actuators and a controller.

Coordinate ranges stay within ±1 rad: a gimbal joint's mass matrix becomes singular
at a middle angle of ±pi/2, where both engines lose digits.
"""

import dataclasses

import jax
import numpy as np
import pytest

import simjax as sj
from simjax.io.osim import load_osim, save_osim

osim = pytest.importorskip("opensim")
from simjax.io.osim.validate import validate  # noqa: E402


def random_inertia(rng):
    R, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    p = np.sort(rng.uniform(0.05, 0.5, 3))
    p[2] = min(p[2], p[0] + p[1] - 0.01)
    inertia = R @ np.diag(p) @ R.T
    return (inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2])


def every_joint_model(seed):
    rng = np.random.default_rng(seed)
    m = sj.Model(f"joints{seed}", gravity=tuple(rng.uniform(-10, 10, 3)))
    parent = "/ground"
    kinds = ["Free", "Pin", "Slider", "Universal", "Gimbal", "Planar", "Weld", "Ball", "Custom", "Ellipsoid"]
    for i, kind in enumerate(kinds):
        m = m.add(
            sj.Body(
                f"b{i}", mass=rng.uniform(0.5, 3), mass_center=rng.uniform(-0.2, 0.2, 3), inertia=random_inertia(rng)
            )
        )
        offsets = dict(
            location_in_parent=rng.uniform(-0.5, 0.5, 3),
            orientation_in_parent=rng.uniform(-1, 1, 3),
            location_in_child=rng.uniform(-0.5, 0.5, 3),
            orientation_in_child=rng.uniform(-1, 1, 3),
        )
        child = f"/bodyset/b{i}"
        if kind == "Custom":

            def axis(coord, direction, fn):
                return sj.TransformAxis(
                    coordinates=(coord,) if coord else (), axis=np.asarray(direction, float), function=fn
                )

            st = sj.SpatialTransform(
                axes=(
                    axis("c_a", (0, 0, 1), sj.LinearFunction((1.0, 0.0))),
                    axis("c_a", (1, 0, 0), sj.SimmSpline(x=np.linspace(-3, 3, 7), y=rng.uniform(-0.5, 0.5, 7))),
                    axis(None, (0, 1, 0), sj.Constant(0.0)),
                    axis("c_b", (1, 0, 0), sj.LinearFunction((rng.uniform(0.5, 2), rng.uniform(-0.1, 0.1)))),
                    axis("c_a", (0, 1, 0), sj.SimmSpline(x=np.linspace(-3, 3, 5), y=rng.uniform(-0.1, 0.1, 5))),
                    axis(None, (0, 0, 1), sj.Constant(0.1)),
                )
            )
            coords = (sj.Coordinate("c_a", range=(-1, 1)), sj.Coordinate("c_b", range=(-1, 1)))
            joint = sj.CustomJoint(f"j{i}", parent, child, spatial_transform=st, coordinates=coords, **offsets)
        else:
            cls = getattr(sj, kind + "Joint")
            coords = tuple(
                sj.Coordinate(f"j{i}_{k}", range=(-1, 1), default_value=rng.uniform(-0.5, 0.5))
                for k in range(cls.num_coordinates_default())
            )
            if kind == "Ellipsoid":
                offsets["radii_x_y_z"] = rng.uniform(0.1, 0.5, 3)
            joint = cls(f"j{i}", parent, child, coordinates=coords, **offsets)
        m = m.add(joint)
        parent = child
    return m.add(
        sj.CoordinateCouplerConstraint(
            name="couple",
            independent_coordinate="/jointset/j1/j1_0",
            dependent_coordinate="/jointset/j2/j2_0",
            coupled_coordinates_function=sj.LinearFunction((0.3, 0.1)),
        )
    )


def without_extras(comp):
    """The component tree without the display content OpenSim adds (frame geometry, ...)."""
    changes = {"extras": ()}
    for f in dataclasses.fields(comp):
        value = getattr(comp, f.name)
        if isinstance(value, sj.Component):
            changes[f.name] = without_extras(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, sj.Component) for v in value):
            changes[f.name] = tuple(without_extras(v) for v in value)
    return comp.replace(**changes)


def written_by_opensim(model, tmp_path):
    mine = tmp_path / "simjax.osim"
    save_osim(model, mine)
    om = osim.Model(str(mine))
    om.initSystem()
    theirs = tmp_path / "opensim.osim"
    om.printToXML(str(theirs))
    return theirs


def check_against_opensim(model, seed, tmp_path):
    """Compare the OpenSim-written file of ``model`` with the original, then both engines."""
    path = written_by_opensim(model, tmp_path)
    # what OpenSim wrote is the model simjax wrote, except that OpenSim writes
    # list-valued properties (spline knots, coefficients) to 6 significant digits
    leaves, tree = jax.tree_util.tree_flatten(without_extras(load_osim(path)))
    leaves0, tree0 = jax.tree_util.tree_flatten(without_extras(load_osim(tmp_path / "simjax.osim")))
    assert tree == tree0
    for a, b in zip(leaves, leaves0):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    for r in validate(path, n_states=50, seed=seed):
        assert r.max_rel <= 1e-10, r


def test_every_joint_type_matches_opensim(tmp_path):
    check_against_opensim(every_joint_model(0), 0, tmp_path)


def test_joint_classes_and_functions_survive(tmp_path):
    model = load_osim(written_by_opensim(every_joint_model(0), tmp_path))
    kinds = {type(model.find(f"/jointset/j{i}")).__name__ for i in range(10)}
    assert kinds == {
        "FreeJoint",
        "PinJoint",
        "SliderJoint",
        "UniversalJoint",
        "GimbalJoint",
        "PlanarJoint",
        "WeldJoint",
        "BallJoint",
        "CustomJoint",
        "EllipsoidJoint",
    }
    axes = model.find("/jointset/j8").spatial_transform.axes
    assert [type(a.function).__name__ for a in axes] == [
        "LinearFunction",
        "SimmSpline",
        "Constant",
        "LinearFunction",
        "SimmSpline",
        "Constant",
    ]
    assert float(axes[5].function.value) == 0.1
    cc = model.find("/constraintset/couple")
    assert (cc.independent_coordinate, cc.dependent_coordinate) == ("/jointset/j1/j1_0", "/jointset/j2/j2_0")
