"""The prompt box: Enter and Ctrl+Enter send, Shift+Enter adds a line."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

MAX_HEIGHT = 110


class ChatInput(QPlainTextEdit):
    submitted = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatInput")
        self.setPlaceholderText("Message — Enter sends, Shift+Enter adds a line")
        self.setTabChangesFocus(True)
        self.setMaximumHeight(MAX_HEIGHT)
        self.setMinimumHeight(56)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                return
            plain = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
            if plain in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.ControlModifier):
                self.submit()
                return
        super().keyPressEvent(event)

    def submit(self) -> None:
        text = self.toPlainText().strip()
        if text and self.isEnabled():
            self.submitted.emit(text)
