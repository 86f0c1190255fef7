"""The code passes the project's lint rules and is formatted (``[tool.ruff]`` in
pyproject.toml: pycodestyle, pyflakes and missing docstrings, lines of 120;
``ruff format``)."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    result = subprocess.run(
        [ruff, "check", "--no-cache", "simjax", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_the_code_unchanged():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    result = subprocess.run(
        [ruff, "format", "--check", "--no-cache", "simjax", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
