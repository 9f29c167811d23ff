"""Saved conversations: open, delete, export to Markdown or JSON."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QGridLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.files.fileio import error_text
from app.store.conversations import ConversationInfo, ConversationStore, export
from app.ui.plain_text import ask, tooltip
from app.ui.stats_export import with_suffix


class ConversationList(QWidget):
    open_requested = Signal(str)  # conversation id
    deleted = Signal(str)
    failed = Signal(str)  # what went wrong, in words (a read-only folder, a damaged file)

    def __init__(self, store: ConversationStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        # Conversations kept in memory because their folder refused the write: listed too.
        self.unsaved: Callable[[], list[ConversationInfo]] = list
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        # activated: a double click, or Enter (one signal: a double click also activates)
        self.list.itemActivated.connect(self._activated)
        self.open = QPushButton("Open")
        self.delete = QPushButton("Delete")
        self.export_md = QPushButton("Markdown…")
        self.export_md.setToolTip("Export the selected conversation as Markdown")
        self.export_json = QPushButton("JSON…")
        self.export_json.setToolTip("Export the selected conversation as JSON")
        self.open.clicked.connect(lambda: self._with_selected(self.open_requested.emit))
        self.delete.clicked.connect(lambda: self._with_selected(self._confirm_delete))
        self.export_md.clicked.connect(lambda: self._with_selected(lambda i: self.export(i, "md")))
        self.export_json.clicked.connect(
            lambda: self._with_selected(lambda i: self.export(i, "json"))
        )
        row = QGridLayout()  # two by two: the sidebar stays narrow
        for index, button in enumerate((self.open, self.delete, self.export_md, self.export_json)):
            row.addWidget(button, index // 2, index % 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.list, 1)
        layout.addLayout(row)
        self.refresh()

    def refresh(self, current: str | None = None) -> None:
        self.list.clear()
        unsaved = {info.id: info for info in self.unsaved()}
        stored = [info for info in self.store.list() if info.id not in unsaved]
        infos = sorted([*stored, *unsaved.values()], key=lambda i: i.updated, reverse=True)
        for info in infos:
            stamp = time.strftime("%b %d %H:%M", time.localtime(info.updated))
            flag = " · not saved yet" if info.id in unsaved else ""
            count = "1 message" if info.messages == 1 else f"{info.messages:,} messages"
            item = QListWidgetItem(f"{info.title}\n{stamp} · {count}{flag}")
            item.setData(Qt.ItemDataRole.UserRole, info.id)
            item.setToolTip(tooltip(info.title))
            self.list.addItem(item)
            if info.id == current:
                self.list.setCurrentItem(item)

    def ids(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def _activated(self, item: QListWidgetItem | None) -> None:
        """Open the conversation once the click is over: opening it refreshes this list,
        which must not delete the item while the view still handles the click on it."""
        if item is None:
            return
        conversation_id = item.data(Qt.ItemDataRole.UserRole)
        QTimer.singleShot(0, self, lambda: self.open_requested.emit(conversation_id))

    def _with_selected(self, action) -> None:  # noqa: ANN001
        item = self.list.currentItem()
        if item is not None:
            action(item.data(Qt.ItemDataRole.UserRole))

    def delete_conversation(self, conversation_id: str) -> None:
        try:
            self.store.delete(conversation_id)
        except (OSError, ValueError) as exc:
            self.failed.emit(
                f"Cannot delete the conversation: {error_text(exc)} (in {self.store.directory})"
            )
            return
        self.refresh()
        self.deleted.emit(conversation_id)

    def _confirm_delete(self, conversation_id: str) -> None:
        if ask(self, "Delete conversation", "Delete this conversation?"):
            self.delete_conversation(conversation_id)

    def export(self, conversation_id: str, suffix: str) -> None:
        """Ask where to write conversation ``conversation_id`` as Markdown ("md") or JSON."""
        try:
            conversation = self.store.load(conversation_id)
        except (OSError, ValueError) as exc:
            self.failed.emit(f"Cannot export the conversation: {error_text(exc)}")
            return
        kinds = {"md": "Markdown (*.md)", "json": "JSON (*.json)"}
        safe = "".join(c if c.isalnum() else "-" for c in conversation.title).strip("-")[:40]
        path, _ = QFileDialog.getSaveFileName(
            self, "Export conversation", f"{safe or 'conversation'}.{suffix}", kinds[suffix]
        )
        if path:
            try:  # "notes" typed in the Markdown dialog is notes.md, not JSON without a suffix
                export(conversation, with_suffix(Path(path), f".{suffix}"))
            except OSError as exc:
                self.failed.emit(f"Cannot export to {path}: {error_text(exc)}")
