"""GGUF files that pass the header checks but crash llama.cpp, written with the gguf writer."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from app.engine.synthetic import TinyShape, _weights, vocabulary


def write_bert_tokenizer_llama(path: Path, *, chat_template: str | None = None) -> Path:
    """A tiny llama whose ``tokenizer.ggml.model`` is "bert" while its tokens are SPM byte
    tokens (``<0xXX>``): it passes ``validate_gguf_file`` and the pair check, then aborts
    inside ``llama_model_load_from_file`` (SIGABRT, seen in the field)."""
    shape = TinyShape()
    tokens, scores, types = vocabulary()
    tensors = _weights(shape, len(tokens), np.random.default_rng(7))
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(path.stem)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(shape.n_embd // shape.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    if chat_template:
        writer.add_chat_template(chat_template)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
