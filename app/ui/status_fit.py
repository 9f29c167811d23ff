"""Status fields that give way by priority, as the pair bar's device and memory do.

At 1024 px the fields while serving need ~1240 px: each elided at once ("CPU …", "ac…",
"Serving on … accept…"). Here the least needed shorten to their essentials first, then
hide, and the serving state and this answer's speed keep their words; the whole text is
always in a field's tooltip.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from PySide6.QtCore import QObject, QSize, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QStatusBar

from app.ui.elided_label import ELLIPSIS_ROOM, ElidedLabel
from app.ui.plain_text import tooltip as plain_tip
from app.ui.resize_watch import ResizeWatch

STATUS_SPACING = 6  # px; a guess above QStatusBar's own gaps between permanent items
GRIP_ROOM = 24  # px the size grip and the bar's margins take


def before_parenthesis(text: str) -> str:
    """ "memory 878 MiB (weights 349 MiB)" → "memory 878 MiB"."""
    return text.split(" (", 1)[0]


def first_part(text: str) -> str:
    """ "CPU · 2 threads" → "CPU"."""
    return text.split(" · ", 1)[0]


def speed_essentials(text: str) -> str:
    """ "speculative 0.58 tok/s" → "spec 0.58 tok/s"; "tok/s — (waiting for the first token)"
    → "tok/s — (waiting)"."""
    text = re.sub(r"\bspeculative\b", "spec", text)
    text = re.sub(r"\bbaseline\b", "base", text)
    return re.sub(r" \(waiting[^)]*\)", " (waiting)", text)


def serving_essentials(text: str) -> str:
    """Where it serves and what it does now; the request count and acceptance go (they are
    the tooltip's)."""
    parts = text.split(" · ")
    kept = [parts[0], *(p for p in parts[1:] if p.startswith("answering"))]
    return " · ".join(kept)


class StatusField(ElidedLabel):
    """A status field with a ``priority`` (0 the most needed) and a short form of its text;
    ``compact`` shows the short form."""

    def __init__(
        self,
        text: str,
        *,
        priority: int,
        short: Callable[[str], str],
        explanation: str = "",
    ) -> None:
        self.priority = priority
        self.explanation = explanation
        self.on_text: Callable[[], None] | None = None  # the StatusFit refits
        self._short = short
        self._compact = False
        super().__init__(text, mode=Qt.TextElideMode.ElideRight)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        tip = f"{text}\n\n{self.explanation}" if self.explanation and text else text
        self.setToolTip(plain_tip(tip))
        if self.on_text is not None:
            self.on_text()

    @property
    def compact(self) -> bool:
        return self._compact

    def set_compact(self, compact: bool) -> None:
        if compact != self._compact:
            self._compact = compact
            self.updateGeometry()
        QLabel.setText(self, self._elidedText())  # the form shown now, elided to the width

    def shown_source(self) -> str:
        """The text this field shows before eliding: the whole or the short form."""
        return self._short(self._text) if self._compact else self._text

    def _elidedText(self) -> str:  # noqa: N802 - superqt override
        metrics = QFontMetrics(self.font())
        width = self.width() - self._ellipses_width
        return metrics.elidedText(self.shown_source(), self._elide_mode, width)

    def width_for(self, text: str) -> int:
        margins = self.contentsMargins()
        room = ELLIPSIS_ROOM + 1
        return self.fontMetrics().horizontalAdvance(text) + margins.left() + margins.right() + room

    def full_width(self) -> int:
        return self.width_for(self._text)

    def short_width(self) -> int:
        return self.width_for(self._short(self._text))

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(self.width_for(self.shown_source()), super().sizeHint().height())


class StatusFit(QObject):
    """Fits a status bar's fields to its width: the whole texts where they fit; else, the
    least needed first, short forms, then hidden ones (priority above ``keep``); a field
    never hidden elides only where even the short forms of the kept ones do not fit."""

    def __init__(self, bar: QStatusBar, keep: int = 0) -> None:
        super().__init__(bar)
        self._bar = bar
        self._keep = keep
        self.fields: list[StatusField] = []  # in their order on the bar
        self._fitting = False
        ResizeWatch(bar, self.fit)

    def add(self, field: StatusField) -> None:
        """A field on the bar; it shows while it has a text and the bar has room."""
        self.fields.append(field)
        field.on_text = self.fit
        self.fit()

    def room(self) -> int:
        return self._bar.width() - GRIP_ROOM

    def fit(self) -> None:
        if self._fitting:
            return
        self._fitting = True
        try:
            self._fit()
        finally:
            self._fitting = False

    def _fit(self) -> None:
        wanted = [f for f in self.fields if f.text()]
        compact: set[StatusField] = set()
        hidden: set[StatusField] = set()

        def needed() -> int:
            widths = [
                f.short_width() if f in compact else f.full_width()
                for f in wanted
                if f not in hidden
            ]
            return sum(widths) + STATUS_SPACING * max(len(widths) - 1, 0)

        # among equals the later field first: the serving state's counts before the speed
        least_first = sorted(reversed(wanted), key=lambda f: -f.priority)
        for field in least_first:  # short forms, the least needed first
            if needed() <= self.room():
                break
            compact.add(field)
        for field in least_first:  # then the least needed hide
            if needed() <= self.room() or field.priority <= self._keep:
                break
            hidden.add(field)
        for field in self.fields:
            field.set_compact(field in compact)
            shown = field in wanted and field not in hidden
            if field.isHidden() == shown:
                field.setVisible(shown)
            # whole where it fits: the bar must not squeeze a field it made room for
            field.setMinimumWidth(field.sizeHint().width() if needed() <= self.room() else 0)
