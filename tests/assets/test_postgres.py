"""The Postgres path, exercised: a DagsterInstance built from the shipped
``dagster.postgres.yaml`` against a real PostgreSQL server (``scripts/ci_postgres.sh``).

Dynamic ``models`` partitions are added by a sensor (its result applied the way the daemon
does), partitioned and pool-limited assets are materialized into the instance, and the runs,
materializations, partitions and pool limits are read back through a *new* connection and
straight from the Postgres tables. ``dagster definitions validate`` and
``dagster instance concurrency set`` run against the same DAGSTER_HOME.
"""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dagster as dg
import pytest
import yaml

from sigmap_assets.deploy import deploy_file
from sigmap_assets.partitions import models_partitions

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("SIGMAP_TEST_PG_URL")


def _with_db(url: str, db: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def _sqlalchemy_url(libpq_url: str) -> str:
    """DAGSTER_PG_URL for SQLAlchemy 2.1, whose bare ``postgresql://`` means psycopg 3:
    name the psycopg2 driver that dagster-postgres installs."""
    scheme, rest = libpq_url.split("://", 1)
    return f"postgresql+psycopg2://{rest}" if scheme in {"postgresql", "postgres"} else libpq_url


@pytest.fixture(scope="module")
def pg_url():
    """A fresh database per test module (dropped afterwards) on the CI server."""
    if not PG_URL:
        pytest.skip(
            "SIGMAP_TEST_PG_URL is unset: start a server with "
            '`eval "$(bash scripts/ci_postgres.sh)"` (CI does this)'
        )
    pytest.importorskip("dagster_postgres")
    import psycopg2

    db = f"sigmap_t_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(PG_URL)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{db}"')
    try:
        yield _with_db(PG_URL, db)
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="module")
def dagster_home(pg_url, tmp_path_factory):
    """DAGSTER_HOME whose dagster.yaml is the shipped Postgres config, verbatim."""
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(deploy_file("dagster.postgres.yaml"), home / "dagster.yaml")
    return home


@pytest.fixture
def pg_env(monkeypatch, pg_url, dagster_home):
    monkeypatch.setenv("DAGSTER_PG_URL", _sqlalchemy_url(pg_url))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    return pg_url


# --- a tiny graph on the project's own dynamic partitions ------------------------------

NEW_MODELS = ["EleutherAI__pythia-14m", "EleutherAI__pythia-31m"]


@dg.asset(partitions_def=models_partitions, pool="gpu")
def pg_model_scores(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    key = context.partition_key
    return dg.MaterializeResult(metadata={"model": key, "score": float(len(key))})


@dg.asset(deps=[pg_model_scores])
def pg_model_summary(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    keys = context.instance.get_dynamic_partitions(models_partitions.name)
    return dg.MaterializeResult(metadata={"n_models": len(keys)})


@dg.sensor(asset_selection=[pg_model_scores])
def pg_registry_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    known = set(context.instance.get_dynamic_partitions(models_partitions.name))
    new = [m for m in NEW_MODELS if m not in known]
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"nll:{k}") for k in new],
        dynamic_partitions_requests=[models_partitions.build_add_request(new)] if new else [],
        cursor=",".join(sorted(known | set(new))),
    )


def _apply_sensor(instance: dg.DagsterInstance) -> list[str]:
    """Evaluate the sensor and apply its partition requests as the sensor daemon does."""
    result = pg_registry_sensor(dg.build_sensor_context(instance=instance))
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return [r.partition_key for r in result.run_requests or []]


def test_shipped_config_builds_a_postgres_instance(pg_env, dagster_home):
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert instance.event_log_storage.supports_global_concurrency_limits
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1


def test_sensor_partitions_and_materializations_live_in_postgres(pg_env, dagster_home):
    import psycopg2

    from sigmap_assets.definitions import defs as project_defs

    project = project_defs()
    token_nll = project.resolve_assets_def("token_nll")
    models_dim = token_nll.partitions_def.get_partitions_def_for_dimension("model")
    assert models_dim == models_partitions

    # Exercise op-granularity slot claims in Postgres: same storage, pools checked per step.
    cfg = yaml.safe_load((dagster_home / "dagster.yaml").read_text())
    cfg["concurrency"]["pools"]["granularity"] = "op"
    op_home = dagster_home.parent / f"{dagster_home.name}_op"
    op_home.mkdir(exist_ok=True)
    (op_home / "dagster.yaml").write_text(yaml.safe_dump(cfg))

    with dg.DagsterInstance.from_config(str(op_home)) as instance:
        requested = _apply_sensor(instance)
        assert requested == NEW_MODELS
        assert _apply_sensor(instance) == []  # second tick: nothing new
        # the project's token_nll sees the partitions stored in Postgres
        assert models_dim.get_partition_keys(dynamic_partitions_store=instance) == NEW_MODELS
        run_ids = []
        for key in requested:
            res = dg.materialize([pg_model_scores], partition_key=key, instance=instance)
            assert res.success
            run_ids.append(res.run_id)
        res = dg.materialize(
            [pg_model_scores, pg_model_summary], selection=[pg_model_summary], instance=instance
        )
        assert res.success
        run_ids.append(res.run_id)
        gpu = instance.event_log_storage.get_concurrency_info("gpu")
        assert gpu.slot_count == 1 and gpu.claimed_slots == []  # initialised from default, freed

    # A new instance (new connections) reads everything back.
    with dg.DagsterInstance.from_config(str(dagster_home)) as fresh:
        assert fresh.get_dynamic_partitions("models") == NEW_MODELS
        for run_id in run_ids:
            run = fresh.get_run_by_id(run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        mats = fresh.fetch_materializations(dg.AssetKey("pg_model_scores"), limit=10).records
        assert sorted(m.partition_key for m in mats) == NEW_MODELS
        assert {m.asset_materialization.metadata["model"].value for m in mats} == set(NEW_MODELS)
        status = fresh.get_status_by_partition(
            dg.AssetKey("pg_model_scores"), NEW_MODELS, models_partitions
        )
        assert status is None or all(str(s).endswith("MATERIALIZED") for s in status.values())
        summary = fresh.get_latest_materialization_event(dg.AssetKey("pg_model_summary"))
        assert summary.asset_materialization.metadata["n_models"].value == 2

    # ...and the rows really are in Postgres, not in a local SQLite file.
    conn = psycopg2.connect(pg_env)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'models' ORDER BY partition"
            )
            assert [r[0] for r in cur.fetchall()] == NEW_MODELS
            cur.execute("SELECT count(*) FROM runs WHERE run_id = ANY(%s)", (run_ids,))
            assert cur.fetchone()[0] == len(run_ids)
            cur.execute(
                "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'"
            )
            assert cur.fetchone()[0] >= 3
    finally:
        conn.close()
    assert not list(dagster_home.rglob("*.db"))


def _dagster_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    exe = shutil.which("dagster", path=str(Path(sys.executable).parent)) or "dagster"
    return subprocess.run(
        [exe, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def test_cli_validate_and_pool_limit_against_postgres(pg_env, dagster_home):
    env = dict(os.environ)
    proc = _dagster_cli("definitions", "validate", "-w", "workspace.yaml", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _dagster_cli("instance", "concurrency", "set", "gpu", "3", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
        assert limits["gpu"] == 3
