"""The window's menu bar: every action it has, with the keys people expect (Esc stops,
Ctrl+Enter sends, Ctrl+N starts a new chat), and the Help menu's two boxes.

``WindowMenus`` builds the menus from ``WindowCommands`` (what each action does, given by
the window) and keeps the actions that follow the chat's buttons in step with them
(``sync``): a disabled Stop leaves Esc free for the rest of the window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMessageBox, QWidget

from app.ui.chat_panel import ChatPanel
from app.ui.theme import CHOICES as THEME_CHOICES

Slot = Callable[[], object]
KEYS = [
    ("Enter", "send the message"),
    ("Shift+Enter", "a new line in the message"),
    ("Ctrl+Enter", "send, from anywhere in the window"),
    ("Esc", "stop the answer"),
    ("Ctrl+Shift+Enter", "continue the last answer"),
    ("Ctrl+R", "regenerate the last answer"),
    ("Ctrl+N", "new chat"),
    ("Ctrl+Shift+C", "copy the last answer"),
    ("Ctrl+,", "settings"),
]


@dataclass(frozen=True)
class WindowCommands:
    """What the menus' actions do: the window's methods and its panels' slots."""

    new_chat: Slot
    send: Slot
    stop: Slot
    continue_answer: Slot
    regenerate: Slot
    copy_answer: Slot
    show_conversations: Slot
    export: Callable[[str], object]  # the current conversation, as "md" or "json"
    quit: Slot
    show_settings: Slot
    show_lab: Slot
    toggle_comparison: Slot
    set_theme: Callable[[str], object]
    pair_wizard: Slot
    pair_files: Slot
    load_demo: Slot
    choose_remote: Slot
    manage_pairs: Slot
    reload_pair: Slot
    cancel_load: Slot


class WindowMenus:
    def __init__(
        self,
        window: QMainWindow,
        commands: WindowCommands,
        panel_toggles: Sequence[QAction],  # the docks' show/hide actions
        serve_action: QAction,
    ) -> None:
        self.window = window
        do = commands
        self.new_chat_action = self._action(
            "&New chat", do.new_chat, [QKeySequence.StandardKey.New]
        )
        self.send_action = self._action(
            "&Send", do.send, ["Ctrl+Return", "Ctrl+Enter"], "Send the message"
        )
        self.stop_action = self._action("S&top", do.stop, ["Esc"], "Stop the answer")
        self.continue_action = self._action(
            "&Continue",
            do.continue_answer,
            ["Ctrl+Shift+Return"],
            "Write more of the last answer",
        )
        self.regenerate_action = self._action(
            "&Regenerate", do.regenerate, ["Ctrl+R"], "Answer the last question again"
        )
        self.copy_action = self._action(
            "Cop&y answer", do.copy_answer, ["Ctrl+Shift+C"], "Copy the last answer"
        )
        bar = window.menuBar()
        file = bar.addMenu("&File")
        file.addAction(self.new_chat_action)
        file.addAction(self._action("&Conversations…", do.show_conversations))
        for suffix, label in (("md", "Markdown"), ("json", "JSON")):
            file.addAction(
                self._action(
                    f"Export conversation as {label}…",
                    lambda _=False, s=suffix: do.export(s),
                )
            )
        file.addSeparator()
        file.addAction(self._action("&Quit", do.quit, [QKeySequence.StandardKey.Quit]))
        edit = bar.addMenu("&Edit")
        for action in (self.send_action, self.stop_action, self.continue_action):
            edit.addAction(action)
        edit.addAction(self.regenerate_action)
        edit.addSeparator()
        edit.addAction(self.copy_action)
        edit.addSeparator()
        edit.addAction(
            self._action(
                "Se&ttings",
                do.show_settings,
                [QKeySequence.StandardKey.Preferences, "Ctrl+,"],
            )
        )
        view = bar.addMenu("&View")
        for toggle in panel_toggles:
            view.addAction(toggle)
        view.addAction(self._action("&Lab", do.show_lab))
        view.addSeparator()
        view.addAction(self._action("&Comparison under the answer", do.toggle_comparison))
        theme = view.addMenu("&Theme")
        self.theme_actions = QActionGroup(window)
        for choice in THEME_CHOICES:
            action = theme.addAction(choice.capitalize())
            action.setCheckable(True)
            action.setData(choice)
            action.triggered.connect(lambda _=False, c=choice: do.set_theme(c))
            self.theme_actions.addAction(action)
        pair = bar.addMenu("&Pair")
        pair.addAction(self._action("Pair &wizard…", do.pair_wizard))
        pair.addAction(self._action("&Local GGUF files…", do.pair_files))
        pair.addAction(self._action("&Demo pair", do.load_demo))
        pair.addAction(self._action("Re&mote server…", do.choose_remote))
        pair.addAction(self._action("Rename or delete saved pairs…", do.manage_pairs))
        pair.addSeparator()
        self.reload_action = self._action("&Reload pair", do.reload_pair)
        self.cancel_load_action = self._action("Cancel &loading", do.cancel_load)
        pair.addAction(self.reload_action)
        pair.addAction(self.cancel_load_action)
        pair.addSeparator()
        pair.addAction(serve_action)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._action("&Keyboard shortcuts", lambda: show_keys(window)))
        help_menu.addAction(self._action("&About SpecDeck", lambda: show_about(window)))

    def _action(
        self,
        text: str,
        slot: object,
        keys: Sequence[QKeySequence | QKeySequence.StandardKey | str] = (),
        tip: str = "",
    ) -> QAction:
        action = QAction(text, self.window)
        action.triggered.connect(slot)
        if keys:
            action.setShortcuts([QKeySequence(key) for key in keys])
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(tip)
        self.window.addAction(action)  # its shortcut works wherever the focus is in the window
        return action

    def sync(
        self, chat: ChatPanel, *, generating: bool, loading: bool, loaded: bool, theme: str
    ) -> None:
        """Menu actions follow the buttons they stand for (a disabled Stop leaves Esc free)."""
        self.stop_action.setEnabled(generating)
        self.send_action.setEnabled(not generating and chat.send.isEnabled())
        self.continue_action.setEnabled(
            not chat.continue_button.isHidden() and chat.continue_button.isEnabled()
        )
        self.regenerate_action.setEnabled(chat.regenerate.isEnabled())
        self.copy_action.setEnabled(chat.copy.isEnabled())
        self.new_chat_action.setEnabled(not generating)
        self.reload_action.setEnabled(loaded and not loading)
        self.cancel_load_action.setEnabled(loading)
        for action in self.theme_actions.actions():
            action.setChecked(action.data() == theme)


def show_keys(parent: QWidget) -> None:
    box = QMessageBox(parent)
    box.setWindowTitle("Keyboard shortcuts")
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText("\n".join(f"{keys}: {what}" for keys, what in KEYS))
    box.exec()


def show_about(parent: QWidget) -> None:
    from app import __version__

    QMessageBox.about(
        parent,
        "About SpecDeck",
        f"SpecDeck {__version__}\n\nSpeculative decoding on your own computer with "
        "llama.cpp: a small draft model proposes tokens, the target model checks them, "
        "and the window shows what it gained.",
    )
