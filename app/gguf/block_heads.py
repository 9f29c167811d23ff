"""What a block drafter's header says (``general.architecture = dflash``: DFlash, DFlash2 or
DSpark), checked before llama.cpp sees it.

A block drafter reads the inputs of some of its target's layers and drafts a whole block in
one pass: the last token, then mask tokens. The keys and tensors are the vendored llama.cpp's
(src/models/dflash.cpp, common/speculative.cpp); llama-server tells DSpark from DFlash by the
Markov head (``markov_w1.weight``), and DFlash2 by its selector (a positive
``dflash.selector_top_k``, with ``selector_hidden.weight``).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.gguf.fields import header_bool, header_int
from app.gguf.reader import TOKENS_KEY, GGUFFormatError, GGUFHeader

BLOCK_KEY = "dflash.block_size"
MASK_KEY = "tokenizer.ggml.mask_token_id"
DEFAULT_BLOCK_SIZE = 16  # common/speculative.cpp, when the header names none
MAX_BLOCK_SIZE = 1024  # trained blocks are 16 or so; a larger one is a damaged header
MARKOV_HEAD = "markov_w1.weight"
SELECTOR = "selector_hidden.weight"
# Target architectures whose graphs hand out their layers' inputs (src/models/*.cpp set
# ``t_layer_inp[il]``); a target without them makes llama.cpp assert and abort the process.
LAYER_INPUT_ARCHITECTURES = frozenset(
    {
        "llama",
        "qwen3",
        "qwen3moe",
        "qwen3next",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "gemma4",
        "gpt-oss",
        "lfm2",
        "minimax-01",
        "minimax-m2",
        "muse-glimmer",
        "nanbeige",
        "hunyuan_vl",
        "bailingmoe3",
        "deepseek4",
        "nemotron_h",
        "mimo2",
    }
)
# ... and these the input past their last trunk layer as well (``t_layer_inp[n_layer]``)
PAST_TRUNK_ARCHITECTURES = frozenset({"deepseek4", "nemotron_h", "mimo2"})
_LAYER_TENSORS = (
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_output",
    "attn_q_norm",
    "attn_k_norm",
    "ffn_norm",
    "ffn_gate",
    "ffn_down",
    "ffn_up",
)
_DFLASH2_KEYS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")


@dataclass(frozen=True)
class BlockDrafting:
    """A block drafter as its header describes it."""

    variant: str  # "DFlash", "DFlash2" or "DSpark"
    block_size: int
    sample_from_anchor: bool  # DSpark: the anchor's own position drafts too
    causal: bool  # attention inside the block (llama.cpp's default: not causal)
    mask_token: int  # -1: the header names none
    hidden_size: int  # the head's width, which its target must have
    selector_top_k: int = 0  # DFlash2
    confidence_head: bool = False  # DSpark

    @property
    def max_draft(self) -> int:
        """The most tokens one block drafts: DSpark reading its anchor fills the block, the
        others leave the anchor's place."""
        if self.variant == "DSpark" and self.sample_from_anchor:
            return self.block_size
        return self.block_size - 1

    @property
    def name(self) -> str:
        """ "DFlash block drafter, 16 tokens a block"."""
        return f"{self.variant} block drafter, {self.block_size} tokens a block"


def block_drafting(header: GGUFHeader) -> BlockDrafting:
    """The block drafter a ``dflash`` header declares, each value range-checked (llama.cpp
    asserts, taking the process down, on a DSpark block size of 0 or none)."""
    tensors = {t.name for t in header.tensors}
    dspark, dflash2 = MARKOV_HEAD in tensors, SELECTOR in tensors
    top_k = header_int(header, "dflash.selector_top_k", 0, high=1 << 16)
    variant = "DSpark" if dspark else "DFlash2" if dflash2 or top_k > 0 else "DFlash"
    if BLOCK_KEY not in header.metadata and variant != "DFlash":
        raise GGUFFormatError(
            f"{header.source}: a {variant} head needs {BLOCK_KEY}, the block it was trained "
            "with; the header names none"
        )
    block = header_int(header, BLOCK_KEY, DEFAULT_BLOCK_SIZE, high=1 << 32)
    if not 1 < block <= MAX_BLOCK_SIZE:
        raise GGUFFormatError(
            f"{header.source}: {BLOCK_KEY} = {block:,}; a block drafter's block holds "
            f"2 to {MAX_BLOCK_SIZE:,} tokens (16 is usual)"
        )
    tokens = header.get(TOKENS_KEY)
    n_vocab = len(tokens) if isinstance(tokens, tuple) else 0
    mask = header_int(header, MASK_KEY, -1, low=0, high=1 << 32)
    if mask >= 0 and n_vocab and mask >= n_vocab:
        raise GGUFFormatError(
            f"{header.source}: {MASK_KEY} = {mask:,} is outside the vocabulary of "
            f"{n_vocab:,} tokens; llama.cpp would draft with no mask token"
        )
    return BlockDrafting(
        variant=variant,
        block_size=block,
        sample_from_anchor=header_bool(header, "dflash.sample_from_anchor", True),
        causal=header_bool(header, "dflash.attention.causal", False),
        mask_token=mask,
        hidden_size=header_int(header, "dflash.embedding_length", 0, high=1 << 20),
        selector_top_k=top_k,
        confidence_head=dspark and header_bool(header, "dflash.has_confidence_head", True),
    )


def block_head_damage(header: GGUFHeader, drafting: BlockDrafting) -> str | None:
    """What a block drafter lacks that llama.cpp needs to load or to draft with it, in words;
    None when nothing."""
    if drafting.mask_token < 0:
        return f"it names no mask token ({MASK_KEY}), so llama.cpp cannot build a block"
    tensors = {t.name for t in header.tensors}
    needed = ["fc.weight", "enc.output_norm.weight", "output_norm.weight"]
    if header.get("dflash.hyper_connection.count") is None:  # not DeepSeek-V4's DSpark layout
        n_layer = header_int(header, "dflash.block_count", 0, high=1 << 16)
        layer_tensors = list(_LAYER_TENSORS)
        if drafting.variant == "DFlash2":
            layer_tensors += ["attn_conv_base", "attn_conv_proj", "ffn_conv_base", "ffn_conv_proj"]
        for il in range(n_layer):
            needed += [
                f"blk.{il}.{name}" + ("" if name.endswith("_base") else ".weight")
                for name in layer_tensors
            ]
    if drafting.variant == "DFlash2":
        needed += ["selector_predecessor.weight", "selector_successor.weight"]
        absent = [k for k in _DFLASH2_KEYS if not header_int(header, f"dflash.{k}", 0)]
        if absent:
            return f"a DFlash2 head needs dflash.{absent[0]} (and its selector's other sizes)"
    if drafting.variant == "DSpark":
        needed.append("markov_w2.weight")
    missing = [name for name in needed if name not in tensors]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        return f"tensor {missing[0]}{more} is missing"
    return None


def block_target_mismatch(
    drafting: BlockDrafting,
    target_layers: tuple[int, ...],
    arch: str,
    n_embd: int,
    n_trunk: int,
) -> str | None:
    """Why a block drafter cannot draft for a target (its architecture, width and trunk
    layers), in words; None when it can. llama.cpp aborts the process on a layer the target
    does not hand out, and reads rows of the wrong width for another target's."""
    if arch not in LAYER_INPUT_ARCHITECTURES:
        return (
            f"llama.cpp cannot hand a {arch} model's layer inputs to a block drafter; it "
            f"reads them from {', '.join(sorted(LAYER_INPUT_ARCHITECTURES))} models"
        )
    if drafting.hidden_size and drafting.hidden_size != n_embd:
        return (
            f"the head is {drafting.hidden_size:,} wide and reads a target as wide; this one "
            f"is {n_embd:,}: it was trained for another model"
        )
    last = n_trunk if arch in PAST_TRUNK_ARCHITECTURES else n_trunk - 1
    if any(layer > last for layer in target_layers):
        return (
            f"the head reads target layers {list(target_layers)}, but the target has "
            f"{n_trunk}: it was trained for a deeper model"
        )
    return None
