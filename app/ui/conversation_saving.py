"""Saving the settings and the conversation, with retries while the folder cannot be written.

A save that fails loses nothing: ``PendingSaves`` keeps what it could not write in memory,
the chat's save banner says so, and a timer tries again every ``SAVE_RETRY_MS`` until a save
works; then the banner goes, the Conversations list drops its "not saved yet", and the
status bar says everything is on disk.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from app.store.conversations import Conversation
from app.store.pending_saves import PendingSaves, SaveFailure
from app.store.settings import Settings
from app.ui.chat_panel import ChatPanel
from app.ui.conversation_list import ConversationList

SAVE_RETRY_MS = 5000  # while a save is failing, try again this often


class ConversationSaving(QObject):
    def __init__(
        self,
        saves: PendingSaves,
        chat: ChatPanel,
        conversations: ConversationList,
        current_id: Callable[[], str],  # the conversation shown in the chat
        show_message: Callable[[str, int], None],  # the status bar's
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.saves = saves
        self._chat = chat
        self._conversations = conversations
        self._current_id = current_id
        self._show_message = show_message
        self.retry = QTimer(self)
        self.retry.setInterval(SAVE_RETRY_MS)
        self.retry.timeout.connect(self.retry_saves)

    def save_settings(self, settings: Settings) -> None:
        self._report(self.saves.save_settings(settings))

    def save_conversation(self, conversation: Conversation) -> None:
        self._report(self.saves.save_conversation(conversation))

    def retry_saves(self) -> None:
        self._report(self.saves.flush())

    def _report(self, failure: SaveFailure | None) -> None:
        if failure is None:
            if self._chat.clear_save_failure():
                self._conversations.refresh(self._current_id())  # drop "not saved yet"
                self._show_message("Saved: everything kept in memory is on disk now.", 5000)
            self.retry.stop()
            return
        kept = "it is" if failure.waiting == 1 else f"{failure.waiting} items are"
        self._chat.show_save_failure(
            f"<b>{html.escape(failure.describe())}</b><br>Nothing is lost: {kept} kept in "
            "memory and saved as soon as the folder can be written to (retried every "
            f"{SAVE_RETRY_MS // 1000} s). Free some space or fix the folder's permissions."
        )
        self._show_message(failure.describe(), SAVE_RETRY_MS * 2)
        if not self.retry.isActive():
            self.retry.start()
