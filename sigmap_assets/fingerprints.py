"""Fingerprints of the user's inputs: what their observations record as data version and
what the sensors that watch them compare from tick to tick.

A small file (registry, catalog, score file) by the sha256 of its bytes; a folder (the
corpus, lm-eval output) by the names, sizes and modification times of its files (large, so
nothing is read); :data:`ABSENT` while the input does not exist; a setting that changes
results (:data:`SETTINGS`) by the value in effect.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from sigmap_assets.resources import WorldResource

#: The data version of an input that does not exist (yet).
ABSENT = "absent"

REGISTRY_FILE, CATALOG_FILE, CORPUS_FILES, SCORE_SOURCES, LM_EVAL_LOGS = (
    "registry_file",
    "catalog_file",
    "corpus_files",
    "score_sources",
    "lm_eval_logs",
)


@dataclass(frozen=True)
class InputVersion:
    """One input's fingerprint: ``version`` (16 hex digits, or :data:`ABSENT`), where it is,
    how it was taken, and how many files it covers."""

    version: str
    path: Path
    how: str
    files: int

    def metadata(self) -> dict[str, dg.MetadataValue]:
        return {
            "path": dg.MetadataValue.path(str(self.path)),
            "fingerprint": dg.MetadataValue.text(self.how),
            "files": dg.MetadataValue.int(self.files),
        }


def _sha(path: Path) -> str:
    """16 hex digits of the sha256 of a file's bytes."""
    from sigmap_lib.nll import file_sha256

    return file_sha256(path)[:16]


def file_version(path: Path) -> InputVersion:
    """A small file by content; :data:`ABSENT` while it does not exist."""
    if not path.is_file():
        return InputVersion(ABSENT, path, "file absent", 0)
    return InputVersion(_sha(path), path, "sha256 of the file", 1)


def folder_version(folder: Path, files: list[Path]) -> InputVersion:
    """A folder by its files' names, sizes and modification times (nothing is read)."""
    from sigmap_lib.inputs import files_stamp

    if not files:
        return InputVersion(ABSENT, folder, "no files", 0)
    return InputVersion(
        files_stamp(files, root=folder), folder, "names, sizes and mtimes of the files", len(files)
    )


def corpus_version(world: WorldResource) -> InputVersion:
    """The corpus folder's files (those ``corpus_manifest`` reads)."""
    from sigmap_lib.inputs import corpus_files

    folder = world.root() / "corpus"
    if not folder.is_dir():
        return InputVersion(ABSENT, folder, "folder absent", 0)
    try:
        files = corpus_files(folder)
    except ValueError:  # an empty or unreadable folder
        files = []
    return folder_version(folder, files)


def lm_eval_version(world: WorldResource) -> InputVersion:
    """The lm-eval output folder's result and samples files (what `scored_models` reads)."""
    folder = world.lm_eval_logs()
    files = sorted(folder.rglob("*.json*")) if folder.is_dir() else []
    return folder_version(folder, files)


def score_version(world: WorldResource) -> InputVersion:
    """``scores.yaml`` (when there is one) and every file or folder its sources name, resolved
    as ``benchmark_scores`` resolves them (:meth:`WorldResource.score_sources`); files by
    content, folders (lm-eval result folders) by their files' stamps; a spec without a path
    by its text (``benchmark_scores`` then says what is wrong with it)."""
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.inputs import files_stamp
    from sigmap_lib.inputs.scores import score_source_path

    listed = world.file("scores.yaml")
    if not listed.is_file():
        return file_version(world.file("scores.csv"))
    specs, base = world.score_sources()
    h = hashlib.sha256(_sha(listed).encode())
    n = 1
    for spec in specs:
        try:
            p = score_source_path(spec, base_dir=base)
        except SigmapInputError:
            h.update(f"bad spec {spec!r}".encode())
            continue
        if p.is_file():
            h.update(_sha(p).encode())
            n += 1
        elif p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file())
            h.update(files_stamp(files, root=p).encode())
            n += len(files)
        else:
            h.update(f"{p}: absent".encode())
    return InputVersion(h.hexdigest()[:16], listed, "scores.yaml and its sources", n)


def input_versions(world: WorldResource) -> dict[str, InputVersion]:
    """Every input's current fingerprint, by source asset name."""
    return {
        REGISTRY_FILE: file_version(world.file("models.yaml")),
        CATALOG_FILE: file_version(world.file("catalog.yaml")),
        CORPUS_FILES: corpus_version(world),
        SCORE_SOURCES: score_version(world),
        LM_EVAL_LOGS: lm_eval_version(world),
    }


#: The settings that change results, each an observed input of exactly the assets that read
#: it: name → (the assets that read it, what it is). Their data version is a fingerprint of
#: the value in effect (``settings.yaml`` of the world, then what ``sigmap run --strata`` /
#: ``--minimum`` stored in ``<storage>/sigmap.yaml``), so changing one marks exactly those
#: assets stale and automation refreshes them.
SETTINGS: dict[str, tuple[tuple[str, ...], str]] = {
    "score_minimum": (("benchmark_scores",), "Models a benchmark needs scores for."),
    "coverage_minimum": (("rank_coverage",), "Models the coverage needs on every shard."),
    "signature_minimum": (
        ("shard_screen", "screened_candidates"),
        "Models with scores a benchmark needs for a signature.",
    ),
    "signature_strata": (("signatures",), "The strata of the calibrated signature test."),
    "signature_mode": (
        ("signatures",),
        "The signature method, its error mode (fdr) and the levels it tests.",
    ),
    "semantic_settings": (
        ("semantic_overlap", "overlap_report"),
        "Benchmarks the semantic level needs; questions embedded per benchmark.",
    ),
    "metabench_settings": (
        ("irt_item_pool", "irt_fits", "metabench_selection", "metabench"),
        "The world's metabench recommendations and the respondents it needs.",
    ),
}


def _setting_values(world: WorldResource) -> dict[str, Any]:
    minimums = world.minimums()
    return {
        "score_minimum": minimums.score_models,
        "coverage_minimum": minimums.coverage_models,
        "signature_minimum": minimums.signature_models,
        "signature_strata": world.strata(),
        "signature_mode": world.signature_mode(),
        "semantic_settings": [minimums.semantic_benchmarks, world.semantic_questions()],
        "metabench_settings": [
            minimums.metabench_respondents,
            world.settings().get("metabench") or {},
        ],
    }


def setting_versions(world: WorldResource) -> dict[str, InputVersion]:
    """Every result-changing setting's fingerprint (:data:`SETTINGS`), by source asset name.
    A setting that cannot be read (a bad ``settings.yaml``) gets a version naming the error,
    so fixing it is a change too; the assets that read it fail with the reason."""
    from sigmap_lib.errors import SigmapInputError

    path = world.file("settings.yaml")
    try:
        values = _setting_values(world)
    except (SigmapInputError, ValueError, OSError) as exc:
        bad = hashlib.sha256(f"invalid: {exc}".encode()).hexdigest()[:16]
        return {name: InputVersion(bad, path, f"invalid: {exc}", 0) for name in SETTINGS}
    out = {}
    for name, value in values.items():
        text = json.dumps(value, sort_keys=True, default=str)
        out[name] = InputVersion(
            hashlib.sha256(text.encode()).hexdigest()[:16], path, f"value {text}", 1
        )
    return out
