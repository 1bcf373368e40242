from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from tests.assets.harness import Project, make_project, small_synthetic_world


@pytest.fixture(scope="session")
def synthetic_world_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic world (12 models, 3000 units, 6 benchmarks), built once."""
    return small_synthetic_world(tmp_path_factory.mktemp("world") / "synthetic")


@pytest.fixture
def synthetic_world(tmp_path: Path, synthetic_world_template: Path) -> Path:
    """A private copy of the small synthetic world (tests may edit it)."""
    dst = tmp_path / "world"
    shutil.copytree(synthetic_world_template, dst)
    return dst


@pytest.fixture
def project(tmp_path: Path, synthetic_world: Path) -> Iterator[Project]:
    with dg.instance_for_test() as instance:
        yield make_project(tmp_path, synthetic_world, instance)
