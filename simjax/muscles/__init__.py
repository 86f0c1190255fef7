"""Muscle models and the curves they are built from (OpenSim's Actuators library)."""
