"""lm-evaluation-harness result folders (``results*.json``) as canonical score tables."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from sigmap_lib._util._files import files_in
from sigmap_lib._util._tables import load_json
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs.scores._common import SCORE_SCHEMA, check_rename

#: lm-evaluation-harness metrics tried, in order, for a task not named in ``metrics``.
DEFAULT_LM_EVAL_METRICS: tuple[str, ...] = (
    "acc_norm,none",
    "acc,none",
    "exact_match,strict-match",
    "exact_match,flexible-extract",
    "exact_match,none",
    "prompt_level_strict_acc,none",
    "inst_level_strict_acc,none",
    "mc2",
    "acc_norm",
    "acc",
    "exact_match",
)


# --- lm-evaluation-harness --------------------------------------------------------------

_TS = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)")


def _timestamp_from_name(name: str) -> float | None:
    m = _TS.search(name)
    if not m:
        return None
    text = m.group(1)
    date, _, clock = text.partition("T")
    clock = clock.replace("-", ":", 2)
    try:
        return datetime.fromisoformat(f"{date}T{clock}").timestamp()
    except ValueError:
        return None


def file_time(path: Path, data: Mapping[str, Any] | None = None) -> float:
    """When an lm-eval file was written: ``date`` field, else name timestamp, else mtime.

    Seconds since the epoch; ``data`` is the file's parsed JSON, when it has been read.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import file_time
    >>> file_time(Path("results.json"), {"date": 1714564800.0})
    1714564800.0
    >>> p = Path("results_2024-05-01T12-00-00.json")
    >>> _ = p.write_text("{}")
    >>> file_time(p) == file_time(p, {}) != p.stat().st_mtime  # the name's timestamp
    True
    """
    if data is not None:
        d = data.get("date")
        if isinstance(d, int | float) and not isinstance(d, bool) and math.isfinite(d):
            return float(d)
    t = _timestamp_from_name(path.name)
    return t if t is not None else path.stat().st_mtime


def _parse_model_args(model_args: Any) -> dict[str, str]:
    if isinstance(model_args, Mapping):
        return {str(k): str(v) for k, v in model_args.items()}
    if not isinstance(model_args, str):
        return {}
    out: dict[str, str] = {}
    for part in model_args.split(","):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def lm_eval_model_id(data: Mapping[str, Any], path: Path) -> str:
    """Model id of an lm-evaluation-harness results document.

    ``model_name`` (lm-eval >= 0.4.3) if present and non-empty, else the ``pretrained``
    (or ``model`` / ``path`` / ``engine``) entry of ``config.model_args``.

    Raises
    ------
    SigmapInputError
        If neither is present (the message names ``path``).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import lm_eval_model_id
    >>> lm_eval_model_id({"model_name": "EleutherAI/pythia-160m"}, Path("results.json"))
    'EleutherAI/pythia-160m'
    >>> doc = {"config": {"model_args": "pretrained=EleutherAI/pythia-160m,dtype=float16"}}
    >>> lm_eval_model_id(doc, Path("results.json"))
    'EleutherAI/pythia-160m'
    """
    name = data.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    config = data.get("config")
    args = _parse_model_args(config.get("model_args") if isinstance(config, Mapping) else None)
    for key in ("pretrained", "model", "path", "engine", "model_name"):
        if args.get(key):
            return args[key]
    raise SigmapInputError(
        f"lm-eval results {path}: cannot tell the model: no 'model_name' and no "
        f"pretrained=... in config.model_args; pass model=..."
    )


def _pick_metric(
    entry: Mapping[str, Any],
    task: str,
    wanted: str | None,
    defaults: Sequence[str],
    path: Path,
) -> str | None:
    """Key of the metric to use for ``task``; None for a task without numeric metrics."""
    numeric = [
        k
        for k, v in entry.items()
        if k != "alias"
        and "_stderr" not in k
        and isinstance(v, int | float)
        and not isinstance(v, bool)
    ]
    if wanted is not None:
        for cand in (wanted, f"{wanted},none"):
            if cand in entry:
                return cand
        raise SigmapInputError(
            f"lm-eval results {path}: task {task!r} has no metric {wanted!r}; available: {numeric}"
        )
    if not numeric:
        return None
    for cand in defaults:
        if cand in entry:
            return cand
    raise SigmapInputError(
        f"lm-eval results {path}: task {task!r} has none of the default metrics "
        f"{list(defaults)}; available: {numeric}; pass metrics={{{task!r}: ...}} or leave "
        f"the task out with tasks=[...]"
    )


def read_lm_eval_results(
    path: str | Path,
    *,
    metrics: Mapping[str, str] | None = None,
    default_metrics: Sequence[str] = DEFAULT_LM_EVAL_METRICS,
    tasks: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
    model: str | None = None,
    on_conflict: Literal["latest", "error"] = "latest",
) -> pl.DataFrame:
    """Read lm-evaluation-harness output: every ``results*.json`` under ``path``.

    Each file is ``{"results": {task: {"acc,none": 0.5, "acc_stderr,none": ...,
    "alias": ...}}, "config": {"model_args": "pretrained=ORG/NAME,..."},
    "model_name": ..., "date": ...}``.

    Parameters
    ----------
    path : str or Path
        A results JSON file, or a folder searched recursively (lm-eval writes
        ``<out>/<org__name>/results_<timestamp>.json``).
    metrics : mapping or None
        Task -> metric key (``"acc_norm,none"``; a bare ``"acc_norm"`` also matches
        ``"acc_norm,none"``). A task named here must have that metric.
    default_metrics : sequence of str
        Metric keys tried in order for the other tasks. A task with numeric metrics but
        none of these is an error (lower-is-better metrics such as perplexity are not
        scores); entries without any numeric metric (group headers) are skipped.
    tasks : sequence of str or None
        Read only these tasks (each must occur in some file).
    rename : mapping or None
        Task -> benchmark name in the output (default: the task name).
    model : str or None
        Model id for every file (default: from each file, see :func:`lm_eval_model_id`).
    on_conflict : {"latest", "error"}
        Several files with the same (model, task): ``"latest"`` (default) keeps the value
        of the most recent file (``date`` field, else the timestamp in the file name,
        else the modification time); ``"error"`` raises if their values differ.

    Returns
    -------
    pl.DataFrame
        Long table ``model, benchmark, score`` (scores as lm-eval reports them,
        usually in [0, 1]), ordered by model then task.

    Raises
    ------
    SigmapInputError
        No results files, unreadable JSON, no ``results`` mapping, unknown model, a
        missing or non-numeric metric, a lower-is-better metric (per the file's
        ``higher_is_better``), or conflicting values with ``on_conflict="error"``.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_lm_eval_results
    >>> folder = Path("lm_eval/EleutherAI__pythia-160m")
    >>> folder.mkdir(parents=True)
    >>> doc = {
    ...     "results": {
    ...         "arc_easy": {"alias": "arc_easy", "acc,none": 0.43, "acc_norm,none": 0.39},
    ...         "gsm8k": {"exact_match,strict-match": 0.02},
    ...     },
    ...     "config": {"model_args": "pretrained=EleutherAI/pythia-160m,dtype=float16"},
    ... }
    >>> _ = (folder / "results_2024-05-01T10-00-00.json").write_text(json.dumps(doc))
    >>> read_lm_eval_results("lm_eval").rows()  # acc_norm is preferred by default
    [('EleutherAI/pythia-160m', 'arc_easy', 0.39), ('EleutherAI/pythia-160m', 'gsm8k', 0.02)]
    >>> scores = read_lm_eval_results(
    ...     "lm_eval", metrics={"arc_easy": "acc"}, rename={"arc_easy": "arc"}
    ... )
    >>> scores["benchmark", "score"].rows()
    [('arc', 0.43), ('gsm8k', 0.02)]
    """
    root = Path(path)
    files = files_in(root, "results*.json", "lm-eval results")
    if not files:
        raise SigmapInputError(f"lm-eval results {root}: no results*.json files found")
    if on_conflict not in ("latest", "error"):
        raise SigmapInputError(f"on_conflict must be 'latest' or 'error', got {on_conflict!r}")
    metrics = dict(metrics or {})
    wanted_tasks = None if tasks is None else set(tasks)
    # (model, task) -> list of (time, value, file, metric)
    found: dict[tuple[str, str], list[tuple[float, float, Path, str]]] = {}
    for f in files:
        data = load_json(f, "lm-eval results")
        if not isinstance(data, Mapping) or not isinstance(data.get("results"), Mapping):
            raise SigmapInputError(f"lm-eval results {f}: no 'results' mapping (task -> metrics)")
        mid = model if model is not None else lm_eval_model_id(data, f)
        when = file_time(f, data)
        hib = (
            data.get("higher_is_better")
            if isinstance(data.get("higher_is_better"), Mapping)
            else {}
        )
        for task, entry in data["results"].items():
            if wanted_tasks is not None and task not in wanted_tasks:
                continue
            if not isinstance(entry, Mapping):
                raise SigmapInputError(f"lm-eval results {f}: task {task!r} is not a mapping")
            key = _pick_metric(entry, task, metrics.get(task), default_metrics, f)
            if key is None:
                continue
            value = entry[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise SigmapInputError(
                    f"lm-eval results {f}: task {task!r} metric {key!r} is {value!r}, not a finite number"
                )
            base = key.split(",")[0]
            task_hib = hib.get(task) if isinstance(hib, Mapping) else None
            if isinstance(task_hib, Mapping) and task_hib.get(base) is False:
                raise SigmapInputError(
                    f"lm-eval results {f}: task {task!r} metric {key!r} is lower-is-better; "
                    f"scores must be higher = better, choose another metric with metrics=..."
                )
            found.setdefault((mid, task), []).append((when, float(value), f, key))
    if wanted_tasks is not None:
        absent = sorted(wanted_tasks - {t for _, t in found})
        if absent:
            raise SigmapInputError(
                f"lm-eval results {root}: task(s) {absent} not found in any file"
            )
    if not found:
        raise SigmapInputError(f"lm-eval results {root}: no task with a numeric metric")
    rename = check_rename(rename, sorted({t for _, t in found}), root)
    rows = []
    for (mid, task), vals in sorted(found.items()):
        vals.sort(key=lambda t: (t[0], str(t[2])))
        if on_conflict == "error":
            distinct = {v for _, v, _, _ in vals}
            if len(distinct) > 1:
                where = "; ".join(f"{fp} ({k}): {v:g}" for _, v, fp, k in vals)
                raise SigmapInputError(
                    f"lm-eval results: model {mid!r} task {task!r} has different values in "
                    f"several files: {where}"
                )
        rows.append((mid, rename.get(task, task), vals[-1][1]))
    return pl.DataFrame(rows, schema=SCORE_SCHEMA, orient="row")


# lm-evaluation-harness output folders and samples files

_SAMPLES = re.compile(r"^samples_(?P<task>.+?)(?:_(?P<ts>\d{4}-\d{2}-\d{2}T[\d.\-:]+))?\.jsonl$")


def samples_task(path: Path) -> str | None:
    """The lm-eval task of a ``samples_<task>[_<timestamp>].jsonl`` file (``None`` for
    another name).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import samples_task
    >>> samples_task(Path("out/samples_arc_challenge_2024-05-01T12-00-00.123.jsonl"))
    'arc_challenge'
    >>> samples_task(Path("samples_gsm8k.jsonl")), samples_task(Path("results.json"))
    ('gsm8k', None)
    """
    m = _SAMPLES.match(path.name)
    return m.group("task") if m else None


def latest_samples(
    path: str | Path, task: str | None = None, model: str | None = None
) -> tuple[str, dict[str, Path]]:
    """The task and, per model, its latest ``samples_<task>_<time>.jsonl`` under ``path``.

    ``task`` defaults to the only task present; ``model`` names the model of a single file
    or a one-model folder (default: :func:`lm_eval_folder_model` of each file's folder).
    A file named otherwise, no samples, several tasks without ``task`` and an absent task
    are errors naming ``path``.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import latest_samples
    >>> for stamp in ("2024-05-01T10-00-00", "2024-06-01T10-00-00"):
    ...     Path("runs/org__m").mkdir(parents=True, exist_ok=True)
    ...     _ = Path(f"runs/org__m/samples_piqa_{stamp}.jsonl").write_text("")
    >>> task, files = latest_samples("runs")
    >>> task, {m: f.name for m, f in files.items()}
    ('piqa', {'org__m': 'samples_piqa_2024-06-01T10-00-00.jsonl'})
    """
    root = Path(path)
    by_task: dict[str, list[Path]] = {}
    for f in files_in(root, "samples_*.jsonl", "lm-eval samples"):
        t = samples_task(f)
        if t is None:
            raise SigmapInputError(
                f"lm-eval samples {f}: file name is not samples_<task>_<timestamp>.jsonl"
            )
        by_task.setdefault(t, []).append(f)
    if not by_task:
        raise SigmapInputError(f"lm-eval samples {root}: no samples_*.jsonl files found")
    if task is None:
        if len(by_task) > 1:
            raise SigmapInputError(
                f"lm-eval samples {root}: several tasks {sorted(by_task)}; pass task=..."
            )
        task = next(iter(by_task))
    if task not in by_task:
        raise SigmapInputError(
            f"lm-eval samples {root}: no samples for task {task!r}; tasks are {sorted(by_task)}"
        )
    cache: dict[Path, str] = {}
    per_model: dict[str, Path] = {}
    for f in by_task[task]:
        mid = model if model is not None else lm_eval_folder_model(f.parent, cache)
        prev = per_model.get(mid)
        if prev is None or (file_time(f), str(f)) > (file_time(prev), str(prev)):
            per_model[mid] = f
    return task, per_model


def lm_eval_folder_model(folder: Path, cache: dict[Path, str]) -> str:
    """Model id of an lm-eval output folder: its latest results*.json, else the folder name.

    ``cache`` (folder -> id) is read and filled, so each folder is read once.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import lm_eval_folder_model
    >>> run = Path("logs/run1")
    >>> run.mkdir(parents=True)
    >>> _ = (run / "results_1.json").write_text(json.dumps({"model_name": "org/model"}))
    >>> Path("logs/other").mkdir()
    >>> cache = {}
    >>> lm_eval_folder_model(run, cache), lm_eval_folder_model(Path("logs/other"), cache)
    ('org/model', 'other')
    """
    if folder in cache:
        return cache[folder]
    results = sorted(folder.glob("results*.json"))
    if results:
        docs = [(f, load_json(f, "lm-eval results")) for f in results]
        f, data = max(docs, key=lambda t: (file_time(t[0], t[1]), str(t[0])))
        if not isinstance(data, Mapping):
            raise SigmapInputError(f"lm-eval results {f}: expected a JSON object")
        mid = lm_eval_model_id(data, f)
    else:
        mid = folder.name
    cache[folder] = mid
    return mid
