"""The benchmark catalog: family, format and function of every benchmark.

The catalog is a YAML file (``catalog.yaml`` in a world folder, see docs/FORMATS.md)::

    benchmarks:
      arc:
        family: ai2
        format: multiple_choice
        function: reasoning
        score_range: [0, 100]             # optional, on the stored (raw) scores
        direction: higher                 # optional: lower for errors, perplexities
        transform: x                      # optional: 1 - x, 100 - x, -x, -log(x)
        items: items/arc.parquet          # optional, relative to the YAML folder
        responses: responses/arc.parquet  # optional, relative to the YAML folder

The overlap analyses need ``family``, ``format`` and ``function`` for every benchmark,
so they are required. Unknown keys are errors (a typo such as ``familly`` would
otherwise silently drop the metadata).

Benchmark names are kept as written; :func:`benchmark_slug` turns a name into a safe
Dagster partition key and path component.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs._direction import check_direction

REQUIRED_KEYS: tuple[str, ...] = ("family", "format", "function")
OPTIONAL_KEYS: tuple[str, ...] = (
    "score_range",
    "direction",
    "transform",
    "items",
    "responses",
    "description",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
_MAX_SLUG = 120


@dataclass(frozen=True)
class Benchmark:
    """One catalog entry.

    Attributes
    ----------
    name : str
        The benchmark name as written in the catalog (also the ``benchmark`` value in
        score tables).
    family : str
        Benchmarks built by the same recipe or publisher (e.g. ``ai2``).
    format : str
        Question format (``multiple_choice``, ``cloze``, ``generation``, ...).
    function : str
        The capability the benchmark claims to measure (``reasoning``, ``math``, ...).
    score_range : tuple[float, float] or None
        Inclusive ``(low, high)`` range of valid scores; ``None`` = unchecked.
    items : Path or None
        Absolute path of the question-text file (columns ``item_id``, ``text``).
    responses : Path or None
        Absolute path of the item-level 0/1 response file (``model`` + item columns).
    description : str or None
        Free text.
    direction : str
        ``"higher"`` (a larger stored score is better) or ``"lower"`` (errors, perplexities).
    transform : str
        How the stored score becomes higher-is-better (:data:`SCORE_TRANSFORMS`:
        ``x``, ``-x``, ``1 - x``, ``100 - x``, ``-log(x)``).
    """

    name: str
    family: str
    format: str
    function: str
    score_range: tuple[float, float] | None = None
    items: Path | None = None
    responses: Path | None = None
    description: str | None = None
    direction: str = "higher"
    transform: str = "x"

    @property
    def slug(self) -> str:
        """Partition key / path component of this benchmark (:func:`benchmark_slug`)."""
        return benchmark_slug(self.name)


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML loader that rejects a key written twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def benchmark_slug(name: str) -> str:
    """Safe Dagster partition key and path component for a benchmark name.

    ``/`` becomes ``__`` (as in ``registry.model_slug``); every character outside
    ``[A-Za-z0-9._+-]`` (so ``| , [ ]``, spaces, ``:``, ``\\``, non-ASCII) becomes ``_``;
    runs of dots become ``_`` (no ``..``), and a leading dot becomes ``_`` (no hidden
    files). Names that are already safe are returned unchanged, so the slug of a plain
    name like ``arc`` or ``ARC-C`` is the name itself. Very long names are cut and
    suffixed with a short hash so the result stays a valid file name.

    Parameters
    ----------
    name : str
        Benchmark name (non-empty).

    Returns
    -------
    str
        The slug. Different names can share a slug (``a/b`` and ``a__b``); the catalog
        reader rejects such collisions.

    Raises
    ------
    SigmapInputError
        If ``name`` is not a non-empty string.

    Examples
    --------
    >>> from sigmap_lib.inputs import benchmark_slug
    >>> benchmark_slug("ARC-C")  # already safe: unchanged
    'ARC-C'
    >>> benchmark_slug("mmlu/high school: math")
    'mmlu__high_school__math'
    >>> benchmark_slug("..hidden")
    '_hidden'
    """
    if not isinstance(name, str) or not name.strip():
        raise SigmapInputError(f"benchmark name {name!r} is empty or not a string")
    slug = name.strip().replace("/", "__")
    slug = _UNSAFE.sub("_", slug)
    slug = re.sub(r"\.{2,}", "_", slug)
    if slug.startswith("."):
        slug = "_" + slug[1:]
    if len(slug) > _MAX_SLUG:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
        slug = f"{slug[: _MAX_SLUG - 11]}-{digest}"
    return slug


def _parse_range(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise SigmapInputError(
            f"{where}: score_range must be a list [low, high] of two numbers, got {value!r}"
        )
    out: list[float] = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise SigmapInputError(
                f"{where}: score_range must hold two finite numbers, got {value!r}"
            )
        out.append(float(v))
    if out[0] >= out[1]:
        raise SigmapInputError(
            f"{where}: score_range low must be below high, got [{out[0]:g}, {out[1]:g}]"
        )
    return out[0], out[1]


def _resolve(value: Any, base: Path | None, where: str) -> Path:
    if not isinstance(value, str | Path) or not str(value).strip():
        raise SigmapInputError(f"{where} must be a non-empty path string, got {value!r}")
    p = Path(str(value)).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    return p.resolve() if p.is_absolute() else p


def catalog_from_dict(
    data: Any, *, source: str = "<catalog>", base_dir: Path | None = None
) -> dict[str, Benchmark]:
    """Build the catalog from an already-parsed YAML/JSON document.

    Parameters
    ----------
    data : Any
        The parsed document: a mapping with a ``benchmarks`` mapping.
    source : str
        Name used in error messages (the file path).
    base_dir : Path or None
        Folder that relative ``items`` / ``responses`` paths are resolved against.

    Returns
    -------
    dict[str, Benchmark]
        Benchmark name -> entry, in file order.

    Raises
    ------
    SigmapInputError
        On a missing ``benchmarks`` key, unknown top-level or benchmark keys, missing
        required keys, empty values, a bad ``score_range`` or two names with one slug.

    Examples
    --------
    >>> from sigmap_lib.inputs import catalog_from_dict
    >>> entry = {"family": "ai2", "format": "multiple_choice", "function": "reasoning"}
    >>> catalog = catalog_from_dict({"benchmarks": {"arc": {**entry, "score_range": [0, 100]}}})
    >>> catalog["arc"]
    Benchmark(name='arc', family='ai2', format='multiple_choice', function='reasoning',
              score_range=(0.0, 100.0), items=None, responses=None, description=None,
              direction='higher', transform='x')
    >>> catalog_from_dict({"benchmarks": {"arc": {**entry, "familly": "ai2"}}})
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: catalog <catalog>, benchmark 'arc': unknown key(s)
    ['familly']; allowed: ['family', 'format', 'function', 'score_range', 'direction',
    'transform', 'items', 'responses', 'description']
    """
    if not isinstance(data, Mapping):
        raise SigmapInputError(
            f"catalog {source}: expected a mapping with key 'benchmarks', got {type(data).__name__}"
        )
    extra_top = sorted(str(k) for k in data if k != "benchmarks")
    if extra_top:
        raise SigmapInputError(
            f"catalog {source}: unknown top-level key(s) {extra_top}; only 'benchmarks' is allowed"
        )
    if "benchmarks" not in data:
        raise SigmapInputError(f"catalog {source}: missing top-level key 'benchmarks'")
    entries = data["benchmarks"]
    if not isinstance(entries, Mapping) or not entries:
        raise SigmapInputError(
            f"catalog {source}: 'benchmarks' must be a non-empty mapping name -> entry"
        )
    out: dict[str, Benchmark] = {}
    slugs: dict[str, str] = {}
    for raw_name, entry in entries.items():
        name = str(raw_name)
        where = f"catalog {source}, benchmark {name!r}"
        if not name.strip():
            raise SigmapInputError(f"catalog {source}: empty benchmark name")
        if not isinstance(entry, Mapping):
            raise SigmapInputError(
                f"{where}: expected a mapping with keys {list(REQUIRED_KEYS)}, got {entry!r}"
            )
        unknown = sorted(str(k) for k in entry if k not in REQUIRED_KEYS + OPTIONAL_KEYS)
        if unknown:
            raise SigmapInputError(
                f"{where}: unknown key(s) {unknown}; allowed: {list(REQUIRED_KEYS + OPTIONAL_KEYS)}"
            )
        missing = [k for k in REQUIRED_KEYS if k not in entry]
        if missing:
            raise SigmapInputError(f"{where}: missing required key(s) {missing}")
        meta: dict[str, str] = {}
        for key in REQUIRED_KEYS:
            value = entry[key]
            if not isinstance(value, str) or not value.strip():
                raise SigmapInputError(f"{where}: {key} must be a non-empty string, got {value!r}")
            meta[key] = value.strip()
        rng = entry.get("score_range")
        score_range = None if rng is None else _parse_range(rng, where)
        items = entry.get("items")
        responses = entry.get("responses")
        description = entry.get("description")
        if description is not None and not isinstance(description, str):
            raise SigmapInputError(f"{where}: description must be a string, got {description!r}")
        direction, transform = check_direction(
            entry.get("direction"), entry.get("transform"), where
        )
        slug = benchmark_slug(name)
        key = slug.casefold()
        if key in slugs:
            raise SigmapInputError(
                f"catalog {source}: benchmarks {slugs[key]!r} and {name!r} map to the same "
                f"slug {slug!r} (partition key / folder name); rename one of them"
            )
        slugs[key] = name
        out[name] = Benchmark(
            name=name,
            family=meta["family"],
            format=meta["format"],
            function=meta["function"],
            score_range=score_range,
            items=None if items is None else _resolve(items, base_dir, f"{where}: items"),
            responses=None
            if responses is None
            else _resolve(responses, base_dir, f"{where}: responses"),
            description=description,
            direction=direction,
            transform=transform,
        )
    return out


def read_catalog(path: str | Path) -> dict[str, Benchmark]:
    """Read ``catalog.yaml`` (format in docs/FORMATS.md).

    Parameters
    ----------
    path : str or Path
        The YAML file. Relative ``items`` / ``responses`` paths are resolved against
        its folder.

    Returns
    -------
    dict[str, Benchmark]
        Benchmark name -> :class:`Benchmark`, in file order.

    Raises
    ------
    SigmapInputError
        If the file is missing, empty or not valid YAML, or an entry is malformed (the
        message names the file, the benchmark and the key).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_catalog
    >>> _ = Path("catalog.yaml").write_text('''
    ... benchmarks:
    ...   arc:
    ...     family: ai2
    ...     format: multiple_choice
    ...     function: reasoning
    ...     items: items/arc.parquet
    ...   gsm8k/main:
    ...     family: openai
    ...     format: generation
    ...     function: math
    ...     score_range: [0, 100]
    ... ''')
    >>> catalog = read_catalog("catalog.yaml")
    >>> list(catalog), catalog["gsm8k/main"].slug, catalog["gsm8k/main"].score_range
    (['arc', 'gsm8k/main'], 'gsm8k__main', (0.0, 100.0))
    >>> catalog["arc"].items == Path("items/arc.parquet").resolve()  # relative to the YAML
    True
    """
    p = Path(path)
    if not p.is_file():
        raise SigmapInputError(f"catalog {p}: file not found")
    text = p.read_text(encoding="utf-8")
    if not text.strip():
        raise SigmapInputError(f"catalog {p}: file is empty")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise SigmapInputError(f"catalog {p}: not valid YAML: {exc}") from exc
    return catalog_from_dict(data, source=str(p), base_dir=p.resolve().parent)
