"""Where everything lives under the storage root: the one place that spells a stored path.

Assets, checks, sensors, the CLI, the demo runner and the tests ask this object for a path
(``storage.layout.signature_units("mmlu")``) instead of joining names themselves, so the
layout is documented, greppable and changed in one place::

    <root>/
      sigmap.yaml                         project settings written by ``sigmap demo --world``
      .dagster/                           the persistent Dagster instance (DAGSTER_HOME)
      worlds/<kind>/                      zoo / synthetic worlds built by ``model_zoo``
      corpus/manifest.parquet             corpus files, bytes, sha256
      corpus/plan.json                    the shard plan (ShardSpec per shard, plan order)
      corpus/shards/<shard>/              one shard's units and documents (ShardStore)
      tables/model_registry.parquet       the validated registry
      tables/benchmark_catalog.parquet    the validated catalog
      tables/benchmark_scores.{parquet,json}  long scores + validation report
      models/gguf/<sha256[:16]>/          GGUF files dequantized once (safetensors + tokenizer)
      nll/shards/<shard>/<model>/<fp>/    one zarr NLL array per model × shard cell (NLLStore),
                                          keyed by the model's fingerprint; .../CURRENT the latest
      models/fingerprints.json            sha256 of model files by (path, size, mtime)
      ranks/shards/<shard>/<identity>/    per-shard rank stores; .../CURRENT the latest
      ranks/CURRENT                       the coverage rank_coverage chose (models × shards)
      items/<benchmark>/{responses,questions}.parquet
      screening/shards/<shard>.json       one shard's screening partial (every benchmark)
      screening/<benchmark>/{candidates.parquet,summary.json}
      signatures/<benchmark>/{units.parquet,summary.json}
      overlap/<level>.{parquet,npz}       the three overlap matrices
      embeddings/                         sentence-embedding cache
      metabench/split.parquet, metabench/<benchmark>/<stage>/, metabench/fit/, metabench/export/
      metabench/lm_eval_tasks/, metabench/scored/<model>.json   lm-eval tasks out, scored models in
      plots/*.png, reports/*.{html,json}

Local roots give :class:`pathlib.Path`, fsspec URLs (``s3://``, ``memory://``) give
``upath.UPath``; :meth:`plot` and :meth:`report` need a local root (images are embedded in
the UI's markdown from local files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class StorageLayout:
    """Every stored path of sigmap under one storage root.

    Parameters
    ----------
    root : str
        A local folder (``storage/``, ``file://...``) or an fsspec URL (``s3://bucket/x``).
    """

    def __init__(self, root: str) -> None:
        self.root = str(root)

    @property
    def is_local(self) -> bool:
        return "://" not in self.root or self.root.startswith("file://")

    def path(self, *parts: str) -> Any:
        """A path under the root: ``pathlib.Path`` when local, else ``upath.UPath``."""
        if self.is_local:
            base = Path(self.root.removeprefix("file://")).expanduser().resolve()
            return base.joinpath(*parts)
        from upath import UPath

        return UPath(self.root).joinpath(*parts)

    def local_dir(self, *parts: str) -> Path:
        """A local directory under the root (created). Raises for remote roots."""
        if not self.is_local:
            raise ValueError(
                f"storage root {self.root!r} is not local; {'/'.join(parts)} needs a local path"
            )
        p = self.path(*parts)
        p.mkdir(parents=True, exist_ok=True)
        return p

    def _path(self, *parts: str) -> Any:
        return self.path(*parts)

    def _local_dir(self, *parts: str) -> Path:
        return self.local_dir(*parts)

    # project -----------------------------------------------------------------------
    def project_config(self) -> Any:
        return self._path("sigmap.yaml")

    def project_settings(self) -> dict[str, Any]:
        """The settings ``sigmap`` stored in :meth:`project_config` (empty when there are
        none, or for a remote root)."""
        import yaml

        if not self.is_local:
            return {}
        path = self.project_config()
        if not path.exists():
            return {}
        with path.open() as fh:
            data = yaml.safe_load(fh) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
        return data

    def dagster_home(self) -> Any:
        return self._path(".dagster")

    def stage_skipped(self, asset: str) -> Any:
        """Why an asset could not run on this world (present only while it is skipped)."""
        return self._path(".sigmap", "skipped", f"{asset}.json")

    def run_logs_dir(self) -> Path:
        """Full error reports (stack traces) of failed `sigmap demo/run` steps."""
        return self._local_dir(".sigmap", "logs")

    def world_dir(self, kind: str) -> Any:
        return self._path("worlds", kind)

    # corpus ------------------------------------------------------------------------
    def corpus_manifest(self) -> Any:
        return self._path("corpus", "manifest.parquet")

    def corpus_plan(self) -> Any:
        """The shard plan ``corpus_manifest`` wrote (specs in plan order, removed shards)."""
        return self._path("corpus", "plan.json")

    def shard_store(self, shard_key: str) -> Any:
        return self._path("corpus", "shards", shard_key)

    def shard_units(self, shard_key: str) -> Any:
        """The shard store's units table, one row per unit (written by
        ``sigmap_lib.inputs.write_shard_store``)."""
        return self.shard_store(shard_key) / "units.parquet"

    def legacy_paths(self) -> list[Any]:
        """Paths of the single-corpus layout before shards (a root that has them was
        written by an older sigmap: see ``docs/OPERATIONS.md``)."""
        old = [self._path("corpus", "store"), self._path("corpus", "source.json")]
        nll = self._path("nll")
        if nll.exists():
            old += [p for p in nll.iterdir() if p.is_dir() and p.name != "shards"]
        return [p for p in old if p.exists()]

    def refuse_legacy(self) -> None:
        """Raise :class:`~sigmap_lib.errors.SigmapInputError` when this root holds data of the
        single-corpus layout (:meth:`legacy_paths`): one line naming the paths and the fix.
        Nothing is deleted."""
        from sigmap_lib.errors import SigmapInputError

        old = self.legacy_paths()
        if old:
            raise SigmapInputError(
                f"storage root {self.root} holds data of the single-corpus layout of an older "
                f"sigmap ({', '.join(str(p) for p in old[:4])}); shard stores are never mixed "
                "with it. Point SIGMAP_STORAGE (or --storage) at a new folder and re-run, or move "
                "those paths away yourself (nothing was deleted; see docs/OPERATIONS.md, "
                "'Upgrading a storage root')"
            )

    # tables ------------------------------------------------------------------------
    def registry_table(self) -> Any:
        return self._path("tables", "model_registry.parquet")

    def catalog_table(self) -> Any:
        return self._path("tables", "benchmark_catalog.parquet")

    def scores_table(self) -> Any:
        return self._path("tables", "benchmark_scores.parquet")

    def scores_report(self) -> Any:
        return self._path("tables", "benchmark_scores.json")

    # models ------------------------------------------------------------------------
    def gguf_cache(self) -> Any:
        """Folder of converted GGUF models: ``models/gguf/<sha256[:16]>/`` per GGUF file
        (``sigmap_lib.nll.convert_gguf`` writes the sub-folders; local roots only)."""
        return self._path("models", "gguf")

    def nll_cell(self, shard_key: str, model_key: str, fingerprint: str) -> Any:
        """One model's NLL store on one shard (a ``token_nll`` cell) for one model
        fingerprint (its files' content and scoring settings)."""
        return self._path("nll", "shards", shard_key, model_key, fingerprint)

    def nll_cell_current(self, shard_key: str, model_key: str) -> Any:
        """JSON naming the fingerprint of the cell ``token_nll`` completed last."""
        return self._path("nll", "shards", shard_key, model_key, "CURRENT")

    def fingerprint_cache(self) -> Any:
        """sha256 of model files by (path, size, mtime): each file version is hashed once."""
        return self._path("models", "fingerprints.json")

    def shard_ranks(self, shard_key: str, identity: str) -> Any:
        return self._path("ranks", "shards", shard_key, identity)

    def shard_ranks_current(self, shard_key: str) -> Any:
        """JSON naming the rank store ``nll_ranks`` built last for this shard."""
        return self._path("ranks", "shards", shard_key, "CURRENT")

    def ranks_current(self) -> Any:
        """JSON of the coverage ``rank_coverage`` chose: models, shards, their rank stores."""
        return self._path("ranks", "CURRENT")

    # benchmarks --------------------------------------------------------------------
    def items_dir(self, bench_key: str) -> Any:
        return self._path("items", bench_key)

    def item_responses(self, bench_key: str) -> Any:
        return self._path("items", bench_key, "responses.parquet")

    def item_questions(self, bench_key: str) -> Any:
        return self._path("items", bench_key, "questions.parquet")

    def item_summary(self, bench_key: str) -> Any:
        """Counts of a benchmark's stored questions and responses."""
        return self._path("items", bench_key, "summary.json")

    # signatures --------------------------------------------------------------------
    def shard_screen(self, shard_key: str) -> Any:
        return self._path("screening", "shards", f"{shard_key}.json")

    def screening_dir(self, bench_key: str) -> Any:
        return self._path("screening", bench_key)

    def screening_candidates(self, bench_key: str) -> Any:
        return self._path("screening", bench_key, "candidates.parquet")

    def screening_summary(self, bench_key: str) -> Any:
        return self._path("screening", bench_key, "summary.json")

    def signature_dir(self, bench_key: str) -> Any:
        return self._path("signatures", bench_key)

    def signature_units(self, bench_key: str) -> Any:
        return self._path("signatures", bench_key, "units.parquet")

    def signature_summary(self, bench_key: str) -> Any:
        return self._path("signatures", bench_key, "summary.json")

    # overlap -----------------------------------------------------------------------
    def overlap_table(self, level: str) -> Any:
        return self._path("overlap", f"{level}.parquet")

    def overlap_arrays(self, level: str) -> Any:
        return self._path("overlap", f"{level}.npz")

    def overlap_outputs(self, level: str) -> list[Any]:
        """Everything one overlap level stores: its table, arrays and heatmap."""
        return [
            self.overlap_table(level),
            self.overlap_arrays(level),
            self.overlap_heatmap(level),
        ]

    def overlap_heatmap(self, level: str) -> Path:
        return self.plot(f"{level}_heatmap.png")

    def overlap_levels_plot(self) -> Path:
        """The three overlap levels side by side (the overlap report writes it into
        :meth:`plots_dir`)."""
        return self.plot("overlap_levels.png")

    def report_heatmap(self, level: str) -> Path:
        """One level's clustered heatmap in the overlap report (written into :meth:`plots_dir`)."""
        return self.plot(f"report_{level}_heatmap.png")

    def embeddings_dir(self) -> Any:
        return self._path("embeddings")

    # metabench ---------------------------------------------------------------------
    def metabench_split(self) -> Any:
        return self._path("metabench", "split.parquet")

    def metabench_stage(self, bench_key: str, stage: str) -> Any:
        return self._path("metabench", bench_key, stage)

    def metabench_selection_fit(self, bench_key: str) -> Any:
        """The fit file ``metabench_selection`` stores for one benchmark (written by
        ``sigmap_lib.metabench.save_benchmark_fit``): present once the benchmark is distilled."""
        return self.metabench_stage(bench_key, "selection") / "metabench.json"

    def metabench_skipped(self, bench_key: str) -> Any:
        return self._path("metabench", bench_key, "skipped.json")

    def metabench_fit(self) -> Any:
        return self._path("metabench", "fit")

    def metabench_export(self) -> Any:
        return self._path("metabench", "export")

    def metabench_tasks(self) -> Any:
        """lm-eval tasks of the fit's items (``lm_eval --include_path`` this folder)."""
        return self._path("metabench", "lm_eval_tasks")

    def scored_model(self, key: str) -> Any:
        """θ, scores and intervals of one model scored from its lm-eval logs."""
        return self._path("metabench", "scored", f"{key}.json")

    # plots and reports (local) -----------------------------------------------------
    def plots_dir(self) -> Path:
        return self._local_dir("plots")

    def plot(self, name: str) -> Path:
        return self.plots_dir() / name

    def reports_dir(self) -> Path:
        return self._local_dir("reports")

    def report(self, name: str) -> Path:
        return self.reports_dir() / name

    def overlap_report(self) -> Path:
        return self.report("overlap_report.html")

    def overlap_summary(self) -> Path:
        return self.report("overlap_summary.json")

    def metabench_report(self) -> Path:
        return self.report("metabench_report.html")

    def metabench_summary(self) -> Path:
        return self.report("metabench_summary.json")

    def screening_histogram(self, bench_key: str) -> Path:
        return self.plot(f"screening_{bench_key}.png")

    def signature_null_plot(self, bench_key: str) -> Path:
        return self.plot(f"signature_null_{bench_key}.png")

    def scored_plot(self, model_key: str) -> Path:
        return self.plot(f"scored_{model_key}.png")
