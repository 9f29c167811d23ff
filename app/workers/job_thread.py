"""One worker thread that runs typed jobs (``app.workers.jobs``) in the order they come.

The UI thread submits a job with what to do on success, on failure and on progress; the
job runs on the worker thread against the thread's context (the Hub session, the calibration
engine) and the callbacks run back on the UI thread, tagged by request id underneath. Every
reply, progress and failure also goes out on ``result``, ``progress`` and ``failed`` for
whoever watches all of them. Stoppable jobs are cancelled at shutdown; the thread is asked
to quit and joined, never terminated.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.workers.hub_messages import HubFailure
from app.workers.jobs import Job, Stoppable, failure_of

Context = TypeVar("Context")
Progress = TypeVar("Progress")
Reply = TypeVar("Reply")

# One count for every thread, so that no two jobs anywhere share an id.
_request_ids = itertools.count(1)


class _Worker(QObject):
    finished = Signal(int, object)
    progressed = Signal(int, object)
    failed = Signal(int, object)

    def __init__(self, context: object) -> None:
        super().__init__()
        self.context = context

    @Slot(int, object)
    def run(self, request_id: int, job: Job[Any, Any, Any]) -> None:
        try:
            reply = job.run(self.context, request_id, lambda p: self.progressed.emit(request_id, p))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message
            self.failed.emit(request_id, failure_of(request_id, exc))
        else:
            self.finished.emit(request_id, reply)


@dataclass(frozen=True)
class _Callbacks:
    success: Callable[[Any], None] | None
    failure: Callable[[HubFailure], None] | None
    progress: Callable[[Any], None] | None


_NO_CALLBACKS = _Callbacks(None, None, None)


class _Relay(QObject):
    """Lives in the UI thread: hands each reply to the callbacks its job was submitted with."""

    result = Signal(object)
    progress = Signal(object)
    failed = Signal(object)
    submitted = Signal(int, object)

    def __init__(self, parent: QObject | None) -> None:
        super().__init__(parent)
        self.callbacks: dict[int, _Callbacks] = {}

    @Slot(int, object)
    def on_finished(self, request_id: int, reply: object) -> None:
        success = self._ended(request_id).success
        if success is not None:
            success(reply)
        self.result.emit(reply)

    @Slot(int, object)
    def on_progressed(self, request_id: int, progress: object) -> None:
        callbacks = self.callbacks.get(request_id)
        if callbacks is not None and callbacks.progress is not None:
            callbacks.progress(progress)
        self.progress.emit(progress)

    @Slot(int, object)
    def on_failed(self, request_id: int, failure: HubFailure) -> None:
        failed = self._ended(request_id).failure
        if failed is not None:
            failed(failure)
        self.failed.emit(failure)

    def _ended(self, request_id: int) -> _Callbacks:
        return self.callbacks.pop(request_id, _NO_CALLBACKS)


class JobThread(Generic[Context]):
    """Owns the worker thread and its ``context``; lives in the UI thread."""

    def __init__(self, context: Context, name: str, parent: QObject | None = None) -> None:
        self.context = context
        self._relay = _Relay(parent)
        self.result = self._relay.result
        self.progress = self._relay.progress
        self.failed = self._relay.failed
        self._cancels: set[threading.Event] = set()
        self._thread = QThread()
        self._thread.setObjectName(name)
        self.worker = _Worker(context)
        self.worker.moveToThread(self._thread)
        self._thread.finished.connect(self.worker.deleteLater)
        self._relay.submitted.connect(self.worker.run)
        self.worker.finished.connect(self._relay.on_finished)
        self.worker.progressed.connect(self._relay.on_progressed)
        self.worker.failed.connect(self._relay.on_failed)
        self._thread.start()

    def submit(
        self,
        job: Job[Context, Progress, Reply],
        success: Callable[[Reply], None] | None = None,
        failure: Callable[[HubFailure], None] | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> int:
        """Queue ``job``; returns its request id (the one its replies carry)."""
        request_id = next(_request_ids)
        if isinstance(job, Stoppable):
            self._cancels.add(job.cancel)
        self._relay.callbacks[request_id] = _Callbacks(success, failure, progress)
        self._relay.submitted.emit(request_id, job)
        return request_id

    @property
    def running(self) -> bool:
        return self._thread.isRunning()

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Stop running jobs, quit the thread and wait for it."""
        for cancel in self._cancels:
            cancel.set()
        if self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(timeout_ms)
