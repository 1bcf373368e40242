"""Sensors, declarative automation and backfills under a real Dagster daemon.

`dg dev` (webserver + daemon, on 127.0.0.1, in its own process group) runs on a fresh
storage root configured for a small world with three corpus files and three benchmarks.
Nothing is launched by hand until the backfills: the sensors and the automation sensor build
the world from its files (registry, catalog, corpus plan, shards, every NLL cell, ranks,
screening, signatures). Then, as a user would:

(a) a model is added to ``models.yaml``: its cells on every shard are filled and the
    signatures are recomputed with it, with no manual step (timed);
(b) a corpus file is added: its shard is built and only its cells are scored (one per model;
    no other cell is scored again);
(c) a backfill of all partitions of each partitioned asset is launched as the UI launches it
    (GraphQL ``launchPartitionBackfill``) and finishes with every run successful;
(d) an automation backfill of the shape Dagster's backfill daemon fails ("Unable to determine
    root partitions", `sigmap_assets.backfills`) is stored as automation stores it: the daemon
    fails it, the ``automation_backfill_retry`` sensor submits it again once, and the retry
    finishes with every run successful. Any such failure during the phases above must have
    been retried the same way.

The seconds of each phase are recorded as test properties (docs/RESULTS.md quotes them).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tests.assets.dev_server import DevServer, dev_server, instance_yaml
from tests.assets.harness import as_automation_stores_it, small_synthetic_world

pytestmark = pytest.mark.slow

DAGSTER_YAML = instance_yaml(max_concurrent_runs=2)
WAIT_S = 1500  # a phase on a loaded 2-core machine (idle: 5-10 min)
TICK_S = 5  # sensor and automation intervals (defaults 30-60 s): a daemon that reacts quickly

LAUNCH = """
mutation ($p: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $p) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  }
}"""
STATUS = """
query ($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status numPartitions runs(limit: 500) { runId status } }
  }
}"""


def _split_corpus(world: Path, names: tuple[str, ...]) -> None:
    """The world's one corpus file as consecutive parts (sorted names keep the unit order)."""
    src = world / "corpus" / "docs.jsonl"
    docs = src.read_text().splitlines()
    src.unlink()
    k = len(docs) // len(names)
    for i, name in enumerate(names):
        part = docs[i * k : (i + 1) * k] if i < len(names) - 1 else docs[i * k :]
        (world / "corpus" / name).write_text("\n".join(part) + "\n")


def _wait(what: str, ok: Callable[[], bool], server: DevServer, timeout: float = WAIT_S) -> float:
    t0 = time.monotonic()
    while not ok():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"{what}: not within {timeout:.0f}s; dagster dev log:\n{server.log_tail()}")
        time.sleep(3)
    return time.monotonic() - t0


def _failed_runs(instance: dg.DagsterInstance) -> list[str]:
    runs = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    return [f"{r.run_id[:8]} {r.asset_selection} {r.tags.get('dagster/partition')}" for r in runs]


def _materialized_after(
    instance: dg.DagsterInstance, asset: str, since: float
) -> dict[str | None, int]:
    """Partition -> materializations of ``asset`` stored after ``since`` (epoch seconds)."""
    out: dict[str | None, int] = {}
    for rec in instance.fetch_materializations(dg.AssetKey(asset), limit=10_000).records:
        if rec.timestamp > since:
            out[rec.partition_key] = out.get(rec.partition_key, 0) + 1
    return out


def _signatures_with(storage: Path, benchmarks: list[str], n_models: int) -> bool:
    from sigmap_assets.layout import StorageLayout

    layout = StorageLayout(str(storage))
    for b in benchmarks:
        path = layout.signature_summary(b)
        if not path.exists():
            return False
        summary = json.loads(path.read_text())
        if summary.get("n_models") != n_models:
            return False
    return True


def _add_model(world: Path, model_id: str) -> None:
    """A registry entry with imported NLL (a perturbed copy of model 0) and its scores."""
    import numpy as np

    rng = np.random.default_rng(7)
    base = np.load(world / "nll" / "model_000.npy")
    np.save(world / "nll" / "model_new.npy", (base * 1.03 + rng.gamma(2.0, 0.05, base.shape)))
    reg = yaml.safe_load((world / "models.yaml").read_text())
    reg["models"].append({"id": model_id, "family": "epsilon", "nll_source": "nll/model_new.npy"})
    lines = (world / "scores.csv").read_text().splitlines()
    row = lines[1].split(",")
    (world / "scores.csv").write_text("\n".join([*lines, ",".join([model_id, *row[1:]])]) + "\n")
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))  # last: the trigger


def _add_corpus_file(world: Path) -> None:
    """A corpus file sorted last, and its units' NLL appended to every imported array."""
    import numpy as np

    from sigmap_lib.inputs import segment_units

    rng = np.random.default_rng(5)
    vocab = ["river", "stone", "cloud", "garden", "lantern", "harbor", "signal"]
    lines, n = [], 0
    for i in range(3):
        text = " ".join(rng.choice(vocab, 60)) + "\n"
        n += len(segment_units(text))
        lines.append(json.dumps({"id": f"new:{i}", "text": text}))
    for p in sorted((world / "nll").glob("model_*.npy")):
        old = np.load(p)
        np.save(p, np.concatenate([old, rng.gamma(2.0, 1.0, n).astype(old.dtype)]))
    (world / "corpus" / "zz_new.jsonl").write_text("\n".join(lines) + "\n")  # last: the trigger


def _backfill(server: DevServer, assets: list[str]) -> tuple[str, list[dict]]:
    selection = [{"path": [a]} for a in assets]
    data = server.graphql(LAUNCH, {"p": {"assetSelection": selection, "allPartitions": True}})
    res = data["launchPartitionBackfill"]
    assert res["__typename"] == "LaunchBackfillSuccess", res
    bid = res["backfillId"]
    state: dict = {}

    def done() -> bool:
        state.update(server.graphql(STATUS, {"id": bid})["partitionBackfillOrError"])
        return state["status"] not in ("REQUESTED", "CANCELING", "FAILING")

    _wait(f"backfill {bid}", done, server)
    return state["status"], state["runs"]


def test_sensors_automation_and_backfills_under_a_real_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_property
) -> None:
    from sigmap_assets.resources import write_project_config

    world = small_synthetic_world(tmp_path / "world", n_benchmarks=3)
    _split_corpus(world, ("a.jsonl", "b.jsonl", "c.jsonl"))
    storage, home = tmp_path / "storage", tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    write_project_config(str(storage), world="folder", world_path=str(world))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("SIGMAP_TICK_SECONDS", str(TICK_S))  # every sensor, automation too
    timings: dict[str, float] = {}
    with (
        dev_server(
            home, storage, tmp_path / "dev", target=("-m", "sigmap_assets.definitions")
        ) as server,
        dg.DagsterInstance.get() as instance,
    ):

        def keys(name: str) -> list[str]:
            return list(instance.get_dynamic_partitions(name))

        # the world is built from its files by the sensors and automation alone
        def built() -> bool:
            bench = keys("benchmarks")
            return len(bench) == 3 and _signatures_with(storage, bench, 12)

        timings["bootstrap_s"] = _wait("signatures of the fresh world", built, server)
        assert len(keys("shards")) == 3 and len(keys("models")) == 12
        assert not _failed_runs(instance), _failed_runs(instance)
        shards, bench = keys("shards"), keys("benchmarks")
        cells = instance.get_materialized_partitions(dg.AssetKey("token_nll"))
        assert len(cells) == 36

        # (a) a new model: its three cells, then signatures with 13 models, no manual step
        t_model = time.time()
        _add_model(world, "synthetic/epsilon-new")

        def resigned() -> bool:  # the files, then the materializations the run records
            done = set(_materialized_after(instance, "signatures", t_model)) == set(bench)
            return done and _signatures_with(storage, bench, 13)

        timings["new_model_to_signatures_s"] = _wait(
            "signatures with the new model", resigned, server
        )
        scored = _materialized_after(instance, "token_nll", t_model)
        assert set(scored) == {f"synthetic__epsilon-new|{s}" for s in shards}, scored
        assert all(n == 1 for n in scored.values()), scored
        assert set(_materialized_after(instance, "signatures", t_model)) == set(bench)
        assert not _failed_runs(instance), _failed_runs(instance)

        # (b) a new corpus file: its shard and only its cells (one per model)
        t_file = time.time()
        _add_corpus_file(world)

        def new_shard_scored() -> bool:
            new = [s for s in keys("shards") if s not in shards]
            if len(new) != 1:
                return False
            ranked = new[0] in _materialized_after(instance, "nll_ranks", t_file)
            return ranked and set(_materialized_after(instance, "signatures", t_file)) == set(bench)

        timings["new_corpus_file_to_signatures_s"] = _wait(
            "the new shard's cells, ranks and the signatures again", new_shard_scored, server
        )
        [added] = [s for s in keys("shards") if s not in shards]
        assert added.startswith("zz_new.jsonl")
        scored = _materialized_after(instance, "token_nll", t_file)
        assert set(scored) == {f"{m}|{added}" for m in keys("models")}, scored
        assert set(_materialized_after(instance, "corpus_shard", t_file)) == {added}
        assert not _failed_runs(instance), _failed_runs(instance)

        # (c) "Materialize all" from the UI: one backfill of every asset, all partitions of
        # each partitioned one (GraphQL launchPartitionBackfill, as the UI sends it); the
        # backfill orders them by dependency while automation stays on
        graph = _definitions().resolve_asset_graph()  # the user's input files are observed,
        names = sorted(k.to_user_string() for k in graph.materializable_asset_keys)  # not built
        t_backfill, t_backfill_wall = time.monotonic(), time.time()
        status, runs = _backfill(server, names)
        timings["backfill_all_s"] = time.monotonic() - t_backfill
        assert status in ("COMPLETED", "COMPLETED_SUCCESS"), f"backfill {status}: {runs}"
        assert runs and all(r["status"] == "SUCCESS" for r in runs), runs
        for name in ("corpus_shard", "token_nll", "nll_ranks", "shard_screen", "signatures"):
            done = _materialized_after(instance, name, t_backfill_wall)
            assert set(done) == set(_partition_keys(instance, name)), name

        # (d) the backfill shape Dagster's daemon fails, as automation emits it: retried once
        timings["failed_automation_backfill_retried_s"] = _fail_and_retry(instance, server)
        _every_root_failure_retried(instance)
    for k, v in timings.items():
        record_property(k, round(v, 1))
    print("daemon timings:", json.dumps({k: round(v, 1) for k, v in timings.items()}))


def _fail_and_retry(instance: dg.DagsterInstance, server: DevServer) -> float:
    """Store an automation backfill of ``rank_coverage`` and every ``shard_screen`` partition
    (a key range); wait until the daemon has failed it and its retry has finished."""
    from dagster._core.execution.backfill import PartitionBackfill

    from sigmap_assets.backfills import FROM_AUTOMATION_TAG, ROOTS_ERROR

    target = as_automation_stores_it(
        instance, _definitions().resolve_asset_graph(), ["rank_coverage", "shard_screen"]
    )
    t0, since = time.monotonic(), time.time()
    instance.add_backfill(
        PartitionBackfill.from_asset_graph_subset(
            backfill_id="stalledchain",
            backfill_timestamp=since,
            tags={FROM_AUTOMATION_TAG: "true"},
            dynamic_partitions_store=instance,
            asset_graph_subset=target,
            title="as automation emits it",
            description=None,
            run_config=None,
        )
    )
    retry = None

    def retried() -> bool:
        nonlocal retry
        retry = _retry_of(instance, "stalledchain")
        return retry is not None and retry.status.value not in ("REQUESTED", "CANCELING", "FAILING")

    _wait("the retry of a failed automation backfill", retried, server)
    original = instance.get_backfill("stalledchain")
    assert original.status.value == "FAILED" and ROOTS_ERROR in original.error.message
    assert retry.status.value == "COMPLETED_SUCCESS", retry.status
    runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": retry.backfill_id}))
    assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert set(_materialized_after(instance, "shard_screen", since)) == set(
        _partition_keys(instance, "shard_screen")
    )
    assert None in _materialized_after(instance, "rank_coverage", since)
    return time.monotonic() - t0


def _retry_of(instance: dg.DagsterInstance, backfill_id: str):
    from sigmap_assets.backfills import RETRY_OF_TAG

    for b in instance.get_backfills(limit=500):
        if b.tags.get(RETRY_OF_TAG) == backfill_id:
            return b
    return None


def _every_root_failure_retried(instance: dg.DagsterInstance) -> None:
    """Every backfill the daemon failed on its root search has a retry that finished."""
    from sigmap_assets.backfills import ROOTS_ERROR

    for b in instance.get_backfills(limit=500):
        if b.error is not None and ROOTS_ERROR in b.error.message:
            retry = _retry_of(instance, b.backfill_id)
            assert retry is not None, f"backfill {b.backfill_id} failed and was not retried"
            assert retry.status.value == "COMPLETED_SUCCESS", (b.backfill_id, retry.status)


@functools.cache
def _definitions() -> dg.Definitions:
    from sigmap_assets.definitions import defs

    return defs()


def _partition_keys(instance: dg.DagsterInstance, asset: str) -> list[str]:
    [a] = [
        a
        for a in _definitions().assets or []
        if isinstance(a, dg.AssetsDefinition) and dg.AssetKey(asset) in a.keys
    ][:1]
    return list(a.partitions_def.get_partition_keys(dynamic_partitions_store=instance))
