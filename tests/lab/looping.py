"""Synthetic models whose greedy next token is a fixed permutation of the current one.

The transformer blocks are zero, so the residual stream is the current token's embedding;
the output matrix maps it onto ``successor[token]``. Greedy output therefore cycles with a
known short period, which makes prompt-lookup drafting and a small draft built on the same
permutation agree with the target every time: a planted *good* configuration. A draft built
on another permutation disagrees every time: a planted *bad* one. Real llama.cpp runs them.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from app.engine.synthetic import TinyShape, vocabulary

MID = TinyShape(n_embd=512, n_layer=4, n_head=8, n_head_kv=4, n_ff=1536, n_ctx=1024)
SMALL = TinyShape(n_ctx=1024)


def successors(n_vocab: int, *, cycle: int, seed: int) -> np.ndarray:
    order = np.random.default_rng(seed).permutation(n_vocab)
    following = np.empty(n_vocab, dtype=np.int64)
    for start in range(0, n_vocab, cycle):
        group = order[start : start + cycle]
        following[group] = np.roll(group, -1)
    return following


def write_looping_llama(
    path: Path, *, shape: TinyShape, perm_seed: int, weight_seed: int = 0, cycle: int = 4
) -> Path:
    tokens, scores, types = vocabulary()
    n_vocab, e, f = len(tokens), shape.n_embd, shape.n_ff
    kv = e // shape.n_head * shape.n_head_kv
    rng = np.random.default_rng(weight_seed)
    embed = rng.standard_normal((n_vocab, e)).astype(np.float32)
    unit = embed / np.sqrt((embed**2).mean(axis=1, keepdims=True))
    output = np.zeros((n_vocab, e), dtype=np.float32)
    output[successors(n_vocab, cycle=cycle, seed=perm_seed)] = unit * (4.0 / e)
    tensors = {
        "token_embd.weight": embed,
        "output_norm.weight": np.ones(e, dtype=np.float32),
        "output.weight": output,
    }
    for i in range(shape.n_layer):
        tensors |= {
            f"blk.{i}.attn_norm.weight": np.ones(e, dtype=np.float32),
            f"blk.{i}.attn_q.weight": np.zeros((e, e), np.float32),
            f"blk.{i}.attn_k.weight": np.zeros((kv, e), np.float32),
            f"blk.{i}.attn_v.weight": np.zeros((kv, e), np.float32),
            f"blk.{i}.attn_output.weight": np.zeros((e, e), np.float32),
            f"blk.{i}.ffn_norm.weight": np.ones(e, dtype=np.float32),
            f"blk.{i}.ffn_gate.weight": np.zeros((f, e), np.float32),
            f"blk.{i}.ffn_up.weight": np.zeros((f, e), np.float32),
            f"blk.{i}.ffn_down.weight": np.zeros((e, f), np.float32),
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(path.stem)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(e)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(f)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(e // shape.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
