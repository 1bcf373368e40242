"""Score direction: catalog keys, the transforms against their definitions, the score table."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import (
    SCORE_TRANSFORMS,
    apply_score_transform,
    catalog_from_dict,
    check_direction,
    validate_scores,
)

ENTRY = {"family": "f", "format": "multiple_choice", "function": "reasoning"}


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("x", lambda x: x),
        ("-x", lambda x: -x),
        ("1 - x", lambda x: 1 - x),
        ("100 - x", lambda x: 100 - x),
        ("-log(x)", lambda x: -np.log(x)),
    ],
)
def test_each_transform_against_its_definition_and_direction(name: str, expect) -> None:
    x = np.random.default_rng(0).uniform(0.05, 0.95, 50)
    np.testing.assert_allclose(apply_score_transform(x, name, "b"), expect(x), rtol=0, atol=0)
    y = apply_score_transform(np.sort(x), name, "b")
    # a lower-is-better transform reverses the order; the identity keeps it
    assert (np.diff(y) < 0).all() == (SCORE_TRANSFORMS[name][0] == "lower")


def test_catalog_declares_direction_and_the_scores_become_higher_is_better() -> None:
    cat = catalog_from_dict(
        {
            "benchmarks": {
                "arc_err": {
                    **ENTRY,
                    "direction": "lower",
                    "transform": "1 - x",
                    "score_range": [0, 1],
                },
                "lambada": {**ENTRY, "direction": "lower", "transform": "-log(x)"},
                "mmlu": ENTRY,
                "loss": {**ENTRY, "direction": "lower"},
            }
        }
    )
    assert (cat["mmlu"].direction, cat["mmlu"].transform) == ("higher", "x")
    assert cat["loss"].transform == "-x"
    raw = {
        "arc_err": [0.2, 0.3, 0.6],
        "lambada": [3.0, 10.0, 40.0],
        "mmlu": [0.7, 0.6, 0.3],
        "loss": [1.0, 2.0, 5.0],
    }
    t = pl.DataFrame(
        {
            "model": ["a", "b", "c"] * 4,
            "benchmark": [b for b in raw for _ in range(3)],
            "score": [v for b in raw for v in raw[b]],
        }
    )
    kept, report = validate_scores(t, catalog=cat)
    got = {b: kept.filter(pl.col("benchmark") == b)["score"].to_list() for b in raw}
    np.testing.assert_allclose(got["arc_err"], [0.8, 0.7, 0.4])
    np.testing.assert_allclose(got["lambada"], -np.log([3.0, 10.0, 40.0]))
    assert got["mmlu"] == raw["mmlu"]
    assert got["loss"] == [-1.0, -2.0, -5.0]
    # model a is best on every benchmark once transformed
    for b in raw:
        assert np.argmax(got[b]) == 0
    assert report.transforms == {
        "arc_err": "1 - x",
        "lambada": "-log(x)",
        "mmlu": "x",
        "loss": "-x",
    }
    assert report.to_metadata()["transforms"]["lambada"] == "-log(x)"


def test_bad_directions_and_values_get_one_line_naming_the_benchmark() -> None:
    with pytest.raises(SigmapInputError, match=r"benchmark 'arc'.*direction 'down'"):
        catalog_from_dict({"benchmarks": {"arc": {**ENTRY, "direction": "down"}}})
    with pytest.raises(SigmapInputError, match=r"transform '1 - x' is for scores where lower"):
        check_direction("higher", "1 - x", "arc")
    with pytest.raises(SigmapInputError, match=r"transform 'log' is not one of"):
        check_direction("lower", "log", "arc")
    cat = catalog_from_dict(
        {"benchmarks": {"ppl": {**ENTRY, "direction": "lower", "transform": "-log(x)"}}}
    )
    t = pl.DataFrame({"model": ["a", "b", "c"], "benchmark": ["ppl"] * 3, "score": [3.0, 0.0, 5.0]})
    with pytest.raises(SigmapInputError, match=r"benchmark 'ppl'.*needs positive values, got 0"):
        validate_scores(t, catalog=cat, source="scores.csv")
