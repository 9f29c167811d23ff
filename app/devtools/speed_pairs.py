"""The synthetic pairs ``speed_reference`` measures each drafting method on.

``tiny``: the pairs the tests use (a 64-wide target, a pass well under a millisecond, so the
host's work per token is most of what is timed). ``large``: the same writers with a target
768 wide (about 140 MB of F32 weights, a pass of some milliseconds on a CPU, so the passes
weigh as they do with real targets), for the methods whose writers take a size: a draft
model, lookups, a Gemma 4 assistant, EAGLE-3, DFlash and DSpark (the MTP writer builds only
its tiny shape).
"""

from __future__ import annotations

from pathlib import Path

from app.devtools.test_models.synthetic import (
    TinyShape,
    write_tiny_llama,
    write_tiny_qwen35,
    write_vocab_donor_pair,
)
from app.devtools.test_models.synthetic_dflash import (
    TinyDFlashShape,
    write_dflash_target,
    write_tiny_dflash,
)
from app.devtools.test_models.synthetic_eagle3 import (
    EAGLE3_TARGET_SHAPE,
    TinyEagle3Shape,
    write_eagle3_target,
    write_tiny_eagle3,
)
from app.devtools.test_models.synthetic_gemma4 import (
    TinyGemma4AssistantShape,
    TinyGemma4Shape,
    write_tiny_gemma4,
    write_tiny_gemma4_assistant,
)

SIZES = ("tiny", "large")
LARGE_SHAPE = TinyShape(n_embd=768, n_layer=4, n_head=12, n_head_kv=4, n_ff=3072, n_ctx=2048)
# the large draft model: the large target's layers at a twelfth of its width
SMALL_DRAFT_SHAPE = TinyShape(n_embd=64, n_layer=4, n_head=1, n_head_kv=1, n_ff=256, n_ctx=2048)
# the large heads: one decoder layer as wide as one of the large target's (a block drafter's
# copying heads need the target's width in heads of their own, and more to read features)
LARGE_EAGLE3_HEAD = TinyEagle3Shape(n_head=12, n_ff=3072)
LARGE_DFLASH_HEAD = TinyDFlashShape(
    n_head=16, head_dim=64, n_ff=3072, feature_scale=0.03, markov_scale=8.0
)
# the large Gemma 4 target: LARGE_SHAPE's width, depth and heads in Gemma 4's layout (three
# sliding-window layers, then a full one); its assistant a third as wide, attending through
# the target's cache with the target's heads, reading all the target's output head reads
LARGE_GEMMA4 = TinyGemma4Shape(
    n_embd=LARGE_SHAPE.n_embd,
    n_layer=LARGE_SHAPE.n_layer,
    n_head=LARGE_SHAPE.n_head,
    n_head_kv=LARGE_SHAPE.n_head_kv,
    head_dim=LARGE_SHAPE.n_embd // LARGE_SHAPE.n_head,
    head_dim_swa=LARGE_SHAPE.n_embd // LARGE_SHAPE.n_head,
    n_ff=LARGE_SHAPE.n_ff,
    n_ctx=LARGE_SHAPE.n_ctx,
    sliding_window=512,
)
LARGE_ASSISTANT = TinyGemma4AssistantShape(n_embd=256, n_layer=2, n_head=12, n_ff=1024)
WITHOUT_LARGE = ("mtp",)


def synthetic_pair(method: str, folder: Path, size: str = "tiny") -> tuple[Path, Path | None]:
    """``method``'s synthetic (target, draft) written into ``folder``; the draft is None for
    lookups and MTP (the target drafts for itself)."""
    if size not in SIZES or (size == "large" and method in WITHOUT_LARGE):
        raise ValueError(f"no {size!r} synthetic pair for {method}")
    large = size == "large"
    target = folder / f"{method}-{size}-target.gguf"
    draft = folder / f"{method}-{size}-draft.gguf"
    if method == "draft-model" and large:
        donor = write_tiny_llama(folder / "vocabulary-donor.gguf")
        return write_vocab_donor_pair(donor, target, draft, scale=12, small_shape=SMALL_DRAFT_SHAPE)
    if method == "draft-model":
        write_tiny_llama(target, seed=1)
        return target, write_tiny_llama(draft, seed=2, noise_from=1, noise=0.15)
    if method == "mtp":
        return write_tiny_qwen35(target, branch_scale=0.3), None
    if method == "assistant" and large:
        write_tiny_gemma4(target, shape=LARGE_GEMMA4, output_rank=LARGE_ASSISTANT.n_embd)
        return target, write_tiny_gemma4_assistant(draft, target, shape=LARGE_ASSISTANT)
    if method == "assistant":
        write_tiny_gemma4(target)
        return target, write_tiny_gemma4_assistant(draft, target)
    shape = LARGE_SHAPE if large else EAGLE3_TARGET_SHAPE
    if method == "eagle3":
        write_eagle3_target(target, shape=shape)
        return target, write_tiny_eagle3(draft, target, shape=LARGE_EAGLE3_HEAD if large else None)
    write_dflash_target(target, shape=shape)
    if method == "lookups":
        return target, None
    if method in ("dflash", "dspark"):
        head = LARGE_DFLASH_HEAD if large else None
        return target, write_tiny_dflash(draft, target, variant=method, shape=head)
    raise ValueError(f"unknown method {method!r}")
