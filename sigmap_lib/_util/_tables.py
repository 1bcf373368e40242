"""Reading the small tables users hand in: CSV / TSV / parquet files, JSON and JSON Lines.

One reader per format for the whole library; every error is a :class:`SigmapInputError`
naming the file (and line / row) and what is wrong.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from sigmap_lib.errors import SigmapInputError


def table_kind(path: Path, what: str = "scores file") -> str:
    """``"csv"``, ``"tsv"`` or ``"parquet"`` from a file name; an error names any other type.

    Examples
    --------
    >>> from sigmap_lib._util import table_kind
    >>> from pathlib import Path
    >>> table_kind(Path("scores.csv")), table_kind(Path("x.TSV")), table_kind(Path("a.pq"))
    ('csv', 'tsv', 'parquet')
    >>> table_kind(Path("scores.xlsx"))
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: scores file scores.xlsx: unsupported file type '.xlsx' (use .csv, .tsv or .parquet)
    """
    s = path.suffix.lower()
    if s in {".csv", ".tsv", ".txt"}:
        return "tsv" if s == ".tsv" else "csv"
    if s in {".parquet", ".pq"}:
        return "parquet"
    raise SigmapInputError(
        f"{what} {path}: unsupported file type {path.suffix!r} (use .csv, .tsv or .parquet)"
    )


def read_table(path: str | Path, what: str) -> tuple[pl.DataFrame, str]:
    """Read a CSV/TSV (all columns as strings) or parquet file; reject empty files.

    Returns the frame and the file kind (``csv``, ``tsv`` or ``parquet``). CSV cells are
    read as strings (the caller parses numbers with its own error messages).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib._util import read_table
    >>> _ = Path("s.csv").write_text("model,arc\\nm1,51.2\\n")
    >>> df, kind = read_table("s.csv", "scores file")
    >>> kind, df.columns, df["arc"].to_list()
    ('csv', ['model', 'arc'], ['51.2'])
    """
    p = Path(path)
    if not p.is_file():
        raise SigmapInputError(f"{what} {p}: file not found")
    kind = table_kind(p, what)
    if p.stat().st_size == 0:
        raise SigmapInputError(f"{what} {p}: file is empty")
    try:
        if kind == "parquet":
            df = pl.read_parquet(p)
        else:
            sep = "\t" if kind == "tsv" else ","
            with p.open(newline="", encoding="utf-8") as fh:
                header = next(csv.reader(fh, delimiter=sep), [])
            header = [h.strip() for h in header]
            seen: set[str] = set()
            dups = sorted({h for h in header if h in seen or seen.add(h)})  # type: ignore[func-returns-value]
            if dups:
                raise SigmapInputError(f"{what} {p}: duplicate column name(s) {dups} in the header")
            df = pl.read_csv(p, separator=sep, infer_schema=False, truncate_ragged_lines=False)
            df = df.rename({c: c.strip() for c in df.columns})
    except SigmapInputError:
        raise
    except Exception as exc:  # polars / pyarrow parse errors
        raise SigmapInputError(f"{what} {p}: cannot be read as {kind}: {exc}") from exc
    if df.width == 0:
        raise SigmapInputError(f"{what} {p}: file has no columns")
    if df.height == 0:
        raise SigmapInputError(f"{what} {p}: file has a header but no data rows")
    return df, kind


def row_label(kind: str, idx: int) -> str:
    """Human row reference: CSV line number (header = line 1) or parquet row index.

    Examples
    --------
    >>> from sigmap_lib._util import row_label
    >>> row_label("csv", 0), row_label("parquet", 0)
    ('line 2', 'row 0')
    """
    return f"line {idx + 2}" if kind in {"csv", "tsv"} else f"row {idx}"


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file; an empty or malformed file is an error naming ``what`` and the file.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib._util import load_json
    >>> _ = Path("results.json").write_text('{"results": {"arc": {"acc,none": 0.5}}}')
    >>> load_json(Path("results.json"), "lm-eval results")["results"]["arc"]
    {'acc,none': 0.5}
    """
    if path.stat().st_size == 0:
        raise SigmapInputError(f"{what} {path}: file is empty")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SigmapInputError(f"{what} {path}: not valid JSON: {exc}") from exc


def iter_jsonl(path: str | Path, what: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
    """Stream ``(line number, object)`` for every non-blank line of a JSON Lines file.

    Reads one line at a time (bounded memory whatever the file size). Raises
    :class:`SigmapInputError` naming ``what``, the file and the line for invalid UTF-8
    (byte offset in the line and in the file), malformed JSON, or a line that is not a
    JSON object. Line numbers start at 1.

    Examples
    --------
    >>> from sigmap_lib._util import iter_jsonl
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "q.jsonl"
    >>> _ = p.write_text('{"text": "a"}\\n\\n{"text": "b"}\\n')
    >>> list(iter_jsonl(p))
    [(1, {'text': 'a'}), (3, {'text': 'b'})]
    >>> _ = p.write_text('{"text": "a"}\\n{oops\\n')
    >>> list(iter_jsonl(p, "questions file"))
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: questions file ...q.jsonl:2: malformed JSON (line 2 is not valid JSON: ...)
    """
    p = Path(path)
    where0 = f"{what} {p}" if what else str(p)
    offset = 0
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{where0}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SigmapInputError(
                    f"{where}: invalid UTF-8 at byte offset {exc.start} of the line (file byte "
                    f"offset {offset + exc.start}) (byte 0x{raw[exc.start]:02x}): {exc.reason}"
                ) from exc
            offset += len(raw)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                what_ = exc.msg if exc.msg.endswith(" at") else f"{exc.msg} at"  # no "at at"
                raise SigmapInputError(
                    f"{where}: malformed JSON (line {lineno} is not valid JSON: {what_} "
                    f"column {exc.colno})"
                ) from exc
            if not isinstance(obj, dict):
                raise SigmapInputError(f"{where}: line {lineno} is not a JSON object")
            yield lineno, obj
