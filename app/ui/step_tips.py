"""The hover text of one step in the per-step charts: which drafter drafted it (the source
the bench rows and the run figures name: "n-gram", "DFlash", "draft model", …) and what the
target kept of it."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPoint
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QToolTip

from app.engine.events import StepEvent

NEAR_PX = 8  # px: how far from a step's column the pointer may rest and still name it


def step_tip(event: StepEvent) -> str:
    """ "Step 12, drafted by DFlash: 4 tokens, 3 accepted (75 %)"."""
    who = event.drafter or "the draft"
    tokens = f"{event.drafted} token{'s' * (event.drafted != 1)}"
    share = f" ({event.accepted / event.drafted:.0%})" if event.drafted else ""
    return f"Step {event.step}, drafted by {who}: {tokens}, {event.accepted} accepted{share}"


def step_near(steps: Sequence[StepEvent], x: float, reach: float) -> StepEvent | None:
    """The step whose number is nearest ``x`` and within ``reach`` of it (steps in order)."""
    at = bisect_left(steps, x, key=lambda s: s.step)
    candidates = [steps[i] for i in (at - 1, at) if 0 <= i < len(steps)]
    if not candidates:
        return None
    nearest = min(candidates, key=lambda s: abs(s.step - x))
    return nearest if abs(nearest.step - x) <= reach else None


class StepTips(QObject):
    """Names the step under the pointer in ``plot``'s tooltip (x is the step number),
    above the plot's own tooltip (its keys, while its legend is hidden)."""

    def __init__(self, plot: pg.PlotWidget, steps: Callable[[], Sequence[StepEvent]]) -> None:
        super().__init__(plot)
        self.plot = plot
        self.steps = steps
        plot.viewport().installEventFilter(self)

    def text_at(self, pos: QPoint) -> str | None:
        """The tooltip for the viewport position ``pos``; None away from every step."""
        view = self.plot.plotItem.vb
        scene = self.plot.mapToScene(pos)
        if not view.sceneBoundingRect().contains(scene):
            return None
        x = view.mapSceneToView(scene).x()
        units_per_px = view.viewPixelSize()[0]
        step = step_near(self.steps(), x, max(0.5, NEAR_PX * units_per_px))
        return step_tip(step) if step is not None else None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() != QEvent.Type.ToolTip or not isinstance(event, QHelpEvent):
            return False
        text = self.text_at(event.pos())
        if text is None:
            return False  # the plot's own tooltip, if it has one
        keys = self.plot.toolTip()
        QToolTip.showText(
            event.globalPos(), f"{text}\n\n{keys}" if keys else text, self.plot.viewport()
        )
        return True
