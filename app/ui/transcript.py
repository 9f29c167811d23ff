"""The conversation: every message rendered from Markdown, answers coloured by token kind.

Each message is inserted on its own, so its place in the document is known. An assistant
message that carries its token kinds (``stats["kinds"]``, run lengths over the characters of
its text) is coloured after rendering: the Markdown source is aligned with the rendered
text (markup characters have no counterpart), and every rendered character takes the kind
of the source character it came from. Hovering a coloured character names its kind; for
the answer just streamed the full token detail is shown. Line breaks inside paragraphs are
kept (poems and lists do not run together), except inside code blocks, which keep theirs.

The answer being written streams into its own message: each flush of the chat's timer
appends the new tokens, coloured by kind, at the end of that message (one edit block, nothing
before it is touched), and the finished answer replaces it with its rendered Markdown.

What one message may ask of the renderer is capped (Qt's Markdown import is slow, its table
import quadratic in rows): a message over ``MARKDOWN_CHARS`` characters or ``TABLE_CELLS``
table cells is shown as plain text with a note, a long one only in part (``SHOWN_CHARS``,
then more on request), and a conversation opens on its last messages (``OPEN_BUDGET``),
with the earlier ones a click away. Rendered messages stay rendered: a new message renders
only itself and the one before it, all in one edit block (the document lays itself out once).
Links open only after the address is shown, and only web ones. No file is read for a message
(its images show as text) and no paragraph is long enough to freeze the window: ``message_text``.
"""

from __future__ import annotations

import secrets
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from PySide6.QtCore import QEvent, QMimeData, Qt, QUrl
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QHelpEvent,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QAbstractButton, QMessageBox, QTextBrowser, QToolTip, QWidget

from app.engine.events import TextTail, TokenEvent, TokenKind
from app.engine.figures import speed_text
from app.store.conversations import ChatMessage
from app.ui.follow_stream import StreamFollower
from app.ui.message_text import (
    FENCES,
    address_shown,
    align,
    copied,
    end_line,
    fence_state,
    image_text_at,
    insert_bounded,
    insert_line,
    insert_markdown,
    keep_line_breaks,
    mono_family,
    no_resource,
    open_code_fence,
    plain_block,
)
from app.ui.palette import KIND_LABELS, kind_format
from app.ui.theme import CODE_BACKGROUND
from app.ui.token_view import token_tooltip
from app.workers.chat_session import CODE_KINDS, unfinished

WELCOME = (
    "### New chat\n\n"
    "Ask something. The answer appears here as it is written, every token coloured by how "
    "it was produced (hover a token for details). **Compare** shows the token stream beside "
    "the **target-only** answer to the same prompt.\n\n"
    "Enter sends, Shift+Enter adds a line."
)
NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
# What one message may ask of the renderer, and how much a conversation renders on opening
# (measured: 20,000 characters of dense Markdown or 600 table cells take Qt about 0.1 s).
MARKDOWN_CHARS = 20_000  # longer messages are shown as plain text
TABLE_CELLS = 600  # '|' characters; a message with more is shown as plain text
SHOWN_CHARS = 20_000  # of a longer message, shown at first
MORE_CHARS = 200_000  # added by each "Show more"
OPEN_BUDGET = 150_000  # characters rendered when a conversation opens (and per "Show earlier")
CELL_COST = 60  # a table cell costs Qt about as much as 60 characters
WEB_SCHEMES = ("http", "https")
ANSWERING = "answering…"
STOP_WORDS = {
    "eog": "finished",
    "max_tokens": "cut off at Max tokens",
    "stop_string": "stop string",
    "cancelled": "stopped",
    "context_full": "context full",
}


def char_kinds(runs: object, length: int) -> list[TokenKind] | None:
    """Per-character kinds from stored runs; None when they do not fit the text."""
    if not isinstance(runs, list) or len(runs) > length:  # every run covers a character
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


def stats_line(stats: dict[str, object]) -> str:
    bits = []
    if isinstance(stats.get("tokens"), int):
        bits.append(f"{stats['tokens']} tokens")
    spec_tok_s = stats.get("spec_tok_s")
    if isinstance(spec_tok_s, int | float):
        bits.append(speed_text(spec_tok_s))
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


def renders_as_markdown(content: str) -> bool:
    """Whether a message is small enough for the Markdown renderer (else: plain text)."""
    return len(content) <= MARKDOWN_CHARS and content.count("|") <= TABLE_CELLS


def _cost(message: ChatMessage) -> int:
    """What rendering a message asks of Qt, in characters."""
    content = message.content
    if renders_as_markdown(content):
        return len(content) + CELL_COST * content.count("|")
    return min(len(content), SHOWN_CHARS)


def _opening(visible: Sequence[ChatMessage], end: int, budget: int = OPEN_BUDGET) -> int:
    """The first of the messages before ``end`` that fit ``budget`` (at least one)."""
    first, spent = end, 0
    while first > 0:
        cost = _cost(visible[first - 1])
        if first < end and spent + cost > budget:
            break
        spent += cost
        first -= 1
    return first


def _is_unfinished_answer(message: ChatMessage) -> bool:
    """An answer Continue can extend (cut off, stopped or interrupted)."""
    return message.role == "assistant" and unfinished(message.stats)


@dataclass
class _Section:
    """One rendered message: from ``start`` (its rule) to the next section."""

    message: ChatMessage
    start: int


@dataclass
class _Coloured:
    """Where one coloured answer sits in the document, and what each character was."""

    start: int  # document position of the rendered body
    positions: list[int]  # document position of each coloured rendered character
    kinds: list[TokenKind]
    tokens: list[TokenEvent | None]


@dataclass
class _Live:
    """The message being streamed: where its next text goes, and what is shown of it."""

    cursor: QTextCursor  # at the end of the streamed text; inserting through it moves it
    coloured: _Coloured
    note: str  # the small line under it ("answering…"); empty: a stats line stays as is
    started: bool = False  # text has appeared (leading line breaks are dropped before)
    code: bool = False  # inside a code fence: monospace on a tint, as once rendered
    line: str = ""  # the line being written (whether it is a fence is known at its end)


class Transcript(QTextBrowser):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setOpenLinks(False)  # every click comes to _open_link, none navigates
        self.anchorClicked.connect(self._open_link)
        self.document().setUndoRedoEnabled(False)  # replaced text is not kept for undo
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
        self._sections: list[_Section] = []
        self._visible: list[ChatMessage] = []
        self._first = 0  # the first visible message rendered; earlier ones are a click away
        self._more: dict[int, int] = {}  # visible index -> characters shown of a long one
        self._live: _Live | None = None  # the answer being streamed into the last message
        self._live_events: list[TokenEvent | TextTail] = []  # streamed so far (shown)
        self._live_queue: list[TokenEvent | TextTail] = []  # not shown yet (next flush)
        # links the transcript makes itself; a message cannot forge one without the nonce
        self._scheme = f"specdeck-{secrets.token_hex(8)}"
        self.follower = StreamFollower(self)  # the answer being written stays in view

    def loadResource(self, kind: int, name: QUrl | str) -> object:  # noqa: N802 - Qt override
        """Nothing is loaded for the text shown here: messages come from files and models, and
        an image such as ``![x](/dev/zero)`` would otherwise be read until memory runs out.
        Messages reach the document with their images as text (``insert_markdown``); were one
        left, it gets a blank image, since on a null or undecodable answer Qt reads the file."""
        return no_resource(kind)

    def createMimeDataFromSelection(self) -> QMimeData:  # noqa: N802 - Qt override
        """A copied long line is the message's own: the cuts made for layout are joined."""
        joined = copied(self.textCursor().selection())
        return joined if joined is not None else super().createMimeDataFromSelection()

    def set_dark(self, dark: bool) -> None:
        if dark != self._dark:
            self._dark = dark
            self._render_again()

    def set_style(self, style: str) -> None:
        if style != self._style:
            self._style = style
            self._render_again()

    def show_messages(
        self,
        messages: Sequence[ChatMessage],
        pending: bool = False,
        last_events: Sequence[TokenEvent | TextTail] = (),
        continuing: bool = False,
    ) -> None:
        """Render the conversation; ``last_events`` give the last answer's token detail.

        Messages already rendered stay as they are, but for the last one (what follows it
        changes its stats line); another conversation opens on its last messages. While
        ``pending`` (a new answer) or ``continuing`` (more of the last one), the tokens given to
        ``stream`` are shown in that message as they come."""
        self._shown = (messages, pending, last_events, continuing)
        self._live_events, self._live_queue = [], []
        visible = [m for m in messages if m.role != "system"]
        kept = self._kept(visible)
        if kept is None:
            self._more = {}
            self._first = _opening(visible, len(visible))
            kept = 0
        self._render(visible, kept)
        if pending or continuing:
            self.follower.begin()
        else:
            self.follower.end()
            self.follower.to_end()

    def _kept(self, visible: Sequence[ChatMessage]) -> int | None:
        """How many rendered sections stay for ``visible``; None: render it afresh."""
        old = self._visible
        if not self._sections or len(visible) < self._first + 1:
            return None
        same = 0
        limit = min(len(old), len(visible))
        while same < limit and old[same] is visible[same]:
            same += 1
        if same <= self._first:
            return None
        # the old last section and the new last one render again: their stats lines change
        kept = min(same - self._first, len(self._sections), len(visible) - self._first)
        return max(0, kept - 1)

    def _render_again(self, scroll: bool = True) -> None:
        """Everything rendered so far, afresh (a new theme or colour style)."""
        value = self.verticalScrollBar().value()
        self._render([m for m in self._shown[0] if m.role != "system"], 0)
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum() if scroll else value)

    def _render(self, visible: list[ChatMessage], kept: int) -> None:
        """Render ``visible`` from its section ``kept`` on (the ones before stay)."""
        _, pending, last_events, continuing = self._shown
        self._live = None
        live_at: int | None = None
        if kept == 0:
            self._coloured = []
            self._sections = []
            self.clear()
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()
        if kept == 0:
            if not visible and not pending:
                insert_markdown(cursor, WELCOME)
            elif self._first:
                self._earlier_note(cursor)
        else:
            cut = self._sections[kept].start
            del self._sections[kept:]
            self._coloured = [c for c in self._coloured if c.start < cut]
            cursor.setPosition(cut)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
        self._visible = list(visible)
        tint_from = cursor.position()
        for index in range(self._first + kept, len(visible)):
            last = index == len(visible) - 1
            suffix = ""
            if last and continuing:
                suffix = " — continuing…"
            elif last and not pending and _is_unfinished_answer(visible[index]):
                suffix = " — Continue writes more"
            live = last and continuing and not pending
            at = self._section(cursor, index, suffix, last_events if last else (), live=live)
            if live:
                live_at = at
        note = ""
        if pending:
            if visible:
                self._rule(cursor)
            insert_markdown(cursor, "**Assistant**")
            plain_block(cursor)
            live_at = cursor.position()
            plain_block(cursor)
            note = ANSWERING
            self._note(cursor, note)
        self._tint_code_blocks(tint_from)
        if live_at is not None:
            self._live = _Live(QTextCursor(self.document()), _Coloured(live_at, [], [], []), note)
            self._live.cursor.setPosition(live_at)
            if continuing and visible:  # more of the last answer: inside its code block?
                self._live.started = True
                self._live.code, self._live.line = fence_state(visible[-1].content)
            self._coloured.append(self._live.coloured)
            self._append_live(self._live_events)
        cursor.endEditBlock()

    def _earlier_note(self, cursor: QTextCursor) -> None:
        count = self._first
        words = "1 earlier message is" if count == 1 else f"{count:,} earlier messages are"
        cursor.insertHtml(
            f"<span style='font-size: small;'><i>{words} not shown.</i> "
            f"<a href='{self._scheme}:earlier'>Show earlier messages</a></span>"
        )
        plain_block(cursor)

    def _section(
        self,
        cursor: QTextCursor,
        index: int,
        suffix: str,
        events: Sequence[TokenEvent | TextTail],
        *,
        live: bool = False,
    ) -> int:
        """One message (``self._visible[index]``), its stats line ending with ``suffix``;
        returns where its body ends (where more of it goes while ``live``)."""
        message = self._visible[index]
        self._sections.append(_Section(message, cursor.position()))
        if len(self._sections) > 1:
            self._rule(cursor)
        insert_markdown(cursor, f"**{NAMES.get(message.role, message.role)}**")
        plain_block(cursor)
        start = cursor.position()
        if renders_as_markdown(message.content):
            body = message.content.strip("\n") or "*(empty answer)*"
            open_code_fence(cursor, body)
            insert_markdown(cursor, keep_line_breaks(body))
            if message.role == "assistant":
                self._colour(message, start, cursor.position(), events)
        else:
            self._plain(cursor, index)
            if live:  # more of it goes below the note, not into it
                plain_block(cursor)
        end = cursor.position()
        if message.role == "assistant":
            line = stats_line(message.stats) + suffix
            if line:
                plain_block(cursor)
                cursor.insertHtml(f"<span style='font-size: small;'>{escape(line)}</span>")
        return end

    @staticmethod
    def _note(cursor: QTextCursor, text: str) -> None:
        """The small italic line under the message being written ("answering…")."""
        cursor.insertHtml(f"<span style='font-size: small;'><i>{escape(text)}</i></span>")

    # --- the answer being streamed -------------------------------------------------------

    def stream(self, events: Sequence[object]) -> None:
        """Queue the answer's new tokens; ``flush`` shows them (the chat's timer calls it)."""
        if self._shown[1] or self._shown[3]:
            self._live_queue.extend(e for e in events if isinstance(e, TokenEvent | TextTail))

    def flush(self, note: str = "") -> int:
        """Append the queued tokens to the streamed message (and its small ``note`` line);
        returns how many were shown. Nothing before the message is touched."""
        queued, self._live_queue = self._live_queue, []
        live = self._live
        if live is None or not (queued or (note and live.note and note != live.note)):
            return 0
        self._live_events.extend(queued)
        live.cursor.beginEditBlock()
        self._append_live(queued)
        if note and live.note and note != live.note:
            live.note = note
            line = QTextCursor(self.document().lastBlock())
            line.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
            self._note(line, note)
        live.cursor.endEditBlock()
        self.follower.catch_up()
        return len(queued)

    def _append_live(self, events: Sequence[TokenEvent | TextTail]) -> None:
        """Each run of same-kind tokens with one insert, remembering every character's kind
        and token for hover (as ``_colour`` does for a rendered answer)."""
        live = self._live
        if live is None or not events:
            return
        cursor, shown = live.cursor, live.coloured
        hover = self._style != "off"
        run: list[TokenEvent | TextTail] = []

        def emit() -> None:
            text = "".join(e.piece if isinstance(e, TokenEvent) else e.text for e in run)
            if not live.started:
                text = text.lstrip("\n")
            if not text:
                return
            live.started = True
            head = run[0]
            kind = head.kind if isinstance(head, TokenEvent) else TokenKind.TARGET
            position = cursor.position()
            cuts = self._insert_live(live, text, kind_format(kind, self._style, self._dark))
            if hover:
                tokens: list[TokenEvent | None] = []
                for event in run:
                    piece = event.piece if isinstance(event, TokenEvent) else event.text
                    tokens += [event if isinstance(event, TokenEvent) else None] * len(piece)
                tokens = tokens[len(tokens) - len(text) :]
                for at, (char, token) in enumerate(zip(text, tokens, strict=True)):
                    if at in cuts:  # the paragraph break before it
                        position += 1
                    if not char.isspace():
                        shown.positions.append(position)
                        shown.kinds.append(kind)
                        shown.tokens.append(token)
                    position += 2 if ord(char) > 0xFFFF else 1

        for event in events:
            kind = event.kind if isinstance(event, TokenEvent) else None
            if run and (kind is None or not isinstance(run[0], TokenEvent) or run[0].kind != kind):
                emit()
                run = []
            run.append(event)
        emit()

    def _insert_live(self, live: _Live, text: str, fmt: QTextCharFormat) -> set[int]:
        """Streamed text at the live cursor, code fences shown as code blocks as they come, no
        paragraph over ``LINE_CHARS``; returns where in ``text`` a long line was cut."""
        cursor = live.cursor
        cuts: list[int] = []
        offset = 0
        for index, part in enumerate(text.split("\n")):
            if index:  # a line ended: was it a fence?
                fence = live.line.lstrip().startswith(FENCES)
                live.line = ""
                end_line(cursor, fmt)
                offset += 1
                if fence:
                    live.code = not live.code
                if fence or live.code:
                    plain = QTextBlockFormat()
                    cursor.setBlockFormat(self._code_block(plain) if live.code else plain)
            if part:
                live.line = (live.line + part)[:256]  # enough to see a fence
                shown = fmt
                if live.code:
                    shown = QTextCharFormat(fmt)
                    shown.setFontFamilies([mono_family()])
                offset = insert_line(cursor, part, shown, offset, cuts)
        return set(cuts)

    def _plain(self, cursor: QTextCursor, index: int) -> None:
        """A message too large for the Markdown renderer: its text (the first part of it,
        when long) as plain text, and a note that says so."""
        content = self._visible[index].content
        shown = min(len(content), self._more.get(index, SHOWN_CHARS))
        insert_bounded(cursor, content[:shown], QTextCharFormat())
        plain_block(cursor)
        if shown < len(content):
            note = (
                f"A long message: the first {shown:,} of its {len(content):,} characters, "
                "as plain text."
            )
            link = f" <a href='{self._scheme}:more-{index}'>Show more</a>"
        else:
            note = "Shown as plain text: too large to format."
            link = ""
        cursor.insertHtml(f"<span style='font-size: small;'><i>{escape(note)}</i>{link}</span>")

    # --- links -------------------------------------------------------------------------

    def _open_link(self, url: QUrl) -> None:
        """The transcript's own links act here; a web link opens after its address is shown
        (as plain text); any other (file:, relative, javascript:, smb:) is refused."""
        if url.scheme() == self._scheme:
            self._own_link(url.path())
            return
        address = address_shown(url)
        if url.scheme().lower() in WEB_SCHEMES and url.host():
            box = QMessageBox(
                QMessageBox.Icon.Question,
                "Open link",
                f"Open this address in your web browser?\n\n{address}",
                QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
                self,
            )

            def chosen(button: QAbstractButton) -> None:
                if box.standardButton(button) == QMessageBox.StandardButton.Open:
                    QDesktopServices.openUrl(url)

            box.buttonClicked.connect(chosen)
        else:
            box = QMessageBox(
                QMessageBox.Icon.Information,
                "Link not opened",
                "SpecDeck opens only web links (http and https); this one was not opened:"
                f"\n\n{address}",
                QMessageBox.StandardButton.Ok,
                self,
            )
        box.setObjectName("linkBox")
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    def _own_link(self, action: str) -> None:
        visible = self._visible
        if action == "earlier" and self._first > 0:
            shown_first = self._first
            self._first = _opening(visible, self._first)
            self._render_again(scroll=False)
            section = self._sections[shown_first - self._first]
            self._scroll_to(section.start)
        elif action.startswith("more-") and action[5:].isdigit():
            index = int(action[5:])
            if self._first <= index < len(visible):
                self._more[index] = self._more.get(index, SHOWN_CHARS) + MORE_CHARS
                value = self.verticalScrollBar().value()
                self._render(visible, index - self._first)
                self.verticalScrollBar().setValue(value)

    def _scroll_to(self, position: int) -> None:
        cursor = QTextCursor(self.document())
        cursor.setPosition(position)
        bar = self.verticalScrollBar()
        bar.setValue(bar.value() + self.cursorRect(cursor).top())

    @staticmethod
    def _rule(cursor: QTextCursor) -> None:
        plain_block(cursor)
        cursor.insertHtml("<hr/>")
        plain_block(cursor)

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
        images = image_text_at(self.document(), start, end)  # shown for an image: not aligned
        kept = [j for j in range(len(rendered)) if start + units[j] not in images]
        mapping = align(source, "".join(rendered[j] for j in kept))
        shown = _Coloured(start, [], [], [])
        for i, k in enumerate(mapping):
            j = kept[k] if k >= 0 else -1
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

    def _code_block(self, fmt: QTextBlockFormat) -> QTextBlockFormat:
        """``fmt`` as a code block: on a tint, set in a little."""
        tinted = QTextBlockFormat(fmt)
        tinted.setBackground(QColor(CODE_BACKGROUND[self._dark]))
        tinted.setLeftMargin(8)
        return tinted

    def _tint_code_blocks(self, start: int = 0) -> None:
        block = self.document().findBlock(start)
        cursor = QTextCursor(self.document())
        while block.isValid():
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                cursor.setPosition(block.position())
                cursor.setBlockFormat(self._code_block(fmt))
                cursor.movePosition(
                    QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor
                )
                char = QTextCharFormat()  # the font only: token colours stay
                char.setFontFamilies([mono_family()])
                cursor.mergeCharFormat(char)
            block = block.next()
