"""Per-unit values of many models brought as a matrix: units (documents, domains, chunks) ×
models from a table or an array file, or from lm-evaluation-harness ``--log_samples`` output
of ``loglikelihood_rolling`` tasks.

Units are opaque ids; text is optional. Values are a per-unit loss of each model:
``bits_per_byte`` (lower is better), ``nats`` (a unit's total negative log-likelihood) or
``nats_per_word``. Every per-unit statistic sigmap computes across models is unchanged when a
unit's values are multiplied by a positive constant, so the measure only has to be the same
for every model of a unit.

Layouts
-------
- **Table** (``.csv``, ``.tsv``, ``.parquet``): one row per unit; an id column (``id``), optional
  grouping columns (document → domain → source) and an optional text column; every other
  column is a model, named by its model id.
- **Arrays** (``.npz``): arrays ``values`` (units × models), ``unit_ids`` and ``models``
  (strings), optionally ``text``; read with ``allow_pickle=False``. (``.npy`` holds no ids:
  save an ``.npz`` with ``np.savez(path, values=..., unit_ids=..., models=...)``.)
- **zarr** (a ``.zarr`` folder): array ``values`` with attributes ``unit_ids`` and ``models``.
- A **pickle** (``.pkl``, ``.pickle``) is never read: loading one runs code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._tables import read_table, row_label
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs.scores._lm_eval import latest_samples

MEASURES = ("bits_per_byte", "nats", "nats_per_word")
PICKLE_SUFFIXES = (".pkl", ".pickle", ".pk", ".joblib")
#: problems listed per file before "... and N more"
_MAX_PROBLEMS = 20


@dataclass
class UnitValues:
    """Per-unit values of many models.

    Attributes
    ----------
    values : numpy.ndarray of float64, shape (n_units, n_models)
    unit_ids : list of str, length n_units
    models : list of str, length n_models
    measure : str
        ``bits_per_byte``, ``nats`` or ``nats_per_word``.
    groups : dict of str to list of str
        Grouping column → the group of each unit (document, domain, source, …).
    text : list of str or None
        The units' text, when known.
    source : str
        The file or folder read.
    """

    values: np.ndarray
    unit_ids: list[str]
    models: list[str]
    measure: str = "bits_per_byte"
    groups: dict[str, list[str]] = field(default_factory=dict)
    text: list[str] | None = None
    source: str = ""


def _refuse_pickle(p: Path) -> None:
    if p.suffix.lower() in PICKLE_SUFFIXES:
        raise SigmapInputError(
            f"{p}: a pickle runs code when it is loaded, so sigmap never unpickles; convert it "
            "where you trust it, e.g. pandas.read_pickle(p).to_parquet('values.parquet')"
        )


def _check_measure(measure: str) -> None:
    if measure not in MEASURES:
        raise SigmapInputError(f"measure {measure!r} is not one of {list(MEASURES)}")


def unit_table_problems(
    path: str | Path,
    *,
    id_column: str = "id",
    group_columns: Sequence[str] = (),
    text_column: str | None = None,
    models: Sequence[str] | None = None,
    measure: str = "bits_per_byte",
) -> tuple[list[str], UnitValues | None]:
    """Every problem of a unit table, one line each naming the file, the row or column and
    the fix; and the values when there is none.

    Checked: the file can be read (and is not a pickle); the id column exists and its ids are
    present and unique; grouping and text columns exist; every model column is numeric,
    finite and (bits per byte) non-negative; with ``models`` (the registry), every column is
    a registered model and every registered model has a column.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import unit_table_problems
    >>> _ = Path("u.csv").write_text("id,org/a,org/b\\nd1,0.9,1.1\\nd1,0.8,\\n")
    >>> problems, values = unit_table_problems("u.csv", models=["org/a", "org/c"])
    >>> for line in problems:
    ...     print(line)
    unit table u.csv, line 3: unit id 'd1' appears twice (first on line 2); give every unit its own id
    unit table u.csv, column 'org/b' line 3: missing value; every model needs a value for every unit
    unit table u.csv, column 'org/b': no registered model has this id; add it to models.yaml or rename the column
    unit table u.csv: registered model 'org/c' has no column; add its values or remove it from models.yaml
    >>> values is None
    True
    """
    import polars as pl

    _check_measure(measure)
    p = Path(path)
    _refuse_pickle(p)
    what = "unit table"
    df, kind = read_table(p, what)
    where = f"{what} {p}"
    problems: list[str] = []
    for col, role in [(id_column, "id"), *((g, "grouping") for g in group_columns)] + (
        [(text_column, "text")] if text_column else []
    ):
        if col not in df.columns:
            problems.append(f"{where}: no {role} column {col!r}; columns are {df.columns[:8]}")
    if problems:
        return problems, None
    meta = {id_column, *group_columns, *([text_column] if text_column else [])}
    cols = [c for c in df.columns if c not in meta]
    if not cols:
        return [f"{where}: no model columns (every column besides {sorted(meta)} is a model)"], None
    ids = df[id_column].cast(pl.String).to_list()
    first: dict[str, int] = {}
    for i, u in enumerate(ids):
        if u is None or not str(u).strip():
            problems.append(f"{where}, {row_label(kind, i)}: empty unit id; give every unit an id")
        elif u in first:
            problems.append(
                f"{where}, {row_label(kind, i)}: unit id {u!r} appears twice (first on "
                f"{row_label(kind, first[u])}); give every unit its own id"
            )
        else:
            first[u] = i
    values = np.empty((df.height, len(cols)))
    for j, c in enumerate(cols):
        raw = df[c]
        try:
            x = raw.cast(pl.Float64, strict=False).to_numpy().astype(np.float64)
        except Exception:
            problems.append(f"{where}, column {c!r}: not numbers; a model column holds values")
            continue
        for i in np.flatnonzero(~np.isfinite(x))[:3]:
            cell = raw[int(i)]
            text = "" if cell is None else str(cell).strip()
            why = (
                "missing value"
                if not text
                else "NaN"
                if text.lower() == "nan"
                else f"{cell!r} is not a finite number"
            )
            problems.append(
                f"{where}, column {c!r} {row_label(kind, int(i))}: {why}; every model needs a "
                "value for every unit"
            )
        if measure == "bits_per_byte" and (x[np.isfinite(x)] < 0).any():
            i = int(np.flatnonzero(x < 0)[0])
            problems.append(
                f"{where}, column {c!r} {row_label(kind, i)}: negative bits per byte "
                f"({x[i]:g}); is the column a log-likelihood? pass measure='nats' or negate it"
            )
        values[:, j] = x
    if models is not None:
        reg = list(models)
        for c in cols:
            if c not in reg:
                problems.append(
                    f"{where}, column {c!r}: no registered model has this id; add it to "
                    "models.yaml or rename the column"
                )
        for m in reg:
            if m not in cols:
                problems.append(
                    f"{where}: registered model {m!r} has no column; add its values or remove "
                    "it from models.yaml"
                )
    if len(problems) > _MAX_PROBLEMS:
        problems = [
            *problems[:_MAX_PROBLEMS],
            f"{where}: ... and {len(problems) - _MAX_PROBLEMS} more",
        ]
    if problems:
        return problems, None
    return [], UnitValues(
        values=values,
        unit_ids=[str(u) for u in ids],
        models=cols,
        measure=measure,
        groups={g: [str(v) for v in df[g].cast(pl.String).to_list()] for g in group_columns},
        text=None if not text_column else [str(t) for t in df[text_column].to_list()],
        source=str(p),
    )


def read_unit_matrix(
    path: str | Path,
    *,
    id_column: str = "id",
    group_columns: Sequence[str] = (),
    text_column: str | None = None,
    models: Sequence[str] | None = None,
    measure: str = "bits_per_byte",
) -> UnitValues:
    """Read per-unit values of many models from a table, an ``.npz`` or a zarr folder.

    Parameters
    ----------
    path : path
        ``.csv`` / ``.tsv`` / ``.parquet`` (a unit table), ``.npz`` or ``.zarr``.
    id_column, group_columns, text_column : str
        The table's unit-id column, grouping columns and text column.
    models : sequence of str, optional
        The registered model ids the columns must match.
    measure : {"bits_per_byte", "nats", "nats_per_word"}

    Returns
    -------
    UnitValues

    Raises
    ------
    SigmapInputError
        Every problem (:func:`unit_table_problems`), one line each; a pickle; an ``.npy``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.inputs import read_unit_matrix
    >>> np.savez("v.npz", values=np.array([[0.9, 1.1], [0.8, 1.0]]),
    ...          unit_ids=np.array(["d1", "d2"]), models=np.array(["org/a", "org/b"]))
    >>> uv = read_unit_matrix("v.npz")
    >>> uv.values.shape, uv.unit_ids, uv.models
    ((2, 2), ['d1', 'd2'], ['org/a', 'org/b'])
    >>> read_unit_matrix("values.pkl")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: values.pkl: a pickle runs code when it is loaded, so
    sigmap never unpickles; convert it where you trust it, e.g.
    pandas.read_pickle(p).to_parquet('values.parquet')
    """
    _check_measure(measure)
    p = Path(path)
    _refuse_pickle(p)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        raise SigmapInputError(
            f"{p}: an .npy array has no unit or model ids; save an .npz with "
            "np.savez(path, values=..., unit_ids=..., models=...)"
        )
    if suffix in (".npz", ".zarr"):
        uv = _read_arrays(p, measure)
        _check_arrays(uv, models)
        return uv
    problems, uv = unit_table_problems(
        p,
        id_column=id_column,
        group_columns=group_columns,
        text_column=text_column,
        models=models,
        measure=measure,
    )
    if problems:
        raise SigmapInputError("\n".join(problems))
    assert uv is not None
    return uv


def _read_arrays(p: Path, measure: str) -> UnitValues:
    if not p.exists():
        raise SigmapInputError(f"{p}: not found")
    try:
        if p.suffix.lower() == ".npz":
            with np.load(p, allow_pickle=False) as z:
                missing = [k for k in ("values", "unit_ids", "models") if k not in z.files]
                if missing:
                    raise SigmapInputError(
                        f"{p}: arrays {missing} missing (has {z.files}); save values, unit_ids "
                        "and models"
                    )
                values, ids, mods = z["values"], z["unit_ids"], z["models"]
                text = z["text"].tolist() if "text" in z.files else None
        else:
            import zarr

            arr = zarr.open_array(str(p / "values"), mode="r")
            values = np.asarray(arr[...])
            ids, mods = arr.attrs.get("unit_ids"), arr.attrs.get("models")
            if ids is None or mods is None:
                raise SigmapInputError(f"{p}/values: attributes unit_ids and models are required")
            text = arr.attrs.get("text")
    except SigmapInputError:
        raise
    except ValueError as exc:  # an object array needs pickle
        raise SigmapInputError(
            f"{p}: cannot be read without unpickling ({exc}); store ids as strings (dtype 'U')"
        ) from exc
    values = np.asarray(values, dtype=np.float64)
    return UnitValues(
        values=values,
        unit_ids=[str(u) for u in np.asarray(ids).tolist()],
        models=[str(m) for m in np.asarray(mods).tolist()],
        measure=measure,
        text=None if text is None else [str(t) for t in text],
        source=str(p),
    )


def _check_arrays(uv: UnitValues, models: Sequence[str] | None) -> None:
    p = uv.source
    problems: list[str] = []
    if uv.values.ndim != 2 or uv.values.shape != (len(uv.unit_ids), len(uv.models)):
        raise SigmapInputError(
            f"{p}: values have shape {uv.values.shape}, expected (units, models) = "
            f"({len(uv.unit_ids)}, {len(uv.models)}) from unit_ids and models"
        )
    seen: dict[str, int] = {}
    for i, u in enumerate(uv.unit_ids):
        if u in seen:
            problems.append(
                f"{p}: unit id {u!r} at rows {seen[u]} and {i}; give every unit its own id"
            )
        seen.setdefault(u, i)
    bad = np.argwhere(~np.isfinite(uv.values))
    for r, c in bad[:3]:
        problems.append(
            f"{p}: model {uv.models[c]!r} unit {uv.unit_ids[r]!r} (row {r}): not a finite number"
        )
    if models is not None:
        problems += [f"{p}: model {m!r} is not registered" for m in uv.models if m not in models]
        problems += [
            f"{p}: registered model {m!r} has no values" for m in models if m not in uv.models
        ]
    if problems:
        raise SigmapInputError("\n".join(problems[:_MAX_PROBLEMS]))


def read_lm_eval_rolling(
    path: str | Path,
    *,
    task: str | None = None,
    measure: str = "bits_per_byte",
    model: str | None = None,
    min_models: int = 1,
) -> UnitValues:
    """Per-document values from lm-evaluation-harness ``--log_samples`` output of a
    ``loglikelihood_rolling`` task (wikitext-style perplexity tasks).

    lm-eval logs, per document, ``bits_per_byte`` / ``byte_perplexity`` as
    ``[loglikelihood, bytes]`` and ``word_perplexity`` as ``[loglikelihood, words]``. They
    become a document's bits per byte ``−ll / (bytes · ln 2)`` (``measure="bits_per_byte"``),
    its total ``−ll`` (``"nats"``) or ``−ll / words`` (``"nats_per_word"``).

    Parameters
    ----------
    path : path
        A samples file or a folder searched recursively (one sub-folder per model).
    task : str, optional
        The task; default the only one present.
    measure : {"bits_per_byte", "nats", "nats_per_word"}
    model : str, optional
        Model id of a single file or a folder of one model (default: from each folder's
        ``results*.json``, else the folder name).
    min_models : int

    Returns
    -------
    UnitValues
        Unit ids ``<task>.<doc_id>``, the documents' text (lm-eval's ``target``), models in
        folder order (per model the latest samples file).

    Raises
    ------
    SigmapInputError
        No samples, several tasks without ``task``, a line without the metric, models with
        different documents (or the same ``doc_id`` with different text), too few models.

    Examples
    --------
    >>> import json, math
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_lm_eval_rolling
    >>> docs = ["a river stone", "two words"]
    >>> for model, lls in [("org/small", [-20.0, -14.0]), ("org/large", [-13.0, -9.0])]:
    ...     folder = Path("rolling") / model.replace("/", "__")
    ...     folder.mkdir(parents=True)
    ...     _ = (folder / "results_2025-01-01T00-00-00.json").write_text(
    ...         json.dumps({"results": {}, "model_name": model}))
    ...     lines = [json.dumps({"doc_id": i, "target": t, "doc_hash": str(i),
    ...                          "bits_per_byte": [ll, len(t.encode())],
    ...                          "word_perplexity": [ll, len(t.split())]})
    ...              for i, (t, ll) in enumerate(zip(docs, lls))]
    ...     _ = (folder / "samples_mytext_2025-01-01T00-00-00.jsonl").write_text(
    ...         "\\n".join(lines))
    >>> uv = read_lm_eval_rolling("rolling")
    >>> uv.models, uv.unit_ids, uv.text
    (['org/large', 'org/small'], ['mytext.0', 'mytext.1'], ['a river stone', 'two words'])
    >>> bool(abs(uv.values[0, 1] - 20.0 / (13 * math.log(2))) < 1e-12)
    True
    """
    _check_measure(measure)
    root = Path(path)
    task, per_model = latest_samples(root, task, model)
    models = sorted(per_model)
    if len(models) < min_models:
        raise SigmapInputError(
            f"lm-eval samples {root}: task {task!r} has {len(models)} model(s), need {min_models}"
        )
    docs: dict[str, tuple[Any, str]] = {}
    cols: list[dict[str, float]] = []
    for m in models:
        col: dict[str, float] = {}
        f = per_model[m]
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SigmapInputError(f"lm-eval samples {f}, line {n}: not JSON ({exc})") from exc
            key = "word_perplexity" if measure == "nats_per_word" else "bits_per_byte"
            pair = rec.get(key) or (rec.get("byte_perplexity") if key == "bits_per_byte" else None)
            if pair is None or "doc_id" not in rec:
                raise SigmapInputError(
                    f"lm-eval samples {f}, line {n}: no doc_id or {key} [loglikelihood, count]; "
                    "is the task a loglikelihood_rolling task with that metric?"
                )
            ll, count = float(pair[0]), float(pair[1])
            d = str(rec["doc_id"])
            text = rec.get("target")
            ident = rec.get("doc_hash", text)
            if d in docs and docs[d][0] != ident:
                raise SigmapInputError(
                    f"lm-eval samples {f}, line {n}: document {d} differs from the other "
                    "models' document of that id (another task version?); rerun with one version"
                )
            docs.setdefault(d, (ident, "" if text is None else str(text)))
            if measure == "nats":
                col[d] = -ll
            elif measure == "bits_per_byte":
                col[d] = -ll / (count * math.log(2.0))
            else:
                col[d] = -ll / count
        cols.append(col)
    order = sorted(docs, key=lambda s: (len(s), s))
    for m, col in zip(models, cols):
        missing = [d for d in order if d not in col]
        if missing:
            raise SigmapInputError(
                f"lm-eval samples {per_model[m]}: model {m!r} has no value for document(s) "
                f"{missing[:5]} that other models have; run every model on the same documents"
            )
    values = np.array([[col[d] for col in cols] for d in order], dtype=np.float64)
    return UnitValues(
        values=values,
        unit_ids=[f"{task}.{d}" for d in order],
        models=models,
        measure=measure,
        text=[docs[d][1] for d in order],
        source=str(root),
    )
