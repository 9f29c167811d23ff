"""Load a GGUF with its next-token (MTP) layers through the real llama.cpp and draft with them.

A developer's probe of llama.cpp's MTP interface, not app code (the app reaches llama.cpp only
through the engine process). ``python -m app.devtools.mtp_probe MODEL [--draft]`` prints one
JSON object. Without ``--draft`` it loads the model with ``load_mtp``, reports
``llama_model_n_layer_nextn`` and decodes a prompt; with ``--draft`` it also opens an MTP
context on the target's memory (``LLAMA_CONTEXT_TYPE_MTP``, ``ctx_other`` = the target) and
drafts one token from the target's next-token embedding, the way the llama-cpp-python sdist's
``examples/server/server.py`` ``MTPDraftProvider`` does. ``--greedy N [--prompt 1,300,310]``
generates N greedy tokens target-only and with one MTP draft per step (rejected drafts rolled
back, recurrent state included) and says whether they are identical and how many drafts were
accepted. Run it in a child process: llama.cpp aborts the process on some malformed models.
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
from app.devtools.llama_batches import decode, free_batch, logits_row, token_batch

PROMPT = (1, 300, 310, 320, 330, 301)  # <s> then word pieces of the synthetic vocabulary


def _load(path: Path) -> tuple[Any, int, int]:
    """The model with its next-token layers, its vocabulary size and width (a null model
    and zeros when llama.cpp cannot load it)."""
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.load_mtp = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        return model, 0, 0
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    return model, n_vocab, llama_cpp.llama_model_n_embd(model)


def probe(path: Path, *, draft: bool) -> dict[str, Any]:
    model, n_vocab, n_embd = _load(path)
    if not model:
        return {"loaded": False}
    report: dict[str, Any] = {
        "loaded": True,
        "n_layer": llama_cpp.llama_model_n_layer(model),
        "n_layer_nextn": llama_cpp.llama_model_n_layer_nextn(model),
        "n_embd": n_embd,
        "n_vocab": n_vocab,
    }
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_threads, params.n_threads_batch = 256, 64, 1, 1
    params.n_rs_seq = 1  # one recurrent-state snapshot per sequence, for rollback
    target = llama_cpp.llama_init_from_model(model, params)
    if not target:
        return report | {"target_context": False}
    ext: ModuleType | None = None
    if draft:
        # llama-ext.h staging functions, looked up by mangled name: absent on some builds
        try:
            from llama_cpp import llama_cpp_ext
        except AttributeError as exc:
            return report | {"mtp_functions": f"missing: {exc}"}
        ext = llama_cpp_ext
        ext.llama_set_embeddings_nextn(target, True, False)
    prompt = list(PROMPT)
    batch = token_batch(prompt, 0)
    report["target_decode"] = llama_cpp.llama_decode(target, batch)
    free_batch(batch, with_embeddings=False)
    logits = logits_row(target, n_vocab).copy()
    report["logits_finite"] = bool(np.isfinite(logits).all())
    report["logits_spread"] = float(logits.max() - logits.min())
    next_token = int(logits.argmax())
    report["next_token"] = next_token
    if ext is not None:
        report |= _draft_one(model, target, ext, n_embd, n_vocab, len(prompt), next_token)
    llama_cpp.llama_free(target)
    llama_cpp.llama_model_free(model)
    return report


def _draft_one(
    model: Any, target: Any, ext: ModuleType, n_embd: int, n_vocab: int, n_past: int, token: int
) -> dict[str, Any]:
    h_pointer = ext.llama_get_embeddings_nextn(target)
    if not h_pointer:
        return {"target_nextn_embeddings": False}
    # with the mask off, one row per prompt token; the last one seeds the draft
    h_rows = np.ctypeslib.as_array(h_pointer, shape=(n_past, n_embd)).copy()
    h_last = h_rows[-1]
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_threads, params.n_threads_batch = 256, 64, 1, 1
    params.n_rs_seq = 0
    params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
    params.ctx_other = target
    params.n_outputs_max = 1
    mtp = llama_cpp.llama_init_from_model(model, params)
    if not mtp:
        return {"mtp_context": False}
    other = ext.llama_get_ctx_other(mtp)
    out: dict[str, Any] = {
        "mtp_context": True,
        "target_nextn_embeddings": bool(np.isfinite(h_last).all()),
        "memory_shared_with_target": bool(other) and other == target,
    }
    ext.llama_set_embeddings_nextn(mtp, True, True)
    if not out["memory_shared_with_target"]:
        # the MTP block keeps its own cache: fill it with the prompt, each token beside the
        # target's hidden state of the position before it (zeros before the first)
        batch = token_batch(list(PROMPT[:n_past]), 0, n_embd, logits="none")
        rows = np.ctypeslib.as_array(batch.embd, shape=(n_past, n_embd))
        rows[0], rows[1:] = 0.0, h_rows[:-1]
        out["mtp_prompt_decode"] = llama_cpp.llama_decode(mtp, batch)
        free_batch(batch, with_embeddings=True)
    batch = token_batch([token], n_past, n_embd)
    np.ctypeslib.as_array(batch.embd, shape=(n_embd,))[:] = h_last
    out["mtp_decode"] = llama_cpp.llama_decode(mtp, batch)
    free_batch(batch, with_embeddings=True)
    if out["mtp_decode"] == 0:
        logits = logits_row(mtp, n_vocab, 0).copy()
        out["draft_logits_finite"] = bool(np.isfinite(logits).all())
        out["drafted_token"] = int(logits.argmax())
        h_next = ext.llama_get_embeddings_nextn_ith(mtp, 0)
        out["draft_nextn_embedding"] = bool(h_next)
    llama_cpp.llama_free(mtp)
    return out


def _context(model: Any, *, n_rs_seq: int, mtp_of: Any = None) -> Any:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_threads, params.n_threads_batch = 512, 64, 1, 1
    params.n_rs_seq = n_rs_seq
    if mtp_of is not None:
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = mtp_of
        params.n_outputs_max = 1
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise RuntimeError("llama_init_from_model failed")
    return ctx


def _target_only(model: Any, prompt: list[int], n_vocab: int, n_tokens: int) -> list[int]:
    ctx = _context(model, n_rs_seq=0)
    decode(ctx, prompt, 0)
    out = [int(logits_row(ctx, n_vocab).argmax())]
    while len(out) < n_tokens:
        decode(ctx, [out[-1]], len(prompt) + len(out) - 1)
        out.append(int(logits_row(ctx, n_vocab).argmax()))
    llama_cpp.llama_free(ctx)
    return out


def _speculative(
    model: Any, prompt: list[int], ext: ModuleType, n_embd: int, n_vocab: int, n_tokens: int
) -> dict[str, Any]:
    """Greedy speculation with one MTP draft token per step: the target verifies [t, draft]
    in one batch; a rejected draft is removed from the target's memory, its recurrent state
    rolled back through the one snapshot ``n_rs_seq`` keeps."""
    target = _context(model, n_rs_seq=1)
    ext.llama_set_embeddings_nextn(target, True, False)
    mtp = _context(model, n_rs_seq=0, mtp_of=target)
    ext.llama_set_embeddings_nextn(mtp, True, True)
    target_mem, mtp_mem = llama_cpp.llama_get_memory(target), llama_cpp.llama_get_memory(mtp)

    def hidden(rows: int) -> np.ndarray:
        pointer = ext.llama_get_embeddings_nextn(target)
        if not pointer:
            raise RuntimeError("the target gave no next-token embeddings")
        return np.ctypeslib.as_array(pointer, shape=(rows, n_embd)).copy()

    decode(target, prompt, 0)
    rows = hidden(len(prompt))
    # the MTP cache pairs each token with the target's hidden state one position earlier
    decode(
        mtp,
        prompt,
        0,
        np.vstack([np.zeros((1, n_embd), np.float32), rows[:-1]]),
        logits="none",
    )
    pending = rows[-1:]
    token = int(logits_row(target, n_vocab).argmax())
    out, n_past, drafted, accepted, rollbacks_ok = [token], len(prompt), 0, 0, True
    while len(out) < n_tokens:
        decode(mtp, [token], n_past, pending)
        draft = int(logits_row(mtp, n_vocab, 0).argmax())
        llama_cpp.llama_memory_seq_rm(mtp_mem, 0, n_past, -1)
        drafted += 1
        decode(target, [token, draft], n_past, logits="all")
        rows = hidden(2)
        verified = int(logits_row(target, n_vocab, 0).argmax())
        if verified == draft:
            accepted += 1
            following = int(logits_row(target, n_vocab, 1).argmax())
            decode(mtp, [token, draft], n_past, np.vstack([pending, rows[:1]]), logits="none")
            out += [draft, following]
            pending, token, n_past = rows[1:], following, n_past + 2
        else:
            rollbacks_ok &= bool(llama_cpp.llama_memory_seq_rm(target_mem, 0, n_past + 1, -1))
            decode(mtp, [token], n_past, pending, logits="none")
            out.append(verified)
            pending, token, n_past = rows[:1], verified, n_past + 1
    llama_cpp.llama_free(mtp)
    llama_cpp.llama_free(target)
    return {
        "tokens": out[:n_tokens],
        "drafted": drafted,
        "accepted": accepted,
        "rollbacks_ok": rollbacks_ok,
    }


def greedy(path: Path, n_tokens: int, prompt: list[int]) -> dict[str, Any]:
    """Target-only greedy tokens beside MTP-speculative greedy tokens, and the acceptance."""
    from llama_cpp import llama_cpp_ext

    model, n_vocab, n_embd = _load(path)
    if not model:
        return {"loaded": False}
    baseline = _target_only(model, prompt, n_vocab, n_tokens)
    speculative = _speculative(model, prompt, llama_cpp_ext, n_embd, n_vocab, n_tokens)
    llama_cpp.llama_model_free(model)
    return {
        "loaded": True,
        "target_only": baseline,
        "identical": speculative["tokens"] == baseline,
        **speculative,
    }


def main(argv: list[str]) -> int:
    args = parse_arguments(argv, 1, __doc__, ("--greedy", "--prompt"))
    if args is None:
        return 2
    (path,) = args.paths
    if "--greedy" in args.options:
        report = greedy(path, int(args.options["--greedy"]), args.token_ids("--prompt", PROMPT))
    else:
        report = probe(path, draft="--draft" in argv)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
