"""OpenSim tool setup files: read one, resolve its paths, and run the tool it names.

A setup file is an ``<OpenSimDocument>`` holding one tool element
(``<InverseKinematicsTool>``, ``<InverseDynamicsTool>``, ``<ScaleTool>``,
``<AnalyzeTool>``, ...). ``read_setup(path)`` gives a ``Setup``: typed access to the
tool's properties, with every relative path resolved against the setup file's own
folder, as OpenSim does (it changes into that folder while a tool runs). A tool
records the properties it reads; ``Setup.report_unused`` then lists, once and by
name, those the file gives that simjax does not support, as the ``.osim`` reader
does for models.

``run(path)`` reads the setup and calls the runner registered for its tool element
(``register_tool``): each tool module registers its own.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable

import jax
import numpy as np

from ..io.osim._xml import Node, XMLSyntaxError, parse
from ..io.outputs import discarding_outputs

__all__ = ["Setup", "SetupError", "SetupWarning", "read_setup", "register_tool", "run", "time_range", "TOOLS"]


class SetupError(ValueError):
    """A problem with a setup file: the message names the file, the property and the
    value (or the path as resolved from the setup)."""


class SetupWarning(UserWarning):
    """What OpenSim would warn about in a setup (an unsupported property, a marker
    named in the setup but absent from the model or the data, ...)."""


#: OpenSim's words for "no value" in a path or name property
_UNASSIGNED = ("", "Unassigned", "unassigned", "null", "NULL")


@dataclasses.dataclass
class Setup:
    """One tool element of a setup file.

    **Fields:** ``file`` (the setup file's path), ``tool`` (the element's tag, e.g.
    ``"InverseKinematicsTool"``), ``name`` (its ``name`` attribute, ``""`` if none),
    ``node`` (the element), ``used`` (the properties read so far).
    """

    file: str
    tool: str
    name: str
    node: Node
    used: set = dataclasses.field(default_factory=set)

    @property
    def folder(self) -> str:
        """The folder relative paths are resolved against (the setup file's)."""
        return os.path.dirname(os.path.abspath(self.file))

    def has(self, prop: str) -> bool:
        """Whether the file gives the property ``prop`` (a non-empty value)."""
        node = self.node.find(prop)
        return node is not None and (node.text.strip() not in _UNASSIGNED or bool(node.children))

    def element(self, prop: str) -> Node | None:
        """The element of the property ``prop`` (``None`` if absent)."""
        self.used.add(prop)
        return self.node.find(prop)

    def text(self, prop: str, default: str = "") -> str:
        """The property's text, stripped; ``default`` when absent or ``Unassigned``."""
        node = self.element(prop)
        value = node.text.strip() if node is not None else ""
        return default if value in _UNASSIGNED else value

    def words(self, prop: str) -> list[str]:
        """The property's text split on whitespace (an OpenSim array of strings)."""
        return self.text(prop).split()

    def numbers(self, prop: str, default=None) -> np.ndarray | None:
        """The property's numbers (``Inf``/``-Inf``/``NaN`` as OpenSim writes them).

        **Raises:** ``SetupError`` naming the file, property and value if one is not
        a number.
        """
        text = self.text(prop)
        if not text:
            return None if default is None else np.asarray(default, float)
        try:
            return np.asarray([float(w) for w in text.split()], float)
        except ValueError:
            raise self.error(prop, text, "expected numbers") from None

    def number(self, prop: str, default: float | None = None) -> float | None:
        """The property as one number (``default`` when absent)."""
        values = self.numbers(prop)
        if values is None:
            return default
        if values.size != 1:
            raise self.error(prop, self.text(prop), "expected one number")
        return float(values[0])

    def flag(self, prop: str, default: bool = False) -> bool:
        """The property as a boolean (``true``/``false``)."""
        text = self.text(prop).lower()
        if not text:
            return default
        if text not in ("true", "false"):
            raise self.error(prop, text, "expected true or false")
        return text == "true"

    def path(self, prop: str, must_exist: bool = False) -> str | None:
        """The property as a path resolved against the setup's folder (``None`` when
        absent or ``Unassigned``).

        **Raises:** ``FileNotFoundError`` naming the path as resolved, if
        ``must_exist`` and there is no such file.
        """
        text = self.text(prop)
        if not text:
            return None
        resolved = os.path.normpath(os.path.join(self.folder, text))
        if must_exist and not os.path.exists(resolved):
            raise FileNotFoundError(
                f"{self.file}: <{prop}> names {text!r}, resolved from the setup's folder to "
                f"{resolved!r}, which does not exist"
            )
        return resolved

    def existing_paths(self, prop: str) -> list[str]:
        """The property's words (e.g. ``force_set_files``) as paths resolved against the
        setup's folder, each of which must exist.

        **Raises:** ``SetupError`` naming the property, the word and the resolved path.
        """
        out = []
        for word in self.words(prop):
            resolved = os.path.normpath(os.path.join(self.folder, word))
            if not os.path.exists(resolved):
                raise self.error(prop, word, f"resolved to {resolved!r}, which does not exist")
            out.append(resolved)
        return out

    def output_path(self, file_prop: str, directory_prop: str = "results_directory") -> str | None:
        """Where the output named by ``file_prop`` goes: inside ``results_directory``
        (resolved against the setup's folder) unless it is absolute."""
        name = self.text(file_prop)
        if not name:
            return None
        directory = self.path(directory_prop) or self.folder
        return os.path.normpath(os.path.join(directory, name))

    def error(self, prop: str, value, message: str) -> SetupError:
        """A ``SetupError`` naming this file, the property and its value."""
        return SetupError(f"{self.file}: <{self.tool}> property <{prop}> = {value!r}: {message}")

    def warn(self, message: str) -> None:
        """A ``SetupWarning`` prefixed with this file."""
        warnings.warn(SetupWarning(f"{self.file}: {message}"), stacklevel=3)

    def report_unused(self, ignored=()) -> list[str]:
        """Warn once, listing by name the properties the file gives that the tool did
        not read (and that are not in ``ignored``: properties whose value simjax
        honours implicitly).

        **Returns:** the names listed.
        """
        unused = [
            c.tag for c in self.node.children if c.tag not in self.used and c.tag not in ignored and self.has(c.tag)
        ]
        if unused:
            self.warn(
                f"<{self.tool}>: {len(unused)} propert{'y' if len(unused) == 1 else 'ies'} simjax does not "
                f"support (ignored): {', '.join(unused)}"
            )
        return unused


def _parse_file(path: str):
    """The root element of the XML file ``path``. **Raises:** ``SetupError`` naming the
    file and the line of malformed XML."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        return parse(data)
    except XMLSyntaxError as e:
        raise SetupError(f"{path}:{e.line}: {e}") from None


def read_element(path: str | os.PathLike, tag: str, what: str, hint: str = "") -> Node:
    """The ``<tag>`` element of an OpenSim XML file: the one inside its
    ``<OpenSimDocument>``, or the file's root.

    **Arguments:** ``path``: the file; ``tag``: e.g. ``"ExternalLoads"``; ``what``: the
    file's role, for messages (``"external loads"``); ``hint``: added to the message
    when the element is missing.

    **Raises:** ``FileNotFoundError`` naming the file; ``SetupError`` for malformed XML
    (the file and line) or a file without the element.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    root = _parse_file(path)
    node = root.find(tag) if root.tag == "OpenSimDocument" else root
    if node is None or node.tag != tag:
        raise SetupError(f"{path}: no <{tag}> element" + (f" ({hint})" if hint else ""))
    return node


def read_setup(path: str | os.PathLike) -> Setup:
    """Read an OpenSim tool setup file.

    **Arguments:** ``path``: the ``.xml`` setup file.

    **Returns:** a ``Setup`` of its tool element.

    **Raises:** ``FileNotFoundError``; ``SetupError`` for malformed XML or a document
    without a tool element.
    """
    path = os.fspath(path)
    root = _parse_file(path)
    if root.tag != "OpenSimDocument":
        node = root
    else:
        if len(root.children) != 1:
            raise SetupError(
                f"{path}: expected one tool element in <OpenSimDocument>, found {[c.tag for c in root.children]}"
            )
        node = root.children[0]
    return Setup(path, node.tag, node.attrib.get("name", ""), node)


#: tool element tag -> runner ``fn(setup) -> dict of output paths``
TOOLS: dict[str, Callable[[Setup], dict]] = {}


def register_tool(tag: str, runner: Callable[[Setup], dict]) -> None:
    """Teach ``run`` a tool: ``runner(setup)`` runs it and returns ``{what: path}``
    of the files it wrote."""
    TOOLS[tag] = runner


def run(setup_path: str | os.PathLike) -> dict:
    """Run the OpenSim tool a setup file describes, writing OpenSim's output files
    where OpenSim would.

    **Arguments:** ``setup_path``: the setup ``.xml``.

    **Returns:** ``{output: path}`` of the files written.

    In a multi-process JAX program (after ``jax.distributed.initialize``) every process
    calls ``run`` on the same setup: each runs the tool, its batches sharded over all
    processes' devices, and process 0 alone writes the files (the others return the
    same paths).

    **Raises:** ``SetupError`` for an unknown tool (listing the supported ones) or a
    bad property.
    """
    # (every tool module registers itself when the package simjax.tools, which holds
    # this module, is imported)
    setup = read_setup(setup_path)
    runner = TOOLS.get(setup.tool)
    if runner is None:
        raise SetupError(
            f"{setup.file}: <{setup.tool}> is not a tool simjax runs; supported: {', '.join(sorted(TOOLS))}"
        )
    # in a multi-process run every process runs the tool (its batches sharded over all
    # processes' devices) and process 0 alone writes the files
    with discarding_outputs(jax.process_count() > 1 and jax.process_index() != 0):
        return runner(setup)


def time_range(setup: Setup, times: np.ndarray, source: str) -> tuple[int, int]:
    """The frames of ``times`` inside the setup's ``time_range`` (all when absent).

    **Returns:** ``(first, stop)`` indices.

    **Raises:** ``SetupError`` naming the range and the data's span when they do not
    overlap.
    """
    rng = setup.numbers("time_range")
    if rng is None:
        return 0, len(times)
    if rng.size != 2 or not rng[0] <= rng[1]:
        raise setup.error("time_range", setup.text("time_range"), "expected two increasing times")
    lo, hi = rng
    eps = 1e-9 * max(1.0, abs(hi))
    keep = np.nonzero((times >= lo - eps) & (times <= hi + eps))[0]
    if keep.size == 0:
        raise setup.error(
            "time_range", setup.text("time_range"), f"outside the data of {source} ({times[0]:g} to {times[-1]:g} s)"
        )
    return int(keep[0]), int(keep[-1]) + 1
