"""GGUF files that pass the header checks but crash llama.cpp, written with the gguf writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.devtools.test_models.synthetic import (
    TinyShape,
    _weights,
    spm_tokenizer,
    vocabulary,
    write_llama,
)


def write_bert_tokenizer_llama(path: Path, *, chat_template: str | None = None) -> Path:
    """A tiny llama whose ``tokenizer.ggml.model`` is "bert" while its tokens are SPM byte
    tokens (``<0xXX>``): it passes ``validate_gguf_file`` and the pair check, then aborts
    inside ``llama_model_load_from_file`` (SIGABRT, seen in the field)."""
    vocab = vocabulary()
    tensors = _weights(TinyShape(), len(vocab[0]), np.random.default_rng(7))
    tokenizer = spm_tokenizer(vocab, chat_template, model="bert", add_flags=False)
    write_llama(path, TinyShape(), tensors, tokenizer)
    return path


HUNG_TEMPLATE = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    "{% for m in messages %}{{ m['content'] }}{% endfor %}"
)


def write_hung_template_llama(path: Path) -> Path:
    """A tiny llama whose chat template loops for hours (10^10 empty iterations)."""
    from app.devtools.test_models.synthetic import write_tiny_llama

    return write_tiny_llama(path, seed=1, chat_template=HUNG_TEMPLATE)
