"""OpenSim 4 models shipped with simjax, reachable by name.

From the opensim-models collection (OpenSim Development Team and the authors in each
file's ``<credits>``), Creative Commons Attribution 3.0 unless a file says
otherwise; see ``README.md`` in this folder. Keep each file's ``<credits>`` and
``<publications>`` when you ship or modify them.

``sj.models.names()`` lists them; ``sj.models.path("double_pendulum")`` is the file;
``sj.models.load("arm26", strict=False)`` reads it with ``load_osim``.

``pipelines/`` holds OpenSim's example pipelines (markers, force plates and the tools'
setup files, laid out as OpenSim ships them): ``sj.models.pipeline_path(name)`` is one's
folder, ``sj.models.copy_pipeline(name, folder)`` a copy where the tools may write.
"""

from __future__ import annotations

import os
import shutil
import warnings

__all__ = ["names", "path", "resolve", "load", "credits_file", "pipeline_names", "pipeline_path", "copy_pipeline"]

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


def resolve(model: str) -> str:
    """An existing file path as it is, else the file of the shipped model of that name.

    **Raises:** ``FileNotFoundError`` naming both possibilities.
    """
    if os.path.isfile(model):
        return model
    try:
        return path(model)
    except KeyError:
        raise FileNotFoundError(
            f"no file {model!r}, and no shipped model of that name (shipped: {', '.join(names())})"
        ) from None


def load(name: str, strict: bool = True):
    """``load_osim(path(name), strict)``: the shipped model as a ``Model``.

    The display meshes the files name are shipped in ``Geometry/`` (for
    ``simjax.view``); the reader's warning about missing meshes is not issued.
    """
    from ..io.osim import OsimWarning, load_osim

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*mesh file\(s\) not found", category=OsimWarning)
        return load_osim(path(name), strict=strict)


def credits_file() -> str:
    """The README with the models' credits and licence."""
    return os.path.join(_HERE, "README.md")


def pipeline_names() -> tuple[str, ...]:
    """Names of the shipped pipelines (folders of ``pipelines/``), sorted."""
    root = os.path.join(_HERE, "pipelines")
    return tuple(sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))))


def pipeline_path(name: str) -> str:
    """The folder of the shipped pipeline ``name`` (e.g. ``"Gait10dof18musc"``).

    **Raises:** ``KeyError`` naming the available pipelines.
    """
    if name not in pipeline_names():
        raise KeyError(f"no shipped pipeline named {name!r}; available: {', '.join(pipeline_names())}")
    return os.path.join(_HERE, "pipelines", name)


def copy_pipeline(name: str, folder: str | os.PathLike, overwrite: bool = False) -> str:
    """Copy the shipped pipeline ``name`` to ``folder/name``, so that its setup files run
    there and write their results beside them.

    **Arguments:** ``name``: the pipeline; ``folder``: where to put the copy;
    ``overwrite``: replace an existing ``folder/name`` (its results included).

    **Returns:** the copy's folder.

    **Raises:** ``FileExistsError`` naming ``folder/name`` when it exists and
    ``overwrite`` is false.
    """
    dest = os.path.join(os.fspath(folder), name)
    if os.path.exists(dest):
        if not overwrite:
            raise FileExistsError(f"{dest!r} exists; pass overwrite=True to replace it and its results")
        shutil.rmtree(dest)
    shutil.copytree(pipeline_path(name), dest)
    return dest
