"""A numba kernel for the default unit pattern (``[^\\W\\d_]+|\\d+|\\S``) over UTF-8 bytes.

Every code point gets one of four classes from a table built from Python's own ``re``
(so the units are exactly those of the regex): space (``\\s``), letter (``\\w`` that is not
a digit or ``_``), digit (``\\d``), other. The kernel walks the bytes once: a letter run and a
digit run are units, every other non-space character is a unit of its own.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import numpy as np

SPACE, LETTER, DIGIT, OTHER = 0, 1, 2, 3


@lru_cache(maxsize=1)
def class_table() -> np.ndarray:
    """``(0x110000,)`` uint8: the class of every code point under Python's ``re``."""
    cps = np.arange(0x110000, dtype=np.uint32)
    cps[0xD800:0xE000] = 0x20  # surrogates never occur in valid UTF-8
    text = cps.astype("<u4").tobytes().decode("utf-32-le")
    table = np.full(0x110000, OTHER, dtype=np.uint8)
    for cls, rx in ((SPACE, r"\s"), (DIGIT, r"\d"), (LETTER, r"[^\W\d_]")):
        idx = [m.start() for m in re.finditer(rx, text)]
        table[np.asarray(idx, dtype=np.int64)] = cls
    table[0xD800:0xE000] = OTHER
    return table


@lru_cache(maxsize=1)
def _kernel() -> Any:
    import numba

    @numba.njit(cache=True, nogil=True)
    def segment(buf: np.ndarray, table: np.ndarray, out: np.ndarray) -> int:
        n = buf.size
        i = 0
        k = 0
        run_cls = SPACE
        run_start = 0
        while i < n:
            b = buf[i]
            if b < 0x80:
                cp = b
                ln = 1
            elif b < 0xE0:
                cp = ((b & 0x1F) << 6) | (buf[i + 1] & 0x3F)
                ln = 2
            elif b < 0xF0:
                cp = ((b & 0x0F) << 12) | ((buf[i + 1] & 0x3F) << 6) | (buf[i + 2] & 0x3F)
                ln = 3
            else:
                cp = (
                    ((b & 0x07) << 18)
                    | ((buf[i + 1] & 0x3F) << 12)
                    | ((buf[i + 2] & 0x3F) << 6)
                    | (buf[i + 3] & 0x3F)
                )
                ln = 4
            c = table[cp]
            if c != run_cls or c == OTHER:
                if run_cls == LETTER or run_cls == DIGIT:
                    out[k, 0] = run_start
                    out[k, 1] = i
                    k += 1
                if c == OTHER:
                    out[k, 0] = i
                    out[k, 1] = i + ln
                    k += 1
                    run_cls = SPACE
                else:
                    run_cls = c
                    run_start = i
            i += ln
        if run_cls == LETTER or run_cls == DIGIT:
            out[k, 0] = run_start
            out[k, 1] = n
            k += 1
        return k

    return segment


def segment_default(data: bytes) -> np.ndarray:
    """Units of UTF-8 ``data`` under the default pattern: ``(n_units, 2)`` int64 byte spans."""
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((buf.size, 2), dtype=np.int64)
    k = _kernel()(buf, class_table(), out)
    return out[:k].copy()
