"""The bad-input catalog (docs/TROUBLESHOOTING.md): every malformed input fails its asset
with an error naming the file and the problem, and leaves the stored data unchanged.

One project is materialized once for the module (world → corpus → registry/catalog →
scores → NLL of 3 models → ranks → items). Each test breaks one input of the world
folder, re-materializes the asset that reads it, checks the failure message and that the
hashes of every file under the storage root are unchanged; the world is restored after
each test.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
import yaml

from tests.assets.harness import QUIET, Project, make_project, small_synthetic_world

NLL_MODELS = ["synthetic__alpha-00", "synthetic__beta-01", "synthetic__gamma-02"]
BENCH = "math_ai2_00"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, Path]]:
    root = tmp_path_factory.mktemp("bad_inputs")
    world = small_synthetic_world(root / "world")
    pristine = root / "pristine"
    shutil.copytree(world, pristine)
    with dg.instance_for_test() as instance:
        p = make_project(root, world, instance)
        run(p, ["model_zoo"])
        run(p, ["corpus_manifest"], run_config=p.corpus_config)
        for k in p.keys("shards"):
            run(p, ["corpus_shard"], partition=k)
        run(p, ["model_registry", "benchmark_catalog"])
        p.sync()
        run(p, ["benchmark_scores"])
        for cell in p.cells(NLL_MODELS):
            run(p, ["token_nll"], partition=cell)
        for k in p.keys("shards"):
            run(p, ["nll_ranks"], partition=k)
        run(p, ["rank_coverage"])
        run(p, ["benchmark_items"], partition=BENCH)
        yield p, pristine


@pytest.fixture
def project(built: tuple[Project, Path]) -> Iterator[Project]:
    p, pristine = built
    yield p
    world = Path(p.world.path)
    shutil.rmtree(world)
    shutil.copytree(pristine, world)


def run(
    p: Project,
    names: list[str],
    *,
    partition: str | None = None,
    run_config: dict | None = None,
    raise_on_error: bool = True,
) -> dg.ExecuteInProcessResult:
    """Materialize only the named assets (their stored upstreams are read from disk)."""
    assets = list(
        {
            k.to_user_string(): a for a in p.assets for k in a.keys if k.to_user_string() in names
        }.values()
    )
    assert len(assets) == len(names), names
    return dg.materialize(
        assets,
        instance=p.instance,
        resources=p.resources,
        partition_key=partition,
        run_config=(run_config or {}) | QUIET,
        raise_on_error=raise_on_error,
    )


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    parts = []
    for ev in result.all_events:
        if ev.event_type_value == "STEP_FAILURE":
            err = ev.step_failure_data.error
            while err is not None:
                parts.append(err.message)
                err = err.cause
    return "\n".join(parts)


def assert_rejected(
    p: Project,
    names: list[str],
    expect: list[str],
    *,
    partition: str | None = None,
    run_config: dict | None = None,
    ignore: tuple[str, ...] = (),
) -> str:
    """Run ``names``; assert the run fails, the message contains every ``expect`` string and
    no stored file (except ``ignore``) was added, removed or changed."""
    root = Path(p.storage.root)
    before = snapshot(root)
    result = run(p, names, partition=partition, run_config=run_config, raise_on_error=False)
    assert not result.success, f"{names} accepted a malformed input"
    msg = failure_text(result)
    for e in expect:
        assert e in msg, f"expected {e!r} in the failure message:\n{msg}"
    assert "SigmapInputError" in msg or "DagsterInvalidConfigError" in msg or "Failure" in msg, msg
    after = snapshot(root)
    for name in ignore:
        before.pop(name, None)
        after.pop(name, None)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"stored data changed after a rejected input: {changed}"
    return msg


def world(p: Project) -> Path:
    return Path(p.world.path)


def edit_yaml(path: Path, fn) -> None:
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


# ----------------------------------------------------------------------------------- corpus
CORPUS = ["corpus_manifest"]
# corpus_manifest plans the shards (reads every new file) before it writes anything;
# everything derived is unchanged
MANIFEST = ("corpus/manifest.parquet",)


def test_corpus_invalid_utf8(project: Project) -> None:
    f = world(project) / "corpus" / "doc_000002.txt"
    text = (" ".join(["word"] * 40)).encode()
    f.write_bytes(text[:100] + b"\xff\xfe broken" + text[100:])
    assert_rejected(project, CORPUS, [str(f), "invalid UTF-8 at byte offset 100"], ignore=MANIFEST)


def test_corpus_whitespace_only_document(project: Project) -> None:
    f = world(project) / "corpus" / "notes.jsonl"
    f.write_text('{"text": "a fine document"}\n{"text": "  \\n\\t "}\n')
    assert_rejected(
        project, CORPUS, [f"{f}:2", "empty or whitespace-only document"], ignore=MANIFEST
    )


def test_corpus_jsonl_line_not_json(project: Project) -> None:
    f = world(project) / "corpus" / "notes.jsonl"
    f.write_text('{"text": "fine"}\n{"text": "unterminated\n')
    assert_rejected(project, CORPUS, [f"{f}:2", "malformed JSON"], ignore=MANIFEST)


def test_corpus_jsonl_missing_text_field(project: Project) -> None:
    f = world(project) / "corpus" / "notes.jsonl"
    f.write_text('{"body": "no text field here"}\n')
    assert_rejected(project, CORPUS, [f"{f}:1", "missing field 'text'"], ignore=MANIFEST)


def test_corpus_parquet_without_text_column(project: Project) -> None:
    f = world(project) / "corpus" / "extra.parquet"
    pl.DataFrame({"id": ["a"], "body": ["some words"]}).write_parquet(f)
    assert_rejected(project, CORPUS, [str(f), "missing column 'text'", "body"], ignore=MANIFEST)


def test_corpus_duplicate_document_id(project: Project) -> None:
    f = world(project) / "corpus" / "notes.jsonl"
    f.write_text('{"id": "d1", "text": "one"}\n{"id": "d1", "text": "two"}\n')
    assert_rejected(
        project,
        CORPUS,
        ["duplicate document id 'd1'", "notes.jsonl:1", "notes.jsonl:2"],
        ignore=MANIFEST,
    )


def test_world_folder_missing_catalog(project: Project) -> None:
    (world(project) / "catalog.yaml").unlink()
    assert_rejected(project, ["model_zoo"], [str(world(project)), "missing catalog.yaml"])


# --------------------------------------------------------------------------------- registry
def test_registry_duplicate_id(project: Project) -> None:
    f = world(project) / "models.yaml"
    edit_yaml(f, lambda d: d["models"].append(dict(d["models"][1])))
    assert_rejected(
        project,
        ["model_registry"],
        [str(f), "models[12]", "synthetic/beta-01", "duplicate id (also models[1])"],
    )


def test_registry_path_traversal_id(project: Project) -> None:
    f = world(project) / "models.yaml"
    edit_yaml(f, lambda d: d["models"].append({"id": "../evil", "nll_source": "nll/model_000.npy"}))
    assert_rejected(
        project, ["model_registry"], [str(f), "models[12]", "'../evil'", "'..' path component"]
    )


def test_registry_unknown_key(project: Project) -> None:
    f = world(project) / "models.yaml"
    edit_yaml(f, lambda d: d["models"][3].update(weights="w.bin"))
    assert_rejected(project, ["model_registry"], [str(f), "models[3]", "unknown key 'weights'"])


def test_registry_unknown_dtype(project: Project) -> None:
    f = world(project) / "models.yaml"
    edit_yaml(f, lambda d: d["models"][0].update(dtype="int4"))
    assert_rejected(project, ["model_registry"], [str(f), "models[0]", "unknown dtype 'int4'"])


def test_registry_invalid_yaml(project: Project) -> None:
    f = world(project) / "models.yaml"
    f.write_text(f.read_text() + "  - id: misindented\n")
    assert_rejected(project, ["model_registry"], [str(f), "invalid YAML"])


def test_nll_source_wrong_length(project: Project) -> None:
    # a model not materialized yet (a complete cell is never re-read)
    src = world(project) / "nll" / "model_003.npy"
    np.save(src, np.load(src)[:-7])
    assert_rejected(
        project,
        ["token_nll"],
        [str(src), "shape (2993,)", "expected (3000,)", "synthetic/delta-03"],
        partition=project.cells(["synthetic__delta-03"])[0],
    )


def test_nll_source_non_finite_value(project: Project) -> None:
    # a model not materialized yet: nothing at all may be written for it
    src = world(project) / "nll" / "model_004.npy"
    v = np.load(src)
    v[2999] = np.nan
    np.save(src, v)
    assert_rejected(
        project,
        ["token_nll"],
        [str(src), "non-finite value at unit 2999", "synthetic/alpha-04"],
        partition=project.cells(["synthetic__alpha-04"])[-1],
    )


# ---------------------------------------------------------------------------------- catalog
def test_catalog_missing_function(project: Project) -> None:
    f = world(project) / "catalog.yaml"
    edit_yaml(f, lambda d: d["benchmarks"]["coding_ai2_01"].pop("function"))
    assert_rejected(
        project,
        ["benchmark_catalog"],
        [str(f), "coding_ai2_01", "missing required key", "function"],
    )


# ----------------------------------------------------------------------------------- scores
def _scores(p: Project) -> tuple[Path, list[list[str]]]:
    f = world(p) / "scores.csv"
    return f, [line.split(",") for line in f.read_text().splitlines()]


def _reject_scores(p: Project, f: Path, rows: list[list[str]], fragments: list[str]) -> None:
    """Write ``rows`` as the scores file ``f``: ``benchmark_scores`` rejects it with a message
    naming the file and every fragment."""
    f.write_text("\n".join(",".join(r) for r in rows) + "\n")
    assert_rejected(p, ["benchmark_scores"], [str(f), *fragments])


def test_scores_non_numeric_cell(project: Project) -> None:
    f, rows = _scores(project)
    rows[3][2] = "seventy"
    _reject_scores(
        project, f, rows, ["column 'coding_ai2_01'", "non-numeric", "line 4", "'seventy'"]
    )


def test_scores_out_of_catalog_range(project: Project) -> None:
    f, rows = _scores(project)
    rows[2][1] = "130.5"
    range_msg = "outside its catalog score_range [0, 100]"
    _reject_scores(project, f, rows, ["130.5", "benchmark 'math_ai2_00'", range_msg])


def test_scores_duplicate_model_benchmark(project: Project) -> None:
    f, rows = _scores(project)
    again = list(rows[4])
    again[1] = str(float(again[1]) / 2)  # the same (model, benchmark) with another score
    who = f"model {rows[4][0]!r} / 'math_ai2_00'"
    _reject_scores(project, f, [*rows, again], [who, "more than once", "different scores"])


# -------------------------------------------------------------------------- item responses
def test_responses_value_two(project: Project) -> None:
    f = world(project) / "responses" / f"{BENCH}.parquet"
    df = pl.read_parquet(f)
    col = df.columns[5]
    df.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(2).otherwise(pl.col(col)).cast(pl.Int8).alias(col)
    ).write_parquet(f)
    assert_rejected(
        project,
        ["benchmark_items"],
        [str(f), col, "responses must be 0 or 1", "(row 3): 2"],
        partition=BENCH,
    )


def test_responses_duplicated_model(project: Project) -> None:
    f = world(project) / "responses" / f"{BENCH}.parquet"
    df = pl.read_parquet(f)
    pl.concat([df, df[2:3]]).write_parquet(f)
    assert_rejected(
        project,
        ["benchmark_items"],
        [str(f), f"duplicate model row(s): {df['model'][2]!r} (row 2, row "],
        partition=BENCH,
    )


def test_items_missing_text_column(project: Project) -> None:
    f = world(project) / "items" / f"{BENCH}.parquet"
    pl.read_parquet(f).rename({"text": "question"}).write_parquet(f)
    assert_rejected(
        project,
        ["benchmark_items"],
        [str(f), "text column 'text' not found", "question"],
        partition=BENCH,
    )


# ----------------------------------------------------------------------------------- config
def assert_config_rejected(
    project: Project, asset: str, config: dict, fragments: list[str], partition: str | None = None
) -> None:
    """Materializing ``asset`` with run config ``config`` fails with a message naming the
    asset and every fragment (as :func:`assert_rejected`)."""
    cfg = {"ops": {asset: {"config": config}}}
    assert_rejected(project, [asset], [asset, *fragments], partition=partition, run_config=cfg)


def test_screening_unknown_statistic(project: Project) -> None:
    fragments = ["statistic must be one of", "'kendall'"]
    assert_config_rejected(
        project, "screened_candidates", {"statistic": "kendall"}, fragments, partition=BENCH
    )


def test_screening_negative_q(project: Project) -> None:
    fragments = ["q must be in (0, 1]", "-0.05"]
    assert_config_rejected(project, "screened_candidates", {"q": -0.05}, fragments, partition=BENCH)


def test_corpus_shard_units_zero(project: Project) -> None:
    fragments = ["shard_units=0 must be positive"]
    assert_config_rejected(project, "corpus_manifest", {"shard_units": 0}, fragments)


def test_run_config_unknown_field(project: Project) -> None:
    root = Path(project.storage.root)
    before = snapshot(root)
    cfg = {"ops": {"screened_candidates": {"config": {"quantile": 0.1}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match="quantile"):
        run(project, ["screened_candidates"], partition=BENCH, run_config=cfg)
    assert snapshot(root) == before


def test_catalog_is_complete() -> None:
    """Every input tested here is listed in docs/TROUBLESHOOTING.md."""
    doc = (Path(__file__).parents[2] / "docs" / "TROUBLESHOOTING.md").read_text()
    names = [n for n in globals() if n.startswith("test_") and n != "test_catalog_is_complete"]
    assert len(names) >= 15
    missing = [n for n in names if f"`{n}`" not in doc]
    assert not missing, f"docs/TROUBLESHOOTING.md does not list {missing}"
