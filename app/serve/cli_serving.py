"""``python -m app serve``'s serving queue: one thread owns the engine process.

``CliServing`` loads the pair in an ``EngineHost`` and answers ``Call``s one at a time from
a bounded queue: a full queue refuses at once (``QueueFull``, a 429 one level up) instead of
letting clients pile up. Each call's results leave through the ``deliver`` callback it was
submitted with, called on the serving thread: ``Started`` once the prompt is read, then
``Delta`` text, then ``Finished`` or ``Failed``. ``cancel(ticket)`` works from any thread:
a waiting call is dropped when its turn comes, a running one stops at the engine's next
step (the engine process polls the shared cancel flag between speculative steps and inside
a long prefill). The tickets' books are a ``ServingLedger``, the same as the window's.

A call keeps what the engine's caches hold of the last prompt only when the same caller
(the same HTTP connection, or the same ``prompt_cache_key``) sent it: another caller starts
from empty caches, so neither its ``cached_tokens`` nor its prefill's time says anything
about someone else's prompt.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from app.engine.config import SpecConfig
from app.engine.process.host import EngineCrashed, EngineHost, LoadRequest, PairInfo
from app.serve.answering import answer_call, crashed
from app.serve.defaults import DEFAULT_QUEUE
from app.serve.ledger import ServingLedger
from app.serve.params import Call
from app.serve.tickets import Deliver, Failed, Outcome, ServingStats, Started, Ticket

log = logging.getLogger("specdeck.serve")


class CliServing:
    """The serving queue of ``python -m app serve``: owns one ``EngineHost`` on its own
    thread; everything else talks to it by ticket."""

    def __init__(
        self,
        load: LoadRequest,
        spec: SpecConfig,
        *,
        queue_size: int = DEFAULT_QUEUE,
        ignore_eos: bool = False,
    ) -> None:
        self._load_request = load
        self._spec = spec
        self._ignore_eos = ignore_eos
        self._queue: queue.Queue[Ticket | None] = queue.Queue()  # the ledger bounds it
        self._host = EngineHost()
        self._ledger = ServingLedger(queue_size, self._host.cancel)
        self._thread: threading.Thread | None = None
        self._filled_by: str | None = None  # the caller whose prompt the caches hold
        self.info: PairInfo | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, on_progress: Callable[[str, float], None] | None = None) -> PairInfo:
        """Load the pair (in the calling thread, before any request) and start serving."""
        self.info = self._host.load(self._load_request, on_progress)
        self._thread = threading.Thread(target=self._loop, name="specdeck-serve", daemon=True)
        self._thread.start()
        return self.info

    def close(self) -> None:
        """Cancel what runs, drop what waits, end the thread and the engine process."""
        self._ledger.close()
        while True:
            try:
                ticket = self._queue.get_nowait()
            except queue.Empty:
                break
            if ticket is not None:
                self._ledger.drop(ticket)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(30)
        self._host.close()

    # --- any thread ----------------------------------------------------------------------------

    def submit(self, call: Call, deliver: Deliver) -> Ticket:
        return self._ledger.admit(call, deliver, self._queue.put_nowait)

    def cancel(self, ticket: Ticket) -> None:
        """Stop this call: at once if it waits, at the engine's next step if it runs."""
        self._ledger.cancel(ticket)

    def stats(self) -> ServingStats:
        return self._ledger.stats()

    # --- the serving thread ------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            ticket = self._queue.get()
            if ticket is None:
                return
            if not self._ledger.begin(ticket, self._host.reset_cancel):
                continue
            try:
                self._answer(ticket)
            except Exception as error:  # noqa: BLE001 - the thread must outlive any one call
                self._ledger.fail(ticket, error)
            finally:
                self._ledger.end(ticket)

    def _answer(self, ticket: Ticket) -> None:
        caller = ticket.call.caller
        reuse = caller is not None and caller == self._filled_by
        self._filled_by = None  # until this prompt is in the caches

        def send(outcome: Outcome) -> None:
            if isinstance(outcome, Started):
                self._filled_by = caller
            self._ledger.send(ticket, outcome)

        try:
            final = answer_call(
                self._host,
                ticket.call,
                self._spec,
                send,
                ignore_eos=self._ignore_eos,
                on_acceptance=self._ledger.set_live,
                reuse_prefix=reuse,
            )
        except EngineCrashed as error:
            self._ledger.send(ticket, Failed(crashed(error)))
            self._reload()
            return
        self._ledger.finish(ticket, final)

    def _reload(self) -> None:
        """After a crash: the same pair in a new engine process, for the calls that wait."""
        self._filled_by = None
        try:
            self.info = self._host.load(self._load_request)
        except Exception:  # noqa: BLE001 - the next call reports that nothing is loaded
            log.exception("reloading the pair after a crash failed")
