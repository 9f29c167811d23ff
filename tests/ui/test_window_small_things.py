"""Small things a new user meets: the wheel over a settings field, what answers again when a
setting is refused, the remote server's address remembered and this window's own serving
address refused, counted words."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from app.remote.chat import RemotePair
from app.store.settings import Settings, SettingsStore, with_field
from app.ui.chat_panel import ChatPanel
from app.ui.pair_chooser import RemoteServerDialog, same_server
from app.ui.settings_panel import SettingsPanel


def _wheel_down(widget) -> None:  # noqa: ANN001
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(
        centre,
        QPointF(widget.mapToGlobal(QPoint(int(centre.x()), int(centre.y())))),
        QPoint(0, 0),
        QPoint(0, -120),  # one notch down
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_the_wheel_over_a_settings_combo_scrolls_the_panel_and_changes_nothing(qtbot) -> None:  # noqa: ANN001
    panel = SettingsPanel(Settings())
    qtbot.addWidget(panel)
    panel.resize(320, 240)  # shorter than the form: the panel scrolls
    panel.show()
    qtbot.waitExposed(panel)
    applied: list[Settings] = []
    panel.changed.connect(applied.append)
    bar = panel.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum() // 2)
    panel.ensureWidgetVisible(panel.draft_mode)
    before_index, before_scroll = panel.draft_mode.currentIndex(), bar.value()
    assert not panel.draft_mode.hasFocus()
    _wheel_down(panel.draft_mode)
    assert panel.draft_mode.currentIndex() == before_index
    assert applied == []
    assert bar.value() > before_scroll  # the wheel went to the panel


def test_a_focused_settings_combo_still_takes_the_wheel(qtbot) -> None:  # noqa: ANN001
    panel = SettingsPanel(Settings())
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    panel.draft_mode.setCurrentIndex(0)
    panel.draft_mode.setFocus()
    qtbot.waitUntil(panel.draft_mode.hasFocus)
    _wheel_down(panel.draft_mode)
    assert panel.draft_mode.currentIndex() == 1
    assert panel.settings.draft_adaptive is False


def test_a_refused_setting_disables_regenerate_continue_and_measure_again_and_says_why(
    qtbot,  # noqa: ANN001
) -> None:
    chat = ChatPanel("colour", True)
    qtbot.addWidget(chat)
    chat.set_conversation_state(True, "an answer", can_continue=True)
    assert chat.regenerate.isEnabled() and chat.continue_button.isEnabled()
    chat.set_refusal("Temperature: must be a number")
    for button in (chat.regenerate, chat.continue_button, chat.remeasure):
        assert not button.isEnabled()
        assert "Temperature: must be a number" in button.toolTip()
    chat.set_refusal("")
    assert chat.regenerate.isEnabled()
    assert "Temperature" not in chat.regenerate.toolTip()


def test_the_remote_dialog_offers_the_last_server_again(qtbot) -> None:  # noqa: ANN001
    last = RemotePair("http://gpu-box:8080", "vllm", "http://gpu-box:8081")
    dialog = RemoteServerDialog(None, last)
    qtbot.addWidget(dialog)
    assert dialog.url.text() == "http://gpu-box:8080"
    assert dialog.kind.currentData() == "vllm"
    assert dialog.baseline.text() == "http://gpu-box:8081"


def test_the_remote_dialog_refuses_the_windows_own_serving_address_in_words(qtbot) -> None:  # noqa: ANN001
    dialog = RemoteServerDialog(None, None, "http://127.0.0.1:8080/v1")
    qtbot.addWidget(dialog)
    for typed in ("http://127.0.0.1:8080", "http://localhost:8080/", "http://[::1]:8080"):
        dialog.url.setText(typed)
        dialog.accept()
        assert dialog.pair is None and dialog.result() == 0
        assert "own serving address" in dialog.message.text()
    dialog.url.setText("http://127.0.0.1:8081")
    dialog.accept()
    assert dialog.pair is not None and dialog.pair.url == "http://127.0.0.1:8081"


def test_same_server_compares_ports_and_loopback_names() -> None:
    assert same_server("http://localhost:8080", "http://127.0.0.1:8080/v1")
    assert same_server("http://127.0.0.2:80", "http://localhost")
    assert not same_server("http://127.0.0.1:8081", "http://127.0.0.1:8080/v1")
    assert not same_server("http://gpu-box:8080", "http://127.0.0.1:8080/v1")
    assert not same_server("http://127.0.0.1:8080", "")
    assert not same_server("http://127.0.0.1:99999", "http://127.0.0.1:8080")


def test_the_last_remote_server_is_kept_in_the_settings_file(tmp_path) -> None:  # noqa: ANN001
    store = SettingsStore(tmp_path)
    settings = with_field(Settings(), "remote_url", "http://gpu-box:8080")
    store.save(settings)
    assert SettingsStore(tmp_path).load().remote_url == "http://gpu-box:8080"


def test_a_remote_address_with_control_characters_is_refused_from_the_settings_file(
    tmp_path,  # noqa: ANN001
) -> None:
    (tmp_path / "settings.json").write_text('{"version": 2, "remote_url": "http://a\\u0007b"}')
    store = SettingsStore(tmp_path)
    assert store.load().remote_url == ""
    assert any("address" in note for note in store.notes)


def test_regenerate_with_a_refused_setting_keeps_the_answer_and_says_why(
    make_window,  # noqa: ANN001
    qtbot,  # noqa: ANN001
    tiny_pair,  # noqa: ANN001
) -> None:
    from dataclasses import replace

    from tests.ui.conftest import ask, load
    from tests.ui.test_ui_window import FAST

    window = make_window(replace(FAST, baseline=False))
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    before = window.conversation.messages
    field = window.settings_panel.fields["temperature"].edit
    field.setText("hot")
    window.settings_panel.flush_pending()
    assert not window.chat.regenerate.isEnabled() and not window.regenerate_action.isEnabled()
    window.regenerate()  # as Ctrl+R would, were the action still on
    assert window.conversation.messages == before  # the answer is kept, nothing runs
    assert not window.client.generating
    assert "Temperature" in window.chat.error_banner.text()


def test_a_message_typed_but_not_sent_is_there_again_after_a_restart(make_window) -> None:  # noqa: ANN001
    window = make_window(autoload=False)
    window.chat.input.setPlainText("half a question, with a ü and\nsecond line")
    window.close()
    again = make_window(autoload=False)
    assert again.chat.input.toPlainText() == "half a question, with a ü and\nsecond line"
    again.chat.input.clear()
    again.close()
    assert make_window(autoload=False).chat.input.toPlainText() == ""


def test_a_fifo_in_place_of_the_unsent_message_is_not_read_and_the_window_starts(
    make_window,  # noqa: ANN001
) -> None:
    import os

    from app.store.settings import SettingsStore
    from app.store.unsent import UNSENT_FILE

    directory = SettingsStore().directory
    directory.mkdir(parents=True, exist_ok=True)
    os.mkfifo(directory / UNSENT_FILE)
    window = make_window(autoload=False)  # would hang here were the FIFO opened to be read
    assert window.chat.input.toPlainText() == ""
    assert "not a regular file" in window.chat.notes_banner.text()
    window.chat.input.setPlainText("kept after all")
    window.close()
    assert (directory / UNSENT_FILE).read_text() == "kept after all"
