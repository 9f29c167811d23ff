"""Text from outside is never markup.

Qt shows a label's, tooltip's or message box's text as HTML when it merely looks like HTML,
and its rich-text engine loads ``<img src="...">`` from local files: ``/dev/zero`` reads until
memory runs out. So text from a file, a model, a server, a path, a Hub listing or the person
is shown as plain text: in a label made with ``plain_label`` (or set ``PlainText``), escaped
where the app composes its own markup around it (``markup``, ``html.escape``), through
``tooltip`` in a tooltip (tooltips have no text format), and in a message box by ``ask``.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    return label


def markup(title: str, detail: str = "") -> str:
    """Rich text the app composes: ``title`` in bold, then ``detail``, each escaped."""
    text = f"<b>{escape(title)}</b>"
    return f"{text} {escape(detail)}" if detail else text


def tooltip(text: str) -> str:
    """A tooltip that shows ``text`` as it is: escaped inside markup Qt always takes for
    rich text, with line breaks and runs of spaces kept."""
    if not text:
        return ""
    return f"<p style='white-space:pre-wrap'>{escape(text)}</p>"


def ask(parent: QWidget | None, title: str, text: str) -> bool:
    """A Yes/No question whose text is plain text; True for Yes."""
    box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    return box.exec() == QMessageBox.StandardButton.Yes
