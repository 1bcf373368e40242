"""Corpus shards: streaming reading, content-addressed plans and shard stores (issue #13)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import (
    ShardSpec,
    ShardStore,
    build_corpus_store,
    corpus_files,
    default_shard_units,
    diff_plans,
    iter_documents,
    iter_shard_documents,
    plan_corpus,
    plan_shards,
    read_corpus,
    shard_offsets,
    write_shard_store,
)

_WORDS = ["naïve", "東京", "😀", "Straße", "42", "river", "stone", ",", "!", "Ω", "x1", "déjà"]
_KEY_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _text(rng: np.random.Generator, n: int) -> str:
    seps = [" ", "  ", "\n", "\t", " \u00a0"]
    words = rng.choice(_WORDS, size=n)
    return "".join(w + seps[int(rng.integers(0, len(seps)))] for w in words).strip() + "."


def _make_corpus(root: Path, seed: int = 0) -> Path:
    """txt (non-ASCII), jsonl (ids, blank lines), parquet with 4 row groups, a subfolder,
    and ignored hidden / unsupported files."""
    rng = np.random.default_rng(seed)
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "a.txt").write_text(_text(rng, 40), encoding="utf-8")
    lines = []
    for i in range(23):
        obj = {"text": _text(rng, int(rng.integers(1, 30)))}
        if i % 3 == 0:
            obj["id"] = f"j{i}"
        lines.append(json.dumps(obj, ensure_ascii=bool(i % 2)))
        if i % 5 == 0:
            lines.append("   ")  # blank lines are skipped; line numbers count them
    (root / "b.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    texts = [_text(rng, int(rng.integers(1, 25))) for _ in range(14)]
    ids = [None if i % 4 else f"p{i}" for i in range(14)]
    pq.write_table(
        pa.table({"id": ids, "text": texts}), root / "sub" / "c.parquet", row_group_size=4
    )
    (root / "sub" / "d.txt").write_text("Último documento — fin", encoding="utf-8")
    (root / ".hidden" / "x.txt").write_text("ignored")
    (root / "notes.md").write_text("ignored")
    return root


def test_iter_documents_equals_read_corpus(tmp_path: Path) -> None:
    root = _make_corpus(tmp_path / "corpus")
    files = corpus_files(root)
    assert [f.relative_to(root).as_posix() for f in files] == [
        "a.txt",
        "b.jsonl",
        "sub/c.parquet",
        "sub/d.txt",
    ]
    streamed = [d for f in files for d in iter_documents(f, root=root)]
    assert streamed == read_corpus(root)
    # one file on its own: ids relative to its folder, as read_corpus(file)
    one = root / "sub" / "c.parquet"
    assert list(iter_documents(one)) == read_corpus(one)
    assert pq.ParquetFile(one).num_row_groups == 4


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad.jsonl", '{"text": "fine"}\n{"text": "ok"\n'),
        ("bad.jsonl", '{"text": "fine"}\n{"no_text": 1}\n'),
        ("bad.jsonl", '{"text": "fine"}\n{"text": "   "}\n'),
        ("bad.jsonl", '{"id": "x", "text": "a"}\n{"id": "x", "text": "b"}\n'),
        ("bad.jsonl", '{"text": "a\\u0000b"}\n'),
        ("bad.jsonl", '{"text": 3}\n'),
        ("bad.jsonl", "\n\n"),
        ("bad.txt", b"caf\xc3 au lait"),
        ("bad.txt", "  \n"),
        ("bad.parquet", {"body": ["a"]}),
        ("bad.parquet", {"text": ["a", None]}),
        ("bad.parquet", b"not a parquet file"),
        ("bad.csv", "text\na\n"),
    ],
)
def test_iter_documents_errors_match_read_corpus(
    tmp_path: Path, name: str, content: object
) -> None:
    p = tmp_path / name
    if isinstance(content, dict):
        pq.write_table(pa.table(content), p)
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        assert isinstance(content, str)
        p.write_text(content, encoding="utf-8")
    with pytest.raises(SigmapInputError) as streamed:
        list(iter_documents(p))
    if p.suffix == ".csv":  # read_corpus on one file does not filter by suffix
        assert "unsupported file type '.csv'" in str(streamed.value)
        return
    with pytest.raises(SigmapInputError) as whole:
        read_corpus(p)
    if "unreadable parquet file" in str(whole.value):  # pyarrow words its detail by API
        assert str(streamed.value).startswith(f"{p}: unreadable parquet file (")
        return
    assert str(streamed.value) == str(whole.value)


def test_shard_stores_tile_the_corpus_store(tmp_path: Path) -> None:
    root = _make_corpus(tmp_path / "corpus")
    store = build_corpus_store(read_corpus(root), tmp_path / "whole")
    target = 37
    plan = plan_corpus(root, target_units=target)
    # shards tile each file's documents; all but a file's last reach the target
    by_file: dict[str, list[ShardSpec]] = {}
    for s in plan:
        by_file.setdefault(s.file, []).append(s)
    assert list(by_file) == ["a.txt", "b.jsonl", "sub/c.parquet", "sub/d.txt"]
    for specs in by_file.values():
        assert specs[0].doc_start == 0
        assert all(a.doc_end == b.doc_start for a, b in itertools.pairwise(specs))
        assert all(s.n_units >= target for s in specs[:-1])
    assert len(by_file["b.jsonl"]) >= 3 and len(by_file["sub/c.parquet"]) >= 3
    assert sum(s.n_documents for s in plan) == store.n_documents
    assert sum(s.n_units for s in plan) == store.n_units
    assert sum(s.n_bytes for s in plan) == store.n_bytes
    offsets = shard_offsets(plan)
    doc0 = 0
    cols = {"doc_index": [], "start": [], "end": [], "n_bytes": []}
    for s in plan:
        sh = write_shard_store(s, root, tmp_path / "shards" / s.key)
        assert isinstance(sh, ShardStore) and sh.spec == s
        assert (sh.n_units, sh.n_documents, sh.n_bytes) == (s.n_units, s.n_documents, s.n_bytes)
        t = pq.read_table(sh.path / "units.parquet")
        assert t.column_names == list(cols)
        cols["doc_index"].append(t.column("doc_index").to_numpy() + doc0)
        for c in ("start", "end", "n_bytes"):
            cols[c].append(t.column(c).to_numpy())
        g0 = offsets[s.key]
        assert sh.doc_ids == store.doc_ids[doc0 : doc0 + s.n_documents]
        assert np.array_equal(sh.unit_nbytes, store.unit_nbytes[g0 : g0 + s.n_units])
        assert np.array_equal(sh.unit_doc + doc0, store.unit_doc[g0 : g0 + s.n_units])
        for i in range(0, s.n_units, 7):
            assert sh.context(i, 5) == store.context(g0 + i, 5)
            assert sh.unit_text(i) == store.unit_text(g0 + i)
        assert sh.documents() == store.documents(doc0, doc0 + s.n_documents)
        doc0 += s.n_documents
    whole = pq.read_table(store.path / "units.parquet")
    for c, parts in cols.items():
        assert np.array_equal(np.concatenate(parts), whole.column(c).to_numpy()), c


def _keys(plan: list[ShardSpec], file: str | None = None) -> list[str]:
    return [s.key for s in plan if file is None or s.file == file]


def test_keys_stable_when_a_file_is_added_new_when_a_file_changes(tmp_path: Path) -> None:
    root = _make_corpus(tmp_path / "corpus")
    plan1 = plan_corpus(root, target_units=30)
    keys1 = _keys(plan1)
    assert len(set(keys1)) == len(keys1) and all(_KEY_RE.match(k) for k in keys1)
    assert not any(c in k for k in keys1 for c in "|,[]")
    # the same corpus elsewhere: the same keys (relative paths, bytes, ranges)
    moved = tmp_path / "elsewhere"
    shutil.copytree(root, moved)
    assert _keys(plan_corpus(moved, target_units=30)) == keys1

    # a file added (sorted FIRST, so global offsets shift): old keys and specs unchanged
    (root / "0first.jsonl").write_text('{"text": "a brand new document"}\n')
    plan2 = plan_corpus(root, target_units=30)
    assert [s for s in plan2 if s.file != "0first.jsonl"] == plan1
    d = diff_plans(plan1, plan2)
    assert d.new == _keys(plan2, "0first.jsonl") and d.unchanged == keys1 and d.removed == []
    assert shard_offsets(plan2)[keys1[0]] == plan2[0].n_units  # numbering shifts, keys don't

    # a file changed (one line appended): ALL its keys are new, even the same doc ranges
    with (root / "b.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"text": "one more line"}\n')
    plan3 = plan_corpus(root, target_units=30, previous=plan2)
    old_b, new_b = _keys(plan2, "b.jsonl"), _keys(plan3, "b.jsonl")
    assert not set(old_b) & set(new_b)
    assert next((s.doc_start, s.doc_end) for s in plan3 if s.file == "b.jsonl") == (
        next((s.doc_start, s.doc_end) for s in plan2 if s.file == "b.jsonl")
    )
    d = diff_plans(plan2, plan3)
    assert d.new == new_b and d.removed == old_b and d.changed_files == ["b.jsonl"]
    assert set(d.unchanged) == set(_keys(plan2)) - set(old_b)

    # a file removed: its shards are reported, not deleted
    (root / "a.txt").unlink()
    plan4 = plan_corpus(root, target_units=30, previous=plan3)
    d = diff_plans(plan3, plan4)
    assert d.removed == _keys(plan3, "a.txt") and d.removed_files == ["a.txt"] and d.new == []

    # a new target re-plans nothing that `previous` covers; without it every file is re-cut
    assert plan_corpus(root, target_units=1000, previous=plan4) == plan4
    fresh = plan_corpus(root, target_units=1000)
    assert set(_keys(fresh)) != set(_keys(plan4))
    # the pattern is part of the key
    assert _keys(plan_corpus(root, target_units=30, pattern=r"\S+"))[0] != _keys(plan4)[0]
    # a spec survives JSON
    assert [ShardSpec.from_dict(json.loads(json.dumps(s.to_dict()))) for s in plan4] == plan4


def test_cross_file_duplicate_ids_are_rejected_like_read_corpus(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.jsonl").write_text('{"id": "x", "text": "one"}\n{"id": "y", "text": "two"}\n')
    (root / "b.jsonl").write_text('{"id": "z", "text": "three"}\n{"id": "y", "text": "four"}\n')
    with pytest.raises(SigmapInputError) as whole:
        read_corpus(root)
    with pytest.raises(SigmapInputError) as planned:
        plan_corpus(root, target_units=10)
    assert str(planned.value) == str(whole.value)
    assert "duplicate document id 'y' (a.jsonl:2 and b.jsonl:2)" in str(planned.value)


def test_write_shard_store_detects_a_changed_file(tmp_path: Path) -> None:
    root = _make_corpus(tmp_path / "corpus")
    plan = [s for s in plan_corpus(root, target_units=30) if s.file == "b.jsonl"]
    last = plan[-1]
    assert last.byte_start > 0 and last.line_start > 1
    assert [d.doc_id for d in iter_shard_documents(last, root)] == [
        d.doc_id for d in read_corpus(root / "b.jsonl")
    ][last.doc_start : last.doc_end]
    p = root / "b.jsonl"
    lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[-1] = lines[-1].replace('"text": "', '"text": "changed ')
    p.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(SigmapInputError, match="changed since the shard was planned"):
        write_shard_store(last, root, tmp_path / "s")
    assert not (tmp_path / "s").exists()  # nothing half-written
    p.unlink()
    with pytest.raises(SigmapInputError, match="does not exist"):
        write_shard_store(last, root, tmp_path / "s")


def test_default_shard_units_keeps_partitions_within_the_limit(tmp_path: Path) -> None:
    target = default_shard_units(8_450_000_000, 32)
    assert target >= 2_700_000
    assert 32 * (8_450_000_000 // target + 1) <= 100_000  # one file: shards <= n/target + 1
    assert 100_000 * 0.99 / 32 > 3_090  # "32 models allow ~3,100 shards"
    # the guarantee on a real plan: tiny limits, several files
    root = _make_corpus(tmp_path / "corpus")
    n_total = sum(s.n_units for s in plan_corpus(root, target_units=1))
    for n_models, max_partitions in [(2, 40), (4, 40), (3, 100), (1, 9)]:
        t = default_shard_units(
            n_total, n_models, max_partitions, n_files=4, margin=0.0, min_units=1
        )
        plan = plan_corpus(root, target_units=t)
        assert n_models * len(plan) <= max_partitions, (n_models, max_partitions, t, len(plan))
    with pytest.raises(SigmapInputError, match="not more than the 4 files"):
        default_shard_units(10**6, 10, 40, n_files=4)


def test_streaming_memory_is_bounded(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    p = tmp_path / "big.jsonl"
    block = [json.dumps({"text": _text(rng, 400)}, ensure_ascii=False) for _ in range(50)]
    with p.open("w", encoding="utf-8") as fh:
        for i in range(160):
            fh.write("\n".join(block[(i + j) % 50] for j in range(50)) + "\n")
    size = p.stat().st_size
    assert size > 15e6
    # warm up (numba's JIT, pyarrow's writer) outside the measurement
    small = tmp_path / "small.jsonl"
    small.write_text(block[0] + "\n", encoding="utf-8")
    write_shard_store(plan_shards(small, target_units=10)[0], tmp_path, tmp_path / "warm")
    t0 = time.perf_counter()
    plan = plan_shards(p, target_units=200_000)
    mb_s_plan = size / 1e6 / (time.perf_counter() - t0)
    [whole] = plan_shards(p, target_units=10**12)  # the whole file as ONE shard
    t0 = time.perf_counter()
    write_shard_store(whole, tmp_path, tmp_path / "first", batch_units=1 << 15)
    mb_s_write = size / 1e6 / (time.perf_counter() - t0)
    tracemalloc.start()
    try:
        n = sum(1 for _ in iter_documents(p))
        _, peak_read = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        assert plan_shards(p, target_units=200_000) == plan
        _, peak_plan = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        store = write_shard_store(whole, tmp_path, tmp_path / "shard", batch_units=1 << 15)
        _, peak_write = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 8000 and len(plan) > 10 and store.n_units == whole.n_units
    print(
        f"\n{size / 1e6:.1f} MB jsonl: plan_shards {mb_s_plan:.0f} MB/s, write_shard_store "
        f"{mb_s_write:.0f} MB/s; tracemalloc peaks: iter_documents {peak_read / 1e6:.2f} MB, "
        f"plan_shards {peak_plan / 1e6:.2f} MB, write_shard_store {peak_write / 1e6:.2f} MB"
    )
    assert peak_read < size / 10
    assert peak_plan < size / 10
    assert peak_write < size / 5  # memory follows batch_units, not the shard's size
