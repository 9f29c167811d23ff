"""Connections that never finish a request: the header deadline, the per-address cap, and
room made by closing idle connections, over real sockets to a real server on 127.0.0.1.

Other loopback addresses (127.0.0.2, ...) stand for other clients: each socket is bound
to one before it connects to 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from app.serve import connections
from app.serve.connections import HEADER_SECONDS
from app.serve.tickets import Delta, Started
from tests.serve.conftest import BareServer, ServeProcess

pytestmark = pytest.mark.timeout(180)

HELD_CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _state(sock: socket.socket) -> str:
    """'open', 'closed', or what the server said before closing (its first line)."""
    sock.setblocking(False)
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return "open"
    except OSError:
        return "closed"
    finally:
        sock.setblocking(True)
    return data.split(b"\r\n", 1)[0].decode() if data else "closed"


def _request(port: int, method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    head += "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _response(sock: socket.socket) -> tuple[bytes, bytes]:
    """One whole response (head, body) with a Content-Length, read within the timeout."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, body
        body += chunk
    return head, body


def _get(port: int, path: str, source: str = "127.0.0.1", **headers: str) -> int:
    with _connect(port, source) as sock:
        sock.sendall(_request(port, "GET", path, **headers))
        head, _ = _response(sock)
    return int(head.split(b" ", 2)[1])


def test_connections_without_complete_headers_are_closed_at_the_deadline(
    bare_server: BareServer,
) -> None:
    port = bare_server.port
    silent = _connect(port, "127.0.0.2")
    half_line = _connect(port, "127.0.0.3")
    half_line.sendall(b"POST /v1/chat")
    half_headers = _connect(port, "127.0.0.4")
    half_headers.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
    kept_alive = _connect(port, "127.0.0.5")  # one answer, then half of the next request
    kept_alive.sendall(_request(port, "GET", "/health"))
    assert _response(kept_alive)[0].startswith(b"HTTP/1.1 200")
    kept_alive.sendall(b"GET /hea")
    began = time.monotonic()
    sockets = [silent, half_line, half_headers, kept_alive]
    try:
        time.sleep(HEADER_SECONDS - 1.5)
        assert [_state(s) for s in sockets] == ["open"] * 4
        while time.monotonic() - began < HEADER_SECONDS + 5:
            if all(_state(s) == "closed" for s in sockets):
                break
            time.sleep(0.1)
        assert [_state(s) for s in sockets] == ["closed"] * 4
        assert time.monotonic() - began < HEADER_SECONDS + 3
    finally:
        for sock in sockets:
            sock.close()


def test_a_client_that_stops_reading_its_answer_is_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream far larger than the sockets' buffers, to a client that reads none of it: the
    connection is cut once the server's writes have waited ``WRITE_SECONDS``, and its call is
    cancelled, where it stayed open (and being answered) for as long as the client liked."""
    monkeypatch.setattr(connections, "WRITE_SECONDS", 1.0)
    server = BareServer(concurrency=8)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
    sock.settimeout(5)
    try:
        sock.connect(("127.0.0.1", server.port))
        streamed = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True})
        sock.sendall(_request(server.port, "POST", "/v1/chat/completions", streamed.encode()))
        deadline = time.monotonic() + 10
        while not server.engine.tickets and time.monotonic() < deadline:
            time.sleep(0.02)
        ticket = server.engine.tickets[0]
        ticket.deliver(Started(1))
        for _ in range(256):  # 16 MiB, past what the kernel buffers on either side
            ticket.deliver(Delta("x" * 65536))
        began = time.monotonic()
        while not ticket.cancelled and time.monotonic() - began < 10:
            time.sleep(0.05)
        assert ticket.cancelled, "the call of a client that reads nothing was never cancelled"
        assert time.monotonic() - began < 5
        received = b""
        try:  # what the kernel still held arrives, then the end, within the socket's timeout
            while chunk := sock.recv(1 << 20):
                received += chunk
        except ConnectionResetError:
            pass
        assert b"data: [DONE]" not in received
    finally:
        sock.close()
        server.close()


def test_one_address_keeps_at_most_a_quarter_of_the_connections(bare_server: BareServer) -> None:
    port = bare_server.port
    sockets = [_connect(port, "127.0.0.2") for _ in range(6)]
    try:
        time.sleep(0.3)
        # the newest two stay; the oldest idle ones were closed (with a 503: they had just
        # connected, so a request may have been on its way)
        states = [_state(s) for s in sockets]
        assert states[4:] == ["open"] * 2 and "open" not in states[:4], states
        assert _get(port, "/v1/models", "127.0.0.3") == 200
    finally:
        for sock in sockets:
            sock.close()


def test_idle_connections_make_room_and_only_answered_ones_refuse_a_newcomer(
    bare_server: BareServer,
) -> None:
    port = bare_server.port
    idle = [_connect(port, f"127.0.0.{2 + i // 2}") for i in range(8)]  # 4 addresses, 2 each
    held: list[socket.socket] = []
    try:
        # the server is full of idle connections: a caller still gets in, by closing one
        assert _get(port, "/v1/models", "127.0.0.10") == 200
        # eight requests being answered (the engine holds them) take every place
        for i in range(8):
            sock = _connect(port, f"127.0.0.{20 + i // 2}")
            sock.sendall(_request(port, "POST", "/v1/chat/completions", HELD_CHAT))
            held.append(sock)
        deadline = time.monotonic() + 10
        while len(bare_server.engine.tickets) < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(bare_server.engine.tickets) == 8
        time.sleep(0.3)  # room is made a moment after each connection is accepted
        assert "open" not in [_state(s) for s in idle]
        assert all(_state(s) == "open" for s in held)
        # nothing idle is left to close: a newcomer is refused at once, in OpenAI's form
        with _connect(port, "127.0.0.30") as sock:
            head, body = _response(sock)
        assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in head
        assert json.loads(body)["error"]["code"] == "too_many_connections"
        # one answered caller leaves: its place is free again
        held.pop().close()
        time.sleep(0.3)
        assert _get(port, "/v1/models", "127.0.0.31") == 200
    finally:
        for sock in idle + held:
            sock.close()


def test_idle_connections_do_not_keep_out_a_caller_with_the_api_key() -> None:
    server = BareServer(concurrency=8, api_key="s3cret")
    sockets = [_connect(server.port, f"127.0.0.{2 + i // 2}") for i in range(8)]
    try:
        assert _get(server.port, "/v1/models", Authorization="Bearer s3cret") == 200
        assert _get(server.port, "/v1/models") == 401
    finally:
        for sock in sockets:
            sock.close()
        server.close()


def test_the_server_answers_its_callers_under_64_idle_and_slow_connections(
    tiny_server: ServeProcess,
) -> None:
    """64 sockets from four addresses, half silent and half sending part of a request line,
    each reopened as soon as the server closes it, for at most 40 s; meanwhile five callers
    ask in turn and each gets its answer."""
    port = tiny_server.port
    sources = [f"127.0.0.{2 + i // 16}" for i in range(64)]

    def open_one(i: int) -> socket.socket:
        sock = _connect(port, sources[i])
        if i % 2:
            sock.sendall(b"POST /v1/chat/complet")
        return sock

    sockets = [open_one(i) for i in range(64)]
    stop = threading.Event()
    reopened = [0]

    def keep_them_open() -> None:
        until = time.monotonic() + 40
        while not stop.is_set() and time.monotonic() < until:
            for i, sock in enumerate(sockets):
                if _state(sock) != "open":
                    sock.close()
                    try:
                        sockets[i] = open_one(i)
                        reopened[0] += 1
                    except OSError:
                        pass
            time.sleep(0.05)

    attacker = threading.Thread(target=keep_them_open, daemon=True)
    attacker.start()
    try:
        time.sleep(0.5)
        # the client's own retries, as it is used: a kept-alive connection idle between
        # answers may be the one closed to make room (the attacker's go first)
        client = tiny_server.client(timeout=20.0, max_retries=2)
        waits = []
        for i in range(5):
            began = time.monotonic()
            answer = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": f"caller {i}"}], max_tokens=4
            )
            waits.append(time.monotonic() - began)
            assert answer.usage.completion_tokens == 4
            time.sleep(HEADER_SECONDS / 4)  # across a deadline or two of the attacker's
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
        assert max(waits) < 10, waits
        assert reopened[0] >= 5  # the server closed idle sockets, which came back
    finally:
        stop.set()
        attacker.join(5)
        for sock in sockets:
            sock.close()
