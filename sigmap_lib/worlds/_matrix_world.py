"""A matrix world: a world folder built from per-unit values of many models (units × models)
instead of a corpus the pipeline scores itself (docs/OWN_WORLD.md, "Bring a matrix").

The units become one unit file (``corpus/units.units.jsonl``: one record per unit, the whole
record one unit; :data:`~sigmap_lib.inputs.UNIT_FILE_SUFFIX`), each model's column becomes its
imported NLL (``nll/<model>.npy``, nats per unit in corpus order, so adding a model imports
only that model), and the benchmarks keep their stored values with the direction and
transform declared in the catalog. Units without text carry their id as text (what the
report shows); the world's ``settings.yaml`` then says ``corpus: {units_have_text: false}``
and no model can be scored on that corpus.

Bits per byte ``b`` of a unit with ``n`` bytes of text are stored as ``b · n · ln 2`` nats,
which the pipeline turns back into exactly ``b`` (its bits per byte divide by the unit's
bytes).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import UNIT_FILE_SUFFIX, UnitValues, model_slug

#: The perplexity-correlations benchmarks: who made them, their format and function, and how
#: the stored value (error rate or perplexity) becomes higher-is-better.
PERPLEXITY_CORRELATIONS_CATALOG: dict[str, dict[str, Any]] = {
    "arc_easy": {"family": "ai2", "format": "multiple_choice", "function": "science_qa"},
    "piqa": {"family": "ai2", "format": "multiple_choice", "function": "physical_commonsense"},
    "sciq": {"family": "ai2", "format": "multiple_choice", "function": "science_qa"},
}
_LAMBADA = {"family": "lambada", "format": "cloze", "function": "language_modeling"}

MATRIX_README = """# A matrix world (written by `sigmap init-world --from {kind}`)

Source: {source}. {n_units} units × {n_models} models ({measure}); {n_bench} benchmarks.

Run it: `sigmap demo --world {path}`; check it: `sigmap check --world {path}`.

| file | what it is |
|---|---|
| `corpus/units{suffix}` | one record per unit (`id`, `text`{groups}); the whole record is one unit |
| `nll/*.npy` | each model's values as nats per unit, in corpus order (`nll_source`) |
| `models.yaml` | the models, their families and `nll_source` |
| `catalog.yaml` | the benchmarks, with `direction` and `transform` (lower-is-better values) |
| `scores.csv` | the benchmarks' stored values, one row per model |
| `settings.yaml` | {settings} |

{text_note}
"""


def _unit_text(uv: UnitValues, i: int) -> str:
    t = uv.text[i].strip() if uv.text is not None and uv.text[i] is not None else ""
    return t or uv.unit_ids[i].strip() or f"unit {i}"


def write_matrix_world(
    path: str | Path,
    uv: UnitValues,
    *,
    scores: Mapping[str, Sequence[float]],
    catalog: Mapping[str, Mapping[str, Any]],
    families: Sequence[str] | None = None,
    kind: str = "table",
    overwrite: bool = False,
) -> Path:
    """Write a world folder from per-unit values of many models and their benchmark values.

    Parameters
    ----------
    path : path
        The folder to create (must not exist unless ``overwrite``).
    uv : UnitValues
        Values ``(n_units, n_models)``; their text when known, their groups.
    scores : mapping str -> sequence of float
        Benchmark → stored value per model of ``uv.models`` (NaN = not scored).
    catalog : mapping
        Benchmark → catalog entry (``family``, ``format``, ``function``, optionally
        ``direction`` / ``transform``, docs/FORMATS.md).
    families : sequence of str, optional
        Family of each model.
    kind : str
        Named in the README (the route the values came by).
    overwrite : bool

    Returns
    -------
    Path

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.inputs import UnitValues, read_corpus
    >>> from sigmap_lib.worlds import preflight_world, write_matrix_world
    >>> rng = np.random.default_rng(0)
    >>> uv = UnitValues(values=rng.uniform(0.6, 1.4, (30, 6)),
    ...                 unit_ids=[f"doc {j}" for j in range(30)],
    ...                 models=[f"org/m{k}" for k in range(6)])
    >>> entry = {"family": "f", "format": "cloze", "function": "lm",
    ...          "direction": "lower", "transform": "-log(x)"}
    >>> root = write_matrix_world("mw", uv, scores={"ppl": rng.uniform(3, 9, 6)},
    ...                           catalog={"ppl": entry})
    >>> sorted(p.name for p in root.iterdir())
    ['README.md', 'catalog.yaml', 'corpus', 'models.yaml', 'nll', 'scores.csv', 'settings.yaml']
    >>> [p.severity for p in preflight_world(root) if p.severity == "error"]
    []
    """
    root = Path(path).expanduser()
    if root.exists():
        if not overwrite:
            raise SigmapInputError(f"init-world: {root} exists (choose a new folder)")
        shutil.rmtree(root)
    d, m = uv.values.shape
    if len(uv.unit_ids) != d or len(uv.models) != m:
        raise SigmapInputError(
            f"{uv.source}: values {uv.values.shape} for {len(uv.unit_ids)} units and "
            f"{len(uv.models)} models"
        )
    for b, col in scores.items():
        if len(col) != m:
            raise SigmapInputError(f"scores of {b!r}: {len(col)} values for {m} models")
        if b not in catalog:
            raise SigmapInputError(f"benchmark {b!r} has scores but no catalog entry")
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "corpus").mkdir(parents=True)
    (tmp / "nll").mkdir()
    texts = [_unit_text(uv, i) for i in range(d)]
    with open(tmp / "corpus" / f"units{UNIT_FILE_SUFFIX}", "w", encoding="utf-8") as fh:
        for i, (u, t) in enumerate(zip(uv.unit_ids, texts)):
            rec = {"id": u, "text": t, **{g: v[i] for g, v in uv.groups.items()}}
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    nbytes = np.array([len(t.encode("utf-8")) for t in texts], dtype=np.float64)
    scale = nbytes * math.log(2.0) if uv.measure == "bits_per_byte" else np.ones(d)
    entries = []
    seen: set[str] = set()
    for k, model in enumerate(uv.models):
        slug = model_slug(model)
        if slug in seen:
            raise SigmapInputError(f"{uv.source}: two models map to the file name {slug!r}")
        seen.add(slug)
        rel = f"nll/{slug}.npy"
        np.save(tmp / rel, uv.values[:, k] * scale)
        entry: dict[str, Any] = {"id": model}
        if families is not None:
            entry["family"] = str(families[k])
        entry["nll_source"] = rel
        entries.append(entry)
    (tmp / "models.yaml").write_text(yaml.safe_dump({"models": entries}, sort_keys=False))
    (tmp / "catalog.yaml").write_text(
        yaml.safe_dump({"benchmarks": {b: dict(catalog[b]) for b in scores}}, sort_keys=False)
    )
    lines = ["model," + ",".join(scores)]
    for k, model in enumerate(uv.models):
        vals = ["" if not np.isfinite(scores[b][k]) else repr(float(scores[b][k])) for b in scores]
        lines.append(f"{model}," + ",".join(vals))
    (tmp / "scores.csv").write_text("\n".join(lines) + "\n")
    has_text = uv.text is not None
    settings: dict[str, Any] = {"corpus": {"units_have_text": has_text}}
    (tmp / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    (tmp / "README.md").write_text(
        MATRIX_README.format(
            kind=kind,
            source=uv.source,
            n_units=d,
            n_models=m,
            measure=uv.measure.replace("_", " "),
            n_bench=len(scores),
            path=root,
            suffix=UNIT_FILE_SUFFIX,
            groups="".join(f", `{g}`" for g in uv.groups),
            settings="`corpus: units_have_text` (whether models could be scored on the units)",
            text_note=""
            if has_text
            else "The units have no text here: each carries its id as text, no model can be "
            "scored on this corpus (every model brings its values), and the semantic level "
            "is skipped (the benchmarks have no items).",
        )
    )
    tmp.rename(root)
    return root


def world_from_perplexity_correlations(
    path: str | Path, folder: str | Path, *, overwrite: bool = False
) -> Path:
    """``sigmap init-world PATH --from perplexity-correlations DIR``: the world of the 89
    real models of perplexity-correlations' CSVs (``DIR`` holds them, e.g.
    ``shared/data/realmodels``): 263 documents as units (bits per byte, no text), the 39
    families, 9 benchmarks as stored (error rates: ``1 - x``; perplexities: ``-log(x)``).

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.worlds import world_from_perplexity_correlations
    >>> d = Path("pc"); d.mkdir()
    >>> cols = '''"('a', 'o/m1')","('b', 'o/m2')","('b', 'o/m3')"'''
    >>> _ = (d / "perplexity_correlations_synthetic_bpb_id.csv").write_text(
    ...     f"id,{cols}\\ndoc one,0.9,1.1,1.0\\ndoc two,0.8,1.0,0.7\\n")
    >>> _ = (d / "perplexity_correlations_error.csv").write_text(
    ...     f"benchmark,{cols}\\narc_easy,0.3,0.5,0.4\\nlambada_openai,9.5,30.1,12.0\\n")
    >>> root = world_from_perplexity_correlations("pcw", d)
    >>> print((root / "scores.csv").read_text().strip())
    model,arc_easy,lambada_openai
    o/m1,0.3,9.5
    o/m2,0.5,30.1
    o/m3,0.4,12.0
    >>> import yaml
    >>> yaml.safe_load((root / "catalog.yaml").read_text())["benchmarks"]["lambada_openai"]
    {'family': 'lambada', 'format': 'cloze', 'function': 'language_modeling', 'direction': 'lower', 'transform': '-log(x)'}
    """
    from sigmap_lib.inputs import read_perplexity_correlations

    mm = read_perplexity_correlations(folder)
    transforms = mm.score_transforms()
    catalog: dict[str, dict[str, Any]] = {}
    for b in mm.benchmarks:
        base = PERPLEXITY_CORRELATIONS_CATALOG.get(b, _LAMBADA if b.startswith("lambada") else None)
        if base is None:
            base = {"family": "unknown", "format": "unknown", "function": "unknown"}
        entry = {**base, "direction": "lower", "transform": transforms[b]}
        if transforms[b] == "1 - x":
            entry["score_range"] = [0, 1]
        catalog[b] = entry
    uv = UnitValues(
        values=mm.values,
        unit_ids=mm.unit_ids,
        models=mm.models,
        measure="bits_per_byte",
        source=str(Path(folder)),
    )
    return write_matrix_world(
        path,
        uv,
        scores={b: mm.errors[:, j] for j, b in enumerate(mm.benchmarks)},
        catalog=catalog,
        families=[str(f) for f in mm.families],
        kind="perplexity-correlations",
        overwrite=overwrite,
    )
