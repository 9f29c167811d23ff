"""One thread owns the engine process; HTTP requests queue on it.

``EngineRunner`` loads the pair in an ``EngineHost`` and answers ``Call``s one at a time from
a bounded queue: a full queue refuses at once (``QueueFull``, a 429 one level up) instead of
letting clients pile up. Each call's results leave through the ``deliver`` callback it was
submitted with, called on the runner's thread: ``Started`` once the prompt is read, then
``Delta`` text, then ``Finished`` or ``Failed``. ``cancel(ticket)`` works from any thread:
a waiting call is dropped when its turn comes, a running one stops at the engine's next
step (the engine process polls the shared cancel flag between speculative steps and inside
a long prefill).

A call keeps what the engine's caches hold of the last prompt only when the same caller
(the same HTTP connection, or the same ``prompt_cache_key``) sent it: another caller starts
from empty caches, so neither its ``cached_tokens`` nor its prefill's time says anything
about someone else's prompt.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from app.engine.chat_template import ChatTemplateError
from app.engine.config import AcceptRule, GenerationRequest, SpecConfig
from app.engine.events import (
    PrefillEvent,
    RunSummary,
    StepEvent,
    StopReason,
    TextTail,
    TokenEvent,
)
from app.engine.process.host import (
    ChatTemplateHung,
    EngineCrashed,
    EngineHost,
    LoadRequest,
    PairInfo,
)
from app.errors import ContextOverflowError, GenerationCancelled, SpecDeckError
from app.serve.defaults import DEFAULT_QUEUE
from app.serve.params import ApiError, Call

log = logging.getLogger("specdeck.serve")


class QueueFull(Exception):
    """Every place in the queue is taken."""


@dataclass(frozen=True)
class Started:
    prompt_tokens: int


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Finished:
    summary: RunSummary
    prefill: PrefillEvent


@dataclass(frozen=True)
class Failed:
    error: ApiError


@dataclass(frozen=True)
class Cancelled:
    """The call was cancelled (its client went away) before it finished."""


Outcome = Started | Delta | Finished | Failed | Cancelled
Deliver = Callable[[Outcome], None]


@dataclass(frozen=True)
class RunnerStats:
    """For a status line: what the server has done and is doing."""

    served: int  # answers finished
    refused: int  # calls turned away with a full queue
    cancelled: int  # calls whose client went away
    waiting: int
    running: bool
    live_acceptance: float | None  # rolling acceptance of the running answer
    last: RunSummary | None


@dataclass(eq=False)
class Ticket:
    call: Call
    deliver: Deliver
    cancelled: bool = False
    submitted: float = field(default_factory=time.monotonic)


class EngineRunner:
    """Owns one ``EngineHost`` on its own thread; everything else talks to it by ticket."""

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
        self._queue: queue.Queue[Ticket | None] = queue.Queue(maxsize=max(1, queue_size))
        self._host = EngineHost()
        self._lock = threading.Lock()  # guards _current against cancel() from other threads
        self._current: Ticket | None = None
        self._thread: threading.Thread | None = None
        self._served = self._refused = self._cancelled = 0
        self._live: float | None = None
        self._last: RunSummary | None = None
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
        with self._lock:
            if self._current is not None:
                self._current.cancelled = True
                self._host.cancel()
        while True:
            try:
                ticket = self._queue.get_nowait()
            except queue.Empty:
                break
            if ticket is not None:
                self._drop(ticket)
        if self._thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=5)
            self._thread.join(30)
        self._host.close()

    # --- any thread ----------------------------------------------------------------------------

    def submit(self, call: Call, deliver: Deliver) -> Ticket:
        ticket = Ticket(call, deliver)
        try:
            self._queue.put_nowait(ticket)
        except queue.Full:
            with self._lock:
                self._refused += 1
            raise QueueFull from None
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        """Stop this call: at once if it waits, at the engine's next step if it runs."""
        with self._lock:
            if ticket.cancelled:
                return
            ticket.cancelled = True
            if self._current is ticket:
                self._host.cancel()

    def stats(self) -> RunnerStats:
        with self._lock:
            return RunnerStats(
                self._served,
                self._refused,
                self._cancelled,
                self._queue.qsize(),
                self._current is not None,
                self._live,
                self._last,
            )

    # --- the runner's thread ------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            ticket = self._queue.get()
            if ticket is None:
                return
            with self._lock:
                if ticket.cancelled:
                    self._cancelled += 1
                    skip = True
                else:
                    self._current, self._live, skip = ticket, None, False
                    self._host.reset_cancel()
            if skip:
                self._drop(ticket)
                continue
            try:
                self._answer(ticket)
            except Exception as error:  # noqa: BLE001 - the thread must outlive any one call
                log.exception("serving a request failed")
                self._fail(ticket, server_error(error))
            finally:
                with self._lock:
                    self._current = None

    def _answer(self, ticket: Ticket) -> None:
        caller = ticket.call.caller
        reuse = caller is not None and caller == self._filled_by
        self._filled_by = None  # until this prompt is in the caches

        def send(outcome: Outcome) -> None:
            if isinstance(outcome, Started):
                self._filled_by = caller
            self._send(ticket, outcome)

        try:
            final = answer_call(
                self._host,
                ticket.call,
                self._spec,
                send,
                ignore_eos=self._ignore_eos,
                on_acceptance=self._set_live,
                reuse_prefix=reuse,
            )
        except EngineCrashed as error:
            self._fail(ticket, crashed(error))
            self._reload()
            return
        with self._lock:
            if isinstance(final, Finished):
                self._served += 1
                self._last = final.summary
            elif isinstance(final, Cancelled):
                self._cancelled += 1
        self._send(ticket, final)

    def _set_live(self, acceptance: float) -> None:
        self._live = acceptance

    def _reload(self) -> None:
        """After a crash: the same pair in a new engine process, for the calls that wait."""
        self._filled_by = None
        try:
            self.info = self._host.load(self._load_request)
        except Exception:  # noqa: BLE001 - the next call reports that nothing is loaded
            log.exception("reloading the pair after a crash failed")

    def _drop(self, ticket: Ticket) -> None:
        self._send(ticket, Cancelled())

    def _fail(self, ticket: Ticket, error: ApiError) -> None:
        self._send(ticket, Failed(error))

    def _send(self, ticket: Ticket, outcome: Outcome) -> None:
        try:
            ticket.deliver(outcome)
        except Exception:  # noqa: BLE001 - a gone client (a closed event loop) must not stop it
            log.debug("delivering a result failed", exc_info=True)
            self.cancel(ticket)


class Engine(Protocol):
    """What the HTTP layer needs of an engine: the ``EngineRunner`` of ``python -m app serve``,
    or the window's own engine worker when the window serves."""

    def submit(self, call: Call, deliver: Deliver) -> Ticket: ...

    def cancel(self, ticket: Ticket) -> None: ...

    def stats(self) -> RunnerStats: ...


def answer_call(
    host: EngineHost,
    call: Call,
    spec: SpecConfig,
    send: Deliver,
    *,
    ignore_eos: bool = False,
    on_acceptance: Callable[[float], None] | None = None,
    reuse_prefix: bool = False,
) -> Finished | Failed | Cancelled:
    """One call on ``host``: ``Started`` and ``Delta``s go out through ``send`` as they come;
    the final outcome is returned, not sent. ``EngineCrashed`` is left to the caller.

    ``reuse_prefix``: keep what the caches hold of the last prompt. Only for the caller
    that sent that prompt: another would read, from the reused count in the usage or from
    the prefill's time, how much of its prompt someone else's shared."""
    try:
        prompt = call_prompt(host, call)
        request = GenerationRequest(
            prompt,
            max_tokens=call.sampling.max_tokens,
            sampler=call.sampling.sampler(),
            spec=spec_for(spec, call),
            stop=call.sampling.stop,
            ignore_eos=ignore_eos,
            token_probs=False,  # p(x)/q(x) per token feed the window's hover details only
            reuse_prefix=reuse_prefix,
        )
        prefill: PrefillEvent | None = None
        summary: RunSummary | None = None
        for events in host.generate(request):
            text: list[str] = []
            for event in events:
                if isinstance(event, TokenEvent):
                    text.append(event.piece)
                elif isinstance(event, TextTail):
                    text.append(event.text)
                elif isinstance(event, StepEvent):
                    if on_acceptance is not None:
                        on_acceptance(event.rolling_acceptance)
                elif isinstance(event, PrefillEvent):
                    prefill = event
                    send(Started(event.prompt_tokens))
                elif isinstance(event, RunSummary):
                    summary = event
            if text and any(text):
                send(Delta("".join(text)))
    except GenerationCancelled:
        summary = None
    except ContextOverflowError as error:
        return Failed(ApiError(400, str(error), code="context_length_exceeded"))
    if summary is None or summary.stop_reason is StopReason.CANCELLED or prefill is None:
        return Cancelled()
    return Finished(summary, prefill)


def crashed(error: EngineCrashed) -> ApiError:
    return ApiError(500, str(error), kind="server_error", code="engine_crashed")


def spec_for(spec: SpecConfig, call: Call) -> SpecConfig:
    """A seeded sampled call is verified by sample-and-match: with position-keyed random
    numbers its text is then the seeded target-only text, whatever was drafted, so the
    same seed gives the same answer. Rejection sampling keeps the distribution but its
    draws depend on the drafts, which the adaptive controller varies from call to call."""
    sampling = call.sampling
    if sampling.seed is not None and sampling.temperature > 0.0:
        return replace(spec, rule=AcceptRule.MATCH)
    return spec


def call_prompt(host: EngineHost, call: Call) -> tuple[int, ...]:
    """The call's tokens; a broken chat template falls back to the plain format, as the
    window's chat does."""
    if call.prompt is not None:
        return host.tokenize(call.prompt)
    messages = [{"role": r, "content": c} for r, c in call.messages]
    try:
        return host.tokenize_chat(messages)
    except ChatTemplateError as error:
        log.warning("%s; using the plain chat format", error)
        host.use_plain_chat()
    except ChatTemplateHung as error:
        log.warning("%s; restarting the engine with the plain chat format", error)
        host.reload_plain()
    return host.tokenize_chat(messages)


def server_error(error: Exception) -> ApiError:
    message = str(error) if isinstance(error, SpecDeckError) else "internal error while answering"
    return ApiError(500, message[:1000], kind="server_error")
