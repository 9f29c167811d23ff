"""uvicorn's h11 protocol with the limits a server open to strangers needs.

uvicorn counts every open connection against ``limit_concurrency`` and never times out one
that has not finished its request's headers, so 64 sockets that send nothing (or half a
request line) shut every caller out with 503 for as long as they stay. Here instead:

- a request's line and headers must arrive within ``HEADER_SECONDS`` of the connection
  opening (or of the last answer on a kept-alive one), or the connection is closed; the
  body then has ``app.serve.http.BODY_SECONDS``;
- a client that takes none of its answer for ``WRITE_SECONDS`` while the server has more to
  send is cut off: the answer would wait on its next write for ever, and the connection,
  being answered, is never closed to make room;
- when a new connection finds ``limit`` connections open, or ``per_client`` open from its
  address, the oldest one that is not being answered (waiting for a request, or still
  sending one) is closed to make room, and only when every other is being answered is
  the new one closed. Sockets that merely sit open cannot keep a caller out. A connection
  closed within a second of opening first gets a 503 saying when to retry.

Each connection also gets a serial in its requests' scope (``CALLER``): the engine keeps
the cached prefix of a prompt only for requests from the connection that sent it (or with
the same ``prompt_cache_key``, ``app.serve.params.cache_caller``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 5.0  # from connecting (or the last answer) to a request's complete headers
WRITE_SECONDS = 30.0  # the longest a client may leave the server's writes unread
ADMIT_SECONDS = 0.05  # from accepting a connection to making room for it
JUST_CONNECTED = 1.0  # seconds: a connection this new is closed to make room last
CALLER = "specdeck.caller"  # the scope key of the connection's serial

_serials = itertools.count(1)


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": {
                "message": "the server has no room for another connection: every one is "
                "being answered; retry shortly",
                "type": "server_error",
                "param": None,
                "code": "too_many_connections",
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


REFUSAL = _refusal()


def guarded_protocol(limit: int, per_client: int) -> type[H11Protocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, with these limits."""

    class Guarded(GuardedH11):
        max_connections = max(1, limit)
        max_per_client = max(1, per_client)

    return Guarded


class GuardedH11(H11Protocol):
    max_connections = 64
    max_per_client = 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.serial = next(_serials)
        self.app = _tagged(self.app, self.serial)
        self.since = time.monotonic()  # when the present wait (request, or body) began
        self.heard = False  # whether any of the awaited request has arrived
        self._deadline: asyncio.TimerHandle | None = None
        self._unread: asyncio.TimerHandle | None = None  # cuts a client that stopped reading

    # --- the protocol's callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        # room is made a moment later, when what already came on the connections just
        # accepted has been read: a caller's request then ranks behind sockets that sent
        # nothing, even under a flood of new connections
        self.loop.call_later(ADMIT_SECONDS, self._admit)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._reading_again()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._unread is None:
            self._unread = self.loop.call_later(WRITE_SECONDS, self._not_reading)

    def resume_writing(self) -> None:
        self._reading_again()
        super().resume_writing()

    def data_received(self, data: bytes) -> None:
        waiting = self.conn.their_state is h11.IDLE
        self.heard = True
        super().data_received(data)
        if waiting and self.conn.their_state is not h11.IDLE:  # the headers are in
            self._disarm()
            self.since = time.monotonic()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # kept alive: the next request's headers have the same deadline

    # --- the header deadline ------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        self.since = time.monotonic()
        self.heard = False
        self._deadline = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_late(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._drop()

    def _drop(self) -> None:
        self.connections.discard(self)  # counted out now, not when the loop gets to it
        self.transport.close()

    # --- the write deadline -------------------------------------------------------------

    def _reading_again(self) -> None:
        if self._unread is not None:
            self._unread.cancel()
            self._unread = None

    def _not_reading(self) -> None:
        # abort, not close: close() would wait for the unread bytes to be taken first
        self._unread = None
        self.connections.discard(self)
        self.transport.abort()

    # --- room for a new connection ------------------------------------------------------

    @property
    def _address(self) -> str | None:
        return self.client[0] if self.client else None

    @property
    def _idle(self) -> bool:
        """Waiting for a request (0) or for its body (1); None: being answered."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and (
            self.cycle is None or self.cycle.response_complete or not self.cycle.response_started
        )

    def _admit(self) -> None:
        if self.transport.is_closing():
            return
        open_ = [
            c
            for c in self.connections
            if isinstance(c, GuardedH11) and not c.transport.is_closing()
        ]
        mine = [c for c in open_ if c._address == self._address]
        if len(mine) > self.max_per_client:
            group, excess = mine, len(mine) - self.max_per_client
        elif len(open_) > self.max_connections:
            group, excess = open_, len(open_) - self.max_connections
        else:
            return
        # those that just connected last, oldest first (their requests may be on the way);
        # of the rest, those waiting for a request before those sending one, those from
        # the address with the most connections first, and the longest waiting first;
        # either way, a connection that has sent nothing goes before one that has
        now = time.monotonic()
        counts = Counter(c._address for c in open_)

        def order(c: GuardedH11) -> tuple[bool, int, int, float]:
            recent = now - c.since < JUST_CONNECTED
            stage = 0 if not c.heard else 1 if c.conn.their_state is h11.IDLE else 2
            return recent, stage, 0 if recent else -counts[c._address], c.since

        for victim in sorted((c for c in group if c._idle), key=order)[:excess]:
            if now - victim.since < JUST_CONNECTED:  # its request may be on the way
                victim.transport.write(REFUSAL)  # no room: say so, and when to retry
            victim._drop()


def _tagged(app: Any, serial: int) -> Any:
    async def tagged(scope: Any, receive: Any, send: Any) -> None:
        scope[CALLER] = serial
        await app(scope, receive, send)

    return tagged
