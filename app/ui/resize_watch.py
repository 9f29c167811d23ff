"""Do something after each resize of a widget that is not one's own."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QWidget


class ResizeWatch(QObject):
    """Calls ``then`` after each resize of ``watched``; lives as long as ``watched``."""

    def __init__(self, watched: QWidget, then: Callable[[], None]) -> None:
        super().__init__(watched)
        self._then = then
        watched.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.Resize:
            self._then()
        return False
