"""The window's layout: it fits a 1024x640 screen and never resizes itself, the docks follow
the width and can hide and detach, and the pair bar and status bar show figures whole, elided
with a mark, or not at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import QSize, Qt

from app.engine.config import DraftSource
from app.ui.plain_text import tooltip

ROOT = Path(__file__).resolve().parents[2]


def _first_window(tmp_path: Path, width: int, height: int) -> dict:
    """The window started in a child process on an offscreen screen of this size."""
    config = tmp_path / f"screen-{width}x{height}.json"
    screen = {"name": "s", "x": 0, "y": 0, "width": width, "height": height}
    screen |= {"logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    config.write_text(json.dumps({"screens": [screen]}))
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={config}")
    result = subprocess.run(
        [sys.executable, "-m", "tests.ui.first_window"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _inside(rect: list[int], room: list[int]) -> bool:
    x, y, w, h = rect
    rx, ry, rw, rh = room
    return rx <= x and ry <= y and x + w <= rx + rw and y + h <= ry + rh


def test_the_first_window_fits_a_1024x640_screen(isolated, tmp_path) -> None:  # noqa: ANN001
    small = _first_window(tmp_path, 1024, 640)
    assert _inside(small["window"], small["screen"]), small
    for name, rect in small["controls"].items():  # the input box, Send, Change pair …
        assert rect is not None and _inside(rect, small["screen"]), (name, small)
    assert small["tabbed"] and small["chat_width"] >= 480, small
    big = _first_window(tmp_path, 1920, 1080)  # closed there: its layout is saved
    assert _inside(big["window"], big["screen"]) and not big["tabbed"], big
    again = _first_window(tmp_path, 1024, 640)  # back on the small screen
    assert _inside(again["window"], again["screen"]) and again["tabbed"], again


def test_window_fits_1024x640_and_never_resizes_itself(make_window, qtbot, tmp_path) -> None:
    window = make_window()
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    qtbot.wait(50)
    hint = window.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 640, hint
    assert window.size() == QSize(1024, 640)

    long_target = str(
        tmp_path / ("qwen2.5-coder-0.5b-instruct-" + "very-long-name-" * 12 + ".gguf")
    )
    long_draft = str(tmp_path / ("draft-" + "x" * 180 + ".Q2_K.gguf"))
    window.pair_bar.show_pair(long_target, long_draft, DraftSource.MODEL)
    window.pair_bar.show_resources("GPU (all layers) + CPU 16 threads " * 4, 2**33, 2**34)
    window.pair_bar.set_busy("Loading " + "a-very-long-file-name" * 10 + ".gguf…")
    window.chat.show_verdict("0.70× — 30 % slower " * 20, None)
    for label in window.status.values():
        label.setText(label.text() + " and a long figure" * 15)
    for _ in range(5):
        qtbot.wait(20)
        assert window.size() == QSize(1024, 640)
    target = window.pair_bar.target
    assert target.toolTip() == tooltip(long_target)  # the whole path, as plain text
    assert target.is_elided() and "…" in target.shown_text()
    assert window.minimumSizeHint().width() <= 1024


def test_screenshots_at_1024_and_1920(make_window, qtbot, tmp_path: Path) -> None:
    window = make_window()
    for width, height in ((1024, 640), (1920, 1080)):
        window.resize(width, height)
        qtbot.wait(50)
        assert window.size() == QSize(width, height)
        image = window.grab()
        assert (image.width(), image.height()) == (width, height)


def test_the_docks_follow_the_width_both_ways(make_window, qtbot) -> None:
    window = make_window()
    qtbot.waitExposed(window)

    def tabbed() -> bool:
        return window.settings_dock in window.tabifiedDockWidgets(window.charts_dock)

    for width, narrow in ((1500, False), (1100, True), (1500, False), (1000, True)):
        window.resize(width, 800)
        qtbot.waitUntil(lambda n=narrow: tabbed() is n, timeout=3000)
        qtbot.wait(30)
        if narrow:  # one column of tabs beside a chat of at least half the window
            assert window.chat.width() >= width // 2, (width, window.chat.width())
        else:
            assert window.settings_dock.isVisible() and window.charts_dock.isVisible()


def test_settings_and_charts_are_docks_that_hide_and_detach(make_window, qtbot) -> None:
    window = make_window()
    qtbot.waitExposed(window)
    for dock in (window.settings_dock, window.charts_dock):
        assert dock.isVisible()
        dock.toggleViewAction().trigger()
        assert not dock.isVisible() and window.chat.isVisible()
        dock.toggleViewAction().trigger()
        assert dock.isVisible()
    window.charts_dock.setFloating(True)
    assert window.charts_dock.isFloating() and window.charts.isVisible()
    window.charts_dock.setFloating(False)


def test_the_pair_bar_shows_device_and_memory_whole_or_not_at_all(make_window, qtbot) -> None:
    window = make_window()
    bar = window.pair_bar
    names = "/m/qwen2.5-coder-0.5b-instruct-q4_k_m"
    bar.show_pair(f"{names}.F32.gguf", f"{names}.Q2_K.gguf", DraftSource.MODEL)
    bar.show_resources("CPU · 2 threads", int(2.7 * 2**30), int(3.3 * 2**30))
    figures = {
        "device": "CPU · 2 threads",
        "speed": "spec 15.2 tok/s · base 9.1 tok/s",
        "acceptance": "acceptance 80 % (40/50)",
        "memory": "memory 3.3 GiB (weights 2.7 GiB)",
    }
    for name, text in figures.items():
        window.status[name].setText(text)
    shown = []
    for width in (1024, 1280, 1560, 1920, 2600):
        window.resize(width, 800)
        qtbot.wait(30)
        for label in (bar.device, bar.memory):  # never "CPU…ads"
            assert label.isHidden() or not label.is_elided(), (width, label.shown_text())
        shown.append(bar.device.isVisible())
    assert shown[-1]  # a wide bar has room for them
    labels = list(window.status.values())
    for left, right in zip(labels, labels[1:], strict=False):  # items do not run together
        metrics = left.fontMetrics()
        end = left.x() + left.contentsRect().x() + metrics.horizontalAdvance(left.text())
        assert right.x() + right.contentsRect().x() - end >= 12, (left.text(), right.text())


def test_device_and_memory_in_the_pair_bar_do_not_hold_a_shrinking_window_wide(
    make_window, qtbot
) -> None:
    window = make_window()
    bar = window.pair_bar
    names = "/m/qwen2.5-coder-0.5b-instruct-q4_k_m"
    bar.show_pair(f"{names}.F32.gguf", f"{names}.Q2_K.gguf", DraftSource.MODEL)
    bar.show_resources("CPU · 2 threads", int(2.7 * 2**30), int(3.4 * 2**30))
    window.resize(1920, 1080)
    qtbot.waitUntil(bar.device.isVisible, timeout=3000)
    window.resize(1008, 572)  # shrunk later, as the screenshots of a 1024x640 screen do
    qtbot.wait(100)
    assert window.width() <= 1008 and bar.device.isHidden(), (window.width(), bar.width())
    bar.set_busy(None)  # a load ended
    assert bar.status.isHidden()  # empty, it keeps no room the file names lack


def test_a_padded_label_elides_with_a_mark_instead_of_being_cut(qtbot) -> None:
    from app.ui.elided_label import ElidedLabel

    label = ElidedLabel("memory 3.4 GiB (weights 2.7 GiB)", mode=Qt.TextElideMode.ElideRight)
    label.setStyleSheet("QLabel { border-left: 1px solid palette(mid); padding: 0 8px; }")
    qtbot.addWidget(label)
    label.show()
    label.resize(label.sizeHint().width() - 10, 20)  # as a crowded status bar squeezes it
    qtbot.wait(20)
    shown = label.shown_text()
    room = label.contentsRect().width()  # inside the padding: "GiB)" drawn past it is cut
    assert shown.endswith("…") and label.fontMetrics().horizontalAdvance(shown) <= room, shown


def test_no_pair_and_the_start_hint_read_whole_in_a_small_window(make_window, qtbot) -> None:
    window = make_window()
    window.resize(1008, 572)  # the first window on a 1024x640 screen
    qtbot.wait(50)
    bar = window.pair_bar
    assert bar.target.text() == "none loaded"
    assert not bar.target.is_elided(), bar.target.shown_text()  # not "none…aded"
    assert bar.status.text() == "Choose a pair to start →"
    assert not bar.status.is_elided(), bar.status.shown_text()  # not "Choose a pair to star…"
