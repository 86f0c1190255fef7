"""Moco's parameters, endpoint goals and path constraints (simjax.optimize) against
OpenSim Moco 4.6 run live on the same model file, problem, transcription, mesh and
tolerances (tests/_moco.py)."""

import math

import numpy as np
import pytest

import simjax as sj
from simjax import optimize
from simjax.optimize.goals import AverageSpeed, OutputBound, Periodicity

_moco = pytest.importorskip("_moco")
pytest.importorskip("opensim")


def _options(ref):
    tol = ref["settings"]["optim_convergence_tolerance"]
    return optimize.Options(tol=tol, constraint_tol=tol)


def _differences(solution, ref, system):
    states = _moco.states_in_system_order(ref, system)
    controls = _moco.controls_in_system_order(ref, system)
    return np.abs(np.asarray(solution.states) - states).max(), np.abs(np.asarray(solution.controls) - controls).max()


def test_a_spring_stiffness_as_a_parameter_matches_moco(tmp_path):
    import opensim

    ref = _moco.moco_spring_mass(tmp_path)
    system = sj.load_osim(_moco.spring_mass_osim(tmp_path)).build()
    name, path, prop, bounds = ref["problem"]["parameter"]
    problem = _moco.simjax_problem(ref["problem"], system).parameter(name, path, prop, bounds)
    solution = optimize.solve(problem, mesh=20, options=_options(ref))
    assert optimize.STATUS[int(solution.status)] == "solved"
    k = float(solution.parameter("stiffness"))
    # a quarter period of a 2 kg mass: k = 2 pi^2 N/m (to the transcription's error)
    assert abs(k - ref["parameters"]["stiffness"]) < 1e-6 * k and abs(k - 2 * math.pi ** 2) < 1e-3 * k
    states, controls = _differences(solution, ref, system)
    assert states < 1e-6 and controls < 1e-5, (states, controls)
    # the solution's file holds the parameter as Moco's does, and Moco reads it
    optimize.write_trajectory(solution, tmp_path / "ours.sto", problem)
    assert opensim.MocoTrajectory(str(tmp_path / "ours.sto")).getParameter("stiffness") == pytest.approx(k, 1e-15)
    assert optimize.read_trajectory(tmp_path / "ours.sto")["parameters"] == {"stiffness": pytest.approx(k, 1e-15)}
    # a guess from Moco's file starts at its parameter
    guess = optimize.guess_from_table(problem, ref["solution_path"], mesh=20)
    assert float(guess.parameter("stiffness")) == pytest.approx(ref["parameters"]["stiffness"], 1e-12)
    with pytest.raises(ValueError, match="'/forceset/spring' has no property 'stifness'"):
        problem.parameter("k2", path, "stifness", bounds)


def test_periodicity_average_speed_and_an_output_bound_match_moco(tmp_path):
    ref = _moco.moco_cruise(tmp_path)
    spec = ref["problem"]
    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    output, index, upper = spec["speed_bound"]
    problem = (_moco.simjax_problem(spec, system)
               .goal(AverageSpeed(spec["average_speed"]))
               .goal(Periodicity(states=tuple(spec["periodic_states"]),
                                 controls=tuple((c, c, True) for c in spec["negated_periodic_controls"])))
               .constrain(OutputBound(output, upper=upper, index=index)))
    solution = optimize.solve(problem, mesh=20, options=_options(ref))
    assert optimize.STATUS[int(solution.status)] == "solved"
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * ref["objective"]
    assert ref["objective"] > 30.72 + 1  # (the bound is active: more effort than rest to rest without it)
    states, controls = _differences(solution, ref, system)
    assert states < 1e-5 and controls < 1e-4, (states, controls)
    speed = np.asarray(solution.state("/jointset/slider/x/speed"))
    assert 1.0 - 1e-6 < speed[::2].max() < 1.0 + 1e-8  # (the bound holds at the mesh points)
    force = np.asarray(solution.control("/forceset/actuator"))
    assert abs(force[0] + force[-1]) < 1e-6 and abs(speed[-1]) < 1e-8
    x = np.asarray(solution.state("/jointset/slider/x/value"))
    assert abs(x[-1] - 0.8) < 1e-8
    # in cost mode: weight times the squares (zero for the goals this optimum meets)
    terms = optimize.files.objective_terms(solution, problem.goal(AverageSpeed(1.0, mode="cost", weight=2.0)),
                                           goal_names=["effort", "speed", "periodic", "cost"])
    assert terms["speed"] == 0.0 and terms["cost"] == pytest.approx(2.0 * 0.2 ** 2, abs=1e-8)
    with pytest.raises(KeyError, match="'/nowhere/speed' is neither a state"):
        optimize.transcribe(problem.goal(Periodicity(states=("/nowhere/speed",))), mesh=4)
    with pytest.raises(ValueError, match="give a lower or an upper bound"):
        optimize.transcribe(problem.constrain(OutputBound(output)), mesh=4)
