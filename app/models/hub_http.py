"""Bounded HTTP transfers from the Hub, which is untrusted input.

Every body is read up to what was asked (error bodies up to ``MAX_ERROR_BODY``), every job
has a stall timeout and may have a total deadline, and every job can be cancelled through a
``threading.Event`` that is checked between requests and between chunks. Requests go
through huggingface_hub's session, so its offline mode, proxies and redirect rules (the
token is dropped when a redirect leaves the origin) still apply.

Failed requests are retried by huggingface_hub's rules (``retryable``: the exceptions and
status codes its ``http_backoff`` retries by default; its waits, doubling to a cap; its
reading of ``Retry-After`` and ``RateLimit``), but not by ``http_backoff`` itself: it sleeps
through a cancel and past any deadline, honours any ``Retry-After`` in full (a hostile server
can park the thread for a day) and reads a whole body unbounded, and ``http_stream_backoff``
catches a connection dropped while the caller reads the body and fails with "generator
didn't stop after throw()". Whole requests (listings, header ranges) are retried by
``with_retries`` when the Hub answered (``retryable_answer``); downloads resume from their
``.part`` file in ``app.models.downloads``, by ``retryable``.
"""

from __future__ import annotations

import inspect
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

MAX_ERROR_BODY = 1 << 20
DEFAULT_STALL_TIMEOUT_S = 30.0
DEFAULT_HEADER_DEADLINE_S = 120.0
# Fewer bytes than this within one stall timeout is no progress (a byte every 10 s is a stall).
STALL_MIN_BYTES = 16 << 10

_CONTENT_RANGE_RE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class HubError(RuntimeError):
    """A Hub request failed; the message says what to do about it."""


class TransferCancelled(HubError):
    pass


class TransferStalled(HubError):
    pass


class TransferTimedOut(HubError):
    pass


class BadResponse(HubError):
    """The server answered something no real Hub sends (wrong range, encoded data, bad JSON)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failed request is tried again and how long it waits in between.

    The defaults are ``huggingface_hub.utils.http_backoff``'s: five retries, waiting 1 s and
    doubling up to 8 s. A server's ``Retry-After`` (or exhausted ``RateLimit``) lengthens a
    wait up to ``max_wait_s``, never beyond it.
    """

    retries: int = 5
    first_wait_s: float = 1.0
    max_wait_s: float = 8.0

    def wait_s(self, failures: int, error: BaseException) -> float:
        """The wait before retry number ``failures`` (1, 2, …) after ``error``."""
        wait = min(self.max_wait_s, self.first_wait_s * 2 ** (failures - 1))
        asked = _server_asked_wait_s(error)
        return wait if asked is None else min(self.max_wait_s, max(wait, asked))


@dataclass(frozen=True)
class TransferLimits:
    """How long a job may wait: per transfer without progress, and in total."""

    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S
    deadline_s: float | None = None
    cancel: threading.Event | None = None
    stall_min_bytes: int = STALL_MIN_BYTES
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def watch(self, what: str) -> Watch:
        return Watch(self, what)


class Watch:
    """One job's clock: raises when it is cancelled, past its deadline, or stalled."""

    def __init__(self, limits: TransferLimits, what: str) -> None:
        self.limits = limits
        self.what = what
        self.started = time.monotonic()
        self.deadline = None if limits.deadline_s is None else self.started + limits.deadline_s
        self._window_start = self.started
        self._window_bytes = 0

    def check(self) -> None:
        cancel = self.limits.cancel
        if cancel is not None and cancel.is_set():
            raise TransferCancelled(f"{self.what}: cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TransferTimedOut(
                f"{self.what}: the server did not deliver within {self.limits.deadline_s:g} s; "
                "it is too slow or stalled. Try again later or choose another repository"
            )

    def timeout(self) -> Any:
        import httpx2

        wait = self.limits.stall_timeout_s
        if self.deadline is not None:
            wait = max(0.05, min(wait, self.deadline - time.monotonic()))
        return httpx2.Timeout(wait)

    def new_transfer(self) -> None:
        self._window_start = time.monotonic()
        self._window_bytes = 0

    def progress(self, n: int, still_wanted: int) -> None:
        """Count ``n`` new bytes; ``still_wanted`` bytes remain in this transfer."""
        self._window_bytes += n
        now = time.monotonic()
        if now - self._window_start >= self.limits.stall_timeout_s:
            if self._window_bytes < min(self.limits.stall_min_bytes, still_wanted + n):
                raise self.stalled()
            self._window_start, self._window_bytes = now, 0
        self.check()

    def pause(self, seconds: float) -> bool:
        """Wait before a retry: False (without waiting) when the wait would pass the deadline;
        a cancel ends the wait at once and raises."""
        if self.deadline is not None and time.monotonic() + seconds >= self.deadline:
            return False
        pause(seconds, self.limits.cancel)
        self.check()
        return True

    def stalled(self) -> TransferStalled:
        return TransferStalled(
            f"{self.what}: the transfer stalled (almost no data for "
            f"{self.limits.stall_timeout_s:g} s). Check the network and try again"
        )


@cache
def _backoff_defaults() -> tuple[tuple[type[BaseException], ...], tuple[int, ...]]:
    """What huggingface_hub retries by default: the defaults of its public ``http_backoff``."""
    from huggingface_hub.utils import http_backoff

    parameters = inspect.signature(http_backoff).parameters
    exceptions = parameters["retry_on_exceptions"].default
    statuses = parameters["retry_on_status_codes"].default
    return (
        exceptions if isinstance(exceptions, tuple) else (exceptions,),
        statuses if isinstance(statuses, tuple) else (statuses,),
    )


def retryable(error: BaseException) -> bool:
    """A failure that trying again may cure, by huggingface_hub's rules.

    Its transport errors and status codes (408, 429, 5xx), plus this module's own names for
    them: a stall is a read timeout, and a ``ConnectionError`` is a dropped connection.
    """
    exceptions, statuses = _backoff_defaults()
    if isinstance(error, (TransferStalled, ConnectionError, *exceptions)):
        return True
    if isinstance(error, HubError):
        return False  # cancelled, past the deadline, or an answer no real Hub sends
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None) in statuses


def retryable_answer(error: BaseException) -> bool:
    """``retryable``, except when the Hub could not be reached at all or the request stalled.

    For the wizard's whole requests (listings, header reads): each of those already cost its
    wait, and an unreachable Hub must be known within seconds (the person then chooses
    Retry or the models on this computer), not after a minute of backoff.
    """
    import httpx2

    return retryable(error) and not isinstance(error, httpx2.ConnectError | TransferStalled)


def _server_asked_wait_s(error: BaseException) -> float | None:
    """The wait the server asked for (``RateLimit`` on a 429, else ``Retry-After`` seconds)."""
    from huggingface_hub.utils import parse_ratelimit_headers

    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if getattr(response, "status_code", None) == 429:
        limit = parse_ratelimit_headers(headers)
        if limit is not None and limit.remaining == 0:
            return float(limit.reset_in_seconds)
    asked = str(headers.get("Retry-After", "")).strip()
    return float(asked) if asked.isdigit() else None


def pause(seconds: float, cancel: threading.Event | None) -> None:
    """Sleep, unless ``cancel`` is set meanwhile (the caller checks which happened)."""
    if cancel is not None:
        cancel.wait(seconds)
    elif seconds > 0:
        time.sleep(seconds)


def with_retries(attempt: Callable[[], T], watch: Watch) -> T:
    """``attempt()``, tried again after a ``retryable_answer`` while the job's limits allow.

    For whole requests only: each attempt starts the request from its beginning.
    """
    policy = watch.limits.retry
    failures = 0
    while True:
        try:
            return attempt()
        except Exception as error:
            failures += 1
            if (
                failures > policy.retries
                or not retryable_answer(error)
                or not watch.pause(policy.wait_s(failures, error))
            ):
                raise


def _map_transport(exc: Exception, watch: Watch) -> Exception:
    import httpx2

    try:  # the watchdog cut the connection, or the deadline passed during a read
        watch.check()
    except HubError as mapped:
        return mapped
    if isinstance(exc, httpx2.TimeoutException):
        if watch.deadline is not None and time.monotonic() >= watch.deadline - 0.01:
            try:
                watch.check()
            except HubError as mapped:
                return mapped
        return watch.stalled()
    if isinstance(exc, httpx2.TooManyRedirects):
        return BadResponse(f"{watch.what}: the server redirected too many times")
    if isinstance(exc, httpx2.UnsupportedProtocol):
        return BadResponse(
            f"{watch.what}: the server redirected to an address that is not http or https ({exc})"
        )
    dropped = "peer closed" in str(exc) or "disconnected" in str(exc).lower()
    if isinstance(exc, httpx2.RemoteProtocolError | httpx2.DecodingError) and not dropped:
        return BadResponse(f"{watch.what}: the server sent a malformed HTTP response ({exc})")
    return exc


@contextmanager
def _transport_errors(watch: Watch) -> Iterator[None]:
    """A transport failure inside as the HubError that says what happened under ``watch``
    (``_map_transport``); a HubError, or a failure it does not know, passes as it is."""
    try:
        yield
    except HubError:
        raise
    except Exception as exc:
        mapped = _map_transport(exc, watch)
        if mapped is exc:
            raise
        raise mapped from exc


@contextmanager
def stream(url: str, headers: dict[str, str], watch: Watch) -> Iterator[Any]:
    """GET ``url`` with bounded waits; HTTP errors are raised from a capped error body."""
    from huggingface_hub.utils import get_session

    with watched_request(get_session(), "GET", url, headers, watch) as response:
        if response.status_code >= 400:
            raise_for_status_capped(response, watch)
        yield response


@contextmanager
def watched_request(
    client: Any,
    method: str,
    url: str,
    headers: dict[str, str],
    watch: Watch,
    *,
    content: bytes | None = None,
) -> Iterator[Any]:
    """One request through an httpx2 ``client`` under ``watch``: cut when it is cancelled or
    past its deadline, headers included; the response is yielded whatever its status."""
    watch.check()
    watch.new_transfer()
    dog = _Watchdog(watch) if watch.deadline is not None or watch.limits.cancel else None
    extensions = {}
    if dog is not None:
        # A fresh connection per request, so the watchdog holds every socket it may cut.
        headers = {**headers, "Connection": "close"}
        extensions["trace"] = dog.trace
        dog.start()
    try:
        with (
            _transport_errors(watch),
            client.stream(
                method,
                url,
                headers=headers,
                content=content,
                timeout=watch.timeout(),
                extensions=extensions,
            ) as response,
        ):
            yield response
    finally:
        if dog is not None:
            dog.stop()


class _Watchdog:
    """Cuts a request's connection when its job is cancelled or past its deadline.

    Read timeouts only bound the wait for each piece, so a server that drips its status line
    and headers byte by byte would outlive any deadline without this.
    """

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.sockets: list[socket.socket] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="hub-watchdog", daemon=True)

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream_ = info.get("return_value")
            sock = stream_.get_extra_info("socket") if stream_ is not None else None
            if isinstance(sock, socket.socket):
                self.sockets.append(sock)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.done.wait(0.05):
            try:
                self.watch.check()
            except HubError:
                for sock in self.sockets:
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return


def read_capped(response: Any, limit: int, watch: Watch) -> bytes:
    """At most ``limit`` raw bytes of the body; the rest is never read."""
    if response.headers.get("Content-Encoding", "identity").lower() not in ("identity", ""):
        raise BadResponse(
            f"{watch.what}: the server sent compressed data "
            f"({response.headers['Content-Encoding']}) although none was asked"
        )
    data = bytearray()
    with _transport_errors(watch):
        for chunk in response.iter_raw():
            data += chunk[: limit - len(data)]
            watch.progress(len(chunk), limit - len(data))
            if len(data) >= limit:
                break
    return bytes(data)


def raise_for_status_capped(response: Any, watch: Watch) -> None:
    """huggingface_hub's error mapping, fed with at most ``MAX_ERROR_BODY`` of the body."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    body = bytearray()
    for chunk in response.iter_raw():
        body += chunk[: MAX_ERROR_BODY - len(body)]
        watch.progress(len(chunk), MAX_ERROR_BODY - len(body))
        if len(body) >= MAX_ERROR_BODY:
            break
    headers = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    capped = httpx2.Response(
        response.status_code, headers=headers, content=bytes(body), request=response.request
    )
    hf_raise_for_status(capped)


def answered_range(response: Any, offset: int, who: str, asked: str) -> int | None:
    """The total size (None: not said) of a 206 answer to a range request from byte
    ``offset``; ``BadResponse`` naming ``who`` and what was ``asked`` when its Content-Range
    is malformed or starts elsewhere."""
    header = response.headers.get("Content-Range")
    match = _CONTENT_RANGE_RE.match((header or "").strip())
    if match is None or int(match.group(1)) != offset:
        raise BadResponse(
            f"{who}: the server answered the byte range {header!r} to a request {asked}"
        )
    return None if match.group(3) == "*" else int(match.group(3))


def get_json(
    url: str, headers: dict[str, str], watch: Watch, *, max_bytes: int
) -> tuple[Any, str | None]:
    """A JSON document of at most ``max_bytes`` and the URL of its next page, if any."""

    def fetch() -> tuple[bytes, str | None]:
        with stream(url, headers, watch) as response:
            body = read_capped(response, max_bytes + 1, watch)
            return body, response.links.get("next", {}).get("url")

    body, next_link = with_retries(fetch, watch)
    if len(body) > max_bytes:
        raise BadResponse(f"{watch.what}: the answer is larger than {max_bytes >> 20} MiB")
    try:
        return json.loads(body), next_link
    except (ValueError, RecursionError) as exc:
        raise BadResponse(f"{watch.what}: the server's answer is not valid JSON") from exc


class HttpRangeSource:
    """A remote file read with HTTP ``Range`` requests through huggingface_hub's session.

    The session applies the Hub's offline mode and redirects; ``token`` follows
    huggingface_hub's rules (None: the stored token, False: none, str: that token).
    All reads of one source share ``limits``: one stall timeout per request, one deadline
    and one cancel flag for the whole header.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | bool | None = None,
        limits: TransferLimits | None = None,
        name: str | None = None,
    ) -> None:
        self.url = url
        self.name = name or url
        self.token = token
        self.size: int | None = None
        self.watch = (limits or TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S)).watch(
            self.name
        )

    def read_at(self, offset: int, size: int) -> bytes:
        return with_retries(lambda: self._read_once(offset, size), self.watch)

    def _read_once(self, offset: int, size: int) -> bytes:
        from huggingface_hub.utils import build_hf_headers

        headers = build_hf_headers(token=self.token)
        headers["Range"] = f"bytes={offset}-{offset + size - 1}"
        headers["Accept-Encoding"] = "identity"
        with stream(self.url, headers, self.watch) as response:
            if response.status_code == 416:
                return b""
            if response.status_code == 206:
                self.size = answered_range(
                    response, offset, self.name, f"for bytes {offset}-{offset + size - 1}"
                )
                return read_capped(response, size, self.watch)
            if response.status_code != 200:
                raise BadResponse(
                    f"{self.name}: unexpected HTTP {response.status_code} to a range request"
                )
            # The server ignored the range and sends the whole file: skip to what was asked.
            skipped = 0
            while skipped < offset:
                piece = read_capped(response, min(offset - skipped, 1 << 20), self.watch)
                if not piece:
                    return b""
                skipped += len(piece)
            return read_capped(response, size, self.watch)
