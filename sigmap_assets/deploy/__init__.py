"""Deployment configuration shipped with the package (see README.md in this folder).

- ``dagster.postgres.yaml`` — instance with Postgres storage and the ``gpu`` pool limit.
- ``dagster.k8s.yaml`` — the same plus the Kubernetes run launcher (no Helm).
- ``helm-values.yaml`` — values for the official Dagster Helm chart.
- :mod:`sigmap_assets.deploy.scaleout` — the code location with ``k8s_job_executor`` and an
  object-storage root (imports ``dagster_k8s``; not imported here).
"""

from __future__ import annotations

from pathlib import Path

DEPLOY_DIR = Path(__file__).resolve().parent
CONFIG_FILES = ("dagster.postgres.yaml", "dagster.k8s.yaml", "helm-values.yaml")


def deploy_file(name: str) -> Path:
    """Path of a shipped deployment file (raises ``FileNotFoundError`` for unknown names)."""
    path = DEPLOY_DIR / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no such deployment file (have: {', '.join(CONFIG_FILES)})"
        )
    return path
