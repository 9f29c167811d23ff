"""The one long-lived worker that owns the ``Engine`` and runs it off the UI thread.

``EngineWorker`` is a QObject moved to a QThread. Requests arrive through queued slots
(``load_pair``, ``run_chat``, ``shutdown``); results leave through ``Signal(object)`` as frozen
dataclasses tagged with the request id, so the UI can drop answers to requests it no
longer cares about. Cancelling never goes through the event queue (the worker is busy
inside ``generate()``): each job carries a ``threading.Event`` that the engine polls
between speculative steps. The thread is never terminated; ``shutdown`` closes the engine
and quits the thread's event loop.

Timing rule: the baseline (target-only) run starts only after the speculative run has
finished, on the same loaded weights, so each run's tokens/sec comes from its own compute.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.core.compat import IncompatiblePairError
from app.core.config import DraftSource, ModelSpec
from app.core.errors import ContextOverflowError, ModelLoadError, SpecDeckError
from app.core.events import Event, RunSummary, StopReason
from app.core.exactness import Comparison
from app.core.settings import Settings

TIMING_RULE = (
    "Runs one after the other: the baseline starts when the speculative answer is done, "
    "so each tok/s comes from its own compute."
)
BATCH_SECONDS = 0.015  # events are handed to the UI thread at most ~65 times a second

# --- requests (UI -> worker) ---------------------------------------------------------------


@dataclass(frozen=True)
class LoadPair:
    target: ModelSpec  # with demo=True only n_ctx / n_gpu_layers are used
    draft: ModelSpec | None
    draft_source: DraftSource = DraftSource.MODEL
    demo: bool = False


@dataclass(frozen=True)
class ChatJob:
    messages: tuple[dict[str, str], ...]
    settings: Settings
    baseline: bool = True
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


# --- replies (worker -> UI) ----------------------------------------------------------------


@dataclass(frozen=True)
class Busy:
    request_id: int
    text: str


@dataclass(frozen=True)
class PairLoaded:
    request_id: int
    target_path: str
    draft_path: str | None
    draft_source: DraftSource
    device: str
    weights_bytes: int
    n_ctx: int
    load_s: float


@dataclass(frozen=True)
class EventBatch:
    request_id: int
    run: str  # "speculative" | "baseline"
    events: tuple[Event, ...]
    elapsed_s: float  # since this run started
    tokens: int  # tokens produced by this run so far


@dataclass(frozen=True)
class Verdict:
    request_id: int
    comparison: Comparison | None  # None when no baseline ran to the end; text: exactness.judge


@dataclass(frozen=True)
class JobDone:
    request_id: int
    cancelled: bool
    speculative: RunSummary | None
    baseline: RunSummary | None
    prompt_tokens: int


@dataclass(frozen=True)
class WorkerError:
    request_id: int
    title: str
    message: str
    detail: str = ""


def describe_error(error: BaseException) -> tuple[str, str]:
    """A title and a message a person can act on."""
    if isinstance(error, IncompatiblePairError):
        return "Incompatible pair", f"{error}. Pick a draft made from the same tokenizer."
    if isinstance(error, ContextOverflowError):
        return "Context full", str(error)
    if isinstance(error, ModelLoadError):
        return "Model could not be loaded", str(error)
    if isinstance(error, SpecDeckError):
        return "SpecDeck", str(error)
    if isinstance(error, MemoryError):
        return "Out of memory", (
            "The models do not fit in memory. Lower the context size or the GPU layers, "
            "or choose smaller models."
        )
    if isinstance(error, FileNotFoundError):
        return "File not found", f"{error}. Choose the model files again with Change pair…"
    return "Unexpected error", f"{type(error).__name__}: {error}"


def device_description(spec: ModelSpec) -> str:
    import llama_cpp

    threads = spec.threads()
    if bool(llama_cpp.llama_supports_gpu_offload()) and spec.n_gpu_layers != 0:
        layers = "all layers" if spec.n_gpu_layers < 0 else f"{spec.n_gpu_layers} layers"
        return f"GPU ({layers}) + CPU {threads} threads"
    return f"CPU · {threads} threads"


class EngineWorker(QObject):
    busy = Signal(object)  # Busy
    loaded = Signal(object)  # PairLoaded
    batch = Signal(object)  # EventBatch
    verdict = Signal(object)  # Verdict
    done = Signal(object)  # JobDone
    error = Signal(object)  # WorkerError
    closed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._engine = None  # app.core.engine.Engine, imported lazily in the worker thread

    # --- slots (run in the worker thread) ----------------------------------------------

    @Slot(int, object)
    def load_pair(self, request_id: int, request: LoadPair) -> None:
        try:
            self._load(request_id, request)
        except Exception as error:  # noqa: BLE001 - every failure becomes a message
            self._report(request_id, error)

    @Slot(int, object)
    def run_chat(self, request_id: int, job: ChatJob) -> None:
        try:
            self._run(request_id, job)
        except Exception as error:  # noqa: BLE001
            self._report(request_id, error)
            self.done.emit(JobDone(request_id, True, None, None, 0))

    @Slot()
    def shutdown(self) -> None:
        self._close_engine()
        self.closed.emit()
        thread = QThread.currentThread()
        if thread is not None:
            thread.quit()

    # --- implementation ----------------------------------------------------------------

    def _report(self, request_id: int, error: BaseException) -> None:
        title, message = describe_error(error)
        self.error.emit(WorkerError(request_id, title, message, traceback.format_exc()))

    def _close_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _load(self, request_id: int, request: LoadPair) -> None:
        from dataclasses import replace

        from app.core.engine import Engine

        target, draft = request.target, request.draft
        if request.demo:
            from app.core.modelcache import demo_pair

            self.busy.emit(
                Busy(request_id, "Preparing the offline demo pair (first use takes a minute)…")
            )
            target_path, draft_path = demo_pair()
            target = replace(target, path=str(target_path))
            draft = replace(draft or target, path=str(draft_path))
        for spec in (target, draft):
            if spec is not None and not Path(spec.path).is_file():
                raise FileNotFoundError(f"no model file at {spec.path}")
        self._close_engine()
        began = time.perf_counter()
        self.busy.emit(Busy(request_id, f"Loading {Path(target.path).name}…"))
        use_draft = draft if request.draft_source is DraftSource.MODEL else None
        engine = Engine(target, use_draft, draft_source=request.draft_source)
        self._engine = engine
        weights = engine.target.size_bytes + (engine.draft.size_bytes if engine.draft else 0)
        self.loaded.emit(
            PairLoaded(
                request_id,
                target.path,
                use_draft.path if use_draft else None,
                engine.draft_source,
                device_description(target),
                weights,
                engine.n_ctx,
                time.perf_counter() - began,
            )
        )

    def _run(self, request_id: int, job: ChatJob) -> None:
        from app.core.exactness import compare

        engine = self._engine
        if engine is None:
            raise SpecDeckError(
                "No model pair is loaded. Choose one with Change pair… or try the Demo pair."
            )
        prompt = engine.tokenize_chat(list(job.messages))
        spec = self._stream(request_id, "speculative", engine, job, prompt)
        base = None
        if job.baseline and not job.cancel.is_set():
            base = self._stream(request_id, "baseline", engine, job, prompt)
        cancelled = job.cancel.is_set() or spec.stop_reason is StopReason.CANCELLED
        if not cancelled:
            comparison = None
            if base is not None and base.stop_reason is not StopReason.CANCELLED:
                comparison = compare(prompt, spec.token_ids, base.token_ids, engine)
            self.verdict.emit(Verdict(request_id, comparison))
        self.done.emit(JobDone(request_id, cancelled, spec, base, len(prompt)))

    def _stream(
        self, request_id: int, run: str, engine, job: ChatJob, prompt: tuple[int, ...]
    ) -> RunSummary:
        request = job.settings.request(prompt, speculative=run == "speculative")
        began = last = time.perf_counter()
        pending: list[Event] = []
        tokens = 0
        summary: RunSummary | None = None
        for event in engine.generate(request, job.cancel.is_set):
            pending.append(event)
            if isinstance(event, RunSummary):
                summary = event
                continue
            if hasattr(event, "token_id"):
                tokens += 1
            now = time.perf_counter()
            if now - last >= BATCH_SECONDS:
                self.batch.emit(EventBatch(request_id, run, tuple(pending), now - began, tokens))
                pending = []
                last = now
        now = time.perf_counter()
        self.batch.emit(EventBatch(request_id, run, tuple(pending), now - began, tokens))
        if summary is None:  # generate() always ends with a summary; be defensive anyway
            raise RuntimeError("the engine ended a run without a summary")
        return summary
