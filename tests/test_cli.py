"""The ``simjax`` command line: ``info`` and ``validate``, and subcommand registration."""

import pytest

import simjax as sj
from simjax import cli


def test_info_lists_components_coordinates_actuators_states(capsys):
    assert cli.main(["info", "double_pendulum"]) == 0
    out = capsys.readouterr().out
    assert "Model: double_pendulum" in out
    assert "/jointset/pin1  [PinJoint]" in out
    assert "/jointset/pin1/q1  Rotational  default -0.785398  range [-1.5708, 1.5708]" in out
    assert "Actuators (2):\n  /forceset/Torq1  [CoordinateActuator]" in out
    assert "State variables (4):\n  /jointset/pin1/q1/value\n  /jointset/pin1/q1/speed" in out


def test_info_lists_skipped_content_and_strict_fails(capsys, tmp_path):
    text = open(sj.models.path("double_pendulum")).read()
    text = text.replace(
        '<CoordinateActuator name="Torq1">', '<McKibbenActuator name="mk"/><CoordinateActuator name="Torq1">'
    )
    path = tmp_path / "with_mckibben.osim"
    path.write_text(text)
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Skipped content simjax does not model yet (1):" in out
    assert "McKibbenActuator at /forceset/mk" in out
    assert cli.main(["info", "--strict", str(path)]) == 1
    assert "unsupported element(s)" in capsys.readouterr().err


def test_usage_errors(capsys, tmp_path):
    assert cli.main([]) == 2
    assert cli.main(["info", str(tmp_path / "missing.osim")]) == 1
    assert "no shipped model of that name" in capsys.readouterr().err
    bad = tmp_path / "bad.osim"
    bad.write_text("<OpenSimDocument Version='40000'><Model name='m'><gravity>1 2</gravity></Model></OpenSimDocument>")
    assert cli.main(["info", str(bad)]) == 1
    assert "bad.osim:1: /" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["frobnicate"])


def test_validate_prints_worst_errors(capsys):
    pytest.importorskip("opensim")
    assert cli.main(["validate", "double_pendulum", "-n", "5", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split() == ["quantity", "states", "max", "abs", "err", "max", "rel", "err", "tolerance", "result"]
    rows = {line.split("  ")[0].strip(): line for line in lines[3:]}
    assert set(rows) == {"mass matrix", "accelerations"}
    assert all(line.endswith("ok") for line in rows.values())
    assert cli.main(["validate", "double_pendulum", "--check", "nope"]) == 2


def test_subcommands_are_a_registry(capsys):
    calls = []
    cli.register_subcommand(
        "echo-test", "test only", lambda p: p.add_argument("word"), lambda args: calls.append(args.word) or 0
    )
    try:
        assert cli.main(["echo-test", "hello"]) == 0
        assert calls == ["hello"]
    finally:
        del cli.SUBCOMMANDS["echo-test"]
