"""Background jobs as typed operations, without Qt.

A job is a frozen dataclass whose ``run`` does the work on a worker thread
(``app.workers.job_thread.JobThread``) and returns its own reply type; progress goes out
through ``report``. Whoever submits a job says what to do with its reply and with its failure,
so no one sorts replies by type. ``failure_of`` turns any exception into a ``HubFailure`` a
person can act on. A job that may take long is ``Stoppable``: it polls its ``cancel`` event.
"""

from __future__ import annotations

import socket
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import httpx2

from app.models.downloads import DownloadCancelled, HashMismatchError
from app.models.hub import HubError
from app.models.hub_http import TransferCancelled, TransferStalled, TransferTimedOut
from app.workers.hub_messages import HubFailure
from app.workers.messages import describe_error

Context = TypeVar("Context", contravariant=True)
Progress = TypeVar("Progress", covariant=True)
Reply = TypeVar("Reply", covariant=True)


class Job(Protocol[Context, Progress, Reply]):
    """Work for a worker thread that holds a ``Context`` (the Hub session, the calibration
    engine): it reports ``Progress`` along the way and returns a ``Reply``."""

    def run(
        self, context: Context, request_id: int, report: Callable[[Progress], None]
    ) -> Reply: ...


@dataclass(frozen=True, kw_only=True)
class Stoppable:
    """A job that stops early, by an exception, once ``cancel`` is set."""

    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


_UNREACHABLE = (
    TransferTimedOut,
    TransferStalled,
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    httpx2.NetworkError,
    httpx2.ConnectTimeout,
    httpx2.ReadTimeout,
    httpx2.PoolTimeout,
    httpx2.RemoteProtocolError,
)


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` means the Hub could not be reached (no network, refused, silent)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # huggingface_hub's OfflineModeIsEnabled is a ConnectionError
        if isinstance(current, _UNREACHABLE):
            return True
        current = current.__cause__ or current.__context__
    return False


def failure_of(request_id: int, exc: Exception) -> HubFailure:
    """What a person reads about a job that raised ``exc``."""
    if isinstance(exc, (DownloadCancelled, TransferCancelled)):
        return HubFailure(request_id, str(exc), cancelled=True)
    return HubFailure(
        request_id,
        _message(exc),
        detail=traceback.format_exc(),
        unreachable=is_unreachable(exc),
        corrupt=isinstance(exc, HashMismatchError),
    )


def _message(exc: BaseException) -> str:
    if isinstance(exc, HubError):
        return str(exc)
    title, message = describe_error(exc)
    return f"{title}: {message}"
