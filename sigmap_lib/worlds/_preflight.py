"""Preflight check of a whole world folder before any compute (``sigmap check``).

:func:`preflight_world` reads every input the graph will read -- the layout, the model
registry and each model's files, the benchmark catalog with its items / responses, the
scores, ``settings.yaml`` -- and returns **all** problems it finds (not only the first),
one :class:`WorldProblem` each, naming the file, the entry and a fix. Errors are
mistakes the run would fail on (or silently lose data through); warnings are stages or
models the run will skip.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds._minimums import WorldMinimums

_TOKENIZER_SLOW = ("tokenizer.model", "spiece.model", "vocab.txt", "sentencepiece.bpe.model")
_SETTINGS_GROUPS = ("corpus", "metabench", "minimums", "semantic", "signatures")


@dataclass(frozen=True)
class WorldProblem:
    """One problem of a world folder.

    Attributes
    ----------
    severity : str
        ``"error"`` (the run would fail, or silently lose data) or ``"warning"`` (a model,
        benchmark or stage will be skipped).
    file : str
        The file (relative to the world folder where possible).
    entry : str
        The entry in it (``models[2] (id 'org/name')``, ``benchmark 'arc'``, ``-``).
    message : str
        What is wrong.
    fix : str
        How to fix it.
    """

    severity: str
    file: str
    entry: str
    message: str
    fix: str

    def line(self) -> str:
        """``severity: file: entry: message (fix: ...)`` on one line."""
        return f"{self.severity}: {self.file}: {self.entry}: {self.message} (fix: {self.fix})"


class _Collector:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[WorldProblem] = []

    def rel(self, path: Path | str) -> str:
        p = Path(path)
        try:
            rel = p.resolve().relative_to(self.root)
            return str(rel) if rel.parts else str(self.root)
        except ValueError:
            return str(p)

    def add(self, severity: str, file: Path | str, entry: str, message: str, fix: str) -> None:
        one = " ".join(str(message).split())
        self.problems.append(WorldProblem(severity, self.rel(file), entry, one, fix))

    def error(self, *a: Any) -> None:
        self.add("error", *a)

    def warn(self, *a: Any) -> None:
        self.add("warning", *a)


def _close(word: str, choices: list[str], cutoff: float = 0.75) -> str | None:
    hit = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return hit[0] if hit else None


def _did_you_mean(word: str, choices: list[str]) -> str:
    hit = _close(word, choices)
    return f"; did you mean {hit!r}?" if hit else ""


# ----------------------------------------------------------------------------- layout
def _check_layout(c: _Collector) -> bool:
    from sigmap_lib.inputs import corpus_files
    from sigmap_lib.worlds._layout import REQUIRED

    root = c.root
    for name in REQUIRED:
        if not (root / name).exists():
            if name == "scores.csv" and (root / "scores.yaml").exists():
                c.error(name, "-", "missing (the layout check requires it even with scores.yaml)",
                        "add a scores.csv (it may hold only the header 'model')")  # fmt: skip
                continue
            c.error(name, "-", f"missing from the world folder {root}",
                    "add it (layout: docs/FORMATS.md)")  # fmt: skip
    corpus = root / "corpus"
    if not corpus.is_dir():
        return False
    try:
        files = corpus_files(corpus)  # the files the corpus assets read
    except SigmapInputError:
        files = []
        c.error("corpus", "-", "holds no .txt, .jsonl or .parquet files",
                "put the corpus documents into corpus/ (docs/FORMATS.md)")  # fmt: skip
    for f in files:
        _check_corpus_file(c, f)
    return True


def _check_corpus_file(c: _Collector, f: Path) -> None:
    if f.suffix.lower() == ".jsonl":
        try:
            with f.open(encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if line.strip():
                        row = json.loads(line)
                        if not isinstance(row, dict) or "text" not in row:
                            c.error(f, f"line {n}", "a JSON line without a 'text' field",
                                    'write one object per line: {"text": "...", "id": "..."}')  # fmt: skip
                        return
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            c.error(f, "-", f"unreadable JSON lines ({exc})", "write UTF-8 JSON, one per line")
    elif f.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq

            names = pq.read_schema(f).names
        except Exception as exc:  # any reader failure is the file's problem
            c.error(f, "-", f"unreadable parquet file ({exc})", "rewrite it as parquet")
            return
        if "text" not in names:
            c.error(f, "-", f"no 'text' column (columns: {names[:8]})",
                    "name the document column 'text'")  # fmt: skip


# ----------------------------------------------------------------------------- registry
def _truthy_env(*names: str) -> bool:
    import os

    return any(os.environ.get(n, "0") not in ("", "0") for n in names)


def _check_model_folder(c: _Collector, file: Path, entry: str, p: Path, raw: str) -> None:
    if not p.exists():
        siblings = [s.name for s in p.parent.iterdir() if s.is_dir()] if p.parent.is_dir() else []
        hit = _close(p.name, siblings)
        hint = f"did you mean {str(Path(raw).parent / hit)!r}? " if hit else ""
        c.error(file, entry, f"model path {raw!r} ({p}) does not exist",
                f"{hint}correct 'path' (relative to {c.rel(file)}'s folder)")  # fmt: skip
        return
    if not p.is_dir():
        c.error(file, entry, f"model path {raw!r} is not a folder",
                "point 'path' at a save_pretrained folder (a .gguf file goes under 'gguf')")  # fmt: skip
        return
    names = {q.name for q in p.iterdir()}
    if "config.json" not in names:
        c.error(file, entry, f"model folder {raw!r} has no config.json",
                "save the model with save_pretrained")  # fmt: skip
    ggufs = sorted(n for n in names if n.lower().endswith(".gguf"))
    if not any(n.endswith(".safetensors") for n in names):
        pickles = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt")))
        if pickles:
            c.error(file, entry, f"model folder {raw!r} has only pickle weights ({pickles[0]}); "
                    "load_model refuses them (safetensors by default)",
                    "re-save with model.save_pretrained(path, safe_serialization=True)")  # fmt: skip
        elif ggufs:
            c.error(file, entry, f"model folder {raw!r} has no *.safetensors weights but a GGUF "
                    f"file {ggufs[0]}", f"add 'gguf: {ggufs[0]}' to the entry")  # fmt: skip
        else:
            c.error(file, entry, f"model folder {raw!r} has no weights (no *.safetensors)",
                    "copy the model's *.safetensors files into the folder")  # fmt: skip
    if "tokenizer.json" not in names:
        slow = [n for n in _TOKENIZER_SLOW if n in names] or (
            ["vocab.json + merges.txt"] if {"vocab.json", "merges.txt"} <= names else []
        )
        if slow:
            c.warn(file, entry, f"model folder {raw!r} has no tokenizer.json, only {slow[0]}: "
                   "transformers must convert it to a fast tokenizer (offsets are required)",
                   "save the fast tokenizer: AutoTokenizer.from_pretrained(...).save_pretrained(path)")  # fmt: skip
        else:
            c.error(file, entry, f"model folder {raw!r} has no tokenizer files (tokenizer.json)",
                    "save the tokenizer into the folder: tokenizer.save_pretrained(path)")  # fmt: skip


def _check_gguf(c: _Collector, file: Path, entry: str, p: Path, raw: str) -> None:
    if Path(raw).suffix.lower() != ".gguf":
        c.error(file, entry, f"'gguf' must name a .gguf file, got {raw!r}",
                "use 'path' for a save_pretrained folder")  # fmt: skip
    elif not p.is_file():
        siblings = [s.name for s in p.parent.iterdir()] if p.parent.is_dir() else []
        hint = _did_you_mean(p.name, siblings)
        c.error(file, entry, f"gguf file {raw!r} ({p}) does not exist{hint}",
                "correct 'gguf' (relative to 'path' when given, else to the registry's folder)")  # fmt: skip
    else:
        with p.open("rb") as fh:
            magic = fh.read(4)
        if magic != b"GGUF":
            c.error(file, entry, f"gguf file {raw!r} is not a GGUF file (starts with {magic!r})",
                    "point 'gguf' at a llama.cpp .gguf file")  # fmt: skip


def _check_hub_model(c: _Collector, file: Path, entry: str, model_id: str, rev: Any) -> None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return
    try:
        hit = try_to_load_from_cache(
            model_id, "config.json", revision=None if rev is None else str(rev)
        )
    except Exception:  # an id that is not a valid repo name
        hit = None
    if not isinstance(hit, str):
        offline = _truthy_env("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        c.warn(file, entry, f"no 'path' and {model_id!r} is not in the local Hugging Face cache: "
               + ("scoring runs offline and will fail" if offline else "it is downloaded when scored"),
               "add 'path' (a local save_pretrained folder) or download the model first")  # fmt: skip


def _check_registry(c: _Collector) -> list[str]:
    """Per-entry checks of models.yaml (all entries), then the strict reader; the ids."""
    import yaml

    from sigmap_lib.inputs import read_registry

    f = c.root / "models.yaml"
    if not f.exists():
        return []
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        c.error(f, "-", f"invalid YAML ({exc})", "fix the YAML syntax")
        return []
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        c.error(f, "-", "expected a top-level 'models:' list",
                "write 'models:' followed by one '- id: ...' entry per model")  # fmt: skip
        return []
    base = f.resolve().parent
    ids: list[str] = []
    flagged: set[int] = set()
    n_units, has_text = _matrix_corpus(c)
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("id"), str):
            continue  # the strict reader below names it
        ids.append(e["id"])
        entry = f"models[{i}] (id {e['id']!r})"
        n0 = len(c.problems)
        path = e.get("path")
        path_p = None
        if isinstance(path, str) and path.strip():
            path_p = Path(path).expanduser()
            path_p = (path_p if path_p.is_absolute() else base / path_p).resolve()
        if e.get("nll_source") is not None:
            src = Path(str(e["nll_source"])).expanduser()
            src = src if src.is_absolute() else base / src
            if not (src.is_file() or (src / ".zarray").is_file() or (src / "zarr.json").is_file()):
                c.error(f, entry, f"nll_source {e['nll_source']!r} does not exist (a .npy "
                        "file or a zarr array)",
                        "correct 'nll_source' (relative to models.yaml) or remove it")  # fmt: skip
            else:
                _check_nll_source(c, f, entry, src, n_units)
        elif not has_text:
            c.error(f, entry, "has no nll_source, but this world's units have no text "
                    "(settings.yaml corpus: units_have_text: false), so it cannot be scored",
                    "give it its values (nll_source) or remove it")  # fmt: skip
        elif isinstance(e.get("gguf"), str):
            g = Path(e["gguf"]).expanduser()
            g = (g if g.is_absolute() else (path_p or base) / g).resolve()
            if path_p is not None and not path_p.is_dir():
                c.error(f, entry, f"model path {path!r} ({path_p}) does not exist",
                        "correct 'path' (it anchors the relative 'gguf' name)")  # fmt: skip
            else:
                _check_gguf(c, f, entry, g, e["gguf"])
        elif path_p is not None:
            _check_model_folder(c, f, entry, path_p, path)
        else:
            _check_hub_model(c, f, entry, e["id"], e.get("revision"))
        if any(p.severity == "error" for p in c.problems[n0:]):
            flagged.add(i)
    try:
        read_registry(f)
    except SigmapInputError as exc:
        m = re.search(r"models\[(\d+)\]", str(exc))
        if m is None or int(m.group(1)) not in flagged:
            entry = f"models[{m.group(1)}]" if m else "-"
            c.error(f, entry, str(exc), "correct the entry (format: docs/FORMATS.md)")
    if not entries:
        c.error(f, "-", "the registry lists no models", "add one '- id: ...' entry per model")
    return ids


def _matrix_corpus(c: _Collector) -> tuple[int | None, bool]:
    """The number of corpus units when every corpus file is a unit file (one unit per
    non-blank line: counted without segmenting), else None; and ``units_have_text``."""
    import yaml

    from sigmap_lib.inputs import UNIT_FILE_SUFFIX, corpus_files

    has_text = True
    f = c.root / "settings.yaml"
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8")) if f.exists() else {}
        has_text = read_corpus_settings((data or {}).get("corpus") or {})
    except (yaml.YAMLError, SigmapInputError, AttributeError, UnicodeDecodeError):
        pass  # the settings check reports it
    try:
        files = corpus_files(c.root / "corpus")
    except SigmapInputError:
        return None, has_text
    if not files or not all(p.name.lower().endswith(UNIT_FILE_SUFFIX) for p in files):
        return None, has_text
    n = 0
    for p in files:
        with p.open("rb") as fh:
            n += sum(1 for line in fh if line.strip())
    return n, has_text


def _check_nll_source(c: _Collector, f: Path, entry: str, src: Path, n_units: int | None) -> None:
    """An imported NLL array: readable, one dimension, finite; as long as the corpus when
    the corpus is made of unit files (counted cheaply)."""
    from sigmap_lib.nll import open_nll_source

    try:
        arr = open_nll_source(src)
    except (SigmapInputError, ValueError, OSError) as exc:
        c.error(f, entry, f"nll_source {src.name}: cannot be read ({exc})",
                "write it with numpy.save (a 1-D float array)")  # fmt: skip
        return
    if arr.ndim != 1:
        c.error(f, entry, f"nll_source {src.name} has shape {tuple(arr.shape)}, not one value "
                "per unit", "save one 1-D array per model")  # fmt: skip
        return
    if n_units is not None and arr.shape[0] != n_units:
        c.error(f, entry, f"nll_source {src.name} has {arr.shape[0]} values for {n_units} "
                "corpus units", "write one value per unit, in the corpus order")  # fmt: skip
    step = 1 << 20
    for a in range(0, arr.shape[0], step):
        block = np.asarray(arr[a : a + step], dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(block))
        if bad.size:
            c.error(f, entry, f"nll_source {src.name}: value {block[bad[0]]} at unit "
                    f"{a + int(bad[0])} is not finite", "recompute or drop that model")  # fmt: skip
            return


# ----------------------------------------------------------------------------- catalog
def _check_catalog(c: _Collector) -> dict[str, Any] | None:
    from sigmap_lib.inputs import benchmark_slug, read_catalog, read_questions, read_responses

    f = c.root / "catalog.yaml"
    if not f.exists():
        return None
    try:
        catalog = read_catalog(f)
    except SigmapInputError as exc:
        m = re.search(r"benchmark '([^']*)'", str(exc))
        c.error(f, f"benchmark {m.group(1)!r}" if m else "-", str(exc),
                "correct the catalog (format: docs/FORMATS.md)")  # fmt: skip
        return None
    referenced: set[Path] = set()
    counts: dict[str, dict[str, Any]] = {}
    for b in catalog.values():
        entry = f"benchmark {b.name!r}"
        info: dict[str, Any] = {"questions": 0, "respondents": None}
        for kind, p in (("items", b.items), ("responses", b.responses)):
            if p is None:
                continue
            referenced.add(Path(p).resolve())
            if not Path(p).exists():
                others = (
                    [q.name for q in Path(p).parent.iterdir()] if Path(p).parent.is_dir() else []
                )
                c.error(f, entry, f"{kind} file {c.rel(p)} does not exist"
                        f"{_did_you_mean(Path(p).name, others)}",
                        f"correct '{kind}' (relative to catalog.yaml) or remove it")  # fmt: skip
                continue
            try:
                if kind == "items":
                    info["questions"] = read_questions(p).height
                else:
                    info["respondents"] = set(read_responses(p).models)
            except SigmapInputError as exc:
                c.error(p, entry, str(exc), f"rewrite the {kind} file (docs/FORMATS.md)")
        counts[b.name] = info
    slugs = {benchmark_slug(n): n for n in catalog}
    for kind in ("items", "responses"):
        folder = c.root / kind
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.name.startswith(".") or p.resolve() in referenced:
                continue
            stem = p.name.split(".")[0]
            name = slugs.get(stem) or (stem if stem in catalog else None)
            if name is not None:
                c.warn(p, f"benchmark {name!r}", f"not referenced by catalog.yaml: the {kind} "
                       "are not read", f"add '{kind}: {kind}/{p.name}' to benchmark {name!r}")  # fmt: skip
            else:
                c.warn(p, "-", f"no catalog benchmark {stem!r}{_did_you_mean(stem, list(catalog))}",
                       "rename the file after its benchmark and reference it in catalog.yaml")  # fmt: skip
    return {"catalog": catalog, "counts": counts}


# ----------------------------------------------------------------------------- scores
def _score_specs(root: Path) -> tuple[list[dict[str, Any]], Path, Path]:
    import yaml

    sources = root / "scores.yaml"
    if sources.exists():
        data = yaml.safe_load(sources.read_text(encoding="utf-8")) or {}
        specs = data.get("sources", []) if isinstance(data, dict) else None
        if not isinstance(specs, list):
            raise SigmapInputError(f"{sources}: expected a mapping with a 'sources' list")
        return specs, sources.parent, sources
    return [{"kind": "wide", "path": str(root / "scores.csv")}], root, root / "scores.csv"


def _check_scores(c: _Collector, ids: list[str], cat: dict[str, Any] | None,
                  min_models: int, mins: WorldMinimums) -> None:  # fmt: skip
    import yaml

    from sigmap_lib.inputs import match_models, normalize_model_id, read_score_sources

    catalog = cat["catalog"] if cat else None
    try:
        specs, base, sfile = _score_specs(c.root)
    except (SigmapInputError, yaml.YAMLError) as exc:
        c.error("scores.yaml", "-", str(exc), "fix scores.yaml (a 'sources:' list)")
        return
    if not specs:
        c.error(sfile, "-", "no score sources", "list the score files under 'sources:'")
        return
    if sfile.name == "scores.csv" and not sfile.exists():
        return  # reported by the layout check
    try:
        long, report = read_score_sources(
            specs, catalog=catalog, min_models=min_models, base_dir=base
        )
    except SigmapInputError as exc:
        c.error(sfile, "-", str(exc), "correct the score table (docs/FORMATS.md)")
        return
    benches = list(dict.fromkeys(long["benchmark"].to_list()))
    if catalog is not None:
        for b in benches:
            if b not in catalog:
                c.error(sfile, f"benchmark {b!r}", f"scored but not in catalog.yaml"
                        f"{_did_you_mean(b, list(catalog))}",
                        "rename the score column to the catalog's name, or add the benchmark "
                        "to catalog.yaml")  # fmt: skip
        scored = set(benches) | set(report.dropped_benchmarks)
        for b in catalog:
            if b not in scored:
                c.warn("catalog.yaml", f"benchmark {b!r}", "has no scores: no performance "
                       "overlap and no signature for it", f"add a '{b}' column to the scores")  # fmt: skip
    for b, why in report.dropped_benchmarks.items():
        c.warn(sfile, f"benchmark {b!r}", f"dropped by the score table: {why}",
               f"add scores of at least {min_models} models")  # fmt: skip
    match = match_models(long["model"].unique(maintain_order=True).to_list(), ids)
    unmatched = list(match.unmatched_scores)
    norm = {normalize_model_id(s): s for s in unmatched}
    suggested: set[str] = set()
    for r in match.unmatched_registry:
        hit = _close(normalize_model_id(r), list(norm), cutoff=0.8)
        if hit is not None:
            s = norm[hit]
            suggested.add(s)
            c.warn("models.yaml", f"model {r!r}", f"has no scores; did you mean {s!r} "
                   f"(in {sfile.name})?", f"rename {s!r} to {r!r} in {sfile.name} "
                   "(or the registry id)")  # fmt: skip
        else:
            c.warn("models.yaml", f"model {r!r}", "has no scores: its NLL is computed but it "
                   "takes no part in signatures", f"add its scores to {sfile.name} "
                   "(under this id) or remove it from the registry")  # fmt: skip
    for s, regs in match.ambiguous.items():
        c.warn(sfile, f"model {s!r}", f"matches several registry ids {regs}: left unmatched",
               "write the exact registry id in the scores")  # fmt: skip
    rest = [s for s in unmatched if s not in suggested and s not in match.ambiguous]
    if rest:
        shown = ", ".join(repr(s) for s in rest[:5]) + (", ..." if len(rest) > 5 else "")
        c.warn(sfile, "-", f"{len(rest)} scored model(s) not in the registry are ignored by "
               f"signatures: {shown}", "add them to models.yaml if they should count")  # fmt: skip
    # minimum counts per stage
    reg = set(match.mapping)
    kept = [b for b in benches if catalog is None or b in catalog]
    per = long.filter(long["model"].is_in(list(reg))).group_by("benchmark").len()
    n_reg = dict(zip(per["benchmark"].to_list(), per["len"].to_list(), strict=True))
    need = max(3, mins.signature_models)
    for b in kept:
        if n_reg.get(b, 0) < need:
            c.warn(sfile, f"benchmark {b!r}", f"only {n_reg.get(b, 0)} registry model(s) scored "
                   f"(< {need}, minimum signature_models): no signature (not screened)",
                   f"score at least {need} registry models, or lower the minimum in "
                   "settings.yaml")  # fmt: skip
    if len(kept) < 2:
        c.warn(sfile, "-", f"{len(kept)} scored catalog benchmark(s): performance and signature "
               "overlap need >= 2 (skipped)", "score at least two catalog benchmarks")  # fmt: skip


def _check_items_counts(c: _Collector, cat: dict[str, Any], mins: WorldMinimums) -> None:
    counts = cat["counts"]
    with_q = [b for b, v in counts.items() if v["questions"]]
    need_q = max(2, mins.semantic_benchmarks)
    if len(with_q) < need_q:
        c.warn("catalog.yaml", "-", f"question texts for {len(with_q)} benchmark(s) {with_q}: "
               f"semantic overlap needs >= {need_q} (minimum semantic_benchmarks; it is "
               "skipped)", "add 'items:' files for more benchmarks")  # fmt: skip
    resp = {b: v["respondents"] for b, v in counts.items() if v["respondents"] is not None}
    if not resp:
        c.warn("catalog.yaml", "-", "no benchmark has item responses: metabench is skipped",
               "add 'responses:' files (docs/FORMATS.md)")  # fmt: skip
        return
    common = set.intersection(*resp.values())
    if len(common) < mins.metabench_respondents:
        c.warn("catalog.yaml", "-", f"only {len(common)} respondent(s) answered every benchmark "
               f"with responses ({sorted(resp)}); metabench needs >= "
               f"{mins.metabench_respondents} (minimum metabench_respondents; it is skipped)",
               "add responses of more models (checkpoints, other LLMs count)")  # fmt: skip


def _check_settings(c: _Collector) -> None:
    import yaml

    f = c.root / "settings.yaml"
    if not f.exists():
        return
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        c.error(f, "-", f"invalid YAML ({exc})", "fix the YAML syntax")
        return
    if not isinstance(data, dict):
        c.error(f, "-", "expected a mapping of settings per asset group",
                "write e.g. 'metabench: {lam: 0.05}'")  # fmt: skip
        return
    for group, values in data.items():
        if group not in _SETTINGS_GROUPS:
            c.warn(f, f"group {group!r}", "unknown settings group: ignored"
                   f"{_did_you_mean(str(group), list(_SETTINGS_GROUPS))}",
                   f"use one of {list(_SETTINGS_GROUPS)}")  # fmt: skip
            continue
        if not isinstance(values, dict):
            c.error(
                f,
                f"group {group!r}",
                "expected a mapping of options",
                "write 'option: value' lines",
            )
            continue
        from sigmap_lib.metabench import MetabenchConfig
        from sigmap_lib.worlds._minimums import read_minimums

        try:
            if group == "minimums":
                read_minimums({"minimums": values})
            elif group == "semantic":
                read_semantic_settings(values)
            elif group == "signatures":
                read_signature_settings(values)
            elif group == "corpus":
                read_corpus_settings(values)
            else:
                MetabenchConfig.from_kwargs(**values)
        except (SigmapInputError, TypeError, ValueError) as exc:
            c.error(f, f"group {group!r}", str(exc), "correct the option names / values")


def read_semantic_settings(values: dict) -> int:
    """The ``semantic:`` group of ``settings.yaml``: ``max_questions`` (int >= 0, 0 = all
    questions), the semantic level's sample of questions per benchmark.

    Examples
    --------
    >>> from sigmap_lib.worlds import read_semantic_settings
    >>> read_semantic_settings({"max_questions": 50}), read_semantic_settings({})
    (50, 0)
    """
    unknown = sorted(set(values) - {"max_questions"})
    if unknown:
        raise SigmapInputError(f"semantic: unknown option(s) {unknown}; known: ['max_questions']")
    cap = values.get("max_questions", 0)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise SigmapInputError(f"semantic: max_questions must be an int >= 0, got {cap!r}")
    return cap


def read_corpus_settings(values: dict) -> bool:
    """The ``corpus:`` group of ``settings.yaml``: ``units_have_text`` (default true). A
    matrix world whose units are opaque ids (no text) says false: no model can be scored on
    its corpus, every model brings its values (``nll_source``).

    Examples
    --------
    >>> from sigmap_lib.worlds import read_corpus_settings
    >>> read_corpus_settings({}), read_corpus_settings({"units_have_text": False})
    (True, False)
    """
    unknown = sorted(set(values) - {"units_have_text"})
    if unknown:
        raise SigmapInputError(f"corpus: unknown option(s) {unknown}; known: ['units_have_text']")
    flag = values.get("units_have_text", True)
    if not isinstance(flag, bool):
        raise SigmapInputError(f"corpus: units_have_text must be true or false, got {flag!r}")
    return flag


SIGNATURE_OPTIONS = ("strata", "method", "fdr", "levels")
SIGNATURE_LEVELS = ("source", "document")


def read_signature_settings(values: dict) -> str:
    """The ``signatures:`` group of ``settings.yaml``: ``strata`` (``"family"`` or
    ``"none"``, default ``"none"``), the registry column the calibrated signature test
    stratifies the models by when neither the run config nor ``sigmap run --strata`` says.
    The group's other options are :func:`read_signature_mode`'s.

    Examples
    --------
    >>> from sigmap_lib.worlds import read_signature_settings
    >>> read_signature_settings({"strata": "family"}), read_signature_settings({})
    ('family', 'none')
    """
    unknown = sorted(set(values) - set(SIGNATURE_OPTIONS))
    if unknown:
        raise SigmapInputError(
            f"signatures: unknown option(s) {unknown}; known: {list(SIGNATURE_OPTIONS)}"
        )
    strata = values.get("strata", "none")
    if strata not in ("family", "none"):
        raise SigmapInputError(f"signatures: strata must be 'family' or 'none', got {strata!r}")
    read_signature_mode(values)
    return str(strata)


def read_signature_mode(values: dict) -> dict:
    """The signature method of the ``signatures:`` group of ``settings.yaml``: ``method``
    (a mode of :data:`~sigmap_lib.signatures.SIGNATURE_METHODS`, default
    ``"calibrated"``), ``fdr`` (claim units at this false-discovery rate instead of the
    family-wise error; default none) and ``levels`` (what
    ``"calibrated-multiresolution"`` tests beside units: ``source`` and/or ``document``;
    default both).

    Examples
    --------
    >>> from sigmap_lib.worlds import read_signature_mode
    >>> read_signature_mode({})
    {'method': 'calibrated', 'fdr': None, 'levels': ['source', 'document']}
    >>> read_signature_mode({"method": "calibrated-multiresolution", "levels": ["document"]})
    {'method': 'calibrated-multiresolution', 'fdr': None, 'levels': ['document']}
    >>> read_signature_mode({"fdr": 2})
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: signatures: fdr must be a number in (0, 1), got 2
    """
    from sigmap_lib.signatures import method_class

    method = values.get("method", "calibrated")
    if not isinstance(method, str):
        raise SigmapInputError(f"signatures: method must be a method name, got {method!r}")
    method_class(method)  # an unknown method: one line naming the known ones
    fdr = values.get("fdr")
    if fdr is not None and (
        isinstance(fdr, bool) or not isinstance(fdr, int | float) or not 0.0 < fdr < 1.0
    ):
        raise SigmapInputError(f"signatures: fdr must be a number in (0, 1), got {fdr!r}")
    levels = values.get("levels", list(SIGNATURE_LEVELS))
    if isinstance(levels, str):
        levels = [levels]
    if (
        not isinstance(levels, list)
        or not levels
        or any(lv not in SIGNATURE_LEVELS for lv in levels)
    ):
        raise SigmapInputError(
            f"signatures: levels must be a list of {list(SIGNATURE_LEVELS)}, got {levels!r}"
        )
    return {"method": method, "fdr": None if fdr is None else float(fdr), "levels": levels}


def _world_minimums(base: Path, overrides: dict | None) -> WorldMinimums:
    """The world's minimums (``settings.yaml``, then ``overrides``); the defaults when the
    settings cannot be read (the settings check reports that)."""
    import yaml

    from sigmap_lib.worlds._minimums import read_minimums

    f = base / "settings.yaml"
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8")) if f.exists() else {}
        return read_minimums(data if isinstance(data, dict) else {}, overrides)
    except (yaml.YAMLError, SigmapInputError, OSError):
        return WorldMinimums()


# ----------------------------------------------------------------------------- entry point
def preflight_world(
    root: str | Path, *, min_models: int | None = None, overrides: dict | None = None
) -> list[WorldProblem]:
    """Every problem of a world folder, found before any compute (``sigmap check``).

    Checks the layout (``corpus/`` files and their ``text`` field, ``models.yaml``,
    ``catalog.yaml``, ``scores.csv``); each registry entry (a ``path`` exists and holds
    ``config.json``, ``*.safetensors`` weights -- pickle-only folders are errors, as
    :func:`sigmap_lib.nll.load_model` refuses them -- and ``tokenizer.json``; a ``gguf``
    file exists and is GGUF; an ``nll_source`` exists; a hub id without ``path`` is in the
    local Hugging Face cache) and the strict registry reader; the catalog, its ``items`` /
    ``responses`` files (readable) and files in ``items/`` / ``responses/`` it does not
    reference; the scores (``scores.yaml`` sources, else ``scores.csv``) as the score
    table asset reads them: benchmarks not in the catalog (error, with a "did you mean"),
    registry models without scores (warning, with a "did you mean" for a near-miss score
    id), benchmarks dropped for too few models; the world's minimum counts of the stages
    (:class:`WorldMinimums`: scored registry models per signature, benchmarks with question
    texts for semantic overlap, respondents of every benchmark with responses for
    metabench; >= 2 benchmarks for the overlaps), as warnings naming what is skipped;
    ``settings.yaml`` options.

    Parameters
    ----------
    root : str or Path
        The world folder (docs/FORMATS.md).
    min_models : int, optional
        The score table's ``min_models`` (benchmarks scored for fewer models are dropped);
        default: the world's ``settings.yaml`` ``minimums: {score_models: N}`` (then
        ``overrides``), else 5.
    overrides : dict, optional
        Minimums given on the command line (``{"score_models": 3}``).

    Returns
    -------
    list of WorldProblem
        Errors first, then warnings, each in the order found; empty when all is well.
        ``problem.line()`` is one line naming the file, the entry and the fix.

    Examples
    --------
    A small synthetic world, then one model id mistyped in its scores:

    >>> from pathlib import Path
    >>> from sigmap_lib.worlds import make_synthetic_world, preflight_world
    >>> world = make_synthetic_world(
    ...     "world", n_models=8, n_units=300, n_functions=2, n_benchmarks=2,
    ...     planted_per_function=3, n_items=10, n_respondents=20,
    ... )
    >>> [p.severity for p in preflight_world("world")]
    []
    >>> scores = Path("world/scores.csv")
    >>> _ = scores.write_text(scores.read_text().replace("synthetic/delta-03", "synthetic/detla-03"))
    >>> for p in preflight_world("world"):
    ...     print(p.line())
    warning: models.yaml: model 'synthetic/delta-03': has no scores; did you mean
    'synthetic/detla-03' (in scores.csv)? (fix: rename 'synthetic/detla-03' to
    'synthetic/delta-03' in scores.csv (or the registry id))

    A missing world is one error:

    >>> [p.line() for p in preflight_world("nowhere")]  # doctest: +ELLIPSIS
    ['error: .../nowhere: -: the world folder does not exist (fix: pass an existing folder ...)']
    """
    base = Path(root).expanduser().resolve()
    c = _Collector(base)
    if not base.is_dir():
        c.error(base, "-", "the world folder does not exist",
                "pass an existing folder (layout: docs/FORMATS.md)")  # fmt: skip
        return c.problems
    _check_layout(c)
    ids = _check_registry(c)
    cat = _check_catalog(c)
    mins = _world_minimums(base, overrides)  # settings.yaml `minimums`, CLI overrides
    _check_scores(c, ids, cat, mins.score_models if min_models is None else min_models, mins)
    if cat is not None:
        _check_items_counts(c, cat, mins)
    _check_settings(c)
    return [p for p in c.problems if p.severity == "error"] + [
        p for p in c.problems if p.severity != "error"
    ]
