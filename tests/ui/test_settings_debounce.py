"""Debounced settings input: applied when typing pauses, flushed before Send and on close."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer

from app.store.settings import Settings, SettingsStore
from app.ui.settings_panel import PROMPT_DEBOUNCE_MS, SettingsPanel
from tests.ui.conftest import live_threads_and_timers, load


def _panel(qtbot) -> tuple[SettingsPanel, list[Settings]]:  # noqa: ANN001
    panel = SettingsPanel(Settings())
    qtbot.addWidget(panel)
    applied: list[Settings] = []
    panel.changed.connect(applied.append)
    return panel, applied


def _debounce_timers(panel: SettingsPanel) -> list[QTimer]:
    return [t for t in panel.findChildren(QTimer) if t.interval() == PROMPT_DEBOUNCE_MS]


def test_the_system_prompt_is_applied_once_when_typing_pauses(qtbot) -> None:  # noqa: ANN001
    panel, applied = _panel(qtbot)
    panel.system_prompt.selectAll()
    started = time.monotonic()
    qtbot.keyClicks(panel.system_prompt, "Be brief.")  # replaces the default: nine edits
    assert applied == []  # nothing yet: typing has not paused
    qtbot.waitUntil(lambda: len(applied) == 1, timeout=5_000)
    assert time.monotonic() - started >= PROMPT_DEBOUNCE_MS / 1000 * 0.9
    assert applied[0].system_prompt == "Be brief." and panel.settings.system_prompt == "Be brief."
    qtbot.wait(PROMPT_DEBOUNCE_MS * 2)
    assert len(applied) == 1  # one application for the whole burst
    qtbot.waitUntil(lambda: not any(t.isActive() for t in _debounce_timers(panel)))


def test_flush_pending_applies_a_waiting_prompt_at_once_and_leaves_no_timer(qtbot) -> None:  # noqa: ANN001
    panel, applied = _panel(qtbot)
    panel.system_prompt.setPlainText("Answer in French.")
    assert applied == [] and any(t.isActive() for t in _debounce_timers(panel))
    panel.flush_pending()
    assert [s.system_prompt for s in applied] == ["Answer in French."]
    assert not any(t.isActive() for t in _debounce_timers(panel))
    panel.flush_pending()  # nothing pending: nothing applied twice
    qtbot.wait(PROMPT_DEBOUNCE_MS + 100)
    assert len(applied) == 1
    assert live_threads_and_timers() == []


def test_flush_pending_applies_fields_typed_without_return_and_keeps_refusals(qtbot) -> None:  # noqa: ANN001
    panel, applied = _panel(qtbot)
    panel.fields["top_k"].edit.clear()
    qtbot.keyClicks(panel.fields["top_k"].edit, "12")
    panel.fields["temperature"].edit.clear()
    qtbot.keyClicks(panel.fields["temperature"].edit, "hot")
    assert applied == [] and panel.settings.top_k == Settings().top_k
    panel.flush_pending()
    assert panel.settings.top_k == 12
    assert panel.settings.temperature == Settings().temperature  # a refused value never applies
    assert "not a number" in (panel.fields["temperature"].error() or "")
    assert "Temperature" in panel.refusal()


def test_nothing_typed_is_lost_when_the_window_closes_at_once(make_window, qtbot) -> None:  # noqa: ANN001
    window = make_window()
    panel = window.settings_panel
    panel.system_prompt.setPlainText("Be brief.")  # its debounce has not fired yet
    panel.fields["max_tokens"].edit.setText("77")  # typed, neither Return nor focus change
    window.close()
    stored = SettingsStore().load()
    assert (stored.system_prompt, stored.max_tokens) == ("Be brief.", 77)
    again = make_window()
    assert again.settings_panel.system_prompt.toPlainText() == "Be brief."
    assert again.settings_panel.fields["max_tokens"].edit.text() == "77"


def test_a_model_field_typed_before_closing_is_kept_and_the_close_still_ends(
    make_window,  # noqa: ANN001
    qtbot,  # noqa: ANN001
    tiny_pair,  # noqa: ANN001
) -> None:
    window = make_window(Settings(n_ctx=1024, n_threads=1))
    load(window, qtbot, *tiny_pair)
    window.settings_panel.fields["n_ctx"].edit.setText("2048")  # needs a reload when applied
    window.close()  # applies it on the way out; the engine still stops
    qtbot.waitUntil(lambda: not window.client.running, timeout=30_000)
    assert SettingsStore().load().n_ctx == 2048
