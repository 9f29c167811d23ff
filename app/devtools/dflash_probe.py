"""Greedy DFlash / DFlash2 / DSpark speculation through the real llama.cpp, the way llama.cpp
drives it.

A developer's probe, not app code (the app reaches llama.cpp only through the engine
process). ``python -m app.devtools.dflash_probe TARGET HEAD [--greedy N] [--prompt 1,300,310]
[--n-max K] [--ignore-eos] [--draft-from-prompt]`` loads a target and its block drafter,
generates N greedy tokens target-only and with block drafts, and prints one JSON object:
what llama.cpp says about the head (target layers, block size, mask token, DFlash2's
selector width, DSpark's Markov head), whether the two runs are identical, and the drafted
and accepted counts. Run it in a child process: llama.cpp aborts the process on some
malformed heads.

``--draft-from-prompt`` steps as SpecDeck's engine does: the target decodes the prompt but
its last token, and the first block drafts after the prompt's last token (llama-server first
decodes the whole prompt and drafts after the token it picks there).

The call sequence is llama.cpp's ``common_speculative_impl_draft_dflash``
(common/speculative.cpp) with the server's loop around it (tools/server/server-context.cpp):

Set-up
  1. ``ctx_tgt = llama_init_from_model(target)``; ``ctx_dft = llama_init_from_model(head)``
     with ``ctx_other = ctx_tgt`` (required when the head has no ``token_embd`` or no
     ``output``), ``n_ctx`` = the target's, ``n_rs_seq = 0``, ``n_outputs_max`` at least the
     block (n_max + 1 outputs a sequence).
  2. ``ids = llama_model_target_layer_ids(head)``; ``llama_set_embeddings_layer_inp(ctx_tgt,
     id, true)`` for each (before the first decode: it forces a graph re-reserve).
  3. From the head's metadata (``llama_model_meta_val_str``): ``dflash.block_size`` (16 when
     absent), ``dflash.sample_from_anchor`` (true when absent), ``dflash.attention.causal``
     (false when absent); ``top_k = llama_model_dflash_selector_top_k(head)`` (DFlash2 when
     > 0); ``mask = llama_vocab_mask(llama_model_get_vocab(head))``; DSpark when the head has
     ``markov_w1.weight`` (llama-server's auto-detection).
  4. n_max is clamped to ``block_size`` (DSpark reading its anchor) or ``block_size - 1``.
  5. ``llama_set_embeddings_nextn(ctx_dft, true, masked = not DFlash2)``;
     ``llama_set_causal_attn(ctx_dft, causal)``.

process(target batch at positions p .. p+n-1), after every target decode (prompt and verify):
  6. ``F[i] = concat_k llama_get_embeddings_layer_inp(ctx_tgt, ids[k])[i]``, one row of
     ``len(ids) * n_embd_tgt`` per token; ``llama_process(ctx_dft, DECODE, batch)`` with one
     embedding row per token at the target's positions, no outputs, chunks of at most
     ``n_ubatch``: the head writes their keys and values into its cache.

draft(last, at position pos0 = n_past):
  7. One batch: ``last`` at pos0, then the mask token at pos0+1 ..; n_max + 1 tokens (DSpark
     from its anchor: n_max), logits on for each (off for DFlash2); ``llama_process(DECODE)``.
  8. DFlash: the argmax at block rows 1 .. (llama.cpp takes the top of a top-k 10 sampler and
     stops below p_min). DSpark: rows 0 .. (the Markov head has already chained them in the
     graph; with p_min, ``llama_get_embeddings_nextn`` holds each row's confidence in its first
     column, stop below p_min). DFlash2: row i of ``llama_get_embeddings_nextn`` holds top_k
     candidate ids then top_k x top_k scores; walk from predecessor 0, taking the argmax of the
     scores after the previous pick.
  9. As the server does: ``llama_memory_seq_rm(head memory, 0, pos0, -1)``: the block leaves
     the head's cache; the draft is cut to the tokens left - 1.

verify and accept:
 10. The target decodes [last, drafts...] at pos0 with every logit on; process() it (step 6);
     accepted = the leading drafts equal to the target's argmax there.
 11. ``llama_memory_seq_rm(memory, 0, pos0 + accepted + 1, -1)`` on both contexts; the new
     ``last`` is the target's argmax at row ``accepted``.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
from gguf import GGUFReader

from app.devtools.llama_batches import (
    decode,
    greedy_pick,
    load_target_and_head,
    logits_row,
    probe_context,
    run_head_probe,
)
from app.engine.llama.ext_batch import DECODE, floats_at, process_batch
from app.engine.llama.extensions import DFlashFunctions, dflash_functions
from app.engine.llama.feature_head import layer_inputs

N_CTX = 1024


def _meta(model: Any, key: str) -> str | None:
    buffer = ctypes.create_string_buffer(64)
    if llama_cpp.llama_model_meta_val_str(model, key.encode(), buffer, len(buffer)) < 0:
        return None
    return buffer.value.decode()


def _decode_target(ctx: Any, tokens: list[int], first_pos: int) -> None:
    decode(ctx, tokens, first_pos, logits="all", what="target llama_decode")


@dataclass(frozen=True)
class BlockHead:
    """What llama.cpp says about a loaded block drafter (set-up steps 2-4)."""

    layer_ids: tuple[int, ...]
    block_size: int
    sample_from_anchor: bool
    causal: bool
    selector_top_k: int
    mask_token: int
    dspark: bool

    @property
    def n_draft_max(self) -> int:
        return self.block_size if self.dspark and self.sample_from_anchor else self.block_size - 1


def block_head(fn: DFlashFunctions, head: Any, has_markov_head: bool) -> BlockHead:
    block = _meta(head, "dflash.block_size")
    anchor = _meta(head, "dflash.sample_from_anchor")
    causal = _meta(head, "dflash.attention.causal")
    return BlockHead(
        layer_ids=fn.target_layer_ids(head),
        block_size=int(block) if block is not None else 16,
        sample_from_anchor=anchor is None or anchor == "true",
        causal=causal == "true",
        selector_top_k=int(fn.model_dflash_selector_top_k(head)),
        mask_token=int(llama_cpp.llama_vocab_mask(llama_cpp.llama_model_get_vocab(head))),
        dspark=has_markov_head,
    )


class BlockDrafter:
    """The head's side of llama.cpp's DFlash implementation for one sequence."""

    def __init__(self, fn: DFlashFunctions, ctx_tgt: Any, ctx_dft: Any, head: BlockHead) -> None:
        self.fn, self.ctx_tgt, self.ctx_dft, self.head = fn, ctx_tgt, ctx_dft, head
        self.n_embd_tgt = int(llama_cpp.llama_model_n_embd(llama_cpp.llama_get_model(ctx_tgt)))
        model = llama_cpp.llama_get_model(ctx_dft)
        self.n_embd = int(llama_cpp.llama_model_n_embd(model))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)))
        self.dflash2 = head.selector_top_k > 0
        fn.set_embeddings_nextn(ctx_dft, True, not self.dflash2)
        llama_cpp.llama_set_causal_attn(ctx_dft, head.causal)

    def process(self, n_tokens: int, first_pos: int) -> None:
        features = layer_inputs(
            self.fn, self.ctx_tgt, self.head.layer_ids, n_tokens, self.n_embd_tgt
        )
        n_ubatch = int(llama_cpp.llama_n_ubatch(self.ctx_dft))
        for start in range(0, n_tokens, n_ubatch):
            chunk = features[start : start + n_ubatch]
            entries = [(None, first_pos + start + i, row, False) for i, row in enumerate(chunk)]
            process_batch(self.ctx_dft, DECODE, entries, who="head")

    def draft(self, last: int, pos0: int, n_max: int) -> list[int]:
        head = self.head
        anchor_first = head.dspark and head.sample_from_anchor
        n_block = n_max + (0 if anchor_first else 1)
        block = [last] + [head.mask_token] * (n_block - 1)
        entries = [(t, pos0 + i, None, not self.dflash2) for i, t in enumerate(block)]
        process_batch(self.ctx_dft, DECODE, entries, who="head")
        drafts: list[int] = []
        if self.dflash2:
            k = head.selector_top_k
            address = self.fn.get_embeddings_nextn(self.ctx_dft)
            if not address:
                raise RuntimeError("the DFlash2 selector produced no lattice")
            lattice = floats_at(address, (n_block, self.n_embd))
            predecessor = 0
            for i in range(1, n_block):
                row = lattice[i]
                scores = row[k + predecessor * k : k + (predecessor + 1) * k]
                predecessor = int(scores.argmax())
                drafts.append(int(row[predecessor]))
        else:
            for i in range(0 if anchor_first else 1, n_block):
                drafts.append(int(logits_row(self.ctx_dft, self.n_vocab, i).argmax()))
        memory = llama_cpp.llama_get_memory(self.ctx_dft)
        llama_cpp.llama_memory_seq_rm(memory, 0, pos0, -1)
        return drafts


def greedy(
    target_path: Path,
    head_path: Path,
    n_tokens: int,
    prompt: list[int],
    n_max: int,
    *,
    ignore_eos: bool = False,
    draft_from_prompt: bool = False,
) -> dict[str, Any]:
    """Target-only greedy tokens beside block-speculative greedy tokens."""
    fn = dflash_functions()
    loaded = load_target_and_head(target_path, head_path, ignore_eos=ignore_eos)
    if isinstance(loaded, dict):
        return loaded
    target, head_model, n_vocab, banned = loaded.target, loaded.head, loaded.n_vocab, loaded.banned
    markov = any(t.name == "markov_w1.weight" for t in GGUFReader(str(head_path)).tensors)
    head = block_head(fn, head_model, markov)
    n_max = min(n_max, head.n_draft_max)

    baseline_ctx = probe_context(target, N_CTX)
    _decode_target(baseline_ctx, prompt, 0)
    baseline = [greedy_pick(baseline_ctx, n_vocab, len(prompt) - 1, banned)]
    while len(baseline) < n_tokens:
        _decode_target(baseline_ctx, baseline[-1:], len(prompt) + len(baseline) - 1)
        baseline.append(greedy_pick(baseline_ctx, n_vocab, 0, banned))
    llama_cpp.llama_free(baseline_ctx)

    ctx_tgt = probe_context(target, N_CTX)
    for lid in head.layer_ids:
        fn.set_embeddings_layer_inp(ctx_tgt, lid, True)
    ctx_dft = probe_context(head_model, N_CTX, ctx_other=ctx_tgt, n_outputs=n_max + 1)
    drafter = BlockDrafter(fn, ctx_tgt, ctx_dft, head)
    if draft_from_prompt:  # the prompt's last token is the first block's anchor
        _decode_target(ctx_tgt, prompt[:-1], 0)
        drafter.process(len(prompt) - 1, 0)
        tokens, first_pos, n_total = [prompt[-1]], len(prompt) - 1, n_tokens + 1
    else:
        _decode_target(ctx_tgt, prompt, 0)
        drafter.process(len(prompt), 0)
        tokens = [greedy_pick(ctx_tgt, n_vocab, len(prompt) - 1, banned)]
        first_pos, n_total = len(prompt), n_tokens
    drafted = accepted = 0
    per_position = [0] * n_max
    while len(tokens) < n_total:
        pos0 = first_pos + len(tokens) - 1
        cap = min(n_max, n_total - len(tokens) - 1)
        drafts = drafter.draft(tokens[-1], pos0, n_max)[:cap] if cap > 0 else []
        _decode_target(ctx_tgt, [tokens[-1], *drafts], pos0)
        drafter.process(len(drafts) + 1, pos0)
        picks = [greedy_pick(ctx_tgt, n_vocab, i, banned) for i in range(len(drafts) + 1)]
        n_ok = 0
        while n_ok < len(drafts) and drafts[n_ok] == picks[n_ok]:
            per_position[n_ok] += 1
            n_ok += 1
        drafted, accepted = drafted + len(drafts), accepted + n_ok
        tokens += picks[: n_ok + 1]
        for ctx in (ctx_tgt, ctx_dft):
            llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, pos0 + n_ok + 1, -1)
    tokens = tokens[1:n_total] if draft_from_prompt else tokens[:n_total]
    llama_cpp.llama_free(ctx_dft)
    llama_cpp.llama_free(ctx_tgt)
    loaded.free()
    return {
        "loaded": True,
        "target_layers": list(head.layer_ids),
        "block_size": head.block_size,
        "mask_token": head.mask_token,
        "selector_top_k": head.selector_top_k,
        "dspark": head.dspark,
        "n_max": n_max,
        "tokens": tokens,
        "target_only": baseline,
        "identical": tokens == baseline,
        "drafted": drafted,
        "accepted": accepted,
        "accepted_per_position": per_position,
    }


def main(argv: list[str]) -> int:
    switches = {"--ignore-eos": "ignore_eos", "--draft-from-prompt": "draft_from_prompt"}
    return run_head_probe(argv, __doc__, greedy, n_tokens=64, n_max=4, switches=switches)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
