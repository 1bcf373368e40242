"""Every relative markdown link in README.md and docs/*.md points at a file in the repository.

A link ``[text](target)`` (or an image ``![alt](target)``, or a reference definition
``[label]: target``) whose target is not a URL (``http(s)://``, ``mailto:``) nor a pure
``#anchor`` must name an existing file or folder, resolved relative to the markdown file
(``#anchor`` and ``?query`` stripped), that stays inside the repository root: a link to
``../shared/...`` or an absolute path would be dead in any other checkout. Links inside
code (fenced blocks and inline code spans) are not links and are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[`~]*[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
_INLINE = re.compile(
    r"!?\[(?P<text>(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]\(\s*(?P<target><[^>]*>|[^)\s]+)"
)
_REFERENCE = re.compile(r"^ {0,3}\[(?P<text>[^\]]+)\]:\s*(?P<target><[^>]*>|\S+)", re.M)
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)  # http:, https:, mailto:, ...


def _strip_code(text: str) -> str:
    """``text`` with fenced code blocks and inline code spans blanked (line numbers kept)."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def markdown_links(text: str) -> list[tuple[int, str]]:
    """``(line, target)`` of every link and reference definition outside code.

    Examples
    --------
    >>> markdown_links("See [a](docs/A.md#x) and ![img](p.png).\\n`[no](code.md)`\\n[r]: ../b.md")
    [(1, 'docs/A.md#x'), (1, 'p.png'), (3, '../b.md')]
    """
    text = _strip_code(text)
    found = [(m.start(), m.group("target")) for m in _INLINE.finditer(text)]
    found += [(m.start(), m.group("target")) for m in _REFERENCE.finditer(text)]
    return [(text.count("\n", 0, pos) + 1, target.strip("<>")) for pos, target in sorted(found)]


def link_problem(doc: Path, target: str, root: Path = REPO) -> str | None:
    """Why a link target of ``doc`` is broken, or None (external links and anchors are fine).

    Examples
    --------
    >>> doc = REPO / "docs" / "FORMATS.md"
    >>> link_problem(doc, "OWN_WORLD.md#start-from-the-example") is None
    True
    >>> link_problem(doc, "https://example.org/x.md") is None
    True
    >>> link_problem(doc, "../../shared/docs/METHODS.md")
    'leaves the repository'
    >>> link_problem(doc, "NO_SUCH_FILE.md")
    'does not exist'
    """
    if _EXTERNAL.match(target) or target.startswith("#"):
        return None
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not path:
        return None
    if path.startswith("/"):
        return "is an absolute path (write it relative to the markdown file)"
    resolved = (doc.parent / path).resolve()
    if not resolved.is_relative_to(root.resolve()):
        return "leaves the repository"
    if not resolved.exists():
        return "does not exist"
    return None


def test_the_documents_are_found() -> None:
    names = {p.name for p in DOCS}
    assert {"README.md", "FORMATS.md", "TROUBLESHOOTING.md", "OWN_WORLD.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_relative_links_point_inside_the_repository(doc: Path) -> None:
    bad = []
    for line, target in markdown_links(doc.read_text(encoding="utf-8")):
        why = link_problem(doc, target)
        if why is not None:
            bad.append(f"{doc.relative_to(REPO)}:{line}: ({target}) {why}")
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "A.md").write_text("ok")
    doc = tmp_path / "README.md"
    doc.write_text(
        "[fine](docs/A.md#top) [web](https://x.org) [anchor](#here)\n"
        "[gone](docs/B.md) [out](../shared/docs/METHODS.md) [abs](/etc/passwd)\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    problems = {t: link_problem(doc, t, root=tmp_path) for _, t in markdown_links(doc.read_text())}
    assert problems == {
        "docs/A.md#top": None,
        "https://x.org": None,
        "#here": None,
        "docs/B.md": "does not exist",
        "../shared/docs/METHODS.md": "leaves the repository",
        "/etc/passwd": "is an absolute path (write it relative to the markdown file)",
    }
