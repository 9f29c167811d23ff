"""Hostile remote servers on 127.0.0.1: dripping, never answering, lying about their figures.

Each server is a real ``http.server`` in a thread; the lab talks to it over real sockets.
Every request must end within its total deadline or at a cancel, and every malformed figure
must end in a ``RemoteError`` that says what was wrong, never a RecursionError, an
OverflowError or a TypeError.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.engine.process.host import CancelFlag
from app.lab.configs import ConfigError, parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.remote_run import run_remote
from app.lab.results import ResultLog
from app.lab.runner import LabRunner, target_spec
from app.lab.suites import builtin
from app.remote.client import RemoteCancelled, RemoteError, check_url
from tests.local_http import QUICK_STOP

GOOD_TIMINGS = {"prompt_ms": 5, "predicted_n": 8, "predicted_ms": 40, "draft_n": 8}
HOSTILE_REASON = '<img src="/dev/zero"> \x1b[31m\t' + "x" * 8000
BROKEN_REASON = '<img src="/dev/zero">\r\n' + "x" * 8000  # the rest is no header line


def _completion(**extra: object) -> bytes:
    body = {"choices": [], "usage": {"completion_tokens": 8}, "timings": GOOD_TIMINGS}
    return json.dumps({**body, **extra}).encode()


ANSWERS: dict[str, bytes] = {
    "/nested": b"[" * 5000 + b"]" * 5000,
    "/nested-object": b'{"usage": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "/infinity": b'{"timings": {"prompt_ms": 1, "predicted_n": 8, "predicted_ms": Infinity}}',
    "/huge-count": _completion(timings={**GOOD_TIMINGS, "predicted_n": 10**400}),
    "/list-tokens": json.dumps({"usage": {"completion_tokens": [1]}}).encode(),
    "/bool-tokens": json.dumps({"usage": {"completion_tokens": True}}).encode(),
    "/accepts-more": _completion(timings={**GOOD_TIMINGS, "draft_n_accepted": 9}),
    "/zero-ms": _completion(timings={**GOOD_TIMINGS, "predicted_ms": 1e-320}),
    "/good": _completion(),
}
METRICS: dict[str, str] = {
    "/inf-metrics": "vllm:spec_decode_num_drafts_total +Inf\n",
    "/nan-metrics": "vllm:spec_decode_num_draft_tokens_total NaN\n",
    "/far-position": 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="999999999"} 1\n',
    "/bad-float": "vllm:spec_decode_num_drafts_total 1.2.3\n",
    "/superscript-position": 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="²"} 1\n',
}


class Moment(threading.Event):
    at = 0.0

    def set(self) -> None:
        self.at = time.monotonic()
        super().set()


class HostileServer:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.silent_since = Moment()  # set when a request reaches /silent
        stop, silent_since = self.stop, self.silent_since

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _drip(self, data: bytes) -> None:
                for byte in data:
                    if stop.wait(0.2):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

            def _send(self, status: int, body: bytes, reason: str | None = None) -> None:
                self.send_response(status, reason)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _answer(self) -> None:
                base = "/" + self.path.strip("/").split("/")[0]
                try:
                    if base == "/drip-headers":
                        self._drip(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10_000)
                    elif base == "/drip-body":
                        self.send_response(200)
                        self.send_header("Content-Length", "10000")
                        self.end_headers()
                        self._drip(b"{" + b" " * 9999)
                    elif base == "/silent":
                        silent_since.set()
                        stop.wait(120)
                    elif base == "/reason":
                        self._send(500, b"{}", HOSTILE_REASON)
                    elif base == "/broken-reason":
                        self._send(500, b"{}", BROKEN_REASON)
                    elif base in ANSWERS:
                        self._send(200, ANSWERS[base])
                    elif base in METRICS and self.path.endswith("/metrics"):
                        self._send(200, METRICS[base].encode())
                    elif base in METRICS:
                        self._send(200, _completion())
                    else:
                        self._send(404, b"{}")
                except OSError:  # the client cut the connection: what a deadline does
                    pass

            def do_GET(self) -> None:  # noqa: N802
                self._answer()

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(
            target=self.http.serve_forever, kwargs=QUICK_STOP, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    yield server
    server.close()


def _timed(call: Callable[[], object], limit_s: float) -> tuple[BaseException | None, float]:
    """Run ``call`` in a thread: (what it raised, seconds); fails if it outlives ``limit_s``
    (the thread is a daemon, so a hang fails the test instead of hanging the suite)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    began = time.monotonic()
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limit_s)
    elapsed = time.monotonic() - began
    assert not worker.is_alive(), f"still waiting after {elapsed:.0f} s"
    return outcome[0], elapsed


def _ask(url: str, **options: object) -> dict:
    return run_remote(url, "hello", max_tokens=8, temperature=0.0, seed=1, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["/drip-headers", "/drip-body"])
def test_a_dripping_server_is_cut_at_the_total_deadline(hostile: HostileServer, path: str) -> None:
    # a byte every 0.2 s: a per-read timeout of 2 s never fires, a total deadline of 2 s does
    error, elapsed = _timed(lambda: _ask(hostile.url + path, timeout=2.0), 20.0)
    assert isinstance(error, RemoteError), error
    assert "did not answer within 2 s" in str(error)
    assert 1.9 <= elapsed < 3.5


def test_cancel_cuts_a_request_the_server_never_answers(hostile: HostileServer) -> None:
    began = time.monotonic()
    error, elapsed = _timed(
        lambda: _ask(hostile.url + "/silent", cancel=lambda: time.monotonic() - began > 0.5),
        20.0,
    )
    assert isinstance(error, RemoteCancelled), error
    assert elapsed < 1.5


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/nested", "did not answer with a completion object|nested too deeply"),
        ("/nested-object", "nested too deeply"),
        ("/infinity", "did not answer with JSON .*Infinity is not a number JSON allows"),
        ("/huge-count", r"timings.predicted_n is not a number|outside 0\.\."),
        ("/list-tokens", r"usage.completion_tokens is not a whole number \(it is a list\)"),
        ("/bool-tokens", r"usage.completion_tokens is not a whole number \(it is true/false\)"),
        ("/accepts-more", "accept 9 drafted tokens of 8"),
        ("/zero-ms", "faster than any model runs"),
    ],
)
def test_malformed_figures_are_refused_with_a_reason(
    hostile: HostileServer, path: str, message: str
) -> None:
    with pytest.raises(RemoteError, match=message):
        _ask(hostile.url + path)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/inf-metrics", "not a finite number"),
        ("/nan-metrics", "not a finite number"),
        ("/far-position", r"outside 0\.\.1023"),
    ],
)
def test_malformed_vllm_counters_are_refused(
    hostile: HostileServer, path: str, message: str
) -> None:
    with pytest.raises(RemoteError, match=message):
        _ask(hostile.url + path, kind="vllm")


@pytest.mark.parametrize("path", ["/bad-float", "/superscript-position"])
def test_a_malformed_counter_line_is_skipped(hostile: HostileServer, path: str) -> None:
    run = _ask(hostile.url + path, kind="vllm")
    assert run["drafted"] == 0 and run["tokens"] == 8


@pytest.mark.parametrize(("path", "shown"), [("/reason", "HTTP 500"), ("/broken-reason", "")])
def test_what_the_server_says_is_passed_on_short_and_on_one_line(
    hostile: HostileServer, path: str, shown: str
) -> None:
    url = f"{hostile.url}{path}/v1/chat/completions"
    with pytest.raises(RemoteError) as caught:
        _ask(hostile.url + path)
    message = str(caught.value)
    assert shown in message and url in message
    assert len(message) <= len(url) + 220
    assert not any(ch in message for ch in "\r\n\t\x1b")


def test_a_good_answer_still_measures(hostile: HostileServer) -> None:
    run = _ask(hostile.url + "/good", timeout=5.0)
    assert run["tokens"] == 8 and run["tok_s"] == 200.0 and run["acceptance"] == 0.0


def test_an_unreachable_server_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteError, match=f"127.0.0.1:{port}.* did not answer"):
        _ask(f"http://127.0.0.1:{port}", timeout=5.0)


def test_cancelling_a_lab_run_cuts_its_remote_request(
    hostile: HostileServer,
    looping_models,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    """The window's Cancel reaches a remote request the server never answers."""
    plan = LabPlan(
        target=target_spec(str(looping_models["target"]), n_ctx=1024, threads=1),
        configs=(parse_config(f"server:server={hostile.url}/silent"),),
        prompts=tuple(builtin(["math"])),
        max_tokens=8,
        ignore_eos=True,
        claim=Claim(1.2, config="server"),
    )
    cancel = CancelFlag()
    runner = LabRunner.start(plan, tmp_path / "r.jsonl", cancel)
    hostile.silent_since.clear()

    def press_cancel() -> None:  # half a second after the server went silent
        since = hostile.silent_since
        while not (since.is_set() and time.monotonic() - since.at > 0.5):
            time.sleep(0.02)
        cancel.set()

    threading.Thread(target=press_cancel, daemon=True).start()
    finished: list[bool] = []
    error, _ = _timed(lambda: finished.append(runner.run()), 60.0)
    assert error is None and finished == [False], error
    assert time.monotonic() - hostile.silent_since.at < 1.5
    assert not ResultLog.open(tmp_path / "r.jsonl").finished


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://127.0.0.1:99999", "http://a b", "http://h/\x00", "http://h/\x1b[2J"],
)
def test_a_malformed_server_address_is_refused_by_name(url: str) -> None:
    with pytest.raises(RemoteError, match="is not an http"):
        check_url(url)
    with pytest.raises(ConfigError, match="is not an http"):
        parse_config(f"r:server={url}")
