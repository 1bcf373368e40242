"""Shards of a corpus: stable, content-addressed slices of one source file (issue #13).

A **shard** is a range ``[doc_start, doc_end)`` of the documents of ONE corpus file
(documents are never split). Its key is derived from the file's path relative to the corpus
root, the sha256 of the file's bytes, the unit pattern and the document range, so

* adding another file never changes an existing shard's key (nor its unit numbering: units
  are numbered inside the shard, ``0 .. n_units``);
* a file whose bytes change gets new keys for all its shards (the old ones are reported as
  removed by :func:`diff_plans`, never deleted here).

Everything streams: documents are read one at a time (jsonl: one line; parquet: one row
group), so planning and writing a shard never hold a whole file in memory (a ``.txt`` file
is one document and is read whole, as by :func:`~sigmap_lib.inputs.read_corpus`).

Global unit numbering: shards in plan order (files in sorted relative-path order, as
``read_corpus`` visits them; shards in document order) concatenated; :func:`shard_offsets`
gives each shard's first global unit. It equals the numbering of
``build_corpus_store(read_corpus(root))``.

Shard store (:func:`write_shard_store`, :class:`ShardStore`)
-------------------------------------------------------------
A folder written atomically (a temporary folder renamed into place)::

    documents.parquet  doc_index i64, doc_id str, source str, text large_str, n_bytes i64,
                       unit_start i64, unit_end i64   (shard-local unit range)
    units.parquet      doc_index i32, start i32, end i32, n_bytes i32  (as the corpus store)
    manifest.json      format, spec (the ShardSpec), n_documents, n_units, n_bytes,
                       pattern, fingerprint (= the spec's content hash)

with the same columns as the corpus store (:class:`~sigmap_lib.inputs.CorpusStore`), whose
reader it reuses: ``context(unit)``, ``unit_text``, ``unit_nbytes``, ``unit_doc`` take
shard-local unit indices.
"""

from __future__ import annotations

import hashlib
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs._corpus import (
    Document,
    check_text,
    corpus_files,
    decode_utf8,
    jsonl_documents,
)
from sigmap_lib.inputs._segment import DEFAULT_UNIT_PATTERN, file_pattern, segment_units

SHARD_FORMAT = "sigmap-corpus-shard/1"
_KEY_VERSION = b"sigmap-shard-key/1"
_SUPPORTED = (".txt", ".jsonl", ".parquet")
_KEY_LABEL = 28  # characters of the file label kept in a key (keys stay <= 64 chars)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_HASH_BLOCK = 1 << 20


# --------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class ShardSpec:
    """One planned shard: documents ``[doc_start, doc_end)`` of one corpus file.

    Attributes
    ----------
    key : str
        Stable, content-addressed id, safe as a Dagster partition key: only
        ``[A-Za-z0-9_.-]``, at most 64 characters, ``<file label>.d<doc_start>.<16 hex>``
        where the hex digest covers the relative path, ``file_sha256``, the unit pattern and
        the document range.
    file : str
        Path of the source file relative to the corpus root (posix).
    file_sha256 : str
        sha256 hex of the file's bytes.
    doc_start, doc_end : int
        Document range within the file (0-based, end exclusive).
    n_units, n_bytes : int
        Units (under ``pattern``) and UTF-8 bytes of the shard's documents.
    pattern : str
        The unit pattern the shard was planned with.
    content_sha256 : str
        sha256 over the shard's ``(doc_id, text)`` pairs; :func:`write_shard_store` checks
        it, so a file changed after planning is detected.
    byte_start, line_start : int
        jsonl: file byte offset and 1-based line number of the first document's line (the
        writer seeks there); parquet: ``0`` and the first row; txt: ``0`` and ``1``.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import ShardSpec, plan_shards
    >>> _ = Path("a.txt").write_text("One small document.")
    >>> [spec] = plan_shards("a.txt", target_units=100)
    >>> ShardSpec.from_dict(spec.to_dict()) == spec
    True
    """

    key: str
    file: str
    file_sha256: str
    doc_start: int
    doc_end: int
    n_units: int
    n_bytes: int
    pattern: str = DEFAULT_UNIT_PATTERN
    content_sha256: str = ""
    byte_start: int = 0
    line_start: int = 1

    @property
    def n_documents(self) -> int:
        return self.doc_end - self.doc_start

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict (:meth:`from_dict` inverts it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShardSpec:
        """The spec from :meth:`to_dict`'s output."""
        try:
            return cls(**d)
        except TypeError as exc:
            raise SigmapInputError(f"not a shard spec: {exc}") from exc


def shard_key(file: str, file_sha256: str, doc_start: int, doc_end: int, pattern: str) -> str:
    """The content-addressed key of a shard (see :class:`ShardSpec`).

    Examples
    --------
    >>> from sigmap_lib.inputs import shard_key
    >>> key = shard_key("books/part 1.jsonl", "ab" * 32, 0, 120, r"\\S+")
    >>> key.split(".")[:3], len(key) <= 64
    (['books__part_1', 'jsonl', 'd0'], True)
    >>> key == shard_key("books/part 1.jsonl", "ab" * 32, 0, 121, r"\\S+")
    False
    """
    h = hashlib.sha256(_KEY_VERSION)
    for part in (file, file_sha256, pattern, str(doc_start), str(doc_end)):
        raw = part.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)
    label = _UNSAFE.sub("_", file.replace("/", "__")).strip("._-")[-_KEY_LABEL:] or "file"
    return f"{label}.d{doc_start}.{h.hexdigest()[:16]}"


# --------------------------------------------------------------------------- reading
def _rel(path: Path, root: str | Path | None) -> tuple[Path, str]:
    base = path.parent if root is None else Path(root)
    try:
        return base, path.relative_to(base).as_posix()
    except ValueError as exc:
        raise SigmapInputError(f"corpus file {path} is not under the corpus root {base}") from exc


def _open_file(path: str | Path, root: str | Path | None) -> tuple[Path, str, str]:
    p = Path(path)
    if not p.exists():
        raise SigmapInputError(f"corpus path {p} does not exist")
    if not p.is_file():
        raise SigmapInputError(f"corpus path {p} is not a file (shards are cut from one file)")
    suffix = p.suffix.lower()
    if suffix not in _SUPPORTED:
        raise SigmapInputError(f"{p}: unsupported file type {suffix!r}")
    _, rel = _rel(p, root)
    return p, rel, suffix


def iter_positioned(
    p: Path, rel: str, suffix: str, pattern: str | None
) -> Iterator[tuple[Document, int]]:
    """``(document, line or row)`` of one file; validation as in ``read_corpus``."""
    if suffix == ".txt":
        text = decode_utf8(p.read_bytes(), str(p))
        yield Document(rel, rel, check_text(text, str(p), pattern)), 1
    elif suffix == ".jsonl":
        yield from jsonl_documents(p, rel, pattern)
    else:
        yield from iter_parquet(p, rel, pattern, 0, None)


def _parquet_file(p: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except Exception as exc:
        raise SigmapInputError(f"{p}: unreadable parquet file ({exc})") from exc
    names = pf.schema_arrow.names
    if "text" not in names:
        raise SigmapInputError(f"{p}: missing column 'text' (columns: {names})")
    return pf


def iter_parquet(
    p: Path, rel: str, pattern: str | None, row_start: int, row_end: int | None
) -> Iterator[tuple[Document, int]]:
    """Rows ``[row_start, row_end)`` of a parquet corpus file, one row group at a time."""
    pf = _parquet_file(p)
    cols = ["text", "id"] if "id" in pf.schema_arrow.names else ["text"]
    row0 = 0
    for rg in range(pf.num_row_groups):
        n = pf.metadata.row_group(rg).num_rows
        lo = max(row_start, row0)
        hi = row0 + n if row_end is None else min(row_end, row0 + n)
        if lo < hi:
            try:
                t = pf.read_row_group(rg, columns=cols)
            except Exception as exc:
                raise SigmapInputError(f"{p}: unreadable parquet file ({exc})") from exc
            texts = t.column("text").slice(lo - row0, hi - lo).to_pylist()
            ids = (
                t.column("id").slice(lo - row0, hi - lo).to_pylist()
                if "id" in cols
                else [None] * len(texts)
            )
            for row, (text, doc_id) in enumerate(zip(texts, ids), start=lo):
                where = f"{p} row {row}"
                if text is None:
                    raise SigmapInputError(f"{where}: 'text' is null")
                doc_id = f"{rel}:{row}" if doc_id is None else str(doc_id)
                yield Document(doc_id, f"{rel}:{row}", check_text(text, where, pattern)), row
        row0 += n
        if row_end is not None and row0 >= row_end:
            break


def iter_documents(
    path: str | Path, *, pattern: str | None = None, root: str | Path | None = None
) -> Iterator[Document]:
    """Stream the documents of ONE corpus file, as :func:`read_corpus` reads them.

    Memory is bounded by one document (jsonl: one line; parquet: one row group) plus the
    set of the file's document ids (for the duplicate check), never the whole file.

    Parameters
    ----------
    path
        A ``.txt`` (one document), ``.jsonl`` (one JSON object with ``"text"`` and optional
        ``"id"`` per non-blank line) or ``.parquet`` (column ``"text"``, optional ``"id"``)
        file.
    pattern
        Unit pattern (a document without units is an error, as in ``read_corpus``).
    root
        Corpus root that ids and sources are relative to (default: the file's folder, as
        ``read_corpus(path)`` on the file itself).

    Yields
    ------
    Document
        Equal to the documents ``read_corpus`` gives for this file.

    Raises
    ------
    SigmapInputError
        With the messages of ``read_corpus`` (invalid UTF-8, malformed JSON, missing
        ``text``, empty document, duplicate ids, no documents, ...).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import iter_documents
    >>> _ = Path("docs.jsonl").write_text('{"id": "a", "text": "naïve 42"}\\n\\n{"text": "end"}\\n')
    >>> [(d.doc_id, d.source, d.text) for d in iter_documents("docs.jsonl")]
    [('a', 'docs.jsonl:1', 'naïve 42'), ('docs.jsonl:3', 'docs.jsonl:3', 'end')]
    """
    p, rel, suffix = _open_file(path, root)
    empty = True
    for doc, _ in _iter_checked(p, rel, suffix, pattern):
        empty = False
        yield doc
    if empty:
        raise SigmapInputError(f"corpus {p}: no documents (all supported files are empty)")


# --------------------------------------------------------------------------- planning
def content_hash() -> Any:
    return hashlib.sha256(SHARD_FORMAT.encode())


def hash_doc(h: Any, doc: Document) -> None:
    for part in (doc.doc_id.encode("utf-8"), doc.text.encode("utf-8")):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)


def _file_pass(p: Path, suffix: str, linenos: Sequence[int]) -> tuple[str, list[int]]:
    """sha256 of the file's bytes and (jsonl) the byte offset of each wanted line."""
    h = hashlib.sha256()
    offsets: list[int] = []
    with p.open("rb") as fh:
        if suffix != ".jsonl":
            while block := fh.read(_HASH_BLOCK):
                h.update(block)
            return h.hexdigest(), [0] * len(linenos)
        want = iter(linenos)
        nxt = next(want, None)
        offset = 0
        for lineno, raw in enumerate(fh, start=1):  # the line split of iter_jsonl
            while nxt is not None and nxt == lineno:
                offsets.append(offset)
                nxt = next(want, None)
            h.update(raw)
            offset += len(raw)
    if len(offsets) != len(linenos):
        raise SigmapInputError(f"{p}: changed while it was planned; plan again")
    return h.hexdigest(), offsets


def plan_shards(
    path: str | Path,
    *,
    target_units: int,
    pattern: str | None = None,
    root: str | Path | None = None,
) -> list[ShardSpec]:
    """Cut one corpus file into shards of consecutive documents, streaming.

    A shard closes at the first document boundary at or after ``target_units`` units (the
    rule of the corpus store's shards); the last shard of a file holds the rest.

    Parameters
    ----------
    path
        One ``.txt`` / ``.jsonl`` / ``.parquet`` corpus file.
    target_units
        Approximate units per shard (see :func:`default_shard_units`).
    pattern
        Unit pattern (default :data:`DEFAULT_UNIT_PATTERN`); part of every key.
    root
        Corpus root; ``ShardSpec.file`` and the document ids are relative to it (default:
        the file's folder).

    Returns
    -------
    list[ShardSpec]
        In document order; their ranges tile ``[0, n_documents)`` of the file.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import plan_shards
    >>> lines = [f'{{"text": "doc {i} has five units"}}' for i in range(5)]
    >>> _ = Path("c.jsonl").write_text("\\n".join(lines) + "\\n")
    >>> specs = plan_shards("c.jsonl", target_units=12)
    >>> [(s.doc_start, s.doc_end, s.n_units) for s in specs]
    [(0, 3, 15), (3, 5, 10)]
    >>> specs[1].key.startswith("c.jsonl.d3."), specs[1].line_start, specs[1].byte_start
    (True, 4, 99)
    """
    p, rel, suffix = _open_file(path, root)
    return _plan_file(p, rel, suffix, target_units, pattern, None)


def _plan_file(
    p: Path, rel: str, suffix: str, target_units: int, pattern: str | None, ids: array | None
) -> list[ShardSpec]:
    if target_units < 1:
        raise SigmapInputError(f"plan_shards: target_units={target_units} must be >= 1")
    pat = DEFAULT_UNIT_PATTERN if pattern is None else pattern
    ranges: list[tuple[int, int, int, int, int, str]] = []  # start, end, units, bytes, pos, sha
    start, acc_units, acc_bytes, first_pos = 0, 0, 0, 1
    h = content_hash()
    n = 0
    for d, pos in _iter_checked(p, rel, suffix, pattern):
        if n == start:
            first_pos = pos
        acc_units += len(segment_units(d.text, pat))
        acc_bytes += len(d.text.encode("utf-8"))
        hash_doc(h, d)
        if ids is not None:
            ids.append(_id_digest(d.doc_id))
        n += 1
        if acc_units >= target_units:
            ranges.append((start, n, acc_units, acc_bytes, first_pos, h.hexdigest()))
            start, acc_units, acc_bytes, h = n, 0, 0, content_hash()
    if n > start:
        ranges.append((start, n, acc_units, acc_bytes, first_pos, h.hexdigest()))
    file_sha, offsets = _file_pass(p, suffix, [r[4] for r in ranges] if suffix == ".jsonl" else [])
    specs = []
    for i, (a, b, nu, nb, pos, csha) in enumerate(ranges):
        specs.append(
            ShardSpec(
                key=shard_key(rel, file_sha, a, b, pat),
                file=rel,
                file_sha256=file_sha,
                doc_start=a,
                doc_end=b,
                n_units=nu,
                n_bytes=nb,
                pattern=pat,
                content_sha256=csha,
                byte_start=offsets[i] if suffix == ".jsonl" else 0,
                line_start=pos,
            )
        )
    return specs


def _iter_checked(
    p: Path, rel: str, suffix: str, pattern: str | None
) -> Iterator[tuple[Document, int]]:
    """Documents of one file with their line (jsonl) or row (parquet); ids unique."""
    seen: dict[str, str] = {}
    for doc, pos in iter_positioned(p, rel, suffix, pattern):
        if doc.doc_id in seen:
            raise SigmapInputError(
                f"corpus {p}: duplicate document id {doc.doc_id!r} ({seen[doc.doc_id]} and "
                f"{doc.source})"
            )
        seen[doc.doc_id] = doc.source
        yield doc, pos


def _id_digest(doc_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "little")


def _file_sha256(p: Path) -> str:
    return _file_pass(p, ".txt", [])[0]


def corpus_file_rows(root: str | Path, files: Iterable[str | Path]) -> list[dict[str, Any]]:
    """One row per corpus file: its path relative to ``root``, format, bytes and sha256
    (the corpus manifest).

    Parameters
    ----------
    root : str or Path
        The corpus folder.
    files : iterable of path
        Its files (as a world layout lists them).

    Returns
    -------
    list of dict
        ``file``, ``format`` (the suffix), ``bytes``, ``sha256`` per file, in ``files`` order.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import corpus_file_rows
    >>> Path("c").mkdir(exist_ok=True)
    >>> _ = Path("c/a.txt").write_text("hello")
    >>> corpus_file_rows("c", [Path("c/a.txt")])[0]["sha256"][:12]
    '2cf24dba5fb0'
    """
    rows = []
    for p in map(Path, files):
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        rows.append(
            {
                "file": str(p.relative_to(root)),
                "format": p.suffix.lstrip("."),
                "bytes": p.stat().st_size,
                "sha256": h.hexdigest(),
            }
        )
    return rows


def plan_corpus(
    root: str | Path,
    *,
    target_units: int,
    pattern: str | None = None,
    previous: Iterable[ShardSpec] | None = None,
) -> list[ShardSpec]:
    """Shards of every file of a corpus folder (files as :func:`read_corpus` finds them).

    Parameters
    ----------
    root
        Corpus folder (or one file).
    target_units
        Approximate units per shard (see :func:`default_shard_units`).
    pattern
        Unit pattern (default :data:`DEFAULT_UNIT_PATTERN`); a unit file
        (``*.units.jsonl``) always uses :data:`WHOLE_TEXT_PATTERN` (one unit per record).
    previous
        An earlier plan. A file whose relative path, bytes (sha256) and pattern are
        unchanged keeps its earlier shards verbatim (even if ``target_units`` changed), and
        is only hashed, not re-read: incremental growth keeps every existing key.

    Returns
    -------
    list[ShardSpec]
        Files in sorted relative-path order, each file's shards in document order (the
        global unit order of ``build_corpus_store(read_corpus(root))``).

    Raises
    ------
    SigmapInputError
        As ``read_corpus``: no files, no documents, a bad document, or a document id used
        twice among the files read by this call (ids are checked with 8-byte digests, so
        memory is 8 bytes per document; files reused from ``previous`` are not re-read).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import diff_plans, plan_corpus
    >>> Path("corpus").mkdir()
    >>> _ = Path("corpus/a.txt").write_text("A river, a stone.")
    >>> old = plan_corpus("corpus", target_units=100)
    >>> _ = Path("corpus/b.jsonl").write_text('{"text": "42 clouds"}\\n')
    >>> new = plan_corpus("corpus", target_units=100, previous=old)
    >>> [(s.file, s.n_units) for s in new], new[0] == old[0]
    ([('a.txt', 6), ('b.jsonl', 2)], True)
    >>> d = diff_plans(old, new)
    >>> len(d.new), d.unchanged == [old[0].key], d.removed
    (1, True, [])
    """
    r = Path(root)
    files = corpus_files(r)
    base = r if r.is_dir() else r.parent
    pat = DEFAULT_UNIT_PATTERN if pattern is None else pattern
    by_file: dict[tuple[str, str, str], list[ShardSpec]] = {}
    for s in previous or ():
        by_file.setdefault((s.file, s.file_sha256, s.pattern), []).append(s)
    ids = array("Q")
    specs: list[ShardSpec] = []
    read_files: list[Path] = []
    for f in files:
        rel = f.relative_to(base).as_posix()
        fpat = file_pattern(rel, pat)
        if by_file:
            old = by_file.get((rel, _file_sha256(f), fpat))
            if old:
                specs.extend(sorted(old, key=lambda s: s.doc_start))
                continue
        specs.extend(_plan_file(f, rel, f.suffix.lower(), target_units, fpat, ids))
        read_files.append(f)
    if not any(s.n_documents for s in specs):
        raise SigmapInputError(f"corpus {r}: no documents (all supported files are empty)")
    _check_cross_file_ids(r, base, read_files, np.frombuffer(ids, dtype=np.uint64), pattern)
    return specs


def _check_cross_file_ids(
    root: Path, base: Path, files: list[Path], digests: np.ndarray, pattern: str | None
) -> None:
    """Raise naming the first document id that two documents share (exact re-check)."""
    if digests.size < 2:
        return
    s = np.sort(digests)
    dup = set(s[1:][s[1:] == s[:-1]].tolist())
    if not dup:
        return
    seen: dict[str, str] = {}
    for f in files:  # only ids whose digest repeats are kept
        fpat = file_pattern(f.relative_to(base).as_posix(), pattern)
        for d in iter_documents(f, pattern=fpat, root=base):
            if _id_digest(d.doc_id) in dup:
                if d.doc_id in seen:
                    raise SigmapInputError(
                        f"corpus {root}: duplicate document id {d.doc_id!r} "
                        f"({seen[d.doc_id]} and {d.source})"
                    )
                seen[d.doc_id] = d.source


@dataclass(frozen=True)
class PlanDiff:
    """What changed between two shard plans (keys, in the new / old plan's order).

    ``removed_files`` are files of the old plan absent from the new one; ``changed_files``
    are files of both whose bytes (or pattern) changed. Removed shards are only reported:
    their stored results are left in place.
    """

    new: list[str]
    unchanged: list[str]
    removed: list[str]
    removed_files: list[str] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)


def diff_plans(old: Iterable[ShardSpec], new: Iterable[ShardSpec]) -> PlanDiff:
    """Which shard keys are new, unchanged or removed from ``old`` to ``new``.

    Keys are content-addressed, so "unchanged" means same file path, bytes, pattern and
    document range (the shard's stored results stay valid).

    Examples
    --------
    >>> from sigmap_lib.inputs import ShardSpec, diff_plans
    >>> def spec(key, file, sha):
    ...     return ShardSpec(key, file, sha, 0, 1, 3, 10)
    >>> old = [spec("a.1", "a.txt", "x"), spec("b.1", "b.txt", "y")]
    >>> new = [spec("a.2", "a.txt", "z"), spec("c.1", "c.txt", "w")]
    >>> d = diff_plans(old, new)
    >>> d.new, d.unchanged, d.removed, d.removed_files, d.changed_files
    (['a.2', 'c.1'], [], ['a.1', 'b.1'], ['b.txt'], ['a.txt'])
    """
    old_l, new_l = list(old), list(new)
    old_keys = {s.key for s in old_l}
    new_keys = {s.key for s in new_l}
    old_files = {s.file: (s.file_sha256, s.pattern) for s in old_l}
    new_files = {s.file: (s.file_sha256, s.pattern) for s in new_l}
    return PlanDiff(
        new=[s.key for s in new_l if s.key not in old_keys],
        unchanged=[s.key for s in new_l if s.key in old_keys],
        removed=[s.key for s in old_l if s.key not in new_keys],
        removed_files=[f for f in old_files if f not in new_files],
        changed_files=[f for f in old_files if f in new_files and old_files[f] != new_files[f]],
    )


def shard_offsets(plan: Sequence[ShardSpec]) -> dict[str, int]:
    """First global unit of each shard: shards concatenated in plan order.

    Examples
    --------
    >>> from sigmap_lib.inputs import ShardSpec, shard_offsets
    >>> plan = [ShardSpec("a", "a.txt", "x", 0, 1, 7, 30), ShardSpec("b", "b.txt", "y", 0, 2, 5, 20)]
    >>> shard_offsets(plan)
    {'a': 0, 'b': 7}
    """
    out: dict[str, int] = {}
    total = 0
    for s in plan:
        if s.key in out:
            raise SigmapInputError(f"shard plan lists shard {s.key!r} twice")
        out[s.key] = total
        total += s.n_units
    return out


def default_shard_units(
    n_units_total: int,
    n_models: int,
    max_partitions: int = 100_000,
    *,
    n_files: int = 1,
    margin: float = 0.01,
    min_units: int = 1 << 16,
) -> int:
    """Target units per shard so that ``models × shards`` stays within Dagster's limit.

    A 2-D ``models × shards`` asset has ``n_models · n_shards`` partitions, at most
    ``max_partitions`` (100,000 in Dagster). Keeping a ``margin`` (1 %) free leaves
    ``S = floor(max_partitions · (1 − margin) / n_models)`` shards: 32 models allow
    ``floor(99,000 / 32) = 3,093`` shards, so at the paper's ``8.45e9`` units a shard holds
    ``>= 8.45e9 / (3,093 − 1) ≈ 2.73e6`` units. Every shard of a file but its last has at
    least the target, so a plan has at most ``n_units_total / target + n_files`` shards;
    the target ``ceil(n_units_total / (S − n_files))`` therefore guarantees ``<= S``
    shards. Small corpora get at least ``min_units`` per shard (a shard is one run per
    model: tiny shards cost scheduling, not accuracy). Choose it for the corpus size you
    expect to reach: changing the target re-keys newly planned files only
    (:func:`plan_corpus` keeps the shards of unchanged files).

    Examples
    --------
    >>> from sigmap_lib.inputs import default_shard_units
    >>> target = default_shard_units(8_450_000_000, 32)
    >>> target, 8_450_000_000 // target + 1 <= 3_093
    (2732859, True)
    >>> default_shard_units(1_000_000, 32)  # a small corpus: the floor
    65536
    """
    if n_models < 1 or n_units_total < 0 or n_files < 1 or not 0 <= margin < 1:
        raise SigmapInputError(
            f"default_shard_units: need n_models >= 1, n_units_total >= 0, n_files >= 1 and "
            f"0 <= margin < 1 (got {n_models}, {n_units_total}, {n_files}, {margin})"
        )
    max_shards = math.floor(max_partitions * (1.0 - margin) / n_models)
    if max_shards <= n_files:
        raise SigmapInputError(
            f"default_shard_units: {n_models} models allow {max_shards} shards within "
            f"{max_partitions} partitions, not more than the {n_files} files (one shard each)"
        )
    return max(int(min_units), math.ceil(n_units_total / (max_shards - n_files)), 1)
