"""The user's inputs as observable source assets: the registry (`models.yaml`), the catalog
(`catalog.yaml`), the corpus folder, the score sources and the lm-eval logs folder.

Each is observed with a data version that is a fingerprint of what the readers read: the
sha256 of a file's bytes for the small files (registry, catalog, score files), the names,
sizes and modification times of the files of a folder (corpus, lm-eval logs: large, and
stamped without reading them, as the sensors that watch them do), and ``absent`` while the
input does not exist. The assets that read an input depend on it, so lineage in the UI starts
at the user's files and an input changed since an asset last ran shows that asset as stale.

Observations come from two places: "Observe sources" in the UI (or any run of `user_inputs`),
and the `input_observer` sensor, which records an observation whenever an input's
fingerprint differs from the one last observed (no run is launched). Only the assets the
sensors and the schedule refresh depend on these inputs; no automated asset does, so an
observation never starts a run by itself.
"""

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
    """``scores.yaml`` and every file or folder its sources name (resolved as
    ``benchmark_scores`` resolves them), else ``scores.csv``; files by content, folders
    (lm-eval result folders) by their files' stamps."""
    import yaml

    from sigmap_lib.inputs import files_stamp

    sources = world.file("scores.yaml")
    if not sources.is_file():
        return file_version(world.file("scores.csv"))
    specs = (yaml.safe_load(sources.read_text()) or {}).get("sources") or []
    h = hashlib.sha256(_sha(sources).encode())
    n = 1
    for spec in specs:
        p = Path(str(spec.get("path", ""))).expanduser() if isinstance(spec, dict) else Path()
        p = p if p.is_absolute() else sources.parent / p
        if p.is_file():
            h.update(_sha(p).encode())
            n += 1
        elif p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file())
            h.update(files_stamp(files, root=p).encode())
            n += len(files)
        else:
            h.update(f"{p}: absent".encode())
    return InputVersion(h.hexdigest()[:16], sources, "scores.yaml and its sources", n)


def input_versions(world: WorldResource) -> dict[str, InputVersion]:
    """Every input's current fingerprint, by source asset name."""
    return {
        REGISTRY_FILE: file_version(world.file("models.yaml")),
        CATALOG_FILE: file_version(world.file("catalog.yaml")),
        CORPUS_FILES: corpus_version(world),
        SCORE_SOURCES: score_version(world),
        LM_EVAL_LOGS: lm_eval_version(world),
    }


def _spec(name: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(name, group_name="inputs", description=description)


def input_specs() -> list[dg.AssetSpec]:
    """The source asset of each input (built by a function: the defs loader collects the
    module's asset specs, and these belong to `user_inputs` only)."""
    return [
        _spec(REGISTRY_FILE, "The model registry, `models.yaml` in the world folder."),
        _spec(CATALOG_FILE, "The benchmark catalog, `catalog.yaml` in the world folder."),
        _spec(CORPUS_FILES, "The corpus folder's files (`corpus/` in the world folder)."),
        _spec(
            SCORE_SOURCES,
            "The score sources: `scores.yaml` and the files it names, else `scores.csv`.",
        ),
        _spec(
            LM_EVAL_LOGS,
            "lm-evaluation-harness output folders to score (`lm_eval_logs` in sigmap.yaml, "
            "else `lm_eval_logs/` in the world folder).",
        ),
    ]


@dg.multi_observable_source_asset(
    specs=input_specs(),
    name="user_inputs",
    can_subset=True,
    description="Observes the user's input files: a data version per input from its content.",
)
def user_inputs(context: dg.AssetExecutionContext, world: WorldResource) -> Iterator:
    versions = input_versions(world)
    for key in sorted(context.selected_asset_keys, key=lambda k: k.to_user_string()):
        v = versions[key.to_user_string()]
        yield dg.ObserveResult(
            asset_key=key, data_version=dg.DataVersion(v.version), metadata=v.metadata()
        )
