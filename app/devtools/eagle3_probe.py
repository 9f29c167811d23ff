"""Greedy EAGLE-3 speculation through the real llama.cpp, the way llama.cpp drives it.

A developer's probe, not app code (the app reaches llama.cpp only through the engine
process). ``python -m app.devtools.eagle3_probe TARGET HEAD [--greedy N] [--prompt 1,300,310]
[--n-max 3] [--ignore-eos]`` loads a target and its EAGLE-3 head, generates N greedy tokens
target-only and with EAGLE-3 drafts, and prints one JSON object: whether the two are
identical, the head's target layers, how many tokens were drafted and accepted, and the
acceptance per draft position. ``--ignore-eos`` keeps end-of-generation tokens from winning
on the target, as llama-server's ``ignore_eos`` does. Run it in a child process: llama.cpp
aborts the process on some malformed models.

The call sequence is llama.cpp's ``common_speculative_impl_draft_eagle3``
(common/speculative.cpp) with the server's loop around it (tools/server/server-context.cpp):

Set-up
  1. ``ctx_tgt = llama_init_from_model(target)``; ``ctx_dft = llama_init_from_model(head)``
     with ``ctx_other = ctx_tgt`` (required when the head has no ``token_embd`` or no
     ``output``: it embeds and projects with the target's), ``n_ctx`` = the target's,
     ``n_rs_seq = 0``, default ``ctx_type``.
  2. ``ids = llama_model_target_layer_ids(head)`` (exactly 3). For each id below the target's
     ``n_layer``: ``llama_set_embeddings_layer_inp(ctx_tgt, id, true)`` (an id equal to
     ``n_layer`` would be ``llama_set_embeddings_nextn(ctx_tgt, true, false)``). Do it before
     the first decode: it forces a graph re-reserve.
  3. ``llama_set_embeddings_nextn(ctx_dft, true, true)``: the head's encoder output and its
     pre-norm hidden state come back through ``llama_get_embeddings_nextn[_ith]``.

process(tokens at positions p .. p+n-1), after every target decode (prompt and verify):
  4. ``F[i] = concat_k llama_get_embeddings_layer_inp(ctx_tgt, ids[k])[i]`` for all n rows
     (the target returns layer inputs for every token of the batch, logits or not).
  5. Encoder: ``llama_process(ctx_dft, ENCODE, batch)`` with one embedding row ``F[i]`` per
     token (``llama_batch_ext_add_embd``, width 3 x n_embd_tgt, placeholder positions from the
     head's memory, chunks of at most ``n_ubatch``); ``g = llama_get_embeddings_nextn(ctx_dft)``
     gives n rows of the head's width.
  6. Decoder: ``llama_process(ctx_dft, DECODE, batch)`` with, for k = 0 .. n-2, token
     ``tokens[k+1]`` at position ``p+k`` carrying embedding ``g[k]``
     (``llama_batch_ext_add_token`` + ``llama_batch_ext_set_embd_token``), no outputs. First,
     if the pending position is ``p-1`` and the head's memory ends before it, the pair
     (``tokens[0]``, pending g) at ``p-1`` (a prompt split over several batches).
  7. Keep ``g`` as the verify rows; pending = (``g[n-1]``, ``p+n-1``): its token is not known
     yet.

draft(last, the target's newest token):
  8. ``llama_memory_seq_rm(head memory, 0, pending_pos, -1)``; decode (``last``, pending g)
     at ``pending_pos`` with its logits on.
  9. draft = argmax of ``llama_get_logits_ith(ctx_dft, 0)`` (llama.cpp takes the top of a
     top-k 10 sampler), ``h = llama_get_embeddings_nextn_ith(ctx_dft, 0)``; while fewer than
     n_max drafts (the server caps n_max at the tokens left - 1), decode (draft, ``h``) at the
     next position and repeat. Then, as the server does,
     ``llama_memory_seq_rm(head memory, 0, n_past, -1)``: only the seed pair stays.

verify and accept:
 10. The target decodes [last, drafts...] at ``n_past`` with every logit on; process() it
     (steps 4-7); a accepted = the leading drafts equal to the target's argmax there.
 11. ``llama_memory_seq_rm(target memory, 0, n_past + a + 1, -1)``; pending becomes
     (verify row a, ``n_past + a``); the new ``last`` is the target's argmax at row a.
     The head's rows beyond pending are dropped by the next draft's step 8.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from app.devtools.llama_batches import (
    decode,
    greedy_pick,
    load_target_and_head,
    logits_row,
    probe_context,
    run_head_probe,
)
from app.engine.llama.ext_batch import DECODE, ENCODE, BatchEntry, floats_at, process_batch
from app.engine.llama.extensions import Eagle3Functions, eagle3_functions
from app.engine.llama.feature_head import layer_inputs

N_CTX = 1024


@dataclass
class Eagle3Drafter:
    """The head's side of llama.cpp's EAGLE-3 implementation for one sequence."""

    fn: Eagle3Functions
    ctx_tgt: Any
    ctx_dft: Any
    layer_ids: tuple[int, ...]
    n_embd_tgt: int
    n_embd_dec: int
    n_vocab: int
    pending_pos: int = -1
    pending_g: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    verify_g: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    verify_pos_first: int = -1

    def _head_pos_max(self) -> int:
        return int(llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(self.ctx_dft), 0))

    def process(self, tokens: list[int], first_pos: int) -> None:
        n = len(tokens)
        features = layer_inputs(self.fn, self.ctx_tgt, self.layer_ids, n, self.n_embd_tgt)
        g = np.zeros((n, self.n_embd_dec), np.float32)
        n_ubatch = int(llama_cpp.llama_n_ubatch(self.ctx_dft))
        for start in range(0, n, n_ubatch):
            chunk = features[start : start + n_ubatch]
            placeholder = self._head_pos_max() + 1  # the encoder does not use positions
            entries = [(None, placeholder + j, row, True) for j, row in enumerate(chunk)]
            process_batch(self.ctx_dft, ENCODE, entries, who="head")
            address = self.fn.get_embeddings_nextn(self.ctx_dft)
            if not address:
                raise RuntimeError("the head's encoder returned no rows")
            rows = floats_at(address, (len(chunk), self.n_embd_dec))
            g[start : start + len(chunk)] = rows
        pairs: list[BatchEntry] = []
        bridge = self.pending_pos >= 0 and self.pending_pos + 1 == first_pos
        if bridge and self.pending_pos > self._head_pos_max():
            pairs.append((tokens[0], self.pending_pos, self.pending_g, False))
        pairs += [(tokens[k + 1], first_pos + k, g[k], False) for k in range(n - 1)]
        if pairs:
            process_batch(self.ctx_dft, DECODE, pairs, who="head")
        self.verify_g, self.verify_pos_first = g, first_pos
        self.pending_pos, self.pending_g = first_pos + n - 1, g[n - 1].copy()

    def draft(self, last: int, n_max: int) -> list[int]:
        memory = llama_cpp.llama_get_memory(self.ctx_dft)
        llama_cpp.llama_memory_seq_rm(memory, 0, self.pending_pos, -1)
        seed = (last, self.pending_pos, self.pending_g, True)
        process_batch(self.ctx_dft, DECODE, [seed], who="head")
        drafts: list[int] = []
        while True:
            token = int(logits_row(self.ctx_dft, self.n_vocab, 0).argmax())
            address = self.fn.get_embeddings_nextn_ith(self.ctx_dft, 0)
            if not address:
                raise RuntimeError("the head returned no pre-norm row")
            prenorm = floats_at(address, (self.n_embd_dec,)).copy()
            drafts.append(token)
            if len(drafts) >= n_max:
                return drafts
            pos = self.pending_pos + len(drafts)
            process_batch(self.ctx_dft, DECODE, [(token, pos, prenorm, True)], who="head")

    def accept(self, n_accepted: int) -> None:
        i = min(n_accepted, len(self.verify_g) - 1)
        self.pending_pos = self.verify_pos_first + i
        self.pending_g = self.verify_g[i].copy()


def _target_only(
    model: Any, prompt: list[int], n_vocab: int, n_tokens: int, banned: list[int]
) -> list[int]:
    ctx = probe_context(model, N_CTX)
    decode(ctx, prompt, 0, what="target llama_decode")
    out = [greedy_pick(ctx, n_vocab, -1, banned)]
    while len(out) < n_tokens:
        decode(ctx, [out[-1]], len(prompt) + len(out) - 1, what="target llama_decode")
        out.append(greedy_pick(ctx, n_vocab, -1, banned))
    llama_cpp.llama_free(ctx)
    return out


def _speculative(
    target: Any, head: Any, prompt: list[int], n_tokens: int, n_max: int, banned: list[int]
) -> dict[str, Any]:
    fn = eagle3_functions()
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(target))
    n_layer_tgt = llama_cpp.llama_model_n_layer(target)
    layer_ids = fn.target_layer_ids(head)
    if len(layer_ids) != 3 or not all(0 <= lid < n_layer_tgt for lid in layer_ids):
        raise RuntimeError(f"head reads layers {layer_ids}; the target has {n_layer_tgt}")
    ctx_tgt = probe_context(target, N_CTX)
    ctx_dft = probe_context(head, N_CTX, ctx_other=ctx_tgt)
    for lid in layer_ids:
        fn.set_embeddings_layer_inp(ctx_tgt, lid, True)
    fn.set_embeddings_nextn(ctx_dft, True, True)
    drafter = Eagle3Drafter(
        fn,
        ctx_tgt,
        ctx_dft,
        layer_ids,
        llama_cpp.llama_model_n_embd(target),
        llama_cpp.llama_model_n_embd(head),
        n_vocab,
    )
    target_memory = llama_cpp.llama_get_memory(ctx_tgt)

    decode(ctx_tgt, prompt, 0, what="target llama_decode")
    drafter.process(prompt, 0)
    last = greedy_pick(ctx_tgt, n_vocab, -1, banned)
    out, n_past = [last], len(prompt)
    drafted_at, accepted_at = [0] * n_max, [0] * n_max
    steps = 0
    while len(out) < n_tokens:
        # as llama-server: never draft past the answer's end (n_remaining - 1)
        n_draft = min(n_max, n_tokens - len(out) - 1)
        drafts = drafter.draft(last, n_draft) if n_draft > 0 else []
        # the server drops the head's draft rows before verifying: the seed pair at n_past - 1
        # stays, the verify batch's rows follow it
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx_dft), 0, n_past, -1)
        batch = [last, *drafts]
        decode(ctx_tgt, batch, n_past, logits="all", what="target llama_decode")
        drafter.process(batch, n_past)
        verified = [greedy_pick(ctx_tgt, n_vocab, i, banned) for i in range(len(batch))]
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == verified[accepted]:
            accepted += 1
        for i in range(len(drafts)):
            drafted_at[i] += 1
            accepted_at[i] += i < accepted
        llama_cpp.llama_memory_seq_rm(target_memory, 0, n_past + accepted + 1, -1)
        drafter.accept(accepted)
        out += drafts[:accepted] + [verified[accepted]]
        last, n_past, steps = verified[accepted], n_past + accepted + 1, steps + 1
    llama_cpp.llama_free(ctx_dft)
    llama_cpp.llama_free(ctx_tgt)
    return {
        "tokens": out[:n_tokens],
        "target_layers": list(layer_ids),
        "steps": steps,
        "drafted": sum(drafted_at),
        "accepted": sum(accepted_at),
        "drafted_per_position": drafted_at,
        "accepted_per_position": accepted_at,
        "acceptance_per_position": [
            a / d if d else 0.0 for a, d in zip(accepted_at, drafted_at, strict=True)
        ],
    }


def greedy(
    target_path: Path,
    head_path: Path,
    n_tokens: int,
    prompt: list[int],
    n_max: int,
    *,
    ignore_eos: bool = False,
) -> dict[str, Any]:
    """Target-only greedy tokens beside EAGLE-3-speculative greedy tokens."""
    loaded = load_target_and_head(target_path, head_path, ignore_eos=ignore_eos)
    if isinstance(loaded, dict):
        return loaded
    target, head, n_vocab, banned = loaded.target, loaded.head, loaded.n_vocab, loaded.banned
    baseline = _target_only(target, prompt, n_vocab, n_tokens, banned)
    speculative = _speculative(target, head, prompt, n_tokens, n_max, banned)
    has_encoder = bool(llama_cpp.llama_model_has_encoder(head))
    loaded.free()
    return {
        "loaded": True,
        "head_has_encoder": has_encoder,
        "target_only": baseline,
        "identical": speculative["tokens"] == baseline,
        **speculative,
    }


def main(argv: list[str]) -> int:
    switches = {"--ignore-eos": "ignore_eos"}
    return run_head_probe(argv, __doc__, greedy, n_tokens=200, n_max=3, switches=switches)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
