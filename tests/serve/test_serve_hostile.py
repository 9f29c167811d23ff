"""Hostile bodies and the binding rule, over raw HTTP (``http.client`` and sockets)."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from tests.serve.conftest import ROOT, BareServer, ServeProcess, app_env, pair_args

pytestmark = pytest.mark.timeout(300)

CHAT = "/v1/chat/completions"
GOOD = {"model": "any", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _post(server: ServeProcess, path: str, body: bytes, headers: dict | None = None):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _error(server: ServeProcess, body: bytes | dict, path: str = CHAT) -> tuple[int, dict]:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    status, _, data = _post(server, path, raw)
    return status, json.loads(data)["error"]


def _still_serving(server: ServeProcess) -> None:
    status, _, data = _post(server, CHAT, json.dumps(GOOD).encode())
    assert status == 200, data
    assert json.loads(data)["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"model": "any", "messages": [', "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"messages": [{"role": "user", "content": NaN}]}', "NaN"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": Infinity}', "Infinity"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[1, 2]", "must be a JSON object"),
        (b'"just text"', "must be a JSON object"),
        (b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "lone surrogate"),
    ],
)
def test_unreadable_bodies_get_a_400_naming_the_fault(tiny_server, body, words) -> None:
    status, error = _error(tiny_server, body)
    assert status == 400 and words in error["message"], error
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("change", "param", "words"),
    [
        ({"messages": "hello"}, "messages", "must be a list"),
        ({"messages": []}, "messages", "at least one"),
        ({"messages": [{"role": "user", "content": "x"}] * 1025}, "messages", "too many"),
        ({"messages": ["hi"]}, "messages[0]", "not an object"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0]", "role"),
        ({"messages": [{"role": ["user"], "content": "x"}]}, "messages[0]", "role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0]", "not text"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, None, "only text"),
        ({"temperature": "hot"}, "temperature", "not a number"),
        ({"temperature": 7}, "temperature", "outside"),
        ({"temperature": True}, "temperature", "not a number"),
        ({"top_p": [0.5]}, "top_p", "not a number"),
        ({"top_k": 1.5}, "top_k", "not a whole number"),
        ({"min_p": -0.1}, "min_p", "outside"),
        ({"max_tokens": 0}, "max_tokens", "outside"),
        ({"max_tokens": 10**30}, "max_tokens", "outside"),
        ({"max_completion_tokens": "5"}, "max_completion_tokens", "not a whole number"),
        ({"seed": -7}, "seed", "outside"),
        ({"seed": 2**64}, "seed", "outside"),
        ({"stop": 5}, "stop", "text or a list"),
        ({"stop": ["x"] * 17}, "stop", "more than 16"),
        ({"stop": [["x"]]}, "stop", "not text"),
        ({"stream": "yes"}, "stream", "not true or false"),
        ({"stream_options": 1}, "stream_options", "not an object"),
        ({"n": 3}, "n", "must be 1"),
    ],
)
def test_wrong_types_and_ranges_get_a_400_naming_the_field(
    tiny_server, change, param, words
) -> None:
    status, error = _error(tiny_server, {**GOOD, **change})
    assert status == 400, error
    assert words in error["message"], error
    if param is not None:
        assert error["param"] == param


LONG = "9" * 5000  # past the interpreter's 4300-digit limit on int(str)
ASK = '{"messages": [{"role": "user", "content": "x"}], '


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        (ASK + f'"seed": {LONG}}}', "seed", "a number of 5000 digits"),
        (ASK + f'"max_tokens": -{LONG}}}', "max_tokens", "a number of 5000 digits"),
        (ASK + f'"x": [{{"y": [1, {LONG}]}}]}}', "x[0].y[1]", "a number of 5000 digits"),
        (ASK + '"max_tokens": NaN}', "max_tokens", "NaN"),
        (ASK + '"top_p": -Infinity}', "top_p", "-Infinity"),
        (ASK + '"temperature": 1e999}', "temperature", "not a finite number"),
        (ASK + '"seed": 1e999}', "seed", "not a whole number"),
        (f"[{LONG}]", "[0]", "a number of 5000 digits"),
        (LONG, None, "the body is a number of 5000 digits"),
    ],
    ids=["seed", "negative", "nested", "NaN", "-Infinity", "1e999", "1e999-seed", "list", "top"],
)
def test_huge_and_impossible_numbers_get_a_400_naming_where_they_are(
    tiny_server, body, param, words
) -> None:
    """Python refuses int() of more than 4300 digits with a ValueError inside the JSON
    parser: a 400 naming the field, never a 500 and a traceback in the server's log."""
    status, error = _error(tiny_server, body.encode())
    assert status == 400 and error["param"] == param and words in error["message"], error
    assert "Traceback" not in tiny_server.stderr()


def test_completions_check_their_prompt(tiny_server) -> None:
    for prompt, words in ((None, "prompt must be text"), ("", "empty"), ([1, 2], "must be text")):
        status, error = _error(tiny_server, {"model": "m", "prompt": prompt}, "/v1/completions")
        assert status == 400 and words in error["message"] and error["param"] == "prompt"
    status, error = _error(tiny_server, {"prompt": "x", "echo": True}, "/v1/completions")
    assert status == 400 and error["param"] == "echo"


def test_unknown_fields_are_ignored_and_nulls_mean_default(tiny_server) -> None:
    body = {
        **GOOD,
        "frobnicate": {"deep": [1, 2, 3]},
        "logit_bias": {"50": 10},
        "user": "someone",
        "temperature": None,
        "stop": None,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "x"}],
    }
    status, _, data = _post(tiny_server, CHAT, json.dumps(body).encode())
    assert status == 200, data


def test_wrong_paths_and_methods_answer_in_openai_form(tiny_server) -> None:
    conn = http.client.HTTPConnection(tiny_server.host, tiny_server.port, timeout=10)
    conn.request("GET", CHAT)
    response = conn.getresponse()
    assert response.status == 405 and "error" in json.loads(response.read())
    conn.request("GET", "/v1/nothing")
    response = conn.getresponse()
    assert response.status == 404 and json.loads(response.read())["error"]["type"]
    conn.close()


def _rss_peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_100_mb_body_is_refused_without_reading_it(tiny_server) -> None:
    before = _rss_peak_kib(tiny_server.proc.pid)
    # declared: refused from the header alone
    status, headers, data = _post(tiny_server, CHAT, b"", {"Content-Length": str(100 * 2**20)})
    assert status == 413 and "larger than 4 MiB" in json.loads(data)["error"]["message"]
    assert headers.get("connection") == "close"
    # undeclared (chunked): cut off once past the bound, the rest never read
    sent = 0
    began = time.monotonic()
    with socket.create_connection((tiny_server.host, tiny_server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            % tiny_server.port
        )
        chunk = b"%x\r\n%s\r\n" % (2**20, b" " * 2**20)
        try:
            while sent < 100 * 2**20:
                sock.sendall(chunk)
                sent += 2**20
        except OSError:  # the server closed the connection: the rest was never read
            pass
        sock.settimeout(10)
        try:
            reply = sock.recv(65536)
        except OSError:
            reply = b""
    assert sent < 100 * 2**20, "the server read the whole body"
    assert not reply or reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - began < 60
    # the server kept well under the body's size and goes on serving
    assert _rss_peak_kib(tiny_server.proc.pid) - before < 40 * 1024
    _still_serving(tiny_server)


def test_a_body_that_never_finishes_is_cut_off() -> None:
    """A body that stops arriving is answered 408 at the body's deadline (2 s here; the
    server's is ``BODY_SECONDS``), through the real HTTP stack."""
    server = BareServer(concurrency=8, body_seconds=2.0)
    try:
        with socket.create_connection((server.host, server.port), timeout=60) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{" % server.port
            )
            began = time.monotonic()
            reply = sock.recv(65536)
            took = time.monotonic() - began
            while chunk := sock.recv(65536):  # the body may follow the headers in its own segment
                reply += chunk
    finally:
        server.close()
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"the request body did not arrive within 2 s" in reply
    assert 1.5 < took < 15


def test_api_key_is_required_on_every_request(chat_pair, serve_logs: Path) -> None:
    server = ServeProcess(pair_args(chat_pair, "--api-key", "s3cret-key"), serve_logs)
    try:
        with pytest.raises(openai.AuthenticationError):
            server.client(api_key="wrong").models.list()
        with pytest.raises(openai.AuthenticationError):
            server.client(api_key="s3cret-key-and-more").chat.completions.create(
                model="any", messages=GOOD["messages"], max_tokens=2
            )
        status, headers, data = _post(server, CHAT, json.dumps(GOOD).encode())
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert json.loads(data)["error"]["code"] == "invalid_api_key"
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 401
        conn.close()
        good = server.client(api_key="s3cret-key")
        assert [m.id for m in good.models.list().data] == [chat_pair[0].name]
        answer = good.chat.completions.create(model="any", messages=GOOD["messages"], max_tokens=2)
        assert answer.usage.completion_tokens == 2
    finally:
        server.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "example.invalid"])
def test_a_network_address_without_api_key_is_refused(chat_pair, host: str) -> None:
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", *pair_args(chat_pair), "--host", host],
        cwd=ROOT,
        env=app_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"refusing to serve on {host} without an API key" in result.stderr
    assert "serving" not in result.stdout
    assert time.monotonic() - began < 30


def test_a_taken_port_is_reported_before_loading(chat_pair, tiny_server) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--target", "/nonexistent.gguf"]
        + ["--port", str(tiny_server.port)],
        cwd=ROOT,
        env=app_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{tiny_server.port}" in result.stderr
