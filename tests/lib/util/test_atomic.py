"""Atomic writes that leave unchanged files alone (what watches a folder by names, sizes and
modification times then sees no change)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from sigmap_lib._util._atomic import atomic_dir, atomic_file, atomic_write_text


def _stamps(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _age(root: Path) -> None:
    """Every file's mtime set a minute back (so a rewrite would show)."""
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))


@pytest.mark.parametrize("seed", range(4))
def test_a_folder_update_touches_exactly_the_changed_new_and_removed_files(
    tmp_path: Path, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    names = [f"d{i % 3}/f{i}.bin" for i in range(12)]
    content = {n: rng.bytes(int(rng.integers(1, 64))) for n in names}
    dest = tmp_path / "world"

    def write(files: dict[str, bytes], keep: bool) -> None:
        with atomic_dir(dest, keep_unchanged=keep) as tmp:
            for n, b in files.items():
                (tmp / n).parent.mkdir(parents=True, exist_ok=True)
                (tmp / n).write_bytes(b)

    write(content, keep=True)  # no folder yet: written whole
    _age(dest)
    before = _stamps(dest)
    changed = set(rng.choice(names, 3, replace=False).tolist())
    removed = set(rng.choice(sorted(set(names) - changed), 2, replace=False).tolist())
    new = {"d9/new.bin": b"new"}
    after_content = {
        n: (b + b"!" if n in changed else b) for n, b in content.items() if n not in removed
    } | new
    write(after_content, keep=True)
    after = _stamps(dest)
    assert {n: b for n, (_, b) in after.items()} == after_content  # the folder is the new one
    kept = set(after_content) - changed - set(new)
    assert all(after[n][0] == before[n][0] for n in kept)  # untouched: same mtime
    assert all(after[n][0] != before[n][0] for n in changed)
    assert not list(tmp_path.glob(".world.tmp-*"))  # no temporary folder left
    # the default replaces the whole folder: every mtime moves
    _age(dest)
    aged = _stamps(dest)
    write(after_content, keep=False)
    assert all(_stamps(dest)[n][0] != aged[n][0] for n in aged)


def test_a_file_with_the_same_bytes_keeps_its_mtime(tmp_path: Path) -> None:
    out = tmp_path / "a.txt"
    atomic_write_text(out, "same", keep_unchanged=True)
    _age(tmp_path)
    t0 = out.stat().st_mtime_ns
    atomic_write_text(out, "same", keep_unchanged=True)
    assert out.stat().st_mtime_ns == t0 and out.read_text() == "same"
    atomic_write_text(out, "same")  # the default writes anyway
    assert out.stat().st_mtime_ns != t0
    _age(tmp_path)
    t1 = out.stat().st_mtime_ns
    with atomic_file(out, keep_unchanged=True) as tmp:
        tmp.write_text("other")
    assert out.read_text() == "other" and out.stat().st_mtime_ns != t1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
