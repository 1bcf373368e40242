"""The item recipes of the zoo benchmarks: how one item of a (family, domain) is
drawn from held-out documents.

A recipe takes a random generator, the documents of its domain and the auxiliary pools
(``code_lines``, ``prose_sents``) and returns ``(context, choices, gold, text)``, or None
when the drawn spot is unusable (:func:`item_recipe` picks it; the families are
described in :mod:`sigmap_lib.worlds.zoo._benchmarks`).
"""

from __future__ import annotations

import functools
import itertools
import keyword
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo._text import RECORD_FIELDS, field_values

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z]{4,}")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``: white space folded, split after ``.``, ``!`` or ``?``.

    Examples
    --------
    >>> sentences("One line.  Two   small words! Three?")
    ['One line.', 'Two small words!', 'Three?']
    """
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


def _lines(doc: str) -> list[str]:
    """The non-blank lines of ``doc``."""
    return [ln for ln in doc.split("\n") if ln.strip()]


#: How ``nextline`` items are cut from a document, per domain (see :func:`_nextline_item`).
_NEXTLINE: dict[str, dict[str, Any]] = {
    "code": {
        "units": _lines,
        "first": 2,
        "lengths": (8, 90),
        "n_context": 8,
        "joiner": "\n",
        "prompt": "Which line comes next?",
    },
    "prose": {
        "units": sentences,
        "first": 1,
        "lengths": (20, 200),
        "n_context": 3,
        "joiner": " ",
        "prompt": "Which sentence comes next?",
    },
}


def _nextline_item(
    rng: np.random.Generator,
    docs: list[str],
    aux: dict[str, Any],
    *,
    units: Callable[[str], list[str]],
    first: int,
    lengths: tuple[int, int],
    n_context: int,
    joiner: str,
    prompt: str,
):
    """A ``nextline`` item over the ``units`` (lines or sentences) of a random document:
    a unit at index ``first`` or later whose length (surrounding white space stripped) is
    within ``lengths`` among three scrambles of it, after up to ``n_context`` units
    joined by ``joiner`` (at most 240 characters of them); each choice follows the
    context after ``joiner``."""
    parts = units(docs[int(rng.integers(len(docs)))])
    lo, hi = lengths
    ok = [i for i in range(first, len(parts)) if lo <= len(parts[i].strip()) <= hi]
    if not ok:
        return None
    i = int(rng.choice(ok))
    gold = parts[i]
    dis = _scrambles(rng, gold)
    if dis is None:
        return None
    context = _tail(joiner.join(parts[max(0, i - n_context) : i]), 240)
    return _mc_item(rng, context, gold, dis, prompt, sep=joiner, blank="")


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


def item_recipe(family: str, domain: str) -> Recipe:
    """The recipe that draws one item of benchmark ``<family>_<domain>``.

    Raises
    ------
    SigmapInputError
        When ``family`` is not one of the zoo's families.

    Examples
    --------
    >>> import numpy as np
    >>> recipe = item_recipe("cloze", "arithmetic")
    >>> context, choices, gold, text = recipe(np.random.default_rng(0), ["12 + 30 = 42"], {})
    >>> context, choices, gold
    ('12 + 30 =', [' 42'], 0)
    """
    mc = family == "pickword"
    if family == "nextline":
        return functools.partial(_nextline_item, **_NEXTLINE[domain])
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
