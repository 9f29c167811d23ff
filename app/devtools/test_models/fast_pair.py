"""The fast pair: synthetic models that decode in milliseconds with Qwen2.5's real 151,936-token
vocabulary, written beside the shipped Qwen2.5-Coder model they take it from: the host's cost
per token measured on it (``hostcost``) is what a GPU user pays."""

from __future__ import annotations

from pathlib import Path

from app.devtools.test_models.synthetic import write_vocab_donor_pair
from app.models.shipped import QWEN_CODER_05B, fetch_shipped


def fast_pair() -> tuple[Path, Path]:
    """A pair that decodes in milliseconds with Qwen2.5's real 151,936-token vocabulary: the
    host cost per token measured on it is what a GPU user pays (see synthetic.py)."""
    source = fetch_shipped(QWEN_CODER_05B)
    target = source.with_name("fast-qwen-vocab.target.gguf")
    draft = source.with_name("fast-qwen-vocab.draft.gguf")
    if target.exists() and draft.exists():
        return target, draft
    tmp_target, tmp_draft = target.with_suffix(".tmp"), draft.with_suffix(".tmp")
    write_vocab_donor_pair(source, tmp_target, tmp_draft)
    tmp_draft.replace(draft)
    tmp_target.replace(target)
    return target, draft
