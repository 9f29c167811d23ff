"""What a web page in the user's browser, or another caller, can learn from the server:
foreign ``Host`` and ``Origin`` headers, bodies that are not JSON, and the prompt cache's
figures across callers. Raw HTTP over 127.0.0.1 to real servers."""

from __future__ import annotations

import http.client
import json

import pytest

from tests.serve.conftest import BareServer, ServeProcess

pytestmark = pytest.mark.timeout(180)

CHAT = "/v1/chat/completions"


def _call(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    conn: http.client.HTTPConnection | None = None,
    **headers: str | None,
) -> tuple[int, dict]:
    """(status, JSON body); ``Host`` and ``Content-Type`` are the usual unless given (None:
    not sent)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        names = {k.lower().replace("_", "-") for k in headers}
        conn.putrequest(method, path, skip_host="host" in names)
        if body is not None and "content-type" not in names:
            conn.putheader("Content-Type", "application/json")
        for name, value in headers.items():
            if value is not None:
                conn.putheader(name.replace("_", "-"), value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        if own:
            conn.close()


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost", "127.0.0.1.nip.io:{port}"],
)
def test_a_host_that_is_not_this_server_is_refused(bare_server: BareServer, host: str) -> None:
    port = bare_server.port
    for method, path in (("GET", "/v1/models"), ("GET", "/health")):
        status, body = _call(port, method, path, Host=host.format(port=port))
        assert status == 403 and body["error"]["code"] == "host_not_allowed", body
        assert f"127.0.0.1:{port}" in body["error"]["message"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_the_loopback_names_with_the_port_are_answered(bare_server: BareServer, host: str) -> None:
    port = bare_server.port
    status, _ = _call(port, "GET", "/v1/models", Host=host.format(port=port).upper())
    assert status == 200


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "https://127.0.0.1:{port}", "http://localhost:1"]
)
def test_a_request_from_another_web_origin_is_refused(bare_server: BareServer, origin) -> None:
    port = bare_server.port
    status, body = _call(port, "POST", CHAT, b"{", Origin=origin.format(port=port))
    assert status == 403 and body["error"]["code"] == "origin_not_allowed", body
    status, body = _call(port, "GET", "/v1/models", Origin=origin.format(port=port))
    assert status == 403
    # the server's own origin is no stranger (the body is then read, and is not JSON)
    status, body = _call(port, "POST", CHAT, b"{", Origin=f"http://127.0.0.1:{port}")
    assert status == 400 and "not valid JSON" in body["error"]["message"]


@pytest.mark.parametrize(
    "kind",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_a_body_that_is_not_sent_as_json_gets_415(bare_server: BareServer, kind) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    status, reply = _call(bare_server.port, "POST", CHAT, body, Content_Type=kind)
    assert status == 415, reply
    message = reply["error"]["message"]
    assert "application/json" in message and (kind or "missing") in message
    assert reply["error"]["code"] == "unsupported_media_type"
    assert not bare_server.engine.tickets
    status, reply = _call(
        bare_server.port, "POST", CHAT, b"{", Content_Type="Application/JSON; charset=utf-8"
    )
    assert status == 400  # accepted as JSON, then read


def test_the_whole_hostile_request_of_the_issue_is_refused(tiny_server: ServeProcess) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    headers = {"Origin": "http://evil.example", "Host": "evil.example"}
    status, reply = _call(
        tiny_server.port, "POST", CHAT, body, **headers, Content_Type="text/plain"
    )
    assert status == 403, reply
    # the openai client (Host 127.0.0.1:PORT, application/json, no Origin) is answered
    answer = tiny_server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert answer.usage.completion_tokens == 2


def _ask(
    port: int, text: str, conn: http.client.HTTPConnection | None = None, **extra: object
) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 1}
    body.update(extra)
    status, reply = _call(port, "POST", CHAT, json.dumps(body).encode(), conn=conn)
    assert status == 200, reply
    return reply


def test_one_caller_learns_nothing_of_another_callers_prompt_from_the_cache(
    tiny_server: ServeProcess,
) -> None:
    """A victim's prompt holds a PIN; another caller (another connection) sends guesses.
    Before, the cached count grew with each right digit; now no guess reuses anything (the
    engine read each whole prompt, so its time says nothing either)."""
    port = tiny_server.port
    secret = "Remember this: the PIN is 4711 and nobody else may know it."
    for guess in ("1234", "4799", "4711"):
        _ask(port, secret)  # the victim
        reply = _ask(port, secret.replace("4711", guess))
        usage, timings = reply["usage"], reply["timings"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0, guess
        assert timings["cache_n"] == 0 and timings["prompt_n"] == usage["prompt_tokens"]


def test_a_caller_keeps_its_own_cached_prefix_on_its_connection(tiny_server: ServeProcess) -> None:
    port = tiny_server.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        first = _ask(port, "a conversation of my own, which goes on", conn)
        second = _ask(port, "a conversation of my own, which goes on and on", conn)
    finally:
        conn.close()
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < second["usage"]["prompt_tokens"]
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # a new connection is another caller, though it sends the same words
    again = _ask(port, "a conversation of my own, which goes on and on")
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def _cached(reply: dict) -> int:
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_requests_with_the_same_prompt_cache_key_share_their_prefix(
    tiny_server: ServeProcess,
) -> None:
    port = tiny_server.port
    key = "conversation-7f3a9c2e41d8b6aa"
    text = "a long conversation of mine that goes on"
    _ask(port, text, prompt_cache_key=key)
    assert _cached(_ask(port, text + " and on", prompt_cache_key=key)) > 0  # a new connection
    _ask(port, text, prompt_cache_key=key)
    assert _cached(_ask(port, text + " and on", prompt_cache_key=key.upper())) == 0
    _ask(port, text, prompt_cache_key=key)
    assert _cached(_ask(port, text + " and on")) == 0  # no key: another caller
    # a key short enough to guess names no one: each connection is its own caller
    _ask(port, text, prompt_cache_key="chat")
    assert _cached(_ask(port, text + " and on", prompt_cache_key="chat")) == 0
    body = {"messages": [{"role": "user", "content": "x"}], "prompt_cache_key": 5}
    status, reply = _call(port, "POST", CHAT, json.dumps(body).encode())
    assert status == 400 and reply["error"]["param"] == "prompt_cache_key", reply
