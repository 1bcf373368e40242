"""Tests of sigmap_lib.reporting and sigmap_lib.reporting: files written, self-contained HTML."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import polars as pl
import pytest

from sigmap_lib import reporting as plots
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap import OverlapMatrix
from sigmap_lib.reporting import Section, markdown_table, render_html_report

PNG = b"\x89PNG\r\n\x1a\n"


def _m(b: int = 6, seed: int = 0) -> OverlapMatrix:
    rng = np.random.default_rng(seed)
    v = rng.uniform(0, 1, (b, b))
    v = (v + v.T) / 2
    np.fill_diagonal(v, 1)
    return OverlapMatrix(labels=tuple(f"bench{i}" for i in range(b)), values=v, level="semantic")


def test_plots_write_pngs(tmp_path) -> None:
    m = _m()
    outs = [
        plots.heatmap(m, tmp_path / "h.png", title="heat"),
        plots.dendrogram(m, tmp_path / "d.png"),
        plots.level_distributions(
            {"semantic": m, "performance": _m(seed=1), "raw": np.array([0.1, 0.2])},
            tmp_path / "sub" / "l.png",
        ),
        plots.correlation_histogram(
            np.linspace(-1, 1, 21), np.arange(20), tmp_path / "c.png", "hist"
        ),
        plots.scatter_true_vs_pred(np.arange(10.0), np.arange(10.0) + 0.5, tmp_path / "s.png"),
    ]
    for p in outs:
        assert p.exists() and p.read_bytes()[:8] == PNG and p.stat().st_size > 2000
    assert not list(tmp_path.rglob("*.tmp*"))
    with pytest.raises(SigmapInputError, match="edges"):
        plots.correlation_histogram(np.arange(3), np.arange(3), tmp_path / "x.png")


def test_markdown_table() -> None:
    df = pl.DataFrame({"name": ["a|b", "c"], "x": [0.123456, float("nan")], "n": [1, 2]})
    md = markdown_table(df, max_rows=1)
    lines = md.splitlines()
    assert lines[0] == "| name | x | n |"
    assert lines[2] == "| a\\|b | 0.1235 | 1 |"
    assert "1 more rows" in md
    assert markdown_table(df.to_pandas()).count("\n") == 3


def test_html_report_is_self_contained(tmp_path) -> None:
    img = plots.heatmap(_m(), tmp_path / "h.png")
    out = render_html_report(
        [
            Section(
                title="Semantic",
                text="# Head\n\nSome **bold** <script> and `code`.\n\n- one\n- two",
                tables=[("pairs", pl.DataFrame({"a": ["x"], "v": [0.5]}))],
                images=[("heat", img)],
            ),
            {"title": "Perf", "tables": [("pd", pd.DataFrame({"q": [1, 2]}))]},
        ],
        tmp_path / "r" / "report.html",
        title="Overlap report",
    )
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<strong>bold</strong>" in html and "&lt;script&gt;" in html and "<li>two</li>" in html
    assert "<code>code</code>" in html and "<td>0.5</td>" in html
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert m and base64.b64decode(m.group(1)) == img.read_bytes()
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing external
    with pytest.raises(SigmapInputError, match="does not exist"):
        render_html_report(
            [Section(title="x", images=[tmp_path / "missing.png"])], tmp_path / "y.html"
        )
