"""OpenSim Moco's model operators (``ModelProcessor`` and the ``ModOp*`` classes) as
pure functions ``Model -> Model``.

Each function is named after the operator it mirrors and does what OpenSim 4.6 does to
the model (``OpenSim/Actuators/ModelOperators.h``, ``OpenSim/Moco/ModelOperatorsDGF.h``,
``DeGrooteFregly2016Muscle::replaceMuscles``, ``ModelFactory``):

=================================================  ===============================================
simjax                                             OpenSim
=================================================  ===============================================
``replace_muscles_with_degroote``                  ``ModOpReplaceMusclesWithDeGrooteFregly2016``
``replace_muscles_with_path_actuators``            ``ModOpReplaceMusclesWithPathActuators``
``remove_muscles``                                 ``ModOpRemoveMuscles``
``ignore_tendon_compliance``                       ``ModOpIgnoreTendonCompliance``
``ignore_activation_dynamics``                     ``ModOpIgnoreActivationDynamics``
``scale_max_isometric_force``                      ``ModOpScaleMaxIsometricForce``
``ignore_passive_fiber_forces``                    ``ModOpIgnorePassiveFiberForcesDGF``
``scale_active_fiber_force_curve_width``           ``ModOpScaleActiveFiberForceCurveWidthDGF``
``passive_fiber_strain_at_one_norm_force``         ``ModOpPassiveFiberStrainAtOneNormForceDGF``
``fiber_damping``                                  ``ModOpFiberDampingDGF``
``tendon_compliance_dynamics_mode``                ``ModOpTendonComplianceDynamicsModeDGF`` (and
                                                   ``ModOpUseImplicitTendonComplianceDynamicsDGF``)
``add_reserves``                                   ``ModOpAddReserves``
``add_residuals``                                  ``ModOpAddResiduals``
``add_external_loads``                             ``ModOpAddExternalLoads``
=================================================  ===============================================

``ModelProcessor(model_or_path, *operators).process()`` applies operators in order;
an operator is any callable ``Model -> Model``: one of these functions, a
``functools.partial`` of one (``partial(add_reserves, optimal_force=10.0)``) or a
lambda. Models are immutable, so every function returns a new model and leaves its
argument untouched.

Errors name the component path, and where relevant the property and its value
(``ModelError``); a muscle type ``replaceMuscles`` does not convert is one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from ..component import ModelError, Set
from ..forces.base import CoordinateActuator
from ..mechanics.constraints import CoordinateCouplerConstraint
from ..mechanics.frames import Ground, PhysicalOffsetFrame
from ..mechanics.joints import Coordinate, Joint
from ..model import Model, resolve_path
from ..muscles.degroote import DeGrooteFregly2016Muscle
from ..muscles.millard import Millard2012EquilibriumMuscle
from ..muscles.muscle import Muscle
from ..muscles.path import PathActuator
from ..muscles.thelen import Thelen2003Muscle

__all__ = [
    "ModelProcessor",
    "add_external_loads",
    "add_reserves",
    "add_residuals",
    "fiber_damping",
    "ignore_activation_dynamics",
    "ignore_passive_fiber_forces",
    "ignore_tendon_compliance",
    "passive_fiber_strain_at_one_norm_force",
    "remove_muscles",
    "replace_muscles_with_degroote",
    "replace_muscles_with_path_actuators",
    "scale_active_fiber_force_curve_width",
    "scale_max_isometric_force",
    "tendon_compliance_dynamics_mode",
]

#: muscle classes ``replaceMuscles`` converts
SUPPORTED_MUSCLES = (Millard2012EquilibriumMuscle, Thelen2003Muscle)


# -- helpers --------------------------------------------------------------------------------------------------


def _check_model(model, what: str) -> Model:
    if not isinstance(model, Model):
        raise TypeError(f"{what} needs a simjax Model, got {type(model).__name__}")
    return model


def _edit_all(model: Model, cls: type, what: str, **changes: Any) -> Model:
    """``model`` with ``changes`` made to every component of class ``cls`` (anywhere in
    the tree, as OpenSim's ``updComponentList<cls>``), each checked at once so a bad
    value is reported with the component's path, the property and the value."""
    _check_model(model, what)
    for path in model.paths(cls):
        model = model.set(path, **changes)
        model.find(path).validate(path)
    return model


def _scalar(value, name: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    return out


def _forceset_muscles(model: Model) -> list[Muscle]:
    """The muscles of the force set, in order (OpenSim ``Model::updMuscles``)."""
    return [f for f in model.forceset.objects if isinstance(f, Muscle)]


def _swap_forceset(model: Model, removed: list, added: list) -> Model:
    """The force set without ``removed`` (by identity) and with ``added`` appended,
    as ``replaceMuscles`` leaves it (``model.addForce`` then ``ForceSet::remove``)."""
    gone = {id(c) for c in removed}
    names = {f.name for f in model.forceset.objects if id(f) not in gone}
    for c in added:
        if c.name in names:
            raise ModelError("/forceset", f"already has a component named {c.name!r}")
        names.add(c.name)
    objects = tuple(f for f in model.forceset.objects if id(f) not in gone) + tuple(added)
    return model.update("/forceset", lambda s: s.replace(objects=objects))


# -- muscles --------------------------------------------------------------------------------------------------


def _degroote_from(muscle: Muscle, path: str, allow_unsupported: bool) -> DeGrooteFregly2016Muscle | None:
    if isinstance(muscle, Millard2012EquilibriumMuscle):
        specific = {
            "default_activation": muscle.default_activation,
            "activation_time_constant": muscle.activation_time_constant,
            "deactivation_time_constant": muscle.deactivation_time_constant,
            "fiber_damping": muscle.fiber_damping,
            "passive_fiber_strain_at_one_norm_force": muscle.FiberForceLengthCurve.strain_at_one_norm_force,
            "tendon_strain_at_one_norm_force": muscle.TendonForceLengthCurve.strain_at_one_norm_force,
        }
    elif isinstance(muscle, Thelen2003Muscle):
        specific = {
            "default_activation": muscle.default_activation,
            "activation_time_constant": muscle.activation_time_constant,
            "deactivation_time_constant": muscle.deactivation_time_constant,
            "fiber_damping": 0.0,  # not a Thelen2003Muscle property: OpenSim sets 0
            "passive_fiber_strain_at_one_norm_force": muscle.FmaxMuscleStrain,
            "tendon_strain_at_one_norm_force": muscle.FmaxTendonStrain,
        }
    else:
        if allow_unsupported:
            return None
        raise ModelError(
            path,
            f"muscle of type {type(muscle).__name__} is not supported by "
            "replace_muscles_with_degroote (OpenSim's DeGrooteFregly2016Muscle::replaceMuscles converts "
            "only Millard2012EquilibriumMuscle and Thelen2003Muscle); pass allow_unsupported_muscles=True "
            "to leave it as it is",
        )
    new = DeGrooteFregly2016Muscle(
        muscle.name,
        muscle.max_isometric_force,
        muscle.optimal_fiber_length,
        muscle.tendon_slack_length,
        muscle.pennation_angle_at_optimal,
        path=muscle.path,
        max_contraction_velocity=muscle.max_contraction_velocity,
        ignore_tendon_compliance=muscle.ignore_tendon_compliance,
        ignore_activation_dynamics=muscle.ignore_activation_dynamics,
        min_control=muscle.min_control,
        max_control=muscle.max_control,
        applies_force=muscle.applies_force,
        **specific,
    )
    try:
        new.validate(path)
    except ModelError as e:
        raise ModelError(
            path,
            f"the DeGrooteFregly2016Muscle made from this {type(muscle).__name__} is invalid: {e}",
            prop=e.prop,
            value=e.value,
        ) from None
    return new


def replace_muscles_with_degroote(model: Model, allow_unsupported_muscles: bool = False) -> Model:
    """Replace the force set's muscles by ``DeGrooteFregly2016Muscle``s (OpenSim
    ``ModOpReplaceMusclesWithDeGrooteFregly2016``, i.e.
    ``DeGrooteFregly2016Muscle::replaceMuscles``).

    Each new muscle keeps the name (so its path, ``/forceset/<name>``), the geometry
    path, ``applies_force``, ``min_control``, ``max_control``, ``max_isometric_force``
    (N), ``optimal_fiber_length`` and ``tendon_slack_length`` (m),
    ``pennation_angle_at_optimal`` (rad), ``max_contraction_velocity`` (optimal fiber
    lengths/s), ``ignore_tendon_compliance`` and ``ignore_activation_dynamics``; and
    from a ``Millard2012EquilibriumMuscle``: ``default_activation``, the activation
    and deactivation time constants (s), ``fiber_damping``, and the strains at one
    normalized force of its ``FiberForceLengthCurve`` and ``TendonForceLengthCurve``
    (as ``passive_fiber_strain_at_one_norm_force`` and
    ``tendon_strain_at_one_norm_force``); from a ``Thelen2003Muscle``:
    ``default_activation``, the time constants, ``fiber_damping = 0``,
    ``FmaxMuscleStrain`` and ``FmaxTendonStrain``. Everything else takes
    DeGrooteFregly2016Muscle's defaults (``default_normalized_tendon_force`` 0.5,
    ``active_force_width_scale`` 1, explicit tendon dynamics; the old muscle's
    ``default_fiber_length``, curves' shapes and subcomponents are dropped). As in
    OpenSim the new muscles are appended to the force set, after its other forces,
    in the order of the muscles they replace. Muscles outside the force set are
    left alone.

    **Arguments:** ``model``; ``allow_unsupported_muscles``: leave muscles of other
    types unchanged (in place) instead of raising.

    **Returns:** the new Model.

    **Raises:** ``ModelError`` naming a muscle whose type is neither
    Millard2012EquilibriumMuscle nor Thelen2003Muscle (unless allowed), or whose
    copied properties a DeGrooteFregly2016Muscle rejects (naming the property and
    value).
    """
    _check_model(model, "replace_muscles_with_degroote")
    removed, added = [], []
    for m in _forceset_muscles(model):
        new = _degroote_from(m, "/forceset/" + m.name, allow_unsupported_muscles)
        if new is not None:
            removed.append(m)
            added.append(new)
    return _swap_forceset(model, removed, added)


def replace_muscles_with_path_actuators(model: Model) -> Model:
    """Replace the force set's muscles by ``PathActuator``s (OpenSim
    ``ModOpReplaceMusclesWithPathActuators``, ``ModelFactory::
    replaceMusclesWithPathActuators``): same name, geometry path (its display color
    set to grey, 0.5 0.5 0.5), ``applies_force``, ``min_control`` and
    ``max_control``; ``optimal_force`` = the muscle's ``max_isometric_force`` (N).
    Muscles of every type are replaced; the actuators are appended to the force set.

    **Returns:** the new Model.
    """
    _check_model(model, "replace_muscles_with_path_actuators")
    muscles = _forceset_muscles(model)
    added = [
        PathActuator(
            m.name,
            path=m.path.replace(default_color=(0.5, 0.5, 0.5)),
            optimal_force=m.max_isometric_force,
            min_control=m.min_control,
            max_control=m.max_control,
            applies_force=m.applies_force,
        )
        for m in muscles
    ]
    return _swap_forceset(model, muscles, added)


def remove_muscles(model: Model) -> Model:
    """Remove the force set's muscles (OpenSim ``ModOpRemoveMuscles``,
    ``ModelFactory::removeMuscles``).

    Removal follows ``Model.remove``: components holding hard references (sockets) to a
    muscle go too, soft references (e.g. a controller's actuator list) are pruned; the
    removal is logged.

    **Returns:** the new Model.
    """
    _check_model(model, "remove_muscles")
    paths = ["/forceset/" + m.name for m in _forceset_muscles(model)]
    return model.remove(paths) if paths else model


def ignore_tendon_compliance(model: Model) -> Model:
    """Set ``ignore_tendon_compliance`` on every muscle of the model (OpenSim
    ``ModOpIgnoreTendonCompliance``): rigid tendons.

    **Returns:** the new Model.
    """
    return _edit_all(model, Muscle, "ignore_tendon_compliance", ignore_tendon_compliance=True)


def ignore_activation_dynamics(model: Model) -> Model:
    """Set ``ignore_activation_dynamics`` on every muscle of the model (OpenSim
    ``ModOpIgnoreActivationDynamics``): activation equals excitation.

    **Returns:** the new Model.
    """
    return _edit_all(model, Muscle, "ignore_activation_dynamics", ignore_activation_dynamics=True)


def scale_max_isometric_force(model: Model, scale_factor: float) -> Model:
    """Multiply every muscle's ``max_isometric_force`` by ``scale_factor`` (OpenSim
    ``ModOpScaleMaxIsometricForce``).

    **Arguments:** ``scale_factor`` (dimensionless; may be a JAX value, to
    differentiate through).

    **Returns:** the new Model.
    """
    _check_model(model, "scale_max_isometric_force")
    for path in model.paths(Muscle):
        model = model.set(path, max_isometric_force=scale_factor * model.find(path).max_isometric_force)
        model.find(path).validate(path)
    return model


def ignore_passive_fiber_forces(model: Model) -> Model:
    """Set ``ignore_passive_fiber_force`` on every DeGrooteFregly2016Muscle (OpenSim
    ``ModOpIgnorePassiveFiberForcesDGF``); other muscles are untouched.

    **Returns:** the new Model.
    """
    return _edit_all(model, DeGrooteFregly2016Muscle, "ignore_passive_fiber_forces", ignore_passive_fiber_force=True)


def scale_active_fiber_force_curve_width(model: Model, scale_factor: float) -> Model:
    """Set ``active_force_width_scale`` of every DeGrooteFregly2016Muscle to
    ``scale_factor`` (OpenSim ``ModOpScaleActiveFiberForceCurveWidthDGF``: the value is
    set, not multiplied).

    **Arguments:** ``scale_factor``: dimensionless, at least 1.

    **Returns:** the new Model.

    **Raises:** ``ModelError`` naming the first muscle, the property and the value
    if ``scale_factor < 1``.
    """
    return _edit_all(
        model, DeGrooteFregly2016Muscle, "scale_active_fiber_force_curve_width", active_force_width_scale=scale_factor
    )


def passive_fiber_strain_at_one_norm_force(model: Model, value: float = 0.6) -> Model:
    """Set ``passive_fiber_strain_at_one_norm_force`` of every DeGrooteFregly2016Muscle
    (OpenSim ``ModOpPassiveFiberStrainAtOneNormForceDGF``; default 0.6).

    **Arguments:** ``value``: fiber strain (dimensionless) where the passive force is
    one normalized force; positive.

    **Returns:** the new Model.
    """
    return _edit_all(
        model,
        DeGrooteFregly2016Muscle,
        "passive_fiber_strain_at_one_norm_force",
        passive_fiber_strain_at_one_norm_force=value,
    )


def fiber_damping(model: Model, value: float = 0.0) -> Model:
    """Set ``fiber_damping`` of every DeGrooteFregly2016Muscle (OpenSim
    ``ModOpFiberDampingDGF``; default 0).

    **Arguments:** ``value``: damping per normalized fiber velocity, in max isometric
    forces; non-negative.

    **Returns:** the new Model.
    """
    return _edit_all(model, DeGrooteFregly2016Muscle, "fiber_damping", fiber_damping=value)


def tendon_compliance_dynamics_mode(model: Model, mode: str = "explicit") -> Model:
    """Set ``tendon_compliance_dynamics_mode`` of every DeGrooteFregly2016Muscle whose
    tendon is compliant (``ignore_tendon_compliance`` false) (OpenSim
    ``ModOpTendonComplianceDynamicsModeDGF``; ``mode="implicit"`` is
    ``ModOpUseImplicitTendonComplianceDynamicsDGF``).

    **Arguments:** ``mode``: ``"explicit"`` or ``"implicit"``.

    **Returns:** the new Model.

    **Raises:** ``ValueError`` for another mode.
    """
    _check_model(model, "tendon_compliance_dynamics_mode")
    if mode not in ("explicit", "implicit"):
        raise ValueError(
            f"the tendon compliance dynamics mode must be either 'explicit' or 'implicit', but {mode!r} was provided"
        )
    for path in model.paths(DeGrooteFregly2016Muscle):
        if not model.find(path).ignore_tendon_compliance:
            model = model.set(path, tendon_compliance_dynamics_mode=mode)
    return model


# -- reserves and residuals -------------------------------------------------------------------------------------


def _socket_target(index: dict, owner: str, ref: str, cls: type, socket: str):
    """The path ``ref`` (a socket value of ``owner``) resolves to: relative to the
    owner, else (a bare name, as OpenSim's name properties hold) the one component of
    class ``cls`` with that name."""
    if ref:
        try:
            target = resolve_path(ref, owner)
            if isinstance(index.get(target), cls):
                return target
        except ModelError:
            pass
        if "/" not in ref:
            hits = [p for p, c in index.items() if isinstance(c, cls) and c.name == ref]
            if len(hits) == 1:
                return hits[0]
    raise ModelError(
        owner,
        f"socket '{socket}' refers to {ref!r}, which is no {cls.__name__} of the model",
        prop=f"socket_{socket}",
        value=ref,
    )


def _is_constrained(model: Model, coord: Coordinate) -> bool:
    """OpenSim ``Coordinate::isConstrained`` in the default state: locked, prescribed,
    or dependent (``is_free_to_satisfy_constraints``, or the dependent coordinate, by
    name, of the first CoordinateCouplerConstraint of the constraint set naming it,
    if that constraint is enforced)."""
    if coord.locked or coord.prescribed or coord.is_free_to_satisfy_constraints:
        return True
    for c in model.constraintset.objects:
        if (
            isinstance(c, CoordinateCouplerConstraint)
            and c.dependent_coordinate.rstrip("/").rsplit("/", 1)[-1] == coord.name
        ):
            return bool(c.isEnforced)
    return False


def _parent_is_ground(index: dict, coord_path: str) -> bool:
    """Whether the base frame of the parent frame of the coordinate's joint is Ground
    (``joint.getParentFrame().findBaseFrame()``)."""
    joint_path = resolve_path("..", coord_path)
    joint = index.get(joint_path)
    if not isinstance(joint, Joint):
        return False
    owner, ref, socket = joint_path, joint.parent_frame, "parent_frame"
    for _ in range(len(index)):
        target = resolve_path(ref, owner)
        frame = index.get(target)
        if frame is None:
            raise ModelError(
                owner,
                f"socket '{socket}' refers to {ref!r}, but there is no component at {target!r}",
                prop=f"socket_{socket}",
                value=ref,
            )
        if not isinstance(frame, PhysicalOffsetFrame):
            return isinstance(frame, Ground)
        owner, ref, socket = target, frame.parent, "parent"
    raise ModelError(joint_path, "the chain of offset frames from the parent frame does not end")


def _actuated(model: Model, index: dict) -> set[str]:
    """Paths of the coordinates a CoordinateActuator (of any subclass) acts along."""
    return {
        _socket_target(index, p, model.find(p).coordinate, Coordinate, "coordinate")
        for p in model.paths(CoordinateActuator)
    }


def _bounds(bound) -> dict:
    if bound is None:
        return {}
    b = _scalar(bound, "bound")
    if not b >= 0:
        raise ValueError(f"expected a non-negative bound, but got {bound!r}")
    return {"min_control": -b, "max_control": b}


def _add_coordinate_actuators(model, prefix, optimal_force_of, bound, skip_coordinates_with_actuators, keep):
    index = model.index()
    actuated = _actuated(model, index) if skip_coordinates_with_actuators else set()
    controls = _bounds(bound)
    new = []
    for path in model.paths(Coordinate):
        coord = index[path]
        if path in actuated or _is_constrained(model, coord) or not keep(index, path):
            continue
        new.append(
            CoordinateActuator(
                prefix + path.replace("/", "_"),
                coordinate=path,
                optimal_force=optimal_force_of(index, path),
                **controls,
            )
        )
    for actuator in new:
        model = model.add(actuator)
    return model


def add_reserves(
    model: Model,
    optimal_force: float = 1.0,
    bound: float | None = None,
    skip_coordinates_with_actuators: bool = True,
    skip_residual_coordinates: bool = False,
) -> Model:
    """Add a reserve ``CoordinateActuator`` to every free coordinate (OpenSim
    ``ModOpAddReserves``, ``ModelFactory::createReserveActuators``).

    One actuator per coordinate, in the model's coordinate order, named ``reserve``
    plus the coordinate's path with ``/`` replaced by ``_``
    (``/forceset/reserve_jointset_knee_r_knee_angle_r``), appended to the force set.
    Skipped: constrained coordinates (locked, prescribed, or dependent: a
    CoordinateCouplerConstraint's enforced dependent coordinate, or
    ``is_free_to_satisfy_constraints``), and optionally those a CoordinateActuator
    already acts along and those of joints whose parent frame is fixed to Ground.

    **Arguments:**

    - ``optimal_force``: N m per unit control for rotational coordinates, N for
      translational ones; positive.
    - ``bound``: controls bounded to ``[-bound, bound]``; ``None``: unbounded
      (``-inf``, ``inf``).
    - ``skip_coordinates_with_actuators``: skip coordinates that already have a
      CoordinateActuator (default true).
    - ``skip_residual_coordinates``: skip coordinates of joints whose parent is Ground
      (default false).

    **Returns:** the new Model.

    **Raises:** ``ValueError`` for a non-positive ``optimal_force`` or a negative
    ``bound``; ``ModelError`` if a name is taken, or a CoordinateActuator's
    coordinate does not resolve (naming it, the socket and its value).
    """
    _check_model(model, "add_reserves")
    f = _scalar(optimal_force, "optimal_force")
    if not f > 0:
        raise ValueError(f"expected a positive value for optimal_force, but got {optimal_force!r}")
    return _add_coordinate_actuators(
        model,
        "reserve",
        lambda index, path: f,
        bound,
        skip_coordinates_with_actuators,
        (lambda index, path: not _parent_is_ground(index, path))
        if skip_residual_coordinates
        else (lambda index, path: True),
    )


def add_residuals(
    model: Model,
    rotational_optimal_force: float = 1.0,
    translational_optimal_force: float = 1.0,
    bound: float | None = None,
    skip_coordinates_with_actuators: bool = True,
) -> Model:
    """Add a residual ``CoordinateActuator`` to every free coordinate of the joints
    whose parent frame is fixed to Ground (OpenSim ``ModOpAddResiduals``,
    ``ModelFactory::createResidualActuators``), named ``residual`` plus the
    coordinate's path with ``/`` replaced by ``_``. Coordinates are skipped as in
    ``add_reserves``.

    **Arguments:** ``rotational_optimal_force`` (N m) and
    ``translational_optimal_force`` (N): per unit control, positive; ``bound`` and
    ``skip_coordinates_with_actuators`` as in ``add_reserves``.

    **Returns:** the new Model.

    **Raises:** as ``add_reserves``; ``ModelError`` for a coordinate of Coupled
    motion type (naming it).
    """
    _check_model(model, "add_residuals")
    forces = {
        "Rotational": _scalar(rotational_optimal_force, "rotational_optimal_force"),
        "Translational": _scalar(translational_optimal_force, "translational_optimal_force"),
    }
    for kind, f in forces.items():
        if not f > 0:
            raise ValueError(f"expected a positive value for {kind.lower()}_optimal_force, but got {f!r}")

    def optimal_force_of(index, path):
        joint = index[resolve_path("..", path)]
        kinds = joint.motion_types() if isinstance(joint, Joint) else ()
        names = [c.name for c in getattr(joint, "coordinates", ())]
        kind = kinds[names.index(index[path].name)] if index[path].name in names[: len(kinds)] else "unknown"
        if kind not in forces:
            raise ModelError(path, f"coordinate has an unsupported motion type ({kind}) for a residual actuator")
        return forces[kind]

    return _add_coordinate_actuators(
        model, "residual", optimal_force_of, bound, skip_coordinates_with_actuators, _parent_is_ground
    )


# -- external loads -------------------------------------------------------------------------------------------


def add_external_loads(model: Model, path: str | os.PathLike, time_window=None) -> Model:
    """Add the ``ExternalForce``s of an OpenSim ExternalLoads file (OpenSim
    ``ModOpAddExternalLoads``).

    As in OpenSim, they go into an ``externalloads`` set in the model's component set
    (``/componentset/externalloads/<force name>``, whatever the file calls its
    ExternalLoads), read and fitted by ``simjax.tools.read_external_loads`` (the data
    file resolved against the ExternalLoads file's folder; each column a cubic
    GCVSpline; force N, point m, torque N m).

    **Arguments:** ``path``: the ExternalLoads ``.xml`` (relative paths are taken
    from the working directory); ``time_window``: ``(start, end)`` s, passed to
    ``read_external_loads`` (fits only the rows near it; ``None``: all rows, as
    OpenSim).

    **Returns:** the new Model.

    **Raises:** ``FileNotFoundError``, ``SetupError`` from ``read_external_loads``;
    ``ModelError`` if the model already has external loads there.
    """
    from ..tools.external_loads import read_external_loads

    _check_model(model, "add_external_loads")
    forces = tuple(read_external_loads(path, time_window=time_window))
    loads = Set("externalloads", objects=forces)
    csets = [c for c in model.components if isinstance(c, Set) and c.name == "componentset"]
    if csets:
        return model.add(loads, to="/componentset")
    # an empty <ComponentSet> read from a file is kept as text: the set replaces it
    extras = tuple(e for e in model.extras if e[0] != "ComponentSet")
    return model.replace(extras=extras).add(Set("componentset", objects=(loads,)), to="/")


# -- the processor --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelProcessor:
    """A source model and the operators to apply to it, in order (OpenSim
    ``ModelProcessor``).

    ``ModelProcessor("subject.osim", replace_muscles_with_degroote,
    ignore_tendon_compliance, partial(add_reserves, optimal_force=1.0)).process()``.

    **Fields:** ``source``: a ``Model`` or the path of an ``.osim`` file (read by
    ``simjax.load_osim`` each time ``process`` runs); ``operators``: callables
    ``Model -> Model``.

    ``append(*operators)`` and ``processor | operator`` return a new processor with
    the operators added at the end.
    """

    source: Any
    operators: tuple = ()

    def __init__(self, source, *operators: Callable[[Model], Model]):
        if not isinstance(source, (Model, str, os.PathLike)):
            raise TypeError(f"ModelProcessor needs a Model or an .osim path, got {type(source).__name__}")
        for i, op in enumerate(operators):
            if not callable(op):
                raise TypeError(f"operator {i} of the ModelProcessor is not callable: {op!r}")
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "operators", tuple(operators))

    def append(self, *operators: Callable[[Model], Model]) -> ModelProcessor:
        """A processor with ``operators`` applied after this one's."""
        return ModelProcessor(self.source, *self.operators, *operators)

    def __or__(self, operator: Callable[[Model], Model]) -> ModelProcessor:
        return self.append(operator)

    def process(self) -> Model:
        """The source model with every operator applied in order.

        **Raises:** ``TypeError`` if an operator returns something other than a Model
        (naming it); whatever an operator raises.
        """
        if isinstance(self.source, Model):
            model = self.source
        else:
            from ..io.osim import load_osim

            model = load_osim(os.fspath(self.source))
        for i, op in enumerate(self.operators):
            out = op(model)
            if not isinstance(out, Model):
                raise TypeError(
                    f"operator {i} of the ModelProcessor ({getattr(op, '__name__', op)!r}) returned "
                    f"{type(out).__name__}, not a Model"
                )
            model = out
        return model
