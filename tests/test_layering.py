"""The science library never imports dagster, and importing it stays cheap.

Every module of ``sigmap_lib`` is found on disk (no hand-kept list), imported in a fresh
interpreter, and must not pull in dagster or the heavy packages (torch, transformers,
mirt), which are imported inside the functions that need them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "sigmap_lib"


def lib_modules() -> list[str]:
    """Every importable module and package of ``sigmap_lib``, from the files on disk."""
    out = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return out


def test_discovery_finds_every_subpackage() -> None:
    mods = set(lib_modules())
    for pkg in ("inputs", "nll", "signatures", "overlap", "irt", "metabench", "reporting"):
        assert f"sigmap_lib.{pkg}" in mods
    assert len(mods) > 60


HEAVY = ("dagster", "torch", "transformers", "mirt")

_PROBE = """
import importlib, json, sys
heavy = %r
out = {}
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
    loaded = [m for m in heavy if m in sys.modules]
    if loaded:
        out[name] = loaded
        break
print(json.dumps(out))
"""


def test_lib_never_imports_dagster_or_torch_at_import() -> None:
    """One interpreter imports every module in turn; the first one that loads a heavy
    package is named (a package, once loaded, stays loaded, so later ones can't be told)."""
    import json

    code = _PROBE % (HEAVY,)
    mods = lib_modules()
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(mods)], capture_output=True, text=True, check=True
    )
    offenders = json.loads(out.stdout.strip().splitlines()[-1])
    assert not offenders, (
        f"importing {offenders} pulls in heavy modules; import them inside functions"
    )


def test_probe_names_the_module_that_imports_a_heavy_package(tmp_path: Path) -> None:
    """The probe can fail: with ``sqlite3`` as the heavy package, a module importing it is
    named and a clean one is not."""
    import json
    import os

    (tmp_path / "clean_mod.py").write_text("x = 1\n")
    (tmp_path / "heavy_mod.py").write_text("import sqlite3\n")
    code = _PROBE % (("sqlite3",),)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(["clean_mod", "heavy_mod"])],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"heavy_mod": ["sqlite3"]}
