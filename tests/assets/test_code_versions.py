"""Every asset carries the code version of the library step that computes it, so an upgrade
shows stale assets in the UI and `code_version_changed()` can fire."""

from __future__ import annotations

import pytest

from sigmap_assets import versions
from sigmap_assets.definitions import defs
from sigmap_lib import __version__


def code_versions() -> dict[str, str | None]:
    graph = defs().resolve_asset_graph()
    return {k.to_user_string(): graph.get(k).code_version for k in graph.get_all_asset_keys()}


def test_every_asset_has_the_code_version_of_its_step() -> None:
    got = code_versions()
    assert set(got) == set(versions.ASSET_STEPS)  # a new asset must name its step
    assert set(versions.ASSET_STEPS.values()) <= set(versions.STEP_VERSIONS)
    for asset, v in got.items():
        step = versions.ASSET_STEPS[asset]
        assert v == f"{__version__}+{step}.{versions.STEP_VERSIONS[step]}", asset


@pytest.mark.parametrize("step", sorted(versions.STEP_VERSIONS))
def test_bumping_a_step_changes_exactly_the_assets_it_computes(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = code_versions()
    monkeypatch.setitem(versions.STEP_VERSIONS, step, versions.STEP_VERSIONS[step] + 1)
    after = code_versions()
    changed = {a for a in before if before[a] != after[a]}
    assert changed == {a for a, s in versions.ASSET_STEPS.items() if s == step}
    assert changed  # every step computes at least one asset
