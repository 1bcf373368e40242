"""The numba segmentation kernel gives exactly the units of the default regex."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.inputs import DEFAULT_UNIT_PATTERN, segment_units
from sigmap_lib.inputs._segment import segment_regex
from sigmap_lib.inputs._segment_kernel import class_table

PIECES = [
    "word", "Wörter", "naïve", "café", "日本語", "テキスト", "한국어", "Ελληνικά", "русский",
    "42", "٣٤٥", "०१२", "x²³", "½", "_under_score_", "snake_case9", "e\u0301", "🚀", "👩\u200d💻",
    "🇫🇷", "!", "?!", "...", "--", "$", "€", "©", "\t", "\n", "  ", "\u00a0", "\u2003", "\u3000",
    "\r\n", "(a)", "[x]", "{y}", "a1b2", "3.14", "1e-9", "ǅ", "ﬁ", "Ⅻ", "\u0660", "ℕ", "µ",
]  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_kernel_equals_the_regex_on_random_text(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(50):
        parts = rng.choice(PIECES, size=rng.integers(0, 60))
        seps = rng.choice(["", " ", "  ", "\t", "\n", "\u00a0"], size=len(parts))
        text = "".join(p + s for p, s in zip(parts, seps))
        got = segment_units(text)
        ref = segment_regex(text, DEFAULT_UNIT_PATTERN)
        np.testing.assert_array_equal(got, ref, err_msg=repr(text))


def test_every_code_point_is_classified_as_the_regex_does() -> None:
    cps = np.arange(0x110000)
    cps = cps[(cps < 0xD800) | (cps >= 0xE000)]
    text = " ".join(map(chr, cps.tolist()))  # each character alone between spaces
    np.testing.assert_array_equal(segment_units(text), segment_regex(text))
    assert class_table().shape == (0x110000,)


def test_runs_and_edge_cases() -> None:
    assert segment_units("").shape == (0, 2)
    assert segment_units("   \n\t").shape == (0, 2)
    assert segment_units("abc123def").tolist() == [[0, 3], [3, 6], [6, 9]]
    assert segment_units("__").tolist() == [[0, 1], [1, 2]]
    assert segment_units("é🚀x").tolist() == [[0, 2], [2, 6], [6, 7]]  # UTF-8 byte offsets
    # a custom pattern goes through the regex
    assert segment_units("ab cd", r"\S+").tolist() == [[0, 2], [3, 5]]
