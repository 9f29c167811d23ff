"""Thin typed wrappers over llama.cpp's C API (through llama-cpp-python's ctypes bindings).

The engine needs direct control that the high-level ``llama_cpp.Llama`` class does not give:
one model shared by several contexts, logits for every position of a verification batch,
and KV-cache rollback with ``llama_memory_seq_rm``.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import gguf
import llama_cpp
import numpy as np

from app.engine.config import KV_TYPES, MAX_DRAFT_LEN, ModelSpec, SamplerConfig
from app.engine.llama.ext_batch import floats_at, logits_address
from app.engine.llama.load_hooks import current_load_observer
from app.engine.llama.repacking import repacking_for, weights_in
from app.engine.llama.runtime import ensure_backend, logged_by
from app.engine.sampling import (
    DEVICE,
    HOST_ASKED,
    HOST_ON_CPU,
    CandidateRow,
    DeviceChain,
    HostRow,
    device_chain,
)
from app.engine.sequences import common_prefix_length
from app.errors import ContextOverflowError, GenerationCancelled, ModelLoadError
from app.files.fileio import utf8_form
from app.gguf.check import validate_gguf_file
from app.gguf.compat import VocabInfo
from app.gguf.reader import TOKENS_KEY, GGUFHeader

_VOCAB_TYPE_NAMES = {
    llama_cpp.LLAMA_VOCAB_TYPE_NONE: "none",
    llama_cpp.LLAMA_VOCAB_TYPE_SPM: "spm",
    llama_cpp.LLAMA_VOCAB_TYPE_BPE: "bpe",
    llama_cpp.LLAMA_VOCAB_TYPE_WPM: "wpm",
    llama_cpp.LLAMA_VOCAB_TYPE_UGM: "ugm",
    llama_cpp.LLAMA_VOCAB_TYPE_RWKV: "rwkv",
}
_KV_TYPES = {name: int(gguf.GGMLQuantizationType[name.upper()]) for name in KV_TYPES}
_FLASH_ATTN = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}

# How many positions a hybrid recurrent model's state can be rolled back in one step (the
# snapshots llama.cpp keeps per sequence, ``n_rs_seq``): it bounds the draft length on such a
# target. llama.cpp clamps it to 0 for architectures without partial rollback, so it costs
# nothing there; on a hybrid model each snapshot costs one copy of the recurrent state.
RECURRENT_ROLLBACK = 16

# The most outputs a device sampler chain samples in one decode: a verification batch of the
# longest draft. llama.cpp sizes the chain's graph by it (its default is 1).
SAMPLED_ROWS = MAX_DRAFT_LEN + 1


def next_token_functions() -> ModuleType:
    """llama.cpp's staging functions for next-token (MTP) heads, looked up by mangled name.

    They come from ``src/llama-ext.h`` and may be missing from a build: the error says so
    instead of an AttributeError from deep inside a load.
    """
    try:
        from llama_cpp import llama_cpp_ext
    except (ImportError, AttributeError) as exc:
        raise ModelLoadError(
            "this llama.cpp build does not export the next-token (MTP) functions "
            f"({exc}); choose a draft model or n-gram drafting instead"
        ) from exc
    return llama_cpp_ext


class LlamaModel:
    """A loaded GGUF model and its vocabulary."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        load_next_token_layers: bool = False,
        header: GGUFHeader | None = None,
    ) -> None:
        """``header``: the file's header as the caller has just checked it
        (``validate_gguf_file``); a real vocabulary's header takes a tenth of a second."""
        ensure_backend()
        path = Path(spec.path)
        if header is None:
            header = validate_gguf_file(path)
        params = llama_cpp.llama_model_default_params()
        params.load_mtp = load_next_token_layers
        params.n_gpu_layers = spec.n_gpu_layers if spec.n_gpu_layers >= 0 else 999
        params.use_mmap = True
        self.repacking = repacking_for(spec.repack, weights_in(header))
        params.use_extra_bufts = self.repacking.enabled
        observer = current_load_observer()
        cancelled = False
        progress = None
        if observer is not None:
            if not observer(path, 0.0):  # also tells the observer which file is loading now
                raise GenerationCancelled(f"loading {path.name} was cancelled")

            def report(fraction: float, _data: ctypes.c_void_p) -> bool:
                nonlocal cancelled
                try:
                    keep_going = bool(observer(path, float(fraction)))
                except Exception:  # noqa: BLE001 - a failing observer must not stop a load
                    keep_going = True
                cancelled = cancelled or not keep_going
                return keep_going

            progress = llama_cpp.llama_progress_callback(report)
            params.progress_callback = progress
        ptr = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        del progress  # llama.cpp calls it only while loading
        if not ptr and cancelled:
            raise GenerationCancelled(f"loading {path.name} was cancelled")
        if not ptr:
            raise ModelLoadError(
                f"llama.cpp could not load {path.name}: the file is not a model this llama.cpp "
                "build supports, or it is damaged. Re-download it or pick another file."
            )
        self.spec = spec
        self.path = path
        self.ptr = ptr
        self.vocab = llama_cpp.llama_model_get_vocab(ptr)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self._end_of_generation: dict[int, bool] = {}  # by token, as llama.cpp answered
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(ptr))
        self.size_bytes = int(llama_cpp.llama_model_size(ptr))
        self.n_embd_out = int(llama_cpp.llama_model_n_embd_out(ptr))
        # next-token (MTP) layers llama.cpp loaded: 0 unless asked for and present
        self.n_layer_nextn = (
            int(llama_cpp.llama_model_n_layer_nextn(ptr)) if load_next_token_layers else 0
        )
        # llama.cpp offloads the output layer (and with it a sampler chain) only when more
        # layers than the model has are asked for: -1 asks for all
        n_layer = int(llama_cpp.llama_model_n_layer(ptr))
        offloads = bool(llama_cpp.llama_supports_gpu_offload())
        self.output_on_gpu = offloads and params.n_gpu_layers > n_layer
        self.layers_on_gpu = offloads and params.n_gpu_layers > 0
        self._piece_cache: dict[int, bytes] = {}
        self._piece_buf = ctypes.create_string_buffer(256)
        # llama.cpp loads each token's text verbatim from the checked header's array: the
        # texts a pair compares, without 150,000 calls into llama.cpp (half a second a pair)
        tokens = header.get(TOKENS_KEY)
        self._header_tokens = (
            tokens if isinstance(tokens, tuple) and len(tokens) == self.n_vocab else None
        )

    def close(self) -> None:
        if self.ptr:
            llama_cpp.llama_model_free(self.ptr)
            self.ptr = None

    # --- vocabulary -------------------------------------------------------------------

    @property
    def bos(self) -> int:
        return int(llama_cpp.llama_vocab_bos(self.vocab))

    @property
    def warm_up_token(self) -> int:
        """A token every vocabulary has, for passes whose output nothing reads: BOS, else 0."""
        bos = self.bos
        return bos if bos >= 0 else 0

    @property
    def eos(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self.vocab))

    @property
    def add_bos(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))

    def is_eog(self, token: int) -> bool:
        """Asked of every token an answer produces: llama.cpp's answer is kept per token (a
        vocabulary's are fixed), a dictionary lookup instead of a foreign call."""
        known = self._end_of_generation.get(token)
        if known is None:
            known = bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))
            self._end_of_generation[token] = known
        return known

    def token_text(self, token: int) -> str:
        raw = llama_cpp.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def vocab_info(self) -> VocabInfo:
        vocab_type = _VOCAB_TYPE_NAMES.get(int(llama_cpp.llama_vocab_type(self.vocab)), "unknown")
        return VocabInfo(
            vocab_type=vocab_type,
            add_bos=self.add_bos,
            add_eos=bool(llama_cpp.llama_vocab_get_add_eos(self.vocab)),
            bos_id=self.bos,
            eos_id=self.eos,
            tokens=self._header_tokens or [self.token_text(i) for i in range(self.n_vocab)],
        )

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        data = utf8(text)
        capacity = len(data) + 8
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(
            self.vocab, data, len(data), buf, capacity, add_special, parse_special
        )
        if n < 0:
            capacity = -n
            buf = (llama_cpp.llama_token * capacity)()
            n = llama_cpp.llama_tokenize(
                self.vocab, data, len(data), buf, capacity, add_special, parse_special
            )
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """Bytes this token contributes to the text (control tokens contribute nothing)."""
        cached = self._piece_cache.get(token)
        if cached is not None:
            return cached
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._piece_buf, 256, 0, False)
        if n < 0:
            big = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, big, -n, 0, False)
            data = big.raw[:n]
        else:
            data = self._piece_buf.raw[:n]
        self._piece_cache[token] = data
        return data

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def chat_template(self) -> str | None:
        raw = llama_cpp.llama_model_chat_template(self.ptr, None)
        return raw.decode("utf-8") if raw else None


class SamplesRows(Protocol):
    """Where a run reads rows from: it attaches the run's sampler chain, or says why not."""

    def sample_with(self, config: SamplerConfig) -> str: ...


def sample_with(contexts: Sequence[SamplesRows], config: SamplerConfig) -> str:
    """Attach ``config``'s chain to every context of a run: "device" when it runs on the
    device for all of them, else the first "host (why)"."""
    verdicts = [ctx.sample_with(config) for ctx in contexts]
    return next((verdict for verdict in verdicts if verdict != DEVICE), DEVICE)


class LlamaContext:
    """One inference context (own KV cache) over a shared model, sequence 0 only.

    ``tokens`` mirrors exactly what the KV cache holds, so callers can reuse common
    prefixes and roll back rejected draft tokens. ``truncate`` may drop more than asked
    (a recurrent state rolls back only as far as its snapshots reach): callers decode from
    ``n_past``, never from the position they asked for.

    With ``next_token_rows`` the context also returns, for every decoded position, the hidden
    row a next-token (MTP) head drafts from, and calls ``after_decode(first_pos, n)`` after each
    ``llama_decode`` while those rows are readable. With ``heads_of`` it is the MTP context of
    that target: it runs the model's next-token layers, and every decoded token comes with
    the hidden row it is paired with (``decode(..., rows=...)``).
    """

    def __init__(
        self,
        model: LlamaModel,
        spec: ModelSpec,
        *,
        n_batch: int = 512,
        n_rs_seq: int = 0,
        next_token_rows: bool = False,
        heads_of: LlamaContext | None = None,
    ) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = spec.n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = 1
        self.threads = spec.threads()  # its passes' threads, read by the run's CPU meter
        params.n_threads = params.n_threads_batch = self.threads
        params.type_k = _KV_TYPES[spec.kv_type]
        params.type_v = _KV_TYPES[spec.kv_type]
        params.flash_attn_type = _FLASH_ATTN[spec.flash_attn]
        params.no_perf = True
        params.n_rs_seq = n_rs_seq
        params.n_outputs_max_per_seq = SAMPLED_ROWS
        if heads_of is not None:
            params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
            params.ctx_other = heads_of.ptr
        ptr = llama_cpp.llama_init_from_model(model.ptr, params)
        if not ptr:
            raise ModelLoadError(
                f"llama.cpp could not create a {spec.n_ctx}-token context for {model.path.name}: "
                "probably out of memory. Lower the context size or the GPU layers."
            )
        self.ptr: Any = ptr
        self.model = model
        self.n_ctx = int(llama_cpp.llama_n_ctx(ptr))
        self.n_batch = n_batch
        self.memory = llama_cpp.llama_get_memory(ptr)
        self.tokens: list[int] = []
        self.decode_s = 0.0  # wall time spent inside llama_decode, for overhead accounting
        self.decode_thread_s = 0.0  # the same, times the threads each decode ran on
        self.n_rs_seq = int(llama_cpp.llama_n_rs_seq(ptr))
        # an MTP context's cache is attention only, whatever the trunk has
        self.recurrent = heads_of is None and bool(
            llama_cpp.llama_model_is_recurrent(model.ptr)
            or llama_cpp.llama_model_is_hybrid(model.ptr)
        )
        self._rollback_reach = 0  # positions a recurrent state can still roll back
        self.after_decode: Callable[[int, int], None] | None = None
        self._ext: ModuleType | None = None
        self._rows_view: np.ndarray | None = None  # the embedding rows of an MTP batch
        self._n_embd = model.n_embd_out
        self._other_ptr = heads_of.ptr if heads_of is not None else None
        if next_token_rows or heads_of is not None:
            try:
                self._ext = next_token_functions()
            except ModelLoadError:
                llama_cpp.llama_free(ptr)
                raise
            # the target returns every position's row (unmasked); the heads only their outputs
            self._ext.llama_set_embeddings_nextn(ptr, True, heads_of is not None)
        self._batch = llama_cpp.llama_batch_init(n_batch, self._n_embd if heads_of else 0, 1)
        self._token_array: ctypes.Array[ctypes.c_int32] | None = None
        if heads_of is not None:
            # llama_batch_init gives an embedding batch no token array, but the next-token
            # block embeds the token too; this array is ours, not llama_batch_free's
            self._token_array = (llama_cpp.llama_token * n_batch)()
            self._batch.token = ctypes.cast(
                self._token_array, ctypes.POINTER(llama_cpp.llama_token)
            )
            self._rows_view = np.ctypeslib.as_array(self._batch.embd, shape=(n_batch, self._n_embd))
        # numpy views on the batch's arrays: a decode fills them with three vector writes
        # instead of five ctypes writes per token; sequence ids never change (sequence 0)
        self._batch_tokens = np.ctypeslib.as_array(self._batch.token, shape=(n_batch,))
        self._batch_pos = np.ctypeslib.as_array(self._batch.pos, shape=(n_batch,))
        self._batch_logits = np.ctypeslib.as_array(self._batch.logits, shape=(n_batch,))
        np.ctypeslib.as_array(self._batch.n_seq_id, shape=(n_batch,))[:] = 1
        for i in range(n_batch):
            self._batch.seq_id[i][0] = 0
        self._n_vocab = model.n_vocab
        self._rows: np.ndarray | None = None  # output rows of the last decode
        self._n_outputs = 0
        self._abort: object = None  # keeps the installed ctypes abort callback alive
        self._chain: DeviceChain | None = None  # the sampler chain llama.cpp runs after decode
        self._chain_ptr: Any = None
        # ids, logits and probabilities of every output's candidates, views kept by output count
        self._candidates: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # by output count (llama.cpp lays its buffers out by it): where the ids were, the views
        self._views: dict[int, tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    def close(self) -> None:
        if self.ptr:
            self.attach_chain(None)
            self._rows = None
            if self._token_array is not None:
                self._batch.token = ctypes.POINTER(llama_cpp.llama_token)()
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self.ptr)
            self.ptr = None

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def truncate(self, n_keep: int) -> None:
        """Drop every cached position from ``n_keep`` on."""
        if n_keep < len(self.tokens):
            drop = len(self.tokens) - n_keep
            # a recurrent state rolls back only into the last decode's batch, at most n_rs_seq
            # positions, once: llama.cpp checks the second and third, not the first (it would
            # restore a snapshot another batch left), so anything further starts over
            within_reach = not self.recurrent or drop <= self._rollback_reach
            if not (within_reach and llama_cpp.llama_memory_seq_rm(self.memory, 0, n_keep, -1)):
                llama_cpp.llama_memory_clear(self.memory, True)
                n_keep = 0
            self._rollback_reach = 0
            del self.tokens[n_keep:]

    def set_threads(self, threads: int) -> None:
        """The threads of this context's next passes (prompt and steps alike)."""
        llama_cpp.llama_set_n_threads(self.ptr, threads, threads)
        self.threads = threads

    def common_prefix(self, tokens: Sequence[int]) -> int:
        return common_prefix_length(self.tokens, tokens)

    def decode(
        self,
        tokens: Sequence[int],
        *,
        logits: str = "last",
        rows: np.ndarray | None = None,
        at: int | None = None,
    ) -> None:
        """Append ``tokens`` to the cache. ``logits``: "last", "all" or "none".

        An MTP context needs ``rows``: the hidden row each token is paired with. A context
        that keeps no memory of its own (an assistant attending through its target's cache)
        decodes at position ``at`` and records nothing.
        """
        if not tokens:
            return
        if (rows is None) != (self._rows_view is None):
            raise ValueError("an MTP context decodes tokens with their hidden rows, others without")
        if self.n_past + len(tokens) > self.n_ctx:
            raise ContextOverflowError(self.n_past + len(tokens), self.n_ctx)
        self._rows = None
        self._candidates = None
        self._n_outputs = 0
        if self._chain is not None and logits == "all" and len(tokens) > SAMPLED_ROWS:
            raise ValueError(f"a device sampler chain samples at most {SAMPLED_ROWS} rows at once")
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            final_chunk = start + self.n_batch >= len(tokens)
            self._fill_batch(chunk, logits if final_chunk else "none", at)
            if rows is not None and self._rows_view is not None:
                self._rows_view[: len(chunk)] = rows[start : start + len(chunk)]
            began = time.perf_counter()
            rc = llama_cpp.llama_decode(self.ptr, self._batch)
            # a GPU backend returns once the pass is queued, and whatever reads its results
            # next waits for it: without waiting here that wait would count as the host's
            # time, or as the next pass's (a prompt's chunks in the first token's pass), and
            # the cost model would see passes of a few launches' cost (0.18 ms for a 1.9 ms
            # pass on an H200). A no-op on the CPU.
            llama_cpp.llama_synchronize(self.ptr)
            took = time.perf_counter() - began
            self.decode_s += took
            self.decode_thread_s += took * self.threads
            if rc != 0:
                raise RuntimeError(
                    f"llama_decode failed with code {rc} at position {self.n_past}"
                    + (" (no free KV slot)" if rc == 1 else "")
                )
            first_pos = len(self.tokens)
            # the snapshots reach back into this batch, not to the state before it
            self._rollback_reach = min(len(chunk) - 1, self.n_rs_seq)
            if at is None:
                self.tokens.extend(chunk)
            if final_chunk and logits == "all":
                self._n_outputs = len(chunk)
            else:
                self._n_outputs = 1 if final_chunk and logits == "last" else 0
            if self.after_decode is not None:
                self.after_decode(first_pos, len(chunk))

    def _fill_batch(self, chunk: Sequence[int], logits: str, at: int | None = None) -> None:
        n = len(chunk)
        n_past = self.n_past if at is None else at
        if n == 1:  # every target-only step and draft pass: no temporary arrays
            self._batch_tokens[0] = chunk[0]
            self._batch_pos[0] = n_past
            self._batch_logits[0] = logits in ("all", "last")
            self._batch.n_tokens = 1
            return
        self._batch_tokens[:n] = chunk
        self._batch_pos[:n] = np.arange(n_past, n_past + n)
        flags = self._batch_logits[:n]
        flags[:] = 1 if logits == "all" else 0
        if logits == "last":
            flags[n - 1] = 1
        self._batch.n_tokens = n

    def set_abort_check(self, check: Callable[[], bool] | None) -> None:
        """While ``check`` is set, ``llama_decode`` stops (code 2) once it returns True.

        llama.cpp polls it between graph nodes, so a long prompt prefill can be stopped; a
        Python callback per node costs about a microsecond, so install it only around
        long decodes (see ``forget_unrecorded`` for the cache after an abort).
        """
        if check is None:
            callback = llama_cpp.ggml_abort_callback()  # NULL: no callback
        else:

            def poll(_data: ctypes.c_void_p) -> bool:
                try:
                    return bool(check())
                except Exception:  # noqa: BLE001 - never abort on a broken check
                    return False

            callback = llama_cpp.ggml_abort_callback(poll)
        llama_cpp.llama_set_abort_callback(self.ptr, callback, None)
        self._abort = callback if check is not None else None

    def forget_unrecorded(self) -> None:
        """Drop cache positions past ``tokens``: an aborted decode leaves its finished batches."""
        llama_cpp.llama_memory_seq_rm(self.memory, 0, len(self.tokens), -1)

    def logits(self, i: int = -1) -> np.ndarray:
        """Logits of output row ``i`` (-1: the last). A view, valid until the next decode.

        One ctypes call per decode maps every output row at once; a call per row costs more
        than the row's argmax on a fast GPU pair.
        """
        return self._logit_rows(i)[i]

    def _logit_rows(self, i: int = -1) -> np.ndarray:
        """Every output row's logits (``i``: the row asked for, for the refusal's words)."""
        rows = self._rows
        if rows is None:
            if self._chain is not None:
                raise RuntimeError("a device sampler chain is attached: no full rows are copied")
            if self._n_outputs <= 0:
                raise RuntimeError(f"no logits for output row {i}")
            address = logits_address(self.ptr)
            if not address:
                raise RuntimeError(f"no logits for output row {i}")
            # llama.cpp keeps its logits buffer between decodes: the view is kept too
            rows = self._rows = floats_at(address, (self._n_outputs, self._n_vocab))
        return rows

    def greedy_ids(self, n: int) -> list[int]:
        """The best token of each of the last decode's first ``n`` output rows (the largest
        logit, the first of equals, as ``row(i).greedy()``), in one numpy call rather than a
        row object and an argmax per row."""
        if self._chain is None:
            return self._logit_rows(n - 1)[:n].argmax(axis=1).tolist()
        ids, logits, _ = self._map_candidates()
        return ids[np.arange(n), logits[:n].argmax(axis=1)].tolist()

    def next_token_rows(self, n: int) -> np.ndarray:
        """The hidden rows of the last ``llama_decode``'s ``n`` positions (a view, valid until
        the next decode): what a next-token head drafts from."""
        if self._ext is None:
            raise RuntimeError("this context does not return next-token rows")
        ptr = self._ext.llama_get_embeddings_nextn(self.ptr)
        if not ptr:
            raise RuntimeError("llama.cpp returned no next-token rows")
        return floats_at(ctypes.addressof(ptr.contents), (n, self._n_embd))

    def head_row(self) -> np.ndarray:
        """An MTP context's hidden row for its last output: the next head step's input."""
        if self._ext is None:
            raise RuntimeError("this context does not return next-token rows")
        ptr = self._ext.llama_get_embeddings_nextn_ith(self.ptr, -1)
        if not ptr:
            raise RuntimeError("llama.cpp returned no next-token row")
        return floats_at(ctypes.addressof(ptr.contents), (self._n_embd,))

    @property
    def shares_memory_with_target(self) -> bool:
        """An MTP context that attends through its target's cache (Gemma 4 assistants)."""
        if self._ext is None:
            return False
        other = self._ext.llama_get_ctx_other(self.ptr)
        return bool(other) and other == self._other_ptr

    def select_head(self, index: int) -> None:
        """Which of the model's next-token layers an MTP context runs (chained heads)."""
        if self._ext is None:
            raise RuntimeError("this context has no next-token layers")
        self._ext.llama_set_nextn_layer_offset(self.ptr, index)

    # --- sampling on the device -------------------------------------------------------------

    def sample_with(self, config: SamplerConfig) -> str:
        """Run ``config``'s chain on the device after every decode, where it can run there
        and pays (``ModelSpec.sampling``): "device", or "host (why)" when ``row`` keeps
        returning full rows."""
        placement = self.model.spec.sampling
        if placement == "host" or (placement == "auto" and not self.model.output_on_gpu):
            self.attach_chain(None)
            return HOST_ASKED if placement == "host" else HOST_ON_CPU
        chain, where = device_chain(config, self._n_vocab)
        if chain is None:
            self.attach_chain(None)
            return where
        if not self.attach_chain(chain):
            return "host (llama.cpp cannot run the chain on this device)"
        return DEVICE

    def attach_chain(self, chain: DeviceChain | None) -> bool:
        """Attach ``chain`` (None: detach); whether every stage of it runs on the device.

        llama.cpp runs only the prefix of a chain whose ops the device supports and says so
        in a warning; a partly offloaded chain is detached, never half applied.
        """
        if chain == self._chain:
            return chain is not None
        self._candidates = None
        self._views.clear()
        if self._chain_ptr is not None:
            llama_cpp.llama_set_sampler(self.ptr, 0, None)
            llama_cpp.llama_sampler_free(self._chain_ptr)
            self._chain_ptr = None
            self._chain = None
        if chain is None:
            return False
        stages = [llama_cpp.llama_sampler_init_top_k(chain.top_k)]
        if chain.top_p < 1.0:
            stages.append(llama_cpp.llama_sampler_init_top_p(chain.top_p, 1))
        if chain.min_p > 0.0:
            stages.append(llama_cpp.llama_sampler_init_min_p(chain.min_p, 1))
        if chain.temperature > 0.0:
            stages.append(llama_cpp.llama_sampler_init_temp(chain.temperature))
        stages.append(llama_cpp.llama_sampler_init_dist(0))  # the softmax; its draw is unused
        ptr = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        for stage in stages:
            llama_cpp.llama_sampler_chain_add(ptr, stage)  # the chain owns and frees it
        attached, warnings = logged_by(lambda: bool(llama_cpp.llama_set_sampler(self.ptr, 0, ptr)))
        partial = any("does not have support for op" in line for line in warnings)
        if attached and partial:
            llama_cpp.llama_set_sampler(self.ptr, 0, None)
        if not attached or partial:
            llama_cpp.llama_sampler_free(ptr)
            return False
        self._chain, self._chain_ptr = chain, ptr
        return True

    @property
    def chain(self) -> DeviceChain | None:
        return self._chain

    def row(self, i: int = -1) -> HostRow | CandidateRow:
        """Output row ``i`` of the last decode (-1: the last): the chain's candidates when a
        chain runs on the device, else the full row of logits. Valid until the next decode."""
        if self._chain is None:
            return HostRow(self.logits(i))
        ids, logits, probs = self._map_candidates()
        return CandidateRow(ids[i], logits[i], probs[i], descending=self._chain.top_p < 1.0)

    def _map_candidates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every output's candidates at once: llama.cpp keeps output r's at r * n_vocab of one
        buffer each (ids, logits, probabilities), so pointers, not a ctypes call per row, map
        them all. llama.cpp lays the three out from one base by the number of outputs, so
        while the ids of that many outputs stay where they were, so do the others and the
        views are kept (one ctypes call per decode); mapped once per decode."""
        if self._candidates is not None:
            return self._candidates
        n = self._n_outputs
        if n <= 0:
            raise RuntimeError("no sampled rows: the last decode asked for no logits")
        first = 0 if n > 1 else -1
        ptr = self.ptr
        ids_ptr = llama_cpp.llama_get_sampled_candidates_ith(ptr, first)
        if not ids_ptr:
            raise RuntimeError("llama.cpp returned no sampled candidates")
        where = ctypes.addressof(ids_ptr.contents)
        cached = self._views.get(n)
        if cached is not None and cached[0] == where:
            views = cached[1]
        else:
            count = int(llama_cpp.llama_get_sampled_probs_count_ith(ptr, first))
            logits_ptr = llama_cpp.llama_get_sampled_logits_ith(ptr, first)
            probs_ptr = llama_cpp.llama_get_sampled_probs_ith(ptr, first)
            if count <= 0 or not logits_ptr or not probs_ptr:
                raise RuntimeError("llama.cpp returned no sampled probabilities")
            shape = (n, self._n_vocab)
            views = (
                np.ctypeslib.as_array(ids_ptr, shape=shape)[:, :count],
                np.ctypeslib.as_array(logits_ptr, shape=shape)[:, :count],
                np.ctypeslib.as_array(probs_ptr, shape=shape)[:, :count],
            )
            self._views[n] = (where, views)
        self._candidates = views
        return views


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate read as U+FFFD (``utf8_form``): the tokenizer
    raised on it, and the CLI said "error: " and nothing more."""
    return utf8_form(text).encode("utf-8")
