"""The window's menus, keys and chat actions: the menu bar holds the actions, Ctrl+Enter
sends, Esc stops and Ctrl+N starts a new chat, an answer stopped by the person can be
continued and leaves the baseline pane saying it was not run, and Regenerate and Copy are off
in an empty chat."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from app.store.settings import Settings
from tests.ui.conftest import load

LONG = Settings(max_tokens=3000, n_ctx=4096, temperature=0.0, seed=1, n_threads=1)


def test_the_menu_bar_holds_the_windows_actions(make_window) -> None:
    window = make_window()
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    assert list(menus) == ["File", "Edit", "View", "Pair", "Help"]

    def texts(name: str) -> set[str]:
        return {a.text().replace("&", "") for a in menus[name].actions() if not a.isSeparator()}

    assert {"New chat", "Export conversation as Markdown…", "Quit"} <= texts("File")
    assert {"Send", "Stop", "Continue", "Regenerate", "Copy answer", "Settings"} <= texts("Edit")
    assert {"Settings", "Charts", "Theme"} <= texts("View")
    assert {"Pair wizard…", "Local GGUF files…", "Demo pair", "Reload pair"} <= texts("Pair")
    assert {"Keyboard shortcuts", "About SpecDeck"} <= texts("Help")
    assert window.stop_action.shortcut() == QKeySequence("Esc")
    assert window.new_chat_action.shortcut() == QKeySequence(QKeySequence.StandardKey.New)
    assert QKeySequence("Ctrl+Return") in window.send_action.shortcuts()
    assert not window.stop_action.isEnabled()  # Esc is left alone while nothing runs


def test_ctrl_enter_sends_esc_stops_ctrl_n_starts_a_new_chat(make_window, qtbot, tiny_pair) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    box = window.chat.input
    box.setFocus()
    qtbot.keyClicks(box, "hello the model")
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as finished:
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        qtbot.keyClick(box, Qt.Key.Key_Escape)
    assert finished.args[0].cancelled
    assert window.conversation.messages[0].content == "hello the model"
    assert window.conversation.messages[-1].role == "assistant"
    qtbot.keyClick(box, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.conversation.messages == ()


def test_an_answer_stopped_by_the_person_can_be_continued(make_window, qtbot, tiny_pair) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello the model")
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as stopped:
        window.chat.input.submit()
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        window.stop()
    assert stopped.args[0].cancelled
    first = window.conversation.messages[-1]
    assert first.role == "assistant" and first.stats["stopped"] and first.content
    button = window.chat.continue_button
    assert not button.isHidden() and button.isEnabled()
    assert window.continue_action.isEnabled()
    assert "Continue writes more" in window.chat.transcript.toPlainText()
    window.settings_panel.update_settings(max_tokens=16)  # the rest, briefly
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as more:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    done = more.args[0]
    assert not done.cancelled and done.speculative.tokens > 0
    assert [m.role for m in window.conversation.messages] == ["user", "assistant"]
    message = window.conversation.messages[-1]
    assert message.content == first.content + done.speculative.text
    assert message.stats["continued"] == 1 and "stopped" not in message.stats


def test_after_stop_the_baseline_pane_says_it_was_not_run(make_window, qtbot, tiny_pair) -> None:
    window = make_window(Settings(max_tokens=3000, n_ctx=4096, temperature=0.0, n_threads=1))
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello the model")
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as blocker:
        window.chat.input.submit()
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        qtbot.mouseClick(window.chat.send, Qt.MouseButton.LeftButton)
    assert blocker.args[0].cancelled and blocker.args[0].baseline is None
    assert window.chat.base_view.text() == ""
    assert "Not run" in window.chat.base_view.placeholderText()
    assert "not run" in window.chat.base_header.text()


def test_regenerate_and_copy_are_off_in_an_empty_chat(make_window) -> None:
    window = make_window()
    assert window.conversation.messages == ()
    assert not window.chat.regenerate.isEnabled() and not window.chat.copy.isEnabled()
    assert window.chat.new_chat.isEnabled()
    # no pair loaded: Send says so (issue 20: Send reflects what is loaded)
    assert not window.chat.send.isEnabled() and "Demo pair" in window.chat.send.toolTip()
