"""The Lab tab in a narrow dock (pytest-qt, offscreen): its rows fit the dock's width (no
sideways scroll: it cut the verdict at the dock's edge), only the plot and the table scroll
their own content; nothing is cut off or wrapped into something that reads differently."""

from __future__ import annotations

import random
from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QScrollArea,
    QTableWidget,
    QWidget,
)

from app.lab.configs import parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.results import ResultLog
from app.lab.runner import target_spec
from app.lab.stats import choose, rows_from
from app.lab.suites import builtin
from app.store.settings import Settings
from app.ui.lab_tab import TABLE_KEY_COLUMNS, LabTab
from tests.ui.conftest import (  # noqa: F401 - fixtures: offscreen windows, leak check
    isolated,
    make_window,
    no_live_threads_or_timers,
)

DRAFT = "/home/someone/models/qwen2.5-coder-0.5b-instruct-q8_0.gguf"
CONFIGS = f"adaptive:draft={DRAFT}\nfixed8:draft={DRAFT},n=8\nngram:ngram"
SCREENSHOT = Path("/tmp/lab-narrow.png")
NARROW_DOCK = 320  # px: a side dock on a small screen


def _write_results(path: Path) -> Path:
    """A finished lab result file for every built-in category (measured numbers made up)."""
    plan = LabPlan(
        target=target_spec("/home/someone/models/qwen2.5-coder-7b-instruct-q4_k_m.gguf"),
        configs=(parse_config(f"adaptive:draft={DRAFT}"), parse_config("ngram:ngram")),
        prompts=tuple(builtin()),
        claim=Claim(1.3),
    )
    log = ResultLog.create(path, {"plan": plan.to_json()})
    rng = random.Random(1)
    parts = plan.split
    for phase, prompts in (("tuning", parts.tuning), ("confirmation", parts.confirmation)):
        for prompt in prompts:
            runs = {
                name: {
                    "tok_s": 10.0 * gain * rng.uniform(0.8, 1.2),
                    "temperature": 0.0,
                    "acceptance": 0.7,
                    "tokens_per_pass": 2.5,
                    "ttft_ms": 120.0,
                    "itl_p50_ms": 40.0,
                    "itl_p95_ms": 60.0,
                    "itl_p99_ms": 80.0,
                    "host_ms_per_token": 0.2,
                    "tokens": 64,
                    "identical": True,
                }
                for name, gain in (("adaptive", 1.6), ("ngram", 1.1))
            }
            log.append(
                {
                    "kind": "prompt",
                    "phase": phase,
                    "prompt": prompt.id,
                    "category": prompt.category,
                    "repeat": 0,
                    "baselines": {"0.0": {"tok_s": 10.0}},
                    "runs": runs,
                }
            )
        if phase == "tuning":
            chosen = choose(
                rows_from(log.records), plan.claim, plan.categories, ["adaptive", "ngram"]
            )
            log.append({"kind": "choice", **chosen})
    log.append({"kind": "done"})
    return path


def _leaves(tab: LabTab) -> list[QWidget]:
    """The tab's own controls (not the inner parts of spin boxes, lists and views)."""
    kinds = (
        QAbstractButton,
        QAbstractSpinBox,
        QComboBox,
        QLabel,
        QLineEdit,
        QListWidget,
        QPlainTextEdit,
        QTableWidget,
    )
    found: list[QWidget] = [tab.plot_frame]  # the plot scrolls inside its frame
    for widget in tab.findChildren(QWidget):
        if not isinstance(widget, kinds) or not widget.isVisibleTo(tab):
            continue
        owner = widget.parentWidget()
        while owner is not None and owner is not tab and not isinstance(owner, kinds):
            owner = owner.parentWidget()
        if owner is tab:  # not part of another control
            found.append(widget)
    return found


def _clipped(tab: LabTab) -> list[str]:
    problems = []
    for widget in _leaves(tab):
        name = f"{type(widget).__name__} {widget.objectName() or getattr(widget, 'text', str)()!r}"
        top_left = widget.mapTo(tab, QPoint(0, 0))
        if not tab.rect().contains(top_left) or not tab.rect().contains(
            top_left + QPoint(widget.width() - 1, widget.height() - 1)
        ):
            problems.append(f"{name} reaches outside the tab")
        hint = widget.minimumSizeHint()
        least = max(widget.minimumWidth(), hint.width() if hint.isValid() else 0)
        if widget.width() < least:
            problems.append(f"{name} is {widget.width()} px wide, needs {least}")
        if isinstance(widget, QLabel) and widget.wordWrap() and widget.text():
            if widget.height() < widget.heightForWidth(widget.width()):
                problems.append(f"{name}: wrapped text taller than the label")
        elif isinstance(widget, QLabel) and widget.text() and widget.textFormat() != Qt.RichText:
            needed = widget.fontMetrics().horizontalAdvance(widget.text())
            if needed > widget.contentsRect().width():
                problems.append(f"{name}: text cut off")
    return problems


def _narrow_window(make, qtbot, tmp_path: Path):  # noqa: ANN001, ANN202
    window = make(Settings(), autoload=False)
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    qtbot.wait(100)  # the first-run layout (share_width) runs once the window is shown
    tabs = [window.side.tabText(i) for i in range(window.side.count())]
    window.side.setCurrentIndex(tabs.index("Lab"))
    tab = window.lab
    tab.configs.setPlainText(CONFIGS)
    tab.show_results(_write_results(tmp_path / "lab.jsonl"))
    window.resizeDocks([window.settings_dock], [NARROW_DOCK], Qt.Orientation.Horizontal)
    scroll = window.findChild(QScrollArea, "labScroll")
    qtbot.waitUntil(lambda: scroll.isVisible() and scroll.viewport().width() < NARROW_DOCK)
    qtbot.wait(50)
    return window, tab, scroll


def test_a_narrow_dock_fits_the_lab_without_scrolling_sideways_and_clips_nothing(
    make_window,  # noqa: F811
    qtbot,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    window, tab, scroll = _narrow_window(make_window, qtbot, tmp_path)
    assert scroll.viewport().width() < NARROW_DOCK
    bar = scroll.horizontalScrollBar()
    assert bar.isHidden() or bar.maximum() == 0
    assert tab.width() <= scroll.viewport().width()  # the rows wrap and stack instead
    assert _clipped(tab) == []
    window.grab().save(str(SCREENSHOT))
    plot_bar = tab.plot_frame.horizontalScrollBar()  # the plot scrolls inside its frame
    plot_bar.setValue(plot_bar.maximum())
    assert tab.plot.mapTo(tab.plot_frame, QPoint(tab.plot.width(), 0)).x() <= (
        tab.plot_frame.width()
    )


def test_configurations_keep_one_line_each_in_a_narrow_dock(
    make_window,  # noqa: F811
    qtbot,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    _window, tab, _scroll = _narrow_window(make_window, qtbot, tmp_path)
    document = tab.configs.document()
    lines = [document.findBlockByNumber(i) for i in range(document.blockCount())]
    assert len(lines) == 3
    assert [block.layout().lineCount() for block in lines] == [1, 1, 1]  # no wrapped path


def test_category_names_are_whole_and_apart_in_a_narrow_dock(
    make_window,  # noqa: F811
    qtbot,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    _window, tab, _scroll = _narrow_window(make_window, qtbot, tmp_path)
    ticks = tab.plot.getAxis("bottom")._tickLevels[0]  # what setTicks was given
    names = [name for _position, name in ticks]
    assert len(names) == 9 and "translation" in names and not any(n.endswith(".") for n in names)
    view = tab.plot.getViewBox()
    x0 = tab.plot.mapFromScene(view.mapViewToScene(QPointF(0, 0))).x()
    x1 = tab.plot.mapFromScene(view.mapViewToScene(QPointF(1, 0))).x()
    widest = max(QFontMetrics(tab.plot.font()).horizontalAdvance(n) for n in names)
    assert x1 - x0 > widest  # neighbouring labels do not overlap
    key = sum(tab.table.columnWidth(c) for c in range(TABLE_KEY_COLUMNS))
    # phase … speedup in view without scrolling where the dock has room for them; in a
    # narrower dock the table is as wide as the dock shows and scrolls its own columns
    shown = _scroll.viewport().width() - tab.layout().contentsMargins().left() * 2
    assert tab.table.viewport().width() >= key or tab.table.width() >= shown - 2
