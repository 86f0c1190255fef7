"""Loads prescribed over time: ExternalForce (from data tables) and PrescribedForce
(from Functions).

``ExternalForce`` applies a force, its point of application and a torque read from
a ``TimeSeriesTable`` (ground reaction files), as OpenSim does: the three columns
whose labels start with each identifier (``"ground_force_v"`` finds
``ground_force_vx``, ``_vy``, ``_vz``) are fitted once, when the component is
created, with OpenSim's rule -- a Constant for one row, linear interpolation for
two or three, otherwise an interpolating cubic ``GCVSpline`` -- and evaluated at
the state's time. The force and torque are expressed in ``force_expressed_in_body``
and the point in ``point_expressed_in_body`` (default Ground); without a point
the force acts at the origin of ``applied_to_body``.

``PrescribedForce`` takes the same three vectors as Functions of time (three
each, or none), expressed in Ground (``forceIsGlobal``) or in its frame, the point
in its frame or in Ground (``pointIsGlobal``).

The fitted curves are pytree leaves of the component: gradients with respect to
the data flow through them.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..component import ModelError, Stage, flag, output, socket
from ..function_bank import FunctionBank, bank_eval, bank_params
from ..functions import Constant, Function, GCVSpline, PiecewiseLinearFunction
from ..groups import Forces, point_force_on_bodies, torque_on_bodies
from ._common import resolve_frame
from .base import Force

__all__ = ["ExternalForce", "PrescribedForce", "fit_columns"]

_ZERO3 = (Constant(0.0), Constant(0.0), Constant(0.0))


def fit_columns(times, columns) -> tuple:
    """OpenSim's fit of data columns against time (ExternalForce's rule).

    **Arguments:** ``times (n,)``; ``columns (n, k)``.

    **Returns:** ``k`` Functions: Constants for ``n == 1``, PiecewiseLinearFunctions
    for ``n`` in 2..3, cubic GCVSplines (interpolating) otherwise.
    """
    t = np.asarray(times, float)
    cols = np.asarray(columns, float).reshape(len(t), -1)
    if len(t) == 1:
        return tuple(Constant(float(c)) for c in cols[0])
    if len(t) <= 3:
        return tuple(PiecewiseLinearFunction(t, cols[:, j]) for j in range(cols.shape[1]))
    return tuple(GCVSpline.from_degree(3, t, cols[:, j]) for j in range(cols.shape[1]))


def _identifier_columns(table, identifier: str, path: str, prop: str):
    labels = list(table.labels)
    idx = [i for i, lab in enumerate(labels) if lab.startswith(identifier)]
    if len(idx) != 3:
        raise ModelError(
            path,
            f"3 columns starting with the identifier must exist in the data, found {[labels[i] for i in idx]}",
            prop=prop,
            value=identifier,
        )
    return np.asarray(table.values)[:, idx]


def _check_functions(path: str, prop: str, fns) -> None:
    if len(fns) not in (0, 3) or not all(isinstance(f, Function) for f in fns):
        raise ModelError(path, "must hold three Functions (x, y, z) or none", prop=prop, value=len(fns))


class _TimeFunctionForce(Force):
    """Shared evaluation: per member, force/point/torque Functions of time (abstract)."""

    @classmethod
    def _function_lists(cls, comp):
        raise NotImplementedError

    @classmethod
    def _bank(cls, comps):
        fns = []
        for c in comps:
            f, p, t = cls._function_lists(c)
            fns += list(f or _ZERO3) + list(p or _ZERO3) + list(t or _ZERO3)
        return fns

    @classmethod
    def group_params(cls, model, group):
        comps = [model.find(p) for p in group.paths]
        return {"functions": bank_params(group.static["bank"], cls._bank(comps))}

    @classmethod
    def _vectors(cls, group, params, ctx):
        """Force, point and torque values ``(k, 3)`` each, as given (in their frames)."""
        k = len(group.paths)
        t = jnp.broadcast_to(ctx.state.t, (9 * k,))
        (vals,) = bank_eval(group.static["bank"], params["functions"], t, orders=(0,))
        vals = vals.reshape(k, 3, 3)
        return vals[:, 0], vals[:, 1], vals[:, 2]

    @classmethod
    def _static(cls, build, paths, comps):
        flags = [tuple(bool(x) for x in cls._function_lists(c)) for c in comps]
        return {
            "bank": FunctionBank.of(cls._bank(comps)),
            "has_force": np.asarray([f[0] for f in flags]),
            "has_point": np.asarray([f[1] for f in flags]),
            "has_torque": np.asarray([f[2] for f in flags]),
            "on": np.asarray([c.applies_force for c in comps], bool),
        }

    @staticmethod
    def _apply(ctx, s, mob, F, P, T):
        on_f = (s["on"] & s["has_force"])[:, None]
        on_t = (s["on"] & s["has_torque"])[:, None]
        n, dtype = ctx.tree.n_mob, F.dtype
        return point_force_on_bodies(n, mob, P, jnp.where(on_f, F, 0.0), dtype) + torque_on_bodies(
            n, mob, jnp.where(on_t, T, 0.0), dtype
        )

    @output(Stage.TIME, "Vec3")
    def force_in_ground(self, ctx):
        """The applied force in Ground (N)."""
        return ctx.group_output(ctx.path, "force")

    @output(Stage.POSITION, "Vec3")
    def point_in_ground(self, ctx):
        """The point of application in Ground (m)."""
        return ctx.group_output(ctx.path, "point")

    @output(Stage.TIME, "Vec3")
    def torque_in_ground(self, ctx):
        """The applied torque in Ground (N m)."""
        return ctx.group_output(ctx.path, "torque")


class ExternalForce(_TimeFunctionForce):
    """A force, point and torque from experimental data (OpenSim ExternalForce).

    **Fields:**

    - ``applied_to_body``: name (or path) of the body the load acts on.
    - ``force_expressed_in_body``, ``point_expressed_in_body``: names of the frames
      the force/torque and the point are given in (default ``"ground"``).
    - ``force_identifier``, ``point_identifier``, ``torque_identifier``: column-label
      prefixes in the data (empty: not applied / not given).
    - ``data_source_name``: the name of the data source (kept for files).
    - ``force_functions``, ``point_functions``, ``torque_functions``: the fitted
      curves (three Functions each, or none).

    Construct from a table: ``ExternalForce("grf_r", "calcn_r", data=table,
    force_identifier="ground_force_v", point_identifier="ground_force_p",
    torque_identifier="ground_torque_")``.
    """

    applied_to_body: str = flag("", doc="Name of the body the force is applied to.")
    force_expressed_in_body: str = flag("ground", doc="Name of the body the force is expressed in.")
    point_expressed_in_body: str = flag("ground", doc="Name of the body the point is expressed in.")
    force_identifier: str = flag("", doc="Column-label prefix of the force in the data.")
    point_identifier: str = flag("", doc="Column-label prefix of the point in the data.")
    torque_identifier: str = flag("", doc="Column-label prefix of the torque in the data.")
    data_source_name: str = flag("", doc="Name of the data source that supplies the force data.")
    force_functions: tuple = ()
    point_functions: tuple = ()
    torque_functions: tuple = ()

    def __init__(
        self,
        name: str,
        applied_to_body: str = "",
        data=None,
        *,
        force_identifier: str = "",
        point_identifier: str = "",
        torque_identifier: str = "",
        force_expressed_in_body: str = "ground",
        point_expressed_in_body: str = "ground",
        data_source_name: str = "",
        force_functions=(),
        point_functions=(),
        torque_functions=(),
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.applied_to_body = applied_to_body
        self.force_expressed_in_body = force_expressed_in_body
        self.point_expressed_in_body = point_expressed_in_body
        self.force_identifier = force_identifier
        self.point_identifier = point_identifier
        self.torque_identifier = torque_identifier
        self.applies_force = applies_force
        self.components = components
        if data is not None:
            if getattr(data, "vec_size", None):
                data = data.flatten()
            t = np.asarray(data.times)
            if force_identifier:
                force_functions = fit_columns(t, _identifier_columns(data, force_identifier, name, "force_identifier"))
            if point_identifier:
                point_functions = fit_columns(t, _identifier_columns(data, point_identifier, name, "point_identifier"))
            if torque_identifier:
                torque_functions = fit_columns(
                    t, _identifier_columns(data, torque_identifier, name, "torque_identifier")
                )
            data_source_name = data_source_name or data.metadata.get("header", "") or data_source_name
        self.data_source_name = data_source_name
        self.force_functions = tuple(force_functions)
        self.point_functions = tuple(point_functions)
        self.torque_functions = tuple(torque_functions)

    def validate(self, path: str) -> None:
        """OpenSim's checks: a force or a torque; no point without a force; 3 curves each."""
        super().validate(path)
        for prop_name in ("force_functions", "point_functions", "torque_functions"):
            _check_functions(path, prop_name, getattr(self, prop_name))
        if not self.force_functions and not self.torque_functions:
            raise ModelError(
                path,
                "applies neither a force nor a torque (no data for the identifiers)",
                prop="force_identifier",
                value=self.force_identifier,
            )
        if self.point_functions and not self.force_functions:
            raise ModelError(
                path, "a point is given but no force", prop="point_identifier", value=self.point_identifier
            )

    @classmethod
    def _function_lists(cls, comp):
        return comp.force_functions, comp.point_functions, comp.torque_functions

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: the body each force acts on, the frames its force and
        point are expressed in (Ground when not found, as in OpenSim), and the mobilizers."""
        comps = [build.find(p) for p in paths]
        body = [resolve_frame(build, p, c.applied_to_body, "applied_to_body") for p, c in zip(paths, comps)]

        # like OpenSim, unknown frames for the force and the point fall back to Ground
        def frame_or_ground(p, name, prop_name):
            try:
                return resolve_frame(build, p, name, prop_name)
            except ModelError:
                return "/ground"

        fexp = [frame_or_ground(p, c.force_expressed_in_body, "force_expressed_in_body") for p, c in zip(paths, comps)]
        pexp = [frame_or_ground(p, c.point_expressed_in_body, "point_expressed_in_body") for p, c in zip(paths, comps)]
        return {
            **cls._static(build, paths, comps),
            "body": tuple(body),
            "force_frame": tuple(fexp),
            "point_frame": tuple(pexp),
            "mob": np.asarray([build.frame_mob(b) for b in body], np.int32),
        }

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: force (N), torque (N·m) and point (m) from the data at
        ``t``, re-expressed in Ground (the point defaults to the body's origin).

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``force``, ``point``,
        ``torque`` in Ground."""
        s = group.static
        F, P, T = cls._vectors(group, params, ctx)
        R_E, _ = ctx.frames_in_ground(s["force_frame"])
        F_G = jnp.einsum("kij,kj->ki", R_E, F)
        T_G = jnp.einsum("kij,kj->ki", R_E, T)
        origin = ctx.frames_in_ground(s["body"])[1]
        P_G = jnp.where(
            s["has_point"][:, None], spatial.transform_point(ctx.frames_in_ground(s["point_frame"]), P), origin
        )
        body = cls._apply(ctx, s, s["mob"], F_G, P_G, T_G)
        return Forces(body=body, outputs={"force": F_G, "point": P_G, "torque": T_G})


class PrescribedForce(_TimeFunctionForce):
    """A force, point and torque given as Functions of time (OpenSim PrescribedForce).

    **Fields:** ``frame``: socket to the PhysicalFrame the load acts on;
    ``forceFunctions``, ``pointFunctions``, ``torqueFunctions``: three Functions of
    time each (x, y, z), or none; ``forceIsGlobal``: force and torque are given in
    Ground (else in ``frame``); ``pointIsGlobal``: the point is given in Ground (else
    in ``frame``; default: the frame's origin).
    """

    frame: str = socket("PhysicalFrame", doc="The frame onto which this force is applied.")
    pointIsGlobal: bool = flag(False, doc="Whether the point functions give the point in Ground.")
    forceIsGlobal: bool = flag(True, doc="Whether the force and torque functions are expressed in Ground.")
    forceFunctions: tuple = ()
    pointFunctions: tuple = ()
    torqueFunctions: tuple = ()

    def __init__(
        self,
        name: str,
        frame: str = "",
        forceFunctions=(),
        pointFunctions=(),
        torqueFunctions=(),
        *,
        forceIsGlobal: bool = True,
        pointIsGlobal: bool = False,
        applies_force: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.frame = frame
        self.forceFunctions = tuple(forceFunctions)
        self.pointFunctions = tuple(pointFunctions)
        self.torqueFunctions = tuple(torqueFunctions)
        self.forceIsGlobal = forceIsGlobal
        self.pointIsGlobal = pointIsGlobal
        self.applies_force = applies_force
        self.components = components

    def validate(self, path: str) -> None:
        """Check each function list has three Functions or none."""
        super().validate(path)
        for prop_name in ("forceFunctions", "pointFunctions", "torqueFunctions"):
            _check_functions(path, prop_name, getattr(self, prop_name))

    @classmethod
    def _function_lists(cls, comp):
        return comp.forceFunctions, comp.pointFunctions, comp.torqueFunctions

    @classmethod
    def compile_group(cls, build, paths):
        """Static data of a group: each force's frame and mobilizer, and whether its force
        and point are given in Ground."""
        comps = [build.find(p) for p in paths]
        frames = tuple(build.socket(p, "frame") for p in paths)
        return {
            **cls._static(build, paths, comps),
            "frames": frames,
            "mob": np.asarray([build.frame_mob(f) for f in frames], np.int32),
            "force_global": np.asarray([c.forceIsGlobal for c in comps]),
            "point_global": np.asarray([c.pointIsGlobal for c in comps]),
        }

    @classmethod
    def group_forces(cls, group, params, ctx):
        """Body forces of the group: force (N), torque (N·m) and point (m) from the
        functions of ``t``, re-expressed in Ground (the point defaults to the frame's origin).

        **Returns:** ``Forces`` with ``body`` ``(n_mob, 6)`` and outputs ``force``, ``point``,
        ``torque`` in Ground."""
        s = group.static
        F, P, T = cls._vectors(group, params, ctx)
        X = ctx.frames_in_ground(s["frames"])
        rot = lambda v: jnp.where(s["force_global"][:, None], v, jnp.einsum("kij,kj->ki", X[0], v))
        F_G, T_G = rot(F), rot(T)
        P_G = jnp.where(s["point_global"][:, None], P, spatial.transform_point(X, P))
        P_G = jnp.where(s["has_point"][:, None], P_G, X[1])
        body = cls._apply(ctx, s, s["mob"], F_G, P_G, T_G)
        return Forces(body=body, outputs={"force": F_G, "point": P_G, "torque": T_G})
