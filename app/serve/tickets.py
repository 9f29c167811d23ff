"""What the HTTP layer and a serving queue say to each other.

A request becomes a ``Ticket`` on a ``ServingQueue``: the ``CliServing`` of
``python -m app serve`` (its own engine process), or the window's ``WindowServing`` (the
window's engine, in turn with the chat). Each ticket's results leave through the ``deliver``
callback it was submitted with: ``Started`` once the prompt is read, then ``Delta`` text,
then ``Finished``, ``Failed`` or ``Cancelled``. A full queue refuses at once (``QueueFull``,
a 429 one level up).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.engine.events import PrefillEvent, RunSummary
from app.serve.params import ApiError, Call


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
Final = Finished | Failed | Cancelled
Deliver = Callable[[Outcome], None]


@dataclass(eq=False)
class Ticket:
    """One request on a serving queue; ``cancelled`` is set from any thread."""

    call: Call
    deliver: Deliver
    cancelled: bool = False
    submitted: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class ServingStats:
    """For a status line: what the server has done and is doing."""

    served: int  # answers finished
    refused: int  # calls turned away with a full queue
    cancelled: int  # calls whose client went away
    waiting: int
    running: bool
    live_acceptance: float | None  # rolling acceptance of the running answer
    last: RunSummary | None


class ServingQueue(Protocol):
    """What the HTTP layer hands its requests to: the ``CliServing`` of
    ``python -m app serve``, or the window's ``WindowServing`` when the window serves."""

    def submit(self, call: Call, deliver: Deliver) -> Ticket: ...

    def cancel(self, ticket: Ticket) -> None: ...

    def stats(self) -> ServingStats: ...
