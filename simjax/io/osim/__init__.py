"""Read and write OpenSim 4 ``.osim`` model files.

- ``load_osim(path, strict=True)`` / ``loads_osim(text)``: a ``Model`` whose
  component paths, state-variable and output names are OpenSim's;
- ``save_osim(model, path)`` / ``dumps_osim(model)``: OpenSim 4.6 XML;
- ``register(osim_class, cls, ...)`` / ``register_function(...)``: teach both a new
  component or Function class (see ``simjax.io.osim.registry``);
- ``OsimError``, ``UnsupportedContentError``, ``OsimWarning``.

Modules: ``_xml`` (element tree with line numbers), ``registry`` (class mapping and
its defaults), the registrations of simjax's classes (``builtin``: bodies, joints,
frames, constraints, controllers, functions; ``forces``, ``muscles``, ``wrapping``,
``probes``), ``reader``, ``writer``, ``validate`` (simjax against OpenSim on the same
file).
"""

# (the registrations: importing them teaches the reader and the writer every class)
from . import builtin as _builtin  # noqa: F401
from . import forces as _forces  # noqa: F401
from . import muscles as _muscles  # noqa: F401
from . import probes as _probes  # noqa: F401
from . import wrapping as _wrapping  # noqa: F401
from .errors import OsimError, OsimWarning, Unsupported, UnsupportedContentError
from .reader import LoadReport, load_osim, loads_osim, read_osim
from .registry import (
    ComponentIO,
    FunctionIO,
    ReadContext,
    SkipComponent,
    WriteContext,
    component_io,
    function_io,
    register,
    register_function,
    registered_classes,
)
from .writer import dumps_osim, save_osim

__all__ = [
    "load_osim",
    "loads_osim",
    "read_osim",
    "LoadReport",
    "save_osim",
    "dumps_osim",
    "register",
    "register_function",
    "registered_classes",
    "component_io",
    "function_io",
    "ComponentIO",
    "FunctionIO",
    "ReadContext",
    "WriteContext",
    "SkipComponent",
    "OsimError",
    "OsimWarning",
    "Unsupported",
    "UnsupportedContentError",
]
