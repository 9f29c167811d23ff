"""The answer being written stays in view at small window sizes: it is followed as it
streams and as the transcript shrinks (a banner or the comparison opening above it), until
the person scrolls up; then "Jump to latest" brings it back and following goes on."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.engine.events import TokenEvent, TokenKind
from app.store.conversations import ChatMessage
from app.ui.transcript import Transcript

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

EARLIER = [
    ChatMessage("user", "Why is the sky blue?"),
    ChatMessage("assistant", "Because of Rayleigh scattering.\n\n" * 30),
    ChatMessage("user", "And sunsets?"),
]


def _streaming(qtbot, height: int = 100) -> Transcript:  # noqa: ANN001
    transcript = Transcript()
    qtbot.addWidget(transcript)
    transcript.resize(600, height)  # the message view at 1024x640 with every pane open
    transcript.show()
    qtbot.waitExposed(transcript)
    transcript.show_messages(EARLIER, pending=True)
    return transcript


def _write(transcript: Transcript, first: int, lines: int) -> None:
    events = [
        TokenEvent(i, i, f"line {i} of the new answer\n", TokenKind.ACCEPTED, i)
        for i in range(first, first + lines)
    ]
    transcript.stream(events)
    transcript.flush("answering…")
    QApplication.processEvents()


def _at_end(transcript: Transcript) -> bool:
    bar = transcript.verticalScrollBar()
    return bar.maximum() > 0 and bar.value() == bar.maximum()


def test_the_answer_being_written_is_followed_in_a_small_transcript(qtbot) -> None:  # noqa: ANN001
    transcript = _streaming(qtbot)
    for first in range(0, 60, 6):
        _write(transcript, first, 6)
        assert _at_end(transcript)
    assert transcript.follower.button.isHidden()


def test_the_answer_stays_in_view_when_the_transcript_shrinks_while_it_streams(qtbot) -> None:  # noqa: ANN001
    transcript = _streaming(qtbot, height=300)
    _write(transcript, 0, 20)
    assert _at_end(transcript)
    transcript.resize(600, 90)  # a banner and the comparison open above it
    QApplication.processEvents()
    assert _at_end(transcript)
    _write(transcript, 20, 3)
    assert _at_end(transcript)


def test_scrolling_up_stops_following_and_jump_to_latest_follows_again(qtbot) -> None:  # noqa: ANN001
    transcript = _streaming(qtbot)
    _write(transcript, 0, 20)
    bar = transcript.verticalScrollBar()
    bar.setValue(bar.maximum() // 3)  # the person reads the earlier answer
    held = bar.value()
    assert not transcript.follower.button.isHidden()
    _write(transcript, 20, 20)
    assert bar.value() == held  # not pulled down while reading
    button = transcript.follower.button
    assert transcript.viewport().geometry().contains(button.geometry())
    button.click()
    assert _at_end(transcript) and button.isHidden()
    _write(transcript, 40, 5)
    assert _at_end(transcript)


def test_scrolling_back_to_the_end_follows_again_and_the_button_goes(qtbot) -> None:  # noqa: ANN001
    transcript = _streaming(qtbot)
    _write(transcript, 0, 20)
    bar = transcript.verticalScrollBar()
    bar.setValue(0)
    assert not transcript.follower.button.isHidden()
    bar.setValue(bar.maximum())
    assert transcript.follower.button.isHidden()
    _write(transcript, 20, 10)
    assert _at_end(transcript)


def test_no_jump_button_once_the_answer_is_written(qtbot) -> None:  # noqa: ANN001
    transcript = _streaming(qtbot)
    _write(transcript, 0, 20)
    transcript.show_messages([*EARLIER, ChatMessage("assistant", "line\n" * 20)])
    bar = transcript.verticalScrollBar()
    assert _at_end(transcript)
    bar.setValue(0)
    assert transcript.follower.button.isHidden()
