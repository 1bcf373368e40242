"""Compare two storage roots file by file: `python scripts/compare_storage.py A B`.

JSON files field by field (a field named in ``--ignore`` is left out wherever it stands;
NaN equals NaN), parquet tables with ``polars.DataFrame.equals``, every other file by
sha256; in JSON and table strings, root A's own path reads as root B's. Dagster's own
home (``.dagster``), the runner's logs and lock, and files that hold run ids, timings or
absolute paths by nature (``--skip``, glob patterns on the relative path) are left out.
A cell folder is named by its model's fingerprint, which includes the model files' stamps,
so two fresh runs name the same cells differently: ``--follow-current`` also compares, for
every ``CURRENT`` pointer in both roots, the folder it names in A with the one it names in
B, file by file. Prints one line per difference and, last, one JSON line with the counts.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import sys
from pathlib import Path

SKIP = [".dagster/*", ".sigmap/*", "*.lock", "*.log"]


def _strip(obj, ignore: set[str]):
    if isinstance(obj, dict):
        return {k: _strip(v, ignore) for k, v in obj.items() if k not in ignore}
    if isinstance(obj, list):
        return [_strip(v, ignore) for v in obj]
    return obj


def _json_diff(a, b, path: str = "") -> list[str]:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return []  # NaN written as NaN on both sides
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'B' if k not in a else 'A'}")
            else:
                out += _json_diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _json_diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:80]} != {str(b)[:80]}"]


def _same(pa: Path, pb: Path, ignore: set[str], roots: tuple[str, str]) -> list[str]:
    if pa.suffix == ".json":  # each root's own path reads as the other's
        a = _strip(json.loads(pa.read_text().replace(roots[0], roots[1])), ignore)
        b = _strip(json.loads(pb.read_text()), ignore)
        return _json_diff(a, b)
    if pa.suffix == ".parquet":
        import polars as pl

        ta, tb = pl.read_parquet(pa), pl.read_parquet(pb)
        ta = ta.with_columns(pl.col(pl.String).str.replace_all(roots[0], roots[1], literal=True))
        return [] if ta.equals(tb) else ["table differs"]
    ha = hashlib.sha256(pa.read_bytes()).hexdigest()
    return [] if ha == hashlib.sha256(pb.read_bytes()).hexdigest() else ["bytes differ"]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--ignore", nargs="*", default=[], help="JSON fields to leave out")
    ap.add_argument("--skip", nargs="*", default=[], help="more glob patterns to leave out")
    ap.add_argument(
        "--follow-current",
        action="store_true",
        help="compare the folders the CURRENT pointers name, A's against B's",
    )
    args = ap.parse_args(argv)
    skip = SKIP + args.skip

    def files(root: Path) -> set[str]:
        rel = (str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        return {r for r in rel if not any(fnmatch.fnmatch(r, s) for s in skip)}

    fa, fb = files(args.a), files(args.b)
    counts = {"compared": 0, "identical": 0, "different": 0, "only_a": 0, "only_b": 0}
    for r in sorted(fa - fb):
        print(f"only in A: {r}")
        counts["only_a"] += 1
    for r in sorted(fb - fa):
        print(f"only in B: {r}")
        counts["only_b"] += 1
    for r in sorted(fa & fb):
        counts["compared"] += 1
        diffs = _same(args.a / r, args.b / r, set(args.ignore), (str(args.a), str(args.b)))
        counts["different" if diffs else "identical"] += 1
        for d in diffs[:5]:
            print(f"{r}: {d}")
    if args.follow_current:
        counts |= _follow_current(args, fa & fb, set(args.ignore))
    print(json.dumps(counts))
    return counts


def _pointed(current: Path) -> Path | None:
    """The folder beside it that a ``CURRENT`` pointer names (its ``fingerprint`` or ``dir``
    field); None for a pointer that names no folder."""
    record = json.loads(current.read_text())
    name = record.get("fingerprint") or record.get("dir")
    folder = current.parent / str(name)
    return folder if name and folder.is_dir() else None


def _follow_current(args: argparse.Namespace, common: set[str], ignore: set[str]) -> dict:
    out = {"current_files": 0, "current_identical": 0}
    for r in sorted(c for c in common if Path(c).name == "CURRENT"):
        da, db = _pointed(args.a / r), _pointed(args.b / r)
        if da is None or db is None:
            continue
        rel_a = {str(p.relative_to(da)) for p in da.rglob("*") if p.is_file()}
        rel_b = {str(p.relative_to(db)) for p in db.rglob("*") if p.is_file()}
        for f in sorted(rel_a ^ rel_b):
            print(f"{r} -> {f}: only in {'A' if f in rel_a else 'B'}")
        for f in sorted(rel_a & rel_b):
            out["current_files"] += 1
            diffs = _same(da / f, db / f, ignore, (str(da), str(db)))
            out["current_identical"] += not diffs
            for d in diffs[:5]:
                print(f"{r} -> {f}: {d}")
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["different"] == 0 else 1)
