"""Tiny but real llama-architecture GGUF models for fast tests.

They load in llama.cpp in milliseconds, share an SPM vocabulary with byte fallback (so any
UTF-8 text tokenizes), and come in related pairs: a draft is the target's weights plus
noise, so the two agree often but not always, like a real quantized draft.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from app.devtools.test_models.gguf_writing import (
    Matrices,
    TokenizerField,
    finish_gguf,
    full,
    open_gguf,
    random_matrices,
)

WORDS = (
    "the of and to in is that for it as with was on be by at this are from or an "
    "have not but what all were when we there can more if will one about up out do "
    "so has no time def return import class self print if else for while code data "
    "model token draft target"
).split()
TOKEN_TYPE_NORMAL, TOKEN_TYPE_UNKNOWN, TOKEN_TYPE_CONTROL, TOKEN_TYPE_BYTE = 1, 2, 3, 6


@dataclass(frozen=True)
class TinyShape:
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx: int = 512


def vocabulary(extra_words: tuple[str, ...] = ()) -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"]
    types = [TOKEN_TYPE_UNKNOWN, TOKEN_TYPE_CONTROL, TOKEN_TYPE_CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [TOKEN_TYPE_BYTE] * 256
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["▁"]
    words = list(dict.fromkeys(list(extra_words) + WORDS))
    pieces = letters + ["▁" + w for w in words]
    tokens += pieces
    types += [TOKEN_TYPE_NORMAL] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    # longer pieces should win merges: give whole words higher scores than letters
    for i, piece in enumerate(pieces):
        scores[259 + i] = float(len(piece)) - i * 1e-3
    return tokens, scores, types


def _embedding_and_head(mat: Matrices, n_vocab: int, n_embd: int) -> dict[str, np.ndarray]:
    """The token embedding, the final norm and the output head (drawn in that order)."""
    return {
        "token_embd.weight": mat(n_vocab, n_embd, 1.0),
        "output_norm.weight": full(n_embd),
        "output.weight": mat(n_vocab, n_embd, 0.35),
    }


def _weights(shape: TinyShape, n_vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    e, f, hd = shape.n_embd, shape.n_ff, shape.n_embd // shape.n_head
    kv = hd * shape.n_head_kv

    mat = random_matrices(rng)

    tensors = _embedding_and_head(mat, n_vocab, e)
    for i in range(shape.n_layer):
        tensors |= {
            f"blk.{i}.attn_norm.weight": full(e),
            f"blk.{i}.attn_q.weight": mat(e, e, e**-0.5),
            f"blk.{i}.attn_k.weight": mat(kv, e, e**-0.5),
            f"blk.{i}.attn_v.weight": mat(kv, e, e**-0.5),
            f"blk.{i}.attn_output.weight": mat(e, e, e**-0.5),
            f"blk.{i}.ffn_norm.weight": full(e),
            f"blk.{i}.ffn_gate.weight": mat(f, e, e**-0.5),
            f"blk.{i}.ffn_up.weight": mat(f, e, e**-0.5),
            f"blk.{i}.ffn_down.weight": mat(e, f, f**-0.5),
        }
    return tensors


def write_tiny_llama(
    path: Path,
    *,
    seed: int = 0,
    shape: TinyShape | None = None,
    noise_from: int | None = None,
    noise: float = 0.0,
    extra_words: tuple[str, ...] = (),
    chat_template: str | None = None,
) -> Path:
    """Write a loadable tiny llama model.

    With ``noise_from`` the weights are those of seed ``noise_from`` plus Gaussian noise of
    relative size ``noise`` drawn with ``seed``: a draft that resembles its target.
    """
    shape = shape or TinyShape()
    tokens, scores, types = vocabulary(extra_words)
    base_seed = noise_from if noise_from is not None else seed
    tensors = _weights(shape, len(tokens), np.random.default_rng(base_seed))
    if noise_from is not None and noise > 0.0:
        jitter = np.random.default_rng(seed)
        for value in tensors.values():
            if value.ndim == 2:
                value += (jitter.standard_normal(value.shape) * noise * value.std()).astype(
                    np.float32
                )
    write_llama(path, shape, tensors, spm_tokenizer((tokens, scores, types), chat_template))
    return path


def spm_tokenizer(
    vocab: tuple[list[str], list[float], list[int]],
    chat_template: str | None = None,
    *,
    model: str = "llama",
    add_flags: bool = True,
) -> list[TokenizerField]:
    """The metadata of ``vocabulary()``'s SPM vocabulary: ids 0/1/2 are unk/bos/eos."""
    tokens, scores, types = vocab
    V = gguf.GGUFValueType
    fields: list[TokenizerField] = [
        ("tokenizer.ggml.model", model, V.STRING, None),
        ("tokenizer.ggml.tokens", tokens, V.ARRAY, V.STRING),
        ("tokenizer.ggml.scores", scores, V.ARRAY, V.FLOAT32),
        ("tokenizer.ggml.token_type", types, V.ARRAY, V.INT32),
        ("tokenizer.ggml.bos_token_id", 1, V.UINT32, None),
        ("tokenizer.ggml.eos_token_id", 2, V.UINT32, None),
        ("tokenizer.ggml.unknown_token_id", 0, V.UINT32, None),
    ]
    if add_flags:
        fields += [
            ("tokenizer.ggml.add_bos_token", True, V.BOOL, None),
            ("tokenizer.ggml.add_eos_token", False, V.BOOL, None),
        ]
    if chat_template:
        fields.append(("tokenizer.chat_template", chat_template, V.STRING, None))
    return fields


_DONOR_KEYS = (
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.chat_template",
)


def _donor_tokenizer(donor: Path) -> list[TokenizerField]:
    """(key, value, type, array item type) of the donor's tokenizer fields."""
    reader = gguf.GGUFReader(str(donor))
    out: list[TokenizerField] = []
    for key in _DONOR_KEYS:
        field = reader.fields.get(key)
        if field is None:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            item = field.types[1]
            values: object = (
                [bytes(field.parts[i]).decode("utf-8") for i in field.data]
                if item == gguf.GGUFValueType.STRING
                else [int(field.parts[i][0]) for i in field.data]
            )
            out.append((key, values, kind, item))
        elif kind == gguf.GGUFValueType.STRING:
            out.append((key, bytes(field.parts[field.data[0]]).decode("utf-8"), kind, None))
        else:
            out.append((key, field.parts[field.data[0]][0].item(), kind, None))
    return out


def _embedded(small: dict[str, np.ndarray], shape: TinyShape, scale: int) -> dict[str, np.ndarray]:
    """``small``'s weights inside a model ``scale`` times as wide, every new entry zero.

    The wide model computes exactly what the small one does (extra heads see zero queries,
    keys and values; extra feed-forward units and embedding dimensions stay zero) at several
    times the cost. RMS norms are taken over the wider vector, so their weights are scaled to
    give the same result.
    """
    out: dict[str, np.ndarray] = {}
    norm_scale = np.float32(1.0 / np.sqrt(scale))
    for name, value in small.items():
        if value.ndim == 1:
            wide = np.zeros(value.shape[0] * scale, dtype=np.float32)
            wide[: value.shape[0]] = value * norm_scale
        elif name in ("token_embd.weight", "output.weight"):
            wide = np.zeros((value.shape[0], value.shape[1] * scale), dtype=np.float32)
            wide[:, : value.shape[1]] = value
        else:
            wide = np.zeros((value.shape[0] * scale, value.shape[1] * scale), dtype=np.float32)
            wide[: value.shape[0], : value.shape[1]] = value
        out[name] = wide
    return out


def write_llama(
    path: Path,
    shape: TinyShape,
    tensors: dict[str, np.ndarray],
    tokenizer: list[TokenizerField],
) -> None:
    """A llama-architecture F32 GGUF of ``shape`` with these tensors and tokenizer fields."""
    writer = open_gguf(path, "llama")
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(shape.n_embd // shape.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(writer, tensors, tokenizer)


def write_vocab_donor_pair(
    donor: Path,
    target: Path,
    draft: Path,
    *,
    scale: int = 4,
    noise: float = 0.03,
    small_shape: TinyShape | None = None,
) -> tuple[Path, Path]:
    """A fast pair with a real tokenizer: narrow llama models that use ``donor``'s vocabulary
    (e.g. Qwen2.5's 151,936 tokens). A decode costs milliseconds, as on a GPU, while all that
    is done per vocabulary entry (logit rows, sampling) costs what it really does.

    The draft is small; the target is the draft embedded in a model ``scale`` times as wide
    (so it costs several draft passes, like a real target) plus a little noise, so the two
    agree often but not always. ``small_shape`` is the draft's (the target's is ``scale``
    times as wide, with as many layers)."""
    small_shape = small_shape or TinyShape(
        n_embd=32, n_layer=2, n_head=2, n_head_kv=1, n_ff=64, n_ctx=4096
    )
    wide_shape = TinyShape(
        n_embd=small_shape.n_embd * scale,
        n_layer=small_shape.n_layer,
        n_head=small_shape.n_head * scale,
        n_head_kv=small_shape.n_head_kv * scale,
        n_ff=small_shape.n_ff * scale,
        n_ctx=small_shape.n_ctx,
    )
    tokenizer = _donor_tokenizer(donor)
    n_vocab = next(len(v) for k, v, _, _ in tokenizer if k == "tokenizer.ggml.tokens")  # type: ignore[arg-type]
    small = _weights(small_shape, n_vocab, np.random.default_rng(0))
    wide = _embedded(small, wide_shape, scale)
    jitter = np.random.default_rng(1)
    for value in wide.values():
        if value.ndim == 2:
            active = value != 0
            value[active] += (jitter.standard_normal(int(active.sum())) * noise).astype(
                np.float32
            ) * value[active].std()
    write_llama(draft, small_shape, small, tokenizer)
    write_llama(target, wide_shape, wide, tokenizer)
    return target, draft


@dataclass(frozen=True)
class TinyQwen35Shape:
    """A tiny ``qwen35`` (Qwen3.5/3.6): gated delta-net recurrent layers with a full
    attention layer every ``full_attention_interval``, plus ``n_nextn`` next-token (MTP)
    blocks after the trunk, the way llama.cpp's models/qwen35.cpp loads them."""

    n_embd: int = 64
    n_trunk: int = 4
    n_nextn: int = 1
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    n_ctx: int = 512
    full_attention_interval: int = 4
    ssm_conv_kernel: int = 4
    ssm_state_size: int = 16  # the key and value head width of the recurrent layers
    ssm_group_count: int = 2  # key heads
    ssm_time_step_rank: int = 4  # value heads
    rope_sections: tuple[int, int, int, int] = (3, 3, 2, 0)  # sums to head_dim / 2


def _qwen35_weights(
    shape: TinyQwen35Shape, n_vocab: int, rng: np.random.Generator, branch_scale: float | None
) -> dict[str, np.ndarray]:
    e, f, hd = shape.n_embd, shape.n_ff, shape.head_dim
    key_dim = shape.ssm_state_size * shape.ssm_group_count
    value_dim = shape.ssm_state_size * shape.ssm_time_step_rank
    conv_dim = 2 * key_dim + value_dim

    mat = random_matrices(rng)

    def attention(i: int) -> dict[str, np.ndarray]:
        return {
            # the query projection carries the output gate too (two halves per head)
            f"blk.{i}.attn_q.weight": mat(hd * shape.n_head * 2, e, e**-0.5),
            f"blk.{i}.attn_k.weight": mat(hd * shape.n_head_kv, e, e**-0.5),
            f"blk.{i}.attn_v.weight": mat(hd * shape.n_head_kv, e, e**-0.5),
            f"blk.{i}.attn_output.weight": mat(e, hd * shape.n_head, (hd * shape.n_head) ** -0.5),
            f"blk.{i}.attn_q_norm.weight": full(hd),
            f"blk.{i}.attn_k_norm.weight": full(hd),
        }

    def common(i: int) -> dict[str, np.ndarray]:
        return {
            f"blk.{i}.attn_norm.weight": full(e),
            f"blk.{i}.post_attention_norm.weight": full(e),
            f"blk.{i}.ffn_gate.weight": mat(f, e, e**-0.5),
            f"blk.{i}.ffn_up.weight": mat(f, e, e**-0.5),
            f"blk.{i}.ffn_down.weight": mat(e, f, f**-0.5),
        }

    tensors = _embedding_and_head(mat, n_vocab, e)
    for i in range(shape.n_trunk):
        tensors |= common(i)
        if (i + 1) % shape.full_attention_interval == 0:
            tensors |= attention(i)
            continue
        tensors |= {
            f"blk.{i}.attn_qkv.weight": mat(conv_dim, e, e**-0.5),
            f"blk.{i}.attn_gate.weight": mat(value_dim, e, e**-0.5),
            f"blk.{i}.ssm_conv1d.weight": mat(conv_dim, shape.ssm_conv_kernel, 0.5),
            f"blk.{i}.ssm_dt.bias": mat(1, shape.ssm_time_step_rank, 0.1)[0],
            # A = -exp(A_log): negative, so the recurrent state decays
            f"blk.{i}.ssm_a": -np.exp(mat(1, shape.ssm_time_step_rank, 0.1)[0]),
            f"blk.{i}.ssm_beta.weight": mat(shape.ssm_time_step_rank, e, e**-0.5),
            f"blk.{i}.ssm_alpha.weight": mat(shape.ssm_time_step_rank, e, e**-0.5),
            f"blk.{i}.ssm_norm.weight": full(shape.ssm_state_size),
            f"blk.{i}.ssm_out.weight": mat(e, value_dim, value_dim**-0.5),
        }
    eh_proj = mat(e, 2 * e, (2 * e) ** -0.5)
    if branch_scale is not None:
        # the model stays close to a bigram model (each layer adds a small branch to the token
        # embedding) and the MTP block reads the token embedding: it predicts the target's
        # next token often, not always
        eh_proj = np.hstack([np.eye(e, dtype=np.float32), np.zeros((e, e), np.float32)])
        outputs = ("attn_output.weight", "ssm_out.weight", "ffn_down.weight")
        for name, value in tensors.items():
            if name.endswith(outputs):
                value *= np.float32(branch_scale)
    for i in range(shape.n_trunk, shape.n_trunk + shape.n_nextn):
        block = common(i) | attention(i)
        if branch_scale is not None:
            for name, value in block.items():
                if name.endswith(("attn_output.weight", "ffn_down.weight")):
                    value *= np.float32(branch_scale)
        tensors |= block
        tensors |= {
            f"blk.{i}.nextn.eh_proj.weight": eh_proj,
        } | _nextn_norms(i, e)
    return tensors


def _nextn_norms(i: int, n_embd: int) -> dict[str, np.ndarray]:
    """The norms of next-token block ``i``: of the token embedding, of the hidden state and
    before the shared output head."""
    names = ("enorm", "hnorm", "shared_head_norm")
    return {f"blk.{i}.nextn.{name}.weight": full(n_embd) for name in names}


def _add_nextn_shape(
    writer: gguf.GGUFWriter, shape: TinyQwen35Shape | TinyStep35Shape, expert_ff: int | None = None
) -> None:
    """The sizes of a model with ``shape.n_nextn`` next-token blocks after its trunk."""
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_trunk + shape.n_nextn)
    writer.add_nextn_predict_layers(shape.n_nextn)
    writer.add_feed_forward_length(shape.n_ff)
    if expert_ff is not None:
        writer.add_expert_feed_forward_length(expert_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_dimension_count(shape.head_dim)


def write_tiny_qwen35(
    path: Path,
    *,
    seed: int = 0,
    shape: TinyQwen35Shape | None = None,
    branch_scale: float | None = None,
) -> Path:
    """Write a loadable tiny ``qwen35`` model with ``shape.n_nextn`` next-token layers.

    With random weights the MTP block's drafts are almost always rejected; ``branch_scale``
    (e.g. 0.3: smaller agrees more) makes it draft the target's next token often, so both
    acceptance and rejection (with its recurrent-state rollback) are exercised.
    The MTP blocks reuse the trunk's embedding and output (llama.cpp falls back to them when
    ``nextn.embed_tokens`` / ``nextn.shared_head_head`` are absent), as real exports do."""
    shape = shape or TinyQwen35Shape()
    tokens, scores, types = vocabulary()
    tensors = _qwen35_weights(shape, len(tokens), np.random.default_rng(seed), branch_scale)
    writer = open_gguf(path, "qwen35")
    _add_nextn_shape(writer, shape)
    writer.add_rope_dimension_sections(list(shape.rope_sections))
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_full_attention_interval(shape.full_attention_interval)
    writer.add_ssm_conv_kernel(shape.ssm_conv_kernel)
    writer.add_ssm_inner_size(shape.ssm_state_size * shape.ssm_time_step_rank)
    writer.add_ssm_state_size(shape.ssm_state_size)
    writer.add_ssm_time_step_rank(shape.ssm_time_step_rank)
    writer.add_ssm_group_count(shape.ssm_group_count)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(writer, tensors, spm_tokenizer((tokens, scores, types)))
    return path


@dataclass(frozen=True)
class TinyStep35Shape:
    """A tiny dense ``step35`` (Step-3.5) with several chained next-token blocks: llama.cpp's
    models/step35.cpp runs head ``k`` at ``nextn_layer_offset`` k, one head per draft step."""

    n_embd: int = 64
    n_trunk: int = 3
    n_nextn: int = 3
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    n_ctx: int = 512


def write_tiny_step35(
    path: Path, *, seed: int = 0, shape: TinyStep35Shape | None = None, branch_scale: float = 0.3
) -> Path:
    """Write a loadable tiny ``step35`` with ``shape.n_nextn`` chained next-token blocks.

    As with ``write_tiny_qwen35(branch_scale=...)``, every layer adds a small branch to the
    token embedding and each head reads the token embedding, so a head agrees with the
    target often but not always."""
    shape = shape or TinyStep35Shape()
    tokens, scores, types = vocabulary()
    rng = np.random.default_rng(seed)
    e, f, hd, n_vocab = shape.n_embd, shape.n_ff, shape.head_dim, len(tokens)

    mat = random_matrices(rng)

    def block(i: int) -> dict[str, np.ndarray]:
        return {
            f"blk.{i}.attn_norm.weight": full(e),
            f"blk.{i}.attn_q.weight": mat(hd * shape.n_head, e, e**-0.5),
            f"blk.{i}.attn_k.weight": mat(hd * shape.n_head_kv, e, e**-0.5),
            f"blk.{i}.attn_v.weight": mat(hd * shape.n_head_kv, e, e**-0.5),
            f"blk.{i}.attn_output.weight": mat(e, hd * shape.n_head, branch_scale * hd**-0.5),
            f"blk.{i}.ffn_norm.weight": full(e),
            f"blk.{i}.ffn_gate.weight": mat(f, e, e**-0.5),
            f"blk.{i}.ffn_up.weight": mat(f, e, e**-0.5),
            f"blk.{i}.ffn_down.weight": mat(e, f, branch_scale * f**-0.5),
        }

    tensors = _embedding_and_head(mat, n_vocab, e)
    for i in range(shape.n_trunk):
        tensors |= block(i)
    # the head reads [token embedding, hidden state]: an identity on the first half keeps
    # its prediction close to the target's bigram-like one
    eh_proj = np.hstack([np.eye(e, dtype=np.float32), np.zeros((e, e), np.float32)])
    for i in range(shape.n_trunk, shape.n_trunk + shape.n_nextn):
        tensors |= (
            block(i)
            | {
                f"blk.{i}.nextn.eh_proj.weight": eh_proj + mat(e, 2 * e, 0.02),
            }
            | _nextn_norms(i, e)
        )
    n_all = shape.n_trunk + shape.n_nextn
    writer = open_gguf(path, "step35")
    # every layer is dense: the expert width is the feed-forward width
    _add_nextn_shape(writer, shape, expert_ff=f)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_sliding_window(shape.n_ctx)
    # llama.cpp needs one sliding-window layer; a window as long as the context changes nothing
    writer.add_array("step35.attention.sliding_window_pattern", [1] + [0] * (n_all - 1))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(writer, tensors, spm_tokenizer((tokens, scores, types)))
    return path
