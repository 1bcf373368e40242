"""GGUF model files (llama.cpp's format): read the architecture, dequantize once, cache.

transformers loads a GGUF file (``from_pretrained(folder, gguf_file=name)``) by
dequantizing its tensors, but the model it returns carries a GGUF ``quantization_config``
and cannot be saved as is. :func:`convert_gguf` therefore builds a plain model from the
file's config (without ``quantization_config``), loads the dequantized state dict into it
and writes a normal ``save_pretrained`` folder (float32 safetensors + the tokenizer
transformers derives from the file's metadata) under a cache folder, keyed by the GGUF
file's sha256. Later runs (and other processes sharing the cache folder) load that folder
instead of dequantizing again. The cache is written atomically (temporary folder, then
rename), so an interrupted conversion never leaves a half-written model behind.

Why float32: dequantized weights (``d · q + m`` with fp16 scales) are exact in float32,
so the cache is lossless and one cache serves every ``dtype``; :func:`load_model` casts
to the requested dtype when it loads the cache.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sigmap_lib._util._files import read_head
from sigmap_lib.errors import SigmapInputError

#: Hex characters of the GGUF file's sha256 that name its cache folder.
CACHE_KEY_CHARS = 16
_MAGIC = b"GGUF"
_SOURCE_JSON = "gguf_source.json"


def is_gguf_path(path: str | Path) -> bool:
    """Whether ``path`` names a ``.gguf`` file (by its suffix, case-insensitive).

    Examples
    --------
    >>> from sigmap_lib.nll import is_gguf_path
    >>> is_gguf_path("models/tiny.Q8_0.GGUF"), is_gguf_path("models/tiny")
    (True, False)
    """
    return Path(path).suffix.lower() == ".gguf"


def check_gguf_file(path: str | Path) -> Path:
    """``path`` resolved, after checking that it is an existing file with the GGUF magic.

    Raises
    ------
    SigmapInputError
        Naming the file: not a ``.gguf`` name, missing, a directory, unreadable, or not
        starting with the ``GGUF`` magic bytes.
    """
    p = Path(path).expanduser()
    if not is_gguf_path(p):
        raise SigmapInputError(f"GGUF file {p}: the name does not end with .gguf")
    magic = read_head(p, len(_MAGIC), "GGUF file")
    if magic != _MAGIC:
        raise SigmapInputError(
            f"GGUF file {p}: not a GGUF file (starts with {magic!r}, expected {_MAGIC!r})"
        )
    return p.resolve()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def gguf_architecture(gguf_file: str | Path) -> str:
    """The ``general.architecture`` of a GGUF file (``"llama"``, ``"qwen2"``, …).

    Read with the ``gguf`` package (metadata only; tensors are memory-mapped, not read).

    Raises
    ------
    SigmapInputError
        Naming the file: missing, not a GGUF file, unparsable, or without
        ``general.architecture``.

    Examples
    --------
    A GGUF file with metadata and no tensors, written with the ``gguf`` package:

    >>> import gguf
    >>> from sigmap_lib.nll import gguf_architecture
    >>> w = gguf.GGUFWriter("mini.gguf", arch="rwkv7")
    >>> w.write_header_to_file(); w.write_kv_data_to_file(); w.close()
    >>> gguf_architecture("mini.gguf")
    'rwkv7'
    >>> gguf_architecture("missing.gguf")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: GGUF file missing.gguf does not exist
    """
    p = check_gguf_file(gguf_file)
    try:
        from gguf import GGUFReader
    except ImportError as exc:  # pragma: no cover - gguf is a dependency of the dev extra
        raise SigmapInputError(
            f"GGUF file {p}: reading GGUF needs the 'gguf' package (pip install gguf)"
        ) from exc
    try:
        reader = GGUFReader(p)
    except (ValueError, OSError, IndexError) as exc:
        raise SigmapInputError(f"GGUF file {p}: cannot be parsed ({exc})") from exc
    field = reader.fields.get("general.architecture")
    if field is None:
        raise SigmapInputError(f"GGUF file {p}: no 'general.architecture' in its metadata")
    return str(field.contents())


def _supported_architectures() -> list[str]:
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:  # pragma: no cover - depends on the transformers version
        return []
    return [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]


def _load_error(p: Path, arch: str, exc: BaseException) -> SigmapInputError:
    import transformers

    version = transformers.__version__
    reason = f"{type(exc).__name__}: {exc}"
    if "not supported" in str(exc):
        known = _supported_architectures()
        listed = f"; it loads GGUF architectures {', '.join(known)}" if known else ""
        return SigmapInputError(
            f"GGUF file {p}: architecture {arch!r} is not supported by transformers "
            f"{version} ({reason}){listed}"
        )
    return SigmapInputError(
        f"GGUF file {p} (architecture {arch!r}): transformers {version} cannot load it ({reason})"
    )


def _dequantize(p: Path, arch: str) -> tuple[Any, Any]:
    """Plain float32 model (no ``quantization_config``) and fast tokenizer from a GGUF file."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    folder, name = str(p.parent), p.name
    kw: dict[str, Any] = {"gguf_file": name, "local_files_only": True, "trust_remote_code": False}
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    progress = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        try:
            config = AutoConfig.from_pretrained(folder, **kw)
            tokenizer = AutoTokenizer.from_pretrained(folder, **kw)
            quantized = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kw)
        except (ValueError, KeyError, TypeError, NotImplementedError, RuntimeError,
                AttributeError, IndexError, OSError) as exc:  # fmt: skip
            raise _load_error(p, arch, exc) from exc
        if getattr(config, "quantization_config", None) is not None:
            del config.quantization_config
        config.dtype = torch.float32
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        state = quantized.state_dict()
        missing, unexpected = plain.load_state_dict(state, strict=False)
        # a tied output head may be absent from the state dict: it shares the embedding
        tied = set(getattr(plain, "_tied_weights_keys", None) or [])
        missing = [k for k in missing if k not in tied]
        if missing or unexpected:
            raise SigmapInputError(
                f"GGUF file {p}: dequantized weights do not fit the {arch!r} model built from "
                f"its config (missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        if getattr(plain.config, "tie_word_embeddings", False):
            plain.tie_weights()
        del quantized, state
    finally:
        hf_logging.set_verbosity(verbosity)
        if progress:
            hf_logging.enable_progress_bar()
    if not getattr(tokenizer, "is_fast", False):
        raise SigmapInputError(
            f"GGUF file {p}: transformers built a slow tokenizer (offsets are required)"
        )
    plain.eval()
    return plain, tokenizer


def _cache_ok(folder: Path, sha: str) -> bool:
    meta = folder / _SOURCE_JSON
    needed = ("config.json", "tokenizer_config.json", _SOURCE_JSON)
    if not all((folder / n).exists() for n in needed) or not any(folder.glob("*.safetensors")):
        return False
    try:
        return json.loads(meta.read_text(encoding="utf-8")).get("sha256") == sha
    except (OSError, ValueError):
        return False


def convert_gguf(gguf_file: str | Path, cache_dir: str | Path) -> Path:
    """Dequantize a GGUF model once into ``cache_dir/<sha256[:16]>/``; return that folder.

    The folder is a ``save_pretrained`` folder that :func:`load_model` reads like any
    other: ``config.json`` (no ``quantization_config``), float32 ``*.safetensors``, the
    fast tokenizer transformers builds from the file's metadata, and
    ``gguf_source.json`` (the file's full sha256, name, architecture, parameter count
    and the transformers / gguf versions that converted it). A folder already there for
    the same sha256 is reused without reading the tensors; it is written atomically, so
    concurrent or interrupted conversions never expose a partial folder.
    ``trust_remote_code`` is always ``False``. While converting, the float32 model is held
    twice in memory (the dequantized one and the plain copy that is saved).

    Parameters
    ----------
    gguf_file
        A ``.gguf`` file (any quantization transformers can dequantize).
    cache_dir
        Folder holding one sub-folder per converted file (created if needed). The caller
        chooses it (the Dagster assets pass ``StorageLayout.gguf_cache()``).

    Returns
    -------
    Path
        ``cache_dir / sha256[:16]``.

    Raises
    ------
    SigmapInputError
        Naming the file: missing / not GGUF (see :func:`gguf_architecture`), or a file
        transformers cannot load, naming its architecture (an unsupported architecture
        also lists the supported ones).

    Examples
    --------
    A GGUF file whose architecture transformers has no loader for is refused, naming the
    file and the architecture (converting a real model is shown in the README):

    >>> import gguf
    >>> from sigmap_lib.nll import convert_gguf
    >>> w = gguf.GGUFWriter("rnn.gguf", arch="rwkv7")
    >>> w.write_header_to_file(); w.write_kv_data_to_file(); w.close()
    >>> convert_gguf("rnn.gguf", "cache")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: GGUF file .../rnn.gguf: architecture 'rwkv7' is not supported by transformers ...
    """
    from sigmap_lib._util import atomic_dir, atomic_write_json

    p = check_gguf_file(gguf_file)
    sha = _sha256(p)
    dest = Path(cache_dir).expanduser() / sha[:CACHE_KEY_CHARS]
    if _cache_ok(dest, sha):
        return dest
    arch = gguf_architecture(p)
    model, tokenizer = _dequantize(p, arch)
    if _cache_ok(dest, sha):  # another process finished the same conversion meanwhile
        return dest
    import gguf
    import transformers

    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(
            tmp / _SOURCE_JSON,
            {
                "sha256": sha,
                "gguf_file": p.name,
                "bytes": p.stat().st_size,
                "architecture": arch,
                "n_params": sum(t.numel() for t in model.parameters()),
                "dtype": "float32",
                "transformers": transformers.__version__,
                "gguf": getattr(gguf, "__version__", None) or _dist_version("gguf"),
            },
        )
    return dest


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:  # pragma: no cover
        return None


def gguf_to_model(gguf_file: str | Path) -> tuple[Any, Any]:
    """In-memory conversion (no cache): plain float32 model in eval mode and fast tokenizer."""
    p = check_gguf_file(gguf_file)
    return _dequantize(p, gguf_architecture(p))
