"""The books of a serving queue, kept one way for the command line's server and the window's.

``ServingLedger`` knows which tickets wait and in what order, which one runs and since when,
how many were served, refused and cancelled, the running answer's acceptance and the last
answer's summary. Its owner (``CliServing``, ``WindowServing``) runs the tickets on its own
thread and reports each turn here: ``begin``, then ``finish`` (or ``fail``, or ``end``).
Any thread may ``admit``, ``cancel`` or read ``stats``; one lock guards it all, so a cancel
reaches the engine exactly when the ticket runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.events import RunSummary
from app.serve.answering import server_error
from app.serve.params import Call
from app.serve.tickets import (
    Cancelled,
    Deliver,
    Failed,
    Final,
    Finished,
    Outcome,
    QueueFull,
    ServingStats,
    Ticket,
)

log = logging.getLogger("specdeck.serve")


@dataclass(frozen=True)
class Activity:
    """What the engine does for HTTP callers, as seen by a job queued at a mark."""

    serving_s: float | None  # how long the served request that runs now has run; None: none
    ahead: int  # served requests that wait and were sent before the mark


class ServingLedger:
    """Thread-safe bookkeeping of one queue of tickets; runs nothing itself.

    ``stop_running`` stops the engine's running answer at its next step (it is called under
    the lock, only while a ticket runs)."""

    def __init__(self, queue_size: int, stop_running: Callable[[], None]) -> None:
        self._queue_size = max(1, queue_size)
        self._stop_running = stop_running
        self._lock = threading.Lock()
        self._waiting: dict[Ticket, int] = {}  # each waiting ticket's place in the queue
        self._current: Ticket | None = None
        self._sent = 0  # tickets admitted so far
        self._since = 0.0  # when the current ticket started (monotonic)
        self._closed = False
        self._served = self._refused = self._cancelled = 0
        self._live: float | None = None
        self._last: RunSummary | None = None

    # --- any thread ----------------------------------------------------------------------

    def admit(self, call: Call, deliver: Deliver, enqueue: Callable[[Ticket], None]) -> Ticket:
        """A new ticket, handed to the owner's thread by ``enqueue``; ``QueueFull`` when
        every place is taken or the queue is closed. ``enqueue`` runs under the lock, so the
        order numbers are the order of the owner's queue."""
        ticket = Ticket(call, deliver)
        with self._lock:
            if self._closed or len(self._waiting) >= self._queue_size:
                self._refused += 1
                raise QueueFull
            self._sent += 1
            self._waiting[ticket] = self._sent
            enqueue(ticket)
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        """Stop this ticket: at once if it waits, at the engine's next step if it runs."""
        with self._lock:
            if ticket.cancelled:
                return
            ticket.cancelled = True
            if self._current is ticket:
                self._stop_running()

    def stats(self) -> ServingStats:
        with self._lock:
            return ServingStats(
                self._served,
                self._refused,
                self._cancelled,
                len(self._waiting),
                self._current is not None,
                self._live,
                self._last,
            )

    def mark(self) -> int:
        """The queue's place now: a job queued next on the same thread waits for the tickets
        before it."""
        with self._lock:
            return self._sent

    def activity(self, mark: int) -> Activity:
        """What a job queued at ``mark`` waits for: the ticket that runs and the ones
        admitted before it."""
        with self._lock:
            running = None if self._current is None else time.monotonic() - self._since
            ahead = sum(1 for order in self._waiting.values() if order <= mark)
            return Activity(running, ahead)

    def close(self) -> None:
        """Refuse new tickets; cancel the running one and those that wait."""
        with self._lock:
            self._closed = True
            tickets = [*self._waiting, *([self._current] if self._current else [])]
        for ticket in tickets:
            self.cancel(ticket)

    # --- the owner's thread --------------------------------------------------------------

    def begin(self, ticket: Ticket, reset_cancel: Callable[[], None] | None) -> bool:
        """The ticket's turn. False: it was cancelled while it waited, and is told so.
        ``reset_cancel`` clears the engine's cancel flag under the lock, so a cancel from
        then on reaches this ticket's answer."""
        with self._lock:
            self._waiting.pop(ticket, None)
            if ticket.cancelled:
                self._cancelled += 1
            else:
                if reset_cancel is not None:
                    reset_cancel()
                self._current, self._live = ticket, None
                self._since = time.monotonic()
                return True
        self.send(ticket, Cancelled())
        return False

    def set_live(self, acceptance: float) -> None:
        """The running answer's rolling acceptance."""
        self._live = acceptance

    def finish(self, ticket: Ticket, final: Final) -> None:
        """The ticket's answer is over: count it and tell its client."""
        with self._lock:
            if self._current is ticket:
                self._current = None
            if isinstance(final, Finished):
                self._served += 1
                self._last = final.summary
            elif isinstance(final, Cancelled):
                self._cancelled += 1
        self.send(ticket, final)

    def fail(self, ticket: Ticket, error: Exception) -> None:
        """Answering raised something unforeseen: the client gets a server error."""
        self.end(ticket)
        log.error("serving a request failed", exc_info=error)
        self.send(ticket, Failed(server_error(error)))

    def end(self, ticket: Ticket) -> None:
        """The ticket no longer runs (whatever its client was told)."""
        with self._lock:
            if self._current is ticket:
                self._current = None

    def drop(self, ticket: Ticket) -> None:
        """A waiting ticket the owner will never run (it is closing): tell its client."""
        with self._lock:
            self._waiting.pop(ticket, None)
        self.send(ticket, Cancelled())

    def send(self, ticket: Ticket, outcome: Outcome) -> None:
        try:
            ticket.deliver(outcome)
        except Exception:  # noqa: BLE001 - a gone client (a closed event loop) must not stop it
            log.debug("delivering a result failed", exc_info=True)
            self.cancel(ticket)
