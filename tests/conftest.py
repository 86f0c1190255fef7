"""Test configuration: float64 everywhere, and quiet OpenSim logging."""

import os

import jax

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("OPENSIM_LOG_LEVEL", "off")


def pytest_configure(config):
    try:
        import opensim

        opensim.Logger.setLevelString("Off")
    except Exception:
        pass
