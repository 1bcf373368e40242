"""The model registry (``models.yaml``, see docs/FORMATS.md) and model slugs.

The raw model id (HF id or local path) is kept everywhere; partition keys and storage
paths use :func:`model_slug`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sigmap_lib._util._files import read_head
from sigmap_lib.errors import SigmapInputError

#: Allowed values of ``dtype`` in models.yaml.
DTYPES = ("auto", "float32", "bfloat16", "float16")
_KEYS = ("id", "path", "gguf", "revision", "family", "n_params", "dtype", "nll_source")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_SLUG = 120


def _check_id(raw_id: Any) -> str:
    if not isinstance(raw_id, str):
        raise SigmapInputError(f"model id {raw_id!r} must be a string")
    if not raw_id or not raw_id.strip():
        raise SigmapInputError("model id is empty")
    if raw_id != raw_id.strip():
        raise SigmapInputError(f"model id {raw_id!r} has leading/trailing whitespace")
    bad = [c for c in raw_id if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn")]
    if bad:
        raise SigmapInputError(f"model id {raw_id!r} contains control/invalid character {bad[0]!r}")
    parts = raw_id.replace("\\", "/").split("/")
    if ".." in parts:
        raise SigmapInputError(f"model id {raw_id!r} contains a '..' path component")
    if not [p for p in parts if p not in ("", ".")]:
        raise SigmapInputError(f"model id {raw_id!r} has no name")
    return raw_id


def model_slug(raw_id: str) -> str:
    """Partition key / path component for a raw model id.

    ``org/name`` → ``org__name``: path separators become ``__`` (empty and ``.``
    components dropped), every character outside ``[A-Za-z0-9._-]`` becomes ``-``, a
    leading ``.`` becomes ``_``. When this mapping is not unambiguously reversible (a
    character was replaced or dropped, a component contains ``__`` or starts/ends with
    ``_``, or the slug had to be shortened to 120 characters) an 8-hex sha256 suffix of
    the raw id is appended, so distinct ids keep distinct slugs. The result never
    contains ``/ | , [ ]`` or whitespace, is never ``.``/``..`` and is deterministic.

    Raises
    ------
    SigmapInputError
        Empty id, control characters, ``..`` components.

    Examples
    --------
    >>> from sigmap_lib.inputs import model_slug
    >>> model_slug("EleutherAI/pythia-160m")
    'EleutherAI__pythia-160m'
    >>> model_slug("my org/model v2")  # characters replaced: a hash keeps it unique
    'my-org__model-v2-0df93c1a'
    """
    raw = _check_id(raw_id)
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    mapped = [_SAFE.sub("-", p) for p in parts]
    # the plain form is used only when it can be decoded back unambiguously: the parts
    # joined by "/" give the raw id, nothing was replaced, and no part contains "__" or
    # starts/ends with "_" (so every "__" in the slug is a separator)
    lossy = (
        "/".join(parts) != raw
        or any(m != p for m, p in zip(mapped, parts))
        or any("__" in p or p.startswith("_") or p.endswith("_") for p in parts)
    )
    slug = "__".join(mapped)
    if slug.startswith("."):
        slug = "_" + slug[1:]
        lossy = True
    if len(slug) > _MAX_SLUG:
        slug = slug[: _MAX_SLUG - 9]
        lossy = True
    if lossy:
        slug = f"{slug}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return slug


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry.

    Attributes
    ----------
    id
        Raw id as written (HF id or local path).
    key
        ``model_slug(id)``: partition key and storage folder name.
    path
        Local ``save_pretrained`` folder (absolute) or ``None`` (load ``id``).
    gguf
        Local ``.gguf`` file (absolute; llama.cpp format, dequantized by ``load_model``
        and cached) or ``None``.
    revision, family
        Optional strings.
    n_params
        Optional parameter count (>= 0).
    dtype
        One of :data:`DTYPES`.
    nll_source
        Optional precomputed per-unit NLL file (absolute), ``(n_units,)`` float32 nats.
    """

    id: str
    key: str
    path: Path | None = None
    revision: str | None = None
    family: str | None = None
    n_params: int | None = None
    dtype: str = "auto"
    nll_source: Path | None = None
    gguf: Path | None = None

    @property
    def source(self) -> str:
        """What to pass to ``load_model``: the GGUF file, else the local path, else the id."""
        if self.gguf is not None:
            return str(self.gguf)
        return str(self.path) if self.path is not None else self.id


def _resolve(base: Path, value: Any, where: str, field: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SigmapInputError(f"{where}: '{field}' must be a non-empty string")
    p = Path(value).expanduser()
    return (p if p.is_absolute() else base / p).resolve()


def read_registry(path: str | Path) -> list[ModelSpec]:
    """Read ``models.yaml`` (top-level ``models:`` list) into :class:`ModelSpec` objects.

    Relative ``path`` / ``nll_source`` values are resolved against the YAML's folder; a
    relative ``gguf`` file against the entry's ``path`` when given, else the YAML's
    folder. Order is preserved.

    Raises
    ------
    SigmapInputError
        Naming the file and the entry: missing/unreadable file, bad YAML, missing
        ``models`` list, entry not a mapping, missing or invalid ``id``, unknown keys,
        unknown ``dtype``, negative or non-integer ``n_params``, duplicate ids or slugs,
        a ``gguf`` name not ending in ``.gguf``, a missing ``gguf`` file or one that is
        not GGUF.

    Examples
    --------
    A world folder's ``models.yaml``; a local ``path`` is relative to the file's folder:

    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_registry
    >>> world = Path("world")
    >>> world.mkdir()
    >>> _ = (world / "models.yaml").write_text('''
    ... models:
    ...   - id: EleutherAI/pythia-160m
    ...     revision: step143000
    ...     n_params: 160000000
    ...   - id: tiny-gpt2
    ...     path: models/tiny-gpt2
    ...     dtype: float32
    ... ''')
    >>> specs = read_registry(world / "models.yaml")
    >>> [(m.id, m.key, m.dtype) for m in specs]
    [('EleutherAI/pythia-160m', 'EleutherAI__pythia-160m', 'auto'),
     ('tiny-gpt2', 'tiny-gpt2', 'float32')]
    >>> specs[0].source, specs[1].source == str((world / "models/tiny-gpt2").resolve())
    ('EleutherAI/pythia-160m', True)

    A ``gguf`` entry must name an existing ``.gguf`` file:

    >>> _ = Path("gguf.yaml").write_text('''
    ... models:
    ...   - id: smollm2-135m
    ...     gguf: models/SmolLM2-135M-Instruct.Q4_1.gguf
    ... ''')
    >>> read_registry("gguf.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: model registry gguf.yaml: models[0] (id 'smollm2-135m'): gguf file .../models/SmolLM2-135M-Instruct.Q4_1.gguf does not exist
    """
    import yaml

    f = Path(path)
    if not f.exists():
        raise SigmapInputError(f"model registry {f} does not exist")
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SigmapInputError(f"model registry {f}: invalid YAML ({exc})") from exc
    if not isinstance(data, dict) or "models" not in data:
        raise SigmapInputError(f"model registry {f}: expected a top-level 'models:' list")
    entries = data["models"]
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise SigmapInputError(f"model registry {f}: 'models' must be a list")
    extra = sorted(set(data) - {"models"})
    if extra:
        raise SigmapInputError(f"model registry {f}: unknown top-level key {extra[0]!r}")
    base = f.resolve().parent
    specs: list[ModelSpec] = []
    ids: dict[str, int] = {}
    slugs: dict[str, str] = {}
    for i, e in enumerate(entries):
        where = f"model registry {f}: models[{i}]"
        if not isinstance(e, dict):
            raise SigmapInputError(f"{where}: entry must be a mapping with an 'id'")
        if "id" not in e or e["id"] is None:
            raise SigmapInputError(f"{where}: missing 'id'")
        raw_id = e["id"]
        where = f"{where} (id {raw_id!r})"
        unknown = [k for k in e if k not in _KEYS]
        if unknown:
            raise SigmapInputError(
                f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(_KEYS)})"
            )
        try:
            key = model_slug(raw_id)
        except SigmapInputError as exc:
            raise SigmapInputError(f"{where}: invalid id: {exc}") from exc
        if raw_id in ids:
            raise SigmapInputError(f"{where}: duplicate id (also models[{ids[raw_id]}])")
        if key in slugs:
            raise SigmapInputError(f"{where}: slug {key!r} collides with id {slugs[key]!r}")
        ids[raw_id] = i
        slugs[key] = raw_id
        dtype = e.get("dtype", "auto")
        dtype = "auto" if dtype is None else dtype
        if dtype not in DTYPES:
            raise SigmapInputError(
                f"{where}: unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})"
            )
        n_params = e.get("n_params")
        if n_params is not None:
            if isinstance(n_params, float) and n_params.is_integer():
                n_params = int(n_params)
            if isinstance(n_params, bool) or not isinstance(n_params, int):
                raise SigmapInputError(f"{where}: n_params must be an integer, got {n_params!r}")
            if n_params < 0:
                raise SigmapInputError(f"{where}: n_params must be >= 0, got {n_params}")
        for field in ("revision", "family"):
            v = e.get(field)
            if v is not None and not isinstance(v, str | int | float):
                raise SigmapInputError(f"{where}: '{field}' must be a string")
        rev, fam = e.get("revision"), e.get("family")
        model_path = _resolve(base, e.get("path"), where, "path")
        specs.append(
            ModelSpec(
                id=raw_id,
                key=key,
                path=model_path,
                revision=None if rev is None else str(rev),
                family=None if fam is None else str(fam),
                n_params=n_params,
                dtype=dtype,
                nll_source=_resolve(base, e.get("nll_source"), where, "nll_source"),
                gguf=_gguf_file(model_path or base, e.get("gguf"), where),
            )
        )
    return specs


def _gguf_file(base: Path, value: Any, where: str) -> Path | None:
    """The entry's ``gguf`` file, resolved against ``base`` and checked (exists, GGUF magic)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SigmapInputError(f"{where}: 'gguf' must be a non-empty string (a .gguf file)")
    if Path(value).suffix.lower() != ".gguf":
        raise SigmapInputError(
            f"{where}: 'gguf' must name a .gguf file, got {value!r} "
            "(for a save_pretrained folder use 'path')"
        )
    p = Path(value).expanduser()
    p = (p if p.is_absolute() else base / p).resolve()
    magic = read_head(p, 4, f"{where}: gguf file")
    if magic != b"GGUF":
        raise SigmapInputError(
            f"{where}: gguf file {p} is not a GGUF file (starts with {magic!r}, expected b'GGUF')"
        )
    return p
