"""Importing this module imports every tool module, each of which registers the setup
files it runs (``setup.register_tool``)."""

from . import dynamics, kinematics, scaling  # noqa: F401
