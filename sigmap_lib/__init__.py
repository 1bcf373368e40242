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
subpackage. They are declared in ``__init__.pyi`` (what IDEs and type checkers read) and
load on first use through ``lazy_loader``, so ``import sigmap_lib`` stays cheap. This package
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

import lazy_loader as _lazy

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
