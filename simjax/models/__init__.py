"""OpenSim 4 models shipped with simjax, reachable by name.

From the opensim-models collection (OpenSim Development Team and the authors in each
file's ``<credits>``), Creative Commons Attribution 3.0 unless a file says
otherwise; see ``README.md`` in this folder. Keep each file's ``<credits>`` and
``<publications>`` when you ship or modify them.

``sj.models.names()`` lists them; ``sj.models.path("double_pendulum")`` is the file;
``sj.models.load("arm26", strict=False)`` reads it with ``load_osim``.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["names", "path", "load", "credits_file"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def names() -> tuple[str, ...]:
    """Names of the shipped models (file names without ``.osim``), sorted."""
    return tuple(sorted(f[:-5] for f in os.listdir(_HERE) if f.endswith(".osim")))


def path(name: str) -> str:
    """The file of the shipped model ``name`` (``"arm26"`` or ``"arm26.osim"``).

    **Raises:** ``KeyError`` naming the available models.
    """
    stem = name[:-5] if name.endswith(".osim") else name
    if stem not in names():
        raise KeyError(f"no shipped model named {name!r}; available: {', '.join(names())}")
    return os.path.join(_HERE, stem + ".osim")


def load(name: str, strict: bool = True):
    """``load_osim(path(name), strict)``: the shipped model as a ``Model``.

    The display meshes the files name are not shipped, so the warning about them
    is not issued.
    """
    from ..io.osim import OsimWarning, load_osim

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*mesh file\(s\) not found", category=OsimWarning)
        return load_osim(path(name), strict=strict)


def credits_file() -> str:
    """The README with the models' credits and licence."""
    return os.path.join(_HERE, "README.md")
