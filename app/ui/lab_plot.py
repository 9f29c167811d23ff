"""The Lab tab's plot: each configuration's speedups per category as a strip of points
with its interquartile box and median, against the 1× line and the claimed speedup."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.lab.colours import series_colour
from app.lab.plan import LabPlan
from app.lab.stats import Row


def draw_strips(plot: pg.PlotWidget, plan: LabPlan, rows: list[Row], configs: list[str]) -> None:
    plot.clear()
    categories = list(plan.categories)
    plot.addItem(pg.InfiniteLine(1.0, angle=0, pen=pg.mkPen("#555", width=1)))
    plot.addItem(
        pg.InfiniteLine(
            plan.claim.threshold, angle=0, pen=pg.mkPen("#555", style=Qt.PenStyle.DashLine)
        )
    )
    width = 0.8 / max(len(configs), 1)
    for k, config in enumerate(configs):
        colour = series_colour(k)
        xs, ys, boxes = [], [], []
        for c, category in enumerate(categories):
            values = [r.speedup for r in rows if r.config == config and r.category == category]
            if not values:
                continue
            centre = c - 0.4 + width * (k + 0.5)
            jitter = (
                np.linspace(-width * 0.3, width * 0.3, len(values))
                if len(values) > 1
                else np.zeros(1)
            )
            xs += list(centre + jitter)
            ys += values
            q1, median, q3 = np.percentile(values, [25, 50, 75])
            boxes.append((centre, q1, q3, median))
        if boxes:
            plot.addItem(
                pg.BarGraphItem(
                    x=[b[0] for b in boxes],
                    y0=[b[1] for b in boxes],
                    height=[max(b[2] - b[1], 1e-3) for b in boxes],
                    width=width * 0.8,
                    brush=pg.mkBrush(colour + "40"),
                    pen=pg.mkPen(colour),
                )
            )
            medians = np.array(
                [[b[0] - width * 0.4, b[3], b[0] + width * 0.4, b[3]] for b in boxes]
            ).reshape(-1, 2)
            plot.plot(medians[:, 0], medians[:, 1], connect="pairs", pen=pg.mkPen(colour, width=3))
        plot.addItem(
            pg.ScatterPlotItem(xs, ys, size=6, brush=pg.mkBrush(colour), pen=None, name=config)
        )
    plot.getAxis("bottom").setTicks([list(enumerate(categories))])
