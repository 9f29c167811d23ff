"""Saves that could not be written yet: kept in memory and written on every later attempt.

A read-only or full config/data folder must not lose what the person typed: the window
hands every save to ``PendingSaves``, which writes it at once when it can and otherwise keeps
the latest version of each conversation (and the settings) until a later attempt succeeds.
No Qt here.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from app.files.fileio import error_text, json_text
from app.store.conversations import Conversation, ConversationInfo, ConversationStore
from app.store.settings import Settings, SettingsStore


@dataclass(frozen=True)
class SaveFailure:
    path: Path
    reason: str  # "Permission denied", "No space left on device", …
    waiting: int  # how many items are kept in memory

    def describe(self) -> str:
        return f"cannot save: {self.reason} ({self.path})"


class PendingSaves:
    def __init__(self, settings_store: SettingsStore, conversations: ConversationStore) -> None:
        self.settings_store = settings_store
        self.conversations = conversations
        self._settings: Settings | None = None
        self._conversations: dict[str, Conversation] = {}

    @property
    def waiting(self) -> int:
        return len(self._conversations) + (self._settings is not None)

    def unsaved(self, conversation_id: str) -> Conversation | None:
        """The in-memory version of a conversation that is not on disk yet."""
        return self._conversations.get(conversation_id)

    def unsaved_conversations(self) -> list[ConversationInfo]:
        return [
            ConversationInfo(c.id, c.title, c.updated, len(c.messages))
            for c in self._conversations.values()
        ]

    def save_conversation(self, conversation: Conversation) -> SaveFailure | None:
        self._conversations[conversation.id] = conversation
        return self.flush()

    def save_settings(self, settings: Settings) -> SaveFailure | None:
        self._settings = settings
        return self.flush()

    def forget_conversation(self, conversation_id: str) -> None:
        """A deleted conversation is not written back."""
        self._conversations.pop(conversation_id, None)

    def flush(self) -> SaveFailure | None:
        """Write everything waiting; the first failure, or None when all is on disk."""
        failure: SaveFailure | None = None
        if self._settings is not None:
            try:
                self.settings_store.save(self._settings)
                self._settings = None
            except OSError as exc:
                failure = SaveFailure(self.settings_store.path, error_text(exc), 0)
        for conversation_id, conversation in list(self._conversations.items()):
            try:
                self.conversations.save(conversation)
            except OSError as exc:
                if failure is None:
                    path = self.conversations.path_of(conversation_id)
                    failure = SaveFailure(path, error_text(exc), 0)
                continue
            del self._conversations[conversation_id]
        if failure is None:
            return None
        return SaveFailure(failure.path, failure.reason, self.waiting)

    def rescue(self, folder: Path | None = None) -> Path | None:
        """Last resort when closing: write what is still waiting to a fresh folder under the
        system temporary folder (or ``folder``); returns it, or None when that fails too."""
        if not self.waiting:
            return None
        try:
            base = folder or Path(tempfile.gettempdir())
            target = base / f"specdeck-unsaved-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
            target.mkdir(parents=True, exist_ok=True)
            if self._settings is not None:
                settings_copy = SettingsStore(target)
                settings_copy.save(self._settings)
            for conversation in self._conversations.values():
                text = json_text(conversation.to_json(), indent=1)
                (target / f"{conversation.id}.json").write_text(text, encoding="utf-8")
        except OSError:
            return None
        return target
