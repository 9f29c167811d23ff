"""The main window on a real (tiny synthetic) pair: colours, baseline, verdict, charts, Stop."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QColor, QTextCursor

from app.engine.config import DraftSource
from app.engine.events import StopReason, TokenKind
from app.store.settings import Settings, SettingsStore
from app.ui.palette import KIND_COLOURS, text_colour
from app.ui.token_view import token_tooltip
from tests.ui.conftest import ask, load

VERDICT = re.compile(
    r"^.+ tok/s.* — (identical to target-only"
    r"|diverged at token \d+ \((near-tie|NOT a near-tie), margin -?\d+\.\d+\))$"
)
FAST = Settings(max_tokens=48, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


def _foreground_at(view, position: int) -> QColor:  # noqa: ANN001
    cursor = QTextCursor(view.document())
    cursor.setPosition(position + 1)  # charFormat() is the format left of the cursor
    return cursor.charFormat().foreground().color()


def test_answer_is_coloured_compared_and_charted(make_window, qtbot, tiny_pair, isolated) -> None:
    window = make_window(FAST)
    loaded = load(window, qtbot, *tiny_pair)
    assert loaded.pair.draft_path == str(tiny_pair[1])
    assert "target.gguf" in window.pair_bar.target.text()
    done = ask(window, qtbot, "hello the model")
    assert not done.cancelled and done.speculative.tokens > 0 and done.baseline.tokens > 0

    spec = window.chat.spec_view
    kinds = {e.kind for e in spec.events}
    assert kinds & {TokenKind.ACCEPTED, TokenKind.BONUS, TokenKind.RESAMPLED}
    coloured = 0
    for index, event in enumerate(spec.events):
        colour = text_colour(event.kind)
        start, end = spec.token_span(index) or (0, 0)
        if colour is None or not event.piece.strip() or end <= start:
            continue
        assert _foreground_at(spec, start).name().lower() == colour.lower()
        coloured += 1
    assert coloured > 0
    assert window.chat.base_view.text().strip()
    assert len(window.chat.base_view.events) == done.baseline.tokens

    verdict = window.chat.verdict.text()
    assert VERDICT.match(verdict), verdict
    if "diverged" in verdict:
        assert spec.divergence is not None and window.chat.base_view.divergence is not None

    charts = window.charts
    assert charts.samples > 0
    assert charts.acceptance.count == len(charts.stats.steps) > 0
    assert charts.hist.sum() == len(charts.stats.steps)
    assert charts.speed["speculative"].count > 0 and charts.speed["baseline"].count > 0
    charts.export_stats(isolated / "run.json")
    data = json.loads((isolated / "run.json").read_text())
    assert set(data["runs"]) == {"speculative", "baseline"} and data["verdict"] == verdict
    charts.export_stats(isolated / "run.csv")
    assert (isolated / "run.csv").read_text().startswith("step,drafted,accepted")
    assert charts.export_png("acceptance", isolated / "acc.png").stat().st_size > 1000

    tip = token_tooltip(spec.events[0])
    assert "step" in tip and "target p" in tip
    assert "tok/s" in window.status["speed"].text()
    assert window.status["acceptance"].text().startswith("acceptance")

    # alternative styles and the off switch repaint the same tokens
    window.chat.style_box.setCurrentIndex(window.chat.style_box.findData("underline"))
    first = next(i for i, e in enumerate(spec.events) if KIND_COLOURS[e.kind] and e.piece.strip())
    cursor = QTextCursor(spec.document())
    cursor.setPosition(spec.token_span(first)[0] + 1)
    assert cursor.charFormat().fontUnderline()
    window.chat.style_box.setCurrentIndex(window.chat.style_box.findData("off"))
    assert _foreground_at(spec, spec.token_span(first)[0]) != QColor(
        text_colour(spec.events[first].kind)
    )
    assert SettingsStore().load().colour_style == "off"


def test_hover_shows_token_details(make_window, qtbot, tiny_pair) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "the code")
    spec = window.chat.spec_view
    index = next(i for i, e in enumerate(spec.events) if e.piece.strip())
    event = spec.events[index]
    start, _ = spec.token_span(index)
    assert spec.token_at(start) is event
    cursor = QTextCursor(spec.document())
    cursor.setPosition(start)
    point = spec.cursorRect(cursor).center() + QPoint(2, 0)
    from PySide6.QtGui import QHelpEvent

    help_event = QHelpEvent(QEvent.Type.ToolTip, point, spec.viewport().mapToGlobal(point))
    assert spec.viewportEvent(help_event)


def test_stop_cancels_mid_answer(make_window, qtbot, tiny_pair) -> None:
    window = make_window(Settings(max_tokens=3000, n_ctx=4096, temperature=0.0, n_threads=1))
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello the model")
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as blocker:
        window.chat.input.submit()
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        assert window.chat.send.text() == "Stop"
        stopped_at = time.perf_counter()
        qtbot.mouseClick(window.chat.send, Qt.MouseButton.LeftButton)
    done = blocker.args[0]
    assert time.perf_counter() - stopped_at < 5.0
    assert done.cancelled and done.baseline is None
    assert done.speculative.stop_reason is StopReason.CANCELLED
    assert 0 < done.speculative.tokens < 3000
    assert window.chat.send.text() == "Send"
    assert window.conversation.messages[-1].stats.get("stopped") is True


def test_close_during_generation_waits_for_worker(make_window, qtbot, tiny_pair) -> None:
    window = make_window(Settings(max_tokens=3000, n_ctx=4096, n_threads=1))
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello")
    window.chat.input.submit()
    qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
    window.close()
    assert not window.client.running
    assert window.conversation.messages[0].content == "hello"


def test_errors_are_messages_and_app_keeps_running(make_window, qtbot, tiny_pair, tmp_path) -> None:
    window = make_window(FAST)
    with qtbot.waitSignal(window.failed, timeout=30_000) as blocker:
        window.load_pair(str(tmp_path / "missing.gguf"), None, DraftSource.NGRAM)
    assert blocker.args[0].title == "File not found"
    assert "Change pair" in window.chat.error_banner.label.text()
    assert not window.chat.error_banner.isHidden()

    from app.devtools.test_models.synthetic import write_tiny_llama

    other = write_tiny_llama(tmp_path / "other.gguf", seed=3, extra_words=("zebra", "quartz"))
    with qtbot.waitSignal(window.failed, timeout=30_000) as blocker:
        window.load_pair(str(tiny_pair[0]), str(other), DraftSource.MODEL)
    assert blocker.args[0].title == "Incompatible pair"
    assert "vocabulary" in blocker.args[0].message or "token" in blocker.args[0].message

    load(window, qtbot, *tiny_pair)  # still alive and usable
    assert ask(window, qtbot, "hello").speculative.tokens > 0


def test_enter_sends_and_shift_enter_adds_a_line(make_window, qtbot) -> None:
    window = make_window()
    box = window.chat.input
    sent: list[str] = []
    box.submitted.connect(sent.append)
    qtbot.keyClicks(box, "first")
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "second")
    assert box.toPlainText() == "first\nsecond" and not sent
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert sent == ["first\nsecond"]
    # no pair loaded: an actionable message, nothing sent to the engine
    assert "Demo pair" in window.chat.error_banner.label.text()


@pytest.mark.real
def test_demo_pair_answers(make_window, qtbot, smollm2_pair) -> None:
    window = make_window(Settings(max_tokens=12, n_ctx=1024, temperature=0.0, n_threads=1))
    load(window, qtbot, *smollm2_pair, timeout=120_000)
    done = ask(window, qtbot, "What is the capital of France?", timeout=180_000)
    assert done.speculative.tokens > 0 and window.chat.base_view.text().strip()
    assert {e.kind for e in window.chat.spec_view.events} - {TokenKind.TARGET}
    assert VERDICT.match(window.chat.verdict.text()), window.chat.verdict.text()
    assert window.charts.samples > 0


def test_screenshot_mode_writes_png(qapp, tmp_path: Path, capsys) -> None:
    from app.ui.main import run_gui

    out = tmp_path / "shot.png"
    assert run_gui([], screenshot=str(out)) == 0
    assert out.stat().st_size > 10_000
    assert re.search(r"window shown after \d+\.\d\d s", capsys.readouterr().err)


def test_settings_persist_and_invalid_values_are_refused(make_window, qtbot) -> None:
    window = make_window()
    window.resize(760, 560)  # inside the offscreen screen, so geometry restores unclamped
    temperature = window.settings_panel.fields["temperature"]

    def type_into(editor, text: str) -> None:  # noqa: ANN001
        editor.edit.clear()
        qtbot.keyClicks(editor.edit, text)
        qtbot.keyClick(editor.edit, Qt.Key.Key_Return)

    type_into(temperature, "hot")
    assert "not a number" in (temperature.error() or "")
    assert window.settings.temperature == 0.0 and SettingsStore().load().temperature == 0.0
    type_into(window.settings_panel.fields["max_tokens"], "9000")
    assert "context size" in (window.settings_panel.fields["max_tokens"].error() or "")
    type_into(temperature, "0.7")
    assert temperature.error() is None
    type_into(window.settings_panel.fields["top_k"], "12")
    type_into(window.settings_panel.fields["seed"], "")
    window.settings_panel.draft_mode.setCurrentIndex(1)
    window.settings_panel.rule.setCurrentIndex(1)
    window.settings_panel.system_prompt.setPlainText("Be brief.")
    window.chat.baseline_box.setChecked(False)
    window.chat.split.setSizes([200, 300])
    sizes = window.chat.split.sizes()
    window.close()

    again = make_window()
    s = again.settings
    assert (s.temperature, s.top_k, s.seed, s.draft_adaptive, s.rule) == (
        0.7,
        12,
        None,
        False,
        "match",
    )
    assert (s.system_prompt, s.baseline, s.max_tokens) == ("Be brief.", False, 256)
    assert again.settings_panel.fields["temperature"].edit.text() == "0.7"
    assert not again.chat.baseline_box.isChecked()
    qtbot.waitExposed(again)
    assert again.size() == window.size()
    assert again.chat.split.sizes() == sizes


def test_conversation_survives_restart(make_window, qtbot, tiny_pair, isolated) -> None:
    from app.store.conversations import ConversationStore

    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "remember this question")
    ask(window, qtbot, "and a second turn")
    conversation = window.conversation
    assert [m.role for m in conversation.messages] == ["user", "assistant"] * 2
    window.close()

    again = make_window()  # reloads the saved pair too
    assert again.conversation == conversation
    assert "remember this question" in again.chat.transcript.toPlainText()
    assert again.conversations.ids() == [conversation.id]
    if again.client.loading:
        qtbot.waitSignal(again.pair_loaded, timeout=30_000).wait()
    again.new_chat()
    again.open_conversation(conversation.id)
    assert again.conversation.id == conversation.id
    again.conversations.delete_conversation(conversation.id)
    assert ConversationStore().list() == [] and again.conversation.messages == ()


def test_latency_probe_reports_percentiles(qapp, isolated, tiny_pair) -> None:
    from app.devtools.latency_probe import measure_ui_latency

    result = measure_ui_latency(*tiny_pair, "hello the model", 300, threads=1)
    assert result["tokens"] == 300 and result["tok_s"] > 0 and result["samples"] > 0
    assert 0 <= result["p50_ms"] <= result["p95_ms"] <= result["max_ms"]
    assert result["p95_ms"] < 250, result  # loose: a busy 2-core CI box; see the report figure


def test_regenerate_copy_and_new_chat(make_window, qtbot, tiny_pair) -> None:
    from PySide6.QtGui import QGuiApplication

    window = make_window(replace(FAST, baseline=False))
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    assert window.chat.base_box.isHidden()
    assert window.chat.verdict.text().startswith("baseline not run")
    first = window.conversation.messages[-1]
    with qtbot.waitSignal(window.answer_finished, timeout=60_000):
        qtbot.mouseClick(window.chat.regenerate, Qt.MouseButton.LeftButton)
    assert [m.role for m in window.conversation.messages] == ["user", "assistant"]
    assert window.conversation.messages[-1].created >= first.created
    qtbot.mouseClick(window.chat.copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == window.chat.spec_view.text()
    qtbot.mouseClick(window.chat.new_chat, Qt.MouseButton.LeftButton)
    assert window.conversation.messages == () and window.chat.spec_view.text() == ""
