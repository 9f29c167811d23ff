"""One ``llama_process`` call on an extended batch, as the heads that read the target's
features (EAGLE-3, DFlash) feed their own contexts: each entry is a token, an embedding row,
or a token with the row that goes beside it. Also float views of llama.cpp's buffers by
address (``floats_at``), which these heads read several times a step."""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

ENCODE = llama_cpp.LLAMA_PROCESS_TYPE_ENCODE
DECODE = llama_cpp.LLAMA_PROCESS_TYPE_DECODE

# a token (None: the row alone), its position, an embedding row (None: the token alone; an
# int: the address of ``width`` float32 values, as llama.cpp's getters return them), logits
BatchEntry = tuple[int | None, int, np.ndarray | int | None, bool]

_ARRAY_TYPES: dict[int, Any] = {}  # ctypes float array type per length
_VIEWS: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}  # by (address, shape)


def floats_at(address: int, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 view of ``shape`` over the buffer at ``address`` (llama.cpp's: valid until its
    context's next pass). numpy's ``ctypeslib.as_array`` builds a ctypes type for each call
    and costs a few microseconds, which a small head pays several times a step. llama.cpp
    keeps its output buffers from pass to pass, so the same (address, shape) comes back every
    step and its view is kept: a view holds no data, only where to read it."""
    key = (address, shape)
    view = _VIEWS.get(key)
    if view is not None:
        return view
    if len(_VIEWS) >= 256:
        _VIEWS.clear()
    view = _VIEWS[key] = _new_view(address, shape)
    return view


def _new_view(address: int, shape: tuple[int, ...]) -> np.ndarray:
    count = math.prod(shape)
    kind = _ARRAY_TYPES.get(count)
    if kind is None:
        if len(_ARRAY_TYPES) >= 256:
            _ARRAY_TYPES.clear()
        kind = _ARRAY_TYPES[count] = ctypes.c_float * count
    buffer: Any = kind.from_address(address)
    return np.frombuffer(buffer, dtype=np.float32).reshape(shape)


def _returning_address(name: str, *argtypes: Any) -> Any:
    """llama.cpp's function ``name`` returning an address (an int, None for NULL): a function
    object of its own, so llama-cpp-python's binding keeps its pointer result, and no pointer
    object is built to be read back."""
    function = llama_cpp.llama_cpp._lib[name]
    function.argtypes = [ctypes.c_void_p, *argtypes]
    function.restype = ctypes.c_void_p
    return function


logits_ith_address = _returning_address("llama_get_logits_ith", ctypes.c_int32)
logits_address = _returning_address("llama_get_logits")


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
        self._pos_pointer = ctypes.pointer(self._pos)
        # one row descriptor, its address rewritten for each row (llama.cpp copies the row
        # while it is added, and the descriptor is passed by value)
        self._embd = llama_cpp.llama_embd(None, 1, 0)
        offset: int = getattr(llama_cpp.llama_embd, "data").offset  # noqa: B009 - a field descriptor
        self._embd_data = ctypes.c_void_p.from_buffer(self._embd, offset)

    def process(
        self, kind: int, entries: Sequence[BatchEntry], *, width: int = 0, wait: bool = True
    ) -> float:
        """Run ``entries`` through ``llama_process``; the seconds llama.cpp took, until the
        pass has run (``LlamaContext.decode``). ``width``: the length of the rows given by
        address. ``wait=False`` for a pass whose results nobody reads: a GPU runs it while
        the host goes on, and the context's next pass, which waits, is timed with it."""
        batch, pos, who = self._batch, self._pos, self.who
        if not batch:
            raise RuntimeError(f"the {who}'s batch is closed")
        embd, embd_data, pos_pointer = self._embd, self._embd_data, self._pos_pointer
        add_token = llama_cpp.llama_batch_ext_add_token
        add_embd = llama_cpp.llama_batch_ext_add_embd
        set_pos = llama_cpp.llama_batch_ext_set_pos
        llama_cpp.llama_batch_ext_clear(batch)
        for token, position, row, output in entries:
            if row is not None:
                if isinstance(row, int):
                    if not row or width <= 0:
                        raise RuntimeError(f"an input row of the {who} has no data")
                    embd_data.value, embd.n_embd = row, width
                else:
                    if row.dtype != np.float32 or not row.flags.c_contiguous:
                        row = np.ascontiguousarray(row, dtype=np.float32)
                    embd_data.value, embd.n_embd = row.ctypes.data, row.shape[0]
            if token is None:
                if row is None:
                    raise RuntimeError(f"a batch entry of the {who} has neither token nor row")
                index = add_embd(batch, 0, embd)
            else:
                index = add_token(batch, 0, token)
                if (
                    index >= 0
                    and row is not None
                    and not llama_cpp.llama_batch_ext_set_embd_token(batch, index, embd)
                ):
                    raise RuntimeError(f"llama.cpp refused an input row of the {who}")
            if index < 0:
                raise RuntimeError(f"llama.cpp refused a batch entry of the {who} ({index})")
            pos.value = position
            set_pos(batch, index, pos_pointer)
            if output:
                llama_cpp.llama_batch_ext_set_output_logits(batch, index, True)
        began = time.perf_counter()
        code = llama_cpp.llama_process(self.ctx, kind, batch)
        if wait:
            llama_cpp.llama_synchronize(self.ctx)  # the pass's time, not its launch's
        took = time.perf_counter() - began
        if code != 0:
            raise RuntimeError(f"the {who}'s llama_process returned {code}")
        return took

    def close(self) -> None:
        if self._batch:
            llama_cpp.llama_batch_ext_free(self._batch)
            self._batch = None


def process_batch(
    ctx: Any, kind: int, entries: Sequence[BatchEntry], *, who: str, width: int = 0
) -> float:
    """Run ``entries`` through ``llama_process`` on ``ctx`` in a batch of their own; the
    seconds it took. ``who`` names the head in the errors."""
    batch = ExtBatch(ctx, who=who)
    try:
        return batch.process(kind, entries, width=width)
    finally:
        batch.close()
