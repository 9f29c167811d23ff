"""UI-thread handle on the engine worker: owns the QThread, numbers the requests.

Everything the window asks of the engine goes through here. Replies to requests that are no
longer current (a Stop followed by a new prompt, a pair change while loading) are dropped. A
load that fails is answered by its error and then, when the worker could load the previous
pair again, by that pair's ``PairLoaded(restored=True)`` under the same request id.
The engine itself runs in a child process that the worker drives; cancelling reaches that
process directly through the worker's shared cancel event, never through the event queue.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QThread, Signal

from app.engine.config import SpecConfig
from app.engine.process.protocol import STOP_GRACE_SECONDS
from app.workers.engine_worker import EngineWorker
from app.workers.messages import (
    Busy,
    ChatJob,
    EventBatch,
    JobDone,
    LoadPair,
    PairLoaded,
    Verdict,
    WorkerError,
)
from app.workers.window_serving import WindowServing

# A Stop or Cancel the engine process ignores this long ends the process: EngineHost's own
# watchdog does it while a request runs, and shutdown() here when the window closes.
STOP_GRACE_MS = int(STOP_GRACE_SECONDS * 1000)


class EngineClient(QObject):
    busy = Signal(object)  # Busy
    started = Signal()  # the current chat job's turn on the engine came (after served requests)
    loaded = Signal(object)  # PairLoaded
    batch = Signal(object)  # EventBatch
    verdict = Signal(object)  # Verdict
    done = Signal(object)  # JobDone
    error = Signal(object)  # WorkerError

    _request_load = Signal(int, object)
    _request_chat = Signal(int, object)
    _request_shutdown = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._next_id = 0
        self._load_id = -1
        self._job_id = -1
        self._job: ChatJob | None = None
        self._loading = False
        self._thread: QThread | None = QThread()
        self._thread.setObjectName("specdeck-engine")
        self._worker = EngineWorker()
        self._worker.moveToThread(self._thread)
        self._thread.finished.connect(self._worker.deleteLater)
        self._request_load.connect(self._worker.load_pair)
        self._request_chat.connect(self._worker.run_chat)
        self._request_shutdown.connect(self._worker.shutdown)
        self._worker.busy.connect(self._on_busy)
        self._worker.started.connect(self._on_started)
        self._worker.loaded.connect(self._on_loaded)
        self._worker.batch.connect(self._on_batch)
        self._worker.verdict.connect(self._on_verdict)
        self._worker.done.connect(self._on_done)
        self._worker.error.connect(self._on_error)
        self._thread.start()

    # --- state ---------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        return self._job is not None

    @property
    def loading(self) -> bool:
        return self._loading

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.isRunning()

    # --- requests ------------------------------------------------------------------------

    def _take_id(self) -> int:
        self._next_id += 1
        return self._next_id

    @property
    def engine_pid(self) -> int | None:
        """The engine process, while one runs (for its memory figure)."""
        return self._worker.engine_pid if self._thread is not None else None

    def serving(self, spec: Callable[[], SpecConfig], queue_size: int) -> WindowServing:
        """This engine for the HTTP server: served requests queue with the chat's jobs."""
        return WindowServing(self._worker, spec, queue_size=queue_size)

    def load(self, request: LoadPair) -> int:
        if self._loading:  # a newer pair supersedes the one still loading
            self._worker.cancel_running(self._load_id)
        self._load_id = self._take_id()
        self._worker.newest_load = self._load_id  # so a failed older load restores nothing
        self._loading = True
        self._request_load.emit(self._load_id, request)
        return self._load_id

    def chat(self, job: ChatJob) -> int:
        self.cancel()
        self._job_id = self._take_id()
        self._job = job
        self._request_chat.emit(self._job_id, job)
        return self._job_id

    def cancel(self) -> None:
        """Ask the running answer to stop: between speculative steps, or inside a prefill."""
        if self._job is not None:
            self._worker.cancel_job(self._job)

    def cancel_load(self) -> None:
        """Stop loading the pair (llama.cpp's progress callback asks to abort; a process
        stuck in native code is killed after the grace and the next load starts afresh)."""
        if self._loading:
            self._worker.cancel_running(self._load_id)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel, let the worker close the engine, and wait for its thread to end."""
        if self._thread is None:
            return True
        self.cancel()
        self._job = None
        self._job_id = self._load_id = -1
        self._request_shutdown.emit()
        grace = min(timeout_ms, STOP_GRACE_MS)
        finished = self._thread.wait(grace)
        if not finished:  # the engine is stuck in native code: end it, then the thread ends
            self._worker.kill_engine("did not stop when the window closed")
            finished = self._thread.wait(max(timeout_ms - grace, 5_000))
        if finished:
            self._thread = None
        return finished

    # --- replies (UI thread) -------------------------------------------------------------

    def _on_busy(self, message: Busy) -> None:
        if message.request_id in (self._load_id, self._job_id):
            self.busy.emit(message)

    def _on_started(self, request_id: int) -> None:
        if request_id == self._job_id:
            self.started.emit()

    def _on_loaded(self, message: PairLoaded) -> None:
        if message.request_id == self._load_id:
            self._loading = False
            self.loaded.emit(message)

    def _on_batch(self, message: EventBatch) -> None:
        if message.request_id == self._job_id:
            self.batch.emit(message)

    def _on_verdict(self, message: Verdict) -> None:
        if message.request_id == self._job_id:
            self.verdict.emit(message)

    def _on_done(self, message: JobDone) -> None:
        if message.request_id == self._job_id:
            self._job = None
            self.done.emit(message)

    def _on_error(self, message: WorkerError) -> None:
        if message.request_id == self._load_id:
            self._loading = False
            self.error.emit(message)
        elif message.request_id == self._job_id:
            self.error.emit(message)
