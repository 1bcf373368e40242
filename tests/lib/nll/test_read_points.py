"""`read_points`: point reads of signature candidates equal NumPy indexing on random
layouts (chunk sizes, parts, never-written chunks, compressed arrays) and a truncated chunk
file is an error naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import ConcatArray, read_points
from sigmap_lib.signatures import gather_units


def _part(root: Path, name: str, rng: np.random.Generator, *, compressed: bool = False):
    n = int(rng.integers(1, 2500))
    values = rng.standard_normal(n).astype("f4")
    z = zarr.create_array(
        str(root / name), shape=(n,), chunks=(int(rng.integers(1, 600)),), dtype="f4",
        compressors="auto" if compressed else None, fill_value=np.nan,
    )  # fmt: skip
    z[:] = values
    return z, values


def test_point_reads_equal_numpy_indexing_on_random_layouts(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    for trial in range(6):
        parts, values = [], []
        for j in range(int(rng.integers(1, 6))):
            z, v = _part(tmp_path, f"t{trial}_p{j}.zarr", rng, compressed=j == 2)
            parts.append(z)
            values.append(v)
        sparse = zarr.create_array(str(tmp_path / f"t{trial}_sparse.zarr"), shape=(90,),
                                   chunks=(10,), dtype="f4", compressors=None,
                                   fill_value=np.nan)  # fmt: skip
        sparse[:40] = 2.0  # chunks 4..8 never written: they read as the fill value
        parts += [sparse, np.arange(5.0, dtype="f4")]
        values += [np.r_[np.full(40, 2.0, "f4"), np.full(50, np.nan, "f4")], np.arange(5.0)]
        full = np.concatenate(values).astype("f4")
        arr = ConcatArray(parts)
        for _ in range(20):
            idx = np.unique(rng.integers(0, full.size, size=int(rng.integers(0, 300))))
            np.testing.assert_array_equal(read_points(arr, idx), full[idx])
        many = [ConcatArray(parts), full]
        units = rng.integers(0, full.size, size=50)  # unsorted, duplicates
        np.testing.assert_array_equal(gather_units(many, units), np.vstack([full[units]] * 2))


def test_a_truncated_chunk_file_is_an_error_naming_it(tmp_path: Path) -> None:
    z = zarr.create_array(str(tmp_path / "t.zarr"), shape=(20,), chunks=(10,), dtype="f4",
                          compressors=None)  # fmt: skip
    z[:] = np.arange(20, dtype="f4")
    chunk = tmp_path / "t.zarr" / "c" / "1"
    chunk.write_bytes(chunk.read_bytes()[:8])
    assert read_points(z, [10, 11]).tolist() == [10.0, 11.0]
    with pytest.raises(SigmapInputError, match=r"t\.zarr/c/1 is truncated"):
        read_points(z, [10, 15])
