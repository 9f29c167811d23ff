"""The window's theme: light, dark or the system's, remembered in window.ini.

The choice comes from the settings panel and the View menu; with "system" the window
follows the system's colour scheme when it changes. Applying a theme sets the palette,
renews every style sheet (a style sheet keeps the palette it saw) and tells the chat and
the charts, which draw their own colours.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from app.ui.charts import ChartsPanel
from app.ui.chat_panel import ChatPanel
from app.ui.settings_panel import SettingsPanel
from app.ui.theme import CHOICES as THEME_CHOICES
from app.ui.theme import apply_palette, is_dark
from app.ui.window_layout import WindowLayout


class WindowTheme(QObject):
    def __init__(
        self,
        window: QWidget,
        layout_file: WindowLayout,
        settings_panel: SettingsPanel,
        chat: ChatPanel,
        charts: ChartsPanel,
        chosen: Callable[[], None],  # after a choice: the View menu's check marks follow
    ) -> None:
        super().__init__(window)
        self._window = window
        self._layout_file = layout_file
        self._settings_panel = settings_panel
        self._chat = chat
        self._charts = charts
        self._chosen = chosen
        self.choice = "system"
        self.dark = False

    def follow(self) -> None:
        """The choice saved in window.ini, applied; then the panel's and the system's."""
        choice = self._layout_file.value("theme", "system")
        self.choice = choice if choice in THEME_CHOICES else "system"
        self._settings_panel.show_theme(self.choice)
        self._settings_panel.theme_changed.connect(self.set_theme)
        hints = QGuiApplication.styleHints()
        if hints is not None:
            hints.colorSchemeChanged.connect(self._scheme_changed)
        self.apply()

    def _scheme_changed(self, _scheme: object) -> None:
        if self.choice == "system":
            self.apply()

    def set_theme(self, choice: str) -> None:
        self.choice = choice if choice in THEME_CHOICES else "system"
        self._settings_panel.show_theme(self.choice)
        self._layout_file.set_value("theme", self.choice)
        self.apply()
        self._chosen()

    def apply(self) -> None:
        self.dark = is_dark(self.choice)
        apply_palette(self.dark)
        for widget in self._window.findChildren(QWidget):  # style sheets keep their palette
            if widget.styleSheet():
                widget.setStyleSheet(widget.styleSheet())
        self._chat.set_dark(self.dark)
        self._charts.set_dark(self.dark)
