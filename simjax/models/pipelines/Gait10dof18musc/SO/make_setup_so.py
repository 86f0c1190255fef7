"""Author ``walk_Setup_SO.xml`` (static optimization) and ``walk_Setup_JR.xml`` (joint
reactions from its muscle forces) with OpenSim's Python API.

The walking pipeline ships no AnalyzeTool setups. These run OpenSim's
``StaticOptimization`` on the IK motion (``../IK/subject01_walk_IK.mot``, 6 Hz
low-pass, the ground reactions, the pipeline's reserve and residual actuators), then
``JointReaction`` at the hips, knees and ankles with the optimized forces
(``Results/subject01_walk_StaticOptimization_force.sto``). Run from anywhere:
``python3 make_setup_so.py``.
"""

import os

import opensim as osim

HERE = os.path.dirname(os.path.abspath(__file__))
START, END = 0.5, 2.5


def tool(name: str) -> osim.AnalyzeTool:
    """An OpenSim ``AnalyzeTool`` named ``name`` set up for subject01's walk: the model,
    IK motion, ground reactions, reserve actuators and time range of this pipeline."""
    t = osim.AnalyzeTool()
    t.setName(name)
    t.setModelFilename("../subject01.osim")
    t.setCoordinatesFileName("../IK/subject01_walk_IK.mot")
    t.setLowpassCutoffFrequency(6)
    t.setInitialTime(START)
    t.setFinalTime(END)
    t.setExternalLoadsFileName("../ExperimentalData/subject01_walk_grf.xml")
    files = osim.ArrayStr()
    files.append("../gait10dof_Reserve_Actuators.xml")
    t.setForceSetFiles(files)
    t.setReplaceForceSet(False)
    t.setResultsDir("Results")
    return t


def strings(*words) -> osim.ArrayStr:
    """An OpenSim ``ArrayStr`` holding ``words``."""
    out = osim.ArrayStr()
    for w in words:
        out.append(w)
    return out


so_tool = tool("subject01_walk")
so = osim.StaticOptimization()
so.setName("StaticOptimization")
so.setActivationExponent(2)
so.setUseModelForceSet(True)
so.setConvergenceCriterion(1e-4)
so.setMaxIterations(100)
so.setStartTime(START)
so.setEndTime(END)
so_tool.getAnalysisSet().cloneAndAppend(so)
so_tool.printToXML(os.path.join(HERE, "walk_Setup_SO.xml"))

jr_tool = tool("subject01_walk")
jr = osim.JointReaction()
jr.setName("JointReaction")
jr.setForcesFileName("Results/subject01_walk_StaticOptimization_force.sto")
jr.setJointNames(strings("hip_r", "knee_r", "ankle_r", "hip_l", "knee_l", "ankle_l"))
jr.setOnBody(strings("child"))
jr.setInFrame(strings("child"))
jr.setStartTime(START)
jr.setEndTime(END)
jr_tool.getAnalysisSet().cloneAndAppend(jr)
jr_tool.printToXML(os.path.join(HERE, "walk_Setup_JR.xml"))
