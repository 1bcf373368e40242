"""Fault recovery: killed runs, corrupted chunks, concurrent partitions, a model that does
not load, a full disk. Each test injects the fault and checks the stored data afterwards."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import yaml

from sigmap_lib.inputs import CorpusStore, Document, build_corpus_store
from sigmap_lib.nll import NLLStore
from tests.assets.harness import Project

REPO = Path(__file__).resolve().parents[2]
SHARD_CFG = {"ops": {"corpus_manifest": {"config": {"shard_units": 500}}}}  # 6 shards


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> CorpusStore:
    """A small corpus with 8 shards of irregular size."""
    from sigmap_lib.worlds import sample_texts

    texts = sample_texts(32, seed=7)
    docs = [Document(f"d{i}", f"d{i}", t) for i, t in enumerate(texts)]
    n_units = build_corpus_store(docs, tmp_path_factory.mktemp("probe") / "c").n_units
    store = build_corpus_store(
        docs, tmp_path_factory.mktemp("corpus") / "store", shard_units=n_units // 8
    )
    assert len(store.shards) >= 6
    return store


@pytest.fixture(scope="module")
def reference_store(
    tiny_gpt2: Path, corpus: CorpusStore, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The uninterrupted run, with one torch thread (as in the child processes)."""
    out = tmp_path_factory.mktemp("ref") / "nll"
    scored(tiny_gpt2, corpus, out)
    store = NLLStore.open(out)
    assert store.is_complete() and store.verify() == []
    return out


@pytest.fixture(scope="module")
def reference(reference_store: Path) -> np.ndarray:
    return NLLStore.open(reference_store).read()


def scored(tiny_gpt2: Path, corpus: CorpusStore, out: Path, **kw) -> dict:
    import torch

    from sigmap_lib.nll import load_model, score_corpus

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tok = load_model(tiny_gpt2, device="cpu")
        return score_corpus(model, tok, corpus, out, **kw)
    finally:
        torch.set_num_threads(n)


def assert_complete_and_equal(path: Path, expected: np.ndarray) -> None:
    store = NLLStore.open(path)
    assert store.pending_shards() == [], f"{path}: shards {store.pending_shards()} never committed"
    assert store.committed_shards() == list(range(len(store.shard_bounds)))
    assert store.verify() == [], f"{path}: checksums fail"
    values = store.read()
    assert not np.isnan(values).any(), f"{path}: {int(np.isnan(values).sum())} units never written"
    assert values.astype("<f4").tobytes() == expected.astype("<f4").tobytes(), (
        f"{path}: values differ"
    )


CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    import torch
    torch.set_num_threads(1)
    from sigmap_lib.inputs import CorpusStore
    from sigmap_lib.nll import load_model, score_corpus
    from sigmap_lib.nll import NLLStore

    model_dir, corpus_dir, out, mode = sys.argv[1:5]
    if len(sys.argv) > 6:  # a shard store (a token_nll cell) committed in blocks of this size
        import sigmap_lib.inputs._shard_store as shard_store
        shard_store.BLOCK_UNITS = int(sys.argv[6])
        from sigmap_lib.inputs import ShardStore as CorpusStore
    if mode == "in-shard":
        # SIGKILL inside the write of shard k+1: its values are in the zarr array, its
        # commit (the manifest rewrite) never happens
        k = int(sys.argv[5])
        commit = NLLStore._write_manifest
        def hook(self):
            if len(self._manifest["committed"]) > k:
                os.kill(os.getpid(), signal.SIGKILL)
            commit(self)
        NLLStore._write_manifest = hook
    model, tok = load_model(model_dir, device="cpu")
    progress = None
    if mode == "external":
        print("ready", flush=True)
        progress = lambda p: time.sleep(0.15)  # leave the parent time to kill mid-run
    score_corpus(model, tok, CorpusStore.open(corpus_dir), out, progress=progress)
    """
)


def run_child(tmp_path: Path, *args: str) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def committed_on_disk(out: Path) -> int:
    try:
        return len(json.loads((out / "manifest.json").read_text())["committed"])
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


# --------------------------------------------------------------------------- 1. SIGKILL
def test_sigkill_inside_shard_write_then_resume_is_bit_identical(
    tmp_path: Path, tiny_gpt2: Path, corpus: CorpusStore, reference: np.ndarray
) -> None:
    out = tmp_path / "nll"
    child = run_child(tmp_path, tiny_gpt2, corpus.path, out, "in-shard", 2)
    _, err = child.communicate(timeout=240)
    assert child.returncode == -signal.SIGKILL, err
    store = NLLStore.open(out)
    assert store.committed_shards() == [0, 1]
    a, b = store.shard_bounds[2]
    assert not np.isnan(store.read(a, b)).all(), (
        "the killed shard's values should be on disk, uncommitted"
    )
    stats = scored(tiny_gpt2, corpus, out)
    n = len(corpus.shards)
    assert (stats["shards_skipped"], stats["shards_done"]) == (
        2,
        n - 2,
    )  # only the uncommitted shards
    assert_complete_and_equal(out, reference)
    assert not [p for p in out.rglob("*") if p.name.endswith((".tmp", ".partial"))]


def test_sigkill_inside_a_cell_then_resume_is_bit_identical(
    tmp_path: Path, tiny_gpt2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same kill on a token_nll cell: one shard of a corpus file, committed in blocks."""
    import sigmap_lib.inputs._shard_store as shard_store
    from sigmap_lib.inputs import plan_corpus, write_shard_store
    from sigmap_lib.worlds import sample_texts

    root = tmp_path / "corpus"
    root.mkdir()
    lines = [json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(sample_texts(32, seed=7))]
    (root / "docs.jsonl").write_text("\n".join(lines) + "\n")
    [spec] = plan_corpus(root, target_units=10**9)
    cell = write_shard_store(spec, root, tmp_path / "shard")
    block = cell.n_units // 8
    monkeypatch.setattr(shard_store, "BLOCK_UNITS", block)
    cell = shard_store.ShardStore.open(tmp_path / "shard")
    assert len(cell.shards) >= 6
    ref = tmp_path / "ref"
    scored(tiny_gpt2, cell, ref)
    expected = NLLStore.open(ref).read()
    out = tmp_path / "nll"
    child = run_child(tmp_path, tiny_gpt2, cell.path, out, "in-shard", 2, block)
    _, err = child.communicate(timeout=240)
    assert child.returncode == -signal.SIGKILL, err
    assert NLLStore.open(out).committed_shards() == [0, 1]
    stats = scored(tiny_gpt2, cell, out)
    assert (stats["shards_skipped"], stats["shards_done"]) == (2, len(cell.shards) - 2)
    assert_complete_and_equal(out, expected)


def test_sigkill_from_outside_mid_run_then_resume_is_bit_identical(
    tmp_path: Path, tiny_gpt2: Path, corpus: CorpusStore, reference: np.ndarray
) -> None:
    out = tmp_path / "nll"
    child = run_child(tmp_path, tiny_gpt2, corpus.path, out, "external")
    deadline = time.monotonic() + 240
    while committed_on_disk(out) < 1:
        assert child.poll() is None, child.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    done = committed_on_disk(out)
    assert 1 <= done < len(corpus.shards), "the kill should land before the run finished"
    stats = scored(tiny_gpt2, corpus, out)
    assert stats["shards_skipped"] == done and stats["shards_done"] == len(corpus.shards) - done
    assert_complete_and_equal(out, reference)


# ------------------------------------------------------------------ 2. corrupted chunk
def _nll_dir(project: Project, key: str, shard: int = 0) -> Path:
    from sigmap_assets.state import StoredState

    d = StoredState.read(project.storage).cell_dir(project.keys("shards")[shard], key)
    return Path(d) if d is not None else Path(project.storage.layout.path("nll", "none", key))


def _cells(project: Project, key: str) -> list[str]:
    return project.cells([key])


def _setup(project: Project, config: dict = SHARD_CFG) -> None:
    project.materialize(["model_zoo"])
    project.materialize(["corpus_manifest"], run_config=config)
    for k in project.keys("shards"):
        project.materialize(["corpus_shard"], partition=k)
    project.materialize(["model_registry", "benchmark_catalog"])
    project.sync()


def _files(d: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(d)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def _check_result(project: Project, key: str) -> dg.AssetCheckResult:
    """The token_nll_valid check on one partition, alone (a partitioned check cannot run
    without its asset in a Dagster run, so its function is called with the partition)."""
    from types import SimpleNamespace

    from sigmap_assets.defs.models.checks import token_nll_valid

    ctx = SimpleNamespace(op_execution_context=SimpleNamespace(partition_key=key))
    return token_nll_valid.op.compute_fn.decorated_fn(ctx, project.storage)


@pytest.mark.parametrize("damage", ["truncated", "other_values"])
def test_corrupted_cell_detected_and_only_that_cell_recomputed(
    project: Project, damage: str
) -> None:
    _setup(project)
    key = project.keys("models")[3]
    cells = _cells(project, key)
    assert len(cells) == 6
    for c in cells:
        project.materialize(["token_nll"], partition=c)
    d = _nll_dir(project, key, shard=2)
    good = NLLStore.open(d).read()
    others = {i: _files(_nll_dir(project, key, i)) for i in range(6) if i != 2}
    chunk = d / "c" / "0"
    if damage == "truncated":
        chunk.write_bytes(chunk.read_bytes()[:-9])
    else:  # decodes fine, wrong numbers (silent corruption): only the checksum catches it
        import zarr

        arr = zarr.open_array(str(d), mode="r+")
        arr[10:50] = good[10:50] + 0.25
    ev = _check_result(project, cells[2])
    assert not ev.passed
    problems = json.dumps(ev.metadata["problems"].value)
    assert "[0]" in problems and ("checksum" in problems or "pending" in problems), problems
    res = project.materialize(["token_nll"], partition=cells[2])
    (mat,) = res.get_asset_materialization_events()
    md = mat.materialization.metadata
    assert md["shards_written"].value == 1 and md["shards_skipped"].value == 0
    assert all(e.passed for e in res.get_asset_check_evaluations())
    assert_complete_and_equal(d, good)
    # the other cells of the model were neither rewritten nor touched
    assert {i: _files(_nll_dir(project, key, i)) for i in others} == others


def test_corrupted_chunk_of_scored_model_is_rescored(
    tmp_path: Path,
    tiny_gpt2: Path,
    corpus: CorpusStore,
    reference_store: Path,
    reference: np.ndarray,
) -> None:
    out = tmp_path / "nll"
    shutil.copytree(reference_store, out)
    store = NLLStore.open(out)
    chunk_units = json.loads((out / "manifest.json").read_text())["chunk_units"]
    assert chunk_units < corpus.n_units // 4, "NLL chunks should follow the corpus shard size"
    (out / "c" / "1").write_bytes(b"\x00garbage")
    lo, hi = chunk_units, 2 * chunk_units
    hit = [i for i, (a, b) in enumerate(store.shard_bounds) if a < hi and b > lo]
    stats = scored(tiny_gpt2, corpus, out)
    assert stats["shards_done"] == len(hit) <= 2
    assert stats["shards_skipped"] == len(corpus.shards) - len(hit)
    assert_complete_and_equal(out, reference)


# ------------------------------------------------------------- 3. concurrent partitions
def test_two_partitions_at_once_write_disjoint_complete_stores(
    project: Project, tmp_path: Path, tiny_gpt2: Path, corpus: CorpusStore, reference: np.ndarray
) -> None:
    from sigmap_assets.defs.models.assets import token_nll
    from sigmap_assets.partitions import cell_key

    _setup(project)
    # two cells of ONE model at once (two shards), two of two models on one shard
    m0, m1 = project.keys("models")[:2]
    s0, s1 = project.keys("shards")[:2]
    cells = [(m0, s0), (m0, s1), (m1, s0)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(cells) + 2)

    def asset(key: str, shard: str) -> None:
        try:
            ctx = dg.build_asset_context(
                partition_key=str(cell_key(key, shard)), instance=project.instance
            )
            barrier.wait()
            token_nll(
                ctx,
                storage=project.storage,
                world=project.world,
                compute=project.resources["compute"],
            )
        except BaseException as exc:
            errors.append(exc)

    def lib(out: Path) -> None:
        try:
            barrier.wait()
            scored(tiny_gpt2, corpus, out)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=asset, args=c) for c in cells]
    threads += [threading.Thread(target=lib, args=(tmp_path / f"m{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    from sigmap_assets.state import StoredState
    from sigmap_lib.inputs import read_registry, shard_offsets

    sources = {s.key: s.nll_source for s in read_registry(Path(project.world.path) / "models.yaml")}
    state = StoredState.read(project.storage)
    plan = list(state.plan)
    offsets = shard_offsets(plan)
    dirs = [Path(state.cell_dir(s, k)) for k, s in cells]
    assert len(set(dirs)) == len(dirs)
    for (k, s), d in zip(cells, dirs):
        n = NLLStore.open(d).n_units
        assert_complete_and_equal(d, np.load(sources[k])[offsets[s] : offsets[s] + n])
        assert NLLStore.open(d).attrs["model_id"] == k.replace("__", "/")
    for i in range(2):
        assert_complete_and_equal(tmp_path / f"m{i}", reference)


# --------------------------------------------------------------- 4. a model fails to load
def test_model_that_fails_to_load_fails_only_its_partition(
    project: Project, tiny_gpt2: Path
) -> None:
    world = Path(project.world.path)
    shutil.copytree(tiny_gpt2, world / "models" / "tiny-gpt2")
    broken = world / "models" / "broken"
    broken.mkdir(parents=True)
    shutil.copy(tiny_gpt2 / "config.json", broken / "config.json")  # no *.safetensors
    reg = yaml.safe_load((world / "models.yaml").read_text())
    reg["models"] = [
        *reg["models"][:3],
        {"id": "local/tiny-gpt2", "path": "models/tiny-gpt2"},
        {"id": "local/broken", "path": "models/broken"},
    ]
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    _setup(project)
    keys = project.keys("models")
    assert "local__broken" in keys and "local__tiny-gpt2" in keys
    [broken_cell] = project.cells(["local__broken"])[:1]
    res = project.materialize(["token_nll"], partition=broken_cell, raise_on_error=False)
    assert not res.success
    msg = "\n".join(
        str(e.step_failure_data.error.to_string())
        for e in res.all_events
        if e.event_type_value == "STEP_FAILURE"
    )
    assert str(broken) in msg and "no *.safetensors weights" in msg, msg
    assert not _nll_dir(project, "local__broken").exists()
    for c in project.cells([k for k in keys if k != "local__broken"]):
        assert project.materialize(["token_nll"], partition=c).success
    for sh in project.keys("shards"):
        res = project.materialize(["nll_ranks"], partition=sh)
        (mat,) = res.get_asset_materialization_events()
        md = mat.materialization.metadata
        assert md["models_used"].value == 4
        assert md["models_missing"].value == ["local/broken"]
    res = project.materialize(["rank_coverage"])
    (mat,) = res.get_asset_materialization_events()
    assert mat.materialization.metadata["models_used"].value == 4
    current = json.loads(project.storage.layout.ranks_current().read_text())
    assert "local__tiny-gpt2" in current["models"] and "local__broken" not in current["models"]


# ------------------------------------------------------------------------ 5. disk full
def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class DiskFull:
    """Callable wrapper: the ``fail_on``-th call writes half its bytes, then raises ENOSPC."""

    def __init__(self, fail_on: int = 1) -> None:
        self.calls, self.fail_on = 0, fail_on

    def hit(self) -> bool:
        self.calls += 1
        return self.calls >= self.fail_on


def test_disk_full_while_rebuilding_corpus_store_keeps_old_store(
    tmp_path: Path, corpus: CorpusStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "store"
    docs = [Document(d, d, t) for d, t in zip(corpus.doc_ids, corpus.documents())]
    old = build_corpus_store(docs, out, shard_units=500)
    before = _tree(out)
    disk = DiskFull(fail_on=2)
    real = pq.write_table

    def write_table(table, where, **kw):
        if disk.hit():
            Path(where).write_bytes(b"PAR1" + b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device", str(where))
        return real(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", write_table)
    with pytest.raises(OSError, match="No space left"):
        build_corpus_store(
            [*docs, Document("new", "new", "one more document")], out, shard_units=100
        )
    monkeypatch.undo()
    assert _tree(out) == before  # nothing replaced, no temporary file left
    again = CorpusStore.open(out)
    assert again.fingerprint == old.fingerprint and again.documents() == old.documents()


def test_disk_full_while_rewriting_score_table_keeps_old_table(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polars as pl

    _setup(project)  # the score checks read the corpus
    project.materialize(["benchmark_scores"])
    table = project.storage.layout.scores_table()
    before = table.read_bytes()
    scores = Path(project.world.path) / "scores.csv"
    scores.write_text(
        scores.read_text().replace("43.333333333333336", "44.0")
    )  # a legitimate update
    disk = DiskFull()
    real = pl.DataFrame.write_parquet

    def write_parquet(self, file, *a, **kw):
        if disk.hit() and str(file).endswith(".tmp"):
            Path(file).write_bytes(b"PAR1\0\0")
            raise OSError(errno.ENOSPC, "No space left on device", str(file))
        return real(self, file, *a, **kw)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
    res = project.materialize(["benchmark_scores"], raise_on_error=False)
    monkeypatch.undo()
    assert not res.success
    assert table.read_bytes() == before
    assert pl.read_parquet(table).height > 0


def test_disk_full_while_repairing_nll_store_keeps_committed_shards(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zarr.storage._local as zlocal

    import sigmap_lib.inputs._shard_store as shard_store

    # one shard of 3,000 units whose cell commits 6 blocks of 500
    monkeypatch.setattr(shard_store, "BLOCK_UNITS", 500)
    _setup(project, {"ops": {"corpus_manifest": {"config": {"shard_units": 3000}}}})
    key = project.keys("models")[0]
    [cell] = project.cells([key])
    project.materialize(["token_nll"], partition=cell)
    d = _nll_dir(project, key)
    assert len(NLLStore.open(d).shard_bounds) == 6
    good = NLLStore.open(d).read()
    manifest = d / "manifest.json"
    committed_before = json.loads(manifest.read_text())["committed"]
    (d / "c" / "4").write_bytes(b"\x00bad")  # shard 4 must be rewritten
    enospc = OSError(errno.ENOSPC, "No space left on device")
    real_put = zlocal._put

    def put(path, value, exclusive=False):  # the chunk write runs out of space half-way
        if path.parent.name == "c":
            with zlocal._atomic_write(path, "wb") as f:
                f.write(bytes(value.as_buffer_like())[: len(value) // 2])
                raise enospc
        return real_put(path, value, exclusive)

    def check_left_intact() -> None:
        assert not [p.name for p in d.rglob("*") if p.name.endswith((".tmp", ".partial"))], (
            "temporary files left"
        )
        store = NLLStore.open(d)
        assert store.committed_shards() == [0, 1, 2, 3, 5]
        assert store.verify() == []  # every committed shard reads back with its checksum
        now = json.loads(manifest.read_text())["committed"]
        for i in store.committed_shards():
            a, b = store.shard_bounds[i]
            assert store.read(a, b).tobytes() == good[a:b].tobytes()
            assert now[str(i)] == committed_before[str(i)]

    # (a) the data write fails
    monkeypatch.setattr(zlocal, "_put", put)
    res = project.materialize(["token_nll"], partition=cell, raise_on_error=False)
    monkeypatch.setattr(zlocal, "_put", real_put)
    assert not res.success
    check_left_intact()

    # (b) the data is written but the commit (manifest rewrite) fails at fsync
    def fsync(fd: int) -> None:
        raise enospc

    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", fsync)
    res = project.materialize(["token_nll"], partition=cell, raise_on_error=False)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert not res.success
    check_left_intact()
    # space is back: the run completes with the original values
    assert project.materialize(["token_nll"], partition=cell).success
    assert_complete_and_equal(d, good)
