"""Every matrix product simjax traces asks for full float32 precision: a GPU's float32
products default to TensorFloat-32 (10-bit mantissas), which left a float32
gait10dof18musc simulation on a GPU 4.6e-4 rad from float64 (1e-6 with full precision
everywhere, as on a CPU; measured on an H200). Checked on the programs' jaxprs, so it
holds on any backend."""

import inspect

import jax

import simjax as sj
from simjax import optimize
from simjax.optimize import collocation


def _coarse_products(fn, *args) -> list[str]:
    """The dot_generals of ``fn``'s jaxpr that do not ask for HIGHEST precision."""
    text = str(jax.make_jaxpr(fn)(*args))
    return [p[:160] for p in text.split("dot_general[")[1:] if "HIGHEST" not in p[:200]]


def test_simulation_and_muscle_equilibrium_trace_full_precision_products():
    system = sj.load_osim(sj.models.path("gait10dof18musc")).build()
    state = system.default_state()
    assert _coarse_products(lambda s: sj.equilibrate_muscles(system, s), state) == []
    assert _coarse_products(lambda s: sj.simulate(system, s, 0.01, n_outputs=2, throw=False).q, state) == []


def test_trajectory_optimisation_traces_full_precision_products():
    model = sj.Model("sliding_mass")
    model = model.add(sj.Body("body", 2.0, (0, 0, 0), (0, 0, 0, 0, 0, 0)))
    model = model.add(sj.SliderJoint("slider", "/ground", "/bodyset/body"))
    model = model.add(sj.CoordinateActuator("actuator", "/jointset/slider/slider_coord_0"))
    system = model.build()
    x, v = system.y_names
    problem = (
        optimize.Problem(system, 0.0, 1.0)
        .bound(x, (-2, 2), initial=0.0, final=1.0)
        .bound(v, (-10, 10), initial=0.0, final=0.0)
        .goal(optimize.ControlEffort())
    )
    # (the transcription made, and cached, outside any trace, as a first solve would make
    # it, without compiling that solve)
    defaults = inspect.signature(optimize.solve).parameters
    collocation._transcribed(
        problem, 4, *(defaults[k].default for k in ("scheme", "interpolate_controls", "dynamics_mode"))
    )
    assert _coarse_products(lambda: optimize.solve(problem, mesh=4).objective) == []
