"""Text of the zoo world: naturally authored text found on any Python machine, plus
generated domains with one clear skill each.

Five domains, each with a stable label used in ``truth.json``:

``code``
    Functions and methods of the Python standard library (``sysconfig`` ``stdlib``
    path), with their docstrings removed (those are prose).
``prose``
    English docstrings of the standard library (doctest lines dropped) and the
    long descriptions (README text) in the installed packages' ``*.dist-info/METADATA``.
``arithmetic``
    Lines of true multi-digit statements: ``417 + 86 = 503``, ``72 - 15 = 57``,
    ``13 * 7 = 91``.
``recall``
    Sequence copying: ``copy: kel pom ria dov | kel pom ria dov``.
``records``
    Key-value records about a fixed fictional population (``name: Vok Tarel | city:
    Miranth | trade: smith | color: teal | born: 1843``). The facts are fixed for a
    seed, so a model can memorize them: the domain tests knowledge.

Every domain is split BY DOCUMENT (natural text: by source file / package, so one file
never feeds two splits) into three disjoint parts: ``train`` (the models' training
text), ``corpus`` (the in-the-wild corpus the signatures are mined from) and ``bench``
(held-out text the benchmarks are built from). Everything is deterministic given the
seed and the machine's installed Python (the natural text is read from disk).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sigmap_lib.errors import SigmapInputError

DOMAINS: tuple[str, ...] = ("code", "prose", "arithmetic", "recall", "records")
SPLITS: tuple[str, ...] = ("train", "corpus", "bench")

_STDLIB_SKIP = {
    "site-packages",
    "dist-packages",
    "test",
    "tests",
    "idlelib",
    "lib2to3",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "__pycache__",
    "pydoc_data",
    "encodings",
}


@dataclass
class ZooDocument:
    """One document of the zoo text.

    Attributes
    ----------
    text : str
        The document.
    domain : str
        One of :data:`DOMAINS`.
    source : str
        Where it came from (a stdlib-relative file path, a package name, or the
        generator name), for the truth file.
    """

    text: str
    domain: str
    source: str


@dataclass
class ZooTexts:
    """All zoo text, per split and domain.

    Attributes
    ----------
    docs : dict[str, dict[str, list[ZooDocument]]]
        ``docs[split][domain]`` — the documents, split in ``SPLITS``.
    facts : list[dict[str, str]]
        The fictional population behind the ``records`` domain (one dict per person).
    seed : int
        The seed used.
    """

    docs: dict[str, dict[str, list[ZooDocument]]]
    facts: list[dict[str, str]]
    seed: int
    stats: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    def fingerprint(self, splits: tuple[str, ...] = SPLITS) -> str:
        """SHA-256 over the documents (split, domain, source, text) of ``splits``.

        ``fingerprint(("train",))`` is the cache key of everything trained on the text
        (tokenizers, models): corpus or benchmark changes do not invalidate them.
        """
        h = hashlib.sha256()
        for split in splits:
            for domain in DOMAINS:
                for d in self.docs[split][domain]:
                    h.update(f"{split}\0{domain}\0{d.source}\0".encode())
                    h.update(d.text.encode("utf-8", "replace"))
                    h.update(b"\1")
        return h.hexdigest()

    def texts(self, split: str, domain: str) -> list[str]:
        """Texts of one split and domain."""
        return [d.text for d in self.docs[split][domain]]


# --------------------------------------------------------------------------- helpers


def _split_of(key: str, seed: int, weights: tuple[float, float, float]) -> str:
    """Deterministic split assignment of a source key (file / package) by hashing."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "little")
    u = h / 2**64
    if u < weights[0]:
        return "train"
    if u < weights[0] + weights[1]:
        return "corpus"
    return "bench"


#: The characters of ASCII text that :func:`_clean` drops (controls but ``\n``, DEL).
_ASCII_DROPPED = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def _clean(text: str) -> str:
    """Keep printable ASCII-ish text: drop control characters, normalise newlines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    if text.isascii():  # the common case, one regex pass: same result as the loop below
        return _ASCII_DROPPED.sub("", text)
    return "".join(ch for ch in text if ch == "\n" or (ch.isprintable() and ord(ch) < 0x2500))


def _proselike(text: str) -> bool:
    """True when a text reads as English prose (mostly letters and spaces)."""
    if not text:
        return False
    letters = sum(ch.isalpha() or ch == " " for ch in text)
    return letters / len(text) > 0.82 and len(text.split()) >= 12


def stdlib_root() -> Path:
    """The standard library folder of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def purelib_root() -> Path:
    """The site-packages folder of the running interpreter (installed packages)."""
    return Path(sysconfig.get_paths()["purelib"])


def _stdlib_files(root: Path) -> list[Path]:
    files = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).parts
        if set(rel[:-1]) & _STDLIB_SKIP or rel[-1].startswith(("test_", "_test")):
            continue
        files.append(p)
    return files


def _docstring_span(node: ast.AST) -> tuple[int, int] | None:
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr):
        val = body[0].value
        if isinstance(val, ast.Constant) and isinstance(val.value, str):
            return body[0].lineno, body[0].end_lineno or body[0].lineno
    return None


def _prose_from_docstring(doc: str) -> str:
    doc = inspect.cleandoc(doc)
    keep = []
    for line in doc.split("\n"):
        s = line.strip()
        if s.startswith((">>>", "...")):
            continue
        keep.append(line)
    text = "\n".join(keep).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return _clean(text)


def _code_and_docstrings(
    path: Path, root: Path, *, min_chars: int, max_chars: int
) -> tuple[list[ZooDocument], list[ZooDocument]]:
    """Functions (docstrings removed) and docstrings of one stdlib file."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return [], []
    lines = source.split("\n")
    rel = str(path.relative_to(root))
    code: list[ZooDocument] = []
    prose: list[ZooDocument] = []
    mod_doc = ast.get_docstring(tree, clean=False)
    if mod_doc:
        p = _prose_from_docstring(mod_doc)
        if len(p) >= min_chars and _proselike(p):
            prose.append(ZooDocument(p[: max_chars * 2], "prose", rel))
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.ClassDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                p = _prose_from_docstring(doc)
                if len(p) >= min_chars and _proselike(p):
                    prose.append(ZooDocument(p[: max_chars * 2], "prose", rel))
            stack.extend(n for n in node.body if isinstance(n, ast.FunctionDef | ast.ClassDef))
            continue
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        doc = ast.get_docstring(node, clean=False)
        if doc:
            p = _prose_from_docstring(doc)
            if len(p) >= min_chars and _proselike(p):
                prose.append(ZooDocument(p[: max_chars * 2], "prose", rel))
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        end = node.end_lineno or node.lineno
        span = _docstring_span(node)
        body_lines = [
            lines[i - 1]
            for i in range(start, end + 1)
            if span is None or not (span[0] <= i <= span[1])
        ]
        text = _clean(textwrap.dedent("\n".join(body_lines))).strip("\n")
        text = re.sub(r"\n\s*\n\s*\n", "\n\n", text)
        if min_chars <= len(text) <= max_chars and text.count("\n") >= 2:
            code.append(ZooDocument(text, "code", rel))
    return code, prose


#: distributions whose long description is never corpus text (this project's own README)
_OWN_DISTRIBUTIONS = frozenset({"sigmap"})


def core_distributions(project: str = "sigmap") -> frozenset[str] | None:
    """Normalized names of the distributions ``project``'s core requirements pull in
    (transitively, extras left out), or None when ``project`` is not installed.

    The zoo's prose comes only from these packages, so installing test or deployment
    extras (lm-eval, accelerate, ...) never changes the zoo's texts, models or numbers.
    """
    from importlib import metadata

    from packaging.requirements import Requirement

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    try:
        todo = [metadata.distribution(project)]
    except metadata.PackageNotFoundError:
        return None
    seen: set[str] = set()
    while todo:
        dist = todo.pop()
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            name = norm(req.name)
            if name in seen:
                continue
            seen.add(name)
            try:
                todo.append(metadata.distribution(req.name))
            except metadata.PackageNotFoundError:
                continue
    return frozenset(seen)


def _readme_docs(
    root: Path, *, min_chars: int, max_chars: int, only: frozenset[str] | None = None
) -> Iterator[tuple[str, str]]:
    """(package, prose chunk) from the long descriptions of installed packages.

    A paragraph seen in an earlier package (boilerplate, forks) is skipped, and so is this
    project's own distribution: its description is the README, which changes with every
    edit — the zoo would otherwise change (and retrain) whenever the documentation does.
    ``only``: normalized distribution names to read (:func:`core_distributions`)."""
    seen: set[str] = set()
    for meta in sorted(root.glob("*.dist-info/METADATA")):
        try:
            raw = meta.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        head, _, body = raw.partition("\n\n")
        name = next(
            (ln.split(":", 1)[1].strip() for ln in head.split("\n") if ln.startswith("Name:")),
            meta.parent.name,
        )
        if name.lower().replace("_", "-") in _OWN_DISTRIBUTIONS:
            continue
        if only is not None and re.sub(r"[-_.]+", "-", name).lower() not in only:
            continue
        body = _clean(body)
        chunk: list[str] = []
        size = 0
        for para in re.split(r"\n\s*\n", body):
            para = " ".join(para.split())
            if len(para) < 80 or not _proselike(para) or para.startswith(("#", "|", "..", "`")):
                continue
            if para in seen:
                continue
            seen.add(para)
            chunk.append(para)
            size += len(para) + 2
            if size >= min_chars * 2:
                text = "\n\n".join(chunk)[:max_chars]
                yield name, text
                chunk, size = [], 0
        if chunk and size >= min_chars:
            yield name, "\n\n".join(chunk)[:max_chars]


# ------------------------------------------------------------- generated domains

_SYLLABLES = [c + v + e for c in "bdfgklmnprstvz" for v in "aeiou" for e in ("", "l", "n", "r")]
# the lists the generators draw from, as arrays: ``rng.choice`` would convert a list on
# every call (the same draws, a third of the documents' generation time)
_SYLLABLE_ARRAY = np.array(_SYLLABLES)
_OPS = np.array(["+", "+", "-", "*"])


def _arith_line(rng: np.random.Generator) -> str:
    op = rng.choice(_OPS)
    if op == "*":
        a = int(rng.integers(2, 100))
        b = int(rng.integers(2, 10 if a >= 10 else 100))
        return f"{a} * {b} = {a * b}"
    da, db = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    a = int(rng.integers(10 ** (da - 1) if da > 1 else 0, 10**da))
    b = int(rng.integers(10 ** (db - 1) if db > 1 else 0, 10**db))
    if op == "-":
        a, b = max(a, b), min(a, b)
        return f"{a} - {b} = {a - b}"
    return f"{a} + {b} = {a + b}"


def arithmetic_document(rng: np.random.Generator) -> str:
    """A generated arithmetic document: 6-14 true statements, one per line."""
    return "\n".join(_arith_line(rng) for _ in range(int(rng.integers(6, 15))))


def recall_line(rng: np.random.Generator, k: int | None = None) -> tuple[list[str], str]:
    """A copy line ``copy: s1 .. sk | s1 .. sk``; returns (sequence, line)."""
    k = int(rng.integers(3, 9)) if k is None else k
    seq = [str(s) for s in rng.choice(_SYLLABLE_ARRAY, size=k, replace=False)]
    return seq, f"copy: {' '.join(seq)} | {' '.join(seq)}"


def recall_document(rng: np.random.Generator) -> str:
    """A generated recall document: 4-8 copy lines."""
    return "\n".join(recall_line(rng)[1] for _ in range(int(rng.integers(4, 9))))


RECORD_FIELDS: tuple[str, ...] = ("city", "trade", "color", "born")
_CITIES = [
    "Miranth", "Dovel", "Karsk", "Ulmera", "Tessin", "Baroq", "Venhal", "Oskar",
    "Pellin", "Zandor", "Quelm", "Rivak", "Sorrow", "Thane", "Yarrow", "Lindt",
]  # fmt: skip
_TRADES = [
    "smith", "baker", "weaver", "miner", "sailor", "scribe", "tanner", "potter",
    "mason", "farmer", "hunter", "healer",
]  # fmt: skip
_COLORS = ["teal", "amber", "crimson", "olive", "violet", "ochre", "silver", "indigo"]


def make_population(rng: np.random.Generator, n: int = 120) -> list[dict[str, str]]:
    """A fixed fictional population: name + city, trade, color, birth year."""
    names: set[str] = set()
    people = []
    while len(people) < n:
        first = "".join(rng.choice(_SYLLABLE_ARRAY, size=2)).capitalize()
        last = "".join(rng.choice(_SYLLABLE_ARRAY, size=2)).capitalize()
        name = f"{first} {last}"
        if name in names:
            continue
        names.add(name)
        people.append(
            {
                "name": name,
                "city": str(rng.choice(_CITIES)),
                "trade": str(rng.choice(_TRADES)),
                "color": str(rng.choice(_COLORS)),
                "born": str(int(rng.integers(1700, 2000))),
            }
        )
    return people


def record_line(person: dict[str, str]) -> str:
    """One record line of a person."""
    return f"name: {person['name']} | " + " | ".join(f"{f}: {person[f]}" for f in RECORD_FIELDS)


def field_values(field_name: str) -> list[str]:
    """All values a record field can take (years: the 1700-1999 range as strings)."""
    return {
        "city": list(_CITIES),
        "trade": list(_TRADES),
        "color": list(_COLORS),
        "born": [str(y) for y in range(1700, 2000)],
    }[field_name]


def records_document(rng: np.random.Generator, people: list[dict[str, str]]) -> str:
    """A generated records document: 4-9 records of random people."""
    idx = rng.choice(len(people), size=int(rng.integers(4, 10)), replace=False)
    return "\n".join(record_line(people[i]) for i in idx)


# ------------------------------------------------------------------------- build


def build_zoo_texts(
    *,
    seed: int = 0,
    n_corpus: dict[str, int] | None = None,
    n_bench: dict[str, int] | None = None,
    train_chars: int = 1_500_000,
    stdlib: Path | None = None,
    site_packages: Path | None = None,
    min_chars: int = 150,
    max_chars: int = 1200,
) -> ZooTexts:
    """Collect and generate all zoo text, split by document.

    Parameters
    ----------
    seed : int
        Seeds the split hashing, the sampling and the generators.
    n_corpus : dict[str, int], optional
        Number of corpus documents per domain. Default: code 700, prose 700,
        arithmetic 250, recall 250, records 250.
    n_bench : dict[str, int], optional
        Number of held-out (benchmark) documents per domain. Default: 250 each.
    train_chars : int
        Characters of training text per domain (natural domains: at most what the
        machine has).
    stdlib, site_packages : Path, optional
        Sources of natural text (default: the running interpreter's).
    min_chars, max_chars : int
        Length bounds of a natural document.

    Returns
    -------
    ZooTexts

    Raises
    ------
    SigmapInputError
        When the machine does not have enough natural text for the requested sizes.
    """
    n_corpus = n_corpus or {
        "code": 700,
        "prose": 700,
        "arithmetic": 250,
        "recall": 250,
        "records": 250,
    }
    n_bench = n_bench or dict.fromkeys(DOMAINS, 250)
    stdlib = stdlib or stdlib_root()
    site_packages = site_packages or purelib_root()
    docs: dict[str, dict[str, list[ZooDocument]]] = {s: {d: [] for d in DOMAINS} for s in SPLITS}

    # Natural text: split by source file / package (train 60%, corpus 25%, bench 15%).
    weights = (0.6, 0.25, 0.15)
    files = _stdlib_files(stdlib)
    if not files:
        raise SigmapInputError(f"zoo world: no Python files found under stdlib {stdlib}")
    order = np.random.default_rng([seed, 1]).permutation(len(files))
    need = {
        s: {d: (train_chars if s == "train" else (n_corpus if s == "corpus" else n_bench)[d])
            for d in ("code", "prose")}
        for s in SPLITS
    }  # fmt: skip

    train_size = {"code": 0, "prose": 0}  # characters of the train split so far

    def _full(split: str, domain: str) -> bool:
        if split == "train":
            return train_size[domain] >= need[split][domain]
        return len(docs[split][domain]) >= need[split][domain]

    def _add(split: str, domain: str, doc: ZooDocument) -> None:
        docs[split][domain].append(doc)
        if split == "train":
            train_size[domain] += len(doc.text)

    seen: set[str] = set()  # exact duplicates (copied docstrings / code) kept once
    readmes = list(
        _readme_docs(
            site_packages, min_chars=min_chars, max_chars=max_chars, only=core_distributions()
        )
    )
    for pkg, text in readmes:
        split = _split_of("pkg:" + pkg, seed, weights)
        if not _full(split, "prose") and text not in seen:
            seen.add(text)
            _add(split, "prose", ZooDocument(text, "prose", "package:" + pkg))
    for i in order:
        if all(_full(s, d) for s in SPLITS for d in ("code", "prose")):
            break
        path = files[int(i)]
        rel = str(path.relative_to(stdlib))
        split = _split_of("std:" + rel, seed, weights)
        if _full(split, "code") and _full(split, "prose"):
            continue
        code, prose = _code_and_docstrings(path, stdlib, min_chars=min_chars, max_chars=max_chars)
        for domain, found in (("code", code), ("prose", prose)):
            for d in found:
                if not _full(split, domain) and d.text not in seen:
                    seen.add(d.text)
                    _add(split, domain, d)
    for split in ("corpus", "bench"):
        for domain in ("code", "prose"):
            if not _full(split, domain):
                raise SigmapInputError(
                    f"zoo world: only {len(docs[split][domain])} {domain} documents for the "
                    f"{split} split under {stdlib} and {site_packages}; "
                    f"{need[split][domain]} requested (lower n_corpus / n_bench)"
                )
    # Shuffle within split so corpus order does not follow the file order.
    for split in SPLITS:
        for domain in ("code", "prose"):
            rng = np.random.default_rng([seed, 2, SPLITS.index(split), DOMAINS.index(domain)])
            lst = docs[split][domain]
            docs[split][domain] = [lst[j] for j in rng.permutation(len(lst))]

    # Generated text: separate random streams per split.
    people = make_population(np.random.default_rng([seed, 3]))
    for si, split in enumerate(SPLITS):
        for domain, gen in (
            ("arithmetic", arithmetic_document),
            ("recall", recall_document),
            ("records", lambda r: records_document(r, people)),
        ):
            rng = np.random.default_rng([seed, 4, si, DOMAINS.index(domain)])
            out = docs[split][domain]
            if split == "train":
                size = 0
                while size < train_chars:
                    t = gen(rng)
                    out.append(ZooDocument(t, domain, "generated"))
                    size += len(t) + 1
            else:
                n = (n_corpus if split == "corpus" else n_bench)[domain]
                out.extend(ZooDocument(gen(rng), domain, "generated") for _ in range(n))

    stats = {
        s: {
            d: {"docs": len(docs[s][d]), "chars": sum(len(x.text) for x in docs[s][d])}
            for d in DOMAINS
        }
        for s in SPLITS
    }
    return ZooTexts(docs=docs, facts=people, seed=seed, stats=stats)
