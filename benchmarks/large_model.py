"""A synthetic large model for the benchmark suite (issue 10): several copies of the
shipped ``gait10dof18musc.osim`` side by side in one OpenSim 4 model, with wrapping.

- Each copy has the whole planar skeleton (10 DoF, 12 bodies) and its 18
  Millard2012EquilibriumMuscles; every body, joint, joint frame, coordinate, muscle
  and wrap object of copy ``k`` is named with the suffix ``_c<k>``, and every socket,
  TransformAxis coordinate and PathWrap reference inside the copy is rewritten to
  match. The copies stand ``SPACING`` m apart along Ground's z (one Ground), so they do
  not overlap; they do not interact.
- Wrapping (``WRAPS``): per leg, five WrapCylinders at the joint centres, axes along
  the joints' z axes: two at the hip on the pelvis (one for iliopsoas and rect_fem,
  one for glut_max and hamstrings), one at the knee on the tibia (hamstrings,
  bifemsh; quadrant ``-x``, posterior), two at the ankle on the tibia (tib_ant,
  ``+x``; gastroc and soleus, ``-x``). Hamstrings wrap over two cylinders (hip, then
  knee), seven other muscles over one; several PathWraps have a ``range`` (the
  segments crossing the joint). Each radius is about 0.6 of the smallest distance
  from the cylinder's axis to the path points of the muscles it serves, over the
  coordinates' ranges, so no path point lies inside a cylinder; each PathWrap is
  active (the path touches its cylinder) in about 5-35% of poses uniform in the
  coordinates' ranges.
- Not wrapped: vasti. The quadriceps' conditional and moving points (the model's
  patella) keep their path at least 3.7 cm from the knee axis, while a cylinder that
  holds none of their points must be thinner than 3.8 cm, so a knee cylinder would
  never touch them.
- Quadrants. The hip cylinders are unconstrained (``all``): the femur swings through
  +-120 degrees about them, which puts both ends of some path segments on the side a
  quadrant forbids, where OpenSim wraps the long way round (up to 1 m longer paths)
  and the lengths jump by centimetres as the wrap side is forced. At the knee and
  ankle the quadrants cause no such jumps; the only length jumps left are the source
  model's own (iliopsoas' conditional point, 1.6-2 cm).
- The display meshes (not shipped) are left out; nothing else of the source file is
  changed.

With the default 5 copies: 50 DoF, 90 muscles, 50 wrap cylinders, 80 wrapped muscles.

Run: ``python -m benchmarks.large_model [--copies 5] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import xml.etree.ElementTree as ET

import simjax as sj

SOURCE = "gait10dof18musc"
SPACING = 1.0
"""Distance between neighbouring copies along Ground's z axis (m)."""

CYLINDER_LENGTH = 0.2
"""Length of every wrap cylinder (m); the path points lie within +-0.1 m of its centre in z."""

WRAPS = (
    # (name, body, joint, the body's side of the joint, quadrant, radius (m),
    #  ((muscle, PathWrap range), ...)); muscles in path order
    ("hip_ant", "pelvis", "hip", "parent", "all", 0.026, (("iliopsoas", (2, 4)), ("rect_fem", (-1, -1)))),
    ("hip_post", "pelvis", "hip", "parent", "all", 0.040, (("glut_max", (2, 3)), ("hamstrings", (-1, -1)))),
    ("knee_post", "tibia", "knee", "child", "-x", 0.028, (("hamstrings", (1, 2)), ("bifemsh", (-1, -1)))),
    ("ankle_ant", "tibia", "ankle", "parent", "+x", 0.028, (("tib_ant", (2, 3)),)),
    ("ankle_post", "tibia", "ankle", "parent", "-x", 0.030, (("gastroc", (-1, -1)), ("soleus", (-1, -1)))),
)
"""The wrap cylinders of each leg (names and bodies without the side ``_r``/``_l``).

Each sits at its joint's centre in its body's frame, axis along z (the joint axis).
Radii: about 0.6 of the smallest distance from the axis to the path points of the
muscles that use the cylinder, over poses uniform in the coordinates' ranges (hip
anterior 0.044 m, posterior 0.066 m; knee 0.047 m; ankle anterior 0.048 m,
posterior 0.050 m). A PathWrap ``range`` (1-based path points, ``(-1, -1)`` for all)
limits it to the segments that cross the joint."""

_JOINT_TAGS = (
    "CustomJoint",
    "PinJoint",
    "WeldJoint",
    "SliderJoint",
    "UniversalJoint",
    "BallJoint",
    "FreeJoint",
    "PlanarJoint",
    "GimbalJoint",
    "EllipsoidJoint",
)


def _fmt(x: float) -> str:
    return repr(round(float(x), 9))


def _vec(text: str) -> list[float]:
    return [float(v) for v in text.split()]


def _rename_path(path: str, names: set[str], suffix: str) -> str:
    """``path`` with every segment that is one of ``names`` suffixed."""
    return "/".join(s + suffix if s in names else s for s in path.split("/"))


def _joint_centre(joint: ET.Element, side: str) -> list[float]:
    """The joint's centre in the frame of its ``side`` ("parent" or "child") body (m):
    that offset frame's translation (the offset frames here have no rotation). On the
    parent side of a CustomJoint the centre moves with the coordinates (the knee's
    translations), so that side is refused."""
    if side == "parent" and joint.find("SpatialTransform") is not None:
        raise ValueError(f"{joint.get('name')}: the parent-side centre of a CustomJoint moves; use the child side")
    socket = joint.findtext(f"socket_{side}_frame").strip()
    frame = next(f for f in joint.find("frames") if f.get("name") == socket)
    if any(_vec(frame.findtext("orientation"))):
        raise ValueError(f"{joint.get('name')}/{socket}: rotated offset frames are not handled")
    return _vec(frame.findtext("translation"))


def _sub(parent: ET.Element, tag: str, text: str) -> ET.Element:
    e = ET.SubElement(parent, tag)
    e.text = text
    return e


def _add_wraps(bodies: dict, joints: dict, muscles: dict, side: str) -> None:
    """Add the ``WRAPS`` cylinders of leg ``side`` ("r" or "l") to the (unrenamed)
    bodies and their PathWraps to the muscles, in place."""
    by_muscle: dict[str, list[tuple[str, tuple[int, int]]]] = {}
    for name, body, joint, at, quadrant, radius, users in WRAPS:
        body_name = body if body == "pelvis" else f"{body}_{side}"
        wrap_name = f"{name}_{side}"
        centre = _joint_centre(joints[f"{joint}_{side}"], at)
        cyl = ET.SubElement(bodies[body_name].find("WrapObjectSet/objects"), "WrapCylinder", name=wrap_name)
        _sub(cyl, "active", "true")
        _sub(cyl, "xyz_body_rotation", "0 0 0")
        _sub(cyl, "translation", " ".join(_fmt(c) for c in centre))
        _sub(cyl, "quadrant", quadrant)
        _sub(cyl, "radius", _fmt(radius))
        _sub(cyl, "length", _fmt(CYLINDER_LENGTH))
        for m, rng in users:
            by_muscle.setdefault(f"{m}_{side}", []).append((wrap_name, rng))
    for muscle, wraps in by_muscle.items():
        wrap_set = muscles[muscle].find("GeometryPath/PathWrapSet/objects")
        for wrap_name, rng in wraps:
            pw = ET.SubElement(wrap_set, "PathWrap", name=f"{muscle}-wrap-{wrap_name}")
            _sub(pw, "wrap_object", wrap_name)
            _sub(pw, "method", "hybrid")
            _sub(pw, "range", f"{rng[0]} {rng[1]}")


def _rename(elements: list[ET.Element], names: set[str], suffix: str) -> None:
    """Suffix, in place, every ``name`` attribute in ``names`` and every reference to
    one (sockets, TransformAxis coordinates, PathWrap wrap objects)."""
    for top in elements:
        for e in top.iter():
            if e.get("name") in names:
                e.set("name", e.get("name") + suffix)
            if e.text is None:
                continue
            if e.tag.startswith("socket_") or e.tag == "wrap_object":
                e.text = _rename_path(e.text.strip(), names, suffix)
            elif e.tag == "coordinates" and not len(e):
                e.text = " ".join(_rename_path(c, names, suffix) for c in e.text.split())


def osim_text(copies: int = 5) -> str:
    """The large model as ``.osim`` text.

    **Arguments:**

    - ``copies``: how many copies of ``gait10dof18musc`` (with its wrap cylinders) the
      model holds, side by side along Ground's z axis, ``SPACING`` m apart.

    **Returns:** an OpenSim 4 document (``Version="40000"``) with ``10 * copies``
    degrees of freedom, ``18 * copies`` Millard2012EquilibriumMuscles, ``10 * copies``
    WrapCylinders and ``16 * copies`` muscles with PathWraps. Names in copy ``k`` end
    in ``_c<k>`` (``/jointset/knee_r_c2/knee_angle_r_c2``, ``/forceset/vasti_r_c2``).
    """
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    root = ET.parse(sj.models.path(SOURCE)).getroot()
    model = root.find("Model")
    sets = {tag: model.find(f"{tag}/objects") for tag in ("BodySet", "JointSet", "ForceSet")}
    bodies = {b.get("name"): b for b in sets["BodySet"]}
    joints = {j.get("name"): j for j in sets["JointSet"]}
    muscles = {m.get("name"): m for m in sets["ForceSet"]}
    if any(m.tag != "Millard2012EquilibriumMuscle" for m in muscles.values()):
        raise ValueError(f"{SOURCE}: expected only Millard2012EquilibriumMuscles in the ForceSet")
    for b in bodies.values():  # display meshes: not shipped, not needed
        geometry = b.find("attached_geometry")
        for mesh in list(geometry):
            geometry.remove(mesh)
    for side in ("r", "l"):
        _add_wraps(bodies, joints, muscles, side)

    names = set(bodies) | set(joints) | set(muscles)
    for j in joints.values():
        names |= {f.get("name") for f in j.find("frames")}
        names |= {c.get("name") for c in j.iter("Coordinate")}
    for b in bodies.values():
        names |= {w.get("name") for w in b.find("WrapObjectSet/objects")}
    for m in muscles.values():
        names |= {w.get("name") for w in m.find("GeometryPath/PathWrapSet/objects")}

    originals = {tag: list(s) for tag, s in sets.items()}
    for tag, s in sets.items():
        for e in originals[tag]:
            s.remove(e)
    for k in range(1, copies + 1):
        suffix = f"_c{k}"
        z = SPACING * (k - 1 - (copies - 1) / 2)
        for tag, s in sets.items():
            elements = [copy.deepcopy(e) for e in originals[tag]]
            _rename(elements, names, suffix)
            for e in elements:
                if e.tag in _JOINT_TAGS:
                    for f in e.find("frames"):
                        if f.findtext("socket_parent").strip() == "/ground":
                            t = _vec(f.findtext("translation"))
                            f.find("translation").text = " ".join(_fmt(v) for v in (t[0], t[1], t[2] + z))
                s.append(e)

    model.set("name", f"{SOURCE}_x{copies}")
    model.find("credits").text += (
        f" This file is a synthetic derivative made by simjax (benchmarks/large_model.py): {copies} copies of the "
        "model side by side, with wrap cylinders at the hips, knees and ankles added for benchmarking; not for "
        "research use."
    )
    ET.indent(root, space="\t")
    return '<?xml version="1.0" encoding="UTF-8" ?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(path: str | os.PathLike, copies: int = 5) -> str:
    """Write ``osim_text(copies)`` to ``path``.

    **Arguments:** ``path``: the ``.osim`` file to write (its folder must exist);
    ``copies``: as ``osim_text``.

    **Returns:** the path written, as a string.
    """
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(osim_text(copies))
    return path


def counts(text: str) -> dict:
    """The size of a model from its ``.osim`` text, without building it.

    **Arguments:** ``text``: an OpenSim 4 document.

    **Returns:** ``{"dof": coordinates, "muscles": Millard2012EquilibriumMuscles,
    "wrap_cylinders": WrapCylinders, "wrapped_muscles": muscles with at least one
    PathWrap}``.
    """
    model = ET.fromstring(text).find("Model")
    muscles = list(model.iter("Millard2012EquilibriumMuscle"))
    return {
        "dof": sum(1 for _ in model.iter("Coordinate")),
        "muscles": len(muscles),
        "wrap_cylinders": sum(1 for _ in model.iter("WrapCylinder")),
        "wrapped_muscles": sum(m.find("GeometryPath/PathWrapSet/objects/PathWrap") is not None for m in muscles),
    }


def main(argv=None):
    """Write the model and print its size: ``python -m benchmarks.large_model [--copies 5] [--out FILE]``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--out", default=None, help="file to write (default: gait10dof18musc_x<copies>.osim here)")
    args = ap.parse_args(argv)
    out = write(args.out or f"{SOURCE}_x{args.copies}.osim", args.copies)
    with open(out, encoding="utf-8") as fh:
        c = counts(fh.read())
    copies = "1 copy" if args.copies == 1 else f"{args.copies} copies"
    print(
        f"{out}: {copies} of {SOURCE}: {c['dof']} DoF, {c['muscles']} Millard muscles, "
        f"{c['wrap_cylinders']} wrap cylinders, {c['wrapped_muscles']} wrapped muscles"
    )


if __name__ == "__main__":
    main()
