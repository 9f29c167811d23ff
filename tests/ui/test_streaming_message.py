"""The answer streams into its own message in the chat, coloured as it comes, and closing
the window mid-answer keeps what streamed.

Real window, real engine process, the tiny synthetic pair: the message's text is sampled
between the chat's 40 ms flushes while the engine writes.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtGui import QTextDocument, QTextFormat

from app.store.conversations import ConversationStore
from app.store.settings import Settings
from app.ui.palette import KIND_TEXT_COLOURS
from tests.ui.conftest import load

LONG = Settings(max_tokens=3000, n_ctx=4096, temperature=0.0, seed=1, n_threads=1, baseline=False)
SHOTS = (
    Path(os.environ.get("SPECDECK_SCREENSHOTS", ""))
    if os.environ.get("SPECDECK_SCREENSHOTS")
    else None
)
PALETTE = {c.lower() for c in KIND_TEXT_COLOURS[False].values() if c}


def streamed_body(transcript) -> str:  # noqa: ANN001
    """The text of the last message in the chat, without its header and its small line."""
    text = transcript.toPlainText()
    body = text.rsplit("Assistant\n", 1)[-1]
    return body.rsplit("\nanswering…", 1)[0] if "\nanswering…" in body else body


def palette_colours(transcript, start: int = 0) -> set[str]:  # noqa: ANN001
    """The token-kind text colours used in the transcript from ``start`` on."""
    found = set()
    block = transcript.document().findBlock(start)
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.hasProperty(QTextFormat.Property.ForegroundBrush):
                found.add(fmt.foreground().color().name().lower())
            it += 1
        block = block.next()
    return found & PALETTE


def header_position(transcript) -> int:  # noqa: ANN001
    document = transcript.document()
    found = document.find(
        "Assistant", document.characterCount(), QTextDocument.FindFlag.FindBackward
    )
    assert not found.isNull()
    return found.position()


def watch_answer(window, qtbot, distinct: int = 6):  # noqa: ANN001, ANN201
    """Send a question and sample the streamed message between flushes until it has shown
    ``distinct`` lengths: (lengths, palette colours seen, document changes, header position)."""
    transcript = window.chat.transcript
    finished: list[object] = []
    window.answer_finished.connect(finished.append)
    changes: list[tuple[int, int, int]] = []
    transcript.document().contentsChange.connect(lambda *change: changes.append(change))
    window.chat.input.setPlainText("hello the model")
    window.chat.input.submit()
    start = header_position(transcript)
    changes.clear()  # from here on: only the streamed message may change
    lengths: list[int] = []
    colours: set[str] = set()
    deadline = time.monotonic() + 20
    while not finished and len(set(lengths)) < distinct and time.monotonic() < deadline:
        qtbot.wait(10)
        if finished:  # only what was shown while it streamed counts
            break
        lengths.append(len(streamed_body(transcript)))
        colours |= palette_colours(transcript, start)
        if len(set(lengths)) == 3 and SHOTS is not None:
            window.grab().save(str(SHOTS / "streaming-message.png"))
    return lengths, colours, changes, start


def stop(window, qtbot) -> None:  # noqa: ANN001
    with qtbot.waitSignal(window.answer_finished, timeout=60_000):
        window.stop()


def test_the_answer_grows_in_its_own_message_while_it_streams(
    make_window, qtbot, tiny_pair
) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    transcript = window.chat.transcript
    lengths, _colours, changes, start = watch_answer(window, qtbot)
    grown = sorted(set(lengths))
    assert len(grown) >= 6, lengths  # several lengths seen before the answer is done
    assert lengths == sorted(lengths)  # and it never shrinks while it streams
    # each flush appends to the message: nothing before its header is rendered again
    assert changes and all(position >= start for position, _removed, _added in changes)
    assert "token stream is below" not in transcript.toPlainText()
    assert window.chat.answer_box.isHidden()  # the comparison is there on request only
    shown = streamed_body(transcript).split()
    assert window.client.generating, "the answer ended before it could be watched"
    stop(window, qtbot)
    answer = window.conversation.messages[-1]
    assert answer.role == "assistant" and answer.stats.get("stopped") is True
    assert shown and answer.content.split()[: len(shown) - 1] == shown[:-1]
    assert "answering" not in transcript.toPlainText()


def test_the_streaming_message_is_coloured_by_token_kind(make_window, qtbot, tiny_pair) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    _lengths, colours, _changes, _start = watch_answer(window, qtbot)
    assert colours, "no token colours in the message while it streamed"
    painted = {event.kind for event in window.chat.spec_view.events}
    expected = {KIND_TEXT_COLOURS[False][kind] for kind in painted} - {None}
    assert window.client.generating, "the answer ended before it could be watched"
    stop(window, qtbot)
    assert colours <= {c.lower() for c in expected if c}


def test_closing_mid_answer_keeps_the_streamed_text_as_an_interrupted_message(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello the model")
    window.chat.input.submit()
    transcript = window.chat.transcript
    qtbot.waitUntil(lambda: len(window.chat.spec_view.events) >= 20, timeout=30_000)
    assert window.client.generating
    conversation_id = window.conversation.id
    window.close()
    assert not window.client.running

    stored = ConversationStore().load(conversation_id)
    assert [m.role for m in stored.messages] == ["user", "assistant"]
    answer = stored.messages[1]
    assert answer.stats["interrupted"] is True and answer.stats["stopped"] is True
    assert answer.stats["tokens"] >= 20 and "spec_tok_s" not in answer.stats
    kinds = answer.stats["kinds"]
    assert sum(count for _code, count in kinds) == len(answer.content)
    shown = streamed_body(transcript).split()
    assert shown and answer.content.split()[: len(shown) - 1] == shown[:-1]

    again = make_window()  # reopened, it says how it ended
    assert "cut off: the engine stopped" in again.chat.transcript.toPlainText()


def test_closing_mid_continue_keeps_the_continuation(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(replace(LONG, max_tokens=8))
    load(window, qtbot, *tiny_pair)
    with qtbot.waitSignal(window.answer_finished, timeout=60_000):
        window.chat.input.setPlainText("hello the model")
        window.chat.input.submit()
    first = window.conversation.messages[-1]
    assert first.stats["stop_reason"] == "max_tokens"
    window.settings_panel.update_settings(max_tokens=3000)
    window.continue_answer()
    transcript = window.chat.transcript
    before = len(streamed_body(transcript))
    qtbot.waitUntil(lambda: len(window.chat.spec_view.events) >= 20, timeout=30_000)
    assert "continuing…" in transcript.toPlainText()
    shown = len(streamed_body(transcript))
    window.close()

    stored = ConversationStore().load(window.conversation.id)
    assert [m.role for m in stored.messages] == ["user", "assistant"]
    answer = stored.messages[1]
    assert answer.content.startswith(first.content) and len(answer.content) > len(first.content)
    assert answer.stats["interrupted"] is True and answer.stats["continued"] == 1
    assert answer.stats["tokens"] >= 8 + 20
    assert shown > before  # the continuation was shown in the message as it came
    assert sum(count for _code, count in answer.stats["kinds"]) == len(answer.content)


def test_a_code_fence_streams_as_a_code_block_and_survives_a_theme_change(make_window) -> None:
    from app.engine.events import TokenEvent, TokenKind
    from app.store.conversations import ChatMessage
    from app.ui.theme import CODE_BACKGROUND

    window = make_window()
    transcript = window.chat.transcript
    transcript.show_messages([ChatMessage("user", "code?")], pending=True)
    pieces = ["\n", "Here", ":\n", "```", "python\n", "x", " = 1", "\n```", "\n", "Done"]
    kinds = [TokenKind.ACCEPTED, TokenKind.RESAMPLED, TokenKind.BONUS]
    events = [
        TokenEvent(i, i, piece, kinds[i % 3], i, draft_prob=0.5, target_prob=0.5)
        for i, piece in enumerate(pieces)
    ]
    transcript.stream(events[:6])
    assert transcript.flush() == 6
    transcript.stream(events[6:])
    transcript.flush()

    def block_of(text: str):  # noqa: ANN202
        block = transcript.document().find(text).block()
        assert block.isValid(), text
        return block

    def check(dark: bool) -> None:
        assert streamed_body(transcript) == "Here:\n```python\nx = 1\n```\nDone"
        code = block_of("x = 1")
        assert code.blockFormat().background().color().name() == CODE_BACKGROUND[dark].lower()
        fragment = code.begin().fragment()
        assert fragment.charFormat().fontFamilies() == [transcript_mono()]
        assert block_of("Done").blockFormat().background().style().name == "NoBrush"
        # every streamed character names its token on hover
        position = transcript.document().find("x").position() - 1
        kind, token = transcript.kind_at(position)
        assert token is not None and token.piece == "x" and kind is token.kind

    check(False)
    window.set_theme("dark")  # the transcript renders again: the streamed text comes back
    check(True)


def transcript_mono() -> str:
    from PySide6.QtGui import QFontDatabase

    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()


def test_closing_while_the_target_alone_answers_keeps_the_answer_with_its_figures(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(replace(LONG, max_tokens=1000, baseline=True))
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello the model")
    window.chat.input.submit()
    qtbot.waitUntil(lambda: window.status["speed"].text().startswith("baseline"), timeout=60_000)
    transcript = window.chat.transcript
    qtbot.waitUntil(
        lambda: "now the target alone answers" in transcript.toPlainText(), timeout=5_000
    )
    spec = window.chat.speculative_summary
    assert spec is not None and f"{spec.tokens} tokens written" in transcript.toPlainText()
    conversation_id = window.conversation.id
    window.close()

    answer = ConversationStore().load(conversation_id).messages[-1]
    assert answer.role == "assistant" and answer.content == spec.text
    assert answer.stats["tokens"] == spec.tokens and answer.stats["spec_tok_s"] == round(
        spec.tok_s, 2
    )
    assert answer.stats["stopped"] is True and "interrupted" not in answer.stats
    assert "baseline" not in answer.stats  # the target alone had not finished
