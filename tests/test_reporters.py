"""Reporters: TableReporter and ConsoleReporter fed by outputs (issue 6, item 6)."""

import jax.numpy as jnp
import numpy as np

import simjax as sj
from simjax.control.reporters import ConsoleReporter, TableReporter, format_console_table, report


def model():
    m = sj.Model("slider", gravity=(0, 0, 0))
    m = m.add(sj.Body("b", 2.0, (0, 0, 0), (1, 1, 1, 0, 0, 0)))
    m = m.add(sj.SliderJoint("s", "/ground", "/bodyset/b", coordinates=(sj.Coordinate("x"),)))
    m = m.add(sj.CoordinateActuator("f", "/jointset/s/x", optimal_force=4.0))
    m = m.add(sj.PrescribedController("brain").prescribe("/forceset/f", sj.Constant(1.0)))
    m = m.add(
        TableReporter("table", 0.5).add_to_report("/jointset/s/x|value", "x").add_to_report("/forceset/f|actuation")
    )
    m = m.add(ConsoleReporter("console", 1.0).add_to_report("/jointset/s/x|speed", "xdot"))
    return m.build()


def test_reporters_collect_outputs_at_their_intervals(capsys):
    system = model()
    traj = sj.simulate(system, system.default_state(), 2.0, ts=jnp.linspace(0.0, 2.0, 9), accuracy=1e-10)
    tables = report(traj)
    t = tables["/table"]
    np.testing.assert_allclose(t.times, [0.0, 0.5, 1.0, 1.5, 2.0])
    assert list(t.labels) == ["x", "/forceset/f|actuation"]
    np.testing.assert_allclose(t.column("x"), t.times**2, rtol=1e-8, atol=1e-12)  # a = 2, x = t^2
    np.testing.assert_allclose(t.column("/forceset/f|actuation"), 4.0)
    c = tables["/console"]
    np.testing.assert_allclose(c.column("xdot"), [0.0, 2.0, 4.0], atol=1e-8)
    printed = capsys.readouterr().out
    assert printed.startswith("[console]")
    assert "2.00000000e+00| 4.00000000e+00|" in printed


def test_console_layout_wraps_long_labels():
    from simjax.io.tables import TimeSeriesTable

    table = TimeSeriesTable(
        [0.0, 1.0],
        np.array([[1.18096897, 1.57079633], [57.2750904, 0.770664118]]),
        ["/model_/biceps|fiber_force", "elbow_angle"],
    )
    text = format_console_table("reporter", table).splitlines()
    assert text[0] == "[reporter]"
    assert all(len(line) == 3 * 15 + 2 for line in text[1:])
    assert text[-1] == "1.00000000e+00| 5.72750904e+01| 7.70664118e-01|"
    assert "fiber_force" in "".join(text[1:4]).replace("|", "")
