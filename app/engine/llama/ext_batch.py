"""One ``llama_process`` call on an extended batch, as the heads that read the target's
features (EAGLE-3, DFlash) feed their own contexts: each entry is a token, an embedding row,
or a token with the row that goes beside it."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

ENCODE = llama_cpp.LLAMA_PROCESS_TYPE_ENCODE
DECODE = llama_cpp.LLAMA_PROCESS_TYPE_DECODE

# a token (None: the row alone), its position, an embedding row (None: the token alone), logits
BatchEntry = tuple[int | None, int, np.ndarray | None, bool]

_FLOATS = ctypes.POINTER(ctypes.c_float)


class ExtBatch:
    """One extended batch on a context, filled and processed again for each call: a head
    processes a few entries several times a step, and building the batch afresh each time
    cost more on the host than the head's own pass on a small model."""

    def __init__(self, ctx: Any, *, who: str) -> None:
        """``who`` names the head in the errors."""
        self.ctx = ctx
        self.who = who
        self._batch = llama_cpp.llama_batch_ext_init(ctx)
        if not self._batch:
            raise RuntimeError(f"llama.cpp could not make a batch for the {who}")
        self._pos = llama_cpp.llama_pos(0)

    def process(self, kind: int, entries: Sequence[BatchEntry]) -> float:
        """Run ``entries`` through ``llama_process``; the seconds llama.cpp took."""
        batch, pos, who = self._batch, self._pos, self.who
        if not batch:
            raise RuntimeError(f"the {who}'s batch is closed")
        llama_cpp.llama_batch_ext_clear(batch)
        for token, position, row, output in entries:
            embd = None
            if row is not None:
                if row.dtype != np.float32 or not row.flags.c_contiguous:
                    row = np.ascontiguousarray(row, dtype=np.float32)
                # llama.cpp copies the row while it is added: ``row`` outlives the call
                embd = llama_cpp.llama_embd(ctypes.cast(row.ctypes.data, _FLOATS), 1, row.shape[0])
            if token is None:
                index = llama_cpp.llama_batch_ext_add_embd(batch, 0, embd)
            else:
                index = llama_cpp.llama_batch_ext_add_token(batch, 0, token)
                if (
                    index >= 0
                    and embd is not None
                    and not llama_cpp.llama_batch_ext_set_embd_token(batch, index, embd)
                ):
                    raise RuntimeError(f"llama.cpp refused an input row of the {who}")
            if index < 0:
                raise RuntimeError(f"llama.cpp refused a batch entry of the {who} ({index})")
            pos.value = position
            llama_cpp.llama_batch_ext_set_pos(batch, index, ctypes.byref(pos))
            if output:
                llama_cpp.llama_batch_ext_set_output_logits(batch, index, True)
        began = time.perf_counter()
        code = llama_cpp.llama_process(self.ctx, kind, batch)
        took = time.perf_counter() - began
        if code != 0:
            raise RuntimeError(f"the {who}'s llama_process returned {code}")
        return took

    def close(self) -> None:
        if self._batch:
            llama_cpp.llama_batch_ext_free(self._batch)
            self._batch = None


def process_batch(ctx: Any, kind: int, entries: Sequence[BatchEntry], *, who: str) -> float:
    """Run ``entries`` through ``llama_process`` on ``ctx`` in a batch of their own; the
    seconds it took. ``who`` names the head in the errors."""
    batch = ExtBatch(ctx, who=who)
    try:
        return batch.process(kind, entries)
    finally:
        batch.close()
