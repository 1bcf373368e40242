"""sigmap_lib — the science behind sigmap.

Pure functions over arrays, tables and paths: corpus segmentation, per-unit
perplexities, rank-correlation screening, forward selection, three-level benchmark
overlap, and IRT-based benchmark distillation (metabench).

This package never imports dagster; heavy dependencies (torch, transformers, mirt,
sentence encoders) are imported inside the functions that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"
