"""Live charts of one answer (pyqtgraph), redrawn at about 20 Hz from fixed-size buffers.

Acceptance (drafted tokens accepted ÷ drafted, the one figure the window, the status bar and
the exports use) per verification step and for the run so far; the collapse guard's recent
agreement with its break-even line; tokens/sec over time for the speculative and the
baseline run; a histogram of accepted lengths; the draft length chosen for each step. Lines
break where no step drafted (speculation paused); hovering a step in the per-step charts names
its drafter. Every chart exports as a PNG at least 1200 px wide; the run statistics export as
CSV or JSON.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QByteArray, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QImage, QImageWriter, QPainter, QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.events import GuardEvent, RunSummary, StepEvent
from app.models.guard_words import message
from app.ui.palette import BASE_PEN, OKABE_ITO, SPEC_PEN
from app.ui.stats_export import AnswerStats, to_csv, to_json, with_suffix
from app.ui.step_tips import StepTips
from app.ui.theme import CHART
from app.workers.messages import EventBatch

REDRAW_MS = 50
INITIAL_LIMITS = {"acceptance": (10.0, 1.05), "tok_s": (10.0, 1.0), "draft_length": (10.0, 10.0)}
EXPORT_WIDTH = 1600  # px: charts are exported for reports, not at their on-screen size
MIN_PLOT_HEIGHT = 80
LEGEND_MIN_HEIGHT = 200  # px: shorter plots keep their keys in the tooltip
CAPACITY = 4096
MAX_LEN = 64


class Ring:
    """Fixed-size buffer of the last ``capacity`` samples of ``width`` columns."""

    def __init__(self, capacity: int = CAPACITY, width: int = 2) -> None:
        self.data = np.zeros((capacity, width), dtype=np.float64)
        self.count = 0

    def append(self, *values: float) -> None:
        self.data[self.count % len(self.data)] = values
        self.count += 1

    def view(self) -> np.ndarray:
        n = len(self.data)
        if self.count <= n:
            return self.data[: self.count]
        start = self.count % n
        return np.concatenate((self.data[start:], self.data[:start]))

    def clear(self) -> None:
        self.count = 0


MIN_TICK_PX = 16  # px between labelled ticks on the value axis: a label is ~12 px, none overlap


NICE_STEPS = (1.0, 2.0, 2.5, 4.0, 5.0)  # × 10^k: tick steps a value axis may take
LABEL_HALF_PX = 6  # px: half a label's height; a tick nearer an end has its label dropped


def _coarser(step: float) -> float:
    """The next step of the ``NICE_STEPS`` series after ``step``."""
    power = 10.0 ** math.floor(math.log10(step))
    for factor in (*NICE_STEPS[1:], 10.0):
        if factor * power > step * (1 + 1e-9):
            return factor * power
    return 20.0 * power


def _labelled_inside(step: float, low: float, high: float, margin: float) -> bool:
    """Whether a multiple of ``step`` lies ``margin`` or more inside both ends of the axis."""
    first = math.ceil((low + margin) / step) * step
    return first <= high - margin


def spaced_major(start: float, low: float, high: float, size: float) -> float:
    """The finest step from ``start`` on whose ticks stand ``MIN_TICK_PX`` apart and one of
    which is labelled inside the axis. At 1024x640 a plot is ~35 px tall: 0..1.05 in steps of
    1.0 put ticks at its two ends only, where pyqtgraph drops their labels, so the axis had
    none; 0.5 labels its middle."""
    span = high - low
    margin = LABEL_HALF_PX * span / size
    step, spaced = start, None
    for _ in range(12):  # a few decades at most
        if step * size / span >= MIN_TICK_PX:
            spaced = spaced or step
            if _labelled_inside(step, low, high, margin):
                return step
        step = _coarser(step)
    return spaced or step


class _SparseAxis(pg.AxisItem):
    """A value axis whose major ticks stand at least ``MIN_TICK_PX`` apart, however short
    the plot, with one labelled inside it where any fits (the minor ones are drawn
    unlabelled: ``maxTextLevel=0``)."""

    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803
        levels = super().tickSpacing(minVal, maxVal, size)
        span = abs(maxVal - minVal)
        if not levels or span == 0 or size <= 0:
            return levels
        low, high = min(minVal, maxVal), max(minVal, maxVal)
        major = spaced_major(levels[0][0], low, high, size)
        finer = [level for level in levels[1:] if level[0] < major]
        return [(major, 0.0), *finer[:1]]


def _plot(title: str, left: str, bottom: str) -> pg.PlotWidget:
    axis = _SparseAxis(orientation="left")
    axis.setStyle(maxTextLevel=0)
    widget = pg.PlotWidget(axisItems={"left": axis})
    widget.setTitle(title, size="10pt")
    widget.setLabel("left", left)
    widget.setLabel("bottom", bottom)
    widget.showGrid(x=False, y=True, alpha=0.2)
    widget.setMinimumHeight(MIN_PLOT_HEIGHT)
    widget.setMenuEnabled(False)
    for name in ("left", "bottom", "top", "right"):
        # axes (with their grid lines) are re-rendered only when a range changes
        widget.getAxis(name).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    widget.disableAutoRange()  # ranges grow in steps (see _grow), so axes rarely re-layout
    widget.setXRange(0, 10, padding=0)
    widget.setYRange(0, 1.05, padding=0)
    return widget


def _legend_below(plot: pg.PlotWidget, *curves: pg.PlotDataItem) -> pg.LegendItem:
    """A legend under the plot's axis (two keys a row), so it never covers the data."""
    legend = pg.LegendItem(colCount=min(len(curves), 2), labelTextSize="8pt")
    plot.plotItem.layout.addItem(legend, 4, 1)
    for curve in curves:
        legend.addItem(curve, curve.name())
    return legend


def break_even_words(break_even: float | None) -> str:
    """The legend's break-even: a figure only once the step costs measured one."""
    return "break-even —" if break_even is None else f"break-even {break_even * 100:.1f} %"


def _keys(legend: pg.LegendItem) -> str:
    return " · ".join(label.text for _sample, label in legend.items)


def gaps_broken(x: np.ndarray) -> np.ndarray:
    """pyqtgraph ``connect`` array: join consecutive steps only, so paused stretches stay empty."""
    if len(x) < 2:
        return np.ones(len(x), dtype=bool)
    return np.append(np.diff(x) <= 1.0, True)


def _grow(limit: float, current: float = 10.0) -> float:
    """``current``, or the next "nice" axis limit (1, 2, 5 × 10^k) when ``limit`` exceeds it."""
    if limit <= current:
        return current
    nice = 1.0
    while nice < limit:
        for factor in (2.0, 2.5, 2.0):
            nice *= factor
            if nice >= limit:
                break
    return nice


def _grow_fine(limit: float, current: float = 1.0) -> float:
    """Like ``_grow`` with finer steps (1, 1.5, 2, 3, 4, 5, 6, 8 × 10^k)."""
    if limit <= current:
        return current
    scale = 10.0 ** math.floor(math.log10(limit))
    for step in (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        if step * scale >= limit:
            return step * scale
    return 10.0 * scale


class ChartsPanel(QWidget):
    exported = Signal(str)  # path of a written file

    def __init__(self, parent: QWidget | None = None) -> None:
        pg.setConfigOptions(background="w", foreground="#333333", antialias=False)
        super().__init__(parent)
        self.stats = AnswerStats()
        self.acceptance = Ring(width=4)  # step, accepted/drafted, run so far, guard agreement
        self._accepted = 0
        self._drafted = 0
        self.draft_len = Ring(width=2)  # step, drafted
        self.speed = {"speculative": Ring(width=2), "baseline": Ring(width=2)}
        self.hist = np.zeros(MAX_LEN + 1)
        self.break_even: float | None = None
        self.samples = 0  # data points received, for tests and the status bar
        self._dirty: set[str] = set()
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_MS)
        self._timer.timeout.connect(self._tick)

        self.accept_plot = _plot("Acceptance (accepted ÷ drafted)", "acceptance", "step")
        self.accept_plot.setYRange(0, 1.05)
        self.accept_dots = self.accept_plot.plot(
            pen=None,
            symbol="o",
            symbolSize=5,
            symbolBrush=SPEC_PEN,
            symbolPen=None,
            name="per step",
        )
        self.accept_mean = self.accept_plot.plot(  # small marks: a lone step still shows
            pen=pg.mkPen(OKABE_ITO["blue"], width=2),
            symbol="s",
            symbolSize=3,
            symbolBrush=OKABE_ITO["blue"],
            symbolPen=None,
            name="run so far",
        )
        self.agreement = self.accept_plot.plot(
            pen=pg.mkPen(OKABE_ITO["vermillion"], width=1, style=pg.QtCore.Qt.PenStyle.DotLine),
            name="guard agreement",
        )
        break_pen = pg.mkPen(
            OKABE_ITO["vermillion"], width=1.5, style=pg.QtCore.Qt.PenStyle.DashLine
        )
        self.break_line = pg.InfiniteLine(angle=0, pen=break_pen)
        self.break_line.setVisible(False)
        self.accept_plot.addItem(self.break_line)
        # the break-even figure is named in the legend, so no label ever sits on the data
        self.break_key = self.accept_plot.plot(pen=break_pen, name="break-even")
        self.legends = [
            _legend_below(
                self.accept_plot, self.accept_dots, self.accept_mean, self.agreement, self.break_key
            )
        ]

        self.speed_plot = _plot("Tokens/sec over time", "tok/s", "seconds into the run")
        self.speed_curves = {
            "speculative": self.speed_plot.plot(
                pen=pg.mkPen(SPEC_PEN, width=2), name="speculative"
            ),
            "baseline": self.speed_plot.plot(
                pen=pg.mkPen(BASE_PEN, width=2, style=pg.QtCore.Qt.PenStyle.DashLine),
                name="baseline",
            ),
        }
        self.legends.append(_legend_below(self.speed_plot, *self.speed_curves.values()))
        self._legend_shown = [True, True]

        self.hist_plot = _plot("Accepted length per step", "steps", "draft tokens accepted")
        self.hist_bars = pg.BarGraphItem(
            x=np.arange(MAX_LEN + 1), height=self.hist, width=0.8, brush=OKABE_ITO["sky_blue"]
        )
        self.hist_plot.addItem(self.hist_bars)
        self.hist_plot.setXRange(-0.5, 8.5, padding=0)
        self._limits: dict[str, tuple[float, float]] = {}
        self._grew_this_tick = False

        self.len_plot = _plot("Draft length", "tokens drafted", "step")
        self.len_curve = self.len_plot.plot(
            pen=pg.mkPen(OKABE_ITO["orange"], width=2),
            symbol="s",
            symbolSize=3,
            symbolBrush=OKABE_ITO["orange"],
            symbolPen=None,
        )

        self.setMinimumWidth(200)  # narrower plots say nothing: hide the dock instead
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.plots = {
            "acceptance": self.accept_plot,
            "tok_s": self.speed_plot,
            "accepted_lengths": self.hist_plot,
            "draft_length": self.len_plot,
        }
        short = {
            "acceptance": "Acceptance chart",
            "tok_s": "Tokens/sec chart",
            "accepted_lengths": "Accepted lengths chart",
            "draft_length": "Draft length chart",
        }
        export_menu = QMenu(self)
        for name, plot in self.plots.items():
            layout.addWidget(plot, 1)
            action = export_menu.addAction(f"{short[name]} as PNG…")
            action.triggered.connect(lambda _=False, n=name: self._export_png_dialog(n))
        export_menu.addSeparator()
        for label, suffix in (("Statistics as CSV…", "csv"), ("Statistics as JSON…", "json")):
            action = export_menu.addAction(label)
            action.triggered.connect(lambda _=False, s=suffix: self._export_stats_dialog(s))
        self.export_button = QPushButton("Export…")
        self.export_button.setObjectName("chartsExport")
        self.export_button.setToolTip("Save a chart as a PNG image, or the run statistics")
        self.export_button.setMenu(export_menu)
        # a remote server reports no steps: its answers chart tokens/sec alone, and say so
        self.remote_note = QLabel(
            "A remote server reports no per-step figures: only tokens/sec is charted."
        )
        self.remote_note.setObjectName("chartsRemoteNote")
        self.remote_note.setWordWrap(True)
        self.remote_note.setTextFormat(Qt.TextFormat.PlainText)
        self.remote_note.hide()
        layout.insertWidget(0, self.remote_note)
        export_row = QHBoxLayout()
        export_row.addWidget(self.export_button)
        export_row.addStretch(1)
        layout.addLayout(export_row)
        # the per-step charts name the drafter of the step under the pointer
        self.step_tips = [
            StepTips(plot, lambda: self.stats.steps) for plot in (self.accept_plot, self.len_plot)
        ]
        self.reset()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.place_legends()

    def place_legends(self) -> None:
        """Legends under short plots would leave no room for the data: there the keys move
        into the plot's tooltip instead."""
        for index, plot in enumerate((self.accept_plot, self.speed_plot)):
            legend = self.legends[index]
            wanted = plot.height() >= LEGEND_MIN_HEIGHT
            if wanted == self._legend_shown[index]:
                continue
            self._legend_shown[index] = wanted
            layout = plot.plotItem.layout
            if wanted:
                layout.addItem(legend, 4, 1)
                legend.show()
            else:
                layout.removeItem(legend)
                legend.hide()
            plot.setToolTip("" if wanted else _keys(legend))

    def set_dark(self, dark: bool) -> None:
        background, foreground = CHART[dark]
        for plot in self.plots.values():
            plot.setBackground(background)
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                axis.setPen(foreground)
                axis.setTextPen(foreground)
            item = plot.plotItem
            item.titleLabel.setText(item.titleLabel.text, color=foreground)
        for legend in self.legends:
            legend.setLabelTextColor(foreground)
            for _sample, label in legend.items:
                label.setText(label.text, color=foreground)

    # --- data ----------------------------------------------------------------------------

    def reset(self) -> None:
        self.stats.clear()
        self.acceptance.clear()
        self._accepted = self._drafted = 0
        self.draft_len.clear()
        for ring in self.speed.values():
            ring.clear()
        self.hist[:] = 0
        self.break_even = None
        self.samples = 0
        self._limits.clear()
        for name, limits in INITIAL_LIMITS.items():  # set while nothing streams yet
            self._limits[name] = limits
            self.plots[name].setXRange(0, limits[0], padding=0.02)
            self.plots[name].setYRange(0, limits[1], padding=0.02)
        self._dirty = set(self.plots)
        self._redraw()

    def set_remote(self, remote: bool) -> None:
        """Answers from a remote server have no steps: their per-step charts are hidden."""
        for name in ("acceptance", "accepted_lengths", "draft_length"):
            self.plots[name].setVisible(not remote)
        self.remote_note.setVisible(remote)

    def set_verdict(self, text: str) -> None:
        """The verdict exported with the answer's statistics."""
        self.stats.verdict = text

    def ingest(self, batch: EventBatch) -> None:
        if batch.tokens and batch.elapsed_s > 0:
            self.speed[batch.run].append(batch.elapsed_s, batch.tokens / batch.elapsed_s)
            self.samples += 1
            self._dirty.add("tok_s")
        for event in batch.events:
            if isinstance(event, StepEvent) and batch.run == "speculative":
                self._step(event)
            elif isinstance(event, RunSummary):
                self.stats.summaries[event.mode] = event
            elif isinstance(event, GuardEvent):
                self.stats.guard_messages.append(message(event, self.stats.drafting))
        if not self._timer.isActive():
            self._timer.start()

    def _step(self, event: StepEvent) -> None:
        self.stats.steps.append(event)
        rate = event.accepted / event.drafted if event.drafted else 0.0
        self._accepted += event.accepted
        self._drafted += event.drafted
        so_far = self._accepted / self._drafted if self._drafted else 0.0
        self.acceptance.append(event.step, rate, so_far, event.rolling_acceptance)
        self.draft_len.append(event.step, event.drafted)
        self.hist[min(event.accepted, MAX_LEN)] += 1
        if 0.0 < event.break_even <= 1.0:  # 0 is "not measured yet": the last one stands
            self.break_even = event.break_even
        self.samples += 1
        self._dirty.update(("acceptance", "accepted_lengths", "draft_length"))

    def _tick(self) -> None:
        if self._dirty:
            self._redraw()
        else:
            self._timer.stop()

    def stop(self) -> None:
        self._timer.stop()

    def settle(self) -> None:
        """Fit the time and step axes to the finished answer's data. While it streams they
        grow in steps (``_grow``) so that axes rarely re-layout, which leaves up to half of a
        plot empty (60 steps on a 0-100 axis, a 3 s answer on 0-10 s) once nothing more comes."""
        self._timer.stop()
        self._dirty = set(self.plots)
        for _ in self.plots:  # one plot re-ranges per redraw: let every one catch up
            self._redraw()
            if not self._dirty:
                break
        peak_t = max(
            (float(ring.view()[:, 0].max()) for ring in self.speed.values() if len(ring.view())),
            default=0.0,
        )
        steps = self.acceptance.view()
        lengths = self.draft_len.view()
        ends = {
            "acceptance": float(steps[-1, 0]) if len(steps) else 0.0,
            "tok_s": peak_t,
            "draft_length": float(lengths[-1, 0]) if len(lengths) else 0.0,
        }
        for name, end in ends.items():
            if end <= 0.0:
                continue  # nothing drawn: the empty axis keeps its first range
            self._limits[name] = (end, self._limits.get(name, INITIAL_LIMITS[name])[1])
            self.plots[name].setXRange(0, end, padding=0.02)

    def _fit(self, name: str, x_max: float, y_max: float | None = None) -> None:
        """Widen a plot's ranges only when the data outgrows them.

        Re-laying out an axis is the most expensive paint there is, so at most one plot
        changes its ranges per redraw; another one that needs to waits for the next tick.
        """
        x_limit, y_limit = self._limits.get(name, (10.0, 1.05))
        grow_y = _grow_fine if name == "tok_s" else _grow  # rates sit anywhere: fit them
        grown = (_grow(x_max, x_limit), grow_y(y_max, y_limit) if y_max is not None else y_limit)
        if grown != (x_limit, y_limit) or name not in self._limits:
            if self._grew_this_tick and name in self._limits:
                self._dirty.add(name)
                return
            self._grew_this_tick = True
            self._limits[name] = grown
            plot = self.plots[name]
            plot.setXRange(0, grown[0], padding=0.02)
            plot.setYRange(0, grown[1], padding=0.02)

    def _redraw(self) -> None:
        dirty, self._dirty = self._dirty, set()
        self._grew_this_tick = False
        if "acceptance" in dirty:
            acc = self.acceptance.view()
            connect = gaps_broken(acc[:, 0])
            self.accept_dots.setData(acc[:, 0], acc[:, 1], skipFiniteCheck=True)
            self.accept_mean.setData(acc[:, 0], acc[:, 2], connect=connect, skipFiniteCheck=True)
            self.agreement.setData(acc[:, 0], acc[:, 3], connect=connect, skipFiniteCheck=True)
            self._fit("acceptance", float(acc[-1, 0]) if len(acc) else 0.0)
            known = self.break_even is not None
            if self.break_even is not None:
                self.break_line.setValue(self.break_even)
            self.break_line.setVisible(known)
            label = self.legends[0].getLabel(self.break_key)
            if label is not None:  # unknown until the step costs are measured: no "0.0 %"
                label.setText(break_even_words(self.break_even))
            if not self._legend_shown[0]:
                self.accept_plot.setToolTip(_keys(self.legends[0]))
        if "tok_s" in dirty:
            peak_t, peak_v = 0.0, 0.0
            for run, ring in self.speed.items():
                data = ring.view()
                self.speed_curves[run].setData(data[:, 0], data[:, 1], skipFiniteCheck=True)
                if len(data):
                    peak_t = max(peak_t, float(data[:, 0].max()))
                    peak_v = max(peak_v, float(data[:, 1].max()))
            self._fit("tok_s", peak_t, peak_v * 1.1)  # headroom above the fastest stretch
        if "accepted_lengths" in dirty:
            used = max(int(np.max(np.nonzero(self.hist)[0])) + 2 if self.hist.any() else 9, 9)
            self.hist_bars.setOpts(x=np.arange(used), height=self.hist[:used])
            self.hist_plot.setXRange(-0.5, used - 0.5, padding=0)
            self.hist_plot.setYRange(0, _grow(float(self.hist.max()), 5.0), padding=0.02)
        if "draft_length" in dirty:
            lengths = self.draft_len.view()
            self.len_curve.setData(
                lengths[:, 0],
                lengths[:, 1],
                connect=gaps_broken(lengths[:, 0]),
                skipFiniteCheck=True,
            )
            top = float(lengths[:, 1].max()) if len(lengths) else 1.0
            self._fit("draft_length", float(lengths[-1, 0]) if len(lengths) else 0.0, top + 1)

    # --- export --------------------------------------------------------------------------

    def export_png(self, name: str, path: Path) -> Path:
        """Chart ``name`` as a PNG at ``path`` (".png" added to a name typed without one)."""
        path = with_suffix(path, ".png")
        self._dirty = set(self.plots)
        self._redraw()
        plot = self.plots[name]
        # rendered at EXPORT_WIDTH with the on-screen aspect ratio, not grabbed at screen size
        height = max(int(EXPORT_WIDTH * plot.height() / max(plot.width(), 1)), EXPORT_WIDTH // 2)
        image = QImage(EXPORT_WIDTH, height, QImage.Format.Format_ARGB32)
        image.fill(QColor("white"))
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        plot.scene().render(painter, QRectF(image.rect()), plot.plotItem.sceneBoundingRect())
        painter.end()
        writer = QImageWriter(str(path), QByteArray(b"png"))  # PNG whatever the name's suffix
        if not writer.write(image):
            raise OSError(f"could not write {path}")
        self.exported.emit(str(path))
        return path

    def export_stats(self, path: Path) -> Path:
        text = to_csv(self.stats) if path.suffix.lower() == ".csv" else to_json(self.stats)
        path.write_text(text, encoding="utf-8")
        self.exported.emit(str(path))
        return path

    def _export_png_dialog(self, name: str) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export chart", f"specdeck-{name}.png", "PNG image (*.png)"
        )
        if path:
            self.export_png(name, Path(path))

    def _export_stats_dialog(self, suffix: str) -> None:
        kinds = {"csv": "CSV (*.csv)", "json": "JSON (*.json)"}
        path, _ = QFileDialog.getSaveFileName(
            self, "Export run statistics", f"specdeck-run.{suffix}", kinds[suffix]
        )
        if path:
            self.export_stats(with_suffix(Path(path), f".{suffix}"))
