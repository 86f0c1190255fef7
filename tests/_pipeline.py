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


def tight_static_optimization(opensim):
    """OpenSim's ``StaticOptimization`` analysis (exponent 2, the model's force set)
    converged tightly (criterion 1e-8, 2000 iterations), so that its IPOPT reaches the
    optimum: at its default 1e-4 it stops a few 1e-3 short in activation."""
    so = opensim.StaticOptimization()
    so.setName("StaticOptimization")
    so.setActivationExponent(2)
    so.setUseModelForceSet(True)
    so.setConvergenceCriterion(1e-8)
    so.setMaxIterations(2000)
    return so
