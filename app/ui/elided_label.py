"""A one-line label that never asks for more width than a few characters.

It paints as much of its text as fits, eliding the rest with "…", and keeps the whole text
in its tooltip, so a long file name or figure can neither hide nor widen the window. Both are
plain text: a file name is never markup.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from app.ui.plain_text import tooltip as plain_tip

MIN_CHARS = 6


class ElidedLabel(QLabel):
    def __init__(
        self,
        text: str = "",
        parent: QWidget | None = None,
        *,
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle,
        tooltip: bool = True,
    ) -> None:
        super().__init__(text, parent)
        self._mode = mode
        self._tooltip = tooltip
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        if tooltip:
            self.setToolTip(plain_tip(text))

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        if self._tooltip:
            self.setToolTip(plain_tip(text))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        metrics = self.fontMetrics()
        return QSize(metrics.horizontalAdvance("x" * MIN_CHARS), metrics.height())

    def is_elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def shown_text(self) -> str:
        width = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), self._mode, width)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        align = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(self.contentsRect(), int(align), self.shown_text())
        painter.end()
