"""Moco's parameters, endpoint goals and path constraints (simjax.optimize) against
OpenSim Moco 4.6 run live on the same model file, problem, transcription, mesh and
tolerances (tests/_moco.py)."""

import math

import numpy as np
import pytest

import simjax as sj
from simjax import optimize
from simjax.optimize.goals import AverageSpeed, Periodicity
from simjax.optimize.path_constraints import OutputBound

_moco = pytest.importorskip("_moco")
pytest.importorskip("opensim")


def _options(ref):
    tol = ref["settings"]["optim_convergence_tolerance"]
    return optimize.moco_options(tol, tol)


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
    assert abs(k - ref["parameters"]["stiffness"]) < 1e-6 * k and abs(k - 2 * math.pi**2) < 1e-3 * k
    states, controls = _differences(solution, ref, system)
    assert states < 1e-6 and controls < 1e-5, (states, controls)
    # the solution's file holds the parameter as Moco's does, and Moco reads it
    optimize.write_trajectory(solution, tmp_path / "ours.sto", problem)
    assert opensim.MocoTrajectory(str(tmp_path / "ours.sto")).getParameter("stiffness") == pytest.approx(k, 1e-15)
    assert optimize.read_trajectory(tmp_path / "ours.sto")["parameters"] == {"stiffness": pytest.approx(k, 1e-15)}
    # a guess from Moco's file starts at its parameter
    guess = optimize.guess_from_table(problem, ref["solution_path"], mesh=20)
    assert float(guess.parameter("stiffness")) == pytest.approx(ref["parameters"]["stiffness"], 1e-12)
    with pytest.raises(ValueError, match="Parameter 'k2': .*'/forceset/spring' has no numeric property 'stifness'"):
        problem.parameter("k2", path, "stifness", bounds)


def test_periodicity_average_speed_and_an_output_bound_match_moco(tmp_path):
    ref = _moco.moco_cruise(tmp_path)
    spec = ref["problem"]
    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    output, index, upper = spec["speed_bound"]
    problem = (
        _moco.simjax_problem(spec, system)
        .goal(AverageSpeed(spec["average_speed"]))
        .goal(
            Periodicity(
                states=tuple(spec["periodic_states"]),
                controls=tuple((c, c, True) for c in spec["negated_periodic_controls"]),
            )
        )
        .constrain(OutputBound(output, upper=upper, index=index))
    )
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
    terms = optimize.files.objective_terms(
        solution,
        problem.goal(AverageSpeed(1.0, mode="cost", weight=2.0)),
        goal_names=["effort", "speed", "periodic", "cost"],
    )
    assert terms["speed"] == 0.0 and terms["cost"] == pytest.approx(2.0 * 0.2**2, abs=1e-8)
    with pytest.raises(KeyError, match="'/nowhere/speed' is neither a state"):
        optimize.transcribe(problem.goal(Periodicity(states=("/nowhere/speed",))), mesh=4)
    with pytest.raises(ValueError, match="give a lower or an upper bound"):
        optimize.transcribe(problem.constrain(OutputBound(output)), mesh=4)


def test_control_state_and_frame_distance_bounds_match_moco(tmp_path):
    from simjax.optimize.path_constraints import ControlBound, FrameDistance, StateBound
    from simjax.optimize.study import read_study, solve_study

    ref = _moco.moco_bounded_slide(tmp_path)
    spec = ref["problem"]
    system = sj.load_osim(_moco.sliding_mass_osim(tmp_path)).build()
    lower, (slope, intercept) = spec["force_bounds"]
    # Moco's own study file, read (its LinearFunction bound included) and solved
    study = read_study(ref["study_path"])
    assert study.problem.path_constraints[1:] == (
        StateBound(("/jointset/slider/x/speed",), upper=spec["speed_upper"]),
        FrameDistance((spec["frame_pair"],), "vector", spec["projection_vector"]),
    )
    force_bound = study.problem.path_constraints[0]
    assert force_bound.controls == ("/forceset/actuator",) and force_bound.lower == lower
    assert float(force_bound.upper(0.5)) == pytest.approx(slope * 0.5 + intercept, abs=1e-15)
    solution = solve_study(study)
    assert optimize.STATUS[int(solution.status)] == "solved"
    assert abs(float(solution.objective) - ref["objective"]) < 1e-6 * ref["objective"]
    states, controls = _differences(solution, ref, system)
    assert states < 1e-5 and controls < 1e-4, (states, controls)
    # each bound is active somewhere, and holds at the mesh points
    t = np.asarray(solution.time)[::2]
    force = np.asarray(solution.control("/forceset/actuator"))[::2]
    speed = np.asarray(solution.state("/jointset/slider/x/speed"))[::2]
    assert np.all(force <= slope * t + intercept + 1e-7) and abs(np.max(force - slope * t - intercept)) < 1e-6
    assert np.all(force >= lower - 1e-7) and abs(force.min() - lower) < 1e-6
    assert speed.max() <= spec["speed_upper"] + 1e-8 and abs(speed.max() - spec["speed_upper"]) < 1e-6
    # the same constraints from Python, a bound as any function of time
    problem = (
        _moco.simjax_problem(spec, system)
        .constrain(ControlBound(("/forceset/actuator",), lower=lower, upper=lambda t: slope * t + intercept))
        .constrain(StateBound(("/jointset/slider/x/speed",), upper=spec["speed_upper"]))
        .constrain(
            FrameDistance((spec["frame_pair"],), projection="vector", projection_vector=spec["projection_vector"])
        )
    )
    ours, theirs = optimize.transcribe(problem, mesh=20)[0], optimize.transcribe(study.problem, mesh=20)[0]
    assert np.array_equal(np.asarray(ours.c_lower), np.asarray(theirs.c_lower))
    assert np.array_equal(np.asarray(ours.c_upper), np.asarray(theirs.c_upper))
    # bad input names what is wrong
    with pytest.raises(KeyError, match="'/forceset/nothing'"):
        optimize.transcribe(problem.constrain(ControlBound(("/forceset/nothing",), upper=1.0)), mesh=4)
    with pytest.raises(KeyError, match="no frame '/bodyset/nobody'"):
        optimize.transcribe(problem.constrain(FrameDistance((("/ground", "/bodyset/nobody", 0.0, 1.0),))), mesh=4)
    with pytest.raises(ValueError, match="projection 'plane' needs a non-zero 3-vector"):
        optimize.transcribe(problem.constrain(FrameDistance((spec["frame_pair"],), projection="plane")), mesh=4)
    with pytest.raises(ValueError, match="equality_with_lower needs a lower bound and no upper"):
        optimize.transcribe(
            problem.constrain(StateBound(("/jointset/slider/x/speed",), upper=1.0, equality_with_lower=True)), mesh=4
        )
