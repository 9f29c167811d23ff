"""What clients do to a server: many at once, and leaving mid-answer."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.request
from pathlib import Path

import openai
import psutil
import pytest

from tests.conftest import wait_for
from tests.serve.conftest import ServeProcess, pair_args

pytestmark = pytest.mark.timeout(300)

CLIENTS = 8


def _health(server: ServeProcess) -> dict:
    with urllib.request.urlopen(f"http://{server.host}:{server.port}/health", timeout=10) as r:
        return json.loads(r.read())


def _ask_all(server: ServeProcess, max_tokens: int) -> list[tuple[int, object]]:
    """Eight clients at once, each with its own prompt; (client, answer text or error)."""
    start = threading.Barrier(CLIENTS)
    results: list[tuple[int, object]] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        client = server.client()
        start.wait()
        try:
            answer = client.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": f"client {i} asks about the data"}],
                temperature=0,
                max_tokens=max_tokens,
            )
            outcome: object = answer.choices[0].message.content
        except openai.APIStatusError as error:
            outcome = error
        with lock:
            results.append((i, outcome))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert not any(t.is_alive() for t in threads), "a client never got an answer"
    return sorted(results, key=lambda r: r[0])


def _alone(server: ServeProcess, i: int, max_tokens: int) -> str:
    return (
        server.client()
        .chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": f"client {i} asks about the data"}],
            temperature=0,
            max_tokens=max_tokens,
        )
        .choices[0]
        .message.content
    )


def test_eight_clients_are_all_answered_in_turn(tiny_server: ServeProcess) -> None:
    before = _health(tiny_server)["served"]
    results = _ask_all(tiny_server, 40)
    assert len(results) == CLIENTS and all(isinstance(text, str) for _, text in results)
    # each client got its own answer, the same as when it asks alone
    for i, text in results[:3]:
        assert text == _alone(tiny_server, i, 40)
    assert len({text for _, text in results}) > 1
    assert _health(tiny_server)["served"] == before + CLIENTS + 3


def test_a_full_queue_answers_429_and_loses_no_one(chat_pair, serve_logs: Path) -> None:
    server = ServeProcess(
        pair_args(chat_pair, "--ignore-eos", "--queue", "2", "--ctx", "4096"), serve_logs
    )
    try:
        results = _ask_all(server, 1500)  # long answers: the queue fills while one runs
        answered = [(i, r) for i, r in results if isinstance(r, str)]
        refused = [r for _, r in results if not isinstance(r, str)]
        assert len(answered) + len(refused) == CLIENTS
        assert len(answered) >= 3 and refused, (len(answered), refused)
        for error in refused:
            assert isinstance(error, openai.RateLimitError)
            assert error.response.headers["retry-after"] == "1"
            assert error.body["code"] == "queue_full"
        i, text = answered[0]
        assert text == _alone(server, i, 1500)
        health = _health(server)
        assert health["refused"] == len(refused)
        assert health["served"] == len(answered) + 1
    finally:
        server.close()


def test_a_client_leaving_mid_stream_stops_the_answer(tiny_server: ServeProcess) -> None:
    client = tiny_server.client()
    base = _health(tiny_server)
    stream = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": "a long answer please"}],
        max_tokens=100_000,  # until the context is full: many seconds on one thread
        stream=True,
    )
    pieces = 0
    for chunk in stream:
        pieces += bool(chunk.choices and chunk.choices[0].delta.content)
        if pieces >= 3:
            break
    assert _health(tiny_server)["running"]
    left = time.monotonic()
    stream.close()
    stopped = wait_for(lambda: not _health(tiny_server)["running"], timeout=5.0)
    after = _health(tiny_server)
    assert after["cancelled"] == base["cancelled"] + 1
    assert after["served"] == base["served"]
    # the next request is served at once
    began = time.monotonic()
    quick = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "next"}], max_tokens=8
    )
    assert quick.usage.completion_tokens == 8
    assert time.monotonic() - began < 5.0
    print(f"engine stopped {stopped * 1000:.0f} ms after the client left ({left:.0f})")
    assert stopped < 1.0


def test_a_client_leaving_before_a_whole_answer_stops_it_too(tiny_server: ServeProcess) -> None:
    base = _health(tiny_server)
    body = json.dumps(
        {"model": "any", "messages": [{"role": "user", "content": "go on"}], "max_tokens": 100000}
    ).encode()
    with socket.create_connection((tiny_server.host, tiny_server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
            + f"Host: 127.0.0.1:{tiny_server.port}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        wait_for(lambda: _health(tiny_server)["running"], timeout=5.0)
    stopped = wait_for(lambda: not _health(tiny_server)["running"], timeout=5.0)
    assert stopped < 1.0
    after = _health(tiny_server)
    assert after["cancelled"] == base["cancelled"] + 1 and after["served"] == base["served"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_ctrl_c_or_sigterm_right_after_the_serving_line_stops_the_server_and_its_engine(
    chat_pair, serve_logs: Path, sig: int
) -> None:
    server = ServeProcess(pair_args(chat_pair), serve_logs)
    children = psutil.Process(server.proc.pid).children(recursive=True)
    assert children, "the engine runs in a child process"
    # at once, as the line appears: before uvicorn's own handlers a SIGINT used to be lost
    code = server.stop(sig=sig)
    server.close()
    assert code == 0, server.stderr()
    # the engine process (and multiprocessing's helper) end with it, not left behind
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [c.cmdline() for c in alive]
