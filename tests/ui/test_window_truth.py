"""Issue 10: the window works, fits small screens and says only what the runs measured."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPalette, QTextCursor, QTextFormat

from app.engine.config import DraftSource
from app.engine.events import RunSummary, StepEvent, StopReason, TokenKind
from app.store.settings import Settings
from app.ui.plain_text import tooltip
from app.workers.messages import EventBatch
from tests.ui.conftest import ask, load

FAST = Settings(max_tokens=48, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


def _pick_source(window, qtbot, source: DraftSource):  # noqa: ANN001, ANN202
    box = window.pair_bar.source
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000) as blocker:
        box.setCurrentIndex(box.findData(source.value))
    return blocker.args[0]


# --- 1. broken ------------------------------------------------------------------------------


def test_draft_source_model_ngram_model_then_answer(make_window, qtbot, tiny_pair) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)

    ngram = _pick_source(window, qtbot, DraftSource.NGRAM)
    assert ngram.pair.draft_source is DraftSource.NGRAM and ngram.pair.draft_path is None
    assert window.pair_bar.draft.text().startswith("n-gram")
    assert not window.statusBar().currentMessage().startswith("Loading")
    assert window.settings.draft_source == "ngram"
    assert window.settings.draft_path == str(tiny_pair[1])  # kept for switching back

    model = _pick_source(window, qtbot, DraftSource.MODEL)
    assert model.pair.draft_source is DraftSource.MODEL
    assert model.pair.draft_path == str(tiny_pair[1])
    assert window.pair_bar.draft.text() == "draft.gguf"
    assert window.pair_bar.source.currentData() == DraftSource.MODEL.value

    done = ask(window, qtbot, "hello the model")
    assert done.speculative.drafted > 0  # the draft model drafts again, not n-gram or nothing
    kinds = {e.kind for e in window.chat.spec_view.events}
    assert kinds & {TokenKind.ACCEPTED, TokenKind.RESAMPLED, TokenKind.BONUS}


class _Emitter(QObject):
    fired = Signal()


@pytest.mark.qt_no_exception_capture
def test_an_exception_in_a_slot_is_caught_by_the_fixture(qapp, no_exceptions_in_slots) -> None:
    emitter = _Emitter()

    def broken() -> None:
        raise AttributeError("'str' object has no attribute 'value'")

    emitter.fired.connect(broken)
    emitter.fired.emit()
    qapp.processEvents()
    caught = list(no_exceptions_in_slots.errors)
    no_exceptions_in_slots.errors.clear()  # caught: this test is about the catching
    assert len(caught) == 1 and "no attribute 'value'" in caught[0]


def test_window_fits_1024x640_and_never_resizes_itself(make_window, qtbot, tmp_path) -> None:
    window = make_window()
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    qtbot.wait(50)
    hint = window.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 640, hint
    assert window.size() == QSize(1024, 640)

    long_target = str(
        tmp_path / ("qwen2.5-coder-0.5b-instruct-" + "very-long-name-" * 12 + ".gguf")
    )
    long_draft = str(tmp_path / ("draft-" + "x" * 180 + ".Q2_K.gguf"))
    window.pair_bar.show_pair(long_target, long_draft, DraftSource.MODEL)
    window.pair_bar.show_resources("GPU (all layers) + CPU 16 threads " * 4, 2**33, 2**34)
    window.pair_bar.set_busy("Loading " + "a-very-long-file-name" * 10 + ".gguf…")
    window.chat.show_verdict("0.70× — 30 % slower " * 20, None)
    for label in window.status.values():
        label.setText(label.text() + " and a long figure" * 15)
    for _ in range(5):
        qtbot.wait(20)
        assert window.size() == QSize(1024, 640)
    target = window.pair_bar.target
    assert target.toolTip() == tooltip(long_target)  # the whole path, as plain text
    assert target.is_elided() and "…" in target.shown_text()
    assert window.minimumSizeHint().width() <= 1024


# --- 2. the verdict -----------------------------------------------------------------------


def test_sampled_answer_is_not_called_a_near_tie(make_window, qtbot, tiny_pair) -> None:
    window = make_window(replace(FAST, temperature=0.8, seed=7))
    load(window, qtbot, *tiny_pair)
    done = ask(window, qtbot, "hello the model")
    verdict = window.chat.verdict.text()
    assert "near-tie" not in verdict, verdict
    assert "differ by design" in verdict and "by distribution" in verdict
    assert window.chat.spec_view.divergence is None  # nothing to mark: no identity expected
    assert window.conversation.messages[-1].stats["verdict"] == verdict
    assert done.speculative.tokens > 0


def test_one_acceptance_figure_in_status_chart_and_export(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    spec = ask(window, qtbot, "hello the model").speculative
    assert spec.drafted > 0
    figure = f"{spec.acceptance_rate * 100:.0f} %"
    status = window.status["acceptance"].text()
    assert status.startswith(f"acceptance {figure}") and f"{spec.accepted}/{spec.drafted}" in status
    assert f"{spec.tokens_per_pass:.2f} tokens/pass" in status
    run_so_far = window.charts.acceptance.view()[-1, 2]
    assert run_so_far == pytest.approx(spec.acceptance_rate)
    window.charts.export_stats(isolated / "run.json")
    data = json.loads((isolated / "run.json").read_text())
    assert data["runs"]["speculative"]["acceptance_rate"] == pytest.approx(
        spec.acceptance_rate, abs=1e-6
    )
    assert "acceptance_rate" in data["definitions"]
    assert all("recent_agreement" in step for step in data["steps"])  # the guard's figure
    assert data["runs"]["speculative"]["tokens_per_pass"] == pytest.approx(
        spec.tokens_per_pass, abs=1e-4
    )


def _summary(mode: str, tokens: int, tok_s: float, drafted: int = 0) -> RunSummary:
    return RunSummary(
        mode=mode, tokens=tokens, elapsed_s=1.0, tok_s=tok_s, ttft_ms=10.0,
        acceptance_rate=1.0 if drafted else 0.0, mean_accepted_length=0.0,
        target_passes_per_token=1.0, p50_itl_ms=1.0, p95_itl_ms=1.0,
        stop_reason=StopReason.MAX_TOKENS, decode_s=0.5, steps=0, drafted=drafted,
        accepted=drafted,
    )  # fmt: skip


def test_nothing_drafted_shows_no_speedup_in_the_window(make_window, qtbot) -> None:
    from app.workers.messages import Verdict

    window = make_window()
    window.charts.ingest(EventBatch(1, "speculative", (_summary("speculative", 96, 5.2),), 1, 96))
    window.charts.ingest(EventBatch(1, "baseline", (_summary("baseline", 96, 4.5),), 1, 96))
    window._on_verdict(Verdict(1, None))
    verdict = window.chat.verdict.text()
    assert "×" not in verdict and "noise" in verdict and "nothing was drafted" in verdict


# --- 4. layout ------------------------------------------------------------------------------


def test_settings_and_charts_are_docks_that_hide_and_detach(make_window, qtbot) -> None:
    window = make_window()
    qtbot.waitExposed(window)
    for dock in (window.settings_dock, window.charts_dock):
        assert dock.isVisible()
        dock.toggleViewAction().trigger()
        assert not dock.isVisible() and window.chat.isVisible()
        dock.toggleViewAction().trigger()
        assert dock.isVisible()
    window.charts_dock.setFloating(True)
    assert window.charts_dock.isFloating() and window.charts.isVisible()
    window.charts_dock.setFloating(False)


def _steps(numbers: list[int]) -> tuple[StepEvent, ...]:
    return tuple(StepEvent(n, 4, 3, 5.0, 20.0, 1.0, 4, 0.75, 0.5) for n in numbers)


def test_charts_fit_the_data_and_break_at_pauses(make_window, qtbot, tmp_path) -> None:
    window = make_window()
    charts = window.charts
    for second in range(1, 6):
        charts.ingest(EventBatch(1, "speculative", (), float(second), 4 * second + 1))
    charts.ingest(EventBatch(1, "speculative", _steps([0, 1, 2, 10, 11]), 6.0, 30))
    for _ in range(4):  # one plot re-ranges per redraw tick
        charts._redraw()
    top = charts.speed_plot.viewRange()[1][1]
    assert 4.2 < top <= 10.0, top  # the rate sits near 4-5 tok/s: the axis is not 0-50
    x, _ = charts.accept_mean.getData()
    connect = charts.accept_mean.opts["connect"]
    assert list(x) == [0, 1, 2, 10, 11]
    assert list(np.asarray(connect)[:4]) == [True, True, False, True]  # no line over 2..10
    # keys and the break-even figure sit in legends under the axes, never on the data;
    # under a plot too short for them they move into its tooltip
    assert "break-even 50.0 %" in charts.legends[0].getLabel(charts.break_key).text
    for height in (900, 400):
        window.charts_dock.setFloating(True)
        window.charts_dock.resize(500, height)
        qtbot.wait(50)
        charts._redraw()
        plots = (charts.accept_plot, charts.speed_plot)
        for legend, plot, shown in zip(charts.legends, plots, charts._legend_shown, strict=True):
            assert shown is (plot.height() >= 200)
            if shown:
                assert (
                    legend.sceneBoundingRect().top()
                    >= plot.plotItem.vb.sceneBoundingRect().bottom()
                )
            else:
                assert (
                    "run so far" in charts.accept_plot.toolTip() or "speculative" in plot.toolTip()
                )
        assert any(charts._legend_shown) == (height == 900)
    assert "break-even 50.0 %" in charts.accept_plot.toolTip()
    window.charts_dock.setFloating(False)
    png = charts.export_png("tok_s", tmp_path / "tok_s.png")
    assert QImage(str(png)).width() >= 1200


def test_answering_is_not_styled_as_a_link(make_window) -> None:
    from app.store.conversations import ChatMessage

    window = make_window()
    transcript = window.chat.transcript
    transcript.show_messages([ChatMessage("user", "hi")], pending=True)
    cursor = QTextCursor(transcript.document())
    cursor.setPosition(transcript.toPlainText().index("answering") + 2)
    fmt = cursor.charFormat()
    assert not fmt.fontUnderline() and not fmt.isAnchor() and fmt.fontItalic()


def test_regenerate_and_copy_are_off_in_an_empty_chat(make_window) -> None:
    window = make_window()
    assert window.conversation.messages == ()
    assert not window.chat.regenerate.isEnabled() and not window.chat.copy.isEnabled()
    assert window.chat.new_chat.isEnabled()
    # no pair loaded: Send says so (issue 20: Send reflects what is loaded)
    assert not window.chat.send.isEnabled() and "Demo pair" in window.chat.send.toolTip()


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


def test_screenshots_at_1024_and_1920(make_window, qtbot, tmp_path: Path) -> None:
    window = make_window()
    for width, height in ((1024, 640), (1920, 1080)):
        window.resize(width, height)
        qtbot.wait(50)
        assert window.size() == QSize(width, height)
        image = window.grab()
        assert (image.width(), image.height()) == (width, height)


# --- 3 (colours) and 6. theme ---------------------------------------------------------------


WCAG_AA = 4.5  # the contrast ratio coloured text needs on its background


def _relative_luminance(colour: QColor) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in (colour.redF(), colour.greenF(), colour.blueF()))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: QColor, b: QColor) -> float:
    """WCAG 2 contrast ratio of two opaque colours (1 to 21)."""
    high, low = sorted((_relative_luminance(a), _relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_ratio_follows_wcag() -> None:
    assert contrast_ratio(QColor("black"), QColor("white")) == pytest.approx(21.0)
    assert contrast_ratio(QColor("#777777"), QColor("white")) == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_token_colours_meet_wcag_contrast(make_window, qtbot, tiny_pair, theme: str) -> None:
    from app.ui.palette import text_colour

    window = make_window(FAST)
    window.set_theme(theme)
    assert window.dark is (theme == "dark")
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    spec = window.chat.spec_view
    background = spec.palette().color(spec.viewport().backgroundRole())
    checked = set()
    for index, event in enumerate(spec.events):
        colour = text_colour(event.kind, window.dark)
        start, end = spec.token_span(index) or (0, 0)
        if colour is None or not event.piece.strip() or end <= start:
            continue
        cursor = QTextCursor(spec.document())
        cursor.setPosition(start + 1)
        painted = cursor.charFormat().foreground().color()
        assert painted.name().lower() == colour.lower()
        assert contrast_ratio(painted, background) >= WCAG_AA, (event.kind, colour, background)
        checked.add(event.kind)
    assert checked
    for kind in (TokenKind.ACCEPTED, TokenKind.RESAMPLED, TokenKind.BONUS):  # every kind
        assert contrast_ratio(QColor(text_colour(kind, window.dark)), background) >= WCAG_AA


def test_theme_follows_the_system_and_can_be_overridden(make_window, qtbot) -> None:
    from app.ui.theme import system_is_dark

    window = make_window()
    qtbot.wait(10)  # palette changes reach the widgets through the event loop
    assert window.theme_choice == "system" and window.dark is system_is_dark()
    base = window.chat.spec_view.palette().color(QPalette.ColorRole.Base)
    window.settings_panel.theme.setCurrentIndex(window.settings_panel.theme.findData("dark"))
    assert window.dark
    qtbot.wait(10)
    dark_base = window.chat.spec_view.palette().color(QPalette.ColorRole.Base)
    assert dark_base.lightness() < 80 and dark_base != base
    chart_background = window.charts.speed_plot.backgroundBrush().color()
    assert chart_background.lightness() < 80
    window.close()
    again = make_window()  # the override is remembered
    assert again.theme_choice == "dark" and again.dark
    again.set_theme("light")
    assert not again.dark
    qtbot.wait(10)
    assert again.chat.spec_view.palette().color(QPalette.ColorRole.Base).lightness() > 200


# --- 3. one answer, in the chat, coloured -----------------------------------------------------


def _transcript_colours(transcript) -> set[str]:  # noqa: ANN001
    found = set()
    block = transcript.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().hasProperty(QTextFormat.Property.ForegroundBrush):
                found.add(fragment.charFormat().foreground().color().name().lower())
            it += 1
        block = block.next()
    return found


def test_the_answer_is_the_coloured_chat_message(make_window, qtbot, tiny_pair) -> None:
    from app.ui.palette import text_colour

    window = make_window(replace(FAST, max_tokens=24))
    load(window, qtbot, *tiny_pair)
    done = ask(window, qtbot, "hello the model")
    spec = done.speculative
    transcript = window.chat.transcript
    text = transcript.toPlainText()
    assert "answering" not in text
    assert spec.text.split()[0] in text
    message = window.conversation.messages[-1]
    assert f"{spec.tokens} tokens" in text and f"accepted {spec.accepted}/{spec.drafted}" in text
    assert "cut off at Max tokens" in text  # 24 tokens: the answer was cut, and says so
    assert (
        message.stats["kinds"] and message.stats["pair"] == "target.gguf + draft.gguf (draft model)"
    )
    expected = {
        text_colour(e.kind).lower()
        for e in window.chat.spec_view.events
        if text_colour(e.kind) and e.piece.strip()
    }
    assert expected and expected <= _transcript_colours(transcript)
    # the token detail from the stream is on hover in the chat too
    position = next(p for p in range(len(text)) if transcript.kind_at(p) is not None)
    kind, token = transcript.kind_at(position)
    assert token is not None and token.kind is kind
    # the comparison folds away once the answer is in the chat (it opens on a divergence)
    if window.chat.spec_view.divergence is None:
        assert window.chat.answer_box.isHidden() and not window.chat.compare.isChecked()
    qtbot.mouseClick(window.chat.compare, Qt.MouseButton.LeftButton)
    assert window.chat.answer_box.isVisible() and window.chat.spec_view.events
    window.close()

    again = make_window()  # reopened: the colours come back from the stored token kinds
    assert again.conversation.messages[-1].stats["kinds"] == message.stats["kinds"]
    assert expected <= _transcript_colours(again.chat.transcript)


def test_line_breaks_are_kept_and_code_stays_code(make_window) -> None:
    from app.store.conversations import ChatMessage

    window = make_window()
    poem = "Roses are red\nviolets are blue\n\n```python\nx = 1\ny = 2\n```"
    window.chat.transcript.show_messages(
        [ChatMessage("user", "a poem"), ChatMessage("assistant", poem)]
    )
    text = window.chat.transcript.toPlainText()
    assert "Roses are red\u2028violets are blue" in text or "red\nviolets" in text
    assert "x = 1\ny = 2" in text and "```" not in text


def test_markdown_export_names_the_pair_and_settings(make_window, qtbot, tiny_pair, isolated):  # noqa: ANN001, ANN201
    from app.store.conversations import to_markdown

    window = make_window(replace(FAST, max_tokens=8, temperature=0.5, seed=3))
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    text = to_markdown(window.conversation)
    assert "> target.gguf + draft.gguf (draft model)" in text
    assert "temperature 0.5" in text and "rule rejection" in text and "seed 3" in text
