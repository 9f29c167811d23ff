"""Finding and clicking the links in the transcript, as a person would."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor


def anchors(transcript) -> list[tuple[str, str, int]]:  # noqa: ANN001
    """(href, text, middle position) of every link in the transcript's document."""
    found = []
    block = transcript.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isAnchor():
                middle = fragment.position() + fragment.length() // 2
                found.append((fmt.anchorHref(), fragment.text(), middle))
            it += 1
        block = block.next()
    return found


def click_anchor(qtbot, transcript, text: str) -> None:  # noqa: ANN001
    """Scroll the link whose text is ``text`` into view and click it with the mouse."""
    (position,) = [p for _, shown, p in anchors(transcript) if shown == text]
    cursor = QTextCursor(transcript.document())
    cursor.setPosition(position)
    transcript.setTextCursor(cursor)
    transcript.ensureCursorVisible()
    rect = transcript.cursorRect(cursor)
    point = QPoint(max(0, rect.x() - 2), rect.center().y())
    qtbot.mouseClick(transcript.viewport(), Qt.MouseButton.LeftButton, pos=point)
