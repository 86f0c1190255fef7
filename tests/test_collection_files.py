"""OpenSim's collection through ``save_osim``: every model loads strictly, its written
file reads back to the same text on a second write, and OpenSim 4.6 loads and
initializes every file simjax writes, with the same state variables (issue 38)."""

import os
import warnings

import pytest

from simjax.io.osim import OsimWarning, dumps_osim, load_osim, loads_osim

from _collection import COLLECTION, files, forget_opensim_defaults


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        return load_osim(path)


@pytest.mark.parametrize("file", files())
def test_round_trip_is_text_identical_and_opensim_loads_it(file, tmp_path):
    path = os.path.join(COLLECTION, file)
    first = dumps_osim(_load(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        assert dumps_osim(loads_osim(first, source=file)) == first
    opensim = pytest.importorskip("opensim")
    written = tmp_path / file
    written.write_text(first)
    ours = opensim.Model(str(written))
    forget_opensim_defaults(written)
    theirs = opensim.Model(path)
    forget_opensim_defaults(path)
    ours.initSystem()
    theirs.initSystem()
    names = lambda m: sorted(m.getStateVariableNames().get(i) for i in range(m.getNumStateVariables()))  # noqa: E731
    assert names(ours) == names(theirs)
