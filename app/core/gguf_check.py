"""Fast structural validation of a local GGUF file before llama.cpp sees it.

llama.cpp only says "failed to load"; this names the actual problem (wrong magic,
truncated download, unreadable header) so a person knows what to do.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from app.core.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


def validate_gguf_file(path: Path) -> None:
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"not a file: {path}")
    size = path.stat().st_size
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path.name} is not a GGUF file (it starts with {magic!r}, expected b'GGUF'). "
            "Choose a .gguf model file."
        )
    try:
        reader = gguf.GGUFReader(str(path), "r")
    except Exception as exc:  # the gguf reader raises plain ValueError/IndexError on bad data
        raise ModelLoadError(
            f"{path.name} has a damaged or truncated GGUF header ({exc}). Re-download the file."
        ) from exc
    _check_vocabulary(path, reader)
    needed = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=0)
    if needed > size:
        raise ModelLoadError(
            f"{path.name} is truncated: its tensors need {needed:,} bytes but the file has "
            f"{size:,}. The download was probably interrupted; download it again."
        )


def _check_vocabulary(path: Path, reader: gguf.GGUFReader) -> None:
    """Catch vocabularies that would make llama.cpp abort the whole process on load."""
    field = reader.get_field("tokenizer.ggml.tokens")
    if field is None:
        raise ModelLoadError(f"{path.name} has no tokenizer vocabulary; it cannot generate text.")
    count = len(field.data)
    # token texts are only decoded when the list is small enough to be cheap to check
    if count <= 300_000:
        texts = [bytes(field.parts[i]) for i in field.data]
        if len(set(texts)) != count:
            seen: set[bytes] = set()
            duplicate = next(t for t in texts if t in seen or seen.add(t))  # type: ignore[func-returns-value]
            raise ModelLoadError(
                f"{path.name} has a broken vocabulary: token {duplicate!r} appears twice."
            )
