"""One check of a model property named by component path and property name
(``simulate.property_target``), shared by the batches, the sweeps and
``optimize.Parameter``: its messages name the path, the property and what is wrong."""

import re

import pytest

import simjax as sj
from simjax import optimize
from simjax.simulate import property_target


@pytest.fixture(scope="module")
def system():
    return sj.models.load("double_pendulum").build()


@pytest.mark.parametrize(
    "key, target, message",
    [
        ("/bodyset/rod1|mass", ("/bodyset/rod1", "mass", None), None),
        ("/bodyset/rod1|mass_center[1]", ("/bodyset/rod1", "mass_center", 1), None),
        ("mass", None, "expected 'component path|property'"),
        ("/bodyset/rod1|mass_center[y]", None, "element 'y' is not an integer"),
        ("/bodyset/nothing|mass", None, "'/bodyset/nothing' names no component"),
        ("/bodyset/rod1|mas", None, "Body '/bodyset/rod1' has no numeric property 'mas'"),
        ("/bodyset/rod1|mass[0]", None, "'mass' of '/bodyset/rod1' is a scalar; drop the [0]"),
        ("/bodyset/rod1|mass_center", None, "'mass_center' of '/bodyset/rod1' has 3 elements: choose element i"),
        ("/bodyset/rod1|mass_center[3]", None, "has 3 elements"),
    ],
)
def test_property_target(system, key, target, message):
    if message is None:
        assert property_target(system, key) == target
    else:
        with pytest.raises(ValueError, match=re.escape(f"property {key!r}: ") + ".*" + re.escape(message)):
            property_target(system, key)


@pytest.mark.parametrize(
    "paths, prop, element, key",
    [
        ("/bodyset/nothing", "mass", None, "/bodyset/nothing|mass"),
        (["/bodyset/rod2", "/bodyset/rod1"], "mas", None, "/bodyset/rod2|mas"),
        ("/bodyset/rod1", "mass", 0, "/bodyset/rod1|mass[0]"),
        ("/bodyset/rod1", "mass_center", None, "/bodyset/rod1|mass_center"),
        ("/bodyset/rod1", "mass_center", 5, "/bodyset/rod1|mass_center[5]"),
    ],
)
def test_a_parameter_is_checked_as_a_property_key(system, paths, prop, element, key):
    """``Problem.parameter`` raises ``property_target``'s message for the same key,
    prefixed with the parameter's name."""
    with pytest.raises(ValueError) as expected:
        property_target(system, key)
    with pytest.raises(ValueError) as raised:
        optimize.Problem(system).parameter("p", paths, prop, (0.0, 1.0), element=element)
    assert str(raised.value) == f"Parameter 'p': {expected.value}"


def test_a_valid_parameter_is_added(system):
    problem = optimize.Problem(system).parameter("c", ["/bodyset/rod1", "/bodyset/rod2"], "mass_center", (0, 1), 1)
    assert problem.parameters[0].paths == ("/bodyset/rod1", "/bodyset/rod2")
