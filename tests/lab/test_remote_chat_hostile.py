"""Hostile chat servers on 127.0.0.1: each reply must end in a ``RemoteError`` that says what
was wrong, within the total deadline, and never reach a host the user did not name."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.engine.events import TextTail
from app.remote.chat import (
    MAX_ANSWER_CHARS,
    MAX_EVENT_BYTES,
    MAX_STREAM_BYTES,
    RemoteAnswer,
    describe,
    stream_chat,
)
from app.remote.client import RemoteCancelled, RemoteError
from tests.local_http import QUICK_STOP

MESSAGES = ({"role": "user", "content": "a secret the user typed"},)


def _event(value: object) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def _piece(text: object) -> bytes:
    return _event({"choices": [{"delta": {"content": text}, "finish_reason": None}]})


WHOLE = {  # a whole answer, from a server that does not stream
    "choices": [{"message": {"content": "Hello there"}, "finish_reason": "stop"}],
    "timings": {"predicted_n": 2},
}
GOOD = (
    _piece("Hello")
    + _piece(" there")
    + _event({"choices": [{"delta": {}, "finish_reason": "stop"}], "timings": {"predicted_n": 2}})
)
STREAMS: dict[str, bytes] = {
    "/good": GOOD + b"data: [DONE]\n\n",
    "/nested": b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n",
    "/long-line": b"data: " + b"x" * (MAX_EVENT_BYTES + 10),
    "/content-number": _piece(5),
    "/choices-object": _event({"choices": {"delta": "x"}}),
    "/draft-text": _event({"choices": [], "timings": {"draft_n": "many"}}),
    "/accepts-more": _event({"choices": [], "timings": {"draft_n": 1, "draft_n_accepted": 3}}),
    "/surrogate": b'data: {"choices": [{"delta": {"content": "\\ud800"}}]}\n\n',
    "/error": _event({"error": {"message": "model \x1b[31mexploded" + "!" * 500}}),
    "/not-json": b"data: {oops\n\n",
    "/cut": _piece("Hello") + b'data: {"choi',
    "/not-streamed": json.dumps(WHOLE).encode() + b"\n",
    "/not-streamed-unended": json.dumps(WHOLE).encode(),
    "/error-unended": json.dumps({"error": {"message": "no such model"}}).encode(),
}


_padding = _event({"choices": [], "padding": "p" * 1000})


class Hostile:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.stop = threading.Event()
        seen, stop = self.seen, self.stop
        other = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - /v1/models: the window checks it first
                body = b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = self.path.removesuffix("/v1/chat/completions")
                seen.append(path)
                if path == "/redirect":
                    self.send_response(307)
                    self.send_header("Location", f"{other.elsewhere}/v1/chat/completions")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    if path == "/drip":
                        while not stop.is_set():
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.2)
                    elif path in ("/huge", "/huge-answer"):
                        one = _piece("y" * 1000) if path == "/huge-answer" else _padding
                        block = one * 64
                        while not stop.is_set():
                            self.wfile.write(block)
                    elif path == "/slow-pieces":
                        while not stop.is_set():
                            self.wfile.write(_piece("z"))
                            self.wfile.flush()
                            time.sleep(0.05)
                    else:
                        self.wfile.write(STREAMS[path])
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.elsewhere = ""
        threading.Thread(target=self.server.serve_forever, kwargs=QUICK_STOP, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    server, elsewhere = Hostile(), Hostile()
    server.elsewhere = elsewhere.url.replace("127.0.0.1", "localhost")
    server.other = elsewhere  # type: ignore[attr-defined]
    yield server
    server.close()
    elsewhere.close()


def _run(url: str, deadline_s: float = 5.0, cancel=None) -> list[object]:  # noqa: ANN001
    return list(
        stream_chat(
            url,
            MESSAGES,
            max_tokens=8,
            temperature=0.0,
            seed=1,
            deadline_s=deadline_s,
            cancel=cancel,
        )
    )


def test_a_good_stream_is_read(hostile: Hostile) -> None:
    events = _run(f"{hostile.url}/good")
    assert [e.text for e in events if isinstance(e, TextTail)] == ["Hello", " there"]
    final = events[-1]
    assert isinstance(final, RemoteAnswer) and final.finish_reason == "stop"
    assert final.drafted == 0 and final.figures().startswith("no drafting reported")
    assert describe(final).endswith("No speed-up is claimed without a baseline server.")


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/nested", "nested too deeply"),
        ("/long-line", "event line longer than"),
        ("/content-number", "content is not text (it is a number)"),
        ("/choices-object", "choices is not a list (it is an object)"),
        ("/draft-text", "timings.draft_n is not a whole number (it is text)"),
        ("/accepts-more", "accept 3 drafted tokens of 1"),
        ("/surrogate", "lone surrogate"),
        ("/error", "answered with an error: model  [31mexploded"),
        ("/not-json", "not JSON"),
        ("/cut", "in the middle of an event"),
        ("/not-streamed", "one JSON object, not a stream of events"),
        ("/not-streamed-unended", "one JSON object, not a stream of events"),
        ("/error-unended", "answered with an error: no such model"),
    ],
)
def test_a_malformed_stream_gives_a_clear_error(hostile: Hostile, path: str, words: str) -> None:
    began = time.monotonic()
    with pytest.raises(RemoteError) as caught:
        _run(f"{hostile.url}{path}")
    message = str(caught.value)
    assert words in message and "\x1b" not in message and len(message) < 400
    assert time.monotonic() - began < 5.0


def test_a_dripping_server_is_cut_at_the_total_deadline(hostile: Hostile) -> None:
    began = time.monotonic()
    with pytest.raises(RemoteError, match="did not answer within 1.5 s"):
        _run(f"{hostile.url}/drip", deadline_s=1.5)
    assert 1.4 < time.monotonic() - began < 3.0


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/huge", f"more than {MAX_STREAM_BYTES >> 20} MiB"),
        ("/huge-answer", f"an answer of more than {MAX_ANSWER_CHARS >> 20} M characters"),
    ],
)
def test_a_server_that_never_stops_talking_is_cut_at_a_size_cap(
    hostile: Hostile, path: str, words: str
) -> None:
    began = time.monotonic()
    with pytest.raises(RemoteError, match=words):
        _run(f"{hostile.url}{path}", deadline_s=30.0)
    assert time.monotonic() - began < 30.0


def test_a_stop_cuts_the_stream(hostile: Hostile) -> None:
    stop = threading.Event()
    began = time.monotonic()
    with pytest.raises(RemoteCancelled):
        for event in stream_chat(
            f"{hostile.url}/slow-pieces",
            MESSAGES,
            max_tokens=8,
            temperature=0.0,
            seed=1,
            deadline_s=30.0,
            cancel=stop.is_set,
        ):
            if isinstance(event, TextTail) and not stop.is_set():
                stop.set()
                began = time.monotonic()
    assert time.monotonic() - began < 1.0


def test_a_redirect_to_another_host_is_not_followed(hostile: Hostile) -> None:
    with pytest.raises(RemoteError, match="redirect .*does not follow it") as caught:
        _run(f"{hostile.url}/redirect")
    assert "localhost" in str(caught.value)
    assert hostile.other.seen == []  # type: ignore[attr-defined]  # the conversation went nowhere
