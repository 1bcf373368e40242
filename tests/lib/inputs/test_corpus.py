"""Corpus reading, unit segmentation and the corpus store."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import (
    CorpusStore,
    Document,
    build_corpus_store,
    char_to_byte_offsets,
    read_corpus,
    segment_units,
    unit_byte_spans,
)

_POOL = [
    *list("abcXYZ019 \t\n.,;!?-_'\"()"),
    "é",
    "ß",
    "東",
    "😀",
    "👍🏽",
    "\u00a0",
    "\u2003",
    "\u0301",
    "Ω",
]


def _random_string(rng: np.random.Generator, n: int) -> str:
    return "".join(_POOL[i] for i in rng.integers(0, len(_POOL), n))


def test_char_to_byte_offsets() -> None:
    text = "aé東😀"
    assert char_to_byte_offsets(text).tolist() == [0, 1, 3, 6, 10]
    assert char_to_byte_offsets("").tolist() == [0]


def test_segment_units_properties_on_random_strings() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        text = _random_string(rng, int(rng.integers(0, 60)))
        raw = text.encode()
        u = segment_units(text)
        assert u.dtype == np.int64 and u.shape[1] == 2
        if len(u):
            assert np.all(u[:, 0] < u[:, 1])  # non-empty
            assert np.all(u[1:, 0] >= u[:-1, 1])  # sorted, non-overlapping
            assert u[0, 0] >= 0 and u[-1, 1] <= len(raw)
        covered = np.zeros(len(raw), dtype=bool)
        for s, e in u:
            piece = raw[s:e].decode()  # boundaries fall on character boundaries
            assert piece and not any(c.isspace() for c in piece)
            covered[s:e] = True
        # every non-space character is inside a unit
        b = char_to_byte_offsets(text)
        for k, c in enumerate(text):
            if not c.isspace():
                assert covered[b[k] : b[k + 1]].all(), (text, c)
        # attributed spans tile the document
        a = unit_byte_spans(text)
        if len(u):
            assert a[0, 0] == 0 and a[-1, 1] == len(raw)
            assert np.array_equal(a[1:, 0], a[:-1, 1])
            assert np.array_equal(a[:, 1][:-1], u[:-1, 1])
            assert np.all(a[:, 0] <= u[:, 0])
            assert raw[: u[0, 0]].decode().strip() == ""  # only whitespace is re-attributed


def test_segment_units_default_unit_kinds() -> None:
    text = "the cat sat"
    assert segment_units(text).tolist() == [[0, 3], [4, 7], [8, 11]]
    words = "alpha beta gamma delta"
    assert len(segment_units(words)) == 4
    text = "Hi,  world! 42x 😀😀 naïve"
    got = [text.encode()[s:e].decode() for s, e in segment_units(text)]
    assert got == ["Hi", ",", "world", "!", "42", "x", "😀", "😀", "naïve"]
    assert unit_byte_spans("  ab  c ").tolist() == [[0, 4], [4, 8]]


def test_segment_units_custom_pattern() -> None:
    assert segment_units("a b  c", r"\S+\s*").tolist() == [[0, 2], [2, 5], [5, 6]]
    with pytest.raises(SigmapInputError, match="not a valid regex"):
        segment_units("x", "(")


def _write_corpus(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "b.txt").write_text("second file text")
    (root / "a.txt").write_text("first  file\ttext é")
    (root / "sub" / "c.jsonl").write_text(
        json.dumps({"text": "json one", "id": "j1"})
        + "\n\n"
        + json.dumps({"text": "json two 😀"})
        + "\n"
    )
    pq.write_table(pa.table({"text": ["pq zero", "pq one"]}), root / "sub" / "d.parquet")
    (root / "ignored.md").write_text("not a corpus file")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "x.txt").write_text("hidden")


def test_read_corpus_formats_and_order(tmp_path: Path) -> None:
    _write_corpus(tmp_path)
    docs = read_corpus(tmp_path)
    assert [d.doc_id for d in docs] == [
        "a.txt",
        "b.txt",
        "j1",
        "sub/c.jsonl:3",
        "sub/d.parquet:0",
        "sub/d.parquet:1",
    ]
    assert docs[0].text == "first  file\ttext é"
    assert docs[3].text == "json two 😀" and docs[3].source == "sub/c.jsonl:3"
    assert read_corpus(tmp_path) == docs  # deterministic


@pytest.mark.parametrize(
    "name,content,match",
    [
        ("e.txt", b"", r"e\.txt: empty or whitespace-only"),
        ("w.txt", b"  \n\t ", r"w\.txt: empty or whitespace-only"),
        ("u.txt", b"ok text \xff more", r"u\.txt: invalid UTF-8 at byte offset 8"),
        ("p.txt", b"\xe2\x82", r"p\.txt: invalid UTF-8 at byte offset 0"),
        ("j.jsonl", b'{"text": "fine"}\n{"text": broken}\n', r"j\.jsonl:2: malformed JSON"),
        ("k.jsonl", b'{"body": "no text"}\n', r"k\.jsonl:1: missing field 'text'"),
        ("m.jsonl", b'{"text": ""}\n', r"m\.jsonl:1: empty or whitespace-only"),
        ("n.jsonl", b'{"text": 3}\n', r"n\.jsonl:1: 'text' must be a string"),
        (
            "v.jsonl",
            b'{"text": "a"}\n{"text": "b \xc3("}\n',
            r"v\.jsonl:2: invalid UTF-8 at byte offset 12 of the line \(file byte offset 26\)",
        ),
        (
            "d.jsonl",
            b'{"text": "a", "id": "x"}\n{"text": "b", "id": "x"}\n',
            r"duplicate document id 'x'",
        ),
    ],
)
def test_read_corpus_errors_name_the_culprit(
    tmp_path: Path, name: str, content: bytes, match: str
) -> None:
    (tmp_path / "good.txt").write_text("a fine document")
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SigmapInputError, match=match):
        read_corpus(tmp_path)


def test_read_corpus_parquet_errors(tmp_path: Path) -> None:
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "t.parquet")
    with pytest.raises(SigmapInputError, match=r"t\.parquet: missing column 'text'"):
        read_corpus(tmp_path)
    pq.write_table(pa.table({"text": ["ok", " "]}), tmp_path / "t.parquet")
    with pytest.raises(SigmapInputError, match=r"t\.parquet row 1: empty"):
        read_corpus(tmp_path)


def test_read_corpus_empty(tmp_path: Path) -> None:
    with pytest.raises(SigmapInputError, match=r"no \.txt, \.jsonl or \.parquet files"):
        read_corpus(tmp_path)
    (tmp_path / "x.jsonl").write_text("\n\n")
    with pytest.raises(SigmapInputError, match="no documents"):
        read_corpus(tmp_path)
    with pytest.raises(SigmapInputError, match="does not exist"):
        read_corpus(tmp_path / "missing")
    (tmp_path / "p.txt").write_text("   \u2003")
    with pytest.raises(SigmapInputError, match="empty or whitespace-only"):
        read_corpus(tmp_path)


def _docs(n: int, seed: int = 0) -> list[Document]:
    rng = np.random.default_rng(seed)
    words = ["alpha", "béta", "東京", "42", "😀", ",", "x"]
    out = []
    for i in range(n):
        k = int(rng.integers(1, 30))
        seps = [" ", "  ", "\n"]
        text = "".join(
            words[int(rng.integers(len(words)))] + seps[int(rng.integers(3))] for _ in range(k)
        )
        out.append(Document(f"doc{i}", f"src{i}.txt", text))
    return out


def test_corpus_store_layout_and_accessors(tmp_path: Path) -> None:
    docs = _docs(600)  # > 2 parquet row groups of 256 documents
    cs = build_corpus_store(docs, tmp_path / "c", shard_units=60)
    assert cs.n_documents == 600
    n_units = [len(segment_units(d.text)) for d in docs]
    assert cs.n_units == sum(n_units)
    assert cs.n_bytes == sum(len(d.text.encode()) for d in docs)
    # shards: contiguous document ranges, documents never split, ~shard_units units
    shards = cs.shards
    assert shards[0].doc_start == 0 and shards[-1].doc_end == 600
    assert shards[0].unit_start == 0 and shards[-1].unit_end == cs.n_units
    cum = np.concatenate([[0], np.cumsum(n_units)])
    for a, b in itertools.pairwise(shards):
        assert a.doc_end == b.doc_start and a.unit_end == b.unit_start
    for s in shards:
        assert s.unit_start == cum[s.doc_start] and s.unit_end == cum[s.doc_end]
        assert s.n_units >= 60 or s is shards[-1]
        assert (
            s.n_units - (cum[s.doc_end] - cum[s.doc_end - 1]) < 60
        )  # closes at first boundary >= 60
    # per-unit arrays
    assert cs.unit_nbytes.sum() == cs.n_bytes
    assert np.array_equal(cs.unit_doc, np.repeat(np.arange(600), n_units))
    assert cs.documents(3, 6) == [d.text for d in docs[3:6]]
    assert cs.documents(250, 520) == [d.text for d in docs[250:520]]
    assert cs.documents(600, 600) == []
    assert cs.documents() == [d.text for d in docs]
    i = int(cum[7]) + 2
    expect = [docs[7].text.encode()[s:e].decode() for s, e in segment_units(docs[7].text)]
    assert cs.unit_text(i) == expect[2]
    left, unit = cs.context(i, n_left=1)
    raw = docs[7].text.encode()
    u = segment_units(docs[7].text)
    assert unit == expect[2] and left == raw[u[1, 0] : u[2, 0]].decode()
    left0, _ = cs.context(int(cum[7]), n_left=5)  # first unit: no context from doc 6
    assert left0 == ""
    assert cs.doc_ids[7] == "doc7"
    reopened = CorpusStore.open(tmp_path / "c")
    assert reopened.fingerprint == cs.fingerprint and reopened.n_units == cs.n_units


def test_fingerprint_tracks_content(tmp_path: Path) -> None:
    docs = _docs(10)
    a = build_corpus_store(docs, tmp_path / "a").fingerprint
    b = build_corpus_store(docs, tmp_path / "b").fingerprint
    changed = [*docs[:-1], Document(docs[-1].doc_id, "x", docs[-1].text + " more")]
    c = build_corpus_store(changed, tmp_path / "c").fingerprint
    d = build_corpus_store(docs, tmp_path / "d", pattern=r"\S+").fingerprint
    assert a == b and len({a, c, d}) == 3


def test_corpus_store_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(SigmapInputError, match="empty corpus"):
        build_corpus_store([], tmp_path / "x")
    with pytest.raises(SigmapInputError, match="duplicate document id 'a'"):
        build_corpus_store([Document("a", "s", "one"), Document("a", "t", "two")], tmp_path / "x")
    with pytest.raises(SigmapInputError, match=r"document 'e' \(f.txt\): empty"):
        build_corpus_store([Document("e", "f.txt", " \n")], tmp_path / "x")
    with pytest.raises(SigmapInputError, match=r"no manifest\.json"):
        CorpusStore.open(tmp_path / "nowhere")
