"""Metadata helpers: JSON metadata with NaN values (the overlap report's summary)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dagster as dg
import numpy as np

from sigmap_assets.metadata import json_safe


def test_json_safe_nulls_non_finite_values_and_never_rewrites_text() -> None:
    finding = "3 of 15 benchmark pairs are NaN (constant scores); NaN-free pairs agree"
    summary = {
        "claims": [finding, "Infinity and -Infinity are words here"],
        "rho": float("nan"),
        "bounds": [1.5, float("inf"), -float("inf"), np.float32("nan"), np.float64(0.25)],
        "matrix": np.array([[1.0, np.nan], [np.nan, 1.0]]),
        "counts": {"n": np.int64(3), "ok": np.bool_(True), 7: None},
        "store": Path("/tmp/x"),
        "NaN": "a key spelled NaN",
    }
    out = json_safe(summary)
    assert out == {
        "claims": [finding, "Infinity and -Infinity are words here"],
        "rho": None,
        "bounds": [1.5, None, None, None, 0.25],
        "matrix": [[1.0, None], [None, 1.0]],
        "counts": {"n": 3, "ok": True, "7": None},
        "store": "/tmp/x",
        "NaN": "a key spelled NaN",
    }
    # strict JSON (what the UI parses), and Dagster's JSON metadata takes it as it is
    text = json.dumps(out, allow_nan=False)
    assert json.loads(text) == out
    assert dg.MetadataValue.json(out).data == out
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in out["bounds"])
