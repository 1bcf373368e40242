"""The shipped scale-out configuration is valid for Dagster 1.13 / dagster-k8s 0.29.

Each YAML goes through Dagster's own instance-config validation; the run launcher config
through the ``K8sRunLauncher`` schema (and the class is instantiated); the k8s executor
config through ``k8s_job_executor``'s schema; the ``token_nll`` step's pod is built with
dagster-k8s' own job builder and must request a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.instance.config import dagster_instance_config

from sigmap_assets.deploy import CONFIG_FILES, DEPLOY_DIR, deploy_file

pytest.importorskip("dagster_k8s")

REPO = Path(__file__).resolve().parents[2]

FAKE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://127.0.0.1:1"}
  name: fake
contexts:
- context: {cluster: fake, user: fake}
  name: fake
current-context: fake
users:
- name: fake
  user: {token: fake}
"""


def _load(name: str) -> dict:
    with deploy_file(name).open() as fh:
        return yaml.safe_load(fh)


def _validated(tmp_path: Path, cfg: dict) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(cfg))
    value, custom_class = dagster_instance_config(str(home))
    assert custom_class is None
    return dict(value)


def test_shipped_files_exist_and_are_package_data():
    for name in CONFIG_FILES:
        assert deploy_file(name).stat().st_size > 0
    with pytest.raises(FileNotFoundError, match=r"no such deployment file"):
        deploy_file("dagster.yaml")
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"deploy/*"' in pyproject  # shipped in the wheel


@pytest.mark.parametrize("name", ["dagster.postgres.yaml", "dagster.k8s.yaml"])
def test_instance_yaml_passes_dagster_validation(tmp_path, name):
    value = _validated(tmp_path, _load(name))
    assert value["storage"]["postgres"]["postgres_url"] == {"env": "DAGSTER_PG_URL"}
    pools = value["concurrency"]["pools"]
    assert isinstance(pools["default_limit"], int) and pools["default_limit"] >= 1
    assert pools["granularity"] in {"run", "op"}
    assert value["run_coordinator"]["class"] == "QueuedRunCoordinator"


def test_instance_validation_rejects_a_broken_copy(tmp_path):
    """The check above can fail: Dagster's validation catches schema errors in our files."""
    cfg = _load("dagster.postgres.yaml")
    cfg["concurrency"]["pools"]["granularity"] = "step"
    with pytest.raises(dg.DagsterInvalidConfigError):
        _validated(tmp_path, cfg)
    cfg = _load("dagster.k8s.yaml")
    cfg["run_launcher"]["config"] = {"bogus": 1}
    _validated(tmp_path, cfg)  # launcher config is opaque to the instance schema...
    cfg["run_monitoring"]["start_timeout_seconds"] = "soon"
    with pytest.raises(dg.DagsterInvalidConfigError):
        _validated(tmp_path, cfg)


def test_k8s_run_launcher_config_matches_dagster_k8s_schema(tmp_path, monkeypatch):
    from dagster import Shape
    from dagster._config import process_config
    from dagster_k8s import K8sRunLauncher

    launcher = _load("dagster.k8s.yaml")["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    monkeypatch.setenv("DAGSTER_K8S_NAMESPACE", "sigmap")
    result = process_config(Shape(K8sRunLauncher.config_type()), launcher["config"])
    assert result.success, result.errors
    assert result.value["job_namespace"] == "sigmap"
    bad = dict(launcher["config"], job_nmespace="typo")
    assert not process_config(Shape(K8sRunLauncher.config_type()), bad).success

    # Instantiate the launcher through a real instance built from the shipped file, with
    # SQLite storage and a local kubeconfig instead of Postgres / in-cluster credentials.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(FAKE_KUBECONFIG)
    cfg = _load("dagster.k8s.yaml")
    cfg["storage"] = {"sqlite": {"base_dir": str(tmp_path / "sqlite")}}
    cfg["run_launcher"]["config"].update(
        load_incluster_config=False, kubeconfig_file=str(kubeconfig)
    )
    home = tmp_path / "k8s_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(cfg))
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        run_launcher = instance.run_launcher
        assert isinstance(run_launcher, K8sRunLauncher)
        assert run_launcher.job_namespace == "sigmap"
        assert "sigmap-env" in run_launcher.env_secrets
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 4
    finally:
        instance.dispose()


def test_pool_limit_in_dagster_yaml_reaches_the_gpu_pool():
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 3}}}) as inst:
        storage = inst.event_log_storage
        assert inst.get_concurrency_config().pool_config.default_pool_limit == 3
        assert storage.get_pool_limits() == []  # nothing set explicitly yet
        info = storage.get_concurrency_info("gpu")
        assert (info.limit, info.using_default_limit) == (3, True)
        # what `dagster instance concurrency set gpu 2` does
        storage.set_concurrency_slots("gpu", 2)
        limits = {p.name: (p.limit, p.from_default) for p in storage.get_pool_limits()}
        assert limits == {"gpu": (2, False)}
        assert storage.get_concurrency_info("gpu").slot_count == 2


def test_scaleout_definitions_use_k8s_executor_and_object_storage(monkeypatch):
    from sigmap_assets.deploy.scaleout import scaleout_definitions, scaleout_resources

    monkeypatch.delenv("SIGMAP_STORAGE", raising=False)
    with pytest.raises(ValueError, match="SIGMAP_STORAGE"):
        scaleout_resources()
    defs = scaleout_definitions(storage_root="memory://sigmap-deploy-test")
    assert defs.executor is not None and defs.executor.name == "sigmap_k8s_executor"
    resolved = defs.executor.config_schema.resolve_config({})
    assert resolved.success, resolved.errors
    assert resolved.value["config"]["per_step_k8s_config"]["token_nll"]["pod_spec_config"][
        "tolerations"
    ]
    assert defs.resources["storage"].root == "memory://sigmap-deploy-test"
    assert not defs.resources["storage"].is_local
    job = defs.resolve_implicit_global_asset_job_def()
    assert job.executor_def.name == "sigmap_k8s_executor"
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert "token_nll" in keys


def test_executor_config_errors_are_caught(monkeypatch):
    from sigmap_assets.deploy.scaleout import sigmap_k8s_executor

    bad = sigmap_k8s_executor(extra={"max_concurent": 2})
    assert not bad.config_schema.resolve_config({}).success
    monkeypatch.setenv("SIGMAP_GPU_TOLERATIONS", "{not json")
    with pytest.raises(ValueError, match="SIGMAP_GPU_TOLERATIONS"):
        sigmap_k8s_executor()


def _step_pod(defs: dg.Definitions, executor_cfg: dict, step_key: str):
    """The pod spec dagster-k8s builds for ``step_key``, merging config the way
    ``K8sStepHandler._get_container_context`` does (op tags, then per-step config)."""
    from dagster._core.execution.api import create_execution_plan
    from dagster_k8s import DagsterK8sJobConfig, construct_dagster_k8s_job
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import UserDefinedDagsterK8sConfig, get_user_defined_k8s_config

    job = defs.resolve_implicit_global_asset_job_def()
    plan = create_execution_plan(job)
    step = plan.get_step_by_key(step_key)
    context = K8sContainerContext(
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(
            executor_cfg.get("step_k8s_config", {})
        )
    )
    context = context.merge(
        K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(step.tags))
    )
    per_step = executor_cfg["per_step_k8s_config"].get(step.op_name, {})
    context = context.merge(
        K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(per_step))
    )
    job_config = DagsterK8sJobConfig(
        job_image="registry.example.com/sigmap:0.1.0",
        dagster_home="/opt/dagster/dagster_home",
        instance_config_map="dagster-instance",
    )
    k8s_job = construct_dagster_k8s_job(
        job_config=job_config,
        args=["dagster", "api", "execute_step"],
        job_name=f"dagster-step-{step_key.replace('_', '-')}",
        pod_name=f"dagster-step-{step_key.replace('_', '-')}",
        component="step_worker",
        user_defined_k8s_config=context.run_k8s_config,
    )
    return k8s_job.spec.template.spec


def test_token_nll_step_pod_requests_a_gpu_and_others_do_not(monkeypatch):
    from sigmap_assets.deploy.scaleout import executor_config, scaleout_definitions

    monkeypatch.setenv(
        "SIGMAP_GPU_NODE_SELECTOR", '{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}'
    )
    defs = scaleout_definitions(storage_root="memory://sigmap-deploy-test")
    cfg = executor_config()
    pod = _step_pod(defs, cfg, "token_nll")
    container = pod.containers[0]
    assert container.resources.limits["nvidia.com/gpu"] == "1"
    assert container.resources.requests["cpu"] == "1"  # executor default kept
    # op-tag node selector and the per-step one are both applied
    assert pod.node_selector["sigmap/accelerator"] == "gpu"
    assert pod.node_selector["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"
    assert any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in pod.tolerations)

    cpu_pod = _step_pod(defs, cfg, "model_registry")
    limits = cpu_pod.containers[0].resources.limits or {}
    assert "nvidia.com/gpu" not in limits
    assert not cpu_pod.tolerations
    assert not (cpu_pod.node_selector or {}).get("sigmap/accelerator")


def test_token_nll_definition_carries_pool_and_single_partition_runs():
    from sigmap_assets.deploy.scaleout import scaleout_definitions

    defs = scaleout_definitions(storage_root="memory://sigmap-deploy-test")
    token_nll = defs.resolve_assets_def("token_nll")
    assert token_nll.op.pool == "gpu"
    assert token_nll.backfill_policy == dg.BackfillPolicy.multi_run(1)
    dims = {d.name: d.partitions_def.name for d in token_nll.partitions_def.partitions_defs}
    assert dims == {"model": "models", "shard": "shards"}


def test_helm_values_parse_and_name_the_expected_keys():
    values = _load("helm-values.yaml")
    deployment = values["dagster-user-deployments"]["deployments"][0]
    assert values["dagster-user-deployments"]["enabled"] is True
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "sigmap_assets.deploy.scaleout"]
    assert {"repository", "tag", "pullPolicy"} <= set(deployment["image"])
    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert env["SIGMAP_STORAGE"].startswith(("s3://", "gs://"))
    assert "nvidia.com/gpu" in env["SIGMAP_GPU_TOLERATIONS"]
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["runLauncher"]["config"]["k8sRunLauncher"]["loadInclusterConfig"] is True
    assert values["postgresql"]["enabled"] is False
    assert values["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"
    assert values["concurrency"]["pools"]["defaultLimit"] >= 1
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    # The module the chart runs exists and exposes a Definitions loader.
    import importlib

    module = importlib.import_module(deployment["dagsterApiGrpcArgs"][1])
    assert callable(module.defs)


def test_scaleout_code_location_loads_with_the_dagster_cli(tmp_path):
    """``dagster definitions validate -m sigmap_assets.deploy.scaleout`` (what the gRPC
    server of the Helm deployment loads)."""
    dagster = shutil.which("dagster", path=str(Path(sys.executable).parent)) or "dagster"
    env = dict(os.environ, SIGMAP_STORAGE="memory://sigmap-cli-test", DAGSTER_HOME=str(tmp_path))
    proc = subprocess.run(
        [dagster, "definitions", "validate", "-m", "sigmap_assets.deploy.scaleout"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation successful" in proc.stdout + proc.stderr


def test_readme_documents_the_backfill_and_pool_commands():
    text = (DEPLOY_DIR / "README.md").read_text()
    for needle in (
        "dagster instance concurrency set gpu",
        "dagster job backfill",
        "launchPartitionBackfill",
        "allPartitions",
        "k8s_job_executor",
        "single_run",
        "SIGMAP_STORAGE",
    ):
        assert needle in text, needle


def test_readme_graphql_backfill_mutation_is_valid_for_this_dagster():
    """The documented CLI route for asset backfills is a GraphQL mutation: it must parse and
    validate against this Dagster's schema, with the variables the README passes."""
    import json
    import re

    from dagster_graphql.schema import create_schema
    from graphql import parse, validate

    text = (DEPLOY_DIR / "README.md").read_text()
    body = re.search(r"-d '(\{.*?\})'", text, re.S)
    assert body, "curl -d '{...}' example missing"
    payload = json.loads(body.group(1))
    schema = create_schema().graphql_schema
    assert validate(schema, parse(payload["query"])) == []
    params = schema.get_type("LaunchBackfillParams").fields
    assert set(payload["variables"]["p"]) <= set(params)
    assert payload["variables"]["p"]["assetSelection"] == [{"path": ["token_nll"]}]
