"""Drafting with a block drafter (DFlash, DFlash2 or DSpark): one pass drafts a whole block.

The head is a separate GGUF (``dflash`` architecture) trained for one target. It follows
llama.cpp's ``common_speculative_impl_draft_dflash`` (common/speculative.cpp), as
``app/devtools/dflash_probe.py`` documents step by step:

- after every target decode (the prompt's batches and each verification), the inputs of the
  head's target layers at each decoded position are concatenated and decoded into the head's
  own cache at the target's positions: the head keeps keys and values of what the target saw;
- a draft decodes one block at the position after the committed tokens' last but one: the
  last committed token (the anchor) then mask tokens, attention inside the block non-causal
  unless the header says otherwise, and reads every position's prediction from that one pass:
  DFlash the mask positions, DSpark from its anchor's own position (its Markov head has
  chained the block in the graph), DFlash2 by walking its selector's lattice of candidates;
- the block leaves the head's cache right after the pass, and what the target rejected leaves
  it before the next block: the head's cache holds only committed positions between steps.

The draft is greedy, as llama.cpp's is, whatever the sampler: a drafted token is judged like a
lookup's (no draft distribution), so the answer stays the target's under either rule.
"""

from __future__ import annotations

import time

import llama_cpp
import numpy as np

from app.engine.config import ModelSpec, SamplerConfig
from app.engine.drafters.base import ConfidenceDrafter, DraftBlock, DraftingContext, DraftLimits
from app.engine.llama.backend import LlamaContext, LlamaModel
from app.engine.llama.ext_batch import DECODE, BatchEntry, floats_at, logits_ith_address
from app.engine.llama.extensions import DFlashFunctions, dflash_functions
from app.engine.llama.feature_head import FeatureHead
from app.errors import ModelLoadError
from app.gguf.block_heads import BlockDrafting


def _top_probability(logits: np.ndarray, index: int) -> float:
    """Softmax probability of ``index`` in a row of logits."""
    shifted = np.exp(logits - logits[index], dtype=np.float64)
    return float(1.0 / shifted.sum())


class BlockHead(FeatureHead):
    """A block drafter's context over one target context, for the loaded pair's lifetime."""

    fn: DFlashFunctions

    def __init__(
        self, head: LlamaModel, target: LlamaContext, spec: ModelSpec, facts: BlockDrafting
    ) -> None:
        super().__init__(dflash_functions(), head, target, who=f"{facts.variant} head")
        self.facts = facts
        self.variant = facts.variant
        self.selector_top_k = int(self.fn.model_dflash_selector_top_k(head.ptr))
        self.dflash2 = self.selector_top_k > 0
        self.dspark = facts.variant == "DSpark"
        self.anchor_first = self.dspark and facts.sample_from_anchor
        self.max_draft = facts.max_draft  # what one block can draft at most
        self.mask_token = int(llama_cpp.llama_vocab_mask(llama_cpp.llama_model_get_vocab(head.ptr)))
        if not 0 <= self.mask_token < head.n_vocab:
            raise ModelLoadError(f"llama.cpp finds no mask token in {head.path.name}")
        self.n_vocab = head.n_vocab
        # a block's every position has an output
        ptr = self._open_context(spec, n_outputs_max=facts.block_size, n_rs_seq=0)
        # DFlash2 leaves its selector's lattice in the next-token rows of every position;
        # DSpark its confidences in those of its outputs
        self.fn.set_embeddings_nextn(ptr, True, not self.dflash2)
        llama_cpp.llama_set_causal_attn(ptr, facts.causal)

    def sample_with(self, config: SamplerConfig) -> str:
        """The head's block is read on the host (its argmax, or DFlash2's lattice), whatever
        the chain (``SamplesRows``)."""
        return f"host (the {self.variant} head's block)"

    def forget(self) -> None:
        """Empty the head's cache (the next target decode refills it from its first position)."""
        llama_cpp.llama_memory_clear(self.memory, True)
        self.forget_held()

    # --- after every target decode --------------------------------------------------------

    def _read_rows(self, first_pos: int, n: int, features: np.ndarray, at: int) -> None:
        # what the head held from here on is a rejected draft's, or another prompt's
        llama_cpp.llama_memory_seq_rm(self.memory, 0, first_pos, -1)
        width = features.shape[1]  # rows passed by address below
        row_bytes = width * 4
        for start in range(0, n, self.n_ubatch):
            count = min(self.n_ubatch, n - start)
            entries: list[BatchEntry] = [
                (None, first_pos + start + i, at + (start + i) * row_bytes, False)
                for i in range(count)
            ]
            # as llama.cpp's drafter, no wait: on a GPU the injection runs while the host
            # judges the target's rows, and the block's pass, which waits, is timed with it
            self._process(DECODE, entries, width=width, wait=False)

    # --- drafting ---------------------------------------------------------------------------

    def block_length(self, n_max: int) -> int:
        """Tokens in the block that drafts up to ``n_max``: the anchor's place and the mask
        positions, or DSpark's block read from its anchor."""
        return n_max if self.anchor_first else n_max + 1

    def draft(
        self, last: int, pos0: int, n_max: int, *, confidences: bool
    ) -> tuple[list[int], list[float | None]]:
        """The head's block after ``last`` (at ``pos0``), up to ``n_max`` tokens, and each
        token's confidence where asked: the head's top probability (DSpark's confidence
        head where it has one, DFlash2's selector score)."""
        self.catch_up()
        n_max = max(1, min(n_max, self.max_draft))
        n_block = self.block_length(n_max)
        llama_cpp.llama_memory_seq_rm(self.memory, 0, pos0, -1)
        block = [last] + [self.mask_token] * (n_block - 1)
        self._process(DECODE, [(t, pos0 + i, None, not self.dflash2) for i, t in enumerate(block)])
        try:
            if self.dflash2:
                return self._walk_selector(n_block, confidences)
            return self._read_block(n_block, confidences)
        finally:
            llama_cpp.llama_memory_seq_rm(self.memory, 0, pos0, -1)  # the block leaves

    def _walk_selector(
        self, n_block: int, confidences: bool
    ) -> tuple[list[int], list[float | None]]:
        k = self.selector_top_k
        address = self.fn.get_embeddings_nextn(self.ptr)
        if not address:
            raise RuntimeError("the DFlash2 selector produced no lattice")
        lattice = floats_at(address, (n_block, self.n_embd))
        tokens: list[int] = []
        sure: list[float | None] = []
        predecessor = 0
        for i in range(1, n_block):
            row = lattice[i]
            scores = row[k + predecessor * k : k + (predecessor + 1) * k]
            predecessor = int(scores.argmax())
            tokens.append(int(row[predecessor]))
            sure.append(_top_probability(scores, predecessor) if confidences else None)
        return tokens, sure

    def _read_block(self, n_block: int, confidences: bool) -> tuple[list[int], list[float | None]]:
        conf_rows = None
        if confidences and self.dspark and self.facts.confidence_head:
            address = self.fn.get_embeddings_nextn(self.ptr)
            if address:
                conf_rows = floats_at(address, (n_block, self.n_embd))
        tokens: list[int] = []
        sure: list[float | None] = []
        for i in range(0 if self.anchor_first else 1, n_block):
            address = logits_ith_address(self.ptr, i)
            if not address:
                raise RuntimeError(f"the {self.variant} head returned no logits")
            logits = floats_at(address, (self.n_vocab,))
            token = int(logits.argmax())
            tokens.append(token)
            if conf_rows is not None:
                sure.append(float(conf_rows[i, 0]))
            else:
                sure.append(_top_probability(logits, token) if confidences else None)
        return tokens, sure


class DFlashDrafter(ConfidenceDrafter):
    """Drafts a block in one pass of a block drafter and keeps the part that pays."""

    def __init__(self, head: BlockHead, context: DraftingContext) -> None:
        super().__init__(context)
        self.head = head
        self.name = head.variant
        # the block is built for the request's ceiling, whatever one step asks: llama.cpp
        # builds every block for its n_max (the block's length changes what it drafts)
        self.n_max = max(1, min(context.spec.draft_max, head.max_draft))

    def rest(self, resting: bool) -> None:
        self.head.rest(resting)

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        began = time.perf_counter()
        context = self.context
        p_min, calibration = context.spec.p_min, context.calibration
        depth = len(committed)
        block = DraftBlock(source=self.name, depth=depth, passes=1)
        adaptive = limits.include > 0.0
        want = p_min > 0.0 or adaptive or context.want_probs
        tokens, confidences = self.head.draft(
            committed[-1], depth - 1, self.n_max, confidences=want
        )
        pass_ms = (time.perf_counter() - began) * 1000.0
        # the cost model prices a block as k single draft passes; a block drafter pays one
        # pass for all its positions, so each is filed as its share of that pass
        share = pass_ms / max(len(tokens), 1)
        context.costs.observe_draft_pass(1, share, depth)
        block.positions_per_pass = max(len(tokens), 1)
        all_accepted = 1.0
        for token, confidence in zip(tokens, confidences, strict=True):
            if len(block.tokens) >= limits.k or token >= context.target_vocab:
                break
            if confidence is not None:
                if confidence < p_min:
                    break
                if adaptive:
                    all_accepted *= self.bias.adjust(calibration.acceptance(confidence))
                    if all_accepted < limits.include:
                        block.declined = (token, confidence)
                        break
            block.tokens.append(token)
            block.confidences.append(confidence)
            block.probs.append(confidence)
            if limits.ends_answer is not None and limits.ends_answer(token):
                break
        block.ms = (time.perf_counter() - began) * 1000.0
        return block
