"""The tree stays ruff clean (lint and format), as the project's standards ask."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ruff")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ruff_check() -> None:
    out = _ruff("check", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format() -> None:
    out = _ruff("format", "--check", ".")
    assert out.returncode == 0, out.stdout + out.stderr
