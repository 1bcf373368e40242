"""The storage root may be an fsspec URL: the same code path writes parquet tables and zarr v3
arrays to ``memory://`` (standing in for s3:// / gs://) and to the local filesystem."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import numpy as np
import polars as pl
import pytest
import zarr
from upath import UPath

from sigmap_assets.resources import SigmapStorage

# zarr warns that fsspec sync filesystems are wrapped for async use (memory:// is sync).
pytestmark = pytest.mark.filterwarnings("ignore:fs .* was not created with:UserWarning")


@pytest.fixture
def memory_root():
    root = f"memory://sigmap-test-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    path = root.removeprefix("memory://")
    if fs.exists(path):
        fs.rm(path, recursive=True)


def _roots(memory_root: str, tmp_path: Path) -> list[str]:
    return [memory_root, str(tmp_path / "local-root")]


def test_memory_root_paths_are_upaths(memory_root, monkeypatch):
    storage = SigmapStorage(root=memory_root)
    assert not storage.is_local
    p = storage.layout.nll_cell("zoo.jsonl.d0.0123456789abcdef", "EleutherAI__pythia-160m", "fp01")
    assert isinstance(p, UPath) and p.protocol == "memory"
    assert str(p).endswith("/nll/shards/zoo.jsonl.d0.0123456789abcdef/EleutherAI__pythia-160m/fp01")
    with pytest.raises(ValueError, match="not local"):
        storage.layout.plots_dir()
    monkeypatch.setenv("SIGMAP_STORAGE", memory_root)
    assert SigmapStorage().root == memory_root  # the env var is the default root
    local = SigmapStorage(root="/tmp/sigmap-x")
    assert local.is_local and isinstance(local.path("a"), Path)


def _write_table(dest, table: pl.DataFrame) -> None:
    """Atomic-enough table write that works for Path and UPath alike."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with tmp.open("wb") as fh:
        table.write_parquet(fh)
    tmp.rename(dest)


def _zarr_store(path):
    if isinstance(path, UPath):
        fs = path.fs
        if not fs.async_impl:
            from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

            fs = AsyncFileSystemWrapper(fs)
        return zarr.storage.FsspecStore(fs, path=path.path)
    return zarr.storage.LocalStore(path)


@pytest.mark.parametrize("which", ["memory", "local"])
def test_parquet_and_zarr_roundtrip_through_one_code_path(memory_root, tmp_path, which):
    root = _roots(memory_root, tmp_path)[0 if which == "memory" else 1]
    storage = SigmapStorage(root=root)
    table = pl.DataFrame({"model": ["a", "b", "c"], "bpb": [0.91, 0.87, 1.02]})
    dest = storage.layout.registry_table()
    _write_table(dest, table)
    assert dest.exists() and not dest.with_name(dest.name + ".tmp").exists()
    with dest.open("rb") as fh:
        back = pl.read_parquet(fh)
    assert back.equals(table)

    rng = np.random.default_rng(0)
    values = rng.random(1000, dtype=np.float32)
    arr_path = storage.layout.nll_cell("s0", "m1", "fp")
    arr = zarr.create_array(_zarr_store(arr_path), shape=(1000,), chunks=(256,), dtype="float32",
                            fill_value=np.nan, zarr_format=3)  # fmt: skip
    arr[:] = values
    again = zarr.open_array(_zarr_store(arr_path), mode="r")
    assert again.metadata.zarr_format == 3
    np.testing.assert_array_equal(again[:], values)
    # chunk objects really are under the root's filesystem
    assert (arr_path / "zarr.json").exists()
    assert (arr_path / "c" / "3").exists()


def test_zarr_url_form_reads_what_the_store_wrote(memory_root):
    """zarr.open_array("memory://...") (the URL form users type) sees the same array."""
    storage = SigmapStorage(root=memory_root)
    arr_path = storage.layout.shard_ranks("s0", "r1")
    arr = zarr.create_array(_zarr_store(arr_path), shape=(4, 3), chunks=(2, 3), dtype="uint16")
    arr[:] = np.arange(12, dtype=np.uint16).reshape(4, 3)
    url = f"{memory_root}/ranks/shards/s0/r1"
    via_url = zarr.open_array(url, mode="r")
    np.testing.assert_array_equal(via_url[:], np.arange(12).reshape(4, 3))


@pytest.mark.parametrize("which", ["memory", "local"])
def test_nll_store_shard_roundtrip_and_verify(memory_root, tmp_path, which):
    store_mod = pytest.importorskip("sigmap_lib.nll._store")
    root = _roots(memory_root, tmp_path)[0 if which == "memory" else 1]
    storage = SigmapStorage(root=root)
    path = storage.layout.nll_cell("s0", "m1", "f" * 16)
    bounds = [(0, 300), (300, 700), (700, 1000)]
    store = store_mod.NLLStore.create_or_open(str(path), 1000, bounds, "f" * 64, chunk_units=256)
    rng = np.random.default_rng(1)
    vals = rng.random(1000, dtype=np.float32) + 1.0
    for i, (a, b) in enumerate(bounds):
        store.write_shard(i, vals[a:b])
    assert store.is_complete()
    reopened = store_mod.NLLStore.open(str(path))
    np.testing.assert_array_equal(reopened.read(), vals)
    assert reopened.verify() == []

    # Corrupt one chunk object behind the store's back: verify un-commits the shards on it.
    chunk = path / "c" / "1"  # units [256, 512): shards 0 and 1
    chunk.write_bytes(b"\x00garbage")
    writer = store_mod.NLLStore.create_or_open(str(path), 1000, bounds, "f" * 64)
    bad = writer.verify()
    assert bad == [0, 1]
    assert writer.pending_shards() == [0, 1]
    for i in bad:
        a, b = bounds[i]
        writer.write_shard(i, vals[a:b])
    np.testing.assert_array_equal(store_mod.NLLStore.open(str(path)).read(), vals)
