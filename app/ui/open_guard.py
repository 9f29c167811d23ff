"""A conversation the window died showing is not opened again by itself.

The newest conversation opens at every start, so one whose showing kills the window (a
renderer that runs out of memory, a crash inside Qt) would keep the app from ever starting
again. Before a conversation is shown its id is written down (in window.ini), and crossed off
once the window has lived with it for a moment or closed normally. An id still written down at
the next start is the one the last run died showing: it is not opened at start any more (it
stays in the Conversations list), and the window says so once. ``reopen_latest`` opens the
newest conversation that reads and shows at start, passing over those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, QTimer

from app.store.conversations import ConversationInfo, ConversationStore, is_conversation_id
from app.ui.window_layout import WindowLayout
from app.workers.chat_session import ChatSession

OPENING = "conversation/opening"
UNSAFE = "conversation/unsafe"
SETTLE_MS = 1500  # shown this long without dying: the conversation is safe to show
UNSAFE_KEPT = 16


class OpenGuard:
    def __init__(self, layout: WindowLayout, owner: QObject) -> None:
        self._layout = layout
        self._settle = QTimer(owner)
        self._settle.setSingleShot(True)
        self._settle.setInterval(SETTLE_MS)
        self._settle.timeout.connect(self.settled)
        died = layout.value(OPENING, "")
        unsafe = [i for i in layout.value(UNSAFE, "").split() if is_conversation_id(i)]
        self.died_on = died if is_conversation_id(died) else None
        if self.died_on is not None and self.died_on not in unsafe:
            unsafe.append(self.died_on)
        self.unsafe = unsafe[-UNSAFE_KEPT:]
        self._opening = ""
        if died:
            self._write()

    def _write(self) -> None:
        self._layout.set_value(OPENING, self._opening)
        self._layout.set_value(UNSAFE, " ".join(self.unsafe))

    def skips(self, conversation_id: str) -> bool:
        """Not to be opened at start: the window died showing it before."""
        return conversation_id in self.unsafe

    def opening(self, conversation_id: str) -> None:
        self._opening = conversation_id
        self._layout.set_value(OPENING, conversation_id)

    def settle_later(self) -> None:
        """Cross the conversation being shown off once the window has lived with it."""
        if self._opening:
            self._settle.start()

    def settled(self) -> None:
        """The window lived with the conversation (or closed normally)."""
        self._settle.stop()
        if not self._opening:
            return
        if self._opening in self.unsafe:  # opened from the list and shown: safe again
            self.unsafe.remove(self._opening)
        self._opening = ""
        self._write()

    def reopen_latest(
        self,
        store: ConversationStore,
        listed: Sequence[ConversationInfo],
        show: Callable[[ChatSession], None],  # the window shows it, or raises
    ) -> list[str]:
        """Show the most recent conversation that reads and shows (a file may change
        meanwhile); a note, in words, for each one skipped."""
        notes = []
        tried = 0
        for info in listed:
            name = f"“{info.title}” ({info.id})"
            if self.skips(info.id):
                if info.id == self.died_on:
                    notes.append(
                        f"the conversation {name} was not reopened: SpecDeck stopped while "
                        "showing it last time. It is still in the Conversations list."
                    )
                continue
            if tried == 3:
                break
            tried += 1
            try:
                conversation = store.load(info.id)
            except (OSError, ValueError):
                continue
            self.opening(info.id)
            try:
                show(ChatSession(conversation))
            except Exception as error:  # noqa: BLE001 - a stored file must not stop the start
                notes.append(
                    f"the conversation {name} could not be shown and was skipped "
                    f"({type(error).__name__}: {error}). It is kept as it was, in "
                    f"{store.path_of(info.id)} and in the Conversations list."
                )
                continue
            return notes
        show(ChatSession())
        return notes
