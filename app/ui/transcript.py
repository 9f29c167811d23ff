"""The conversation so far, rendered from Markdown (code blocks on a tinted background)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtGui import QColor, QFontDatabase, QTextBlockFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import QTextBrowser, QWidget

from app.core.conversations import ChatMessage
from app.ui.theme import CODE_BACKGROUND

WELCOME = (
    "### New chat\n\n"
    "Ask something. The **speculative** answer streams below with every token coloured by "
    "how it was produced (hover a token for details); the **baseline** pane answers the same "
    "prompt with the target alone, so you can compare speed and text.\n\n"
    "Enter sends, Shift+Enter adds a line."
)
NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


def _meta(message: ChatMessage) -> str:
    stats = message.stats
    bits = []
    if "spec_tok_s" in stats:
        bits.append(f"{stats['spec_tok_s']:.1f} tok/s")
    if stats.get("verdict"):
        bits.append(str(stats["verdict"]))
    if stats.get("stopped"):
        bits.append("stopped")
    return f" · {' · '.join(bits)}" if bits else ""


def conversation_markdown(messages: Sequence[ChatMessage], pending: bool = False) -> str:
    parts = []
    for message in messages:
        if message.role == "system":
            continue
        header = f"**{NAMES.get(message.role, message.role)}**"
        if message.role == "assistant":
            header += _meta(message)
        parts.append(f"{header}\n\n{message.content.strip() or '*(empty answer)*'}")
    if pending:
        parts.append("**Assistant**\n\n*answering… (streaming in the panes below)*")
    return "\n\n---\n\n".join(parts)


class Transcript(QTextBrowser):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setOpenExternalLinks(True)
        self._dark = False
        self._shown: tuple[Sequence[ChatMessage], bool] = ((), False)

    def set_dark(self, dark: bool) -> None:
        if dark != self._dark:
            self._dark = dark
            self.show_messages(*self._shown)

    def show_messages(self, messages: Sequence[ChatMessage], pending: bool = False) -> None:
        self._shown = (messages, pending)
        text = conversation_markdown(messages, pending)
        self.setMarkdown(text or WELCOME)
        self._tint_code_blocks()
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _tint_code_blocks(self) -> None:
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        block = self.document().begin()
        cursor = QTextCursor(self.document())
        while block.isValid():
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                tinted = QTextBlockFormat(fmt)
                tinted.setBackground(QColor(CODE_BACKGROUND[self._dark]))
                tinted.setLeftMargin(8)
                cursor.setPosition(block.position())
                cursor.setBlockFormat(tinted)
                cursor.movePosition(
                    QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor
                )
                char = cursor.charFormat()
                char.setFont(mono)
                cursor.mergeCharFormat(char)
            block = block.next()
