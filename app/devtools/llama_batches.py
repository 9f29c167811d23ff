"""What the drafting probes share: llama.cpp batches of tokens (beside embedding rows for a
draft context that reads the target's hidden state), decoded in one call, and logit rows."""

from __future__ import annotations

import ctypes
from typing import Any, Literal

import llama_cpp
import numpy as np

Logits = Literal["last", "all", "none"]


def token_batch(
    tokens: list[int], first_pos: int, n_embd: int = 0, *, logits: Logits = "last"
) -> Any:
    """A batch of ``tokens`` from ``first_pos`` on in sequence 0, with logits for the last
    token, all of them or none. With ``n_embd`` it is an embedding batch that carries the
    tokens too: llama_batch_init gives an embedding batch no token array, but a draft context
    embeds the token as well; ctypes keeps this one alive with the batch, and ``free_batch``
    detaches it before llama_batch_free."""
    batch = llama_cpp.llama_batch_init(max(len(tokens), 1), n_embd, 1)
    if n_embd:
        batch.token = (llama_cpp.llama_token * len(tokens))()
    for i, token in enumerate(tokens):
        batch.token[i] = token
        batch.pos[i] = first_pos + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = logits == "all" or (logits == "last" and i == len(tokens) - 1)
    batch.n_tokens = len(tokens)
    return batch


def free_batch(batch: Any, *, with_embeddings: bool) -> None:
    if with_embeddings:
        batch.token = ctypes.POINTER(llama_cpp.llama_token)()  # ours, not llama_batch_free's
    llama_cpp.llama_batch_free(batch)


def decode(
    ctx: Any,
    tokens: list[int],
    first_pos: int,
    embeddings: np.ndarray | None = None,
    *,
    logits: Logits = "last",
    what: str = "llama_decode",
) -> None:
    """Decode ``tokens`` from ``first_pos`` (beside one ``embeddings`` row each for a draft
    context); raises naming ``what`` when llama_decode fails."""
    n_embd = 0 if embeddings is None else embeddings.shape[1]
    batch = token_batch(tokens, first_pos, n_embd, logits=logits)
    if embeddings is not None:
        np.ctypeslib.as_array(batch.embd, shape=embeddings.shape)[:] = embeddings
    try:
        code = llama_cpp.llama_decode(ctx, batch)
    finally:
        free_batch(batch, with_embeddings=embeddings is not None)
    if code != 0:
        raise RuntimeError(f"{what} returned {code}")


def logits_row(ctx: Any, n_vocab: int, index: int = -1) -> np.ndarray:
    """Row ``index`` of the last decode's logits, as a view into llama.cpp's buffer."""
    pointer = llama_cpp.llama_get_logits_ith(ctx, index)
    if not pointer:
        raise RuntimeError("no logits")
    return np.ctypeslib.as_array(pointer, shape=(n_vocab,))
