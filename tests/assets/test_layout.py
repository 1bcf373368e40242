"""Every stored name comes from `StorageLayout`: no asset module spells one, the names the
layout gives are those the library writes, and a storage root of the old single-corpus layout
is refused with one line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sigmap_assets.layout import StorageLayout
from sigmap_lib.errors import SigmapInputError

DEFS = Path(__file__).resolve().parents[2] / "sigmap_assets" / "defs"

#: A string that names a stored file: ends with the suffix of a kind sigmap stores.
STORED_NAME = re.compile(r"^[\w.*{}<>-]*\.(png|json|jsonl|parquet|csv|npz|html|zarr)$")

#: Names of the user's input files (the world folder, lm-eval output), not of stored files.
INPUT_NAMES = {"scores.csv", "*.json*", "samples_*.jsonl"}


def stored_name_literals(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every string constant (f-string parts included) that looks like
    a stored file name."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if STORED_NAME.match(text) and text not in INPUT_NAMES:
                out.append((node.lineno, text))
    return out


def test_no_asset_module_spells_a_stored_file_name() -> None:
    found = [
        f"{path.relative_to(DEFS)}:{line}: {text!r}"
        for path in sorted(DEFS.rglob("*.py"))
        for line, text in stored_name_literals(path.read_text())
    ]
    assert not found, "stored names spelled outside StorageLayout:\n" + "\n".join(found)


def test_the_scan_finds_spelled_names() -> None:
    source = (
        'a = layout.plot("overlap_levels.png")\n'
        'b = layout.plot(f"report_{lv}_heatmap.png")\n'
        'c = (d / "metabench.json").exists()\n'
        'd = world.file("scores.csv")\n'
        "e = dg.MetadataValue.json(x)  # not a name\n"
    )
    assert stored_name_literals(source) == [
        (1, "overlap_levels.png"),
        (2, "_heatmap.png"),
        (3, "metabench.json"),
    ]


def test_the_report_plots_are_where_the_layout_says(tmp_path: Path) -> None:
    from sigmap_lib.overlap import toy_overlap
    from sigmap_lib.reporting import build_overlap_report

    layout = StorageLayout(str(tmp_path))
    m, meta = toy_overlap("performance")
    build_overlap_report({"performance": m}, meta, layout.plots_dir())
    assert layout.overlap_levels_plot().exists()
    assert layout.report_heatmap("performance").exists()
    assert not layout.report_heatmap("semantic").exists()


def test_an_old_storage_root_is_refused_with_one_line(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    layout.refuse_legacy()  # an empty root is fine
    (tmp_path / "nll" / "shards").mkdir(parents=True)
    layout.refuse_legacy()  # so is the current layout
    old = tmp_path / "corpus" / "store"
    old.mkdir(parents=True)
    with pytest.raises(SigmapInputError) as err:
        layout.refuse_legacy()
    message = str(err.value)
    assert "\n" not in message
    assert str(old) in message and "older sigmap" in message and "new folder" in message
    assert old.exists()  # nothing deleted
