"""A message above or below the chat, with a close button.

Its text is markup the app composes, with every outside part escaped (see
``app.ui.plain_text``). In a small window (``set_compact``) a long message gives way to the
answer: it shows its first lines, with More to read the rest, and the whole text on hover.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

COMPACT_LINES = 2
UNCAPPED = 16_777_215  # QWIDGETSIZE_MAX


class Banner(QFrame):
    def __init__(self, name: str, colours: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.set_colours(colours)
        self._compact = False
        self._expanded = False
        self._limit = UNCAPPED  # px an expanded label may take in a small window
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.more = QToolButton()
        self.more.setObjectName(f"{name}More")
        self.more.setAutoRaise(True)
        self.more.clicked.connect(self._toggle)
        self.more.hide()
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.more, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def set_colours(self, colours: str) -> None:
        self.setStyleSheet(f"#{self.objectName()} {{ {colours} border-radius: 4px; }}")

    def show_text(self, text: str) -> None:
        if text != self.label.text():
            self._expanded = False
        self.label.setText(text)
        self.show()
        self._fit()

    def text(self) -> str:
        return self.label.text() if self.isVisible() or not self.isHidden() else ""

    def set_compact(self, compact: bool) -> None:
        """Small window: at most ``COMPACT_LINES`` lines unless the person asks for more."""
        if compact != self._compact:
            self._compact = compact
            self._expanded = False
            self._fit()

    @property
    def cut(self) -> bool:
        """Only the first lines show (the rest is a click on More away)."""
        return self.label.maximumHeight() < UNCAPPED

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()

    def _toggle(self) -> None:
        self._expanded = not self._expanded
        self._limit = UNCAPPED
        self._fit()

    @property
    def expanded(self) -> bool:
        """More was clicked in a small window: the whole text (or what room it has)."""
        return self._compact and self._expanded and self.more.isVisible()

    def limit(self, px: int) -> None:
        """An expanded text takes at most ``px`` (never fewer than its first lines), so the
        message above keeps its room; the whole text is on hover."""
        line = self.label.fontMetrics().lineSpacing()
        self._limit = max(px // line, COMPACT_LINES) * line  # whole lines, never half of one
        self._fit()

    def _fit(self) -> None:
        cap = COMPACT_LINES * self.label.fontMetrics().lineSpacing()
        width = self.label.width()
        long = self._compact and width > 0 and self.label.heightForWidth(width) > cap
        shorten = long and not self._expanded
        limited = long and self._expanded and self.label.heightForWidth(width) > self._limit
        self.label.setMaximumHeight(cap if shorten else self._limit if limited else UNCAPPED)
        self.label.setToolTip(self.label.text() if shorten or limited else "")
        self.more.setVisible(long)
        self.more.setText("More" if shorten else "Less")
        self.more.setToolTip("Show the whole message" if shorten else "Show its first lines")
