"""Light and dark themes: follow the system's colour scheme, or the person's choice.

The choice ("system", "light" or "dark") is a view preference kept beside the window layout.
With "system" the window follows ``QStyleHints.colorScheme()`` (Qt 6.5+) as it changes.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

CHOICES = ("system", "light", "dark")
CHOICE_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}

DARK = {
    "window": "#2B2B2B",
    "base": "#1E1E1E",
    "alternate": "#262626",
    "text": "#E6E6E6",
    "mid": "#9A9A9A",
    "button": "#353535",
    "highlight": "#2F65CA",
    "link": "#7FB8FF",
}
CODE_BACKGROUND = {False: "#F3F4F6", True: "#2A2D31"}
CHART = {False: ("w", "#333333"), True: (DARK["base"], "#D0D0D0")}  # background, foreground
BANNERS = {
    False: {
        "error": "background: #FDEBE1; color: #7A2E00;",
        "guard": "background: #FFF6CC; color: #4D4000;",
    },
    True: {
        "error": "background: #4A2414; color: #FFD9C7;",
        "guard": "background: #3F3A12; color: #FFF2A8;",
    },
}


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints is not None and hints.colorScheme() == Qt.ColorScheme.Dark


def is_dark(choice: str) -> bool:
    if choice == "dark":
        return True
    if choice == "light":
        return False
    return system_is_dark()


def dark_palette() -> QPalette:
    palette = QPalette()
    role = QPalette.ColorRole
    colours = {
        role.Window: DARK["window"],
        role.WindowText: DARK["text"],
        role.Base: DARK["base"],
        role.AlternateBase: DARK["alternate"],
        role.ToolTipBase: DARK["button"],
        role.ToolTipText: DARK["text"],
        role.PlaceholderText: DARK["mid"],
        role.Text: DARK["text"],
        role.Button: DARK["button"],
        role.ButtonText: DARK["text"],
        role.BrightText: "#FFFFFF",
        role.Highlight: DARK["highlight"],
        role.HighlightedText: "#FFFFFF",
        role.Link: DARK["link"],
        role.Mid: DARK["mid"],
        role.Dark: "#1A1A1A",
        role.Light: "#4A4A4A",
    }
    for name, value in colours.items():
        palette.setColor(name, QColor(value))
    disabled = QPalette.ColorGroup.Disabled
    for name in (role.Text, role.ButtonText, role.WindowText):
        palette.setColor(disabled, name, QColor("#7A7A7A"))
    return palette


def apply_palette(dark: bool) -> None:
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    app.setPalette(dark_palette() if dark else app.style().standardPalette())
