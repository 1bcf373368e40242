"""Declarative automation conditions shared by the graph.

`AutomationCondition.eager()` never fires an aggregate while any upstream partition is
missing or failed (one model that never loads would freeze every overlap forever). The
conditions here:

- refresh when an upstream asset's *data version* changed since the asset last ran (or
  will be requested on the same tick, so a whole chain goes out together). Roots that
  return a content fingerprint as data version (`benchmark_scores`, `benchmark_catalog`,
  `model_registry`, `nll_ranks`) therefore do not re-trigger the graph when a nightly
  re-read finds nothing new;
- never wait for a missing or failed upstream *partition*: an aggregate needs only one
  materialized upstream partition (of any dependency) and uses whatever is materialized;
- wait while anything up to four levels upstream is in progress (or, two or more levels
  up, requested on this tick), so a model still being scored, or a chain still running,
  does not make screening, the overlaps and the report run twice for one update;
- fire once per update (`since_last_handled`): a failed run is not retried in a loop.

The assets that read the user's files (`model_registry`, `benchmark_catalog`,
`benchmark_scores`, `corpus_manifest`) follow the observations the input observer records
(:func:`input_condition`): a changed file is re-read on the next tick, an unchanged one never.

Shards are content-addressed, so `corpus_shard` partitions are filled once, when they appear
(:func:`new_partition_condition`); `token_nll` cells are filled once when they appear or their
shard's units are (re)written (:func:`cell_condition`), never for a registry re-read and never
retried in a loop: GPU work is requested once per cell.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from sigmap_assets.fingerprints import SETTINGS

TICK_ENV = "SIGMAP_TICK_SECONDS"


def tick_seconds(default: int) -> int:
    """Minimum seconds between two ticks of a sigmap sensor (or of the automation sensor).

    ``default`` unless the environment variable ``SIGMAP_TICK_SECONDS`` is set when the code
    location loads, which sets every sigmap sensor's interval at once (a positive integer;
    e.g. 5 for a development daemon that should react within seconds). A bad value stops the
    load with one line naming the variable and the fix.
    """
    raw = os.environ.get(TICK_ENV, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{TICK_ENV}={raw!r}: expected a positive whole number of seconds")
    return int(raw)


#: What a sigmap sensor's evaluation returns.
SensorOutcome = dg.SensorResult | dg.SkipReason


def sigmap_sensor(*, seconds: int, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``dg.sensor`` as every sigmap sensor is declared: named after its function, described
    by its docstring (the UI shows it), running by default, ticking at most every
    :func:`tick_seconds` ``(seconds)``; ``kwargs`` (``target``, ``asset_selection``) go to
    ``dg.sensor`` as they are."""

    def declare(fn: Callable[..., Any]) -> Any:
        return dg.sensor(
            name=fn.__name__,
            minimum_interval_seconds=tick_seconds(seconds),
            default_status=dg.DefaultSensorStatus.RUNNING,
            description=inspect.getdoc(fn),
            **kwargs,
        )(fn)

    return declare


AC = dg.AutomationCondition

#: Tag carried by every asset whose refresh automation requests. Only these are waited for
#: as "about to refresh". Set with :func:`automated`, which attaches the condition and
#: the tag together, so the set of automated assets is derived from the assets themselves.
AUTOMATED_TAG = "sigmap/automated"
AUTOMATED = dg.AssetSelection.tag(AUTOMATED_TAG, "true")

#: How many levels upstream an in-progress (or just requested) run holds an asset back:
#: overlap_report → signature_overlap → signatures → screened_candidates → shard_screen →
#: rank_coverage → nll_ranks → token_nll.
UPSTREAM_DEPTH = 7


def _ignoring(cond, ignore: Sequence[str]):
    return cond.ignore(dg.AssetSelection.assets(*ignore)) if ignore else cond


#: The assets that read the user's files (:func:`input_condition`). A re-read often finds the
#: content it read before (same data version), so their being requested is not taken as a
#: change downstream: what follows them runs once their data version has changed.
INPUT_READERS = ("model_registry", "benchmark_catalog", "benchmark_scores", "corpus_manifest")


def _data_changed() -> dg.AutomationCondition:
    return (AC.data_version_changed() & ~AC.executed_with_root_target()).with_label(
        "data version changed"
    )


def _changed() -> dg.AutomationCondition:
    return _data_changed() | AC.will_be_requested()


def deps_changed(ignore: Sequence[str] = ()) -> dg.AutomationCondition:
    """A dependency's data version changed since the previous tick (not by a run that also
    updated this asset), or the dependency will be requested on this tick (a reader of the
    user's files only counts once its data version has changed)."""
    changed = _ignoring(AC.any_deps_match(_data_changed()), ignore) | _ignoring(
        AC.any_deps_match(AC.will_be_requested()), [*ignore, *INPUT_READERS]
    )
    return changed.with_label("any dep changed")


def dep_about_to_refresh() -> dg.AutomationCondition:
    """A dependency that is not requested with this asset has, itself, an upstream change on
    this tick (one or two levels up): it is about to be refreshed, so wait for it. (This is
    what `will_be_requested` cannot see across partitions definitions: `nll_ranks` about to be
    rebuilt for `screened_candidates`, `signature_overlap` for `overlap_report`.)"""
    pending = AC.any_deps_match(_changed() | AC.any_deps_match(_changed()))
    return (
        AC.any_deps_match(~AC.will_be_requested() & ~AC.newly_updated() & pending)
        .allow(AUTOMATED)
        .with_label("a dep is about to refresh")
    )


def upstream_busy(depth: int = UPSTREAM_DEPTH) -> dg.AutomationCondition:
    """A direct dependency is in progress, or something 2..``depth`` levels upstream is in
    progress or requested on this tick (a direct dependency requested on this tick is not
    "busy": the asset goes out in the same launch, after it)."""
    deeper: dg.AutomationCondition = AC.in_progress() | AC.will_be_requested()
    for _ in range(depth - 2):
        deeper = AC.in_progress() | AC.will_be_requested() | AC.any_deps_match(deeper)
    return AC.any_deps_match(AC.in_progress() | AC.any_deps_match(deeper)).with_label(
        f"upstream in progress or requested (≤{depth} levels)"
    )


def aggregate_condition(ignore: Sequence[str] = ()) -> dg.AutomationCondition:
    """Unpartitioned aggregates: refresh on upstream changes with whatever is materialized.

    ``ignore``: dependencies whose changes always reach this asset through another
    dependency too (`signature_overlap` reads `nll_ranks`, but a new rank matrix matters to it
    only once the signatures built on it exist): their updates neither trigger it nor count
    as something to use, so the asset runs once per update, after the longer path.
    """
    return (
        (AC.newly_missing() | deps_changed(ignore) | AC.code_version_changed())
        .since_last_handled()
        .with_label("missing or upstream changed since last handled")
        & _ignoring(
            AC.any_deps_match(~AC.missing() | AC.will_be_requested()), [*ignore, *SETTING_SOURCES]
        ).with_label("some upstream partition is materialized")
        & ~upstream_busy()
        & ~dep_about_to_refresh()
        & ~AC.in_progress()
    ).with_label("aggregate: refresh on upstream changes, never wait for missing partitions")


#: The user's input files: observable source assets whose observations (the input observer
#: records one per change) carry a data version of their content (`sigmap_assets.fingerprints`).
INPUT_SOURCES = dg.AssetSelection.assets(
    "registry_file", "catalog_file", "corpus_files", "score_sources", "lm_eval_logs"
)
#: The settings that change results, observed like the input files
#: (:data:`sigmap_assets.fingerprints.SETTINGS`): a change refreshes exactly their readers;
#: an observed setting is never taken as an upstream result to aggregate.
SETTING_SOURCES = tuple(SETTINGS)


def input_condition() -> dg.AutomationCondition:
    """Assets that read the user's input files (the registry, the catalog, the score sources,
    the corpus plan): read them once every input they read has been observed, and again when
    one of those inputs has a new observed data version or an upstream asset's data version
    changed; once per change, never while an upstream run is in progress."""
    return (
        (AC.newly_missing() | deps_changed() | AC.code_version_changed())
        .since_last_handled()
        .with_label("missing, or an input or upstream changed since last handled")
        & ~AC.any_deps_match(AC.missing())
        .allow(INPUT_SOURCES)
        .with_label("an input it reads is not observed yet")
        & ~upstream_busy()
        & ~AC.in_progress()
    ).with_label("input reader: read the inputs when they are observed or change")


def automated(condition: dg.AutomationCondition) -> dict[str, Any]:
    """``@dg.asset(..., **automated(cond))``: the automation condition and the tag that puts
    the asset in :data:`AUTOMATED`, always together."""
    return {"automation_condition": condition, "tags": {AUTOMATED_TAG: "true"}}


def partition_condition() -> dg.AutomationCondition:
    """Per-benchmark assets: fill new partitions and follow upstream changes (like
    `eager()`, but on data-version changes and waiting for in-progress upstream runs)."""
    return (
        (AC.newly_missing() | deps_changed() | AC.code_version_changed())
        .since_last_handled()
        .with_label("missing or upstream changed since last handled")
        & ~AC.any_deps_missing()
        & ~upstream_busy()
        & ~dep_about_to_refresh()
        & ~AC.in_progress()
    ).with_label("partition: fill new partitions, follow upstream changes")


def new_partition_condition() -> dg.AutomationCondition:
    """Fill a partition once, when it appears (content-addressed partitions never change)."""
    return (
        AC.newly_missing().since_last_handled().with_label("new partition")
        & ~AC.any_deps_missing()
        & ~AC.in_progress()
    ).with_label("fill new partitions once")


def cell_condition(ignore: Sequence[str] = ()) -> dg.AutomationCondition:
    """Fill a cell once when it appears (a new shard: every model; a new model: every shard)
    or its upstream partition is rewritten; ``ignore``d dependencies (the registry) neither
    trigger it nor hold it back."""
    return (
        (AC.newly_missing() | _ignoring(AC.any_deps_updated(), ignore))
        .since_last_handled()
        .with_label("new cell or its shard rewritten")
        & ~_ignoring(AC.any_deps_missing(), ignore)
        & ~AC.in_progress()
    ).with_label("cell: fill once when its shard is ready")
