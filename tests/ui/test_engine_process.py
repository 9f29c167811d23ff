"""The engine runs in a child process: a native crash never takes the window down.

Real child processes, real llama.cpp, real Qt widgets: the child is killed with SIGKILL mid
answer, a GGUF that aborts llama.cpp is loaded, and a chat template that never finishes
rendering is tried. The window must survive each, say what happened and keep working.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.config import DraftSource
from app.engine.process import host as engine_host
from app.store.conversations import ConversationStore
from app.store.settings import Settings
from tests.crash_ggufs import write_bert_tokenizer_llama, write_hung_template_llama
from tests.ui.conftest import ask, load

LONG = Settings(max_tokens=3000, n_ctx=4096, temperature=0.0, seed=1, n_threads=1)
SHORT = Settings(max_tokens=24, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_killed_engine_mid_answer_keeps_window_text_and_reloads(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    engine_pid = window.client.engine_pid
    assert engine_pid is not None and engine_pid != os.getpid()

    window.chat.input.setPlainText("hello the model")
    with (
        qtbot.waitSignal(window.answer_finished, timeout=60_000) as finished,
        qtbot.waitSignal(window.failed, timeout=60_000) as failed,
    ):
        window.chat.input.submit()
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        window.chat.input.setPlainText("a question typed while it streams")
        os.kill(engine_pid, signal.SIGKILL)
    error = failed.args[0]
    assert error.title == "The engine crashed" and error.can_reload
    assert "generating" in error.message and "killed (out of memory?)" in error.message
    assert "target.gguf" in error.message
    assert finished.args[0].cancelled

    # the window, the conversation and the typed text survive
    assert window.isVisible()
    assert window.chat.input.toPlainText() == "a question typed while it streams"
    # what streamed before the crash is kept as an interrupted answer, on screen and on disk
    messages = window.conversation.messages
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].content == "hello the model"
    assert messages[1].content and messages[1].stats["interrupted"] is True
    assert "spec_tok_s" not in messages[1].stats
    assert "cut off: the engine stopped" in window.chat.transcript.toPlainText()
    stored = ConversationStore().load(window.conversation.id)
    assert [m.content for m in stored.messages] == [m.content for m in messages]
    assert "engine crashed" in window.chat.error_banner.label.text().lower()
    assert window.reload_button.isVisible()

    # sending before the reload keeps the text and points at Reload pair
    window.chat.input.submit()
    assert "Reload pair" in window.chat.error_banner.label.text()
    assert window.chat.input.toPlainText() == "a question typed while it streams"

    with qtbot.waitSignal(window.pair_loaded, timeout=60_000):
        qtbot.mouseClick(window.reload_button, Qt.MouseButton.LeftButton)
    assert not window.reload_button.isVisible()
    assert window.client.engine_pid not in (None, engine_pid)
    window.settings_panel.update_settings(max_tokens=24)
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as blocker:
        window.chat.input.submit()
    done = blocker.args[0]
    assert not done.cancelled and done.speculative.tokens > 0
    contents = [m.content for m in window.conversation.messages]
    assert contents[0] == "hello the model" and contents[2] == "a question typed while it streams"
    assert window.conversation.messages[-1].role == "assistant"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_engine_killed_during_the_baseline_keeps_the_finished_answer_and_its_figures(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(replace(LONG, baseline=True))
    load(window, qtbot, *tiny_pair)
    engine_pid = window.client.engine_pid
    window.chat.input.setPlainText("hello the model")
    with (
        qtbot.waitSignal(window.answer_finished, timeout=120_000) as finished,
        qtbot.waitSignal(window.failed, timeout=120_000),
    ):
        window.chat.input.submit()
        qtbot.waitUntil(
            lambda: window.status["speed"].text().startswith("baseline"), timeout=120_000
        )
        os.kill(engine_pid, signal.SIGKILL)
    done = finished.args[0]
    assert done.cancelled and done.speculative is not None and done.baseline is None
    answer = window.conversation.messages[-1]
    assert answer.role == "assistant" and answer.content == done.speculative.text
    assert answer.stats["tokens"] == done.speculative.tokens  # the full figures, not a stub
    assert answer.stats["spec_tok_s"] == round(done.speculative.tok_s, 2)
    assert "interrupted" not in answer.stats
    stored = ConversationStore().load(window.conversation.id)
    assert stored.messages[-1].content == done.speculative.text


def test_gguf_that_aborts_llama_cpp_is_a_load_error_naming_the_file(
    make_window, qtbot, tiny_pair, tmp_path: Path
) -> None:
    from app.gguf.check import validate_gguf_file

    bad = write_bert_tokenizer_llama(tmp_path / "bert-vocab.gguf")
    validate_gguf_file(bad)  # the header checks cannot see it
    window = make_window(SHORT)
    with qtbot.waitSignal(window.failed, timeout=60_000) as blocker:
        window.load_pair(str(bad), None, DraftSource.NGRAM)
    error = blocker.args[0]
    assert error.title == "Model crashed llama.cpp" and not error.can_reload
    assert "bert-vocab.gguf" in error.message and "crashed" in error.message
    assert "SIGABRT" in error.message or os.name == "nt"
    assert "Change pair" in error.message
    assert window.isVisible() and window.pair_bar.busy.isHidden()

    load(window, qtbot, *tiny_pair)  # the next pair loads and answers
    assert ask(window, qtbot, "hello").speculative.tokens > 0


def test_hung_chat_template_is_reported_and_falls_back_to_plain(
    make_window, qtbot, tiny_pair, tmp_path: Path
) -> None:
    target = write_hung_template_llama(tmp_path / "hung-template.gguf")
    window = make_window(SHORT)
    load(window, qtbot, target, tiny_pair[1])
    with (
        qtbot.waitSignal(window.answer_finished, timeout=90_000) as finished,
        qtbot.waitSignal(window.failed, timeout=90_000) as failed,
    ):
        window.chat.input.setPlainText("hello the model")
        window.chat.input.submit()
    error = failed.args[0]
    assert error.title == "Broken chat template"
    assert "broken chat template in hung-template.gguf" in error.message
    assert "plain chat format" in error.message
    done = finished.args[0]
    assert not done.cancelled and done.speculative.tokens > 0  # answered in the plain format
    # the next message goes straight through with the plain format, no new warning
    assert ask(window, qtbot, "and again").speculative.tokens > 0


def test_loading_shows_a_percentage_and_can_be_cancelled(
    make_window, qtbot, tiny_pair, monkeypatch
) -> None:
    window = make_window(SHORT)
    progress: list[float] = []
    window.client.busy.connect(
        lambda busy: progress.append(busy.progress) if busy.progress is not None else None
    )
    load(window, qtbot, *tiny_pair)
    engine_pid = window.client.engine_pid
    assert progress[0] == 0.0 and progress[-1] == 1.0
    assert any(0.0 < p < 1.0 for p in progress)  # llama.cpp's own progress, not a spinner
    assert progress == sorted(progress)

    # the tiny pair loads in the engine process faster than a busy machine lets this thread
    # reach the click (once in a CI run the load had finished first): its request goes out
    # once Cancel was clicked, as a real pair's load is still running then
    clicked = threading.Event()
    send_load = engine_host.EngineHost.load

    def load_after_the_click(host, request, on_progress=None):  # noqa: ANN001, ANN202
        clicked.wait(10)
        return send_load(host, request, on_progress)

    monkeypatch.setattr(engine_host.EngineHost, "load", load_after_the_click)
    with qtbot.waitSignal(window.failed, timeout=30_000) as blocker:
        window.load_pair(str(tiny_pair[0]), str(tiny_pair[1]), DraftSource.MODEL)
        window._set_loading("Loading…", 0.0)  # what the first progress message shows
        assert window.cancel_load_button.isVisible()
        assert window.pair_bar.busy.maximum() == 100 and window.pair_bar.busy.isTextVisible()
        qtbot.mouseClick(window.cancel_load_button, Qt.MouseButton.LeftButton)
        clicked.set()
    assert "was cancelled" in blocker.args[0].message
    assert window.pair_bar.busy.isHidden() and not window.cancel_load_button.isVisible()
    load(window, qtbot, *tiny_pair)  # a later load is not cancelled by the old request
    assert window.client.engine_pid == engine_pid  # the same process swapped its pair


@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_a_stop_the_engine_ignores_ends_the_engine_process(
    make_window, qtbot, tiny_pair, monkeypatch
) -> None:
    monkeypatch.setattr(engine_host, "STOP_GRACE_SECONDS", 0.5)  # the real grace is 10 s
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    engine_pid = window.client.engine_pid
    window.chat.input.setPlainText("hello the model")
    window.chat.input.submit()
    qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
    os.kill(engine_pid, signal.SIGSTOP)  # stuck as if inside a native call: Stop cannot reach it
    with (
        qtbot.waitSignal(window.answer_finished, timeout=30_000),
        qtbot.waitSignal(window.failed, timeout=30_000) as failed,
    ):
        qtbot.mouseClick(window.chat.send, Qt.MouseButton.LeftButton)  # Stop
    error = failed.args[0]
    assert error.title == "The engine was stopped" and error.can_reload
    assert "did not respond to Stop" in error.message
    assert window.chat.send.text() == "Send" and window.reload_button.isVisible()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_a_load_the_engine_ignores_is_ended_by_cancel_and_another_pair_loads(
    make_window, qtbot, tiny_pair, monkeypatch
) -> None:
    """An engine process stopped mid-load (SIGSTOP: as if stuck in llama.cpp's loader) does
    not hold the window: Cancel ends it after the grace, and so does choosing another pair."""
    monkeypatch.setattr(engine_host, "STOP_GRACE_SECONDS", 1.0)  # the real grace is 10 s
    target, draft = (str(path) for path in tiny_pair)
    window = make_window(SHORT)
    load(window, qtbot, *tiny_pair)
    stuck = window.client.engine_pid
    assert stuck is not None
    os.kill(stuck, signal.SIGSTOP)
    with qtbot.waitSignal(window.failed, timeout=20_000) as failed:
        window.load_pair(target, draft, DraftSource.MODEL)
        qtbot.waitUntil(window.cancel_load_button.isVisible, timeout=10_000)
        qtbot.mouseClick(window.cancel_load_button, Qt.MouseButton.LeftButton)
    error = failed.args[0]
    assert error.title == "The engine was stopped" and not error.can_reload
    assert "did not respond to Cancel within 1 s while loading target.gguf" in error.message
    assert "Load the pair again" in error.message
    assert window.pair_bar.busy.isHidden() and not window.cancel_load_button.isVisible()
    load(window, qtbot, *tiny_pair)  # a fresh engine process
    assert window.client.engine_pid not in (None, stuck)

    stuck = window.client.engine_pid
    os.kill(stuck, signal.SIGSTOP)
    with qtbot.waitSignal(window.pair_loaded, timeout=30_000) as loaded:
        window.load_pair(target, draft, DraftSource.MODEL)  # stuck
        window.load_pair(target, None, DraftSource.NGRAM)  # supersedes it
    assert loaded.args[0].pair.draft_path is None
    assert window.client.engine_pid not in (None, stuck)
    assert ask(window, qtbot, "hello").speculative.tokens > 0
