"""NLLStore: shard commits, checksums, corruption detection, resume, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import NLLStore, shard_checksum

# shard boundaries deliberately not aligned to the 64-unit chunks
BOUNDS = [(0, 50), (50, 130), (130, 131), (131, 256), (256, 300)]
N = 300
FP = "f" * 64


def _values(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).gamma(2.0, 2.0, N).astype(np.float32)


def _store(path, **kw) -> NLLStore:
    return NLLStore.create_or_open(path, N, BOUNDS, FP, chunk_units=64, **kw)


def _write_all(s: NLLStore, v: np.ndarray) -> None:
    for i, (a, b) in enumerate(BOUNDS):
        s.write_shard(i, v[a:b])


def test_shard_by_shard_write_and_read(tmp_path: Path) -> None:
    s = _store(tmp_path / "m", attrs={"model": "org/name"})
    assert s.pending_shards() == [0, 1, 2, 3, 4] and not s.is_complete()
    assert np.isnan(s.read()).all()
    v = _values()
    for i in [3, 0, 4]:  # any order
        a, b = BOUNDS[i]
        s.write_shard(i, v[a:b])
    assert s.pending_shards() == [1, 2]
    got = s.read()
    for i in [3, 0, 4]:
        a, b = BOUNDS[i]
        np.testing.assert_array_equal(got[a:b], v[a:b])  # neighbours in shared chunks intact
    assert np.isnan(got[50:131]).all()
    s.write_shard(1, v[50:130])
    s.write_shard(2, v[130:131])
    assert s.is_complete() and s.verify() == []
    np.testing.assert_array_equal(s.read(), v)
    np.testing.assert_array_equal(s.read(100, 140), v[100:140])
    # readers open the array directly with zarr
    arr = zarr.open_array(tmp_path / "m", mode="r")
    assert arr.shape == (N,) and arr.dtype == np.float32
    np.testing.assert_array_equal(arr[:], v)
    np.testing.assert_array_equal(s.array[:], v)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["committed"]["3"]["sha256"] == shard_checksum(v[131:256])
    assert manifest["attrs"] == {"model": "org/name"}
    reopened = NLLStore.open(tmp_path / "m")
    assert reopened.is_complete() and reopened.attrs["model"] == "org/name"
    rw = NLLStore(tmp_path / "m")
    assert rw.is_complete() and rw.verify() == []
    np.testing.assert_array_equal(rw.read(), v)
    with pytest.raises(SigmapInputError, match="not an NLL store"):
        NLLStore(tmp_path / "elsewhere")


def test_idempotent_rewrite_and_overwrite(tmp_path: Path) -> None:
    s = _store(tmp_path / "m")
    v = _values()
    _write_all(s, v)
    chunk = tmp_path / "m" / "c" / "1"
    mtime = chunk.stat().st_mtime_ns
    s.write_shard(1, v[50:130])  # identical data: no-op
    assert chunk.stat().st_mtime_ns == mtime
    w = v.copy()
    w[60:70] += 1
    s.write_shard(1, w[50:130])
    assert s.verify() == [] and s.is_complete()
    np.testing.assert_array_equal(s.read(), w)


def test_reopen_resumes_and_refuses_other_corpus(tmp_path: Path) -> None:
    s = _store(tmp_path / "m")
    v = _values()
    s.write_shard(0, v[:50])
    again = _store(tmp_path / "m")
    assert again.pending_shards() == [1, 2, 3, 4]
    np.testing.assert_array_equal(again.read(0, 50), v[:50])
    with pytest.raises(SigmapInputError, match="another corpus"):
        NLLStore.create_or_open(tmp_path / "m", N, BOUNDS, "e" * 64)
    with pytest.raises(SigmapInputError, match="another corpus"):
        NLLStore.create_or_open(tmp_path / "m", N + 1, [*BOUNDS[:-1], (256, 301)], FP)
    with pytest.raises(SigmapInputError, match="shard layout"):
        NLLStore.create_or_open(tmp_path / "m", N, [(0, 100), (100, 300)], FP)


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_verify_detects_damaged_chunk_and_rewrite_repairs(tmp_path: Path, damage: str) -> None:
    s = _store(tmp_path / "m")
    v = _values(1)
    _write_all(s, v)
    chunk = tmp_path / "m" / "c" / "2"  # units [128, 192): shards 1, 2, 3
    raw = chunk.read_bytes()
    if damage == "truncate":
        chunk.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        b = bytearray(raw)
        b[len(b) // 2] ^= 0xFF
        chunk.write_bytes(bytes(b))
    else:
        chunk.unlink()
    bad = s.verify()
    assert set(bad) <= {1, 2, 3} and len(bad) >= 1
    if damage != "flip":
        assert bad == [1, 2, 3]
    assert s.pending_shards() == bad
    for i in bad:  # a resumed run rewrites exactly the pending shards
        a, b = BOUNDS[i]
        s.write_shard(i, v[a:b])
    assert s.verify() == [] and s.is_complete()
    np.testing.assert_array_equal(NLLStore.open(tmp_path / "m").read(), v)


def test_uncommitted_write_is_pending(tmp_path: Path) -> None:
    """Data written without a manifest update (crash between the two) stays pending."""
    _store(tmp_path / "m")
    v = _values()
    arr = zarr.open_array(tmp_path / "m", mode="r+")
    arr[0:50] = v[:50]  # simulate the data half of an interrupted commit
    again = _store(tmp_path / "m")
    assert 0 in again.pending_shards()


def test_bad_inputs(tmp_path: Path) -> None:
    s = _store(tmp_path / "m")
    with pytest.raises(SigmapInputError, match="shard 0 expects 50 values, got 49"):
        s.write_shard(0, np.zeros(49))
    with pytest.raises(SigmapInputError, match="non-finite"):
        s.write_shard(0, np.full(50, np.nan))
    with pytest.raises(IndexError):
        s.write_shard(5, np.zeros(1))
    with pytest.raises(SigmapInputError, match="not contiguous"):
        NLLStore.create_or_open(tmp_path / "x", N, [(0, 10), (11, 300)], FP)
    with pytest.raises(SigmapInputError, match="cover 200 units"):
        NLLStore.create_or_open(tmp_path / "y", N, [(0, 200)], FP)
    with pytest.raises(SigmapInputError, match=r"no manifest\.json"):
        NLLStore.open(tmp_path / "nothing")


def test_fsspec_memory_url() -> None:
    url = "memory://sigmap-test-store/m"
    s = NLLStore.create_or_open(url, N, BOUNDS, FP, chunk_units=64)
    v = _values(2)
    _write_all(s, v)
    assert s.verify() == []
    r = NLLStore.open(url)
    assert r.is_complete()
    np.testing.assert_array_equal(r.read(), v)
