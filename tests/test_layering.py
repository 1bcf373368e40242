"""The science library never imports dagster, and importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIB_MODULES = [
    "sigmap_lib",
    "sigmap_lib.corpus",
    "sigmap_lib.perplexity",
    "sigmap_lib.store",
    "sigmap_lib.registry",
    "sigmap_lib.ranks",
    "sigmap_lib.screening",
    "sigmap_lib.selection",
    "sigmap_lib.signature",
    "sigmap_lib.scores",
    "sigmap_lib.catalog",
    "sigmap_lib.items",
    "sigmap_lib.overlap",
    "sigmap_lib.analysis",
    "sigmap_lib.embed",
    "sigmap_lib.irt",
    "sigmap_lib.gam",
    "sigmap_lib.ridge",
    "sigmap_lib.reconstruction",
    "sigmap_lib.metabench",
    "sigmap_lib.worlds",
    "sigmap_lib.worlds.synthetic",
    "sigmap_lib.worlds.zoo",
]


@pytest.mark.parametrize("module", LIB_MODULES)
def test_lib_never_imports_dagster_or_torch_at_import(module: str) -> None:
    code = (
        f"import importlib, sys; importlib.import_module({module!r}); "
        "bad = [m for m in ('dagster', 'torch', 'transformers', 'mirt') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = [m for m in out.stdout.strip().split(",") if m]
    assert "dagster" not in loaded, f"{module} imports dagster"
    assert not loaded, (
        f"importing {module} pulls in heavy modules {loaded}; import them inside functions"
    )
