"""Exporting the selected items as parquet and JSONL."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from sigmap_lib._util._atomic import atomic_file
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.metabench._fit import MetabenchFit


def export_items(
    fit: MetabenchFit,
    questions: dict[str, pd.DataFrame],
    out_dir: str | os.PathLike,
    benchmarks: Sequence[str] | None = None,
) -> dict[str, Path]:
    """Write the selected items as parquet + JSONL (one file per benchmark) for an
    lm-evaluation-harness task (``dataset_path: json``, ``data_files``).

    ``questions[bm]`` has a column ``item_id`` plus any item fields (text, choices,
    answer, ...). Rows keep the selection order and gain ``benchmark``,
    ``selection_order`` and the IRT parameters ``a1, d, g, u, b``. ``benchmarks``
    restricts the export to some of the fit's benchmarks (default: all of them; each
    needs its questions). Returns benchmark -> JSONL path (the parquet sits beside it).

    Examples
    --------
    >>> import pandas as pd
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, export_items, fit_metabench, simulate_benchmarks,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> fit = fit_metabench(responses, scores, **TINY_SETTINGS)  # tiny settings: fast
    >>> questions = {
    ...     bm: pd.DataFrame({"item_id": p.index, "question": [f"Question {i}?" for i in p.index]})
    ...     for bm, p in truth["params"].items()
    ... }
    >>> paths = export_items(fit, questions, "metabench-items")
    >>> sorted(p.name for p in paths.values())
    ['metabench_arc.jsonl', 'metabench_gsm8k.jsonl']
    >>> rows = pd.read_json(paths["arc"], lines=True)
    >>> rows.columns.tolist()
    ['benchmark', 'item_id', 'selection_order', 'question',
     'irt_a1', 'irt_d', 'irt_g', 'irt_u', 'irt_b']
    >>> len(rows) == len(fit.selected["arc"])
    True
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for bm, f in fit.benchmarks.items():
        if benchmarks is not None and bm not in benchmarks:
            continue
        if bm not in questions:
            raise SigmapInputError(f"export_items: no questions given for benchmark {bm!r}")
        q = questions[bm].copy()
        if "item_id" not in q.columns:
            raise SigmapInputError(f"export_items: questions[{bm!r}] needs an 'item_id' column")
        q["item_id"] = q["item_id"].astype(str)
        missing = sorted(set(f.selected) - set(q["item_id"]))
        if missing:
            raise SigmapInputError(
                f"export_items: {bm}: {len(missing)} selected items have no question text, e.g. {missing[:5]}"
            )
        rows = q.set_index("item_id").loc[f.selected].reset_index()
        rows.insert(0, "benchmark", bm)
        rows.insert(2, "selection_order", np.arange(1, len(rows) + 1))
        par = f.params.loc[f.selected].reset_index(drop=True)
        for c in ["a1", "d", "g", "u", "b"]:
            rows[f"irt_{c}"] = par[c].to_numpy()
        pq = out / f"metabench_{bm}.parquet"
        jl = out / f"metabench_{bm}.jsonl"
        for target, writer in (
            (pq, lambda p, rows=rows: rows.to_parquet(p, index=False)),
            (
                jl,
                lambda p, rows=rows: rows.to_json(
                    p, orient="records", lines=True, force_ascii=False
                ),
            ),
        ):
            with atomic_file(target) as tmp:
                writer(tmp)
        paths[bm] = jl
    return paths
