"""The wizard's explanations in words a person can follow: vocabulary mismatches (not only
token ids), and a drafting head offered as a target."""

from __future__ import annotations

import re

from app.gguf.facts import SelfDrafting

_EXPLANATIONS = (
    (
        "vocabulary type",
        "the two models split text into tokens by different methods (different tokenizer families)",
    ),
    ("add_bos", "one model starts every prompt with a begin-of-text token and the other does not"),
    ("add_eos", "one model ends every prompt with an end-of-text token and the other does not"),
    ("BOS token id", "the models use different tokens to mark the start of a text"),
    ("EOS token id", "the models use different tokens to mark the end of an answer"),
    (
        "vocabulary size",
        "the vocabularies have very different sizes, so they are different vocabularies",
    ),
)
_TOKEN_RE = re.compile(r"^token (\d+): target (.*), draft (.*)$")


def mismatch_in_words(mismatch: str | None) -> str:
    """``compat.first_mismatch``'s sentence, preceded by what it means."""
    if not mismatch:
        return ""
    match = _TOKEN_RE.match(mismatch)
    if match is not None:
        token_id, target, draft = match.groups()
        return (
            f"the models spell token {token_id} differently (target {target}, draft "
            f"{draft}), so they come from different tokenizers and the target would "
            "misread every draft token"
        )
    for key, words in _EXPLANATIONS:
        if mismatch.startswith(key):
            return f"{words} ({mismatch})"
    return mismatch


def head_text(drafting: SelfDrafting) -> str:
    """Why a head offered as the target is not one, and what to do instead."""
    article = "an" if drafting.name[0] in "aeiouAEIOU" else "a"
    target = f"a {drafting.target_arch} model" if drafting.target_arch else "its target model"
    return (
        f"this is {article} {drafting.name}, not a target: it drafts for {target} and cannot "
        f"answer by itself. Choose {target} as the target instead."
    )
