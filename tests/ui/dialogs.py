"""Answer the modal dialogs a window opens, as a person would: the real ``QFileDialog`` and
``QMessageBox`` widgets, driven from a timer while their event loop runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from PySide6.QtCore import QCoreApplication, Qt, QTimer
from PySide6.QtWidgets import QApplication, QDialog, QFileDialog, QLineEdit, QMessageBox, QWidget

Answer = Callable[[QWidget], None]
NO_NATIVE = Qt.ApplicationAttribute.AA_DontUseNativeDialogs


class Dialogs:
    """``with Dialogs(pick(a), press("Cancel")) as seen: window.change_pair(files=True)``.

    Each modal dialog that opens gets the next answer; ``seen`` keeps each one's title (and a
    message box's text). A dialog nobody expected is closed, so a test never hangs on it."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.seen: list[str] = []
        self._timer = QTimer()
        self._timer.setInterval(30)
        self._timer.timeout.connect(self._poll)

    def __enter__(self) -> Dialogs:
        # Qt's own dialogs, never a platform's (a portal, a native window no test can drive)
        self._before = QCoreApplication.testAttribute(NO_NATIVE)
        QCoreApplication.setAttribute(NO_NATIVE, True)
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.stop()
        QCoreApplication.setAttribute(NO_NATIVE, self._before)

    def _poll(self) -> None:
        widget = QApplication.activeModalWidget()
        if widget is None or widget.property("answered"):
            return
        widget.setProperty("answered", True)
        text = widget.text() if isinstance(widget, QMessageBox) else ""
        self.seen.append(f"{widget.windowTitle()}: {text}")
        if not self.answers:
            if isinstance(widget, QDialog):
                widget.reject()
            return
        self.answers.pop(0)(widget)


def pick(path: Path | str) -> Answer:
    """Type ``path`` into a file dialog's name field and accept, as a person would
    (``selectFile`` leaves the field alone while it has the focus)."""

    def answer(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog), dialog
        name = dialog.findChild(QLineEdit, "fileNameEdit")
        assert name is not None, "not Qt's own file dialog: set AA_DontUseNativeDialogs"
        name.setText(str(path))
        dialog.accept()

    return answer


def press(label: str) -> Answer:
    """Click the message box button labelled ``label`` (mnemonic "&" ignored)."""

    def answer(box: QWidget) -> None:
        assert isinstance(box, QMessageBox), box
        for button in box.buttons():
            if button.text().replace("&", "") == label:
                button.click()
                return
        names = [b.text() for b in box.buttons()]
        box.reject()
        raise AssertionError(f"no button {label!r} in {names}")

    return answer
