"""The sigmap code location for a Kubernetes cluster: every step in its own pod.

``dagster api grpc -m sigmap_assets.deploy.scaleout`` (what ``helm-values.yaml`` runs) loads
the project's Definitions with two changes:

- the executor is ``dagster_k8s.k8s_job_executor`` (:func:`sigmap_k8s_executor`): each step
  becomes a Kubernetes Job. Only this executor honours *op-level* ``dagster-k8s/config``
  tags, so the GPU request on ``token_nll`` (``nvidia.com/gpu: 1`` + node selector, see
  ``sigmap_assets.defs.models.assets.GPU_OP_TAGS``) reaches a pod only here; the
  ``K8sRunLauncher`` alone applies job/run-level tags to the one run pod. The executor adds
  per-step config for ``token_nll``: the GPU node taint toleration
  (``$SIGMAP_GPU_TOLERATIONS``, JSON list) and extra node labels
  (``$SIGMAP_GPU_NODE_SELECTOR``, JSON object).
- the storage root comes from ``$SIGMAP_STORAGE`` (``s3://bucket/prefix``, ``gs://...``):
  step pods are ephemeral, so a local root would lose every array.

Requires the ``k8s`` extra (``dagster-k8s``) and, for ``s3://``/``gs://`` roots, ``s3fs`` /
``gcsfs`` in the image.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import dagster as dg

from sigmap_assets.resources import (
    DEFAULT_STORAGE_ENV,
    ComputeResource,
    SigmapStorage,
    WorldResource,
)

GPU_STEP = "token_nll"
GPU_NODE_SELECTOR_ENV = "SIGMAP_GPU_NODE_SELECTOR"
GPU_TOLERATIONS_ENV = "SIGMAP_GPU_TOLERATIONS"
WORLD_PATH_ENV = "SIGMAP_WORLD"
MAX_CONCURRENT_STEPS_ENV = "SIGMAP_K8S_MAX_CONCURRENT_STEPS"

# The taint GKE / EKS / AKS GPU node pools carry (and the NVIDIA GPU operator's default).
DEFAULT_GPU_TOLERATIONS: list[dict[str, str]] = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
]

# Environment the run worker passes on to every step pod (names only: values are read from
# the run worker's own environment, which the launcher / Helm chart sets).
PASSED_ENV = [
    DEFAULT_STORAGE_ENV,
    GPU_NODE_SELECTOR_ENV,
    GPU_TOLERATIONS_ENV,
    WORLD_PATH_ENV,
    "DAGSTER_PG_URL",
]


def _json_env(name: str, default: Any, kind: type) -> Any:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"${name} must be JSON ({kind.__name__}), got {raw!r}: {exc}") from exc
    if not isinstance(value, kind):
        raise ValueError(f"${name} must be a JSON {kind.__name__}, got {raw!r}")
    return value


def gpu_step_k8s_config(
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Per-step k8s config merged (deeply) over ``token_nll``'s own op tags."""
    if node_selector is None:
        node_selector = _json_env(GPU_NODE_SELECTOR_ENV, {}, dict)
    if tolerations is None:
        tolerations = _json_env(GPU_TOLERATIONS_ENV, DEFAULT_GPU_TOLERATIONS, list)
    pod_spec: dict[str, Any] = {"tolerations": [dict(t) for t in tolerations]}
    if node_selector:
        pod_spec["node_selector"] = {str(k): str(v) for k, v in node_selector.items()}
    return {"pod_spec_config": pod_spec}


def executor_config(
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[Mapping[str, Any]] | None = None,
    max_concurrent: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Config for ``k8s_job_executor``. Image, namespace, service account and secrets are
    inherited from the ``K8sRunLauncher`` of the instance (dagster.k8s.yaml / Helm)."""
    if max_concurrent is None:
        max_concurrent = int(os.environ.get(MAX_CONCURRENT_STEPS_ENV, "0") or 0)
    cfg: dict[str, Any] = {
        "env_vars": list(PASSED_ENV),
        "per_step_k8s_config": {GPU_STEP: gpu_step_k8s_config(node_selector, tolerations)},
        # CPU steps (screening, IRT, ...) get a sane default; token_nll's op tags add the GPU.
        "step_k8s_config": {
            "container_config": {"resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}
        },
    }
    if max_concurrent:
        cfg["max_concurrent"] = max_concurrent
    if extra:
        cfg.update(extra)
    return cfg


def sigmap_k8s_executor(**kwargs: Any) -> dg.ExecutorDefinition:
    """``k8s_job_executor`` configured for sigmap (see :func:`executor_config`)."""
    from dagster_k8s import k8s_job_executor

    return k8s_job_executor.configured(executor_config(**kwargs), name="sigmap_k8s_executor")


def scaleout_resources(storage_root: str | None = None) -> dict[str, Any]:
    """Resources with the data root on object storage: ``storage_root`` or ``$SIGMAP_STORAGE``
    (read in every process from its environment, so step pods need it too)."""
    if storage_root is None and not os.environ.get(DEFAULT_STORAGE_ENV):
        raise ValueError(
            f"scale-out needs a shared storage root: set ${DEFAULT_STORAGE_ENV} to an fsspec URL "
            "(s3://bucket/sigmap, gs://bucket/sigmap) or pass storage_root="
        )
    root: Any = storage_root if storage_root is not None else dg.EnvVar(DEFAULT_STORAGE_ENV)
    storage = SigmapStorage(root=root)
    world_path = os.environ.get(WORLD_PATH_ENV, "")
    world = (
        WorldResource(storage=storage, path=world_path)
        if world_path
        else WorldResource(storage=storage)
    )
    return {"storage": storage, "world": world, "compute": ComputeResource(device="cuda")}


def scaleout_definitions(
    storage_root: str | None = None,
    executor: dg.ExecutorDefinition | None = None,
    base: dg.Definitions | None = None,
) -> dg.Definitions:
    """The project's Definitions with the k8s executor and object-storage resources."""
    if base is None:
        from sigmap_assets.definitions import defs as project_defs

        base = project_defs()
    resources = {**dict(base.resources or {}), **scaleout_resources(storage_root)}
    return dg.Definitions(
        assets=base.assets,
        asset_checks=base.asset_checks,
        schedules=base.schedules,
        sensors=base.sensors,
        jobs=base.jobs,
        resources=resources,
        executor=executor if executor is not None else sigmap_k8s_executor(),
        loggers=base.loggers,
        metadata=base.metadata,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return scaleout_definitions()
