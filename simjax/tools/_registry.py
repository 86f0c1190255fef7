"""Importing this module imports every tool module, each of which registers the setup
files it runs (``setup.register_tool``)."""

from . import analyze, dynamics, kinematics, optimization, scaling  # noqa: F401
