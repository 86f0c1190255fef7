"""The documentation site builds with ``mkdocs build --strict`` (API pages from the
docstrings, and the executed snippets run)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("markdown_exec")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}\n{result.stderr}"
    for page in (
        "index.html",
        "opensim/index.html",
        "gradients/index.html",
        "api/simjax/index.html",
        "api/optimize/index.html",
    ):
        assert (site / page).is_file(), page
    api = (site / "api" / "simjax" / "index.html").read_text(encoding="utf-8")
    assert 'id="simjax.simulate.simulate"' in api and 'id="simjax.load_osim"' in api
    # every public name of the package has its entry (the modules have their pages)
    import simjax

    ids = {"simulate": "simjax.simulate.simulate"}
    absent = [
        n
        for n in simjax.__all__
        if n not in ("models", "spatial", "view") and f'id="{ids.get(n, "simjax." + n)}"' not in api
    ]
    assert not absent, f"public names without an API entry: {absent}"
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "/jointset/pin1/q1/value" in index  # the executed snippet's output
