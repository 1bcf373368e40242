from __future__ import annotations

from pathlib import Path

import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import Benchmark, benchmark_slug, catalog_from_dict, read_catalog
from tests.lib.helpers import input_error

GOOD = """\
benchmarks:
  arc:
    family: ai2
    format: multiple_choice
    function: reasoning
    score_range: [0, 100]
    items: items/arc.parquet
    responses: /abs/responses/arc.parquet
  gsm8k:
    family: openai
    format: generation
    function: math
"""


def _write(tmp_path: Path, text: str, name: str = "catalog.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_read_catalog_resolves_paths_and_keeps_order(tmp_path: Path) -> None:
    sub = tmp_path / "world"
    sub.mkdir()
    cat = read_catalog(_write(sub, GOOD))
    assert list(cat) == ["arc", "gsm8k"]
    arc = cat["arc"]
    assert isinstance(arc, Benchmark)
    assert (arc.family, arc.format, arc.function) == ("ai2", "multiple_choice", "reasoning")
    assert arc.score_range == (0.0, 100.0)
    assert arc.items == (sub / "items" / "arc.parquet").resolve()
    assert arc.responses == Path("/abs/responses/arc.parquet")
    assert cat["gsm8k"].score_range is None and cat["gsm8k"].items is None
    assert arc.slug == "arc"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("benchmarks: [a, b\n", "not valid YAML"),
        ("", "file is empty"),
        ("bench:\n  a: {family: f, format: m, function: r}\n", "unknown top-level key"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("benchmarks: {}\n", "non-empty mapping"),
        ("benchmarks:\n  arc: {family: f, format: m}\n", "missing required key(s) ['function']"),
        (
            "benchmarks:\n  arc: {family: f, format: m, function: r, familly: x}\n",
            "unknown key(s) ['familly']",
        ),
        (
            "benchmarks:\n  arc: {family: '', format: m, function: r}\n",
            "family must be a non-empty",
        ),
        (
            "benchmarks:\n  arc: {family: f, format: m, function: r, score_range: [100, 0]}\n",
            "low must be below high",
        ),
        (
            "benchmarks:\n  arc: {family: f, format: m, function: r, score_range: [0]}\n",
            "score_range must be a list",
        ),
        (
            "benchmarks:\n  arc: {family: f, format: m, function: r, score_range: [0, x]}\n",
            "two finite numbers",
        ),
        (
            "benchmarks:\n  a/b: {family: f, format: m, function: r}\n"
            "  a__b: {family: f, format: m, function: r}\n",
            "same slug 'a__b'",
        ),
        (
            "benchmarks:\n  arc: {family: f, format: m, function: r}\n"
            "  arc: {family: g, format: m, function: r}\n",
            "duplicate key 'arc'",
        ),
        ("benchmarks:\n  arc: 3\n", "expected a mapping"),
    ],
)
def test_bad_catalogs_name_file_and_problem(tmp_path: Path, text: str, fragment: str) -> None:
    p = _write(tmp_path, text, "my_catalog.yaml")
    input_error(lambda: read_catalog(p), "my_catalog.yaml", fragment)


def test_benchmark_named_in_entry_errors(tmp_path: Path) -> None:
    p = _write(tmp_path, "benchmarks:\n  hellaswag: {family: f, format: m, function: 3}\n")
    with pytest.raises(SigmapInputError, match=r"hellaswag.*function must be a non-empty string"):
        read_catalog(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SigmapInputError, match=r"nope\.yaml: file not found"):
        read_catalog(tmp_path / "nope.yaml")


def test_catalog_from_dict_without_base_dir() -> None:
    cat = catalog_from_dict(
        {"benchmarks": {"x": {"family": "f", "format": "m", "function": "r", "items": "i.parquet"}}}
    )
    assert cat["x"].items == Path("i.parquet")


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("arc", "arc"),
        ("ARC-C", "ARC-C"),
        ("mmlu.high_school_math", "mmlu.high_school_math"),
        ("org/bench", "org__bench"),
        ("a|b,c[1]", "a_b_c_1_"),
        ("x..y", "x_y"),
        ("../etc", "___etc"),
        (".hidden", "_hidden"),
        ("with space", "with_space"),
        ("über", "_ber"),
    ],
)
def test_benchmark_slug(name: str, slug: str) -> None:
    assert benchmark_slug(name) == slug


def test_benchmark_slug_properties() -> None:
    bad_substrings = ["/", "|", ",", "[", "]", "..", " ", "\\", ":"]
    names = ["a/b|c", "..", "x,y", "[q]", "a\\b:c", "z" * 300, "a...b", "ok-name_1.2+"]
    for n in names:
        s = benchmark_slug(n)
        assert s and not any(b in s for b in bad_substrings), (n, s)
        assert not s.startswith(".")
        assert len(s) <= 120
        assert benchmark_slug(s) == s  # idempotent
    long_a, long_b = "z" * 300, "z" * 299 + "y"
    assert benchmark_slug(long_a) != benchmark_slug(long_b)
    with pytest.raises(SigmapInputError, match="empty"):
        benchmark_slug("  ")
