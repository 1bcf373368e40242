"""Corpus units: the model-independent segmentation of text into words, numbers and
punctuation marks, with UTF-8 byte offsets (METHODS §1).
"""

from __future__ import annotations

import re

import numpy as np

from sigmap_lib.errors import SigmapInputError

#: Default unit pattern: letter runs | digit runs | any other single non-space character.
DEFAULT_UNIT_PATTERN = r"[^\W\d_]+|\d+|\S"
#: The unit pattern of a unit file: the whole text, from its first to its last non-space
#: character, is one unit.
WHOLE_TEXT_PATTERN = r"(?s)\S(?:.*\S)?"
#: Corpus files whose names end so hold one unit per record (documents, domains, chunks
#: brought as units, e.g. by a matrix world), segmented with :data:`WHOLE_TEXT_PATTERN`.
UNIT_FILE_SUFFIX = ".units.jsonl"


def file_pattern(name: str, pattern: str | None = None) -> str:
    """The unit pattern of the corpus file ``name``: :data:`WHOLE_TEXT_PATTERN` for a unit
    file (``*.units.jsonl``), else ``pattern`` (default :data:`DEFAULT_UNIT_PATTERN`).

    Examples
    --------
    >>> from sigmap_lib.inputs import file_pattern, segment_units
    >>> file_pattern("corpus/docs.jsonl") == file_pattern("a.txt")
    True
    >>> pat = file_pattern("documents.units.jsonl")
    >>> segment_units("  Ant colony, part 2 ", pat).tolist()  # one unit: the whole text
    [[2, 20]]
    """
    if name.lower().endswith(UNIT_FILE_SUFFIX):
        return WHOLE_TEXT_PATTERN
    return DEFAULT_UNIT_PATTERN if pattern is None else pattern


# --------------------------------------------------------------------------- units
def char_to_byte_offsets(text: str) -> np.ndarray:
    """UTF-8 byte offset of every character boundary of ``text``.

    Returns
    -------
    np.ndarray
        Shape ``(len(text) + 1,)`` int64; entry ``k`` is the byte offset of character
        ``k`` (entry ``len(text)`` is the total byte length).

    Examples
    --------
    >>> from sigmap_lib.inputs import char_to_byte_offsets
    >>> char_to_byte_offsets("aï🚀").tolist()  # 1, 2 and 4 UTF-8 bytes
    [0, 1, 3, 7]
    """
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lens = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    out = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def compile_pattern(pattern: str | None) -> re.Pattern[str]:
    pat = DEFAULT_UNIT_PATTERN if pattern is None else pattern
    try:
        return re.compile(pat)  # re caches compiled patterns itself
    except re.error as exc:
        raise SigmapInputError(f"unit pattern {pat!r} is not a valid regex: {exc}") from exc


def segment_units(text: str, pattern: str | None = None) -> np.ndarray:
    """Segment ``text`` into model-independent units.

    Parameters
    ----------
    text
        One document.
    pattern
        Regex whose non-empty, non-overlapping matches are the units (``re.finditer``);
        default :data:`DEFAULT_UNIT_PATTERN` (letter runs, digit runs, other single
        non-space characters). Whitespace inside a match is allowed by the pattern but
        the default never produces it.

    Returns
    -------
    np.ndarray
        Shape ``(n_units, 2)`` int64: UTF-8 byte ``[start, end)`` of each unit, sorted,
        non-overlapping, inside ``[0, len(text.encode())]``.

    Examples
    --------
    >>> from sigmap_lib.inputs import segment_units
    >>> text = "naïve 42 🚀!"
    >>> spans = segment_units(text)
    >>> spans.tolist()  # byte offsets: "ï" is 2 bytes, the emoji 4
    [[0, 6], [7, 9], [10, 14], [14, 15]]
    >>> [text.encode()[a:b].decode() for a, b in spans]
    ['naïve', '42', '🚀', '!']
    >>> segment_units("state-of-the-art", r"\\S+").tolist()  # a custom pattern
    [[0, 16]]
    """
    if pattern is None or pattern == DEFAULT_UNIT_PATTERN:
        from sigmap_lib.inputs._segment_kernel import segment_default

        try:
            return segment_default(text.encode("utf-8"))
        except UnicodeEncodeError:  # lone surrogates: no UTF-8 bytes; the regex copes
            pass
    return segment_regex(text, pattern)


def segment_regex(text: str, pattern: str | None = None) -> np.ndarray:
    """:func:`segment_units` by ``re.finditer`` (any pattern; the reference for the default
    pattern's numba kernel, which is ~10x faster and gives the same units).

    Examples
    --------
    >>> from sigmap_lib.inputs import segment_regex, segment_units
    >>> segment_regex("Hello, world!").tolist()
    [[0, 5], [5, 6], [7, 12], [12, 13]]
    >>> (segment_regex("naïve café") == segment_units("naïve café")).all()
    np.True_
    """
    rx = compile_pattern(pattern)
    spans = [m.span() for m in rx.finditer(text) if m.end() > m.start()]
    if not spans:
        return np.zeros((0, 2), dtype=np.int64)
    chars = np.asarray(spans, dtype=np.int64)
    if text.isascii():
        return chars
    return char_to_byte_offsets(text)[chars]


def unit_byte_spans(
    text: str, pattern: str | None = None, *, units: np.ndarray | None = None
) -> np.ndarray:
    """Attributed byte spans of the units: they tile the whole document.

    Unit ``i`` is attributed ``[end_{i-1}, end_i)`` (``end_{-1} = 0``), i.e. itself plus
    the whitespace / uncovered bytes before it; the last unit also gets the trailing bytes
    up to ``n_bytes``.

    Parameters
    ----------
    text
        The document.
    pattern
        Unit pattern (see :func:`segment_units`); ignored when ``units`` is given.
    units
        Precomputed ``segment_units(text, pattern)``.

    Returns
    -------
    np.ndarray
        Shape ``(n_units, 2)`` int64, contiguous, first start 0, last end ``n_bytes``
        (empty ``(0, 2)`` when the text has no units).

    Examples
    --------
    >>> from sigmap_lib.inputs import segment_units, unit_byte_spans
    >>> text = "ab  cd. "
    >>> segment_units(text).tolist()  # "ab", "cd", "."
    [[0, 2], [4, 6], [6, 7]]
    >>> unit_byte_spans(text).tolist()  # + the spaces before; the last takes the trailing one
    [[0, 2], [2, 6], [6, 8]]
    """
    if units is None:
        units = segment_units(text, pattern)
    n = len(units)
    out = np.empty((n, 2), dtype=np.int64)
    if n == 0:
        return out
    out[0, 0] = 0
    out[1:, 0] = units[:-1, 1]
    out[:, 1] = units[:, 1]
    out[-1, 1] = len(text.encode("utf-8", "surrogatepass"))
    return out
