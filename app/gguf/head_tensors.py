"""What the draft heads' header checks share (block drafters, EAGLE-3 heads, assistants): their
tensors by name and shape, the tensors a head lacks, keys and values of one width, and the form
and ids of a reduced-vocabulary map, each in words."""

from __future__ import annotations

import numpy as np
from gguf.constants import GGMLQuantizationType

from app.gguf.fields import header_layer_max, header_uint32
from app.gguf.reader import TOKENS_KEY, ByteSource, GGUFHeader, TensorInfo

D2T = "d2t"  # a reduced draft vocabulary: each output row's token id in the full vocabulary


def tensors_by_name(header: GGUFHeader) -> dict[str, TensorInfo]:
    return {t.name: t for t in header.tensors}


def row_count(tensor: TensorInfo) -> int:
    """A 2-D weight's row count (GGUF lists the row length first)."""
    return tensor.shape[1] if len(tensor.shape) > 1 else 1


def shape_is(tensor: TensorInfo, *dims: int) -> bool:
    """llama.cpp's ``create_tensor`` check: these dimensions, any further ones 1."""
    padded = tensor.shape + (1,) * (len(dims) - len(tensor.shape))
    return padded[: len(dims)] == dims and all(d == 1 for d in padded[len(dims) :])


def vocab_rows(header: GGUFHeader) -> tuple[int, int]:
    """Rows of a model's token embedding and of its output (its embedding when it has none):
    the tokens a head that borrows them embeds and scores."""
    rows = {t.name: row_count(t) for t in header.tensors if len(t.shape) > 1}
    embd = rows.get("token_embd.weight", 0)
    return embd, rows.get("output.weight", embd)


def dims_text(dims: tuple[int, ...]) -> str:
    return " x ".join(f"{d:,}" for d in dims)


def tensor_type_name(ggml_type: int) -> str:
    try:
        return GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"type {ggml_type}"


def missing_tensors(needed: list[str], tensors: dict[str, TensorInfo]) -> str | None:
    """The tensors of ``needed`` a head lacks, in words; None when it has them all."""
    missing = [name for name in needed if name not in tensors]
    if len(missing) == 1:
        return f"tensor {missing[0]} is missing"
    if missing:
        return f"tensors {missing[0]} and {len(missing) - 1} more are missing"
    return None


def key_value_widths(header: GGUFHeader, arch: str, n_embd: int, suffix: str = "") -> str | None:
    """Keys and values of two widths (``key_length`` and ``value_length``, with ``suffix``), in
    words; None when one width. The drafting graphs assert one width."""
    n_head = header_layer_max(header, f"{arch}.attention.head_count", 0, 1 << 16)
    default = n_embd // n_head if n_head else 0
    key_name, value_name = f"key_length{suffix}", f"value_length{suffix}"
    keys = header_uint32(header, f"{arch}.attention.{key_name}", default, high=1 << 20)
    values = header_uint32(header, f"{arch}.attention.{value_name}", default, high=1 << 20)
    if keys == values:
        return None
    return (
        f"its keys are {keys:,} wide and its values {values:,} ({arch}.attention.{key_name} "
        f"and {value_name}): llama.cpp drafts only with keys and values of one width"
    )


def d2t_form_damage(d2t: TensorInfo) -> str | None:
    """A reduced-vocabulary map that is not a list of INT64 token ids (llama.cpp asserts on
    its type, taking the process down), in words; None when it is one."""
    if d2t.ggml_type != GGMLQuantizationType.I64:
        return (
            f"tensor {D2T} should hold INT64 token ids, found "
            f"{tensor_type_name(d2t.ggml_type)}; llama.cpp aborts the process on any other type"
        )
    if not shape_is(d2t, d2t.shape[0]):
        return f"tensor {D2T} should be a list of token ids, found a {dims_text(d2t.shape)} table"
    return None


def d2t_damage(d2t: TensorInfo | None, output_rows: int, vocab_size: int = 0) -> str | None:
    """A reduced-vocabulary map that is not INT64 token ids, one per row of the head's own
    output (``output_rows``, 0: none to compare), or (with ``vocab_size``) longer than the
    full vocabulary, in words; None without a map. llama.cpp asserts on its type and length,
    taking the process down."""
    if d2t is None:
        return None
    form = d2t_form_damage(d2t)
    if form is not None:
        return form
    if vocab_size and d2t.shape[0] > vocab_size:
        return (
            f"tensor {D2T} maps {d2t.shape[0]:,} draft tokens into a vocabulary of "
            f"{vocab_size:,}: a reduced vocabulary is smaller than the full one"
        )
    if output_rows and d2t.shape[0] != output_rows:
        return (
            f"tensor {D2T} maps {d2t.shape[0]:,} draft tokens, but the head's output scores "
            f"{output_rows:,}: llama.cpp needs one token id for each"
        )
    return None


def d2t_id_damage(source: ByteSource, header: GGUFHeader) -> str | None:
    """A reduced-vocabulary map's token ids outside the head's vocabulary (llama.cpp aborts
    the process on the first draft); None when they all fit, when there is no map, or when
    its type or size is wrong (``d2t_form_damage`` names those). Reads the map alone: at
    most 8 bytes for each token of the vocabulary."""
    d2t = next((t for t in header.tensors if t.name == D2T), None)
    tokens = header.get(TOKENS_KEY)
    n_vocab = len(tokens) if isinstance(tokens, tuple) else 0
    if d2t is None or not n_vocab or d2t_form_damage(d2t) is not None or d2t.shape[0] > n_vocab:
        return None
    raw = source.read_at(header.data_offset + d2t.offset, d2t.n_bytes)
    if len(raw) < d2t.n_bytes:
        return None  # truncated: the data check names it
    ids = np.frombuffer(raw, dtype="<i8")
    outside = np.flatnonzero((ids < 0) | (ids >= n_vocab))
    if not outside.size:
        return None
    row = int(outside[0])
    more = f", and {outside.size - 1:,} more of its ids are too" if outside.size > 1 else ""
    return (
        f"tensor {D2T} maps draft token {row:,} to token {int(ids[row]):,}, outside the "
        f"vocabulary of {n_vocab:,} tokens{more}; llama.cpp aborts the process on the first "
        "draft"
    )
