"""A one-line label that never asks for more width than a few characters.

superqt's ``QElidingLabel`` shows as much of its text as fits, eliding the rest with "…";
this one also keeps the whole text in its tooltip, so a long file name or figure can neither
hide nor widen the window. Both are plain text: a file name is never markup.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget
from superqt import QElidingLabel

from app.ui.plain_text import tooltip as plain_tip

MIN_CHARS = 6
ELLIPSIS_ROOM = 2  # px superqt keeps for the "…"


class ElidedLabel(QElidingLabel):
    def __init__(
        self,
        text: str = "",
        parent: QWidget | None = None,
        *,
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle,
        tooltip: bool = True,
    ) -> None:
        super().__init__(parent)
        self._tooltip = tooltip
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setElideMode(mode)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        if self._tooltip:
            self.setToolTip(plain_tip(text))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        # superqt elides to the widget's width; a style sheet's padding and border take
        # part of it, so elide to the contents (else the text is cut, "threads" → "thread")
        margins = self.contentsMargins()
        self.setEllipsesWidth(ELLIPSIS_ROOM + margins.left() + margins.right())
        super().resizeEvent(event)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        # the whole text's width, so a layout with room shows it all (not the elided width)
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(self.text())
        # + the room superqt keeps for "…" and a fractional advance: a label given its
        # hint shows its text whole ("CPU · …hreads" at the hint's width)
        room = ELLIPSIS_ROOM + 1
        return QSize(width + margins.left() + margins.right() + room, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        metrics = self.fontMetrics()
        return QSize(metrics.horizontalAdvance("x" * MIN_CHARS), metrics.height())

    def shown_text(self) -> str:
        return QLabel.text(self)

    def is_elided(self) -> bool:
        return self.shown_text() != self.text()
