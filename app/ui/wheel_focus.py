"""Value fields that a passing mouse wheel does not change.

In a scrolled panel the wheel is for scrolling: a combo box or spin box under the pointer
would otherwise take the wheel and change (and save) its value. These fields take the wheel
only once they have focus (a click or Tab); until then the wheel scrolls the panel.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget


class _WheelNeedsFocus(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget):
            return False
        if watched.hasFocus():
            return False
        area = _scroll_area_of(watched)
        if area is not None:
            QApplication.sendEvent(area.verticalScrollBar(), event)
        return True


def _scroll_area_of(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


def wheel_needs_focus(*widgets: QWidget) -> None:
    """The wheel changes these fields only while they have focus; else it scrolls."""
    for widget in widgets:
        widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # a wheel gives no focus either
        widget.installEventFilter(_WheelNeedsFocus(widget))
