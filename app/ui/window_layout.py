"""window.ini: the window's geometry, docks, splitter sizes, side tab and theme choice.

QSettings reads the file whole and blocks on a FIFO, so anything but a small regular file is
moved aside first; when that fails the layout is neither read nor written.
"""

from __future__ import annotations

import stat
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter, QTabWidget

from app.files.fileio import move_aside

LAYOUT_FILE = "window.ini"
LAYOUT_LIMIT = 1 << 20  # bytes; a real one is under 2 KB


class WindowLayout:
    def __init__(self, directory: Path) -> None:
        self.path = directory / LAYOUT_FILE
        self.usable = True

    def check(self) -> list[str]:
        """Move a file QSettings must not read aside; a note for each one moved."""
        try:
            info = self.path.lstat()
        except OSError:
            return []
        if stat.S_ISREG(info.st_mode) and info.st_size <= LAYOUT_LIMIT:
            return []
        moved = move_aside(self.path, "damaged")
        self.usable = moved is not None
        where = f"moved to {moved.name}" if moved else "left as it is; the layout is not saved"
        return [f"the window layout file {self.path} is not a small regular file; it was {where}"]

    def _settings(self) -> QSettings:
        return QSettings(str(self.path), QSettings.Format.IniFormat)

    def value(self, key: str, default: str) -> str:
        return str(self._settings().value(key, default)) if self.usable else default

    def set_value(self, key: str, value: str) -> None:
        if self.usable:
            state = self._settings()
            state.setValue(key, value)
            state.sync()

    def restore(self, window: QMainWindow, side: QTabWidget) -> bool:
        """Geometry, docks and side tab; True when the docks were restored."""
        if not self.usable:
            return False
        state = self._settings()
        geometry = state.value("geometry")
        if isinstance(geometry, QByteArray):
            window.restoreGeometry(geometry)
        docks = state.value("windowState")
        restored = isinstance(docks, QByteArray) and window.restoreState(docks)
        tab = state.value("sideTab")
        if isinstance(tab, int | str) and str(tab).isdigit():  # window.ini is stored state too
            side.setCurrentIndex(int(tab))
        return restored

    def restore_splitters(self, splitters: dict[str, QSplitter]) -> None:
        """Splitter sizes: restored once the window has its final size."""
        if not self.usable:
            return
        state = self._settings()
        for name, splitter in splitters.items():
            value = state.value(f"splitter/{name}")
            if isinstance(value, QByteArray):
                splitter.restoreState(value)

    def save(self, window: QMainWindow, side: QTabWidget, splitters: dict[str, QSplitter]) -> None:
        if not self.usable:
            return
        state = self._settings()
        state.setValue("geometry", window.saveGeometry())
        state.setValue("windowState", window.saveState())
        for name, splitter in splitters.items():
            state.setValue(f"splitter/{name}", splitter.saveState())
        state.setValue("sideTab", side.currentIndex())
        state.sync()
