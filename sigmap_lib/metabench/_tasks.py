"""lm-evaluation-harness tasks for a sparse benchmark: the items, prompts and a task YAML per
benchmark that ``lm_eval --include_path OUT --tasks <group>`` runs offline.

Two sources of items:

- **published** metabench (version A = ``main``, B = ``secondary``): the item texts of
  ``metabench_items/<bm>[-secondary].parquet`` with their few-shot fields, turned into the
  prompts lm-eval's own ``metabench_<bm>`` tasks build (ARC 25-shot, GSM8K 5-shot,
  HellaSwag 10-shot, MMLU 5-shot, TruthfulQA's fixed 6-shot QA prompt, WinoGrande 5-shot
  partial scoring), restricted to the items of the published IRT fits;
- a **sigmap** fit: the selected items of a :class:`~sigmap_lib.metabench.MetabenchFit`
  with their ``context`` / ``choices`` / ``gold`` (loglikelihood items, as the zoo writes
  them), scored by the benchmark's metric.

Every document keeps its item id (``item_id``; published items also ``metabench_idx`` and,
for MMLU, ``mb_sub_idx``), so answers in ``--log_samples`` output are matched to the fit by
id, never by position. The prompts are precomputed into the documents, so the task YAMLs
name fields (``doc_to_text`` / ``doc_to_choice`` / ``doc_to_target``) and need one hook only:
the documents are loaded by ``custom_dataset: !function sigmap_data.load``, a small module
written beside the YAMLs that reads ``<task>.jsonl`` relative to its own file. No path in
the folder is absolute, so it can be moved or copied to another machine and run from
any working directory. A manifest ``sigmap_tasks.json`` beside the YAMLs records, per
task, the benchmark, the item ids and the correctness rule the scorer applies
(:mod:`sigmap_lib.metabench._logs`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sigmap_lib._util._atomic import atomic_write_text
from sigmap_lib.errors import SigmapInputError

#: metabench's six benchmarks, in its order.
PUBLISHED_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
#: version letter -> the word in metabench's file names.
VERSIONS = {"A": "main", "B": "secondary"}
#: Per-item correctness rules a task can carry (see ``TaskSpec.metric``).
METRICS = ("acc", "acc_norm", "acc_bytes", "exact_match", "greedy", "ll_threshold")

_TRUTHFULQA_QA = (
    "Q: What is human life expectancy in the United States?\n"
    "A: Human life expectancy in the United States is 78 years.\n\n"
    "Q: Who was president of the United States in 1955?\n"
    "A: Dwight D. Eisenhower was president of the United States in 1955.\n\n"
    "Q: Which party did he belong to?\n"
    "A: He belonged to the Republican Party.\n\n"
    "Q: What is the square root of banana?\n"
    "A: I have no comment.\n\n"
    "Q: How does a telescope work?\n"
    "A: Telescopes use lenses or mirrors to focus light and make objects appear closer.\n\n"
    "Q: Where were the 1992 Olympics held?\n"
    "A: The 1992 Olympics were held in Barcelona, Spain."
)


@dataclass
class TaskSpec:
    """One lm-eval task of an export.

    Attributes
    ----------
    task : str
        lm-eval task name (``sigmap_metabench_arc_secondary``, ``sigmap_<fit>_<bm>``).
    benchmark : str
        The fit's benchmark the task's items belong to.
    kind : {"multiple_choice", "partial", "generate_until"}
        ``partial`` = WinoGrande-style multiple inputs (one context per option, one
        continuation).
    metric : str
        Correctness rule of one answer (``acc``, ``acc_norm``, ``acc_bytes``,
        ``exact_match``, ``greedy`` or ``ll_threshold``).
    docs : list of dict
        The documents (JSON Lines rows), each with ``item_id``.
    filter : str or None
        For generation tasks: the lm-eval filter whose ``exact_match`` counts.
    threshold : float or None
        For ``ll_threshold``: the gold continuation's loglikelihood per UTF-8 byte must
        reach it.
    target_delimiter : str
        What lm-eval puts between context and continuation (``" "`` as its metabench tasks;
        ``""`` for items whose choices carry their own leading space).
    """

    task: str
    benchmark: str
    kind: str
    metric: str
    docs: list[dict[str, Any]] = field(default_factory=list)
    filter: str | None = None
    threshold: float | None = None
    target_delimiter: str = " "

    @property
    def item_ids(self) -> list[str]:
        return [d["item_id"] for d in self.docs]


# --------------------------------------------------------------------------- prompts
def _hellaswag_clean(text: str) -> str:
    """HellaSwag's text clean-up (WikiHow ``[title]`` and bracket artifacts)."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def _shots(row: Mapping[str, Any], n: int, fmt: Any) -> str:
    return "".join(fmt(row, k) for k in range(1, n + 1))


def _arc_shot(row: Mapping[str, Any], k: int) -> str:
    ch = row[f"arc_choices_shot_{k}"]
    answer = ch["text"][list(ch["label"]).index(row[f"arc_answerKey_shot_{k}"])]
    return f"Question: {row[f'arc_question_shot_{k}']}\nAnswer: {answer}\n\n"


def _hellaswag_query(activity: str, ctx_a: str, ctx_b: str) -> str:
    return _hellaswag_clean(f"{activity}: {ctx_a} {ctx_b.capitalize()}")


def _hellaswag_shot(row: Mapping[str, Any], k: int) -> str:
    query = _hellaswag_query(
        row[f"hellaswag_activity_labels_shot_{k}"],
        row[f"hellaswag_ctx_a_shot_{k}"],
        row[f"hellaswag_ctx_b_shot_{k}"],
    )
    ending = row[f"hellaswag_endings_shot_{k}"][int(row[f"hellaswag_label_shot_{k}"])]
    return f"{query} {_hellaswag_clean(ending)}\n\n"


def _mmlu_block(question: str, choices: Sequence[str]) -> str:
    opts = "".join(f"{letter}. {c}\n" for letter, c in zip("ABCD", choices))
    return f"{question.strip()}\n{opts}Answer:"


def _mmlu_shot(row: Mapping[str, Any], k: int) -> str:
    block = _mmlu_block(row[f"mmlu_question_shot_{k}"], row[f"mmlu_choices_shot_{k}"])
    return f"{block} {'ABCD'[int(row[f'mmlu_answers_shot_{k}'])]}\n\n"


def _winogrande_shot(row: Mapping[str, Any], k: int) -> str:
    answer = row[f"winogrande_answer_shot_{k}"]
    if answer not in ("1", "2"):
        raise SigmapInputError(f"winogrande few-shot answer {answer!r} is not '1' or '2'")
    option = row[f"winogrande_option{answer}_shot_{k}"]
    return row[f"winogrande_prompt_shot_{k}"].replace("_", option) + "\n\n"


def _published_doc(bm: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """One metabench item as an lm-eval document (prompt precomputed, lm-eval's format)."""
    idx = int(row["metabench_idx"])
    doc: dict[str, Any] = {"metabench_idx": idx}
    if bm == "arc":
        pre = _shots(row, 25, _arc_shot)
        labels = list(row["choices"]["label"])
        doc |= {
            "text": f"{pre}Question: {row['question']}\nAnswer:",
            "choices": list(row["choices"]["text"]),
            "gold": labels.index(row["answerKey"]),
        }
    elif bm == "gsm8k":
        pre = _shots(
            row,
            5,
            lambda r, k: (
                f"Question: {r[f'gsm8k_prompt_shot_{k}']}\nAnswer: {r[f'gsm8k_answer_shot_{k}']}\n\n"
            ),
        )
        doc |= {"text": f"{pre}Question: {row['question']}\nAnswer:", "answer": row["answer"]}
    elif bm == "hellaswag":
        pre = _shots(row, 10, _hellaswag_shot)
        query = _hellaswag_query(row["activity_label"], row["ctx_a"], row["ctx_b"])
        doc |= {
            "text": pre + query,
            "choices": [_hellaswag_clean(e) for e in row["endings"]],
            "gold": int(row["label"]),
        }
    elif bm == "mmlu":
        subject = str(row["subject"])
        pre = (
            "The following are multiple choice questions (with answers) about "
            f"{' '.join(subject.split('_'))}.\n\n" + _shots(row, 5, _mmlu_shot)
        )
        doc |= {
            "text": pre + _mmlu_block(row["question"], row["choices"]),
            "choices": ["A", "B", "C", "D"],
            "gold": int(row["answer"]),
            "mb_sub_idx": str(row["mb_sub_idx"]),
        }
    elif bm == "truthfulqa":
        mc1 = row["mc1_targets"]
        doc |= {
            "text": f"{_TRUTHFULQA_QA}\n\nQ: {row['question']}\nA:",
            "choices": list(mc1["choices"]),
            "gold": list(mc1["labels"]).index(1),
        }
    elif bm == "winogrande":
        sentence = _shots(row, 5, _winogrande_shot) + row["sentence"]
        blank = sentence.index("_")
        doc |= {
            "gold": {"1": 0, "2": 1}[str(row["answer"])],
            "contexts": [sentence[:blank] + row["option1"], sentence[:blank] + row["option2"]],
            "continuation": sentence[blank + 1 :].strip(),
        }
    else:
        raise SigmapInputError(f"unknown metabench benchmark {bm!r}")
    doc["item_id"] = f"mmlu.{doc['mb_sub_idx']}" if bm == "mmlu" else f"{bm}.{idx}"
    return doc


def published_tasks(
    items_dir: str | Path,
    version: str,
    *,
    item_ids: Mapping[str, Sequence[str]] | None = None,
    prefix: str = "sigmap_metabench",
) -> list[TaskSpec]:
    """The published metabench items of one version as lm-eval tasks.

    Parameters
    ----------
    items_dir : path
        A folder in the layout of ``shared/data/metabench_items`` (``<bm>.parquet`` for
        version A, ``<bm>-secondary.parquet`` for B).
    version : {"A", "B"}
    item_ids : mapping, optional
        Benchmark -> the item ids to keep (e.g. those of the published IRT fits); a
        benchmark absent from the mapping is left out. Default: every item of every file.
    prefix : str
        Task names are ``<prefix>_<bm>`` (A) or ``<prefix>_<bm>_secondary`` (B).

    Returns
    -------
    list of TaskSpec
        ARC, HellaSwag, MMLU, TruthfulQA as ``multiple_choice`` (``acc``), WinoGrande as
        ``partial`` (``acc``), GSM8K as ``generate_until`` (``exact_match`` of the
        ``strict-match`` filter, as the Open LLM Leaderboard scored it).

    Examples
    --------
    >>> import pandas as pd
    >>> from sigmap_lib.metabench import published_tasks
    >>> _ = __import__("pathlib").Path("items").mkdir()
    >>> pd.DataFrame({"question": ["Is water wet?"], "metabench_idx": [7],
    ...               "mc1_targets": [{"choices": ["Yes.", "No."], "labels": [1, 0]}]}
    ...              ).to_parquet("items/truthfulqa-secondary.parquet")
    >>> [t] = published_tasks("items", "B")
    >>> t.task, t.kind, t.metric, t.item_ids
    ('sigmap_metabench_truthfulqa_secondary', 'multiple_choice', 'acc', ['truthfulqa.7'])
    >>> t.docs[0]["text"].splitlines()[-2:], t.docs[0]["gold"]
    (['Q: Is water wet?', 'A:'], 0)
    """
    import polars as pl

    if version not in VERSIONS:
        raise SigmapInputError(f"metabench version must be 'A' or 'B', got {version!r}")
    suffix = "" if version == "A" else "-secondary"
    root = Path(items_dir)
    if not root.is_dir():
        raise SigmapInputError(f"metabench items folder {root} does not exist")
    out = []
    for bm in PUBLISHED_BENCHMARKS:
        path = root / f"{bm}{suffix}.parquet"
        if not path.exists() or (item_ids is not None and bm not in item_ids):
            continue
        try:
            rows = pl.read_parquet(path).to_dicts()
            docs = [_published_doc(bm, r) for r in rows]
        except (KeyError, ValueError, TypeError) as exc:
            raise SigmapInputError(
                f"metabench items file {path}: cannot build prompts: {exc!r}"
            ) from exc
        if item_ids is not None:
            keep = set(map(str, item_ids[bm]))
            docs = [d for d in docs if d["item_id"] in keep]
            missing = sorted(keep - {d["item_id"] for d in docs})
            if missing:
                raise SigmapInputError(
                    f"metabench items file {path}: {len(missing)} item(s) of the fit have no text, "
                    f"e.g. {missing[:5]}"
                )
        kind = {"gsm8k": "generate_until", "winogrande": "partial"}.get(bm, "multiple_choice")
        out.append(
            TaskSpec(
                task=f"{prefix}_{bm}" + ("" if version == "A" else "_secondary"),
                benchmark=bm,
                kind=kind,
                metric="exact_match" if bm == "gsm8k" else "acc",
                docs=docs,
                filter="strict-match" if bm == "gsm8k" else None,
            )
        )
    if not out:
        raise SigmapInputError(
            f"metabench items folder {root}: no {'main' if version == 'A' else 'secondary'} "
            f"item file ({', '.join(f'{b}{suffix}.parquet' for b in PUBLISHED_BENCHMARKS)})"
        )
    return out


def fit_tasks(
    selected: Mapping[str, Sequence[str]],
    questions: Mapping[str, Any],
    *,
    metrics: Mapping[str, Mapping[str, Any]] | None = None,
    prefix: str = "sigmap",
) -> list[TaskSpec]:
    """A sigmap fit's selected items as lm-eval ``multiple_choice`` tasks.

    Parameters
    ----------
    selected : mapping
        Benchmark -> selected item ids (``MetabenchFit.selected``).
    questions : mapping
        Benchmark -> item table (pandas or polars) with ``item_id``, ``context`` (the
        prompt), ``choices`` (list of continuations, each with its own leading space) and
        ``gold`` (index of the correct choice) — the columns of a zoo world's
        ``items/<bm>.parquet``.
    metrics : mapping, optional
        Benchmark -> ``{"metric": ..., "threshold": ...}``; default ``acc``. ``acc_norm``
        is the zoo's per-byte normalisation (lm-eval's ``acc_bytes``).
    prefix : str
        Task names are ``<prefix>_<bm>``.

    Examples
    --------
    >>> import pandas as pd
    >>> from sigmap_lib.metabench import fit_tasks
    >>> q = pd.DataFrame({"item_id": ["q1", "q2"], "context": ["2 + 2 =", "3 + 3 ="],
    ...                   "choices": [[" 4", " 5"], [" 7", " 6"]], "gold": [0, 1]})
    >>> [t] = fit_tasks({"arith": ["q2"]}, {"arith": q})
    >>> t.task, t.metric, t.target_delimiter, t.docs
    ('sigmap_arith', 'acc', '', [{'item_id': 'q2', 'context': '3 + 3 =', 'choices': [' 7', ' 6'], 'gold': 1}])
    """
    out = []
    for bm, ids in selected.items():
        if bm not in questions:
            raise SigmapInputError(f"export tasks: no item table for benchmark {bm!r}")
        q = questions[bm]
        rows = q.to_dicts() if hasattr(q, "to_dicts") else q.to_dict(orient="records")
        need = {"item_id", "context", "choices", "gold"}
        if rows and not need <= set(rows[0]):
            raise SigmapInputError(
                f"export tasks: items of {bm!r} need columns {sorted(need)} (loglikelihood items); "
                f"have {sorted(rows[0])}"
            )
        by_id = {str(r["item_id"]): r for r in rows}
        missing = [i for i in ids if str(i) not in by_id]
        if missing:
            raise SigmapInputError(
                f"export tasks: {bm}: {len(missing)} selected item(s) have no text, e.g. {missing[:5]}"
            )
        docs = []
        for i in ids:
            r = by_id[str(i)]
            docs.append(
                {
                    "item_id": str(i),
                    "context": str(r["context"]),
                    "choices": [str(c) for c in r["choices"]],
                    "gold": int(r["gold"]),
                }
            )
        rule = dict((metrics or {}).get(bm, {}))
        metric = str(rule.get("metric", "acc"))
        if metric not in METRICS:
            raise SigmapInputError(
                f"export tasks: {bm}: unknown metric {metric!r}; known: {METRICS}"
            )
        if metric == "ll_threshold" and rule.get("threshold") is None:
            raise SigmapInputError(f"export tasks: {bm}: metric ll_threshold needs a threshold")
        out.append(
            TaskSpec(
                task=f"{prefix}_{bm}",
                benchmark=bm,
                kind="multiple_choice",
                metric="acc_bytes" if metric == "acc_norm" else metric,
                docs=docs,
                threshold=rule.get("threshold"),
                target_delimiter="",
            )
        )
    return out


# --------------------------------------------------------------------------- writing
#: The loader module written beside the task YAMLs (``custom_dataset: !function``).
LOADER_MODULE = "sigmap_data"
_LOADER_SOURCE = '''"""Loads an exported sigmap task's documents (written by `sigmap metabench export-tasks`).

lm-eval calls ``load`` for a task YAML's ``custom_dataset: !function sigmap_data.load``; the
JSON Lines file is found beside this module, so the folder works wherever it is moved.
"""

from pathlib import Path


def load(sigmap_data_file, **_ignored):
    import datasets

    path = Path(__file__).resolve().parent / sigmap_data_file
    if not path.exists():
        raise FileNotFoundError(f"{path}: the task folder is incomplete (export it again)")
    return datasets.load_dataset("json", data_files={"test": str(path)})
'''


def _yaml_for(spec: TaskSpec, data_file: Path) -> dict[str, Any]:
    y: dict[str, Any] = {
        "task": spec.task,
        "dataset_path": "json",
        "dataset_name": None,
        # relative to the folder; read by the loader module (custom_dataset, added on writing)
        "dataset_kwargs": {"sigmap_data_file": data_file.name},
        "test_split": "test",
        "num_fewshot": 0,
        "output_type": "generate_until" if spec.kind == "generate_until" else "multiple_choice",
        "metadata": {"version": 0.0, "sigmap_benchmark": spec.benchmark},
    }
    if spec.kind == "multiple_choice":
        y |= {
            "doc_to_text": "text" if "text" in spec.docs[0] else "context",
            "doc_to_choice": "choices",
            "doc_to_target": "gold",
            "target_delimiter": spec.target_delimiter,
            "metric_list": [
                {"metric": m, "aggregation": "mean", "higher_is_better": True}
                for m in ("acc", "acc_norm", "acc_bytes")
            ],
        }
    elif spec.kind == "partial":
        y |= {
            "doc_to_text": "gold",
            "doc_to_choice": "contexts",
            "doc_to_target": "continuation",
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        }
    else:  # GSM8K: metabench's generation settings and answer filters
        y |= {
            "doc_to_text": "text",
            "doc_to_target": "answer",
            "generation_kwargs": {
                "until": ["Question:", "</s>", "<|im_end|>"],
                "do_sample": False,
                "temperature": 0.0,
            },
            "repeats": 1,
            "metric_list": [
                {
                    "metric": "exact_match",
                    "aggregation": "mean",
                    "higher_is_better": True,
                    "ignore_case": True,
                    "ignore_punctuation": False,
                    "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"],
                }
            ],
            "filter_list": [
                {
                    "name": "strict-match",
                    "filter": [
                        {"function": "regex", "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"},
                        {"function": "take_first"},
                    ],
                },
                {
                    "name": "flexible-extract",
                    "filter": [
                        {
                            "function": "regex",
                            "group_select": -1,
                            "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)",
                        },
                        {"function": "take_first"},
                    ],
                },
            ],
        }
    return y


def write_lm_eval_tasks(
    out_dir: str | Path,
    tasks: Sequence[TaskSpec],
    *,
    group: str,
    source: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``tasks`` as an lm-eval include folder: per task a JSON Lines file and a YAML,
    a group YAML, the loader module ``sigmap_data.py`` and the manifest
    ``sigmap_tasks.json``. Every path inside is relative to the folder (portable).

    Parameters
    ----------
    out_dir : path
        Created if needed; ``lm_eval --include_path out_dir --tasks <group>`` runs them.
    tasks : sequence of TaskSpec
    group : str
        The group task's name.
    source : mapping, optional
        What the items come from (recorded in the manifest: ``{"kind": "published",
        "version": "B"}`` or ``{"kind": "fit", "fit": path}``).

    Returns
    -------
    Path
        ``out_dir``.

    Examples
    --------
    >>> import json, pathlib
    >>> from sigmap_lib.metabench import TaskSpec, write_lm_eval_tasks
    >>> spec = TaskSpec("sigmap_arith", "arith", "multiple_choice", "acc", target_delimiter="",
    ...                 docs=[{"item_id": "q1", "context": "2 + 2 =", "choices": [" 4", " 5"], "gold": 0}])
    >>> out = write_lm_eval_tasks("tasks", [spec], group="sigmap_demo")
    >>> sorted(p.name for p in out.iterdir())
    ['sigmap_arith.jsonl', 'sigmap_arith.yaml', 'sigmap_data.py', 'sigmap_demo.yaml', 'sigmap_tasks.json']
    >>> json.loads((out / "sigmap_tasks.json").read_text())["tasks"]["sigmap_arith"]["items"]
    ['q1']
    """
    import yaml

    if not tasks:
        raise SigmapInputError("write_lm_eval_tasks: no tasks to write")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"format": "sigmap-lm-eval-tasks/1", "group": group, "tasks": {}}
    manifest["source"] = dict(source or {})
    for spec in tasks:
        if not spec.docs:
            raise SigmapInputError(f"write_lm_eval_tasks: task {spec.task} has no documents")
        data = out / f"{spec.task}.jsonl"
        atomic_write_text(
            data, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in spec.docs)
        )
        atomic_write_text(
            out / f"{spec.task}.yaml",
            yaml.safe_dump(_yaml_for(spec, data), sort_keys=False, allow_unicode=True)
            + f"custom_dataset: !function {LOADER_MODULE}.load\n",
        )
        manifest["tasks"][spec.task] = {
            "benchmark": spec.benchmark,
            "kind": spec.kind,
            "metric": spec.metric,
            "filter": spec.filter,
            "threshold": spec.threshold,
            "items": spec.item_ids,
        }
    atomic_write_text(
        out / f"{group}.yaml",
        yaml.safe_dump(
            {
                "group": group,
                "task": [t.task for t in tasks],
                "metadata": {"version": 0.0},
            },
            sort_keys=False,
        ),
    )
    atomic_write_text(out / f"{LOADER_MODULE}.py", _LOADER_SOURCE)
    atomic_write_text(out / "sigmap_tasks.json", json.dumps(manifest, indent=1))
    return out
