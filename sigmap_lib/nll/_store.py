"""Per-model NLL store: one zarr v3 array ``(n_units,)`` float32 (nats), written shard by shard.

Layout of a store folder (a local path or an fsspec URL such as ``memory://x``)::

    <path>/zarr.json          zarr v3 array metadata: shape (n_units,), float32,
                              fill value NaN, regular chunks of ``chunk_units`` units
    <path>/c/<k>              chunk k (units [k·chunk_units, (k+1)·chunk_units))
    <path>/manifest.json      sigmap progress manifest (JSON):
        {"format": "sigmap-nll/1", "n_units", "corpus_fingerprint", "chunk_units",
         "shards": [[unit_start, unit_end], ...],
         "committed": {"<shard>": {"sha256": hex of the shard's float32 little-endian
                                     bytes, "n": n_units}},
         "attrs": {...}}

Readers open the array directly: ``zarr.open_array(path, mode="r")`` (unwritten units
read as NaN); :meth:`NLLStore.is_complete` says whether every shard is committed.

Commit protocol and chunk alignment
-----------------------------------
Corpus shards are document ranges, so their unit boundaries are arbitrary while zarr
chunks are regular. A shard therefore owns the chunks fully inside it and shares at most
one chunk with each neighbour. Safety does not depend on alignment because (1) every
chunk write is atomic (zarr's ``LocalStore`` writes a temporary file and renames it;
object stores replace whole objects), (2) writing a shard reads the boundary chunk,
replaces only the shard's own units and writes the chunk back, so a neighbour's
committed values are preserved, and (3) writes to one store are sequential (one writer
per model). A shard is *committed* only when the manifest, rewritten atomically
(temporary name + rename) after its data, records its checksum. An interrupted write
leaves the shard uncommitted; it is rewritten on resume. Writing the same shard twice with
the same values is idempotent.

:meth:`NLLStore.verify` reads every committed shard back and recomputes its checksum; a
chunk that fails to decode (truncated or corrupted file) is deleted, and every shard
whose bytes no longer match is un-committed and thus pending again (a deleted shared
chunk makes both neighbours pending).
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._fields import ManifestField
from sigmap_lib.errors import SigmapInputError

_FORMAT = "sigmap-nll/1"
_MANIFEST = "manifest.json"


def shard_checksum(values: np.ndarray) -> str:
    """sha256 hex of ``values`` as contiguous little-endian float32 bytes.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import shard_checksum
    >>> shard_checksum(np.array([1.0, 2.0]))
    'b9c80b5adeca450753a16950c3cc655d271f7bef7a485bc83f112b72fef21d37'
    >>> shard_checksum([1.0, 2.0]) == shard_checksum(np.array([1.0, 2.0], dtype=np.float32))
    True
    """
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f4").tobytes()).hexdigest()


class _FS:
    """Tiny filesystem shim: a local folder or an fsspec URL."""

    def __init__(self, path: str | Path) -> None:
        s = str(path)
        self.is_local = "://" not in s or s.startswith("file://")
        if self.is_local:
            self.root = Path(s.removeprefix("file://")).expanduser().resolve()
            self.fs = None
        else:
            import fsspec

            self.fs, self.root_str = fsspec.core.url_to_fs(s)
            self.url = s

    def zarr_store(self, read_only: bool = False) -> Any:
        import zarr.storage

        if self.is_local:
            return zarr.storage.LocalStore(self.root, read_only=read_only)
        return zarr.storage.FsspecStore.from_url(self.url, read_only=read_only)

    def read_text(self, name: str) -> str | None:
        if self.is_local:
            p = self.root / name
            return p.read_text() if p.exists() else None
        p = f"{self.root_str}/{name}"
        return self.fs.cat_file(p).decode() if self.fs.exists(p) else None

    def write_text_atomic(self, name: str, text: str) -> None:
        data = text.encode()
        if self.is_local:
            import os

            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".{name}.{uuid.uuid4().hex}.tmp"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.root / name)
            except BaseException:  # e.g. disk full: keep the old file, leave no temp behind
                tmp.unlink(missing_ok=True)
                raise
        else:  # object stores replace whole objects atomically
            tmp = f"{self.root_str}/.{name}.{uuid.uuid4().hex}.tmp"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, f"{self.root_str}/{name}")

    def __str__(self) -> str:
        return str(self.root) if self.is_local else self.url


class NLLStore:
    """A per-model NLL array with a shard-level commit manifest (see module docstring).

    ``NLLStore(path)`` opens an existing store (read-write); :meth:`create_or_open`
    creates one for a corpus (writers); :meth:`open` opens read-only (readers).
    """

    def __init__(self, path: str | Path) -> None:
        import zarr

        fs = _FS(path)
        raw = fs.read_text(_MANIFEST)
        if raw is None:
            raise SigmapInputError(f"NLL store {fs}: no {_MANIFEST} (not an NLL store)")
        self._fs = fs
        self._manifest = _parse_manifest(raw, fs)
        self._arr = zarr.open_array(fs.zarr_store(), mode="r+")

    @classmethod
    def _from_parts(cls, fs: _FS, manifest: dict[str, Any], array: Any) -> NLLStore:
        self = cls.__new__(cls)
        self._fs = fs
        self._manifest = manifest
        self._arr = array
        return self

    # ------------------------------------------------------------------ opening
    @classmethod
    def create_or_open(
        cls,
        path: str | Path,
        n_units: int,
        shard_bounds: Sequence[tuple[int, int]],
        corpus_fingerprint: str,
        *,
        chunk_units: int = 65536,
        attrs: dict[str, Any] | None = None,
    ) -> NLLStore:
        """Open the store at ``path`` for writing, creating it if absent.

        Parameters
        ----------
        n_units
            Corpus unit count (array length).
        shard_bounds
            ``[(unit_start, unit_end), ...]`` contiguous, tiling ``[0, n_units)``.
        corpus_fingerprint
            ``CorpusStore.fingerprint``; an existing store with another fingerprint, unit
            count or shard layout is refused (delete it to rescore).
        chunk_units
            zarr chunk length for a new store (capped at ``n_units``).
        attrs
            JSON-able metadata merged into the manifest (e.g. model id, dtype).
        """
        import zarr

        bounds = [(int(a), int(b)) for a, b in shard_bounds]
        _check_bounds(bounds, n_units, path)
        fs = _FS(path)
        raw = fs.read_text(_MANIFEST)
        if raw is not None:
            manifest = _parse_manifest(raw, fs)
            if (
                manifest["corpus_fingerprint"] != corpus_fingerprint
                or manifest["n_units"] != n_units
            ):
                raise SigmapInputError(
                    f"NLL store {fs}: built for another corpus (fingerprint "
                    f"{manifest['corpus_fingerprint'][:12]}…, {manifest['n_units']} units; now "
                    f"{corpus_fingerprint[:12]}…, {n_units} units); delete it to rescore"
                )
            if [tuple(b) for b in manifest["shards"]] != bounds:
                raise SigmapInputError(
                    f"NLL store {fs}: shard layout differs from the corpus shards"
                )
            try:
                arr = zarr.open_array(fs.zarr_store(), mode="r+")
            except Exception as exc:
                raise SigmapInputError(
                    f"NLL store {fs}: manifest present but zarr array unreadable ({exc})"
                ) from exc
            if attrs:
                manifest["attrs"].update(attrs)
                fs.write_text_atomic(_MANIFEST, json.dumps(manifest))
            return cls._from_parts(fs, manifest, arr)
        chunk = max(1, min(int(chunk_units), int(n_units)))
        # uncompressed: zstd saves ~12% on float32 NLL but caps streaming reads at ~1e8
        # values/s per core (screening reads every array end to end)
        arr = zarr.create_array(
            fs.zarr_store(), shape=(int(n_units),), chunks=(chunk,), dtype="float32",
            fill_value=math.nan, overwrite=True, compressors=None,
        )  # fmt: skip
        manifest = {
            "format": _FORMAT,
            "n_units": int(n_units),
            "corpus_fingerprint": str(corpus_fingerprint),
            "chunk_units": chunk,
            "shards": [list(b) for b in bounds],
            "committed": {},
            "attrs": dict(attrs or {}),
        }
        fs.write_text_atomic(_MANIFEST, json.dumps(manifest))
        return cls._from_parts(fs, manifest, arr)

    @classmethod
    def open(cls, path: str | Path) -> NLLStore:
        """Open an existing store read-only (raises ``SigmapInputError`` if absent)."""
        import zarr

        fs = _FS(path)
        raw = fs.read_text(_MANIFEST)
        if raw is None:
            raise SigmapInputError(f"NLL store {fs}: no {_MANIFEST} (not an NLL store)")
        manifest = _parse_manifest(raw, fs)
        arr = zarr.open_array(fs.zarr_store(read_only=True), mode="r")
        store = cls._from_parts(fs, manifest, arr)
        store._read_only = True  # `array` hands out this handle (opening one costs ~1 ms)
        return store

    # ------------------------------------------------------------------ properties
    @property
    def path(self) -> str:
        return str(self._fs)

    n_units = ManifestField(int, "_manifest")
    corpus_fingerprint = ManifestField(str, "_manifest")

    @property
    def shard_bounds(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in self._manifest["shards"]]

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._manifest["attrs"])

    @property
    def array(self) -> Any:
        """The zarr array, opened read-only."""
        import zarr

        if getattr(self, "_read_only", False):
            return self._arr
        return zarr.open_array(self._fs.zarr_store(read_only=True), mode="r")

    @property
    def checksums(self) -> dict[str, str]:
        """Committed shard -> sha256 of its float32 bytes (the store's content identity)."""
        return {k: str(v["sha256"]) for k, v in sorted(self._manifest["committed"].items())}

    def committed_shards(self) -> list[int]:
        return sorted(int(k) for k in self._manifest["committed"])

    def pending_shards(self) -> list[int]:
        """Shard indices not yet committed, ascending."""
        done = self._manifest["committed"]
        return [i for i in range(len(self._manifest["shards"])) if str(i) not in done]

    def is_complete(self) -> bool:
        return not self.pending_shards()

    # ------------------------------------------------------------------ writing
    def write_shard(self, shard_index: int, values: np.ndarray) -> None:
        """Write ``values`` (``(unit_end - unit_start,)``, finite) for one shard and commit it."""
        bounds = self._manifest["shards"]
        if not 0 <= shard_index < len(bounds):
            raise IndexError(
                f"NLL store {self.path}: shard {shard_index} outside [0, {len(bounds)})"
            )
        a, b = bounds[shard_index]
        vals = np.asarray(values, dtype=np.float32).reshape(-1)
        if len(vals) != b - a:
            raise SigmapInputError(
                f"NLL store {self.path}: shard {shard_index} expects {b - a} values, got {len(vals)}"
            )
        if not np.all(np.isfinite(vals)):
            raise SigmapInputError(
                f"NLL store {self.path}: shard {shard_index} has non-finite values"
            )
        digest = shard_checksum(vals)
        entry = self._manifest["committed"].get(str(shard_index))
        if entry is not None and entry["sha256"] == digest:
            return  # idempotent: already committed with identical data
        if entry is not None:  # un-commit before overwriting with different values
            del self._manifest["committed"][str(shard_index)]
            self._write_manifest()
        if b > a:
            self._arr[a:b] = vals
        self._manifest["committed"][str(shard_index)] = {"sha256": digest, "n": b - a}
        self._write_manifest()

    def _write_manifest(self) -> None:
        self._fs.write_text_atomic(_MANIFEST, json.dumps(self._manifest))

    # ------------------------------------------------------------------ checking
    def verify(self) -> list[int]:
        """Check every committed shard against its checksum; returns the bad shards.

        Undecodable chunks (truncated / corrupted files) are deleted, and bad shards are
        un-committed (they become pending), so a following run rewrites them.
        """
        bounds = self._manifest["shards"]
        chunk = int(self._manifest["chunk_units"])
        bad_chunks: set[int] = set()
        n_chunks = math.ceil(self.n_units / chunk) if self.n_units else 0
        for k in range(n_chunks):
            try:
                self._arr[k * chunk : min((k + 1) * chunk, self.n_units)]
            except Exception:
                bad_chunks.add(k)
        if bad_chunks:
            import zarr

            store = self._fs.zarr_store()
            for k in sorted(bad_chunks):
                key = self._arr.metadata.encode_chunk_key((k,))
                zarr.core.sync.sync(store.delete(key))
            self._arr = zarr.open_array(self._fs.zarr_store(), mode="r+")
        bad: list[int] = []
        for key, entry in list(self._manifest["committed"].items()):
            a, b = bounds[int(key)]
            vals = self._arr[a:b]
            if len(vals) != entry["n"] or shard_checksum(vals) != entry["sha256"]:
                bad.append(int(key))
        if bad:
            for i in bad:
                del self._manifest["committed"][str(i)]
            self._write_manifest()
        return sorted(bad)

    # ------------------------------------------------------------------ reading
    def read(self, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Values of units ``[start, stop)`` as float32 (NaN where not yet written)."""
        a = 0 if start is None else int(start)
        b = self.n_units if stop is None else int(stop)
        return np.asarray(self._arr[a:b], dtype=np.float32)

    def __repr__(self) -> str:
        n = len(self._manifest["shards"])
        return f"NLLStore({self.path!r}, units={self.n_units}, committed={n - len(self.pending_shards())}/{n})"


def corpus_chunk_units(corpus: Any) -> int:
    """zarr chunk length for a new store of ``corpus``: its target shard size.

    Chunks then roughly follow the corpus shards, so a corrupted chunk found by
    :meth:`NLLStore.verify` re-queues only the shard(s) it overlaps, not the whole array.
    """
    block = getattr(corpus, "block_units", None)  # a shard store: its commit blocks
    if block:
        return int(block)
    manifest = getattr(corpus, "manifest", None) or {}
    return int(manifest.get("shard_units") or 65536)


def _check_bounds(bounds: list[tuple[int, int]], n_units: int, path: Any) -> None:
    if n_units < 0:
        raise SigmapInputError(f"NLL store {path}: n_units={n_units} must be >= 0")
    pos = 0
    for i, (a, b) in enumerate(bounds):
        if a != pos or b < a:
            raise SigmapInputError(
                f"NLL store {path}: shard {i} bounds ({a}, {b}) are not contiguous from {pos}"
            )
        pos = b
    if pos != n_units:
        raise SigmapInputError(f"NLL store {path}: shards cover {pos} units, expected {n_units}")


def _parse_manifest(raw: str, fs: _FS) -> dict[str, Any]:
    try:
        m = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SigmapInputError(f"NLL store {fs}: corrupt {_MANIFEST} ({exc})") from exc
    if m.get("format") != _FORMAT:
        raise SigmapInputError(f"NLL store {fs}: unknown format {m.get('format')!r}")
    m.setdefault("attrs", {})
    return m


def open_nll_source(source: str | Path) -> Any:
    """A precomputed per-unit NLL file, read lazily: a ``.npy`` file (memory-mapped) or a
    zarr array (a folder).

    Parameters
    ----------
    source : str or Path

    Returns
    -------
    array_like, shape (n_units,)
        Slices read only what they cover.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import open_nll_source
    >>> np.save("ext.npy", np.arange(5, dtype=np.float32))
    >>> open_nll_source("ext.npy")[1:3].tolist()
    [1.0, 2.0]
    """
    src = Path(source)
    if src.suffix == ".npy":
        return np.load(src, mmap_mode="r")
    import zarr

    return zarr.open_array(str(src), mode="r")


def import_nll(
    source: str | Path,
    corpus: Any,
    path: str | Path,
    *,
    model_id: str = "",
    unit_offset: int = 0,
    total_units: int | None = None,
) -> dict[str, Any]:
    """Import per-unit NLL computed elsewhere into an :class:`NLLStore`.

    For worlds whose models are not run here (the synthetic world) and for NLL computed
    by an external GPU job. The source is validated (1-D, one finite value per corpus
    unit) before anything is written; it is then committed shard by shard like a scored
    model, so a re-run is a no-op and an interrupted import resumes.

    Parameters
    ----------
    source
        ``.npy`` file (or a zarr array path) of shape ``(corpus.n_units,)``, nats per unit.
    corpus
        The :class:`sigmap_lib.inputs.CorpusStore` the values are aligned with.
    path
        Store location (local path or fsspec URL).
    model_id
        For messages and the store's attributes.
    unit_offset, total_units
        For one shard of a larger corpus: the source holds ``total_units`` values (the
        whole corpus in plan order) and the shard's are ``[unit_offset, unit_offset +
        corpus.n_units)``. Default: the source is exactly ``corpus``.

    Returns
    -------
    dict
        ``units``, ``shards_written``, ``shards_skipped``, ``total_nll``, ``bits_per_byte``,
        ``source``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.inputs import Document, build_corpus_store
    >>> from sigmap_lib.nll import NLLStore, import_nll
    >>> docs = [Document("d0", "inline", "a river stone."), Document("d1", "inline", "42 clouds")]
    >>> corpus = build_corpus_store(docs, "corpus", shard_units=3)
    >>> corpus.n_units, corpus.shard_bounds
    (6, [(0, 4), (4, 6)])
    >>> np.save("ext.npy", np.full(corpus.n_units, 2.0))  # e.g. from an external GPU job
    >>> res = import_nll("ext.npy", corpus, "nll/ext", model_id="ext")
    >>> res["units"], res["shards_written"], res["total_nll"]
    (6, 2, 12.0)
    >>> import_nll("ext.npy", corpus, "nll/ext")["shards_skipped"]  # a re-run is a no-op
    2
    >>> NLLStore.open("nll/ext").read().tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    """
    src = Path(source)
    if not src.exists():
        raise SigmapInputError(f"model {model_id or '?'}: nll_source {src} does not exist")
    values = open_nll_source(src)
    expected = corpus.n_units if total_units is None else int(total_units)
    if values.ndim != 1 or values.shape[0] != expected:
        raise SigmapInputError(
            f"model {model_id or '?'}: nll_source {src} has shape {tuple(values.shape)}, "
            f"expected ({expected},) — one value per corpus unit"
        )
    if not 0 <= unit_offset <= expected - corpus.n_units:
        raise SigmapInputError(
            f"model {model_id or '?'}: units [{unit_offset}, {unit_offset + corpus.n_units}) "
            f"lie outside nll_source {src} ({expected} units)"
        )
    values = values[unit_offset : unit_offset + corpus.n_units]
    shards = corpus.shards
    # validate every value before anything is written (a bad source must not leave a
    # half-imported store behind); blocks keep memory bounded for large memory-mapped files
    step = 1 << 22
    for lo in range(0, corpus.n_units, step):
        block = np.asarray(values[lo : lo + step], dtype=np.float32)
        if not np.all(np.isfinite(block)):
            bad = int(np.flatnonzero(~np.isfinite(block))[0]) + lo + unit_offset
            raise SigmapInputError(
                f"model {model_id or '?'}: nll_source {src} has a non-finite value at unit {bad}"
            )
    store = NLLStore.create_or_open(
        path,
        corpus.n_units,
        [(s.unit_start, s.unit_end) for s in shards],
        corpus.fingerprint,
        chunk_units=corpus_chunk_units(corpus),
        attrs={"model_id": model_id, "source": str(src), "kind": "imported"},
    )
    pending = set(store.pending_shards()) | set(store.verify())
    total = 0.0
    for s in shards:
        block = np.asarray(values[s.unit_start : s.unit_end], dtype=np.float32)
        total += float(block.sum(dtype=np.float64))
        if s.index in pending:
            store.write_shard(s.index, block)
    nbytes = float(np.asarray(corpus.unit_nbytes).sum())
    return {
        "units": int(corpus.n_units),
        "shards_written": len(pending),
        "shards_skipped": len(shards) - len(pending),
        "total_nll": total,
        "bits_per_byte": total / (nbytes * math.log(2)) if nbytes else float("nan"),
        "source": str(src),
    }
