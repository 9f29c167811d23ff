"""The conversation: every message rendered from Markdown, answers coloured by token kind.

Each message is inserted on its own, so its place in the document is known. An assistant
message that carries its token kinds (``stats["kinds"]``, run lengths over the characters of
its text) is coloured after rendering: the Markdown source is aligned with the rendered
text (markup characters have no counterpart), and every rendered character takes the kind
of the source character it came from. Hovering a coloured character names its kind; for
the answer just streamed the full token detail is shown. Line breaks inside paragraphs are
kept (poems and lists do not run together), except inside code blocks, which keep theirs.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from PySide6.QtCore import QByteArray, QEvent, QUrl
from PySide6.QtGui import (
    QColor,
    QFontDatabase,
    QHelpEvent,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QTextBrowser, QToolTip, QWidget

from app.engine.events import TextTail, TokenEvent, TokenKind
from app.store.conversations import ChatMessage
from app.ui.palette import KIND_LABELS, kind_format
from app.ui.theme import CODE_BACKGROUND
from app.ui.token_view import token_tooltip
from app.workers.chat_session import CODE_KINDS, unfinished

WELCOME = (
    "### New chat\n\n"
    "Ask something. The answer appears here, every token coloured by how it was produced "
    "(hover a token for details). Under it, the token stream and the **target-only** "
    "answer to the same prompt compare speed and text.\n\n"
    "Enter sends, Shift+Enter adds a line."
)
NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
STOP_WORDS = {
    "eog": "finished",
    "max_tokens": "cut off at Max tokens",
    "stop_string": "stop string",
    "cancelled": "stopped",
    "context_full": "context full",
}


def char_kinds(runs: object, length: int) -> list[TokenKind] | None:
    """Per-character kinds from stored runs; None when they do not fit the text."""
    if not isinstance(runs, list):
        return None
    kinds: list[TokenKind] = []
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and run[0] in CODE_KINDS):
            return None
        count = run[1]
        if not isinstance(count, int) or count < 0 or len(kinds) + count > length:
            return None
        kinds += [CODE_KINDS[run[0]]] * count
    return kinds if len(kinds) == length else None


_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
NO_BREAK_SPACE = "\u00a0"


def keep_line_breaks(markdown: str) -> str:
    """Hard line breaks for single newlines outside code fences (Markdown joins them), and
    the indentation of lines outside fences as no-break spaces (Markdown drops it, so code
    pasted into a message lost its shape); list items and the lines under them keep theirs."""
    lines = markdown.split("\n")
    fenced = in_list = False
    out = []
    for index, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and stripped:
            if _LIST_ITEM.match(line):
                in_list = True
            elif stripped != line and not in_list:
                indent = line[: len(line) - len(stripped)].replace("\t", "    ")
                line = NO_BREAK_SPACE * len(indent) + stripped
            elif stripped == line:
                in_list = False
        following = lines[index + 1] if index + 1 < len(lines) else ""
        joins = line.strip() and following.strip() and not fenced
        if joins and not stripped.startswith(("```", "~~~")) and not line.endswith("  "):
            line += "  "
        out.append(line)
    return "\n".join(out)


def align(source: str, rendered: str) -> list[int]:
    """For each source character, the index of the rendered character it became (-1: markup)."""
    mapping = [-1] * len(source)
    j = 0
    for i, char in enumerate(source):
        if j >= len(rendered):
            break
        shown = rendered[j]
        if char == shown or (char.isspace() and shown.isspace()):
            mapping[i] = j
            j += 1
    return mapping


def stats_line(stats: dict[str, object]) -> str:
    bits = []
    if isinstance(stats.get("tokens"), int):
        bits.append(f"{stats['tokens']} tokens")
    if isinstance(stats.get("spec_tok_s"), int | float):
        bits.append(f"{stats['spec_tok_s']:.1f} tok/s")
    drafted, accepted = stats.get("drafted"), stats.get("accepted")
    if isinstance(drafted, int) and isinstance(accepted, int):
        bits.append(f"accepted {accepted}/{drafted} drafted" if drafted else "nothing drafted")
    continued = stats.get("continued")
    if isinstance(continued, int) and not isinstance(continued, bool) and continued > 0:
        bits.append("continued" if continued == 1 else f"continued {continued}×")
    stop = stats.get("stop_reason")
    if stats.get("interrupted"):
        bits.append("cut off: the engine stopped")
    elif stats.get("stopped"):
        bits.append("stopped")
    elif isinstance(stop, str):
        bits.append(STOP_WORDS.get(stop, stop))
    pair = stats.get("pair")
    if isinstance(pair, str) and pair:
        bits.append(pair)
    return " · ".join(bits)


def _plain_block(cursor: QTextCursor) -> None:
    """A new paragraph that inherits nothing (not the code fence, not the rule above it)."""
    cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())


def _open_code_fence(cursor: QTextCursor, markdown: str) -> None:
    """``insertMarkdown`` merges the first block it makes into the cursor's plain block, so
    an answer that opens with a code fence lost its first line from the block: the cursor's
    block becomes that code block first."""
    first = markdown.lstrip(" ").split("\n", 1)[0]
    if not first.startswith(("```", "~~~")):
        return
    code = QTextBlockFormat()
    code.setNonBreakableLines(True)
    code.setProperty(QTextFormat.Property.BlockCodeFence, first[0])
    language = first.lstrip(first[0]).strip()
    if language:
        code.setProperty(QTextFormat.Property.BlockCodeLanguage, language)
    cursor.setBlockFormat(code)


@dataclass
class _Coloured:
    """Where one coloured answer sits in the document, and what each character was."""

    start: int  # document position of the rendered body
    positions: list[int]  # document position of each coloured rendered character
    kinds: list[TokenKind]
    tokens: list[TokenEvent | None]


class Transcript(QTextBrowser):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setOpenExternalLinks(True)
        self.viewport().setMouseTracking(True)
        self._dark = False
        self._style = "colour"
        self._shown: tuple[Sequence[ChatMessage], bool, Sequence[TokenEvent | TextTail], bool] = (
            (),
            False,
            (),
            False,
        )
        self._coloured: list[_Coloured] = []

    def loadResource(self, kind: int, name: QUrl | str) -> object:  # noqa: N802 - Qt override
        """Nothing is loaded for the text shown here: messages come from files and models, and
        an image such as ``![x](/dev/zero)`` would otherwise be read until memory runs out.
        An empty (but valid) answer, since on a null one QTextDocument reads the file itself."""
        return QByteArray()

    def set_dark(self, dark: bool) -> None:
        if dark != self._dark:
            self._dark = dark
            self.show_messages(*self._shown)

    def set_style(self, style: str) -> None:
        if style != self._style:
            self._style = style
            self.show_messages(*self._shown)

    def show_messages(
        self,
        messages: Sequence[ChatMessage],
        pending: bool = False,
        last_events: Sequence[TokenEvent | TextTail] = (),
        continuing: bool = False,
    ) -> None:
        """Render the conversation; ``last_events`` give the last answer's token detail."""
        self._shown = (messages, pending, last_events, continuing)
        self._coloured = []
        self.clear()
        visible = [m for m in messages if m.role != "system"]
        if not visible and not pending:
            self.setMarkdown(WELCOME)
        cursor = QTextCursor(self.document())
        for index, message in enumerate(visible):
            if index:
                self._rule(cursor)
            cursor.insertMarkdown(f"**{NAMES.get(message.role, message.role)}**")
            _plain_block(cursor)
            start = cursor.position()
            body = message.content.strip("\n") or "*(empty answer)*"
            _open_code_fence(cursor, body)
            cursor.insertMarkdown(keep_line_breaks(body))
            if message.role == "assistant":
                last = index == len(visible) - 1
                self._colour(message, start, cursor.position(), last_events if last else ())
                line = stats_line(message.stats)
                if last and continuing:
                    line += " — continuing… (the token stream is below)"
                elif last and unfinished(message.stats) and not pending:
                    line += " — Continue writes more"
                if line:
                    _plain_block(cursor)
                    cursor.insertHtml(f"<span style='font-size: small;'>{escape(line)}</span>")
        if pending:
            if visible:
                self._rule(cursor)
            cursor.insertMarkdown("**Assistant**")
            _plain_block(cursor)
            cursor.insertMarkdown("*answering… (the token stream is below)*")
        self._tint_code_blocks()
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    @staticmethod
    def _rule(cursor: QTextCursor) -> None:
        _plain_block(cursor)
        cursor.insertHtml("<hr/>")
        _plain_block(cursor)

    # --- colouring -----------------------------------------------------------------------

    def _colour(
        self,
        message: ChatMessage,
        start: int,
        end: int,
        events: Sequence[TokenEvent | TextTail],
    ) -> None:
        source = message.content.strip("\n")
        offset = len(message.content) - len(message.content.lstrip("\n"))
        kinds = char_kinds(message.stats.get("kinds"), len(message.content))
        if kinds is None or self._style == "off":
            return
        kinds = kinds[offset : offset + len(source)]
        tokens: list[TokenEvent | None] = []
        for event in events:
            text = event.piece if isinstance(event, TokenEvent) else event.text
            tokens += [event if isinstance(event, TokenEvent) else None] * len(text)
        if len(tokens) < len(message.content) and message.content.endswith(
            "".join(e.piece if isinstance(e, TokenEvent) else e.text for e in events)
        ):  # a continued answer: the stream is its last part
            padding: list[TokenEvent | None] = [None] * (len(message.content) - len(tokens))
            tokens = padding + tokens
        tokens = tokens[offset : offset + len(source)] if len(tokens) >= len(source) else []
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        rendered = cursor.selectedText()
        units = [0]
        for char in rendered:
            units.append(units[-1] + (2 if ord(char) > 0xFFFF else 1))
        mapping = align(source, rendered)
        shown = _Coloured(start, [], [], [])
        for i, j in enumerate(mapping):
            if j >= 0 and not rendered[j].isspace():
                shown.positions.append(start + units[j])
                shown.kinds.append(kinds[i])
                shown.tokens.append(tokens[i] if tokens else None)
        self._coloured.append(shown)
        positions, kinds_shown = shown.positions, shown.kinds
        first = 0
        for k in range(1, len(positions) + 1):
            same_run = k < len(positions) and kinds_shown[k] is kinds_shown[first]
            if same_run and positions[k] == positions[k - 1] + 1:
                continue
            self._paint(positions[first], positions[k - 1] + 1, kinds_shown[first])
            first = k

    def _paint(self, begin: int, end: int, kind: TokenKind) -> None:
        fmt = kind_format(kind, self._style, self._dark)
        if fmt == QTextCharFormat():
            return
        cursor = QTextCursor(self.document())
        cursor.setPosition(begin)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(fmt)

    def kind_at(self, position: int) -> tuple[TokenKind, TokenEvent | None] | None:
        for shown in self._coloured:
            index = bisect_right(shown.positions, position) - 1
            if index >= 0 and shown.positions[index] == position:
                return shown.kinds[index], shown.tokens[index]
        return None

    def viewportEvent(self, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            cursor = self.cursorForPosition(event.pos())
            position = cursor.position()
            if event.pos().x() < self.cursorRect(cursor).x() and position > 0:
                position -= 1
            found = self.kind_at(position)
            if found is not None:
                kind, token = found
                text = token_tooltip(token) if token else f"<b>{escape(KIND_LABELS[kind])}</b>"
                QToolTip.showText(event.globalPos(), text, self.viewport())
                return True
        return super().viewportEvent(event)

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
                char = QTextCharFormat()  # the font only: token colours stay
                char.setFontFamilies([mono.family()])
                cursor.mergeCharFormat(char)
            block = block.next()
