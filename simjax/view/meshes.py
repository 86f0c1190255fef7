"""Mesh files: where OpenSim looks for them, and reading them with VTK.

OpenSim's ``Mesh`` names a file (``mesh_file``) that it looks for, in order: as given
(an absolute path), beside the model file, in a ``Geometry/`` folder beside it, in the
folders added by the user (``ModelVisualizer::addDirToGeometrySearchPaths``), and in
the installation's geometry folder. ``mesh_search_dirs`` lists the same folders,
simjax's shipped ``simjax/models/Geometry`` standing for the installation's.

Files are read with VTK (``pip install vtk``, part of ``simjax[view]``): ``.vtp``
(VTK XML polydata, what OpenSim ships), ``.stl``, ``.obj`` and ``.ply``; polygons are
triangulated. VTK is imported on first use, so ``import simjax`` does not need it.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from .shapes import TriangleMesh

__all__ = ["GEOMETRY_DIR", "mesh_search_dirs", "find_mesh_file", "read_mesh", "decimate", "MeshReadError"]

#: the folder of the meshes shipped with simjax (those the shipped models name)
GEOMETRY_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "Geometry")


class MeshReadError(ValueError):
    """A mesh file that exists but cannot be read (its path and the reason)."""


def mesh_search_dirs(model_file: str | os.PathLike | None = None, geometry_path=()) -> tuple[str, ...]:
    """The folders searched for mesh files, in OpenSim's order.

    **Arguments:** ``model_file``: the ``.osim`` file the model came from (``None``:
    no model folder); ``geometry_path``: a folder or a sequence of folders the user adds.

    **Returns:** the folders: the model's, its ``Geometry/``, the user's, then
    ``GEOMETRY_DIR``.
    """
    dirs = []
    if model_file is not None:
        base = os.path.dirname(os.path.abspath(os.fspath(model_file)))
        dirs += [base, os.path.join(base, "Geometry")]
    if isinstance(geometry_path, (str, os.PathLike)):
        geometry_path = (geometry_path,)
    dirs += [os.fspath(d) for d in geometry_path]
    dirs.append(GEOMETRY_DIR)
    return tuple(dict.fromkeys(os.path.normpath(d) for d in dirs))


def find_mesh_file(name: str, search_dirs) -> str | None:
    """The file a ``mesh_file`` value names, or ``None`` when no folder has it.

    **Arguments:** ``name``: the value (a file name, a relative or an absolute path);
    ``search_dirs``: the folders to search, in order (``mesh_search_dirs``).

    **Returns:** an absolute path, or ``None``.
    """
    if os.path.isabs(name):
        return name if os.path.isfile(name) else None
    for d in search_dirs:
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def _vtk():
    try:
        from vtkmodules import vtkFiltersCore, vtkIOGeometry, vtkIOPLY, vtkIOXML
        from vtkmodules.util import numpy_support
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading mesh files needs VTK: pip install 'simjax[view]' (or pip install vtk)") from e
    return vtkIOXML, vtkIOGeometry, vtkIOPLY, vtkFiltersCore, numpy_support


def _polydata_to_mesh(poly, path: str) -> TriangleMesh:
    _, _, _, filters, nps = _vtk()
    tri = filters.vtkTriangleFilter()
    tri.SetInputData(poly)
    tri.PassVertsOff()
    tri.PassLinesOff()
    tri.Update()
    out = tri.GetOutput()
    if out.GetPoints() is None:
        raise MeshReadError(f"{path}: the file has no points")
    vertices = nps.vtk_to_numpy(out.GetPoints().GetData()).astype(float).reshape(-1, 3)
    polys = out.GetPolys()
    conn = nps.vtk_to_numpy(polys.GetConnectivityArray()).astype(np.int64)
    offsets = nps.vtk_to_numpy(polys.GetOffsetsArray()).astype(np.int64)
    if len(offsets) > 1 and np.any(np.diff(offsets) != 3):
        raise MeshReadError(f"{path}: polygons could not all be split into triangles")
    return TriangleMesh(vertices, conn.reshape(-1, 3).astype(np.int32))


@functools.lru_cache(maxsize=256)
def _read_cached(path: str, mtime: float) -> TriangleMesh:
    io_xml, io_geom, io_ply, _, _ = _vtk()
    ext = os.path.splitext(path)[1].lower()
    readers = {
        ".vtp": io_xml.vtkXMLPolyDataReader,
        ".stl": io_geom.vtkSTLReader,
        ".obj": io_geom.vtkOBJReader,
        ".ply": io_ply.vtkPLYReader,
    }
    if ext not in readers:
        raise MeshReadError(f"{path}: unsupported mesh format {ext!r} (simjax reads .vtp, .stl, .obj and .ply)")
    reader = readers[ext]()
    reader.SetFileName(path)
    reader.Update()
    poly = reader.GetOutput()
    if poly is None or poly.GetNumberOfPoints() == 0:
        raise MeshReadError(f"{path}: no points could be read (not a {ext} file, or an empty one)")
    return _polydata_to_mesh(poly, path)


def read_mesh(path: str | os.PathLike) -> TriangleMesh:
    """Read a mesh file (``.vtp``, ``.stl``, ``.obj``, ``.ply``) with VTK, its polygons
    split into triangles. Results are cached per file and modification time.

    **Arguments:** ``path``: the file.

    **Returns:** a ``TriangleMesh`` (vertices in the file's units, m for OpenSim's).

    **Raises:** ``FileNotFoundError``; ``MeshReadError`` naming the file for an
    unsupported or unreadable one.
    """
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no mesh file {path!r}")
    return _read_cached(path, os.path.getmtime(path))


def decimate(mesh: TriangleMesh, max_faces: int) -> TriangleMesh:
    """A coarser copy of ``mesh`` with at most about ``max_faces`` triangles (VTK's
    quadric decimation), for fast drawing (videos); the mesh itself when it is small.

    **Arguments:** ``mesh``; ``max_faces``: the wanted number of triangles.

    **Returns:** a ``TriangleMesh``.
    """
    if mesh.n_faces <= max_faces or mesh.n_faces < 8:
        return mesh
    _, _, _, filters, nps = _vtk()
    from vtkmodules.vtkCommonCore import vtkPoints
    from vtkmodules.vtkCommonDataModel import vtkCellArray, vtkPolyData

    points = vtkPoints()
    points.SetData(nps.numpy_to_vtk(np.ascontiguousarray(mesh.vertices, float), deep=True))
    cells = vtkCellArray()
    offsets = nps.numpy_to_vtkIdTypeArray(np.arange(0, 3 * mesh.n_faces + 1, 3, dtype=np.int64), deep=True)
    conn = nps.numpy_to_vtkIdTypeArray(np.ascontiguousarray(mesh.faces.reshape(-1), np.int64), deep=True)
    cells.SetData(offsets, conn)
    poly = vtkPolyData()
    poly.SetPoints(points)
    poly.SetPolys(cells)
    dec = filters.vtkQuadricDecimation()
    dec.SetInputData(poly)
    dec.SetTargetReduction(float(1.0 - max_faces / mesh.n_faces))
    dec.Update()
    return _polydata_to_mesh(dec.GetOutput(), "<decimated mesh>")
