"""sigmap_lib — the science behind sigmap.

Pure functions over arrays, tables and paths, one subpackage per step of the two papers:

========================  ==============================================================
:mod:`~sigmap_lib.inputs`      corpus (reading, unit segmentation, shard stores), registry,
                               catalog, item responses and questions, scores
:mod:`~sigmap_lib.nll`         per-unit NLL of causal LMs, the NLL store, rank codes
:mod:`~sigmap_lib.signatures`  screening (Thrush, pre-select), selection, signatures
:mod:`~sigmap_lib.overlap`     semantic / performance / signature overlap and its analyses
:mod:`~sigmap_lib.irt`         IRT fits, ability estimates, GAMs, ridge, reconstruction
:mod:`~sigmap_lib.metabench`   the metabench distillation and scoring of new models
:mod:`~sigmap_lib.reporting`   plots, HTML reports, findings
:mod:`~sigmap_lib.studies`     analyses of the real data in ``../shared/data``
:mod:`~sigmap_lib.worlds`      synthetic, tiny and zoo worlds (inputs of a whole run)
:mod:`~sigmap_lib.perf`        the ``sigmap bench`` throughput programs
========================  ==============================================================

The names below are the ones most users need; each lives in (and is documented with) its
subpackage. They load on first use, so ``import sigmap_lib`` stays cheap. This package
never imports dagster; heavy dependencies (torch, transformers, mirt, sentence encoders)
are imported inside the functions that need them.

Orientation everywhere: perplexity-like arrays are unit-major ``(n_units, n_models)``;
scores are ``(n_models,)`` or ``(n_models, n_benchmarks)``, higher = better.

Examples
--------
>>> import sigmap_lib
>>> sigmap_lib.segment_units("Hello, world!").tolist()
[[0, 5], [5, 6], [7, 12], [12, 13]]
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> subpackage that defines it
_API: dict[str, str] = {
    "SigmapInputError": "errors",
    # inputs
    "segment_units": "inputs",
    "read_corpus": "inputs",
    "build_corpus_store": "inputs",
    "CorpusStore": "inputs",
    "read_registry": "inputs",
    "read_catalog": "inputs",
    "read_scores": "inputs",
    "read_responses": "inputs",
    "to_wide": "inputs",
    # nll
    "load_model": "nll",
    "document_unit_nll": "nll",
    "score_corpus": "nll",
    "NLLStore": "nll",
    "RankStore": "nll",
    # signatures
    "thrush_correlation": "signatures",
    "preselect_correlation": "signatures",
    "screen": "signatures",
    "forward_select": "signatures",
    "extract_signatures": "signatures",
    "Signature": "signatures",
    # overlap
    "OverlapMatrix": "overlap",
    "performance_overlap": "overlap",
    "semantic_overlap": "overlap",
    "signature_overlap": "overlap",
    # irt and metabench
    "fit_irt": "irt",
    "estimate_theta": "irt",
    "fit_metabench": "metabench",
    "score_new_models": "metabench",
    "MetabenchConfig": "metabench",
    "MetabenchFit": "metabench",
}

_SUBPACKAGES = (
    "errors",
    "inputs",
    "nll",
    "signatures",
    "overlap",
    "irt",
    "metabench",
    "reporting",
    "studies",
    "worlds",
    "perf",
)

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(f"sigmap_lib.{_API[name]}"), name)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f"sigmap_lib.{name}")
    raise AttributeError(f"module 'sigmap_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, *_SUBPACKAGES})
