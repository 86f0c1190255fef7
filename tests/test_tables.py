"""Tests for simjax.io.tables: TimeSeriesTable and the .sto/.mot/.csv/.trc adapters.

Cross-checks against OpenSim 4.6's own adapters (skipped without the opensim
bindings): files OpenSim writes are read here exactly as OpenSim reads them, and
files written here are read by OpenSim with identical values and metadata.
"""

from __future__ import annotations

import contextlib
import math
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simjax.io.tables import (
    ADAPTERS,
    CSVFileAdapter,
    STOFileAdapter,
    TableFileError,
    TimeSeriesTable,
    TRCFileAdapter,
    convert_degrees,
    format_float,
    read_table,
    write_table,
)

# Awkward finite float64 values (OpenSim reads "inf" as NaN, so no infinities in
# cross-checks; our own round trips cover them).
TRICKY = np.array([1 / 3, -2 / 3, math.pi, -math.e * 1e-7, 5e-324, 123456789.123456789, -0.0, 0.1, 7.0, 2.5e300])


def tricky_table(n_rows=7, n_cols=3, vec=False, seed=0, nan=True):
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.uniform(0.001, 0.1, n_rows)) + 1 / 3
    shape = (n_rows, n_cols, 3) if vec else (n_rows, n_cols)
    vals = rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, shape)
    vals.reshape(-1)[: TRICKY.size] = TRICKY[: vals.size]
    if nan:
        vals[1, 0] = np.nan
    labels = [f"m{i}" if vec else f"coord {i}" for i in range(n_cols)]
    return TimeSeriesTable(times, vals, labels)


# --------------------------------------------------------------------------- #
# OpenSim helpers
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def osim():
    opensim = pytest.importorskip("opensim")
    with contextlib.suppress(Exception):
        opensim.Logger.setLevelString("Off")
    return opensim


def to_osim(osim, table):
    """Build an OpenSim TimeSeriesTable(Vec3) from ours, row by row."""
    if table.is_vec3:
        ot = osim.TimeSeriesTableVec3()
        ot.setColumnLabels(list(table.labels))
        for t, row in zip(table.times, table.values):
            ot.appendRow(float(t), osim.RowVectorVec3([osim.Vec3(*map(float, el)) for el in row]))
    else:
        ot = osim.TimeSeriesTable()
        ot.setColumnLabels(list(table.labels))
        for t, row in zip(table.times, table.values):
            ot.appendRow(float(t), osim.RowVector([float(x) for x in row]))
    for key, value in table.metadata.items():
        ot.addTableMetaDataString(key, value)
    return ot


def from_osim(osim, ot):
    """Our TimeSeriesTable holding exactly what an OpenSim table holds."""
    labels = list(ot.getColumnLabels())
    times = np.array(ot.getIndependentColumn(), dtype=float)
    n, c = len(times), len(labels)
    if isinstance(ot, osim.TimeSeriesTableVec3):
        flat = ot.flatten(["_x", "_y", "_z"])  # keep alive: getMatrix() is a view
        vals = flat.getMatrix().to_numpy().reshape(n, c, 3)
    else:
        vals = ot.getMatrix().to_numpy().reshape(n, c)
    meta = {k: ot.getTableMetaDataAsString(k) for k in ot.getTableMetaDataKeys()}
    if meta.get("header") == "":
        del meta["header"]  # OpenSim always sets it, empty when there is no free text
    return TimeSeriesTable(times, vals, labels, meta)


def from_storage(osim, storage):
    """Times and columns exactly as OpenSim's Storage class read them."""
    names = storage.getColumnLabels()
    labels = [names.get(i) for i in range(1, names.getSize())]
    arr = osim.ArrayDouble()
    storage.getTimeColumn(arr)
    times = [arr.get(i) for i in range(arr.getSize())]
    cols = []
    for lab in labels:
        arr = osim.ArrayDouble()
        storage.getDataColumn(lab, arr)
        cols.append([arr.get(i) for i in range(arr.getSize())])
    return TimeSeriesTable(times, np.array(cols).T.reshape(len(times), len(labels)), labels)


def assert_same_bits(a: TimeSeriesTable, b: TimeSeriesTable, check_metadata=True):
    """Exact equality, including the sign of zeros (NaN signs are not kept)."""
    a.assert_equal(b, check_metadata=check_metadata)
    keep = ~np.isnan(a.values)
    np.testing.assert_array_equal(np.signbit(a.values[keep]), np.signbit(b.values[keep]))


# --------------------------------------------------------------------------- #
# OpenSim writes, we read
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("ext", [".sto", ".mot", ".STO"])
def test_read_opensim_sto(osim, tmp_path, ext):
    ours = tricky_table()
    ours.metadata.update({"inDegrees": "yes", "Units": "m", "name": "walk trial"})
    path = str(tmp_path / f"coords{ext}")
    osim.STOFileAdapter.write(to_osim(osim, ours), path)
    got = read_table(path)
    assert_same_bits(got, from_osim(osim, osim.TimeSeriesTable(path)))
    assert got.labels == ours.labels and got.in_degrees
    assert got.metadata == {"inDegrees": "yes", "Units": "m", "name": "walk trial"}
    # OpenSim writes 16 significant digits: within 1 ulp-ish of the originals.
    got.assert_equal(ours, rtol=1e-15, check_metadata=False)


def test_read_opensim_sto_vec3(osim, tmp_path):
    ours = tricky_table(vec=True)
    ours.metadata["Units"] = "mm"
    path = str(tmp_path / "markers.sto")
    osim.STOFileAdapterVec3.write(to_osim(osim, ours), path)
    got = read_table(path)
    assert got.is_vec3 and got.data_type == "Vec3"
    assert_same_bits(got, from_osim(osim, osim.TimeSeriesTableVec3(path)))


def test_read_opensim_csv(osim, tmp_path):
    ours = tricky_table()
    ours.metadata["inDegrees"] = "no"
    path = str(tmp_path / "data.csv")
    osim.CSVFileAdapter.write(to_osim(osim, ours), path)
    got = read_table(path)
    assert_same_bits(got, from_osim(osim, osim.TimeSeriesTable(path)))
    assert not got.in_degrees


def test_read_opensim_trc(osim, tmp_path):
    ours = tricky_table(vec=True, nan=False)
    ours.metadata.update({"DataRate": "60", "Units": "mm"})
    vals = ours.to_numpy()
    vals[2, 1] = np.nan  # a missing marker: OpenSim writes "nan"
    ours = TimeSeriesTable(ours.times, vals, ours.labels, ours.metadata)
    path = str(tmp_path / "markers.trc")
    osim.TRCFileAdapter.write(to_osim(osim, ours), path)
    got = read_table(path)
    assert_same_bits(got, from_osim(osim, osim.TimeSeriesTableVec3(path)))
    assert got.metadata["NumMarkers"] == "3" and got.metadata["NumFrames"] == "7"
    assert got.metadata["header"].startswith("PathFileType\t4\t(X/Y/Z)")


def test_opensim_flatten_matches_ours(osim):
    ours = tricky_table(vec=True)
    theirs = to_osim(osim, ours).flatten(["_x", "_y", "_z"])
    assert_same_bits(ours.flatten(), from_osim(osim, theirs), check_metadata=False)


# --------------------------------------------------------------------------- #
# Old Storage format
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("ext", [".mot", ".sto"])
def test_read_storage_printed_file(osim, tmp_path, ext):
    ours = tricky_table(nan=False)
    # Storage's own reader splits labels at spaces too.
    ours = TimeSeriesTable(ours.times, ours.values, ["hip_r", "knee_r", "ankle_r"])
    src = str(tmp_path / "new.sto")
    write_table(ours, src)
    storage = osim.Storage(src)
    storage.setName("ik_results")
    storage.setInDegrees(True)
    storage.setDescription("Units are S.I. units\nAngles are in degrees.")
    path = str(tmp_path / f"old{ext}")
    assert storage.printToFile(path, "w")
    text = Path(path).read_text()
    assert text.startswith("ik_results\nversion=1\nnRows=7\nnColumns=4\ninDegrees=yes\n")

    got = read_table(path)
    assert got.in_degrees
    assert got.metadata["header"] == "ik_results\nUnits are S.I. units\nAngles are in degrees."
    # Identical to OpenSim's table reader and to Storage's own reader.
    assert_same_bits(got, from_osim(osim, osim.TimeSeriesTable(path)))
    assert_same_bits(got, from_storage(osim, osim.Storage(path)), check_metadata=False)
    # Storage prints 8 decimals.
    got.assert_equal(ours, atol=1e-8, rtol=0, check_metadata=False)


OPENSIM3_MOT = """Coordinates
version=1
nRows=3
nColumns=4
inDegrees=yes

Units are S.I. units (second, meters, Newtons, ...)
Angles are in degrees.

endheader
time\thip_flexion_r\tknee_angle_r\tpelvis_ty
      0.00000000\t     10.00000000\t    -20.50000000\t      0.95000000
      0.01000000\t     11.00000000\t    -21.50000000\t      0.95100000
      0.02000000\t     12.00000000\t    -22.50000000\t      0.95200000
"""


def test_read_opensim3_mot(osim, tmp_path):
    path = tmp_path / "ik.mot"
    path.write_text(OPENSIM3_MOT)
    got = read_table(path)
    assert got.labels == ("hip_flexion_r", "knee_angle_r", "pelvis_ty")
    np.testing.assert_array_equal(got.times, [0.0, 0.01, 0.02])
    assert got.column("knee_angle_r")[2] == -22.5
    assert got.in_degrees
    assert_same_bits(got, from_osim(osim, osim.TimeSeriesTable(str(path))))
    # Values stay in degrees until asked.
    rad = convert_degrees(got, to_radians=True, columns=["hip_flexion_r", "knee_angle_r"])
    assert not rad.in_degrees and rad.metadata["inDegrees"] == "no"
    np.testing.assert_allclose(rad.column("hip_flexion_r"), np.deg2rad([10.0, 11.0, 12.0]), rtol=1e-15)
    np.testing.assert_array_equal(rad.column("pelvis_ty"), got.column("pelvis_ty"))
    with pytest.raises(ValueError, match="already in radians"):
        convert_degrees(rad, to_radians=True)
    back = convert_degrees(rad, to_radians=False, columns=["hip_flexion_r", "knee_angle_r"])
    back.assert_equal(got, rtol=1e-14)


def test_read_old_format_variants(tmp_path):
    # nColumns not counting time; space-separated data (SIMM era); version 0 .mot -> degrees.
    text = "Coords\nnRows=2\nnColumns=2\nendheader\ntime q1 q2\n0 1 2\n0.5 3 4\n"
    (tmp_path / "a.mot").write_text(text)
    got = read_table(tmp_path / "a.mot")
    assert got.labels == ("q1", "q2") and got.in_degrees
    np.testing.assert_array_equal(got.values, [[1, 2], [3, 4]])
    (tmp_path / "a.sto").write_text(text)
    assert not read_table(tmp_path / "a.sto").in_degrees
    with pytest.raises(TableFileError, match=r"line 2: nRows=3 but the file has 2 data rows"):
        STOFileAdapter().parse(text.replace("nRows=2", "nRows=3"), "x.sto")
    with pytest.raises(TableFileError, match=r"line 3: nColumns=5"):
        STOFileAdapter().parse(text.replace("nColumns=2", "nColumns=5"), "x.sto")


# --------------------------------------------------------------------------- #
# We write, OpenSim reads
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("ext", [".sto", ".mot", ".csv"])
def test_opensim_reads_ours_scalar(osim, tmp_path, ext):
    ours = tricky_table()
    # Storage's own reader splits labels at spaces; keep them space-free here.
    ours = TimeSeriesTable(ours.times, ours.values, ["coord_0", "coord_1", "coord_2"])
    ours.metadata.update({"header": "my table", "inDegrees": "yes", "DataRate": "100"})
    path = str(tmp_path / f"ours{ext}")
    write_table(ours, path)
    theirs = from_osim(osim, osim.TimeSeriesTable(path))
    assert_same_bits(theirs, ours)  # exact: shortest round-trip digits
    assert_same_bits(read_table(path), ours)
    if ext != ".csv":
        # Storage (used by the IK/ID tools) reads it too, in degrees.
        storage = osim.Storage(path)
        assert storage.isInDegrees()
        theirs = from_storage(osim, storage)
        assert theirs.labels == ("coord_0", "coord_1", "coord_2")
        ours.assert_equal(TimeSeriesTable(theirs.times, theirs.values, ours.labels), check_metadata=False)


def test_opensim_reads_ours_vec3_sto(osim, tmp_path):
    ours = tricky_table(vec=True)
    ours.metadata["Units"] = "m"
    path = str(tmp_path / "forces.sto")
    write_table(ours, path)
    assert_same_bits(from_osim(osim, osim.TimeSeriesTableVec3(path)), ours)


def test_opensim_reads_ours_trc(osim, tmp_path):
    ours = tricky_table(vec=True, nan=False)
    vals = ours.to_numpy()
    vals[3, 2] = np.nan
    ours = TimeSeriesTable(ours.times, vals, ["LASI", "RASI", "R KNEE"], {"Units": "mm", "DataRate": "100"})
    path = str(tmp_path / "walk.trc")
    write_table(ours, path)
    theirs = from_osim(osim, osim.TimeSeriesTableVec3(path))
    theirs.assert_equal(ours, check_metadata=False)
    assert theirs.metadata["NumFrames"] == "7" and theirs.metadata["NumMarkers"] == "3"
    assert theirs.metadata["CameraRate"] == "100" and theirs.metadata["Units"] == "mm"
    assert theirs.metadata["header"] == "PathFileType\t4\t(X/Y/Z)\twalk.trc"
    ours_back = read_table(path)
    assert_same_bits(ours_back, theirs)


def test_written_text_matches_opensim(osim, tmp_path):
    # With short decimal values both writers print the same digits; apart from the
    # OpenSimVersion line (and OpenSim's alphabetical metadata order) files match.
    times = np.array([0.0, 0.5, 1.25])
    scalar = TimeSeriesTable(
        times, [[1, -2.5], [3, 0.125], [np.nan, 6]], ["a", "b c"], {"Units": "m", "inDegrees": "no"}
    )
    vec = TimeSeriesTable(times, np.arange(18.0).reshape(3, 2, 3) / 4, ["m1", "m2"], {"DataRate": "2", "Units": "mm"})
    cases = [
        (scalar, ".sto", osim.STOFileAdapter.write),
        (scalar, ".csv", osim.CSVFileAdapter.write),
        (vec, ".sto", osim.STOFileAdapterVec3.write),
        (vec, ".trc", osim.TRCFileAdapter.write),
    ]
    for table, ext, their_write in cases:
        theirs_path, ours_path = str(tmp_path / f"theirs{ext}"), str(tmp_path / f"ours{ext}")
        their_write(to_osim(osim, table), theirs_path)
        write_table(table, ours_path)
        theirs = Path(theirs_path).read_text().splitlines()
        ours = Path(ours_path).read_text().splitlines()
        if ext == ".trc":  # OpenSim records the path as given, we the file name
            assert theirs[0] == f"PathFileType\t4\t(X/Y/Z)\t{theirs_path}"
            assert ours[0] == "PathFileType\t4\t(X/Y/Z)\tours.trc"
            theirs, ours = theirs[1:], ours[1:]
        strip = lambda lines: sorted(ln for ln in lines if not ln.startswith("OpenSimVersion="))  # noqa: E731
        assert strip(theirs) == strip(ours), ext
        if ext == ".trc":
            assert theirs == ours


# --------------------------------------------------------------------------- #
# Our own round trips and the table API
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("ext", [".sto", ".mot", ".csv", ".trc", ".Sto", ".TRC"])
def test_round_trip_files(tmp_path, ext):
    vec = ext.lower() in (".trc",)
    table = tricky_table(vec=vec or ext == ".mot", n_rows=5)
    if ext == ".mot":
        table = table.flatten()
    table.metadata.update({"Units": "mm", "DataRate": "50"})
    path = tmp_path / f"t{ext}"
    write_table(table, path)
    got = read_table(path)
    got.assert_equal(table, check_metadata=False)
    assert got.metadata["Units"] == "mm"


def test_registry_and_unknown_extension(tmp_path):
    assert set(ADAPTERS) >= {".sto", ".mot", ".csv", ".trc"}
    assert isinstance(ADAPTERS[".mot"], STOFileAdapter)
    table = tricky_table(n_rows=2)
    for bad in ("x.c3d", "noext"):
        with pytest.raises(TableFileError, match="unsupported"):
            write_table(table, tmp_path / bad)
        with pytest.raises(TableFileError, match="unsupported"):
            read_table(tmp_path / bad)
    write_table(table, tmp_path / "data.txt", fmt="sto")
    read_table(tmp_path / "data.txt", fmt=".sto").assert_equal(table)


def test_table_basics():
    t = TimeSeriesTable([0.0, 0.1, 0.2], [[1, 2], [3, 4], [5, 6]], ["a", "b"], {"inDegrees": "yes"})
    assert (t.n_rows, t.n_columns, len(t)) == (3, 2, 3)
    assert t.labels == ("a", "b") and t.data_type == "double" and t.vec_size is None
    np.testing.assert_array_equal(t.column("b"), [2, 4, 6])
    np.testing.assert_array_equal(t["a"], [1, 3, 5])
    np.testing.assert_array_equal(t.row(-1), [5, 6])
    with pytest.raises(ValueError):
        t.values[0, 0] = 9.0  # read-only view
    with pytest.raises(KeyError):
        t.column("zz")
    with pytest.raises(IndexError):
        t.row(3)
    t.append_row(0.3, [7, 8])
    assert t.n_rows == 4 and t.times[-1] == 0.3
    with pytest.raises(ValueError, match="strictly increasing"):
        t.append_row(0.3, [0, 0])
    with pytest.raises(ValueError, match="shape"):
        t.append_row(0.4, [0, 0, 0])
    t.append_column("c", [0, 0, 0, 1], metadata={"units": "N"})
    assert t.labels == ("a", "b", "c") and t.column_metadata == {"c": {"units": "N"}}
    for i in range(20):  # buffer growth after append_column
        t.append_row(1.0 + i, [i, i, i])
    assert t.n_rows == 24 and t.row(23)[2] == 19

    s = t.select_columns(["c", "a"])
    assert s.labels == ("c", "a") and s.column_metadata == {"c": {"units": "N"}} and s.metadata == t.metadata
    assert t.drop_columns(["a"]).labels == ("b", "c")
    sl = t.slice_time(0.1, 0.3)
    np.testing.assert_array_equal(sl.times, [0.1, 0.2, 0.3])
    assert t.slice_time(0.35, 0.9).n_rows == 0

    for bad in (
        dict(times=[0.0, 0.0], values=[[1], [2]], labels=["a"]),
        dict(times=[0.0, np.nan], values=[[1], [2]], labels=["a"]),
        dict(times=[0.0, 1.0], values=[[1], [2]], labels=["a", "b"]),
        dict(times=[0.0], values=[[1, 2]], labels=["a", "a"]),
        dict(times=[0.0], values=[[1]], labels=[""]),
    ):
        with pytest.raises(ValueError):
            TimeSeriesTable(**bad)
    assert t == t.copy() and t != s and not t.equals(t.slice_time(0, 0.2))


def test_interpolate():
    t = TimeSeriesTable([0.0, 1.0, 3.0], [[0.0, 10.0], [1.0, np.inf], [5.0, 30.0]], ["a", "b"])
    np.testing.assert_array_equal(t.interpolate(0.5), [0.5, np.inf])
    np.testing.assert_array_equal(t.interpolate(2.0)[0], 3.0)
    # Samples come back exactly, even next to an inf.
    np.testing.assert_array_equal(t.interpolate([0.0, 1.0, 3.0]), t.values)
    assert t.interpolate([[0.5, 1.5]]).shape == (1, 2, 2)
    with pytest.raises(ValueError, match="outside"):
        t.interpolate(3.5)
    v = TimeSeriesTable([0.0, 2.0], np.arange(12.0).reshape(2, 2, 3), ["p", "q"])
    np.testing.assert_array_equal(v.interpolate(1.0), np.arange(12.0).reshape(2, 2, 3).mean(axis=0))
    r = t.resample([0.0, 0.5, 1.0])
    np.testing.assert_array_equal(r.column("a"), [0.0, 0.5, 1.0])


def test_flatten_pack_numpy_dict():
    v = tricky_table(vec=True, n_rows=4, n_cols=2)
    v.column_metadata["m0"] = {"body": "pelvis"}
    f = v.flatten()
    assert f.labels == ("m0_x", "m0_y", "m0_z", "m1_x", "m1_y", "m1_z")
    assert f.column_metadata["m0_y"] == {"body": "pelvis"}
    np.testing.assert_array_equal(f.column("m1_z"), v.column("m1")[:, 2])
    assert v.flatten(["_1", "_2", "_3"]).labels[0] == "m0_1"
    v.assert_equal(f.pack())
    with pytest.raises(ValueError, match="suffixes"):
        f.select_columns(["m0_x", "m0_y", "m1_z"]).pack()
    arr = f.to_numpy(include_time=True)
    assert arr.shape == (4, 7) and arr[2, 0] == f.times[2]
    d = f.to_dict()
    assert list(d)[0] == "time"
    TimeSeriesTable.from_dict(d, metadata=f.metadata).assert_equal(f, check_metadata=False)
    vd = TimeSeriesTable.from_dict({lab: v.column(lab) for lab in v.labels}, times=v.times)
    vd.assert_equal(v, check_metadata=False)


def test_pandas_round_trip():
    pytest.importorskip("pandas")
    t = tricky_table()
    t.metadata["inDegrees"] = "yes"
    df = t.to_pandas()
    assert df.index.name == "time" and list(df.columns) == list(t.labels)
    TimeSeriesTable.from_pandas(df).assert_equal(t)
    TimeSeriesTable.from_pandas(df.reset_index()).assert_equal(t)
    v = tricky_table(vec=True)
    assert list(v.to_pandas().columns)[:3] == ["m0_x", "m0_y", "m0_z"]
    TimeSeriesTable.from_pandas(v.to_pandas()).pack().assert_equal(v)


def test_format_float_round_trips():
    for x in [0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -0.0, 2.0, 1e16, 123456.789]:
        assert float(format_float(x)) == x
    assert format_float(2.0) == "2" and format_float(float("nan")) == "nan"


def test_write_rejects_unrepresentable(tmp_path):
    t = tricky_table(n_rows=2)
    with pytest.raises(ValueError, match="label"):
        write_table(TimeSeriesTable(t.times, t.values, ["a,b", "c", "d"]), tmp_path / "x.csv")
    with pytest.raises(ValueError, match="label"):
        write_table(TimeSeriesTable(t.times, t.values, ["a\tb", "c", "d"]), tmp_path / "x.sto")
    bad_meta = TimeSeriesTable(t.times, t.values, t.labels, {"note": "line1\nline2"})
    with pytest.raises(ValueError, match="note"):
        write_table(bad_meta, tmp_path / "x.sto")
    with pytest.raises(ValueError, match="Vec3"):
        write_table(t, tmp_path / "x.trc")
    with pytest.raises(ValueError, match="flatten"):
        write_table(tricky_table(vec=True), tmp_path / "x.csv")
    with pytest.raises(ValueError, match="Units"):
        write_table(tricky_table(vec=True), tmp_path / "x.trc")
    assert not (tmp_path / "x.trc").exists()


def test_other_vector_types_and_crlf():
    text = "DataType=Quaternion\nversion=3\nendheader\ntime\tq\n0\t1,0,0,0\n1\t0, 1, 0, 0\t\n"
    got = STOFileAdapter().parse(text, "q.sto")
    assert got.vec_size == 4 and got.data_type == "Vec4"
    np.testing.assert_array_equal(got.column("q"), [[1, 0, 0, 0], [0, 1, 0, 0]])
    v6 = TimeSeriesTable([0.0, 1.0], np.arange(12.0).reshape(2, 1, 6), ["F"], {"inDegrees": "no"})
    STOFileAdapter().parse(STOFileAdapter().dumps(v6)).assert_equal(v6)
    assert v6.flatten().labels == ("F_1", "F_2", "F_3", "F_4", "F_5", "F_6")
    crlf = STOFileAdapter().parse(GOOD_STO.replace("\n", "\r\n"), "crlf.sto")
    crlf.assert_equal(STOFileAdapter().parse(GOOD_STO, "lf.sto"))


def test_plain_csv_without_header():
    got = CSVFileAdapter().parse("time,a,b\n0,1,2\n1,3,nan\n", "plain.csv")
    assert got.labels == ("a", "b") and np.isnan(got.values[1, 1]) and got.metadata == {}


# --------------------------------------------------------------------------- #
# Malformed files
# --------------------------------------------------------------------------- #

GOOD_STO = "name\ninDegrees=no\nDataType=double\nversion=3\nendheader\ntime\ta\tb\n0\t1\t2\n0.1\t3\t4\n"
GOOD_TRC = TRCFileAdapter().dumps(
    TimeSeriesTable([0.0, 0.01], np.arange(6.0).reshape(2, 1, 3), ["M"], {"Units": "mm", "DataRate": "100"}),
    "g.trc",
)


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("name\ninDegrees=no\ntime\ta\n0\t1\n", 4, "no 'endheader'"),
        (GOOD_STO.replace("0.1\t3\t4", "0.1\t3"), 8, "expected 3 fields"),
        (GOOD_STO.replace("0.1\t3\t4", "0.1\t3\tx7"), 8, "non-numeric value 'x7'"),
        (GOOD_STO.replace("0.1\t3\t4", "0.1\t3\t1_0"), 8, "non-numeric"),
        (GOOD_STO.replace("0.1\t3\t4", "0\t3\t4"), 8, "not greater than the previous time"),
        (GOOD_STO.replace("0.1\t3\t4", "inf\t3\t4"), 8, "not finite"),
        (GOOD_STO.replace("0.1\t3\t4", "0.1\t\t4"), 8, "empty value"),
        (GOOD_STO.replace("time\ta\tb", "time\ta\ta"), 6, "duplicate column label 'a'"),
        (GOOD_STO.replace("time\ta\tb", "t\ta\tb"), 6, "must be 'time'"),
        (GOOD_STO.replace("DataType=double", "DataType=Mat33"), 3, "unsupported DataType"),
        (GOOD_STO.replace("version=3", "version=three"), 4, "version must be an integer"),
        (GOOD_STO.replace("DataType=double", "DataType=Vec3"), 7, "3 comma-separated components"),
        (GOOD_STO + "\n0.2\t5\t6\n", 10, "data after the blank line 9"),
        ("name\nendheader\n", 2, "no column-label line"),
    ],
)
def test_malformed_sto(text, line, what):
    with pytest.raises(TableFileError, match=f"bad.sto, line {line}: .*{what}") as info:
        STOFileAdapter().parse(text, "bad.sto")
    assert info.value.line == line and info.value.path == "bad.sto"


def test_repeated_row_is_dropped_with_a_warning():
    """OpenSim ends some results with a repeat of the last row (RRA's kinematics, equal
    to the printed digits): read with that row dropped and a warning naming the line; a
    row at the same time with other values stays an error."""
    text = GOOD_STO + "0.1\t3.00000000001\t4\n"
    with pytest.warns(UserWarning, match=r"rep\.sto: line 9 repeats the row before it \(time 0\.1\); 1 such"):
        got = STOFileAdapter().parse(text, "rep.sto")
    np.testing.assert_array_equal(got.times, [0.0, 0.1])
    np.testing.assert_array_equal(got.values, [[1, 2], [3, 4]])
    with pytest.raises(TableFileError, match="rep.sto, line 9: time 0.1 is not greater"):
        STOFileAdapter().parse(GOOD_STO + "0.1\t3.1\t4\n", "rep.sto")


def test_malformed_trc():
    lines = GOOD_TRC.split("\n")

    def variant(i, new):
        return "\n".join(lines[:i] + ([new] if new is not None else []) + lines[i + 1 :])

    cases = [
        (variant(0, "Path\t4"), 1, "start with 'PathFileType'"),
        (variant(1, lines[1].replace("Units", "Unit")), 2, "expected the keys"),
        (variant(2, lines[2].replace("\tmm", "")), 3, "expected 8 metadata values"),
        (variant(2, lines[2].replace("\t1\tmm", "\tmany\tmm")), 3, "NumMarkers must be an integer"),
        (variant(3, "Frame#\tTime\tM\tN\t"), 4, "1 marker names"),
        (variant(4, "\t\tX1\tY1\tZ2\t"), 5, "'Z1'"),
        (variant(7, "2\t0.01\t3\t4\t"), 8, "expected 5 fields"),
        (variant(7, "2\t0\t3\t4\t5\t"), 8, "not greater"),
        (variant(7, "2\t0.01\t3\tfour\t5\t"), 8, "non-numeric"),
        (variant(7, None), 3, "NumFrames=2 but the file has 1 data rows"),
        ("\n".join(lines[:3]), 4, "ends before the marker-name line"),
    ]
    for text, line, what in cases:
        with pytest.raises(TableFileError, match=f"bad.trc, line {line}: .*{what}"):
            TRCFileAdapter().parse(text, "bad.trc")
    # Empty coordinates make the whole marker NaN, like OpenSim.
    got = TRCFileAdapter().parse(variant(7, "2\t0.01\t3\t\t5\t"), "ok.trc")
    assert np.isnan(got.values[1, 0]).all() and not np.isnan(got.values[0, 0]).any()


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "empty.sto"
    path.write_text("")
    with pytest.raises(TableFileError, match="empty.sto: file is empty"):
        read_table(path)
    path = tmp_path / "bad.mot"
    path.write_bytes(GOOD_STO.replace("\t3\t", "\t\xff\xfe\t").encode("latin-1"))
    with pytest.raises(TableFileError, match=r"bad\.mot, line 8: non-numeric"):
        read_table(path)
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "missing.sto")


# --------------------------------------------------------------------------- #
# Property-based tests
# --------------------------------------------------------------------------- #

LABEL = st.text("abcXYZ_019. #-", min_size=1, max_size=6).filter(lambda s: s == s.strip())
META_KEY = st.sampled_from(["Units", "DataRate", "note", "inDegrees"])
META_VALUE = st.text("abc019 .:/-", min_size=1, max_size=8).filter(lambda s: s == s.strip())


@st.composite
def tables(draw, kinds=("double", "Vec3")):
    kind = draw(st.sampled_from(kinds))
    times = sorted(draw(st.lists(st.floats(-1e9, 1e9, allow_nan=False), max_size=6, unique=True)))
    labels = draw(st.lists(LABEL, max_size=4, unique=True))
    shape = (len(times), len(labels)) + ((3,) if kind == "Vec3" else ())
    values = np.array(draw(st.lists(st.floats(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))))
    metadata = draw(st.dictionaries(META_KEY, META_VALUE, max_size=3))
    if draw(st.booleans()):
        metadata["header"] = draw(st.text("abc xyz_", min_size=1, max_size=10).filter(lambda s: s.strip()))
    return TimeSeriesTable(times, values.reshape(shape), labels, metadata)


@settings(max_examples=60, deadline=None)
@given(table=tables(), ext=st.sampled_from([".sto", ".mot", ".csv", ".trc"]))
def test_fuzz_round_trip(table, ext):
    if ext == ".csv" and table.vec_size:
        table = table.flatten()
    if ext == ".trc":
        if not table.is_vec3:
            return
        table.metadata["Units"] = "mm"
        table.metadata["DataRate"] = "100"
    adapter = ADAPTERS[ext]
    got = adapter.parse(adapter.dumps(table, f"x{ext}"), f"x{ext}")
    assert_same_bits(got, table, check_metadata=False)
    if ext != ".trc":
        assert got.metadata == table.metadata
        got2 = adapter.parse(adapter.dumps(got, f"x{ext}"), f"x{ext}")
        assert_same_bits(got2, got)


@contextlib.contextmanager
def time_limit(seconds):
    def fail(*_):
        raise TimeoutError("parser took too long (hang?)")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


_BASE_TABLE = TimeSeriesTable(
    [0.0, 0.01, 0.02], np.arange(18.0).reshape(3, 2, 3) - 4.5, ["LASI", "R KNEE"], {"Units": "mm", "DataRate": "100"}
)
CORPUS = {
    ".sto": STOFileAdapter().dumps(_BASE_TABLE.flatten()),
    ".mot": OPENSIM3_MOT,
    ".csv": CSVFileAdapter().dumps(_BASE_TABLE.flatten()),
    ".trc": TRCFileAdapter().dumps(_BASE_TABLE, "base.trc"),
}
CORPUS["vec.sto"] = STOFileAdapter().dumps(_BASE_TABLE)
JUNK = st.sampled_from(
    ["\t", ",", "=", "\n", "\r", " ", "x", ".", "-", "e", "9", "nan", "endheader", "\x00", "\u00e9", "\xff"]
)


@st.composite
def corruptions(draw):
    name = draw(st.sampled_from(sorted(CORPUS)))
    text = CORPUS[name]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["truncate", "replace", "insert", "drop_line", "dup_line", "swap_lines"]))
        lines = text.split("\n")
        pos = draw(st.integers(0, max(len(text) - 1, 0)))
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        if op == "truncate":
            text = text[:pos]
        elif op == "replace":
            text = text[:pos] + draw(JUNK) + text[pos + 1 :]
        elif op == "insert":
            text = text[:pos] + draw(JUNK) + text[pos:]
        elif op == "drop_line":
            text = "\n".join(lines[:i] + lines[i + 1 :])
        elif op == "dup_line":
            text = "\n".join(lines[: i + 1] + lines[i:])
        else:
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return name, text


_FUZZ_DIR = tempfile.TemporaryDirectory()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=corruptions())
def test_fuzz_corrupted_files_parse_or_raise(case):
    name, text = case
    ext = "." + name.rsplit(".", 1)[-1]
    path = Path(_FUZZ_DIR.name) / f"fuzz{ext}"
    # Through the file path too, so undecodable bytes are exercised.
    path.write_bytes(text.encode("utf-8", "surrogateescape").replace("\u00e9".encode(), b"\xe9"))
    with time_limit(10):
        try:
            table = read_table(path)
        except TableFileError as exc:
            assert str(path) in str(exc)
            return
    assert isinstance(table, TimeSeriesTable)
    assert np.all(np.diff(table.times) > 0)
    assert table.values.shape[:2] == (table.n_rows, table.n_columns)
