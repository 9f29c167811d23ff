"""Synthetic models whose greedy next token is a fixed permutation of the current one.

The transformer blocks are zero, so the residual stream is the current token's embedding;
the output matrix maps it onto ``successor[token]``. Greedy output therefore cycles with a
known short period, which makes prompt-lookup drafting and a small draft built on the same
permutation agree with the target every time: a planted *good* configuration. A draft built
on another permutation disagrees every time: a planted *bad* one. Real llama.cpp runs them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.devtools.test_models.synthetic import TinyShape, spm_tokenizer, vocabulary, write_llama

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
    write_llama(path, shape, tensors, spm_tokenizer((tokens, scores, types)))
    return path
