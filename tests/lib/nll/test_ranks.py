"""Ranks: exact doubled average-rank codes, the streamed rank store, bpb moments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import zarr
from scipy.stats import rankdata

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import (
    RankStore,
    build_rank_store,
    decode_ranks,
    encode_ranks,
    rank_dtype,
    rank_rows,
)


def _tied_values(rng: np.random.Generator, d: int, m: int) -> np.ndarray:
    # few distinct values per row -> many ties; plus some continuous rows and infinities
    v = rng.integers(0, 4, size=(d, m)).astype(np.float32)
    v[: d // 2] = rng.standard_normal((d // 2, m)).astype(np.float32)
    v[0, 0] = np.inf
    v[1, :] = 3.0  # all tied
    return v


@pytest.mark.parametrize("m", [1, 2, 7, 32, 129])
def test_rank_rows_matches_scipy_average_ranks(m: int) -> None:
    rng = np.random.default_rng(m)
    v = _tied_values(rng, 300, m)
    got = rank_rows(v)
    want = rankdata(v, method="average", axis=1)
    np.testing.assert_array_equal(got, want)
    codes = encode_ranks(v)
    assert codes.dtype == rank_dtype(m)
    assert codes.dtype == (np.uint8 if m <= 128 else np.uint16)
    np.testing.assert_array_equal(codes.astype(np.int64), (2 * want - 2).astype(np.int64))
    np.testing.assert_array_equal(decode_ranks(codes), want)


def test_codes_brute_force_count_definition() -> None:
    rng = np.random.default_rng(5)
    v = rng.integers(0, 3, size=(40, 9)).astype(np.float64)
    codes = encode_ranks(v)
    for u in range(v.shape[0]):
        for k in range(v.shape[1]):
            less = sum(v[u, l] < v[u, k] for l in range(v.shape[1]))  # noqa: E741
            eq = sum(v[u, l] == v[u, k] for l in range(v.shape[1]) if l != k)  # noqa: E741
            assert codes[u, k] == 2 * less + eq


def test_ranking_is_exact_for_float64_and_int_inputs() -> None:
    v = np.array([[1.0, 1.0 + 1e-12, 1.0], [5, 4, 3]], dtype=np.float64)
    np.testing.assert_array_equal(rank_rows(v), rankdata(v, axis=1))
    vi = np.array([[3, 1, 2, 2]], dtype=np.int64)
    np.testing.assert_array_equal(rank_rows(vi), [[4, 1, 2.5, 2.5]])


def test_rank_rows_rejects_bad_input() -> None:
    with pytest.raises(SigmapInputError, match="NaN"):
        rank_rows(np.array([[1.0, np.nan]]))
    with pytest.raises(SigmapInputError, match="unit-major"):
        rank_rows(np.ones(3))
    with pytest.raises(SigmapInputError):
        rank_dtype(0)


def _write_models(tmp_path, values: np.ndarray, kind: str) -> list:
    out = []
    for j in range(values.shape[1]):
        if kind == "zarr":
            p = tmp_path / f"nll_{j}.zarr"
            z = zarr.create_array(
                store=str(p), shape=(values.shape[0],), chunks=(97,), dtype="float32"
            )
            z[:] = values[:, j]
            out.append(zarr.open_array(str(p), mode="r") if j % 2 else str(p))
        else:
            p = tmp_path / f"nll_{j}.npy"
            np.save(p, values[:, j])
            out.append(p if j % 2 else values[:, j].copy())
    return out


@pytest.mark.parametrize("kind", ["zarr", "npy"])
def test_build_rank_store_streams_exact_ranks_and_moments(tmp_path, kind: str) -> None:
    rng = np.random.default_rng(11)
    d, m = 1000, 6
    nll = (rng.gamma(2.0, 1.5, size=(d, m)) + 100.0).astype(np.float32)
    nll[::7, 2] = nll[::7, 3]  # ties
    nbytes = rng.integers(1, 9, size=d)
    arrays = _write_models(tmp_path, nll, kind)
    keys = [f"org/m{j}" for j in range(m)]
    store = build_rank_store(arrays, keys, nbytes, tmp_path / "ranks", chunk_units=128)
    assert isinstance(store, RankStore)
    assert store.model_keys == keys and store.n_units == d
    got = np.concatenate([c for _, c in store.iter_chunks(300)])
    starts = [s for s, _ in store.iter_chunks(300)]
    assert starts == [0, 300, 600, 900]
    np.testing.assert_array_equal(decode_ranks(got), rankdata(nll, axis=1))
    bpb = nll.astype(np.float64) / (nbytes[:, None] * math.log(2))
    np.testing.assert_allclose(store.bpb_mean, bpb.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(store.bpb_sd, bpb.std(axis=0), rtol=1e-9)
    reopened = RankStore.open(tmp_path / "ranks")
    assert reopened.model_keys == keys
    np.testing.assert_array_equal(reopened.ranks(10, 20), rankdata(nll[10:20], axis=1))
    meta = json.loads((tmp_path / "ranks" / "models.json").read_text())
    assert meta["encoding"] == "doubled_zero_based_average_rank" and meta["dtype"] == "uint8"
    # no temporary directory is left behind, and rebuilding replaces atomically
    build_rank_store(arrays, keys, nbytes, tmp_path / "ranks", chunk_units=1000)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ranks")) == ["ranks"]


def test_bpb_moments_are_stable_for_large_offsets(tmp_path) -> None:
    rng = np.random.default_rng(2)
    d = 5000
    nll = np.stack([1e4 + rng.standard_normal(d), 1e4 + 2 * rng.standard_normal(d)], axis=1)
    nbytes = np.ones(d, dtype=np.int64)
    store = build_rank_store(
        [nll[:, 0], nll[:, 1]], ["a", "b"], nbytes, tmp_path / "r", chunk_units=333
    )
    bpb = nll / math.log(2)  # float64 inputs are read as float64
    np.testing.assert_allclose(store.bpb_sd, bpb.std(axis=0), rtol=1e-8)


def test_build_rank_store_validation(tmp_path) -> None:
    a = np.ones(10, dtype=np.float32)
    with pytest.raises(SigmapInputError, match="units"):
        build_rank_store([a, np.ones(9, np.float32)], ["a", "b"], np.ones(10), tmp_path / "r")
    with pytest.raises(SigmapInputError, match="duplicate"):
        build_rank_store([a, a], ["a", "a"], np.ones(10), tmp_path / "r")
    with pytest.raises(SigmapInputError, match="unit_nbytes"):
        build_rank_store([a, a], ["a", "b"], np.ones(9), tmp_path / "r")
    with pytest.raises(SigmapInputError, match="> 0"):
        build_rank_store([a, a], ["a", "b"], np.zeros(10), tmp_path / "r")
    bad = a.copy()
    bad[4] = np.nan
    with pytest.raises(SigmapInputError, match="model b: NLL is NaN at unit 4"):
        build_rank_store([a, bad], ["a", "b"], np.ones(10), tmp_path / "r")
    assert not (tmp_path / "r").exists()
    assert not any(p.name.startswith("r.tmp") for p in tmp_path.iterdir())
    with pytest.raises(SigmapInputError, match="not a rank store"):
        RankStore.open(tmp_path)


def test_a_compressed_rank_store_is_refused_with_the_fix(tmp_path) -> None:
    """A rank store whose codes carry a codec (not how build_rank_store writes them) is
    one SigmapInputError naming the array, its codecs and the fix, not a slower read."""
    nll = [np.array([2.0, 1.0, 3.0]), np.array([1.0, 1.0, 4.0])]
    store = build_rank_store(nll, ["m1", "m2"], [1, 2, 2], tmp_path / "ranks")
    codes = np.asarray(store.array()[:])
    packed = zarr.create_array(
        store=str(tmp_path / "ranks" / "ranks.zarr"),
        shape=codes.shape,
        chunks=codes.shape,
        dtype=codes.dtype,
        overwrite=True,
    )  # zarr's default codecs: bytes + zstd
    packed[:] = codes
    with pytest.raises(SigmapInputError) as err:
        RankStore.open(tmp_path / "ranks")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(tmp_path / "ranks" / "ranks.zarr"))
    assert "codecs [bytes, zstd]" in msg
    assert f"delete the rank store {tmp_path / 'ranks'} and re-run" in msg
    with pytest.raises(SigmapInputError, match="codecs"):
        next(store.iter_chunks())
    (tmp_path / "ranks" / "ranks.zarr" / "zarr.json").unlink()
    (tmp_path / "ranks" / "ranks.zarr").rename(tmp_path / "ranks" / "codes")
    with pytest.raises(SigmapInputError, match=r"not a rank store \(missing ranks\.zarr\)"):
        RankStore.open(tmp_path / "ranks")


def test_raw_chunk_reads_equal_zarr_reads(tmp_path) -> None:
    """The readinto fast path for uncompressed local zarr v3 arrays returns exactly what
    zarr returns, for any slice; other codecs fall back to zarr; a missing chunk reads as
    the fill value and a truncated chunk file is a named error."""
    import zarr

    from sigmap_lib.nll._arrays import _raw_chunks, _read_into

    rng = np.random.default_rng(4)
    n, c = 10_007, 1000
    vals = rng.standard_normal(n).astype(np.float32)
    plain = zarr.create_array(
        store=str(tmp_path / "plain.zarr"),
        shape=(n,),
        chunks=(c,),
        dtype="float32",
        compressors=None,
        fill_value=np.nan,
    )
    plain[:] = vals
    packed = zarr.create_array(
        store=str(tmp_path / "zstd.zarr"), shape=(n,), chunks=(c,), dtype="float32"
    )
    packed[:] = vals
    big = zarr.create_array(
        store=str(tmp_path / "big.zarr"), shape=(n,), chunks=(c,), dtype=">f4", compressors=None
    )
    assert _raw_chunks(zarr.open_array(str(tmp_path / "plain.zarr"), mode="r")) is not None
    assert _raw_chunks(packed) is None and _raw_chunks(big) is None
    arr = zarr.open_array(str(tmp_path / "plain.zarr"), mode="r")
    for _ in range(40):
        a, b = sorted(rng.integers(0, n + 1, 2))
        row = np.empty(b - a, np.float32)
        assert _read_into(arr, a, b, row)
        np.testing.assert_array_equal(row, vals[a:b])
        row2 = np.empty(b - a, np.float32)
        assert _read_into(packed, a, b, row2)
        np.testing.assert_array_equal(row2, vals[a:b])
    (tmp_path / "plain.zarr" / "c" / "3").unlink()
    row = np.empty(n, np.float32)
    _read_into(arr, 0, n, row)
    assert np.isnan(row[3000:4000]).all()
    np.testing.assert_array_equal(row[:3000], vals[:3000])
    chunk = tmp_path / "plain.zarr" / "c" / "5"
    chunk.write_bytes(chunk.read_bytes()[:100])
    with pytest.raises(SigmapInputError, match=r"c/5 is truncated"):
        _read_into(arr, 4500, 5600, np.empty(1100, np.float32))
