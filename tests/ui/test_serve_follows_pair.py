"""Serving from the window follows the window's pair (issue 33 §1): the served name is the
loaded pair's after a pair change, a switch to a remote server stops serving and says so,
and a chat message queued behind a served request says what it waits for. The real window,
its real engine process on tiny GGUFs, uvicorn on 127.0.0.1 and real HTTP clients."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from app.remote.chat import RemotePair
from app.serve.ledger import Activity
from app.ui.chat_panel import FIRST_TOKEN
from app.ui.serving import STOPPED_NO_PAIR, STOPPED_REMOTE, waiting_words
from app.ui.token_view import TokenView
from tests.conftest import CHATML
from tests.serve.conftest import ServeProcess, pair_args
from tests.ui.conftest import load
from tests.ui.test_serve_window import chat_pair, client, free_port, in_thread, serve, settings

__all__ = ["chat_pair"]  # the module fixture, shared with the window's serving tests


@pytest.fixture(scope="module")
def other_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.devtools.test_models.synthetic import write_tiny_llama

    folder = tmp_path_factory.mktemp("window-serve-other")
    return write_tiny_llama(folder / "other-target.gguf", seed=3, chat_template=CHATML)


def served_models(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as answer:
        return [entry["id"] for entry in json.loads(answer.read())["data"]]


def status_messages(window) -> list[str]:  # noqa: ANN001
    shown: list[str] = []
    window.statusBar().messageChanged.connect(lambda text: shown.append(text))
    return shown


def test_the_served_name_follows_a_pair_change_while_serving(
    make_window, qtbot, chat_pair, other_target
) -> None:
    port = free_port()
    window = make_window(settings(port))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    assert served_models(port) == ["target.gguf"]

    load(window, qtbot, other_target, None)  # as the wizard loads another pair
    assert window.serve_action.isChecked() and window.serving_label.isVisible()
    assert window.statusBar().currentMessage() == "Serving now answers with other-target.gguf"
    assert served_models(port) == ["other-target.gguf"]  # as found: still target.gguf
    worker, result = in_thread(
        lambda: client(port).chat.completions.create(
            model="any", messages=[{"role": "user", "content": "hello the model"}], max_tokens=8
        )
    )
    qtbot.waitUntil(lambda: "at" in result, timeout=60_000)
    worker.join()
    assert "error" not in result, result.get("error")
    assert result["value"].model == "other-target.gguf"
    assert result["value"].choices[0].message.content


def test_switching_to_a_remote_server_stops_serving_and_says_so(
    make_window, qtbot, chat_pair, tmp_path
) -> None:
    port = free_port()
    window = make_window(settings(port))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    remote = ServeProcess(pair_args(chat_pair), tmp_path / "logs")  # a real second server
    try:
        shown = status_messages(window)
        with qtbot.waitSignal(window.pair_loaded, timeout=30_000):
            window.load_remote(RemotePair(f"http://{remote.host}:{remote.port}", "openai"))
    finally:
        remote.close()
    # as found: "Serving on 127.0.0.1:8080" stayed, and every request got no_pair
    assert not window.serve_action.isChecked() and window.serving_label.isHidden()
    assert any(text.startswith(STOPPED_REMOTE) for text in shown), shown
    assert window.statusBar().currentMessage().startswith(STOPPED_REMOTE)  # the last word
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    window.serve_action.trigger()  # serving a remote server is refused in words
    assert not window.serve_action.isChecked()
    assert window.statusBar().currentMessage().startswith("Not serving: Load a local pair")


def test_a_chat_message_behind_a_served_request_says_what_it_waits_for(
    make_window, qtbot, chat_pair
) -> None:
    port = free_port()
    window = make_window(replace(settings(port), max_tokens=16, baseline=False))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    first_chunk, enough = threading.Event(), threading.Event()

    def stream() -> None:
        chunks = client(port).completions.create(
            model="any", prompt="hello the model", max_tokens=3000, stream=True
        )
        for _chunk in chunks:
            first_chunk.set()
            if enough.is_set():  # the client goes away: its request ends, the chat's turn
                chunks.close()
                return

    worker, served = in_thread(stream)
    qtbot.waitUntil(first_chunk.is_set, timeout=60_000)
    notes: list[str] = []
    with qtbot.waitSignal(window.answer_finished, timeout=120_000) as finished:
        window.chat.input.setPlainText("hello the model")
        window.chat.input.submit()
        pane = window.chat.spec_view

        def waiting_shown() -> bool:
            notes.append(pane.placeholderText())
            return notes[-1].startswith("Serving a request from another program (")

        qtbot.waitUntil(waiting_shown, timeout=10_000)
        assert notes[-1].endswith(" s) — your message is next"), notes[-1]
        transcript = window.chat.transcript  # and under the pending message
        qtbot.waitUntil(lambda: "— your message is next" in transcript.toPlainText(), timeout=5_000)
        label = window.serving_label
        qtbot.waitUntil(lambda: " · answering a request (" in label.text(), timeout=5_000)
        assert not finished.signal_triggered  # all this while, the message waited
        enough.set()
    worker.join(60)
    assert "error" not in served, served.get("error")
    assert not finished.args[0].cancelled
    assert pane.placeholderText() == FIRST_TOKEN  # its turn came: the words went
    assert "Serving a request" not in transcript.toPlainText()


def test_the_waiting_words() -> None:
    assert waiting_words(Activity(None, 0)) == ""
    assert waiting_words(Activity(12.3, 0)) == (
        "Serving a request from another program (12 s) — your message is next"
    )
    assert waiting_words(Activity(3.0, 2)) == (
        "Serving a request from another program (3 s) — then 2 requests from other "
        "programs, then your message"
    )
    assert waiting_words(Activity(None, 1)) == (
        "Waiting for 1 request from other programs — your message is next"
    )


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


@pytest.mark.fast
def test_a_new_placeholder_over_an_empty_pane_is_painted(qtbot) -> None:  # noqa: ANN001
    view = TokenView()
    qtbot.addWidget(view)
    view.resize(300, 120)
    view.show()
    qtbot.waitExposed(view)
    view.setPlaceholderText("Serving a request from another program (2 s)")
    QApplication.processEvents()
    paints = _Paints()
    view.viewport().installEventFilter(paints)
    view.setPlaceholderText("Serving a request from another program (8 s)")
    qtbot.waitUntil(lambda: paints.count > 0, timeout=2000)
    view.viewport().removeEventFilter(paints)


def test_a_pair_that_is_gone_stops_serving_and_says_so(make_window, qtbot, chat_pair) -> None:
    """A failed load that could not bring the old pair back leaves no pair (the window's
    ``_on_error`` with ``unloaded``): the server stops instead of answering ``no_pair``."""
    port = free_port()
    window = make_window(settings(port))
    load(window, qtbot, *chat_pair)
    serve(window, qtbot)
    window.serving.pair_changed(None)
    assert not window.serve_action.isChecked() and window.serving_label.isHidden()
    assert window.statusBar().currentMessage() == STOPPED_NO_PAIR
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
