"""The tools' tests share OpenSim's walking pipeline and a way to run OpenSim's tools.

``PIPELINE``: the Gait10dof18musc example shipped in ``simjax/models/pipelines``; ``run_in(folder,
fn)``: ``fn()`` with ``folder`` as the working directory (OpenSim's tools open a
setup's model relative to it).
"""

from __future__ import annotations

import os

import simjax as sj

PIPELINE = sj.models.pipeline_path("Gait10dof18musc")


def run_in(folder, fn):
    """``fn()`` run with ``folder`` as the working directory; the old one restored."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return fn()
    finally:
        os.chdir(cwd)
