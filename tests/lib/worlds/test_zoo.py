"""The zoo world: text splits, benchmark items, loglikelihood scoring, the world folder,
caching and determinism."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from sigmap_lib.worlds.zoo import (
    DOMAINS,
    FAMILIES,
    SPLITS,
    ZooBenchmark,
    ZooItem,
    batch_requests,
    build_zoo_benchmarks,
    encode_requests,
    loglikelihoods,
    score_benchmarks,
)


@pytest.fixture(scope="module")
def quick_texts():
    from sigmap_lib.worlds.zoo import build_texts

    return build_texts(seed=0, quick=True)


@pytest.fixture(scope="module")
def quick_world(tmp_path_factory: pytest.TempPathFactory):
    from sigmap_lib.worlds.zoo import build_zoo_world

    root = tmp_path_factory.mktemp("zoo") / "world"
    calls: list[tuple[str, int, int, str]] = []
    world = build_zoo_world(root, quick=True, seed=0, progress=lambda *a: calls.append(a))
    return world, calls


# ----------------------------------------------------------------------- text


def test_texts_are_deterministic_and_split_by_document(quick_texts) -> None:
    from sigmap_lib.worlds.zoo import build_texts

    again = build_texts(seed=0, quick=True)
    assert again.fingerprint() == quick_texts.fingerprint()
    other = build_texts(seed=1, quick=True)
    assert other.fingerprint() != quick_texts.fingerprint()
    # the training-only fingerprint ignores corpus / bench documents
    assert quick_texts.fingerprint(("train",)) != quick_texts.fingerprint()

    for split in SPLITS:
        for domain in DOMAINS:
            assert quick_texts.docs[split][domain], (split, domain)
            assert all(d.domain == domain for d in quick_texts.docs[split][domain])
    # natural text: a source file / package feeds exactly one split
    for domain in ("code", "prose"):
        sources = {s: {d.source for d in quick_texts.docs[s][domain]} for s in SPLITS}
        assert not sources["train"] & sources["corpus"]
        assert not sources["train"] & sources["bench"]
        assert not sources["corpus"] & sources["bench"]
    # no corpus or bench document is also a training document
    train = {d.text for dom in DOMAINS for d in quick_texts.docs["train"][dom]}
    for split in ("corpus", "bench"):
        for domain in ("code", "prose"):
            assert not {d.text for d in quick_texts.docs[split][domain]} & train
    # generated domains carry their skill
    line = quick_texts.docs["corpus"]["arithmetic"][0].text.split("\n")[0]
    lhs, rhs = line.split(" = ")
    assert eval(lhs) == int(rhs)  # only digits and + - * by construction
    copy = quick_texts.docs["corpus"]["recall"][0].text.split("\n")[0]
    a, b = copy.removeprefix("copy: ").split(" | ")
    assert a == b


def _fake_dists(site: Path, dists: dict[str, str]) -> None:
    """Installed-distribution folders ``<dist>.dist-info`` under ``site``, each with a
    METADATA of twelve prose paragraphs naming its package."""
    para = "This is a plain paragraph of ordinary English prose, long enough to be kept as text. "
    for dist, name in dists.items():
        (site / f"{dist}.dist-info").mkdir()
        body = "\n\n".join(f"{name} {k}: {para * 2}" for k in range(12))
        (site / f"{dist}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\n\n{body}", encoding="utf-8"
        )


def test_own_readme_is_never_corpus_text(tmp_path: Path) -> None:
    """Package descriptions feed the prose domain, but not this project's own (its README):
    otherwise every documentation edit would change the zoo's texts and retrain it."""
    from sigmap_lib.worlds.zoo._text import _readme_docs

    _fake_dists(tmp_path, {"sigmap-0.1.0": "sigmap", "other_pkg-1.0": "other-pkg"})
    got = list(_readme_docs(tmp_path, min_chars=200, max_chars=2000))
    assert got and {pkg for pkg, _ in got} == {"other-pkg"}
    assert not any("sigmap" in text for _, text in got)


def test_benchmarks_are_deterministic_and_well_formed(quick_texts) -> None:
    benches = build_zoo_benchmarks(quick_texts, n_items=20, seed=0)
    again = build_zoo_benchmarks(quick_texts, n_items=20, seed=0)
    other = build_zoo_benchmarks(quick_texts, n_items=20, seed=3)
    assert [[vars(i) for i in b.items] for b in benches] == [
        [vars(i) for i in b.items] for b in again
    ]
    assert [[vars(i) for i in b.items] for b in benches] != [
        [vars(i) for i in b.items] for b in other
    ]

    assert len(benches) >= 12
    assert len({b.function for b in benches}) >= 4
    assert len({b.format for b in benches}) >= 2
    families = {b.family for b in benches}
    assert families == set(FAMILIES)
    for fam in families:  # every family spans several domains
        assert len({b.domain for b in benches if b.family == fam}) >= 2
    for b in benches:
        assert len(b.items) == 20
        assert len({i.item_id for i in b.items}) == 20
        for it in b.items:
            assert 0 <= it.gold < len(it.choices)
            assert len(set(it.choices)) == len(it.choices)
            assert max(len(c.encode()) for c in it.choices) <= 100
            if b.format == "cloze":
                assert len(it.choices) == 1
            else:
                assert len(it.choices) >= 2
            assert it.text.strip()
    by = {b.name: b for b in benches}
    # arithmetic items: the gold answer is the true result
    for it in by["pickword_arithmetic"].items:
        lhs = it.context.split("\n")[-1].removesuffix(" =")
        assert eval(lhs) == int(it.choices[it.gold])
    for it in by["pickword_recall"].items:  # the next elements in order, among scrambles
        src, _, done = it.context.split("\n")[-1].partition("|")
        seq, k = src.removeprefix("copy: ").split(), len(done.split())
        gold = it.choices[it.gold].split()
        assert gold == seq[k : k + 4] and len(gold) >= 3
        assert all(sorted(c.split()) == sorted(gold) for c in it.choices)
    for name in ("nextline_code", "nextline_prose"):  # distractors: the line's words scrambled
        for it in by[name].items:
            words = sorted(it.choices[it.gold].split())
            assert all(sorted(c.split()) == words for c in it.choices)
    for name in ("pickword_code", "pickword_prose", "pickword_records"):
        for it in by[name].items:  # distractors: one-edit misspellings of the gold word
            gold = it.choices[it.gold]
            for c in it.choices:
                assert len(c) == len(gold)
                assert 1 <= sum(a != b for a, b in zip(c, gold)) <= 2 or c == gold
    assert all(b.threshold is not None for b in benches if b.metric == "ll_threshold")
    # minimal pairs differ from their gold line
    for it in by["pair_arithmetic"].items:
        good = it.choices[it.gold]
        lhs, rhs = good.split(" = ")
        assert eval(lhs) == int(rhs)
        bad = it.choices[1 - it.gold]
        assert eval(bad.split(" = ")[0]) != int(bad.split(" = ")[1])


def test_roster_and_training_mixtures(quick_texts) -> None:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.worlds.zoo import MIXTURES, ZOO_MODELS, checkpoint_steps, model_specs
    from sigmap_lib.worlds.zoo._models import _training_texts

    full = model_specs()
    assert len(full) == len(ZOO_MODELS) == 8
    assert len({s.name for s in full}) == 8
    # a 2^(7-4) design: a lean per domain, the architecture and the budget, each balanced
    # (4 runs each way) and orthogonal to every other
    design = np.array(
        [
            [1 if x in s.mixture else -1 for x in "cpark"]
            + [1 if s.arch == "llama" else -1, 1 if s.steps == 800 else -1]
            for s in full
        ]
    )
    assert {s.steps for s in full} == {400, 800} and {s.size for s in full} == {"s"}
    assert (design.sum(axis=0) == 0).all()
    assert (design.T @ design == 8 * np.eye(7)).all()
    for s in full:  # a leaned-on domain gets three times the share of the others
        mix = MIXTURES[s.mixture]
        lean = [d for d in mix if mix[d] > min(mix.values())]
        if lean:
            assert max(mix.values()) == pytest.approx(3 * min(mix.values()))
    # every run also registers its weights after 5, 15 and 40 % of its steps (a budget
    # ladder), all on the grid of the other checkpoints: 32 registry models
    for s in full:
        assert [e / s.steps for e in s.early] == pytest.approx([0.05, 0.15, 0.4], abs=0.002)
        assert set(s.early) <= set(checkpoint_steps(s.steps, 19))
    ids = [s.model_id for s in full] + [s.early_id(e) for s in full for e in s.early]
    assert len(set(ids)) == 32
    small = model_specs(2)
    assert {s.arch for s in small} == {"gpt2", "llama"}
    with pytest.raises(SigmapInputError, match="n_models"):
        model_specs(9)
    # every mixture leans towards one domain and trains on all of them
    for mix in MIXTURES.values():
        assert sum(mix.values()) == pytest.approx(1.0) and min(mix.values()) > 0
    for spec in model_specs(3, quick=True):
        texts, chars = _training_texts(quick_texts, spec)
        total = sum(chars.values())
        assert sum(len(t) for t in texts) == total
        for dom, share in MIXTURES[spec.mixture].items():
            if share == 0:
                assert chars[dom] == 0
            else:  # whole documents are drawn, so shares are approximate
                assert abs(chars[dom] / total - share) < 0.05, (spec.name, dom)


# ------------------------------------------------------------------- scoring


def _independent_ll(model, tok, context: str, continuation: str) -> tuple[float, bool]:
    """log p(continuation | BOS + context) = log p(BOS + whole) - log p(BOS + context),
    by two plain forward passes (requires the whole's tokens to start with the
    context's tokens)."""
    import torch

    bos = tok.bos_token_id
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
    assert whole[: len(ctx)] == ctx, "test request must tokenize with a clean boundary"
    ids = torch.tensor([[bos, *whole]])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    targets = ids[0, 1:]
    per_token = logp[:-1].gather(1, targets[:, None])[:, 0]
    n_cont = len(whole) - len(ctx)
    ll = float(per_token[-n_cont:].sum())
    greedy = bool((logp[:-1].argmax(-1)[-n_cont:] == targets[-n_cont:]).all())
    return ll, greedy


def test_loglikelihoods_match_plain_forward_passes(tiny_models: list[Path]) -> None:
    from sigmap_lib.nll import load_model

    requests = [
        ("the cat sat on the", " mat"),
        ("the cat sat on the", " dog and the bird"),
        ("the cat sat on the", " hat"),
        ("a", " b"),
        ("one two three four five six seven eight nine ten eleven twelve", " thirteen"),
        ("x = 1\ny = 2\nz =", " 3"),
        ("x = 1\ny = 2\nz =", " x + y"),
    ]
    for path in tiny_models:
        model, tok = load_model(path, device="cpu", dtype="float32")
        ll, greedy = loglikelihoods(model, tok, requests, batch_size=3)
        assert ll.shape == (len(requests),) and greedy.dtype == bool
        for k, (c, x) in enumerate(requests):
            ref, ref_greedy = _independent_ll(model, tok, c, x)
            assert ll[k] == pytest.approx(ref, abs=2e-3), (path.name, c, x)
            assert greedy[k] == ref_greedy
        assert np.all(ll < 0)
        # trailing whitespace of a context moves into the continuation (lm-eval rule)
        ll2, _ = loglikelihoods(model, tok, [("the cat sat on the ", "mat")])
        assert ll2[0] == pytest.approx(ll[0], abs=1e-4)


def test_shared_request_batches_give_the_same_loglikelihoods(tiny_models: list[Path]) -> None:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.nll import load_model

    requests = [("the cat sat on the", c) for c in (" mat", " dog and the bird", " hat")]
    requests += [("a", " b"), ("x = 1\ny = 2\nz =", " 3")]
    model, tok = load_model(tiny_models[0], device="cpu", dtype="float32")
    encoded = encode_requests(tok, requests)
    n_pos = model.config.n_positions
    plan = batch_requests(encoded, pad_id=0, max_length=n_pos, batch_size=2)
    assert sorted(int(r) for b in plan.batches for r in b.rows) == list(range(len(requests)))
    assert all(len(b.rows) <= 2 or len(b.ids) == 1 for b in plan.batches)
    ll, greedy = loglikelihoods(model, tok, requests, batch_size=2)
    ll2, greedy2 = loglikelihoods(model, tok, requests, batches=plan)
    np.testing.assert_allclose(ll2, ll, rtol=0, atol=1e-5)
    assert greedy2.tolist() == greedy.tolist()
    with pytest.raises(SigmapInputError, match="batches of 5 requests"):
        loglikelihoods(model, tok, requests[:4], batches=plan)


def test_score_benchmarks_applies_each_metric(tiny_models: list[Path]) -> None:
    from sigmap_lib.nll import load_model

    model, tok = load_model(tiny_models[0], device="cpu", dtype="float32")
    ctx = "the quick brown fox jumps over the"
    choices = [" lazy dog", " a", " lazy dog and runs far away from here"]
    ll, _greedy = loglikelihoods(model, tok, [(ctx, c) for c in choices])
    norm = ll / np.array([len(c.encode()) for c in choices])
    items = [ZooItem(f"i{g}", ctx, choices, g, ctx) for g in range(3)]
    benches = [
        ZooBenchmark("a", "f", "multiple_choice", "acc", "prose", "language", items),
        ZooBenchmark("n", "f", "multiple_choice", "acc_norm", "prose", "language", items),
        ZooBenchmark(
            "g", "c", "cloze", "greedy", "prose", "language", [ZooItem("c", ctx, [" a"], 0, ctx)]
        ),
    ]
    ll_a = float(loglikelihoods(model, tok, [(ctx, " a")])[0][0]) / 2  # 2 bytes
    for name, thr in (("t_pass", ll_a - 1e-6), ("t_fail", ll_a + 1e-6)):
        benches.append(
            ZooBenchmark(
                name, "c", "cloze", "ll_threshold", "prose", "language",
                [ZooItem("t", ctx, [" a"], 0, ctx)], threshold=thr,
            )
        )  # fmt: skip
    got = score_benchmarks(model, tok, benches)
    assert got["t_pass"].tolist() == [1] and got["t_fail"].tolist() == [0]
    assert got["a"].tolist() == [int(np.argmax(ll) == g) for g in range(3)]
    assert got["n"].tolist() == [int(np.argmax(norm) == g) for g in range(3)]
    assert got["a"].sum() == 1 and got["n"].sum() == 1
    assert got["g"].tolist() == [int(loglikelihoods(model, tok, [(ctx, " a")])[1][0])]


# --------------------------------------------------------------------- world
# The quick world trains 3 small runs and evaluates 60 respondents (~3 min on this shared
# 2-core machine): slow.


@pytest.mark.slow
def test_quick_world_folder_is_valid(quick_world) -> None:
    from sigmap_lib.inputs import (
        read_catalog,
        read_corpus,
        read_questions,
        read_registry,
        read_responses,
    )
    from sigmap_lib.inputs.scores import read_wide
    from sigmap_lib.nll import load_model
    from sigmap_lib.worlds import check_world

    world, calls = quick_world
    root = world.root
    check_world(root)
    for name in ("models.yaml", "catalog.yaml", "scores.csv", "truth.json", "corpus/zoo.jsonl"):
        assert (root / name).is_file(), name
    stages = {c[0] for c in calls}
    assert {"texts", "tokenizers", "train_models", "benchmarks", "evaluate", "write"} <= stages

    # models: both architectures, both tokenizers, loadable, sizes recorded; each run's
    # final weights and its weights after 5, 15 and 40 % of its steps
    reg = read_registry(root / "models.yaml")
    assert len(reg) == 12 and {m.family for m in reg} == {"gpt2", "llama"}
    raw = yaml.safe_load((root / "models.yaml").read_text())["models"]
    vocab = set()
    for k, (spec, entry) in enumerate(zip(reg, raw)):
        assert spec.id.startswith("zoo/") and entry["dtype"] == "float32"
        run, _, step = spec.id.removeprefix("zoo/").partition("-step")
        assert (k % 4 != 0) == bool(step)  # final, then its three early weights, per run
        want = f"models/{run}" + (f"/checkpoints/step{step}" if step else "")
        assert entry["path"] == want
        model, tok = load_model(spec.path, device="cpu", dtype="float32")
        assert sum(p.numel() for p in model.parameters()) == entry["n_params"]
        assert any(Path(spec.path).glob("*.safetensors"))
        vocab.add(len(tok))
    assert len(vocab) == 2

    # benchmarks: catalog, items, responses, scores agree
    cat = read_catalog(root / "catalog.yaml")
    assert len(cat) == len(world.benchmarks) == 16
    scores = pl.read_csv(root / "scores.csv")
    assert scores["model"].to_list() == [m.id for m in reg]
    wide = read_wide(root / "scores.csv")
    assert set(wide["benchmark"].unique().to_list()) == set(world.benchmarks)
    for j, name in enumerate(world.benchmarks):
        b = cat[name]
        assert b.score_range == (0.0, 1.0)
        items = pl.read_parquet(b.items)
        assert read_questions(b.items)["item_id"].to_list() == items["item_id"].to_list()
        assert {"item_id", "text", "choices", "gold"} <= set(items.columns)
        assert items["item_id"].dtype == pl.String and items["text"].str.len_chars().min() > 0
        rm = read_responses(b.responses)
        assert rm.matrix.shape == (12 + 48, items.height)  # 12 models + other checkpoints
        assert rm.item_ids == items["item_id"].to_list()
        assert set(np.unique(rm.matrix)) <= {0, 1}
        col = scores[name].to_numpy()
        assert np.all((col >= 0) & (col <= 1))
        np.testing.assert_allclose(col, rm.matrix[:12].mean(axis=1))
        np.testing.assert_allclose(world.scores[:, j], col)

    # truth: every corpus document has a domain; model and benchmark metadata
    truth = json.loads((root / "truth.json").read_text())
    docs = read_corpus(root / "corpus")
    assert {d.doc_id for d in docs} == set(truth["corpus_domains"])
    assert set(truth["corpus_domains"].values()) == set(DOMAINS)
    assert set(truth["models"]) == {m.id for m in reg}
    for m in truth["models"].values():
        assert abs(sum(m["mixture"].values()) - 1) < 1e-9 and m["steps"] > 0
        assert m["fraction"] == m["steps"] / m["run_steps"]
        assert min(abs(m["fraction"] - f) for f in (0.05, 0.15, 0.4, 1.0)) < 1e-9
    assert set(truth["benchmarks"]) == set(world.benchmarks)


@pytest.mark.slow
def test_quick_world_benchmarks_share_a_general_factor(quick_world) -> None:
    """The zoo's models differ first by general quality, as real LLMs do: benchmark scores
    correlate over the registry models (performance-level overlap), and the weights
    trained longer score higher. Measured on the quick world: median overlap 0.33 over
    the 120 benchmark pairs, final minus 5 % weights 0.09 on the mean item score, averaged
    over the runs (the same ladder on runs of 60-80 steps with the earlier multiple-choice
    recipes, which the tiny models answered at chance: -0.03 and 0.025), hence the
    thresholds 0.15 and 0.04."""
    from sigmap_lib.overlap import performance_overlap

    world, _ = quick_world
    overlap = performance_overlap((world.benchmarks, world.scores), min_common=3)
    pairs = overlap.values[np.triu_indices(len(world.benchmarks), 1)]
    assert np.nanmedian(pairs) > 0.15, np.nanmedian(pairs)
    mean = world.scores.mean(axis=1)
    gains = []
    for run in {m["run"] for m in world.models}:
        rows = sorted((m["step"], i) for i, m in enumerate(world.models) if m["run"] == run)
        assert [step for step, _ in rows][-1] == world.models[rows[-1][1]]["steps"]
        gains.append(mean[rows[-1][1]] - mean[rows[0][1]])  # final minus 5 % weights
    assert np.mean(gains) > 0.04, gains


@pytest.mark.slow
def test_rebuild_reuses_models_and_is_deterministic(quick_world) -> None:
    from sigmap_lib.worlds.zoo import build_zoo_world

    world, _ = quick_world
    assert len(world.trained) == 3 and not world.reused
    weights = sorted(world.root.glob("models/*/*.safetensors"))
    weights += sorted(world.root.glob("models/*/checkpoints/*/*.safetensors"))
    assert len(weights) == 3 + 3 * 19
    evals = sorted(world.root.glob("models/**/zoo_eval.npz"))
    assert len(evals) == 3 + 3 * 19  # every respondent's evaluation is cached
    mtimes = [p.stat().st_mtime_ns for p in weights + evals]
    t0 = time.perf_counter()
    again = build_zoo_world(world.root, quick=True, seed=0)
    assert again.trained == [] and len(again.reused) == 3
    assert [p.stat().st_mtime_ns for p in weights + evals] == mtimes  # nothing redone
    assert time.perf_counter() - t0 < world.timings["train_models"] + world.timings["evaluate"]
    assert [c["id"] for c in again.checkpoints] == [c["id"] for c in world.checkpoints]
    for name in world.benchmarks:
        np.testing.assert_array_equal(again.responses[name], world.responses[name])
        np.testing.assert_array_equal(
            again.checkpoint_responses[name], world.checkpoint_responses[name]
        )
    items = {p.name: pl.read_parquet(p) for p in (world.root / "items").glob("*.parquet")}
    assert len(items) == 16
    # a dropped evaluation cache (a final model's, a checkpoint's) is scored again, on the
    # rebuild's pool of workers, and the responses equal those of the first build
    dropped = [
        next(p for p in evals if "checkpoints" not in p.parts),
        next(p for p in evals if "checkpoints" in p.parts),
    ]
    for p in dropped:
        p.unlink()
    third = build_zoo_world(world.root, quick=True, seed=0)
    assert all(p.exists() for p in dropped) and third.trained == []
    kept = [(p, m) for p, m in zip(evals, mtimes[len(weights) :]) if p not in dropped]
    assert [p.stat().st_mtime_ns for p, _ in kept] == [m for _, m in kept]  # not redone
    for name in world.benchmarks:
        np.testing.assert_array_equal(third.responses[name], world.responses[name])
        np.testing.assert_array_equal(
            third.checkpoint_responses[name], world.checkpoint_responses[name]
        )


# --------------------------------------------------------------- checkpoints


def test_checkpoint_steps() -> None:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.worlds.zoo import checkpoint_steps

    assert checkpoint_steps(600, 3) == [150, 300, 450]
    assert checkpoint_steps(250, 4) == [50, 100, 150, 200]
    assert checkpoint_steps(20, 9) == [2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert checkpoint_steps(3, 5) == [1, 2]  # duplicates and end points dropped
    assert checkpoint_steps(100, 0) == []
    with pytest.raises(SigmapInputError, match="n_checkpoints"):
        checkpoint_steps(100, -1)


def test_a_zoo_run_trains_with_its_recipe() -> None:
    """The spec's training settings are keyword arguments of train_causal_lm, with its values."""
    import inspect

    from sigmap_lib.worlds import train_causal_lm
    from sigmap_lib.worlds.zoo._models import ZooModelSpec

    spec = ZooModelSpec("gpt2-prose-s", "gpt2", "prose", "s", steps=7, lr=0.01, seed=3)
    assert spec.training() == {"steps": 7, "batch_size": 8, "seq_len": 128, "lr": 0.01, "seed": 3}
    assert set(spec.training()) <= set(inspect.signature(train_causal_lm).parameters)


def test_checkpoints_do_not_change_training(quick_texts, tmp_path: Path) -> None:
    """Snapshotting during training leaves the final weights bit-identical."""
    import dataclasses

    from safetensors.numpy import load_file

    from sigmap_lib.worlds.zoo import model_specs, train_tokenizers
    from sigmap_lib.worlds.zoo._models import _train_one, _training_texts

    toks = train_tokenizers(quick_texts, tmp_path / "tok", chars_per_domain=20_000)
    spec = dataclasses.replace(model_specs(2, quick=True)[0], steps=6, batch_size=2, seq_len=32)
    train, _ = _training_texts(quick_texts, spec)
    args = (dataclasses.asdict(spec), str(toks[spec.arch]), train)
    plain = _train_one(*args, str(tmp_path / "plain"), "k", 1)
    snap = _train_one(*args, str(tmp_path / "snap"), "k", 1, [2, 4])
    assert plain["checkpoints"] == [] and snap["checkpoints"] == [2, 4]
    assert plain["train"]["final_loss"] == snap["train"]["final_loss"]
    a = load_file(str(tmp_path / "plain" / "model.safetensors"))
    b = load_file(str(tmp_path / "snap" / "model.safetensors"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    c2 = load_file(str(tmp_path / "snap" / "checkpoints" / "step2" / "model.safetensors"))
    c4 = load_file(str(tmp_path / "snap" / "checkpoints" / "step4" / "model.safetensors"))
    assert c2.keys() == a.keys()
    assert not all(np.array_equal(a[k], c4[k]) for k in a)
    assert not all(np.array_equal(c2[k], c4[k]) for k in a)
    assert not list((tmp_path / "plain").glob("checkpoints"))


@pytest.mark.slow
def test_quick_world_checkpoint_respondents(quick_world) -> None:
    from sigmap_lib.inputs import read_responses
    from sigmap_lib.worlds.zoo import checkpoint_steps, model_specs

    world, _ = quick_world
    root = world.root
    specs = model_specs(3, quick=True)
    want = [
        f"{s.model_id}@step{k}"
        for s in specs
        for k in checkpoint_steps(s.steps, 19)
        if k not in s.early  # those are registry models
    ]
    assert [c["id"] for c in world.checkpoints] == want
    assert len(want) == 48  # 12 registry models + 48 checkpoints = 60 respondents
    truth = json.loads((root / "truth.json").read_text())
    assert list(truth["checkpoints"]) == want
    for cid, c in truth["checkpoints"].items():
        assert cid == f"{c['model']}@step{c['step']}" and 0 < c["fraction"] < 1
        assert c["model"] in truth["models"]
    reg_ids = [e["id"] for e in yaml.safe_load((root / "models.yaml").read_text())["models"]]
    assert not set(want) & set(reg_ids)
    assert pl.read_csv(root / "scores.csv")["model"].to_list() == reg_ids
    for name in world.benchmarks:
        df = pl.read_parquet(root / "responses" / f"{name}.parquet")
        assert df["model"].to_list() == reg_ids + want  # final models first
        rm = read_responses(root / "responses" / f"{name}.parquet")
        assert set(np.unique(rm.matrix)) <= {0, 1}
        np.testing.assert_array_equal(rm.matrix[:12], world.responses[name])
        np.testing.assert_array_equal(rm.matrix[12:], world.checkpoint_responses[name])
    # checkpoints answer differently from their final models (they are earlier weights)
    all_ck = np.concatenate([world.checkpoint_responses[b] for b in world.benchmarks], axis=1)
    all_fm = np.concatenate([world.responses[b] for b in world.benchmarks], axis=1)
    assert len({r.tobytes() for r in all_ck}) > 35
    assert any(not np.array_equal(all_ck[16 * i + 15], all_fm[4 * i]) for i in range(3))
    settings = yaml.safe_load((root / "settings.yaml").read_text())
    assert settings == world.settings
    assert set(settings) == {"metabench", "semantic", "signatures"}
    assert settings["semantic"] == {"max_questions": 50}  # of its 24 questions: all
    assert settings["signatures"] == {"strata": "family"}  # two tokenizer families


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The design matrix is rank-deficient")
def test_metabench_runs_on_quick_world(quick_world) -> None:
    """metabench's per-benchmark stages run on the quick world's 60 respondents with its
    settings. The quick models are barely trained (20-40 steps), so only benchmarks with
    enough informative items are used, and the joint fit (which drops every benchmark's
    lowest scorers, ties included, and needs >= 50 training models) is left to the full
    world."""
    import warnings

    import pandas as pd

    from sigmap_lib.metabench import (
        MetabenchConfig,
        build_item_pool,
        fit_pool_irt,
        item_statistics,
        select_items,
        split_models,
    )

    world, _ = quick_world
    cfg = MetabenchConfig.from_kwargs(
        **yaml.safe_load((world.root / "settings.yaml").read_text())["metabench"]
    )
    responses, scores = {}, {}
    for name in world.benchmarks:
        df = pl.read_parquet(world.root / "responses" / f"{name}.parquet").to_pandas()
        df = df.set_index("model").astype(int)
        st = item_statistics(df.to_numpy(float), cfg.guess_factor)
        ok = (st["sd"] > cfg.sd_min) & (st["diff"] <= cfg.easy_max) & (st["disc"].abs() >= 0.1)
        if ok.sum() >= 16:
            responses[name] = df
            scores[name] = 100 * df.mean(axis=1)
    full = pd.DataFrame(scores)
    assert len(full) == 60 and len(responses) >= 3, list(responses)
    split = split_models(full, test_frac=cfg.test_frac, seed=0)
    assert (split == "test").sum() >= 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank-deficient spline designs on tied θ
        for name in list(responses)[:3]:
            df, y = responses[name], full[name]
            pool = build_item_pool(name, df, y, split, seed=0, config=cfg)
            irt = fit_pool_irt(name, df, y, pool, config=cfg)
            fit = select_items(name, df, y, pool, irt, seed=0, config=cfg)
            assert cfg.min_items <= len(fit.selected) <= len(pool.pool_items)
            assert np.isfinite(fit.test_rmse) and fit.test_rmse < 50


def test_zoo_prose_comes_only_from_core_dependencies(tmp_path: Path) -> None:
    """Installing test or deployment extras never changes the zoo: its prose is read only
    from the distributions sigmap's core requirements pull in."""
    from sigmap_lib.worlds.zoo._text import _readme_docs, core_distributions

    core = core_distributions()
    assert core is not None and {"numpy", "dagster", "transformers"} <= core
    assert not {"lm-eval", "pytest", "playwright", "accelerate"} & core
    _fake_dists(tmp_path, {"numpy-2.0": "numpy", "lm_eval-0.4": "lm_eval"})
    got = list(_readme_docs(tmp_path, min_chars=200, max_chars=2000, only=core))
    assert got and {pkg for pkg, _ in got} == {"numpy"}
