"""OpenSim's collection, walking and running models (Gait*, Hamner, Rajagopal*, Leg*):
each loads strictly, builds and equilibrates; at random valid states its udot, zdot,
muscle tendon forces and path lengths match OpenSim 4.6; 0.1 s of simulate runs
(the first model of each folder: ``_collection.simulated``)
(issue 38). The other models are in ``test_collection_other.py`` (a file each, so
that pytest-xdist runs the two halves side by side)."""

import numpy as np
import pytest

pytest.importorskip("opensim")

from _collection import check_model, files, simulated  # noqa: E402

GAIT = ("Gait", "Hamner", "Rajagopal", "Leg")


@pytest.mark.parametrize("file", [f for f in files() if f.startswith(GAIT)])
def test_model_matches_opensim_and_simulates(file):
    result = check_model(file, simulate=simulated(file))
    # None: not simulated (a variant of its folder's model), or OpenSim's dynamics are
    # undefined too (massless bodies)
    if result["result"] is not None:
        assert result["result"] == 0 and np.isfinite(result["q_end"]).all()
