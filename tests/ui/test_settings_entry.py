"""Settings typed into the window: a refused value says why as it is typed and blocks Send
with the reason, a value that will probably hurt is accepted with a warning, a decimal comma
is read where the locale writes one, and weight repacking is a choice box."""

from __future__ import annotations

from PySide6.QtCore import QLocale, Qt
from PySide6.QtWidgets import QComboBox

from app.engine.config import default_threads
from app.store.settings import Settings, SettingsStore
from tests.ui.conftest import load

FAST = Settings(max_tokens=48, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


def type_into(qtbot, editor, text: str) -> None:  # noqa: ANN001
    editor.edit.clear()
    qtbot.keyClicks(editor.edit, text)
    qtbot.keyClick(editor.edit, Qt.Key.Key_Return)


def test_refused_setting_blocks_send_with_the_reason(make_window, qtbot, tiny_pair) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    field = window.settings_panel.fields["temperature"]
    field.edit.clear()
    qtbot.keyClicks(field.edit, "hot")
    assert not window.chat.send.isEnabled()
    reason = window.chat.send.toolTip()
    assert "Temperature" in reason and "not a number" in reason
    window.chat.input.setPlainText("hello")
    window.send("hello")  # Enter in the prompt box reaches the same check
    assert window.conversation.messages == () and not window.client.generating
    assert "not a number" in window.chat.error_banner.label.text()
    field.edit.clear()
    qtbot.keyClicks(field.edit, "0")
    assert window.chat.send.isEnabled() and window.chat.send.toolTip() == ""


def test_a_context_smaller_than_max_tokens_is_refused_as_typed(make_window, qtbot) -> None:
    window = make_window(Settings(max_tokens=3000, n_ctx=4096))
    context = window.settings_panel.fields["n_ctx"]
    type_into(qtbot, context, "2048")
    assert "Max tokens (3000)" in (context.error() or ""), context.error()
    assert window.settings.n_ctx == 4096 and SettingsStore().load().n_ctx == 4096
    assert "Context size" in window.settings_panel.refusal()
    type_into(qtbot, window.settings_panel.fields["max_tokens"], "1000")
    type_into(qtbot, context, "2048")
    assert context.error() is None and window.settings.n_ctx == 2048


def test_more_threads_than_cores_are_accepted_with_a_warning(make_window, qtbot) -> None:
    window = make_window()
    cores = default_threads()
    field = window.settings_panel.fields["n_threads"]
    type_into(qtbot, field, str(cores * 32))
    assert field.error() is None and window.settings.n_threads == cores * 32
    assert field.warning.isVisible() and f"{cores} cores" in field.warning.text()
    assert window.settings_panel.refusal() == ""  # a warning does not block Send
    type_into(qtbot, field, "1")
    assert field.warning.isHidden() and window.settings.n_threads == 1
    again = make_window()  # loaded settings say it too
    assert again.settings_panel.fields["n_threads"].warning.isHidden()


def test_a_decimal_comma_is_read_where_the_locale_writes_it(make_window, qtbot) -> None:
    previous = QLocale()
    QLocale.setDefault(QLocale(QLocale.Language.German, QLocale.Country.Germany))
    try:
        window = make_window()
        field = window.settings_panel.fields["temperature"]
        type_into(qtbot, field, "0,7")
        assert field.error() is None and window.settings.temperature == 0.7
        type_into(qtbot, field, "0.5")  # the dot is still understood
        assert window.settings.temperature == 0.5
        type_into(qtbot, window.settings_panel.fields["top_p"], "0,9")
        assert window.settings.top_p == 0.9 and SettingsStore().load().top_p == 0.9
    finally:
        QLocale.setDefault(previous)


def test_weight_repacking_is_a_choice_box(make_window) -> None:
    window = make_window(Settings(weight_repacking="on"))
    panel = window.settings_panel
    assert "weight_repacking" not in panel.fields
    box = panel.findChild(QComboBox, "weight_repacking")
    assert box is not None
    assert [box.itemData(i) for i in range(box.count())] == ["auto", "on", "off"]
    assert box.currentData() == "on"
    box.setCurrentIndex(box.findData("off"))
    assert window.settings.weight_repacking == "off"
    assert SettingsStore().load().weight_repacking == "off"
