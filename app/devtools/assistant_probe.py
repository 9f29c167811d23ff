"""Draft through a Gemma 4 assistant GGUF with the real llama.cpp, from the target's hidden state.

A developer's probe of llama.cpp's assistant mode, not app code (the app reaches llama.cpp only
through the engine process). ``python -m app.devtools.assistant_probe TARGET ASSISTANT`` prints
one JSON object: both models load, the assistant context shares the target's KV cache, and one
token is drafted. ``--greedy N [--prompt 1,300,310] [--n-draft K]`` generates N greedy tokens
target-only and with up to K assistant drafts per step, and reports whether they are identical,
how many drafts were accepted, and the acceptance at each draft position. Run it in a child
process: llama.cpp aborts the process on some malformed models.

The call sequence, as llama.cpp's ``common_speculative_impl_draft_mtp`` runs it when
``is_mem_shared`` (common/speculative.cpp) and ``common_speculative_init_result`` creates the
draft context (tools/server uses both for ``-md ASSISTANT --spec-type draft-mtp``):

1. Load the target (plain model params) and the assistant (its own file; no ``load_mtp``).
2. Target context: ordinary params with ``n_rs_seq`` 0 (Gemma 4 is not recurrent), then
   ``llama_set_embeddings_nextn(tgt, True, False)``: unmasked, so every batch row leaves its
   post-output-norm hidden state (width ``llama_model_n_embd_out(target)``).
3. Assistant context: ``ctx_type = LLAMA_CONTEXT_TYPE_MTP``, ``ctx_other = tgt``,
   ``n_ctx = llama_n_ctx(tgt)``, ``n_rs_seq = 0``; it must be created after ``tgt`` (llama.cpp
   throws without ``ctx_other``), then ``llama_set_embeddings_nextn(dft, True, True)``.
   ``llama_get_ctx_other(dft) == tgt`` is the shared-memory test: the assistant has no KV of
   its own; its layers attend through the target's last sliding and last full layer.
4. Prefill: decode the prompt in ``tgt`` only (no catch-up decode in the assistant). The next
   token ``t`` is the argmax of the last row; ``h = llama_get_embeddings_nextn_ith(tgt, last)``.
5. Draft: one-token batches in ``dft``, each at the SAME position ``n_past`` (the position of
   ``t``, which the target has not decoded yet), logits on: first ``(t, h)``, then
   ``(d_k, llama_get_embeddings_nextn_ith(dft, 0))``. The batch carries both the token id and
   an embedding row of ``n_embd_out`` floats (``llama_batch_init(n, n_embd_out, 1)`` plus a
   token array). ``d_{k+1}`` is the argmax of ``llama_get_logits_ith(dft, 0)``. The assistant
   writes nothing into the cache (its seq_rm and apply_ubatch are no-ops), so there is nothing
   to roll back on its side.
6. Verify: decode ``[t, d_1..d_K]`` in ``tgt`` at ``n_past..n_past+K``, logits on every row.
   Accept while ``argmax(row i) == d_{i+1}``; with ``n`` accepted, emit ``d_1..d_n`` and the
   target's ``argmax(row n)`` as the new ``t``; ``h`` becomes the target's hidden row ``n``.
7. Roll back: ``llama_memory_seq_rm(mem(tgt), 0, n_past + n + 1, -1)``; ``n_past += n + 1``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import llama_cpp
import numpy as np

from app.devtools.arguments import parse_arguments
from app.devtools.llama_batches import decode, logits_row

PROMPT = (1, 300, 310, 320, 330, 301)  # <s> then word pieces of the synthetic vocabulary
N_CTX = 512


def _argmax(ctx: Any, n_vocab: int, index: int = -1) -> int:
    return int(logits_row(ctx, n_vocab, index).argmax())


def _margin(ctx: Any, n_vocab: int) -> float:
    """How far the last row's best logit leads the runner-up."""
    top = np.partition(logits_row(ctx, n_vocab, -1), -2)[-2:]
    return float(top[1] - top[0])


def _hidden(ext: ModuleType, ctx: Any, index: int, width: int) -> np.ndarray:
    pointer = ext.llama_get_embeddings_nextn_ith(ctx, index)
    if not pointer:
        raise RuntimeError(f"no next-token embedding for row {index}")
    return np.ctypeslib.as_array(pointer, shape=(1, width)).copy()


class _Pair:
    """The two models, loaded once; contexts are made per run."""

    def __init__(self, target: Path, assistant: Path) -> None:
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        self.target = llama_cpp.llama_model_load_from_file(str(target).encode(), params)
        self.assistant = llama_cpp.llama_model_load_from_file(str(assistant).encode(), params)
        self.loaded = bool(self.target) and bool(self.assistant)
        if self.loaded:
            self.n_vocab = llama_cpp.llama_vocab_n_tokens(
                llama_cpp.llama_model_get_vocab(self.target)
            )
            self.width = llama_cpp.llama_model_n_embd_out(self.target)

    def facts(self) -> dict[str, Any]:
        t, a = self.target, self.assistant
        return {
            "target_loaded": bool(t),
            "assistant_loaded": bool(a),
            **(
                {
                    "target_n_embd": llama_cpp.llama_model_n_embd(t),
                    "target_n_embd_out": llama_cpp.llama_model_n_embd_out(t),
                    "target_n_layer": llama_cpp.llama_model_n_layer(t),
                    "assistant_n_embd": llama_cpp.llama_model_n_embd(a),
                    "assistant_n_embd_inp": llama_cpp.llama_model_n_embd_inp(a),
                    "assistant_n_embd_out": llama_cpp.llama_model_n_embd_out(a),
                    "assistant_n_layer_nextn": llama_cpp.llama_model_n_layer_nextn(a),
                    "same_vocab": llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(a))
                    == self.n_vocab,
                }
                if self.loaded
                else {}
            ),
        }

    def target_context(self, ext: ModuleType | None) -> Any:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_threads, params.n_threads_batch = N_CTX, 64, 1, 1
        ctx = llama_cpp.llama_init_from_model(self.target, params)
        if not ctx:
            raise RuntimeError("the target context failed")
        if ext is not None:
            ext.llama_set_embeddings_nextn(ctx, True, False)
        return ctx

    def assistant_context(self, target_ctx: Any, ext: ModuleType) -> Any:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = llama_cpp.llama_n_ctx(target_ctx)
        params.n_batch, params.n_threads, params.n_threads_batch = 64, 1, 1
        params.n_rs_seq = 0
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target_ctx
        ctx = llama_cpp.llama_init_from_model(self.assistant, params)
        if not ctx:
            raise RuntimeError("the assistant context failed")
        ext.llama_set_embeddings_nextn(ctx, True, True)
        return ctx

    def free(self) -> None:
        for model in (self.assistant, self.target):
            if model:
                llama_cpp.llama_model_free(model)


def probe(target: Path, assistant: Path) -> dict[str, Any]:
    from llama_cpp import llama_cpp_ext as ext

    pair = _Pair(target, assistant)
    report = pair.facts()
    if not pair.loaded:
        return report
    tgt = pair.target_context(ext)
    dft = pair.assistant_context(tgt, ext)
    report["memory_shared_with_target"] = ext.llama_get_ctx_other(dft) == tgt
    prompt = list(PROMPT)
    decode(tgt, prompt, 0)
    token = _argmax(tgt, pair.n_vocab)
    h = _hidden(ext, tgt, len(prompt) - 1, pair.width)
    report["target_next_token"] = token
    report["target_hidden_finite"] = bool(np.isfinite(h).all())
    decode(dft, [token], len(prompt), h)
    logits = logits_row(dft, pair.n_vocab, 0).copy()
    report["drafted_token"] = int(logits.argmax())
    report["draft_hidden_finite"] = bool(np.isfinite(_hidden(ext, dft, 0, pair.width)).all())
    # the same draft without the target's hidden state: the row is really read
    decode(dft, [token], len(prompt), np.zeros_like(h))
    report["draft_reads_the_hidden_state"] = bool(
        np.abs(logits_row(dft, pair.n_vocab, 0) - logits).max() > 1e-4
    )
    # and with another prompt in the target's cache: the assistant attends over that cache
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(tgt), True)
    decode(tgt, prompt[:1] + prompt[:0:-1], 0)
    decode(dft, [token], len(prompt), h)
    report["draft_reads_the_target_cache"] = bool(
        np.abs(logits_row(dft, pair.n_vocab, 0) - logits).max() > 1e-4
    )
    llama_cpp.llama_free(dft)
    llama_cpp.llama_free(tgt)
    pair.free()
    return report


def _target_only(pair: _Pair, prompt: list[int], n_tokens: int) -> tuple[list[int], list[float]]:
    """Greedy tokens one decode at a time, with each step's top-1 over top-2 logit margin."""
    ctx = pair.target_context(None)
    decode(ctx, prompt, 0)
    out, margins = [_argmax(ctx, pair.n_vocab)], [_margin(ctx, pair.n_vocab)]
    while len(out) < n_tokens:
        decode(ctx, [out[-1]], len(prompt) + len(out) - 1)
        out.append(_argmax(ctx, pair.n_vocab))
        margins.append(_margin(ctx, pair.n_vocab))
    llama_cpp.llama_free(ctx)
    return out, margins


def _speculative(
    pair: _Pair, prompt: list[int], n_tokens: int, n_draft: int, ext: ModuleType
) -> dict[str, Any]:
    """Greedy speculation with up to ``n_draft`` assistant drafts per step (docstring 4-7)."""
    tgt = pair.target_context(ext)
    dft = pair.assistant_context(tgt, ext)
    shared = ext.llama_get_ctx_other(dft) == tgt
    memory = llama_cpp.llama_get_memory(tgt)
    decode(tgt, prompt, 0)
    token, n_past = _argmax(tgt, pair.n_vocab), len(prompt)
    h = _hidden(ext, tgt, n_past - 1, pair.width)
    out = [token]
    drafted_at, accepted_at = [0] * n_draft, [0] * n_draft
    rollbacks_ok = True
    while len(out) < n_tokens:
        k = min(n_draft, n_tokens - len(out))
        drafts: list[int] = []
        previous, row = token, h
        for _ in range(k):
            decode(dft, [previous], n_past, row)  # every draft at the position of ``token``
            previous = _argmax(dft, pair.n_vocab, 0)
            row = _hidden(ext, dft, 0, pair.width)
            drafts.append(previous)
        decode(tgt, [token, *drafts], n_past, logits="all")
        n = 0
        while n < k and _argmax(tgt, pair.n_vocab, n) == drafts[n]:
            n += 1
        for i in range(k):
            drafted_at[i] += 1
            accepted_at[i] += i < n
        token = _argmax(tgt, pair.n_vocab, n)
        h = _hidden(ext, tgt, n, pair.width)
        out += [*drafts[:n], token]
        if n < k:
            rollbacks_ok &= bool(llama_cpp.llama_memory_seq_rm(memory, 0, n_past + n + 1, -1))
        n_past += n + 1
    llama_cpp.llama_free(dft)
    llama_cpp.llama_free(tgt)
    return {
        "memory_shared_with_target": shared,
        "tokens": out[:n_tokens],
        "drafted": sum(drafted_at),
        "accepted": sum(accepted_at),
        "drafted_at": drafted_at,
        "accepted_at": accepted_at,
        "acceptance_at": [
            round(a / d, 3) if d else None for a, d in zip(accepted_at, drafted_at, strict=True)
        ],
        "rollbacks_ok": rollbacks_ok,
    }


def greedy(
    target: Path, assistant: Path, n_tokens: int, prompt: list[int], n_draft: int
) -> dict[str, Any]:
    """Target-only greedy tokens beside assistant-speculative greedy tokens, and the acceptance."""
    from llama_cpp import llama_cpp_ext

    pair = _Pair(target, assistant)
    if not pair.loaded:
        return pair.facts()
    baseline, margins = _target_only(pair, prompt, n_tokens)
    speculative = _speculative(pair, prompt, n_tokens, n_draft, llama_cpp_ext)
    pair.free()
    tokens = speculative["tokens"]
    first = next((i for i, (a, b) in enumerate(zip(tokens, baseline, strict=True)) if a != b), None)
    return {
        "loaded": True,
        "target_only": baseline,
        "identical": tokens == baseline,
        # batched and one-at-a-time decodes round differently: a divergence where the
        # target-only margin is tiny (~1e-3) is a near tie, not a speculation bug
        "first_difference": first,
        "margin_at_difference": None if first is None else margins[first],
        "min_margin": min(margins),
        **speculative,
    }


def main(argv: list[str]) -> int:
    args = parse_arguments(argv, 2, __doc__, ("--greedy", "--prompt", "--n-draft"))
    if args is None:
        return 2
    target, assistant = args.paths
    if "--greedy" in args.options:
        prompt = args.token_ids("--prompt", PROMPT)
        n_draft = int(args.get("--n-draft", "3"))
        report = greedy(target, assistant, int(args.options["--greedy"]), prompt, n_draft)
    else:
        report = probe(target, assistant)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
