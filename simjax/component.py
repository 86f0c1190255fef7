"""The Component framework: names, paths, properties, sockets, inputs and outputs.

A component is an immutable Equinox module. Its *properties* (time-invariant
parameters such as a body's mass) are array leaves of the pytree, so changing one
is ``eqx.tree_at`` (or ``Model.set``) and gradients flow to it. Everything
structural (its name, the paths its sockets and inputs connect to, flags that
change the topology) is a static field.

Components own subcomponents: any field holding a ``Component`` or a tuple of
them. A component does not know its parent; paths are formed by the root
(``Model``) while walking the tree, exactly as OpenSim forms ``/forceset/biceps``.

Tree code calls methods through the class (``type(c).children(c)``), not the
instance: Equinox turns ``c.children`` into a ``BoundMethod`` pytree, and making
one flattens ``c``'s whole subtree, so a walk or a lookup that did it at every
component would cost time quadratic in the model's size.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import equinox as eqx
import jax
import numpy as np

__all__ = [
    "Stage",
    "ModelError",
    "ModelWarning",
    "model_warning",
    "Component",
    "Set",
    "validate_once",
    "OutputSpec",
    "check_name",
    "prop",
    "flag",
    "socket",
    "input_",
    "output",
    "component_class",
    "join_path",
    "split_path",
    "resolve_path",
]


class Stage(enum.IntEnum):
    """Simbody realization stages, in order (seed: simbody-state-class-reference)."""

    TOPOLOGY = 0
    MODEL = 1
    INSTANCE = 2
    TIME = 3
    POSITION = 4
    VELOCITY = 5
    DYNAMICS = 6
    ACCELERATION = 7
    REPORT = 8


class ModelError(ValueError):
    """A structural or property error in a model.

    The message always names the component path, and where relevant the property
    (or socket) and the offending value.
    """

    def __init__(self, path: str, message: str, *, prop: str | None = None, value: Any = None):
        self.path = path
        self.prop = prop
        self.value = value
        where = f"{path}" + (f" (property '{prop}' = {_fmt(value)})" if prop is not None else "")
        super().__init__(f"{where}: {message}")


class ModelWarning(UserWarning):
    """A property value OpenSim tolerates but that is physically odd (e.g. an inertia
    that violates the triangle inequality): the model loads and runs, with a warning
    naming the component path, the property and the value."""


def model_warning(path: str, message: str, *, prop: str, value: Any) -> None:
    """Issue a ``ModelWarning`` naming ``path``, the property ``prop`` and its ``value``.

    Called from ``Component.validate`` for what OpenSim accepts; errors stay
    ``ModelError``.
    """
    warnings.warn(ModelWarning(f"{path} (property '{prop}' = {_fmt(value)}): {message}"), stacklevel=2)


def _fmt(value: Any) -> str:
    if isinstance(value, (np.ndarray, jax.Array)):
        try:
            value = np.asarray(value).tolist()
        except Exception:  # a tracer
            return repr(value)
    return repr(value)


# -- names and paths -------------------------------------------------------------------

#: the characters OpenSim 4.6 rejects in a component name (Component::finalizeFromProperties)
_FORBIDDEN = set("\\/*+ \t\n")


def check_name(name: Any, where: str = "") -> str:
    """Check a component name against OpenSim 4.6's rules.

    A name OpenSim accepts is accepted: dots and colons (``R.ASIS``, ``a:b``), a
    leading digit, ``null``. As OpenSim, a name must not contain a backslash,
    ``/``, ``*``, ``+``, a space, a tab or a newline. A name equal to ``.`` or ``..``
    is rejected too: it would read as a path element, so no path could reach it.

    **Arguments:** ``name``: the proposed name; ``where``: the parent path, for the
    message.

    **Returns:** the name, unchanged.

    **Raises:** ``ModelError`` naming the component and the offending character.
    """
    loc = where or "/"
    if not isinstance(name, str) or not name:
        raise ModelError(loc, f"a component name must be a non-empty string, got {name!r}")
    bad = sorted(_FORBIDDEN.intersection(name))
    if bad:
        raise ModelError(
            loc,
            f"component name {name!r} must not contain {' '.join(repr(c) for c in bad)} "
            "(OpenSim rejects \\ / * + and whitespace in names)",
        )
    if name in (".", ".."):
        raise ModelError(loc, f"component name {name!r} would read as a path element ('.' or '..')")
    return name


def join_path(parent: str, name: str) -> str:
    """Join a parent path and a child name: ``join_path("/forceset", "biceps")``."""
    return ("" if parent == "/" else parent) + "/" + name


def split_path(path: str) -> list[str]:
    """Split a path into its elements, dropping empty ones."""
    return [p for p in path.split("/") if p]


def resolve_path(path: str, relative_to: str = "/") -> str:
    """Normalize ``path`` (absolute, or relative to the path ``relative_to``).

    ``..`` goes to the parent and ``.`` stays; the result is absolute, without a
    trailing slash (``"/"`` for the root).

    **Raises:** ``ModelError`` if ``..`` climbs above the root.
    """
    parts = [] if path.startswith("/") else split_path(relative_to)
    for p in split_path(path):
        if p == ".":
            continue
        if p == "..":
            if not parts:
                raise ModelError(relative_to, f"path {path!r} climbs above the model root")
            parts.pop()
        else:
            parts.append(p)
    return "/" + "/".join(parts)


# -- declaring attributes --------------------------------------------------------------


def _as_property(x: Any) -> Any:
    """Convert a property value to a float array leaf (jax arrays and tracers pass)."""
    if isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        return x
    if x is None:
        return None
    return np.asarray(x, dtype=np.float64)


def prop(
    default: Any, *, doc: str = "", bounds: tuple[float | None, float | None] | None = None, shape: tuple[int, ...] = ()
):
    """Declare a numeric property: a traced array leaf of the component.

    **Arguments:**

    - ``default``: the default value (float or a sequence of floats).
    - ``doc``: what the property means, with its unit.
    - ``bounds``: optional ``(low, high)`` checked when the model is finalized
      (either may be ``None``).
    - ``shape``: the expected shape, checked when the model is finalized.
    """
    meta = {"property": True, "doc": doc, "bounds": bounds, "shape": shape}
    if isinstance(default, (list, np.ndarray)):
        default = tuple(np.asarray(default, dtype=float).tolist())
    return eqx.field(default=default, converter=_as_property, metadata=meta)


def flag(default: Any, *, doc: str = ""):
    """Declare a structural property (bool, int or str): static, part of the topology.

    Changing one changes the compiled system (as a change of a joint type would).
    """
    return eqx.field(default=default, static=True, metadata={"flag": True, "doc": doc})


def socket(connectee: str, *, doc: str = "", hard: bool = True, many: bool = False):
    """Declare a socket: a typed dependency on another component, by path.

    **Arguments:**

    - ``connectee``: the class name the connectee must be an instance of
      (e.g. ``"PhysicalFrame"``); resolved when the model is built.
    - ``doc``: what the connectee is used for.
    - ``hard``: a hard reference (ArtiSynth §1.2): removing the connectee removes
      this component. A soft reference is pruned instead.
    - ``many``: a list socket (a tuple of paths).

    The value is a path, absolute or relative to the component that owns the socket.
    """
    meta = {"socket": connectee, "doc": doc, "hard": hard, "many": many}
    return eqx.field(default=() if many else "", static=True, metadata=meta)


def input_(value_type: str = "double", *, stage: Stage = Stage.DYNAMICS, many: bool = False, doc: str = ""):
    """Declare an input: a slot connected to outputs of other components.

    The value is a tuple of connection strings ``"path|output[:channel][(alias)]"``;
    a single-value input holds at most one. Inputs are soft references.
    """
    meta = {"input": value_type, "stage": stage, "many": many, "doc": doc}
    return eqx.field(default=(), static=True, metadata=meta)


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """An output declared on a component class.

    ``fn(component, ctx)`` computes the value from an evaluation context (see
    ``simjax.outputs``); ``stage`` is the realization stage it needs.
    """

    name: str
    fn: Callable[[Any, Any], Any]
    stage: Stage
    value_type: str = "double"


def output(stage: Stage, value_type: str = "double", name: str | None = None):
    """Decorator declaring a method ``fn(self, ctx)`` as an output of its component.

    **Arguments:** ``stage``: the stage the value needs; ``value_type``: ``"double"``,
    ``"Vec3"``, ...; ``name``: the output name (defaults to the method name).
    """

    def deco(fn):
        fn._simjax_output = (name or fn.__name__, stage, value_type)
        return fn

    return deco


# -- the component base class ------------------------------------------------------------

_REGISTRY: dict[str, type] = {}
#: Component and its subclasses: ``type(x) in _CLASSES`` is ``isinstance(x, Component)``
#: without the ABC machinery's cost (tree walks test every field)
_CLASSES: set = set()


def component_class(name: str) -> type:
    """The Component subclass registered under a class name (e.g. ``"Body"``)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no component class named {name!r}") from None


@functools.cache
def _class_fields_with(cls, key: str) -> tuple[tuple[str, dataclasses.Field], ...]:
    """``(name, field)`` of ``cls``'s fields whose metadata has ``key``."""
    return tuple((f.name, f) for f in dataclasses.fields(cls) if key in f.metadata)


@functools.cache
def _child_fields(cls) -> tuple[str, ...]:
    """The names of ``cls``'s fields that may hold subcomponents (the non-static ones),
    generic ``components`` last, as OpenSim lists them."""
    fields = sorted(dataclasses.fields(cls), key=lambda f: f.name == "components")
    return tuple(f.name for f in fields if not f.metadata.get("static"))


class Component(eqx.Module):
    """Base class of every model element (OpenSim Component, ArtiSynth ModelComponent).

    **Fields:**

    - ``name``: validated by the ArtiSynth rules, unique among siblings.
    - ``components``: generic subcomponents (OpenSim's ``<components>`` list).

    Subclasses declare properties with ``prop``/``flag``, sockets with ``socket``,
    inputs with ``input_`` and outputs with the ``@output`` decorator.
    """

    name: str = eqx.field(static=True)
    components: tuple = ()
    #: file content kept verbatim for round trips but not modelled (e.g. display
    #: geometry): a tuple of (tag, text) pairs owned by the file readers and writers
    extras: tuple = eqx.field(static=True, default=())

    _outputs: ClassVar[dict[str, OutputSpec]] = {}
    #: the Model set ``Model.add`` puts instances in (None: the model itself)
    set_name: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTRY.setdefault(cls.__name__, cls)
        _CLASSES.add(cls)
        outs: dict[str, OutputSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                spec = getattr(attr, "_simjax_output", None)
                if spec is not None:
                    oname, stage, vtype = spec
                    outs[oname] = OutputSpec(oname, attr, stage, vtype)
        cls._outputs = outs

    def __check_init__(self):
        check_name(self.name)
        if not isinstance(self.components, tuple):
            raise ModelError(self.name, "'components' must be a tuple of Components")

    # -- class-level introspection ------------------------------------------------------

    @classmethod
    def _fields_with(cls, key: str) -> dict[str, dataclasses.Field]:
        return dict(_class_fields_with(cls, key))

    @classmethod
    def property_fields(cls) -> dict[str, dataclasses.Field]:
        """Numeric (traced) properties declared with ``prop``, by name."""
        return cls._fields_with("property")

    @classmethod
    def flag_fields(cls) -> dict[str, dataclasses.Field]:
        """Structural (static) properties declared with ``flag``, by name."""
        return cls._fields_with("flag")

    @classmethod
    def socket_fields(cls) -> dict[str, dataclasses.Field]:
        """Sockets declared with ``socket``, by name."""
        return cls._fields_with("socket")

    @classmethod
    def input_fields(cls) -> dict[str, dataclasses.Field]:
        """Inputs declared with ``input_``, by name."""
        return cls._fields_with("input")

    @classmethod
    def output_specs(cls) -> dict[str, OutputSpec]:
        """Outputs declared with ``@output``, by name."""
        return dict(cls._outputs)

    # -- the ownership tree -------------------------------------------------------------

    def children(self) -> list[Component]:
        """Direct subcomponents, in field order then tuple order (deterministic)."""
        out = []
        values = object.__getattribute__(self, "__dict__")  # (not Equinox's slower attribute access)
        for name in _child_fields(type(self)):
            value = values.get(name)
            if type(value) in _CLASSES:
                out.append(value)
            elif isinstance(value, tuple):
                out.extend(v for v in value if type(v) in _CLASSES)
        return out

    def child(self, name: str) -> Component | None:
        """The direct subcomponent called ``name``, or ``None``."""
        for c in type(self).children(self):
            if c.name == name:
                return c
        return None

    def _child_slot(self, name: str) -> tuple[str, int | None]:
        """The field (and tuple index) that holds the child called ``name``."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name, None)
            if isinstance(value, Component) and value.name == name:
                return f.name, None
            if isinstance(value, tuple):
                for i, v in enumerate(value):
                    if isinstance(v, Component) and v.name == name:
                        return f.name, i
        raise KeyError(name)

    # -- functional updates -------------------------------------------------------------

    def replace(self, **changes: Any) -> Component:
        """A copy with some fields changed (properties converted, names re-checked).

        This is the functional setter: ``body.replace(mass=2.0)``.
        """
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise ModelError(self.name, f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        new = object.__new__(type(self))
        for key, value in vars(self).items():  # keeps Equinox's own bookkeeping too
            object.__setattr__(new, key, value)
        for f in dataclasses.fields(self):
            if f.name in changes:
                value = changes[f.name]
                if "property" in f.metadata:
                    value = _as_property(value)
                object.__setattr__(new, f.name, value)
        new.__check_init__()
        return new

    def validate(self, path: str) -> None:
        """Check property values (OpenSim ``extendFinalizeFromProperties``).

        The base implementation checks declared shapes and bounds of properties whose
        values are concrete. Subclasses extend it and raise ``ModelError``.
        """
        for name, f in self.property_fields().items():
            value = getattr(self, name)
            if value is None or isinstance(value, jax.core.Tracer):
                continue
            arr = np.asarray(value)
            shape = f.metadata.get("shape", ())
            if shape is not None and arr.shape != tuple(shape):
                raise ModelError(path, f"expected shape {tuple(shape)}, got {arr.shape}", prop=name, value=value)
            if np.any(np.isnan(arr)):
                raise ModelError(path, "must not be NaN", prop=name, value=value)
            bounds = f.metadata.get("bounds")
            if bounds:
                lo, hi = bounds
                if lo is not None and np.any(arr < lo):
                    raise ModelError(path, f"must be >= {lo}", prop=name, value=value)
                if hi is not None and np.any(arr > hi):
                    raise ModelError(path, f"must be <= {hi}", prop=name, value=value)

    # -- state variables (overridden by components that own some) -------------------------

    def z_variables(self) -> tuple[str, ...]:
        """Names of the continuous (z) state variables this component owns."""
        return ()

    def default_z(self) -> Any:
        """Default values of this component's z variables (from its properties)."""
        return np.zeros(len(self.z_variables()))

    def discrete_variables(self) -> tuple[str, ...]:
        """Names of the discrete state variables this component owns."""
        return ()

    def default_discrete(self) -> Any:
        """Default values of this component's discrete variables."""
        return np.zeros(len(self.discrete_variables()))

    def prune_reference(self, name: str, ref: str) -> Component:
        """A copy without the soft reference ``ref`` in socket or input ``name``.

        Called by ``Model.remove``; components whose other fields are aligned with a
        list socket (e.g. a controller's functions) override it.
        """
        value = getattr(self, name)
        if isinstance(value, tuple):
            return self.replace(**{name: tuple(v for v in value if v != ref)})
        return self.replace(**{name: ""})

    def with_defaults_from_state(self, z: Any, d: Any) -> Component:
        """Inverse of ``default_z``: set default properties from state values.

        (OpenSim ``extendSetPropertiesFromState``.) The base component owns none.
        """
        return self


_CLASSES.add(Component)


class Set(Component):
    """A named container of components (OpenSim ``Set``: bodyset, forceset, ...)."""

    objects: tuple = ()

    def __check_init__(self):
        super().__check_init__()
        if not isinstance(self.objects, tuple):
            raise ModelError(self.name, "'objects' must be a tuple of Components")


#: ``(id(component), path) -> (weak reference, recorded warnings)`` of the validations
#: done: components are immutable, so one validated at a path stays valid there
_VALIDATED: dict = {}
_VALIDATED_LIMIT = 20_000


def validate_once(comp: Component, path: str) -> tuple:
    """``comp.validate(path)``, done once per component object and path.

    A model edit (``add``, ``remove``, ``set``) shares its unchanged subcomponents with
    the model it came from, so building the edited model validates only what changed.

    **Returns:** the warnings the validation issued (``warnings.WarningMessage``s,
    recorded, not shown), the same on every call. **Raises:** ``ModelError`` as
    ``validate``, every time (a failed validation is not remembered).
    """
    key = (id(comp), path)
    hit = _VALIDATED.get(key)
    if hit is not None and hit[0]() is comp:
        return hit[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        type(comp).validate(comp, path)  # (through the class: see the module docstring)
    if len(_VALIDATED) >= _VALIDATED_LIMIT:  # forget the components that are gone
        for k in [k for k, (ref, _) in _VALIDATED.items() if ref() is None]:
            del _VALIDATED[k]
        if len(_VALIDATED) >= _VALIDATED_LIMIT:
            _VALIDATED.clear()
    _VALIDATED[key] = (weakref.ref(comp), tuple(caught))
    return _VALIDATED[key][1]


def walk(root: Component, path: str = "/") -> Iterator[tuple[str, Component]]:
    """Yield ``(path, component)`` for ``root``'s descendants in pre-order.

    The root itself is not yielded; its children's paths start at ``path``.
    """
    for c in type(root).children(root):
        p = join_path(path, c.name)
        yield p, c
        yield from walk(c, p)
