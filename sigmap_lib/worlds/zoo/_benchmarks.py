"""The zoo world's benchmarks: their families, metadata and items.

Four recipes ("families"), each applied to several domains of held-out text (the
``bench`` split of :mod:`sigmap_lib.worlds.zoo`, never seen in training or in the
corpus):

``nextline`` (format ``multiple_choice``, metric ``acc_norm``; HellaSwag-like)
    A few lines / sentences of a document; choose the true next line among it and three
    scrambles of its words (same words, wrong order: only a model of word order tells
    them apart). Domains: code, prose.
``pickword`` (format ``multiple_choice``, metric ``acc``)
    The text up to a word; choose the true word among it and three one-edit misspellings
    of it (code, prose, records); the true result among results of the same operation on
    other operands (arithmetic); the next three or four elements of the sequence in
    order among scrambles of them (recall). Domains: code, prose, arithmetic, recall,
    records.
``cloze`` (format ``cloze``, metric ``ll_threshold``; LAMBADA-like, one continuation)
    The text up to a word; correct when the true word's loglikelihood per UTF-8 byte
    reaches the domain's :data:`CLOZE_THRESHOLDS` (tiny models almost never produce
    whole words greedily, so lm-eval's ``greedy`` criterion would score them all 0; it
    is still available as a metric). Domains: code, prose, arithmetic, recall, records.
``pair`` (format ``minimal_pair``, metric ``acc``; BLiMP-like)
    A line and a minimally corrupted copy (two adjacent words swapped, a wrong digit, a
    wrong field value), without context; correct when the true line is more likely.
    Domains: code, prose, arithmetic, records.

How each item is drawn lives in :mod:`sigmap_lib.worlds.zoo._recipes`; how a model
answers them in :mod:`sigmap_lib.worlds.zoo._scoring`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo._recipes import item_recipe, sentences
from sigmap_lib.worlds.zoo._text import ZooTexts

FUNCTION_OF_DOMAIN: dict[str, str] = {
    "code": "code",
    "prose": "language",
    "arithmetic": "arithmetic",
    "recall": "recall",
    "records": "knowledge",
}

FAMILIES: dict[str, dict[str, Any]] = {
    "nextline": {"format": "multiple_choice", "metric": "acc_norm", "domains": ("code", "prose")},
    "pickword": {
        "format": "multiple_choice",
        "metric": "acc",
        "domains": ("code", "prose", "arithmetic", "recall", "records"),
    },
    "cloze": {
        "format": "cloze",
        "metric": "ll_threshold",
        "domains": ("code", "prose", "arithmetic", "recall", "records"),
    },
    "pair": {
        "format": "minimal_pair",
        "metric": "acc",
        "domains": ("code", "prose", "arithmetic", "records"),
    },
}


#: Longest choice (UTF-8 bytes): at most one token per byte, so a continuation always
#: fits a 128-token model context with room for its context.
MAX_CHOICE_BYTES = 100


#: Cloze threshold per domain (natural-log likelihood per UTF-8 byte of the gold
#: continuation): an item is solved when ``ll / n_bytes >= threshold``, i.e. the model
#: puts at least ``exp(threshold)`` per byte on the answer. Fixed recipe constants, set
#: once so the zoo's scores neither all vanish nor all saturate.
CLOZE_THRESHOLDS: dict[str, float] = {
    "code": -1.0,
    "prose": -1.5,
    "arithmetic": -2.0,
    "recall": -1.5,
    "records": -1.0,
}


@dataclass
class ZooItem:
    """One benchmark item.

    Attributes
    ----------
    item_id : str
    context : str
        What the model is conditioned on (may be empty: then only BOS).
    choices : list[str]
        Continuations scored after ``context`` (one for cloze items).
    gold : int
        Index of the correct choice.
    text : str
        The question as a person would read it.
    """

    item_id: str
    context: str
    choices: list[str]
    gold: int
    text: str


@dataclass
class ZooBenchmark:
    """A benchmark: metadata + items."""

    name: str
    family: str
    format: str
    metric: str
    domain: str
    function: str
    items: list[ZooItem] = field(default_factory=list)
    threshold: float | None = None


def build_zoo_benchmarks(
    texts: ZooTexts, *, n_items: int = 100, seed: int = 0
) -> list[ZooBenchmark]:
    """Build the zoo benchmarks from the held-out (``bench``) split of ``texts``.

    Parameters
    ----------
    texts : ZooTexts
    n_items : int
        Items per benchmark (distinct contexts/choices; deterministic given ``seed``).
    seed : int

    Returns
    -------
    list[ZooBenchmark]
        16 benchmarks named ``<family>_<domain>`` (see the module docstring).

    Raises
    ------
    SigmapInputError
        When the held-out text cannot supply ``n_items`` distinct items.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import build_texts, build_zoo_benchmarks
    >>> benches = build_zoo_benchmarks(build_texts(quick=True), n_items=3)
    >>> len(benches), [(b.name, b.format, b.metric) for b in benches[:3]]
    (16, [('nextline_code', 'multiple_choice', 'acc_norm'),
          ('nextline_prose', 'multiple_choice', 'acc_norm'),
          ('pickword_code', 'multiple_choice', 'acc')])
    >>> bench = next(b for b in benches if b.name == "pickword_arithmetic")
    >>> item = bench.items[0]
    >>> item.item_id, item.context.splitlines()[-1], item.choices, item.gold
    ('pickword_arithmetic-0000', '9 * 97 =', [' 873', ' 198', ' 171', ' 648'], 0)
    """
    bench = {d: texts.texts("bench", d) for d in texts.docs["bench"]}
    code_lines = [
        (di, ln)
        for di, t in enumerate(bench["code"])
        for ln in t.split("\n")
        if len(ln.strip()) >= 8
    ]
    prose_sents = [(di, s) for di, t in enumerate(bench["prose"]) for s in sentences(t)]
    aux = {
        "code_lines": code_lines,
        "prose_sents": [p for p in prose_sents if 20 <= len(p[1]) <= 200],
    }
    out: list[ZooBenchmark] = []
    bi = 0
    for family, spec in FAMILIES.items():
        for domain in spec["domains"]:
            name = f"{family}_{domain}"
            b = ZooBenchmark(
                name=name,
                family=family,
                format=spec["format"],
                metric=spec["metric"],
                domain=domain,
                function=FUNCTION_OF_DOMAIN[domain],
                threshold=CLOZE_THRESHOLDS[domain] if spec["metric"] == "ll_threshold" else None,
            )
            rng = np.random.default_rng([seed, 5, bi])
            recipe = item_recipe(family, domain)
            seen: set[tuple[str, tuple[str, ...]]] = set()
            tries = 0
            while len(b.items) < n_items:
                tries += 1
                if tries > 50 * n_items:
                    raise SigmapInputError(
                        f"zoo benchmark {name}: only {len(b.items)} distinct items from the "
                        f"held-out {domain} text after {tries} draws ({n_items} requested)"
                    )
                got = recipe(rng, bench[domain], aux)
                if got is None:
                    continue
                context, choices, gold, text = got
                key = (context, tuple(choices))
                if key in seen or len(set(choices)) != len(choices):
                    continue
                if max(len(c.encode("utf-8")) for c in choices) > MAX_CHOICE_BYTES:
                    continue  # keeps every continuation well inside a 128-token context
                seen.add(key)
                b.items.append(
                    ZooItem(f"{name}-{len(b.items):04d}", context, list(choices), int(gold), text)
                )
            out.append(b)
            bi += 1
    return out
