"""GUI entry point: ``run_gui`` for a plain launch and for ``--screenshot PATH [--demo]``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import app

_IMPORTED_AT = time.perf_counter()
DEMO_PROMPT = "Write a Python function that checks whether a string is a palindrome."
DEMO_MAX_TOKENS = 48
SCREENSHOT_TIMEOUT_S = 600


def start_time() -> float:
    stamp = getattr(app, "START_TIME", None)
    return float(stamp) if isinstance(stamp, int | float) else _IMPORTED_AT


def _application(argv: list[str]):  # noqa: ANN202 - QApplication, imported lazily
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    existing = QApplication.instance()
    if existing is not None:
        return existing
    QApplication.setApplicationName(app.APP_NAME)
    QApplication.setOrganizationName("SpecDeck")
    QApplication.setApplicationVersion(app.__version__)
    QGuiApplication.setDesktopFileName(app.APP_ID)
    qt_app = QApplication([sys.argv[0] if sys.argv else "specdeck", *argv])
    qt_app.setStyle("Fusion")
    return qt_app


class _ExposeReporter:
    """Prints ``window shown after N.NN s`` once, when the window is first exposed."""

    def __init__(self, window) -> None:  # noqa: ANN001
        from PySide6.QtCore import QEvent, QObject

        reporter = self

        class Filter(QObject):
            def eventFilter(self, watched, event) -> bool:  # noqa: N802, ANN001
                if event.type() == QEvent.Type.Expose and watched.isExposed():
                    reporter.report()
                return False

        self.done = False
        window.winId()  # create the native window so its QWindow exists before show()
        self.handle = window.windowHandle()
        self.filter = Filter()
        if self.handle is not None:
            self.handle.installEventFilter(self.filter)

    def report(self) -> None:
        if not self.done:
            self.done = True
            print(f"window shown after {time.perf_counter() - start_time():.2f} s", file=sys.stderr)
            if self.handle is not None:
                self.handle.removeEventFilter(self.filter)

    def check(self) -> None:
        if self.handle is not None and self.handle.isExposed():
            self.report()


def run_gui(
    argv: list[str] | None = None, *, screenshot: str | None = None, demo: bool = False
) -> int:
    """Run the desktop app; with ``screenshot`` save a PNG of the window and exit."""
    if screenshot and "QT_QPA_PLATFORM" not in os.environ:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    qt_app = _application(list(argv or []))
    from app.ui.main_window import MainWindow

    if screenshot is None:
        window = MainWindow(first_run=True)
        reporter = _ExposeReporter(window)
        window.show()
        reporter.check()
        return int(qt_app.exec())

    # A screenshot never touches the person's own settings or conversations.
    import tempfile

    from app.store.conversations import ConversationStore
    from app.store.settings import Settings, SettingsStore

    with tempfile.TemporaryDirectory(prefix="specdeck-shot-") as scratch:
        settings = SettingsStore(Path(scratch) / "config")
        settings.save(Settings(max_tokens=DEMO_MAX_TOKENS, temperature=0.0))
        window = MainWindow(
            settings_store=settings,
            conversation_store=ConversationStore(Path(scratch) / "data"),
            autoload=False,
        )
        reporter = _ExposeReporter(window)
        window.show()
        reporter.check()
        return _screenshot(qt_app, window, Path(screenshot), demo)


def _screenshot(qt_app, window, path: Path, demo: bool) -> int:  # noqa: ANN001
    """Optionally run one demo answer, then save the window as PNG."""
    from PySide6.QtCore import QEventLoop, QTimer

    failure: list[str] = []
    if demo:
        loop = QEventLoop()
        guard = QTimer()
        guard.setSingleShot(True)

        def timed_out() -> None:
            failure.append("timed out")
            loop.quit()

        guard.timeout.connect(timed_out)

        def on_loaded(_message) -> None:  # noqa: ANN001
            window.chat.input.setPlainText(DEMO_PROMPT)
            window.chat.input.submit()

        def on_failed(message) -> None:  # noqa: ANN001
            failure.append(f"{message.title}: {message.message}")
            loop.quit()

        window.pair_loaded.connect(on_loaded)
        window.failed.connect(on_failed)
        window.answer_finished.connect(lambda _done: QTimer.singleShot(300, loop.quit))
        guard.start(SCREENSHOT_TIMEOUT_S * 1000)
        window.load_demo()
        loop.exec()
        guard.stop()
    settle = QEventLoop()  # first-show layout (dock widths) runs from zero-delay timers
    QTimer.singleShot(150, settle.quit)
    settle.exec()
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = window.grab().save(str(path), "PNG")
    window.close()
    qt_app.processEvents()
    if failure:
        print(f"demo answer failed: {failure[0]}", file=sys.stderr)
    if not saved:
        print(f"could not write {path}", file=sys.stderr)
        return 1
    print(f"saved {path}", file=sys.stderr)
    return 1 if failure else 0
