"""A test harness: the project's Definitions on a temporary storage root, a test instance,
and a small world folder, materialized in-process like `sigmap demo` does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from sigmap_assets.definitions import defs as project_defs
from sigmap_assets.resources import ComputeResource, SigmapStorage, WorldResource

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


@dataclass
class Project:
    storage: SigmapStorage
    world: WorldResource
    instance: dg.DagsterInstance
    defs: dg.Definitions

    @property
    def assets(self) -> list:
        return [a for a in self.defs.assets or [] if isinstance(a, dg.AssetsDefinition)]

    @property
    def resources(self) -> dict:
        return {"storage": self.storage, "world": self.world, "compute": ComputeResource(threads=1)}

    def materialize(
        self,
        selection: Sequence[str],
        *,
        partition: str | None = None,
        prange: tuple[str, str] | None = None,
        raise_on_error: bool = True,
        run_config: dict | None = None,
    ) -> dg.ExecuteInProcessResult:
        tags = {}
        if prange:
            tags = {RANGE_START: prange[0], RANGE_END: prange[1]}
        checks = [c for c in self.defs.asset_checks or []]
        return dg.materialize(
            [*self.assets, *checks],
            selection=list(selection),
            instance=self.instance,
            resources=self.resources,
            partition_key=partition,
            tags=tags,
            run_config=(run_config or {}) | QUIET,
            raise_on_error=raise_on_error,
        )

    def sync(self) -> None:
        from sigmap_assets.demo import sync_partitions

        sync_partitions(self.instance, self.world)

    #: corpus_manifest's run config: the small world's 3,000 units in 3 shards
    corpus_config = {"ops": {"corpus_manifest": {"config": {"shard_units": 1000}}}}

    #: signatures' run config: the paper's mode, cheap (12 models are too few for the
    #: calibrated default to find planted units at d = 3,000; test_calibrated_* runs it)
    signatures_config = {
        "ops": {
            "signatures": {
                "config": {"method": "aic", "n_bootstrap": 5, "n_permutations": 3, "loo": False}
            }
        }
    }

    def keys(self, name: str) -> list[str]:
        return list(self.instance.get_dynamic_partitions(name))

    def cells(self, models: Sequence[str] | None = None) -> list[str]:
        """``token_nll`` partitions of these models (default all) on every shard."""
        from sigmap_assets.partitions import cell_key

        ms = self.keys("models") if models is None else models
        return [str(cell_key(m, s)) for m in ms for s in self.keys("shards")]

    def through(self, stage: str) -> None:
        """Materialize everything up to and including ``stage`` (world, corpus, registry,
        scores, nll, ranks, items, screening, signatures, overlap, report)."""
        order = [
            "world",
            "corpus",
            "registry",
            "scores",
            "nll",
            "ranks",
            "items",
            "screening",
            "signatures",
            "overlap",
            "report",
        ]
        todo = order[: order.index(stage) + 1]
        steps = {
            "world": lambda: self.materialize(["model_zoo"]),
            "corpus": lambda: (
                self.materialize(["corpus_manifest"], run_config=self.corpus_config),
                [self.materialize(["corpus_shard"], partition=k) for k in self.keys("shards")],
            ),
            "registry": lambda: (
                self.materialize(["model_registry", "benchmark_catalog"]),
                self.sync(),
            ),
            "scores": lambda: self.materialize(["benchmark_scores"]),
            "nll": lambda: [self.materialize(["token_nll"], partition=k) for k in self.cells()],
            "ranks": lambda: (
                [self.materialize(["nll_ranks"], partition=k) for k in self.keys("shards")],
                self.materialize(["rank_coverage"]),
            ),
            "items": lambda: self.materialize(["benchmark_items"], prange=self._brange()),
            "screening": lambda: (
                [self.materialize(["shard_screen"], partition=k) for k in self.keys("shards")],
                self.materialize(["screened_candidates"], prange=self._brange()),
            ),
            "signatures": lambda: self.materialize(
                ["signatures"], prange=self._brange(), run_config=self.signatures_config
            ),
            "overlap": lambda: self.materialize(
                ["performance_overlap", "semantic_overlap", "signature_overlap"],
                run_config={
                    "ops": {
                        "signature_overlap": {"config": {"n_permutations": 3, "n_bootstrap": 50}},
                        "semantic_overlap": {"config": {"T": 50}},
                    }
                },
            ),
            "report": lambda: self.materialize(
                ["overlap_report"],
                run_config={"ops": {"overlap_report": {"config": {"n_model_subsets": 1}}}},
            ),
        }
        for s in todo:
            steps[s]()

    def backfill_requests(self, asset: str, partitions: Sequence[str]) -> list[dg.RunRequest]:
        """The run requests of a backfill's first daemon iteration over these partitions of
        ``asset``: Dagster's own asset-backfill iteration (what the daemon runs for a backfill
        launched from the UI, `dagster asset backfill` or the automation sensor), so each
        asset's backfill policy is applied as Dagster applies it."""
        import logging
        import time

        from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView
        from dagster._core.execution.asset_backfill import (
            AssetBackfillData,
            execute_asset_backfill_iteration_inner,
        )

        now = time.time()
        data = AssetBackfillData.from_asset_partitions(
            asset_graph=self.defs.resolve_asset_graph(),
            partition_names=list(partitions),
            asset_selection=[dg.AssetKey(asset)],
            dynamic_partitions_store=self.instance,
            backfill_start_timestamp=now,
            all_partitions=False,
        )
        result = execute_asset_backfill_iteration_inner(
            backfill_id="test",
            asset_backfill_data=data,
            asset_graph_view=AssetGraphView.for_test(self.defs, self.instance),
            backfill_start_timestamp=now,
            logger=logging.getLogger("test"),
            run_config=None,
        )
        return list(result.run_requests)

    def backfill(
        self, asset: str, partitions: Sequence[str], run_config: dict | None = None
    ) -> list[dg.ExecuteInProcessResult]:
        """Execute, in-process, the runs a backfill of these partitions of ``asset`` launches
        (:meth:`backfill_requests`): each with its partition, or partition-range, tags."""
        results = []
        for r in self.backfill_requests(asset, partitions):
            start, end = r.tags.get(RANGE_START), r.tags.get(RANGE_END)
            results.append(
                self.materialize(
                    [asset],
                    partition=None if start else r.partition_key,
                    prange=(start, end) if start else None,
                    run_config=run_config,
                )
            )
        return results

    def _brange(self) -> tuple[str, str]:
        keys = self.keys("benchmarks")
        return keys[0], keys[-1]


def split_corpus(world: Path) -> None:
    """The synthetic world's one corpus file as two (same documents, same unit order): two
    shards."""
    src = world / "corpus" / "docs.jsonl"
    lines = src.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    src.write_text("".join(lines[:half]))
    (world / "corpus" / "docs2.jsonl").write_text("".join(lines[half:]))


#: The code location the lanes' processes load (the project's definitions).
CODE = "sigmap_assets.definitions:defs"


def demo_runner(project: Project, **kwargs: Any):
    """A quiet :class:`~sigmap_assets.demo.GraphRunner` on the project (``kwargs``: its
    ``cell_threads``, ``lanes``)."""
    from sigmap_assets.demo import GraphRunner

    return GraphRunner(
        project.defs,
        project.instance,
        log=lambda s: None,
        resources=project.resources,
        code=CODE,
        **kwargs,
    )


def make_project(tmp_path: Path, world_dir: Path, instance: dg.DagsterInstance) -> Project:
    storage = SigmapStorage(root=str(tmp_path / "storage"))
    world = WorldResource(storage=storage, kind="folder", path=str(world_dir))
    return Project(storage=storage, world=world, instance=instance, defs=project_defs())


#: The small planted world the asset tests run on (12 models, 3,000 units, 6 benchmarks).
SMALL_WORLD = {
    "n_models": 12, "n_units": 3000, "n_functions": 3, "n_benchmarks": 6,
    "planted_per_function": 3, "n_items": 30, "seed": 1,
}  # fmt: skip


def small_synthetic_world(root: Path, **overrides: Any) -> Path:
    """Write the asset tests' planted world (``SMALL_WORLD``, with ``overrides``) at ``root``."""
    from sigmap_lib.worlds import make_synthetic_world

    make_synthetic_world(root, **(SMALL_WORLD | overrides))
    return root


REPO = Path(__file__).resolve().parents[2]


def run_cli(tmp_path: Path, *args: str, timeout: int = 900):
    """``sigmap --storage <tmp>/storage ARGS`` in a subprocess with its own Dagster home
    (what a user types; progress lines off)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "SIGMAP_PROGRESS": "0"}
    (tmp_path / "home").mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "sigmap_assets.cli", "--storage", str(tmp_path / "storage")]
    return subprocess.run(
        [*cmd, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def as_automation_stores_it(instance: dg.DagsterInstance, graph, assets: Sequence[str]):
    """An asset-graph subset of ``assets`` with all their partitions, each dynamic subset
    stored as one key range: the compressed form declarative automation gives the backfills
    it emits (the form Dagster 1.13's backfill daemon can fail on, `sigmap_assets.backfills`)."""
    from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
    from dagster._core.definitions.partitions.context import partition_loading_context
    from dagster._core.definitions.partitions.snap import PartitionsSnap
    from dagster._core.definitions.partitions.subset.key_ranges import KeyRangesPartitionsSubset

    non, parts = set(), {}
    with partition_loading_context(dynamic_partitions_store=instance):
        for name in assets:
            key = dg.AssetKey(name)
            pdef = graph.get(key).partitions_def
            if pdef is None:
                non.add(key)
                continue
            keys = pdef.get_partition_keys()
            if not isinstance(pdef, dg.DynamicPartitionsDefinition):  # the models x shards grid
                parts[key] = pdef.empty_subset().with_partition_keys(keys)
                continue
            parts[key] = KeyRangesPartitionsSubset(
                key_ranges=[dg.PartitionKeyRange(keys[0], keys[-1])],
                partitions_snap=PartitionsSnap.from_def(pdef),
            )
    return AssetGraphSubset(non_partitioned_asset_keys=non, partitions_subsets_by_asset_key=parts)


def add_tiny_models(world: Path, tiny: Path) -> None:
    """Two scored models in ``world``'s registry, ``local/a`` and ``local/b``: copies of the
    tiny GPT-2 ``tiny``, b's weights shifted by 0.3 (so their NLL differ)."""
    import shutil

    import yaml
    from safetensors.numpy import load_file, save_file

    for name, shift in (("a", 0.0), ("b", 0.3)):
        shutil.copytree(tiny, world / "models" / name)
        w = world / "models" / name / "model.safetensors"
        save_file({k: v + shift for k, v in load_file(w).items()}, w)
    reg = yaml.safe_load((world / "models.yaml").read_text())
    reg["models"] += [{"id": f"local/{n}", "path": f"models/{n}"} for n in ("a", "b")]
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
