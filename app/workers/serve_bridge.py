"""The window's own engine as the HTTP layer's ``Engine``: "Serve on localhost".

The window has one engine process, driven by its ``EngineWorker`` thread; a second would
load the pair twice. So a served request becomes a task on that worker's queue, in turn
with the chat's messages: the chat waits behind requests and requests behind the chat.
The queue of requests is bounded here (a full one is ``QueueFull``, a 429 one level up);
``cancel`` drops a waiting request when its turn comes and stops a running one at the
engine's next step, without touching a chat answer. Results go back through each ticket's
``deliver`` on the worker thread, as with ``EngineRunner``. A served request never keeps
what the caches hold (the chat's conversation, or another request's prompt): its figures
and its prefill's time must not tell a caller anything about the user's messages.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.engine.config import SpecConfig
from app.engine.events import RunSummary
from app.engine.process.host import EngineCrashed, EngineHost
from app.serve.defaults import DEFAULT_QUEUE
from app.serve.params import ApiError, Call
from app.serve.runner import (
    Cancelled,
    Deliver,
    Failed,
    Finished,
    Outcome,
    QueueFull,
    RunnerStats,
    Ticket,
    answer_call,
    crashed,
    server_error,
)
from app.workers.engine_worker import EngineWorker

log = logging.getLogger("specdeck.serve")

NO_PAIR = ApiError(
    503,
    "the window has no local pair loaded (none, still loading, or a remote server); "
    "load a pair in SpecDeck and retry",
    kind="server_error",
    code="no_pair",
)


@dataclass(frozen=True)
class Activity:
    """What the engine does for HTTP callers, as seen by a chat message sent at a mark."""

    serving_s: float | None  # how long the served request that runs now has run; None: none
    ahead: int  # served requests that wait and were sent before the chat message


class WindowEngine(QObject):
    """Serves on the window's engine worker; any thread may submit, cancel or read stats."""

    _task = Signal(object)  # Callable[[EngineHost | None], None], run on the worker thread

    def __init__(
        self,
        worker: EngineWorker,
        spec: Callable[[], SpecConfig],
        *,
        queue_size: int = DEFAULT_QUEUE,
    ) -> None:
        super().__init__()
        self._worker = worker
        self._spec = spec  # the window's current speculation settings
        self._queue_size = max(1, queue_size)
        self._lock = threading.Lock()
        self._waiting: set[Ticket] = set()
        self._current: Ticket | None = None
        self._order: dict[Ticket, int] = {}  # each waiting request's place in the queue
        self._sent = 0  # requests submitted so far
        self._since = 0.0  # when the current request started (monotonic)
        self._closed = False
        self._served = self._refused = self._cancelled = 0
        self._live: float | None = None
        self._last: RunSummary | None = None
        self._task.connect(worker.run_task)  # queued: the worker lives on its own thread

    # --- any thread ----------------------------------------------------------------------

    def submit(self, call: Call, deliver: Deliver) -> Ticket:
        ticket = Ticket(call, deliver)
        with self._lock:
            if self._closed or len(self._waiting) >= self._queue_size:
                self._refused += 1
                raise QueueFull
            self._waiting.add(ticket)
            self._sent += 1
            self._order[ticket] = self._sent
            # queued under the lock: the order numbers are the order on the worker's queue
            self._task.emit(lambda host: self._run(ticket, host))
        return ticket

    def mark(self) -> int:
        """The queue's place now: a chat job queued next waits for the requests before it."""
        with self._lock:
            return self._sent

    def activity(self, mark: int) -> Activity:
        """What a chat job queued at ``mark`` waits for: the served request that runs and
        the ones sent before it."""
        with self._lock:
            running = None if self._current is None else time.monotonic() - self._since
            ahead = sum(1 for t in self._waiting if self._order.get(t, mark + 1) <= mark)
            return Activity(running, ahead)

    def cancel(self, ticket: Ticket) -> None:
        with self._lock:
            if ticket.cancelled:
                return
            ticket.cancelled = True
            if self._current is ticket:
                self._worker.cancel_running()

    def stats(self) -> RunnerStats:
        with self._lock:
            return RunnerStats(
                self._served,
                self._refused,
                self._cancelled,
                len(self._waiting),
                self._current is not None,
                self._live,
                self._last,
            )

    def close(self) -> None:
        """Refuse new requests; cancel the running one and those that wait."""
        with self._lock:
            self._closed = True
            tickets = [*self._waiting, *([self._current] if self._current else [])]
        for ticket in tickets:
            self.cancel(ticket)

    # --- the worker thread ---------------------------------------------------------------

    def _run(self, ticket: Ticket, host: EngineHost | None) -> None:
        with self._lock:
            self._waiting.discard(ticket)
            self._order.pop(ticket, None)
            skip = ticket.cancelled
            if not skip:
                if host is not None:
                    host.reset_cancel()  # under the lock: a cancel from now on reaches it
                self._current, self._live = ticket, None
                self._since = time.monotonic()
        if skip:
            self._finish(ticket, Cancelled())
            return
        try:
            if host is None:
                final: Finished | Failed | Cancelled = Failed(NO_PAIR)
            else:
                final = answer_call(
                    host,
                    ticket.call,
                    self._spec(),
                    lambda outcome: self._send(ticket, outcome),
                    on_acceptance=self._set_live,
                    reuse_prefix=False,  # never the chat's or another caller's prompt
                )
        except EngineCrashed as error:  # the window reports it on its next message
            final = Failed(crashed(error))
        except Exception as error:  # noqa: BLE001 - the worker must outlive any one request
            log.exception("serving a request failed")
            final = Failed(server_error(error))
        finally:
            with self._lock:
                self._current = None
        self._finish(ticket, final)

    def _set_live(self, acceptance: float) -> None:
        self._live = acceptance

    def _finish(self, ticket: Ticket, final: Finished | Failed | Cancelled) -> None:
        with self._lock:
            if isinstance(final, Finished):
                self._served += 1
                self._last = final.summary
            elif isinstance(final, Cancelled):
                self._cancelled += 1
        self._send(ticket, final)

    def _send(self, ticket: Ticket, outcome: Outcome) -> None:
        try:
            ticket.deliver(outcome)
        except Exception:  # noqa: BLE001 - a gone client (a closed event loop) must not stop it
            log.debug("delivering a result failed", exc_info=True)
            self.cancel(ticket)
