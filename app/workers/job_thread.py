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
    ended = Signal(int, object, bool)  # request id, reply or HubFailure, whether it failed
    progressed = Signal(int, object)

    def __init__(self, context: object) -> None:
        super().__init__()
        self.context = context

    @Slot(int, object)
    def run(self, request_id: int, job: Job[Any, Any, Any]) -> None:
        try:
            reply = job.run(self.context, request_id, lambda p: self.progressed.emit(request_id, p))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message
            self.ended.emit(request_id, failure_of(request_id, exc), True)
        else:
            self.ended.emit(request_id, reply, False)


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

    @Slot(int, object, bool)
    def on_ended(self, request_id: int, reply: Any, failed: bool) -> None:
        callbacks = self.callbacks.pop(request_id, _NO_CALLBACKS)
        handler = callbacks.failure if failed else callbacks.success
        if handler is not None:
            handler(reply)
        (self.failed if failed else self.result).emit(reply)

    @Slot(int, object)
    def on_progressed(self, request_id: int, progress: object) -> None:
        callbacks = self.callbacks.get(request_id, _NO_CALLBACKS)
        if callbacks.progress is not None:
            callbacks.progress(progress)
        self.progress.emit(progress)


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
        self.worker.ended.connect(self._relay.on_ended)
        self.worker.progressed.connect(self._relay.on_progressed)
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
