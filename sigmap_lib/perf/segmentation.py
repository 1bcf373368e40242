"""``sigmap bench segmentation``: unit segmentation throughput, per core.

The default unit pattern's numba kernel (:func:`sigmap_lib.inputs.segment_units`) against
``re.finditer`` with the same pattern (the implementation it replaced), in the same run, on
the same text: the Python standard library's source files (code, docstrings, comments) plus
a multilingual block (accents, CJK, emoji, other scripts' digits, Unicode whitespace). Both
produce the same units (checked here too). One thread; best of ``--repeat`` runs each.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

MIXED = " naïve café 日本語テキスト 🚀🚀 👩\u200d💻 x²³ ٣٤٥ e\u0301 \u00a0\u2003tab\t Ελληνικά "


def main(argv: list[str] | None = None) -> dict:
    from sigmap_lib.inputs import segment_regex, segment_units

    ap = argparse.ArgumentParser(prog="sigmap bench segmentation")
    ap.add_argument("--mb", type=float, default=20.0, help="megabytes of text (default 20)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    parts, size = [], 0
    target = int(args.mb * 1e6)
    while size < target:
        for f in files:
            t = f.read_text(encoding="utf-8", errors="replace") + MIXED * 20
            parts.append(t)
            size += len(t.encode())
            if size >= target:
                break
    text = "".join(parts)
    nbytes = len(text.encode())
    segment_units(text[:10_000])  # JIT compile and the code-point table, not timed

    def best(fn) -> tuple[float, np.ndarray]:
        times, out = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn(text)
            times.append(time.perf_counter() - t0)
        return min(times), out

    t_fast, fast = best(segment_units)
    t_re, ref = best(segment_regex)
    identical = bool(np.array_equal(fast, ref))
    result = {
        "bench": "segmentation",
        "megabytes": round(nbytes / 1e6, 2),
        "units": len(fast),
        "kernel_mb_per_s": round(nbytes / 1e6 / t_fast, 1),
        "regex_mb_per_s": round(nbytes / 1e6 / t_re, 1),
        "speedup": round(t_re / t_fast, 1),
        "kernel_units_per_s": round(len(fast) / t_fast),
        "identical": identical,
    }
    print(f"segmentation: {result}", file=sys.stderr)
    return result
