"""Item-level inputs: binary response matrices (models x items) and question texts.

Response matrices come from

- wide tables (``model`` column + one 0/1 column per item id; ``responses/<bm>.parquet``
  of a world folder, ``../shared/data/item_responses/*.parquet``),
- long tables (``model, item, correct`` rows),
- lm-evaluation-harness ``samples_<task>_<timestamp>.jsonl`` logs (per-sample ``acc``),

and are returned as a :class:`ResponseMatrix` (int8 0/1, shape ``(n_models, n_items)``,
no missing values). Question texts (``item_id``, ``text``) come from parquet / CSV /
JSONL files (:func:`read_questions`) or from the metabench item files
(:func:`metabench_questions`).

Every problem raises :class:`SigmapInputError` naming the file and the offending
model / item / line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sigmap_lib._util._tables import iter_jsonl, read_table, row_label
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs.scores._common import MISSING_TOKENS
from sigmap_lib.inputs.scores._lm_eval import latest_samples

_N_EX = 5
_WHAT = "responses file"


@dataclass(frozen=True)
class ResponseMatrix:
    """Binary item responses of several models on one benchmark.

    Attributes
    ----------
    models : list[str]
        Model ids (raw, unique), one per row.
    item_ids : list[str]
        Item ids (unique), one per column.
    matrix : np.ndarray
        int8, shape ``(n_models, n_items)``, 1 = correct, 0 = wrong; no missing values.
    source : str
        File or folder the responses were read from.
    """

    models: list[str]
    item_ids: list[str]
    matrix: np.ndarray
    source: str = "<memory>"

    def __post_init__(self) -> None:
        m = np.asarray(self.matrix)
        if m.ndim != 2 or m.shape != (len(self.models), len(self.item_ids)):
            raise SigmapInputError(
                f"responses {self.source}: matrix shape {m.shape} does not match "
                f"{len(self.models)} models x {len(self.item_ids)} items"
            )
        if len(set(self.models)) != len(self.models):
            raise SigmapInputError(f"responses {self.source}: duplicate model ids")
        if len(set(self.item_ids)) != len(self.item_ids):
            raise SigmapInputError(f"responses {self.source}: duplicate item ids")
        if m.size and not np.isin(m, (0, 1)).all():
            raise SigmapInputError(f"responses {self.source}: matrix values must be 0 or 1")
        object.__setattr__(self, "matrix", m.astype(np.int8, copy=False))
        object.__setattr__(self, "models", list(self.models))
        object.__setattr__(self, "item_ids", list(self.item_ids))

    @property
    def n_models(self) -> int:
        """Number of models (rows)."""
        return len(self.models)

    @property
    def n_items(self) -> int:
        """Number of items (columns)."""
        return len(self.item_ids)

    def to_polars(self) -> pl.DataFrame:
        """Wide table: ``model`` (str) + one Int8 column per item id."""
        data: dict[str, Any] = {"model": self.models}
        for j, item in enumerate(self.item_ids):
            data[item] = self.matrix[:, j]
        return pl.DataFrame(data).with_columns(pl.exclude("model").cast(pl.Int8))


# ---------------------------------------------------------------------------------------
# dispatch


def read_responses(
    path_or_spec: str | Path | Mapping[str, Any],
    *,
    min_models: int = 2,
    kind: str | None = None,
    model_column: str = "model",
    item_column: str = "item",
    correct_column: str = "correct",
    **lm_eval_options: Any,
) -> ResponseMatrix:
    """Read a binary response matrix.

    Parameters
    ----------
    path_or_spec : str, Path or mapping
        A path, or a spec ``{"kind": ..., "path": ..., **options}`` (options as the
        keyword arguments here).
    min_models : int
        Fewer models is an error.
    kind : {"wide", "long", "lm_eval"} or None
        Default: ``lm_eval`` for a folder or a ``.jsonl`` file; for a table, ``long`` if
        it has ``item_column`` and ``correct_column``, else ``wide``.
    model_column : str
        Model-id column (wide and long tables).
    item_column, correct_column : str
        Item-id and 0/1 columns of a long table.
    **lm_eval_options
        ``task``, ``metric``, ``filter``, ``benchmark``, ``model`` for
        :func:`read_lm_eval_samples`.

    Returns
    -------
    ResponseMatrix
        Rows in file order of first appearance (lm-eval: folder order), columns in file
        order (lm-eval: by ``doc_id``).

    Raises
    ------
    SigmapInputError
        Unreadable / empty file; missing model column; non-binary values (item, model
        and value named); missing values; duplicate models; duplicate items; fewer
        than ``min_models`` models; no items.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_responses
    >>> _ = Path("arc.csv").write_text("model,q1,q2,q3\\nm1,1,0,1\\nm2,0,0,1\\n")  # wide
    >>> rm = read_responses("arc.csv")
    >>> rm.models, rm.item_ids, rm.matrix.tolist()  # (n_models, n_items) int8
    (['m1', 'm2'], ['q1', 'q2', 'q3'], [[1, 0, 1], [0, 0, 1]])
    >>> _ = Path("arc_long.csv").write_text(
    ...     "model,item,correct\\nm1,q1,1\\nm1,q2,0\\nm2,q1,0\\nm2,q2,true\\n"
    ... )
    >>> read_responses("arc_long.csv").matrix.tolist()  # a long table is detected
    [[1, 0], [0, 1]]
    """
    opts: dict[str, Any] = {
        "min_models": min_models,
        "kind": kind,
        "model_column": model_column,
        "item_column": item_column,
        "correct_column": correct_column,
        **lm_eval_options,
    }
    if isinstance(path_or_spec, Mapping):
        spec = dict(path_or_spec)
        if "path" not in spec:
            raise SigmapInputError(f"responses spec {path_or_spec!r}: missing 'path'")
        path = Path(str(spec.pop("path"))).expanduser()
        opts.update(spec)
    else:
        path = Path(path_or_spec)
    kind = opts.pop("kind")
    min_models = opts.pop("min_models")
    if isinstance(min_models, bool) or not isinstance(min_models, int) or min_models < 1:
        raise SigmapInputError(f"{_WHAT} {path}: min_models must be a positive integer")
    mcol, icol, ccol = opts.pop("model_column"), opts.pop("item_column"), opts.pop("correct_column")
    if kind is None:
        kind = "lm_eval" if path.is_dir() or path.suffix.lower() == ".jsonl" else None
    if kind == "lm_eval":
        return read_lm_eval_samples(path, min_models=min_models, **opts)
    unknown = sorted(opts)
    if unknown:
        raise SigmapInputError(
            f"{_WHAT} {path}: option(s) {unknown} only apply to lm-eval samples (kind='lm_eval')"
        )
    df, fkind = read_table(path, _WHAT)
    if kind is None:
        kind = "long" if icol in df.columns and ccol in df.columns else "wide"
    if kind == "wide":
        rm = _from_wide(df, fkind, path, mcol)
    elif kind == "long":
        rm = _from_long(df, fkind, path, mcol, icol, ccol)
    else:
        raise SigmapInputError(
            f"{_WHAT} {path}: kind must be 'wide', 'long' or 'lm_eval', got {kind!r}"
        )
    _check_min_models(rm, min_models)
    return rm


def _check_min_models(rm: ResponseMatrix, min_models: int) -> None:
    if rm.n_models < min_models:
        raise SigmapInputError(
            f"{_WHAT} {rm.source}: only {rm.n_models} model(s), fewer than min_models={min_models}"
        )
    if rm.n_items == 0:
        raise SigmapInputError(f"{_WHAT} {rm.source}: no items")


def _to_float(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Series -> (Float64 with null for missing, mask of unparseable cells)."""
    if s.dtype == pl.Boolean or s.dtype.is_numeric():
        out = s.cast(pl.Float64).fill_nan(None)
        return out, pl.Series([False] * len(s))
    text = s.cast(pl.String).str.strip_chars()
    low = text.str.to_lowercase()
    missing = text.is_null() | low.is_in(list(MISSING_TOKENS))
    out = text.cast(pl.Float64, strict=False)
    out = pl.select(
        pl.when(low == "true").then(1.0).when(low == "false").then(0.0).otherwise(out)
    ).to_series()
    bad = (~missing) & out.is_null()
    out = pl.select(pl.when(missing).then(None).otherwise(out)).to_series().fill_nan(None)
    return out, bad


def _dup_models(models: list[str], path: Path, fkind: str) -> None:
    seen: dict[str, int] = {}
    dups: list[str] = []
    for i, m in enumerate(models):
        if m in seen:
            dups.append(f"{m!r} ({row_label(fkind, seen[m])}, {row_label(fkind, i)})")
        else:
            seen[m] = i
    if dups:
        raise SigmapInputError(
            f"{_WHAT} {path}: {len(dups)} duplicate model row(s): " + "; ".join(dups[:_N_EX])
        )


def _model_list(df: pl.DataFrame, mcol: str, path: Path, fkind: str) -> list[str]:
    if mcol not in df.columns:
        raise SigmapInputError(
            f"{_WHAT} {path}: model column {mcol!r} not found; columns are {df.columns[:10]}"
            + (" ..." if df.width > 10 else "")
        )
    s = df.get_column(mcol).cast(pl.String).str.strip_chars()
    bad = (s.is_null() | (s == "")).arg_true().to_list()
    if bad:
        rows = ", ".join(row_label(fkind, i) for i in bad[:_N_EX])
        raise SigmapInputError(f"{_WHAT} {path}: {len(bad)} row(s) with an empty model id ({rows})")
    return s.to_list()


def _check_values(
    values: np.ndarray,
    raw_bad: np.ndarray,
    raw: pl.DataFrame | None,
    models: Sequence[str],
    items: Sequence[str],
    path: Path,
    where: Sequence[str] | None = None,
) -> np.ndarray:
    """Validate a float matrix (NaN = missing) -> int8 0/1 matrix."""
    nonbin = raw_bad | (~np.isnan(values) & (values != 0) & (values != 1))
    if nonbin.any():
        r, c = np.nonzero(nonbin)
        ex = []
        for i, j in list(zip(r, c))[:_N_EX]:
            v = (
                raw[items[j]][int(i)]
                if raw is not None and items[j] in raw.columns
                else values[i, j]
            )
            loc = f" ({where[i]})" if where is not None else ""
            ex.append(f"item {items[j]!r} model {models[i]!r}{loc}: {v!r}")
        n_items = len(set(c.tolist()))
        raise SigmapInputError(
            f"{_WHAT} {path}: {int(nonbin.sum())} non-binary value(s) in {n_items} item(s) "
            f"(responses must be 0 or 1), e.g. " + "; ".join(ex)
        )
    miss = np.isnan(values)
    if miss.any():
        r, c = np.nonzero(miss)
        ex = [
            f"item {items[j]!r} model {models[i]!r}"
            + (f" ({where[i]})" if where is not None else "")
            for i, j in list(zip(r, c))[:_N_EX]
        ]
        raise SigmapInputError(
            f"{_WHAT} {path}: {int(miss.sum())} missing value(s) in {len(set(c.tolist()))} "
            f"item(s) (every model needs a 0/1 answer to every item), e.g. " + "; ".join(ex)
        )
    return values.astype(np.int8)


def _from_wide(df: pl.DataFrame, fkind: str, path: Path, mcol: str) -> ResponseMatrix:
    models = _model_list(df, mcol, path, fkind)
    _dup_models(models, path, fkind)
    items = [c for c in df.columns if c != mcol]
    if not items:
        raise SigmapInputError(f"{_WHAT} {path}: no item columns besides {mcol!r}")
    n = df.height
    values = np.empty((n, len(items)), dtype=np.float64)
    raw_bad = np.zeros((n, len(items)), dtype=bool)
    for j, c in enumerate(items):
        s = df.get_column(c)
        if not (s.dtype == pl.Boolean or s.dtype.is_numeric() or s.dtype == pl.String):
            raise SigmapInputError(f"{_WHAT} {path}: item column {c!r} has type {s.dtype}, not 0/1")
        f, bad = _to_float(s)
        values[:, j] = f.to_numpy(allow_copy=True).astype(np.float64)
        raw_bad[:, j] = bad.to_numpy()
    where = [row_label(fkind, i) for i in range(n)]
    mat = _check_values(values, raw_bad, df, models, items, path, where)
    return ResponseMatrix(models, items, mat, str(path))


def _from_long(
    df: pl.DataFrame, fkind: str, path: Path, mcol: str, icol: str, ccol: str
) -> ResponseMatrix:
    absent = [c for c in (mcol, icol, ccol) if c not in df.columns]
    if absent:
        raise SigmapInputError(
            f"{_WHAT} {path}: column(s) {absent} not found; columns are {df.columns}"
        )
    models = _model_list(df, mcol, path, fkind)
    items_s = df.get_column(icol).cast(pl.String).str.strip_chars()
    bad = (items_s.is_null() | (items_s == "")).arg_true().to_list()
    if bad:
        rows = ", ".join(row_label(fkind, i) for i in bad[:_N_EX])
        raise SigmapInputError(f"{_WHAT} {path}: {len(bad)} row(s) with an empty item id ({rows})")
    vals, raw_bad = _to_float(df.get_column(ccol))
    long = pl.DataFrame(
        {
            "model": models,
            "item": items_s,
            "v": vals,
            "bad": raw_bad,
            "raw": df[ccol].cast(pl.String),
        }
    ).with_row_index("_row")
    dup = long.filter(pl.struct("model", "item").is_duplicated())
    if dup.height:
        ex = []
        for (m, it), g in dup.group_by(["model", "item"], maintain_order=True):
            rows = ", ".join(row_label(fkind, i) for i in g["_row"])
            ex.append(f"model {m!r} item {it!r} ({rows})")
            if len(ex) >= _N_EX:
                break
        raise SigmapInputError(
            f"{_WHAT} {path}: duplicate (model, item) rows, e.g. " + "; ".join(ex)
        )
    bad_rows = long.filter(
        pl.col("bad") | (pl.col("v").is_not_null() & ~pl.col("v").is_in([0.0, 1.0]))
    )
    if bad_rows.height:
        ex = [
            f"item {r['item']!r} model {r['model']!r} ({row_label(fkind, r['_row'])}): {r['raw']!r}"
            for r in bad_rows.head(_N_EX).iter_rows(named=True)
        ]
        raise SigmapInputError(
            f"{_WHAT} {path}: {bad_rows.height} non-binary value(s) in column {ccol!r} "
            f"(responses must be 0 or 1), e.g. " + "; ".join(ex)
        )
    mlist = long["model"].unique(maintain_order=True).to_list()
    ilist = long["item"].unique(maintain_order=True).to_list()
    mi = {m: i for i, m in enumerate(mlist)}
    ii = {it: j for j, it in enumerate(ilist)}
    values = np.full((len(mlist), len(ilist)), np.nan)
    r = np.fromiter((mi[m] for m in long["model"]), dtype=np.int64, count=long.height)
    c = np.fromiter((ii[i] for i in long["item"]), dtype=np.int64, count=long.height)
    values[r, c] = long["v"].to_numpy(allow_copy=True).astype(np.float64)
    mat = _check_values(values, np.zeros(values.shape, dtype=bool), None, mlist, ilist, path)
    return ResponseMatrix(mlist, ilist, mat, str(path))


# ---------------------------------------------------------------------------------------
# lm-evaluation-harness samples


def _read_samples_file(
    path: Path, metric: str, filter_: str | None
) -> tuple[dict[int, int], str | None]:
    """One samples jsonl -> ({doc_id: 0/1}, filter used)."""
    if path.stat().st_size == 0:
        raise SigmapInputError(f"lm-eval samples {path}: file is empty")
    recs: list[tuple[int, int, Any, Any]] = []  # (line, doc_id, filter, value)
    for ln, rec in iter_jsonl(path, "lm-eval samples"):
        doc_id = rec.get("doc_id")
        if isinstance(doc_id, bool) or not isinstance(doc_id, int):
            raise SigmapInputError(
                f"lm-eval samples {path}: line {ln} has no integer 'doc_id' (got {doc_id!r})"
            )
        if metric not in rec:
            keys = [k for k, v in rec.items() if isinstance(v, int | float) and k != "doc_id"]
            raise SigmapInputError(
                f"lm-eval samples {path}: line {ln} (doc_id {doc_id}) has no metric "
                f"{metric!r}; numeric fields: {keys}"
            )
        recs.append((ln, doc_id, rec.get("filter"), rec[metric]))
    if not recs:
        raise SigmapInputError(f"lm-eval samples {path}: no samples")
    filters = list(dict.fromkeys(r[2] for r in recs))
    if filter_ is not None:
        if filter_ not in filters:
            raise SigmapInputError(
                f"lm-eval samples {path}: filter {filter_!r} not found; filters are {filters}"
            )
        chosen: Any = filter_
    elif len(filters) == 1:
        chosen = filters[0]
    elif "none" in filters:
        chosen = "none"
    else:
        raise SigmapInputError(
            f"lm-eval samples {path}: samples of several filters {filters}; pass filter=..."
        )
    out: dict[int, int] = {}
    first_line: dict[int, int] = {}
    for ln, doc_id, flt, value in recs:
        if flt != chosen:
            continue
        if doc_id in out:
            raise SigmapInputError(
                f"lm-eval samples {path}: duplicate item doc_id {doc_id} (lines {first_line[doc_id]} and {ln})"
            )
        ok = isinstance(value, bool) or (isinstance(value, int | float) and value in (0, 1))
        if not ok:
            raise SigmapInputError(
                f"lm-eval samples {path}: line {ln} (doc_id {doc_id}) has {metric}={value!r}, "
                f"not 0 or 1 (non-binary metric; choose a per-sample 0/1 metric such as acc)"
            )
        out[doc_id] = int(value)
        first_line[doc_id] = ln
    return out, chosen


def read_lm_eval_samples(
    path: str | Path,
    *,
    task: str | None = None,
    metric: str = "acc",
    filter: str | None = None,
    benchmark: str | None = None,
    model: str | None = None,
    min_models: int = 2,
) -> ResponseMatrix:
    """Response matrix from lm-evaluation-harness ``--log_samples`` output.

    Parameters
    ----------
    path : str or Path
        A ``samples_<task>_<timestamp>.jsonl`` file or a folder searched recursively
        (one sub-folder per model, as lm-eval writes ``<out>/<org__name>/``).
    task : str or None
        Task to read; default: the only task present (error if several).
    metric : str
        Per-sample 0/1 field (``acc``, ``acc_norm``, ``exact_match``).
    filter : str or None
        For tasks logged under several filters (one line per doc and filter): which one;
        default the only one, else ``"none"`` if present, else an error.
    benchmark : str or None
        Prefix of the item ids ``<benchmark>.<doc_id>``; default: the task name.
    model : str or None
        Model id for a single file / a folder of one model. Default: the model named by
        the ``results*.json`` beside each samples file (``model_name`` or
        ``pretrained=``), else the name of its folder.
    min_models : int
        Fewer models is an error.

    Returns
    -------
    ResponseMatrix
        Models in folder order, items ordered by ``doc_id``. When one model has several
        samples files for the task, the latest (timestamp in the name, else mtime) wins.

    Raises
    ------
    SigmapInputError
        No samples files, several tasks without ``task``, invalid JSON lines, missing
        ``doc_id`` or metric, non-binary values, duplicate doc ids, models with
        different item sets (missing values), too few models.

    Examples
    --------
    Two models' ``--log_samples`` output, laid out as lm-eval writes it:

    >>> import json
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_lm_eval_samples
    >>> for model, acc in [("EleutherAI/pythia-160m", [1, 0, 1]),
    ...                    ("EleutherAI/pythia-410m", [1, 1, 1])]:
    ...     folder = Path("lm_eval") / model.replace("/", "__")
    ...     folder.mkdir(parents=True)
    ...     _ = (folder / "results_2024-05-01T10-00-00.json").write_text(
    ...         json.dumps({"results": {}, "model_name": model}))
    ...     _ = (folder / "samples_arc_easy_2024-05-01T10-00-00.jsonl").write_text(
    ...         "".join(json.dumps({"doc_id": i, "acc": a}) + "\\n" for i, a in enumerate(acc)))
    >>> rm = read_lm_eval_samples("lm_eval")
    >>> rm.models, rm.item_ids
    (['EleutherAI/pythia-160m', 'EleutherAI/pythia-410m'],
     ['arc_easy.0', 'arc_easy.1', 'arc_easy.2'])
    >>> rm.matrix.tolist()
    [[1, 0, 1], [1, 1, 1]]
    """
    root = Path(path)
    task, per_model = latest_samples(root, task, model)
    prefix = benchmark or task
    models = list(per_model)
    answers = {m: _read_samples_file(per_model[m], metric, filter)[0] for m in models}
    all_ids = sorted(set().union(*[set(a) for a in answers.values()]))
    items = [f"{prefix}.{d}" for d in all_ids]
    col = {d: j for j, d in enumerate(all_ids)}
    values = np.full((len(models), len(all_ids)), np.nan)
    for i, m in enumerate(models):
        for d, v in answers[m].items():
            values[i, col[d]] = v
    where = [str(per_model[m]) for m in models]
    mat = _check_values(
        values, np.zeros(values.shape, dtype=bool), None, models, items, root, where
    )
    rm = ResponseMatrix(models, items, mat, str(root))
    _check_min_models(rm, min_models)
    return rm


# ---------------------------------------------------------------------------------------
# question texts


def _read_jsonl(path: Path) -> pl.DataFrame:
    rows = [rec for _, rec in iter_jsonl(path, "questions file")]
    if not rows:
        raise SigmapInputError(f"questions file {path}: no records")
    try:
        return pl.from_dicts(rows, infer_schema_length=None)
    except Exception as exc:
        raise SigmapInputError(f"questions file {path}: inconsistent records: {exc}") from exc


def read_questions(
    path: str | Path, *, text_column: str = "text", id_column: str | None = None
) -> pl.DataFrame:
    """Question texts of one benchmark.

    Parameters
    ----------
    path : str or Path
        ``.parquet``, ``.csv`` / ``.tsv`` or ``.jsonl`` (one JSON object per line).
    text_column : str
        Column with the question text.
    id_column : str or None
        Column with the item ids; default ``item_id`` if present, else ``id``, else
        ids are made from the row number as ``<file stem>.<row>`` (row 0 = first data
        row) -- fine for semantic overlap, but they will not match response matrices.

    Returns
    -------
    pl.DataFrame
        Columns ``item_id`` (str) and ``text`` (str), in file order.

    Raises
    ------
    SigmapInputError
        Unreadable / empty file, missing columns, empty texts, duplicate item ids.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_questions
    >>> rows = [{"id": "q1", "text": "What is 2 + 2?"}, {"id": "q2", "text": "Name a river."}]
    >>> _ = Path("arc.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> read_questions("arc.jsonl").rows()
    [('q1', 'What is 2 + 2?'), ('q2', 'Name a river.')]
    >>> _ = Path("quiz.csv").write_text("question\\nWhat is 2 + 2?\\nName a river.\\n")
    >>> read_questions("quiz.csv", text_column="question").rows()  # ids from row numbers
    [('quiz.0', 'What is 2 + 2?'), ('quiz.1', 'Name a river.')]
    """
    p = Path(path)
    what = "questions file"
    if p.suffix.lower() == ".jsonl":
        if not p.is_file():
            raise SigmapInputError(f"{what} {p}: file not found")
        if p.stat().st_size == 0:
            raise SigmapInputError(f"{what} {p}: file is empty")
        df, fkind = _read_jsonl(p), "jsonl"
    else:
        df, fkind = read_table(p, what)

    def label(i: int) -> str:
        return f"line {i + 1}" if fkind == "jsonl" else row_label(fkind, i)

    if text_column not in df.columns:
        raise SigmapInputError(
            f"{what} {p}: text column {text_column!r} not found; columns are {df.columns}"
        )
    if id_column is None:
        id_column = next((c for c in ("item_id", "id") if c in df.columns), None)
    elif id_column not in df.columns:
        raise SigmapInputError(
            f"{what} {p}: id column {id_column!r} not found; columns are {df.columns}"
        )
    text = df.get_column(text_column)
    if text.dtype != pl.String:
        raise SigmapInputError(
            f"{what} {p}: text column {text_column!r} has type {text.dtype}, not strings"
        )
    empty = (text.is_null() | (text.str.strip_chars() == "")).arg_true().to_list()
    if empty:
        rows = ", ".join(label(i) for i in empty[:_N_EX])
        raise SigmapInputError(f"{what} {p}: {len(empty)} empty question text(s) ({rows})")
    if id_column is None:
        ids = pl.Series("item_id", [f"{p.stem}.{i}" for i in range(df.height)])
    else:
        ids = df.get_column(id_column).cast(pl.String).str.strip_chars()
        bad = (ids.is_null() | (ids == "")).arg_true().to_list()
        if bad:
            rows = ", ".join(label(i) for i in bad[:_N_EX])
            raise SigmapInputError(f"{what} {p}: {len(bad)} empty item id(s) ({rows})")
        dmask = ids.is_duplicated()
        if dmask.any():
            dups = ids.filter(dmask).unique(maintain_order=True).to_list()
            raise SigmapInputError(
                f"{what} {p}: duplicate item id(s) in column {id_column!r}: {dups[:_N_EX]}"
            )
    return pl.DataFrame({"item_id": ids, "text": text})


#: metabench benchmark -> (question field, choices field or None)
METABENCH_FIELDS: dict[str, tuple[str, str | None]] = {
    "arc": ("question", "choices"),
    "gsm8k": ("question", None),
    "hellaswag": ("ctx", "endings"),
    "mmlu": ("question", "choices"),
    "truthfulqa": ("question", None),
    "winogrande": ("sentence", None),
}


def _choice_texts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Mapping):  # ARC: {"label": [...], "text": [...]}
        texts = value.get("text") or []
        labels = value.get("label") or []
        if len(labels) == len(texts):
            return [f"{lab}. {t}" for lab, t in zip(labels, texts)]
        return [str(t) for t in texts]
    return [f"{chr(ord('A') + k)}. {t}" for k, t in enumerate(value)]


def metabench_questions(
    path: str | Path, *, benchmark: str | None = None, include_choices: bool = True
) -> pl.DataFrame:
    """Question texts of a metabench item file (``metabench_items/<bm>[-secondary].parquet``).

    Parameters
    ----------
    path : str or Path
        The parquet file.
    benchmark : str or None
        One of arc, gsm8k, hellaswag, mmlu, truthfulqa, winogrande; default: the file
        name before ``-`` / ``.`` (``arc-secondary.parquet`` -> ``arc``).
    include_choices : bool
        Append the answer options (ARC ``choices``, HellaSwag ``endings``, MMLU
        ``choices``) as lines ``A. ...``.

    Returns
    -------
    pl.DataFrame
        ``item_id`` (``<bm>.<metabench_idx>``; MMLU ``mmlu.<mb_sub_idx>``, matching the
        columns of ``item_responses/*.parquet``) and ``text`` (ARC / MMLU question,
        GSM8K / TruthfulQA question, HellaSwag ``ctx``, WinoGrande ``sentence``, each
        with the options when ``include_choices``).

    Raises
    ------
    SigmapInputError
        Unknown benchmark, missing columns, empty texts or duplicate item ids.

    Examples
    --------
    A two-item ARC file with metabench's columns:

    >>> import polars as pl
    >>> from sigmap_lib.inputs import metabench_questions
    >>> pl.DataFrame({
    ...     "metabench_idx": [7, 9],
    ...     "question": ["Which gas do plants take in?", "What melts ice?"],
    ...     "choices": [{"label": ["A", "B"], "text": ["CO2", "O2"]},
    ...                 {"label": ["A", "B"], "text": ["heat", "cold"]}],
    ... }).write_parquet("arc-secondary.parquet")
    >>> metabench_questions("arc-secondary.parquet").rows()  # benchmark from the file name
    [('arc.7', 'Which gas do plants take in?\\nA. CO2\\nB. O2'),
     ('arc.9', 'What melts ice?\\nA. heat\\nB. cold')]
    >>> metabench_questions("arc-secondary.parquet", include_choices=False)["text"].to_list()
    ['Which gas do plants take in?', 'What melts ice?']
    """
    p = Path(path)
    what = "metabench item file"
    bm = benchmark or re.split(r"[-.]", p.name, maxsplit=1)[0].lower()
    if bm not in METABENCH_FIELDS:
        raise SigmapInputError(
            f"{what} {p}: unknown metabench benchmark {bm!r}; expected one of "
            f"{sorted(METABENCH_FIELDS)} (pass benchmark=...)"
        )
    df, _ = read_table(p, what)
    qcol, ccol = METABENCH_FIELDS[bm]
    idcol = "mb_sub_idx" if bm == "mmlu" else "metabench_idx"
    need = [qcol, idcol] + ([ccol] if include_choices and ccol else [])
    absent = [c for c in need if c not in df.columns]
    if absent:
        raise SigmapInputError(
            f"{what} {p}: column(s) {absent} needed for {bm} not found; columns are {df.columns[:12]}"
        )
    ids = [f"{bm}.{v}" for v in df.get_column(idcol).cast(pl.String).to_list()]
    qs = df.get_column(qcol).to_list()
    chs = df.get_column(ccol).to_list() if include_choices and ccol else [None] * df.height
    texts: list[str] = []
    for i, (q, ch) in enumerate(zip(qs, chs)):
        if q is None or not str(q).strip():
            raise SigmapInputError(f"{what} {p}: row {i} ({ids[i]}) has an empty {qcol!r}")
        texts.append("\n".join([str(q).strip(), *_choice_texts(ch)]))
    out = pl.DataFrame(
        {"item_id": ids, "text": texts}, schema={"item_id": pl.String, "text": pl.String}
    )
    dmask = out["item_id"].is_duplicated()
    if dmask.any():
        raise SigmapInputError(
            f"{what} {p}: duplicate item id(s) {out['item_id'].filter(dmask).unique().to_list()[:_N_EX]}"
        )
    return out
