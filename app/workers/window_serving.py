"""The window's serving queue: "Serve on localhost" on the window's own engine.

The window has one engine process, driven by its ``EngineWorker`` thread; a second would
load the pair twice. So a served request becomes a task on that worker's queue, in turn
with the chat's messages: the chat waits behind requests and requests behind the chat, and
``mark``/``activity`` tell a chat message who is served before it. The queue of requests is
bounded (a full one is ``QueueFull``, a 429 one level up); ``cancel`` drops a waiting request
when its turn comes and stops a running one at the engine's next step, without touching a
chat answer. Results go back through each ticket's ``deliver`` on the worker thread, and the
tickets' books are a ``ServingLedger``, as with the command line's ``CliServing``. A served
request never keeps what the caches hold (the chat's conversation, or another request's
prompt): its figures and its prefill's time must not tell a caller anything about the
user's messages.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.engine.config import SpecConfig
from app.engine.process.host import EngineCrashed, EngineHost
from app.serve.answering import answer_call, crashed
from app.serve.defaults import DEFAULT_QUEUE
from app.serve.ledger import Activity, ServingLedger
from app.serve.params import ApiError, Call
from app.serve.tickets import Deliver, Failed, Final, ServingStats, Ticket
from app.workers.engine_worker import EngineWorker

NO_PAIR = ApiError(
    503,
    "the window has no local pair loaded (none, still loading, or a remote server); "
    "load a pair in SpecDeck and retry",
    kind="server_error",
    code="no_pair",
)


class WindowServing(QObject):
    """The window's serving queue, on the window's engine worker; any thread may submit,
    cancel or read stats."""

    _task = Signal(object)  # Callable[[EngineHost | None], None], run on the worker thread

    def __init__(
        self,
        worker: EngineWorker,
        spec: Callable[[], SpecConfig],
        *,
        queue_size: int = DEFAULT_QUEUE,
    ) -> None:
        super().__init__()
        self._spec = spec  # the window's current speculation settings
        self._ledger = ServingLedger(queue_size, worker.cancel_running)
        self._task.connect(worker.run_task)  # queued: the worker lives on its own thread

    # --- any thread ----------------------------------------------------------------------

    def submit(self, call: Call, deliver: Deliver) -> Ticket:
        return self._ledger.admit(call, deliver, self._enqueue)

    def mark(self) -> int:
        """The queue's place now: a chat job queued next waits for the requests before it."""
        return self._ledger.mark()

    def activity(self, mark: int) -> Activity:
        """What a chat job queued at ``mark`` waits for: the served request that runs and
        the ones sent before it."""
        return self._ledger.activity(mark)

    def cancel(self, ticket: Ticket) -> None:
        self._ledger.cancel(ticket)

    def stats(self) -> ServingStats:
        return self._ledger.stats()

    def close(self) -> None:
        """Refuse new requests; cancel the running one and those that wait."""
        self._ledger.close()

    def _enqueue(self, ticket: Ticket) -> None:
        self._task.emit(lambda host: self._run(ticket, host))

    # --- the worker thread ---------------------------------------------------------------

    def _run(self, ticket: Ticket, host: EngineHost | None) -> None:
        if not self._ledger.begin(ticket, host.reset_cancel if host is not None else None):
            return
        try:
            if host is None:
                final: Final = Failed(NO_PAIR)
            else:
                final = answer_call(
                    host,
                    ticket.call,
                    self._spec(),
                    lambda outcome: self._ledger.send(ticket, outcome),
                    on_acceptance=self._ledger.set_live,
                    reuse_prefix=False,  # never the chat's or another caller's prompt
                )
        except EngineCrashed as error:  # the window reports it on its next message
            final = Failed(crashed(error))
        except Exception as error:  # noqa: BLE001 - the worker must outlive any one request
            self._ledger.fail(ticket, error)
            return
        self._ledger.finish(ticket, final)
