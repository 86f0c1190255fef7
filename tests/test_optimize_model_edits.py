"""Moco's model operators (``simjax.optimize.model_edits``) against OpenSim 4.6, live.

The same ``ModelProcessor`` chain is run in OpenSim and in simjax on the walking model
(Gait10dof18musc, Millard muscles, ground reaction forces) and on arm26 (Thelen
muscles); the processed models must have the same actuators (paths, order, optimal
forces, control bounds), the same DeGrooteFregly2016Muscle properties, and give the
same tendon forces, generalized forces (inverse dynamics with every applied force:
muscles, reserves, external loads, gravity) and state derivatives at a few states.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _muscle_oracle import assert_close, set_opensim_state, simjax_states

import simjax as sj
from simjax.component import ModelError
from simjax.forward import Context
from simjax.optimize import model_edits as me

opensim = pytest.importorskip("opensim")
pytestmark = pytest.mark.filterwarnings("ignore:.*mesh file")

GAIT_DIR = Path(os.environ.get("SIMJAX_GAIT10DOF_DIR", "/work/shared/pipelines/Gait10dof18musc"))
GAIT_MODEL = GAIT_DIR / "subject01.osim"
GRF_XML = GAIT_DIR / "ExperimentalData" / "subject01_walk_grf.xml"
IK_MOT = GAIT_DIR / "OutputReference" / "IK" / "subject01_walk_IK.mot"
needs_gait = pytest.mark.skipif(
    not (GAIT_MODEL.exists() and GRF_XML.exists() and IK_MOT.exists()),
    reason="the Gait10dof18musc pipeline data are not available",
)

#: DeGrooteFregly2016Muscle properties compared one by one with OpenSim's
DGF_PROPERTIES = (
    "max_isometric_force",
    "optimal_fiber_length",
    "tendon_slack_length",
    "pennation_angle_at_optimal",
    "max_contraction_velocity",
    "activation_time_constant",
    "deactivation_time_constant",
    "default_activation",
    "default_normalized_tendon_force",
    "active_force_width_scale",
    "fiber_damping",
    "passive_fiber_strain_at_one_norm_force",
    "tendon_strain_at_one_norm_force",
    "ignore_passive_fiber_force",
    "ignore_tendon_compliance",
    "ignore_activation_dynamics",
    "tendon_compliance_dynamics_mode",
    "activation_dynamics_smoothing",
    "min_control",
    "max_control",
    "appliesForce",
)


def _osim_process(source, *operators):
    proc = opensim.ModelProcessor(str(source))
    for op in operators:
        proc.append(op)
    model = proc.process()
    model.initSystem()
    return model


def _osim_actuators(model):
    """``[(path, class, optimal force or None, min control, max control)]`` in order."""
    out = []
    acts = model.getActuators()
    for i in range(acts.getSize()):
        a = acts.get(i)
        s = opensim.ScalarActuator.safeDownCast(a)
        f = None
        if a.getConcreteClassName() in ("CoordinateActuator", "PathActuator"):
            f = getattr(opensim, a.getConcreteClassName()).safeDownCast(a).getOptimalForce()
        out.append((a.getAbsolutePathString(), a.getConcreteClassName(), f, s.getMinControl(), s.getMaxControl()))
    return out


def _sj_actuators(model):
    system = model.build()
    out = []
    for p in system.actuator_paths:
        a = model.find(p)
        f = float(a.optimal_force) if type(a).__name__ in ("CoordinateActuator", "PathActuator") else None
        out.append((p, type(a).__name__, f, float(a.min_control), float(a.max_control)))
    return out


def _sj_property(comp, name):
    value = getattr(comp, "applies_force" if name == "appliesForce" else name)
    return value if isinstance(value, (bool, str)) else float(value)


def _compare_degroote_properties(osim_model, model):
    muscles = osim_model.getMuscles()
    assert muscles.getSize() == len(model.paths(sj.DeGrooteFregly2016Muscle))
    for i in range(muscles.getSize()):
        m = opensim.DeGrooteFregly2016Muscle.safeDownCast(muscles.get(i))
        assert m is not None
        mine = model.find(m.getAbsolutePathString())
        assert isinstance(mine, sj.DeGrooteFregly2016Muscle)
        for name in DGF_PROPERTIES:
            ref = getattr(m, "get_" + name)()
            assert _sj_property(mine, name) == ref, (m.getAbsolutePathString(), name)
        # the geometry path is the old muscle's
        pts = m.getGeometryPath().getPathPointSet()
        assert [pts.get(j).getName() for j in range(pts.getSize())] == [p.name for p in mine.path.points]
        wraps = m.getGeometryPath().getWrapSet()
        assert wraps.getSize() == len(mine.path.wraps)


def _ik_frames(osim_model, rows):
    """Coordinates (rad or m) and finite-difference speeds at ``rows`` of the IK motion."""
    table = opensim.TimeSeriesTable(str(IK_MOT))
    times = np.asarray(table.getIndependentColumn())
    labels = list(table.getColumnLabels())
    q = np.column_stack([table.getDependentColumn(c).to_numpy() for c in labels])
    cs = osim_model.getCoordinateSet()
    for j, c in enumerate(labels):
        if cs.get(c).getMotionType() == opensim.Coordinate.Rotational:
            q[:, j] = np.deg2rad(q[:, j])
    u = np.gradient(q, times, axis=0)
    return labels, times[rows], q[rows], u[rows]


def _evaluate(system, states, controls, udot, muscles):
    """simjax at a batch of states, in one compiled program (compiled as simjax's own
    entry points are): the tendon forces of ``muscles`` ``(n, len(muscles))`` and the
    generalized forces for ``udot`` (``inverse_dynamics``, every applied force
    included) ``(n, nu)``."""

    def one(system, state, c, a):
        return (
            Context(system, state, c).group_outputs(muscles, "tendon_force"),
            sj.inverse_dynamics(system, state, a, c),
        )

    fn = jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0)), compiler_options=sj.compiler_options())
    return tuple(np.asarray(v) for v in fn(system, states, controls, udot))


def _osim_u_index(osim_model, s, coords):
    """The index in Simbody's ``u`` of each coordinate's speed."""
    out = []
    for c in coords:
        s.updU().setToZero()
        osim_model.getCoordinateSet().get(c).setSpeedValue(s, 1.0)
        out.append(int(np.flatnonzero(s.getU().to_numpy())[0]))
    return out


@needs_gait
def test_gait_chain_matches_opensim():
    """ModOpReplaceMusclesWithDeGrooteFregly2016, ModOpIgnoreTendonCompliance,
    ModOpIgnorePassiveFiberForcesDGF, ModOpScaleActiveFiberForceCurveWidthDGF(1.5),
    ModOpAddReserves(1.0), ModOpAddExternalLoads on the walking model."""
    ref = _osim_process(
        GAIT_MODEL,
        opensim.ModOpReplaceMusclesWithDeGrooteFregly2016(),
        opensim.ModOpIgnoreTendonCompliance(),
        opensim.ModOpIgnorePassiveFiberForcesDGF(),
        opensim.ModOpScaleActiveFiberForceCurveWidthDGF(1.5),
        opensim.ModOpAddReserves(1.0),
        opensim.ModOpAddExternalLoads(str(GRF_XML)),
    )
    proc = me.ModelProcessor(
        GAIT_MODEL,
        me.replace_muscles_with_degroote,
        me.ignore_tendon_compliance,
        me.ignore_passive_fiber_forces,
        functools.partial(me.scale_active_fiber_force_curve_width, scale_factor=1.5),
    )
    proc = proc.append(functools.partial(me.add_reserves, optimal_force=1.0)) | functools.partial(
        me.add_external_loads, path=GRF_XML
    )
    model = proc.process()

    # (a) the same actuators, in the same order, with the same forces and bounds
    assert _sj_actuators(model) == _osim_actuators(ref)
    assert [a[0] for a in _osim_actuators(ref)][18:] == [
        "/forceset/reserve_jointset_" + p
        for p in (
            "ground_pelvis_pelvis_tilt",
            "ground_pelvis_pelvis_tx",
            "ground_pelvis_pelvis_ty",
            "hip_r_hip_flexion_r",
            "knee_r_knee_angle_r",
            "ankle_r_ankle_angle_r",
            "hip_l_hip_flexion_l",
            "knee_l_knee_angle_l",
            "ankle_l_ankle_angle_l",
            "back_lumbar_extension",
        )
    ]
    _compare_degroote_properties(ref, model)
    # the external forces where OpenSim puts them
    ext = [c.getAbsolutePathString() for c in ref.getComponentsList() if c.getConcreteClassName() == "ExternalForce"]
    assert (
        ext
        == model.paths(sj.ExternalForce)
        == ["/componentset/externalloads/right", "/componentset/externalloads/left"]
    )

    # (b) tendon forces and generalized forces at states of the walk
    system = model.build()
    rng = np.random.default_rng(7)
    coords, t, q, u = _ik_frames(ref, [10, 35, 60, 85, 110, 135])
    n = len(t)
    acts = [a[0].rsplit("/", 1)[1] for a in _osim_actuators(ref)]
    znames = [f"/forceset/{a}/activation" for a in acts[:18]]
    assert tuple(znames) == system.z_names
    controls = np.concatenate([rng.uniform(0.02, 1.0, (n, 18)), rng.uniform(-30.0, 30.0, (n, 10))], axis=1)
    st = {
        "coords": coords,
        "q": q,
        "u": u,
        "t": t,
        "znames": znames,
        "z": rng.uniform(0.05, 1.0, (n, 18)),
        "actuators": acts,
        "controls": controls,
    }
    udot = rng.uniform(-5.0, 5.0, (n, len(coords)))

    s = ref.initSystem()
    solver = opensim.InverseDynamicsSolver(ref)
    uidx = _osim_u_index(ref, s, coords)
    muscles = [ref.getMuscles().get(i) for i in range(18)]
    ref_tf, ref_tau = [], []
    for i in range(n):
        set_opensim_state(ref, s, st, i)
        ref.realizeVelocity(s)
        ref.setControls(s, opensim.Vector(controls[i].tolist()))
        a = np.zeros(len(coords))
        a[uidx] = udot[i]
        tau = solver.solve(s, opensim.Vector(a.tolist())).to_numpy()
        ref_tau.append(tau[uidx])
        ref_tf.append([m.getTendonForce(s) for m in muscles])
    ref_tf, ref_tau = np.asarray(ref_tf), np.asarray(ref_tau)

    states, ctrl, ui, _ = simjax_states(system, st)
    a = jnp.zeros((n, system.tree.nu)).at[:, ui].set(udot)
    # the states twice: with the controls, and without the reserves'
    tf, gf = _evaluate(
        system,
        jax.tree_util.tree_map(lambda *x: jnp.concatenate(x), states, states),
        jnp.concatenate([ctrl, ctrl.at[:, 18:].set(0.0)]),
        jnp.concatenate([a, a]),
        tuple(system.actuator_paths[:18]),
    )
    tf, tau = tf[:n], gf[:n, ui]

    assert np.all(ref_tf > 1.0)  # the fibers pull
    # the ground pushes on a foot at most of these states
    grf = [
        [opensim.ExternalForce.safeDownCast(ref.getComponent(p)).getForceAtTime(float(ti)).get(1) for p in ext]
        for ti in t
    ]
    assert np.sum(np.max(grf, axis=1) > 100.0) >= 4
    assert_close("tendon_force", ref_tf, tf, 1e-10, 0.0)
    assert_close("generalized_force", ref_tau, tau, 1e-10, 1e-10 * np.max(np.abs(ref_tau)))
    # the reserves act along their coordinates with optimal force 1
    assert_close("reserve_forces", _reserve_forces(system, model, controls[:, 18:])[:, ui], gf[n:, ui] - tau, 0.0, 1e-9)


def _reserve_forces(system, model, controls):
    """The generalized forces (u order) of the reserves (optimal force 1) at ``controls``."""
    out = np.zeros((len(controls), system.tree.nu))
    for j, p in enumerate(system.actuator_paths[18:]):
        out[:, system.tree.coordinates[model.find(p).coordinate].u] += controls[:, j]
    return out


def test_arm26_chain_matches_opensim():
    """Thelen muscles: ModOpReplaceMusclesWithDeGrooteFregly2016,
    ModOpScaleMaxIsometricForce(1.2), ModOpAddReserves(2, 10): the same actuators and
    DeGrooteFregly2016Muscle properties (FmaxMuscleStrain, FmaxTendonStrain, the
    Thelen time constants, no fiber damping)."""
    path = sj.models.path("arm26")
    ref = _osim_process(
        path,
        opensim.ModOpReplaceMusclesWithDeGrooteFregly2016(),
        opensim.ModOpScaleMaxIsometricForce(1.2),
        opensim.ModOpAddReserves(2.0, 10.0),
    )
    model = me.ModelProcessor(
        path,
        me.replace_muscles_with_degroote,
        functools.partial(me.scale_max_isometric_force, scale_factor=1.2),
        functools.partial(me.add_reserves, optimal_force=2.0, bound=10.0),
    ).process()
    assert _sj_actuators(model) == _osim_actuators(ref)
    assert [a[0] for a in _osim_actuators(ref)][6:] == [
        "/forceset/reserve_jointset_r_shoulder_r_shoulder_elev",
        "/forceset/reserve_jointset_r_elbow_r_elbow_flex",
    ]
    _compare_degroote_properties(ref, model)

    # (no dynamics here: arm26's wrapping surfaces take half a minute to compile; the
    # copied properties are compared exactly above, and DeGrooteFregly2016Muscle's
    # dynamics against OpenSim's in test_muscles_degroote)


@needs_gait
def test_reserve_and_residual_options_match_opensim(tmp_path):
    """Locked, coupled and already actuated coordinates, residual coordinates, bounds;
    ModOpAddResiduals; ModOpReplaceMusclesWithPathActuators; ModOpRemoveMuscles."""
    m = opensim.Model(str(GAIT_MODEL))
    m.updCoordinateSet().get("lumbar_extension").setDefaultLocked(True)
    cc = opensim.CoordinateCouplerConstraint()
    cc.setName("knees")
    names = opensim.ArrayStr()
    names.append("knee_angle_r")
    cc.setIndependentCoordinateNames(names)
    cc.setDependentCoordinateName("knee_angle_l")
    cc.setFunction(opensim.LinearFunction(1.0, 0.0))
    m.addConstraint(cc)
    act = opensim.CoordinateActuator("hip_flexion_r")
    act.setName("hip_motor")
    act.setOptimalForce(50.0)
    m.addForce(act)
    m.finalizeConnections()
    path = tmp_path / "edited.osim"
    m.printToXML(str(path))

    cases = [
        ((opensim.ModOpAddReserves(3.0, 20.0),), (functools.partial(me.add_reserves, optimal_force=3.0, bound=20.0),)),
        (
            (opensim.ModOpAddReserves(3.0, 20.0, False, True),),
            (
                functools.partial(
                    me.add_reserves,
                    optimal_force=3.0,
                    bound=20.0,
                    skip_coordinates_with_actuators=False,
                    skip_residual_coordinates=True,
                ),
            ),
        ),
        (
            (opensim.ModOpAddResiduals(5.0, 7.0, 100.0),),
            (
                functools.partial(
                    me.add_residuals, rotational_optimal_force=5.0, translational_optimal_force=7.0, bound=100.0
                ),
            ),
        ),
        (
            (opensim.ModOpReplaceMusclesWithPathActuators(), opensim.ModOpAddReserves(1.0)),
            (me.replace_muscles_with_path_actuators, me.add_reserves),
        ),
        (
            (opensim.ModOpRemoveMuscles(), opensim.ModOpAddResiduals(5.0, 7.0, 100.0, False)),
            (
                me.remove_muscles,
                functools.partial(
                    me.add_residuals,
                    rotational_optimal_force=5.0,
                    translational_optimal_force=7.0,
                    bound=100.0,
                    skip_coordinates_with_actuators=False,
                ),
            ),
        ),
    ]
    for osim_ops, sj_ops in cases:
        ref = _osim_actuators(_osim_process(path, *osim_ops))
        got = _sj_actuators(me.ModelProcessor(path, *sj_ops).process())
        assert got == ref, [op.getConcreteClassName() for op in osim_ops]
    # the lumbar and left knee have no reserve; the right hip keeps only its motor
    reserves = [a[0] for a in _sj_actuators(me.add_reserves(sj.load_osim(str(path))))]
    assert not any("lumbar" in r or "knee_angle_l" in r or "hip_flexion_r" in r for r in reserves[19:])


def test_bad_input_is_reported():
    model = sj.models.load("arm26")
    rigid = sj.RigidTendonMuscle("rigid", 100.0, 0.1, 0.2, path=model.find("/forceset/BRA").path)
    with_rigid = model.add(rigid)
    with pytest.raises(ModelError, match=r"/forceset/rigid: muscle of type RigidTendonMuscle is not supported"):
        me.replace_muscles_with_degroote(with_rigid)
    kept = me.replace_muscles_with_degroote(with_rigid, allow_unsupported_muscles=True)
    # as OpenSim: the unsupported muscle stays in place, the others move to the end
    assert [o.name for o in kept.forceset.objects] == [
        "rigid",
        "TRIlong",
        "TRIlat",
        "TRImed",
        "BIClong",
        "BICshort",
        "BRA",
    ]
    assert type(kept.find("/forceset/rigid")) is sj.RigidTendonMuscle
    # an already converted muscle is unsupported too (OpenSim throws the same way)
    with pytest.raises(ModelError, match="DeGrooteFregly2016Muscle is not supported"):
        me.replace_muscles_with_degroote(me.replace_muscles_with_degroote(model))
    dgf = me.replace_muscles_with_degroote(model)
    with pytest.raises(ModelError, match=r"/forceset/TRIlong \(property 'active_force_width_scale' = 0\.5\)"):
        me.scale_active_fiber_force_curve_width(dgf, 0.5)
    with pytest.raises(ModelError, match=r"/forceset/TRIlong \(property 'default_activation' = 0"):
        me.replace_muscles_with_degroote(model.set("/forceset/TRIlong", default_activation=0.0))
    with pytest.raises(ValueError, match="positive value for optimal_force"):
        me.add_reserves(model, 0.0)
    with pytest.raises(ValueError, match="non-negative bound"):
        me.add_reserves(model, 1.0, bound=-1.0)
    with pytest.raises(ValueError, match="'explicit' or 'implicit'"):
        me.tendon_compliance_dynamics_mode(dgf, "semi")
    with pytest.raises(ModelError, match="already has a component named 'reserve_jointset_r_shoulder_r_shoulder_elev'"):
        me.add_reserves(me.add_reserves(model), skip_coordinates_with_actuators=False)
    with pytest.raises(TypeError, match="operator 1 of the ModelProcessor is not callable"):
        me.ModelProcessor(model, me.add_reserves, 3.0)
    with pytest.raises(TypeError, match="returned NoneType, not a Model"):
        me.ModelProcessor(model, lambda m: None).process()
    with pytest.raises(TypeError, match="needs a simjax Model"):
        me.ignore_tendon_compliance("arm26.osim")
    # DGF-only operators leave other muscles alone; the source model is untouched
    assert me.ignore_passive_fiber_forces(model) is model
    implicit = me.tendon_compliance_dynamics_mode(me.ignore_tendon_compliance(dgf), "implicit")
    assert all(m.tendon_compliance_dynamics_mode == "explicit" for m in implicit.components_of(sj.Muscle))
    assert math.isclose(
        float(dgf.find("/forceset/BRA").max_isometric_force), float(model.find("/forceset/BRA").max_isometric_force)
    )
