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

from app.gguf.fields import LLAMA_MAX_LAYERS, header_strict_bool, header_uint32
from app.gguf.head_tensors import (
    D2T,
    d2t_damage,
    dims_text,
    key_value_widths,
    missing_tensors,
    row_count,
    shape_is,
    tensors_by_name,
)
from app.gguf.reader import TOKENS_KEY, GGUFFormatError, GGUFHeader, TensorInfo

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
HYPER_CONNECTION_KEY = "dflash.hyper_connection.count"
# DeepSeek-V4's DSpark layout (``dflash.hyper_connection.count`` > 0): the keys llama.cpp
# requires for it (src/models/dflash.cpp load_arch_hparams), the UINT32 ones first
_HC_UINT32_KEYS = (
    "attention.q_lora_rank",
    "attention.sliding_window",
    "expert_shared_count",
    "expert_gating_func",
    "attention.output_group_count",
    "attention.output_lora_rank",
    "hyper_connection.sinkhorn_iterations",
)
_HC_OTHER_KEYS = (
    "expert_feed_forward_length",
    "expert_weights_scale",
    "expert_weights_norm",
    "swiglu_clamp_exp",
    "hyper_connection.epsilon",
)
SQRT_SOFTPLUS_GATING = 4  # LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS, the only one it drafts with


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
    vocab_size: int = 0  # the head's own vocabulary (its tokenizer.ggml.tokens)
    # llama.cpp borrows the target's token embedding and output when the head has none
    own_embeddings: bool = True  # token_embd.weight
    output_rows: int = 0  # rows of its own output (output.weight, else token_embd); 0: none
    d2t_rows: int = 0  # entries of its reduced-vocabulary map (d2t); 0: none

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
    """The block drafter a ``dflash`` header declares, each value type- and range-checked as
    llama.cpp reads it (it asserts, taking the process down, on a DSpark block size of 0 or
    none, and refuses a key stored with another type than the one it reads)."""
    tensors = tensors_by_name(header)
    dspark, dflash2 = MARKOV_HEAD in tensors, SELECTOR in tensors
    top_k = header_uint32(header, "dflash.selector_top_k", 0, high=1 << 16)
    variant = "DSpark" if dspark else "DFlash2" if dflash2 or top_k > 0 else "DFlash"
    if BLOCK_KEY not in header.metadata and variant != "DFlash":
        raise GGUFFormatError(
            f"{header.source}: a {variant} head needs {BLOCK_KEY}, the block it was trained "
            "with; the header names none"
        )
    block = header_uint32(header, BLOCK_KEY, DEFAULT_BLOCK_SIZE)
    if not 1 < block <= MAX_BLOCK_SIZE:
        raise GGUFFormatError(
            f"{header.source}: {BLOCK_KEY} = {block:,}; a block drafter's block holds "
            f"2 to {MAX_BLOCK_SIZE:,} tokens (16 is usual)"
        )
    tokens = header.get(TOKENS_KEY)
    n_vocab = len(tokens) if isinstance(tokens, tuple) else 0
    mask = header_uint32(header, MASK_KEY, -1)
    if mask >= 0 and n_vocab and mask >= n_vocab:
        raise GGUFFormatError(
            f"{header.source}: {MASK_KEY} = {mask:,} is outside the vocabulary of "
            f"{n_vocab:,} tokens; llama.cpp would draft with no mask token"
        )
    hidden = _required_uint32(header, "dflash.embedding_length", "its width", 1, 1 << 20)
    _required_uint32(header, "dflash.block_count", "its layer count", 1, LLAMA_MAX_LAYERS)
    header_uint32(header, HYPER_CONNECTION_KEY, 0, high=1 << 16)
    embd, output = tensors.get("token_embd.weight"), tensors.get("output.weight")
    own_output = output or embd  # llama.cpp projects with token_embd when output is absent
    d2t = tensors.get(D2T)
    return BlockDrafting(
        variant=variant,
        block_size=block,
        sample_from_anchor=header_strict_bool(header, "dflash.sample_from_anchor", True),
        causal=header_strict_bool(header, "dflash.attention.causal", False),
        mask_token=mask,
        hidden_size=hidden,
        selector_top_k=top_k,
        confidence_head=header_strict_bool(header, "dflash.has_confidence_head", True) and dspark,
        vocab_size=n_vocab,
        own_embeddings=embd is not None,
        output_rows=row_count(own_output) if own_output is not None else 0,
        d2t_rows=d2t.shape[0] if d2t is not None else 0,
    )


def _required_uint32(header: GGUFHeader, key: str, what: str, low: int, high: int) -> int:
    if key not in header.metadata:
        raise GGUFFormatError(
            f"{header.source}: a DFlash head needs {key}, {what}; the header names none, and "
            "llama.cpp would refuse the file"
        )
    return header_uint32(header, key, 0, low=low, high=high)


def block_head_damage(header: GGUFHeader, drafting: BlockDrafting) -> str | None:
    """What a block drafter lacks that llama.cpp needs to load or to draft with it, in words;
    None when nothing."""
    if drafting.mask_token < 0:
        return f"it names no mask token ({MASK_KEY}), so llama.cpp cannot build a block"
    tensors = tensors_by_name(header)
    needed = ["fc.weight", "enc.output_norm.weight", "output_norm.weight"]
    if header_uint32(header, HYPER_CONNECTION_KEY, 0) > 0:  # DeepSeek-V4's DSpark layout
        problem = _hyper_connection_damage(header)
        if problem is not None:
            return problem
    else:
        # one width: the drafting graph asserts it (``n_embd_head_v == n_embd_head_k``)
        widths = key_value_widths(header, "dflash", drafting.hidden_size)
        if widths is not None:
            return f"{widths} and aborts the process otherwise"
        n_layer = header_uint32(header, "dflash.block_count", 0, high=LLAMA_MAX_LAYERS)
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
        problem = _dflash2_damage(header, drafting.hidden_size)
        if problem is not None:
            return problem
    if drafting.variant == "DSpark":
        needed.append("markov_w2.weight")
    missing = missing_tensors(needed, tensors)
    if missing is not None:
        return missing
    return _fc_damage(header, tensors["fc.weight"], drafting.hidden_size) or d2t_damage(
        tensors.get(D2T), drafting.output_rows, drafting.vocab_size
    )


def _hyper_connection_damage(header: GGUFHeader) -> str | None:
    """DeepSeek-V4's DSpark layout: the keys llama.cpp requires for it, and the values it
    aborts the process on (no output group, no sliding window) or refuses."""
    count = header_uint32(header, HYPER_CONNECTION_KEY, 0)
    absent = [k for k in _HC_UINT32_KEYS + _HC_OTHER_KEYS if f"dflash.{k}" not in header.metadata]
    if absent:
        more = f" (and {len(absent) - 1} more of its keys)" if len(absent) > 1 else ""
        return (
            f"a head with hyper-connections ({HYPER_CONNECTION_KEY} = {count}) needs "
            f"dflash.{absent[0]}{more}; the header names none"
        )
    value = {k: header_uint32(header, f"dflash.{k}", 0) for k in _HC_UINT32_KEYS}
    if value["attention.output_group_count"] == 0:
        return (
            "dflash.attention.output_group_count = 0: the attention output needs at least one "
            "group (llama.cpp aborts the process on 0)"
        )
    if value["attention.sliding_window"] == 0:
        return (
            "dflash.attention.sliding_window = 0: a head with hyper-connections drafts in a "
            "sliding window of at least one position (llama.cpp aborts the process on 0)"
        )
    if value["expert_gating_func"] != SQRT_SOFTPLUS_GATING:
        return (
            f"dflash.expert_gating_func = {value['expert_gating_func']}, but llama.cpp drafts "
            f"with a head with hyper-connections only with sqrt-softplus gating "
            f"({SQRT_SOFTPLUS_GATING})"
        )
    ratios = header.get("dflash.attention.compress_ratios")
    if isinstance(ratios, tuple) and any(ratios):
        return (
            "dflash.attention.compress_ratios is not all 0: llama.cpp drafts only with "
            "uncompressed attention in a head with hyper-connections"
        )
    return None


def _dflash2_damage(header: GGUFHeader, hidden: int) -> str | None:
    """DFlash2's selector and convolution sizes, as llama.cpp's ``load_arch_tensors`` checks
    them."""
    size = {k: header_uint32(header, f"dflash.{k}", 0, high=1 << 16) for k in _DFLASH2_KEYS}
    absent = [k for k in _DFLASH2_KEYS if not size[k]]
    if absent:
        return f"a DFlash2 head needs dflash.{absent[0]} (and its selector's other sizes)"
    group, top_k = size["conv_group_size"], size["selector_top_k"]
    if hidden % group:
        return (
            f"dflash.conv_group_size = {group:,} does not divide the head's width of "
            f"{hidden:,}: llama.cpp needs convolution groups that split it evenly"
        )
    if hidden < top_k * (top_k + 1):
        return (
            f"dflash.selector_top_k = {top_k:,} needs a head at least {top_k * (top_k + 1):,} "
            f"wide (top-k x (top-k + 1)) for its selector; this one is {hidden:,}"
        )
    return None


def _fc_damage(header: GGUFHeader, fc: TensorInfo, hidden: int) -> str | None:
    """``fc`` fuses the target layers the head reads: one row of the head's width for each."""
    layers = header.get("dflash.target_layers")
    n_layers = len(layers) if isinstance(layers, tuple) else 0
    if not n_layers or shape_is(fc, n_layers * hidden, hidden):
        return None
    wanted = dims_text((n_layers * hidden, hidden))
    return (
        f"fc.weight is {dims_text(fc.shape)}, but the head reads {n_layers} target layers "
        f"(dflash.target_layers) of {hidden:,}: it should be {wanted}"
    )


def block_target_mismatch(
    drafting: BlockDrafting,
    target_layers: tuple[int, ...],
    arch: str,
    n_embd: int,
    n_trunk: int,
    target_rows: tuple[int, int] = (0, 0),
) -> str | None:
    """Why a block drafter cannot draft for a target (its architecture, width, trunk layers
    and, for a head that borrows them, the rows of its token embedding and output:
    ``target_rows``), in words; None when it can. llama.cpp aborts the process on a layer the
    target does not hand out, and on a borrowed table too small for the head; it reads rows
    of the wrong width for another target's."""
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
    return _borrowing_mismatch(drafting, *target_rows)


def _borrowing_mismatch(drafting: BlockDrafting, embd_rows: int, output_rows: int) -> str | None:
    """A head without its own token embedding embeds its mask token with the target's; one
    without its own output scores with the target's, which must then score the head's
    vocabulary (or its reduced-vocabulary map)."""
    if not drafting.own_embeddings and embd_rows and drafting.mask_token >= embd_rows:
        return (
            f"the head has no token embedding of its own and borrows the target's, which has "
            f"{embd_rows:,} tokens, but its mask token ({MASK_KEY}) is {drafting.mask_token:,}:"
            " it was made for another target"
        )
    if drafting.output_rows or not output_rows:
        return None
    scored, what = (
        (drafting.d2t_rows, "its reduced-vocabulary map (d2t)")
        if drafting.d2t_rows
        else (drafting.vocab_size, "its vocabulary")
    )
    if scored != output_rows:
        return (
            f"the head has no output of its own and borrows the target's, which scores "
            f"{output_rows:,} tokens, but {what} has {scored:,}: it was made for another target"
        )
    return None
