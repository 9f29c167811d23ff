"""Keeping the answer being written in view.

While text streams into a scroll area, its end stays in view, through new text and through
the area shrinking (a banner or the comparison opening above a small window), until the
person scrolls away from the end. Then a "Jump to latest" button offers the way back, and
scrolling back to the end follows again.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QAbstractScrollArea, QToolButton

from app.ui.resize_watch import ResizeWatch

AT_END_PX = 4  # this close to the end counts as at the end (a rounding of layout heights)
MARGIN_PX = 8


class StreamFollower(QObject):
    def __init__(self, area: QAbstractScrollArea) -> None:
        super().__init__(area)
        self._area = area
        self._bar = area.verticalScrollBar()
        self.following = True  # the person has not scrolled away from the end
        self.live = False  # text is streaming in
        self._moving = False  # the scroll is ours, not the person's
        self.button = QToolButton(area)
        self.button.setObjectName("jumpToLatest")
        self.button.setText("↓ Jump to latest")
        self.button.setToolTip("Scroll to the answer being written and follow it again")
        self.button.clicked.connect(self.jump)
        self.button.hide()
        self._bar.valueChanged.connect(self._moved)
        self._bar.rangeChanged.connect(self._range_changed)
        ResizeWatch(area, self._place)

    def begin(self) -> None:
        """An answer starts streaming: follow it from its start."""
        self.live = True
        self.jump()

    def end(self) -> None:
        self.live = False
        self.button.hide()

    def jump(self) -> None:
        self.following = True
        self.button.hide()
        self.to_end()

    def catch_up(self) -> None:
        """After new text: to the end again, unless the person scrolled away."""
        if self.following:
            self.to_end()

    def to_end(self) -> None:
        self._moving = True
        try:
            self._bar.setValue(self._bar.maximum())
        finally:
            self._moving = False

    def _moved(self, value: int) -> None:
        if self._moving:
            return
        self.following = value >= self._bar.maximum() - AT_END_PX
        shown = self.live and not self.following
        if shown != self.button.isVisible():
            self.button.setVisible(shown)
            self._place()

    def _range_changed(self, _low: int, _high: int) -> None:
        if self.live:
            self.catch_up()

    def _place(self) -> None:
        viewport = self._area.viewport().geometry()
        size = self.button.sizeHint()
        self.button.resize(size)
        self.button.move(
            viewport.right() - size.width() - MARGIN_PX,
            viewport.bottom() - size.height() - MARGIN_PX,
        )
        self.button.raise_()
