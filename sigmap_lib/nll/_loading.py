"""Loading a causal LM and its fast tokenizer for scoring: a Hugging Face model id or
folder, or a GGUF file dequantized once (:mod:`._gguf`), on the chosen device and dtype.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll._gguf import check_gguf_file, convert_gguf, gguf_to_model, is_gguf_path

# transformers' loading temporarily patches torch module construction globally (meta-device
# init); two loads in threads of one process corrupt each other ("Cannot copy out of meta
# tensor"), so loads are serialized. Scoring itself runs concurrently.
_LOAD_LOCK = threading.Lock()

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16"}  # fmt: skip


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` → ``"cuda"`` if available, else ``"mps"``, else ``"cpu"``; others pass through.

    An explicit ``"cuda…"`` device without CUDA raises ``SigmapInputError``.

    Examples
    --------
    >>> from sigmap_lib.nll import resolve_device
    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device() in ("cuda", "mps", "cpu")
    True
    """
    import torch

    if device != "auto":
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise SigmapInputError(f"device {device!r} requested but CUDA is not available")
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def _resolve_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16
        if device.startswith("mps"):
            return torch.float16
        return torch.float32
    name = _DTYPES.get(str(dtype).lower())
    if name is None:
        raise SigmapInputError(
            f"unknown dtype {dtype!r} (expected auto, float32, bfloat16, float16)"
        )
    return getattr(torch, name)


def _looks_like_path(s: str) -> bool:
    return (
        s.startswith(("/", "./", "../", "~", ".\\"))
        or s.count("/") > 1
        or (os.sep in s and s.count(os.sep) > 1)
    )


def load_model(
    path_or_id: str | Path,
    device: str = "auto",
    dtype: str = "auto",
    *,
    revision: str | None = None,
    trust_remote_code: bool = False,
    use_safetensors: bool = True,
    gguf_cache: str | Path | None = None,
) -> tuple[Any, Any]:
    """Load a causal LM and its (fast) tokenizer for scoring.

    Parameters
    ----------
    path_or_id
        A local folder written by ``save_pretrained``, a ``.gguf`` file (llama.cpp's
        format, dequantized through transformers, see :func:`convert_gguf`) or a Hugging
        Face hub id. Strings that look like paths (absolute, ``./``, ``~`` or more than
        one ``/``) and ``.gguf`` names must exist.
    device
        ``"auto"`` (cuda > mps > cpu) or an explicit torch device string.
    dtype
        ``"auto"`` (bfloat16 on CUDA, float16 on MPS, float32 on CPU) or
        ``float32 | bfloat16 | float16``.
    revision
        Hub revision (branch, tag or commit); ignored for local folders.
    trust_remote_code
        Passed to transformers; keep ``False`` unless the model is audited.
    use_safetensors
        Load only ``*.safetensors`` weights (no pickle); a folder without them is an error.
    gguf_cache
        For a ``.gguf`` file: the folder holding converted models
        (``<gguf_cache>/<sha256[:16]>/``, see :func:`convert_gguf`); the file is
        dequantized once and later calls load the cached folder. ``None`` converts in
        memory on every call. Ignored for other models. GGUF files are always loaded
        with ``trust_remote_code=False``.

    Returns
    -------
    (model, tokenizer)
        Model in eval mode on ``device``; a fast tokenizer (offsets are required).
        Hub ids are loaded with ``local_files_only`` when ``HF_HUB_OFFLINE`` /
        ``TRANSFORMERS_OFFLINE`` is set.

    Examples
    --------
    Save a tiny untrained model locally, then load it back for scoring:

    >>> from sigmap_lib.nll import load_model
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, save_model, train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> lm = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> path = save_model(lm, tok, "models/tiny-gpt2")
    >>> model, tokenizer = load_model(path, device="cpu")
    >>> model.training, tokenizer.is_fast, len(tokenizer), str(model.dtype)
    (False, True, 300, 'torch.float32')

    A ``.gguf`` name must be an existing GGUF file:

    >>> load_model("models/missing.gguf", device="cpu", gguf_cache="cache")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: GGUF file models/missing.gguf does not exist
    """
    raw = str(path_or_id)
    p = Path(raw).expanduser()
    if is_gguf_path(p):
        check_gguf_file(p)
        dev = resolve_device(device)
        torch_dtype = _resolve_dtype(dtype, dev)
        with _LOAD_LOCK:
            if gguf_cache is not None:
                folder = convert_gguf(p, gguf_cache)
                kw_gguf: dict[str, Any] = {"trust_remote_code": False, "local_files_only": True}
                return _load(str(folder), raw, kw_gguf, dev, torch_dtype, True)
            model, tokenizer = gguf_to_model(p)
        model.to(device=dev, dtype=torch_dtype)
        model.eval()
        return model, tokenizer
    kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if p.exists():
        if not p.is_dir():
            raise SigmapInputError(
                f"model path {p} is not a directory (expected a save_pretrained folder)"
            )
        if not (p / "config.json").exists():
            raise SigmapInputError(f"model path {p}: no config.json (not a save_pretrained folder)")
        if use_safetensors and not any(p.glob("*.safetensors")):
            raise SigmapInputError(
                f"model path {p}: no *.safetensors weights (pickle weights are refused; "
                "re-save with safe_serialization=True)"
            )
        source = str(p)
        kw["local_files_only"] = True
    elif isinstance(path_or_id, Path) or _looks_like_path(raw):
        raise SigmapInputError(f"model path {p} does not exist")
    else:
        source = raw
        if revision is not None:
            kw["revision"] = revision
        if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or os.environ.get(
            "TRANSFORMERS_OFFLINE", "0"
        ) not in ("", "0"):
            kw["local_files_only"] = True
    dev = resolve_device(device)
    torch_dtype = _resolve_dtype(dtype, dev)
    with _LOAD_LOCK:
        return _load(source, raw, kw, dev, torch_dtype, use_safetensors)


def _load(source: str, raw: str, kw: dict[str, Any], dev: str, torch_dtype: Any,
          use_safetensors: bool) -> tuple[Any, Any]:  # fmt: skip
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kw)
    except (OSError, ValueError) as exc:
        raise SigmapInputError(f"model {raw}: cannot load tokenizer ({exc})") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise SigmapInputError(
            f"model {raw}: tokenizer is not a fast tokenizer (offsets are required)"
        )
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype, use_safetensors=use_safetensors, **kw
        )
    except (OSError, ValueError) as exc:
        raise SigmapInputError(f"model {raw}: cannot load weights ({exc})") from exc
    model.to(dev)
    model.eval()
    return model, tokenizer


def model_context_length(model: Any, tokenizer: Any | None = None) -> int:
    """Maximum sequence length: the config's ``n_positions`` / ``max_position_embeddings``
    (capped by a sane ``tokenizer.model_max_length``); 2048 when neither is known.

    Examples
    --------
    >>> from sigmap_lib.nll import model_context_length
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> model_context_length(model)  # config.n_positions
    32
    >>> tok.model_max_length = 16  # a shorter tokenizer limit caps it
    >>> model_context_length(model, tok)
    16
    """
    cfg = model.config
    n: int | None = None
    for attr in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        v = getattr(cfg, attr, None)
        if isinstance(v, int) and v > 0:
            n = v
            break
    if tokenizer is not None:
        tm = getattr(tokenizer, "model_max_length", None)
        if isinstance(tm, int) and 0 < tm < 1_000_000 and (n is None or tm < n):
            n = tm
    return n if n is not None else 2048
