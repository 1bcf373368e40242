"""The on-disk rank store: per-unit rank codes of the models (:mod:`._rank_codes`) with
each model's bits-per-byte moments.

Store layout (``RankStore``)
----------------------------
``<dir>/ranks.zarr``  zarr v3 array ``(n_units, n_models)`` of the rank codes, chunked
                     ``(chunk_units, n_models)``, uncompressed and in native byte order,
                     so its chunk files are read directly (:meth:`RankStore.open` refuses
                     a store with any other codec);
``<dir>/models.json`` ``{"format": "sigmap.ranks/1", "model_keys": [...], "n_units": d,
                     "encoding": "doubled_zero_based_average_rank", "dtype": "uint8",
                     "bpb_mean": [...], "bpb_sd": [...], "chunk_units": ...}``;
bits-per-byte of unit ``j`` for a model is ``NLL_j / (n_bytes_j * ln 2)``; its mean and
(population, ``ddof=0``) standard deviation over all ``d`` units are streamed with
Chan's pairwise update in float64.
The directory is written under a temporary name beside ``dir`` and renamed at the end.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_dir
from sigmap_lib._util._files import read_folder_json
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll._arrays import (
    _raw_chunks,
    _read_raw,
    check_model_arrays,
    iter_value_chunks,
    open_model_array,
    values_dtype,
)
from sigmap_lib.nll._moments import BpbMoments, RunningMoments
from sigmap_lib.nll._rank_codes import RANK_ENCODING, _encode_into, decode_ranks, rank_dtype

STORE_FORMAT = "sigmap.ranks/1"


@dataclass(frozen=True)
class RankStore:
    """Unit-major doubled-rank matrix on disk (see module docstring for the layout).

    Attributes
    ----------
    path : Path
        The store directory.
    model_keys : list[str]
        Column order of the rank matrix.
    n_units : int
    bpb_mean, bpb_sd : numpy.ndarray, shape (n_models,)
        Per-model mean and population sd of bits-per-byte over all units.
    """

    path: Path
    model_keys: list[str]
    n_units: int
    bpb_mean: np.ndarray
    bpb_sd: np.ndarray
    chunk_units: int

    @property
    def n_models(self) -> int:
        return len(self.model_keys)

    @property
    def dtype(self) -> np.dtype:
        return rank_dtype(self.n_models)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> RankStore:
        """Open a store written by :func:`build_rank_store`."""
        p = Path(path)
        meta_path, meta = read_folder_json(p, "models.json", "rank store")
        if meta.get("format") != STORE_FORMAT or meta.get("encoding") != RANK_ENCODING:
            raise SigmapInputError(
                f"{meta_path}: unsupported rank store format {meta.get('format')!r} / "
                f"encoding {meta.get('encoding')!r}"
            )
        if not (p / "ranks.zarr").exists():
            raise SigmapInputError(f"{p} is not a rank store (missing ranks.zarr)")
        store = cls(
            path=p,
            model_keys=list(meta["model_keys"]),
            n_units=int(meta["n_units"]),
            bpb_mean=np.asarray(meta["bpb_mean"], dtype=np.float64),
            bpb_sd=np.asarray(meta["bpb_sd"], dtype=np.float64),
            chunk_units=int(meta["chunk_units"]),
        )
        store._raw_codes()
        return store

    def array(self) -> Any:
        """The zarr array of codes, opened read-only."""
        import zarr

        return zarr.open_array(str(self.path / "ranks.zarr"), mode="r")

    def _raw_codes(self) -> Any:
        """Where the code chunks lie on disk; a :class:`SigmapInputError` when the array
        is not stored the way :func:`build_rank_store` writes it."""
        arr = self.array()
        raw = _raw_chunks(arr)
        if raw is None:
            codecs = ", ".join(c.to_dict()["name"] for c in arr.metadata.codecs)
            raise SigmapInputError(
                f"{self.path / 'ranks.zarr'}: rank codes stored with codecs [{codecs}], "
                "not as uncompressed native-order chunks; delete the rank store "
                f"{self.path} and re-run to rebuild it"
            )
        return raw

    def iter_chunks(self, chunk_units: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(start, codes)`` with ``codes`` of shape ``(n, n_models)`` (doubled ranks)."""
        cu = self.chunk_units if chunk_units is None else int(chunk_units)
        if cu < 1:
            raise SigmapInputError(f"chunk_units must be >= 1, got {cu}")
        raw = self._raw_codes()
        for s in range(0, self.n_units, cu):
            e = min(s + cu, self.n_units)
            block = np.empty((e - s, self.n_models), dtype=self.dtype)
            _read_raw(raw, s, e, block)
            yield s, block

    def ranks(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Average ranks (float64, 1-based) of units ``[start, stop)``."""
        stop = self.n_units if stop is None else stop
        return decode_ranks(np.asarray(self.array()[start:stop]))

    def moments(self) -> BpbMoments | None:
        """The per-model bits-per-byte moments (:class:`~sigmap_lib.nll.BpbMoments`) of
        the store's units, for exact merges across shards (``None`` for stores written
        before the counts were kept)."""
        meta = json.loads((self.path / "models.json").read_text())
        if "bpb_m2" not in meta:
            return None
        n = int(meta["bpb_count"])
        return BpbMoments(
            self.model_keys, np.full(self.n_models, n), meta["bpb_total"], meta["bpb_m2"]
        )


def rank_store_identity(
    corpus_fingerprint: str, model_keys: Sequence[str], checksums: Sequence[Mapping[str, str]]
) -> str:
    """A 16-hex-digit identity of the rank codes of these models on this corpus.

    Which models (in order) and what their NLL stores hold (per-shard checksums): a model
    that is rescored (a new revision) gives a new identity even when the set of models is
    the same, so a rank store is rebuilt exactly when its inputs changed.

    Parameters
    ----------
    corpus_fingerprint : str
    model_keys : sequence of str
        Model keys in rank-store column order.
    checksums : sequence of mappings
        Each model's ``NLLStore.checksums`` (shard -> sha256).

    Examples
    --------
    >>> from sigmap_lib.nll import rank_store_identity
    >>> a = rank_store_identity("fp", ["m1", "m2"], [{"0": "aa"}, {"0": "bb"}])
    >>> len(a), a == rank_store_identity("fp", ["m1", "m2"], [{"0": "aa"}, {"0": "bb"}])
    (16, True)
    >>> a == rank_store_identity("fp", ["m1", "m2"], [{"0": "aa"}, {"0": "cc"}])
    False
    """
    import hashlib
    import json

    h = hashlib.sha256(corpus_fingerprint.encode())
    for key, sums in zip(model_keys, checksums, strict=True):
        h.update(key.encode())
        h.update(json.dumps(dict(sums), sort_keys=True).encode())
    return h.hexdigest()[:16]


def build_rank_store(
    nll_arrays: Sequence[Any],
    model_keys: Sequence[str],
    unit_nbytes: Any,
    out_dir: str | os.PathLike[str],
    *,
    chunk_units: int = 1 << 20,
    overwrite: bool = True,
) -> RankStore:
    """Rank every unit's NLL across models and store codes + bits-per-byte moments.

    Parameters
    ----------
    nll_arrays : sequence of length n_models
        Per-model NLL arrays ``(n_units,)`` (nats): zarr arrays, numpy arrays, or paths
        to zarr arrays / ``.npy`` files. Read ``chunk_units`` units at a time, so memory
        is bounded by ``O(chunk_units * n_models)`` whatever ``n_units``.
    model_keys : sequence of str
        One key per array (column order of the store).
    unit_nbytes : array_like of int, shape (n_units,)
        UTF-8 bytes per unit (> 0), for bits-per-byte ``NLL / (n_bytes * ln 2)``.
    out_dir : path
        Store directory; written to a temporary folder beside it (``.<name>.tmp-*``),
        then renamed into place (atomic).
    chunk_units : int
        Units per chunk (also the zarr chunk length).
    overwrite : bool
        Replace an existing store at ``out_dir``.

    Returns
    -------
    RankStore

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import RankStore, build_rank_store
    >>> nll = [np.array([2.0, 1.0, 3.0]), np.array([1.0, 1.0, 4.0])]  # per model, nats
    >>> store = build_rank_store(nll, ["m1", "m2"], [1, 2, 2], "ranks")
    >>> store.n_units, store.model_keys, store.dtype
    (3, ['m1', 'm2'], dtype('uint8'))
    >>> store.ranks().tolist()  # (n_units, n_models) average ranks
    [[2.0, 1.0], [1.5, 1.5], [1.0, 2.0]]
    >>> RankStore.open("ranks").n_models
    2
    """
    import zarr

    keys = [str(k) for k in model_keys]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise SigmapInputError(f"duplicate model keys for the rank store: {dup}")
    arrays, d = check_model_arrays(nll_arrays, keys)
    m = len(arrays)
    dt = rank_dtype(m)
    if isinstance(unit_nbytes, (str, os.PathLike)) or hasattr(unit_nbytes, "shape"):
        nbytes_arr = open_model_array(unit_nbytes)
    else:
        nbytes_arr = np.asarray(unit_nbytes)
    if len(nbytes_arr.shape) != 1 or int(nbytes_arr.shape[0]) != d:
        raise SigmapInputError(
            f"unit_nbytes must have shape ({d},) to match the NLL arrays, got {nbytes_arr.shape}"
        )
    if chunk_units < 1:
        raise SigmapInputError(f"chunk_units must be >= 1, got {chunk_units}")
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise SigmapInputError(f"rank store {out} exists and overwrite=False")
    with atomic_dir(out) as tmp:
        z = zarr.create_array(
            store=str(tmp / "ranks.zarr"),
            shape=(d, m),
            chunks=(max(1, min(chunk_units, max(d, 1))), m),
            dtype=dt,
            fill_value=0,
            zarr_format=3,
            # rank codes are near-incompressible (permutations); raw chunks are read back
            # with one copy (see _read_into)
            compressors=None,
        )
        moments = RunningMoments(m)
        codes = np.empty((min(chunk_units, max(d, 1)), m), dtype=dt)
        vdt = values_dtype(arrays)
        for start, block in iter_value_chunks(arrays, chunk_units, n_units=d, dtype=vdt):
            n = block.shape[0]
            nb_chunk = np.asarray(nbytes_arr[start : start + n], dtype=np.float64)
            if not (nb_chunk > 0).all():
                bad = start + int(np.argmax(~(nb_chunk > 0)))
                raise SigmapInputError(
                    f"unit_nbytes must be > 0; unit {bad} has {nb_chunk[bad - start]}"
                )
            out_codes = codes[:n]
            if _encode_into(block, out_codes):  # NaN values were read
                r, c = np.argwhere(np.isnan(block))[0]
                raise SigmapInputError(f"model {keys[int(c)]}: NLL is NaN at unit {start + int(r)}")
            z[start : start + n] = out_codes
            # bits per byte = NLL / (n_bytes · ln 2), merged into running moments
            moments.update(block, 1.0 / (nb_chunk * math.log(2.0)))
        meta = {
            "format": STORE_FORMAT,
            "encoding": RANK_ENCODING,
            "dtype": dt.name,
            "model_keys": keys,
            "n_units": d,
            "chunk_units": int(chunk_units),
            "bpb_mean": moments.mean.tolist(),
            "bpb_sd": moments.sd.tolist(),
            # count / sum / M2 per model: the shard's part of an exact merge (BpbMoments)
            "bpb_count": moments.n,
            "bpb_total": (moments.mean * moments.n).tolist(),
            "bpb_m2": moments.m2.tolist(),
        }
        (tmp / "models.json").write_text(json.dumps(meta, indent=1))
    return RankStore.open(out)
