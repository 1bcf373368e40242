"""Run shapes: every partitioned asset works in every run its backfill policy lets Dagster
launch — one partition, a range of partitions in one run, all partitions.

`corpus_shard` (`multi_run(8)`) gets ranges of up to eight shards whenever several shards are
requested together (the UI's "Materialize all", automation filling the shards of a new file:
both are backfills); the `benchmarks` assets (`single_run()`) get the whole selected range;
`token_nll` (`multi_run(1)`) and the assets without a policy get one key per run. The runs are
the ones Dagster's own backfill iteration requests (`Project.backfill_requests`), executed
in-process with their partition or partition-range tags, on the small world with its corpus
split into several files.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from sigmap_assets.defs.corpus.assets import SHARD_DATA_VERSION
from sigmap_assets.state import StoredState
from sigmap_lib.inputs import ShardStore, read_registry
from sigmap_lib.nll import NLLStore
from tests.assets.harness import RANGE_END, RANGE_START, Project

#: Most partitions one run of each partitioned asset covers in a backfill (None: the whole
#: selected range), as Dagster applies the asset's backfill policy.
KEYS_PER_RUN = {
    "corpus_shard": 8,
    "token_nll": 1,
    "nll_ranks": 1,
    "shard_screen": 1,
    "benchmark_items": None,
    "screened_candidates": None,
    "signatures": None,
    "irt_item_pool": None,
    "irt_fits": None,
    "metabench_selection": None,
    "scored_models": 1,
}


def split_corpus(world: Path, n_files: int) -> list[str]:
    """The world's one corpus file as ``n_files`` files (same documents, same unit order:
    the files sort in document order, so the imported NLL arrays still line up)."""
    src = world / "corpus" / "docs.jsonl"
    lines = src.read_text().splitlines(keepends=True)
    src.unlink()
    names = [f"part_{i:02d}.jsonl" for i in range(n_files)]
    for name, chunk in zip(names, np.array_split(np.arange(len(lines)), n_files)):
        (world / "corpus" / name).write_text("".join(lines[i] for i in chunk))
    return names


def add_files(world: Path, n_files: int) -> None:
    """``n_files`` more corpus files of two short documents each, sorting after the others,
    with every imported NLL array extended over their units."""
    import json

    from sigmap_lib.inputs import segment_units

    rng = np.random.default_rng(11)
    vocab = ["river", "stone", "cloud", "garden", "lantern", "harbor"]
    n_units = 0
    for f in range(n_files):
        docs = [" ".join(rng.choice(vocab, 40)) + "\n" for _ in range(2)]
        n_units += sum(len(segment_units(d)) for d in docs)
        lines = [json.dumps({"id": f"extra{f}:{i}", "text": d}) for i, d in enumerate(docs)]
        (world / "corpus" / f"zz_extra_{f:02d}.jsonl").write_text("\n".join(lines) + "\n")
    for p in sorted((world / "nll").glob("model_*.npy")):
        old = np.load(p)
        np.save(p, np.concatenate([old, rng.gamma(2.0, 1.0, n_units).astype(old.dtype)]))


def plan(project: Project) -> dict[str, dict]:
    return {s.key: s.to_dict() for s in StoredState.read(project.storage).plan}


def shard_events(results: list[dg.ExecuteInProcessResult]) -> dict[str, dg.AssetMaterialization]:
    return {
        e.partition: e.materialization
        for r in results
        for e in r.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("corpus_shard")
    }


def keys_per_run(request: dg.RunRequest, keys: list[str]) -> int:
    if RANGE_START not in request.tags:
        return 1
    return keys.index(request.tags[RANGE_END]) - keys.index(request.tags[RANGE_START]) + 1


def test_every_partitioned_asset_has_its_run_shape_here(project: Project) -> None:
    """The table above is every partitioned asset of the Definitions with the run shape its
    backfill policy gives: a new partitioned asset, or a changed policy, is seen here."""
    graph = project.defs.resolve_asset_graph()
    partitioned = {
        k.to_user_string(): graph.get(k)
        for k in graph.materializable_asset_keys
        if graph.get(k).partitions_def is not None
    }
    assert set(partitioned) == set(KEYS_PER_RUN)
    for name, node in partitioned.items():
        pdef = node.partitions_def
        dims = pdef.partitions_defs if isinstance(pdef, dg.MultiPartitionsDefinition) else None
        for d in [x.partitions_def for x in dims] if dims else [pdef]:
            if not project.keys(d.name):
                project.instance.add_dynamic_partitions(d.name, [f"k{i:02d}" for i in range(10)])
        keys = [str(k) for k in pdef.get_partition_keys(dynamic_partitions_store=project.instance)]
        requests = project.backfill_requests(name, keys)
        sizes = [keys_per_run(r, keys) for r in requests]
        assert sum(sizes) == len(keys), name
        want = KEYS_PER_RUN[name]
        assert max(sizes) == (len(keys) if want is None else min(want, len(keys))), name


def test_corpus_shard_one_shard_a_range_and_all_each_in_one_run(
    project: Project, synthetic_world: Path
) -> None:
    files = split_corpus(synthetic_world, 3)
    project.materialize(["model_zoo"])
    project.materialize(["corpus_manifest"])
    keys = project.keys("shards")
    specs = plan(project)
    assert len(keys) == 3 and sorted(d["file"] for d in specs.values()) == files
    # one shard (the UI's "Materialize" on one partition), then a range of two, then all
    # three: the runs a backfill of that selection launches, one run each (multi_run(8))
    single = project.materialize(["corpus_shard"], partition=keys[0])
    seen = {keys[0]: shard_events([single])[keys[0]]}
    for selection in (keys[:2], keys):
        requests = project.backfill_requests("corpus_shard", selection)
        assert [(r.tags[RANGE_START], r.tags[RANGE_END]) for r in requests] == [
            (selection[0], selection[-1])
        ]
        results = project.backfill("corpus_shard", selection)
        events = shard_events(results)
        assert sorted(events) == sorted(selection)
        n_steps = [e for r in results for e in r.all_events if e.event_type_value == "STEP_START"]
        assert len(n_steps) == 1
        for key, m in events.items():  # each shard's own metadata, never another's
            assert m.metadata["file"].value == specs[key]["file"]
            assert m.metadata["units"].value == specs[key]["n_units"]
            assert m.metadata["reused"].value == (key in seen)  # stored once, then reused
            assert m.metadata["shards_in_run"].value == len(selection)
            store = ShardStore.open(project.storage.layout.shard_store(key))
            assert store.spec.key == key and store.n_units == specs[key]["n_units"]
        seen.update(events)
    # the same data version whatever the run shape that wrote a shard: re-writing it in a
    # range does not make its token_nll cells look stale
    assert {m.tags["dagster/data_version"] for m in seen.values()} == {SHARD_DATA_VERSION}
    assert sum(m.metadata["units"].value for m in seen.values()) == 3000


def test_materialize_all_over_more_shards_than_one_run_holds(
    project: Project, synthetic_world: Path
) -> None:
    """Ten shards in ten files: "Materialize all" launches runs of eight and two; every
    shard is built, and one model's NLL imported over them equals the world's array unit for
    unit (the shards hold the right units in the right order)."""
    split_corpus(synthetic_world, 6)  # the world's six documents, one file each
    add_files(synthetic_world, 4)
    project.materialize(["model_zoo"])
    project.materialize(["corpus_manifest"])
    project.materialize(["model_registry", "benchmark_catalog"])
    keys = project.keys("shards")
    assert len(keys) == 10
    requests = project.backfill_requests("corpus_shard", keys)
    assert sorted(keys_per_run(r, keys) for r in requests) == [2, 8]
    results = project.backfill("corpus_shard", keys)
    assert len(results) == 2 and all(r.success for r in results)
    specs = plan(project)
    events = shard_events(results)
    assert sorted(events) == sorted(keys)
    assert all(events[k].metadata["units"].value == specs[k]["n_units"] for k in keys)
    # downstream: one model's cells on every shard (one run per cell), read back in plan order
    project.sync()
    model = project.keys("models")[0]
    assert all(r.success for r in project.backfill("token_nll", project.cells([model])))
    got = np.concatenate(
        [NLLStore.open(StoredState.read(project.storage).cell_dir(k, model)).array[:] for k in keys]
    )
    raw = next(s for s in read_registry(synthetic_world / "models.yaml") if s.key == model)
    want = np.load(raw.nll_source)
    assert got.shape == want.shape and np.allclose(got, want.astype(got.dtype))


@pytest.mark.slow
def test_every_partitioned_asset_in_one_partition_a_range_and_all(
    project: Project, synthetic_world: Path
) -> None:
    """The graph built the way a user builds it: each partitioned asset through the runs a
    backfill of one partition, of two, then of all partitions launches; every run succeeds
    and materializes exactly the partitions it was launched for."""
    split_corpus(synthetic_world, 3)
    project.materialize(["model_zoo"])
    project.materialize(["corpus_manifest"])
    project.materialize(["model_registry", "benchmark_catalog"])
    project.sync()
    project.materialize(["benchmark_scores"])

    def shapes(asset: str, keys: list[str], run_config: dict | None = None) -> None:
        for selection in (keys[:1], keys[:2], keys):
            results = project.backfill(asset, selection, run_config=run_config)
            sizes = [keys_per_run(r, keys) for r in project.backfill_requests(asset, selection)]
            assert len(results) == len(sizes) and all(r.success for r in results), asset
            want = KEYS_PER_RUN[asset]
            assert max(sizes) == (len(selection) if want is None else min(want, len(selection)))
            done = sorted(
                str(e.partition)
                for r in results
                for e in r.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey(asset)
            )
            assert done == sorted(selection), asset

    shards, bench = project.keys("shards"), project.keys("benchmarks")
    assert len(shards) == 3 and len(bench) == 6
    shapes("corpus_shard", shards)
    shapes("token_nll", project.cells())
    shapes("nll_ranks", shards)
    project.materialize(["rank_coverage"])
    shapes("benchmark_items", bench)
    shapes("shard_screen", shards)
    shapes("screened_candidates", bench)
    shapes("signatures", bench, run_config=project.signatures_config)
    for asset in ("irt_item_pool", "irt_fits", "metabench_selection"):
        shapes(asset, bench)
