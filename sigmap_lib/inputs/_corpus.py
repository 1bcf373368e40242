"""The in-the-wild corpus: reading, model-independent units, sharding, the corpus store.

Units (METHODS §1)
------------------
A document is segmented once, independently of any model, into **units**: by default
runs of letters, runs of digits, and every other non-space character on its own
(punctuation, symbols, each emoji code point). A unit is a UTF-8 byte span
``[start, end)`` of the document that never includes whitespace. For apportioning token
NLL and for bits-per-byte, every byte of the document is *attributed* to exactly one
unit: whitespace (and any byte the pattern leaves uncovered) belongs to the unit that
FOLLOWS it; trailing bytes after the last unit belong to the last unit. The attributed
spans therefore tile ``[0, n_bytes)`` (see :func:`unit_byte_spans`).

Stored corpus (``CorpusStore``)
-------------------------------
A folder with (all written atomically, ``manifest.json`` last)::

    documents.parquet  doc_index i64, doc_id str, source str, text str, n_bytes i64,
                       unit_start i64, unit_end i64      (global unit range [start, end))
    units.parquet      doc_index i32, start i32, end i32 (byte offsets in the document),
                       n_bytes i32  (attributed bytes: the unit + preceding whitespace)
    shards.parquet     shard i32, doc_start, doc_end, unit_start, unit_end (i64)
    manifest.json      format, n_documents, n_units, n_bytes, shard_units, pattern,
                       fingerprint

Shards are contiguous document ranges with about ``shard_units`` units each (documents
are never split). Global unit ``i`` is row ``i`` of ``units.parquet``; units are in
document order. The fingerprint (sha256 over pattern + every ``doc_id`` and text) tells
downstream stores when the corpus changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_file, atomic_write_bytes
from sigmap_lib._util._fields import ManifestField
from sigmap_lib._util._tables import iter_jsonl
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs._segment import (
    DEFAULT_UNIT_PATTERN,
    compile_pattern,
    segment_units,
    unit_byte_spans,
)

_FORMAT = "sigmap-corpus/1"
_SUPPORTED = (".txt", ".jsonl", ".parquet")


# --------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class Document:
    """One corpus document. ``source`` is ``<file>`` or ``<file>:<line/row>``."""

    doc_id: str
    source: str
    text: str


def decode_utf8(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SigmapInputError(
            f"{where}: invalid UTF-8 at byte offset {exc.start} (byte 0x{raw[exc.start]:02x}): "
            f"{exc.reason}"
        ) from exc


def check_text(text: Any, where: str, pattern: str | None) -> str:
    if not isinstance(text, str):
        raise SigmapInputError(f"{where}: 'text' must be a string, got {type(text).__name__}")
    if not text.strip():
        raise SigmapInputError(f"{where}: empty or whitespace-only document")
    if "\x00" in text:
        raise SigmapInputError(f"{where}: document contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SigmapInputError(
            f"{where}: invalid Unicode (lone surrogate) at character {exc.start}"
        ) from exc
    if compile_pattern(pattern).search(text) is None:
        raise SigmapInputError(f"{where}: document has no units under the unit pattern")
    return text


def _read_txt(path: Path, rel: str, pattern: str | None) -> list[Document]:
    text = decode_utf8(path.read_bytes(), str(path))
    return [Document(rel, rel, check_text(text, str(path), pattern))]


def jsonl_documents(path: Path, rel: str, pattern: str | None) -> Iterator[tuple[Document, int]]:
    """``(document, line number)`` of a ``.jsonl`` corpus file, streaming, validated."""
    for lineno, obj in iter_jsonl(path):
        where = f"{path}:{lineno}"
        if "text" not in obj:
            raise SigmapInputError(f"{where}: missing field 'text'")
        doc_id = obj.get("id")
        doc_id = f"{rel}:{lineno}" if doc_id is None else str(doc_id)
        yield Document(doc_id, f"{rel}:{lineno}", check_text(obj["text"], where, pattern)), lineno


def _read_jsonl(path: Path, rel: str, pattern: str | None) -> list[Document]:
    return [d for d, _ in jsonl_documents(path, rel, pattern)]


def open_manifest(path: str | Path, fmt: str, what: str) -> tuple[Path, dict[str, Any]]:
    """``(folder, manifest)`` of a store folder whose ``manifest.json`` has format ``fmt``;
    ``SigmapInputError`` naming ``what`` and the folder when it is absent, corrupt or other."""
    p = Path(path)
    mf = p / "manifest.json"
    if not mf.exists():
        raise SigmapInputError(f"{what} {p}: no manifest.json (missing or incomplete store)")
    try:
        manifest = json.loads(mf.read_text())
    except json.JSONDecodeError as exc:
        raise SigmapInputError(f"{what} {p}: corrupt manifest.json ({exc})") from exc
    if manifest.get("format") != fmt:
        raise SigmapInputError(f"{what} {p}: unknown format {manifest.get('format')!r}")
    return p, manifest


def _read_parquet(path: Path, rel: str, pattern: str | None) -> list[Document]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise SigmapInputError(f"{path}: unreadable parquet file ({exc})") from exc
    if "text" not in table.column_names:
        raise SigmapInputError(f"{path}: missing column 'text' (columns: {table.column_names})")
    texts = table.column("text").to_pylist()
    ids = table.column("id").to_pylist() if "id" in table.column_names else [None] * len(texts)
    docs = []
    for row, (text, doc_id) in enumerate(zip(texts, ids)):
        where = f"{path} row {row}"
        if text is None:
            raise SigmapInputError(f"{where}: 'text' is null")
        doc_id = f"{rel}:{row}" if doc_id is None else str(doc_id)
        docs.append(Document(doc_id, f"{rel}:{row}", check_text(text, where, pattern)))
    return docs


def corpus_files(root: str | Path) -> list[Path]:
    """The corpus files ``read_corpus`` reads under ``root``, in its (sorted) order.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import corpus_files
    >>> for name in ("c/b.jsonl", "c/a.txt", "c/.hidden/x.txt", "c/notes.md"):
    ...     Path(name).parent.mkdir(parents=True, exist_ok=True)
    ...     _ = Path(name).write_text("x")
    >>> [p.as_posix() for p in corpus_files("c")]
    ['c/a.txt', 'c/b.jsonl']
    """
    r = Path(root)
    if not r.exists():
        raise SigmapInputError(f"corpus path {r} does not exist")
    if r.is_file():
        return [r]
    files = sorted(
        (
            p
            for p in r.rglob("*")
            if p.is_file()
            and p.suffix.lower() in _SUPPORTED
            and not any(part.startswith(".") for part in p.relative_to(r).parts)
        ),
        key=lambda p: p.relative_to(r).as_posix(),
    )
    if not files:
        raise SigmapInputError(f"corpus {r}: no .txt, .jsonl or .parquet files found")
    return files


def read_corpus(path: str | Path, *, pattern: str | None = None) -> list[Document]:
    """Read every document under ``path`` (a folder, searched recursively, or one file).

    Files are visited in sorted relative-path order (deterministic). Supported:
    ``*.txt`` (one document per file; id = relative path), ``*.jsonl`` (one JSON object
    per non-blank line with field ``"text"`` and optional ``"id"``; default id
    ``<relpath>:<line>``), ``*.parquet`` (column ``"text"``, optional ``"id"``; default id
    ``<relpath>:<row>``). Other files and hidden files/folders are ignored.

    Raises
    ------
    SigmapInputError
        Naming the file (and line/row) for: missing path, no supported files / no
        documents, empty or whitespace-only document, document without units, invalid
        UTF-8 (with the byte offset), malformed JSON, missing ``text`` field/column,
        duplicate document ids.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_corpus
    >>> root = Path("corpus")
    >>> root.mkdir()
    >>> _ = (root / "intro.txt").write_text("A river, a stone.")
    >>> _ = (root / "more.jsonl").write_text(
    ...     '{"id": "c1", "text": "42 clouds"}\\n{"text": "the end"}\\n'
    ... )
    >>> docs = read_corpus(root)
    >>> [(d.doc_id, d.source) for d in docs]
    [('intro.txt', 'intro.txt'), ('c1', 'more.jsonl:1'), ('more.jsonl:2', 'more.jsonl:2')]
    >>> docs[0].text
    'A river, a stone.'
    """
    root = Path(path)
    files = corpus_files(root)
    base = root.parent if root.is_file() else root
    docs: list[Document] = []
    seen: dict[str, str] = {}
    for f in files:
        rel = f.relative_to(base).as_posix()
        suffix = f.suffix.lower()
        if suffix == ".txt":
            got = _read_txt(f, rel, pattern)
        elif suffix == ".jsonl":
            got = _read_jsonl(f, rel, pattern)
        elif suffix == ".parquet":
            got = _read_parquet(f, rel, pattern)
        else:
            raise SigmapInputError(f"{f}: unsupported file type {suffix!r}")
        for d in got:
            if d.doc_id in seen:
                raise SigmapInputError(
                    f"corpus {root}: duplicate document id {d.doc_id!r} ({seen[d.doc_id]} and {d.source})"
                )
            seen[d.doc_id] = d.source
        docs.extend(got)
    if not docs:
        raise SigmapInputError(f"corpus {root}: no documents (all supported files are empty)")
    return docs


# --------------------------------------------------------------------------- store
@dataclass(frozen=True)
class Shard:
    """A contiguous range of documents ``[doc_start, doc_end)`` = units ``[unit_start, unit_end)``."""

    index: int
    doc_start: int
    doc_end: int
    unit_start: int
    unit_end: int

    @property
    def n_units(self) -> int:
        return self.unit_end - self.unit_start


def _atomic_write_parquet(table: Any, path: Path, row_group_size: int | None = None) -> None:
    import pyarrow.parquet as pq

    with atomic_file(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_size)


def make_shards(units_per_doc: np.ndarray, shard_units: int) -> list[Shard]:
    shards: list[Shard] = []
    doc_start, unit_start, acc = 0, 0, 0
    for d, n in enumerate(units_per_doc.tolist()):
        acc += n
        if acc >= shard_units:
            shards.append(Shard(len(shards), doc_start, d + 1, unit_start, unit_start + acc))
            doc_start, unit_start, acc = d + 1, unit_start + acc, 0
    if doc_start < len(units_per_doc):
        shards.append(
            Shard(len(shards), doc_start, len(units_per_doc), unit_start, unit_start + acc)
        )
    return shards


def build_corpus_store(
    documents: Sequence[Document] | Iterable[Document],
    out_dir: str | Path,
    *,
    shard_units: int = 65536,
    pattern: str | None = None,
) -> CorpusStore:
    """Segment ``documents`` and write a :class:`CorpusStore` to ``out_dir``.

    Parameters
    ----------
    documents
        From :func:`read_corpus` (or any ``Document`` list with unique ids).
    out_dir
        Target folder. Every new file is written in full under a temporary name before
        any existing store file is replaced (a write failure such as a full disk leaves
        the previous store readable and unchanged); the files are then renamed into
        place, ``manifest.json`` last (a store without a manifest is incomplete).
    shard_units
        Approximate units per shard; a shard closes at the first document boundary at
        or after ``shard_units`` units.
    pattern
        Unit pattern (default :data:`DEFAULT_UNIT_PATTERN`); recorded in the manifest.

    Returns
    -------
    CorpusStore
        The store, opened.

    Examples
    --------
    >>> from sigmap_lib.inputs import Document, build_corpus_store
    >>> docs = [
    ...     Document("d0", "inline", "A river, a stone."),
    ...     Document("d1", "inline", "42 clouds"),
    ...     Document("d2", "inline", "the end"),
    ... ]
    >>> store = build_corpus_store(docs, "store", shard_units=4)
    >>> store
    CorpusStore('store', documents=3, units=10, shards=2)
    >>> store.shard_bounds  # shards never split a document
    [(0, 6), (6, 10)]
    >>> store.unit_nbytes.tolist()  # each unit + the whitespace before it
    [1, 6, 1, 2, 6, 1, 2, 7, 3, 4]
    >>> store.unit_text(1), store.context(4)
    ('river', ('A river, a ', 'stone'))
    """
    import pyarrow as pa

    if shard_units <= 0:
        raise SigmapInputError(f"build_corpus_store: shard_units={shard_units} must be positive")
    docs = list(documents)
    if not docs:
        raise SigmapInputError(f"build_corpus_store({out_dir}): empty corpus (no documents)")
    pat = DEFAULT_UNIT_PATTERN if pattern is None else pattern
    out = Path(out_dir)
    h = hashlib.sha256()
    h.update(_FORMAT.encode())
    h.update(b"\x00")
    h.update(pat.encode())
    seen: set[str] = set()
    units_list: list[np.ndarray] = []
    attr_list: list[np.ndarray] = []
    n_units_doc = np.zeros(len(docs), dtype=np.int64)
    n_bytes_doc = np.zeros(len(docs), dtype=np.int64)
    for i, d in enumerate(docs):
        if d.doc_id in seen:
            raise SigmapInputError(
                f"build_corpus_store: duplicate document id {d.doc_id!r} ({d.source})"
            )
        seen.add(d.doc_id)
        check_text(d.text, f"document {d.doc_id!r} ({d.source})", pattern)
        raw = d.text.encode("utf-8")
        u = segment_units(d.text, pat)
        units_list.append(u)
        attr_list.append(unit_byte_spans(d.text, units=u))
        n_units_doc[i] = len(u)
        n_bytes_doc[i] = len(raw)
        for part in (d.doc_id.encode(), raw):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
    if int(n_bytes_doc.max()) >= 2**31:
        raise SigmapInputError("build_corpus_store: a document is larger than 2 GiB")
    unit_end = np.cumsum(n_units_doc)
    unit_start = unit_end - n_units_doc
    units = np.concatenate(units_list)
    attr = np.concatenate(attr_list)
    doc_of_unit = np.repeat(np.arange(len(docs), dtype=np.int32), n_units_doc)
    shards = make_shards(n_units_doc, shard_units)
    fingerprint = h.hexdigest()

    doc_table = pa.table(
        {
            "doc_index": pa.array(np.arange(len(docs), dtype=np.int64)),
            "doc_id": pa.array([d.doc_id for d in docs], pa.string()),
            "source": pa.array([d.source for d in docs], pa.string()),
            "text": pa.array([d.text for d in docs], pa.large_string()),
            "n_bytes": pa.array(n_bytes_doc),
            "unit_start": pa.array(unit_start),
            "unit_end": pa.array(unit_end),
        }
    )
    unit_table = pa.table(
        {
            "doc_index": pa.array(doc_of_unit),
            "start": pa.array(units[:, 0].astype(np.int32)),
            "end": pa.array(units[:, 1].astype(np.int32)),
            "n_bytes": pa.array((attr[:, 1] - attr[:, 0]).astype(np.int32)),
        }
    )
    shard_table = pa.table(
        {
            "shard": pa.array([s.index for s in shards], pa.int32()),
            "doc_start": pa.array([s.doc_start for s in shards], pa.int64()),
            "doc_end": pa.array([s.doc_end for s in shards], pa.int64()),
            "unit_start": pa.array([s.unit_start for s in shards], pa.int64()),
            "unit_end": pa.array([s.unit_end for s in shards], pa.int64()),
        }
    )
    out.mkdir(parents=True, exist_ok=True)
    # Every new file is first written in full under a temporary name: a failure while
    # writing (disk full, kill) leaves a previous store untouched and readable. Only then
    # is the old manifest removed and the files renamed into place, manifest last (a
    # crash between the renames leaves a store without manifest: detected as incomplete).
    manifest = {
        "format": _FORMAT,
        "n_documents": len(docs),
        "n_units": int(unit_end[-1]),
        "n_bytes": int(n_bytes_doc.sum()),
        "n_shards": len(shards),
        "shard_units": shard_units,
        "pattern": pat,
        "fingerprint": fingerprint,
    }
    staged: list[tuple[Path, Path]] = []
    staged_manifest = out / f".manifest.json.{os.getpid()}.staged"
    try:
        # small row groups: a shard's texts are read without decoding the whole corpus
        for table, name, rg in (
            (doc_table, "documents.parquet", 256),
            (unit_table, "units.parquet", None),
            (shard_table, "shards.parquet", None),
        ):
            tmp = out / f".{name}.{os.getpid()}.staged"
            _atomic_write_parquet(table, tmp, row_group_size=rg)
            staged.append((tmp, out / name))
        atomic_write_bytes(staged_manifest, json.dumps(manifest, indent=2).encode(), fsync=True)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        staged_manifest.unlink(missing_ok=True)
        raise
    (out / "manifest.json").unlink(missing_ok=True)  # store is incomplete until rewritten
    for tmp, final in staged:
        os.replace(tmp, final)
    os.replace(staged_manifest, out / "manifest.json")
    return CorpusStore.open(out)


class CorpusStore:
    """Read access to a stored corpus (see the module docstring for the layout).

    Use :meth:`open`. Unit arrays are loaded eagerly (4 int32 per unit); document texts
    are read lazily, a range at a time.
    """

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest

    @classmethod
    def open(cls, path: str | Path) -> CorpusStore:
        """Open the store at ``path``; raises ``SigmapInputError`` if absent or incomplete."""
        return cls(*open_manifest(path, _FORMAT, "corpus store"))

    # ---- sizes / identity
    n_units = ManifestField(int)
    n_documents = ManifestField(int)
    n_bytes = ManifestField(int)
    #: sha256 hex of the unit pattern and every (doc_id, text), in order
    fingerprint = ManifestField(str)
    #: the unit regular expression
    pattern = ManifestField(str)

    # ---- tables
    @cached_property
    def _units(self) -> dict[str, np.ndarray]:
        import pyarrow.parquet as pq

        t = pq.read_table(self.path / "units.parquet")
        return {c: t.column(c).to_numpy() for c in t.column_names}

    @cached_property
    def _docs_meta(self) -> dict[str, np.ndarray]:
        import pyarrow.parquet as pq

        cols = ["doc_index", "doc_id", "source", "n_bytes", "unit_start", "unit_end"]
        t = pq.read_table(self.path / "documents.parquet", columns=cols)
        return {c: t.column(c).to_numpy(zero_copy_only=False) for c in cols}

    @cached_property
    def shards(self) -> list[Shard]:
        """Shards in order; their unit ranges tile ``[0, n_units)``."""
        import pyarrow.parquet as pq

        t = pq.read_table(self.path / "shards.parquet").to_pydict()
        return [
            Shard(int(i), int(a), int(b), int(c), int(d))
            for i, a, b, c, d in zip(
                t["shard"], t["doc_start"], t["doc_end"], t["unit_start"], t["unit_end"]
            )
        ]

    @property
    def shard_bounds(self) -> list[tuple[int, int]]:
        """``[(unit_start, unit_end), ...]`` per shard."""
        return [(s.unit_start, s.unit_end) for s in self.shards]

    @property
    def unit_nbytes(self) -> np.ndarray:
        """``(n_units,)`` int32: attributed bytes per unit (unit + preceding whitespace).

        Sums to the corpus byte count; bits-per-byte of unit ``i`` is
        ``nll[i] / (unit_nbytes[i] * ln 2)``.
        """
        return self._units["n_bytes"]

    @property
    def unit_doc(self) -> np.ndarray:
        """``(n_units,)`` int32: document index of each unit."""
        return self._units["doc_index"]

    @property
    def unit_spans(self) -> np.ndarray:
        """``(n_units, 2)`` int64: byte ``[start, end)`` of each unit within its document."""
        u = self._units
        return np.stack([u["start"], u["end"]], axis=1).astype(np.int64)

    @property
    def doc_ids(self) -> list[str]:
        return [str(x) for x in self._docs_meta["doc_id"]]

    @property
    def doc_unit_ranges(self) -> np.ndarray:
        """``(n_documents, 2)`` int64 global unit range of each document."""
        m = self._docs_meta
        return np.stack([m["unit_start"], m["unit_end"]], axis=1).astype(np.int64)

    def documents(self, doc_start: int = 0, doc_end: int | None = None) -> list[str]:
        """Texts of documents ``[doc_start, doc_end)``."""
        import pyarrow.parquet as pq

        end = self.n_documents if doc_end is None else doc_end
        if not 0 <= doc_start <= end <= self.n_documents:
            raise IndexError(f"document range [{doc_start}, {end}) outside [0, {self.n_documents})")
        pf = pq.ParquetFile(self.path / "documents.parquet")
        out: list[str] = []
        row0 = 0
        for rg in range(pf.num_row_groups):
            n = pf.metadata.row_group(rg).num_rows
            lo, hi = max(doc_start, row0), min(end, row0 + n)
            if lo < hi:
                col = pf.read_row_group(rg, columns=["text"]).column("text")
                out.extend(col.slice(lo - row0, hi - lo).to_pylist())
            row0 += n
            if row0 >= end:
                break
        return out

    @cached_property
    def _text_cache(self) -> dict[int, bytes]:
        return {}

    def _doc_bytes(self, doc: int) -> bytes:
        cache = self._text_cache
        if doc not in cache:
            if len(cache) > 256:
                cache.clear()
            cache[doc] = self.documents(doc, doc + 1)[0].encode("utf-8")
        return cache[doc]

    def unit_text(self, i: int) -> str:
        """The text of global unit ``i`` (without its preceding whitespace)."""
        if not 0 <= i < self.n_units:
            raise IndexError(f"unit {i} outside [0, {self.n_units})")
        u = self._units
        raw = self._doc_bytes(int(u["doc_index"][i]))
        return raw[int(u["start"][i]) : int(u["end"][i])].decode("utf-8")

    def context(self, i: int, n_left: int = 20) -> tuple[str, str]:
        """``(left, unit)``: up to ``n_left`` preceding units of the same document (with the
        whitespace between them, exactly as in the text) and the unit's own text."""
        if not 0 <= i < self.n_units:
            raise IndexError(f"unit {i} outside [0, {self.n_units})")
        u = self._units
        doc = int(u["doc_index"][i])
        first = int(self._docs_meta["unit_start"][doc])
        j = max(first, i - max(0, n_left))
        raw = self._doc_bytes(doc)
        left = raw[int(u["start"][j]) : int(u["start"][i])] if j < i else b""
        return left.decode("utf-8"), raw[int(u["start"][i]) : int(u["end"][i])].decode("utf-8")

    def __repr__(self) -> str:
        return (
            f"CorpusStore({str(self.path)!r}, documents={self.n_documents}, units={self.n_units}, "
            f"shards={len(self.shards)})"
        )


def remove_store(path: str | Path) -> None:
    """Delete a corpus store folder (used by callers that rebuild from scratch)."""
    shutil.rmtree(Path(path), ignore_errors=True)
