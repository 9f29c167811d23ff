"""The chat keeps the shape of what was written: line breaks, code fences (also first in an
answer), pasted code, and "answering" in italics rather than styled as a link."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextCursor, QTextFormat

from app.engine.events import TokenKind
from app.store.conversations import ChatMessage

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


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


def test_a_code_fence_first_and_pasted_code_keep_their_shape(qtbot) -> None:
    from app.ui.transcript import Transcript

    transcript = Transcript()
    qtbot.addWidget(transcript)
    answer = "```python\nx = 1\ny = 2\n```\nDone."
    pasted = "Why?\ndef f(x):\n    if x:\n        return 1\n    return 2"
    transcript.show_messages(
        [
            ChatMessage("user", pasted),
            ChatMessage("assistant", answer, stats={"kinds": [["a", len(answer)]]}),
        ]
    )
    code: dict[str, bool] = {}
    block = transcript.document().begin()
    while block.isValid():
        fmt = block.blockFormat()
        fenced = fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines()
        code[block.text()] = fenced
        if block.text() == "x = 1":
            first_code = block.position()
        block = block.next()
    assert code["x = 1"] and code["y = 2"] and not code["Done."], code
    shown = transcript.toPlainText().replace("\u00a0", " ")
    assert "def f(x):\n    if x:\n        return 1\n    return 2" in shown, shown
    found = transcript.kind_at(first_code)  # the colours still line up with the text
    assert found is not None and found[0] is TokenKind.ACCEPTED


def test_answering_is_not_styled_as_a_link(make_window) -> None:
    from app.store.conversations import ChatMessage

    window = make_window()
    transcript = window.chat.transcript
    transcript.show_messages([ChatMessage("user", "hi")], pending=True)
    cursor = QTextCursor(transcript.document())
    cursor.setPosition(transcript.toPlainText().index("answering") + 2)
    fmt = cursor.charFormat()
    assert not fmt.fontUnderline() and not fmt.isAnchor() and fmt.fontItalic()
