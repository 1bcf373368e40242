"""Model slugs and the models.yaml registry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import ModelSpec, model_slug, read_registry

_FORBIDDEN = set("/|,[] \t\n\\")


def test_model_slug_examples() -> None:
    assert model_slug("EleutherAI/pythia-160m") == "EleutherAI__pythia-160m"
    assert model_slug("gpt2") == "gpt2"
    assert model_slug("org/name.v1_2") == "org__name.v1_2"
    s = model_slug("org/name:v1 [beta]")
    assert s.startswith("org__name-v1--beta--") and len(s) == len("org__name-v1--beta--") + 8
    assert model_slug(".hidden").startswith("_hidden-")


def test_model_slug_properties_on_random_ids() -> None:
    rng = np.random.default_rng(0)
    alphabet = [*list("abcXYZ019._-/|,[] :@+~é東"), "😀"]
    seen: dict[str, str] = {}
    for _ in range(3000):
        raw = "".join(alphabet[i] for i in rng.integers(0, len(alphabet), int(rng.integers(1, 20))))
        try:
            slug = model_slug(raw)
        except SigmapInputError:
            parts = raw.split("/")
            assert (
                raw != raw.strip() or ".." in parts or not [p for p in parts if p not in ("", ".")]
            )
            continue
        assert slug == model_slug(raw)  # deterministic
        assert not (_FORBIDDEN & set(slug)), (raw, slug)
        assert slug not in (".", "..") and not slug.startswith(".")
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in slug)
        assert 0 < len(slug) <= 130
        assert Path(slug).name == slug
        if slug in seen:
            assert seen[slug] == raw, f"slug collision: {seen[slug]!r} and {raw!r}"
        seen[slug] = raw


@pytest.mark.parametrize(
    "raw,match",
    [("", "empty"), ("   ", "empty"), ("../etc/passwd", r"'\.\.'"), ("a/../b", r"'\.\.'"),
     ("a\nb", "control"), ("a\x00b", "control"), (" gpt2", "whitespace"), ("/", "no name")],
)  # fmt: skip
def test_model_slug_rejects_invalid_ids(raw: str, match: str) -> None:
    with pytest.raises(SigmapInputError, match=match):
        model_slug(raw)


def test_long_ids_are_shortened_uniquely() -> None:
    a, b = model_slug("o/" + "x" * 300), model_slug("o/" + "x" * 299 + "y")
    assert len(a) <= 130 and len(b) <= 130 and a != b


def test_read_registry(tmp_path: Path) -> None:
    (tmp_path / "reg").mkdir()
    f = tmp_path / "reg" / "models.yaml"
    f.write_text(
        """
models:
  - id: EleutherAI/pythia-160m
    path: models/pythia-160m
    revision: main
    family: pythia
    n_params: 160000000
    dtype: bfloat16
  - id: gpt2
  - id: synth/m00
    nll_source: /abs/nll/m00.npy
    n_params: 1.0e+6
"""
    )
    specs = read_registry(f)
    assert [s.id for s in specs] == ["EleutherAI/pythia-160m", "gpt2", "synth/m00"]
    assert [s.key for s in specs] == ["EleutherAI__pythia-160m", "gpt2", "synth__m00"]
    p = specs[0]
    assert p.path == (tmp_path / "reg" / "models" / "pythia-160m").resolve()
    assert (p.revision, p.family, p.n_params, p.dtype) == (
        "main",
        "pythia",
        160_000_000,
        "bfloat16",
    )
    assert p.source == str(p.path)
    assert specs[1] == ModelSpec(id="gpt2", key="gpt2")
    assert specs[1].source == "gpt2"
    assert specs[2].nll_source == Path("/abs/nll/m00.npy") and specs[2].n_params == 1_000_000


@pytest.mark.parametrize(
    "body,match",
    [
        ("models: [\n  - id: x\n", "invalid YAML"),
        ("other: 1\n", "top-level 'models:'"),
        ("models:\n  - path: m\n", r"models\[0\]: missing 'id'"),
        ("models:\n  - id: ''\n", r"models\[0\] \(id ''\): invalid id"),
        ("models:\n  - id: ../escape\n", r"models\[0\] \(id '\.\./escape'\): invalid id.*'\.\.'"),
        (
            "models:\n  - id: a\n  - id: b\n  - id: a\n",
            r"models\[2\] \(id 'a'\): duplicate id \(also models\[0\]\)",
        ),
        (
            f"models:\n  - id: 'a:b'\n  - id: {model_slug('a:b')}\n",
            r"models\[1\].*slug 'a-b-[0-9a-f]{8}' collides with id 'a:b'",
        ),
        ("models:\n  - id: a\n    dtype: int8\n", r"models\[0\] \(id 'a'\): unknown dtype 'int8'"),
        ("models:\n  - id: a\n    n_params: -5\n", r"n_params must be >= 0"),
        ("models:\n  - id: a\n    n_params: lots\n", r"n_params must be an integer"),
        (
            "models:\n  - id: a\n    revison: main\n",
            r"models\[0\] \(id 'a'\): unknown key 'revison'",
        ),
        ("models:\n  - just-a-string\n", r"models\[0\]: entry must be a mapping"),
        ("models:\n  - id: a\nextra: 1\n", r"unknown top-level key 'extra'"),
    ],
)
def test_read_registry_errors_name_file_and_entry(tmp_path: Path, body: str, match: str) -> None:
    f = tmp_path / "models.yaml"
    f.write_text(body)
    with pytest.raises(SigmapInputError, match=match) as exc:
        read_registry(f)
    assert str(f) in str(exc.value)


def test_read_registry_missing_file_and_empty(tmp_path: Path) -> None:
    with pytest.raises(SigmapInputError, match=r"nope\.yaml does not exist"):
        read_registry(tmp_path / "nope.yaml")
    (tmp_path / "m.yaml").write_text("models:\n")
    assert read_registry(tmp_path / "m.yaml") == []


def test_separator_lookalikes_do_not_collide() -> None:
    ids = ["a/b", "a__b", "a_/_b", "a/__b", "a//b", "a/b/", "./a/b", "a\\b", "a_/b"]
    slugs = [model_slug(i) for i in ids]
    assert slugs[0] == "a__b"
    assert len(set(slugs)) == len(ids)


def _fake_gguf(path: Path, magic: bytes = b"GGUF") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(magic + b"\x03\x00\x00\x00" + b"\x00" * 16)
    return path


def test_read_registry_gguf_relative_to_path_or_yaml(tmp_path: Path) -> None:
    f = tmp_path / "reg" / "models.yaml"
    _fake_gguf(tmp_path / "reg" / "models" / "smol" / "smol.Q4_1.gguf")
    _fake_gguf(tmp_path / "reg" / "top.GGUF")
    absolute = _fake_gguf(tmp_path / "elsewhere" / "abs.gguf")
    f.write_text(
        f"""
models:
  - id: smol
    path: models/smol
    gguf: smol.Q4_1.gguf
    dtype: float32
  - id: top
    gguf: top.GGUF
  - id: abs
    path: models/smol
    gguf: {absolute}
"""
    )
    smol, top, ab = read_registry(f)
    assert smol.gguf == (tmp_path / "reg" / "models" / "smol" / "smol.Q4_1.gguf").resolve()
    assert smol.source == str(smol.gguf)  # load_model gets the GGUF file, not the folder
    assert smol.path == (tmp_path / "reg" / "models" / "smol").resolve()
    assert top.gguf == (tmp_path / "reg" / "top.GGUF").resolve() and top.path is None
    assert ab.gguf == absolute.resolve()


@pytest.mark.parametrize(
    "entry,match",
    [
        ("gguf: weights.bin", r"'gguf' must name a \.gguf file, got 'weights\.bin'"),
        ("gguf: models/folder", r"'gguf' must name a \.gguf file"),
        ("gguf: ''", r"'gguf' must be a non-empty string"),
        ("gguf: 7", r"'gguf' must be a non-empty string"),
        ("gguf: missing.gguf", r"gguf file .*missing\.gguf does not exist"),
        ("gguf: dir.gguf", r"gguf .*dir\.gguf is not a file"),
        ("gguf: fake.gguf", r"fake\.gguf is not a GGUF file \(starts with b'PK\\x03\\x04'"),
        ("gguf: ok.gguf\n    gguf_file: ok.gguf", r"unknown key 'gguf_file'"),
    ],
)
def test_read_registry_gguf_errors_name_file_and_entry(
    tmp_path: Path, entry: str, match: str
) -> None:
    _fake_gguf(tmp_path / "ok.gguf")
    _fake_gguf(tmp_path / "fake.gguf", magic=b"PK\x03\x04")
    (tmp_path / "dir.gguf").mkdir()
    f = tmp_path / "models.yaml"
    f.write_text(f"models:\n  - id: good\n    gguf: ok.gguf\n  - id: smol\n    {entry}\n")
    with pytest.raises(SigmapInputError, match=match) as exc:
        read_registry(f)
    assert str(f) in str(exc.value)
    assert "models[1] (id 'smol')" in str(exc.value)
