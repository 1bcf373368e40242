"""Benchmarks of the zoo world, and loglikelihood scoring the way lm-evaluation-harness
does it.

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

Metrics (per item, 0/1): ``acc`` = the highest total loglikelihood choice is the gold
one; ``acc_norm`` = the same after dividing each choice's loglikelihood by its length
in UTF-8 bytes; ``greedy`` = the gold continuation is the greedy decode;
``ll_threshold`` = the gold continuation's loglikelihood per byte reaches the
benchmark's threshold.
"""

from __future__ import annotations

import itertools
import keyword
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo._text import RECORD_FIELDS, ZooTexts, field_values

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


# ------------------------------------------------------------------- text helpers

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z]{4,}")


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s for s in re.split(r"(?<=[.!?])\s+", flat) if s]


def _tail(text: str, max_chars: int) -> str:
    """The last ``max_chars`` of ``text``, cut at a line (or word) boundary."""
    if len(text) <= max_chars:
        return text
    cut = text[-max_chars:]
    nl = cut.find("\n")
    if 0 <= nl < len(cut) - 1:
        return cut[nl + 1 :]
    sp = cut.find(" ")
    return cut[sp + 1 :] if 0 <= sp < len(cut) - 1 else cut


def _mc_text(context: str, choices: Sequence[str], prompt: str) -> str:
    opts = "\n".join(f"({chr(65 + i)}) {c.strip()}" for i, c in enumerate(choices))
    return f"{context.rstrip()}\n\n{prompt}\n{opts}"


def _shuffle_choices(
    rng: np.random.Generator, gold: str, distractors: Sequence[str]
) -> tuple[list[str], int]:
    choices = [gold, *distractors]
    perm = rng.permutation(len(choices))
    out = [choices[i] for i in perm]
    return out, int(np.flatnonzero(perm == 0)[0])


def _perturb_number(rng: np.random.Generator, value: int, n: int) -> list[str]:
    """``n`` distinct wrong answers close to ``value`` (digit-level mistakes)."""
    s = str(value)
    cands: list[int] = []
    for delta in (1, -1, 10, -10, 2, -2, 100, -100, 9, -9, 11, -11):
        v = value + delta
        if v >= 0 and v != value:
            cands.append(v)
    if len(s) >= 2 and s[-1] != s[-2]:
        cands.append(int(s[:-2] + s[-1] + s[-2]))
    cands = list(dict.fromkeys(c for c in cands if c != value))
    same_len = [c for c in cands if len(str(c)) == len(s)]
    pool = same_len if len(same_len) >= n else cands
    idx = rng.choice(len(pool), size=n, replace=False)
    return [str(pool[i]) for i in idx]


def _plausible_results(rng: np.random.Generator, lhs: str, value: int, n: int) -> list[str]:
    """``n`` distinct wrong answers: results of the same operation on other operands with
    as many digits (right format, wrong magnitude / last digit)."""
    a, op, b = lhs.split()

    def draw(x: str) -> int:
        lo = 10 ** (len(x) - 1) if len(x) > 1 else 0
        return int(rng.integers(lo, 10 ** len(x)))

    out: list[str] = []
    for _ in range(200):
        x, y = draw(a), draw(b)
        if op == "-":
            x, y = max(x, y), min(x, y)
        v = x + y if op == "+" else (x - y if op == "-" else x * y)
        if v != value and str(v) not in out:
            out.append(str(v))
        if len(out) == n:
            return out
    return (out + _perturb_number(rng, value, n))[:n]


def _digit_corrupt(rng: np.random.Generator, number: str) -> str:
    """Change one digit of ``number`` (never the leading digit to 0)."""
    pos = int(rng.integers(0, len(number)))
    choices = [
        d
        for d in "0123456789"
        if d != number[pos] and not (pos == 0 and d == "0" and len(number) > 1)
    ]
    return number[:pos] + str(rng.choice(choices)) + number[pos + 1 :]


# ---------------------------------------------------------------- item recipes
# Each recipe returns one item (or None when the drawn spot is unusable).

Recipe = Callable[
    [np.random.Generator, list[str], dict[str, Any]], "tuple[str, list[str], int, str] | None"
]


def _mc_item(
    rng: np.random.Generator,
    context: str,
    gold: str,
    dis: Sequence[str],
    prompt: str,
    *,
    sep: str = " ",
    blank: str = " ___",
) -> tuple[str, list[str], int, str]:
    """A multiple-choice item: ``sep + gold`` among ``sep + distractor`` (shuffled), and its
    text with ``blank`` after the context."""
    choices, g = _shuffle_choices(rng, sep + gold, [sep + d for d in dis])
    return context, choices, g, _mc_text(context + blank, choices, prompt)


def _pair_item(rng: np.random.Generator, line: str, bad: str) -> tuple[str, list[str], int, str]:
    """A two-choice item: the document's ``line`` or its corrupted copy ``bad``."""
    choices, g = _shuffle_choices(rng, line, [bad])
    return "", choices, g, _pair_text(choices)


def _scrambles(
    rng: np.random.Generator, line: str, n: int = 3, *, min_words: int = 4
) -> list[str] | None:
    """``n`` distinct word-order scrambles of ``line`` (its leading indentation kept):
    the same words, so the same tokens almost everywhere, in a wrong order. Only a model
    of word order tells them from the line. None when the line has fewer than
    ``min_words`` words or 100 draws miss."""
    body = line.lstrip(" \t")
    indent = line[: len(line) - len(body)]
    words = body.split(" ")
    if len(words) < min_words:
        return None
    out: list[str] = []
    for _ in range(100):
        cand = indent + " ".join(words[int(i)] for i in rng.permutation(len(words)))
        if cand != line and cand not in out:
            out.append(cand)
        if len(out) == n:
            return out
    return None


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _misspellings(rng: np.random.Generator, word: str, n: int = 3) -> list[str] | None:
    """``n`` distinct misspellings of ``word``, each one edit that keeps its length: two
    adjacent characters swapped, or a letter (digit) replaced by another letter (digit).
    A model that has learned the words of a domain tells the word from them. None for
    words shorter than three characters or when 300 draws miss."""
    if len(word) < 3:
        return None
    out: list[str] = []
    for _ in range(300):
        w = list(word)
        i = int(rng.integers(len(w) - 1))
        if rng.random() < 0.5 and w[i] != w[i + 1]:
            w[i], w[i + 1] = w[i + 1], w[i]
        elif w[i].isascii() and w[i].isalnum():
            pool = "0123456789" if w[i].isdigit() else _LETTERS
            new = pool[int(rng.integers(len(pool)))]
            w[i] = new.upper() if w[i].isupper() else new
        cand = "".join(w)
        if cand != word and cand not in out:
            out.append(cand)
        if len(out) == n:
            return out
    return None


def _random_line(rng: np.random.Generator, docs: list[str]) -> tuple[list[str], int]:
    """The lines of a random document and the index of a random one of them."""
    lines = docs[int(rng.integers(len(docs)))].split("\n")
    return lines, int(rng.integers(len(lines)))


def _nextline_code(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
    di = int(rng.integers(len(docs)))
    lines = [ln for ln in docs[di].split("\n") if ln.strip()]
    ok = [i for i in range(2, len(lines)) if 8 <= len(lines[i].strip()) <= 90]
    if not ok:
        return None
    i = int(rng.choice(ok))
    gold = lines[i]
    dis = _scrambles(rng, gold)
    if dis is None:
        return None
    context = _tail("\n".join(lines[max(0, i - 8) : i]), 240)
    return _mc_item(rng, context, gold, dis, "Which line comes next?", sep="\n", blank="")


def _nextline_prose(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
    di = int(rng.integers(len(docs)))
    sents = _sentences(docs[di])
    ok = [i for i in range(1, len(sents)) if 20 <= len(sents[i]) <= 200]
    if not ok:
        return None
    i = int(rng.choice(ok))
    gold = sents[i]
    dis = _scrambles(rng, gold)
    if dis is None:
        return None
    context = _tail(" ".join(sents[max(0, i - 3) : i]), 240)
    return _mc_item(rng, context, gold, dis, "Which sentence comes next?", blank="")


def _word_target(
    rng: np.random.Generator, docs: list[str], pattern: re.Pattern[str], *, seen_before: bool
) -> tuple[str, str] | None:
    """(context, word): a word of a random document, optionally one seen earlier."""
    di = int(rng.integers(len(docs)))
    text = docs[di]
    ms = [m for m in pattern.finditer(text) if m.start() >= 60 and len(m.group()) >= 3]
    if seen_before:
        ms = [m for m in ms if re.search(rf"\b{re.escape(m.group())}\b", text[: m.start()])]
    ms = [m for m in ms if not keyword.iskeyword(m.group())]
    if not ms:
        return None
    m = ms[int(rng.integers(len(ms)))]
    return _tail(text[: m.start()], 240), m.group()


def _split_ws(context: str, word: str) -> tuple[str, str]:
    """Move the trailing whitespace of the context in front of the continuation."""
    stripped = context.rstrip(" ")
    return stripped, context[len(stripped) :] + word


def _word_item(kind: str, pattern: re.Pattern[str], mc: bool):
    def recipe(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
        got = _word_target(rng, docs, pattern, seen_before=not mc)
        if got is None:
            return None
        context, word = got
        context, gold = _split_ws(context, word)
        if not mc:
            return context, [gold], 0, f"{context}___"
        dis = _misspellings(rng, word)
        if dis is None:
            return None
        pre = gold[: len(gold) - len(word)]
        choices, g = _shuffle_choices(rng, gold, [pre + d for d in dis])
        return (
            context,
            choices,
            g,
            _mc_text(context + "___", choices, f"Which {kind} fills the blank?"),
        )

    return recipe


def _line_prefix(lines: list[str], j: int) -> str:
    """The document lines before line ``j`` (at most ~160 characters of them) and a
    newline; empty for the first line."""
    return _tail("\n".join(lines[:j]), 160) + "\n" if j else ""


def _arith_item(mc: bool):
    def recipe(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
        lines, j = _random_line(rng, docs)
        lhs, ans = lines[j].rsplit(" = ", 1)
        context = _line_prefix(lines, j) + lhs + " ="
        if not mc:
            return context, [" " + ans], 0, f"{context} ___"
        dis = _plausible_results(rng, lhs, int(ans), 3)
        return _mc_item(rng, context, ans, dis, "What is the result?")

    return recipe


def _recall_item(mc: bool):
    def recipe(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
        lines, j = _random_line(rng, docs)
        seq = lines[j].split(" | ")[0].removeprefix("copy: ").split()
        # cloze: the next element; multiple choice: the next three or four elements in
        # their order among scrambles of them (a model that copies in order wins)
        k = int(rng.integers(len(seq) if not mc else len(seq) - 2))
        context = _line_prefix(lines, j) + f"copy: {' '.join(seq)} |"
        if k:
            context += " " + " ".join(seq[:k])
        if not mc:
            return context, [" " + seq[k]], 0, f"{context} ___"
        gold = " ".join(seq[k : k + 4])
        dis = _scrambles(rng, gold, min_words=3)
        if dis is None:
            return None
        return _mc_item(rng, context, gold, dis, "Which elements come next?")

    return recipe


def _records_item(mc: bool):
    def recipe(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
        lines, j = _random_line(rng, docs)
        parts = lines[j].split(" | ")  # name, city, trade, color, born
        f = 1 + int(rng.integers(len(RECORD_FIELDS)))
        key, value = parts[f].split(": ", 1)
        head = " | ".join([*parts[:f], key + ":"])
        context = _line_prefix(lines, j) + head
        if not mc:
            return context, [" " + value], 0, f"{context} ___"
        dis = _misspellings(rng, value)
        if dis is None:
            return None
        return _mc_item(rng, context, value, dis, f"What is the {key}?")

    return recipe


def _pair_text(choices: list[str]) -> str:
    return _mc_text("", choices, "Which line is correct?").strip()


def _pair_swap(unit: str):
    pat = _IDENT if unit == "code" else re.compile(r"[A-Za-z]+")

    def recipe(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
        pool = aux["code_lines"] if unit == "code" else aux["prose_sents"]
        line = pool[int(rng.integers(len(pool)))][1]
        if unit == "code":
            line = line.strip()
        if not 15 <= len(line) <= 160:
            return None
        ms = list(pat.finditer(line))
        pairs = [(a, b) for a, b in itertools.pairwise(ms) if a.group() != b.group()]
        if len(ms) < 4 or not pairs:
            return None
        a, b = pairs[int(rng.integers(len(pairs)))]
        bad = (
            line[: a.start()] + b.group() + line[a.end() : b.start()] + a.group() + line[b.end() :]
        )
        return _pair_item(rng, line, bad)

    return recipe


def _pair_arith(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
    lines, j = _random_line(rng, docs)
    line = lines[j]
    lhs, ans = line.rsplit(" = ", 1)
    bad = f"{lhs} = {_digit_corrupt(rng, ans)}"
    return _pair_item(rng, line, bad)


def _pair_records(rng: np.random.Generator, docs: list[str], aux: dict[str, Any]):
    lines, j = _random_line(rng, docs)
    line = lines[j]
    parts = line.split(" | ")
    f = 1 + int(rng.integers(len(RECORD_FIELDS)))
    key, value = parts[f].split(": ", 1)
    vals = [v for v in field_values(key) if v != value]
    same = [v for v in vals if len(v) == len(value)]
    new = str(rng.choice(same or vals))
    bad = " | ".join([*parts[:f], f"{key}: {new}", *parts[f + 1 :]])
    return _pair_item(rng, line, bad)


def _recipe(family: str, domain: str) -> Recipe:
    mc = family == "pickword"
    if family == "nextline":
        return {"code": _nextline_code, "prose": _nextline_prose}[domain]
    if family in ("pickword", "cloze"):
        if domain == "code":
            return _word_item("identifier", _IDENT, mc)
        if domain == "prose":
            return _word_item("word", _WORD, mc)
        return {"arithmetic": _arith_item, "recall": _recall_item, "records": _records_item}[
            domain
        ](mc)
    if family == "pair":
        if domain in ("code", "prose"):
            return _pair_swap(domain)
        return {"arithmetic": _pair_arith, "records": _pair_records}[domain]
    raise SigmapInputError(f"zoo benchmarks: unknown family {family!r}")


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
    prose_sents = [(di, s) for di, t in enumerate(bench["prose"]) for s in _sentences(t)]
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
            recipe = _recipe(family, domain)
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


# ------------------------------------------------------------------ scoring


def _encode_pair(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-evaluation-harness's split: encode ``context + continuation`` and take the
    tokens after the context's own encoding as the continuation (trailing context
    whitespace moved to the continuation first). BOS (else EOS) is prepended to the context."""
    n_sp = len(context) - len(context.rstrip(" "))
    if n_sp:
        continuation = context[-n_sp:] + continuation
        context = context[:-n_sp]
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    prefix = [] if bos is None else [int(bos)]
    if not context:
        cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
        return prefix, [int(t) for t in cont]
    whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx) :]
    if whole[: len(ctx)] != ctx or not cont:
        cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
    return prefix + [int(t) for t in ctx], [int(t) for t in cont]


def encode_requests(
    tokenizer: Any, requests: Sequence[tuple[str, str]]
) -> list[tuple[list[int], list[int]]]:
    """Token ids of each ``(context, continuation)`` request, split as lm-eval does.

    The encoding depends only on the tokenizer, so models sharing one tokenizer can
    share it (:func:`loglikelihoods`' ``encoded``).

    Returns
    -------
    list[tuple[list[int], list[int]]]
        Per request: the context ids (BOS, else EOS, first) and the continuation ids.

    Examples
    --------
    >>> from sigmap_lib.worlds import sample_texts, train_bpe_tokenizer
    >>> from sigmap_lib.worlds.zoo import encode_requests
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> (ctx, cont), = encode_requests(tok, [("the river ", "stone")])
    >>> ctx[0] == tok.bos_token_id, tok.decode(ctx[1:]), tok.decode(cont)
    (True, 'the river', ' stone')
    """
    return [_encode_pair(tokenizer, c, x) for c, x in requests]


@dataclass(frozen=True)
class _Batch:
    """One batch of :func:`loglikelihoods`: its contexts (left-padded) and, per
    continuation, the context it extends (``gidx``) and its tokens (right-padded)."""

    ids: Any  # (n_contexts, lc) int64
    mask: Any  # (n_contexts, lc) int64
    pos: Any  # (n_contexts, lc) int64
    gidx: Any  # (n, ) int64: each continuation's context row
    cids: Any  # (n, lt) int64
    cmask: Any  # (n, lt) bool
    cattn: Any  # (n, lc + lt) int64: the continuation pass's attention mask
    cpos: Any  # (n, lt) int64
    rows: np.ndarray  # (n,) the continuations' request indices


@dataclass(frozen=True)
class RequestBatches:
    """The batched forward passes of :func:`loglikelihoods` over encoded requests.

    They depend only on the token ids, the pad id, the batch size and the longest
    sequence, so models sharing one tokenizer and context length share them
    (:func:`batch_requests`).
    """

    n_requests: int
    max_length: int
    batches: tuple[_Batch, ...]


def _max_length(model: Any) -> int:
    cfg = model.config
    return int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", 1024))


def batch_requests(
    encoded: Sequence[tuple[list[int], list[int]]],
    *,
    pad_id: int,
    max_length: int,
    batch_size: int = 64,
) -> RequestBatches:
    """Group and pad encoded requests into :func:`loglikelihoods`' forward passes.

    Requests with the same context share one pass over it. Batches hold contexts whose
    longest continuations have about the same length (within a factor of two), longest
    contexts first, so little of either pass is padding; a context with more than
    ``batch_size`` continuations is split over several batches. Contexts longer than
    ``max_length`` minus their longest continuation lose tokens from the left.

    Parameters
    ----------
    encoded : sequence of (context ids, continuation ids)
        :func:`encode_requests`' output.
    pad_id : int
        Token id written in the padding (masked out).
    max_length : int
        Longest sequence fed to the model.
    batch_size : int
        About how many continuations per forward pass.

    Returns
    -------
    RequestBatches

    Raises
    ------
    SigmapInputError
        When a continuation is empty or does not fit in ``max_length``, or a context is
        empty.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import batch_requests
    >>> encoded = [([1, 5, 6], [7]), ([1, 5, 6], [8, 9]), ([1, 2], [3])]
    >>> plan = batch_requests(encoded, pad_id=0, max_length=16, batch_size=2)
    >>> [b.rows.tolist() for b in plan.batches]  # short continuations first
    [[2], [0, 1]]
    >>> plan.batches[1].ids.tolist()  # requests 0 and 1 share one pass over their context
    [[1, 5, 6]]
    >>> plan.batches[1].cids.tolist()  # their continuations, right-padded
    [[7, 0], [8, 9]]
    """
    import torch

    groups: dict[tuple[int, ...], list[int]] = {}
    for ri, (ctx, cnt) in enumerate(encoded):
        if not cnt:
            raise SigmapInputError(f"loglikelihoods: request {ri} has an empty continuation")
        if len(cnt) >= max_length:
            raise SigmapInputError(
                f"loglikelihoods: request {ri}'s continuation has {len(cnt)} tokens; it must be "
                f"shorter than max_length={max_length}"
            )
        if not ctx:
            raise SigmapInputError(
                f"loglikelihoods: request {ri} has an empty context and the tokenizer has no "
                "BOS/EOS token to start from"
            )
        groups.setdefault(tuple(ctx), []).append(ri)
    step = max(1, batch_size)
    glist: list[tuple[list[int], list[int]]] = []
    for key, members in groups.items():
        longest = max(len(encoded[i][1]) for i in members)
        ctx = list(key)[-(max_length - longest) :]  # the whole group's longest fits
        members = sorted(members, key=lambda i: len(encoded[i][1]))
        for lo in range(0, len(members), step):
            glist.append((ctx, members[lo : lo + step]))
    # continuation-length classes (1, 2, 3-4, 5-8, ...), longest contexts first in each
    glist.sort(
        key=lambda g: (max(len(encoded[i][1]) for i in g[1]).bit_length(), -len(g[0]), g[1][0])
    )
    grouped: list[list[tuple[list[int], list[int]]]] = []
    n_rows = 0
    for g in glist:
        if not grouped or n_rows + len(g[1]) > batch_size:
            grouped.append([])
            n_rows = 0
        grouped[-1].append(g)
        n_rows += len(g[1])
    batches = []
    for batch in grouped:
        lc = max(len(ctx) for ctx, _ in batch)
        ids = np.full((len(batch), lc), pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), lc), dtype=np.int64)
        for r, (ctx, _) in enumerate(batch):
            ids[r, lc - len(ctx) :] = ctx
            mask[r, lc - len(ctx) :] = 1
        members = [(gi, ri) for gi, (_, mem) in enumerate(batch) for ri in mem]
        gidx = np.array([gi for gi, _ in members], dtype=np.int64)
        rows = np.array([ri for _, ri in members], dtype=np.int64)
        lt = max(len(encoded[ri][1]) for ri in rows)
        cids = np.full((len(members), lt), pad_id, dtype=np.int64)
        cmask = np.zeros((len(members), lt), dtype=bool)
        for r, ri in enumerate(rows):
            cnt = encoded[ri][1]
            cids[r, : len(cnt)] = cnt
            cmask[r, : len(cnt)] = True
        ctx_len = mask.sum(-1)[gidx]
        batches.append(
            _Batch(
                ids=torch.from_numpy(ids),
                mask=torch.from_numpy(mask),
                pos=torch.from_numpy(np.maximum(mask.cumsum(-1) - 1, 0)),
                gidx=torch.from_numpy(gidx),
                cids=torch.from_numpy(cids),
                cmask=torch.from_numpy(cmask),
                cattn=torch.from_numpy(
                    np.concatenate([mask[gidx], cmask], axis=1).astype(np.int64)
                ),
                cpos=torch.from_numpy(
                    np.minimum(ctx_len[:, None] + np.arange(lt)[None, :], max_length - 1)
                ),
                rows=rows,
            )
        )
    return RequestBatches(len(encoded), int(max_length), tuple(batches))


def loglikelihoods(
    model: Any,
    tokenizer: Any,
    requests: Sequence[tuple[str, str]],
    *,
    batch_size: int = 64,
    max_length: int | None = None,
    encoded: Sequence[tuple[list[int], list[int]]] | None = None,
    batches: RequestBatches | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Loglikelihood of each continuation given its context (lm-eval ``loglikelihood``).

    Requests with the same context share one forward pass over it: contexts are run in
    left-padded batches with the key/value cache kept, the cache is gathered once per
    continuation, and the continuations are run on top of it (right-padded); see
    :func:`batch_requests` for how the batches are formed.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer (BOS, else EOS, is prepended to every context).
    requests : sequence of (context, continuation)
    batch_size : int
        About how many continuations per forward pass.
    max_length : int, optional
        Longest sequence fed to the model (default: the model's context). Longer
        contexts lose tokens from the left so that the longest continuation of the
        same context fits; continuations are always kept whole.
    encoded : sequence, optional
        :func:`encode_requests` of ``requests`` with this tokenizer (computed when
        omitted).
    batches : RequestBatches, optional
        :func:`batch_requests` of ``encoded`` (computed when omitted): models that share
        a tokenizer and context length share it.

    Returns
    -------
    ll : np.ndarray, shape (n_requests,), float64
        Sum of the continuation tokens' log-probabilities (natural log).
    greedy : np.ndarray, shape (n_requests,), bool
        Whether every continuation token is the argmax of its prediction.

    Raises
    ------
    SigmapInputError
        When a continuation is empty or does not fit in ``max_length``, or ``encoded``
        or ``batches`` do not match the requests or the model.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> from sigmap_lib.worlds.zoo import loglikelihoods
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> requests = [("the river", " stone"), ("the river", " cloud"), ("a", " b")]
    >>> ll, greedy = loglikelihoods(model, tok, requests)  # both "the river" share a pass
    >>> np.round(ll, 1).tolist(), greedy.tolist()  # nats; an untrained model
    ([-17.3, -28.6, -5.8], [False, False, False])
    """
    import torch

    if max_length is None:
        max_length = _max_length(model)
    if batches is None:
        if encoded is None:
            encoded = encode_requests(tokenizer, requests)
        elif len(encoded) != len(requests):
            raise SigmapInputError(
                f"loglikelihoods: {len(encoded)} encoded requests for {len(requests)} requests"
            )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        batches = batch_requests(encoded, pad_id=pad, max_length=max_length, batch_size=batch_size)
    elif batches.n_requests != len(requests) or batches.max_length != max_length:
        raise SigmapInputError(
            f"loglikelihoods: batches of {batches.n_requests} requests up to "
            f"{batches.max_length} tokens for {len(requests)} requests up to {max_length}"
        )
    ll = np.zeros(len(requests), dtype=np.float64)
    greedy = np.zeros(len(requests), dtype=bool)
    device = next(model.parameters()).device
    with torch.inference_mode():
        for b in batches.batches:
            out = model(
                input_ids=b.ids.to(device),
                attention_mask=b.mask.to(device),
                position_ids=b.pos.to(device),
                use_cache=True,
                logits_to_keep=1,  # only the last context position predicts a choice
            )
            first = out.logits[:, -1].float()  # (n_contexts, V): predicts token 0
            cache = out.cache
            gidx, cids = b.gidx.to(device), b.cids.to(device)
            cache.batch_select_indices(gidx)
            rest = (
                model(
                    input_ids=cids,
                    attention_mask=b.cattn.to(device),
                    position_ids=b.cpos.to(device),
                    cache=cache,
                    use_cache=True,
                )
                .logits[:, :-1]
                .float()
            )  # (n, lt - 1, V): position j predicts token j + 1
            # log p(token) = its logit - logsumexp of the logits; greedy = its logit is the max
            tok_lp = torch.cat(
                [
                    (first[gidx, cids[:, 0]] - torch.logsumexp(first, -1)[gidx])[:, None],
                    rest.gather(2, cids[:, 1:, None])[:, :, 0] - torch.logsumexp(rest, -1),
                ],
                dim=1,
            )
            best = torch.cat([first.argmax(-1)[gidx, None], rest.argmax(-1)], dim=1)
            real = b.cmask.to(device)
            ll[b.rows] = torch.where(real, tok_lp, 0.0).sum(dim=1).double().cpu().numpy()
            greedy[b.rows] = ((best == cids) | ~real).all(dim=1).cpu().numpy()
    return ll, greedy


def benchmark_requests(benchmarks: Sequence[ZooBenchmark]) -> list[tuple[str, str]]:
    """Every ``(context, choice)`` request of ``benchmarks``: items in order, each item's
    choices in order (what :func:`score_benchmarks` scores)."""
    return [(it.context, c) for b in benchmarks for it in b.items for c in it.choices]


def score_benchmarks(
    model: Any,
    tokenizer: Any,
    benchmarks: Sequence[ZooBenchmark],
    *,
    batch_size: int = 64,
    encoded: Sequence[tuple[list[int], list[int]]] | None = None,
    batches: RequestBatches | None = None,
) -> dict[str, np.ndarray]:
    """Item-level 0/1 responses of one model on every benchmark.

    All requests of all benchmarks (:func:`benchmark_requests`) go through
    :func:`loglikelihoods` in one batched pass; ``encoded`` is their
    :func:`encode_requests` with this tokenizer and ``batches`` their
    :func:`batch_requests`, when already computed. Returns
    ``{benchmark name: int8 array (n_items,)}`` following each benchmark's metric
    (``acc``, ``acc_norm``, ``greedy`` or ``ll_threshold``).

    Examples
    --------
    A two-item benchmark built inline, answered by a tiny untrained model:

    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> from sigmap_lib.worlds.zoo import ZooBenchmark, ZooItem, score_benchmarks
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> items = [
    ...     ZooItem("demo-0", "the river", [" stone", " cloud"], 0, "the river ___"),
    ...     ZooItem("demo-1", "a model", [" score", " rank"], 1, "a model ___"),
    ... ]
    >>> bench = ZooBenchmark("demo", "pickword", "multiple_choice", "acc", "prose", "language",
    ...                      items=items)
    >>> score_benchmarks(model, tok, [bench])  # 1 = the gold choice is the most likely
    {'demo': array([1, 0], dtype=int8)}
    """
    requests = benchmark_requests(benchmarks)
    where: list[tuple[int, int, int]] = []  # (bench, item, first request)
    start = 0
    for bi, b in enumerate(benchmarks):
        for ii, it in enumerate(b.items):
            where.append((bi, ii, start))
            start += len(it.choices)
    ll, greedy = loglikelihoods(
        model, tokenizer, requests, batch_size=batch_size, encoded=encoded, batches=batches
    )
    out = {b.name: np.zeros(len(b.items), dtype=np.int8) for b in benchmarks}
    for bi, ii, start in where:
        b = benchmarks[bi]
        it = b.items[ii]
        sl = slice(start, start + len(it.choices))
        if b.metric == "greedy":
            ok = bool(greedy[start])
        elif b.metric == "ll_threshold":
            if b.threshold is None:
                raise SigmapInputError(f"benchmark {b.name}: metric ll_threshold needs a threshold")
            gold = it.choices[it.gold]
            ok = ll[start + it.gold] / max(1, len(gold.encode("utf-8"))) >= b.threshold
        elif b.metric == "acc_norm":
            nbytes = np.array([max(1, len(c.encode("utf-8"))) for c in it.choices], dtype=float)
            ok = int(np.argmax(ll[sl] / nbytes)) == it.gold
        else:
            ok = int(np.argmax(ll[sl])) == it.gold
        out[b.name][ii] = int(ok)
    return out
