"""One ``llama_process`` call on an extended batch, as the heads that read the target's
features (EAGLE-3, DFlash) feed their own contexts: each entry is a token, an embedding row,
or a token with the row that goes beside it."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence

import llama_cpp
import numpy as np

ENCODE = llama_cpp.LLAMA_PROCESS_TYPE_ENCODE
DECODE = llama_cpp.LLAMA_PROCESS_TYPE_DECODE

# a token (None: the row alone), its position, an embedding row (None: the token alone), logits
BatchEntry = tuple[int | None, int, np.ndarray | None, bool]


def process_batch(ctx: int, kind: int, entries: Sequence[BatchEntry], *, who: str) -> float:
    """Run ``entries`` through ``llama_process`` on ``ctx``; the seconds it took. ``who``
    names the head in the errors."""
    batch = llama_cpp.llama_batch_ext_init(ctx)
    rows = []  # llama.cpp copies each row when it is added: each stays alive until then
    try:
        for token, position, row, output in entries:
            embd = None
            if row is not None:
                rows.append(np.ascontiguousarray(row, dtype=np.float32))
                pointer = rows[-1].ctypes.data_as(ctypes.POINTER(ctypes.c_float))
                embd = llama_cpp.llama_embd(pointer, 1, rows[-1].shape[0])
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
            pos = llama_cpp.llama_pos(position)
            llama_cpp.llama_batch_ext_set_pos(batch, index, ctypes.byref(pos))
            if output:
                llama_cpp.llama_batch_ext_set_output_logits(batch, index, True)
        began = time.perf_counter()
        code = llama_cpp.llama_process(ctx, kind, batch)
        took = time.perf_counter() - began
    finally:
        llama_cpp.llama_batch_ext_free(batch)
    if code != 0:
        raise RuntimeError(f"the {who}'s llama_process returned {code}")
    return took
