"""``sigmap init-world PATH``: a small, complete world folder to start from (docs/OWN_WORLD.md).

The example is the planted synthetic world (models whose per-unit NLL is imported from
``nll/*.npy``, a corpus, a catalog, scores, items and responses, and the planted truth) plus
two tiny real Hugging Face models trained on the corpus here (safetensors + tokenizer), which
the pipeline scores itself. The tiny models have no benchmark scores: they show how a model
without scores is handled (its NLL enters the ranks; the benchmarks' correlations use the
scored models only; ``sigmap check`` warns about it). ``settings.yaml`` sets the minimums a
world of this size needs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from sigmap_lib.errors import SigmapInputError

EXAMPLE_README = """# An example sigmap world (written by `sigmap init-world`)

Run it: `sigmap demo --world {path}` (a few minutes), then `sigmap check --world {path}`.

| file | what it is (docs/FORMATS.md) |
|---|---|
| `corpus/docs.jsonl` | the in-the-wild corpus: one JSON document per line (`id`, `text`) |
| `models.yaml` | the registry: {n_imported} models with imported NLL (`nll_source`) and 2 tiny real models (`path`) |
| `models/tiny-*` | tiny GPT-2 / Llama models trained here (safetensors + tokenizer.json) |
| `nll/*.npy` | per-unit NLL of the imported models, one value per corpus unit in plan order |
| `catalog.yaml` | the benchmarks: family, format, function, items, responses |
| `scores.csv` | one row per model, one column per benchmark (the tiny models have none) |
| `items/`, `responses/` | question texts and per-item 0/1 responses (semantic level, metabench) |
| `settings.yaml` | the minimums this small world needs (`minimums:`) and metabench settings |
| `truth.json` | the planted truth (which units carry which function), for the report's checks |

Replace any part with your own: your corpus files under `corpus/`, your models in
`models.yaml` (HF ids, local folders, GGUF files), your scores, your benchmarks.
"""


def init_world(
    path: str | Path,
    *,
    n_models: int = 8,
    n_units: int = 4000,
    n_benchmarks: int = 4,
    tiny_models: bool = True,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write a small complete example world at ``path``.

    Parameters
    ----------
    path : path
        The world folder to create (must not exist unless ``overwrite``).
    n_models : int
        Models with imported NLL and scores.
    n_units, n_benchmarks : int
        Corpus units and benchmarks of the planted world.
    tiny_models : bool
        Also train two tiny real HF models (GPT-2 and Llama, ~10 s each on a CPU) that the
        pipeline scores itself.
    seed : int
    overwrite : bool
        Replace an existing folder.

    Returns
    -------
    Path
        The folder.

    Examples
    --------
    >>> from sigmap_lib.worlds import init_world, preflight_world
    >>> root = init_world("my_world", n_models=6, n_units=1500, tiny_models=False)
    >>> sorted(p.name for p in root.iterdir())[:4]
    ['README.md', 'catalog.yaml', 'corpus', 'items']
    >>> [p.severity for p in preflight_world(root)]
    []
    """
    from sigmap_lib.worlds._synthetic import make_synthetic_world

    root = Path(path).expanduser()
    if root.exists():
        if not overwrite:
            raise SigmapInputError(f"init-world: {root} exists (choose a new folder)")
        shutil.rmtree(root)
    make_synthetic_world(
        root,
        n_models=n_models,
        n_units=n_units,
        n_functions=2,
        n_benchmarks=n_benchmarks,
        planted_per_function=3,
        n_items=30,
        seed=seed,
    )
    reg = yaml.safe_load((root / "models.yaml").read_text())
    if tiny_models:
        reg["models"] += _tiny_models(root, seed)
    (root / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    settings: dict[str, Any] = {
        "minimums": {"score_models": 3, "metabench_respondents": 20},
    }
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    (root / "README.md").write_text(EXAMPLE_README.format(path=root, n_imported=n_models))
    return root


def _tiny_models(root: Path, seed: int) -> list[dict[str, Any]]:
    from sigmap_lib.inputs import read_corpus
    from sigmap_lib.worlds._tiny import (
        build_causal_lm,
        save_model,
        train_bpe_tokenizer,
        train_causal_lm,
    )

    texts = [d.text for d in read_corpus(root / "corpus")]
    entries = []
    for arch, style in (("gpt2", "byte_level"), ("llama", "metaspace")):
        tok = train_bpe_tokenizer(texts, vocab_size=400, style=style)
        model = build_causal_lm(
            arch, len(tok), d_model=32, n_layer=2, n_head=2, n_ctx=128, seed=seed
        )
        train_causal_lm(model, tok, texts, steps=40, batch_size=8, seq_len=64, seed=seed)
        save_model(model, tok, root / "models" / f"tiny-{arch}")
        entries.append({"id": f"local/tiny-{arch}", "path": f"models/tiny-{arch}", "family": arch})
    (root / "models" / "README.json").write_text(
        json.dumps({"note": "tiny models trained by sigmap init-world; no benchmark scores"})
    )
    return entries
