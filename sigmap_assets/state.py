"""What is current under a storage root, read once and typed.

Assets, checks, the command line and the demo runner read the stored state through one
:class:`StoredState` built at the start of their invocation::

    state = StoredState.read(storage)
    state.plan                  # the shard plan corpus_manifest wrote (ShardSpec, plan order)
    state.current               # the coverage rank_coverage chose (CurrentRanks) or an error
    state.open_ranks()          # its rank codes, corpus units and NLL arrays
    state.score_matrix(keys)    # scores aligned with its model order
    state.signature_inputs(keys)  # the current signatures with what their overlap reads

Every path comes from :class:`~sigmap_assets.layout.StorageLayout`; nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_assets.layout import StorageLayout


@dataclass(frozen=True)
class UsedShard:
    """One shard the aggregates use: its key, the identity of its rank store, its units."""

    key: str
    ranks: str
    n_units: int

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "ranks": self.ranks, "n_units": self.n_units}


@dataclass(frozen=True)
class ShardRanks:
    """What ``nll_ranks`` built last on one shard (``ranks/<shard>/CURRENT``).

    Attributes
    ----------
    key : str
        The shard's partition key.
    n_units : int
        Its corpus units.
    models : tuple of str
        Model partition keys whose cell on the shard was complete, in rank-store order.
    ranks : str or None
        Identity of the rank store built over them; None below two complete cells.
    """

    key: str
    n_units: int
    models: tuple[str, ...] = ()
    ranks: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form (:meth:`from_dict` reads it back)."""
        return {"key": self.key, "n_units": self.n_units, "models": list(self.models),
                "ranks": self.ranks}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShardRanks:
        return cls(str(d["key"]), int(d["n_units"]), tuple(d.get("models") or ()), d.get("ranks"))

    def built_for(self, registered: Any) -> tuple[str, ...]:
        """The models the rank store covers that are still ``registered`` (none without one)."""
        return tuple(k for k in self.models if k in registered) if self.ranks else ()


@dataclass(frozen=True)
class CurrentRanks:
    """The coverage ``rank_coverage`` chose (``ranks/CURRENT``): the models complete on
    every used shard, those shards with their rank stores, and the coverage report.

    Attributes
    ----------
    identity : str
        Content identity of the choice (models, shards and their rank stores); stored
        results name it as ``ranks_dir`` so a stale one is recognised.
    models, raw_ids : tuple of str
        Model partition keys in rank-store order, and their registry ids.
    shards : tuple of UsedShard
        The used shards in plan order.
    coverage : sigmap_lib.nll.Coverage
        What :func:`sigmap_lib.nll.select_coverage` reported (units, missing cells, ...).
    """

    identity: str
    models: tuple[str, ...]
    raw_ids: tuple[str, ...]
    shards: tuple[UsedShard, ...]
    coverage: Any

    @property
    def n_units(self) -> int:
        return int(self.coverage.n_units)

    @property
    def raw_by_key(self) -> dict[str, str]:
        return dict(zip(self.models, self.raw_ids))

    def shard(self, key: str) -> UsedShard | None:
        return next((s for s in self.shards if s.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON form (:meth:`from_dict` reads it back)."""
        return {
            "dir": self.identity,
            "models": list(self.models),
            "raw_ids": list(self.raw_ids),
            "shards": [s.to_dict() for s in self.shards],
            "coverage": self.coverage.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CurrentRanks:
        from sigmap_lib.nll import Coverage

        return cls(
            identity=d["dir"],
            models=tuple(d["models"]),
            raw_ids=tuple(d["raw_ids"]),
            shards=tuple(UsedShard(s["key"], s["ranks"], int(s["n_units"])) for s in d["shards"]),
            coverage=Coverage(**d["coverage"]),
        )


@dataclass(frozen=True)
class NLLCell:
    """One ``token_nll`` cell (a model on a shard) as stored: where its values go for the
    model's current fingerprint, and the store there when it is complete.

    Attributes
    ----------
    fingerprint : str
        The model's files and scoring settings (imported NLL: the shard's slice of it).
    out : path
        The cell's NLL store for this fingerprint.
    done : NLLStore or None
        That store when every block is committed.
    unit_offset, total_units : int or None
        Global number of the shard's first unit and the plan's units (None when the
        shard is not in the plan).
    """

    fingerprint: str
    out: Any
    done: Any
    unit_offset: int | None
    total_units: int


@dataclass(frozen=True)
class OpenedRanks:
    """The current coverage opened for reading: rank codes, per-model NLL, corpus units."""

    ranks: Any
    nll_arrays: list
    corpus: Any


@dataclass(frozen=True)
class SignatureInputs:
    """The current signatures and what their overlap reads, in the ranks' model order.

    Attributes
    ----------
    current : CurrentRanks or None
        None while no model has NLL (no signature level).
    signatures : dict
        Benchmark key -> signature unit indices (current, screenable benchmarks only;
        an empty signature is kept: its pairs are NaN).
    orientation : dict
        Benchmark key -> ``(k,)`` direction of each signature unit (+1: better-scoring
        models are less perplexed on it; ``sigmap_lib.signatures.unit_orientation``).
    settings : SignatureSettings or None
        What the signatures were extracted with.
    no_signature : dict
        Benchmark -> why its signature is empty.
    options : dict
        ``extract_signatures``' precision options of the stored signatures.
    ranks, corpus : ShardedRanks, ShardedCorpus or None
    scores : ndarray or None
        ``(n_models, n_benchmarks)`` in ``signatures`` order.
    nll_arrays : list
        Per model, its NLL over the used shards.
    """

    current: CurrentRanks | None
    signatures: dict = field(default_factory=dict)
    orientation: dict = field(default_factory=dict)
    settings: Any = None
    no_signature: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    ranks: Any = None
    corpus: Any = None
    scores: np.ndarray | None = None
    nll_arrays: list = field(default_factory=list)

    @property
    def models(self) -> tuple[str, ...]:
        return self.current.models if self.current is not None else ()

    @property
    def signed(self) -> dict:
        """Benchmark key -> ``SignedUnits`` (units with their directions)."""
        from sigmap_lib.overlap import SignedUnits

        return {k: SignedUnits(u, self.orientation[k]) for k, u in self.signatures.items()}

    @property
    def bits(self) -> Any:
        """The current models' bits per byte at every unit (``sigmap_lib.overlap.UnitBits``):
        their NLL read by unit, the corpus's unit bytes and the ranks' moments."""
        from sigmap_lib.overlap import UnitBits

        return UnitBits.from_arrays(
            self.nll_arrays, self.corpus.unit_nbytes, self.ranks.bpb_mean, self.ranks.bpb_sd
        )


@dataclass(frozen=True)
class StoredState:
    """What is current under one storage root, read once per invocation.

    Attributes
    ----------
    layout : StorageLayout
        Every stored path under the root.
    plan : tuple of sigmap_lib.inputs.ShardSpec
        The shard plan ``corpus_manifest`` wrote, in plan order (empty before it ran).
    removed : tuple of str
        Shards the plan dropped.
    stored_ranks : CurrentRanks or None
        The coverage ``rank_coverage`` chose (None before it ran; :attr:`current` raises).
    project : dict
        The project settings ``sigmap`` stored under the root (``sigmap.yaml``).
    """

    layout: StorageLayout
    plan: tuple = ()
    removed: tuple[str, ...] = ()
    stored_ranks: CurrentRanks | None = None
    project: dict = field(default_factory=dict)

    @classmethod
    def read(cls, storage: Any) -> StoredState:
        """Read the state under ``storage`` (a ``SigmapStorage`` or its ``StorageLayout``)."""
        from sigmap_lib.inputs import ShardSpec

        layout = storage if isinstance(storage, StorageLayout) else storage.layout
        plan_path, ranks_path = layout.corpus_plan(), layout.ranks_current()
        plan = _read_json(plan_path) if plan_path.exists() else {}
        return cls(
            layout=layout,
            plan=tuple(ShardSpec.from_dict(d) for d in plan.get("shards", [])),
            removed=tuple(plan.get("removed", [])),
            stored_ranks=CurrentRanks.from_dict(_read_json(ranks_path))
            if ranks_path.exists()
            else None,
            project=layout.project_settings(),
        )

    # the shard plan ------------------------------------------------------------------
    @property
    def shard_keys(self) -> list[str]:
        return [s.key for s in self.plan]

    def shard_spec(self, key: str) -> Any:
        """The plan's spec of shard ``key`` (None when the plan has no such shard)."""
        return next((s for s in self.plan if s.key == key), None)

    def shard_offset(self, key: str) -> int:
        """Global number of the shard's first unit (units of the shards before it)."""
        from sigmap_lib.inputs import shard_offsets

        return shard_offsets(list(self.plan))[key]

    @property
    def total_units(self) -> int:
        return sum(s.n_units for s in self.plan)

    # the current ranks ---------------------------------------------------------------
    @property
    def current(self) -> CurrentRanks:
        """The chosen coverage; raises FileNotFoundError before ``rank_coverage`` ran."""
        if self.stored_ranks is None:
            raise FileNotFoundError(
                f"{self.layout.ranks_current()} is missing: materialize nll_ranks and "
                "rank_coverage first"
            )
        return self.stored_ranks

    def shard_ranks(self, key: str) -> ShardRanks:
        """What ``nll_ranks`` built last on shard ``key`` (nothing before it ran there)."""
        path = self.layout.shard_ranks_current(key)
        if not path.exists():
            spec = self.shard_spec(key)
            return ShardRanks(key, spec.n_units if spec is not None else 0)
        return ShardRanks.from_dict(_read_json(path))

    def open_ranks(self, current: CurrentRanks | None = None) -> Any:
        """The used shards' rank codes of the used models, as one ``ShardedRanks``."""
        from sigmap_lib.nll import RankStore, ShardedRanks

        cur = current or self.current
        stores = [RankStore.open(self.layout.shard_ranks(s.key, s.ranks)) for s in cur.shards]
        return ShardedRanks.from_stores(stores, list(cur.models))

    def open_current(self) -> OpenedRanks:
        """The current coverage's rank codes, per-model NLL and corpus, opened."""
        return OpenedRanks(self.open_ranks(), self.open_nll_arrays(), self.open_corpus())

    def open_shard_ranks(self, shard: UsedShard) -> Any:
        """One used shard's rank codes of the used models (global offset 0)."""
        from sigmap_lib.nll import RankStore, ShardedRanks

        store = RankStore.open(self.layout.shard_ranks(shard.key, shard.ranks))
        return ShardedRanks.from_stores([store], list(self.current.models))

    def open_corpus(self) -> Any:
        """The used shards' units as one corpus (global unit numbers of the aggregates)."""
        from sigmap_lib.inputs import ShardedCorpus, ShardStore

        return ShardedCorpus(
            [ShardStore.open(self.layout.shard_store(s.key)) for s in self.current.shards]
        )

    def cell_dir(self, shard_key: str, model_key: str) -> Any:
        """The store of the ``token_nll`` cell completed last (None if there is none)."""
        path = self.layout.nll_cell_current(shard_key, model_key)
        if not path.exists():
            return None
        return self.layout.nll_cell(shard_key, model_key, _read_json(path)["fingerprint"])

    def complete_cell(self, shard_key: str, model_key: str, fingerprint: str | None = None) -> Any:
        """The NLL store of a complete cell (every block committed), else None: the latest
        one, or the one of ``fingerprint``."""
        from sigmap_lib.nll import NLLStore

        d = (
            self.cell_dir(shard_key, model_key)
            if fingerprint is None
            else self.layout.nll_cell(shard_key, model_key, fingerprint)
        )
        if d is None or not d.exists():
            return None
        try:
            st = NLLStore.open(d)
        except Exception:
            return None
        return st if st.is_complete() else None

    def cell_fingerprint(self, spec: Any, shard_key: str, dtype: str) -> str:
        """The key of a cell's values besides the shard: the model's files and scoring
        ``dtype`` (``sigmap_lib.nll.model_fingerprint``), or, for imported NLL, the shard's
        slice of it (``sigmap_lib.nll.imported_fingerprint``)."""
        from sigmap_lib.nll import imported_fingerprint, model_fingerprint

        layout, planned = self.layout, self.shard_spec(shard_key)
        if spec.nll_source:
            offset = self.shard_offset(shard_key) if planned is not None else None
            n_units = planned.n_units if planned is not None else 0
            return imported_fingerprint(spec.id, spec.nll_source, offset, n_units)
        return model_fingerprint(
            spec,
            settings={"dtype": dtype},
            cache_path=layout.fingerprint_cache() if layout.is_local else None,
        )

    def token_cell(self, spec: Any, shard_key: str, dtype: str) -> NLLCell:
        """The cell of model ``spec`` on shard ``shard_key`` scored in ``dtype``."""
        fingerprint = self.cell_fingerprint(spec, shard_key, dtype)
        planned = self.shard_spec(shard_key) is not None
        return NLLCell(
            fingerprint=fingerprint,
            out=self.layout.nll_cell(shard_key, spec.key, fingerprint),
            done=self.complete_cell(shard_key, spec.key, fingerprint),
            unit_offset=self.shard_offset(shard_key) if planned else None,
            total_units=self.total_units,
        )

    def open_nll_arrays(self, model_keys: list[str] | None = None) -> list:
        """Per model (default: the used ones), its NLL over the used shards (one lazily
        concatenated array each)."""
        from sigmap_lib.nll import ConcatArray, NLLStore

        cur = self.current
        return [
            ConcatArray([NLLStore.open(self.cell_dir(s.key, k)).array for s in cur.shards])
            for k in (cur.models if model_keys is None else model_keys)
        ]

    # tables ------------------------------------------------------------------------
    @cached_property
    def scores(self) -> Any:
        """The validated long score table (model, model_key, benchmark, benchmark_key, score)."""
        import polars as pl

        path = self.layout.scores_table()
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: materialize benchmark_scores first")
        return pl.read_parquet(path)

    @property
    def has_scores(self) -> bool:
        return self.layout.scores_table().exists()

    @cached_property
    def catalog(self) -> Any:
        """The validated benchmark catalog table."""
        import polars as pl

        return pl.read_parquet(self.layout.catalog_table())

    @property
    def benchmark_keys(self) -> list[str]:
        return self.catalog["key"].to_list()

    def score_matrix(self, bench_keys: list[str], model_keys: list[str] | None = None) -> Any:
        """Scores ``(n_models, n_benchmarks)`` aligned with the current models (or
        ``model_keys``); NaN = missing."""
        import polars as pl

        from sigmap_lib.inputs.scores import to_wide

        models = list(self.current.models if model_keys is None else model_keys)
        long = self.scores.filter(pl.col("model_key").is_not_null()).select(
            pl.col("model_key").alias("model"), pl.col("benchmark_key").alias("benchmark"), "score"
        )
        return to_wide(long, models=models, benchmarks=bench_keys)[2]

    def model_strata(self, column: str = "") -> tuple[str | None, np.ndarray | None]:
        """``(column, labels)``: the registry column the calibrated test stratifies the
        current models by and one label per model; ``column`` "" takes the stored project
        setting, "none" (or no setting) gives ``(None, None)``."""
        import polars as pl

        from sigmap_lib.errors import SigmapInputError

        column = column or str(self.project.get("strata") or "")
        if column in ("", "none"):
            return None, None
        if column != "family":
            raise SigmapInputError(
                f"strata: unknown model column {column!r} (use 'family' or 'none')"
            )
        table = pl.read_parquet(self.layout.registry_table())
        family = dict(zip(table["key"].to_list(), table["family"].to_list()))
        models = self.current.models
        missing = [k for k in models if not family.get(k)]
        if missing:
            raise SigmapInputError(
                f"strata 'family': models.yaml gives no family for {', '.join(missing[:5])}"
                f"{' …' if len(missing) > 5 else ''}: add `family:` to those entries, or run "
                "without strata (`sigmap run --strata none`)"
            )
        return column, np.array([str(family[k]) for k in models])

    # stored stage results --------------------------------------------------------------
    def read_if_exists(self, path: Any) -> Any:
        return _read_json(path) if path.exists() else None

    def stored_screen(self, key: str) -> dict | None:
        return self.read_if_exists(self.layout.screening_summary(key))

    def stored_signature(self, key: str) -> dict | None:
        return self.read_if_exists(self.layout.signature_summary(key))

    def stored_signature_rows(self, key: str) -> list[dict]:
        """The stored signature rows of benchmark ``key`` (unit, text, context, ...)."""
        import polars as pl

        return pl.read_parquet(self.layout.signature_units(key)).to_dicts()

    def question_texts(self, keys: list[str]) -> dict[str, list[str]]:
        """Benchmark -> its question texts, for the benchmarks that have any."""
        import polars as pl

        out = {}
        for k in keys:
            p = self.layout.item_questions(k)
            if p.exists() and (texts := pl.read_parquet(p)["text"].to_list()):
                out[k] = texts
        return out

    def signature_inputs(self, keys: list[str], level: str = "") -> SignatureInputs:
        """The current signatures of ``keys`` with the ranks, corpus, scores and NLL arrays
        their overlap reads. Signatures built on other ranks and unscreenable ones are left
        out; with ``level``, each signature keeps the units its claims of that level hold
        (``"unit"``, or a level of a multi-resolution signature's hierarchy)."""
        import polars as pl

        from sigmap_lib.signatures import SignatureSettings, unit_orientation

        cur = self.stored_ranks
        if cur is None:  # no model has NLL yet: no signature level
            return SignatureInputs(None)
        sigs, orientation, settings, no_sig, options = {}, {}, None, {}, {}
        for k in keys:
            summary = self.stored_signature(k)
            if summary is None or summary.get("ranks_dir") != cur.identity:
                continue  # not extracted, or built on another model set
            if "skipped" in summary:
                continue  # not screenable
            table = pl.read_parquet(self.layout.signature_units(k))
            whole = table.height
            if level:
                table = table.filter(pl.col("level") == level)
            units = table["unit"].to_numpy()
            sigs[k] = units
            orientation[k] = unit_orientation(
                table["statistic"].to_numpy(), table["coef"].to_numpy()
            )
            if units.size == 0 and whole:
                no_sig[k] = f"no claim at the {level} level ({whole} units held at other levels)"
            elif units.size == 0:
                cal = summary.get("calibration") or {}
                no_sig[k] = cal.get("reason") or f"empty signature ({summary['method']})"
            settings = settings or SignatureSettings.from_dict(summary["settings"])
            if settings.method_class.calibrated and summary.get("calibration"):
                options = {
                    "n_permutations": summary["calibration"]["n_permutations"],
                    "fwer": summary.get("fwer") or "benchmark",
                }
                if summary.get("strata_labels") is not None:
                    options["strata"] = np.asarray(summary["strata_labels"])
        corpus = self.open_corpus()
        if settings is not None and settings.hierarchy:
            options["levels"] = corpus.unit_groups(settings.hierarchy.split(","))
        return SignatureInputs(
            current=cur,
            signatures=sigs,
            orientation=orientation,
            settings=settings,
            no_signature=no_sig,
            options=options,
            scores=self.score_matrix(list(sigs)),
            ranks=self.open_ranks(cur),
            nll_arrays=self.open_nll_arrays(),
            corpus=corpus,
        )

    def load_matrix(self, level: str) -> Any:
        """The stored overlap matrix of ``level`` (None when it is not stored)."""
        from sigmap_lib.overlap import load_overlap_matrix

        table = self.layout.overlap_table(level)
        if not table.exists():
            return None
        return load_overlap_matrix(table, self.layout.overlap_arrays(level), level=level)


def _read_json(path: Any) -> Any:
    return json.loads((Path(path) if isinstance(path, str) else path).read_text())
