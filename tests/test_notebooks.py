"""Execute every notebook top to bottom at its CI size (``SIMJAX_CI=1``), as a user would
open it: each notebook's own assertions (agreement with OpenSim and the like) must hold."""

from __future__ import annotations

import glob
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")
pytest.importorskip("ipykernel")

HERE = os.path.join(os.path.dirname(__file__), "..", "notebooks")
NOTEBOOKS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "*.ipynb")))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMJAX_CI", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(os.path.join(HERE, name), as_version=4)
    # run in a scratch copy of the folder layout so written files stay out of the repo
    work = tmp_path / "notebooks"
    work.mkdir()
    os.symlink(os.path.abspath(os.path.join(HERE, "..", "examples")), tmp_path / "examples")
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": work}})
    client.execute()


def test_example_twins_match_the_notebooks():
    """examples/ holds a plain-script twin of notebooks 02-05, written from the same cells."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_notebooks", os.path.join(HERE, "make_notebooks.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    assert set(mk.TWINS) | {"01_bicep_curl.ipynb"} == set(NOTEBOOKS)
    for name in mk.TWINS:
        with open(mk.twin_path(name), encoding="utf-8") as f:
            text = f.read()
        assert text == mk.script(name, mk.NOTEBOOKS[name]), f"{name}: run python notebooks/make_notebooks.py"
        compile(text, mk.twin_path(name), "exec")
