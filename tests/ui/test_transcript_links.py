"""Links in answers: a web link opens only after its address is shown (as plain text) and
confirmed; file:, relative, javascript: and smb: links never reach the desktop's URL handler
and never blank the transcript. The URL handlers registered here stand in for the desktop."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox

from app.store.conversations import ChatMessage, Conversation, ConversationStore
from tests.ui.transcript_helpers import click_anchor

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

SCHEMES = ("http", "https", "file", "javascript", "smb")
ANSWER = (
    "Some links:\n"
    "[web page](https://example.com/a?q=<b>x</b>)\n"
    "[local file](file:///etc/hostname)\n"
    "[relative](notes.md)\n"
    "[script](javascript:alert(1))\n"
    "[share](smb://fileserver/share)\n"
    "The end."
)


class Desktop(QObject):
    """Receives what QDesktopServices.openUrl would hand to the desktop."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url.toString())


@pytest.fixture
def desktop() -> Iterator[Desktop]:
    receiver = Desktop()
    for scheme in SCHEMES:
        QDesktopServices.setUrlHandler(scheme, receiver, "open")
    yield receiver
    for scheme in SCHEMES:
        QDesktopServices.unsetUrlHandler(scheme)


def _box(window) -> QMessageBox | None:  # noqa: ANN001
    boxes = [b for b in window.findChildren(QMessageBox, "linkBox") if b.isVisible()]
    return boxes[0] if boxes else None


def test_only_web_links_open_and_only_after_the_address_is_shown(
    make_window, qtbot, desktop: Desktop
) -> None:  # noqa: ANN001
    question = ChatMessage("user", "links please")
    answer = ChatMessage("assistant", ANSWER, stats={"tokens": 9})
    ConversationStore().save(Conversation("links", "Links", 1.0, 2.0, (question, answer)))
    window = make_window()
    transcript = window.chat.transcript
    before = transcript.toPlainText()
    assert "local file" in before and "The end." in before

    for text, address in (
        ("local file", "file:///etc/hostname"),
        ("relative", "notes.md"),
        ("script", "javascript:alert(1)"),
        ("share", "smb://fileserver/share"),
    ):
        click_anchor(qtbot, transcript, text)
        qtbot.waitUntil(lambda: _box(window) is not None, timeout=2000)
        box = _box(window)
        assert box is not None and box.textFormat() == Qt.TextFormat.PlainText
        assert "only web links" in box.text() and address in box.text()
        box.button(QMessageBox.StandardButton.Ok).click()
        qtbot.waitUntil(lambda: _box(window) is None, timeout=2000)
        assert transcript.toPlainText() == before, f"{text} changed the transcript"
    assert desktop.opened == []

    click_anchor(qtbot, transcript, "web page")
    qtbot.waitUntil(lambda: _box(window) is not None, timeout=2000)
    box = _box(window)
    assert box is not None and box.textFormat() == Qt.TextFormat.PlainText
    assert "https://example.com/a?q=%3Cb%3Ex%3C/b%3E" in box.text()  # the address, encoded
    assert desktop.opened == []  # nothing opens before the person agrees
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert desktop.opened == []
    click_anchor(qtbot, transcript, "web page")
    qtbot.waitUntil(lambda: _box(window) is not None, timeout=2000)
    box = _box(window)
    assert box is not None
    box.button(QMessageBox.StandardButton.Open).click()
    assert desktop.opened == ["https://example.com/a?q=%3Cb%3Ex%3C/b%3E"]
    assert transcript.toPlainText() == before


def test_a_message_cannot_forge_the_transcripts_own_links(make_window, qtbot, desktop) -> None:  # noqa: ANN001
    window = make_window()
    transcript = window.chat.transcript
    forged = f"[more]({transcript._scheme.replace('specdeck-', 'specdeck-0')}:earlier)"
    transcript.show_messages([ChatMessage("user", "q"), ChatMessage("assistant", forged)])
    click_anchor(qtbot, transcript, "more")
    qtbot.waitUntil(lambda: _box(window) is not None, timeout=2000)
    box = _box(window)
    assert box is not None and "only web links" in box.text()
    box.button(QMessageBox.StandardButton.Ok).click()
    assert desktop.opened == []
