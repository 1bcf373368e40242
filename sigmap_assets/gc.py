"""`sigmap gc`: list (and with ``--yes`` remove) stored data that no current key uses.

Unused: NLL cells of a superseded model fingerprint (weights changed) and of models removed
from the registry, rank stores other than a shard's current one, and every stored product of a
shard that is no longer in the plan (its file was removed or changed), plus data of the
single-corpus layout before shards. Never touched:
the current plan's shards, each cell's and shard's CURRENT data, tables, reports, metabench, the
Dagster instance, worlds and model caches.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sigmap_assets.resources import SigmapStorage
from sigmap_assets.state import StoredState
from sigmap_assets.tables import read_json


def _dirs(p: Path) -> list[Path]:
    return sorted(q for q in p.iterdir() if q.is_dir()) if p.is_dir() else []


def unused_paths(
    storage: SigmapStorage, registry: set[str] | None = None
) -> list[tuple[Path, str]]:
    """``(path, why)`` of every stored item no current key uses (local roots).

    ``registry``: the model keys of the current ``models.yaml``; the NLL cells of other
    models are listed too (None: the registry is not consulted)."""
    lay = storage.layout
    plan = set(StoredState.read(storage).shard_keys)
    out: list[tuple[Path, str]] = [
        (Path(p), "single-corpus layout (before shards)") for p in lay.legacy_paths()
    ]
    for d in _dirs(Path(lay.path("corpus", "shards"))):
        if d.name not in plan:
            out.append((d, "shard no longer in the plan"))
    for shard in _dirs(Path(lay.path("nll", "shards"))):
        if shard.name not in plan:
            out.append((shard, "NLL of a shard no longer in the plan"))
            continue
        for model in _dirs(shard):
            if registry is not None and model.name not in registry:
                out.append((model, "NLL of a model removed from models.yaml"))
                continue
            cur = model / "CURRENT"
            keep = read_json(cur)["fingerprint"] if cur.exists() else None
            for fp in _dirs(model):
                if fp.name != keep:
                    out.append((fp, f"superseded model fingerprint (current: {keep})"))
    for shard in _dirs(Path(lay.path("ranks", "shards"))):
        if shard.name not in plan:
            out.append((shard, "ranks of a shard no longer in the plan"))
            continue
        cur = shard / "CURRENT"
        keep = read_json(cur).get("ranks") if cur.exists() else None
        for d in _dirs(shard):
            if d.name != keep:
                out.append((d, "superseded rank store"))
    screens = Path(lay.path("screening", "shards"))
    for f in sorted(screens.glob("*.json")) if screens.is_dir() else []:
        if f.stem not in plan:
            out.append((f, "screening partial of a shard no longer in the plan"))
    return out


def remove(paths: list[tuple[Path, str]]) -> int:
    """Delete the listed paths; returns bytes freed."""
    freed = 0
    for p, _ in paths:
        if p.is_dir():
            freed += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            shutil.rmtree(p)
        elif p.exists():
            freed += p.stat().st_size
            p.unlink()
    return freed
