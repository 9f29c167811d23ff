"""The model-pair bar: what is loaded, on which device, how much memory, and how to change it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent, QStandardItemModel
from PySide6.QtWidgets import (
    QBoxLayout,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QWidget,
)

from app.engine.config import DraftSource
from app.gguf.facts import SelfDrafting
from app.models.drafting import local_drafting, pair_drafting
from app.models.fit import gib
from app.models.library import Library, LibraryError
from app.models.shipped import is_demo_pair
from app.remote.chat import RemotePair
from app.ui.elided_label import ElidedLabel
from app.ui.pair_chooser import SavedPairsDialog, active_pair_name
from app.ui.plain_text import tooltip

PAIR_NAME_WIDTH = 160  # px; the full name is in the tooltip
PAIR_NAME_MIN_WIDTH = 90  # px a name keeps before it elides
NAMES_ROOM = 2 * 200  # px the target and draft names keep before device and memory show
BUSY_TEXT_WIDTH = 110  # px for a load's words beside its progress; the status bar has them whole
UNBOUNDED = 16777215  # Qt's QWIDGETSIZE_MAX
REMOTE_MEMORY = "on the server"
DEMO_NAME = "Demo pair"
NONE_LOADED = "none loaded"
MTP_CHOICE = "MTP (the target's own heads)"
NGRAM_DRAFT = "n-gram"  # the draft's name; "n-gram (prompt lookup)" elided to "n-gram …lookup)"
NGRAM_TIP = "Prompt lookup: draft tokens are n-grams of the conversation so far; no draft model"
REMOTE_CHOICE = "remote server"
REMOTE_SOURCE_TIP = (
    "The server decides how it drafts (its own draft model, lookups or none): choose that "
    "where the server is started"
)
SOURCE_TIP = (
    "Where draft tokens come from: the draft model, prompt lookup (n-grams of the "
    "conversation so far; no second model needed), or the target's own next-token (MTP) "
    "layers when it has them (no second model either)"
)
DEMO_DETAIL = (
    "Qwen2.5-Coder-0.5B-Instruct: F32 target drafted by its own Q2_K quantization — "
    "works offline once cached"
)


class PairBar(QFrame):
    change_requested = Signal()  # the pair wizard
    files_requested = Signal()  # local GGUF files
    remote_requested = Signal()  # a llama-server, vLLM or SGLang address
    demo_requested = Signal()
    saved_pair_requested = Signal(str)  # the name of a saved pair
    current_renamed = Signal(str)  # the current saved pair's new name; "" when deleted
    source_changed = Signal(object)  # DraftSource

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pairBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet(
            "#pairBar { background: palette(alternate-base); }"
            " QLabel[role='key'] { color: palette(mid); font-size: 11px; }"
        )
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.setSpacing(6)
        self.current_name: str | None = None  # the saved pair shown, None for plain files
        self._remote = False  # a server drafts for itself: the draft-source box is off
        self.pair_name = self._pair(layout, "Pair")
        self.pair_name.setMaximumWidth(PAIR_NAME_WIDTH)
        self.target = self._pair(layout, "Target")
        self.draft = self._pair(layout, "Draft")
        self.source = QComboBox()
        self.source.setObjectName("draftSource")
        self.source.addItem("draft model", DraftSource.MODEL)
        self.source.addItem("n-gram lookup", DraftSource.NGRAM)
        self.source.addItem(MTP_CHOICE, DraftSource.MTP)
        self.source.setToolTip(SOURCE_TIP)
        # whole where the bar has room; in a narrow window it may shrink to the width the
        # box had before the MTP choice (the window must still fit 1024 px)
        metrics = self.source.fontMetrics()
        longest = max(metrics.horizontalAdvance(self.source.itemText(i)) for i in range(3))
        frame = self.source.sizeHint().width() - longest
        self.source.setMinimumWidth(frame + metrics.horizontalAdvance("n-gram lookup"))
        self.source.currentIndexChanged.connect(
            # item data comes back as a plain str: make it a DraftSource again
            lambda _i: self.source_changed.emit(DraftSource(self.source.currentData()))
        )
        layout.addWidget(self.source)
        layout.addSpacing(8)
        self.device = self._pair(layout, "Device")
        self.memory = self._pair(layout, "Memory")
        self._resource_keys = [
            w for w in self.findChildren(QLabel) if w.text() in ("Device", "Memory")
        ]
        layout.addStretch(1)
        self.busy = QProgressBar()
        self.busy.setObjectName("loadProgress")
        self.busy.setRange(0, 0)  # indeterminate
        self.busy.setFixedWidth(90)
        self.busy.setTextVisible(False)
        self.busy.hide()
        layout.addWidget(self.busy)
        self.status = ElidedLabel("", mode=Qt.TextElideMode.ElideRight)
        self.status.setObjectName("pairStatus")
        layout.addWidget(self.status)
        self.status.hide()  # shown with a text: empty, it kept room the file names lack
        self.change = QPushButton("Change pair…")
        self.change.setObjectName("changePair")
        self.change.setToolTip("Pick a pair with the wizard, or open local GGUF files")
        self.menu = QMenu(self.change)
        self.menu.aboutToShow.connect(self.fill_menu)
        self.change.setMenu(self.menu)
        self.fill_menu()
        self.demo = QPushButton("Demo pair")
        self.demo.setToolTip(DEMO_DETAIL)  # what shipped.demo_pair() really loads
        self.demo.clicked.connect(self.demo_requested)
        layout.addWidget(self.change)
        layout.addWidget(self.demo)
        self.show_pair(None, None, DraftSource.MODEL)

    def fill_menu(self) -> None:
        """Saved pairs by name (the active one checked), then the other ways to choose."""
        self.menu.clear()
        try:
            library: Library | None = Library()
        except LibraryError:
            library = None
        if library is not None and library.profiles:
            self.menu.addSection("Saved pairs")
            for name in sorted(library.profiles, key=str.lower):
                action = self.menu.addAction(name)
                action.setCheckable(True)
                action.setChecked(name == self.current_name)
                action.triggered.connect(
                    lambda _checked=False, n=name: self.saved_pair_requested.emit(n)
                )
            self.menu.addAction("Rename or delete saved pairs…", self.manage_pairs)
            self.menu.addSeparator()
        self.menu.addAction("Pair wizard…", self.change_requested.emit)
        self.menu.addAction("Local GGUF files…", self.files_requested.emit)
        self.menu.addAction("Remote server…", self.remote_requested.emit)

    def manage_pairs(self) -> None:
        try:
            library = Library()
        except LibraryError as exc:
            self.status.setText(str(exc))
            self.status.show()
            return
        dialog = SavedPairsDialog(library, self, self.current_name)
        dialog.exec()
        self.follow_saved_pairs(dialog.current)

    def follow_saved_pairs(self, current: str | None) -> None:
        """After renames and deletes: show the current pair's name and tell the window."""
        if current != self.current_name:
            self.show_pair_name(current)
            self.current_renamed.emit(current or "")

    def show_pair_name(self, name: str | None, *, demo: bool = False) -> None:
        """The saved pair's name; the demo pair (not a saved pair) by its own name."""
        self.current_name = name
        shown = name or (DEMO_NAME if demo else "—")
        self.pair_name.setText(shown)  # an ElidedLabel: it elides to the room it has
        # a short name is shown whole ("De…ir" names nothing); the file names elide first
        whole = self.pair_name.fontMetrics().horizontalAdvance(shown) + 2
        self.pair_name.setMinimumWidth(min(whole, PAIR_NAME_MIN_WIDTH))
        if name:
            tip = f"Saved pair “{name}”"
        else:
            tip = DEMO_DETAIL if demo else "Not a saved pair (files chosen directly)"
        self.pair_name.setToolTip(tooltip(tip))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_resources()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        # device and memory hide when the bar narrows: their whole width must not hold the
        # window wide (shrunk from 1920 px, it stayed 1132 px wide on a 1024 px screen)
        hint = super().minimumSizeHint()
        layout = self.layout()
        assert isinstance(layout, QBoxLayout)
        shown = [w for w in (self.device, self.memory, *self._resource_keys) if w.isVisible()]
        spare = sum(w.minimumSizeHint().width() for w in shown if w in self._resource_keys)
        spare += sum(w.minimumWidth() for w in shown if w not in self._resource_keys)
        return QSize(max(hint.width() - spare - layout.spacing() * len(shown), 0), hint.height())

    def _fit_resources(self) -> None:
        """Device and memory are shown whole or not at all (the status bar has them too):
        only where the bar has room for them beside the rest and ``NAMES_ROOM`` for the
        target and draft names, which elide first."""
        layout = self.layout()
        assert isinstance(layout, QBoxLayout)
        resources = (self.device, self.memory, *self._resource_keys)
        names = (self.target, self.draft)
        needed = NAMES_ROOM + layout.contentsMargins().left() + layout.contentsMargins().right()
        for index in range(layout.count()):
            item = layout.itemAt(index)
            if item is None:
                continue
            widget = item.widget()
            if widget is None:
                needed += item.sizeHint().width()  # fixed spacing; the stretch hints 0
            elif widget in names:
                needed += layout.spacing()  # their room is NAMES_ROOM
            elif widget in resources or not widget.isHidden():
                needed += min(widget.sizeHint().width(), widget.maximumWidth()) + layout.spacing()
        for widget in (self.device, self.memory):  # whole: never "CPU…ads"
            widget.setMinimumWidth(widget.sizeHint().width())
        wide = self.width() >= needed
        for widget in resources:
            widget.setVisible(wide)

    def _pair(self, layout: QHBoxLayout, key: str) -> ElidedLabel:
        label = QLabel(key)
        label.setProperty("role", "key")
        value = ElidedLabel("—", tooltip=False)
        value.setObjectName(f"pair{key}")
        layout.addWidget(label)
        layout.addWidget(value)
        layout.addSpacing(8)
        return value

    def show_pair(
        self, target: str | None, draft: str | None, source: DraftSource, saved: str = ""
    ) -> None:
        """Show a pair's files; ``saved`` is the saved pair they came from ("" for none)."""
        self.target.setText(Path(target).name if target else NONE_LOADED)
        # "none loaded" is shown whole ("none…aded" names nothing); file names elide
        _keep_whole(self.target, short=not target)
        self.target.setToolTip(tooltip(target or ""))
        self.show_pair_name(active_pair_name(saved, target), demo=is_demo_pair(target, draft))
        own = local_drafting(target) if target else None
        self._remote = False
        self.source.setEnabled(self.busy.isHidden())
        if source is DraftSource.NGRAM:
            self.draft.setText(NGRAM_DRAFT)
            self.draft.setToolTip(tooltip(NGRAM_TIP))
        elif source is DraftSource.MTP:
            self.draft.setText(own.name if own is not None and own.method == "mtp" else "MTP")
            self.draft.setToolTip(
                tooltip("The target drafts for itself with its next-token layers: no draft model")
            )
        else:
            self.draft.setText(Path(draft).name if draft else "—")
            self.draft.setToolTip(tooltip(draft or ""))
        _keep_whole(self.draft, short=source is DraftSource.NGRAM)
        # the draft-model choice names the method the draft's header declares: an assistant
        # or a head drafts from its target's hidden state, not as a model of its own
        method = pair_drafting(target, draft, source).method if source is DraftSource.MODEL else ""
        index = self.source.findData(DraftSource.MODEL.value)
        self.source.setItemText(index, method if draft and method else "draft model")
        self._offer_mtp(target, own)
        self.source.blockSignals(True)
        self.source.setCurrentIndex(max(self.source.findData(DraftSource(source).value), 0))
        self.source.blockSignals(False)

    def _offer_mtp(self, target: str | None, own: SelfDrafting | None) -> None:
        """The MTP choice is on only for a target with next-token layers; its tooltip (and the
        box's) says why it is off."""
        model = self.source.model()
        assert isinstance(model, QStandardItemModel)
        item = model.item(self.source.findData(DraftSource.MTP.value))
        can = own is not None and own.method == "mtp"
        if can:
            assert own is not None
            why = f"The target drafts for itself with its next-token layers ({own.name})"
        elif not target:
            why = "No target is loaded"
        elif own is None:
            why = f"{Path(target).name} cannot be read as a GGUF model"
        else:
            why = (
                f"{Path(target).name} has no next-token (MTP) layers ({own.name}), so it "
                "cannot draft for itself"
            )
        item.setEnabled(can)
        item.setToolTip(tooltip(why))
        self.source.setToolTip(tooltip(f"{SOURCE_TIP}.\n\nMTP: {why}."))

    def show_remote(self, pair: RemotePair) -> None:
        """A remote pair: the server's address and kind; its drafting is the server's own."""
        self.target.setText(f"{pair.url} ({pair.server})")
        self.target.setToolTip(tooltip(pair.url))
        self.show_pair_name(None)
        base = f", baseline {pair.baseline_url}" if pair.baseline_url else ""
        self.draft.setText(f"the server's own{base}")
        self.draft.setToolTip(tooltip(pair.baseline_url or ""))
        _keep_whole(self.draft, short=False)
        # the server drafts as it was started: no choice here ("draft model" read as one)
        self._remote = True
        self.source.blockSignals(True)
        self.source.setCurrentIndex(self.source.findData(DraftSource.MODEL.value))
        self.source.setItemText(self.source.currentIndex(), REMOTE_CHOICE)
        self.source.blockSignals(False)
        self.source.setEnabled(False)
        self.source.setToolTip(tooltip(REMOTE_SOURCE_TIP))

    def show_resources(self, device: str, weights_bytes: int, rss_bytes: int | None) -> None:
        """The device, the weights and this process's memory; no weights here is a remote
        pair, whose memory is the server's (it read "weights 0 MiB · process 207 MiB")."""
        self.device.setText(device)
        self.device.setToolTip(tooltip(device))
        if weights_bytes:
            text = f"weights {gib(weights_bytes)}"
            if rss_bytes:
                text += f" · process {gib(rss_bytes)}"
            tip = text
        else:
            text, tip = REMOTE_MEMORY, "The weights and their memory are on the server's machine"
        self.memory.setText(text)
        self.memory.setToolTip(tooltip(tip))
        self._fit_resources()

    def set_busy(self, text: str | None) -> None:
        """Show the busy indicator with ``text``; ``None`` hides it."""
        self.busy.setVisible(text is not None)
        self.status.setText(text or "")
        self.status.setVisible(bool(text))
        _keep_whole(self.status, short=False)  # a load's long text elides
        # "Loading qwen2.5-coder-0.5b-instruct-q4…" took the room the file names had
        self.status.setMaximumWidth(BUSY_TEXT_WIDTH if text else UNBOUNDED)
        self._fit_resources()
        self.change.setEnabled(text is None)
        self.demo.setEnabled(text is None)
        # neither can be used while a pair loads: the progress and Cancel take their room,
        # which at 1024 px left the file names "qw…uf" and pushed the toolbar into »
        self.change.setVisible(text is None)
        self.demo.setVisible(text is None)
        self.source.setEnabled(text is None and not self._remote)

    def set_progress(self, progress: float | None) -> None:
        """A percentage while llama.cpp reports one, else a busy indicator."""
        if progress is None:
            self.busy.setRange(0, 0)
        else:
            self.busy.setRange(0, 100)
            self.busy.setValue(round(progress * 100))
        self.busy.setTextVisible(progress is not None)

    def add_beside_progress(self, widget: QWidget) -> None:
        """A control next to the load progress bar (e.g. Cancel)."""
        layout = self.layout()
        assert isinstance(layout, QBoxLayout)
        layout.insertWidget(layout.indexOf(self.busy) + 1, widget)

    def show_hint(self, text: str) -> None:
        """A short hint, shown whole ("Choose a pair to star…" reads as a fault)."""
        self.status.setText(text)
        self.status.setVisible(bool(text))
        self.status.setMaximumWidth(UNBOUNDED)
        _keep_whole(self.status, short=True)


def _keep_whole(label: ElidedLabel, *, short: bool) -> None:
    """A short text keeps its whole width; a long one may elide to the room it has."""
    label.setMinimumWidth(label.sizeHint().width() if short else 0)
