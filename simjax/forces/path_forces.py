"""Passive forces along a GeometryPath: ``PathSpring`` and ``Ligament`` (OpenSim's).

Both pull along their path like a muscle: the tension is applied where the path
touches its frames (``simjax.muscles.path.path_forces``), so the generalized force is
``-moment_arm * tension``. All members of a class are evaluated together; the
ligaments' force-length curves go through one function bank.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..component import ModelError, Stage, output, prop
from ..function_bank import FunctionBank, bank_eval, bank_params
from ..functions import Function, SimmSpline
from ..groups import Forces
from ..muscles.path import (
    GeometryPath,
    PathPoint,
    path_forces,
    path_geometry,
    path_speeds,
    path_topology,
    prepare_path_parameters,
)
from .base import Force

__all__ = ["PathSpring", "Ligament", "default_ligament_curve"]


class _PathForce(Force):
    """A force along its ``path`` (a GeometryPath subcomponent named ``path``)."""

    path: GeometryPath = eqx.field(default_factory=GeometryPath)

    def __check_init__(self):
        super().__check_init__()
        if not isinstance(self.path, GeometryPath):
            raise ModelError(self.name, "'path' must be a GeometryPath")

    def add_new_path_point(self, name: str, frame: str, location):
        """A copy with a ``PathPoint`` appended to its path.

        **Arguments:** ``name``; ``frame``: path of a PhysicalFrame; ``location`` (m).
        """
        return self.replace(path=self.path.append_point(PathPoint(name, frame, location)))

    @classmethod
    def compile_group(cls, build, paths):
        topo = path_topology(build)
        comps = [build.find(p) for p in paths]
        rows = [topo.index[f"{p}/{c.path.name}"] for p, c in zip(paths, comps)]
        return {
            "topology": topo,
            "rows": np.asarray(rows, np.int32),
            "on": np.asarray([c.applies_force for c in comps], bool),
        }

    @classmethod
    def _tension(cls, group, params, length, speed):
        raise NotImplementedError

    @classmethod
    def prepare_parameters(cls, group, ctx) -> None:
        """The paths' parameters (``Context.prepared``)."""
        prepare_path_parameters(group, ctx)

    @classmethod
    def group_forces(cls, group, params, ctx) -> Forces:
        """The tension of every member applied along its path."""
        s = group.static
        length = path_geometry(ctx).length[s["rows"]]
        speed = path_speeds(ctx)[s["rows"]]
        tension = cls._tension(group, params, length, speed)
        body, mob = path_forces(ctx, s["rows"], jnp.where(s["on"], tension, 0.0))
        return Forces(
            body=body, mobility=mob, outputs={"tension": tension, "length": length, "lengthening_speed": speed}
        )

    @output(Stage.DYNAMICS)
    def tension(self, ctx):
        """Tension along the path (N)."""
        return ctx.group_output(ctx.path, "tension")

    @output(Stage.POSITION)
    def length(self, ctx):
        """Length of the path (m)."""
        return ctx.group_output(ctx.path, "length")

    @output(Stage.VELOCITY)
    def lengthening_speed(self, ctx):
        """Lengthening speed of the path (m/s)."""
        return ctx.group_output(ctx.path, "lengthening_speed")


class PathSpring(_PathForce):
    """A spring along a path (OpenSim PathSpring): tension
    ``stiffness * max(0, length - resting_length) * (1 + dissipation * lengthening_speed)``.

    **Fields:** ``resting_length`` (m), ``stiffness`` (N/m), ``dissipation`` (s/m),
    ``path``, ``applies_force``.
    """

    resting_length: np.ndarray = prop(0.0, doc="Length at which the spring is slack (m).", bounds=(0.0, None))
    stiffness: np.ndarray = prop(0.0, doc="Stiffness (N/m).", bounds=(0.0, None))
    dissipation: np.ndarray = prop(0.0, doc="Dissipation coefficient (s/m).", bounds=(0.0, None))

    def __init__(
        self,
        name: str,
        resting_length=0.0,
        stiffness=0.0,
        dissipation=0.0,
        path: GeometryPath | None = None,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.resting_length = resting_length
        self.stiffness = stiffness
        self.dissipation = dissipation
        self.path = GeometryPath() if path is None else path
        self.applies_force = applies_force
        self.components = components

    @classmethod
    def _tension(cls, group, params, length, speed):
        stretch = jnp.maximum(length - params["resting_length"], 0.0)
        return params["stiffness"] * stretch * (1.0 + params["dissipation"] * speed)


def default_ligament_curve() -> SimmSpline:
    """OpenSim 4.6's default normalized force-length curve of a Ligament (of
    ``length / resting_length``)."""
    x = (-5.0, 0.998, 0.999, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.601, 1.602, 5.0)
    y = (0.0, 0.0, 0.0, 0.0, 0.035, 0.12, 0.26, 0.55, 1.17, 2.0, 2.0, 2.0, 2.0)
    return SimmSpline(x, y)


class Ligament(_PathForce):
    """A ligament along a path (OpenSim Ligament): while ``length > resting_length``
    the tension is ``pcsa_force * force_length_curve(length / resting_length)``, else 0.

    **Fields:** ``resting_length`` (m), ``pcsa_force`` (N), ``force_length_curve`` (a
    Function of ``length / resting_length``; ``None``: OpenSim's default,
    ``default_ligament_curve()``), ``path``, ``applies_force``.
    """

    resting_length: np.ndarray = prop(0.0, doc="Length at which the ligament is slack (m).", bounds=(0.0, None))
    pcsa_force: np.ndarray = prop(0.0, doc="Force scale of the normalized curve (N).", bounds=(0.0, None))
    force_length_curve: Function | None = None

    def __init__(
        self,
        name: str,
        resting_length=0.0,
        pcsa_force=0.0,
        force_length_curve: Function | None = None,
        path: GeometryPath | None = None,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.resting_length = resting_length
        self.pcsa_force = pcsa_force
        self.force_length_curve = force_length_curve
        self.path = GeometryPath() if path is None else path
        self.applies_force = applies_force
        self.components = components

    def validate(self, path: str) -> None:
        """Finalize-time checks: a positive resting length (it divides the length)."""
        super().validate(path)
        if isinstance(self.resting_length, np.ndarray) and not float(self.resting_length) > 0.0:
            raise ModelError(path, "resting_length must be positive", prop="resting_length", value=self.resting_length)

    def curve(self) -> Function:
        """The force-length curve in effect."""
        return default_ligament_curve() if self.force_length_curve is None else self.force_length_curve

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: the path forces' data plus a ``FunctionBank`` of the
        ligaments' force-length curves."""
        static = super().compile_group(build, paths)
        static["bank"] = FunctionBank.of([build.find(p).curve() for p in paths])
        return static

    @classmethod
    def group_params(cls, model, group):
        """Traced parameters of a group: the path forces' parameters plus the curves'
        parameters (``curves``)."""
        comps = [model.find(p) for p in group.paths]
        params = super().group_params(model, group)
        params["curves"] = bank_params(group.static["bank"], [c.curve() for c in comps])
        return params

    @classmethod
    def _tension(cls, group, params, length, speed):
        L0 = params["resting_length"]
        (value,) = bank_eval(group.static["bank"], params["curves"], length / L0, orders=(0,))
        return jnp.where(length > L0, params["pcsa_force"] * value, 0.0)
