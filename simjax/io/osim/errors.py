"""Errors and warnings of the ``.osim`` reader and writer.

Every problem found in a file names the file, the line of the offending element and
the OpenSim path of the component it belongs to (``/jointset/r_elbow/r_elbow_flex``),
and where relevant the property and its value.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from typing import Any

from ...component import ModelError

__all__ = ["OsimError", "Unsupported", "UnsupportedContentError", "OsimWarning", "warn"]


class OsimError(ModelError):
    """A problem in an ``.osim`` file (or in a model that cannot be written as one).

    **Attributes:** ``file``, ``line`` (0 when unknown), ``path`` (component path),
    ``prop`` and ``value`` (the property involved, if any).
    """

    def __init__(self, file: str, line: int, path: str, message: str, *, prop: str | None = None, value: Any = None):
        self.file = str(file)
        self.line = int(line or 0)
        self.path = path
        self.prop = prop
        self.value = value
        where = path or ""
        if prop is not None:
            where += f" (property '{prop}' = {value!r})"
        loc = f"{self.file}:{self.line}" if self.line else self.file
        ValueError.__init__(self, f"{loc}: {where}: {message}" if where else f"{loc}: {message}")

    def __reduce__(self):
        return (type(self), (self.file, self.line, self.path, str(self)), {})


@dataclasses.dataclass(frozen=True)
class Unsupported:
    """One piece of file content simjax does not model.

    ``what``: the OpenSim class (or element tag); ``path``: where it is;
    ``line``; ``reason``; ``skippable``: whether ``strict=False`` may drop it (content
    the skeleton depends on, such as an unknown joint type, never is).
    """

    what: str
    path: str
    line: int
    reason: str = ""
    skippable: bool = True

    def __str__(self) -> str:
        extra = f": {self.reason}" if self.reason else ""
        return f"line {self.line}: {self.what} at {self.path}{extra}"


class UnsupportedContentError(OsimError):
    """The file holds content simjax cannot model (yet); ``items`` lists all of it."""

    def __init__(self, file: str, items: list[Unsupported], hint: str = ""):
        self.items = list(items)
        listing = "\n".join(f"  {u}" for u in self.items)
        message = f"{len(self.items)} unsupported element(s){hint}:\n{listing}"
        super().__init__(file, self.items[0].line if self.items else 0, "", message)

    def __reduce__(self):
        return (type(self), (self.file, self.items), {})


class OsimWarning(UserWarning):
    """Content skipped with ``strict=False``, or missing display files (meshes)."""


_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(os.path.dirname(_HERE))


def warn(message: str) -> None:
    """Issue an ``OsimWarning`` attributed to the first caller outside simjax."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame = frame.f_back
        level += 1
    warnings.warn(message, OsimWarning, stacklevel=level)
