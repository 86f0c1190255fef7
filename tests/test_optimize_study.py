"""Moco study files (``simjax moco STUDY.omoco``, simjax.optimize.study) against OpenSim
Moco 4.6 run live: the study Moco prints, solved by both, and simjax's solution file
read back by OpenSim (tests/_moco.py builds the studies)."""

import os
import re

import numpy as np
import pytest

from simjax import cli
from simjax.optimize import files, study
from simjax.optimize.goals import OutputIntegral, StateTracking
from simjax.optimize.problem import ControlEffort, FinalTime, InitialActivation

_moco = pytest.importorskip("_moco")
osim = pytest.importorskip("opensim")


def test_moco_command_solves_a_printed_study_as_moco_does(tmp_path, capsys):
    # the sliding mass in minimum time (exact optimum 0.4 s), trapezoidal, 50 intervals;
    # study_from_problem gives the problem its model with setModel: the .omoco holds it inline
    model = _moco.sliding_mass_osim(tmp_path)
    moco_study = _moco.study_from_problem(
        model, _moco.SLIDING_MASS_PROBLEM, transcription="trapezoidal", num_mesh_intervals=50
    )
    path = tmp_path / "sliding_mass.omoco"
    moco_study.printToXML(str(path))
    assert '<Model name="sliding_mass">' in path.read_text()
    ref = _moco.solve(moco_study)
    assert ref["success"]

    assert cli.main(["moco", str(path)]) == 0
    out = tmp_path / "sliding_mass_solution.sto"  # (MocoStudy::solve's name: <study name>_solution.sto)
    assert f"solution: {out}" in capsys.readouterr().out

    mine = _moco.trajectory_arrays(osim.MocoTrajectory(str(out)))  # (OpenSim loads it)
    assert mine["state_names"] == ref["state_names"] and mine["control_names"] == ref["control_names"]
    tf = mine["time"][-1]
    assert abs(tf - ref["final_time"]) < 1e-6 * ref["final_time"] and abs(tf - 0.4) < 1e-3
    assert len(mine["time"]) == len(ref["time"]) == 51
    np.testing.assert_allclose(mine["time"], ref["time"], atol=1e-6)
    for name in ref["state_names"]:
        # (measured: 5e-8 m, 4e-6 m/s)
        np.testing.assert_allclose(mine["states"][name], ref["states"][name], atol=2e-5, err_msg=name)
    header = files.read_trajectory(out)
    assert header["success"] is True and header["status"] == "Solve_Succeeded"
    assert abs(header["objective"] - ref["objective"]) < 1e-6 * ref["objective"]
    assert abs(header["objective_terms"]["time"] - ref["objective_terms"]["time"]) < 1e-6


def _pendulum_study(tmp_path, *, extra_goals=(), transcription="hermite-simpson"):
    """The pendulum with its model given as a file (setModelProcessor), Moco's
    supported goals, and ``extra_goals`` added; printed to ``study.omoco`` in a
    subfolder whose results go to ``results``. (Read from the tests' working
    directory, the model is found next to the study.)"""
    folder = tmp_path / "study"
    folder.mkdir(exist_ok=True)
    _moco.pendulum_osim(folder)
    s = osim.MocoStudy()
    s.setName("swing")
    s.set_results_directory("results")
    problem = s.updProblem()
    problem.setModelProcessor(osim.ModelProcessor("pendulum.osim"))
    problem.setTimeBounds(osim.MocoInitialBounds(0.0), osim.MocoFinalBounds(0.5, 2.0))
    problem.setStateInfo(
        "/jointset/pin/q/value", osim.MocoBounds(-5.0, 5.0), osim.MocoInitialBounds(0.0), osim.MocoFinalBounds(3.0, 3.2)
    )
    problem.setStateInfoPattern(
        ".*speed", osim.MocoBounds(-20.0, 20.0), osim.MocoInitialBounds(0.0), osim.MocoFinalBounds()
    )
    problem.setControlInfo("/forceset/tau", osim.MocoBounds(-30.0, 30.0))
    effort = osim.MocoControlGoal("effort", 0.5)
    effort.setExponent(3)
    effort.setWeightForControl("/forceset/tau", 2.0)
    problem.addGoal(effort)
    problem.addGoal(osim.MocoFinalTimeGoal("time", 3.0))
    output = osim.MocoOutputGoal("speed", 0.25)
    output.setOutputPath("/bodyset/body|linear_velocity")
    output.setExponent(2)
    output.setOutputIndex(0)
    problem.addGoal(output)
    problem.addGoal(osim.MocoInitialActivationGoal("activation"))
    _moco.pendulum_reference_sto(folder)
    tracking = osim.MocoStateTrackingGoal("tracking", 10.0)
    tracking.setReference(osim.TableProcessor("pendulum_reference.sto"))
    tracking.setWeightForState("/jointset/pin/q/speed", 0.1)
    tracking.setAllowUnusedReferences(True)
    problem.addGoal(tracking)
    cwd = os.getcwd()
    os.chdir(folder)  # (Moco reads the model from the working directory)
    try:
        solver = s.initCasADiSolver()
    finally:
        os.chdir(cwd)
    solver.set_num_mesh_intervals(20)
    solver.set_transcription_scheme(transcription)
    solver.set_interpolate_control_mesh_interior_points(False)
    solver.set_optim_convergence_tolerance(1e-6)
    solver.set_optim_max_iterations(200)
    solver.set_optim_finite_difference_scheme("forward")  # (simjax differentiates exactly: ignored)
    solver.set_verbosity(0)
    for goal in extra_goals:
        problem.addGoal(goal)
    path = folder / "study.omoco"
    s.printToXML(str(path))
    return path


def test_study_file_read_into_a_problem(tmp_path):
    path = _pendulum_study(tmp_path)
    with pytest.warns(study.StudyWarning, match=r"optim_finite_difference_scheme.*'forward'"):
        s = study.read_study(path)
    p = s.problem
    assert s.name == "swing" and s.output == str(path.parent / "results" / "swing_solution.sto")
    assert (s.mesh, s.scheme, s.interpolate_controls, s.verbosity) == (20, "hermite-simpson", False, 0)
    assert (s.options.tol, s.options.constraint_tol, s.options.max_iter) == (1e-6, 1e-4, 200)  # (1e-4: IPOPT's)
    assert p.time_bounds() == ((0.0, 0.0), (0.5, 2.0))
    ylo, yhi, clo, chi = p.path_bounds()
    assert p.state_names == ("/jointset/pin/q/value", "/jointset/pin/q/speed")
    np.testing.assert_array_equal(np.concatenate([ylo, yhi, clo, chi]), [-5, -20, 5, 20, -30, 30])
    np.testing.assert_array_equal(p.end_bounds("initial"), [[0, 0], [0, 0]])
    np.testing.assert_array_equal(p.end_bounds("final"), [[3.0, -20], [3.2, 20]])
    assert s.goal_names == ("effort", "time", "speed", "activation", "tracking")
    effort, time, speed, activation, tracking = p.goals
    assert isinstance(tracking, StateTracking) and tracking.reference == str(path.parent / "pendulum_reference.sto")
    assert (tracking.weight, tracking.weights, tracking.allow_unused_references) == (
        10.0,
        {"/jointset/pin/q/speed": 0.1},
        True,
    )
    assert effort == ControlEffort(0.5, 3.0, {"/forceset/tau": 2.0}) and time == FinalTime(3.0)
    assert isinstance(speed, OutputIntegral) and (speed.output, speed.weight, speed.exponent, speed.index) == (
        "/bodyset/body|linear_velocity",
        0.25,
        2,
        0,
    )
    assert isinstance(activation, InitialActivation)
    assert s.settings["mesh"] == 20 and s.settings["scheme"] == "hermite-simpson"


def test_unsupported_goals_and_transcription_are_errors_naming_them(tmp_path):
    translation = osim.MocoTranslationTrackingGoal("translation")
    reaction = osim.MocoJointReactionGoal("reaction")
    path = _pendulum_study(tmp_path, extra_goals=(translation, reaction), transcription="legendre-gauss-3")
    with pytest.raises(study.StudyError) as info:
        study.read_study(path)
    message = str(info.value)
    assert message.startswith(f"{path}: 3 setting(s)")
    assert '<MocoTranslationTrackingGoal name="translation">' in message
    assert '<MocoJointReactionGoal name="reaction">' in message
    assert "<transcription_scheme> = 'legendre-gauss-3'" in message
    assert all(re.search(rf"line \d+: .*{k}", message) for k in ("translation", "reaction", "legendre"))
    # the command line says the same and fails
    assert cli.main(["moco", str(path)]) == 1
    # a goal property that changes the answer is an error too
    text = path.read_text().replace(
        "<exponent>2</exponent>", "<exponent>2</exponent>\n<divide_by_duration>true</divide_by_duration>"
    )
    text = text.replace("legendre-gauss-3", "trapezoidal")
    bad = path.with_name("bad.omoco")
    bad.write_text(text)
    with pytest.raises(study.StudyError, match=r"<MocoOutputGoal name=\"speed\">/<divide_by_duration> = 'true'"):
        study.read_study(bad)


def test_parameters_endpoint_goals_marker_tracking_and_output_bounds_are_read(tmp_path):
    from simjax.optimize.goals import AverageSpeed, MarkerTracking, Periodicity
    from simjax.optimize.path_constraints import OutputBound
    from simjax.optimize.problem import Parameter

    moco = _moco.study_from_problem(
        _moco.spring_mass_osim(tmp_path),
        _moco.SPRING_MASS_PROBLEM,
        num_mesh_intervals=20,
        parameters_require_initsystem=False,
    )
    prob = moco.updProblem()
    prob.addParameter(osim.MocoParameter("stiffness", "/forceset/spring", "stiffness", osim.MocoBounds(1, 100)))
    speed = osim.MocoAverageSpeedGoal("speed")
    speed.set_desired_average_speed(0.3)
    speed.setMode("cost")
    prob.addGoal(speed)
    periodic = osim.MocoPeriodicityGoal("periodic")
    periodic.addStatePair(osim.MocoPeriodicityGoalPair("/jointset/slider/x/speed"))
    periodic.addNegatedControlPair(osim.MocoPeriodicityGoalPair("/forceset/actuator"))
    prob.addGoal(periodic)
    bound = osim.MocoOutputBoundConstraint()
    bound.setName("limit")
    bound.setOutputPath("/bodyset/body|velocity")
    bound.setOutputIndex(3)
    bound.setUpperBound(osim.Constant(1.0))
    prob.addPathConstraint(bound)
    weights = osim.SetMarkerWeights()
    weights.cloneAndAppend(osim.MarkerWeight("tip", 2.0))
    trc = _moco.pendulum_markers_trc(tmp_path)
    markers = osim.MocoMarkerTrackingGoal("markers", 10.0)
    markers.setMarkersReference(osim.MarkersReference(trc, weights))
    markers.setAllowUnusedReferences(True)
    prob.addGoal(markers)
    path = tmp_path / "all.omoco"
    moco.printToXML(str(path))
    with pytest.warns(study.StudyWarning, match="parameters_require_initsystem"):
        read = study.read_study(path)
    problem = read.problem
    assert problem.parameters == (Parameter("stiffness", ("/forceset/spring",), "stiffness", (1.0, 100.0)),)
    assert problem.path_constraints == (OutputBound("/bodyset/body|velocity", upper=1.0, index=3),)
    assert read.goal_names == ("effort", "speed", "periodic", "markers")
    assert problem.goals[1:] == (
        AverageSpeed(0.3, "cost"),
        Periodicity(
            (("/jointset/slider/x/speed", "/jointset/slider/x/speed", False),),
            (("/forceset/actuator", "/forceset/actuator", True),),
        ),
        MarkerTracking(trc, 10.0, {"tip": 2.0}, True),
    )
    # a bound that is a malformed Function is an error naming it
    bad = tmp_path / "bad.omoco"
    bad.write_text(
        path.read_text().replace("<Constant>\n", "<LinearFunction>\n").replace("</Constant>", "</LinearFunction>")
    )
    with pytest.raises(study.StudyError, match=r"<upper_bound>/<LinearFunction>.*not a Function simjax reads"):
        study.read_study(bad)


def test_implicit_dynamics_settings_are_read_with_moco_s_bounds_only(tmp_path):
    path = _pendulum_study(tmp_path)
    text = path.read_text()

    def with_solver_properties(name, properties):
        out = path.with_name(name)
        out.write_text(text.replace("</MocoCasADiSolver>", properties + "\n</MocoCasADiSolver>"))
        return out

    implicit = with_solver_properties(
        "implicit.omoco",
        "<multibody_dynamics_mode>implicit</multibody_dynamics_mode>"
        "<implicit_multibody_acceleration_bounds>-1000 1000"
        "</implicit_multibody_acceleration_bounds>",
    )
    with pytest.warns(study.StudyWarning):
        s = study.read_study(implicit)
    assert s.dynamics_mode == "implicit" and s.settings["dynamics_mode"] == "implicit"
    narrow = with_solver_properties(
        "narrow.omoco",
        "<multibody_dynamics_mode>implicit</multibody_dynamics_mode>"
        "<implicit_multibody_acceleration_bounds>-10 10"
        "</implicit_multibody_acceleration_bounds>",
    )
    with pytest.raises(study.StudyError, match=r"<implicit_multibody_acceleration_bounds> = '-10 10'"):
        study.read_study(narrow)
    # Moco's penalties on the implicit derivative variables: their weights (default 1)
    # where minimized, None where not; other auxiliary derivative bounds are an error
    penalized = with_solver_properties(
        "penalized.omoco",
        "<minimize_implicit_multibody_accelerations>true</minimize_implicit_multibody_accelerations>"
        "<minimize_implicit_auxiliary_derivatives>true</minimize_implicit_auxiliary_derivatives>"
        "<implicit_auxiliary_derivatives_weight>0.01</implicit_auxiliary_derivatives_weight>"
        "<implicit_auxiliary_derivative_bounds>-1000 1000</implicit_auxiliary_derivative_bounds>",
    )
    with pytest.warns(study.StudyWarning):
        s = study.read_study(penalized)
    assert (s.settings["accelerations_weight"], s.settings["auxiliary_derivatives_weight"]) == (1.0, 0.01)
    with pytest.warns(study.StudyWarning):
        assert study.read_study(implicit).settings["auxiliary_derivatives_weight"] is None
    narrow = with_solver_properties(
        "narrow_w.omoco", "<implicit_auxiliary_derivative_bounds>-5 5</implicit_auxiliary_derivative_bounds>"
    )
    with pytest.raises(study.StudyError, match=r"<implicit_auxiliary_derivative_bounds> = '-5 5'"):
        study.read_study(narrow)
    # kinematic constraints: either of Moco's methods, the projection distance minimized
    # by default (weight 1e-6), the slacks' bounds Moco's default alone
    bordalba = with_solver_properties(
        "bordalba.omoco",
        "<kinematic_constraint_method>Bordalba2023</kinematic_constraint_method>"
        "<state_projection_distance_weight>0.001</state_projection_distance_weight>",
    )
    with pytest.warns(study.StudyWarning):
        s = study.read_study(bordalba)
    assert (s.settings["kinematic_constraint_method"], s.settings["state_projection_weight"]) == ("Bordalba2023", 1e-3)
    with pytest.warns(study.StudyWarning):
        s = study.read_study(implicit)
    assert (s.settings["kinematic_constraint_method"], s.settings["state_projection_weight"]) == ("Posa2016", 1e-6)
    for name, element, match in (
        ("posa2015.omoco", "<kinematic_constraint_method>Posa2015</kinematic_constraint_method>", "'Posa2015'"),
        (
            "wide_mu.omoco",
            "<projection_slack_variable_bounds>-0.1 0.1</projection_slack_variable_bounds>",
            "<projection_slack_variable_bounds> = '-0.1 0.1'",
        ),
    ):
        with pytest.raises(study.StudyError, match=match):
            study.read_study(with_solver_properties(name, element))
    unminimized = with_solver_properties(
        "unminimized.omoco", "<minimize_state_projection_distance>false</minimize_state_projection_distance>"
    )
    with pytest.warns(study.StudyWarning):
        assert study.read_study(unminimized).settings["state_projection_weight"] is None


def test_sparsity_detection_setting_is_read(tmp_path):
    path = _pendulum_study(tmp_path)
    text = path.read_text()
    assert "optim_sparsity_detection" not in text  # (Moco's default, none, is not printed)
    with pytest.warns(study.StudyWarning):
        assert study.read_study(path).settings["sparse_derivatives"] is False

    def with_detection(value):
        edited = path.with_name(f"{value}.omoco")
        element = f"<optim_sparsity_detection>{value}</optim_sparsity_detection>"
        edited.write_text(text.replace("</MocoCasADiSolver>", element + "\n</MocoCasADiSolver>"))
        return edited

    for value, expected in (("none", False), ("random", True), ("initial-guess", True)):
        with pytest.warns(study.StudyWarning):
            assert study.read_study(with_detection(value)).sparse_derivatives is expected
    with pytest.raises(study.StudyError, match=r"<optim_sparsity_detection> = 'sometimes'"):
        study.read_study(with_detection("sometimes"))
