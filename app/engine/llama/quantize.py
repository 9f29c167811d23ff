"""llama.cpp's quantizer: a GGUF requantized to another type, cached beside its source."""

from __future__ import annotations

import os
from pathlib import Path

import gguf

from app.engine.llama.runtime import ensure_backend
from app.errors import ModelUnavailableError

# llama_ftype values (llama.h)
FTYPES = {
    name: int(getattr(gguf.LlamaFileType, member))
    for name, member in {
        "F32": "ALL_F32",
        "F16": "MOSTLY_F16",
        "Q4_0": "MOSTLY_Q4_0",
        "Q4_1": "MOSTLY_Q4_1",
        "Q8_0": "MOSTLY_Q8_0",
        "Q2_K": "MOSTLY_Q2_K",
        "Q4_K_M": "MOSTLY_Q4_K_M",
    }.items()
}


def quantized_path(source: Path, ftype: str) -> Path:
    """Where ``quantize`` writes ``source`` requantized to ``ftype``."""
    return source.with_name(f"{source.stem}.{ftype}.gguf")


def quantize(source: Path, ftype: str, *, threads: int = 0) -> Path:
    """Requantize ``source`` with llama.cpp's quantizer; cached by name."""
    import llama_cpp

    out = quantized_path(source, ftype)
    if out.exists():
        return out
    ensure_backend()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.allow_requantize = True
    params.nthread = threads
    tmp = out.with_suffix(f".{os.getpid()}.tmp")  # concurrent runs: each its own
    rc = llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), params)
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise ModelUnavailableError(f"llama.cpp could not quantize {source.name} to {ftype}")
    tmp.replace(out)
    return out
