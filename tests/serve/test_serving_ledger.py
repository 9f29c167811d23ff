"""The books both serving queues keep (``ServingLedger``), without an engine or a server:
a bounded queue that refuses in order, a cancel that reaches the engine only for the ticket
that runs, and counts a status line can trust."""

from __future__ import annotations

import pytest

from app.engine.events import PrefillEvent, RunSummary, StopReason
from app.serve.ledger import Activity, ServingLedger
from app.serve.params import ApiError, Call, Sampling
from app.serve.tickets import Cancelled, Failed, Finished, Outcome, QueueFull, Ticket

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


class Books:
    def __init__(self, size: int = 2) -> None:
        self.stops = 0
        self.resets = 0
        self.queued: list[Ticket] = []
        self.told: dict[int, list[Outcome]] = {}
        self.ledger = ServingLedger(size, self._stop)

    def _stop(self) -> None:
        self.stops += 1

    def reset(self) -> None:
        self.resets += 1

    def submit(self) -> Ticket:
        number = len(self.told)
        self.told[number] = []
        return self.ledger.admit(
            Call(sampling=Sampling(), prompt="hi"), self.told[number].append, self.queued.append
        )


def finished() -> Finished:
    summary = RunSummary(
        "speculative",
        4,
        0.1,
        40.0,
        5.0,
        0.5,
        1.0,
        0.5,
        10.0,
        12.0,
        StopReason.MAX_TOKENS,
        0.1,
        2,
        4,
        2,
    )
    return Finished(summary, PrefillEvent(prompt_tokens=3, reused_tokens=0, ms=5.0))


def test_a_full_queue_refuses_and_counts_it() -> None:
    books = Books(size=2)
    first, second = books.submit(), books.submit()
    with pytest.raises(QueueFull):
        books.submit()
    assert books.queued == [first, second]
    stats = books.ledger.stats()
    assert (stats.waiting, stats.refused, stats.running) == (2, 1, False)
    assert books.ledger.begin(first, books.reset)  # a place is free again
    books.submit()
    assert books.ledger.stats().waiting == 2


def test_a_cancelled_waiting_ticket_is_told_at_its_turn_without_touching_the_engine() -> None:
    books = Books()
    ticket = books.submit()
    books.ledger.cancel(ticket)
    assert books.stops == 0
    assert not books.ledger.begin(ticket, books.reset)
    assert books.resets == 0
    assert books.told[0] == [Cancelled()]
    stats = books.ledger.stats()
    assert (stats.cancelled, stats.waiting, stats.running) == (1, 0, False)


def test_cancelling_the_running_ticket_stops_the_engine_once() -> None:
    books = Books()
    ticket = books.submit()
    assert books.ledger.begin(ticket, books.reset)
    assert books.resets == 1 and books.ledger.stats().running
    books.ledger.cancel(ticket)
    books.ledger.cancel(ticket)
    assert books.stops == 1
    books.ledger.finish(ticket, Cancelled())
    stats = books.ledger.stats()
    assert (stats.cancelled, stats.running) == (1, False)


def test_finished_answers_are_counted_and_the_last_one_kept() -> None:
    books = Books()
    ticket = books.submit()
    books.ledger.begin(ticket, None)
    books.ledger.set_live(0.75)
    assert books.ledger.stats().live_acceptance == 0.75
    final = finished()
    books.ledger.finish(ticket, final)
    stats = books.ledger.stats()
    assert (stats.served, stats.running, stats.last) == (1, False, final.summary)
    assert books.told[0] == [final]


def test_a_failure_is_told_and_not_counted_as_served() -> None:
    books = Books()
    ticket = books.submit()
    books.ledger.begin(ticket, None)
    books.ledger.fail(ticket, RuntimeError("boom"))
    assert isinstance(books.told[0][0], Failed)
    assert books.told[0][0].error.status == 500
    books.ledger.finish(books.submit(), Failed(ApiError(400, "bad")))
    stats = books.ledger.stats()
    assert (stats.served, stats.cancelled, stats.running) == (0, 0, False)


def test_a_job_queued_at_a_mark_waits_for_the_tickets_sent_before_it() -> None:
    books = Books(size=4)
    first, _second = books.submit(), books.submit()
    mark = books.ledger.mark()
    books.submit()
    assert books.ledger.activity(mark) == Activity(None, 2)
    books.ledger.begin(first, None)
    activity = books.ledger.activity(mark)
    assert activity.ahead == 1 and activity.serving_s is not None


def test_a_closed_ledger_cancels_everything_and_refuses_more() -> None:
    books = Books()
    running, waiting = books.submit(), books.submit()
    books.ledger.begin(running, None)
    books.ledger.close()
    assert running.cancelled and waiting.cancelled and books.stops == 1
    with pytest.raises(QueueFull):
        books.submit()
    books.ledger.drop(waiting)
    assert books.told[1] == [Cancelled()]
    assert books.ledger.stats().waiting == 0


def test_a_client_that_cannot_be_told_is_cancelled() -> None:
    books = Books()

    def gone(outcome: Outcome) -> None:
        raise RuntimeError("event loop closed")

    ticket = books.ledger.admit(Call(sampling=Sampling(), prompt="hi"), gone, books.queued.append)
    books.ledger.begin(ticket, None)
    books.ledger.send(ticket, Cancelled())
    assert ticket.cancelled and books.stops == 1
