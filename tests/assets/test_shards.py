"""The corpus as shards (issue #13): adding or changing a corpus file recomputes the NLL of its
shards only (asserted from the instance's run records and the files on disk), aggregates use
the complete cells and report coverage, and a storage root of the old layout is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest

from sigmap_assets.demo import GraphRunner
from sigmap_lib.inputs import read_corpus, read_registry, segment_units
from sigmap_lib.nll import NLLStore
from tests.assets.harness import Project, add_tiny_models, demo_runner, split_corpus

THROUGH_COVERAGE = ["rank_coverage"]


def _extend_nll(world: Path, n_new: int, seed: int = 3) -> None:
    """Append ``n_new`` units to every imported NLL array (a new file sorts last)."""
    rng = np.random.default_rng(seed)
    for p in sorted((world / "nll").glob("model_*.npy")):
        old = np.load(p)
        np.save(p, np.concatenate([old, rng.gamma(2.0, 1.0, n_new).astype(old.dtype)]))


def _add_file(world: Path, name: str, n_docs: int = 2, words: int = 40) -> int:
    rng = np.random.default_rng(11)
    vocab = ["river", "stone", "cloud", "garden", "lantern", "harbor"]
    lines, n = [], 0
    for i in range(n_docs):
        text = " ".join(rng.choice(vocab, words)) + "\n"
        n += len(segment_units(text))
        lines.append(json.dumps({"id": f"{name}:{i}", "text": text}))
    (world / "corpus" / name).write_text("\n".join(lines) + "\n")
    return n


def _runner(project: Project, cell_threads: int = 0) -> GraphRunner:
    return demo_runner(project, cell_threads=cell_threads)


def _cell_runs(project: Project) -> list[str]:
    """Every token_nll partition materialized so far, from the instance's event log."""
    recs = project.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("token_nll")), limit=10_000
    ).records
    return sorted(r.partition_key for r in recs)


def _nll_files(project: Project) -> dict[str, tuple[int, str]]:
    root = Path(project.storage.layout.path("nll"))
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _first_run(project: Project, world: Path) -> tuple[list[str], list[str], dict]:
    """The world's corpus as two files, run through the coverage: shards, cell runs, files."""
    split_corpus(world)
    _runner(project).run(THROUGH_COVERAGE)
    shards0 = project.keys("shards")
    first = _cell_runs(project)
    assert len(shards0) == 2 and len(first) == 24 and len(set(first)) == 24
    return shards0, first, _nll_files(project)


def test_adding_a_corpus_file_computes_nll_for_its_shard_only(
    project: Project, synthetic_world: Path
) -> None:
    shards0, first, before = _first_run(project, synthetic_world)
    models = project.keys("models")

    n_new = _add_file(synthetic_world, "zz_new.jsonl")
    _extend_nll(synthetic_world, n_new)
    _runner(project).run(THROUGH_COVERAGE)
    shards1 = project.keys("shards")
    [new_shard] = [s for s in shards1 if s not in shards0]
    assert set(shards0) < set(shards1)
    runs = _cell_runs(project)
    added = sorted(set(runs) - set(first)) if len(runs) == len(set(runs)) else None
    assert added is not None, f"a cell was materialized twice: {runs}"
    assert added == sorted(f"{m}|{new_shard}" for m in models)  # the new shard's cells only
    after = _nll_files(project)
    assert {k: v for k, v in after.items() if k in before} == before  # untouched, byte and mtime
    assert all(k.startswith(f"shards/{new_shard}/") for k in set(after) - set(before))
    cov = json.loads(project.storage.layout.ranks_current().read_text())
    assert [s["key"] for s in cov["shards"]] == shards1 and len(cov["models"]) == 12
    n_total = sum(s["n_units"] for s in cov["shards"])
    assert n_total == sum(
        len(segment_units(d.text)) for d in read_corpus(synthetic_world / "corpus")
    )

    # a re-run with nothing new materializes no cell at all
    _runner(project).run(THROUGH_COVERAGE)
    assert len(_cell_runs(project)) == len(runs)


def test_a_changed_file_recomputes_only_its_shards_and_old_values_never_mix(
    project: Project, synthetic_world: Path
) -> None:
    shards0, first, before = _first_run(project, synthetic_world)
    # rewrite the second file (its last document changes: same unit count, other bytes)
    f2 = synthetic_world / "corpus" / "docs2.jsonl"
    lines = f2.read_text().splitlines()
    doc = json.loads(lines[-1])
    doc["text"] = doc["text"].replace(doc["text"].split()[0], "zyzzyva", 1)
    f2.write_text("\n".join([*lines[:-1], json.dumps(doc)]) + "\n")
    _runner(project).run(THROUGH_COVERAGE)
    shards1 = project.keys("shards")
    assert shards1[0] == shards0[0] and shards1[1] != shards0[1]  # docs.jsonl kept its key
    added = sorted(set(_cell_runs(project)) - set(first))
    assert added == sorted(f"{m}|{shards1[1]}" for m in project.keys("models"))
    after = _nll_files(project)
    assert {k: v for k, v in after.items() if k in before} == before  # old data kept, unchanged
    meta = project.instance.get_latest_materialization_event(
        dg.AssetKey("corpus_manifest")
    ).asset_materialization.metadata
    assert meta["changed_files"].value == ["docs2.jsonl"]
    assert meta["removed_shards"].value == [shards0[1]]
    cov = json.loads(project.storage.layout.ranks_current().read_text())
    assert [s["key"] for s in cov["shards"]] == shards1  # the old shard left the aggregates

    # sigmap gc: the old shard's data is unused; removing it leaves everything current intact
    from sigmap_assets.gc import remove, unused_paths
    from sigmap_assets.state import StoredState

    unused = unused_paths(project.storage)
    names = {p.name for p, _ in unused}
    assert shards0[1] in names and shards0[0] not in names and shards1[1] not in names
    assert remove(unused) > 0 and unused_paths(project.storage) == []
    state = StoredState.read(project.storage)
    ranks = state.open_ranks()
    assert ranks.n_units == state.open_corpus().n_units
    assert len(state.open_nll_arrays(cov["models"][:1])[0]) == ranks.n_units


def test_coverage_uses_complete_cells_and_reports_the_missing_ones(project: Project) -> None:
    project.through("registry")
    models, shards = project.keys("models"), project.keys("shards")
    assert len(shards) == 3
    late = models[-1]
    for c in project.cells(models[:-1]) + project.cells([late])[:1]:
        project.materialize(["token_nll"], partition=c)
    for s in shards:
        project.materialize(["nll_ranks"], partition=s)
    res = project.materialize(["rank_coverage"])
    (mat,) = res.get_asset_materialization_events()
    md = mat.materialization.metadata
    # 11 models on 3 shards beat 12 models on 1 shard
    assert md["models_used"].value == 11 and md["shards_used"].value == 3
    assert md["missing_cells"].value == 2 and md["excluded_models"].value == [
        late.replace("__", "/")
    ]
    assert "✗" in md["grid"].value
    cov = json.loads(project.storage.layout.ranks_current().read_text())
    assert cov["coverage"]["missing"] == {s: [late] for s in shards[1:]}
    # each shard's record: the models its rank store covers, read back typed
    from sigmap_assets.state import ShardRanks, StoredState

    state = StoredState.read(project.storage)
    first, rest = state.shard_ranks(shards[0]), [state.shard_ranks(s) for s in shards[1:]]
    assert first.models == tuple(models) and first.ranks is not None
    assert all(r.models == tuple(models[:-1]) and r.ranks for r in rest)
    assert first.built_for(set(models[1:])) == tuple(models[1:])  # unregistered ones drop
    assert ShardRanks.from_dict(first.to_dict()) == first
    assert first.n_units == state.shard_spec(shards[0]).n_units
    assert state.shard_ranks("absent") == ShardRanks("absent", 0)
    assert ShardRanks("s", 5, ("a", "b"), None).built_for({"a", "b"}) == ()  # no store yet


def test_storage_root_of_the_old_layout_is_refused_with_what_to_do(project: Project) -> None:
    old = Path(project.storage.layout.path("corpus", "store"))
    old.mkdir(parents=True)
    (old / "manifest.json").write_text("{}")
    legacy_nll = Path(project.storage.layout.path("nll", "0123456789ab", "m1"))
    legacy_nll.mkdir(parents=True)
    project.materialize(["model_zoo"])
    res = project.materialize(["corpus_manifest"], raise_on_error=False)
    assert not res.success
    [error] = [e.step_failure_data.error for e in res.all_events if e.is_step_failure]
    while error.cause is not None:  # Dagster wraps what the asset raised
        error = error.cause
    assert error.cls_name == "SigmapInputError", error.to_string()
    msg = error.message.strip()
    assert "\n" not in msg  # one line: what, where, the fix
    assert "older sigmap" in msg and str(old) in msg and "new folder" in msg, msg
    assert (old / "manifest.json").exists() and legacy_nll.exists()  # nothing deleted
    assert not project.keys("shards")


@pytest.mark.parametrize("n_shards", [1, 3])
def test_sharded_signatures_equal_the_monolithic_ones(project: Project, n_shards: int) -> None:
    """Screening merged from per-shard partials and signatures over the sharded view are the
    ones computed on one rank store of all units (built here from the same NLL)."""
    from sigmap_assets.state import StoredState
    from sigmap_lib.nll import build_rank_store
    from sigmap_lib.signatures import extract_signatures, screen

    project.corpus_config = {
        "ops": {"corpus_manifest": {"config": {"shard_units": 3000 // n_shards}}}
    }
    project.through("signatures")
    state = StoredState.read(project.storage)
    models = list(state.current.models)
    assert len(state.current.shards) == n_shards
    bench = project.keys("benchmarks")
    arrays = [np.asarray(a) for a in state.open_nll_arrays()]
    nbytes = np.asarray(state.open_corpus().unit_nbytes)
    whole = build_rank_store(arrays, models, nbytes, Path(project.storage.root) / "whole")
    y = state.score_matrix(bench)
    for key, res in zip(bench, screen(whole, y, q=0.01)):
        got = pl.read_parquet(project.storage.layout.screening_candidates(key))
        assert got["unit"].to_list() == res.indices.tolist(), key
    sigs = extract_signatures(
        whole,
        y,
        nll_arrays=arrays,
        benchmark_names=bench,
        method="aic",
        n_bootstrap=5,
        n_permutations=3,
        loo=False,
    )
    for key, sig in zip(bench, sigs):
        stored = json.loads(project.storage.layout.signature_summary(key).read_text())["units"]
        assert stored == sig.units.tolist(), key


def test_a_failing_model_fails_only_its_cells_and_the_run_goes_on(
    project: Project, synthetic_world: Path
) -> None:
    import yaml

    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    reg["models"][4]["nll_source"] = "nll/missing.npy"
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    split_corpus(synthetic_world)
    summary = _runner(project).run(THROUGH_COVERAGE)
    broken = reg["models"][4]["id"].replace("/", "__")
    failed = sorted(f["partition"] for f in summary["failed"])
    assert failed == sorted(f"{broken}|{s}" for s in project.keys("shards"))
    assert all("missing.npy" in f["error"] for f in summary["failed"])
    assert "rank_coverage" in summary["ran"]  # the aggregates ran on the complete cells
    cov = json.loads(project.storage.layout.ranks_current().read_text())
    assert len(cov["models"]) == 11 and broken not in cov["models"]
    assert len(_cell_runs(project)) == 22  # every other cell was scored


def test_changed_weights_rescore_only_that_model(
    project: Project, synthetic_world: Path, tiny_gpt2: Path
) -> None:
    import shutil

    import yaml
    from safetensors.numpy import load_file, save_file

    for name in ("a", "b"):
        shutil.copytree(tiny_gpt2, synthetic_world / "models" / name)
    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    reg["models"] += [{"id": f"local/{n}", "path": f"models/{n}"} for n in ("a", "b")]
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    _runner(project).run(THROUGH_COVERAGE)
    first = _cell_runs(project)
    assert len(first) == 14  # 12 imported + 2 scored models, one shard
    [shard] = project.keys("shards")
    old_a = json.loads(project.storage.layout.nll_cell_current(shard, "local__a").read_text())
    old_dir = Path(project.storage.layout.nll_cell(shard, "local__a", old_a["fingerprint"]))
    before = NLLStore.open(old_dir).read()
    # the weights of local/a are overwritten in place (same names, same sizes)
    w = synthetic_world / "models" / "a" / "model.safetensors"
    tensors = load_file(w)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 0.05
    save_file(tensors, w)
    _runner(project).run(THROUGH_COVERAGE)
    added = [c for c in _cell_runs(project) if c not in first or _cell_runs(project).count(c) > 1]
    assert sorted(set(added)) == [f"local__a|{shard}"]  # only that model's cell
    new_a = json.loads(project.storage.layout.nll_cell_current(shard, "local__a").read_text())
    assert new_a["fingerprint"] != old_a["fingerprint"]
    after = NLLStore.open(project.storage.layout.nll_cell(shard, "local__a", new_a["fingerprint"]))
    assert not np.array_equal(after.read(), before)
    assert np.array_equal(NLLStore.open(old_dir).read(), before)  # the old values are kept
    from sigmap_assets.gc import unused_paths

    unused = dict(unused_paths(project.storage))  # the superseded cell and rank store only
    assert old_dir in unused and len(unused) == 2
    assert any(why == "superseded rank store" for why in unused.values())
    # a model removed from the registry: its cells are listed once the registry is consulted
    keys = {s.key for s in read_registry(synthetic_world / "models.yaml")} - {"local__a"}
    unused = dict(unused_paths(project.storage, registry=keys))
    cell_root = Path(project.storage.layout.nll_cell(shard, "local__a", "x")).parent
    assert unused[cell_root] == "NLL of a model removed from models.yaml"
    assert len(unused) == 2  # the superseded cell is inside it; the rank store as before


def test_cells_on_one_torch_thread_score_as_alone_and_restore_the_threads(
    project: Project, synthetic_world: Path, tiny_gpt2: Path
) -> None:
    """``cell_threads=1`` (`sigmap demo` on an embedded world): each cell holds its model's
    values, a failing model fails only its cells, and torch's thread count is restored."""

    import torch
    import yaml

    from sigmap_lib.inputs import ShardStore
    from sigmap_lib.nll import load_model, score_corpus

    add_tiny_models(synthetic_world, tiny_gpt2)
    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    reg["models"][4]["nll_source"] = "nll/missing.npy"
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    split_corpus(synthetic_world)
    threads = torch.get_num_threads()
    summary = _runner(project, cell_threads=1).run(THROUGH_COVERAGE)
    assert torch.get_num_threads() == threads
    shards = project.keys("shards")
    broken = reg["models"][4]["id"].replace("/", "__")
    assert sorted(f["partition"] for f in summary["failed"]) == sorted(
        f"{broken}|{s}" for s in shards
    )
    assert len(_cell_runs(project)) == 13 * len(shards)  # every other cell was scored
    assert "rank_coverage" in summary["ran"]
    for name in ("a", "b"):
        model, tok = load_model(str(synthetic_world / "models" / name), device="cpu")
        for shard in shards:
            cur = json.loads(
                project.storage.layout.nll_cell_current(shard, f"local__{name}").read_text()
            )
            stored = NLLStore.open(
                Path(project.storage.layout.nll_cell(shard, f"local__{name}", cur["fingerprint"]))
            ).read()
            corpus = ShardStore.open(project.storage.layout.shard_store(shard))
            alone = Path(project.storage.layout.path("alone")) / f"{name}-{shard}"
            score_corpus(model, tok, corpus, alone, batch_tokens=16384)
            np.testing.assert_allclose(stored, NLLStore.open(alone).read(), rtol=1e-5, atol=1e-5)
