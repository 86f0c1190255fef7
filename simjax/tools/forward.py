"""OpenSim's Forward tool: a forward simulation from a setup file, or called directly.

``forward(system, t0, t1, controls=..., initial_state=..., ...)`` integrates the model
with ``simjax.simulate`` (Runge–Kutta–Merson with Simbody's error control, OpenSim's
integrator, so that its steps follow OpenSim's) and returns OpenSim's tables: the
states at every integrator step and the controls at those states.

Controls come as OpenSim's ``ControlSet`` (``read_control_set``: a ``.xml`` of
``ControlLinear`` and ``ControlConstant``, or a ``.sto`` whose columns become linear
controls, as ``ControlSet(Storage)``). They are evaluated with OpenSim's conventions
(``ControlLinear::getControlValue``): linear between the nodes and, with
``extrapolate`` (the default), linear beyond the first and last ones; with
``use_steps``, the value of node ``i + 1`` on ``(t_i, t_(i+1)]`` and of node ``i``
exactly at ``t_i``, the end nodes' values outside. They drive the model through a
``PrescribedController`` added to it (``control_set_controller``), so that, as in
OpenSim, they add to the controls of the model's own controllers; each control is a
piecewise polynomial, and all of them are evaluated in one vectorized call.

The initial state comes from a states file as OpenSim's ForwardTool takes it: the
last row at or before the initial time (which becomes that row's time), each state
variable matched to its column as ``TableUtilities::findStateLabelIndex`` does (full
path, shorter paths, the last name, OpenSim 3 labels such as ``r_elbow_flex_u`` or
``TRIlong.activation``); variables without a column keep their default values.

The setup runner (``ForwardTool``) reads ``model_file`` (with ``force_set_files``
and ``replace_force_set``), ``initial_time``, ``final_time``, the controls (the
``controls_file`` of each ``ControlSetController`` of the tool's ``ControllerSet``,
or the tool's own ``controls_file`` of OpenSim 1.x setups), ``states_file``,
``external_loads_file``, ``solve_for_equilibrium_for_auxiliary_states``, the
integrator settings (``integrator_error_tolerance`` is the accuracy,
``maximum_integrator_step_size`` the largest step,
``maximum_number_of_integrator_steps`` the step budget of the whole run;
``minimum_integrator_step_size`` is read and not enforced), ``results_directory``,
``output_precision`` and the ``AnalysisSet`` (the analyses ``analyze`` registers, on
the states of every step, within each analysis's ``start_time``/``end_time`` and
every ``step_interval`` steps; as in the AnalyzeTool, BodyKinematics and
PointKinematics accelerations are those with every control zero, which are the
simulation's for models whose actuators all have activation states, as muscles
do). It writes OpenSim's ``<name>_states.sto``,
``<name>_controls.sto`` and ``<name>_states_degrees.mot`` (``Storage::print``
layout) and ``<name>_<analysis>_<quantity>.sto``.
"""

from __future__ import annotations

import dataclasses
import math
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..compiling import jit
from ..control.controllers import PrescribedController
from ..forward import Context
from ..functions import SEARCH_RIGHT, Function, PiecewisePolynomial, _as_float
from ..io.states import _rotational_columns, state_variable_columns
from ..io.tables import TableFileError, TimeSeriesTable, read_table, write_table
from ..muscles.equilibrium import equilibrate_muscles
from ..simulate import simulate
from ..state import State
from .analyze import ANALYSES, AnalysisJob, Frames, load_model_with_force_sets
from .external_loads import read_external_loads
from .setup import Setup, SetupError, read_element, register_tool
from ..io.outputs import open_output

__all__ = [
    "forward",
    "ControlLinear",
    "read_control_set",
    "write_control_set",
    "control_set_controller",
    "initial_state_from_table",
    "print_storage",
]

_UNASSIGNED = ("", "Unassigned", "unassigned", "null", "NULL")


# -- controls -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class ControlLinear:
    """One control of an OpenSim ``ControlSet``.

    **Fields:** ``name`` (the actuator's name, or ``<name>.excitation``); ``times``
    (s, increasing) and ``values`` of its nodes; ``use_steps``; ``extrapolate``
    (linear extrapolation beyond the end nodes; ignored with ``use_steps``).
    ``ControlConstant`` reads as one node.
    """

    name: str
    times: np.ndarray
    values: np.ndarray
    use_steps: bool = False
    extrapolate: bool = True

    @property
    def actuator(self) -> str:
        """The actuator's name (``name`` without a trailing ``.excitation``)."""
        ext = ".excitation"
        return self.name[: -len(ext)] if self.name.endswith(ext) and len(self.name) > len(ext) else self.name

    def function(self) -> _ControlFunction:
        """The control as a simjax ``Function`` of time with OpenSim's conventions."""
        return _ControlFunction.of(self.times, self.values, self.use_steps, self.extrapolate)

    def __call__(self, t):
        """The control's value at times ``t`` (s)."""
        return self.function()(t)


def _bucket(n: int) -> int:
    """Breaks padded to a power of two, so that control sets of similar sizes share
    one compiled simulation."""
    return max(4, 1 << (max(n, 2) - 1).bit_length())


class _ControlFunction(Function):
    """An OpenSim control (``ControlLinear``) as an exact piecewise polynomial of time:
    ``breaks (K,)`` of which ``num_breaks`` are real (the rest repeat the last),
    ``coefs (K - 1, 2)`` (value and slope on each interval), ``left``/``right``
    ``(2,)`` beyond the ends."""

    breaks: jax.Array = eqx.field(converter=_as_float)
    coefs: jax.Array = eqx.field(converter=_as_float)
    left: jax.Array = eqx.field(converter=_as_float)
    right: jax.Array = eqx.field(converter=_as_float)
    num_breaks: jax.Array = eqx.field(converter=lambda n: np.asarray(n, np.int32))

    @staticmethod
    def of(times, values, use_steps: bool = False, extrapolate: bool = True) -> _ControlFunction:
        dtype = np.dtype(jnp.result_type(float))
        t = np.asarray(times, float).ravel()
        v = np.asarray(values, float).ravel()
        n = len(t)
        if n == 1:
            t, v = np.concatenate([t, t]), np.concatenate([v, v])
            coefs = np.asarray([[v[0], 0.0]])
            left = right = np.asarray([v[0], 0.0])
        elif use_steps:
            # value of node i + 1 on (t_i, t_(i+1)]: intervals [b_i, b_(i+1)) with
            # b_i the next number after t_i
            t = np.nextafter(t.astype(dtype), np.asarray(np.inf, dtype)).astype(float)
            coefs = np.stack([v[1:], np.zeros(n - 1)], axis=1)
            left, right = np.asarray([v[0], 0.0]), np.asarray([v[-1], 0.0])
        else:
            slope = (v[1:] - v[:-1]) / (t[1:] - t[:-1])
            coefs = np.stack([v[:-1], slope], axis=1)
            left = np.asarray([v[0], slope[0] if extrapolate else 0.0])
            right = np.asarray([v[-1], slope[-1] if extrapolate else 0.0])
        k = len(t)
        size = _bucket(k)
        breaks = np.concatenate([t, np.full(size - k, t[-1])])
        coefs = np.concatenate([coefs, np.zeros((size - k, 2))])
        return _ControlFunction(breaks, coefs, left, right, k)

    def to_pp(self) -> PiecewisePolynomial:
        return PiecewisePolynomial(
            self.breaks, self.coefs, self.left, self.right, num_breaks=self.num_breaks, search=SEARCH_RIGHT
        )


def _text(node, tag, default=""):
    child = node.find(tag)
    value = child.text.strip() if child is not None else ""
    return default if value in _UNASSIGNED else value


def _flag(node, tag, default, path):
    text = _text(node, tag, "true" if default else "false").lower()
    if text not in ("true", "false"):
        raise SetupError(f"{path}: <{node.tag} name={node.name!r}> property <{tag}> = {text!r}: expected true or false")
    return text == "true"


def _number(node, tag, path, default=None):
    text = _text(node, tag)
    if not text:
        if default is None:
            raise SetupError(f"{path}: <{node.tag}> has no <{tag}>")
        return default
    try:
        return float(text)
    except ValueError:
        raise SetupError(f"{path}: <{node.tag}> property <{tag}> = {text!r}: expected a number") from None


def _control_nodes(control, tag: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``ControlLinearNode`` list ``<tag>`` (``x_nodes``, ``min_nodes``,
    ``max_nodes``) of a ``ControlLinear`` element: ``(times (s), values)``, empty when
    absent.

    **Raises:** ``SetupError`` naming ``path``, the control and the list for a
    non-numeric value or node times that do not increase."""
    nodes = control.find(tag)
    pts = [
        (_number(x, "t", path), _number(x, "value", path))
        for x in (nodes.children if nodes is not None else [])
        if x.tag == "ControlLinearNode"
    ]
    t = np.asarray([p[0] for p in pts], float)
    if np.any(np.diff(t) <= 0):
        raise SetupError(
            f"{path}: <ControlLinear name={control.name!r}>: the times of its <{tag}> must increase, got {t.tolist()}"
        )
    return t, np.asarray([p[1] for p in pts], float)


def _xml_controls(path: str) -> list[ControlLinear]:
    node = read_element(path, "ControlSet", "controls", "a controls file is a ControlSet .xml or a .sto")
    objects = node.find("objects")
    out = []
    for c in objects.children if objects is not None else []:
        name = c.name or ""
        if c.tag == "ControlConstant":
            value = _number(c, "value", path, 0.0)
            out.append(ControlLinear(name, np.zeros(1), np.asarray([value])))
            continue
        if c.tag != "ControlLinear":
            raise SetupError(
                f"{path}: <{c.tag} name={name!r}> is not a control simjax reads (ControlLinear, ControlConstant)"
            )
        t, values = _control_nodes(c, "x_nodes", path)
        if not len(t):
            raise SetupError(
                f"{path}: <ControlLinear name={name!r}> has no <x_nodes> (OpenSim would give the actuator NaN controls)"
            )
        out.append(
            ControlLinear(
                name,
                t,
                values,
                _flag(c, "use_steps", False, path),
                _flag(c, "extrapolate", True, path),
            )
        )
    return out


def _table_controls(table: TimeSeriesTable) -> list[ControlLinear]:
    """``ControlSet(Storage)``: one linear control per column, a node per row (a
    later row at the same time replaces the earlier one)."""
    t = np.asarray(table.times, float)
    values = np.asarray(table.values, float)
    keep = np.r_[np.diff(t) != 0, True]  # (setControlValue at an existing time replaces it)
    order = np.argsort(t[keep], kind="stable")
    return [ControlLinear(label, t[keep][order], values[keep, j][order]) for j, label in enumerate(table.labels)]


def read_control_set(source) -> list[ControlLinear]:
    """Read an OpenSim ``ControlSet``.

    **Arguments:** ``source``: a ``.xml`` ControlSet file (``ControlLinear``,
    ``ControlConstant``), a ``.sto``/``.mot`` file or a ``TimeSeriesTable`` (one linear
    control per column, named by its label, as OpenSim's ``ControlSet(Storage)``).

    **Returns:** the controls, in file order.

    **Raises:** ``FileNotFoundError``; ``SetupError`` for a malformed file, an
    unknown control type, a control without nodes or with decreasing node times.
    """
    if isinstance(source, TimeSeriesTable):
        return _table_controls(source)
    path = os.fspath(source)
    if not os.path.exists(path):
        raise FileNotFoundError(f"controls file {path!r} does not exist")
    if path.lower().endswith((".sto", ".mot")):
        try:
            return _table_controls(read_table(path))
        except TableFileError as e:
            raise SetupError(str(e)) from None
    return _xml_controls(path)


def write_control_set(path, name: str, table: TimeSeriesTable, limits=None) -> None:
    """Write controls as an OpenSim ``ControlSet`` ``.xml`` file, as ``RRATool`` and
    ``CMCTool`` write their ``_controls.xml``: a ``ControlLinear`` named
    ``<actuator>.excitation`` per column, a node per row (linear between them).

    **Arguments:** ``path``; ``name``: the set's (OpenSim's: the model's name);
    ``table``: the controls, a column an actuator (by name); ``limits``: ``(min, max)``
    per column, each ``(n,)`` (the ``default_min``/``default_max``; default
    unbounded, written as OpenSim writes infinity).
    """
    from ..io.osim._xml import Node, serialize

    times = np.asarray(table.times, float)
    values = np.asarray(table.values, float)
    n = len(table.labels)
    lo, hi = (np.full(n, -np.inf), np.full(n, np.inf)) if limits is None else map(np.asarray, limits)

    def number(x: float) -> str:
        return "Inf" if x == np.inf else "-Inf" if x == -np.inf else repr(float(x))

    def leaf(tag: str, text: str = "") -> Node:
        return Node(tag, text=text)

    objects = Node("objects")
    for j, label in enumerate(table.labels):
        nodes = Node("x_nodes")
        for t, v in zip(times, values[:, j]):
            nodes.append(Node("ControlLinearNode", children=[leaf("t", number(t)), leaf("value", number(v))]))
        children = [
            leaf("is_model_control", "true"),
            leaf("extrapolate", "true"),
            leaf("default_min", number(lo[j])),
            leaf("default_max", number(hi[j])),
            leaf("filter_on", "false"),
            leaf("use_steps", "false"),
            nodes,
            leaf("min_nodes"),
            leaf("max_nodes"),
            leaf("kp", "100"),
            leaf("kv", "20"),
        ]
        objects.append(Node("ControlLinear", {"name": f"{label}.excitation"}, children=children))
    control_set = Node("ControlSet", {"name": name}, children=[objects, leaf("groups")])
    document = Node("OpenSimDocument", {"Version": "40600"}, children=[control_set])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open_output(path, "w", newline="\n") as fh:
        fh.write('<?xml version="1.0" encoding="UTF-8" ?>\n' + serialize(document) + "\n")


def control_set_controller(
    system, controls, name: str = "ControlSetController", source: str = "the controls"
) -> PrescribedController:
    """A ``PrescribedController`` that applies a ControlSet as OpenSim's
    ``ControlSetController`` does.

    **Arguments:** ``system``: the built system (for its actuators); ``controls``: a
    list of ``ControlLinear`` or anything ``read_control_set`` reads; ``name``: the
    controller's name; ``source``: how messages name the controls.

    Each control drives the actuator of its name (a trailing ``.excitation``
    removed; an actuator path is accepted too). An actuator named by two controls
    gets the first, as OpenSim's lookup does.

    **Returns:** the controller (add it to the model: ``model.add(controller)``).

    **Raises:** ``SetupError`` naming a control whose actuator is not in the model.
    """
    if not isinstance(controls, (list, tuple)):
        controls = read_control_set(controls)
    paths = system.actuator_paths
    by_name = {}
    for p in paths:
        by_name.setdefault(p.rsplit("/", 1)[-1], p)
    missing = [c.name for c in controls if c.actuator not in by_name and c.name not in paths]
    if missing:
        raise SetupError(
            f"{source}: control(s) {missing} name no actuator of model {system.model.name!r} "
            f"(actuators: {sorted(by_name)})"
        )
    controller = PrescribedController(name)
    done = set()
    for c in controls:
        path = c.name if c.name in paths else by_name[c.actuator]
        if path in done:
            continue
        done.add(path)
        controller = controller.prescribe(path, c.function())
    return controller


# -- initial states --------------------------------------------------------------------------


def _state_label_index(labels: list[str], desired: str) -> int:
    """OpenSim's ``TableUtilities::findStateLabelIndex``: the column of a state variable
    (full path, shorter paths, the last name, OpenSim 3 labels), ``-1`` if none."""
    index = {lab: i for i, lab in reversed(list(enumerate(labels)))}
    if desired in index:
        return index[desired]
    short = desired
    while "/" in short:
        short = short[short.index("/") + 1 :]
        if short in index:
            return index[short]
    prefix, _, last = desired.rpartition("/")
    if last in index:
        return index[last]
    if last == "value":
        cand = prefix.rsplit("/", 1)[-1]
    elif last == "speed":
        cand = prefix.rsplit("/", 1)[-1] + "_u"
    else:
        cand = f"{prefix.rsplit('/', 1)[-1]}.{last}"
    return index.get(cand, -1)


def initial_state_from_table(
    system, table: TimeSeriesTable, time: float | None = None, source: str = "the states table"
) -> State:
    """The initial state OpenSim's ForwardTool takes from a states file.

    **Arguments:** ``system``; ``table``: states by OpenSim's names (radians);
    ``time``: the initial time (s; default the first row's); ``source``: how messages
    name the table.

    The row is the last one at or before ``time`` (``Storage::findIndex``) and the
    state's time is that row's. Each state variable takes its column
    (``findStateLabelIndex``: full path, shorter paths, the last name, OpenSim 3
    labels); the others keep the model's defaults.

    **Returns:** a ``State``.

    **Raises:** ``ValueError`` when ``time`` precedes the table's first row, or the
    table is empty or in degrees.
    """
    times = np.asarray(table.times, float)
    if len(times) == 0:
        raise ValueError(f"{source} has no rows")
    if table.in_degrees:
        raise ValueError(
            f"{source} is in degrees (inDegrees=yes); OpenSim's ForwardTool needs states in radians and meters"
        )
    t = times[0] if time is None else float(time)
    if t < times[0]:
        raise ValueError(
            f"the initial time {t:g} s precedes the first row of {source} ({times[0]:g} s); OpenSim "
            f"would start at {times[0]:g} s instead"
        )
    row = max(int(np.searchsorted(times, t, side="right")) - 1, 0)
    values = np.asarray(table.values, float)[row]
    labels = list(table.labels)
    state = system.default_state(float(times[row]))
    names = {"q": system.q_names, "u": system.u_names, "z": system.z_names}
    arrays = {f: np.array(getattr(state, f), float) for f in names}
    for f, ns in names.items():
        for i, n in enumerate(ns):
            j = _state_label_index(labels, n)
            if j >= 0:
                arrays[f][i] = values[j]
    dtype = state.q.dtype
    return state.replace(
        q=jnp.asarray(arrays["q"], dtype), u=jnp.asarray(arrays["u"], dtype), z=jnp.asarray(arrays["z"], dtype)
    )


# -- the simulation ----------------------------------------------------------------------------


@jit
def _controls_of(system, states):
    return jax.vmap(lambda s: Context(system, s).controls)(states)


def _states_batch(t, q, u, z, d) -> State:
    n = len(t)
    return State(
        t=jnp.asarray(t),
        q=jnp.asarray(q),
        u=jnp.asarray(u),
        z=jnp.asarray(z),
        d=jnp.broadcast_to(jnp.asarray(d), (n,) + jnp.shape(d)),
    )


def forward(
    system,
    t0: float,
    t1: float,
    controls=None,
    *,
    initial_state=None,
    external_loads=None,
    accuracy: float = 1e-5,
    max_steps: int = 20000,
    max_step_size: float | None = 1.0,
    solve_for_equilibrium: bool = False,
    name: str = "ForwardTool",
    throw: bool = True,
) -> dict:
    """OpenSim's Forward tool: integrate the model from ``t0`` to ``t1``, recording the
    state at every integrator step.

    **Arguments:**

    - ``system``: the built model (or a ``Model``).
    - ``t0``, ``t1``: initial and final times (s); with a states table, ``t0`` becomes
      the time of its last row at or before ``t0``.
    - ``controls``: ``None`` (the model's controllers); an OpenSim ControlSet (a
      ``.xml`` or ``.sto`` path, a ``TimeSeriesTable`` of controls by actuator name, or
      a list of ``ControlLinear``), applied by a controller added to the model, so
      that it adds to the model's controllers, as in OpenSim; or anything
      ``simulate`` takes as controls (an array in ``system.actuator_names`` order, a
      ``ControlTable``, a callable ``(t, state)``), which replaces the controllers.
    - ``initial_state``: a ``State``, a states file path or ``TimeSeriesTable``
      (``initial_state_from_table``), or ``None`` for the default state.
    - ``external_loads``: an ExternalLoads ``.xml`` path or ``ExternalForce``
      components, added to the model.
    - ``accuracy``: the integrator accuracy (OpenSim's
      ``integrator_error_tolerance``); ``max_steps``: the step budget of the run;
      ``max_step_size``: largest step (s; ``None``: no limit).
    - ``solve_for_equilibrium``: equilibrate the muscles at the initial state
      (``equilibrateMuscles``) before integrating.
    - ``name``: the states table's header (OpenSim: the tool's name).
    - ``throw``: raise when the integration fails; else return what was computed up
      to the failure, with ``result`` set.

    **Returns:** ``{"states": TimeSeriesTable, "controls": TimeSeriesTable,
    "trajectory": Trajectory, "result": int, "system": System, "frames": State}``:
    the states (OpenSim's state-variable names, radians and meters, one row at ``t0``
    and one per step, the last at ``t1``), the controls at those states (by actuator
    name), the trajectory as ``simulate`` returns it, its result code (0: success),
    the system simulated (with the controls' controller and the external loads
    added) and the states of the rows as one batched ``State``.

    **Raises:** ``ValueError`` for bad times, a states table that does not cover
    ``t0``; ``SetupError`` for controls naming no actuator of the model;
    ``RuntimeError`` when the integration fails (with ``throw``).
    """
    from ..system import System

    model = system if not isinstance(system, System) else system.model
    added = external_loads is not None or (controls is not None and _is_control_set(controls))
    if external_loads is not None:
        if isinstance(external_loads, (str, os.PathLike)):
            external_loads = read_external_loads(external_loads, time_window=(float(t0) - 1.0, float(t1) + 1.0))
        for f in external_loads:
            model = model.add(f)
    if not isinstance(system, System) or added:
        system = model.build()
    if controls is not None and _is_control_set(controls):
        source = os.fspath(controls) if isinstance(controls, (str, os.PathLike)) else "the controls"
        controller = control_set_controller(system, controls, _unique_name(model, "ForwardToolControls"), source)
        system = model.add(controller).build()
        controls = None
    if initial_state is None:
        state = system.default_state(float(t0))
    elif isinstance(initial_state, State):
        state = initial_state.replace(t=jnp.asarray(t0, initial_state.q.dtype))
    else:
        table = initial_state if isinstance(initial_state, TimeSeriesTable) else read_table(initial_state)
        where = "the states table" if isinstance(initial_state, TimeSeriesTable) else os.fspath(initial_state)
        state = initial_state_from_table(system, table, t0, where)
    t0 = float(state.t)
    if not t1 > t0:
        raise ValueError(f"the final time ({t1:g} s) must be after the initial time ({t0:g} s)")
    if solve_for_equilibrium:
        state = equilibrate_muscles(system, state)
    traj = simulate(
        system,
        state,
        float(t1),
        controls,
        solver="rkm",
        accuracy=accuracy,
        save_steps=True,
        max_steps=int(max_steps),
        max_step_size=max_step_size,
        throw=False,
    )
    result = int(traj.result)
    ok = np.isfinite(np.asarray(traj.t))
    t = np.r_[t0, np.asarray(traj.t)[ok]]
    q = np.concatenate([np.asarray(state.q)[None], np.asarray(traj.q)[ok]])
    u = np.concatenate([np.asarray(state.u)[None], np.asarray(traj.u)[ok]])
    z = np.concatenate([np.asarray(state.z)[None], np.asarray(traj.z)[ok]])
    finite = np.all(np.isfinite(np.concatenate([q, u, z], axis=1)), axis=1)
    if not finite.all():  # (keep the states up to the first non-finite one)
        stop = int(np.argmin(finite))
        t, q, u, z = t[:stop], q[:stop], u[:stop], z[:stop]
    states = _states_batch(t, q, u, z, state.d)
    states_table = _states_table(system, states, name)
    n_act = len(system.actuator_paths)
    if controls is None:
        c = np.asarray(_controls_of(system, states))
    elif callable(controls):
        c = np.asarray(jax.vmap(lambda s: jnp.broadcast_to(controls(s.t, s), (n_act,)))(states))
    else:
        c = np.broadcast_to(np.asarray(controls, float), (len(t), n_act))
    controls_table = TimeSeriesTable(
        t, c.reshape(len(t), -1), list(system.actuator_names), {"header": "controls", "inDegrees": "no"}
    )
    if result != 0 and throw:
        raise RuntimeError(
            f"forward: the integration from {t0:g} s stopped at {t[-1]:g} s before {t1:g} s (result "
            f"code {result}: {_reason(result, max_steps)})"
        )
    return {
        "states": states_table,
        "controls": controls_table,
        "trajectory": traj,
        "result": result,
        "system": system,
        "frames": states,
    }


def _reason(result: int, max_steps: int) -> str:
    from ..simulate import NONFINITE_STATE

    if result == NONFINITE_STATE:
        return "the state became NaN or inf"
    if result == 1:  # diffrax.RESULTS.max_steps_reached
        return f"the step budget of {max_steps} steps was used up"
    return "the integrator failed"


def _is_control_set(controls) -> bool:
    return isinstance(controls, (str, os.PathLike, TimeSeriesTable)) or (
        isinstance(controls, (list, tuple)) and controls and all(isinstance(c, ControlLinear) for c in controls)
    )


def _unique_name(model, base: str) -> str:
    name, k = base, 1
    existing = {p.rsplit("/", 1)[-1] for p in model.paths(PrescribedController)}
    while name in existing:
        k += 1
        name = f"{base}_{k}"
    return name


def _states_table(system, states: State, name: str) -> TimeSeriesTable:
    labels = state_variable_columns(system)
    arrays = {f: np.asarray(getattr(states, f), float).reshape(len(states.t), -1) for f in ("q", "u", "z")}
    where = {}
    for f, ns in (("q", system.q_names), ("u", system.u_names), ("z", system.z_names)):
        for i, n in enumerate(ns):
            where[n] = (f, i)
    values = (
        np.stack([arrays[where[lab][0]][:, where[lab][1]] for lab in labels], axis=1)
        if labels
        else np.zeros((len(states.t), 0))
    )
    return TimeSeriesTable(np.asarray(states.t, float), values, list(labels), {"header": name, "inDegrees": "no"})


# -- OpenSim's Storage files -------------------------------------------------------------------


def print_storage(
    path, table: TimeSeriesTable, name: str, precision: int = 8, in_degrees: bool = False, simm_header: bool = False
) -> None:
    """Write a table as OpenSim's ``Storage::print`` does: the name line,
    ``version=1``, ``nRows``, ``nColumns`` (time included), ``inDegrees``, with
    ``simm_header`` the SIMM motion header (``_states_degrees.mot``), ``endheader``,
    the labels, then rows of ``%(precision + 8).(precision)f`` values separated by
    tabs (``IO::SetPrecision``).

    **Arguments:** ``path``; ``table``; ``name`` (first line); ``precision``: digits
    after the point (OpenSim's ``output_precision``); ``in_degrees``; ``simm_header``.
    """
    times = np.asarray(table.times, float)
    values = np.asarray(table.values, float).reshape(len(times), -1)
    ncol = values.shape[1] + 1
    lines = [name, "version=1", f"nRows={len(times)}", f"nColumns={ncol}", f"inDegrees={'yes' if in_degrees else 'no'}"]
    if simm_header:
        first, last = (times[0], times[-1]) if len(times) else (0.0, 0.0)
        lines += [
            "",
            "# SIMM Motion File Header:",
            f"name {name}",
            f"datacolumns {ncol}",
            f"datarows {len(times)}",
            "otherdata 1",
            f"range {first:f} {last:f}",
        ]
    lines.append("endheader")
    lines.append("\t".join(["time", *table.labels]))
    p = max(int(precision), 0)
    fmt = f"%{p + 8}.{p}f"
    for t, row in zip(times, values):
        lines.append("\t".join(fmt % v for v in (t, *row)))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open_output(path, "w", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")


def _in_degrees(system, table: TimeSeriesTable) -> TimeSeriesTable:
    """``SimbodyEngine::convertRadiansToDegrees``: rotational coordinates' values and
    speeds in degrees."""
    rot = _rotational_columns(system)
    values = np.array(table.values, float)
    for j, lab in enumerate(table.labels):
        if lab in rot:
            values[:, j] *= 180.0 / math.pi
    return TimeSeriesTable(
        table.times, values, list(table.labels), {"header": table.metadata.get("header", ""), "inDegrees": "yes"}
    )


# -- the tool ---------------------------------------------------------------------------------


def _controls_files(setup: Setup) -> list[str]:
    """The controls files of the setup: each enabled ``ControlSetController`` of its
    ``ControllerSet``, and the tool's own ``controls_file`` (OpenSim 1.x setups)."""
    out = []
    cset = setup.element("ControllerSet")
    objects = cset.find("objects") if cset is not None else None
    for c in objects.children if objects is not None else []:
        if c.tag != "ControlSetController":
            raise SetupError(
                f"{setup.file}: <ControllerSet> holds <{c.tag} name={c.name!r}>, a controller the "
                "Forward tool of simjax does not run (supported: ControlSetController)"
            )
        if _text(c, "enabled", "true").lower() == "false":
            continue
        f = _text(c, "controls_file")
        if f:
            out.append(("ControllerSet/ControlSetController/controls_file", f))
    if setup.text("controls_file"):
        out.append(("controls_file", setup.text("controls_file")))
    resolved = []
    for prop, f in out:
        path = os.path.normpath(os.path.join(setup.folder, f))
        if not os.path.exists(path):
            raise SetupError(
                f"{setup.file}: <{setup.tool}> property <{prop}> = {f!r}: resolved from the setup's "
                f"folder to {path!r}, which does not exist"
            )
        resolved.append((prop, f, path))
    return resolved


def _run_analyses(setup: Setup, system, frames: Frames, items) -> dict:
    out = {}
    times = frames.store_times
    for node in items:
        if _text(node, "on", "true").lower() == "false":
            continue
        lo = float(_text(node, "start_time", "-inf"))
        hi = float(_text(node, "end_time", "inf"))
        every = max(int(float(_text(node, "step_interval", "1"))), 1)
        rows = np.nonzero((times >= lo) & (times <= hi))[0][::every]
        if rows.size == 0:
            continue
        sub = jax.tree.map(lambda a: a[rows], frames.states)
        job = AnalysisJob(
            system, Frames(times[rows], frames.store_q[rows], frames.store_u[rows], 0, rows.size, sub), setup
        )
        for quantity, tab in ANALYSES[node.tag](job, node).items():
            out[f"{node.name}_{quantity}"] = tab
    return out


def _run(setup: Setup) -> dict:
    """Run a ``<ForwardTool>`` setup, writing OpenSim's files.

    **Returns:** ``{"states": path, "controls": path, "states_degrees": path,
    "<analysis>_<quantity>": path}``.

    **Raises:** ``SetupError`` naming the file, property and value for a missing
    file, a control naming no actuator of the model, a states file that does not
    cover the initial time, an unsupported controller or analysis, or a failed
    integration (the results up to the failure are written first, as OpenSim does).
    """
    model_path = setup.path("model_file")
    if model_path is None:
        raise setup.error("model_file", "", "no model file given")
    if not os.path.exists(model_path):
        raise setup.error("model_file", setup.text("model_file"), f"resolved to {model_path!r}, which does not exist")
    force_files = setup.existing_paths("force_set_files")
    replace = setup.flag("replace_force_set", False)
    t0 = setup.number("initial_time", 0.0)
    t1 = setup.number("final_time", 1.0)
    accuracy = setup.number("integrator_error_tolerance", 1e-5)
    max_steps = int(setup.number("maximum_number_of_integrator_steps", 20000))
    max_dt = setup.number("maximum_integrator_step_size", 1.0)
    setup.number("minimum_integrator_step_size", 1e-8)  # (read; simjax does not enforce a smallest step)
    precision = int(setup.number("output_precision", 8))
    equilibrate = setup.flag("solve_for_equilibrium_for_auxiliary_states", False)
    if not accuracy > 0:
        raise setup.error("integrator_error_tolerance", setup.text("integrator_error_tolerance"), "must be positive")
    if max_steps < 1:
        raise setup.error("maximum_number_of_integrator_steps", max_steps, "must be at least 1")
    if not max_dt > 0:
        raise setup.error("maximum_integrator_step_size", max_dt, "must be positive")
    controls = _controls_files(setup)
    states_path = setup.path("states_file")
    if states_path is not None and not os.path.exists(states_path):
        raise setup.error(
            "states_file", setup.text("states_file"), f"resolved to {states_path!r}, which does not exist"
        )
    loads_path = setup.path("external_loads_file")
    if loads_path is not None and not os.path.exists(loads_path):
        raise setup.error(
            "external_loads_file",
            setup.text("external_loads_file"),
            f"resolved to {loads_path!r}, which does not exist",
        )
    analyses_node = setup.element("AnalysisSet")
    objects = analyses_node.find("objects") if analyses_node is not None else None
    items = list(objects.children) if objects is not None else []
    for c in items:
        if c.tag not in ANALYSES:
            raise SetupError(
                f"{setup.file}: <AnalysisSet> holds <{c.tag} name={c.name!r}>, an analysis simjax "
                f"does not run; supported: {', '.join(sorted(ANALYSES))}"
            )
    results = setup.path("results_directory") or setup.folder
    name = setup.name

    model = load_model_with_force_sets(model_path, force_files, replace)
    if loads_path is not None:
        for f in read_external_loads(loads_path, time_window=(t0 - 1.0, t1 + 1.0)):
            model = model.add(f)
    system = model.build()
    for k, (prop, text, path) in enumerate(controls):
        where = f"{setup.file}: <{setup.tool}> property <{prop}> = {text!r}"
        try:
            ctrl = control_set_controller(
                system, read_control_set(path), _unique_name(model, "ControlSetController"), where
            )
        except SetupError as e:
            msg = str(e)
            raise SetupError(msg if msg.startswith(where) else f"{where}: {msg}") from None
        model = model.add(ctrl)
    if controls:
        system = model.build()
    if states_path is not None:
        try:
            table = read_table(states_path)
        except TableFileError as e:
            raise setup.error("states_file", setup.text("states_file"), str(e)) from None
        try:
            state = initial_state_from_table(system, table, t0, states_path)
        except ValueError as e:
            raise setup.error("states_file", setup.text("states_file"), f"{e} (<initial_time> = {t0:g})") from None
    else:
        state = system.default_state(t0)
    if not t1 > float(state.t):
        raise setup.error("final_time", t1, f"must be after the initial time ({float(state.t):g} s)")
    res = forward(
        system,
        float(state.t),
        t1,
        initial_state=state,
        accuracy=accuracy,
        max_steps=max_steps,
        max_step_size=max_dt,
        solve_for_equilibrium=equilibrate,
        name=name,
        throw=False,
    )
    system = res["system"]
    os.makedirs(results, exist_ok=True)
    written = {}
    for key, tab, header, deg, simm in (
        ("controls", res["controls"], "controls", False, False),
        ("states", res["states"], name, False, False),
        ("states_degrees", _in_degrees(system, res["states"]), name, True, True),
    ):
        ext = ".mot" if key == "states_degrees" else ".sto"
        path = os.path.join(results, f"{name}_{key}{ext}")
        print_storage(path, tab, header, precision, deg, simm)
        written[key] = path
    if items:
        states = res["frames"]
        frames = Frames(np.asarray(states.t, float), states.q, states.u, 0, len(states.t), states)
        for key, tab in _run_analyses(setup, system, frames, items).items():
            path = os.path.join(results, f"{name}_{key}.sto")
            write_table(tab, path)
            written[key] = path
    setup.report_unused(ignored=("replace_force_set",))
    if res["result"] != 0:
        t_end = float(res["states"].times[-1]) if len(res["states"].times) else float(state.t)
        raise setup.error(
            "maximum_number_of_integrator_steps" if res["result"] == 1 else "final_time",
            max_steps if res["result"] == 1 else t1,
            f"the integration stopped at {t_end:g} s: {_reason(res['result'], max_steps)} (the results "
            f"up to there are written to {results!r})",
        )
    return written


register_tool("ForwardTool", _run)
