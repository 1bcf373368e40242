"""``scripts/compare_storage.py``: how two storage roots are told the same or different."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_storage.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_storage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def _root(base: Path, fingerprint: str, chunk: bytes, seconds: float) -> Path:
    """A root with a report, a run summary with a timing, and one NLL cell named by its
    fingerprint behind a CURRENT pointer."""
    (base / "reports").mkdir(parents=True)
    (base / "reports" / "a.txt").write_text("same")
    (base / "summary.json").write_text(json.dumps({"rho": 0.5, "seconds": seconds}))
    cell = base / "nll" / "m"
    (cell / fingerprint / "c").mkdir(parents=True)
    (cell / fingerprint / "c" / "0").write_bytes(chunk)
    (cell / "CURRENT").write_text(json.dumps({"fingerprint": fingerprint, "model": "m"}))
    return base


def test_same_cells_under_other_fingerprints_count_as_identical(tmp_path, compare, capsys):
    a = _root(tmp_path / "a", "f1", b"\x00\x01", 1.0)
    b = _root(tmp_path / "b", "f2", b"\x00\x01", 2.0)
    counts = compare([str(a), str(b), "--ignore", "seconds", "--follow-current"])
    assert counts["compared"] == 3 and counts["identical"] == 2  # the pointers differ
    assert (counts["only_a"], counts["only_b"]) == (1, 1)  # f1/c/0 and f2/c/0
    assert (counts["current_files"], counts["current_identical"]) == (1, 1)
    assert "nll/m/CURRENT: bytes differ" in capsys.readouterr().out
    # without --ignore the timing is a difference; without --follow-current no cell counts
    counts = compare([str(a), str(b)])
    assert counts["identical"] == 1 and "current_files" not in counts


def test_a_changed_cell_behind_the_pointer_is_reported(tmp_path, compare, capsys):
    a = _root(tmp_path / "a", "f1", b"\x00\x01", 1.0)
    b = _root(tmp_path / "b", "f2", b"\x00\x02", 1.0)
    counts = compare([str(a), str(b), "--follow-current"])
    assert (counts["current_files"], counts["current_identical"]) == (1, 0)
    assert "nll/m/CURRENT -> c/0: bytes differ" in capsys.readouterr().out
