"""What the tiny test-model writers share: a GGUF writer opened for a file, and the file
written out with its metadata fields and tensors."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import gguf
import numpy as np

from app.gguf.writing import write_out

# (key, value, value type, array item type) of one metadata field, e.g. a tokenizer's
TokenizerField = tuple[str, object, gguf.GGUFValueType, object]


Matrices = Callable[[int, int, float], np.ndarray]


def random_matrices(rng: np.random.Generator) -> Matrices:
    """``mat(rows, cols, scale)``: Gaussian F32 matrices of that scale, drawn from ``rng`` in
    the order asked. GGUF lists dimensions innermost first: numpy (rows, cols) is llama.cpp
    {cols, rows}."""

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    return mat


def full(n: int, value: float = 1.0) -> np.ndarray:
    """An F32 vector of ``value`` (a norm's weights)."""
    return np.full(n, value, dtype=np.float32)


def open_gguf(path: Path, arch: str) -> gguf.GGUFWriter:
    """A writer for ``path`` (its folder made), named after the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    return writer


def add_fields(writer: gguf.GGUFWriter, fields: Iterable[TokenizerField]) -> None:
    for key, value, kind, item in fields:
        writer.add_key_value(key, value, kind, sub_type=item)  # type: ignore[arg-type]


def finish_gguf(
    writer: gguf.GGUFWriter,
    tensors: dict[str, np.ndarray],
    fields: Iterable[TokenizerField] = (),
) -> None:
    """Add ``fields`` (after every field added so far) and ``tensors``, write the file, close."""
    add_fields(writer, fields)
    write_out(writer, tensors)


# (value, value type, array item type) of one metadata key, for ``rewrite_gguf(keys=...)``
FieldSpec = tuple[object, gguf.GGUFValueType, gguf.GGUFValueType | None]
Item = TypeVar("Item")


def with_changes(base: dict[str, Item], changes: Mapping[str, Item | None] | None) -> None:
    """Replace or add each of ``changes`` in ``base``; None leaves that name out."""
    for name, item in (changes or {}).items():
        if item is None:
            base.pop(name, None)
        else:
            base[name] = item


def rewrite_gguf(
    source: Path,
    path: Path,
    *,
    keys: Mapping[str, FieldSpec | None] | None = None,
    tensors: Mapping[str, np.ndarray | None] | None = None,
) -> Path:
    """Copy the GGUF ``source`` to ``path`` with ``keys`` replaced or added, each with the
    value type given (None leaves the key out), and ``tensors`` replaced or added (None leaves
    one out): a file as a faulty converter would write it, for the checks that must refuse
    it. Unquantized tensors only (those of the synthetic writers)."""
    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields["general.architecture"].contents())
    fields: dict[str, FieldSpec] = {}
    for name, found in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind = gguf.GGUFValueType(found.types[0])
        item = gguf.GGUFValueType(found.types[-1]) if kind == gguf.GGUFValueType.ARRAY else None
        fields[name] = (found.contents(), kind, item)
    with_changes(fields, keys)
    weights = {t.name: np.array(t.data) for t in reader.tensors}
    with_changes(weights, tensors)
    writer = gguf.GGUFWriter(str(path), arch)
    finish_gguf(writer, weights, [(k, v, kind, item) for k, (v, kind, item) in fields.items()])
    return path
