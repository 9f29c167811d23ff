"""A child process for the small-screen tests: ``python -m tests.ui.first_window`` starts the
window as ``specdeck`` does (on whatever screen ``QT_QPA_PLATFORM`` gives it: the offscreen
platform takes a screen size from a config file), prints where the window and the controls
a person needs landed as JSON, and closes it (which saves its layout, as a real exit does).
With an argument it also saves a screenshot of the window there."""

from __future__ import annotations

import json
import sys
import time

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication, QWidget


def _rect(rect: QRect) -> list[int]:
    return [rect.x(), rect.y(), rect.width(), rect.height()]


def _on_screen(widget: QWidget) -> list[int] | None:
    """Where ``widget`` is on the screen; None when it is not shown at all."""
    if not widget.isVisible() or widget.visibleRegion().isEmpty():
        return None
    return _rect(QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size()))


def main(argv: list[str]) -> int:
    app = QApplication.instance() or QApplication([])
    app.setStyle("Fusion")
    from app.ui.main_window import MainWindow

    window = MainWindow(autoload=False)
    window.show()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # the first-show layout runs from zero-delay timers
        app.processEvents()
        time.sleep(0.01)
    screen = window.screen()
    facts = {
        "screen": _rect(screen.availableGeometry()),
        "window": _rect(window.frameGeometry()),
        "tabbed": window.settings_dock in window.tabifiedDockWidgets(window.charts_dock),
        "chat_width": window.chat.width(),
        "controls": {
            "input": _on_screen(window.chat.input),
            "send": _on_screen(window.chat.send),
            "change_pair": _on_screen(window.pair_bar.change),
            "demo_pair": _on_screen(window.pair_bar.demo),
            "menu_bar": _on_screen(window.menuBar()),
        },
    }
    if argv:
        window.grab().save(argv[0])
    window.close()
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
