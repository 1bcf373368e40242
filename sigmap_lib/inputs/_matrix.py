"""Per-document values of many models from a known public layout: the CSVs of
perplexity-correlations (Thrush, Potts & Hashimoto, 2024), ``examples/get_error_and_bpb/``.

Layout: a bits-per-byte table of documents (rows, column ``id``) by models (columns named as
a Python tuple literal ``('family', 'org/model')``), and an error table of benchmarks (rows,
column ``benchmark``) by the same model columns in another order. A model may appear under
two families with identical values (``LLM360/Amber``); it is kept once, under its first
column. Column names are parsed with :func:`ast.literal_eval` (literals only; no code runs).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs._direction import apply_score_transform

BPB_FILE = "perplexity_correlations_synthetic_bpb_id.csv"
ERROR_FILE = "perplexity_correlations_error.csv"
#: Rows of the error table that are error rates (1 − accuracy); the others are perplexities.
ERROR_RATE_ROWS = ("arc_easy", "piqa", "sciq")


@dataclass
class ModelMatrix:
    """Per-unit values of many models and their benchmark results.

    Attributes
    ----------
    values : numpy.ndarray of float64, shape (n_units, n_models)
        Bits per byte of each model on each unit (document).
    unit_ids : list of str, length n_units
    models : list of str, length n_models
        Model ids (``org/model``).
    families : numpy.ndarray of str, shape (n_models,)
    benchmarks : list of str, length n_benchmarks
    errors : numpy.ndarray of float64, shape (n_models, n_benchmarks)
        As stored: lower is better (error rates and perplexities).
    """

    values: np.ndarray
    unit_ids: list[str]
    models: list[str]
    families: np.ndarray
    benchmarks: list[str]
    errors: np.ndarray

    def score_transforms(self) -> dict[str, str]:
        """The transform (:data:`~sigmap_lib.inputs.SCORE_TRANSFORMS`) that :meth:`scores`
        applies to each benchmark: ``1 - x`` for the error rates, ``-log(x)`` for the
        perplexities."""
        return {b: "1 - x" if b in ERROR_RATE_ROWS else "-log(x)" for b in self.benchmarks}

    def scores(self) -> np.ndarray:
        """Higher-is-better scores ``(n_models, n_benchmarks)``: ``1 − error`` for the error
        rates (accuracy), ``−log(perplexity)`` for the perplexities."""
        tr = self.score_transforms()
        return np.column_stack(
            [
                apply_score_transform(self.errors[:, b], tr[name], f"benchmark {name!r}")
                for b, name in enumerate(self.benchmarks)
            ]
        )

    def general_quality(self) -> np.ndarray:
        """Minus each model's mean bits per byte over the units, shape (n_models,)."""
        return -self.values.mean(axis=0)


def _parse_column(name: str, path: Path) -> tuple[str, str]:
    try:
        fam, model = ast.literal_eval(name)
    except (ValueError, SyntaxError, TypeError) as e:
        raise SigmapInputError(
            f"{path}: column {name!r} is not a ('family', 'org/model') tuple literal; "
            "name every model column that way"
        ) from e
    return str(fam), str(model)


def read_perplexity_correlations(folder: str | Path) -> ModelMatrix:
    """Read perplexity-correlations' bits-per-byte and error CSVs from ``folder``.

    Parameters
    ----------
    folder : path
        Holds ``perplexity_correlations_synthetic_bpb_id.csv`` and
        ``perplexity_correlations_error.csv``.

    Returns
    -------
    ModelMatrix
        Models in the bits-per-byte file's column order, each once.

    Raises
    ------
    SigmapInputError
        A file is missing, a value is not finite, or a model of the bits-per-byte file has
        no error column — one line naming the file and the column.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from sigmap_lib.inputs import read_perplexity_correlations
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> cols = '''"('a', 'o/m1')","('b', 'o/m2')"'''
    >>> _ = (d / "perplexity_correlations_synthetic_bpb_id.csv").write_text(
    ...     f"id,{cols}\\ndoc1,0.9,1.1\\ndoc2,0.8,1.0\\n")
    >>> _ = (d / "perplexity_correlations_error.csv").write_text(
    ...     f"benchmark,{cols}\\narc_easy,0.3,0.5\\n")
    >>> mm = read_perplexity_correlations(d)
    >>> mm.values.shape, mm.models, mm.scores().tolist()
    ((2, 2), ['o/m1', 'o/m2'], [[0.7], [0.5]])
    """
    import pandas as pd

    folder = Path(folder)
    bpb_path, err_path = folder / BPB_FILE, folder / ERROR_FILE
    for p in (bpb_path, err_path):
        if not p.is_file():
            raise SigmapInputError(f"{p}: not found (perplexity-correlations layout)")
    bpb = pd.read_csv(bpb_path)
    err = pd.read_csv(err_path)
    if "id" not in bpb.columns:
        raise SigmapInputError(f"{bpb_path}: no 'id' column naming the documents")
    if "benchmark" not in err.columns:
        raise SigmapInputError(f"{err_path}: no 'benchmark' column")
    if bpb["id"].duplicated().any():
        dup = bpb["id"][bpb["id"].duplicated()].iloc[0]
        raise SigmapInputError(f"{bpb_path}: document id {dup!r} appears twice")
    keep: list[str] = []
    models: list[str] = []
    families: list[str] = []
    for c in bpb.columns:
        if c == "id":
            continue
        fam, model = _parse_column(c, bpb_path)
        if model in models:
            continue
        keep.append(c)
        models.append(model)
        families.append(fam)
    missing = [c for c in keep if c not in err.columns]
    if missing:
        raise SigmapInputError(
            f"{err_path}: no column for model {missing[0]!r} of {bpb_path.name}: add its "
            "errors, or drop it from both files"
        )
    values = bpb[keep].to_numpy(dtype=np.float64)
    errors = err.set_index("benchmark")[keep].to_numpy(dtype=np.float64).T
    for arr, path in ((values, bpb_path), (errors, err_path)):
        bad = np.argwhere(~np.isfinite(arr))
        if bad.size:
            r, c = bad[0]
            col = keep[c] if path == bpb_path else keep[r]
            raise SigmapInputError(f"{path}: a missing or non-finite value in column {col!r}")
    return ModelMatrix(
        values=values,
        unit_ids=[str(x) for x in bpb["id"]],
        models=models,
        families=np.asarray(families),
        benchmarks=[str(x) for x in err["benchmark"]],
        errors=errors,
    )
