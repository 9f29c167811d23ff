"""What a GGUF header says about its model: sizes and layout for memory estimates, the
vocabulary llama.cpp compares between a draft and a target, and the drafting method (MTP
layers, an assistant, an EAGLE-3 or DFlash head) with every count checked before llama.cpp
sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguf.constants import GGUFValueType, Keys, LlamaFileType

from app.gguf.block_heads import BlockDrafting, block_drafting, block_target_mismatch
from app.gguf.compat import (
    DEFAULT_ADD_BOS,
    DEFAULT_ADD_EOS,
    GGUF_TOKENIZER_TO_VOCAB_TYPE,
    VocabInfo,
)
from app.gguf.fields import (
    LLAMA_MAX_LAYERS,
    header_int,
    header_layer_max,
    header_str,
    header_strict_bool,
    header_uint32,
    stored_as,
)
from app.gguf.head_tensors import vocab_rows
from app.gguf.reader import (
    TOKENS_KEY,
    GGUFFormatError,
    GGUFHeader,
)

# Drafting heads a model can carry. The architecture names and the target-layer key come
# from the vendored llama.cpp (src/llama-arch.cpp): the gguf package on PyPI predates them.
NEXTN_KEY = Keys.LLM.NEXTN_PREDICT_LAYERS
TARGET_LAYERS_KEY = "{arch}.target_layers"
ASSISTANT_ARCHITECTURES = frozenset({"gemma4-assistant"})
HEAD_ARCHITECTURES = frozenset({"eagle3", "dflash"})
# Architectures whose next-token graph in the vendored llama.cpp asserts a single head (it
# aborts the process on more): src/models/<arch>.cpp, "only supports a single MTP block".
SINGLE_HEAD_MTP = frozenset(
    {
        "qwen35",
        "qwen35moe",
        "glm4moe",
        "deepseek2",
        "deepseek32",
        "deepseek4",
        "glm-dsa",
        "cohere2moe",
        "nemotron_h_moe",
        "bailingmoe3",
    }
)
EAGLE3_TARGET_LAYERS = 3  # models/eagle3.cpp: exactly three extracted target layers
_HEAD_LABELS = {"eagle3": "EAGLE-3 head", "dflash": "DFlash head"}
_HEAD_ARTICLES = {"eagle3": "an EAGLE-3 head", "dflash": "a DFlash head"}
# llama-model-loader.cpp get_arr into a std::vector<int32_t>: INT32 or UINT32 items only
TARGET_LAYER_TYPES = (GGUFValueType.INT32, GGUFValueType.UINT32)
HEAD_METHODS = frozenset({"assistant", "eagle3", "dflash"})  # drafts for a target, is none
# Hybrid recurrent models (Qwen3-Next, Qwen3.5/3.6): every ``full_attention_interval``-th trunk
# layer is attention, the others a recurrent (gated delta net) layer with a fixed-size state
# (models/qwen35.cpp; llama_hparams::n_embd_r / n_embd_s).
FULL_ATTENTION_INTERVAL_KEY = "{arch}.full_attention_interval"
RECURRENT_LAYERS_KEY = "{arch}.attention.recurrent_layers"
SSM_KEYS = ("conv_kernel", "inner_size", "state_size", "group_count")
DEFAULT_FULL_ATTENTION_INTERVAL = 4  # models/qwen35.cpp, when the key is absent
RECURRENT_STATE_BYTES = 4  # the r and s rows are F32

# Default special tokens per vocab type when the GGUF does not name them (llama-vocab.cpp)
_DEFAULT_BOS = {"spm": 1, "bpe": 11, "wpm": 101}
_DEFAULT_EOS = {"spm": 2, "bpe": 11, "ugm": 1}


def vocab_info(header: GGUFHeader) -> VocabInfo:
    """The vocabulary facts llama.cpp compares between a draft and a target, read as
    llama-vocab.cpp reads them: the add flags only when stored as bools, the special token ids
    only when stored as UINT32 (another type fails the load), an id outside the vocabulary
    replaced by the default, itself none when outside."""
    tokenizer = header_str(header, "tokenizer.ggml.model", "none")
    vocab_type = GGUF_TOKENIZER_TO_VOCAB_TYPE.get(tokenizer, tokenizer)
    tokens = header.get(TOKENS_KEY, ())
    if not isinstance(tokens, tuple) or not tokens:
        raise GGUFFormatError(f"{header.source}: has no tokenizer.ggml.tokens array")
    if not all(isinstance(t, str) for t in tokens):
        raise GGUFFormatError(f"{header.source}: {TOKENS_KEY} should be an array of texts")
    return VocabInfo(
        vocab_type=vocab_type,
        add_bos=header_strict_bool(
            header, "tokenizer.ggml.add_bos_token", DEFAULT_ADD_BOS.get(vocab_type, False)
        ),
        add_eos=header_strict_bool(
            header, "tokenizer.ggml.add_eos_token", DEFAULT_ADD_EOS.get(vocab_type, False)
        ),
        bos_id=_special_token(header, "bos", _DEFAULT_BOS.get(vocab_type, -1), len(tokens)),
        eos_id=_special_token(header, "eos", _DEFAULT_EOS.get(vocab_type, -1), len(tokens)),
        tokens=tokens,
    )


def _special_token(header: GGUFHeader, name: str, default: int, n_vocab: int) -> int:
    """The ``name`` token's id (``tokenizer.ggml.<name>_token_id``), -1 for none: llama.cpp
    keeps the default for an id outside the vocabulary (and has none when the default is
    outside too)."""
    stored = header_uint32(header, f"tokenizer.ggml.{name}_token_id", -1)
    if 0 <= stored < n_vocab:
        return stored
    return default if 0 <= default < n_vocab else -1


def quantization_name(file_type: int | None) -> str:
    if file_type is None:
        return "unknown"
    try:
        name = LlamaFileType(file_type).name
    except ValueError:
        return f"type {file_type}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


@dataclass(frozen=True)
class SelfDrafting:
    """How a model drafts, as its header says: with its own next-token (MTP) layers, as a
    Gemma 4 style assistant of a target, or as an EAGLE-3 / DFlash head of a target."""

    method: str  # "mtp", "assistant", "eagle3", "dflash", or "" for a plain model
    n_heads: int = 0  # next-token layers (MTP only)
    target_layers: tuple[int, ...] = ()  # target layers a head reads (EAGLE-3 / DFlash)
    target_arch: str = ""  # an assistant's target architecture ("gemma4" for gemma4-assistant)
    block: BlockDrafting | None = None  # a DFlash head's block drafter (DFlash, DFlash2, DSpark)

    @property
    def is_head(self) -> bool:
        """An assistant or a head: it drafts for another model and cannot answer alone."""
        return self.method in HEAD_METHODS

    @property
    def name(self) -> str:
        """The drafting method in a few words: "MTP, 1 head", "assistant draft for gemma4",
        "EAGLE-3 head", "DFlash block drafter, 16 tokens a block" or "plain model"."""
        if self.block is not None:
            return self.block.name
        if self.method == "mtp":
            return f"MTP, {self.n_heads} head{'s' * (self.n_heads != 1)}"
        if self.method == "assistant":
            return f"assistant draft for {self.target_arch or 'its target'}"
        return _HEAD_LABELS.get(self.method, "plain model")

    @property
    def label(self) -> str:
        if self.method == "mtp":
            return f"drafts for itself (MTP, {self.n_heads} head{'s' * (self.n_heads != 1)})"
        if self.method == "assistant":
            return "assistant draft (drafts from its target's hidden state)"
        if self.block is not None:
            return self.block.name
        return _HEAD_LABELS.get(self.method, "")


def self_drafting(header: GGUFHeader) -> SelfDrafting:
    """The drafting method the header declares, every count and layer id checked before
    llama.cpp sees it (it asserts, taking the whole process down, on a block count of 0 or
    over 512 and on a next-token count above the block count)."""
    arch = header_str(header, "general.architecture", "unknown")
    # absent, llama.cpp refuses the model cleanly; present and out of range, it asserts
    # both read as UINT32 and as nothing else (another stored type fails the load)
    n_layer_all = header_uint32(header, f"{arch}.block_count", 0, low=1, high=LLAMA_MAX_LAYERS)
    n_nextn = header_uint32(header, NEXTN_KEY.format(arch=arch), 0, high=LLAMA_MAX_LAYERS)
    if n_nextn > n_layer_all:
        raise GGUFFormatError(
            f"{header.source}: {NEXTN_KEY.format(arch=arch)} = {n_nextn} is more than the "
            f"{n_layer_all} blocks the model has; the file is malformed"
        )
    if arch in ASSISTANT_ARCHITECTURES:
        return SelfDrafting("assistant", n_nextn, target_arch=arch.removesuffix("-assistant"))
    if arch == "dflash":
        return SelfDrafting(arch, 0, _target_layers(header, arch), block=block_drafting(header))
    if arch in HEAD_ARCHITECTURES:
        return SelfDrafting(arch, 0, _target_layers(header, arch))
    if n_nextn > 1 and arch in SINGLE_HEAD_MTP:
        raise GGUFFormatError(
            f"{header.source}: {NEXTN_KEY.format(arch=arch)} = {n_nextn}, but llama.cpp runs "
            f"{arch} with exactly one next-token layer; the file is not one it can load"
        )
    if n_nextn:
        return SelfDrafting("mtp", n_nextn)
    return SelfDrafting("")


def _target_layers(header: GGUFHeader, arch: str) -> tuple[int, ...]:
    key = TARGET_LAYERS_KEY.format(arch=arch)
    value = header.get(key)
    if (
        not isinstance(value, tuple)
        or not value
        or not all(type(v) is int and 0 <= v < LLAMA_MAX_LAYERS for v in value)
    ):
        raise GGUFFormatError(
            f"{header.source}: {_HEAD_ARTICLES[arch]} needs {key}, a list of target layer "
            f"numbers from 0 to {LLAMA_MAX_LAYERS - 1}; found "
            f"{'nothing' if value is None else stored_as(header, key)}"
        )
    if header.item_types.get(key, TARGET_LAYER_TYPES[0]) not in TARGET_LAYER_TYPES:
        raise GGUFFormatError(
            f"{header.source}: {key} should be an array of INT32 or UINT32 layer numbers, found "
            f"{stored_as(header, key)}; llama.cpp reads no other type and would refuse the "
            "file"
        )
    if arch == "eagle3" and len(value) != EAGLE3_TARGET_LAYERS:
        raise GGUFFormatError(
            f"{header.source}: an EAGLE-3 head reads exactly {EAGLE3_TARGET_LAYERS} target "
            f"layers; {key} lists {len(value)}"
        )
    return value


@dataclass(frozen=True)
class ModelFacts:
    architecture: str
    name: str
    n_layer: int
    n_head: int
    n_head_kv: int
    n_embd: int
    head_dim_k: int
    head_dim_v: int
    context_length: int
    file_type: int | None
    quantization: str
    tensor_data_size: int
    n_params: int
    vocab_size: int
    split_count: int = 1
    drafting: SelfDrafting = field(default_factory=lambda: SelfDrafting(""))
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # Layers the main context keeps K and V for: the trunk's attention layers (None: every
    # block, the rule for files whose layout is not known here). Next-token layers are not
    # among them: llama.cpp caches those in the MTP context only.
    attention_layers: int | None = None
    recurrent_state_bytes: int = 0  # one sequence's recurrent state, one snapshot (hybrids)
    mtp_weight_bytes: int = 0  # of the tensor data: the next-token layers' weights

    def kv_bytes(self, n_ctx: int, bytes_per_element: float) -> int:
        """K and V cache for ``n_ctx`` positions at the given cache element size."""
        layers = self.n_layer if self.attention_layers is None else self.attention_layers
        return self._kv(layers, n_ctx, bytes_per_element)

    def mtp_kv_bytes(self, n_ctx: int, bytes_per_element: float) -> int:
        """The MTP context's cache: one attention layer's K and V per next-token layer
        (llama-model.cpp keeps only ``il >= n_layer()`` there)."""
        heads = self.drafting.n_heads if self.drafting.method == "mtp" else 0
        return self._kv(heads, n_ctx, bytes_per_element)

    def _kv(self, layers: int, n_ctx: int, bytes_per_element: float) -> int:
        per_position = layers * self.n_head_kv * (self.head_dim_k + self.head_dim_v)
        return int(per_position * n_ctx * bytes_per_element)


def model_facts(header: GGUFHeader) -> ModelFacts:
    arch = header_str(header, "general.architecture", "unknown")

    def arch_int(suffix: str, default: int, high: int) -> int:
        return header_int(header, f"{arch}.{suffix}", default, high=high)

    n_embd = arch_int("embedding_length", 0, 1 << 20)
    n_head = header_layer_max(header, f"{arch}.attention.head_count", 0, 1 << 16)
    n_head_kv = header_layer_max(header, f"{arch}.attention.head_count_kv", n_head, 1 << 16)
    default_head_dim = n_embd // n_head if n_head else 0
    file_type = header_int(header, "general.file_type", -1, high=1 << 16)
    tokens = header.get(TOKENS_KEY, ())
    drafting = self_drafting(header)
    n_layer = arch_int("block_count", 0, LLAMA_MAX_LAYERS)
    n_trunk = n_layer - drafting.n_heads if drafting.method == "mtp" else n_layer
    recurrent = _recurrent_layers(header, arch, n_trunk)
    return ModelFacts(
        architecture=arch,
        name=header_str(header, "general.name", Path(header.source).name),
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_embd=n_embd,
        head_dim_k=arch_int("attention.key_length", default_head_dim, 1 << 20),
        head_dim_v=arch_int("attention.value_length", default_head_dim, 1 << 20),
        context_length=arch_int("context_length", 0, 1 << 40),
        file_type=None if file_type < 0 else file_type,
        quantization=quantization_name(None if file_type < 0 else file_type),
        tensor_data_size=header.tensor_data_size,
        n_params=header.n_params,
        vocab_size=len(tokens) if isinstance(tokens, tuple) else 0,
        split_count=header_int(header, "split.count", 1, low=1, high=99_999),
        drafting=drafting,
        attention_layers=(n_trunk - recurrent if recurrent or drafting.method == "mtp" else None),
        recurrent_state_bytes=recurrent * _recurrent_row_bytes(header, arch) if recurrent else 0,
        mtp_weight_bytes=_layer_bytes(header, range(n_trunk, n_layer)),
    )


def _recurrent_layers(header: GGUFHeader, arch: str, n_trunk: int) -> int:
    """How many trunk layers are recurrent in a hybrid model with a gated-delta-net state
    (the ``ssm`` keys); 0 for every other model."""
    if header.get(f"{arch}.ssm.inner_size") is None:
        return 0
    flags = header.get(RECURRENT_LAYERS_KEY.format(arch=arch))
    if isinstance(flags, tuple) and all(type(f) in (bool, int) for f in flags):
        return sum(1 for il, flag in enumerate(flags) if il < n_trunk and flag)
    if header.get(FULL_ATTENTION_INTERVAL_KEY.format(arch=arch)) is None:
        return 0  # a pure state-space model: its state is not estimated here
    interval = header_int(
        header,
        FULL_ATTENTION_INTERVAL_KEY.format(arch=arch),
        DEFAULT_FULL_ATTENTION_INTERVAL,
        low=1,
        high=LLAMA_MAX_LAYERS,
    )
    return sum(1 for il in range(n_trunk) if (il + 1) % interval)


def _recurrent_row_bytes(header: GGUFHeader, arch: str) -> int:
    """One recurrent layer's state for one sequence: the convolution rows
    ``(d_conv - 1) * (d_inner + 2 * n_group * d_state)`` and the state ``d_state * d_inner``."""
    conv, inner, state, groups = (
        header_int(header, f"{arch}.ssm.{key}", 0, high=1 << 24) for key in SSM_KEYS
    )
    conv_rows = max(conv - 1, 0) * (inner + 2 * groups * state)
    return (conv_rows + state * inner) * RECURRENT_STATE_BYTES


def _layer_bytes(header: GGUFHeader, layers: range) -> int:
    if not layers:
        return 0
    prefixes = tuple(f"blk.{il}." for il in layers)
    return sum(t.n_bytes for t in header.tensors if t.name.startswith(prefixes))


def head_mismatch(target: GGUFHeader, draft: SelfDrafting) -> str | None:
    """Why a head or an assistant cannot draft for this target, in words; None when it can
    (or when the draft is a plain model: its vocabulary is checked elsewhere).

    llama.cpp aborts the whole process when an EAGLE-3 or DFlash head reads a layer past the
    target's.
    """
    if not draft.is_head:
        return None
    facts = model_facts(target)
    if draft.block is not None:
        trunk = facts.n_layer - facts.drafting.n_heads
        arch, width = facts.architecture, facts.n_embd
        return block_target_mismatch(
            draft.block, draft.target_layers, arch, width, trunk, vocab_rows(target)
        )
    if draft.method == "assistant":
        if draft.target_arch and draft.target_arch != facts.architecture:
            return (
                f"an assistant for {draft.target_arch} models cannot draft for a "
                f"{facts.architecture} model"
            )
        return None
    trunk = facts.n_layer - facts.drafting.n_heads
    outside = [layer for layer in draft.target_layers if layer >= trunk]
    if outside:
        return (
            f"the head reads target layers {list(draft.target_layers)}, but the target has "
            f"{trunk}: it was trained for a deeper model"
        )
    return None
