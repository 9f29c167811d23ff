"""No file is opened for an image or a link in a message, at start or while an answer streams.

Qt loads an image it cannot get from the widget by its name, so ``![x](/path/to/a/fifo)`` in an
answer hung the start for good, ``![x](/dev/stdin)`` hung a start from a terminal, and one large
PNG named ten times with different numbers of slashes cost gigabytes. Its Markdown import also
read a file named by an HTML ``background`` or a stylesheet ``@import`` on its own.

Every such name is planted here, pointing into one folder watched with inotify (IN_OPEN and
IN_ACCESS): a FIFO, the file standing in for standard input, a large PNG, a small one, a
stylesheet, named as paths, ``file:`` URLs with one to five slashes, relative names, ``~``,
``qrc:`` and ``:/``, in Markdown and in raw HTML. The real window opens a stored conversation
holding them, then the same text streams as an answer and is rendered when it ends. Nothing in
the folder is opened, the FIFO never gets a reader, each image shows as its alt text with its
address in the tooltip, and a link's title (rich text to a tooltip) shows as plain text.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent, QImage, QTextCursor
from PySide6.QtWidgets import QApplication, QToolTip

from app.engine.events import TokenEvent, TokenKind
from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.ui.message_text import IMAGE_TEXT, address_shown

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify, FIFOs")
IN_ACCESS, IN_OPEN = 0x01, 0x20
UNBLOCK = """
import os, sys, time
while True:
    try:
        os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass
    time.sleep(0.2)
"""


class FolderWatch:
    """Every open or read of a file in one folder since the watch began (Linux inotify)."""

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        watched = libc.inotify_add_watch(self.fd, os.fsencode(folder), IN_OPEN | IN_ACCESS)
        if self.fd < 0 or watched < 0:
            raise OSError(ctypes.get_errno(), f"inotify on {folder}")
        self.seen: list[str] = []

    def touched(self) -> list[str]:
        try:
            while data := os.read(self.fd, 65536):
                at = 0
                while at < len(data):
                    _, mask, _, length = struct.unpack_from("iIII", data, at)
                    name = data[at + 16 : at + 16 + length].rstrip(b"\0").decode()
                    self.seen.append(
                        f"{name or '(the folder)'} {'open' if mask & IN_OPEN else 'read'}"
                    )
                    at += 16 + length
        except BlockingIOError:
            pass
        return self.seen

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class Planted:
    folder: Path
    fifo: Path
    markdown: str
    images: dict[str, str]  # alt text -> the address it names


def _names(folder: Path) -> dict[str, str]:
    """Alt text -> address: every form of name that reaches a file in ``folder``."""
    absolute = str(folder)
    names = {
        "fifo": f"{absolute}/fifo",
        "stdin": "/dev/stdin",
        "small": f"{absolute}/small.png",
        "rel": "small.png",
        "dotrel": "./small.png",
        "home": "~/small.png",
        "qrc": "qrc:/small.png",
        "colon": ":/small.png",
        "fifo-url": f"file://{absolute}/fifo",
    }
    for slashes in range(1, 6):
        names[f"big{slashes}"] = "/" * slashes + absolute.lstrip("/") + "/big.png"
        names[f"url{slashes}"] = "file:" + "/" * slashes + absolute.lstrip("/") + "/big.png"
    return names


@pytest.fixture
def planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Planted, FolderWatch]]:
    folder = tmp_path / "planted"
    folder.mkdir()
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    stdin = folder / "stdin"
    stdin.write_bytes(bytes(4096))
    QImage(8, 8, QImage.Format.Format_RGB32).save(str(folder / "small.png"))
    big = QImage(6000, 6000, QImage.Format.Format_Mono)  # 36 megapixels: 144 MB once decoded
    big.fill(0)
    big.save(str(folder / "big.png"))
    (folder / "style.css").write_text("p { color: red; }")
    monkeypatch.chdir(folder)  # relative names resolve into the folder
    monkeypatch.setenv("HOME", str(folder))  # were "~" expanded, it would name the folder
    for name in ("SPECDECK_CACHE_DIR", "SPECDECK_MODEL_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "elsewhere" / name))
    images = _names(folder)
    lines = [f"![{alt}]({address})" for alt, address in images.items()]
    lines += [
        f'<img src="{folder}/small.png" alt="html-img"/>',
        f'<table background="{folder}/small.png"><tr><td background="{folder}/big.png">cell'
        "</td></tr></table>",
        f'<p style="background-image: url({folder}/small.png)">styled</p>',
        f"<style>@import url({folder}/style.css);</style>",
        f'<link rel="stylesheet" href="{folder}/style.css"/>',
        f"[a link]({folder}/fifo) and [another](file://{folder}/small.png)",
        f"[titled](https://example.com \"<img src='{folder}/fifo'>\")",  # a rich-text tooltip
    ]
    images["html-img"] = f"{folder}/small.png"
    markdown = "Look:\n\n" + "\n\n".join(lines) + "\n\nThe end."
    # Standard input is a file in the folder while the test runs: opening /dev/stdin shows.
    stdin_fd = os.open(stdin, os.O_RDONLY)
    saved = os.dup(0)
    os.dup2(stdin_fd, 0)
    # A reader of the FIFO would hang with the GIL held, past any timeout; this process
    # opens and closes its other end whenever someone waits on it, so such a test fails.
    unblock = subprocess.Popen([sys.executable, "-c", UNBLOCK, str(fifo)])
    watch = FolderWatch(folder)
    try:
        yield Planted(folder, fifo, markdown, images), watch
    finally:
        watch.close()
        unblock.kill()
        unblock.wait()
        os.dup2(saved, 0)
        os.close(saved)
        os.close(stdin_fd)


def _fifo_has_no_reader(fifo: Path) -> bool:
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as error:
        return error.errno == errno.ENXIO
    return False


def _image_texts(transcript) -> list[tuple[str, str, int]]:  # noqa: ANN001
    """(text, tooltip, middle position) of everything shown for an image."""
    found = []
    block = transcript.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.hasProperty(IMAGE_TEXT):
                middle = fragment.position() + fragment.length() // 2
                found.append((fragment.text(), fmt.toolTip(), middle))
            it += 1
        block = block.next()
    return found


def _hover_text(transcript, position: int) -> str:  # noqa: ANN001
    """The tooltip a person sees with the pointer over ``position``."""
    cursor = QTextCursor(transcript.document())
    cursor.setPosition(position)
    transcript.setTextCursor(cursor)
    transcript.ensureCursorVisible()
    rect = transcript.cursorRect(cursor)
    point = QPoint(rect.x() + 1, rect.center().y())
    viewport = transcript.viewport()
    QToolTip.hideText()
    event = QHelpEvent(QEvent.Type.ToolTip, point, viewport.mapToGlobal(point))
    QApplication.sendEvent(viewport, event)
    return QToolTip.text()


def _check_shown(transcript, planted: Planted) -> None:  # noqa: ANN001
    shown = _image_texts(transcript)
    texts = [text for text, _, _ in shown]
    for alt, address in planted.images.items():
        assert f"[image: {alt}]" in texts, f"{alt} is not shown as its alt text"
        tip = next(tip for text, tip, _ in shown if text == f"[image: {alt}]")
        assert f"Image not shown: {escape(address_shown(address))}" in tip
    text, _, middle = next(s for s in shown if s[0] == "[image: fifo]")
    hover = _hover_text(transcript, middle)
    assert f"{planted.folder}/fifo" in hover, f"hovering {text} showed {hover!r}"
    assert "The end." in transcript.toPlainText()
    titled = transcript.toPlainText().index("titled") + 2
    hover = _hover_text(transcript, titled)
    assert escape(f"<img src='{planted.folder}/fifo'>") in hover  # shown as text, not loaded


def _settle(qapp, transcript) -> None:  # noqa: ANN001
    """Lay out and paint everything, as a person scrolling through it would see it."""
    qapp.processEvents()
    bar = transcript.verticalScrollBar()
    for value in range(0, bar.maximum() + bar.pageStep(), max(bar.pageStep(), 1)):
        bar.setValue(value)
        transcript.viewport().grab()
    qapp.processEvents()


def test_images_in_a_stored_conversation_show_as_text_and_open_no_file(
    make_window, qapp, planted: tuple[Planted, FolderWatch]
) -> None:  # noqa: ANN001
    plant, watch = planted
    question = ChatMessage("user", plant.markdown)
    answer = ChatMessage("assistant", plant.markdown, stats={"tokens": 9})
    ConversationStore().save(Conversation("planted", "Planted", 1.0, 2.0, (question, answer)))
    window = make_window()
    transcript = window.chat.transcript
    _settle(qapp, transcript)
    assert window.conversation.id == "planted"
    assert watch.touched() == [], "a message's image or link opened a file at start"
    _check_shown(transcript, plant)
    _settle(qapp, transcript)
    assert watch.touched() == [], "a message's image or link opened a file"
    assert _fifo_has_no_reader(plant.fifo)


def test_images_in_a_streamed_answer_show_as_text_and_open_no_file(
    make_window, qapp, planted: tuple[Planted, FolderWatch]
) -> None:  # noqa: ANN001
    plant, watch = planted
    window = make_window()
    transcript = window.chat.transcript
    question = ChatMessage("user", "show me")
    transcript.show_messages([question], pending=True)
    text = plant.markdown
    events = [
        TokenEvent(i, 0, text[at : at + 7], TokenKind.TARGET, i)
        for i, at in enumerate(range(0, len(text), 7))
    ]
    for at in range(0, len(events), 20):  # as the chat's timer shows them
        transcript.stream(events[at : at + 20])
        transcript.flush("answering…")
        _settle(qapp, transcript)
    assert watch.touched() == [], "streamed text opened a file"
    kinds = [["t", len(text)]]
    answer = ChatMessage("assistant", text, stats={"tokens": len(events), "kinds": kinds})
    transcript.show_messages([question, answer], last_events=events)  # the answer ended
    _settle(qapp, transcript)
    assert watch.touched() == [], "the finished answer opened a file"
    _check_shown(transcript, plant)
    _settle(qapp, transcript)
    assert watch.touched() == [], "the finished answer opened a file"
    assert _fifo_has_no_reader(plant.fifo)


def test_the_colours_after_an_image_stay_with_their_characters(qapp) -> None:  # noqa: ANN001
    from app.ui.transcript import Transcript

    head, tail = "See ![a diagram](/tmp/x.png) here, ", "then the accepted words."
    kinds = [["t", len(head)], ["a", len(tail)]]
    answer = ChatMessage("assistant", head + tail, stats={"tokens": 9, "kinds": kinds})
    transcript = Transcript()
    transcript.show_messages([ChatMessage("user", "a picture?"), answer])
    qapp.processEvents()
    text = transcript.toPlainText()
    assert "See [image: a diagram] here, then the accepted words." in text
    document = transcript.document()
    start = text.index("then the accepted")
    for offset, char in enumerate("then the accepted words."):
        if char != " ":
            found = transcript.kind_at(start + offset)
            assert found is not None and found[0] is TokenKind.ACCEPTED, (offset, char)
            assert document.characterAt(start + offset) == char
    assert transcript.kind_at(text.index("See")) is not None
    assert transcript.kind_at(text.index("[image:") + 3) is None  # the image's text is no token
    transcript.close()
