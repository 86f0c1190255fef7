"""A sweep's output folder: one Parquet file a finished chunk, written atomically.

Each chunk is written to a hidden temporary name (``.chunk-000003.parquet.tmp``) and
renamed to ``chunk-000003.parquet`` once complete, so a file of that name is always a
whole chunk: a restart skips it, and a killed write leaves only a temporary file,
removed on the next start. The folder's ``_sweep.json`` records the sweep's
fingerprint, so a restart refuses a folder of a different sweep. pyarrow and pandas
skip names that start with ``.`` or ``_``: ``pandas.read_parquet(folder)`` and
``pyarrow.dataset.dataset(folder)`` read the chunks as one table.
"""

from __future__ import annotations

import json
import os

import numpy as np

__all__ = [
    "chunk_path",
    "finished_chunks",
    "prepare_folder",
    "write_chunk",
    "read_sweep",
    "write_trajectories",
    "read_trajectories",
]

#: the subfolder of a sweep's trajectories (pyarrow and pandas skip it, by its "_", when
#: they read the sweep's rows)
TRAJECTORIES = "_trajectories"

_MANIFEST = "_sweep.json"


def chunk_path(out_dir: str, index: int) -> str:
    """The Parquet file of chunk ``index`` (from 0) in ``out_dir``."""
    return os.path.join(out_dir, f"chunk-{index:06d}.parquet")


def prepare_folder(out_dir: str, fingerprint: str, n_cases: int, chunk_size: int) -> None:
    """Create ``out_dir`` (or check it holds the same sweep) and remove temporary files
    left by a killed write.

    **Arguments:** ``fingerprint``: ``SweepSpec.fingerprint``; ``n_cases``,
    ``chunk_size``: recorded beside it.

    **Raises:** ``ValueError`` if ``out_dir`` holds another sweep's results.
    """
    os.makedirs(out_dir, exist_ok=True)
    manifest = os.path.join(out_dir, _MANIFEST)
    record = {"fingerprint": fingerprint, "n_cases": n_cases, "chunk_size": chunk_size}
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            old = json.load(f)
        if old.get("fingerprint") != fingerprint:
            raise ValueError(
                f"{out_dir!r} holds the results of another sweep (a different spec or case table): "
                "give an empty or new folder"
            )
    else:
        _atomic_write(manifest, json.dumps(record, indent=1).encode())
    for folder in (out_dir, os.path.join(out_dir, TRAJECTORIES)):
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if name.startswith(".chunk-") and ".tmp" in name:
                os.remove(os.path.join(folder, name))


def finished_chunks(out_dir: str) -> set[int]:
    """The indices of the chunks whose Parquet file is complete in ``out_dir``."""
    if not os.path.isdir(out_dir):
        return set()
    done = set()
    for name in os.listdir(out_dir):
        if name.startswith("chunk-") and name.endswith(".parquet"):
            try:
                done.add(int(name[len("chunk-") : -len(".parquet")]))
            except ValueError:
                pass
    return done


def write_chunk(out_dir: str, index: int, columns: dict) -> str:
    """Write one chunk's rows as a Parquet file, atomically.

    **Arguments:** ``columns``: ``{name: (n_rows,) array}``, all of one length
    (``case``, the inputs, the outputs, ``result``, ...).

    **Returns:** the file's path.
    """
    return _write_table(chunk_path(out_dir, index), columns)


def write_trajectories(out_dir: str, index: int, columns: dict) -> str:
    """Write one chunk's trajectories (``{name: (n_rows,) array}``: ``case``, ``time``
    and the state variables, a row a case and time) as a Parquet file in the sweep's
    ``_trajectories`` subfolder, atomically.

    **Returns:** the file's path.
    """
    folder = os.path.join(out_dir, TRAJECTORIES)
    os.makedirs(folder, exist_ok=True)
    return _write_table(chunk_path(folder, index), columns)


def _write_table(final: str, columns: dict) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({name: pa.array(np.asarray(values)) for name, values in columns.items()})
    tmp = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.tmp{os.getpid()}")
    pq.write_table(table, tmp)
    _fsync(tmp)
    os.replace(tmp, final)
    return final


def read_sweep(out_dir: str):
    """The sweep's rows, all chunks together, as a pandas ``DataFrame`` sorted by case.

    **Arguments:** ``out_dir``: the sweep's output folder. **Returns:** the DataFrame.
    """
    import pyarrow.dataset as ds

    return ds.dataset(out_dir, format="parquet").to_table().to_pandas().sort_values("case", ignore_index=True)


def read_trajectories(out_dir: str):
    """The sweep's trajectories (written with the spec's ``trajectories``), all chunks
    together, as a pandas ``DataFrame`` sorted by case and time: columns ``case``,
    ``time`` (s) and every state variable; samples a case did not reach are NaN.

    **Arguments:** ``out_dir``: the sweep's output folder.

    **Raises:** ``FileNotFoundError`` where the sweep kept no trajectories.
    """
    import pyarrow.dataset as ds

    folder = os.path.join(out_dir, TRAJECTORIES)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{out_dir!r} holds no trajectories: run the sweep with 'trajectories' in its spec")
    table = ds.dataset(folder, format="parquet").to_table().to_pandas()
    return table.sort_values(["case", "time"], ignore_index=True, kind="stable")


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
