"""A read-only text pane that shows an answer token by token.

Tokens are queued as they arrive and painted in batches (``flush``), each run of same-kind
tokens with one ``insertText`` call. The document position where every token starts is
kept, so hovering a character finds its token (tooltip: kind, draft/target probability,
step, rejected draft token) and the first divergence can be highlighted with an extra
selection without touching the token formats.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from html import escape

from PySide6.QtCore import QEvent, QMimeData
from PySide6.QtGui import QFontDatabase, QHelpEvent, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QToolTip, QWidget

from app.engine.events import TextTail, TokenEvent, TokenKind
from app.ui.message_text import copied, insert_bounded, joined_text
from app.ui.palette import KIND_LABELS, divergence_format, kind_format


def _units(text: str) -> int:
    """Length in UTF-16 code units, the unit of QTextDocument positions."""
    return len(text.encode("utf-16-le")) // 2


def _prob(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def token_tooltip(event: TokenEvent) -> str:
    lines = [f"<b>{escape(KIND_LABELS[event.kind])}</b>"]
    lines.append(f"token #{event.index} (id {event.token_id}) · step {event.step}")
    if event.kind is not TokenKind.TARGET or event.draft_prob is not None:
        lines.append(f"draft p = {_prob(event.draft_prob)} · target p = {_prob(event.target_prob)}")
    else:
        lines.append(f"target p = {_prob(event.target_prob)}")
    if event.rejected_piece is not None or event.rejected_token is not None:
        piece = escape(repr(event.rejected_piece or ""))
        lines.append(f"rejected draft token: <code>{piece}</code> (id {event.rejected_token})")
    return "<br>".join(lines)


class TokenView(QPlainTextEdit):
    def __init__(self, parent: QWidget | None = None, *, style: str = "colour") -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.viewport().setMouseTracking(True)
        self._style = style
        self._dark = False
        self._events: list[TokenEvent] = []
        self._starts: list[int] = []
        self._tail = ""
        self._length = 0
        self._pending: list[TokenEvent | TextTail] = []
        self._divergence: int | None = None
        # a stored answer: its text and the kind of each character (no token detail)
        self._stored: tuple[str, list[TokenKind] | None] | None = None
        self._stored_mark: tuple[int, int] | None = None  # characters marked in it
        # where a long line was cut into paragraphs (``insert_bounded``): offsets in the text
        self._cuts: list[int] = []
        self._chars = 0  # characters of text shown (the cuts not counted)

    # --- content -------------------------------------------------------------------------

    @property
    def events(self) -> list[TokenEvent]:
        return self._events

    @property
    def colour_style(self) -> str:
        return self._style

    def text(self) -> str:
        """The text shown, a long line whole (not as cut for layout)."""
        return joined_text(self.document()) if self._cuts else self.toPlainText()

    def createMimeDataFromSelection(self) -> QMimeData:  # noqa: N802 - Qt override
        joined = copied(self.textCursor().selection()) if self._cuts else None
        return joined if joined is not None else super().createMimeDataFromSelection()

    def _position(self, offset: int, text: str, *, end: bool = False) -> int:
        """The document position of character ``offset`` of ``text`` (``self.text()``), or
        with ``end`` the position after the character before it."""
        cuts = (bisect_left if end else bisect_right)(self._cuts, offset)
        return _units(text[:offset]) + cuts

    def stream(self) -> list[TokenEvent | TextTail]:
        """Every painted token, then the released tail: the answer's text in order."""
        events: list[TokenEvent | TextTail] = list(self._events)
        return [*events, TextTail(self._tail)] if self._tail else events

    def setPlaceholderText(self, placeholderText: str) -> None:  # noqa: N802, N803 - Qt override
        super().setPlaceholderText(placeholderText)
        # Qt repaints only when the placeholder appears or goes: a new text over an empty
        # view stayed unpainted ("(2 s)" while the wait had reached 8 s)
        self.viewport().update()

    def clear_tokens(self, placeholder: str = "") -> None:
        self._events.clear()
        self._starts.clear()
        self._pending.clear()
        self._tail = ""
        self._length = 0
        self._cuts = []
        self._chars = 0
        self._divergence = None
        self._stored = None
        self._stored_mark = None
        self.setExtraSelections([])
        self.clear()
        self.setPlaceholderText(placeholder)

    def show_text(self, text: str, kinds: Sequence[TokenKind] | None = None) -> None:
        """A stored answer: its text, coloured by the stored kind of each character when the
        kinds fit it; there is no token detail to hover."""
        self.clear_tokens()
        self._stored = (
            text,
            list(kinds) if kinds is not None and len(kinds) == len(text) else None,
        )
        self._paint_stored()

    def _paint_stored(self) -> None:
        if self._stored is None:
            return
        text, kinds = self._stored
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.beginEditBlock()
        start = 0
        for end in range(1, len(text) + 1):
            if end < len(text) and (kinds is None or kinds[end] is kinds[start]):
                continue
            kind = kinds[start] if kinds is not None else TokenKind.TARGET
            fmt = kind_format(kind, self._style, self._dark)
            self._cuts += [start + cut for cut in insert_bounded(cursor, text[start:end], fmt)]
            start = end
        cursor.endEditBlock()
        self._chars = len(text)
        self._length = _units(text) + len(self._cuts)

    def queue(self, events: Iterable[object]) -> None:
        self._pending.extend(e for e in events if isinstance(e, TokenEvent | TextTail))

    def flush(self) -> int:
        """Paint queued tokens; returns how many were painted."""
        if not self._pending:
            return 0
        pending, self._pending = self._pending, []
        bar = self.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        self._paint(pending)
        if at_bottom:
            bar.setValue(bar.maximum())
        return len(pending)

    def _paint(self, events: list[TokenEvent | TextTail]) -> None:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.beginEditBlock()
        run_kind: TokenKind | None = None
        run_text: list[str] = []
        run_tokens: list[int] = []  # where each of the run's tokens starts in its text

        def emit() -> None:
            if run_text:
                text = "".join(run_text)
                fmt = kind_format(run_kind or TokenKind.TARGET, self._style, self._dark)
                cuts = insert_bounded(cursor, text, fmt)
                if cuts:  # the run's tokens start one position later for each cut before
                    first = len(self._starts) - len(run_tokens)
                    for number, at in enumerate(run_tokens):
                        self._starts[first + number] += bisect_right(cuts, at)
                    self._length += len(cuts)
                    self._cuts += [self._chars + cut for cut in cuts]
                self._chars += len(text)
                run_text.clear()
            run_tokens.clear()

        for event in events:
            if isinstance(event, TextTail):
                emit()
                run_kind = None
                run_text.append(event.text)
                self._tail += event.text
                self._length += _units(event.text)
                continue
            if event.kind is not run_kind:
                emit()
                run_kind = event.kind
            run_tokens.append(sum(len(part) for part in run_text))
            self._starts.append(self._length)
            self._events.append(event)
            run_text.append(event.piece)
            self._length += _units(event.piece)
        emit()
        cursor.endEditBlock()

    def set_style(self, style: str) -> None:
        """Repaint everything in another colouring style."""
        if style == self._style:
            return
        self._style = style
        self._repaint()

    def set_dark(self, dark: bool) -> None:
        """Repaint with the text colours meant for a dark (or light) background."""
        if dark == self._dark:
            return
        self._dark = dark
        self._repaint()

    def _repaint(self) -> None:
        if self._stored is not None:
            stored, marked = self._stored, self._stored_mark
            self.clear_tokens(self.placeholderText())
            self._stored = stored
            self._paint_stored()
            if marked is not None:
                self.mark_characters(*marked)
            return
        events: list[TokenEvent | TextTail] = list(self._events)
        if self._tail:
            events.append(TextTail(self._tail))
        divergence = self._divergence
        pending = self._pending
        self.clear_tokens(self.placeholderText())
        self._pending = pending
        self._paint(events)
        if divergence is not None:
            self.mark_divergence(divergence)

    # --- divergence ----------------------------------------------------------------------

    def token_span(self, index: int) -> tuple[int, int] | None:
        if not 0 <= index < len(self._starts):
            return None
        start = self._starts[index]
        end = self._starts[index + 1] if index + 1 < len(self._starts) else self._length
        return start, max(end, start + 1) if start < self._length else end

    def mark_divergence(self, index: int | None) -> None:
        self._divergence = index
        self._highlight(self.token_span(index) if index is not None else None)

    def mark_characters(self, start: int, end: int) -> None:
        """Mark where a stored answer parts from the other (characters, not tokens)."""
        text = self.text()
        if 0 <= start < len(text):
            self._stored_mark = (start, end)
            begin = self._position(start, text)
            self._highlight((begin, self._position(max(end, start + 1), text, end=True)))

    def _highlight(self, span: tuple[int, int] | None) -> None:
        if span is None:
            self.setExtraSelections([])
            return
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.document())
        cursor.setPosition(span[0])
        cursor.setPosition(
            min(span[1], self.document().characterCount() - 1), QTextCursor.MoveMode.KeepAnchor
        )
        selection.cursor = cursor
        selection.format = divergence_format()
        self.setExtraSelections([selection])
        caret = QTextCursor(self.document())
        caret.setPosition(span[0])  # a caret, not a selection, so the highlight stays visible
        self.setTextCursor(caret)
        self.ensureCursorVisible()

    @property
    def divergence(self) -> int | None:
        return self._divergence

    # --- hover ---------------------------------------------------------------------------

    def token_at(self, position: int) -> TokenEvent | None:
        index = bisect_right(self._starts, position) - 1
        if index < 0:
            return None
        start, end = self.token_span(index) or (0, 0)
        if position >= end and index + 1 >= len(self._starts):
            return None
        return self._events[index]

    def viewportEvent(self, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            cursor = self.cursorForPosition(event.pos())
            position = cursor.position()
            if event.pos().x() < self.cursorRect(cursor).x() and position > 0:
                position -= 1  # the pointer is over the character left of the boundary
            token = self.token_at(position)
            if token is not None:
                QToolTip.showText(event.globalPos(), token_tooltip(token), self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)
