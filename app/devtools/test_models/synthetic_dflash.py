"""Tiny DFlash, DFlash2 and DSpark block drafters and the tiny llama target they draft for,
loadable by llama.cpp (``general.architecture = dflash``, src/models/dflash.cpp).

A block drafter reads the inputs of some target layers (``dflash.target_layers``): after each
target decode they are concatenated, fused by ``fc`` and written, as keys and values, into the
drafter's own cache at the target's positions. To draft, it decodes one block, the last
committed token (the anchor) followed by mask tokens (``tokenizer.ggml.mask_token_id``), with
non-causal attention over that cache and the block, and reads the whole block's logits at once.

- **DFlash** reads the mask positions: at most ``block_size - 1`` tokens a block.
- **DFlash2** adds per-layer convolutions along the block and a selector (``selector_*``): the
  top-k candidates of each position and the scores of each candidate after each of the
  previous position's, walked on the host.
- **DSpark** adds a Markov head (``markov_w1``, ``markov_w2``: a bias on each position's logits
  from the token chosen before it) and a confidence head (``conf_proj``); with
  ``sample_from_anchor`` it reads the anchor's position too, up to ``block_size`` tokens.

The weights are seeded random, built so a head agrees with the target often, not always. The
target stays close to a bigram model (``write_eagle3_target``). The head carries its own token
embedding and output, as exports with a trained mask embedding do: the target's, with two
dimensions set aside, one constant on every real token and one marking the mask token. Half of
the attention heads let a mask position's query (the marker) find the anchor's key (the
constant) at any distance (the rope pair they use barely turns) and copy its embedding, so the
first drafted token is close to the target's bigram prediction. The other heads attend over the
injected target features at random and add a little of them, so the drafts depend on the
features as well, and miss now and then. DSpark's Markov head holds the target's own bigram
scores, so its drafts chain further than DFlash's, whose mask positions all see the same anchor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from app.devtools.test_models.gguf_writing import (
    FieldSpec,
    TokenizerField,
    finish_gguf,
    open_gguf,
    random_matrices,
    with_changes,
)
from app.devtools.test_models.synthetic import TinyShape, _donor_tokenizer
from app.devtools.test_models.synthetic_eagle3 import EAGLE3_TARGET_SHAPE, write_eagle3_target

VARIANTS = ("dflash", "dflash2", "dspark")
DFLASH_TARGET_SHAPE = EAGLE3_TARGET_SHAPE  # a 4-layer llama, 64 wide
DFLASH_TARGET_LAYERS = (1, 3)
DFLASH_BLOCK_SIZE = 8
MASK_TOKEN = 0  # <unk>: the head's own embedding gives it the mask marker
_REAL, _MARK = 0, 1  # embedding dimensions set aside: "a real token", "the mask token"


@dataclass(frozen=True)
class TinyDFlashShape:
    """The drafter's one decoder layer: eight heads of 16, four that copy the anchor and
    four that read the injected features."""

    n_head: int = 8
    head_dim: int = 16
    n_ff: int = 128
    n_ctx: int = 1024
    rope_freq_base: float = 1e6  # the copying heads' rope pair turns ~5e-6 rad a position
    copy_sharpness: float = 3.0  # q/k norm weight of the copying pair: the anchor's score
    feature_scale: float = 0.15  # how much the feature-reading heads add
    ffn_scale: float = 0.2  # size of the feed-forward branch
    markov_scale: float = 2.0  # DSpark: the Markov bias against the block's own logits
    conv_kernel: int = 2  # DFlash2
    conv_group: int = 16
    selector_rank: int = 8
    selector_top_k: int = 4


def write_dflash_target(
    path: Path, *, seed: int = 0, shape: TinyShape = DFLASH_TARGET_SHAPE
) -> Path:
    """The tiny llama target (layer inputs extractable, as llama.cpp's DFlash path needs)."""
    return write_eagle3_target(path, seed=seed, shape=shape, branch_scale=0.15)


def _target_tensors(target: Path) -> tuple[str, int, int, np.ndarray, np.ndarray]:
    reader = gguf.GGUFReader(str(target))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    n_embd = int(reader.fields[f"{arch}.embedding_length"].parts[-1][0])
    n_layer = int(reader.fields[f"{arch}.block_count"].parts[-1][0])
    by_name = {t.name: t for t in reader.tensors}
    # GGUF lists dimensions innermost first: the numpy arrays are (n_vocab, n_embd) already
    embd = np.array(by_name["token_embd.weight"].data, dtype=np.float32).reshape(-1, n_embd)
    lm_head = np.array(by_name["output.weight"].data, dtype=np.float32).reshape(-1, n_embd)
    return arch, n_embd, n_layer, embd, lm_head


def _rms_normed(rows: np.ndarray) -> np.ndarray:
    return rows / np.sqrt(np.mean(rows * rows, axis=-1, keepdims=True) + 1e-6)


def dflash_tensors(
    target: Path,
    *,
    variant: str = "dflash",
    seed: int = 1,
    target_layers: tuple[int, ...] = DFLASH_TARGET_LAYERS,
    shape: TinyDFlashShape | None = None,
) -> dict[str, np.ndarray]:
    """The head's tensors for ``target`` (its width and vocabulary)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant is one of {VARIANTS}, not {variant!r}")
    shape = shape or TinyDFlashShape()
    _arch, e, _n_layer, embd, lm_head = _target_tensors(target)
    n_vocab, hd, n_head = embd.shape[0], shape.head_dim, shape.n_head
    n_copy = e // hd  # heads that copy the anchor: their values are the embedding itself
    if n_copy >= n_head:
        raise ValueError(f"{n_head} heads of {hd} leave none to read features (width {e})")
    mat = random_matrices(np.random.default_rng(seed))
    own_embd = embd.copy()
    own_embd[:, _REAL], own_embd[:, _MARK] = 1.0, 0.0
    own_embd[MASK_TOKEN] = 0.0
    own_embd[MASK_TOKEN, _MARK] = 1.0
    own_output = lm_head.copy()
    own_output[:, [_REAL, _MARK]] = 0.0  # the set-aside dimensions score nothing

    # NEOX rope pairs dimension j with j + hd/2 at angle pos * base^(-2j/hd): the copying heads
    # use j = hd/2 - 1, the slowest
    slow = hd // 2 - 1
    attn = hd * n_head
    wq, wk = mat(attn, e, e**-0.5), mat(attn, e, e**-0.5)
    wv = mat(attn, e, e**-0.5)
    wo = np.zeros((e, attn), np.float32)
    for h in range(n_copy):
        rows = slice(h * hd, (h + 1) * hd)
        wq[rows], wk[rows], wv[rows] = 0.0, 0.0, 0.0
        wq[h * hd + slow, _MARK] = 1.0  # the mask token asks ...
        wk[h * hd + slow, _REAL] = 1.0  # ... any real token answers, the features do not
        wv[rows, rows] = np.eye(hd, dtype=np.float32)
        wo[rows, rows] = np.eye(hd, dtype=np.float32)
    wo[:, n_copy * hd :] = mat(e, attn - n_copy * hd, shape.feature_scale * hd**-0.5)
    qk_norm = np.ones(hd, np.float32)
    qk_norm[slow] = shape.copy_sharpness
    n_in = len(target_layers) * e
    enc_norm = np.ones(e, np.float32)
    enc_norm[_REAL] = 0.0  # the fused features are no real token to the copying heads

    tensors = {
        "token_embd.weight": own_embd,
        "output.weight": own_output,
        "output_norm.weight": np.ones(e, np.float32),
        "fc.weight": mat(e, n_in, n_in**-0.5),
        "enc.output_norm.weight": enc_norm,
        "blk.0.attn_norm.weight": np.ones(e, np.float32),
        "blk.0.attn_q.weight": wq,
        "blk.0.attn_k.weight": wk,
        "blk.0.attn_v.weight": wv,
        "blk.0.attn_output.weight": wo,
        "blk.0.attn_q_norm.weight": qk_norm,
        "blk.0.attn_k_norm.weight": qk_norm.copy(),
        "blk.0.ffn_norm.weight": np.ones(e, np.float32),
        "blk.0.ffn_gate.weight": mat(shape.n_ff, e, e**-0.5),
        "blk.0.ffn_up.weight": mat(shape.n_ff, e, e**-0.5),
        "blk.0.ffn_down.weight": mat(e, shape.n_ff, shape.ffn_scale * shape.n_ff**-0.5),
    }
    if variant == "dflash2":
        k, groups = shape.conv_kernel, e // shape.conv_group
        identity = np.zeros((2, k, e), np.float32)  # ggml {n_embd, kernel, 2}: tap 0 passes
        identity[:, 0, :] = 1.0
        for part in ("attn", "ffn"):
            tensors[f"blk.0.{part}_conv_base"] = identity.copy()
            tensors[f"blk.0.{part}_conv_proj.weight"] = mat(2 * k * groups, e, 0.01)
        tensors |= {
            "selector_predecessor.weight": mat(n_vocab, shape.selector_rank, 0.1),
            "selector_successor.weight": mat(n_vocab, shape.selector_rank, 0.1),
            "selector_hidden.weight": mat(shape.selector_rank, e, e**-0.5),
        }
    if variant == "dspark":
        # the bias after token t is the target's bigram scores for t (without its branches)
        tensors |= {
            "markov_w1.weight": _rms_normed(embd) * np.float32(shape.markov_scale),
            "markov_w2.weight": lm_head.copy(),
            "conf_proj.weight": mat(1, 2 * e, (2 * e) ** -0.5),
            "conf_proj.bias": np.array([2.0], np.float32),
        }
    return tensors


def write_tiny_dflash(
    path: Path,
    target: Path,
    *,
    variant: str = "dflash",
    seed: int = 1,
    target_layers: tuple[int, ...] = DFLASH_TARGET_LAYERS,
    block_size: int | None = DFLASH_BLOCK_SIZE,
    mask_token: int | None = MASK_TOKEN,
    drop_tensor: str | None = None,
    borrowed_embeddings: bool = False,
    shape: TinyDFlashShape | None = None,
    keys: Mapping[str, FieldSpec | None] | None = None,
    tensors: Mapping[str, np.ndarray | None] | None = None,
    extra_tokens: int = 0,
) -> Path:
    """Write a ``variant`` block drafter for the llama-architecture ``target`` GGUF.

    ``block_size`` or ``mask_token`` None leaves that key out, and ``drop_tensor`` leaves that
    tensor out: the damaged heads the header check must refuse (``target_layers`` and the
    others are written as given, unchecked, for the same reason). ``keys`` replaces or adds
    metadata keys with the value type given (None leaves the key out), ``tensors`` replaces
    or adds tensors (None leaves one out), and ``extra_tokens`` adds tokens to the head's
    vocabulary: hostile heads, written as a faulty converter would. ``borrowed_embeddings``
    leaves out the head's embedding and output, as most exports do: llama.cpp then embeds and
    projects with the target's (the head's context needs ``ctx_other``), and without the mask
    marker the drafts are poor."""
    shape = shape or TinyDFlashShape()
    weights = dflash_tensors(
        target, variant=variant, seed=seed, target_layers=target_layers, shape=shape
    )
    for name in ([drop_tensor] if drop_tensor else []) + (
        ["token_embd.weight", "output.weight"] if borrowed_embeddings else []
    ):
        del weights[name]
    e = weights["output_norm.weight"].shape[0]
    with_changes(weights, tensors)
    kind = gguf.GGUFValueType
    u32, f32, boolean = kind.UINT32, kind.FLOAT32, kind.BOOL
    fields: dict[str, FieldSpec] = {
        "dflash.context_length": (shape.n_ctx, u32, None),
        "dflash.embedding_length": (e, u32, None),
        "dflash.block_count": (1, u32, None),
        "dflash.feed_forward_length": (shape.n_ff, u32, None),
        "dflash.attention.head_count": (shape.n_head, u32, None),
        "dflash.attention.head_count_kv": (shape.n_head, u32, None),
        "dflash.attention.key_length": (shape.head_dim, u32, None),
        "dflash.attention.value_length": (shape.head_dim, u32, None),
        "dflash.rope.dimension_count": (shape.head_dim, u32, None),
        "dflash.rope.freq_base": (shape.rope_freq_base, f32, None),
        "dflash.attention.layer_norm_rms_epsilon": (1e-6, f32, None),
        "general.file_type": (int(gguf.LlamaFileType.ALL_F32), u32, None),
        # the installed gguf package predates these keys (the vendored gguf-py names them)
        "dflash.target_layers": (list(target_layers), kind.ARRAY, kind.INT32),
        "dflash.attention.causal": (False, boolean, None),
    }
    if block_size is not None:
        fields["dflash.block_size"] = (block_size, u32, None)
    if variant == "dflash2":
        fields["dflash.conv_kernel_size"] = (shape.conv_kernel, u32, None)
        fields["dflash.conv_group_size"] = (shape.conv_group, u32, None)
        fields["dflash.selector_rank"] = (shape.selector_rank, u32, None)
        fields["dflash.selector_top_k"] = (shape.selector_top_k, u32, None)
    if variant == "dspark":
        fields["dflash.sample_from_anchor"] = (True, boolean, None)
        fields["dflash.has_confidence_head"] = (True, boolean, None)
    if mask_token is not None:
        fields["tokenizer.ggml.mask_token_id"] = (mask_token, u32, None)
    with_changes(fields, keys)
    writer = open_gguf(path, "dflash")
    tokenizer = _with_extra_tokens(_donor_tokenizer(target), extra_tokens)
    tokenizer += [(key, value, kind, item) for key, (value, kind, item) in fields.items()]
    finish_gguf(writer, weights, tokenizer)
    return path


def _with_extra_tokens(fields: list[TokenizerField], extra: int) -> list[TokenizerField]:
    """The tokenizer ``fields`` with ``extra`` more (unused) tokens at the end."""
    if not extra:
        return fields
    grown: list[TokenizerField] = []
    for key, value, kind, item in fields:
        if kind == gguf.GGUFValueType.ARRAY and isinstance(value, list):
            if key == "tokenizer.ggml.tokens":
                value = value + [f"<extra_{i}>" for i in range(extra)]
            elif key == "tokenizer.ggml.token_type":
                value = value + [4] * extra  # user-defined
            elif key == "tokenizer.ggml.scores":
                value = value + [0.0] * extra
        grown.append((key, value, kind, item))
    return grown


def write_tiny_dflash_pair(
    directory: Path, variant: str = "dflash", *, seed: int = 0
) -> tuple[Path, Path]:
    """A tiny llama target and a ``variant`` block drafter for it: (target, head)."""
    target = directory / "dflash-target.gguf"
    if not target.exists():
        write_dflash_target(target, seed=seed)
    head = write_tiny_dflash(directory / f"{variant}-head.gguf", target, variant=variant)
    return target, head
