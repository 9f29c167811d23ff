"""A tiny but real ``gemma4`` target and a ``gemma4-assistant`` that drafts for it.

Both load in the llama.cpp that llama-cpp-python 0.3.36 vendors (models/gemma4.cpp and
models/gemma4-assistant.cpp) in milliseconds and share ``synthetic.vocabulary()``'s SPM
vocabulary. The target interleaves sliding-window and full-attention layers, as Gemma 4 does,
and the assistant reads the target's KV cache: its sliding-window layers attend through the
target's last sliding-window layer, its full layers through the target's last full layer.

The assistant is derived from the target so that it drafts the target's next token often but
not always: the target stays close to a bigram model (each layer adds a small branch to the
token embedding, and its output head reads only a low-rank view of the hidden state), and the
assistant projects the token embedding onto the directions that head reads, at its narrower
width, and scores the vocabulary with the target's output matrix seen through that projection.
Its own layers and the hidden-state input perturb this a little, so drafts are often, not
always, accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

from app.devtools.test_models.gguf_writing import (
    Matrices,
    add_fields,
    finish_gguf,
    full,
    open_gguf,
    random_matrices,
)
from app.devtools.test_models.synthetic import spm_tokenizer, vocabulary

ASSISTANT_ARCH = "gemma4-assistant"  # the installed gguf package predates the name


def _swa_pattern(n_layer: int) -> tuple[bool, ...]:
    # sliding-window layers with a full-attention layer last, as in every Gemma 4
    return (True,) * (n_layer - 1) + (False,)


@dataclass(frozen=True)
class TinyGemma4Shape:
    n_embd: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32  # full-attention layers (Gemma 4's global head is the wider one)
    head_dim_swa: int = 16
    n_ff: int = 128
    n_ctx: int = 512
    sliding_window: int = 32
    swa_layers: tuple[bool, ...] = field(default=())  # empty: _swa_pattern(n_layer)

    def pattern(self) -> tuple[bool, ...]:
        return self.swa_layers or _swa_pattern(self.n_layer)


@dataclass(frozen=True)
class TinyGemma4AssistantShape:
    """The assistant's own width must differ from the target's (llama.cpp checks it); the
    head sizes and KV head count are the target's, since it attends over the target's cache."""

    n_embd: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 64
    swa_layers: tuple[bool, ...] = field(default=())

    def pattern(self) -> tuple[bool, ...]:
        return self.swa_layers or _swa_pattern(self.n_layer)


def _rope_freqs(head_dim: int) -> np.ndarray:
    # Gemma 4's "proportional" rope on full layers: a quarter of the dimensions rotate, the
    # rest get a huge frequency factor (no rotation), as convert_hf_to_gguf.py writes it
    n_rot = head_dim // 8
    return np.array([1.0] * n_rot + [1e30] * (head_dim // 2 - n_rot), dtype=np.float32)


def _orthonormal_rows(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((cols, rows)))
    return np.ascontiguousarray(q.T, dtype=np.float32)


def _layer(
    i: int,
    width: int,
    hd: int,
    n_ff: int,
    n_head: int,
    n_head_kv: int,
    branch_scale: float,
    mat: Matrices,
) -> dict[str, np.ndarray]:
    """Layer ``i``: attention (with keys and values of its own when ``n_head_kv``) and the
    feed-forward part."""
    prefix = f"blk.{i}."
    tensors = {
        prefix + "attn_norm.weight": full(width),
        prefix + "attn_q.weight": mat(hd * n_head, width, width**-0.5),
    }
    if n_head_kv:
        tensors[prefix + "attn_k.weight"] = mat(hd * n_head_kv, width, width**-0.5)
        tensors[prefix + "attn_v.weight"] = mat(hd * n_head_kv, width, width**-0.5)
    tensors[prefix + "attn_output.weight"] = mat(width, hd * n_head, (hd * n_head) ** -0.5)
    tensors[prefix + "attn_q_norm.weight"] = full(hd)
    if n_head_kv:
        tensors[prefix + "attn_k_norm.weight"] = full(hd)
    return tensors | _feed_forward(i, width, n_ff, branch_scale, mat)


def _feed_forward(
    i: int, width: int, n_ff: int, branch_scale: float, mat: Matrices
) -> dict[str, np.ndarray]:
    """Block ``i``'s tensors from the attention's output norm on. Each branch is RMS-normed
    before it joins the residual stream, so its weight alone sets how far the model strays
    from a bigram model."""
    return {
        f"blk.{i}.post_attention_norm.weight": full(width, branch_scale),
        f"blk.{i}.ffn_norm.weight": full(width),
        f"blk.{i}.ffn_gate.weight": mat(n_ff, width, width**-0.5),
        f"blk.{i}.ffn_up.weight": mat(n_ff, width, width**-0.5),
        f"blk.{i}.ffn_down.weight": mat(width, n_ff, n_ff**-0.5),
        f"blk.{i}.post_ffw_norm.weight": full(width, branch_scale),
        f"blk.{i}.layer_output_scale.weight": full(1),
    }


def _target_tensors(
    shape: TinyGemma4Shape,
    n_vocab: int,
    rng: np.random.Generator,
    branch_scale: float,
    output_rank: int,
) -> dict[str, np.ndarray]:
    e, f = shape.n_embd, shape.n_ff
    rank = min(output_rank, e)

    mat = random_matrices(rng)

    tensors = {
        # the graph scales embeddings by sqrt(n_embd): rows of norm 1 give an input of rms 1
        "token_embd.weight": mat(n_vocab, e, e**-0.5),
        "output_norm.weight": full(e),
        # the output head reads only a rank-``output_rank`` view of the hidden state, which an
        # assistant that wide can track exactly
        "output.weight": mat(n_vocab, rank, 0.35 * (e / rank) ** 0.5)
        @ _orthonormal_rows(rng, rank, e),
        "rope_freqs.weight": _rope_freqs(shape.head_dim),
    }
    for i, swa in enumerate(shape.pattern()):
        hd = shape.head_dim_swa if swa else shape.head_dim
        tensors |= _layer(i, e, hd, f, shape.n_head, shape.n_head_kv, branch_scale, mat)
    return tensors


def _writer(
    path: Path, arch: str, n_ctx: int, n_embd: int, pattern: Sequence[bool]
) -> gguf.GGUFWriter:
    writer = open_gguf(path, arch)
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(len(pattern))
    writer.add_sliding_window_pattern(list(pattern))
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_rope_freq_base_swa(10_000.0)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_fields(writer, spm_tokenizer(vocabulary()))
    return writer


def _attention_keys(
    writer: gguf.GGUFWriter,
    n_head: int,
    n_head_kv: int,
    head_dim: int,
    head_dim_swa: int,
    window: int,
) -> None:
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_key_length_swa(head_dim_swa)
    writer.add_value_length_swa(head_dim_swa)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_dimension_count_swa(head_dim_swa)
    writer.add_sliding_window(window)


def write_tiny_gemma4(
    path: Path,
    *,
    seed: int = 0,
    shape: TinyGemma4Shape | None = None,
    branch_scale: float = 0.1,
    output_rank: int = TinyGemma4AssistantShape.n_embd,
) -> Path:
    """Write a loadable tiny ``gemma4`` target (no per-layer embeddings, no experts, no
    shared-KV layers). ``branch_scale`` sets how much each layer adds to the token embedding:
    smaller keeps the model closer to a bigram model, which its assistant drafts better.
    ``output_rank`` limits the output head's rank (an assistant at least that wide sees all
    the head reads)."""
    shape = shape or TinyGemma4Shape()
    pattern = shape.pattern()
    if len(pattern) != shape.n_layer or len(pattern) < 2 or pattern[-1] or not pattern[-2]:
        # the assistant shares the target's last two layers: a sliding one, then a full one
        raise ValueError(f"a Gemma 4 target ends with a sliding then a full layer: {pattern}")
    tokens, _, _ = vocabulary()
    tensors = _target_tensors(
        shape, len(tokens), np.random.default_rng(seed), branch_scale, output_rank
    )
    writer = _writer(path, "gemma4", shape.n_ctx, shape.n_embd, pattern)
    writer.add_feed_forward_length(shape.n_ff)
    _attention_keys(
        writer,
        shape.n_head,
        shape.n_head_kv,
        shape.head_dim,
        shape.head_dim_swa,
        shape.sliding_window,
    )
    writer.add_shared_kv_layers(0)
    writer.add_embedding_length_per_layer_input(0)
    finish_gguf(writer, tensors)
    return path


@dataclass(frozen=True)
class _TargetFacts:
    shape: TinyGemma4Shape
    output: np.ndarray


def _read_target(target: Path) -> _TargetFacts:
    reader = gguf.GGUFReader(str(target))

    def value(key: str) -> int:
        field_ = reader.fields[f"gemma4.{key}"]
        return int(field_.parts[field_.data[0]][0])

    pattern_field = reader.fields["gemma4.attention.sliding_window_pattern"]
    pattern = tuple(bool(pattern_field.parts[i][0]) for i in pattern_field.data)
    shape = TinyGemma4Shape(
        n_embd=value("embedding_length"),
        n_layer=value("block_count"),
        n_head=value("attention.head_count"),
        n_head_kv=value("attention.head_count_kv"),
        head_dim=value("attention.key_length"),
        head_dim_swa=value("attention.key_length_swa"),
        n_ff=value("feed_forward_length"),
        n_ctx=value("context_length"),
        sliding_window=value("attention.sliding_window"),
        swa_layers=pattern,
    )
    arrays = {t.name: np.array(t.data, dtype=np.float32) for t in reader.tensors}
    return _TargetFacts(shape, arrays["output.weight"])


def write_tiny_gemma4_assistant(
    path: Path,
    target: Path,
    *,
    seed: int = 1,
    shape: TinyGemma4AssistantShape | None = None,
    hidden_mix: float = 0.1,
    branch_scale: float = 0.05,
) -> Path:
    """Write a loadable ``gemma4-assistant`` for the tiny ``target`` written by
    ``write_tiny_gemma4``.

    Its input is the target's embedding of the last token beside the target's hidden state
    one position earlier; ``hidden_mix`` weighs the hidden state against the token. Its own
    layers add branches of ``branch_scale`` to that (0 makes it a pure projected bigram)."""
    shape = shape or TinyGemma4AssistantShape()
    facts = _read_target(target)
    t = facts.shape
    a, b, f = shape.n_embd, t.n_embd, shape.n_ff
    if a >= b:
        # llama.cpp requires the widths to differ; real assistants are the narrower
        raise ValueError(f"the assistant ({a}) must be narrower than its target ({b})")
    rng = np.random.default_rng(seed)

    mat = random_matrices(rng)

    # the assistant's view of the target's hidden space: the directions the target's output
    # head reads most (all of them when the head's rank is at most ``a``)
    _, _, vt = np.linalg.svd(facts.output, full_matrices=False)
    projection = np.ascontiguousarray(vt[:a], dtype=np.float32)  # (a, b), orthonormal rows
    tensors = {
        # the assistant's output head (tied to its embedding; its input embeddings are the
        # target's): the target's output matrix seen through the projection
        "token_embd.weight": (facts.output @ projection.T).astype(np.float32),
        "output_norm.weight": full(a),
        "nextn.pre_projection.weight": np.hstack([projection, hidden_mix * projection]),
        "nextn.post_projection.weight": np.ascontiguousarray(projection.T),
        "rope_freqs.weight": _rope_freqs(t.head_dim),
    }
    for i, swa in enumerate(shape.pattern()):
        hd = t.head_dim_swa if swa else t.head_dim
        # its queries read the target's keys and values: none of its own
        tensors |= _layer(i, a, hd, f, shape.n_head, 0, branch_scale, mat)
    writer = _writer(path, ASSISTANT_ARCH, t.n_ctx, a, shape.pattern())
    writer.add_feed_forward_length(f)
    _attention_keys(writer, shape.n_head, t.n_head_kv, t.head_dim, t.head_dim_swa, t.sliding_window)
    writer.add_embedding_length_out(b)
    # every block of an assistant is a next-token block (convert_hf_to_gguf.py writes it so)
    writer.add_nextn_predict_layers(shape.n_layer)
    finish_gguf(writer, tensors)
    return path
