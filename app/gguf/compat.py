"""Draft/target vocabulary compatibility, following llama.cpp's speculative rule.

llama.cpp (common/speculative.cpp) accepts a pair when the vocabulary types match, the
BOS/EOS add flags match (and the ids too, where the token is added), the vocabulary sizes
differ by at most 128 and every token text from id 5 on is identical. The same rule is
applied to loaded models and to GGUF headers read over HTTP, so a pair can be checked before
gigabytes are downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_VOCAB_SIZE_DIFFERENCE = 128
FIRST_CHECKED_TOKEN_ID = 5

# GGUF ``tokenizer.ggml.model`` value -> llama.cpp vocab type name
GGUF_TOKENIZER_TO_VOCAB_TYPE = {
    "llama": "spm",
    "gpt2": "bpe",
    "gemma4": "bpe",
    "hybriddna": "bpe",
    "whitespace": "bpe",
    "bert": "wpm",
    "t5": "ugm",
    "rwkv": "rwkv",
    "plamo2": "plamo2",
    "none": "none",
    "no_vocab": "none",
}

# Default add_bos/add_eos per vocab type when the GGUF does not say (llama-vocab.cpp)
DEFAULT_ADD_BOS = {"spm": True, "bpe": False, "wpm": True, "ugm": False}
DEFAULT_ADD_EOS = {"ugm": True}


class IncompatiblePairError(ValueError):
    """The draft cannot speculate for the target: it names the first mismatch."""

    mismatch = ""  # ``first_mismatch``'s sentence, to put in other words
    advice = "Pick a draft made from the same tokenizer."  # what to do instead, in words


@dataclass(frozen=True)
class VocabInfo:
    vocab_type: str
    add_bos: bool
    add_eos: bool
    bos_id: int
    eos_id: int
    tokens: Sequence[str]

    @property
    def size(self) -> int:
        return len(self.tokens)


def first_mismatch(target: VocabInfo, draft: VocabInfo) -> str | None:
    """Return a sentence naming the first rule the pair breaks, or None when compatible."""
    if target.vocab_type != draft.vocab_type:
        return f"vocabulary type: target {target.vocab_type}, draft {draft.vocab_type}"
    if target.add_bos != draft.add_bos:
        return f"add_bos: target {target.add_bos}, draft {draft.add_bos}"
    if target.add_eos != draft.add_eos:
        return f"add_eos: target {target.add_eos}, draft {draft.add_eos}"
    # llama.cpp compares an id only where the token is added: a pair whose EOS ids differ
    # and that adds no EOS (most) drafts
    if target.add_bos and target.bos_id != draft.bos_id:
        return f"BOS token id: target {target.bos_id}, draft {draft.bos_id}"
    if target.add_eos and target.eos_id != draft.eos_id:
        return f"EOS token id: target {target.eos_id}, draft {draft.eos_id}"
    difference = abs(target.size - draft.size)
    if difference > MAX_VOCAB_SIZE_DIFFERENCE:
        return (
            f"vocabulary size: target {target.size}, draft {draft.size} "
            f"(differ by {difference} > {MAX_VOCAB_SIZE_DIFFERENCE})"
        )
    for token_id in range(FIRST_CHECKED_TOKEN_ID, min(target.size, draft.size)):
        if target.tokens[token_id] != draft.tokens[token_id]:
            return (
                f"token {token_id}: target {target.tokens[token_id]!r}, "
                f"draft {draft.tokens[token_id]!r}"
            )
    return None


def check_compatible(target: VocabInfo, draft: VocabInfo) -> None:
    mismatch = first_mismatch(target, draft)
    if mismatch is not None:
        error = IncompatiblePairError(f"draft is not compatible with the target: {mismatch}")
        error.mismatch = mismatch
        raise error
