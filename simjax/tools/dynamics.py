"""OpenSim's InverseDynamicsTool: the generalized forces that reproduce a motion.

``inverse_dynamics(system, coordinates_table, ...)`` prepares the coordinates as
OpenSim does (``motion.filter_coordinates``: pad, low-pass, radians), fits them with
quintic ``GCVSpline``s, evaluates ``q``, ``qdot``, ``qddot`` at the frames OpenSim
picks, and computes ``tau = M qddot + C(q, qdot) - g(q) - (applied forces)`` for all
frames at once (one ``vmap`` of ``simjax.inverse_dynamics``; constraints ignored,
as Simbody's ``calcResidualForceIgnoringConstraints``). The applied forces are the
model's own, minus those excluded (``forces_to_exclude``: ``All``, ``Actuators``,
``Muscles`` -- keywords in any case -- or force names, as
``DynamicsTool::disableModelForces``), plus the external loads.

With ``joints_to_report_body_forces`` it also gives, per joint, the spatial force at
the joint's child frame, in Ground, equivalent to the joint's generalized forces
(OpenSim's ``Joint::calcEquivalentSpatialForce``).

The setup runner (``InverseDynamicsTool`` in a setup file) writes OpenSim's
``output_gen_force_file`` (labels ``<coordinate>_moment`` for Rotational
coordinates, ``<coordinate>_force`` otherwise, in the model's coordinate order) and
``output_body_forces_file`` (``<joint>_<child frame>_FX`` ... ``_MZ``).

Differences from OpenSim: an external-loads file is fitted over the frames' time
window plus 50 samples either side (``external_loads.read_external_loads``), not over
the whole file: the same curves to rounding, much less work for long trials. A
``time_range`` that misses the coordinates data is an error (OpenSim would solve one
frame at the data's end).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from ..api import frame_jacobian as _frame_jacobian
from ..api import inverse_dynamics as _rnea
from ..compiling import jit
from ..forces.base import Actuator, Force
from ..io.tables import TimeSeriesTable, write_table
from ..mechanics.joints import ROTATIONAL
from ..muscles.muscle import Muscle
from . import motion
from .external_loads import read_external_loads
from .setup import Setup, register_tool

__all__ = ["inverse_dynamics", "exclude_forces", "generalized_force_labels"]


def exclude_forces(model, forces_to_exclude=()):
    """The model with the named forces not applied (``applies_force = False``), as
    OpenSim's ``DynamicsTool::disableModelForces``.

    **Arguments:** ``forces_to_exclude``: words: ``All``, ``Actuators``, ``Muscles``
    (any case), or force names (case-sensitive).

    Forces that no other component references are removed from the model (the same
    generalized forces, and a smaller program); the others get ``applies_force =
    False``.

    **Returns:** ``(model, not_found)``: the new model and the names matching nothing.
    """
    paths = model.paths(Force)
    off, missing = set(), []
    for word in forces_to_exclude:
        key = word.upper()
        if key == "ALL":
            off |= set(paths)
        elif key == "ACTUATORS":
            off |= set(model.paths(Actuator))
        elif key == "MUSCLES":
            off |= set(model.paths(Muscle))
        else:
            hits = [p for p in paths if p.rsplit("/", 1)[-1] == word]
            if not hits:
                missing.append(word)
            off |= set(hits)
    # an excluded force nothing else needs is removed (it would only be computed and
    # thrown away); one that others reference stays, not applied
    if off:
        report = model.removal_report(sorted(off))
        if set(report.removed) <= off and not report.pruned:  # (the usual case: all at once)
            return model.apply_removal(report), missing
    for p in sorted(off):
        report = model.removal_report(p)
        if set(report.removed) <= off and not report.pruned:
            model = model.remove(p)
        else:
            model = model.set(p, applies_force=False)
    return model, missing


def generalized_force_labels(system) -> list[str]:
    """OpenSim's column labels of the generalized forces, in the system's coordinate
    (``u``) order: ``<name>_moment`` for Rotational coordinates (OpenSim's rule,
    ``motion.motion_types``), ``<name>_force`` otherwise."""
    types = motion.motion_types(system)
    return [n + ("_moment" if types[n] == ROTATIONAL else "_force") for n in system.coordinate_names]


@jit
def _frames(system, state0, t, Q, U, A):
    """``simjax.inverse_dynamics`` at every frame: one compiled, vmapped program."""

    def one(t, q, u, udot):
        return _rnea(system, state0.replace(t=t, q=q, u=u), udot)

    return jax.vmap(one)(t, Q, U, A)


#: ``SimTK::SignificantReal`` (double): OpenSim's threshold in
#: ``Joint::calcEquivalentSpatialForceForMobilizedBody``
_SIGNIFICANT = float(np.finfo(float).eps) ** 0.875


def _min_norm_solve(A, f):
    """Minimum-norm least-squares ``x`` of ``A x = f`` (Simbody's ``FactorQTZ``), with
    singular values below ``SignificantReal`` (absolute) or 1e-12 of the largest
    treated as zero; also ``|x|``."""
    U, sv, Vt = jnp.linalg.svd(A, full_matrices=False)
    keep = sv > jnp.maximum(_SIGNIFICANT, 1e-12 * jnp.max(sv))
    inv = jnp.where(keep, 1.0 / jnp.where(keep, sv, 1.0), 0.0)
    return Vt.T @ (inv * (U.T @ f))


def _equivalent_spatial_force(J, f):
    """OpenSim's ``Joint::calcEquivalentSpatialForceForMobilizedBody`` with the
    mobilizer's ``H_FM`` columns expressed in Ground (the minimum-norm solutions turn
    with the frame, so solving in Ground equals solving in F and rotating).

    **Arguments:** ``J (6, k)``: angular then linear velocity of the joint's child
    frame per unit of each of the joint's ``k`` speeds, in Ground; ``f (k,)``: the
    joint's generalized forces.

    **Returns:** ``(force (3,), torque (3,))`` in Ground (N, N m).
    """
    Hw, Hv = J[:3].T, J[3:].T  # (k, 3)
    Fv, Fw = _min_norm_solve(Hv, f), _min_norm_solve(Hw, f)
    fv, fw = Hv @ Fv, Hw @ Fw
    nfv, nfw = jnp.linalg.norm(fv), jnp.linalg.norm(fw)
    both = (nfv > _SIGNIFICANT) & (nfw > _SIGNIFICANT)
    safe = lambda x: jnp.where(x > 0, x, 1.0)  # noqa: E731
    torque_first = nfw / safe(jnp.linalg.norm(Fw)) > nfv / safe(jnp.linalg.norm(Fv))
    Fv = jnp.where(both & torque_first, _min_norm_solve(Hv, f - fw), Fv)
    Fw = jnp.where(both & ~torque_first, _min_norm_solve(Hw, f - fv), Fw)
    return Fv, Fw


@jit
def _body_forces(system, state0, t, Q, U, tau, frames, speeds):
    """Equivalent body forces at the joints' child frames for every frame of time:
    ``(n, 6 * len(frames))`` as OpenSim's columns (force X Y Z, moment X Y Z)."""

    def one(t, q, u, tau):
        state = state0.replace(t=t, q=q, u=u)
        out = []
        for frame, idx in zip(frames, speeds):  # the joints asked for (a few)
            if not idx:
                out.append(jnp.zeros(6, tau.dtype))
                continue
            J = _frame_jacobian(system, state, frame)[:, np.asarray(idx)]
            F, M = _equivalent_spatial_force(J, tau[np.asarray(idx)])
            out.append(jnp.concatenate([F, M]))
        return jnp.concatenate(out) if out else jnp.zeros(0, tau.dtype)

    return jax.vmap(one)(t, Q, U, tau)


def _joint_report(system, joints):
    """The joints to report (``All`` for every joint): labels, child-frame paths and
    the joints' speed indices."""
    from ..mechanics.joints import Joint

    model = system.model
    paths = model.paths(Joint)
    by_name = {p.rsplit("/", 1)[-1]: p for p in paths}
    if any(j.upper() == "ALL" for j in joints):
        chosen = paths
    else:
        missing = [j for j in joints if j not in by_name]
        if missing:
            raise ValueError(
                f"joints_to_report_body_forces: no joint named {missing} in the model (joints: {sorted(by_name)})"
            )
        chosen = [by_name[j] for j in joints]
    tree = system.topology.tree
    labels, frames, speeds = [], [], []
    for jp in chosen:
        joint = model.find(jp)
        child = joint.child_frame
        frame = child if child.startswith("/") else jp + "/" + child
        if not model.has(frame):
            frame = model.path_of_name(child.rsplit("/", 1)[-1])
        name = f"{jp.rsplit('/', 1)[-1]}_{frame.rsplit('/', 1)[-1]}"
        labels += [f"{name}_F{a}" for a in "XYZ"] + [f"{name}_M{a}" for a in "XYZ"]
        frames.append(frame)
        speeds.append(tuple(sorted(info.u for p, info in tree.coordinates.items() if p.startswith(jp + "/"))))
    return labels, tuple(frames), tuple(speeds)


def inverse_dynamics(
    system,
    coordinates_table: TimeSeriesTable,
    *,
    external_loads=None,
    forces_to_exclude=(),
    lowpass_cutoff: float | None = None,
    time_range=None,
    joints_to_report_body_forces=None,
):
    """OpenSim's InverseDynamicsTool on a coordinates table.

    **Arguments:**

    - ``system``: the built model.
    - ``coordinates_table``: coordinate values by name (a ``.mot``/``.sto`` as read;
      degrees when its ``inDegrees`` says so). Coordinates it lacks keep their
      default values (zero speed and acceleration).
    - ``external_loads``: ``ExternalForce`` components (``read_external_loads``), or
      the path of an ExternalLoads ``.xml`` (then fitted over the frames' window,
      ``read_external_loads(time_window=...)``); added to the model.
    - ``forces_to_exclude``: forces not applied (see ``exclude_forces``).
    - ``lowpass_cutoff``: Hz; ``None`` or negative: no filtering.
    - ``time_range``: ``(start, end)`` s; ``None``: all the (padded) data.
    - ``joints_to_report_body_forces``: joint names (or ``["All"]``): also return, per
      joint, the spatial force at its child frame, in Ground, equivalent to the
      joint's generalized forces (OpenSim's ``Joint::calcEquivalentSpatialForce``;
      labels ``<joint>_<child frame>_FX`` ... ``_MZ``).

    **Returns:** a ``TimeSeriesTable`` of generalized forces (N m for rotational
    coordinates, N for the others), one row per frame, OpenSim's labels; with
    ``joints_to_report_body_forces``, ``(generalized forces, body forces)`` (N, N m).

    **Raises:** ``ValueError`` when ``time_range`` does not overlap the data.
    """
    times = np.asarray(coordinates_table.times, float)
    if time_range is not None:
        lo, hi = float(time_range[0]), float(time_range[1])
        if hi < times[0] or lo > times[-1] or lo > hi:
            raise ValueError(
                f"time_range ({lo:g}, {hi:g}) s is outside the coordinates data ({times[0]:g} to {times[-1]:g} s)"
            )
    table = motion.filter_coordinates(system, coordinates_table, lowpass_cutoff)
    first, stop = motion.frame_indices(table.times, time_range)
    at = np.asarray(table.times[first:stop])
    q_c, qd_c, qdd_c = motion.spline_kinematics(table, at)

    model = system.model
    if forces_to_exclude:
        model, _ = exclude_forces(model, forces_to_exclude)
        system = model.build()
    kinematic_system = system  # the body forces need only the kinematics: no loads
    if external_loads is not None:
        if isinstance(external_loads, (str, os.PathLike)):
            external_loads = read_external_loads(external_loads, time_window=(at[0], at[-1]))
        for f in external_loads:
            model = model.add(f)
        system = model.build()

    state0 = system.default_state()
    labels = list(table.labels)
    n = len(at)
    dtype = jnp.asarray(state0.q).dtype
    Q = jnp.broadcast_to(jnp.asarray(state0.q), (n, len(state0.q)))
    U = jnp.zeros((n, len(state0.u)), dtype)
    A = jnp.zeros((n, len(state0.u)), dtype)
    q_idx, u_idx, cols = motion.coordinate_columns(system, labels)
    Q = Q.at[:, np.asarray(q_idx, int)].set(q_c[:, cols].astype(dtype))
    U = U.at[:, np.asarray(u_idx, int)].set(qd_c[:, cols].astype(dtype))
    A = A.at[:, np.asarray(u_idx, int)].set(qdd_c[:, cols].astype(dtype))

    tau = _frames(system, state0, jnp.asarray(at, dtype), Q, U, A)
    order = [system.topology.tree.coordinates[p].u for p in system.coordinate_paths]
    values = np.asarray(tau)[:, order]
    forces = TimeSeriesTable(
        at,
        values,
        generalized_force_labels(system),
        {"header": "Inverse Dynamics Generalized Forces", "inDegrees": "no"},
    )
    if joints_to_report_body_forces is None:
        return forces
    labels, frames, speeds = _joint_report(system, list(joints_to_report_body_forces))
    body = _body_forces(
        kinematic_system, kinematic_system.default_state(), jnp.asarray(at, dtype), Q, U, tau, frames, speeds
    )
    return forces, TimeSeriesTable(
        at,
        np.asarray(body).reshape(len(at), len(labels)),
        labels,
        {"header": "Inverse Dynamics Body Forces at Specified Joints", "inDegrees": "no"},
    )


def _run(setup: Setup) -> dict:
    """Run an ``<InverseDynamicsTool>`` setup: read the model, coordinates and external
    loads it names (paths resolved against the setup's folder), write OpenSim's output
    files.

    **Returns:** ``{"output_gen_force_file": path}`` (and ``"output_body_forces_file"``
    when joints are reported).

    **Raises:** ``FileNotFoundError`` naming a missing file as resolved;
    ``SetupError`` for a bad property (a ``time_range`` outside the data, an external
    force identifier without columns).
    """
    from ..io.osim.reader import load_osim

    model_path = setup.path("model_file", must_exist=True)
    if model_path is None:
        raise setup.error("model_file", "", "no model file given")
    coords_path = setup.path("coordinates_file")
    if coords_path is None:
        raise setup.error("coordinates_file", "", "no coordinates file given")
    if not os.path.exists(coords_path):
        raise FileNotFoundError(
            f"{setup.file}: <coordinates_file> names {setup.text('coordinates_file')!r}, "
            f"resolved from the setup's folder to {coords_path!r}, which does not exist"
        )
    loads_path = setup.path("external_loads_file", must_exist=True)
    cutoff = setup.number("lowpass_cutoff_frequency_for_coordinates", -1.0)
    exclude = setup.words("forces_to_exclude")
    rng = setup.numbers("time_range")
    if rng is not None and (rng.size != 2 or not rng[0] <= rng[1]):
        raise setup.error("time_range", setup.text("time_range"), "expected two increasing times")
    joints = setup.words("joints_to_report_body_forces")
    body_out = setup.output_path("output_body_forces_file")
    if joints and not body_out:
        body_out = os.path.join(setup.path("results_directory") or setup.folder, "body_forces_at_joints.sto")
    setup.text("results_directory")
    out = setup.output_path("output_gen_force_file") or os.path.join(
        setup.path("results_directory") or setup.folder, "inverse_dynamics.sto"
    )

    model = load_osim(model_path)
    model, missing = exclude_forces(model, exclude)
    for word in missing:
        setup.warn(f"<forces_to_exclude>: could not find force or group named {word!r} to be excluded")
    system = model.build()
    table = motion.read_coordinates(coords_path)
    times = np.asarray(table.times)
    if rng is not None and (rng[1] < times[0] or rng[0] > times[-1]):
        raise setup.error(
            "time_range",
            setup.text("time_range"),
            f"outside the data of {coords_path} ({times[0]:g} to {times[-1]:g} s)",
        )
    result = inverse_dynamics(
        system,
        table,
        external_loads=loads_path,
        lowpass_cutoff=cutoff,
        time_range=None if rng is None else tuple(rng),
        joints_to_report_body_forces=joints or None,
    )
    setup.report_unused()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    written = {"output_gen_force_file": out}
    if joints:
        result, body = result
        os.makedirs(os.path.dirname(body_out), exist_ok=True)
        write_table(body, body_out)
        written["output_body_forces_file"] = body_out
    write_table(result, out)
    return written


register_tool("InverseDynamicsTool", _run)
