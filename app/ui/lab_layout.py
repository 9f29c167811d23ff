"""The Lab tab's rows, laid out to fit its dock's width.

A row of five buttons, "repeats … max tokens" and "best configuration ≥ … on …" side by side
made the tab wider than a side dock at 1024 and at 1920 px: the dock scrolled sideways and cut
the verdict. Here the form's fields go under their labels where they do not fit beside them,
pairs of fields stand in two rows, the buttons two to a row, and the plot scrolls sideways
inside its own frame (its category names stay whole and apart).
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLayout,
    QListWidget,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

BUTTONS_PER_ROW = 2  # three of ~95 px each made the tab wider than a 300 px dock
PLOT_MIN_WIDTH = 160  # px the plot's frame asks; the plot scrolls inside it when narrower


class LabControls(Protocol):
    """The tab's controls, as the tab holds them (read-only: each may be a subclass)."""

    @property
    def target(self) -> QWidget: ...
    @property
    def browse_button(self) -> QPushButton: ...
    @property
    def suites(self) -> QListWidget: ...
    @property
    def my_chats(self) -> QCheckBox: ...
    @property
    def add_suite_button(self) -> QPushButton: ...
    @property
    def configs(self) -> QPlainTextEdit: ...
    @property
    def repeats(self) -> QWidget: ...
    @property
    def max_tokens(self) -> QWidget: ...
    @property
    def claim_speedup(self) -> QWidget: ...
    @property
    def claim_category(self) -> QWidget: ...
    @property
    def run_button(self) -> QPushButton: ...
    @property
    def cancel_button(self) -> QPushButton: ...
    @property
    def resume_button(self) -> QPushButton: ...
    @property
    def open_button(self) -> QPushButton: ...
    @property
    def export_button(self) -> QPushButton: ...
    @property
    def runs_note(self) -> QLabel: ...
    @property
    def progress(self) -> QProgressBar: ...
    @property
    def eta(self) -> QLabel: ...
    @property
    def message(self) -> QLabel: ...
    @property
    def verdict(self) -> QLabel: ...
    @property
    def plot(self) -> QWidget: ...
    @property
    def recommendation(self) -> QComboBox: ...
    @property
    def apply_button(self) -> QPushButton: ...
    @property
    def apply_note(self) -> QLabel: ...
    @property
    def table(self) -> QTableWidget: ...


def plot_frame(plot: QWidget) -> QScrollArea:
    """The plot in a frame of its own that scrolls sideways when the dock is narrower than
    the plot's category names."""
    frame = QScrollArea()
    frame.setObjectName("labPlotScroll")
    frame.setFrameShape(QFrame.Shape.NoFrame)
    frame.setWidgetResizable(True)
    frame.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    frame.setWidget(plot)
    frame.setMinimumWidth(PLOT_MIN_WIDTH)
    bar = frame.horizontalScrollBar().sizeHint().height()
    frame.setMinimumHeight(plot.minimumHeight() + bar)
    return frame


def _pairs(pairs: tuple[tuple[str, QWidget], ...]) -> QGridLayout:
    """A label and its field per row: side by side they set a width no dock has."""
    grid = QGridLayout()
    for row, (words, widget) in enumerate(pairs):
        grid.addWidget(QLabel(words), row, 0)
        grid.addWidget(widget, row, 1)
    grid.setColumnStretch(1, 1)
    return grid


def _stacked(*items: QWidget | QLayout) -> QVBoxLayout:
    box = QVBoxLayout()
    for item in items:
        if isinstance(item, QLayout):
            box.addLayout(item)
        else:
            box.addWidget(item)
    return box


def lay_out(owner: QWidget, rows: LabControls, recommended_text: str) -> QScrollArea:
    """Lay the tab's controls (``rows``, usually ``owner`` itself) out on ``owner``; returns
    the plot's frame."""
    form = QFormLayout()
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    target_row = QHBoxLayout()
    target_row.addWidget(rows.target, 1)
    target_row.addWidget(rows.browse_button)
    form.addRow("Target", target_row)
    extras = QHBoxLayout()
    extras.addWidget(rows.add_suite_button)
    extras.addStretch(1)
    form.addRow("Suites", _stacked(rows.suites, rows.my_chats, extras))
    form.addRow("Configurations", rows.configs)
    form.addRow("Runs", _pairs((("repeats", rows.repeats), ("max tokens", rows.max_tokens))))
    claim = (("best configuration ≥", rows.claim_speedup), ("on", rows.claim_category))
    form.addRow("Claim", _pairs(claim))
    buttons = QGridLayout()
    order = (rows.run_button, rows.cancel_button, rows.resume_button, rows.open_button)
    for index, button in enumerate((*order, rows.export_button)):
        buttons.addWidget(button, index // BUTTONS_PER_ROW, index % BUTTONS_PER_ROW)
    status = QHBoxLayout()
    status.addWidget(rows.progress, 1)
    status.addWidget(rows.eta)
    recommended = QLabel(recommended_text)
    recommended.setWordWrap(True)
    rows.recommendation.setSizeAdjustPolicy(
        QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
    )
    rows.recommendation.setMinimumContentsLength(12)  # its list shows each one whole
    apply_row = QHBoxLayout()
    apply_row.addWidget(rows.recommendation, 1)
    apply_row.addWidget(rows.apply_button)
    frame = plot_frame(rows.plot)
    column = QVBoxLayout(owner)
    # the dock has its own frame; 6 px leave a wrapped text its 48-character hint in a 300 px dock
    column.setContentsMargins(6, 6, 6, 6)
    column.addLayout(form)
    column.addWidget(rows.runs_note)
    column.addLayout(buttons)
    column.addLayout(status)
    column.addWidget(rows.message)
    column.addWidget(rows.verdict)
    column.addWidget(frame, 2)
    column.addWidget(recommended)
    column.addLayout(apply_row)
    column.addWidget(rows.apply_note)
    column.addWidget(rows.table, 1)
    return frame
