"""Frames, bodies, joints, constraints and the multibody dynamics passes."""
