"""Every public function of ``sigmap_lib`` carries a runnable NumPy-style *Examples*
section, and every example runs (doctest) in ``make test``.

The public API is what each subpackage exports in ``__all__``; examples use tiny inputs,
never download anything and run alone (they import what they use).
"""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

SUBPACKAGES = (
    "sigmap_lib",
    "sigmap_lib._util",
    "sigmap_lib.inputs",
    "sigmap_lib.inputs.scores",
    "sigmap_lib.nll",
    "sigmap_lib.signatures",
    "sigmap_lib.overlap",
    "sigmap_lib.irt",
    "sigmap_lib.metabench",
    "sigmap_lib.reporting",
    "sigmap_lib.studies",
    "sigmap_lib.worlds",
    "sigmap_lib.worlds.zoo",
)


def public_objects(keep) -> dict[str, object]:
    """``qualified public name -> object`` over every subpackage's ``__all__``, for the
    objects ``keep`` accepts."""
    out: dict[str, object] = {}
    for pkg in SUBPACKAGES:
        mod = importlib.import_module(pkg)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if keep(obj) and obj.__module__.startswith("sigmap_lib"):
                out.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return out


FUNCS = public_objects(inspect.isfunction)
#: the public result types: their examples run too
CLASSES = public_objects(inspect.isclass)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_public_function_has_an_examples_section(name: str) -> None:
    doc = inspect.getdoc(FUNCS[name]) or ""
    assert "Examples\n--------" in doc, f"{name}: no NumPy 'Examples' section in its docstring"
    assert ">>> " in doc.split("Examples\n--------", 1)[1], f"{name}: Examples has no >>> line"


def _examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for name, fn in sorted({**FUNCS, **CLASSES}.items()):
        mod = importlib.import_module(fn.__module__)
        # each example runs alone, as a reader pasting it would run it
        for t in finder.find(fn, name, module=mod, globs={}):
            if t.examples:
                tests.append(t)
    return tests


EXAMPLES = _examples()


def test_there_are_many_examples() -> None:
    assert len(EXAMPLES) >= 20


@pytest.mark.parametrize("test", EXAMPLES, ids=[t.name for t in EXAMPLES])
def test_example_runs(test: doctest.DocTest, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.FAIL_FAST
    )
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
