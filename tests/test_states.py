"""States files and coordinate motions (``simjax.io.states``).

States files written by OpenSim read back exactly, by name; ours are read by
OpenSim's ``StatesTrajectory``; IK-style ``.mot`` motions (degrees per the header)
give initial states and prescribed motion.
"""

import math
import warnings

import jax
import numpy as np
import pytest

import simjax as sj
from simjax.io import states as st
from simjax.io.osim import OsimWarning
from simjax.io.tables import TimeSeriesTable, read_table, write_table

NAMES = ("/jointset/pin1/q1/value", "/jointset/pin1/q1/speed", "/jointset/pin2/q2/value", "/jointset/pin2/q2/speed")


@pytest.fixture(scope="module")
def system():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        return sj.models.load("double_pendulum").build()


@pytest.fixture(scope="module")
def osim():
    osim = pytest.importorskip("opensim")
    osim.Logger.setLevelString("Off")
    return osim


def _batch(system, n=4, seed=0):
    rng = np.random.default_rng(seed)
    base = system.default_state()
    return sj.State(
        t=np.linspace(0.0, 0.3, n),
        q=rng.uniform(-1, 1, (n, 2)),
        u=rng.uniform(-1, 1, (n, 2)),
        z=np.zeros((n, 0)),
        d=np.zeros((n,) + base.d.shape),
    )


def test_opensim_states_file_reads_back_exactly(system, osim, tmp_path):
    m = osim.Model(sj.models.path("double_pendulum"))
    s = m.initSystem()
    manager = osim.Manager(m)
    manager.initialize(s)
    manager.integrate(0.2)
    path = str(tmp_path / "states.sto")
    osim.STOFileAdapter.write(manager.getStatesTable(), path)
    theirs = osim.TimeSeriesTable(path)
    mine = st.read_states(system, path)
    assert mine.q.shape == (theirs.getNumRows(), 2)
    labels = list(theirs.getColumnLabels())
    assert tuple(labels) == NAMES
    for j, name in enumerate(labels):
        col = np.array([theirs.getDependentColumnAtIndex(j)[i] for i in range(theirs.getNumRows())])
        np.testing.assert_array_equal(np.asarray(system.get_state_variable(mine, name)), col)
    np.testing.assert_array_equal(np.asarray(mine.t), np.array(list(theirs.getIndependentColumn())))


def test_opensim_reads_our_states_file(system, osim, tmp_path):
    states = _batch(system)
    path = tmp_path / "ours.sto"
    st.write_states(system, states, path)
    m = osim.Model(sj.models.path("double_pendulum"))
    m.initSystem()
    traj = osim.StatesTrajectory.createFromStatesTable(m, osim.TimeSeriesTable(str(path)))
    assert traj.getSize() == 4
    coords = [m.getCoordinateSet().get(n) for n in ("q1", "q2")]
    for i in range(4):
        s = traj.get(i)
        assert s.getTime() == float(states.t[i])
        for k, c in enumerate(coords):
            assert c.getValue(s) == float(states.q[i, k])
            assert c.getSpeedValue(s) == float(states.u[i, k])


def test_states_by_name(system, tmp_path):
    states = _batch(system, n=3, seed=1)
    table = st.states_table(system, states)
    assert table.labels == NAMES and table.metadata["inDegrees"] == "no"
    # shuffled columns, labels without the leading slash
    order = [2, 0, 3, 1]
    shuffled = TimeSeriesTable(
        table.times, table.to_numpy()[:, order], [NAMES[i][1:] for i in order], {"inDegrees": "no"}
    )
    back = st.states_from_table(system, shuffled)
    np.testing.assert_array_equal(np.asarray(back.q), np.asarray(states.q))
    np.testing.assert_array_equal(np.asarray(back.u), np.asarray(states.u))
    # a single state writes one row
    one = jax.tree_util.tree_map(lambda x: x[0], states)
    assert st.states_table(system, one).n_rows == 1
    # missing and unknown columns
    partial = table.select_columns(NAMES[:2])
    with pytest.raises(KeyError, match="lacks state variables: /jointset/pin2/q2/value"):
        st.states_from_table(system, partial)
    filled = st.states_from_table(system, partial, allow_missing=True)
    np.testing.assert_array_equal(np.asarray(filled.q[:, 1]), np.full(3, float(system.default_state().q[1])))
    table.append_column("/forceset/nothing/activation", np.zeros(3))
    with pytest.raises(KeyError, match="name no state variable.*/forceset/nothing/activation"):
        st.states_from_table(system, table)
    assert st.states_from_table(system, table, allow_extra=True).q.shape == (3, 2)


def test_states_in_degrees(system):
    table = TimeSeriesTable([0.0], [[90.0, 180.0, -45.0, 0.0]], NAMES, {"inDegrees": "yes"})
    s = st.states_from_table(system, table)
    np.testing.assert_allclose(np.asarray(s.q[0]), [math.pi / 2, -math.pi / 4])
    np.testing.assert_allclose(np.asarray(s.u[0]), [math.pi, 0.0])


def _motion(tmp_path, osim=None):
    """An IK-style motion, in degrees, written by OpenSim when it is available."""
    times = np.linspace(0.0, 1.0, 11)
    q1 = 30.0 * np.sin(2 * times)
    q2 = -20.0 + 10.0 * times**2
    path = tmp_path / "ik.mot"
    if osim is not None:
        table = osim.TimeSeriesTable()
        table.setColumnLabels(["q1", "q2", "unrelated"])
        for t, a, b in zip(times, q1, q2):
            table.appendRow(float(t), osim.RowVector([float(a), float(b), 1.0]))
        table.addTableMetaDataString("inDegrees", "yes")
        osim.STOFileAdapter.write(table, str(path))
    else:
        write_table(
            TimeSeriesTable(times, np.stack([q1, q2, np.ones(11)], 1), ["q1", "q2", "unrelated"], {"inDegrees": "yes"}),
            path,
        )
    return path, times, np.radians(q1), np.radians(q2)


def test_motion_values_and_initial_state(system, tmp_path):
    try:
        import opensim as osim
    except ImportError:
        osim = None
    path, times, q1, q2 = _motion(tmp_path, osim)
    assert read_table(path).in_degrees
    t, values, speeds = st.coordinates_from_table(system, path)
    np.testing.assert_allclose(t, times, rtol=1e-15)  # OpenSim writes 16 digits
    np.testing.assert_allclose(values["/jointset/pin1/q1"], q1, rtol=1e-15)
    np.testing.assert_allclose(values["/jointset/pin2/q2"], q2, rtol=1e-15)
    assert not speeds
    s0 = st.state_from_motion(system, path)
    np.testing.assert_allclose(np.asarray(s0.q), [q1[0], q2[0]], rtol=1e-15)
    spline = sj.SimmSpline(x=times, y=q1)
    np.testing.assert_allclose(float(s0.u[0]), float(spline.derivative(0.0, 1)), rtol=1e-12)
    s_mid = st.state_from_motion(system, path, time=0.55, speeds="zero")
    np.testing.assert_allclose(float(s_mid.q[0]), float(spline(0.55)), rtol=1e-12)
    assert float(s_mid.u[0]) == 0.0 and float(s_mid.t) == 0.55


def test_prescribed_motion(system, tmp_path):
    path, times, q1, q2 = _motion(tmp_path)
    model = st.prescribe_motion(system.model, path, coordinates=["q1"])
    coord = model.find("/jointset/pin1/q1")
    assert coord.prescribed and not model.find("/jointset/pin2/q2").prescribed
    np.testing.assert_allclose(np.asarray(coord.prescribed_function(times)), q1, rtol=1e-13, atol=1e-15)
    with pytest.raises(KeyError, match="no column"):
        st.prescribe_motion(system.model, TimeSeriesTable(times, q1[:, None], ["q1"]), coordinates=["q2"])
    # the prescribed coordinate accelerates as the spline's second derivative
    psys = model.build()
    state = st.state_from_motion(psys, path, time=0.35)
    udot = sj.forward_dynamics(psys, state)
    np.testing.assert_allclose(float(udot[0]), float(coord.prescribed_function.derivative(0.35, 2)), rtol=1e-10)
    with pytest.raises(ValueError, match="locked coordinate"):
        st.prescribe_motion(system.model.set("/jointset/pin1/q1", locked=True), path)
