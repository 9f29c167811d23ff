"""Will a draft/target pair fit in memory? Hardware detection and a memory estimate.

The estimate adds, for both models: the weights (the GGUF tensor data), the KV cache
(attention layers × n_head_kv × (head_dim_k + head_dim_v) × n_ctx × bytes per cache element),
a hybrid model's recurrent state with its rollback snapshots, and a compute buffer, then a
margin for the backend's own allocations. A target that drafts for itself with its next-token
(MTP) layers adds the MTP context: one attention layer's K and V per next-token layer at the
same context size, and a second compute buffer (llama.cpp reserves one per context; users ran
out of memory with MTP for exactly these, llama.cpp #27282). Its layers' weights are already
in the file's size. A block drafter (DFlash, DFlash2, DSpark) as the draft adds what the
engine's ``BlockHead`` has llama.cpp allocate: the head's own context at the target's context
size (its cache is always f16: the context is made with llama.cpp's defaults), a compute
buffer for a batch of target features, the block's output rows, and on the target's side the
inputs of the layers the head reads, kept once in the target's graph and once on the host.
The whole is compared with the free memory of the GPU devices (layers are split
across them by free memory, as llama.cpp does by default) or, on a CPU build, with the
available system RAM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from app.engine.config import KV_TYPES
from app.engine.llama.hardware import Device, Hardware
from app.gguf.facts import ModelFacts

MIB = 1 << 20
# bytes per cached element of each KV-cache type llama.cpp is offered (ggml's block sizes)
KV_BYTES_PER_ELEMENT = {
    name: GGML_QUANT_SIZES[GGMLQuantizationType[name.upper()]][1]
    / GGML_QUANT_SIZES[GGMLQuantizationType[name.upper()]][0]
    for name in KV_TYPES
}
N_UBATCH = 512
# Recurrent-state snapshots the engine keeps per sequence on a hybrid target, so a rejected
# draft can be rolled back (llama.cpp's ``n_rs_seq``: 1 + n_rs_seq rows of state per layer;
# app.engine keeps as many as the default longest draft).
ROLLBACK_SNAPSHOTS = 16
MARGIN_FRACTION = 0.05
MARGIN_FIXED = 300 * MIB  # backend context, scratch and fragmentation per process
# Order used to pick "the best quantization that fits": better quality first. F32/F16/BF16
# are left last: they rarely pay off against Q8_0 for local decoding speed. Every name the
# Hub's file names use (see hub._QUANT_RE) has a place.
QUALITY_ORDER = (
    "Q8_0",
    "Q8_K",
    "Q6_K_XL",
    "Q6_K_L",
    "Q6_K",
    "Q5_K_XL",
    "Q5_K_L",
    "Q5_K_M",
    "Q5_1",
    "Q5_K_S",
    "Q5_0",
    "Q4_K_XL",
    "Q4_K_L",
    "Q4_K_M",
    "Q4_1",
    "MXFP4_MOE",
    "MXFP4",
    "Q4_K_S",
    "IQ4_NL",
    "IQ4_XS",
    "Q4_0",
    "Q3_K_XL",
    "Q3_K_L",
    "Q3_K_M",
    "IQ3_M",
    "IQ3_S",
    "Q3_K_S",
    "IQ3_XS",
    "IQ3_XXS",
    "Q2_K_XL",
    "Q2_K_L",
    "Q2_K",
    "Q2_K_S",
    "IQ2_M",
    "IQ2_S",
    "IQ2_XS",
    "IQ2_XXS",
    "TQ2_0",
    "IQ1_M",
    "IQ1_S",
    "TQ1_0",
    "BF16",
    "F16",
    "F32",
)
# A draft is there to be cheap, yet below 4 bits it agrees with the target much less often:
# the smallest 4-bit file is the sensible default, then 5, 6 and 8 bits, then fewer bits,
# then the unquantized files.
_FOUR_BIT_AND_UP = QUALITY_ORDER[: QUALITY_ORDER.index("Q4_0") + 1]
DRAFT_SPEED_ORDER = (
    tuple(reversed(_FOUR_BIT_AND_UP))
    + QUALITY_ORDER[QUALITY_ORDER.index("Q3_K_XL") : QUALITY_ORDER.index("BF16")]
    + ("BF16", "F16", "F32")
)


class FitLabel(str, Enum):
    FITS = "fits"
    TIGHT = "tight"
    NO_FIT = "does not fit"


@dataclass(frozen=True)
class ModelMemory:
    weights: int
    kv: int
    compute: int
    recurrent: int = 0  # a hybrid model's recurrent state, rollback snapshots included
    mtp_kv: int = 0  # the MTP context's K and V (one attention layer per next-token layer)
    mtp_compute: int = 0  # the MTP context's own compute buffer
    mtp_weights: int = 0  # of ``weights``: the next-token layers, loaded to draft with them
    # A block drafter's context ("DFlash", "DFlash2", "DSpark"; "" for any other model):
    # ``kv`` and ``compute`` are then that context's, and these what it adds beside them
    block_variant: str = ""
    block_outputs: int = 0  # the host rows a block's pass fills (logits, next-token rows)
    target_layer_inputs: int = 0  # the target's layer inputs kept for the head

    @property
    def mtp(self) -> int:
        """What drafting with the next-token layers adds beyond the file's weights."""
        return self.mtp_kv + self.mtp_compute

    @property
    def block_context(self) -> int:
        """A block drafter's context: its cache, compute buffer and output rows."""
        return self.kv + self.compute + self.block_outputs if self.block_variant else 0

    @property
    def total(self) -> int:
        extra = self.block_outputs + self.target_layer_inputs
        return self.weights + self.kv + self.compute + self.recurrent + self.mtp + extra


def model_memory(
    facts: ModelFacts,
    weights: int,
    n_ctx: int,
    kv_type: str = "f16",
    *,
    mtp: bool = False,
    snapshots: int = ROLLBACK_SNAPSHOTS,
) -> ModelMemory:
    """``facts``'s memory at ``n_ctx`` tokens; ``mtp``: drafting with its next-token layers
    (ignored for a model without them); ``snapshots``: recurrent-state snapshots kept for
    rollback (a hybrid model only)."""
    try:
        per_element = KV_BYTES_PER_ELEMENT[kv_type]
    except KeyError:
        raise ValueError(
            f"unknown KV cache type {kv_type!r}; use one of {', '.join(KV_BYTES_PER_ELEMENT)}"
        ) from None
    compute = _compute_bytes(facts, n_ctx)
    memory = ModelMemory(
        weights,
        facts.kv_bytes(n_ctx, per_element),
        compute,
        recurrent=facts.recurrent_state_bytes * (1 + max(snapshots, 0)),
    )
    if not mtp or facts.drafting.method != "mtp":
        return memory
    return replace(
        memory,
        mtp_kv=facts.mtp_kv_bytes(n_ctx, per_element),
        mtp_compute=compute,  # the MTP context reserves a buffer of the same batch size
        mtp_weights=facts.mtp_weight_bytes,
    )


def _compute_bytes(facts: ModelFacts, n_ctx: int, vocab_size: int = 0) -> int:
    """A context's compute buffer for one micro-batch: its largest live intermediate, the
    logits or the attention scores (the latter disappear with flash attention, so this errs
    on the safe side), and a few rows of the model's width."""
    widest = max(vocab_size or facts.vocab_size, facts.n_head * n_ctx)
    return 4 * N_UBATCH * (widest + 8 * facts.n_embd)


def block_head_memory(
    head: ModelFacts, weights: int, target: ModelFacts, n_ctx: int
) -> ModelMemory:
    """A block drafter's memory beside ``target`` at ``n_ctx`` tokens, as the engine's
    ``BlockHead`` creates its context: the target's context size and batch, f16 cache (the
    context takes llama.cpp's defaults, not the pair's KV type), every batch position an
    output in llama.cpp's worst-case graph (it sizes a ``dflash`` context's outputs by the
    batch whatever ``n_outputs_max`` asks: ``llama_model_has_encoder`` is true for it)."""
    block = head.drafting.block
    if block is None:
        raise ValueError(f"{head.name} is not a block drafter")
    vocab = head.vocab_size or target.vocab_size
    feature_width = len(head.drafting.target_layers) * target.n_embd
    compute = _compute_bytes(head, n_ctx, vocab) + 4 * N_UBATCH * feature_width
    # llama.cpp keeps next-token rows for the block's outputs only, except DFlash2's
    # selector, whose lattice fills a row for every batch position
    next_token_rows = N_UBATCH if block.variant == "DFlash2" else block.block_size
    return ModelMemory(
        weights,
        head.kv_bytes(n_ctx, KV_BYTES_PER_ELEMENT["f16"]),
        compute,
        block_variant=block.variant,
        block_outputs=4 * (block.block_size * vocab + next_token_rows * head.n_embd),
        # each read layer's inputs: a graph output of the target's compute buffer and a host
        # copy for the head, both a batch long
        target_layer_inputs=2 * 4 * N_UBATCH * feature_width,
    )


@dataclass(frozen=True)
class PairEstimate:
    target: ModelMemory
    draft: ModelMemory | None
    n_ctx: int = 0
    trained_ctx: int = 0  # the shorter trained context of the two models (0: unknown)

    @property
    def mtp(self) -> bool:
        """The target drafts for itself with its next-token layers."""
        return self.target.mtp > 0

    @property
    def needed(self) -> int:
        return self.target.total + (self.draft.total if self.draft else 0)

    @property
    def margin(self) -> int:
        return int(self.needed * MARGIN_FRACTION) + MARGIN_FIXED

    @property
    def with_margin(self) -> int:
        return self.needed + self.margin


def estimate_pair(
    target: ModelFacts,
    target_bytes: int,
    draft: ModelFacts | None,
    draft_bytes: int,
    n_ctx: int,
    kv_type: str = "f16",
    *,
    mtp: bool = False,
) -> PairEstimate:
    """A pair's memory; ``mtp``: the target drafts for itself (``draft`` is then None).
    A block drafter as the draft is counted as its context beside the target
    (``block_head_memory``)."""
    trained = [f.context_length for f in (target, draft) if f is not None and f.context_length > 0]
    draft_memory = None
    if draft is not None and draft.drafting.block is not None:
        draft_memory = block_head_memory(draft, draft_bytes, target, n_ctx)
    elif draft is not None:
        draft_memory = model_memory(draft, draft_bytes, n_ctx, kv_type, snapshots=0)
    return PairEstimate(
        model_memory(target, target_bytes, n_ctx, kv_type, mtp=mtp),
        draft_memory,
        n_ctx,
        min(trained, default=0),
    )


def memory_text(estimate: PairEstimate) -> str:
    """The estimate in words: weights, caches, compute and, when the target drafts for itself,
    what its MTP context adds; with a block drafter, what its context adds."""
    target, draft = estimate.target, estimate.draft
    weights = f"weights {gib(target.weights)}" + (f" + {gib(draft.weights)}" if draft else "")
    plain_draft = draft if draft is not None and not draft.block_variant else None
    kv = target.kv + (plain_draft.kv if plain_draft else 0)
    parts = [weights, f"KV cache {gib(kv)}"]
    recurrent = target.recurrent + (draft.recurrent if draft else 0)
    if recurrent:
        parts.append(f"recurrent state {gib(recurrent)}")
    parts.append(f"compute {gib(target.compute + (plain_draft.compute if plain_draft else 0))}")
    if draft is not None and draft.block_variant:
        parts.append(
            f"{draft.block_variant} context {gib(draft.block_context)} (its cache "
            f"{gib(draft.kv)}, compute {gib(draft.compute)} and block outputs "
            f"{gib(draft.block_outputs)}) and the target's layer inputs for it "
            f"{gib(draft.target_layer_inputs)}"
        )
    if estimate.mtp:
        parts.append(
            f"MTP context {gib(target.mtp)} (its cache {gib(target.mtp_kv)} and compute "
            f"{gib(target.mtp_compute)}; the next-token layers' {gib(target.mtp_weights)} of "
            "weights are in the file)"
        )
    return ", ".join(parts)


@dataclass(frozen=True)
class FitResult:
    label: FitLabel
    estimate: PairEstimate
    available: int
    where: str  # "GPU", "GPU + RAM" or "RAM"
    message: str
    per_device: tuple[tuple[Device, int], ...] = ()  # bytes each GPU would hold


def gib(n: float) -> str:
    """Binary size for memory figures: GiB, MiB below one GiB, KiB or bytes below one MiB
    (a small model or cache is never shown as "0 MiB")."""
    size = abs(n)
    if size >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if size >= MIB or size == 0:
        return f"{n / MIB:.0f} MiB"
    if size >= 1 << 10:
        return f"{n / (1 << 10):.0f} KiB"
    return f"{n:.0f} B"


def assess(estimate: PairEstimate, hardware: Hardware) -> FitResult:
    needed, padded = estimate.needed, estimate.with_margin
    if hardware.uses_gpu:
        pool, where = hardware.gpu_free, "GPU"
    else:
        pool, where = hardware.ram_free, "RAM"
    shares: tuple[tuple[Device, int], ...] = ()
    if hardware.uses_gpu and pool > 0:
        shares = tuple((g, needed * g.free_bytes // pool) for g in hardware.gpus)
    summary = f"needs {gib(needed)} + {gib(estimate.margin)} margin, {gib(pool)} free in {where}"
    beyond = trained_context_note(estimate.n_ctx, estimate.trained_ctx)
    if beyond is not None:
        return FitResult(FitLabel.NO_FIT, estimate, pool, where, f"{beyond}; {summary}", shares)
    if padded <= pool:
        return FitResult(FitLabel.FITS, estimate, pool, where, summary, shares)
    if needed <= pool:
        return FitResult(
            FitLabel.TIGHT,
            estimate,
            pool,
            where,
            summary + "; little headroom, close other programs",
            shares,
        )
    if hardware.uses_gpu and padded <= pool + hardware.ram_free:
        return FitResult(
            FitLabel.TIGHT,
            estimate,
            pool + hardware.ram_free,
            "GPU + RAM",
            summary + "; some layers would run on the CPU (slower)",
            shares,
        )
    return FitResult(
        FitLabel.NO_FIT,
        estimate,
        pool,
        where,
        summary + "; choose a smaller quantization, a shorter context or a smaller model",
    )


def quality_rank(quant: str) -> int:
    try:
        return QUALITY_ORDER.index(quant.upper())
    except ValueError:
        return len(QUALITY_ORDER)


def draft_speed_rank(quant: str) -> int:
    """0 for the quantization a draft should use first (see ``DRAFT_SPEED_ORDER``); ties
    between equally ranked files are broken by size."""
    try:
        return DRAFT_SPEED_ORDER.index(quant.upper())
    except ValueError:
        return len(DRAFT_SPEED_ORDER)


def trained_context_note(n_ctx: int, trained: int) -> str | None:
    """Why ``n_ctx`` is refused for a model trained on ``trained`` tokens; None when it is not."""
    if trained > 0 and n_ctx > trained:
        return (
            f"{n_ctx:,} tokens of context is beyond the {trained:,} the model was trained "
            f"on; it would answer badly past that. Use {trained:,} or less"
        )
    return None


def best_fit(options: Sequence[tuple[str, FitResult]], preferred: str | None = None) -> str | None:
    """The quantization to preselect: the preferred one when it fits, else the best that
    fits, else the best tight one; None when nothing fits at all."""
    for label in (FitLabel.FITS, FitLabel.TIGHT):
        candidates = [q for q, r in options if r.label is label]
        if not candidates:
            continue
        if preferred is not None and preferred.upper() in (q.upper() for q in candidates):
            return next(q for q in candidates if q.upper() == preferred.upper())
        return min(candidates, key=quality_rank)
    return None
