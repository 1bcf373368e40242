"""Helpers that turn results into Dagster metadata the UI renders well."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

#: The tag Dagster records a materialization's or an observation's data version under.
DATA_VERSION_TAG = "dagster/data_version"

#: The owners of every sigmap asset (the UI's Owner column and filter).
OWNERS = ["team:sigmap"]


def md_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, max_rows: int = 30
) -> str:
    """A markdown table of ``rows`` (list of dicts) for Dagster metadata, truncated to
    ``max_rows`` with a note; the renderer is :func:`sigmap_lib.reporting.markdown_table`
    (the same one the HTML reports use), ``|`` escaped in headers and cells."""
    from sigmap_lib.reporting import markdown_table

    rows = list(rows)
    if not rows:
        return "_(empty)_"
    if columns is not None:
        rows = [{c: r.get(c, "") for c in columns} for r in rows]
    return markdown_table(rows, max_rows=max_rows)


#: The metadata keys the Dagster UI reads a table's row count and columns from.
ROW_COUNT, COLUMN_SCHEMA = "dagster/row_count", "dagster/column_schema"


def shard_metadata(shard: str, units: int, reused: bool, **rest: Any) -> dict[str, Any]:
    """What every per-shard asset shows first: the shard, its units and whether the run
    reused what was stored; then ``rest``."""
    return {"shard": shard, "units": int(units), "reused": bool(reused), **rest}


def table_metadata(frame: Any, max_columns: int = 200) -> dict[str, Any]:
    """A stored table's row count and column schema (name and dtype of each column) for the
    UI's overview and Columns tab, from the polars or pandas frame that was written. A table
    wider than ``max_columns`` (a response matrix has a column per item) lists its first
    ``max_columns`` columns; ``column_count`` gives the full count."""
    if hasattr(frame, "height"):  # polars
        n, cols = frame.height, [(str(c), str(t)) for c, t in frame.schema.items()]
    else:  # pandas
        n, cols = len(frame), [(str(c), str(t)) for c, t in frame.dtypes.items()]
    return _table(n, cols, max_columns)


def stored_table_metadata(path: Any, max_columns: int = 200) -> dict[str, Any]:
    """:func:`table_metadata` of a stored parquet file, from its footer (no row is read):
    for tables that a library function wrote, such as a shard store's units."""
    import pyarrow.parquet as pq

    with path.open("rb") as fh:
        pf = pq.ParquetFile(fh)
        n, schema = pf.metadata.num_rows, pf.schema_arrow
    return _table(n, [(f.name, str(f.type)) for f in schema], max_columns)


def _table(n: int, cols: list[tuple[str, str]], max_columns: int) -> dict[str, Any]:
    schema = dg.TableSchema(columns=[dg.TableColumn(c, t) for c, t in cols[:max_columns]])
    return {
        ROW_COUNT: dg.MetadataValue.int(int(n)),
        COLUMN_SCHEMA: dg.MetadataValue.table_schema(schema),
        "column_count": dg.MetadataValue.int(len(cols)),
    }


def frame_rows(df: Any) -> list[dict[str, Any]]:
    """Rows of a polars or pandas frame as dicts."""
    if hasattr(df, "to_dicts"):
        return df.to_dicts()
    return df.to_dict(orient="records")


def image_md(path: str | Path, title: str = "") -> str:
    """Markdown that shows a PNG inline in the Dagster UI (embedded as a data URI)."""
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (
        f"**{title}**\n\n![{title}](data:image/png;base64,{data})"
        if title
        else f"![plot](data:image/png;base64,{data})"
    )


def plot_metadata(paths: Mapping[str, str | Path]) -> dict[str, dg.MetadataValue]:
    """For each titled PNG: an inline markdown preview and the file path."""
    meta: dict[str, dg.MetadataValue] = {}
    for title, p in paths.items():
        key = title.lower().replace(" ", "_")
        meta[f"plot_{key}"] = dg.MetadataValue.md(image_md(p, title))
        meta[f"plot_{key}_path"] = dg.MetadataValue.path(str(p))
    return meta


def json_safe(obj: Any) -> Any:
    """``obj`` as plain JSON values (NumPy scalars and arrays, paths allowed) with every NaN
    or infinite float as ``None`` (JSON has no NaN; the UI shows ``null``). The values are
    replaced where they are, in the structure: strings are never touched, so a finding that
    says "NaN" keeps saying it."""
    import json
    import math

    from sigmap_lib._util import json_default

    def clean(v: Any) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    # the round trip gives JSON's own types and key spelling; NaN and ±inf come back as floats
    return clean(json.loads(json.dumps(obj, default=json_default, allow_nan=True)))


def signature_row(key: str, sig, summary: dict) -> dict:
    """One benchmark's line of the UI summary table."""
    cal = summary.get("calibration") or {}
    return {
        "benchmark": key,
        "units": int(sig.units.size),
        "method": sig.method,
        "threshold": cal.get("threshold"),
        "null max (median)": (cal.get("null_max_summary") or {}).get("median"),
        "observed max": cal.get("observed_max"),
        "p (max)": cal.get("p_value"),
        "R²": summary.get("r2"),
        "LOO R²": summary.get("loo_r2"),
    }


def signature_md(key: str, sig, units: list[dict]) -> str:
    """One benchmark's signature as markdown: its units in context, or why it is empty."""
    if sig.empty:
        why = sig.calibration.reason if sig.calibration is not None else "no unit selected"
        return f"### {key}\n\n_{why}_"
    return f"### {key}\n\n" + md_table(
        [
            {
                "#": u["order"],
                "unit": repr(u["text"]),
                "left context": "…" + u["left_context"][-60:],
                "statistic": u["statistic"],
                "adjusted p": u["adjusted_p"],
                "coef": u["coef"],
            }
            for u in units
        ],
        max_rows=15,
    )
