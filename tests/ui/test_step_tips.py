"""Hovering a step in the per-step charts names the drafter that drafted it: the engine's
step events carry it (lookups first, then a DFlash head, on the tiny synthetic pair), and
the acceptance and draft-length charts' tooltips say it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF
from PySide6.QtGui import QHelpEvent, QPainter
from PySide6.QtWidgets import QApplication, QToolTip

from app.devtools.test_models.synthetic_dflash import write_dflash_target, write_tiny_dflash
from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.engine import Engine
from app.engine.events import StepEvent
from app.ui.charts import ChartsPanel
from app.ui.step_tips import step_near, step_tip
from app.workers.messages import EventBatch
from tests.cores import THREADS

PROMPT = (1, 300, 310, 320, 330, 301) * 3


def _steps(drafters: list[str]) -> tuple[StepEvent, ...]:
    return tuple(
        StepEvent(i, 4, i % 5, 1.0, 5.0, 0.0, 4, 0.5, 0.3, drafter=d)
        for i, d in enumerate(drafters)
    )


def _panel(qtbot, steps: tuple[StepEvent, ...]) -> ChartsPanel:  # type: ignore[no-untyped-def]
    panel = ChartsPanel()
    qtbot.addWidget(panel)
    panel.resize(520, 820)
    panel.show()
    qtbot.waitExposed(panel)
    panel.ingest(EventBatch(1, "speculative", steps, 1.0, len(steps)))
    panel._redraw()
    while panel._dirty:  # one plot's ranges grow per redraw
        panel._redraw()
    panel.stop()
    QApplication.processEvents()
    return panel


def _point(panel: ChartsPanel, plot_name: str, step: float, y: float) -> QPoint:
    plot = panel.plots[plot_name]
    scene = plot.plotItem.vb.mapViewToScene(QPointF(step, y))
    return plot.mapFromScene(scene)


def _hover(panel: ChartsPanel, plot_name: str, at: QPoint) -> str:
    viewport = panel.plots[plot_name].viewport()
    QApplication.sendEvent(viewport, QHelpEvent(QEvent.Type.ToolTip, at, viewport.mapToGlobal(at)))
    return QToolTip.text()


@pytest.fixture
def hide_tips():  # type: ignore[no-untyped-def]
    yield
    QToolTip.hideText()
    QApplication.processEvents()


def test_the_words_and_the_nearest_step() -> None:
    steps = _steps(["n-gram", "DFlash", "DFlash"])
    assert step_tip(steps[1]) == "Step 1, drafted by DFlash: 4 tokens, 1 accepted (25%)"
    assert step_near(steps, 0.4, 0.5) is steps[0]
    assert step_near(steps, 1.6, 0.5) is steps[2]
    assert step_near(steps, 3.2, 0.5) is None  # past the last step
    assert step_near((), 1.0, 0.5) is None


def test_hovering_a_step_names_its_drafter(qtbot, hide_tips) -> None:  # type: ignore[no-untyped-def]
    steps = _steps(["n-gram", "DFlash", "DFlash", "n-gram", "DFlash", "n-gram"])
    panel = _panel(qtbot, steps)
    for name in ("acceptance", "draft_length"):
        for event in steps:
            y = event.accepted / 4 if name == "acceptance" else float(event.drafted)
            text = _hover(panel, name, _point(panel, name, event.step, y))
            assert text.startswith(f"Step {event.step}, drafted by {event.drafter}:"), text
    # away from every step (far past the last one) the plot keeps its own tooltip
    tips = panel.step_tips[0]
    assert tips.text_at(_point(panel, "acceptance", 9.0, 0.5)) is None
    assert tips.text_at(QPoint(1, 1)) is None  # outside the data area


def test_a_dflash_answer_with_lookups_first_names_both_in_the_tooltips(
    qtbot, hide_tips, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    target = write_dflash_target(tmp_path / "target.gguf")
    head = write_tiny_dflash(tmp_path / "dflash.gguf", target, variant="dflash")
    engine = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
        ModelSpec(str(head), n_ctx=1024, n_threads=THREADS),
    )
    try:
        request = GenerationRequest(PROMPT, max_tokens=200, spec=SpecConfig(), ignore_eos=True)
        events = tuple(engine.generate(request))
    finally:
        engine.close()
    steps = tuple(e for e in events if isinstance(e, StepEvent))
    assert {s.drafter for s in steps} == {"n-gram", "DFlash"}
    panel = _panel(qtbot, steps)
    for drafter in ("n-gram", "DFlash"):
        event = next(s for s in steps if s.drafter == drafter)
        at = _point(panel, "draft_length", event.step, float(event.drafted))
        assert _hover(panel, "draft_length", at).startswith(
            f"Step {event.step}, drafted by {drafter}:"
        )
    shots = os.environ.get("SPECDECK_SCREENSHOTS")
    if shots:  # the panel with the tooltip drawn where it shows
        image = panel.grab().toImage()
        tip = next(w for w in QApplication.topLevelWidgets() if w.inherits("QTipLabel"))
        painter = QPainter(image)
        painter.drawPixmap(panel.mapFromGlobal(tip.pos()), tip.grab())
        painter.end()
        image.save(str(Path(shots) / "chart_step_tooltip.png"))
