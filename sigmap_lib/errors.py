"""Errors raised for bad input. Messages name the file/model/benchmark and the problem."""

from __future__ import annotations


class SigmapInputError(ValueError):
    """Malformed or inconsistent user input (corpus, registry, scores, items, config).

    The message always names the culprit (file path, model id, benchmark name, line or
    row) and says what is wrong, so a user can fix it without reading code.
    """
