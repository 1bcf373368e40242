"""Worlds: complete input folders (corpus, registry, catalog, scores, items) with known truth.

- :mod:`sigmap_lib.worlds.zoo` — tiny real transformers trained locally (the demo default);
- :mod:`sigmap_lib.worlds` — planted signatures, fast;
- :mod:`sigmap_lib.worlds` — building blocks for tiny HF models and tokenizers.

:func:`check_world` validates a user's world folder (docs/FORMATS.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import corpus_files

REQUIRED = ("corpus", "models.yaml", "catalog.yaml", "scores.csv")


@dataclass(frozen=True)
class WorldLayout:
    """Where the parts of a world folder are, and a fingerprint of their contents."""

    root: Path
    corpus: Path
    models: Path
    catalog: Path
    scores: Path
    corpus_files: tuple[Path, ...] = field(default=())
    fingerprint: str = ""


def _file_digest(path: Path, h: hashlib._Hash) -> None:
    h.update(str(path.name).encode())
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)


def check_world(root: str | Path, fingerprint_exclude: Sequence[str] = ()) -> WorldLayout:
    """Validate a world folder's layout and fingerprint its inputs.

    Parameters
    ----------
    root
        Folder laid out as in ``docs/FORMATS.md``.
    fingerprint_exclude
        Files or folders (relative to ``root``) left out of the fingerprint: inputs whose
        changes are tracked on their own (the orchestrator observes the registry, the
        catalog, the score files and the corpus separately).

    Returns
    -------
    WorldLayout
        Paths of the parts and a sha256 fingerprint over every (non-hidden, not excluded)
        file of the world (so downstream assets can tell when any input changed).

    Raises
    ------
    SigmapInputError
        Naming the folder and the missing part.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.worlds import check_world
    >>> root = Path("my_world")
    >>> (root / "corpus").mkdir(parents=True)
    >>> _ = (root / "corpus" / "doc.txt").write_text("a river stone")
    >>> check_world(root)
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: world folder .../my_world is missing models.yaml,
    catalog.yaml, scores.csv (expected layout: docs/FORMATS.md)
    >>> for name in ("models.yaml", "catalog.yaml", "scores.csv"):
    ...     _ = (root / name).write_text("")  # only the layout is checked here
    >>> layout = check_world(root)
    >>> [p.name for p in layout.corpus_files], layout.scores.name, len(layout.fingerprint)
    (['doc.txt'], 'scores.csv', 64)
    >>> _ = (root / "corpus" / "doc.txt").write_text("a changed stone")
    >>> check_world(root, fingerprint_exclude=["corpus"]).fingerprint == check_world(
    ...     root, fingerprint_exclude=["corpus"]
    ... ).fingerprint != check_world(root).fingerprint
    True
    """
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise SigmapInputError(f"world folder {root} does not exist or is not a directory")
    missing = [name for name in REQUIRED if not (root / name).exists()]
    if missing:
        raise SigmapInputError(
            f"world folder {root} is missing {', '.join(missing)} (expected layout: docs/FORMATS.md)"
        )
    corpus = root / "corpus"
    try:
        files = tuple(corpus_files(corpus))  # the files the corpus assets read
    except SigmapInputError:
        raise SigmapInputError(
            f"corpus folder {corpus} holds no .txt, .jsonl or .parquet files"
        ) from None
    h = hashlib.sha256()
    skip = {Path(e).parts for e in fingerprint_exclude}
    every = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and not any(p.relative_to(root).parts[: len(s)] == s for s in skip)
    )
    for p in every:
        h.update(str(p.relative_to(root)).encode())
        _file_digest(p, h)
    return WorldLayout(
        root=root,
        corpus=corpus,
        models=root / "models.yaml",
        catalog=root / "catalog.yaml",
        scores=root / "scores.csv",
        corpus_files=files,
        fingerprint=h.hexdigest(),
    )
