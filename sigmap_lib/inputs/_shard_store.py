"""The stored units of one corpus shard: written streaming and atomically, read with the
same API as :class:`~sigmap_lib.inputs.CorpusStore` (indices local to the shard).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from sigmap_lib._util import ConcatArray
from sigmap_lib._util._atomic import atomic_dir
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs._corpus import (
    CorpusStore,
    Document,
    Shard,
    check_text,
    make_shards,
    open_manifest,
)
from sigmap_lib.inputs._segment import segment_units, unit_byte_spans
from sigmap_lib.inputs._shards import (
    SHARD_FORMAT,
    ShardSpec,
    content_hash,
    hash_doc,
    iter_parquet,
    iter_positioned,
)

#: Units an NLL cell commits at a time (a shard's blocks; documents are never split).
BLOCK_UNITS = 1 << 16


# --------------------------------------------------------------------------- shard store
def _changed(spec: ShardSpec, p: Path, why: str) -> SigmapInputError:
    return SigmapInputError(
        f"shard {spec.key}: {p} changed since the shard was planned ({why}); plan the corpus again"
    )


def iter_shard_documents(spec: ShardSpec, root: str | Path) -> Iterator[Document]:
    """The documents of one planned shard, read directly (jsonl: seek; parquet: its row
    groups), checked against the spec's content hash at the end.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import iter_shard_documents, plan_shards
    >>> _ = Path("s.jsonl").write_text("".join(f'{{"text": "doc {i}"}}\\n' for i in range(4)))
    >>> specs = plan_shards("s.jsonl", target_units=4)
    >>> [d.text for d in iter_shard_documents(specs[1], ".")]
    ['doc 2', 'doc 3']
    """
    r = Path(root)
    p = r / spec.file
    if not p.is_file():
        raise SigmapInputError(f"shard {spec.key}: corpus file {p} does not exist")
    suffix = p.suffix.lower()
    h = content_hash()
    n = 0
    docs: Iterator[Document]
    if suffix == ".jsonl":
        docs = _iter_jsonl_from(spec, p)
    elif suffix == ".parquet":
        docs = (
            d for d, _ in iter_parquet(p, spec.file, spec.pattern, spec.doc_start, spec.doc_end)
        )
    elif suffix == ".txt":
        docs = (d for d, _ in iter_positioned(p, spec.file, suffix, spec.pattern))
    else:
        raise SigmapInputError(f"{p}: unsupported file type {suffix!r}")
    for d in docs:
        hash_doc(h, d)
        n += 1
        yield d
    if n != spec.n_documents or h.hexdigest() != spec.content_sha256:
        raise _changed(spec, p, f"{n} documents read, content hash differs")


def _iter_jsonl_from(spec: ShardSpec, p: Path) -> Iterator[Document]:
    with p.open("rb") as fh:
        fh.seek(spec.byte_start)
        n = 0
        for lineno, raw in enumerate(fh, start=spec.line_start):
            if n == spec.n_documents:
                return
            try:
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                obj = json.loads(line)
                text = obj["text"]
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
                raise _changed(spec, p, f"line {lineno}: {exc}") from exc
            doc_id = obj.get("id")
            doc_id = f"{spec.file}:{lineno}" if doc_id is None else str(doc_id)
            where = f"{p}:{lineno}"
            yield Document(doc_id, f"{spec.file}:{lineno}", check_text(text, where, spec.pattern))
            n += 1


def write_shard_store(
    spec: ShardSpec, root: str | Path, out_dir: str | Path, *, batch_units: int = 1 << 18
) -> ShardStore:
    """Segment one shard's documents and write its store atomically, streaming.

    Documents are read one at a time and written in parquet row groups of about
    ``batch_units`` units, so memory is one batch whatever the shard's size. The folder
    appears complete or not at all (written under a temporary name, then renamed).

    Parameters
    ----------
    spec
        From :func:`plan_shards` / :func:`plan_corpus`.
    root
        The corpus root the spec's ``file`` is relative to.
    out_dir
        The store folder (replaced if it exists).
    batch_units
        Units per row group.

    Returns
    -------
    ShardStore

    Raises
    ------
    SigmapInputError
        When the file is missing or changed since planning (content hash, unit or byte
        counts differ).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import plan_shards, write_shard_store
    >>> Path("corpus").mkdir()
    >>> _ = Path("corpus/a.jsonl").write_text(
    ...     '{"id": "x", "text": "A river, a stone."}\\n{"id": "y", "text": "42 clouds"}\\n'
    ... )
    >>> [spec] = plan_shards("corpus/a.jsonl", target_units=100, root="corpus")
    >>> store = write_shard_store(spec, "corpus", "shard")
    >>> store.n_units, store.doc_ids, store.unit_nbytes.tolist()
    (8, ['x', 'y'], [1, 6, 1, 2, 6, 1, 2, 7])
    >>> store.context(4), store.unit_doc.tolist()
    (('A river, a ', 'stone'), [0, 0, 0, 0, 0, 0, 1, 1])
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    doc_schema = pa.schema(
        [
            ("doc_index", pa.int64()),
            ("doc_id", pa.string()),
            ("source", pa.string()),
            ("text", pa.large_string()),
            ("n_bytes", pa.int64()),
            ("unit_start", pa.int64()),
            ("unit_end", pa.int64()),
        ]
    )
    unit_schema = pa.schema(
        [
            ("doc_index", pa.int32()),
            ("start", pa.int32()),
            ("end", pa.int32()),
            ("n_bytes", pa.int32()),
        ]
    )
    p = Path(root) / spec.file
    n_docs, n_units, n_bytes = 0, 0, 0
    with atomic_dir(out_dir) as tmp:
        dw = pq.ParquetWriter(tmp / "documents.parquet", doc_schema, compression="zstd")
        uw = pq.ParquetWriter(tmp / "units.parquet", unit_schema, compression="zstd")
        try:
            docs: list[Document] = []
            units: list[np.ndarray] = []
            attrs: list[np.ndarray] = []
            buffered = 0

            def flush() -> None:
                nonlocal docs, units, attrs, buffered, n_docs, n_units
                if not docs:
                    return
                nu = np.array([len(u) for u in units], dtype=np.int64)
                ends = n_units + np.cumsum(nu)
                nb = [len(d.text.encode("utf-8")) for d in docs]
                idx = np.arange(n_docs, n_docs + len(docs), dtype=np.int64)
                dw.write_table(
                    pa.table(
                        {
                            "doc_index": idx,
                            "doc_id": [d.doc_id for d in docs],
                            "source": [d.source for d in docs],
                            "text": pa.array([d.text for d in docs], pa.large_string()),
                            "n_bytes": np.asarray(nb, dtype=np.int64),
                            "unit_start": ends - nu,
                            "unit_end": ends,
                        },
                        schema=doc_schema,
                    ),
                    row_group_size=256,
                )
                u = np.concatenate(units)
                a = np.concatenate(attrs)
                uw.write_table(
                    pa.table(
                        {
                            "doc_index": np.repeat(idx.astype(np.int32), nu),
                            "start": u[:, 0].astype(np.int32),
                            "end": u[:, 1].astype(np.int32),
                            "n_bytes": (a[:, 1] - a[:, 0]).astype(np.int32),
                        },
                        schema=unit_schema,
                    )
                )
                n_docs += len(docs)
                n_units = int(ends[-1])
                docs, units, attrs, buffered = [], [], [], 0

            for d in iter_shard_documents(spec, root):
                nbytes = len(d.text.encode("utf-8"))
                if nbytes >= 2**31:
                    raise SigmapInputError(f"{d.source}: a document is larger than 2 GiB")
                u = segment_units(d.text, spec.pattern)
                docs.append(d)
                units.append(u)
                attrs.append(unit_byte_spans(d.text, units=u))
                n_bytes += nbytes
                buffered += len(u)
                if buffered >= batch_units:
                    flush()
            flush()
        finally:
            dw.close()
            uw.close()
        if n_units != spec.n_units or n_bytes != spec.n_bytes:
            raise _changed(
                spec,
                p,
                f"{n_units} units / {n_bytes} bytes, planned {spec.n_units} / {spec.n_bytes}",
            )
        manifest = {
            "format": SHARD_FORMAT,
            "spec": spec.to_dict(),
            "n_documents": n_docs,
            "n_units": n_units,
            "n_bytes": n_bytes,
            "pattern": spec.pattern,
            "fingerprint": spec.content_sha256,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return ShardStore.open(out_dir)


class ShardStore(CorpusStore):
    """Read access to one shard's store (:func:`write_shard_store`).

    The API of :class:`~sigmap_lib.inputs.CorpusStore` (``context``, ``unit_text``,
    ``unit_nbytes``, ``unit_doc``, ``unit_spans``, ``doc_ids``, ``documents``) with
    shard-local unit and document indices; :attr:`spec` is the shard's plan entry.
    """

    @classmethod
    def open(cls, path: str | Path) -> ShardStore:
        """Open the shard store at ``path``; raises ``SigmapInputError`` if absent."""
        return cls(*open_manifest(path, SHARD_FORMAT, "shard store"))

    @property
    def spec(self) -> ShardSpec:
        return ShardSpec.from_dict(self.manifest["spec"])

    @property
    def block_units(self) -> int:
        """Target units of a commit block (:data:`BLOCK_UNITS`)."""
        return BLOCK_UNITS

    @cached_property
    def shards(self) -> list[Shard]:  # type: ignore[override]
        """Blocks of about :data:`BLOCK_UNITS` units (documents never split): the units an
        NLL cell commits at a time, so an interrupted cell resumes block by block."""
        ranges = self.doc_unit_ranges
        return make_shards((ranges[:, 1] - ranges[:, 0]).astype(np.int64), BLOCK_UNITS)

    def __repr__(self) -> str:
        return (
            f"ShardStore({str(self.path)!r}, key={self.spec.key!r}, "
            f"documents={self.n_documents}, units={self.n_units})"
        )


class ShardedCorpus:
    """Several shard stores read as one corpus: units and documents in shard order.

    The read API of :class:`~sigmap_lib.inputs.CorpusStore` that the aggregates use
    (``n_units``, ``context``, ``unit_text``, ``unit_nbytes``, ``unit_doc``, ``doc_ids``,
    ``fingerprint``) with global unit and document indices over the given shards.

    Parameters
    ----------
    stores : sequence of ShardStore
        In plan order (the order of the global unit numbering).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import ShardedCorpus, plan_corpus, write_shard_store
    >>> Path("corpus").mkdir()
    >>> _ = Path("corpus/a.txt").write_text("A river, a stone.")
    >>> _ = Path("corpus/b.txt").write_text("42 clouds")
    >>> stores = [write_shard_store(s, "corpus", f"shards/{s.key}")
    ...           for s in plan_corpus("corpus", target_units=100)]
    >>> corpus = ShardedCorpus(stores)
    >>> corpus.n_units, corpus.context(7), corpus.unit_doc.tolist()
    (8, ('42 ', 'clouds'), [0, 0, 0, 0, 0, 0, 1, 1])
    >>> groups = corpus.unit_groups(["source", "document"])  # for multi-resolution signatures
    >>> groups["source"].tolist()[-3:], groups["document"].tolist()[-3:]
    (['a.txt', 'b.txt', 'b.txt'], [0, 1, 1])
    """

    def __init__(self, stores: Sequence[ShardStore]) -> None:
        if not stores:
            raise SigmapInputError("a sharded corpus needs at least one shard store")
        self.stores = list(stores)
        self.keys = [st.spec.key for st in self.stores]
        self.offsets = np.concatenate([[0], np.cumsum([st.n_units for st in self.stores])])
        self.doc_offsets = np.concatenate([[0], np.cumsum([st.n_documents for st in self.stores])])

    @property
    def n_units(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_documents(self) -> int:
        return int(self.doc_offsets[-1])

    @property
    def n_bytes(self) -> int:
        return sum(st.n_bytes for st in self.stores)

    @property
    def pattern(self) -> str:
        return self.stores[0].pattern

    @property
    def fingerprint(self) -> str:
        """sha256 hex of the shard keys in order (keys are content-addressed)."""
        return hashlib.sha256("\n".join(self.keys).encode()).hexdigest()

    def locate(self, i: int) -> tuple[int, int]:
        """``(shard position, local unit index)`` of global unit ``i``."""
        if not 0 <= i < self.n_units:
            raise IndexError(f"unit {i} outside [0, {self.n_units})")
        j = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return j, i - int(self.offsets[j])

    @property
    def unit_nbytes(self) -> ConcatArray:
        """``(n_units,)`` attributed bytes per unit, read lazily shard by shard."""
        return ConcatArray([st.unit_nbytes for st in self.stores])

    @property
    def unit_doc(self) -> np.ndarray:
        """``(n_units,)`` int64 global document index of each unit (built on demand)."""
        return np.concatenate(
            [st.unit_doc.astype(np.int64) + int(o) for st, o in zip(self.stores, self.doc_offsets)]
        )

    @property
    def doc_ids(self) -> list[str]:
        return [d for st in self.stores for d in st.doc_ids]

    @property
    def unit_source(self) -> np.ndarray:
        """``(n_units,)`` the corpus file each unit comes from (its shard's file)."""
        files = np.array([st.spec.file for st in self.stores], dtype=object)
        return np.repeat(files, np.diff(self.offsets)).astype(str)

    def unit_groups(self, levels: Sequence[str]) -> dict[str, np.ndarray]:
        """The group label of every unit at each of ``levels``, for a multi-resolution
        signature (:class:`~sigmap_lib.signatures.CalibratedMultiResolution`).

        Parameters
        ----------
        levels : sequence of {"source", "document"}
            ``"source"``: the corpus file; ``"document"``: the document.

        Returns
        -------
        dict of str to numpy.ndarray, each shape (n_units,)

        Examples
        --------
        See :class:`ShardedCorpus`.
        """
        known = {"source": lambda: self.unit_source, "document": lambda: self.unit_doc}
        bad = [lv for lv in levels if lv not in known]
        if bad:
            raise SigmapInputError(
                f"signature levels {bad} unknown: a corpus has the levels "
                "'source' (its file) and 'document'"
            )
        return {lv: known[lv]() for lv in levels}

    def unit_text(self, i: int) -> str:
        j, local = self.locate(i)
        return self.stores[j].unit_text(local)

    def context(self, i: int, n_left: int = 20) -> tuple[str, str]:
        j, local = self.locate(i)
        return self.stores[j].context(local, n_left=n_left)

    def __repr__(self) -> str:
        return f"ShardedCorpus(shards={len(self.stores)}, units={self.n_units})"
