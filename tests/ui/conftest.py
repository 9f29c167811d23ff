"""UI test fixtures: offscreen Qt, isolated config/data dirs, and checks after every test.

The autouse ``no_live_threads_or_timers`` fixture fails a test that leaves a QThread running
or a QTimer active behind it (found through the QApplication's object tree, every top-level
widget's children, and the garbage collector's view of Python-owned Qt objects).

The autouse ``no_exceptions_in_slots`` fixture fails a test when an exception escapes a Qt
slot or virtual method: Qt cannot propagate it, so PySide hands it to ``sys.excepthook``,
where this fixture records it (from setup to the end of teardown, window closing included).
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any Qt import

import pytest  # noqa: E402
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QThread, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.engine.config import DraftSource  # noqa: E402
from app.store.settings import Settings, SettingsStore  # noqa: E402

APP_FREEZE = gc.freeze  # what the window calls once a pair is loaded


def _alive(obj: QObject) -> bool:
    try:
        obj.objectName()
    except RuntimeError:  # the C++ object is gone
        return False
    return True


def live_threads_and_timers() -> list[str]:
    app = QCoreApplication.instance()
    found: dict[int, QObject] = {}
    roots: list[QObject] = [app] if app is not None else []
    if isinstance(app, QApplication):
        roots += app.topLevelWidgets()
    for root in roots:
        for kind in (QThread, QTimer):
            for child in root.findChildren(kind):
                found[id(child)] = child
    for obj in gc.get_objects():
        if isinstance(obj, QThread | QTimer):
            found[id(obj)] = obj
    problems = []
    for obj in found.values():
        if not _alive(obj) or obj is QThread.currentThread():
            continue
        if isinstance(obj, QThread) and obj.isRunning():
            problems.append(f"QThread {obj.objectName() or obj!r} is still running")
        elif isinstance(obj, QTimer) and obj.isActive():
            parent = obj.parent()
            owner = type(parent).__name__ if parent is not None else "no parent"
            problems.append(f"QTimer (interval {obj.interval()} ms, parent {owner}) is active")
    return problems


@pytest.fixture(autouse=True)
def no_live_threads_or_timers(qapp: QApplication) -> Iterator[None]:
    # What earlier tests left alive moves out of the collector's reach (as the window does
    # once a pair is loaded), so the collection below scans this test's objects, not the
    # 150,000 of every module imported: 0.1 s a test otherwise. The window's own freeze is
    # skipped: it would freeze the window itself, whose cycles would then outlive the test
    # (it changes when the collector runs, not what the window does; one test checks it).
    gc.freeze()
    gc.freeze = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        gc.freeze = APP_FREEZE  # type: ignore[assignment]
    for _ in range(3):
        qapp.processEvents()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)
    gc.collect()
    problems = live_threads_and_timers()
    if problems:
        pytest.fail("left behind by the test: " + "; ".join(problems))


class SlotErrors:
    """Exceptions that reached ``sys.excepthook`` while installed."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._previous = sys.excepthook

    def hook(self, kind, value, tb) -> None:  # noqa: ANN001
        self.errors.append("".join(traceback.format_exception(kind, value, tb)))

    def install(self) -> None:
        self._previous = sys.excepthook
        sys.excepthook = self.hook

    def uninstall(self) -> None:
        sys.excepthook = self._previous


@pytest.fixture(autouse=True)
def no_exceptions_in_slots(qapp: QApplication) -> Iterator[SlotErrors]:
    capture = SlotErrors()
    capture.install()
    try:
        yield capture
        for _ in range(3):
            qapp.processEvents()
    finally:
        capture.uninstall()
    if capture.errors:
        pytest.fail("an exception escaped a Qt slot:\n" + "\n".join(capture.errors))


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the settings and conversation stores at a fresh directory."""
    monkeypatch.setenv("SPECDECK_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture
def make_window(isolated: Path, qtbot) -> Iterator[Callable[..., object]]:  # noqa: ANN001
    """Build main windows on the isolated stores; every one is closed after the test."""
    from app.ui.main_window import MainWindow

    windows: list[MainWindow] = []

    def make(settings: Settings | None = None, **kwargs: object) -> MainWindow:
        if settings is not None:
            SettingsStore().save(settings)
        window = MainWindow(**kwargs)  # type: ignore[arg-type]
        windows.append(window)
        window.show()
        return window

    yield make
    for window in windows:
        if window.isVisible() or window.client.running:
            window.close()
        window.deleteLater()
    windows.clear()  # the test's arguments, which hold make(), outlive this teardown
    app = QApplication.instance()
    if isinstance(app, QApplication):  # a dark theme chosen in one test stays in that test
        app.setPalette(app.style().standardPalette())


def load(window, qtbot, target: Path, draft: Path | None, timeout: int = 60_000):  # noqa: ANN001, ANN201
    source = DraftSource.MODEL if draft is not None else DraftSource.NGRAM
    with qtbot.waitSignal(window.pair_loaded, timeout=timeout) as blocker:
        window.load_pair(str(target), str(draft) if draft else None, source)
        assert not window.pair_bar.busy.isHidden()  # loading shows progress, off the UI thread
        assert window.pair_bar.status.text()
    assert window.pair_bar.busy.isHidden()
    return blocker.args[0]


def ask(window, qtbot, prompt: str, timeout: int = 60_000):  # noqa: ANN001, ANN201
    with qtbot.waitSignal(window.answer_finished, timeout=timeout) as blocker:
        window.chat.input.setPlainText(prompt)
        window.chat.input.submit()
    return blocker.args[0]
