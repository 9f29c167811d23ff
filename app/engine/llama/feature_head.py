"""What the heads that read the target's hidden state (EAGLE-3, the block drafters) share: the
target layers a head reads, checked against the target; the head's own context over the
target's; the inputs of those layers after every target decode; and ``llama_process`` on the
head's context."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from app.engine.config import ModelSpec
from app.engine.llama.backend import LlamaContext, LlamaModel
from app.engine.llama.ext_batch import BatchEntry, ExtBatch, floats_at
from app.engine.llama.extensions import Eagle3Functions
from app.errors import ModelLoadError

STEP_ROWS = 32  # a step's rows (one verified block) go to buffers kept for the head's life
# while the head rests, the target's rows it would have read are kept, at most this many,
# then read in one batch (a few megabytes for heads that read three layers of a wide target)
HELD_ROWS = 256


class StepRows:
    """``width``-wide float32 rows handed to llama.cpp by address. A step's few go to one
    buffer kept for the head's life, its address taken once, so a step allocates nothing
    (llama.cpp copies a row into its batch as it is added, so the buffer is free again by the
    next step); more rows, a prompt's, get an array of their own."""

    def __init__(self, width: int) -> None:
        self._buffer = np.empty((STEP_ROWS, width), dtype=np.float32)
        self._at = self._buffer.ctypes.data

    def take(self, n: int) -> tuple[np.ndarray, int]:
        """Room for ``n`` rows, and its address."""
        if n <= STEP_ROWS:
            return self._buffer[:n], self._at
        rows = np.empty((n, self._buffer.shape[1]), dtype=np.float32)
        return rows, rows.ctypes.data


def layer_inputs(
    fn: Eagle3Functions,
    target_ctx: Any,
    layer_ids: Sequence[int],
    n: int,
    n_embd_target: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The last decode's ``n`` rows on ``target_ctx``, each the inputs of the target layers
    ``layer_ids`` side by side (into ``out`` where given, else a new array)."""
    layers = []
    for layer in layer_ids:
        address = fn.get_embeddings_layer_inp(target_ctx, layer)
        if not address:
            raise RuntimeError(f"the target gave no input rows for layer {layer}")
        layers.append(floats_at(address, (n, n_embd_target)))
    return np.concatenate(layers, axis=1, out=out)


class FeatureHead:
    """A head's context over one target context, for the loaded pair's lifetime.

    A subclass checks what else its head needs once the layers are known (``__init__``), then
    opens the context (``_open_context``) and says how it reads the target's rows of each
    target decode (``_read_rows``).

    While its drafter rests (the guard has it paused), the head keeps those rows instead of
    reading them, and reads all it kept in one batch before it drafts again (``catch_up``):
    reading them step by step cost a paused EAGLE-3 head 39 % of its target's decoding time
    on the large synthetic pair, where the guard's promise is that a paused draft costs
    nothing."""

    def __init__(
        self,
        fn: Eagle3Functions,
        head: LlamaModel,
        target: LlamaContext,
        *,
        n_layers: int | None = None,
        who: str,
    ) -> None:
        """``n_layers``: how many target layers the head must read (None: any, at least one);
        ``who`` names the head in the errors."""
        self.fn = fn
        self.model = head
        self.target = target
        self.who = who
        n_layer = int(llama_cpp.llama_model_n_layer(target.model.ptr))
        self.layer_ids = fn.target_layer_ids(head.ptr)
        counted = len(self.layer_ids) == n_layers if n_layers is not None else bool(self.layer_ids)
        if not counted or not all(0 <= i < n_layer for i in self.layer_ids):
            # llama.cpp aborts the process on a layer the target does not hand out
            raise ModelLoadError(
                f"{head.path.name} reads target layers {list(self.layer_ids)}, but "
                f"{target.model.path.name} has {n_layer}: it is not this target's head"
            )

    def _open_context(
        self, spec: ModelSpec, *, n_outputs_max: int | None = None, n_rs_seq: int | None = None
    ) -> Any:
        """The head's context beside the target's (llama.cpp's defaults where a value is
        None); the target hands out the head's layers' inputs from its next decode on."""
        head, target = self.model, self.target
        self.n_embd_target = int(llama_cpp.llama_model_n_embd(target.model.ptr))
        self._feature_rows = StepRows(len(self.layer_ids) * self.n_embd_target)
        self.n_embd = int(llama_cpp.llama_model_n_embd(head.ptr))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = target.n_ctx
        params.n_batch = params.n_ubatch = target.n_batch
        params.n_seq_max = 1
        if n_rs_seq is not None:
            params.n_rs_seq = n_rs_seq
        if n_outputs_max is not None:
            params.n_outputs_max = n_outputs_max
        self.threads = spec.threads()  # its passes' threads, read by the run's CPU meter
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        params.ctx_other = target.ptr  # most heads embed and project with the target's weights
        ptr = llama_cpp.llama_init_from_model(head.ptr, params)
        if not ptr:
            raise ModelLoadError(f"llama.cpp could not create a context for {head.path.name}")
        self.ptr: Any = ptr
        self.memory = llama_cpp.llama_get_memory(ptr)
        self._batch = ExtBatch(ptr, who=self.who)
        self.n_ubatch = int(llama_cpp.llama_n_ubatch(ptr))
        self.decode_s = 0.0
        self.decode_thread_s = 0.0
        self.resting = False
        self._held: list[tuple[int, np.ndarray]] = []  # (first position, rows), in order
        self._held_rows = 0
        for layer in self.layer_ids:  # before the target's first decode: it re-reserves
            self.fn.set_embeddings_layer_inp(target.ptr, layer, True)
        target.after_decode = self._target_decoded
        return ptr

    def rest(self, resting: bool) -> None:
        """Keep the target's rows from now on (``resting``), or read what was kept and go
        back to reading them after each decode. Asked between steps, every step: a rest that
        has kept HELD_ROWS reads them here, outside any step's timed pass."""
        self.resting = resting
        if self._held and (not resting or self._held_rows >= HELD_ROWS):
            self.catch_up()

    def _target_decoded(self, first_pos: int, n: int) -> None:
        if self.resting and n < HELD_ROWS:
            self._hold(first_pos, n)
            return
        if self._held:  # before a batch a rest would not keep (a prompt's), what it kept
            self._trim_held(first_pos)
            self.catch_up()
        features, at = self._layer_inputs(n)
        self._read_rows(first_pos, n, features, at)

    def _read_rows(self, first_pos: int, n: int, features: np.ndarray, at: int) -> None:
        """Read the target's ``n`` rows from ``first_pos`` on (``features``, at address
        ``at``): what the head does after a target decode."""
        raise NotImplementedError

    def _trim_held(self, end: int) -> None:
        """Drop the rows kept for positions from ``end`` on (the target rolled them back)."""
        held = self._held
        while held and held[-1][0] + len(held[-1][1]) > end:
            start, rows = held.pop()
            self._held_rows -= len(rows)
            if start < end:
                held.append((start, rows[: end - start]))
                self._held_rows += end - start

    def _hold(self, first_pos: int, n: int) -> None:
        """Keep the last target decode's rows; those kept from ``first_pos`` on were a
        rolled-back verification's."""
        self._trim_held(first_pos)
        features, _ = self._layer_inputs(n)
        self._held.append((first_pos, features.copy()))
        self._held_rows += n
        if self._held_rows >= 4 * HELD_ROWS:  # decodes of small batches with no step between
            self.catch_up()

    def catch_up(self) -> None:
        """Read the rows kept while resting, in one batch, and wait for it: its time is the
        head's decoding where it is asked (between steps), not the next pass's."""
        self._trim_held(self.target.n_past)  # a rejected block's rows are not read
        if not self._held:
            return
        first = self._held[0][0]
        held = [rows for _, rows in self._held]
        self._held, self._held_rows = [], 0
        rows = np.ascontiguousarray(np.concatenate(held) if len(held) > 1 else held[0])
        self._read_rows(first, len(rows), rows, rows.ctypes.data)
        began = time.perf_counter()
        llama_cpp.llama_synchronize(self.ptr)  # a no-op on the CPU
        self._count(time.perf_counter() - began)

    def forget_held(self) -> None:
        self._held, self._held_rows = [], 0

    def close(self) -> None:
        if self.target.after_decode == self._target_decoded:
            self.target.after_decode = None
        if self.ptr:
            self._batch.close()
            llama_cpp.llama_free(self.ptr)
            self.ptr = None

    def _layer_inputs(self, n: int) -> tuple[np.ndarray, int]:
        """The last target decode's ``n`` feature rows and their address."""
        rows, at = self._feature_rows.take(n)
        layer_inputs(self.fn, self.target.ptr, self.layer_ids, n, self.n_embd_target, out=rows)
        return rows, at

    def set_threads(self, threads: int) -> None:
        """The threads of the head's next passes."""
        llama_cpp.llama_set_n_threads(self.ptr, threads, threads)
        self.threads = threads

    def _process(
        self, kind: int, entries: Sequence[BatchEntry], *, width: int = 0, wait: bool = True
    ) -> None:
        """``width``: the length of the rows given by address; ``wait``: ``ExtBatch.process``."""
        if entries:
            self._count(self._batch.process(kind, entries, width=width, wait=wait))

    def _count(self, seconds: float) -> None:
        """Seconds of the head's passes, and their threads' (read by the run's CPU meter)."""
        self.decode_s += seconds
        self.decode_thread_s += seconds * self.threads
