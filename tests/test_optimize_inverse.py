"""MocoInverse of gait10dof18musc walking (the pipeline's IK motion filtered at 6 Hz,
0.6-1.4 s, mesh interval 0.02 s, Moco's model edits) by simjax against OpenSim Moco 4.6
run live on the same model, data and settings (tests/_moco_gait.py)."""

import functools

import numpy as np
import pytest
from _fresh_process import in_fresh_process

from simjax.io.tables import read_table
from simjax.optimize import model_edits as edits
from simjax.optimize.moco_tools import inverse, inverse_problem
from simjax.tools.motion import filter_lowpass

mg = pytest.importorskip("_moco_gait")
pytest.importorskip("opensim")


def _filtered():
    return filter_lowpass(read_table(mg.IK_MOT_PATH), mg.CUTOFF_HZ)


def test_the_kinematics_filter_is_moco_s(tmp_path):
    ours = _filtered()
    ref = mg.filtered_kinematics()
    assert np.array_equal(np.asarray(ours.times), ref["time"])
    for j, label in enumerate(ours.labels):
        assert np.abs(np.asarray(ours.values)[:, j] - ref["columns"][label]).max() < 1e-10  # (degrees)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    # (the gait model's DeGroote muscles have time constants of their own: _fresh_process)
    moco = in_fresh_process(mg.moco_inverse_gait, tmp_path_factory.mktemp("moco_inverse"))
    model = edits.ModelProcessor(
        str(mg.MODEL_PATH),
        functools.partial(edits.add_external_loads, path=str(mg.GRF_XML_PATH)),
        edits.ignore_tendon_compliance,
        edits.replace_muscles_with_degroote,
        edits.ignore_passive_fiber_forces,
        functools.partial(edits.scale_active_fiber_force_curve_width, scale_factor=1.5),
        functools.partial(edits.add_reserves, optimal_force=1.0),
    ).process()
    system, kinematics = model.build(), _filtered()
    settings = dict(initial_time=0.6, final_time=1.4, mesh_interval=0.02)
    problem, _ = inverse_problem(system, kinematics, **settings)
    tol = moco["settings"]["optim_convergence_tolerance"]
    # Moco's tolerances, then tight (the same problem: the same compiled solver)
    loose = inverse(system, kinematics, **settings, convergence_tolerance=tol, constraint_tolerance=tol)
    tight = inverse(system, kinematics, **settings, convergence_tolerance=1e-8, constraint_tolerance=1e-8)
    return moco, problem, loose, tight


def _columns(result, kind, names):
    return np.stack([result[kind][n] for n in names], axis=1)


def test_moco_inverse_of_walking_matches_moco(solved):
    moco, problem, loose, tight = solved
    assert int(loose.status) == 0 and int(tight.status) == 0
    assert np.allclose(np.asarray(loose.time), moco["time"], atol=1e-12)
    # the same NLP: 81 grid points x (18 activations + 28 controls), 40 x 36 defects,
    # 81 x 10 residuals and 18 initial activations
    assert loose.states.shape[1] + loose.controls.shape[1] == moco["nlp"]["num_variables"] // len(moco["time"])
    # the objective, both at Moco's tolerance (1e-3)
    assert abs(float(loose.objective) - moco["objective"]) <= 1e-3 * moco["objective"]
    # the reserves of the pelvis and the lumbar joint, which no muscle crosses or can
    # move: fixed by the motion, the ground reactions and the model, so they check the
    # model edits, the external loads, the prescribed kinematics and the residual
    controls = _columns(moco, "controls", problem.control_names)
    fixed = [i for i, p in enumerate(problem.control_names) if "pelvis" in p or "lumbar" in p]
    assert len(fixed) == 4
    assert np.abs(np.asarray(tight.controls)[:, fixed] - controls[:, fixed]).max() < 1e-4
    # the tight optimum's objective, below both loose ones
    assert float(tight.objective) <= min(float(loose.objective), moco["objective"]) + 1e-9
