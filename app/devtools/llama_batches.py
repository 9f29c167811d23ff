"""What the drafting probes share: llama.cpp batches of tokens (beside embedding rows for a
draft context that reads the target's hidden state), decoded in one call; logit rows and the
target's greedy pick; a probe's contexts; a target and its head loaded; a head probe's
command line."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import llama_cpp
import numpy as np

from app.devtools.arguments import parse_arguments

Logits = Literal["last", "all", "none"]
PROMPT = (1, 300, 310, 320, 330, 301)  # <s> then word pieces of the synthetic vocabulary


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


def greedy_pick(ctx: Any, n_vocab: int, index: int, banned: list[int]) -> int:
    """The target's greedy token at logit row ``index``; ``banned`` (the end-of-generation
    tokens under ``ignore_eos``, as llama-server biases them) never wins."""
    logits = logits_row(ctx, n_vocab, index).copy()
    logits[banned] = -np.inf
    return int(logits.argmax())


def probe_context(model: Any, n_ctx: int, *, ctx_other: Any = None, n_outputs: int = 0) -> Any:
    """A context for a probe: 2 threads, batches of 512, no recurrent-state cells; a head's
    beside the target's ``ctx_other``; ``n_outputs`` caps the outputs (0: llama.cpp's)."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, 512, 512
    params.n_threads, params.n_threads_batch = 2, 2
    params.n_rs_seq = 0
    if n_outputs:
        params.n_outputs_max = n_outputs
    if ctx_other is not None:
        params.ctx_other = ctx_other
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise RuntimeError("llama_init_from_model failed")
    return ctx


@dataclass(frozen=True)
class TargetAndHead:
    """A target and the head that drafts for it, loaded, with what greedy picks need."""

    target: Any
    head: Any
    n_vocab: int
    banned: list[int]  # the end-of-generation tokens under ``ignore_eos``; else none

    def free(self) -> None:
        llama_cpp.llama_model_free(self.head)
        llama_cpp.llama_model_free(self.target)


def load_target_and_head(
    target_path: Path, head_path: Path, *, ignore_eos: bool
) -> TargetAndHead | dict[str, Any]:
    """Both models loaded, or the report that says which did not load."""
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    target = llama_cpp.llama_model_load_from_file(str(target_path).encode(), params)
    head = llama_cpp.llama_model_load_from_file(str(head_path).encode(), params)
    if not target or not head:
        return {"loaded": False, "target_loaded": bool(target), "head_loaded": bool(head)}
    vocab = llama_cpp.llama_model_get_vocab(target)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    banned = [t for t in range(n_vocab) if ignore_eos and llama_cpp.llama_vocab_is_eog(vocab, t)]
    return TargetAndHead(target, head, n_vocab, banned)


def run_head_probe(
    argv: list[str],
    usage: str | None,
    greedy: Callable[..., dict[str, Any]],
    *,
    n_tokens: int,
    n_max: int,
    switches: dict[str, str],
) -> int:
    """A head probe's command line, ``TARGET HEAD [--greedy N] [--prompt 1,300,310] [--n-max
    K]`` and the ``switches`` (each given to ``greedy`` as the keyword it names): ``greedy``'s
    report printed as one JSON object."""
    args = parse_arguments(argv, 2, usage, ("--greedy", "--prompt", "--n-max"))
    if args is None:
        return 2
    target, head = args.paths
    report = greedy(
        target,
        head,
        int(args.get("--greedy", str(n_tokens))),
        args.token_ids("--prompt", PROMPT),
        int(args.get("--n-max", str(n_max))),
        **{keyword: switch in argv for switch, keyword in switches.items()},
    )
    print(json.dumps(report), flush=True)
    return 0
