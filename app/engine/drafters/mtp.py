"""Drafting with the target's own next-token (MTP) layers: no second model.

A model trained with multi-token prediction carries extra decoder blocks after its trunk
(``<arch>.nextn_predict_layers``). Each reads the target's hidden state at position ``p - 1``
beside the token at ``p`` and predicts the token at ``p + 1``. llama.cpp runs them in an MTP
context (``LLAMA_CONTEXT_TYPE_MTP`` with ``ctx_other`` = the target), fed by the hidden rows
the target returns for every position it decodes (``llama_set_embeddings_nextn``). This
follows llama.cpp's ``common_speculative_impl_draft_mtp`` (common/speculative.cpp):

- the head's cache pairs every committed token ``x_p`` with the target's row ``h_{p-1}`` (a
  zero row before the first), caught up lazily at the next draft so rejected drafts never
  enter it;
- one head drafts several tokens by feeding its own output row back (positions advance);
- a model with several heads chains them, head ``i`` drafting the ``i``-th token over the
  whole drafted prefix, each head's cache filled for the committed positions first.

The target's hidden rows are kept in a ring keyed by position: the heads read only the rows
of positions the target decoded since the heads last caught up, so memory and per-step work
do not grow with the conversation.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from app.engine.config import ModelSpec
from app.engine.drafters.base import DraftBlock, DraftingContext, DraftLimits
from app.engine.drafters.row_ring import RING_ROWS, RowRing
from app.engine.drafters.sampled import SampledDrafter
from app.engine.llama.backend import LlamaContext, LlamaModel
from app.engine.sampling import Row
from app.engine.sequences import common_prefix_length
from app.errors import ModelLoadError


class NextTokenHeads:
    """The MTP context of one target context and the target rows it still has to read.

    Lives as long as the loaded pair, so the heads' cache is reused across answers like the
    target's own.
    """

    def __init__(
        self, model: LlamaModel, target: LlamaContext, spec: ModelSpec, *, assistant: bool = False
    ) -> None:
        if not assistant and model.n_layer_nextn <= 0:
            raise ValueError(f"{model.path.name} has no next-token layers")
        if model.n_embd_out != target.model.n_embd_out:
            raise ModelLoadError(
                f"{model.path.name} drafts from {model.n_embd_out}-wide hidden rows but "
                f"{target.model.path.name} gives {target.model.n_embd_out}-wide ones: "
                "it is not this target's assistant"
            )
        self.model = model
        self.target = target
        # an assistant is one head run again for each drafted token
        self.assistant = assistant
        self.n_heads = 1 if assistant else model.n_layer_nextn
        self.ctx = LlamaContext(
            model, replace(spec, n_ctx=target.n_ctx), n_batch=target.n_batch, heads_of=target
        )
        # Gemma 4 assistants keep no cache: they attend through the target's, so there is
        # nothing to catch up or roll back, and every drafted token sits at one position
        self.shared = self.ctx.shares_memory_with_target
        n_embd = model.n_embd_out
        # the target rows kept for the heads; older ones are fed eagerly (prefill)
        self._rows = RowRing(n_embd)
        self._zero = np.zeros(n_embd, dtype=np.float32)
        self._trusted = 0  # leading positions of the heads' cache known to be committed
        self._pos0 = 0  # chained heads: the position of the last committed token
        self._chain: list[int] = []
        self._chain_rows: list[np.ndarray] = []
        target.after_decode = self._target_decoded

    def close(self) -> None:
        if self.target.after_decode == self._target_decoded:
            self.target.after_decode = None
        self.ctx.close()

    @property
    def chained(self) -> bool:
        return self.n_heads > 1 and not self.shared

    # --- the target's rows ------------------------------------------------------------------

    def _target_decoded(self, first_pos: int, n: int) -> None:
        self._rows.put(first_pos, self.target.next_token_rows(n))
        if not self.shared and self.target.n_past - 1 - self.ctx.n_past > RING_ROWS // 2:
            # a long prefill: feed the heads the prompt now, before the ring overwrites rows
            # they still need (a verification batch is far shorter than this)
            n_keep = common_prefix_length(self.ctx.tokens, self.target.tokens)
            if self.chained:
                n_keep = min(n_keep, self._trusted)
            self.ctx.truncate(n_keep)
            self._trusted = self.ctx.n_past
            self._feed(self.target.tokens, self.target.n_past - 1)

    def _row(self, position: int) -> np.ndarray:
        """The target's row at ``position`` (zeros before the first token, or when the ring
        no longer holds it: a weaker draft for one position, never a wrong answer)."""
        row = self._rows.get(position)
        return self._zero if row is None else row

    def _rows_for(self, first: int, last: int) -> np.ndarray:
        """Rows paired with the tokens at positions ``first .. last - 1`` (each ``h_{p-1}``)."""
        return np.stack([self._row(p - 1) for p in range(first, last)])

    # --- the heads' cache -------------------------------------------------------------------

    def prepare(self, prompt: list[int]) -> None:
        """A new request: compare the heads' whole cache with ``prompt`` once, keep the
        common part and feed the rest but the last token (the first draft pass takes it)."""
        if self.shared:
            return
        n = common_prefix_length(self.ctx.tokens, prompt[:-1])
        if self.chained:
            n = min(n, self._trusted)
        self.ctx.truncate(n)
        self._trusted = self.ctx.n_past
        self._feed(prompt, len(prompt) - 1)

    def _synced(self, committed: list[int]) -> int:
        """How many leading positions of the heads' cache hold ``committed``'s tokens.

        The cache holds what was committed when it last caught up (``_trusted`` positions)
        plus drafted tokens, so only the drafted part is compared. Chained heads wrote each
        drafted position with one head only: nothing past the committed part is kept.
        """
        cached = self.ctx.tokens
        n = min(len(cached), len(committed), self._trusted)
        if self.chained:
            return n
        return common_prefix_length(cached, committed, known=n)

    def _feed(self, committed: list[int], upto: int, *, logits: str = "none") -> int:
        """Decode ``committed[n_past:upto]`` through every head; how many tokens it decoded."""
        first = self.ctx.n_past
        if first >= upto:
            return 0
        tokens = committed[first:upto]
        rows = self._rows_for(first, upto)
        for head in range(self.n_heads if self.chained else 1):
            if head:
                self.ctx.truncate(first)
            if self.chained:
                self.ctx.select_head(head)
            self.ctx.decode(tokens, logits=logits, rows=rows)
        if self.chained:
            self.ctx.select_head(0)
        self._trusted = self.ctx.n_past
        return len(tokens)

    # --- drafting ---------------------------------------------------------------------------

    def first(self, committed: list[int]) -> tuple[Row, int]:
        """Catch up and run the first head on the last committed token: its row for the
        next position, and how many tokens that pass decoded."""
        n = len(committed)
        if self.shared:
            self._pos0 = n - 1
            row = self._row(n - 2)[None, :]
            self.ctx.decode(committed[-1:], logits="last", rows=row, at=self._pos0)
            return self.ctx.row(-1), 1
        self.ctx.truncate(min(self._synced(committed), n - 1))
        if not self.chained:
            decoded = self._feed(committed, n, logits="last")
            return self.ctx.row(-1), decoded
        decoded = self._feed(committed, n - 1)
        self._pos0 = n - 1
        self._chain = [committed[-1]]
        self._chain_rows = [self._row(n - 2).copy()]
        return self._chain_pass(0), decoded + 1

    def advance(self, token: int, step: int) -> Row:
        """Feed drafted ``token`` with the row the previous head step returned; ``step`` is
        the index of the head step that drafts the following token."""
        # a view of llama.cpp's buffer: decode copies it into the batch before the pass
        row = self.ctx.head_row()
        if self.shared:  # the assistant's drafts all sit at the last committed position
            self.ctx.decode([token], logits="last", rows=row[None, :], at=self._pos0)
            return self.ctx.row(-1)
        if not self.chained:
            self.ctx.decode([token], logits="last", rows=row[None, :])
            return self.ctx.row(-1)
        self._chain.append(token)
        self._chain_rows.append(row.copy())  # kept past the next pass
        return self._chain_pass(step)

    def _chain_pass(self, head: int) -> Row:
        """Head ``head`` over the whole drafted prefix from the last committed position: each
        head keeps its own layer's cache, so a head never reads cells another head wrote."""
        self.ctx.truncate(self._pos0)
        self.ctx.select_head(head)
        try:
            self.ctx.decode(self._chain, logits="last", rows=np.stack(self._chain_rows))
        finally:
            self.ctx.select_head(0)
        return self.ctx.row(-1)


class MtpDrafter(SampledDrafter):
    """Drafts with the target's next-token heads, by the same rules as a draft model."""

    def __init__(self, heads: NextTokenHeads, context: DraftingContext) -> None:
        super().__init__(context)
        self.heads = heads
        self.name = "assistant" if heads.assistant else "MTP"
        self._step = 0

    def prefill(self, prompt: list[int]) -> None:
        # even while paused: the heads read the target's rows of the prompt, kept only now
        self.heads.prepare(prompt)

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        if self.heads.chained and limits.k > self.heads.n_heads:
            # chained heads draft one token each, as llama.cpp does
            limits = replace(limits, k=self.heads.n_heads)
        return super().propose(committed, limits)

    def _start(self, committed: list[int], block: DraftBlock) -> Row:
        began = time.perf_counter()
        row, decoded = self.heads.first(committed)
        block.catch_up = decoded
        block.catch_up_ms = (time.perf_counter() - began) * 1000.0
        self.context.costs.observe_draft_pass(decoded, block.catch_up_ms, len(committed))
        self._step = 0
        return row

    def _advance(self, token: int, depth: int) -> Row:
        self._step += 1
        began = time.perf_counter()
        row = self.heads.advance(token, self._step)
        self.context.costs.observe_draft_pass(1, (time.perf_counter() - began) * 1000.0, depth)
        return row
