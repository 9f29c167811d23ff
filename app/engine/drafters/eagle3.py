"""Drafting with an EAGLE-3 head: a small decoder that reads three of the target's layers.

The head is a separate GGUF (``eagle3`` architecture) trained for one target. It borrows the
target's token embedding and output through ``ctx_other`` and follows llama.cpp's
``common_speculative_impl_draft_eagle3`` (common/speculative.cpp), as
``app/devtools/eagle3_probe.py`` documents step by step:

- after every target decode, the inputs of the head's three target layers for each decoded
  position are concatenated and run through the head's encoder (``LLAMA_PROCESS_TYPE_ENCODE``),
  giving one feature row ``g_p`` per position; the head's decoder cache then holds, at its
  position ``p``, the token at ``p + 1`` beside ``g_p``;
- a draft seeds the decoder with the last committed token beside the feature row of the
  position before it, then feeds each drafted token back with the decoder's own pre-norm
  row, one position further each time;
- rejected tokens need no rollback of their own: the next target decode rewrites the head's
  cache from its first position (the position before it included, whose partner token may
  have changed), and a draft always starts by dropping everything past its seed.

The feature rows are kept in a ring keyed by position, so per-step work stays flat in depth.
"""

from __future__ import annotations

import time

import llama_cpp
import numpy as np

from app.engine.config import ModelSpec, SamplerConfig
from app.engine.drafters.base import DraftBlock, DraftingContext
from app.engine.drafters.row_ring import RowRing
from app.engine.drafters.sampled import SampledDrafter
from app.engine.llama.backend import LlamaContext, LlamaModel
from app.engine.llama.ext_batch import DECODE, ENCODE, BatchEntry, floats_at, logits_ith_address
from app.engine.llama.extensions import eagle3_functions
from app.engine.llama.feature_head import FeatureHead, StepRows
from app.engine.sampling import HostRow, Row
from app.errors import ModelLoadError


class Eagle3Head(FeatureHead):
    """An EAGLE-3 head's context over one target context, for the loaded pair's lifetime."""

    def __init__(self, head: LlamaModel, target: LlamaContext, spec: ModelSpec) -> None:
        super().__init__(eagle3_functions(), head, target, n_layers=3, who="EAGLE-3 head")
        if head.n_vocab != target.model.n_vocab:
            raise ModelLoadError(
                f"{head.path.name} drafts over {head.n_vocab} tokens and the target has "
                f"{target.model.n_vocab}: heads with a reduced draft vocabulary are not supported"
            )
        ptr = self._open_context(spec)
        self.fn.set_embeddings_nextn(ptr, True, True)
        self._rows = RowRing(self.n_embd)
        self._zero_row = np.zeros(self.n_embd, dtype=np.float32)
        self._encoded = StepRows(self.n_embd)  # read by the decoder pass, copied to the ring
        self._position = 0  # where the next drafted token goes

    def sample_with(self, config: SamplerConfig) -> str:
        """The head's decoder returns whole rows of logits: its drafts are sampled on the host
        whatever the chain (``SamplesRows``)."""
        return "host (the EAGLE-3 head's draft rows)"

    # --- after every target decode --------------------------------------------------------

    def _read_rows(self, first_pos: int, n: int, features: np.ndarray, at: int) -> None:
        tokens = self.target.tokens[first_pos : first_pos + n]
        width = features.shape[1]  # rows passed by address below
        row_bytes = width * 4
        g, g_at = self._encoded.take(n)
        for start in range(0, n, self.n_ubatch):
            count = min(self.n_ubatch, n - start)
            placeholder = self._pos_max() + 1  # the encoder does not read positions
            entries: list[BatchEntry] = [
                (None, placeholder + j, at + (start + j) * row_bytes, True) for j in range(count)
            ]
            self._process(ENCODE, entries, width=width)
            address = self.fn.get_embeddings_nextn(self.ptr)
            if not address:
                raise RuntimeError("the head's encoder returned no rows")
            g[start : start + count] = floats_at(address, (count, self.n_embd))
        self._rows.put(first_pos, g)
        # the decoder's cache from the position before this batch: its partner token is the
        # batch's first, which may differ from what the cache held there
        start = max(first_pos - 1, 0)
        llama_cpp.llama_memory_seq_rm(self.memory, 0, start, -1)
        entries = []
        before = self._rows.address(first_pos - 1)
        if before is not None:
            entries.append((tokens[0], first_pos - 1, before, False))
        row_bytes = self.n_embd * 4
        entries += [
            (tokens[k + 1], first_pos + k, g_at + k * row_bytes, False) for k in range(n - 1)
        ]
        for chunk_start in range(0, len(entries), self.n_ubatch):
            chunk = entries[chunk_start : chunk_start + self.n_ubatch]
            # no wait, as the block drafters' injection (dflash.py): the seed pass waits
            self._process(DECODE, chunk, width=self.n_embd, wait=False)

    def _pos_max(self) -> int:
        return int(llama_cpp.llama_memory_seq_pos_max(self.memory, 0))

    # --- drafting ---------------------------------------------------------------------------

    def _logits(self) -> np.ndarray:
        address = logits_ith_address(self.ptr, 0)
        if not address:
            raise RuntimeError("the EAGLE-3 head returned no logits")
        return floats_at(address, (self.model.n_vocab,))

    def first(self, committed: list[int]) -> np.ndarray:
        """Seed the decoder with the last committed token and the feature row before it."""
        self.catch_up()
        seed = len(committed) - 2  # the target holds committed[:-1]; the last is not decoded
        llama_cpp.llama_memory_seq_rm(self.memory, 0, max(seed, 0), -1)
        row = self._rows.address(seed)
        if row is None:  # the ring lost it (or a one-token prompt): a weak draft, not a wrong one
            row = self._zero_row.ctypes.data
        self._process(DECODE, [(committed[-1], max(seed, 0), row, True)], width=self.n_embd)
        self._position = max(seed, 0) + 1
        return self._logits()

    def advance(self, token: int) -> np.ndarray:
        # the decoder's pre-norm row goes back in by its address: llama.cpp copies it into the
        # batch before the pass that overwrites it
        address = self.fn.get_embeddings_nextn_ith(self.ptr, 0)
        if not address:
            raise RuntimeError("the EAGLE-3 head returned no pre-norm row")
        self._process(DECODE, [(token, self._position, address, True)], width=self.n_embd)
        self._position += 1
        return self._logits()


class Eagle3Drafter(SampledDrafter):
    """Drafts with an EAGLE-3 head by the same rules as a draft model."""

    name = "EAGLE-3"

    def __init__(self, head: Eagle3Head, context: DraftingContext) -> None:
        super().__init__(context)
        self.head = head

    def rest(self, resting: bool) -> None:
        self.head.rest(resting)

    def _start(self, committed: list[int], block: DraftBlock) -> Row:
        began = time.perf_counter()
        row = HostRow(self.head.first(committed))
        block.catch_up = 1
        block.catch_up_ms = (time.perf_counter() - began) * 1000.0
        self.context.costs.observe_draft_pass(1, block.catch_up_ms, len(committed))
        return row

    def _advance(self, token: int, depth: int) -> Row:
        began = time.perf_counter()
        row = HostRow(self.head.advance(token))
        self.context.costs.observe_draft_pass(1, (time.perf_counter() - began) * 1000.0, depth)
        return row
