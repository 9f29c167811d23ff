"""A tiny EAGLE-3 head and the tiny llama target it drafts for, loadable by llama.cpp.

An EAGLE-3 head (``general.architecture = eagle3``, llama.cpp's src/models/eagle3.cpp) is one
decoder layer beside its target. Its encoder projects the inputs of three target layers
(``eagle3.target_layers``, concatenated: ``fc``) to a row ``g``; its decoder reads the token
after each position beside that position's ``g`` and predicts the token after that. It has no
tokenizer of its own (it carries its target's) and here no token embeddings either: llama.cpp
then embeds with the target's (the head's context must name the target's as ``ctx_other``),
as real heads for Llama 3.1 8B do.

The weights are seeded random, built so the head agrees with the target often, not always.
The target stays close to a bigram model (each layer adds a small branch to the token
embedding, ``branch_scale``). The head copies the embedding of the token it is given into the
target's own output projection: its queries and keys are that embedding and its rope turns
fast, so a position attends to itself; its values are that embedding minus the normed ``g``
row, and with ``norm_before_residual`` the residual adds the normed ``g`` back. So the row it
hands its next draft step (its pre-norm state, the next ``g``) does not pile up, and chained
drafts stay as good as the first. A small feed-forward branch, attention to other positions
and the target's own context effects make it miss now and then.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from app.devtools.test_models.gguf_writing import (
    finish_gguf,
    full,
    open_gguf,
    random_matrices,
)
from app.devtools.test_models.synthetic import (
    TinyShape,
    _donor_tokenizer,
    _weights,
    spm_tokenizer,
    vocabulary,
    write_llama,
)

EAGLE3_TARGET_SHAPE = TinyShape(n_layer=4)
# llama.cpp's converter reads layers [2, n // 2, n - 3] of an n-layer target; a 4-layer one
# has too few for that, so the head reads three distinct ones below n_layer (an id equal to
# n_layer would ask the target for next-token rows, which a llama target has not got)
EAGLE3_TARGET_LAYERS = (1, 2, 3)


@dataclass(frozen=True)
class TinyEagle3Shape:
    """The head's decoder layer. Its width is the target's: it embeds with the target's
    token embeddings, and its attention copies one into its output."""

    n_head: int = 4
    n_ff: int = 128
    n_ctx: int = 512
    attention_sharpness: float = 6.0  # query scale: how strictly a position attends to itself
    rope_freq_base: float = 10.0  # every rope pair turns fast: other positions score lower
    ffn_scale: float = 0.3  # size of the feed-forward branch: how often the head misses


def write_eagle3_target(
    path: Path,
    *,
    seed: int = 0,
    shape: TinyShape = EAGLE3_TARGET_SHAPE,
    branch_scale: float = 0.35,
) -> Path:
    """A tiny llama target that an EAGLE-3 head can follow: each layer's attention and
    feed-forward output is scaled by ``branch_scale``, so the next token depends mostly, not
    only, on the current one."""
    tokens, scores, types = vocabulary()
    tensors = _weights(shape, len(tokens), np.random.default_rng(seed))
    for name, value in tensors.items():
        if name.endswith(("attn_output.weight", "ffn_down.weight")):
            value *= np.float32(branch_scale)
    write_llama(path, shape, tensors, spm_tokenizer((tokens, scores, types)))
    return path


def write_tiny_eagle3(
    path: Path,
    target: Path,
    *,
    seed: int = 1,
    target_layers: tuple[int, int, int] = EAGLE3_TARGET_LAYERS,
    shape: TinyEagle3Shape | None = None,
) -> Path:
    """Write an EAGLE-3 head for the llama-architecture ``target`` GGUF (its vocabulary, its
    width, and its output projection copied as the head's own ``output.weight``)."""
    shape = shape or TinyEagle3Shape()
    reader = gguf.GGUFReader(str(target))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    n_embd = int(reader.fields[f"{arch}.embedding_length"].parts[-1][0])
    n_layer = int(reader.fields[f"{arch}.block_count"].parts[-1][0])
    if len(target_layers) != 3 or not all(0 <= layer < n_layer for layer in target_layers):
        raise ValueError(
            f"an EAGLE-3 head reads three of the target's layers 0..{n_layer - 1}; "
            f"got {target_layers}"
        )
    if n_embd % shape.n_head:
        raise ValueError(f"{shape.n_head} heads do not divide the target's width {n_embd}")
    output = next(t for t in reader.tensors if t.name == "output.weight")
    # GGUF lists dimensions innermost first: the numpy array is (n_vocab, n_embd) already
    lm_head = np.array(output.data, dtype=np.float32).reshape(-1, n_embd)

    rng = np.random.default_rng(seed)
    e, f = n_embd, shape.n_ff

    mat = random_matrices(rng)

    eye, zero = np.eye(e, dtype=np.float32), np.zeros((e, e), np.float32)
    token_half = np.hstack([eye, zero])  # reads the normed token embedding of [token, g]
    tensors = {
        "fc.weight": mat(e, 3 * e, (3 * e) ** -0.5),
        "output_norm.weight": full(e),
        "output.weight": lm_head,
        "blk.0.attn_norm.weight": full(e),
        "blk.0.attn_norm_2.weight": full(e),
        "blk.0.attn_q.weight": token_half * np.float32(shape.attention_sharpness),
        "blk.0.attn_k.weight": token_half.copy(),
        "blk.0.attn_v.weight": np.hstack([eye, -eye]),
        "blk.0.attn_output.weight": eye.copy(),
        "blk.0.ffn_norm.weight": full(e),
        "blk.0.ffn_gate.weight": mat(f, e, e**-0.5),
        "blk.0.ffn_up.weight": mat(f, e, e**-0.5),
        "blk.0.ffn_down.weight": mat(e, f, shape.ffn_scale * f**-0.5),
    }

    writer = open_gguf(path, "eagle3")
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(e)
    writer.add_block_count(1)
    writer.add_feed_forward_length(f)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head)
    writer.add_rope_dimension_count(e // shape.n_head)
    writer.add_rope_freq_base(shape.rope_freq_base)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    # the installed gguf package predates these keys (src/llama-arch.cpp names them)
    writer.add_array("eagle3.target_layers", list(target_layers))
    writer.add_uint32("eagle3.target_hidden_size", e)
    writer.add_bool("eagle3.norm_before_residual", True)
    finish_gguf(writer, tensors, _donor_tokenizer(target))
    return path


def write_tiny_eagle3_pair(directory: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """A tiny llama target and an EAGLE-3 head for it: (target, head)."""
    target = write_eagle3_target(directory / "eagle3-target.gguf", seed=seed)
    head = write_tiny_eagle3(directory / "eagle3-head.gguf", target, seed=seed + 1)
    return target, head
