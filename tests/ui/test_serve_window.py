"""Serve on localhost from the window: the real window, its real engine process on the tiny
pair with a chat template, uvicorn on 127.0.0.1, and the official ``openai`` client."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import openai
import pytest

from app.store.settings import Settings
from tests.conftest import CHATML
from tests.serve.conftest import openai_client
from tests.ui.conftest import ask, load

SERVE_THREAD = "specdeck-serve-http"


@pytest.fixture(scope="module")
def chat_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from app.devtools.test_models.synthetic import write_tiny_llama

    folder = tmp_path_factory.mktemp("window-serve-pair")
    target = write_tiny_llama(folder / "target.gguf", seed=1, chat_template=CHATML)
    draft = write_tiny_llama(
        folder / "draft.gguf", seed=2, noise_from=1, noise=0.15, chat_template=CHATML
    )
    return target, draft


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def settings(port: int) -> Settings:
    return Settings(
        max_tokens=40, n_ctx=4096, temperature=0.0, seed=1, n_threads=1, serve_port=port
    )


def client(port: int) -> openai.OpenAI:
    return openai_client(f"http://127.0.0.1:{port}/v1")


def serve(window, qtbot) -> None:  # noqa: ANN001
    window.serve_action.trigger()
    assert window.serve_action.isChecked()
    qtbot.waitUntil(lambda: window.serving_label.isVisible(), timeout=5_000)


def in_thread(work) -> tuple[threading.Thread, dict]:  # noqa: ANN001
    """The client off the UI thread, so the window keeps its event loop meanwhile."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = work()
        except Exception as error:  # noqa: BLE001 - the test reads it
            result["error"] = error
        result["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_the_window_serves_its_pair_counts_requests_and_stops_on_toggle_off(
    make_window, qtbot, chat_pair
) -> None:
    port = free_port()
    window = make_window(settings(port))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    label = window.serving_label
    assert label.text() == f"Serving on 127.0.0.1:{port} · 0 requests · acceptance —"

    worker, result = in_thread(
        lambda: client(port).chat.completions.create(
            model="any", messages=[{"role": "user", "content": "hello the model"}]
        )
    )
    qtbot.waitUntil(lambda: "at" in result, timeout=60_000)
    worker.join()
    assert "error" not in result, result.get("error")
    answer = result["value"]
    assert answer.choices[0].message.content
    assert answer.usage.completion_tokens == 40
    qtbot.waitUntil(lambda: " · 1 request · " in label.text(), timeout=5_000)
    timings = answer.model_extra["timings"]  # the answer's own figures, as llama-server's
    expected = f"{100 * timings['acceptance']:.0f} %" if timings["draft_n"] else "—"
    assert label.text().rsplit("acceptance ", 1)[1].startswith(expected)

    window.serve_action.trigger()  # off
    assert not window.serve_action.isChecked() and label.isHidden()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert SERVE_THREAD not in {t.name for t in threading.enumerate()}


def test_a_chat_message_sent_during_a_served_request_waits_then_answers(
    make_window, qtbot, chat_pair
) -> None:
    port = free_port()
    window = make_window(replace(settings(port), max_tokens=400, baseline=False))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    first_chunk = threading.Event()

    def stream() -> str:
        chunks = client(port).chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "hello the model"}],
            max_tokens=400,
            stream=True,
        )
        text = []
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
                first_chunk.set()
        return "".join(text)

    worker, served = in_thread(stream)
    qtbot.waitUntil(first_chunk.is_set, timeout=60_000)
    chat_started: list[float] = []
    window.client.batch.connect(lambda _batch: chat_started.append(time.monotonic()))
    with qtbot.waitSignal(window.answer_finished, timeout=120_000) as finished:
        window.chat.input.setPlainText("hello the model")
        window.chat.input.submit()
    worker.join(5)
    assert "error" not in served, served.get("error")
    assert served["value"]  # the served answer ran to its end: the chat did not cancel it
    assert chat_started and chat_started[0] >= served["at"] - 0.5  # it waited its turn
    done = finished.args[0]
    assert not done.cancelled and done.speculative is not None
    assert done.speculative.token_ids
    qtbot.waitUntil(lambda: " · 1 request · " in window.serving_label.text(), timeout=5_000)


def test_closing_the_window_while_serving_ends_the_server_within_two_seconds(
    make_window, qtbot, chat_pair
) -> None:
    port = free_port()
    window = make_window(replace(settings(port), max_tokens=3000, baseline=False))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    first_chunk = threading.Event()

    def stream() -> None:
        chunks = client(port).completions.create(
            model="any", prompt="hello the model", max_tokens=3000, stream=True
        )
        for _chunk in chunks:
            first_chunk.set()

    worker, _result = in_thread(stream)
    qtbot.waitUntil(first_chunk.is_set, timeout=60_000)
    began = time.monotonic()
    window.close()
    took = time.monotonic() - began
    assert took < 2.0, f"closing took {took:.2f} s"
    assert not window.client.running
    assert SERVE_THREAD not in {t.name for t in threading.enumerate()}
    worker.join(5)
    assert not worker.is_alive()  # the client saw its stream end
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_stopping_a_chat_message_that_waits_leaves_the_served_request_running(
    make_window, qtbot, chat_pair
) -> None:
    port = free_port()
    window = make_window(replace(settings(port), max_tokens=3000, baseline=False))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    first_chunk = threading.Event()

    def stream() -> int:
        chunks = client(port).chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "hello the model"}],
            max_tokens=3000,
            stream=True,
            stream_options={"include_usage": True},
        )
        used = 0
        for chunk in chunks:
            first_chunk.set()
            if chunk.usage is not None:
                used = chunk.usage.completion_tokens
        return used

    worker, served = in_thread(stream)
    qtbot.waitUntil(first_chunk.is_set, timeout=60_000)
    with qtbot.waitSignal(window.answer_finished, timeout=120_000) as finished:
        window.chat.input.setPlainText("hello the model")
        window.chat.input.submit()
        assert "at" not in served  # the message waits behind the served request
        window.stop()
    assert finished.args[0].cancelled
    worker.join(60)
    assert "error" not in served, served.get("error")
    assert served["value"] == 3000  # Stop ended the chat's message, not the served answer


def test_a_served_request_learns_nothing_of_the_chat_and_web_pages_are_refused(
    make_window, qtbot, chat_pair
) -> None:
    """The user's chat message fills the engine's cache; a served request that guesses it
    is answered from empty caches (no cached tokens), and a web page's requests never
    reach the engine."""
    port = free_port()
    window = make_window(replace(settings(port), max_tokens=4))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    secret = "my bank PIN is 4711, do not tell anyone"
    ask(window, qtbot, secret)

    def guess() -> dict:
        answer = client(port).chat.completions.create(
            model="any", messages=[{"role": "user", "content": secret}], max_tokens=2
        )
        return {"usage": answer.usage, "timings": answer.model_extra["timings"]}

    worker, result = in_thread(guess)
    qtbot.waitUntil(lambda: "at" in result, timeout=60_000)
    worker.join()
    assert "error" not in result, result.get("error")
    usage, timings = result["value"]["usage"], result["value"]["timings"]
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert timings["cache_n"] == 0 and timings["prompt_n"] == usage.prompt_tokens

    def from_a_web_page() -> tuple[int, int]:
        statuses = []
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        for headers in (
            {"Host": "evil.example", "Content-Type": "application/json"},
            {"Origin": "http://evil.example", "Content-Type": "application/json"},
            {"Content-Type": "text/plain"},
        ):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", "/v1/chat/completions", body, headers)
            statuses.append(conn.getresponse().status)
            conn.close()
        return tuple(statuses)

    worker, result = in_thread(from_a_web_page)
    qtbot.waitUntil(lambda: "at" in result, timeout=30_000)
    worker.join()
    assert result.get("value") == (403, 403, 415), result
    qtbot.waitUntil(lambda: " · 1 request · " in window.serving_label.text(), timeout=5_000)
