"""Self-contained HTML reports and markdown tables for Dagster metadata.

:func:`render_html_report` turns structured sections (title, markdown-ish text, tables,
images) into ONE HTML file: images embedded as base64 data URIs, tables as HTML, no
external resources. :func:`markdown_table` renders a table for ``MetadataValue.md``.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sigmap_lib._util._atomic import atomic_write_text
from sigmap_lib.errors import SigmapInputError


@dataclass
class Section:
    """One report section.

    Attributes
    ----------
    title : str
    text : str
        Markdown-ish: blank-line paragraphs, ``#``/``##`` headings, ``- `` bullets,
        ``**bold**``, ``*italic*``, ```code```.
    tables : list of (caption, frame)
        polars / pandas DataFrames, or anything :func:`_rows` accepts.
    images : list of (caption, path) or path
        PNG/JPEG/SVG files, embedded.
    """

    title: str
    text: str = ""
    tables: list[tuple[str, Any]] = field(default_factory=list)
    images: list[tuple[str, str | Path] | str | Path] = field(default_factory=list)


def _rows(df: Any) -> tuple[list[str], list[list[Any]]]:
    """(columns, rows) from polars/pandas frames, a list of dicts or a dict of lists."""
    try:
        import polars as pl

        if isinstance(df, pl.DataFrame):
            return list(df.columns), [list(r) for r in df.iter_rows()]
    except ImportError:  # pragma: no cover
        pass
    try:
        import pandas as pd

        if isinstance(df, pd.DataFrame):
            d = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df
            return [str(c) for c in d.columns], d.values.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(df, Mapping):
        cols = [str(c) for c in df]
        n = max((len(v) for v in df.values()), default=0)
        return cols, [[df[c][i] if i < len(df[c]) else None for c in df] for i in range(n)]
    if isinstance(df, Sequence) and all(isinstance(r, Mapping) for r in df):
        cols: list[str] = []
        for r in df:
            for c in r:
                if c not in cols:
                    cols.append(c)
        return cols, [[r.get(c) for c in cols] for r in df]
    raise SigmapInputError(f"report: cannot render a table from {type(df).__name__}")


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6):
            return f"{v:.{digits - 1}e}"
        return (
            f"{v:.{digits}g}" if abs(v) >= 1 else f"{v:.{digits}f}".rstrip("0").rstrip(".") or "0"
        )
    try:
        import numpy as np

        if isinstance(v, np.floating):
            return _fmt(float(v), digits)
        if isinstance(v, np.integer):
            return str(int(v))
    except ImportError:  # pragma: no cover
        pass
    return str(v)


def markdown_table(df: Any, max_rows: int = 20, digits: int = 4) -> str:
    """GitHub-flavoured markdown table of the first ``max_rows`` rows (a note says how
    many were left out); ``|`` in cells is escaped.

    Examples
    --------
    >>> import polars as pl
    >>> from sigmap_lib.reporting import markdown_table
    >>> df = pl.DataFrame({"benchmark": ["arc", "gsm8k", "mmlu"], "rmse": [1.23456, 0.5, 0.000123]})
    >>> print(markdown_table(df, max_rows=2))  # 4 significant digits
    | benchmark | rmse |
    |---|---|
    | arc | 1.235 |
    | gsm8k | 0.5 |
    <BLANKLINE>
    _1 more rows not shown (3 in all)._
    >>> print(markdown_table({"model": ["a", "b"], "score": [71.5, 64.0]}))  # or a dict of lists
    | model | score |
    |---|---|
    | a | 71.5 |
    | b | 64 |
    """
    if max_rows < 1:
        raise SigmapInputError(f"markdown_table: max_rows must be >= 1, got {max_rows}")
    cols, rows = _rows(df)
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [
        "| " + " | ".join(esc(c) for c in cols) + " |",
        "|" + "|".join("---" for _ in cols) + "|",
    ]
    for r in rows[:max_rows]:
        lines.append("| " + " | ".join(esc(_fmt(v, digits)) for v in r) + " |")
    if len(rows) > max_rows:
        lines.append(f"\n_{len(rows) - max_rows} more rows not shown ({len(rows)} in all)._")
    return "\n".join(lines)


def _inline(s: str) -> str:
    s = html.escape(s, quote=False)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)
    s = re.sub(r"(?<![*\w])\*([^*\s][^*]*)\*(?!\*)", r"<em>\1</em>", s)
    return s


def text_to_html(text: str) -> str:
    """Minimal markdown → HTML (headings, bullets, paragraphs, bold/italic/code)."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [ln.rstrip() for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        if all(re.match(r"^\s*[-*] ", ln) for ln in lines):
            bullet = re.compile(r"^\s*[-*] ")
            items = "".join("<li>" + _inline(bullet.sub("", ln)) + "</li>" for ln in lines)
            out.append(f"<ul>{items}</ul>")
            continue
        m = re.match(r"^(#{1,4}) (.*)$", lines[0])
        if m and len(lines) == 1:
            level = len(m.group(1)) + 2
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
            continue
        out.append("<p>" + "<br>".join(_inline(ln) for ln in lines) + "</p>")
    return "\n".join(out)


_MIME = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".svg": "image/svg+xml",
    ".gif": "image/gif",
}


def _image_html(caption: str, path: Path) -> str:
    if not path.is_file():
        raise SigmapInputError(f"report: image {path} does not exist")
    mime = _MIME.get(path.suffix.lower())
    if mime is None:
        raise SigmapInputError(f"report: image {path} has unsupported type (use {sorted(_MIME)})")
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    cap = f"<figcaption>{_inline(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{html.escape(caption or path.name)}" src="data:{mime};base64,{data}">{cap}</figure>'


def _table_html(caption: str, df: Any, max_rows: int) -> str:
    cols, rows = _rows(df)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r) + "</tr>"
        for r in rows[:max_rows]
    )
    note = (
        f"<p class='note'>{len(rows) - max_rows} more rows not shown.</p>"
        if len(rows) > max_rows
        else ""
    )
    cap = f"<caption>{_inline(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:0.88em}caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f2f2f2}
td:first-child,th:first-child{text-align:left}figure{margin:1em 0}img{max-width:100%}
figcaption{font-size:.9em;color:#555}code{background:#f4f4f4;padding:0 3px}.note{font-size:.85em;color:#666}
.banner{border:2px solid #b00;background:#fff0f0;padding:.6em 1em;margin:1em 0;font-weight:500}
"""


def render_html_report(
    sections: Sequence[Section | Mapping[str, Any]],
    out_path: str | Path,
    *,
    title: str = "sigmap report",
    intro: str = "",
    max_table_rows: int = 200,
    banner: str | None = None,
) -> Path:
    """Write a self-contained HTML report.

    Parameters
    ----------
    sections : sequence of Section or dict
        Dicts take the keys of :class:`Section` (``title`` required).
    out_path : str or Path
        HTML file to write (atomically: temporary name, then rename).
    title, intro : str
        Page title and markdown-ish text before the sections.
    max_table_rows : int
        Rows shown per table.
    banner : str, optional
        A warning shown prominently above everything else (``<div class="banner">``).

    Returns
    -------
    Path
        ``out_path``.

    Examples
    --------
    >>> import pandas as pd
    >>> from sigmap_lib.reporting import Section, render_html_report
    >>> top = pd.DataFrame({"model": ["a", "b"], "arc": [71.5, 64.0]})
    >>> sections = [
    ...     Section("Findings", "- The signature level is **not** inflated by format."),
    ...     {"title": "Scores", "tables": [("top models", top)]},  # a dict works too
    ... ]
    >>> path = render_html_report(sections, "report.html", title="demo", intro="A tiny report.")
    >>> page = path.read_text()  # one self-contained file
    >>> "<strong>not</strong>" in page, "<td>71.5</td>" in page
    (True, True)
    >>> page = render_html_report(sections, "report.html", banner="Too few models.").read_text()
    >>> '<div class="banner" role="alert">' in page
    True
    """
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if banner:
        parts.append(f'<div class="banner" role="alert">{text_to_html(banner)}</div>')
    if intro:
        parts.append(text_to_html(intro))
    for k, sec in enumerate(sections):
        if isinstance(sec, Mapping):
            unknown = set(sec) - {"title", "text", "tables", "images"}
            if "title" not in sec or unknown:
                raise SigmapInputError(
                    f"report: section #{k} needs 'title' and only text/tables/images (unknown: {sorted(unknown)})"
                )
            sec = Section(**sec)
        parts.append(f'<section id="s{k}"><h2>{html.escape(sec.title)}</h2>')
        if sec.text:
            parts.append(text_to_html(sec.text))
        for t in sec.tables:
            cap, df = t if isinstance(t, tuple) else ("", t)
            parts.append(_table_html(cap, df, max_table_rows))
        for img in sec.images:
            cap, p = img if isinstance(img, tuple) else ("", img)
            parts.append(_image_html(cap, Path(p)))
        parts.append("</section>")
    parts.append("</body></html>")
    return atomic_write_text(Path(out_path), "\n".join(parts))
