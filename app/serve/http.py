"""The HTTP face of the server: Starlette routes for the OpenAI endpoints.

Each generation request reads a bounded body (size and total time), is checked field by
field (``app.serve.params``), and becomes a ticket on the ``ServingQueue`` (the ``CliServing``,
or the window's ``WindowServing`` when the window serves). While the answer
is produced a watcher listens for the client going away; when it does, the ticket is
cancelled, so the engine stops at its next step (or the waiting call is dropped). Errors
carry OpenAI's error body, so clients show their message.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.serve.connections import CALLER
from app.serve.params import (
    MAX_BODY_BYTES,
    ApiError,
    Call,
    Sampling,
    chat_call,
    completion_call,
    read_json,
)
from app.serve.replies import Reply, event
from app.serve.tickets import (
    Cancelled,
    Delta,
    Failed,
    Finished,
    Outcome,
    QueueFull,
    ServingQueue,
    Started,
)

log = logging.getLogger("specdeck.serve")

BODY_SECONDS = 30.0  # a body that has not arrived whole by then is refused
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    extra = dict(headers or {})
    if error.status in (401, 403, 408, 413, 415):  # the body is not read: end the connection
        extra["connection"] = "close"
    return JSONResponse(error.body(), error.status, headers=extra)


class _RequireKey:
    """Every request must carry ``Authorization: Bearer <key>``, compared in constant time."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self._expected = hashlib.sha256(key.encode("utf-8")).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            denied = ApiError(401, "a valid API key is required", code="invalid_api_key")
            await error_response(denied, {"www-authenticate": "Bearer"})(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        digest = hashlib.sha256(token.strip()).digest()
        # both digests are compared whole, so the time taken says nothing about the key
        return hmac.compare_digest(digest, self._expected) and scheme.lower() == b"bearer"


class _SameSite:
    """Requests from web pages are refused: a ``Host`` that is not this server's names
    (``allowed``: see ``app.serve.server.host_names``; None: any) is a page reaching it
    through DNS rebinding, and an ``Origin`` other than the server's own is a page
    sending a request across sites. API clients send neither kind."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str] | None) -> None:
        self.app = app
        self._allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self._refused(scope)
            if refused is not None:
                await error_response(refused)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refused(self, scope: Scope) -> ApiError | None:
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host" and host is None:
                host = value.decode("latin-1").strip().lower()
            elif name == b"origin" and origin is None:
                origin = value.decode("latin-1").strip().lower()
        if host is None or (self._allowed is not None and host not in self._allowed):
            names = ", ".join(sorted(self._allowed or ()))
            return ApiError(
                403,
                f"the Host header {_shown(host)} does not name this server ({names}): "
                "requests through another name (a web page's, by DNS rebinding) are refused",
                code="host_not_allowed",
            )
        if origin is not None and origin != f"http://{host}":
            return ApiError(
                403,
                f"requests from web pages are refused (Origin {_shown(origin)}); API clients "
                "send no Origin header",
                code="origin_not_allowed",
            )
        return None


def _shown(value: str | None) -> str:
    return "(none)" if value is None else repr(value[:100])


async def read_body(request: Request, seconds: float = BODY_SECONDS) -> bytes:
    """The request body, refused past ``MAX_BODY_BYTES`` (declared or sent) or ``seconds``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large()
    body = bytearray()
    try:
        with anyio.fail_after(seconds):
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise _too_large()
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {seconds:g} s") from None
    except ClientDisconnect:  # closed by the client, or by the server to make room
        raise ApiError(400, "the connection closed before the body arrived") from None
    return bytes(body)


async def read_call_body(request: Request, body_seconds: float = BODY_SECONDS) -> dict[str, Any]:
    """A POST's JSON object: ``application/json`` only (a web page's form or ``fetch``
    without a preflight can send text/plain, never JSON), then ``read_body``, ``read_json``."""
    given = request.headers.get("content-type")
    media = (given or "").partition(";")[0].strip().lower()
    if media != "application/json":
        shown = f"not {given[:100]!r}" if given is not None else "and it is missing"
        raise ApiError(
            415,
            f"the body must be sent as Content-Type: application/json, {shown}",
            code="unsupported_media_type",
        )
    return read_json(await read_body(request, body_seconds))


def with_caller(call: Call, request: Request) -> Call:
    """Who sent the call, for the prompt cache: its ``prompt_cache_key`` if it gave one
    (``params.cache_caller``), else its connection (``app.serve.connections``)."""
    if call.caller is not None:
        return call
    serial = request.scope.get(CALLER)
    return replace(call, caller=f"connection {serial}" if isinstance(serial, int) else None)


def _too_large() -> ApiError:
    return ApiError(413, f"the request body is larger than {MAX_BODY_BYTES // 2**20} MiB")


class _Answer(Response):
    """One call on the engine, answered whole or as server-sent events."""

    def __init__(self, serving: ServingQueue, call: Call, reply: Reply) -> None:
        super().__init__()
        self._serving = serving
        self._call = call
        self._reply = reply

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        outcomes: asyncio.Queue[Outcome] = asyncio.Queue()

        def deliver(outcome: Outcome) -> None:  # on the serving thread
            loop.call_soon_threadsafe(outcomes.put_nowait, outcome)

        try:
            ticket = self._serving.submit(self._call, deliver)
        except QueueFull:
            busy = ApiError(
                429,
                "the server is busy: every place in its queue is taken; retry shortly",
                kind="rate_limit_error",
                code="queue_full",
            )
            await error_response(busy, {"retry-after": "1"})(scope, receive, send)
            return
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_watch_disconnect, receive, group.cancel_scope)
                if self._call.stream:
                    await self._stream(outcomes, scope, receive, send)
                else:
                    await self._whole(outcomes, scope, receive, send)
                group.cancel_scope.cancel()
        finally:
            self._serving.cancel(ticket)  # the client left (or the answer is done: no-op)

    async def _whole(
        self, outcomes: asyncio.Queue[Outcome], scope: Scope, receive: Receive, send: Send
    ) -> None:
        parts: list[str] = []
        while True:
            outcome = await outcomes.get()
            if isinstance(outcome, Delta):
                parts.append(outcome.text)
            elif isinstance(outcome, Finished):
                body = self._reply.whole("".join(parts), outcome.summary, outcome.prefill)
                await JSONResponse(body)(scope, receive, send)
                return
            elif isinstance(outcome, Failed | Cancelled):
                await error_response(_error_of(outcome))(scope, receive, send)
                return

    async def _stream(
        self, outcomes: asyncio.Queue[Outcome], scope: Scope, receive: Receive, send: Send
    ) -> None:
        first = await outcomes.get()
        if not isinstance(first, Started):  # refused before any text: a plain HTTP error
            failed = first if isinstance(first, Failed | Cancelled) else Cancelled()
            await error_response(_error_of(failed))(scope, receive, send)
            return
        headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
        headers += [(k.encode(), v.encode()) for k, v in SSE_HEADERS.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await _body(send, self._reply.first())
        while True:
            outcome: Outcome | None = await outcomes.get()
            text: list[str] = []
            while isinstance(outcome, Delta):  # what piled up while the client read goes as one
                text.append(outcome.text)
                if outcomes.empty():
                    outcome = None
                    break
                outcome = outcomes.get_nowait()
            if text:
                await _body(send, self._reply.text("".join(text)))
            if isinstance(outcome, Finished):
                last = self._reply.last(outcome.summary, outcome.prefill, self._call.include_usage)
                await _body(send, last, more=False)
                return
            if isinstance(outcome, Failed | Cancelled):
                await _body(send, event(_error_of(outcome).body()), more=False)
                return


async def _body(send: Send, data: bytes, *, more: bool = True) -> None:
    message: Message = {"type": "http.response.body", "body": data, "more_body": more}
    await send(message)


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


def _error_of(outcome: Failed | Cancelled) -> ApiError:
    if isinstance(outcome, Failed):
        return outcome.error
    return ApiError(503, "the server stopped this request", kind="server_error")


def build_app(
    serving: ServingQueue,
    *,
    model: str | Callable[[], str],
    defaults: Sampling,
    hosts: frozenset[str] | None,
    api_key: str | None = None,
    meta: dict[str, Any] | None = None,
    body_seconds: float = BODY_SECONDS,
) -> ASGIApp:
    """The ASGI application: ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``,
    and ``/health`` (llama-server's name) with the request counts and live acceptance.

    ``model`` is the served name, or a function read at each request for it (the window's
    pair can change while it serves). ``hosts``: the ``Host`` values requests may carry
    (``app.serve.server.host_names``). ``body_seconds``: how long a request's body may take to
    arrive whole once its headers have."""
    created = int(time.time())

    def name() -> str:
        return model() if callable(model) else model

    async def models(_: Request) -> Response:
        entry = {"id": name(), "object": "model", "created": created, "owned_by": "specdeck"}
        if meta:
            entry["meta"] = meta
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(_: Request) -> Response:
        stats = serving.stats()
        last = stats.last
        return JSONResponse(
            {
                "status": "ok",
                "served": stats.served,
                "refused": stats.refused,
                "cancelled": stats.cancelled,
                "waiting": stats.waiting,
                "running": stats.running,
                "live_acceptance": stats.live_acceptance,
                "last_acceptance": last.acceptance_rate if last is not None else None,
            }
        )

    async def chat(request: Request) -> Response:
        call = with_caller(
            chat_call(await read_call_body(request, body_seconds), defaults), request
        )
        return _Answer(serving, call, Reply(name(), chat=True))

    async def completions(request: Request) -> Response:
        call = with_caller(
            completion_call(await read_call_body(request, body_seconds), defaults), request
        )
        return _Answer(serving, call, Reply(name(), chat=False))

    async def api_error(_: Request, error: Exception) -> Response:
        assert isinstance(error, ApiError)
        return error_response(error)

    async def http_error(_: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        failed = ApiError(error.status_code, str(error.detail), kind=kind)
        return error_response(failed, dict(error.headers or {}))

    async def server_error(_: Request, error: Exception) -> Response:
        return error_response(ApiError(500, "internal server error", kind="server_error"))

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
        ],
        exception_handlers={
            ApiError: api_error,
            HTTPException: http_error,
            Exception: server_error,
        },
    )
    guarded: ASGIApp = _RequireKey(app, api_key) if api_key else app
    return _SameSite(guarded, hosts)
