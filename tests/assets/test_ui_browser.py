"""The Dagster UI checked in a real browser.

A small synthetic world is materialized (world → … → overlaps) into a persistent Dagster
instance in a temporary ``DAGSTER_HOME``; ``dg dev -w workspace.yaml`` is started on
127.0.0.1 with that home and storage root, in its own process group (`dg dev`); Debian's Chromium,
driven by Playwright (no browser download), opens the global asset lineage and two
materialized asset pages and the models × shards partitions of token_nll, and checks what a user sees there: every asset of the code
location on the graph, the materialization metadata of ``signature_overlap`` read from
this instance, its heatmap (a PNG data URI in markdown metadata) rendered as an image
byte-identical to the stored plot, the screening histograms and the summary table.

Screenshots go to ``storage/screenshots/`` (git-ignored); docs/UI.md describes them.
Chromium is installed with apt when ``/usr/bin/chromium`` is missing (CI runs as root).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from tests.assets.dev_server import dev_server, instance_yaml
from tests.assets.harness import make_project, small_synthetic_world

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "storage" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 1200}
UI_TIMEOUT_MS = 120_000  # first page loads compile the GraphQL schema; allow for a busy machine

GROUPS = ("inputs", "world", "corpus", "models", "benchmarks", "signatures", "overlap", "metabench")
# Named in the mission; all must be on the lineage graph (the graph shows every asset).
EXPECTED_ASSETS = (
    "model_zoo",
    "corpus_manifest",
    "corpus_shard",
    "model_registry",
    "benchmark_catalog",
    "benchmark_scores",
    "token_nll",
    "nll_ranks",
    "rank_coverage",
    "shard_screen",
    "benchmark_items",
    "screened_candidates",
    "signatures",
    "performance_overlap",
    "semantic_overlap",
    "signature_overlap",
    "overlap_report",
    "metabench",
)
# Materialized by Project.through("overlap"); overlap_report and metabench are not.
MATERIALIZED = ("token_nll", "nll_ranks", "screened_candidates", "signatures", "signature_overlap")

# The test home's run queue is paused: automation may request runs (the input observer's
# first observations are re-read); they stay queued instead of competing for the CPU with
# the browser.
DAGSTER_YAML = instance_yaml(max_concurrent_runs=0)


# --------------------------------------------------------------------------- chromium


@pytest.fixture
def chromium() -> Path:
    """Debian's chromium, installed with apt when missing (CI: a fresh machine, as root)."""
    if CHROMIUM.exists():
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip(
            f"{CHROMIUM} is missing and apt-get is not available to install Debian's chromium"
        )
    prefix: list[str] = []
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        if (
            sudo is None
            or subprocess.run([sudo, "-n", "true"], capture_output=True).returncode != 0
        ):
            pytest.skip(
                f"{CHROMIUM} is missing and apt-get needs root: run `sudo apt-get install chromium`"
            )
        prefix = [sudo, "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", "chromium"]):
        res = subprocess.run(
            [*prefix, *cmd],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert res.returncode == 0, (
            f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        )
    assert CHROMIUM.exists(), f"apt-get installed chromium but {CHROMIUM} does not exist"
    return CHROMIUM


# --------------------------------------------------------------------------- the materialized project


@dataclass
class Materialized:
    home: Path
    storage: Path
    heatmap_md: str
    heatmap_path: str
    histograms_md: str
    n_benchmarks: int
    asset_names: list[str]
    shards: list[str]
    n_cells: int


@pytest.fixture
def materialized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Materialized:
    """world → overlaps materialized into a persistent instance under ``tmp_path/home``."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # restored after the test
    world = small_synthetic_world(tmp_path / "world")

    from sigmap_assets import versions
    from sigmap_assets.resources import write_project_config

    with dg.DagsterInstance.get() as instance:
        assert not instance.is_ephemeral and Path(instance.root_directory) == home
        # the overlap step as an older sigmap computed it: the server (today's code version)
        # shows the three overlap levels stale, "code version changed"
        with monkeypatch.context() as older:
            older.setitem(versions.STEP_VERSIONS, "overlap", versions.STEP_VERSIONS["overlap"] - 1)
            project = make_project(tmp_path, world, instance)
            # the webserver's code location reads its world from <storage>/sigmap.yaml
            write_project_config(project.storage.root, world="folder", world_path=str(world))
            project.through("overlap")

        def latest_metadata(name: str) -> dict:
            ev = instance.get_latest_materialization_event(dg.AssetKey(name))
            assert ev is not None and ev.asset_materialization is not None, (
                f"{name} not materialized"
            )
            return dict(ev.asset_materialization.metadata)

        for name in MATERIALIZED:
            latest_metadata(name)
        overlap = latest_metadata("signature_overlap")
        screening = latest_metadata("screened_candidates")
        assert instance.get_latest_materialization_event(dg.AssetKey("overlap_report")) is None
        n_benchmarks = len(project.keys("benchmarks"))
        names = sorted({k.to_user_string() for a in project.assets for k in a.keys})
        shards = project.keys("shards")
        n_cells = len(instance.get_materialized_partitions(dg.AssetKey("token_nll")))

    return Materialized(
        home=home,
        storage=Path(project.storage.root),
        heatmap_md=overlap["heatmap"].value,
        heatmap_path=overlap["heatmap_path"].value,
        histograms_md=screening["histograms"].value,
        n_benchmarks=n_benchmarks,
        asset_names=names,
        shards=shards,
        n_cells=n_cells,
    )


# --------------------------------------------------------------------------- dagster dev


@pytest.fixture
def dagster_dev(materialized: Materialized, tmp_path: Path) -> Iterator[str]:
    """`dg dev -w <repo>/workspace.yaml` on a free 127.0.0.1 port (its own process group,
    stopped group-wide, from an empty folder so the repo's .env cannot override the home);
    yields its URL."""
    with dev_server(materialized.home, materialized.storage, tmp_path / "dev-cwd") as server:
        yield server.url


# --------------------------------------------------------------------------- the browser


def _matches(label: str, name: str) -> bool:
    """A graph node label is the asset name, or the name middle-truncated as ``head…tail``."""
    if "…" not in label:
        return label == name
    head, tail = label.split("…", 1)
    return len(name) > len(label) - 1 and name.startswith(head) and name.endswith(tail)


def _data_uris(md: str) -> list[str]:
    return re.findall(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", md)


def test_asset_graph_and_plots_in_browser(
    chromium: Path,
    materialized: Materialized,
    dagster_dev: str,
    tmp_path: Path,
    record_property,
    capsys: pytest.CaptureFixture,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "failure.png").unlink(missing_ok=True)
    shots: list[Path] = []

    def shot(page, name: str) -> None:
        path = SCREENSHOTS / name
        page.screenshot(path=str(path))
        assert path.stat().st_size > 10_000, f"{path} is suspiciously small"
        shots.append(path)

    url = dagster_dev
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(chromium),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport=VIEWPORT,
        )
        try:
            context.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)
            page = context.pages[0] if context.pages else context.new_page()

            # 1. The global asset lineage, every group expanded (⌥E), and the sidebar tree open.
            page.goto(f"{url}/asset-groups")
            sidebar = page.locator("[class*=AssetSidebarNode_itemContainer]")
            for group in GROUPS:
                expect(sidebar.locator(f'[title="{group}"]').first).to_be_visible()
            expect(page.get_by_text("Join the Dagster community")).to_have_count(0)
            page.keyboard.press("Alt+KeyE")
            nodes = page.locator("svg foreignObject [class*=AssetNode_assetName]")
            expect(nodes).to_have_count(len(materialized.asset_names))
            labels = [t.strip() for t in nodes.all_inner_texts()]
            unmatched = [
                n for n in materialized.asset_names if not any(_matches(lb, n) for lb in labels)
            ]
            assert not unmatched, (
                f"assets missing from the lineage graph: {unmatched} (labels: {labels})"
            )
            assert set(EXPECTED_ASSETS) <= set(materialized.asset_names)
            for name in (
                "token_nll",
                "nll_ranks",
                "signatures",
                "signature_overlap",
                "overlap_report",
                "metabench",
            ):
                assert name in labels, f"{name} not shown in full on the graph: {labels}"
            # open the sidebar tree: it shows full names (the graph truncates long ones)
            for group in GROUPS:
                row = sidebar.filter(has=page.locator(f'[title="{group}"]')).first
                row.locator("button").first.click()
            for name in (
                "screened_candidates",
                "performance_overlap",
                "metabench_selection",
                "model_zoo",
            ):
                expect(sidebar.locator(f'[title="{name}"]')).to_be_visible()
            page.mouse.move(0, 0)
            shot(page, "01-asset-lineage.png")

            # 2. signature_overlap: latest materialization from this instance, its metadata table.
            page.goto(f"{url}/assets/signature_overlap")
            expect(page.get_by_text("Latest materialization")).to_be_visible()
            metadata = page.locator("tr")
            expect(
                metadata.filter(has=page.locator("td", has_text=re.compile(r"^heatmap_path$")))
            ).to_contain_text(materialized.heatmap_path)
            for key in ("models", "benchmarks", "spread", "pairs", "heatmap"):
                expect(
                    metadata.filter(has=page.locator("td", has_text=re.compile(f"^{key}$")))
                ).to_have_count(1)
            shot(page, "02-signature-overlap-asset.png")

            # 3. The heatmap behind [Show Markdown]: the PNG stored under storage/plots.
            heatmap_row = metadata.filter(has=page.locator("td", has_text=re.compile(r"^heatmap$")))
            heatmap_row.get_by_text("[Show Markdown]").click()
            dialog = page.get_by_role("dialog")
            img = dialog.locator('img[src^="data:image/png;base64,"]')
            expect(img).to_have_count(1)
            expect(img).to_be_visible()
            assert img.evaluate("i => i.complete && i.naturalWidth") > 200, (
                "heatmap PNG did not decode"
            )
            src = img.get_attribute("src") or ""
            expected = _data_uris(materialized.heatmap_md)
            assert len(expected) == 1 and src == f"data:image/png;base64,{expected[0]}"
            assert (
                base64.b64decode(src.split(",", 1)[1])
                == Path(materialized.heatmap_path).read_bytes()
            )
            expect(dialog).to_contain_text("Signature overlap")
            shot(page, "03-signature-overlap-heatmap.png")

            # 4. screened_candidates: one correlation histogram per benchmark, and the
            #    per-benchmark summary rendered as a table (not as raw markdown).
            page.goto(f"{url}/assets/screened_candidates")
            expect(page.get_by_text("Latest materialization")).to_be_visible()
            summary = page.locator("tr").filter(
                has=page.locator("td", has_text=re.compile(r"^summary$"))
            )
            expect(summary).to_have_count(1)
            assert summary.locator("table").count() == 1, (
                "the `summary` markdown table of screened_candidates renders as raw text: a header "
                "holds an unescaped '|' ('share |γ|<0.2'); md_table must escape '|' in headers too. "
                f"Shown: {summary.inner_text()[:300]!r}"
            )
            expect(summary.locator("table tr")).to_have_count(materialized.n_benchmarks + 1)
            shot(page, "04-screened-candidates-asset.png")
            page.locator("tr").filter(
                has=page.locator("td", has_text=re.compile(r"^histograms$"))
            ).get_by_text("[Show Markdown]").click()
            imgs = page.get_by_role("dialog").locator('img[src^="data:image/png;base64,"]')
            expect(imgs).to_have_count(min(materialized.n_benchmarks, 12))
            assert len(_data_uris(materialized.histograms_md)) == imgs.count()
            expect(imgs.first).to_be_visible()
            assert imgs.first.evaluate("i => i.complete && i.naturalWidth") > 200
            shot(page, "05-screened-candidates-histograms.png")

            # 6. token_nll: the models × shards grid of its two partition dimensions.
            page.goto(f"{url}/assets/token_nll?view=partitions")
            for dim in ("model", "shard"):  # one column per dimension, each with its filter
                expect(page.locator(f'input[placeholder^="Filter by {dim}"]')).to_be_visible()
            expect(page.get_by_text(f"Materialized ({materialized.n_cells})")).to_be_visible()
            assert materialized.n_cells == len(materialized.shards) * 12  # 12 models × shards
            expect(page.get_by_text("synthetic__alpha-00", exact=True).first).to_be_visible()
            shot(page, "06-token-nll-partitions.png")

            # 7. token_nll's check, one status per cell (a partitioned check).
            page.goto(f"{url}/assets/token_nll?view=checks")
            expect(page.get_by_text("token_nll_valid").first).to_be_visible()
            expect(page.get_by_text("Passed").first).to_be_visible()  # the latest cell's result
            page.get_by_text("Partitions", exact=True).last.click()  # the check's own tab
            n = materialized.n_cells  # one result per models × shards cell, every one passed
            expect(page.get_by_text(f"{n} Partitions", exact=True)).to_be_visible()
            expect(page.get_by_text(f"Passed ({n})", exact=True)).to_be_visible()
            shot(page, "07-token-nll-check-per-cell.png")

            # 8. An asset computed by an older version of its step: stale, code version changed.
            page.goto(f"{url}/assets/signature_overlap")
            expect(page.get_by_text(re.compile(r"^Unsynced \(\d+\)$")).first).to_be_visible()
            shot(page, "08-stale-after-code-version-change.png")
        except Exception:
            if context.pages:  # what the browser showed when a check failed
                context.pages[0].screenshot(path=str(SCREENSHOTS / "failure.png"))
                print(f"failure screenshot: {SCREENSHOTS / 'failure.png'}")
            raise
        finally:
            context.close()

    record_property("screenshots", " ".join(str(s) for s in shots))
    with capsys.disabled():
        print("\nUI screenshots:\n" + "\n".join(f"  {s}" for s in shots))
