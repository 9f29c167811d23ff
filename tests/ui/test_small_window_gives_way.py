"""In a small window the banners and buttons give way to the answer: a long banner shows its
first lines with More to read the rest (and all of it on hover), and the chat's buttons stand
in two columns; a large window shows everything as before."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.ui.chat_panel import COMPACT_HEIGHT, ChatPanel

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

LONG = (
    "<b>Drafting paused at step 2 (cost)</b>: a draft pass costs 25 % of a target pass and "
    "drafting steps ran at 0.90× the target-only speed, so it cannot pay at this agreement "
    "(87.5 %). The target answers alone; the draft is probed again in 64 tokens. " * 2
)


def _panel(qtbot, height: int) -> ChatPanel:  # noqa: ANN001
    panel = ChatPanel("colour", True)
    qtbot.addWidget(panel)
    panel.resize(600, height)
    panel.show()
    qtbot.waitExposed(panel)
    panel.guard_banner.show_text(LONG)
    QApplication.processEvents()
    return panel


def test_a_long_banner_shows_its_first_lines_in_a_small_window_and_more_shows_all(qtbot) -> None:  # noqa: ANN001
    panel = _panel(qtbot, COMPACT_HEIGHT - 100)
    banner = panel.guard_banner
    lines = banner.label.height() / banner.label.fontMetrics().lineSpacing()
    assert banner.cut and lines <= 2.2
    assert banner.label.toolTip() == LONG  # all of it on hover
    assert not banner.more.isHidden() and banner.more.text() == "More"
    banner.more.click()
    assert not banner.cut and banner.more.text() == "Less"
    spacing = banner.label.fontMetrics().lineSpacing()
    qtbot.waitUntil(lambda: banner.label.height() > 2.5 * spacing, timeout=2_000)


def test_the_buttons_stand_in_two_columns_in_a_small_window(qtbot) -> None:  # noqa: ANN001
    panel = _panel(qtbot, COMPACT_HEIGHT - 100)
    assert panel.send.y() == panel.regenerate.y() and panel.send.x() < panel.regenerate.x()
    panel.resize(600, COMPACT_HEIGHT + 300)
    QApplication.processEvents()
    assert panel.send.x() == panel.regenerate.x() and panel.send.y() < panel.regenerate.y()


def test_a_large_window_shows_the_whole_banner(qtbot) -> None:  # noqa: ANN001
    panel = _panel(qtbot, COMPACT_HEIGHT + 300)
    banner = panel.guard_banner
    assert not banner.cut and banner.more.isHidden() and banner.label.toolTip() == ""


def test_a_short_charts_value_axis_labels_ticks_far_enough_apart_not_to_overlap(qtbot) -> None:  # noqa: ANN001
    from app.ui.charts import MIN_TICK_PX, ChartsPanel

    charts = ChartsPanel()
    qtbot.addWidget(charts)
    axis = charts.plots["acceptance"].getAxis("left")
    for low, high, size in ((0.0, 1.05, 50.0), (0.0, 60.0, 40.0), (0.0, 16.0, 30.0)):
        major = axis.tickSpacing(low, high, size)[0][0]
        assert major * size / (high - low) >= MIN_TICK_PX
    tall = axis.tickSpacing(0.0, 1.05, 400.0)[0][0]
    assert tall <= 0.25  # a tall plot keeps its finer labels
    charts.stop()
