"""Author ``subject01_Setup_Scale.xml`` (and the marker set it uses) with OpenSim's
Python API.

The walking pipeline ships no Scale setup, and the generic ``gait10dof18musc.osim``
has no markers: the generic model (a copy of simjax's shipped ``gait10dof18musc.osim``,
so that the pipeline stands alone) gets the marker set of the pipeline's ``subject01.osim``
(written by OpenSim's ``MarkerSet.print``). Run from anywhere:
``python3 make_setup_scale.py``.
"""

import os

import opensim as osim

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE = os.path.dirname(HERE)

# --- the marker set (from the pipeline's scaled model) --------------------------
subject = osim.Model(os.path.join(PIPELINE, "subject01.osim"))
subject.getMarkerSet().printToXML(os.path.join(HERE, "gait10dof18musc_markers.xml"))

# --- the setup --------------------------------------------------------------------
tool = osim.ScaleTool()
tool.setName("subject01")
tool.setSubjectMass(72.6)
tool.setSubjectHeight(1803.4)
tool.setSubjectAge(-1)

gmm = tool.getGenericModelMaker()
gmm.setModelFileName("gait10dof18musc.osim")
gmm.setMarkerSetFileName("gait10dof18musc_markers.xml")

ms = tool.getModelScaler()
ms.setApply(True)
order = osim.ArrayStr()
order.append("measurements")
order.append("manualScale")
ms.setScalingOrder(order)
ms.setMarkerFileName("../ExperimentalData/subject01_static.trc")
rng = osim.ArrayDouble()
rng.append(0.5)
rng.append(1.5)
ms.setTimeRange(rng)
ms.setPreserveMassDist(True)
ms.setOutputModelFileName("subject01_scaled.osim")
ms.setOutputScaleFileName("subject01_scale_set_applied.xml")

# (name, marker pairs, {body: axes})
MEASUREMENTS = [
    ("pelvis_width", [("R.ASIS", "L.ASIS")], {"pelvis": "Z"}),
    ("pelvis_depth", [("R.ASIS", "V.Sacral"), ("L.ASIS", "V.Sacral")], {"pelvis": "X Y"}),
    ("thigh_r", [("R.ASIS", "R.Knee.Lat")], {"femur_r": "X Y Z"}),
    ("thigh_l", [("L.ASIS", "L.Knee.Lat")], {"femur_l": "X Y Z"}),
    ("shank_r", [("R.Knee.Lat", "R.Ankle.Lat"), ("R.Knee.Med", "R.Ankle.Med")], {"tibia_r": "X Y Z"}),
    ("shank_l", [("L.Knee.Lat", "L.Ankle.Lat"), ("L.Knee.Med", "L.Ankle.Med")], {"tibia_l": "X Y Z"}),
    ("foot_r", [("R.Heel", "R.Toe.Tip")], {"calcn_r": "X Y Z", "toes_r": "X Y Z"}),
    ("foot_l", [("L.Heel", "L.Toe.Tip")], {"calcn_l": "X Y Z", "toes_l": "X Y Z"}),
    ("torso", [("R.Acromium", "L.Acromium"), ("Sternum", "Top.Head")], {"torso": "X Y Z"}),
]
for name, pairs, bodies in MEASUREMENTS:
    m = osim.Measurement()
    m.setName(name)
    m.setApply(True)
    for a, b in pairs:
        m.getMarkerPairSet().cloneAndAppend(osim.MarkerPair(a, b))
    for body, axes in bodies.items():
        bs = osim.BodyScale()
        bs.setName(body)
        arr = osim.ArrayStr()
        for ax in axes.split():
            arr.append(ax)
        bs.setAxisNames(arr)
        m.getBodyScaleSet().cloneAndAppend(bs)
    ms.addMeasurement(m)

# manual, non-uniform factors (applied after the measurements)
for body, factors in (("talus_r", (1.1, 1.05, 0.95)), ("talus_l", (1.1, 1.05, 0.95))):
    s = osim.Scale()
    s.setSegmentName(body)
    s.setScaleFactors(osim.Vec3(*factors))
    s.setApply(True)
    ms.addScale(s)

# marker placement: IK on the static pose (ASIS weighted 10), then markers moved
mp = tool.getMarkerPlacer()
mp.setApply(True)
for name in (
    "R.ASIS L.ASIS V.Sacral R.Thigh.Upper R.Knee.Lat R.Shank.Upper R.Ankle.Lat R.Heel R.Toe.Tip "
    "L.Thigh.Upper L.Knee.Lat L.Shank.Upper L.Ankle.Lat L.Heel L.Toe.Tip Sternum R.Acromium L.Acromium "
    "Top.Head"
).split():
    task = osim.IKMarkerTask()
    task.setName(name)
    task.setWeight(10.0 if "ASIS" in name else 1.0)
    task.setApply(True)
    mp.getIKTaskSet().cloneAndAppend(task)
mp.setStaticPoseFileName("../ExperimentalData/subject01_static.trc")
mp.setTimeRange(rng)
mp.setOutputModelFileName("subject01_scaled_placed.osim")
mp.setOutputMotionFileName("subject01_static_output.mot")
mp.setOutputMarkerFileName("subject01_markers_placed.xml")
mp.setMaxMarkerMovement(-1)

tool.printToXML(os.path.join(HERE, "subject01_Setup_Scale.xml"))
