"""Per-item answers of models from lm-evaluation-harness ``--log_samples`` output.

``lm_eval ... --output_path OUT --log_samples`` writes, per model, a folder with
``results_<timestamp>.json`` (the model id) and one ``samples_<task>_<timestamp>.jsonl`` per
task: a line per document (and per filter for generation tasks) with the document, the
model's responses and per-sample metrics. :func:`read_lm_eval_answers` turns such folders
into 0/1 answers per model, benchmark and item id, with the correctness rule of each task
(the manifest written by :func:`sigmap_lib.metabench.write_lm_eval_tasks`, or the rules of
lm-eval's own metabench tasks).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._files import files_in
from sigmap_lib._util._tables import iter_jsonl, load_json
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import file_time, lm_eval_folder_model, samples_task
from sigmap_lib.metabench._tasks import PUBLISHED_BENCHMARKS


@dataclass(frozen=True)
class TaskRule:
    """How one task's samples become 0/1 answers to a fit's benchmark.

    Attributes
    ----------
    benchmark : str
    metric : str
        ``acc`` / ``acc_norm`` / ``acc_bytes`` / ``exact_match``: the sample's field of that
        name; ``greedy`` / ``ll_threshold``: recomputed from the gold continuation's logged
        loglikelihood (``threshold`` nats per UTF-8 byte) or greedy flag.
    filter : str or None
        Generation tasks log one line per filter; only this one's lines count.
    threshold : float or None
    items : frozenset of str or None
        The fit's item ids for this benchmark (None: not checked here).
    """

    benchmark: str
    metric: str = "acc"
    filter: str | None = None
    threshold: float | None = None
    items: frozenset[str] | None = None


def manifest_rules(tasks_dir: str | Path) -> dict[str, TaskRule]:
    """The rules recorded by :func:`write_lm_eval_tasks` in ``<tasks_dir>/sigmap_tasks.json``.

    Examples
    --------
    >>> from sigmap_lib.metabench import TaskSpec, manifest_rules, write_lm_eval_tasks
    >>> spec = TaskSpec("sigmap_arith", "arith", "multiple_choice", "acc",
    ...                 docs=[{"item_id": "q1", "context": "1 + 1 =", "choices": [" 2"], "gold": 0}])
    >>> rules = manifest_rules(write_lm_eval_tasks("tasks", [spec], group="g"))
    >>> rules["sigmap_arith"].benchmark, sorted(rules["sigmap_arith"].items)
    ('arith', ['q1'])
    """
    path = Path(tasks_dir) / "sigmap_tasks.json"
    if not path.exists():
        raise SigmapInputError(f"{path} is missing: pass the folder written by export-tasks")
    data = load_json(path, "task manifest")
    return {
        name: TaskRule(
            benchmark=t["benchmark"],
            metric=t["metric"],
            filter=t.get("filter"),
            threshold=t.get("threshold"),
            items=frozenset(t["items"]),
        )
        for name, t in data.get("tasks", {}).items()
    }


def fit_rules(
    items: Mapping[str, Sequence[str]], tasks_dir: str | Path | None = None, prefix: str = "sigmap"
) -> dict[str, TaskRule]:
    """Rules for a sigmap fit: the export's manifest when ``tasks_dir`` holds one, else
    ``acc`` on tasks named ``<prefix>_<benchmark>`` (the names :func:`fit_tasks` gives).

    Examples
    --------
    >>> from sigmap_lib.metabench import fit_rules
    >>> r = fit_rules({"arith": ["q1", "q2"]})
    >>> r["sigmap_arith"].metric, sorted(r["sigmap_arith"].items)
    ('acc', ['q1', 'q2'])
    """
    if tasks_dir is not None and (Path(tasks_dir) / "sigmap_tasks.json").exists():
        return manifest_rules(tasks_dir)
    return {
        f"{prefix}_{bm}": TaskRule(benchmark=bm, items=frozenset(map(str, ids)))
        for bm, ids in items.items()
    }


def published_rules(
    version: str, items: Mapping[str, Sequence[str]] | None = None
) -> dict[str, TaskRule]:
    """Rules for metabench's own lm-eval task names of ``version`` and sigmap's exports.

    Both ``metabench_<bm>[_secondary]`` (lm-eval's tasks, item ids from
    ``doc.metabench_idx`` / ``doc.mb_sub_idx``) and ``sigmap_metabench_<bm>[_secondary]``
    (:func:`published_tasks`) map to benchmark ``bm``. ``_permute`` variants are the same
    items with shuffled options and count too.

    Examples
    --------
    >>> from sigmap_lib.metabench import published_rules
    >>> r = published_rules("B")
    >>> r["metabench_gsm8k_secondary"].metric, r["metabench_gsm8k_secondary"].filter
    ('exact_match', 'strict-match')
    >>> sorted(r)[:2]
    ['metabench_arc_secondary', 'metabench_arc_secondary_permute']
    """
    suffix = "" if version == "A" else "_secondary"
    out = {}
    for bm in PUBLISHED_BENCHMARKS:
        if items is not None and bm not in items:
            continue
        ids = frozenset(map(str, items[bm])) if items is not None else None
        rule = TaskRule(
            benchmark=bm,
            metric="exact_match" if bm == "gsm8k" else "acc",
            filter="strict-match" if bm == "gsm8k" else None,
            items=ids,
        )
        for prefix in ("metabench", "sigmap_metabench"):
            out[f"{prefix}_{bm}{suffix}"] = rule
            if bm != "gsm8k":
                out[f"{prefix}_{bm}{suffix}_permute"] = rule
    return out


_OTHER_VERSION = re.compile(
    r"^(?:sigmap_)?metabench_(?P<bm>[a-z0-9]+?)(?P<sec>_secondary)?(?:_permute)?$"
)


def _item_id(doc: Mapping[str, Any], benchmark: str) -> str | None:
    if "item_id" in doc:
        return str(doc["item_id"])
    if benchmark == "mmlu" and "mb_sub_idx" in doc:
        return f"mmlu.{doc['mb_sub_idx']}"
    if "metabench_idx" in doc:
        return f"{benchmark}.{int(doc['metabench_idx'])}"
    return None


def _float(v: Any) -> float:
    return float(v[0] if isinstance(v, list | tuple) else v)


def _correct(rec: Mapping[str, Any], rule: TaskRule, where: str) -> int:
    """0/1 for one sample line under ``rule``."""
    if rule.metric in ("greedy", "ll_threshold"):
        doc = rec.get("doc", {})
        resps = rec.get("filtered_resps") or rec.get("resps")
        if isinstance(resps, str):  # lm-eval logs nested lists as their repr
            try:
                resps = ast.literal_eval(resps)
            except (ValueError, SyntaxError) as exc:
                raise SigmapInputError(f"{where}: 'filtered_resps' is not a list: {exc}") from exc
        gold = doc.get("gold")
        if not isinstance(resps, list) or not isinstance(gold, int) or gold >= len(resps):
            raise SigmapInputError(
                f"{where}: metric {rule.metric} needs the gold choice's logged loglikelihood "
                "('filtered_resps' and doc 'gold')"
            )
        ll, greedy = resps[gold] if isinstance(resps[gold], list | tuple) else (resps[gold], None)
        ll = _float(ll)
        if rule.metric == "greedy":
            return int(str(greedy).lower() == "true")
        n = max(1, len(doc["choices"][gold].encode("utf-8")))
        return int(ll / n >= float(rule.threshold))
    if rule.metric not in rec:
        numeric = [k for k, v in rec.items() if isinstance(v, int | float) and k != "doc_id"]
        raise SigmapInputError(
            f"{where}: no correctness field {rule.metric!r} (numeric fields: {numeric}); "
            "was lm-eval run with the exported tasks and --log_samples?"
        )
    v = float(rec[rule.metric])
    if v not in (0.0, 1.0):
        raise SigmapInputError(f"{where}: {rule.metric} = {v!r} is not 0 or 1")
    return int(v)


@dataclass
class LogAnswers:
    """Answers read from lm-eval logs: ``answers[model][benchmark]`` maps item id -> 0/1.

    Attributes
    ----------
    answers : dict
    files : dict
        ``(model, benchmark) -> samples file`` each answer set came from.
    ignored : list of str
        Samples files of tasks the rules do not cover (other benchmarks the model ran).
    replaced : list of (str, str)
        ``(kept, dropped)`` samples files where ``latest=True`` kept the newer of two logs
        of one model and benchmark.
    labels : dict
        Model -> a short display name (:func:`model_label`).
    """

    answers: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    files: dict[tuple[str, str], Path] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ignored_tasks(self) -> list[str]:
        """The task names of :attr:`ignored`, sorted."""
        return sorted({samples_task(Path(f)) or Path(f).name for f in self.ignored})


def model_label(model: str) -> str:
    """A short display name of a model id taken from lm-eval's results.

    A Hugging Face id (``org/name``) stays as it is. A local path (absolute, ``./``,
    ``~``, or more than two components) becomes its last component; a folder converted from
    a GGUF file by :func:`sigmap_lib.nll.convert_gguf` (a ``gguf_source.json`` inside,
    named by a hash) becomes the GGUF file's name without ``.gguf`` when the folder is
    readable here.

    Examples
    --------
    >>> from sigmap_lib.metabench import model_label
    >>> model_label("EleutherAI/pythia-160m"), model_label("/scratch/models/my-llama-7b/")
    ('EleutherAI/pythia-160m', 'my-llama-7b')
    """
    import json

    text = model.strip()
    path = Path(text).expanduser()
    looks_local = text.startswith(("/", ".", "~")) or len(path.parts) > 2
    if not looks_local:
        return text
    source = path / "gguf_source.json"
    try:
        name = json.loads(source.read_text(encoding="utf-8")).get("gguf_file")
    except (OSError, ValueError, AttributeError):
        name = None
    if isinstance(name, str) and name.strip():
        return Path(name.strip()).name.removesuffix(".gguf")
    return path.name or text


def read_lm_eval_answers(
    paths: str | Path | Sequence[str | Path],
    rules: Mapping[str, TaskRule],
    *,
    version: str | None = None,
    latest: bool = False,
) -> LogAnswers:
    """0/1 answers per model, benchmark and item id from lm-eval output folders.

    Parameters
    ----------
    paths : path or sequence of paths
        lm-eval ``--output_path`` folders (searched recursively for ``samples_*.jsonl``) or
        single samples files. The model of a samples file is named by the
        ``results_*.json`` beside it (``model_name`` / ``pretrained=``), else its folder.
    rules : mapping
        Task name -> :class:`TaskRule` (:func:`manifest_rules`, :func:`published_rules`).
    version : {"A", "B"}, optional
        The published version being scored: a samples file of the other version's metabench
        task is an error (its items are not in the fit).
    latest : bool
        Two samples files of one model for one benchmark (lm-eval run twice into the same
        output folder): keep the newer one (the ``<timestamp>`` of its name, else its
        modification time) and record the pair in :attr:`LogAnswers.replaced`, instead of
        the error.

    Returns
    -------
    LogAnswers

    Raises
    ------
    SigmapInputError
        No samples file at all; a samples file of the other metabench version; an item id
        the fit does not know (file and line named); two samples files of one model for one
        benchmark (unless ``latest``); a line without the correctness field; a document
        without an item id.

    Examples
    --------
    >>> import json, pathlib
    >>> from sigmap_lib.metabench import TaskRule, read_lm_eval_answers
    >>> out = pathlib.Path("out/org__model")
    >>> out.mkdir(parents=True)
    >>> _ = (out / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"model_name": "org/model"}))
    >>> lines = [{"doc_id": i, "doc": {"item_id": f"q{i}"}, "acc": a} for i, a in enumerate([1, 0])]
    >>> _ = (out / "samples_sigmap_arith_2026-01-01T00-00-00.jsonl").write_text(
    ...     "".join(json.dumps(x) + "\\n" for x in lines))
    >>> got = read_lm_eval_answers("out", {"sigmap_arith": TaskRule("arith", items=frozenset({"q0", "q1"}))})
    >>> got.answers
    {'org/model': {'arith': {'q0': 1, 'q1': 0}}}
    """
    roots = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    files = [f for r in roots for f in files_in(r, "samples_*.jsonl", "lm-eval output")]
    if not files:
        raise SigmapInputError(
            f"lm-eval output {', '.join(map(str, roots))}: no samples_*.jsonl files"
        )
    out = LogAnswers()
    cache: dict[Path, str] = {}
    dropped: dict[tuple[str, str], list[Path]] = {}
    for f in files:
        task = samples_task(f)
        if task is None:
            raise SigmapInputError(
                f"lm-eval samples {f}: file name is not samples_<task>_<timestamp>.jsonl"
            )
        rule = rules.get(task)
        if rule is None:
            m = _OTHER_VERSION.match(task)
            if version is not None and m and m.group("bm") in PUBLISHED_BENCHMARKS:
                other = "B" if m.group("sec") else "A"
                if other != version:
                    raise SigmapInputError(
                        f"lm-eval samples {f}: task {task!r} is metabench version {other}, "
                        f"but version {version} is being scored (its items are not in the fit); "
                        f"score it with --published {other}"
                    )
            out.ignored.append(str(f))
            continue
        model = lm_eval_folder_model(f.parent, cache)
        key = (model, rule.benchmark)
        if key in out.files:
            old = out.files[key]
            if not latest:
                raise SigmapInputError(
                    f"two lm-eval logs of model {model!r} for benchmark {rule.benchmark!r}: "
                    f"{old} and {f}; keep one (remove the older run) or pass --latest "
                    "(latest=True) to use the newest"
                )
            if (file_time(f), str(f)) < (file_time(old), str(old)):
                dropped.setdefault(key, []).append(f)
                continue
            dropped.setdefault(key, []).append(old)
        got: dict[str, int] = {}
        for ln, rec in iter_jsonl(f, "lm-eval samples"):
            where = f"lm-eval samples {f}:{ln}"
            if rule.filter is not None and rec.get("filter", rule.filter) != rule.filter:
                continue
            item = _item_id(rec.get("doc") or {}, rule.benchmark)
            if item is None:
                raise SigmapInputError(
                    f"{where}: the document has no item id ('item_id', 'metabench_idx' or "
                    "'mb_sub_idx'); run the tasks written by export-tasks"
                )
            if rule.items is not None and item not in rule.items:
                raise SigmapInputError(
                    f"{where}: item {item!r} is not an item of the fit's {rule.benchmark!r}"
                )
            if item in got:
                raise SigmapInputError(f"{where}: item {item!r} appears twice in one log")
            got[item] = _correct(rec, rule, where)
        if not got:
            raise SigmapInputError(
                f"lm-eval samples {f}: no samples"
                + (f" of filter {rule.filter!r}" if rule.filter else "")
            )
        out.answers.setdefault(model, {})[rule.benchmark] = got
        out.files[key] = f
        out.labels.setdefault(model, model_label(model))
    out.replaced = [(str(out.files[k]), str(d)) for k, ds in dropped.items() for d in ds]
    if not out.answers:
        raise SigmapInputError(
            f"lm-eval output {', '.join(map(str, roots))}: none of the {len(files)} samples files "
            f"is a task of this fit (found tasks {out.ignored_tasks[:6]}; the fit's tasks are "
            f"{sorted(rules)[:6]}...): score with the fit or --published version those tasks "
            "came from"
        )
    return out


def answers_frame(answers: Mapping[str, Mapping[str, int]], items: Sequence[str]) -> Any:
    """One model's answers to one benchmark as a 1-row frame over ``items`` (NaN = not
    answered).

    Examples
    --------
    >>> from sigmap_lib.metabench import answers_frame
    >>> answers_frame({"m": {"q1": 1}}, ["q1", "q2"])
         q1  q2
    m  1.0 NaN
    """
    import pandas as pd

    rows = {m: [a.get(i, np.nan) for i in items] for m, a in answers.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(items), dtype=float)
