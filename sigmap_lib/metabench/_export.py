"""Exporting the selected items as parquet and JSONL."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.metabench._fit import MetabenchFit


def export_items(
    fit: MetabenchFit, questions: dict[str, pd.DataFrame], out_dir: str | os.PathLike
) -> dict[str, Path]:
    """Write the selected items as parquet + JSONL (one file per benchmark) for an
    lm-evaluation-harness task (``dataset_path: json``, ``data_files``).

    ``questions[bm]`` has a column ``item_id`` plus any item fields (text, choices,
    answer, ...). Rows keep the selection order and gain ``benchmark``,
    ``selection_order`` and the IRT parameters ``a1, d, g, u, b``.
    Returns benchmark -> JSONL path (the parquet sits beside it).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for bm, f in fit.benchmarks.items():
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
            fd, tmpname = tempfile.mkstemp(prefix=f".{target.name}.", dir=out)
            os.close(fd)
            try:
                writer(tmpname)
                os.replace(tmpname, target)
            except BaseException:
                Path(tmpname).unlink(missing_ok=True)
                raise
        paths[bm] = jl
    return paths
