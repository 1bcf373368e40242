"""Resources: every external thing the assets touch goes through one of these."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from sigmap_assets.config import SigmapResource
from sigmap_assets.layout import StorageLayout
from sigmap_assets.slurm import SlurmRequest, SlurmSettings, resolve_request
from sigmap_lib._util import atomic_write_text

DEFAULT_STORAGE_ENV = "SIGMAP_STORAGE"


def default_storage_root() -> str:
    """``$SIGMAP_STORAGE`` or ``./storage`` (absolute), the local data root."""
    env = os.environ.get(DEFAULT_STORAGE_ENV)
    if env:
        return env
    return str(Path.cwd() / "storage")


def read_project_config(root: str) -> dict[str, Any]:
    """The project settings persisted by ``sigmap`` under the storage root (may be empty)."""
    return StorageLayout(root).project_settings()


def write_project_config(root: str, **settings: Any) -> Path:
    """Merge ``settings`` into ``<root>/sigmap.yaml`` (atomic write)."""
    path = StorageLayout(root).project_config()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = read_project_config(root)
    data.update({k: v for k, v in settings.items() if v is not None})
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=True))
    return path


class SigmapStorage(SigmapResource):
    """The data root: ``storage/`` by default, or any fsspec URL (``s3://``, ``gs://``,
    ``memory://``) at scale. Every stored path is built here."""

    root: str = Field(default_factory=default_storage_root, description="Local path or fsspec URL.")

    @property
    def is_local(self) -> bool:
        return self.layout.is_local

    def path(self, *parts: str):
        """A path under the root: ``pathlib.Path`` when local, else ``upath.UPath``."""
        return self.layout.path(*parts)

    def local_dir(self, *parts: str) -> Path:
        """A local directory under the root (created). Raises for remote roots."""
        return self.layout.local_dir(*parts)

    @property
    def layout(self) -> StorageLayout:
        """Every stored path under this root (see :mod:`sigmap_assets.layout`)."""
        return StorageLayout(self.root)


class WorldResource(SigmapResource):
    """Where the inputs come from: the embedded zoo (default), the synthetic planted-truth
    world, or a user's world folder (see docs/FORMATS.md).

    ``kind`` is ``zoo``, ``synthetic`` or ``folder``; ``path`` is the folder for
    ``folder`` (and where zoo/synthetic worlds are built; default
    ``<storage>/worlds/<kind>``). Unset fields fall back to ``<storage>/sigmap.yaml``
    (written by ``sigmap demo --world ...``) and then to the zoo.
    """

    storage: SigmapStorage
    kind: str = ""
    """zoo, synthetic or folder; empty: the kind stored in <storage>/sigmap.yaml (default zoo)."""
    path: str = ""
    """The world folder; empty: world_path in <storage>/sigmap.yaml, else <storage>/worlds/<kind>."""
    quick: bool = False
    """Build the quick (smaller, faster) zoo."""
    seed: int = 0
    """Seed of the zoo or synthetic world."""

    @property
    def storage_root(self) -> str:
        return self.storage.root

    def resolved_kind(self) -> str:
        kind = self.kind or read_project_config(self.storage_root).get("world", "zoo")
        if kind not in {"zoo", "synthetic", "folder"}:
            raise ValueError(f"world kind must be zoo, synthetic or folder, got {kind!r}")
        return kind

    def resolved_quick(self) -> bool:
        return self.quick or bool(read_project_config(self.storage_root).get("world_quick", False))

    def root(self) -> Path:
        if self.path:
            return Path(self.path).expanduser().resolve()
        cfg_path = read_project_config(self.storage_root).get("world_path")
        kind = self.resolved_kind()
        if cfg_path:
            return Path(cfg_path).expanduser().resolve()
        if kind == "folder":
            raise ValueError(
                "world kind 'folder' needs a path (WorldResource.path or world_path in sigmap.yaml)"
            )
        return Path(self.storage.layout.world_dir(kind))

    def file(self, name: str) -> Path:
        return self.root() / name

    def score_sources(self) -> tuple[list, Path]:
        """The score source specs and the folder their relative paths are resolved against:
        the ``sources`` of ``scores.yaml`` in the world, else ``scores.csv`` as one wide
        source."""
        import yaml

        listed = self.file("scores.yaml")
        if listed.exists():
            return list(
                (yaml.safe_load(listed.read_text()) or {}).get("sources") or []
            ), listed.parent
        return [{"kind": "wide", "path": str(self.file("scores.csv"))}], self.root()

    def lm_eval_logs(self) -> Path:
        """Folder of lm-evaluation-harness output folders to score (``--output_path``):
        ``lm_eval_logs`` in ``<storage>/sigmap.yaml``, else ``<world>/lm_eval_logs``."""
        cfg = read_project_config(self.storage_root).get("lm_eval_logs")
        return Path(cfg).expanduser().resolve() if cfg else self.root() / "lm_eval_logs"

    def minimums(self):
        """The world's minimum counts per stage: ``settings.yaml`` group ``minimums``, then
        the ``minimums`` stored by ``sigmap demo --minimum KEY=N`` in ``<storage>/sigmap.yaml``."""
        from sigmap_lib.worlds import read_minimums

        project = read_project_config(self.storage.root).get("minimums") or {}
        return read_minimums(self.settings(), project)

    def strata(self) -> str:
        """The calibrated signature test's strata when the run config does not say: what
        `sigmap run --strata` stored in ``<storage>/sigmap.yaml``, else the world's
        ``settings.yaml`` → ``signatures: strata``, else ``"none"``."""
        from sigmap_lib.worlds import read_signature_settings

        project = str(read_project_config(self.storage.root).get("strata") or "")
        return project or read_signature_settings(self.settings().get("signatures") or {})

    def signature_mode(self) -> dict:
        """The signature method, its error mode and levels when the run config does not
        say: the world's ``settings.yaml`` → ``signatures:`` ``method`` / ``fdr`` /
        ``levels`` (:func:`~sigmap_lib.worlds.read_signature_mode`)."""
        from sigmap_lib.worlds import read_signature_mode

        return read_signature_mode(self.settings().get("signatures") or {})

    def units_have_text(self) -> bool:
        """Whether models can be scored on the corpus: the world's ``settings.yaml`` →
        ``corpus: units_have_text`` (false for a matrix world of opaque units)."""
        from sigmap_lib.worlds import read_corpus_settings

        return read_corpus_settings(self.settings().get("corpus") or {})

    def semantic_questions(self) -> int:
        """Questions per benchmark the semantic level embeds when its run config does not
        say (0: all): the world's ``settings.yaml`` → ``semantic: max_questions``; the
        report's signature–content alignment uses the same sample."""
        from sigmap_lib.worlds import read_semantic_settings

        return read_semantic_settings(self.settings().get("semantic") or {})

    def settings(self) -> dict[str, Any]:
        """The world's recommended asset settings (``settings.yaml``; may be absent)."""
        path = self.file("settings.yaml")
        if not path.exists():
            return {}
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of settings per asset group")
        return data


class ComputeResource(SigmapResource):
    """Where the forward passes run: device (``auto`` = cuda > mps > cpu), dtype, threads, and
    whether a ``token_nll`` cell runs in this process or as a Slurm job (``runner``,
    ``slurm``; see ``sigmap_assets/deploy/README.md`` § Slurm)."""

    device: str = "auto"
    """Where forward passes run: auto (cuda > mps > cpu), cpu, cuda, cuda:N or mps."""
    dtype: str = "auto"
    """Scoring dtype when the registry entry sets none: auto (float32 on CPU, bfloat16/float16 on accelerators), float32, bfloat16, float16."""
    threads: int = 0
    """CPU threads for torch (0: torch's default)."""
    batch_tokens: int = 16384
    """Tokens per forward batch: the memory knob of NLL scoring."""
    runner: str = ""
    """Where token_nll cells are scored: local (in the run's process) or slurm (one sbatch job per cell, requested as in slurm); empty: runner in <storage>/sigmap.yaml, else local."""
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    """What each cell's Slurm job requests (partition, account, GPUs, CPUs, memory, time limit); unset fields come from the slurm group of <storage>/sigmap.yaml."""

    def cell_runner(self, storage_root: str) -> str:
        """``local`` or ``slurm``: this resource's ``runner``, else ``runner`` in
        ``<storage_root>/sigmap.yaml``, else ``local``.

        Raises
        ------
        ValueError
            Any other value (one line naming it and where it came from).
        """
        source = "ComputeResource.runner"
        runner = self.runner
        if not runner:
            runner, source = (
                read_project_config(storage_root).get("runner") or "local",
                "sigmap.yaml",
            )
        if runner not in {"local", "slurm"}:
            raise ValueError(f"{source}: runner must be local or slurm, got {runner!r}")
        return runner

    def slurm_request(self, storage_root: str) -> SlurmRequest:
        """The resolved Slurm request of a cell: :attr:`slurm` over the ``slurm`` group of
        ``<storage_root>/sigmap.yaml`` over the defaults (:func:`sigmap_assets.slurm.resolve_request`)."""
        return resolve_request(self.slurm, read_project_config(storage_root))

    def scoring_dtype(self, spec: Any) -> str:
        """The dtype a model is scored in: its registry ``dtype`` when set, else this
        resource's (``auto``: float32 on CPU, bfloat16/float16 on accelerators)."""
        return spec.dtype if spec.dtype != "auto" else self.dtype
