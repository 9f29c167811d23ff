"""How a message's text becomes transcript content without reading a file or freezing the window.

Markdown is rendered in a scratch document that answers every resource Qt asks for itself (an
empty placeholder, never a file): Qt's own Markdown import renders in a document of its own,
which reads a local file named by an HTML ``background`` or a stylesheet ``@import`` during the
import. An image in a message (Markdown ``![alt](address)`` or HTML ``<img>``) becomes plain
text, ``[image: alt]``, with its address in a tooltip, before the result reaches the transcript:
an image left in the document is loaded by name when laid out (a FIFO hangs the window, a large
PNG costs gigabytes). Every tooltip a message brings (a link's or an image's title) is shown as
plain text.

Qt lays out a paragraph whole each time it changes, and the line breaking of a run without a
break opportunity takes time growing with the square of its length. So no paragraph the
transcript makes is longer than ``LINE_CHARS``: a longer line is cut (after a space where one is
near) and continues in a block marked ``CONTINUED``; copying joins those blocks again, so the
copied text is the message's own.
"""

from __future__ import annotations

import re
from collections import Counter

from PySide6.QtCore import QByteArray, QMimeData, QUrl
from PySide6.QtGui import (
    QFontDatabase,
    QImage,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFormat,
    QTextImageFormat,
)

from app.ui.plain_text import tooltip

FENCES = ("```", "~~~")  # a line starting with one opens or closes a code block
NO_BREAK_SPACE = "\u00a0"
ADDRESS_SHOWN = 1000  # characters of a link's or image's address shown
ALT_SHOWN = 200  # characters of an image's alt text shown in its place
# The longest paragraph the transcript makes (measured: a 4,000-character run without spaces
# lays out in about 1 ms; 50,000 took 145 ms, 100,000 over 600 ms, growing with the square).
LINE_CHARS = 4000
BREAK_NEAR = 200  # a long line is cut after a space within this many characters of the limit
CONTINUED = QTextFormat.Property.UserProperty + 1  # block format: continues the line above
IMAGE_TEXT = QTextFormat.Property.UserProperty + 2  # char format: text shown for an image
# A tag as CommonMark reads raw HTML: an opening one (attributes, maybe self-closing) or a
# closing one; a code span's backticks and a link's target and title ("](…)") are found
# alongside, to skip what is inside them.
_TAG_OR_CODE = re.compile(
    r"(?P<code>`+)"
    r"|(?P<target>\]\((?:[^()\n\\]|\\.|\([^()\n]*\))*\))"
    r"|<(?P<close>/)?(?P<name>[A-Za-z][A-Za-z0-9-]*)"
    r"(?P<attributes>(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*)"
    r"\s*(?P<self>/)?>"
)
# Elements with no content, which HTML writes without closing them (``<br>``, ``<img …>``).
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def no_resource(kind: int) -> object:
    """What a document is given for any resource a message names: a blank 1×1 image for an
    image (a null or undecodable one makes Qt load the file by its name), nothing otherwise."""
    if kind == QTextDocument.ResourceType.ImageResource.value:
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        image.fill(0)
        return image
    return QByteArray()


class _Scratch(QTextDocument):
    """A document to render one message in; it never loads a resource."""

    def loadResource(self, kind: int, name: QUrl | str) -> object:  # noqa: N802 - Qt override
        return no_resource(kind)


def insert_markdown(cursor: QTextCursor, markdown: str) -> None:
    """``cursor.insertMarkdown(markdown)`` (GitHub dialect), with no file read for it, every
    image shown as text (``images_as_text``) and no text lost to an unclosed tag
    (``balanced_html``)."""
    scratch = _Scratch()
    scratch.setMarkdown(balanced_html(markdown))
    images_as_text(scratch)
    cursor.insertFragment(QTextDocumentFragment(scratch))


def address_shown(url: QUrl | str) -> str:
    """An address as shown to the person: encoded (a look-alike host reads as punycode) and
    cut to ``ADDRESS_SHOWN`` characters."""
    url = QUrl(url) if isinstance(url, str) else url
    address = bytes(url.toEncoded().data()).decode("ascii", errors="replace")
    return address if len(address) <= ADDRESS_SHOWN else address[:ADDRESS_SHOWN] + "…"


def _image_text(images: list[QTextImageFormat]) -> tuple[str, QTextCharFormat]:
    """The text shown for adjacent images of one address (Qt makes one per piece of a
    formatted alt text), and its format: italic, the address in the tooltip."""
    first = images[0]
    alt = "".join(i.stringProperty(QTextFormat.Property.ImageAltText) for i in images)
    alt = _CONTROL.sub(" ", alt).strip()
    if len(alt) > ALT_SHOWN:
        alt = alt[:ALT_SHOWN] + "…"
    fmt = QTextCharFormat()
    fmt.setFontItalic(True)
    fmt.setProperty(IMAGE_TEXT, True)
    if first.isAnchor():  # an image inside a link stays that link
        fmt.setAnchor(True)
        fmt.setAnchorHref(first.anchorHref())
        fmt.setForeground(first.foreground())
    title = first.stringProperty(QTextFormat.Property.ImageTitle)
    tip = f"Image not shown: {address_shown(first.name())}"
    fmt.setToolTip(tooltip(f"{tip}\n{title}" if title else tip))
    return (f"[image: {alt}]" if alt else "[image]"), fmt


def images_as_text(document: QTextDocument) -> None:
    """Every image in ``document`` replaced by text (``_image_text``), and every tooltip a
    message brought made plain text."""
    runs: list[tuple[int, int, list[QTextImageFormat]]] = []  # (start, end, images)
    tips: list[tuple[int, int, str]] = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            start, end = fragment.position(), fragment.position() + fragment.length()
            if fmt.isImageFormat():
                image = fmt.toImageFormat()
                images = [image] * fragment.length()
                last = runs[-1] if runs else None
                if last and last[1] == start and last[2][0].name() == image.name():
                    runs[-1] = (last[0], end, last[2] + images)
                else:
                    runs.append((start, end, images))
            elif fmt.toolTip():
                tips.append((start, end, fmt.toolTip()))
            it += 1
        block = block.next()
    for start, end, tip in tips:  # the same length: positions stay
        plain = QTextCharFormat()
        plain.setToolTip(tooltip(tip))
        cursor = QTextCursor(document)
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(plain)
    for start, end, images in reversed(runs):
        cursor = QTextCursor(document)
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        text, fmt = _image_text(images)
        cursor.insertText(text, fmt)


def image_text_at(document: QTextDocument, start: int, end: int) -> set[int]:
    """The positions from ``start`` to ``end`` of text shown for an image."""
    found: set[int] = set()
    block = document.findBlock(start)
    while block.isValid() and block.position() < end:
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().hasProperty(IMAGE_TEXT):
                at = fragment.position()
                found.update(range(at, at + fragment.length()))
            it += 1
        block = block.next()
    return found


def mono_family() -> str:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()


def plain_block(cursor: QTextCursor) -> None:
    """A new paragraph that inherits nothing (not the code fence, not the rule above it)."""
    cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())


# --- long lines ------------------------------------------------------------------------------


def line_pieces(text: str, used: int) -> list[str]:
    """``text`` (no line break in it) cut so that no piece makes a paragraph longer than
    ``LINE_CHARS``, the first piece going after ``used`` characters already in the paragraph.
    A paragraph ends after the first space in its last ``BREAK_NEAR`` characters, else at the
    limit (so a line streamed in pieces is cut after a space too)."""
    pieces = []
    room = LINE_CHARS - used
    while True:
        space = text.find(" ", max(room - BREAK_NEAR, 0), max(room, 0))
        if space >= 0:
            cut = space + 1
        elif len(text) > room:
            cut = max(room, 0)
        else:
            break
        pieces.append(text[:cut])
        text = text[cut:]
        room = LINE_CHARS
    pieces.append(text)
    return pieces


def continue_line(cursor: QTextCursor, fmt: QTextCharFormat) -> None:
    """A new paragraph at ``cursor`` that continues the line of the one it is in."""
    block = QTextBlockFormat(cursor.blockFormat())
    block.setProperty(CONTINUED, True)
    cursor.insertBlock(block, fmt)


def end_line(cursor: QTextCursor, fmt: QTextCharFormat) -> None:
    """A line break at ``cursor``: the new paragraph continues no line."""
    cursor.insertText("\n", fmt)
    block = cursor.blockFormat()
    if block.hasProperty(CONTINUED):  # inherited from the paragraph before
        block.clearProperty(CONTINUED)
        cursor.setBlockFormat(block)


def insert_bounded(cursor: QTextCursor, text: str, fmt: QTextCharFormat) -> list[int]:
    """``cursor.insertText(text, fmt)``, with no paragraph longer than ``LINE_CHARS``; returns
    where in ``text`` a line was cut (a paragraph break goes before that character)."""
    cuts: list[int] = []
    offset = 0
    for index, line in enumerate(text.split("\n")):
        if index:
            end_line(cursor, fmt)
            offset += 1
        offset = insert_line(cursor, line, fmt, offset, cuts)
    return cuts


def insert_line(
    cursor: QTextCursor, line: str, fmt: QTextCharFormat, offset: int, cuts: list[int]
) -> int:
    """One line (no line break in it) at ``cursor``, cut into paragraphs of at most
    ``LINE_CHARS``; ``offset`` is where the line starts in its text, each cut's offset is
    added to ``cuts``, and the offset after the line is returned."""
    for number, piece in enumerate(line_pieces(line, cursor.positionInBlock())):
        if number:
            continue_line(cursor, fmt)
            cuts.append(offset)
        if piece:
            cursor.insertText(piece, fmt)
            offset += len(piece)
    return offset


def joined_text(document: QTextDocument) -> str:
    """``document.toPlainText()`` with the lines cut for layout joined again."""
    parts: list[str] = []
    block = document.begin()
    while block.isValid():
        if parts and not block.blockFormat().hasProperty(CONTINUED):
            parts.append("\n")
        parts.append(block.text())
        block = block.next()
    return "".join(parts).replace(NO_BREAK_SPACE, " ").replace("\u2028", "\n")


def copied(selection: QTextDocumentFragment) -> QMimeData | None:
    """What copying ``selection`` gives when it holds a line cut for layout (the line joined
    again, as the message has it); None when it holds none."""
    scratch = _Scratch()
    QTextCursor(scratch).insertFragment(selection)
    joins = []
    block = scratch.begin().next()
    while block.isValid():
        if block.blockFormat().hasProperty(CONTINUED):
            joins.append(block.position())
        block = block.next()
    if not joins:
        return None
    cursor = QTextCursor(scratch)
    # one edit: joined one by one, the growing line was laid out again at every join
    # (a million characters took 2.8 s to copy)
    cursor.beginEditBlock()
    for position in reversed(joins):
        cursor.setPosition(position)
        cursor.deletePreviousChar()
    cursor.endEditBlock()
    whole = QTextDocumentFragment(scratch)
    data = QMimeData()
    data.setHtml(whole.toHtml())
    data.setText(whole.toPlainText())
    return data


# --- Markdown source -------------------------------------------------------------------------


def _tags(markdown: str) -> list[re.Match[str]]:
    """The HTML tags in ``markdown`` outside code fences, code spans and link targets, in
    order."""
    found: list[re.Match[str]] = []
    fenced = False
    prose: list[tuple[int, str]] = []  # (offset, line) of the lines outside fences
    offset = 0
    for line in markdown.split("\n"):
        if line.lstrip().startswith(FENCES):
            fenced = not fenced
        elif not fenced:
            prose.append((offset, line))
        offset += len(line) + 1
    at = 0
    for start, line in prose:
        at = max(at, start)
        end = start + len(line)
        while at < end and (match := _TAG_OR_CODE.search(markdown, at, end)):
            at = match.end()
            if match["target"] is not None:
                continue
            if match["code"] is None:
                found.append(match)
                continue
            # a code span ends at the next run of as many backticks (it may go on below)
            closing = re.compile(rf"(?<!`){match['code']}(?!`)").search(markdown, at)
            if closing is not None:
                at = closing.end()
    return found


def balanced_html(markdown: str) -> str:
    """``markdown`` with every HTML tag Qt's import would leave open made harmless.

    Qt's Markdown import holds back all text after an HTML tag until as many tags have
    closed as opened, and drops what it holds at the end: "declare a List<String>", a
    ``<br>`` or a stray ``</div>`` hid the rest of an answer. A void element (``<br>``,
    ``<img …>``) is written self-closing, and a tag that is never closed, or closes none, is
    shown as text (its ``<`` as ``&lt;``); tags that pair up stay HTML."""
    shown_as_text: list[int] = []  # where a "<" becomes "&lt;"
    self_closed: list[int] = []  # where a "/" goes before ">"
    opened: list[tuple[str, int]] = []  # (name, where) of the tags open, innermost last
    open_names: Counter[str] = Counter()
    for tag in _tags(markdown):
        name = tag["name"].lower()
        if tag["close"] and not open_names[name]:
            shown_as_text.append(tag.start())
        elif tag["close"]:  # it closes the innermost of its name, and what opened inside it
            while True:
                inner, where = opened.pop()
                open_names[inner] -= 1
                if inner == name:
                    break
                shown_as_text.append(where)
        elif name in _VOID and not tag["self"]:
            self_closed.append(tag.end() - 1)
        elif not tag["self"]:
            opened.append((name, tag.start()))
            open_names[name] += 1
    shown_as_text += [where for _, where in opened]
    if not shown_as_text and not self_closed:
        return markdown
    edits = sorted([(at, "&lt;") for at in shown_as_text] + [(at, "/>") for at in self_closed])
    parts, last = [], 0
    for at, text in edits:  # each replaces one character: a "<" or a ">"
        parts += [markdown[last:at], text]
        last = at + 1
    parts.append(markdown[last:])
    return "".join(parts)


def keep_line_breaks(markdown: str) -> str:
    """Hard line breaks for single newlines outside code fences (Markdown joins them), and
    the indentation of lines outside fences as no-break spaces (Markdown drops it, so code
    pasted into a message lost its shape); list items and the lines under them keep theirs."""
    lines = markdown.split("\n")
    fenced = in_list = False
    out = []
    for index, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(FENCES):
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
        if joins and not stripped.startswith(FENCES) and not line.endswith("  "):
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


def fence_state(text: str) -> tuple[bool, str]:
    """Whether ``text`` ends inside a code fence, and its unfinished last line."""
    lines = text.split("\n")
    fenced = False
    for line in lines[:-1]:
        if line.lstrip().startswith(FENCES):
            fenced = not fenced
    return fenced, lines[-1]


def open_code_fence(cursor: QTextCursor, markdown: str) -> None:
    """Inserting rendered Markdown merges its first block into the cursor's plain block, so
    an answer that opens with a code fence lost its first line from the block: the cursor's
    block becomes that code block first."""
    first = markdown.lstrip(" ").split("\n", 1)[0]
    if not first.startswith(FENCES):
        return
    code = QTextBlockFormat()
    code.setNonBreakableLines(True)
    code.setProperty(QTextFormat.Property.BlockCodeFence, first[0])
    language = first.lstrip(first[0]).strip()
    if language:
        code.setProperty(QTextFormat.Property.BlockCodeLanguage, language)
    cursor.setBlockFormat(code)
