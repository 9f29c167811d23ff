"""Token colours and the theme: coloured text meets WCAG AA contrast in both themes, the
answer in the chat is coloured by token kind (and again when reopened), and the theme follows
the system unless overridden."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette, QTextCursor, QTextFormat

from app.engine.events import TokenKind
from app.store.settings import Settings
from tests.ui.conftest import ask, load

FAST = Settings(max_tokens=48, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


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
