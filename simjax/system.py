"""Build: finalize a Model, connect it, and compile it into a System.

``build_system(model)`` (what ``Model.build`` calls, ≈ OpenSim ``initSystem``):

1. checks every component's name and properties (naming path, property and value);
2. resolves every socket and input (ArtiSynth's post-scan): a missing or mistyped
   connectee is an error naming both paths and the expected type;
3. runs the multibody graph maker and numbers the tree (``mechanics.tree``);
4. lays out the state: q and u per mobilizer, then z and discrete variables per
   component, contiguously, in tree order.

The result, a ``Topology``, is static and cached by the model's structure: a model
that differs only in numeric properties gets the same Topology object, so jitted
functions taking the ``System`` do not recompile.

This module sits below ``model``: it takes the Model as the root ``Component`` and
uses only its public methods and fields (``walk``, ``index``, ``components_of``,
``set``, ``update``, ``use_quaternions``, ...); ``Model.build`` calls it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import OrderedDict
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .component import Component, ModelError, ModelWarning, component_class, resolve_path, validate_once
from .mechanics.frames import Body
from .mechanics.joints import Coordinate
from .function_bank import FunctionBank
from .groups import BuildInfo, Group
from .mechanics.tree import Tree, compile_tree
from .state import State

__all__ = ["Topology", "System", "build_system", "parse_connection"]


def parse_connection(conn: str) -> tuple[str, str, str | None, str | None]:
    """Split an input connection ``"path|output[:channel][(alias)]"``.

    **Returns:** ``(path, output, channel or None, alias or None)``.
    """
    alias = None
    if conn.endswith(")") and "(" in conn:
        conn, alias = conn[:-1].rsplit("(", 1)
    path, _, out = conn.rpartition("|")  # a name may hold "|"; an output name never does
    out, _, channel = out.partition(":")
    return path, out, (channel or None), alias


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """Everything static about a built model (hashable by identity).

    **Fields:**

    - ``paths``: every component path, tree order; ``classes``: their class names.
    - ``connections``: ``{(path, socket): target path}`` (list sockets: a tuple).
    - ``inputs``: ``{(path, input): ((target path, output, channel, alias), ...)}``.
    - ``tree``: the multibody ``Tree`` (q/u layout, coordinates).
    - ``z_names``, ``z_slices`` (``{path: (start, stop)}``), ``d_names``, ``d_slices``.
    - ``groups``: ``{class name: tuple of paths}`` for vectorized evaluation.
    - ``actuators``: paths of actuators, in control order.
    """

    paths: tuple
    classes: tuple
    connections: dict
    inputs: dict
    tree: Tree
    z_names: tuple
    z_slices: dict
    d_names: tuple
    d_slices: dict
    groups: dict
    actuators: tuple
    coordinate_paths: tuple
    roles: dict
    locked_u: np.ndarray
    prescribed: dict | None

    def role_groups(self, role: str) -> tuple:
        """The groups taking part in a role: ``"forces"``, ``"controls"``,
        ``"constraints"`` or ``"zdot"``."""
        return self.roles.get(role, ())

    @property
    def nq(self) -> int:
        """The number of generalized coordinates ``q``."""
        return self.tree.nq

    @property
    def nu(self) -> int:
        """The number of generalized speeds ``u``."""
        return self.tree.nu

    @property
    def nz(self) -> int:
        """The number of auxiliary state variables ``z``."""
        return len(self.z_names)


def _check_sibling_names(model: Component) -> None:
    def rec(comp: Component, path: str):
        seen = set()
        for c in type(comp).children(comp):  # through the class: see the component module
            if c.name in seen:
                raise ModelError(path, f"has two subcomponents named {c.name!r}")
            seen.add(c.name)
            rec(c, ("" if path == "/" else path) + "/" + c.name)

    rec(model, "/")


def _resolve_sockets(index: dict, entries) -> dict:
    """``{(path, socket): target path}`` (list sockets: a tuple) of every connected
    socket; ``index`` is ``Model.index()``."""
    out: dict = {}
    for path, comp in entries:
        for name, f in comp.socket_fields().items():
            value = getattr(comp, name)
            refs = value if f.metadata["many"] else (value,)
            resolved = []
            expected = component_class(f.metadata["socket"])
            for ref in refs:
                if not ref:
                    if f.metadata["many"] or not f.metadata["hard"]:
                        continue
                    raise ModelError(
                        path,
                        f"socket '{name}' is not connected (expects a {expected.__name__})",
                        prop=f"socket_{name}",
                        value=ref,
                    )
                try:
                    target = resolve_path(ref, path)
                    conn = index[target]
                except (KeyError, ModelError):
                    raise ModelError(
                        path,
                        f"socket '{name}' refers to {ref!r}, but there is no component at "
                        f"{resolve_path(ref, path)!r} (expects a {expected.__name__})",
                        prop=f"socket_{name}",
                        value=ref,
                    ) from None
                if not isinstance(conn, expected):
                    raise ModelError(
                        path,
                        f"socket '{name}' expects a {expected.__name__}, but {target!r} is a {type(conn).__name__}",
                        prop=f"socket_{name}",
                        value=ref,
                    )
                resolved.append(target)
            if f.metadata["many"]:
                out[(path, name)] = tuple(resolved)
            elif resolved:
                out[(path, name)] = resolved[0]
    return out


def _resolve_inputs(index: dict, entries) -> dict:
    """``{(path, input): ((target path, output, channel, alias), ...)}`` of every
    input; ``index`` is ``Model.index()``."""
    out: dict = {}
    for path, comp in entries:
        for name, f in comp.input_fields().items():
            conns = getattr(comp, name)
            if len(conns) > 1 and not f.metadata["many"]:
                raise ModelError(
                    path, f"single-value input '{name}' has {len(conns)} connections", prop=f"input_{name}", value=conns
                )
            resolved = []
            for conn in conns:
                tpath, out_name, channel, alias = parse_connection(conn)
                try:
                    target = resolve_path(tpath, path)
                    tcomp = index[target]
                except (KeyError, ModelError):
                    raise ModelError(
                        path,
                        f"input '{name}' is connected to {conn!r}, but there is no component at {tpath!r}",
                        prop=f"input_{name}",
                        value=conn,
                    ) from None
                if out_name not in tcomp.output_specs():
                    raise ModelError(
                        path,
                        f"input '{name}' is connected to {conn!r}, but {type(tcomp).__name__} "
                        f"{target!r} has no output {out_name!r}",
                        prop=f"input_{name}",
                        value=conn,
                    )
                resolved.append((target, out_name, channel, alias))
            out[(path, name)] = tuple(resolved)
    return out


_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 64


def _structure_key(model: Component):
    massless = tuple(isinstance(b.mass, np.ndarray) and float(b.mass) == 0.0 for b in model.components_of(Body))
    return jax.tree_util.tree_structure(model), massless


def _compile(model: Component) -> Topology:
    entries = list(model.walk())
    index = model.index()  # one path -> component table for every lookup below
    connections = _resolve_sockets(index, entries)
    inputs = _resolve_inputs(index, entries)
    tree = compile_tree(model, connections, use_quaternions=model.use_quaternions)
    z_names, d_names = [], []
    z_slices, d_slices = {}, {}
    groups: dict[str, list[str]] = {}
    actuators = []
    for path, comp in entries:
        groups.setdefault(type(comp).__name__, []).append(path)
        zs = comp.z_variables()
        if zs:
            z_slices[path] = (len(z_names), len(z_names) + len(zs))
            z_names.extend(f"{path}/{v}" for v in zs)
        ds = comp.discrete_variables()
        if ds:
            d_slices[path] = (len(d_names), len(d_names) + len(ds))
            d_names.extend(f"{path}/{v}" for v in ds)
        if getattr(comp, "num_controls", 0):
            actuators.append(path)
    coords = tuple(p for p, c in entries if isinstance(c, Coordinate))
    build = BuildInfo(model, connections, tree, tuple(actuators), z_slices, d_slices, index)
    roles: dict[str, list[Group]] = {}
    for cname, paths in groups.items():
        cls = type(index[paths[0]])
        for role, method in _ROLES.items():
            if hasattr(cls, method):
                static = dict(cls.compile_group(build, tuple(paths)))
                if role == "zdot":
                    # members without z variables (e.g. an optional state) are left out
                    static["z_index"] = np.concatenate(
                        [np.zeros(0, np.int64)] + [np.arange(*z_slices[p]) for p in paths if p in z_slices]
                    )
                roles.setdefault(role, []).append(Group(cls, tuple(paths), static))
    locked, pres_paths = [], []
    for p in coords:
        c = index[p]
        if c.locked:
            locked.append(tree.coordinates[p].u)
        if c.prescribed:
            pres_paths.append(p)
    prescribed = None
    if pres_paths:
        infos = [tree.coordinates[p] for p in pres_paths]
        if any(i.q < 0 for i in infos):
            raise ModelError(pres_paths[0], "quaternion rotations cannot be prescribed")
        prescribed = {
            "paths": tuple(pres_paths),
            "q": np.asarray([i.q for i in infos]),
            "u": np.asarray([i.u for i in infos]),
            "bank": FunctionBank.of([index[p].prescribed_function for p in pres_paths]),
        }
    return Topology(
        paths=tuple(p for p, _ in entries),
        classes=tuple(type(c).__name__ for _, c in entries),
        connections=connections,
        inputs=inputs,
        tree=tree,
        z_names=tuple(z_names),
        z_slices=z_slices,
        d_names=tuple(d_names),
        d_slices=d_slices,
        groups={k: tuple(v) for k, v in groups.items()},
        actuators=tuple(actuators),
        coordinate_paths=coords,
        roles={k: tuple(v) for k, v in roles.items()},
        locked_u=np.asarray(locked, np.int32),
        prescribed=prescribed,
    )


_ROLES = {"forces": "group_forces", "controls": "group_controls", "constraints": "group_rows", "zdot": "group_zdot"}


def validate_model(model: Component) -> None:
    """Check names and every component's property values; raise ``ModelError``.

    ``ModelWarning``s (what OpenSim tolerates) are issued once: those already in
    ``model.reported_warnings`` are not repeated.
    """
    _check_sibling_names(model)
    caught = list(validate_once(model, "/"))
    for path, comp in model.walk():
        caught += validate_once(comp, path)
    for w in caught:
        if not (issubclass(w.category, ModelWarning) and str(w.message) in model.reported_warnings):
            # (stacklevel: validate_model <- build_system <- Model.build <- caller)
            warnings.warn(w.message, w.category, stacklevel=4)


def build_system(model: Component) -> System:
    """Validate, connect and compile ``model`` (see the module docstring).

    **Returns:** a ``System``.
    """
    if not (isinstance(model, Component) and callable(getattr(type(model), "index", None))):
        raise TypeError(f"build() needs a Model, got {type(model).__name__}")
    validate_model(model)
    key = _structure_key(model)
    topo = _CACHE.get(key)
    if topo is None:
        topo = _compile(model)
        _CACHE[key] = topo
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return System(model, topo)


def _component_defaults(model, paths, method: str) -> list:
    """``method`` (``"default_z"``, ...) of the components at ``paths``, called through
    their classes (see the component module: an instance's method is a new Module)."""
    comps = [model.find(p) for p in paths]
    return [getattr(type(c), method)(c) for c in comps]


def _concatenate(parts: list, dtype):
    """``parts`` (scalars or arrays) raveled and joined into one vector, through numpy
    when none is a JAX array (one transfer instead of one per part)."""
    if any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(parts)):
        return jnp.concatenate([jnp.ravel(jnp.asarray(p, dtype)) for p in parts])
    return jnp.asarray(np.concatenate([np.ravel(np.asarray(p, dtype)) for p in parts] or [np.zeros(0, dtype)]))


class System(eqx.Module):
    """A built model: static ``topology`` plus the ``model`` whose properties are traced.

    ``jax.grad`` of a function of the system differentiates with respect to every
    numeric property of every component (``grads.model.find(path).mass``).
    """

    model: Component
    topology: Topology = eqx.field(static=True)

    # Plain Python attribute access, as ``Model``'s: a System's methods (default_state,
    # coordinate_path, ...) are not functions to trace, and Equinox's own
    # ``__getattribute__`` would make each call flatten the whole model into a
    # ``BoundMethod`` pytree first.
    __getattribute__ = object.__getattribute__

    # -- names -------------------------------------------------------------------------

    @property
    def tree(self) -> Tree:
        """The multibody tree."""
        return self.topology.tree

    @property
    def q_names(self) -> tuple[str, ...]:
        """OpenSim names of the generalized coordinates, in ``q`` order."""
        return self.topology.tree.q_names

    @property
    def u_names(self) -> tuple[str, ...]:
        """OpenSim names of the generalized speeds, in ``u`` order."""
        return self.topology.tree.u_names

    @property
    def z_names(self) -> tuple[str, ...]:
        """Names of the auxiliary state variables, in ``z`` order."""
        return self.topology.z_names

    @property
    def d_names(self) -> tuple[str, ...]:
        """Names of the discrete state variables, in ``d`` order."""
        return self.topology.d_names

    @property
    def y_names(self) -> tuple[str, ...]:
        """Names of ``y = (q, u, z)``."""
        return self.q_names + self.u_names + self.z_names

    @property
    def coordinate_paths(self) -> tuple[str, ...]:
        """Coordinate paths in ``u`` order."""
        coords = self.topology.tree.coordinates
        return tuple(sorted(coords, key=lambda p: coords[p].u))

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        """Coordinate names in ``u`` order."""
        return tuple(p.rsplit("/", 1)[-1] for p in self.coordinate_paths)

    @property
    def actuator_names(self) -> tuple[str, ...]:
        """Actuator names, in the order controls are given."""
        return tuple(p.rsplit("/", 1)[-1] for p in self.topology.actuators)

    @property
    def actuator_paths(self) -> tuple[str, ...]:
        """Actuator paths, in the order controls are given."""
        return self.topology.actuators

    @property
    def state_variable_names(self) -> tuple[str, ...]:
        """All continuous state-variable names in OpenSim's order.

        Per coordinate (model order) its ``value`` then ``speed``, then each
        component's other variables.
        """
        tree = self.topology.tree
        names = []
        for p in self.topology.coordinate_paths:
            info = tree.coordinates.get(p)
            if info is None:
                continue
            if info.q >= 0:
                names.append(tree.q_names[info.q])
            names.append(tree.u_names[info.u])
        return tuple(names) + self.z_names

    def find(self, path: str) -> Component:
        """The component at ``path`` in this system's model."""
        return self.model.find(path)

    def coordinate_path(self, name: str) -> str:
        """The path of a coordinate given its name or path."""
        coords = self.topology.tree.coordinates
        if name in coords:
            return name
        hits = [p for p in coords if p.rsplit("/", 1)[-1] == name]
        if len(hits) != 1:
            raise KeyError(
                f"no coordinate named {name!r}"
                if not hits
                else f"coordinate name {name!r} is ambiguous: {hits}; use its path"
            )
        return hits[0]

    # -- states --------------------------------------------------------------------------

    def default_state(self, t: float = 0.0) -> State:
        """The state given by the model's default properties (OpenSim initState).

        Coordinates take ``default_value``/``default_speed_value``; a quaternion joint
        converts its rotational defaults (body-fixed XYZ angles) to a quaternion; z and
        discrete variables come from each component's defaults.
        """
        dtype = jnp.result_type(float)
        q, u = self.default_coordinates()
        z = _component_defaults(self.model, self.topology.z_slices, "default_z")
        d = _component_defaults(self.model, self.topology.d_slices, "default_discrete")
        return State(t=jnp.asarray(t, dtype), q=q, u=u, z=_concatenate(z, dtype), d=_concatenate(d, dtype))

    def default_coordinates(self) -> tuple:
        """The generalized coordinates and speeds of ``default_state`` alone, without the
        components' state variables (cheaper where only the pose matters).

        **Returns:** ``(q (nq,), u (nu,))`` in rad, m, rad/s and m/s (quaternions for
        ball and free joints).
        """
        dtype = jnp.result_type(float)
        tree = self.topology.tree
        quat_angles: dict[int, list] = {}
        q_at, q_values, u_at, u_values = [], [], [], []
        for path, info in tree.coordinates.items():
            c = self.model.find(path)
            u_at.append(info.u)
            u_values.append(c.default_speed_value)
            if info.q >= 0:
                q_at.append(info.q)
                q_values.append(c.default_value)
            else:
                quat_angles.setdefault(info.mob, [0.0, 0.0, 0.0])[info.col] = jnp.asarray(c.default_value, dtype)
        q = jnp.zeros(tree.nq, dtype).at[np.asarray(q_at, int)].set(_concatenate(q_values, dtype))
        u = jnp.zeros(tree.nu, dtype).at[np.asarray(u_at, int)].set(_concatenate(u_values, dtype))
        for m in tree.quat_q:
            mob = int(np.searchsorted(tree.q_start, m, side="right") - 1)
            angles = jnp.stack([jnp.asarray(a, dtype) for a in quat_angles.get(mob, [0.0, 0.0, 0.0])])
            q = q.at[m : m + 4].set(spatial.rotation_to_quat(spatial.xyz_body_rotation(angles)))
        return q, u

    def set_coordinates(self, state: State, values: dict | None = None, speeds: dict | None = None) -> State:
        """A state with some coordinate values and speeds replaced.

        **Arguments:** ``values``/``speeds``: ``{coordinate name or path: value}``.

        **Raises:** ``KeyError`` for unknown coordinates; ``ModelError`` when setting the
        value of a rotational coordinate of a quaternion joint (set ``q`` directly).
        """
        q, u = state.q, state.u
        coords = self.topology.tree.coordinates
        for name, v in (values or {}).items():
            info = coords[self.coordinate_path(name)]
            if info.q < 0:
                raise ModelError(self.coordinate_path(name), "this coordinate is part of a quaternion; set q directly")
            q = q.at[info.q].set(v)
        for name, v in (speeds or {}).items():
            u = u.at[coords[self.coordinate_path(name)].u].set(v)
        return State(t=state.t, q=q, u=u, z=state.z, d=state.d)

    def _locate(self, name: str) -> tuple[str, int]:
        for field, names in (("q", self.q_names), ("u", self.u_names), ("z", self.z_names), ("d", self.d_names)):
            if name in names:
                return field, names.index(name)
        raise KeyError(f"no state variable named {name!r}")

    def get_state_variable(self, state: State, name: str):
        """The value of the state variable called ``name`` (an OpenSim name)."""
        field, i = self._locate(name)
        return getattr(state, field)[..., i]

    def set_state_variable(self, state: State, name: str, value) -> State:
        """A state with the variable called ``name`` set to ``value``."""
        field, i = self._locate(name)
        return state.replace(**{field: getattr(state, field).at[..., i].set(value)})

    def state_variables(self, state: State) -> dict[str, Any]:
        """All state variables by name (q, u, z and discrete)."""
        out = {}
        for field, names in (("q", self.q_names), ("u", self.u_names), ("z", self.z_names), ("d", self.d_names)):
            arr = getattr(state, field)
            out.update({n: arr[..., i] for i, n in enumerate(names)})
        return out

    def model_from_state(self, state: State) -> Component:
        """The model with default properties set from ``state`` (OpenSim
        ``setPropertiesFromState``): coordinates' default values and speeds, and each
        component's z and discrete defaults. Rebuilding it and taking
        ``default_state()`` gives ``state`` back (time aside)."""
        model = self.model
        tree = self.topology.tree
        for path, info in tree.coordinates.items():
            changes = {"default_speed_value": state.u[info.u]}
            if info.q >= 0:
                changes["default_value"] = state.q[info.q]
            model = model.set(path, **changes)
        for path, (a, b) in self.topology.z_slices.items():
            dslice = self.topology.d_slices.get(path, (0, 0))
            model = model.update(
                path, lambda c, a=a, b=b, ds=dslice: c.with_defaults_from_state(state.z[a:b], state.d[ds[0] : ds[1]])
            )
        return model
